//! A put whose node dies mid-put: the chunk it could not write goes to another node, as
//! HDFS rebuilds its write pipeline and Ceph writes to the new acting set. Before the
//! commit nothing references the chunk but the upload, so moving it is one transaction.
//!
//! A Geo chunk is one data slot of a shared open stripe, on its home and staging copies:
//! a copy that cannot be written goes to another member of the stripe; a home that cannot
//! take it gives up the slot, and the chunk takes a slot of another member, the new home,
//! in an open stripe of the placement group (a new one where none has that member's slot
//! free), as a put would have placed it there.

use crate::clock::now_ms;
use crate::coordinator::{bad, Coordinator};
use crate::metadata::{Change, StripeRecord, Txn};
use crate::placement::geo_layout::{open_stripe, remainder_code};
use crate::placement::small_bucket;
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, ChunkLoc, ErrorKind, ObjectLayout};
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

    /// Moves extent `extent` of Geo upload `version` of `name` off the nodes in `avoid`
    /// (those its writes failed on): its staging copies to other members of its stripe,
    /// or, when its home is among them, the chunk to a slot of another member. Returns the
    /// upload's layout as it is now. Fails, saying why, when no live member is left.
    pub(crate) fn move_geo_chunk(
        &self,
        name: &str,
        version: u64,
        extent: usize,
        avoid: &BTreeSet<NodeId>,
    ) -> Result<ObjectLayout, WireError> {
        let alive = self.placeable()?;
        let used = |n: &NodeId| self.space.node(*n).map_or(0, |(used, _)| used);
        // Open stripes a new slot may come from, read outside the transaction and checked
        // again inside it (as a put's placement does).
        let pg = crate::placement::geo_layout::placement_group(name, self.cfg.placement_groups);
        let open: Vec<u64> = self.meta.open_stripes(Some(pg))?.into_iter().map(|s| s.id).collect();
        let mut layout = None;
        self.meta.update(&mut |t| {
            let mut o = t.upload(version)?.ok_or_else(|| {
                WireError::unavailable(format!("no upload {version} of '{name}': it was committed or abandoned; put it again"))
            })?;
            if o.name != name || !o.shares_stripes() {
                return bad(format!("upload {version} is not a Geo upload of '{name}'"));
            }
            let e = o
                .extents
                .get(extent)
                .cloned()
                .ok_or_else(|| WireError::bad_request(format!("upload {version} has {} extents", o.extents.len())))?;
            let id = o.stripes[e.stripe];
            let mut s = t
                .stripe(id)?
                .filter(|s| s.open)
                .ok_or_else(|| WireError::bad_request(format!("stripe {id} of upload {version} is not open")))?;
            let ok = |n: &NodeId| alive.contains_key(n) && !avoid.contains(n);
            let home = s.nodes[e.index];
            if ok(&home) {
                // Only copies failed: each goes to another member.
                for c in 0..s.replicas[e.index].len() {
                    if ok(&s.replicas[e.index][c]) {
                        continue;
                    }
                    let taken: BTreeSet<NodeId> = s.replicas[e.index].iter().copied().chain([home]).collect();
                    let to = s.nodes.iter().copied().filter(|n| ok(n) && !taken.contains(n)).min_by_key(|n| (used(n), *n));
                    s.replicas[e.index][c] = to.ok_or_else(|| no_member(name, &s, "a staging copy"))?;
                }
                s.changed_ms = now_ms();
                t.put(Change::PutStripe(s))?;
            } else {
                let to =
                    s.nodes.iter().copied().filter(ok).min_by_key(|n| (used(n), *n)).ok_or_else(|| no_member(name, &s, "its chunk"))?;
                let copies = self.cfg.staging_copies.clamp(1, s.nodes.len());
                let (new, index, offset) = take_slot(t, &open, &o.stripes, &s, to, (version, e.len, copies))?;
                // The old slot is free again (its copies, if written, are orphans now).
                free_slot(&mut s, e.index, version);
                t.put(Change::PutStripe(s))?;
                let new_id = new.id;
                t.put(Change::PutStripe(new))?;
                o.stripes[e.stripe] = new_id;
                o.extents[extent].index = index;
                o.extents[extent].offset = offset;
                tracing::warn!(
                    "put of '{name}': its chunk of {} bytes moves from node {home} (stripe {id}) to node {to} (stripe {new_id})",
                    e.len
                );
                t.put(Change::PutUpload(o.clone()))?;
            }
            layout = Some(o);
            Ok(())
        })?;
        self.maybe_open.store(true, std::sync::atomic::Ordering::SeqCst);
        self.layout(&layout.expect("set by the transaction"))
    }
}

/// No live member of `s`'s placement group can take `what`.
fn no_member(name: &str, s: &StripeRecord, what: &str) -> WireError {
    WireError::new(
        ErrorKind::Unavailable,
        format!(
            "put of '{name}': no live member of placement group {} (nodes {:?}) is left for {what}; the put fails, nothing of it is kept",
            s.pg, s.nodes
        ),
    )
}

/// Gives back the slot (or the piece) of `version` in open stripe `s`.
fn free_slot(s: &mut StripeRecord, index: usize, version: u64) {
    if s.small {
        s.pieces[index].retain(|p| p.version != version);
        if !s.pieces[index].is_empty() {
            return;
        }
    }
    s.owners[index] = 0;
    s.replicas[index].clear();
    s.changed_ms = now_ms();
}

/// A slot for a chunk (or piece) of `len` bytes of `version` on member `home`, in an open
/// stripe like `like` (its placement group, code, size class and members) that the upload
/// does not use yet, or a new one. Returns the stripe, the slot and the offset in it.
fn take_slot(
    t: &mut dyn Txn,
    open: &[u64],
    uses: &[u64],
    like: &StripeRecord,
    home: NodeId,
    (version, len, copies): (u64, u64, usize),
) -> Result<(StripeRecord, usize, u64), WireError> {
    let code = like.code;
    let k = code.build().map_err(WireError::from)?.k();
    let mut members = like.nodes.clone();
    members.sort_unstable();
    let class = if like.class > 0 { like.class } else { like.chunk_len };
    let same = |s: &StripeRecord| {
        let mut m = s.nodes.clone();
        m.sort_unstable();
        let c = if s.class > 0 { s.class } else { s.chunk_len };
        s.open && !s.sealing && s.small == like.small && s.code == code && c == class && m == members && !uses.contains(&s.id)
    };
    // The new stripe's members rotated so the new home is its first data slot.
    let at = like.nodes.iter().position(|&n| n == home).expect("home is a member");
    let rotation: Vec<NodeId> = (0..like.nodes.len()).map(|i| like.nodes[(at + i) % like.nodes.len()]).collect();
    let (pg, slot_counter) =
        (like.pg, if like.small { format!("bucket.small.{}.{class}", like.pg) } else { format!("bucket.{}.{class}", like.pg) });
    let mut fresh = |t: &mut dyn Txn| -> Result<StripeRecord, WireError> {
        let id = t.next_id("stripe")?;
        let slot = t.next_id(&slot_counter)? - 1;
        Ok(open_stripe(id, code, k, class, &rotation, pg, slot, like.small))
    };
    if like.small {
        debug_assert_eq!(code, remainder_code(code));
        let mut candidates = Vec::new();
        for &id in open {
            if t.stripe(id)?.is_some_and(|s| same(&s)) {
                candidates.push(id);
            }
        }
        return small_bucket::reserve_piece(t, &candidates, &mut fresh, home, k, version, len, copies);
    }
    for &id in open {
        if let Some(s) = t.stripe(id)?.filter(|s| same(s)) {
            if let Some(slot) = s.nodes.iter().position(|&x| x == home).filter(|&i| i < k && s.owners[i] == 0) {
                return Ok((reserve(s, slot, version, k, copies), slot, 0));
            }
        }
    }
    Ok((reserve(fresh(t)?, 0, version, k, copies), 0, 0))
}

/// Reserves data slot `slot` of open stripe `s` for `version`, with its staging copies.
fn reserve(mut s: StripeRecord, slot: usize, version: u64, k: usize, copies: usize) -> StripeRecord {
    s.owners[slot] = version;
    s.replicas[slot] = s.staging_nodes(slot, k, copies);
    s.changed_ms = now_ms();
    s
}
