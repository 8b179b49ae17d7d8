//! A node's inventory received a page at a time and compared with what the metadata
//! expects: missing chunks reported lost, orphans deleted once they have stayed orphans for
//! `orphan_grace_ms`.

use crate::coordinator::Coordinator;
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, NodeRequest};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Coordinator {
    /// One page of node `node`'s inventory; the last page reconciles it.
    pub(crate) fn inventory(self: &Arc<Self>, node: NodeId, boot: u64, chunks: Vec<ChunkId>, last: bool) -> Result<(), WireError> {
        let (held, since) = {
            let mut pages = self.inventories.pages.lock().expect("inventory lock");
            let now = crate::clock::now_ms();
            let entry = pages.entry(node).or_insert((boot, Vec::new(), now));
            if entry.0 != boot {
                *entry = (boot, Vec::new(), now);
            }
            entry.1.extend(chunks);
            if !last {
                return Ok(());
            }
            pages.remove(&node).map(|(_, c, t)| (c, t)).unwrap_or_default()
        };
        self.reconcile(node, held.into_iter().collect(), since)
    }

    /// `listed_before`: when the first page arrived; the node listed its chunks before then.
    fn reconcile(self: &Arc<Self>, node: NodeId, held: BTreeSet<ChunkId>, listed_before: u64) -> Result<(), WireError> {
        if !self.alive().contains_key(&node) || self.meta.nodes()?.iter().any(|n| n.id == node && n.failed) {
            return Ok(());
        }
        // Staging copies and pieces exist only for open Geo stripes (sealing drops them).
        let open = self.meta.open_stripes(None)?;
        // Staging copies: (stripe, index, copy) -> node.
        let copies: HashMap<(u64, usize, usize), NodeId> = open
            .iter()
            .flat_map(|s| {
                s.replicas.iter().enumerate().flat_map(move |(i, c)| c.iter().enumerate().map(move |(j, &n)| ((s.id, i, j + 1), n)))
            })
            .collect();
        // Pieces of open small-size bucket stripes: (stripe, slot, offset, copy) -> node.
        let pieces: HashMap<(u64, usize, u64, usize), NodeId> = open
            .iter()
            .filter(|s| s.small)
            .flat_map(|s| {
                s.pieces.iter().enumerate().flat_map(move |(i, p)| {
                    let holders: Vec<NodeId> = std::iter::once(s.nodes[i]).chain(s.replicas[i].iter().copied()).collect();
                    p.iter().flat_map(move |p| holders.clone().into_iter().enumerate().map(move |(c, n)| ((s.id, i, p.offset, c), n)))
                })
            })
            .collect();
        // What the metadata places here, from the node's own index.
        let mine = self.meta.node_chunks(node)?;
        let placed: HashSet<(u64, usize)> = mine.iter().map(|c| (c.stripe, c.index)).collect();
        let mut strays: Vec<u64> = held.iter().filter_map(|c| c.parts()).filter(|k| !placed.contains(k)).map(|(s, _)| s).collect();
        strays.dedup();
        let garbage = self.meta.garbage_among(&strays)?;
        // Expected here, committed, not known bad, and missing: lost. A stripe whose chunks
        // moved shortly before the listing (a commit, a repair) may not be in it yet: it waits
        // for the next inventory.
        for c in &mine {
            if c.changed_ms + self.cfg.inventory_slack_ms > listed_before {
                continue;
            }
            if c.committed && !c.bad && !c.filler && !held.contains(&ChunkId::new(c.stripe, c.index)) {
                self.mark_bad(c.stripe, c.index, &format!("missing from node {node}'s inventory"))?;
            }
        }
        // Held here but referenced nowhere (garbage is the collector's): orphans.
        let grace = Duration::from_millis(self.cfg.orphan_grace_ms);
        let mut expired = Vec::new();
        {
            let mut orphans = self.inventories.orphans.lock().expect("orphans lock");
            orphans.retain(|(n, c), _| *n != node || held.contains(c));
            for c in &held {
                let referenced = c.parts().is_some_and(|(sid, i)| garbage.contains(&sid) || placed.contains(&(sid, i)))
                    || c.replica_parts().is_some_and(|key| copies.get(&key) == Some(&node))
                    || c.piece_parts().is_some_and(|key| pieces.get(&key) == Some(&node));
                if referenced {
                    orphans.remove(&(node, c.clone()));
                    continue;
                }
                let first = *orphans.entry((node, c.clone())).or_insert_with(Instant::now);
                if first.elapsed() >= grace {
                    expired.push(c.clone());
                }
            }
        }
        if !expired.is_empty() {
            let Some(addr) = self.alive().get(&node).cloned() else { return Ok(()) };
            let me = self.clone();
            tokio::spawn(async move {
                for c in expired {
                    tracing::info!("deleting orphan chunk {c} on node {node}");
                    if request(&addr, &NodeRequest::DeleteChunk { chunk: c.clone() }, Duration::from_secs(5)).await.is_ok() {
                        me.inventories.orphans.lock().expect("orphans lock").remove(&(node, c));
                    }
                }
            });
        }
        Ok(())
    }

    /// A node found its chunk corrupt or gone: lost, if it is the chunk's holder.
    pub(crate) fn report_chunk(&self, node: NodeId, chunk: &ChunkId, reason: &str) -> Result<(), WireError> {
        let Some((sid, i)) = chunk.parts() else { return Ok(()) };
        match self.meta.stripe(sid)? {
            Some(s) if s.nodes.get(i) == Some(&node) && s.crcs[i].is_some() && !s.is_filler(i) => {
                self.mark_bad(sid, i, &format!("node {node}: {reason}"))
            }
            _ => Ok(()),
        }
    }
}
