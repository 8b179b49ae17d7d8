//! A put whose node dies mid-put: the chunk it could not write goes to another node, as
//! HDFS rebuilds its write pipeline and Ceph writes to the new acting set. Before the
//! commit nothing references the chunk but the upload, so moving it is one transaction.

use crate::coordinator::{bad, Coordinator};
use crate::meta::Change;
use crate::objects::now_ms;
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, ChunkLoc};
use std::collections::BTreeSet;

impl Coordinator {
    /// Places chunk `index` of stripe ordinal `stripe` of upload `version` of `name` on a
    /// live node outside the stripe, none of `avoid`, with room below the full ratio: the
    /// fullest-last, as a put's placement would. Fails, saying why, when no node is left.
    pub(crate) fn move_upload_chunk(
        &self,
        name: &str,
        version: u64,
        stripe: usize,
        index: usize,
        avoid: &BTreeSet<NodeId>,
    ) -> Result<ChunkLoc, WireError> {
        let alive = self.placeable()?;
        let mut moved = None;
        self.meta.update(&mut |t| {
            let o = t.upload(version)?.ok_or_else(|| {
                // Reclaimed after the upload timeout (a put slowed by failing nodes), or
                // committed: the put is to be made again, not refused as the caller's fault.
                WireError::unavailable(format!("no upload {version} of '{name}': it was committed or abandoned; put it again"))
            })?;
            if o.name != name {
                return bad(format!("upload {version} is of '{}', not '{name}'", o.name));
            }
            if o.shares_stripes() || !o.extents.is_empty() {
                return bad(format!("'{name}' is stored in the {:?} layout, whose chunks are not moved mid-put", o.layout));
            }
            let id = *o
                .stripes
                .get(stripe)
                .ok_or_else(|| WireError::bad_request(format!("upload {version} has {} stripes", o.stripes.len())))?;
            let mut s = t.stripe(id)?.ok_or_else(|| WireError::bad_request(format!("stripe {id} of upload {version} vanished")))?;
            if index >= s.nodes.len() {
                return bad(format!("stripe {id} has {} chunks", s.nodes.len()));
            }
            if s.crcs[index].is_some() {
                return bad(format!("chunk {} is committed already", ChunkId::new(id, index)));
            }
            let from = s.nodes[index];
            // The placement rule: one chunk of a stripe per node.
            let candidates: Vec<NodeId> = alive
                .keys()
                .copied()
                .filter(|n| !s.nodes.contains(n) && !avoid.contains(n))
                .filter(|n| self.has_room(*n, s.chunk_len, self.cfg.full_ratio))
                .collect();
            let fill = |n: &NodeId| {
                let (used, cap) = self.space.node(*n).unwrap_or((0, 0));
                (used * 1000).checked_div(cap).unwrap_or(0)
            };
            let Some(to) = candidates.iter().copied().min_by_key(|n| (fill(n), (*n as u64 + id) % 7919)) else {
                let k = s.code.build().map(|c| c.n()).unwrap_or(0);
                return bad(format!(
                    "chunk {} of '{name}' cannot be written: node {from} failed, and no other live node outside the stripe has room \
                     ({} needs {k} nodes; avoided: {avoid:?})",
                    ChunkId::new(id, index),
                    s.code
                ));
            };
            s.nodes[index] = to;
            s.changed_ms = now_ms();
            t.put(Change::PutStripe(s.clone()))?;
            moved = Some((id, from, to, s.bucket()));
            Ok(())
        })?;
        let (id, from, to, bucket) = moved.expect("set by the transaction");
        tracing::warn!("put of '{name}': chunk {} moves from node {from} to node {to}", ChunkId::new(id, index));
        Ok(ChunkLoc { chunk: ChunkId::new(id, index), node: to, addr: self.addr_of(to), alive: true, crc32c: None, lost: false, bucket })
    }
}
