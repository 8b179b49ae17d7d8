//! `status`: nodes with their health, space and links, and what is lost, bad, waiting or
//! unrepairable, the repairs and the rebalance under way.

use crate::coordinator::Coordinator;
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use kintsugi_proto::{ClusterStatus, NodeInfo};
use std::collections::HashMap;

impl Coordinator {
    /// What `status` shows, read without waiting for a long update ahead of it to be
    /// durable (a view, not a decision).
    pub(crate) fn status(&self) -> Result<ClusterStatus, WireError> {
        crate::metadata::peeking(|| self.status_now())
    }

    fn status_now(&self) -> Result<ClusterStatus, WireError> {
        let alive = self.alive();
        // Chunks per node: the stripes it holds a chunk of, from the placement counters.
        let chunks: HashMap<NodeId, u64> = self.meta.spread()?.into_iter().filter(|((a, b), _)| a == b).map(|((a, _), v)| (a, v)).collect();
        let counts = self.meta.counts()?;
        let nodes = self
            .meta
            .nodes()?
            .into_iter()
            .map(|n| {
                let (used, cap) = self.space.node(n.id).unwrap_or((0, 0));
                let fs = self.space.fs_of(n.id);
                let over =
                    |r: f64| (cap > 0 && used as f64 > r * cap as f64) || fs.as_ref().is_some_and(|f| f.used as f64 > r * f.size as f64);
                let link = self.links.lock().expect("links lock").get(&n.id).cloned();
                let residual = link.as_ref().and_then(crate::membership::bandwidth::residual_of);
                NodeInfo {
                    alive: alive.contains_key(&n.id) && !n.failed,
                    chunks: chunks.get(&n.id).copied().unwrap_or(0),
                    id: n.id,
                    addr: n.addr,
                    used_bytes: used,
                    capacity_bytes: cap,
                    nearfull: over(self.cfg.nearfull_ratio),
                    full: over(self.cfg.full_ratio),
                    link,
                    residual_up: residual.map(|r| r.0),
                    residual_down: residual.map(|r| r.1),
                    fs,
                }
            })
            .collect();
        let health = self.health_summary()?;
        Ok(ClusterStatus {
            protection: kintsugi_proto::auth::protection(),
            nodes,
            objects: counts.objects as usize,
            stripes: counts.stripes as usize,
            lost_chunks: health.bad + health.on_down_nodes,
            bad_chunks: health.bad,
            chunks_on_down_nodes: health.on_down_nodes,
            unrepairable: health.unrepairable,
            waiting: health.waiting,
            widest_code: self.code_widths.widest(),
            cannot_heal: self.heal_warning(),
            rebalance: self.rebalance_status.lock().expect("rebalance lock").clone(),
            pending_repairs: counts.pending as usize,
            repairing: self.repairing.try_lock().is_err(),
            last_auto_repair: self.last_auto.lock().expect("last auto lock").clone(),
            placement_groups: self.cfg.placement_groups,
            index_copies: self.cfg.index_copies,
            compaction: self.compaction.status(),
        })
    }
}
