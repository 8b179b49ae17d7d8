//! Who is in the cluster: heartbeats and liveness, a node id bound to its data
//! directory's identity token, which nodes may take chunks, and taking nodes out (`fail`,
//! `node replace`, `node remove`).

pub mod bandwidth;
pub(crate) mod drain;
pub(crate) mod foreground_record;
pub(crate) mod inventory;
pub(crate) mod link_history;
pub(crate) mod space;

use crate::coordinator::{bad, Coordinator};
use crate::metadata::{Change, NodeRecord};
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, NodeRequest, RepairReport, READER};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a process with data directory token `token` may not be node `n` (None: it may).
fn identity_refused(n: &NodeRecord, token: &str) -> Option<String> {
    (!n.token.is_empty() && n.token != token).then(|| {
        format!(
            "node id {} belongs to another data directory (the one it joined with, last at {}); this process's is not it. \
             Give this process another id, or, if node {}'s disk was replaced, run `kintsugi node replace {}` first",
            n.id, n.addr, n.id, n.id
        )
    })
}

/// Whether a heartbeat's token is the one node `n` is bound to (a node from before tokens,
/// or one released by `node replace`, proves nothing).
fn proves_identity(n: &NodeRecord, token: &str) -> bool {
    !n.token.is_empty() && n.token == token
}

impl Coordinator {
    /// Nodes an operator failed (`fail`, a `node remove` of a node that was down).
    pub(crate) fn failed_nodes(&self) -> Result<BTreeSet<NodeId>, WireError> {
        Ok(self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect())
    }

    /// Records a heartbeat; says why the node should get a share of the data, if it should:
    /// it joined (never seen before), or it returned after being out so long that its
    /// chunks were due to be rebuilt elsewhere (it holds little but orphans now).
    pub(crate) fn heartbeat(&self, node: NodeId, addr: String, boot: u64, token: &str) -> Result<Option<String>, WireError> {
        if node == READER {
            return bad(format!("node id {READER} is reserved for readers"));
        }
        if self.removed.lock().expect("removed lock").get(&node).is_some_and(|t| !t.is_empty() && t == token) {
            return bad(format!("node {node} was removed from the cluster (node remove); its data directory does not join again"));
        }
        let known = self.meta.nodes()?.into_iter().find(|n| n.id == node);
        if let Some(refused) = known.as_ref().and_then(|n| identity_refused(n, token)) {
            return bad(refused);
        }
        if let Some(k) = &known {
            if k.failed && k.boot == boot {
                // A late heartbeat from the process that was failed: it stays failed.
                return Ok(None);
            }
        }
        if let Some(k) = &known {
            let live_elsewhere = self.alive().get(&node).is_some_and(|a| *a != addr);
            if !k.failed && k.boot != boot && live_elsewhere {
                if proves_identity(k, token) {
                    // The same data directory (a node locks its directory, so one process
                    // serves it at a time), restarted at a new address: it moved.
                    tracing::info!("node {node} restarted at {addr} (was {}): its address is updated", k.addr);
                } else {
                    // A process without the directory's token claims a node id that is live
                    // elsewhere: refused, so the id's address never flips between two processes.
                    return bad(format!("node id {node} is already live at {}; refusing the node at {addr}", k.addr));
                }
            }
        }
        if known.as_ref().is_none_or(|n| n.addr != addr || n.failed || n.boot != boot || n.token != token) {
            // Checked again where it is written: of two first joins at once, one binds.
            self.meta.update(&mut |t| {
                let now = t.node(node)?;
                if let Some(refused) = now.as_ref().and_then(|n| identity_refused(n, token)) {
                    return bad(refused);
                }
                if now.as_ref().is_none_or(|n| n.token.is_empty()) && !token.is_empty() {
                    tracing::info!("node id {node} is bound to the data directory of the node at {addr}");
                }
                t.put(Change::PutNode(NodeRecord { id: node, addr: addr.clone(), failed: false, boot, token: token.into() }))
            })?;
        }
        let out_for = self.silent_for(node);
        self.live.lock().expect("live lock").insert(node, (addr, Instant::now()));
        Ok(if known.is_none() {
            Some(format!("node {node} joined"))
        } else if out_for >= Duration::from_millis(self.cfg.down_out_ms) {
            Some(format!("node {node} returned after {:.0} s out: its chunks were due to be rebuilt elsewhere", out_for.as_secs_f64()))
        } else {
            None
        })
    }

    /// Refuses a process whose data directory is not the one node id `node` is bound to.
    pub(crate) fn check_identity(&self, node: NodeId, token: &str) -> Result<(), WireError> {
        match self.meta.nodes()?.into_iter().find(|n| n.id == node).and_then(|n| identity_refused(&n, token)) {
            Some(refused) => bad(refused),
            None => Ok(()),
        }
    }

    /// Whether node `n` can take `bytes` more and stay, with its file system, at or below
    /// `ratio` of its capacity (a node that has not reported its space yet is given the
    /// benefit of the doubt).
    pub(crate) fn has_room(&self, n: NodeId, bytes: u64, ratio: f64) -> bool {
        self.space.has_room(n, bytes, ratio)
    }

    /// Nodes a new or rebuilt chunk may go to: up, not failed, not being drained.
    pub(crate) fn placeable(&self) -> Result<BTreeMap<NodeId, String>, WireError> {
        let failed = self.failed_nodes()?;
        let draining = self.draining.lock().expect("draining lock").clone();
        Ok(self.alive().into_iter().filter(|(n, _)| !failed.contains(n) && !draining.contains(n)).collect())
    }

    pub(crate) fn alive(&self) -> BTreeMap<NodeId, String> {
        let dead_after = Duration::from_millis(self.cfg.dead_after_ms);
        self.live
            .lock()
            .expect("live lock")
            .iter()
            .filter(|(_, (_, t))| t.elapsed() < dead_after)
            .map(|(&n, (a, _))| (n, a.clone()))
            .collect()
    }

    pub(crate) fn addr_of(&self, node: NodeId) -> String {
        if let Some((a, _)) = self.live.lock().expect("live lock").get(&node) {
            return a.clone();
        }
        self.meta.nodes().ok().and_then(|ns| ns.into_iter().find(|n| n.id == node)).map_or(String::new(), |n| n.addr)
    }

    /// `node replace`: releases node id `node` from the data directory it is bound to, so
    /// that a new disk can join under it; its chunks, missing there, are then rebuilt onto
    /// it in place.
    pub(crate) fn replace_node(&self, node: NodeId) -> Result<(), WireError> {
        self.meta.update(&mut |t| {
            let n = t.node(node)?.ok_or_else(|| WireError::not_found(format!("no node {node}")))?;
            t.put(Change::PutNode(NodeRecord { token: String::new(), ..n }))
        })?;
        // Whoever runs under the id now must join again, with its own directory.
        self.live.lock().expect("live lock").remove(&node);
        tracing::warn!("node id {node} released from its data directory: the next node to join under it takes it");
        Ok(())
    }

    pub(crate) async fn fail_node(&self, node: NodeId) -> Result<(), WireError> {
        let rec = self.meta.nodes()?.into_iter().find(|n| n.id == node).ok_or_else(|| WireError::not_found(format!("no node {node}")))?;
        self.meta.apply(vec![Change::PutNode(NodeRecord { failed: true, ..rec.clone() })])?;
        self.live.lock().expect("live lock").remove(&node);
        // Best effort: the node may already be gone.
        let _ = request(&rec.addr, &NodeRequest::Shutdown, Duration::from_secs(2)).await;
        Ok(())
    }

    /// Takes a node out for good (`kintsugi node remove`): fails it, rebuilds its chunks
    /// elsewhere with the configured method and scheduler, and forgets it once no stripe
    /// names it. Refused, with the node left failed, while any chunk could not be moved.
    pub(crate) async fn remove_node(self: &Arc<Self>, node: NodeId) -> Result<RepairReport, WireError> {
        let Some(rec) = self.meta.nodes()?.into_iter().find(|n| n.id == node) else {
            return Err(WireError::not_found(format!("no node {node}")));
        };
        if !rec.failed && self.alive().contains_key(&node) {
            // Up: drained while it serves, and stopped only once nothing is left on it.
            return self.drain_node(node).await;
        }
        // Down: its chunks can only be rebuilt from the others.
        self.fail_node(node).await?;
        let c = &self.cfg;
        let report = self.repair(c.repair_ask(), c.repair_slice, c.repair_max_active.max(1), None).await?;
        let left: Vec<String> = self.meta.node_chunks(node)?.iter().map(|c| ChunkId::new(c.stripe, c.index).to_string()).collect();
        if !left.is_empty() {
            return bad(format!(
                "node {node} is down and still holds {} chunk(s) that could not be rebuilt elsewhere: {} ({}); it stays, failed",
                left.len(),
                left.join(", "),
                report.errors.join("; ")
            ));
        }
        self.removed.lock().expect("removed lock").insert(node, rec.token.clone());
        self.meta.apply(vec![Change::DeleteNode(node)])?;
        self.space.forget(node);
        self.links.lock().expect("links lock").remove(&node);
        self.link_history.forget(node);
        self.foreground_record.forget(node);
        tracing::info!("node {node} removed after {} chunk(s) were rebuilt elsewhere", report.repaired);
        Ok(report)
    }

    /// A node that stopped answering is dead until its next heartbeat: a slow node comes
    /// back by itself, unlike one stopped by `fail`.
    pub(crate) fn mark_dead(&self, node: NodeId) {
        self.live.lock().expect("live lock").remove(&node);
    }
}
