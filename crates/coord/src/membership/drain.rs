//! `node remove` of a node that is up: every chunk it holds, Geo chunks included, is moved
//! elsewhere (a bad one rebuilt elsewhere) while it keeps serving; only then is it stopped
//! and forgotten. All or nothing: if any chunk cannot leave it, the node stays in the
//! cluster, running, and the error names every such chunk and why.

use crate::coordinator::{bad, Coordinator};
use crate::metadata::{Change, PendingRepair};
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, NodeRequest, RepairReport};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

impl Coordinator {
    pub(crate) async fn drain_node(self: &Arc<Self>, node: NodeId) -> Result<RepairReport, WireError> {
        // No automatic repair meanwhile: it would plan with the node's chunks as they move.
        let _one = self.repairing.lock().await;
        self.draining.lock().expect("draining lock").insert(node);
        let r = self.drain(node).await;
        self.draining.lock().expect("draining lock").remove(&node);
        r
    }

    async fn drain(self: &Arc<Self>, node: NodeId) -> Result<RepairReport, WireError> {
        // Open Geo stripes are sealed first: their chunks then move as sealed chunks.
        self.seal_due(true).await?;
        let started = Instant::now();
        let mine: Vec<(u64, usize)> = self.meta.node_chunks(node)?.iter().map(|c| (c.stripe, c.index)).collect();
        tracing::info!("node {node}: moving {} chunk(s) off it before it is removed", mine.len());
        let mut report = RepairReport { method: "move (node remove)".into(), lost: mine.len(), ..Default::default() };
        let sem = Arc::new(tokio::sync::Semaphore::new(self.cfg.repair_max_active.max(1)));
        let mut set = JoinSet::new();
        for (stripe, index) in mine {
            let (me, sem) = (self.clone(), sem.clone());
            set.spawn(async move {
                let _permit = sem.acquire_owned().await.expect("semaphore open");
                (ChunkId::new(stripe, index), me.move_off(node, stripe, index).await)
            });
        }
        let mut failures = Vec::new();
        while let Some(r) = set.join_next().await {
            match r.map_err(WireError::from)? {
                (_, Ok(Some(bytes))) => {
                    report.repaired += 1;
                    report.bytes += bytes;
                }
                (_, Ok(None)) => report.skipped += 1,
                (chunk, Err(e)) => failures.push(format!("{chunk}: {e}")),
            }
        }
        report.failed = failures.len();
        report.seconds = started.elapsed().as_secs_f64();
        // Anything still there (a put that committed onto it meanwhile) keeps it too.
        for c in self.meta.node_chunks(node)? {
            let chunk = ChunkId::new(c.stripe, c.index);
            if !failures.iter().any(|f| f.starts_with(chunk.as_str())) {
                failures.push(format!("{chunk}: placed on the node while it was being emptied"));
            }
        }
        if !failures.is_empty() {
            report.errors = failures.clone();
            return bad(format!(
                "node {node} was not removed: {} chunk(s) could not be moved off it ({} moved): {}. It keeps running and serving",
                failures.len(),
                report.repaired,
                failures.join("; ")
            ));
        }
        if let Some(rec) = self.meta.nodes()?.into_iter().find(|n| n.id == node) {
            self.removed.lock().expect("removed lock").insert(node, rec.token);
        }
        self.meta.apply(vec![Change::DeleteNode(node)])?;
        self.space.forget(node);
        self.links.lock().expect("links lock").remove(&node);
        self.link_history.forget(node);
        self.foreground_record.forget(node);
        let addr = self.live.lock().expect("live lock").remove(&node).map(|(a, _)| a);
        if let Some(addr) = addr {
            // Best effort: it holds nothing the cluster needs now.
            let _ = request(&addr, &NodeRequest::Shutdown, Duration::from_secs(2)).await;
        }
        tracing::info!("node {node} removed after {} chunk(s) were moved off it", report.repaired);
        Ok(report)
    }

    /// Moves chunk `index` of stripe `stripe` off `node`: copied when healthy, rebuilt
    /// elsewhere when bad. Ok(Some(bytes)) when it moved, Ok(None) when it no longer was
    /// there (deleted or moved meanwhile).
    async fn move_off(self: &Arc<Self>, node: NodeId, stripe: u64, index: usize) -> Result<Option<u64>, WireError> {
        let Some(s) = self.meta.stripe(stripe)? else { return Ok(None) };
        if s.nodes[index] != node {
            return Ok(None);
        }
        if s.crcs[index].is_none() {
            return bad("a put still writing it (try again once it is committed, or abandoned)");
        }
        if s.bad[index] {
            let p = PendingRepair { stripe, index, method: self.cfg.repair_shape(), slice: self.cfg.repair_slice };
            self.meta.apply(vec![Change::PutPending(p.clone())])?;
            return self.repair_one(&p, None, None, None).await.map(|_| Some(s.chunk_len));
        }
        let dest = self.spare_node(stripe, &s.nodes, s.chunk_len, &BTreeSet::new())?;
        if s.is_filler(index) {
            // Virtual zeros of a sealed Geo stripe's empty slot: stored nowhere, nothing to copy.
            self.meta.update(&mut |t| {
                let Some(mut now) = t.stripe(stripe)? else { return Ok(()) };
                if now.nodes[index] == node {
                    now.nodes[index] = dest;
                    t.put(Change::PutStripe(now))?;
                }
                Ok(())
            })?;
            return Ok(Some(0));
        }
        self.move_chunk(stripe, index, dest, self.cfg.repair_slice).await.map(|_| Some(s.chunk_len))
    }
}
