//! Moving a healthy chunk to another node: a repair graph with one source, the chunk itself
//! times one, so a move streams, is checked against the chunk's checksum on its way in, and
//! runs on the same executors as repair. `node remove` drains a node this way, and
//! rebalancing fills a new one.

use crate::coordinator::{bad, Coordinator};
use crate::metadata::Change;
use kintsugi_codes::{HelperTerm, RepairEquation};
use kintsugi_plan::{shapes, NodeId, RepairTask, Shape};
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{Assignment, ChunkId, NodeRequest, StoreSpec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The identity as a term: sub-chunk r of the chunk is sub-chunk r of the copy.
fn identity_term(helper: usize, sub_chunks: usize) -> HelperTerm {
    let mut coefs = vec![0u8; sub_chunks * sub_chunks];
    for r in 0..sub_chunks {
        coefs[r * sub_chunks + r] = 1;
    }
    // One read: every sub-chunk, in order.
    #[allow(clippy::single_range_in_vec_init)]
    let reads = vec![0..sub_chunks];
    HelperTerm { helper, reads, coefs }
}

impl Coordinator {
    /// Copies chunk `index` of stripe `stripe` from its node to `dest`, then records `dest`
    /// as its home (only if it has not moved meanwhile). The old copy is deleted once
    /// `gc_grace_ms` has passed, so reads that hold the old layout finish.
    pub(crate) async fn move_chunk(self: &Arc<Self>, stripe: u64, index: usize, dest: NodeId, slice: u64) -> Result<(), WireError> {
        let s = self.meta.stripe(stripe)?.ok_or_else(|| WireError::bad_request(format!("stripe {stripe} vanished")))?;
        let chunk = ChunkId::new(stripe, index);
        let from = *s.nodes.get(index).ok_or_else(|| WireError::bad_request(format!("stripe {stripe} has {} chunks", s.nodes.len())))?;
        let crc = s.crcs[index].ok_or_else(|| WireError::bad_request(format!("chunk {chunk} is not committed yet")))?;
        if s.open {
            return bad(format!("chunk {chunk}: its Geo stripe is not sealed yet"));
        }
        if s.nodes.contains(&dest) {
            return bad(format!("node {dest} already holds a chunk of stripe {stripe}"));
        }
        let alive = self.alive();
        let (Some(from_addr), Some(dest_addr)) = (alive.get(&from), alive.get(&dest)) else {
            return bad(format!("chunk {chunk}: node {from} or node {dest} is not up"));
        };
        let sub_chunks = s.code.build().map_err(WireError::from)?.sub_chunks();
        let store = StoreSpec { chunk: chunk.clone(), crc32c: crc, new_parity: false, bucket: s.bucket() };
        self.copy_chunk((from, from_addr.clone(), chunk.clone()), (dest, dest_addr.clone()), sub_chunks, s.chunk_len, slice, store).await?;
        self.meta.update(&mut |t| {
            let mut now = t
                .stripe(stripe)?
                .ok_or_else(|| WireError::bad_request(format!("stripe {stripe} was deleted while chunk {chunk} moved")))?;
            if now.nodes[index] != from || now.bad[index] {
                return bad(format!("chunk {chunk} changed while it moved"));
            }
            now.nodes[index] = dest;
            now.changed_ms = crate::clock::now_ms();
            t.put(Change::PutStripe(now))
        })?;
        // Index records naming the old node are published again.
        self.index.moved(stripe);
        tracing::info!("chunk {chunk} moved from node {from} to node {dest}");
        let (me, grace, addr) = (self.clone(), Duration::from_millis(self.cfg.gc_grace_ms), from_addr.clone());
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            // Unless the chunk has come back to that node meanwhile.
            if me.meta.stripe(stripe).ok().flatten().is_some_and(|s| s.nodes[index] == from) {
                return;
            }
            let _ = request(&addr, &NodeRequest::DeleteChunk { chunk }, Duration::from_secs(5)).await;
        });
        Ok(())
    }

    /// Copies chunk `source` (`chunk_len` bytes in `sub_chunks`) from node `from` to node
    /// `dest` as `store` says, streamed by a one-source repair graph and checked against
    /// `store`'s checksum.
    pub(crate) async fn copy_chunk(
        &self,
        (from, from_addr, source): (NodeId, String, ChunkId),
        (dest, dest_addr): (NodeId, String),
        sub_chunks: usize,
        chunk_len: u64,
        slice: u64,
        store: StoreSpec,
    ) -> Result<(), WireError> {
        let crc = store.crc32c;
        let lost = store.chunk.parts().map_or(0, |(_, i)| i);
        let equation = RepairEquation { lost, sub_chunks, terms: vec![identity_term(lost, sub_chunks)], structured: None };
        let task = RepairTask { equation, helper_nodes: vec![from], destination: dest };
        let graph = shapes::build(Shape::Cr, &task).map_err(|e| WireError::internal(e.to_string()))?;
        let chunk = store.chunk.clone();
        let a = Assignment {
            repair: self.repair_id()?,
            graph,
            chunk_len,
            slice_len: slice.clamp(1, chunk_len.max(1)),
            term_chunks: vec![source],
            peers: BTreeMap::from([(from, from_addr), (dest, dest_addr)]),
            store: Some(store),
            timeslots: Vec::new(),
            gate_batch: None,
            term_offset: None,
        };
        let got = self.store_rebuilt(&a).await?;
        if got != crc {
            return bad(format!("chunk {chunk} copied to node {dest} has crc {got:08x}, expected {crc:08x}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_term_copies_every_sub_chunk() {
        let t = identity_term(3, 4);
        let data: Vec<u8> = (0..64u8).collect();
        let eq = RepairEquation { lost: 3, sub_chunks: 4, terms: vec![t], structured: None };
        assert_eq!(eq.rebuild(&[&data]).unwrap(), data);
    }
}
