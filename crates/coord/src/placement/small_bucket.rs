//! The small-size bucket of a placement group (Geometric Partitioning, section 4.1): an
//! object's front remainder, and a whole object smaller than s0, is a *piece* packed into
//! the data slot of its home in an open RS stripe of the group, at the slot's next free
//! offset. The paper leaves open how RS stripes are formed over such variable-size pieces;
//! here a stripe is the same slot of the members' small-size buckets (as for the size
//! classes), each data slot s0 bytes holding whole pieces of several objects, so a piece is
//! read from one disk and rebuilt by RS without the read amplification of Clay.
//!
//! While the stripe is open each piece is a chunk of its own on the home and its staging
//! copies (`ChunkId::piece`). Sealing first has each data slot's home assemble its pieces
//! into the slot's chunk, zeros between and after, checked against the checksum the
//! coordinator derives from the pieces' own; the stripe's parity is then computed as for
//! any Geo stripe, and the pieces are deleted.

use crate::clock::now_ms;
use crate::coordinator::{bad, Coordinator};
use crate::metadata::slot_crc;
use crate::metadata::{Piece, StripeRecord, Txn, FILLER, PIECES};
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, NodeRequest, NodeResponse};
use std::collections::BTreeMap;
use std::time::Duration;

/// A data slot is full enough to seal once this share of it (eighths) holds pieces.
const FULL_EIGHTHS: u64 = 7;

/// The open small-size bucket stripe of the group where the home's slot has room for
/// `len` bytes, else a new one; reserves the piece. Returns (stripe, slot, offset).
#[allow(clippy::too_many_arguments)] // a reservation's facts
pub(crate) fn reserve_piece(
    t: &mut dyn Txn,
    candidates: &[u64],
    fresh: &mut dyn FnMut(&mut dyn Txn) -> Result<StripeRecord, WireError>,
    home: NodeId,
    k: usize,
    version: u64,
    len: u64,
    copies: usize,
) -> Result<(StripeRecord, usize, u64), WireError> {
    let mut found = None;
    for &id in candidates {
        if let Some(s) = t.stripe(id)?.filter(|s| s.open && s.small && !s.sealing) {
            let slot = s.nodes.iter().position(|&x| x == home);
            if let Some(slot) = slot.filter(|&i| i < k && s.owners[i] != FILLER && s.slot_used(i) + len <= s.chunk_len) {
                found = Some((s, slot));
                break;
            }
        }
    }
    let (mut s, slot) = match found {
        Some(f) => f,
        None => (fresh(t)?, 0),
    };
    let offset = s.slot_used(slot);
    s.pieces[slot].push(Piece { version, offset, len, crc: None });
    s.owners[slot] = PIECES;
    if s.replicas[slot].is_empty() {
        s.replicas[slot] = s.staging_nodes(slot, k, copies);
    }
    s.changed_ms = now_ms();
    Ok((s, slot, offset))
}

/// Due for sealing because full: every data slot holds pieces up to 7/8 of it.
pub(crate) fn full(s: &StripeRecord, k: usize) -> bool {
    (0..k).all(|i| s.slot_used(i) * 8 >= s.chunk_len * FULL_EIGHTHS)
}

/// Closes small stripe `s` to new pieces for sealing, and cuts its chunks to its fullest
/// slot (its slots stay s0 bytes apart in the bucket files: the rest is a hole).
pub(crate) fn start_sealing(s: &mut StripeRecord, k: usize) {
    s.sealing = true;
    let used = (0..k).map(|i| s.slot_used(i)).max().unwrap_or(0).max(1);
    if s.class == 0 {
        s.class = s.chunk_len;
    }
    s.chunk_len = used.min(s.chunk_len);
    s.data_len = k as u64 * s.chunk_len;
}

/// Sends `req` (an `Assemble`) to `node` at `addr` and waits for it to be stored.
pub(crate) async fn assemble_on(node: NodeId, addr: String, req: NodeRequest, t: Duration) -> Result<(), WireError> {
    match request(&addr, &req, t).await {
        Ok(NodeResponse::Ok) => Ok(()),
        Ok(NodeResponse::Error(e)) => Err(e.context(format_args!("node {node}"))),
        Ok(other) => Err(WireError::internal(format!("node {node}: unexpected answer {other:?}"))),
        Err(e) => Err(e.context(format_args!("node {node}"))),
    }
}

/// A put is still writing a piece into the stripe.
pub(crate) fn writing(s: &StripeRecord) -> bool {
    s.pieces.iter().flatten().any(|p| p.crc.is_none())
}

impl Coordinator {
    /// Assembles every data slot of small stripe `s` that holds pieces: on its home when
    /// `up`, else (or when that fails) on its live staging copies' nodes as staging copies
    /// of the slot's chunk. Returns each slot's checksum, and the slots assembled only as
    /// copies, with where (their homes' chunks are then lost, as a down home's in any Geo
    /// stripe).
    #[allow(clippy::type_complexity)] // two answers, named above
    pub(crate) async fn assemble_slots(
        &self,
        s: &StripeRecord,
        k: usize,
        up: &(dyn Fn(&NodeId) -> bool + Sync),
    ) -> Result<(BTreeMap<usize, u32>, Vec<(usize, Vec<(NodeId, ChunkId)>)>), WireError> {
        let mut crcs = BTreeMap::new();
        let mut copies_only = Vec::new();
        let t = Duration::from_secs(60);
        let sub_chunks = s.code.build().map_or(1, |c| c.sub_chunks() as u32);
        for i in (0..k).filter(|&i| !s.is_filler(i) && !s.pieces[i].is_empty()) {
            let crc = slot_crc(&s.pieces[i], s.chunk_len)?;
            let order = |copy: usize| -> Vec<(ChunkId, u64)> {
                let mut p: Vec<(ChunkId, u64)> = s.pieces[i].iter().map(|p| (ChunkId::piece(s.id, i, p.offset, copy), p.offset)).collect();
                p.sort_by_key(|x| x.1);
                p
            };
            let ask = |node: NodeId, chunk: ChunkId, copy: usize, bucket| {
                let req =
                    NodeRequest::Assemble { chunk, len: s.chunk_len, pieces: order(copy), crc32c: crc, bucket, sub_chunks, ranges: vec![] };
                assemble_on(node, self.addr_of(node), req, t)
            };
            let home = s.nodes[i];
            if up(&home) {
                match ask(home, ChunkId::new(s.id, i), 0, s.bucket()).await {
                    Ok(()) => {
                        crcs.insert(i, crc);
                        continue;
                    }
                    Err(e) => tracing::warn!("assembling slot {i} of small stripe {} on node {home}: {e}; from its copies", s.id),
                }
            }
            let mut live = Vec::new();
            for (c, &node) in s.replicas[i].iter().enumerate().filter(|(_, n)| up(n)) {
                let copy = ChunkId::replica(s.id, i, c + 1);
                match ask(node, copy.clone(), c + 1, None).await {
                    Ok(()) => live.push((node, copy)),
                    Err(e) => tracing::warn!("assembling copy {} of slot {i} of small stripe {} on node {node}: {e}", c + 1, s.id),
                }
            }
            if live.is_empty() {
                return bad(format!("slot {i} of small stripe {} could not be assembled anywhere", s.id));
            }
            crcs.insert(i, crc);
            copies_only.push((i, live));
        }
        Ok((crcs, copies_only))
    }

    /// Deletes the pieces of sealed small stripe `s` (best effort: a piece left behind is
    /// an orphan, which the inventory removes).
    pub(crate) async fn drop_pieces(&self, s: &StripeRecord, up: &(dyn Fn(&NodeId) -> bool + Sync)) {
        for (i, pieces) in s.pieces.iter().enumerate() {
            let holders = std::iter::once(s.nodes[i]).chain(s.replicas.get(i).into_iter().flatten().copied());
            for (copy, node) in holders.enumerate().filter(|(_, n)| up(n)) {
                for p in pieces {
                    let req = NodeRequest::DeleteChunk { chunk: ChunkId::piece(s.id, i, p.offset, copy) };
                    let _ = request(&self.addr_of(node), &req, Duration::from_secs(5)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived checksum is that of the bytes a node assembles.
    #[test]
    fn slot_checksums_combine_pieces_and_zeros() {
        let a = vec![7u8; 1000];
        let b: Vec<u8> = (0..3333u32).map(|i| i as u8).collect();
        let pieces = vec![
            Piece { version: 2, offset: 1500, len: b.len() as u64, crc: Some(kintsugi_proto::crc::crc32c(&b)) },
            Piece { version: 1, offset: 0, len: 1000, crc: Some(kintsugi_proto::crc::crc32c(&a)) },
        ];
        let mut whole = vec![0u8; 8192];
        whole[..1000].copy_from_slice(&a);
        whole[1500..1500 + b.len()].copy_from_slice(&b);
        assert_eq!(slot_crc(&pieces, 8192).unwrap(), kintsugi_proto::crc::crc32c(&whole));
        assert!(slot_crc(&pieces, 4000).is_err(), "pieces past the slot");
        let mut open = pieces.clone();
        open[0].crc = None;
        assert!(slot_crc(&open, 8192).is_err(), "an uncommitted piece");
        let mut overlap = pieces;
        overlap[0].offset = 900;
        assert!(slot_crc(&overlap, 8192).is_err());
    }
}
