//! Geometric Partitioning's object layout on the cluster (Shan et al., SOSP'21, section 4).
//!
//! An object is cut by the partitioner into a front remainder and chunks of s0, s0 q, ...
//! (Contiguous: equal chunks). The object's name hashes to a placement group, a fixed set
//! of n nodes (rendezvous hashing over the live nodes); its *home* is the group member with
//! the least used capacity, and every chunk of the object lands there. A chunk of size s is
//! the data of one slot of a Clay stripe of size class s formed across the group's members:
//! the same slot of each member's same-size bucket: the stripe's `slot`, numbered per group
//! and size class, and on each node the chunk is that slot of its bucket file for the class
//! (`kintsugi_node::bucket`). Stripes fill up with chunks of several objects, each staged
//! with copies on other members (f4-style: parity is never updated in place); a full or old
//! stripe is sealed in the background (`seal`), which computes its parity and drops the
//! copies. The remainder is a piece of the group's small-size bucket (`small_bucket`).
//!
//! Each object's compact index record is kept by a few members of its group
//! (`object_index`), so clients find its chunks without the coordinator; the coordinator's
//! metadata store stays the source of truth.

use crate::clock::now_ms;
use crate::coordinator::{bad, Coordinator};
use crate::metadata::{Change, ObjectRecord, StripeRecord, Txn};
use crate::placement::small_bucket;
use kintsugi_codes::CodeSpec;
use kintsugi_geo::partition::{partition, DEFAULT_MAX_CHUNK};
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use kintsugi_proto::{Extent, LayoutSpec, ObjectLayout};
use std::collections::HashSet;

pub use kintsugi_proto::placement::{pg_members, placement_group, stable_hash};

/// The code of a Geo object's remainder stripe: RS with the object code's k and m (the
/// paper's small-size bucket is RS-coded); other codes keep their own.
pub fn remainder_code(code: CodeSpec) -> CodeSpec {
    match code {
        CodeSpec::Clay { k, m, .. } => CodeSpec::Rs { k, m },
        other => other,
    }
}

/// The (s0, q, cap) a layout cuts with: Contiguous is Geo with q = 1.
pub fn geometry_of(layout: LayoutSpec) -> Option<(u64, u64, u64)> {
    match layout {
        LayoutSpec::Geo { s0, q, cap } => Some((s0, q, if cap == 0 { DEFAULT_MAX_CHUNK.max(s0) } else { cap })),
        LayoutSpec::Contiguous { chunk } => Some((chunk, 1, chunk)),
        _ => None,
    }
}

/// A new open stripe of placement group `pg` across `nodes` in bucket slot `slot`: of
/// the size class `chunk_len`, or of the small-size bucket (`small`, its slots packing pieces).
#[allow(clippy::too_many_arguments)] // a stripe's facts
pub(crate) fn open_stripe(
    id: u64,
    code: CodeSpec,
    k: usize,
    chunk_len: u64,
    nodes: &[NodeId],
    pg: u32,
    slot: u64,
    small: bool,
) -> StripeRecord {
    let n = nodes.len();
    StripeRecord {
        id,
        code,
        data_len: k as u64 * chunk_len,
        chunk_len,
        nodes: nodes.to_vec(),
        crcs: vec![None; n],
        bad: vec![false; n],
        discarded_ms: 0,
        changed_ms: now_ms(),
        open: true,
        owners: vec![0; n],
        replicas: vec![vec![]; n],
        pg,
        opened_ms: now_ms(),
        slot: Some(slot),
        small,
        pieces: if small { vec![vec![]; n] } else { vec![] },
        sealing: false,
        class: 0,
    }
}

impl Coordinator {
    /// Starts a put of a Geo or Contiguous object: reserves a slot for each of its chunks
    /// in open stripes of its placement group (opening new ones where none has the home's
    /// slot free), and places its remainder stripe.
    pub(crate) fn create_geo(&self, name: String, size: u64, code: CodeSpec, layout: LayoutSpec) -> Result<ObjectLayout, WireError> {
        let (s0, q, cap) = geometry_of(layout).ok_or_else(|| WireError::bad_request("not a Geo layout"))?;
        let c = code.build().map_err(WireError::from)?;
        let (k, n) = (c.k(), c.n());
        let alpha = c.sub_chunks() as u64;
        if s0 == 0 || s0 % alpha != 0 {
            return bad(format!("s0 ({s0} bytes) must be a positive multiple of {code}'s {alpha} sub-chunks"));
        }
        if q > 16 {
            return bad(format!("q = {q}: at most 16"));
        }
        if cap > 1 << 30 {
            return bad("chunks are at most 1 GiB");
        }
        let part = partition(size, s0, q, cap).map_err(|e| WireError::bad_request(e.to_string()))?;
        let failed: HashSet<NodeId> = self.meta.nodes()?.into_iter().filter(|x| x.failed).map(|x| x.id).collect();
        let alive: Vec<NodeId> = self.placeable()?.keys().copied().filter(|x| !failed.contains(x)).collect();
        if alive.len() < n {
            return Err(crate::objects::too_few_for(self, &code, n, alive.len()));
        }
        let pg = placement_group(&name, self.cfg.placement_groups);
        let members = pg_members(pg, &alive, n);
        // Home: the member with the least used capacity (ties: rendezvous order).
        let home = (0..n).min_by_key(|&i| (self.space.node(members[i]).map_or(0, |(used, _)| used), i)).expect("n > 0");
        let total: u64 = part.chunks.iter().sum();
        if !self.has_room(members[home], total, self.cfg.full_ratio) {
            return Err(crate::objects::full(
                n,
                n - 1,
                format!("node {} (home of '{name}' in placement group {pg}) has no room for {total} bytes", members[home]),
            ));
        }
        // Stripes rotate the members so that the home is a data slot and parity spreads.
        let rotation: Vec<NodeId> = (0..n).map(|i| members[(home + i) % n]).collect();
        let mut member_set = members.clone();
        member_set.sort_unstable();
        // Candidates are read outside the transaction and checked again inside it.
        let same_group = |s: &StripeRecord| {
            let mut m = s.nodes.clone();
            m.sort_unstable();
            s.open && s.pg == pg && m == member_set
        };
        let (mut candidates, mut small_candidates) = (Vec::new(), Vec::new());
        for s in self.meta.open_stripes(Some(pg))?.into_iter().filter(same_group) {
            if s.small && s.code == remainder_code(code) && !s.sealing {
                small_candidates.push((s.id, s.chunk_len));
            } else if !s.small && s.code == code {
                candidates.push((s.id, s.chunk_len));
            }
        }
        let copies = self.cfg.staging_copies.clamp(1, n);
        let mut obj = None;
        self.meta.update(&mut |t| {
            let version = t.next_id("version")?;
            let mut stripes = Vec::new();
            let mut extents = Vec::new();
            let mut taken: HashSet<u64> = HashSet::new();
            if part.remainder > 0 {
                // The remainder is a piece of the group's small-size bucket.
                let rcode = remainder_code(code);
                let rk = rcode.build().map_err(WireError::from)?.k();
                let mut fresh = |t: &mut dyn Txn| -> Result<StripeRecord, WireError> {
                    let id = t.next_id("stripe")?;
                    let slot = t.next_id(&format!("bucket.small.{pg}.{s0}"))? - 1;
                    Ok(open_stripe(id, rcode, rk, s0, &rotation, pg, slot, true))
                };
                let small: Vec<u64> = small_candidates.iter().filter(|&&(_, len)| len == s0).map(|&(id, _)| id).collect();
                let (s, slot, offset) =
                    small_bucket::reserve_piece(t, &small, &mut fresh, members[home], rk, version, part.remainder, copies)?;
                extents.push(Extent { stripe: 0, index: slot, offset, len: part.remainder, crc32c: None });
                taken.insert(s.id);
                stripes.push(s.id);
                t.put(Change::PutStripe(s))?;
            }
            for &size in &part.chunks {
                let mut found = None;
                for &(id, len) in &candidates {
                    if len != size || taken.contains(&id) {
                        continue;
                    }
                    if let Some(s) = t.stripe(id)?.filter(|s| s.open) {
                        let slot = s.nodes.iter().position(|&x| x == members[home]);
                        if let Some(slot) = slot.filter(|&i| i < k && s.owners[i] == 0) {
                            found = Some((s, slot));
                            break;
                        }
                    }
                }
                let (mut s, slot) = match found {
                    Some(f) => f,
                    None => {
                        let id = t.next_id("stripe")?;
                        // Slots count from 0 per placement group and size class.
                        let slot = t.next_id(&format!("bucket.{pg}.{size}"))? - 1;
                        (open_stripe(id, code, k, size, &rotation, pg, slot, false), 0)
                    }
                };
                taken.insert(s.id);
                s.owners[slot] = version;
                s.replicas[slot] = s.staging_nodes(slot, k, copies);
                s.changed_ms = now_ms();
                extents.push(Extent { stripe: stripes.len(), index: slot, offset: 0, len: size, crc32c: None });
                stripes.push(s.id);
                t.put(Change::PutStripe(s))?;
            }
            let created_ms = now_ms();
            let o = ObjectRecord {
                name: name.clone(),
                size,
                code,
                committed: false,
                stripes,
                version,
                created_ms,
                layout,
                extents,
                attrs: Default::default(),
                chain: Default::default(),
                inline: None,
            };
            t.put(Change::PutUpload(o.clone()))?;
            obj = Some(o);
            Ok(())
        })?;
        let o = obj.expect("set by the transaction");
        self.code_widths.observe(n);
        // Count what this put adds to its home until the node's next report says it: a burst
        // of puts would otherwise all pick the same "least used" member from stale reports.
        self.space.add(members[home], total);
        self.maybe_open.store(true, std::sync::atomic::Ordering::SeqCst);
        tracing::debug!(
            "'{name}' ({size} bytes, {layout}): placement group {pg}, home node {}, {} chunk(s), remainder {} bytes",
            members[home],
            part.chunks.len(),
            part.remainder
        );
        self.layout(&o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rendezvous placement: n distinct members, stable under unrelated nodes leaving.
    #[test]
    fn placement_groups_are_stable() {
        let nodes: Vec<NodeId> = (0..20).collect();
        for pg in 0..50 {
            let m = pg_members(pg, &nodes, 14);
            let set: HashSet<_> = m.iter().collect();
            assert_eq!(set.len(), 14);
            // Removing a node outside the group leaves the group as it was.
            let outside = *nodes.iter().find(|x| !m.contains(x)).unwrap();
            let fewer: Vec<NodeId> = nodes.iter().copied().filter(|&x| x != outside).collect();
            assert_eq!(pg_members(pg, &fewer, 14), m);
        }
        // Groups differ: not every group is the same 14 nodes.
        let distinct: HashSet<Vec<NodeId>> = (0..50)
            .map(|pg| {
                let mut m = pg_members(pg, &nodes, 14);
                m.sort_unstable();
                m
            })
            .collect();
        assert!(distinct.len() > 10, "{}", distinct.len());
    }

    #[test]
    fn names_spread_over_groups() {
        let mut count = vec![0; 8];
        for i in 0..800 {
            count[placement_group(&format!("obj-{i}"), 8) as usize] += 1;
        }
        assert!(count.iter().all(|&c| c > 60), "{count:?}");
    }
}
