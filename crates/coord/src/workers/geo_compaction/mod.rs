//! Geo compaction: giving back the space of deleted objects.
//!
//! A sealed Geo stripe's parity is never updated in place (Geometric Partitioning, section
//! 4.2, as f4), so a deleted object's chunk stays in its stripe as dead space. A pass finds
//! the sealed stripes whose live share (data slots still holding a live object's chunk, of
//! k) is below `compact_below`, and for each placement group, code, size class and member
//! set packs their live chunks into as few new stripes as it can: at most one chunk of a
//! home per stripe, since a chunk stays on its home (a copy into a new slot of the home's
//! bucket, no network) and parity is computed over the new stripe as sealing does. The
//! pieces of small-size bucket stripes are packed the same way, several to a slot, each
//! slot's pieces from one home (a range of an old slot copied into the new one). Stripes no
//! live object uses any more are released whole.
//!
//! Each new stripe is written as an *intent*: its record first goes to garbage, due long
//! after the rewrite can take, so a crash at any point leaves chunks the collector deletes.
//! One transaction then makes it a live stripe, points each moved object (if it still
//! exists as it was) at it, and releases every old stripe left without a live object;
//! their chunks are deleted after `gc_grace_ms` like any replaced version's, so reads
//! under way finish. The old chunks were never touched, so a failed rewrite loses nothing.

use crate::metadata::StripeRecord;
use kintsugi_plan::NodeId;
use kintsugi_proto::CompactionStatus;
use std::collections::BTreeMap;
use std::sync::Mutex;

pub(crate) mod pass;

/// How long a new stripe's intent stays out of the collector's way: longer than any
/// rewrite takes (its commit checks the intent has not come due).
const INTENT_MS: u64 = 30 * 60_000;

/// Stripes read from the metadata at a time while scanning.
const PAGE: usize = 1024;

/// One pass at a time, and what compaction has done since the coordinator started.
#[derive(Default)]
pub(crate) struct Compaction {
    pass: tokio::sync::Mutex<()>,
    status: Mutex<CompactionStatus>,
}

impl Compaction {
    pub(crate) fn status(&self) -> CompactionStatus {
        self.status.lock().expect("compaction lock").clone()
    }
}

/// A live object's chunk, or piece of a small-size bucket slot, in a stripe being
/// compacted: bytes `offset..offset + len` of data slot `index`.
#[derive(Clone, Debug)]
struct LiveChunk {
    stripe: u64,
    index: usize,
    offset: u64,
    len: u64,
    home: NodeId,
    name: String,
    version: u64,
    crc: u32,
}

impl LiveChunk {
    fn at(&self) -> (u64, usize, u64) {
        (self.stripe, self.index, self.offset)
    }
}

/// A data slot of a new stripe: its node, and what it holds, each at its offset there.
#[derive(Debug)]
struct NewSlot {
    node: NodeId,
    items: Vec<(LiveChunk, u64)>,
}

impl NewSlot {
    fn used(&self) -> u64 {
        self.items.last().map_or(0, |(c, at)| at + c.len)
    }
}

/// Stripes whose live chunks may share new stripes: same placement group, code, slot size
/// (size class), member set, and kind (small-size bucket or not).
type GroupKey = (u32, String, u64, Vec<NodeId>, bool);

/// A sealed stripe below the threshold, and its live chunks.
struct Victim {
    stripe: StripeRecord,
    live: Vec<LiveChunk>,
}

impl Victim {
    /// Bytes its chunks take on the nodes (fillers take none).
    fn stored(&self) -> u64 {
        let chunks = (0..self.stripe.nodes.len()).filter(|&i| !self.stripe.is_filler(i)).count() as u64;
        chunks * self.stripe.chunk_len
    }
}

/// A live chunk and the node it goes to in its new stripe.
type Placed = (LiveChunk, NodeId);

/// Packs live chunks into the fewest stripes of k data slots, ceil(chunks / k), each slot
/// on a different one of `members`. A chunk stays on its home where it can (a copy
/// within the node); only a home with more chunks than there are stripes sends its
/// excess to members with free slots (a copy over the network).
fn pack(chunks: Vec<LiveChunk>, k: usize, members: &[NodeId]) -> Vec<Vec<NewSlot>> {
    place(chunks, k, members).into_iter().map(|s| s.into_iter().map(|(c, node)| NewSlot { node, items: vec![(c, 0)] }).collect()).collect()
}

/// Packs live pieces into slots of `class` bytes, each slot's pieces from one home (first
/// fit, largest first), and the slots into stripes of at most k, one slot of a home per
/// stripe. Pieces never leave their home (a range of a slot is copied within the node).
fn pack_pieces(mut pieces: Vec<LiveChunk>, k: usize, class: u64) -> Vec<Vec<NewSlot>> {
    pieces.sort_by_key(|c| (std::cmp::Reverse(c.len), c.at()));
    let mut slots: BTreeMap<NodeId, Vec<NewSlot>> = BTreeMap::new();
    for c in pieces {
        let home = slots.entry(c.home).or_default();
        let slot = match home.iter_mut().position(|s| s.used() + c.len <= class) {
            Some(i) => &mut home[i],
            None => {
                home.push(NewSlot { node: c.home, items: vec![] });
                home.last_mut().expect("pushed")
            }
        };
        let at = slot.used();
        slot.items.push((c, at));
    }
    let mut stripes = Vec::new();
    loop {
        let mut homes: Vec<(usize, NodeId)> = slots.iter().filter(|(_, v)| !v.is_empty()).map(|(&h, v)| (v.len(), h)).collect();
        if homes.is_empty() {
            return stripes;
        }
        homes.sort_by_key(|&(n, h)| (std::cmp::Reverse(n), h));
        stripes.push(homes.iter().take(k).map(|(_, h)| slots.get_mut(h).and_then(Vec::pop).expect("non-empty")).collect());
    }
}

/// Where each live chunk goes (see [`pack`]).
fn place(mut chunks: Vec<LiveChunk>, k: usize, members: &[NodeId]) -> Vec<Vec<Placed>> {
    let count = chunks.len().div_ceil(k);
    let mut by_home: BTreeMap<NodeId, Vec<LiveChunk>> = BTreeMap::new();
    chunks.sort_by_key(|c| std::cmp::Reverse(c.at()));
    for c in chunks {
        by_home.entry(c.home).or_default().push(c);
    }
    let mut stripes: Vec<Vec<Placed>> = Vec::with_capacity(count);
    for _ in 0..count {
        let mut homes: Vec<(usize, NodeId)> = by_home.iter().filter(|(_, v)| !v.is_empty()).map(|(&h, v)| (v.len(), h)).collect();
        homes.sort_by_key(|&(n, h)| (std::cmp::Reverse(n), h));
        stripes.push(homes.iter().take(k).map(|&(_, h)| (by_home.get_mut(&h).and_then(Vec::pop).expect("non-empty"), h)).collect());
    }
    // What is left belongs to homes with more chunks than stripes.
    let mut load: BTreeMap<NodeId, usize> = members.iter().map(|&m| (m, 0)).collect();
    for (_, node) in stripes.iter().flatten() {
        *load.entry(*node).or_default() += 1;
    }
    for c in by_home.into_values().flatten() {
        let s = stripes.iter_mut().filter(|s| s.len() < k).min_by_key(|s| s.len()).expect("count * k >= chunks");
        let node = *members
            .iter()
            .filter(|m| !s.iter().any(|(_, n)| n == *m))
            .min_by_key(|m| (load[m], **m))
            .expect("a stripe with a free data slot has a free member");
        *load.entry(node).or_default() += 1;
        s.push((c, node));
    }
    stripes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn chunk(stripe: u64, index: usize, home: NodeId) -> LiveChunk {
        LiveChunk {
            stripe,
            index,
            offset: 0,
            len: 1,
            home,
            name: format!("o{stripe}.{index}"),
            version: stripe * 10 + index as u64,
            crc: 0,
        }
    }

    /// ceil(chunks / k) stripes, never two chunks on one node in a stripe, every chunk
    /// once, and a chunk off its home only when its home has more chunks than stripes.
    #[test]
    fn packing_is_tight_and_moves_only_the_excess() {
        let members: Vec<NodeId> = (0..6).collect();
        // 12 chunks over 6 homes, 2 each, k = 4: 3 stripes, nothing leaves its home.
        let even: Vec<LiveChunk> = (0..12).map(|i| chunk(i / 4, (i % 4) as usize, (i % 6) as NodeId)).collect();
        // One home with 5 chunks and 3 others: 2 stripes, 3 of the 5 sent elsewhere.
        let mut skewed: Vec<LiveChunk> = (0..5).map(|i| chunk(100 + i, 0, 5)).collect();
        skewed.extend((0..3).map(|i| chunk(200, i, i as NodeId)));
        for (all, stripes, away) in [(even, 3, 0), (skewed, 2, 3)] {
            let packed = place(all.clone(), 4, &members);
            assert_eq!(packed.len(), stripes);
            let mut seen = BTreeSet::new();
            let mut moved = 0;
            for s in &packed {
                assert!(s.len() <= 4);
                let nodes: BTreeSet<NodeId> = s.iter().map(|(_, n)| *n).collect();
                assert_eq!(nodes.len(), s.len(), "two chunks on one node: {s:?}");
                for (c, n) in s {
                    assert!(seen.insert((c.stripe, c.index)));
                    assert!(members.contains(n));
                    moved += usize::from(c.home != *n);
                }
            }
            assert_eq!(seen.len(), all.len());
            assert_eq!(moved, away);
        }
        assert!(pack(vec![], 4, &members).is_empty());
    }

    /// Pieces fill slots of the class from one home each, largest first; no two slots of a
    /// home in a stripe; every piece once, none past its slot, none overlapping.
    #[test]
    fn pieces_pack_into_slots_of_their_homes() {
        let mut pieces = Vec::new();
        for (i, len) in [700u64, 300, 300, 200, 900, 100, 100, 500, 50, 60].into_iter().enumerate() {
            pieces.push(LiveChunk { offset: i as u64 * 10, len, ..chunk(i as u64, 0, (i % 3) as NodeId) });
        }
        let stripes = pack_pieces(pieces.clone(), 2, 1000);
        let mut seen = BTreeSet::new();
        for s in &stripes {
            assert!(s.len() <= 2);
            assert_eq!(s.iter().map(|x| x.node).collect::<BTreeSet<_>>().len(), s.len(), "two slots of a home: {s:?}");
            for slot in s {
                assert!(slot.used() <= 1000, "{slot:?}");
                let mut end = 0;
                for (c, at) in &slot.items {
                    assert_eq!(c.home, slot.node);
                    assert!(*at >= end);
                    end = at + c.len;
                    assert!(seen.insert(c.at()));
                }
            }
        }
        assert_eq!(seen.len(), pieces.len());
        // Home 0 holds 700, 200, 100, 60: two slots; home 1 300, 900, 500: two; home 2
        // 300, 100, 50: one. Five slots, at most two a stripe, a home's in different ones.
        assert_eq!(stripes.iter().map(Vec::len).sum::<usize>(), 5);
        assert_eq!(stripes.len(), 3);
    }
}
