//! The metadata's secondary indexes, derived from the records they index and kept in the
//! same transaction that changes a record, so a request never scans every stripe or object:
//!
//! - each node's chunks, with what an inventory or a repair needs to know of each
//!   (committed, bad, a filler, when it last moved), for its inventory, its repair and
//!   `node remove`;
//! - bad chunks, for automatic repair and `status`;
//! - open Geo stripes by placement group, for a put's slot search and the sealer;
//! - how many stripes each node and each pair of nodes share, and the bytes of chunks each
//!   node holds, for placement and rebalancing;
//! - which objects have bytes in each stripe, for the index sync and `status`.
//!
//! This module only says what a record contributes; a store ([`crate::metadata::redb_store`]) keeps the
//! entries in its own tables.

use crate::metadata::records::{NodeChunk, ObjectRecord, StripeRecord};
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

const COMMITTED: u64 = 1;
const BAD: u64 = 2;
const FILLER: u64 = 4;
const WHOLE: u64 = 8;

impl NodeChunk {
    /// The value stored under (node, stripe, index): flags in the low byte, then the time.
    pub fn pack(&self) -> u64 {
        let bit = |on: bool, b: u64| if on { b } else { 0 };
        let flags = bit(self.committed, COMMITTED) | bit(self.bad, BAD) | bit(self.filler, FILLER) | bit(self.whole, WHOLE);
        flags | self.changed_ms.min(u64::MAX >> 8) << 8
    }

    pub fn unpack(stripe: u64, index: usize, v: u64) -> Self {
        NodeChunk {
            stripe,
            index,
            committed: v & COMMITTED != 0,
            bad: v & BAD != 0,
            filler: v & FILLER != 0,
            whole: v & WHOLE != 0,
            changed_ms: v >> 8,
        }
    }
}

/// What one stripe record contributes to the indexes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StripeEntries {
    /// (node, index) -> packed [`NodeChunk`].
    pub chunks: BTreeMap<(NodeId, u32), u64>,
    /// Indexes of its bad chunks.
    pub bad: Vec<u32>,
    /// Its placement group, while it is open.
    pub open_pg: Option<u32>,
    /// Its nodes, for the spread counters.
    pub nodes: Vec<NodeId>,
    pub chunk_len: u64,
}

impl StripeEntries {
    pub fn of(s: &StripeRecord) -> Self {
        let whole = s.crcs.iter().all(|c| c.is_some());
        let chunks = s
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let c = NodeChunk {
                    stripe: s.id,
                    index: i,
                    committed: s.crcs.get(i).is_some_and(|c| c.is_some()),
                    bad: s.bad.get(i).copied().unwrap_or(false),
                    filler: s.is_filler(i),
                    whole,
                    changed_ms: s.changed_ms,
                };
                ((n, i as u32), c.pack())
            })
            .collect();
        let bad = s.bad.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i as u32).collect();
        StripeEntries { chunks, bad, open_pg: s.open.then_some(s.pg), nodes: s.nodes.clone(), chunk_len: s.chunk_len }
    }
}

/// The spread counters' changes when a stripe on `old` is replaced by one on `new`:
/// (a, a) counts node a's stripes, (a, b) with a < b the stripes a and b share.
pub fn spread_delta(old: &[NodeId], new: &[NodeId]) -> BTreeMap<(NodeId, NodeId), i64> {
    let mut d: BTreeMap<(NodeId, NodeId), i64> = BTreeMap::new();
    for (nodes, sign) in [(old, -1), (new, 1)] {
        for (i, &a) in nodes.iter().enumerate() {
            *d.entry((a, a)).or_default() += sign;
            for &b in &nodes[i + 1..] {
                if a != b {
                    *d.entry((a.min(b), a.max(b))).or_default() += sign;
                }
            }
        }
    }
    d.retain(|_, v| *v != 0);
    d
}

/// The held-bytes changes per node when a stripe is replaced.
pub fn bytes_delta(old: Option<&StripeEntries>, new: Option<&StripeEntries>) -> BTreeMap<NodeId, i64> {
    let mut d: BTreeMap<NodeId, i64> = BTreeMap::new();
    for (e, sign) in [(old, -1i64), (new, 1)] {
        for e in e.into_iter() {
            for &n in &e.nodes {
                *d.entry(n).or_default() += sign * e.chunk_len as i64;
            }
        }
    }
    d.retain(|_, v| *v != 0);
    d
}

/// The stripes an object record names, for the stripe -> objects index (committed objects
/// only: uploads are in their own table).
pub fn object_stripes(o: &ObjectRecord) -> Vec<u64> {
    let mut s = o.stripes.clone();
    s.sort_unstable();
    s.dedup();
    s
}

/// The index tables of a store, as [`reindex_stripe`] and [`reindex_object`] change them
/// (inside the transaction that changes the records).
pub trait IndexTables {
    /// Sets (Some) or removes (None) the entry of chunk `index` of `stripe` on `node`.
    fn set_node_chunk(&mut self, node: NodeId, stripe: u64, index: u32, value: Option<u64>) -> Result<(), WireError>;
    fn set_bad(&mut self, stripe: u64, index: u32, bad: bool) -> Result<(), WireError>;
    fn set_open(&mut self, pg: u32, stripe: u64, open: bool) -> Result<(), WireError>;
    fn spread(&self, pair: (NodeId, NodeId)) -> Result<u64, WireError>;
    /// 0 removes the counter.
    fn set_spread(&mut self, pair: (NodeId, NodeId), v: u64) -> Result<(), WireError>;
    fn held(&self, node: NodeId) -> Result<u64, WireError>;
    fn set_held(&mut self, node: NodeId, v: u64) -> Result<(), WireError>;
    fn set_stripe_object(&mut self, stripe: u64, name: &str, on: bool) -> Result<(), WireError>;
    fn count(&self, name: &str) -> Result<u64, WireError>;
    fn set_count(&mut self, name: &str, v: u64) -> Result<(), WireError>;
}

/// The counter of committed objects' bytes.
pub const BYTES_COUNTER: &str = "count.bytes";

fn add(v: u64, delta: i64) -> u64 {
    v.saturating_add_signed(delta)
}

/// Replaces stripe `id`'s index entries `old` by `new`, touching only what differs.
pub fn reindex_stripe(t: &mut dyn IndexTables, id: u64, old: Option<&StripeEntries>, new: Option<&StripeEntries>) -> Result<(), WireError> {
    let none = StripeEntries::default();
    let (o, n) = (old.unwrap_or(&none), new.unwrap_or(&none));
    for (&(node, i), v) in &o.chunks {
        if n.chunks.get(&(node, i)) != Some(v) {
            t.set_node_chunk(node, id, i, None)?;
        }
    }
    for (&(node, i), &v) in &n.chunks {
        if o.chunks.get(&(node, i)) != Some(&v) {
            t.set_node_chunk(node, id, i, Some(v))?;
        }
    }
    for i in o.bad.iter().filter(|i| !n.bad.contains(i)) {
        t.set_bad(id, *i, false)?;
    }
    for i in n.bad.iter().filter(|i| !o.bad.contains(i)) {
        t.set_bad(id, *i, true)?;
    }
    if o.open_pg != n.open_pg {
        if let Some(pg) = o.open_pg {
            t.set_open(pg, id, false)?;
        }
        if let Some(pg) = n.open_pg {
            t.set_open(pg, id, true)?;
        }
    }
    if o.nodes != n.nodes {
        for (pair, d) in spread_delta(&o.nodes, &n.nodes) {
            let v = add(t.spread(pair)?, d);
            t.set_spread(pair, v)?;
        }
    }
    if o.nodes != n.nodes || o.chunk_len != n.chunk_len {
        for (node, d) in bytes_delta(old, new) {
            let v = add(t.held(node)?, d);
            t.set_held(node, v)?;
        }
    }
    Ok(())
}

/// Replaces a committed object's index entries (its stripes, its bytes).
pub fn reindex_object(
    t: &mut dyn IndexTables,
    name: &str,
    old: Option<&ObjectRecord>,
    new: Option<&ObjectRecord>,
) -> Result<(), WireError> {
    let was: BTreeSet<u64> = old.map(object_stripes).unwrap_or_default().into_iter().collect();
    let is: BTreeSet<u64> = new.map(object_stripes).unwrap_or_default().into_iter().collect();
    for id in was.difference(&is) {
        t.set_stripe_object(*id, name, false)?;
    }
    for id in is.difference(&was) {
        t.set_stripe_object(*id, name, true)?;
    }
    let d = new.map_or(0, |o| o.size as i64) - old.map_or(0, |o| o.size as i64);
    if d != 0 {
        let v = add(t.count(BYTES_COUNTER)?, d);
        t.set_count(BYTES_COUNTER, v)?;
    }
    Ok(())
}

/// The smallest string greater than every string starting with `prefix` (None: there is
/// none, the prefix is all U+10FFFF). Listings seek there to skip a common prefix.
pub fn after_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let next = (c as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_codes::CodeSpec;

    #[test]
    fn node_chunk_round_trips_through_its_packed_value() {
        let c = NodeChunk { stripe: 9, index: 3, committed: true, bad: false, filler: true, whole: false, changed_ms: 1_800_000_000_123 };
        assert_eq!(NodeChunk::unpack(9, 3, c.pack()), c);
        let c = NodeChunk { committed: false, bad: true, filler: false, whole: true, ..c };
        assert_eq!(NodeChunk::unpack(9, 3, c.pack()), c);
    }

    #[test]
    fn spread_delta_counts_loads_and_pairs_and_cancels_what_stays() {
        let d = spread_delta(&[], &[1, 2, 3]);
        assert_eq!(d.len(), 6);
        assert_eq!(d[&(1, 1)], 1);
        assert_eq!(d[&(2, 3)], 1);
        // Chunk on 3 moved to 4: 3 loses a stripe and its pairs, 4 gains them, 1-2 stays.
        let d = spread_delta(&[1, 2, 3], &[1, 2, 4]);
        assert_eq!(d, BTreeMap::from([((3, 3), -1), ((4, 4), 1), ((1, 3), -1), ((2, 3), -1), ((1, 4), 1), ((2, 4), 1)]));
        assert!(spread_delta(&[5, 6], &[5, 6]).is_empty());
    }

    #[test]
    fn stripe_entries_mark_committed_bad_and_open() {
        let code: CodeSpec = "rs:2,1".parse().unwrap();
        let mut s = StripeRecord::new(4, code, 10, 5, vec![7, 8, 9]);
        s.crcs = vec![Some(1), Some(2), None];
        s.bad[1] = true;
        s.open = true;
        s.pg = 3;
        let e = StripeEntries::of(&s);
        assert_eq!(e.bad, vec![1]);
        assert_eq!(e.open_pg, Some(3));
        let c = |n, i| NodeChunk::unpack(4, i as usize, e.chunks[&(n, i)]);
        assert!(c(7, 0).committed && !c(7, 0).bad);
        assert!(c(8, 1).bad);
        assert!(!c(9, 2).committed);
        assert!(!c(7, 0).whole, "a chunk of the stripe is not committed yet");
        assert_eq!(bytes_delta(None, Some(&e)), BTreeMap::from([(7, 5), (8, 5), (9, 5)]));
    }

    #[test]
    fn after_prefix_is_past_every_name_with_the_prefix() {
        assert_eq!(after_prefix("a/").as_deref(), Some("a0"));
        let p = after_prefix("photos/").unwrap();
        for name in ["photos/", "photos/x", "photos/\u{10FFFF}\u{10FFFF}"] {
            assert!(name < p.as_str(), "{name}");
        }
        assert!("photos0" >= p.as_str());
        assert_eq!(after_prefix("\u{10FFFF}"), None);
        // Past U+D7FF comes U+E000 (surrogates are not chars).
        assert_eq!(after_prefix("\u{D7FF}").as_deref(), Some("\u{E000}"));
    }
}
