//! A compaction pass on the cluster: the stripes to compact found a page at a time, the
//! new stripes' chunks written by their homes, then one transaction moving the objects
//! (see the parent module for the whole design); and the worker that runs a pass every
//! `compact_interval_ms`.

use super::*;
use crate::clock::now_ms;
use crate::coordinator::Coordinator;
use crate::metadata::slot_crc;
use crate::metadata::{zeros_crc, Change, Piece, StripeRecord, FILLER, PIECES};
use kintsugi_plan::NodeId;
use kintsugi_proto::{ChunkId, CompactionReport, NodeRequest, StoreSpec, WireError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

impl Coordinator {
    /// One compaction pass over every sealed Geo stripe.
    pub(crate) async fn compact(self: &Arc<Self>) -> Result<CompactionReport, WireError> {
        let _one = self.compaction.pass.lock().await;
        self.compaction.status.lock().expect("compaction lock").running = true;
        let result = self.compact_pass().await;
        let mut st = self.compaction.status.lock().expect("compaction lock");
        st.running = false;
        if let Ok(r) = &result {
            st.passes += 1;
            let t = &mut st.total;
            t.scanned += r.scanned;
            t.below += r.below;
            t.written += r.written;
            t.moved += r.moved;
            t.moved_bytes += r.moved_bytes;
            t.freed += r.freed;
            t.freed_bytes += r.freed_bytes;
            t.failed += r.failed;
            t.abandoned += r.abandoned;
            t.dead_bytes = r.dead_bytes;
        }
        result
    }

    async fn compact_pass(self: &Arc<Self>) -> Result<CompactionReport, WireError> {
        let mut report = CompactionReport { abandoned: self.abandon_stale_intents()?, ..Default::default() };
        let below = self.cfg.compact_below;
        let alive = self.alive();
        let failed = self.failed_nodes()?;
        let up = |n: &NodeId| alive.contains_key(n) && !failed.contains(n);
        let mut groups: BTreeMap<GroupKey, Vec<Victim>> = BTreeMap::new();
        let mut dead = Vec::new();
        let mut after = 0;
        loop {
            let page = self.meta.stripes_from(after, PAGE)?;
            let Some(last) = page.last() else { break };
            after = last.id;
            for s in page.into_iter().filter(|s| s.slot.is_some() && !s.open && !s.owners.is_empty()) {
                report.scanned += 1;
                let k = s.code.k();
                let names = self.meta.stripe_objects(s.id)?;
                // Bytes of objects it holds, live or not, and the size of its slots.
                let (held, class) = match s.small {
                    true => (s.pieces.iter().flatten().map(|p| p.len).sum::<u64>(), s.class.max(s.chunk_len)),
                    false => ((0..k).filter(|&i| !s.is_filler(i)).count() as u64 * s.chunk_len, s.chunk_len),
                };
                if names.is_empty() {
                    report.dead_bytes += held;
                    dead.push(s);
                    continue;
                }
                let Some(live) = self.live_chunks(&s, &names)? else { continue };
                let live_bytes: u64 = live.iter().map(|c| c.len).sum();
                report.dead_bytes += held.saturating_sub(live_bytes);
                if (live_bytes as f64) >= below * (k as u64 * class) as f64 {
                    continue;
                }
                // Every chunk is read on its node and the new stripe spans the members.
                if s.bad.iter().any(|&b| b) || !s.nodes.iter().all(&up) {
                    continue;
                }
                report.below += 1;
                let mut members = s.nodes.clone();
                members.sort_unstable();
                groups.entry((s.pg, s.code.to_string(), class, members, s.small)).or_default().push(Victim { stripe: s, live });
            }
        }
        for s in dead {
            self.release_empty(&s, &mut report)?;
        }
        for (key, victims) in groups {
            if let Err(e) = self.compact_group(&key, victims, &mut report).await {
                tracing::warn!("compacting placement group {} ({} bytes chunks): {e}", key.0, key.2);
            }
        }
        if report.written + report.freed > 0 {
            tracing::info!(
                "Geo compaction: {} stripe(s) written with {} live chunk(s) ({} bytes); {} stripe(s) released ({} bytes)",
                report.written,
                report.moved,
                report.moved_bytes,
                report.freed,
                report.freed_bytes
            );
        }
        Ok(report)
    }

    /// Stripe `s`'s chunks that live objects hold; None when an object's record does not
    /// match the stripe's slots (the stripe is then left alone).
    fn live_chunks(&self, s: &StripeRecord, names: &[String]) -> Result<Option<Vec<LiveChunk>>, WireError> {
        let mut live = Vec::new();
        for name in names {
            let Some(o) = self.meta.object(name)? else { continue };
            for e in o.extents.iter().filter(|e| o.stripes.get(e.stripe) == Some(&s.id)) {
                let crc = match s.small {
                    true => s
                        .pieces
                        .get(e.index)
                        .and_then(|p| p.iter().find(|p| p.version == o.version && p.offset == e.offset && p.len == e.len)?.crc),
                    false => s
                        .crcs
                        .get(e.index)
                        .copied()
                        .flatten()
                        .filter(|_| s.owners.get(e.index) == Some(&o.version) && e.offset == 0 && e.len == s.chunk_len),
                };
                let Some(crc) = crc else { return Ok(None) };
                live.push(LiveChunk {
                    stripe: s.id,
                    index: e.index,
                    offset: e.offset,
                    len: e.len,
                    home: s.nodes[e.index],
                    name: o.name.clone(),
                    version: o.version,
                    crc,
                });
            }
        }
        Ok(Some(live))
    }

    /// Releases sealed stripe `s`, which no object uses, to the collector.
    fn release_empty(&self, s: &StripeRecord, report: &mut CompactionReport) -> Result<(), WireError> {
        let mut released = false;
        self.meta.update(&mut |t| {
            released = false;
            // Sealed stripes gain no objects, so none has come since the scan.
            if t.stripe(s.id)?.is_some_and(|now| !now.open) {
                t.discard_stripe(s.id, now_ms())?;
                released = true;
            }
            Ok(())
        })?;
        if released {
            report.freed += 1;
            report.freed_bytes += Victim { stripe: s.clone(), live: vec![] }.stored();
            tracing::debug!("released Geo stripe {}: no object uses it any more", s.id);
        }
        Ok(())
    }

    /// Rewrites the live chunks of `victims` (one group) into new stripes, if that stores
    /// fewer bytes than the victims do.
    async fn compact_group(self: &Arc<Self>, key: &GroupKey, victims: Vec<Victim>, report: &mut CompactionReport) -> Result<(), WireError> {
        let code = victims[0].stripe.code;
        let c = code.build().map_err(WireError::from)?;
        let (k, m) = (c.k(), c.n() - c.k());
        let chunks: Vec<LiveChunk> = victims.iter().flat_map(|v| v.live.clone()).collect();
        let stripes = match key.4 {
            true => pack_pieces(chunks, k, key.2),
            false => pack(chunks, k, &key.3),
        };
        let before: u64 = victims.iter().map(Victim::stored).sum();
        let after: u64 = stripes.iter().map(|s| (s.len() + m) as u64 * stripe_len(key, s)).sum();
        if after >= before {
            return Ok(());
        }
        // Each victim's live chunks not rewritten yet: it is released with its last.
        let mut left: BTreeMap<u64, Vec<LiveChunk>> = victims.iter().map(|v| (v.stripe.id, v.live.clone())).collect();
        let stored: BTreeMap<u64, u64> = victims.iter().map(|v| (v.stripe.id, v.stored())).collect();
        let rate = self.cfg.compact_bytes_per_s;
        for new in stripes {
            let started = std::time::Instant::now();
            let len = stripe_len(key, &new);
            match self.rewrite(key, code, &new, &mut left).await {
                Ok(freed) => {
                    report.written += 1;
                    report.moved += new.iter().map(|s| s.items.len()).sum::<usize>();
                    report.moved_bytes += new.iter().flat_map(|s| &s.items).map(|(c, _)| c.len).sum::<u64>();
                    report.freed += freed.len();
                    report.freed_bytes += freed.iter().map(|id| stored[id]).sum::<u64>();
                }
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!("Geo compaction: rewriting {} slot(s) of {len} bytes: {e}; the old stripes stay", new.len());
                }
            }
            // Throttled by what was written: the moved chunks and the new parity.
            if rate > 0.0 {
                let spent = ((new.len() + m) as u64 * len) as f64 / rate;
                tokio::time::sleep(Duration::from_secs_f64(spent).saturating_sub(started.elapsed())).await;
            }
        }
        Ok(())
    }

    /// Intents no pass is writing (a pass holds the lock, so any is from a coordinator
    /// that stopped mid-rewrite): due for the collector now, not after `INTENT_MS`.
    /// Returns how many.
    fn abandon_stale_intents(&self) -> Result<usize, WireError> {
        let now = now_ms();
        let (mut after, mut abandoned) = (0, 0);
        loop {
            let page = self.meta.garbage_from(after, PAGE)?;
            let Some(last) = page.last() else { return Ok(abandoned) };
            after = last.id;
            for g in page.into_iter().filter(|g| g.discarded_ms > now) {
                tracing::info!("Geo compaction: stripe {} was left half-written by an earlier pass; its chunks are collected", g.id);
                self.abandon_intent(g.id)?;
                abandoned += 1;
            }
        }
    }

    /// Makes the intent of stripe `id` due for the collector now.
    fn abandon_intent(&self, id: u64) -> Result<(), WireError> {
        self.meta.update(&mut |t| {
            if let Some(mut g) = t.garbage(id)? {
                g.discarded_ms = g.discarded_ms.min(now_ms());
                t.put(Change::PutGarbage(g))?;
            }
            Ok(())
        })
    }

    /// Writes one new stripe of `chunks` (distinct homes) and moves their objects to it;
    /// returns the old stripes released. A failure leaves the old stripes as they were
    /// and the new one's chunks to the collector.
    async fn rewrite(
        self: &Arc<Self>,
        key: &GroupKey,
        code: kintsugi_codes::CodeSpec,
        chunks: &[NewSlot],
        left: &mut BTreeMap<u64, Vec<LiveChunk>>,
    ) -> Result<Vec<u64>, WireError> {
        let s = self.stripe_intent(key, code, chunks)?;
        let id = s.id;
        self.compaction.status.lock().expect("compaction lock").writing = Some(id);
        let result = self.write_and_commit(s, chunks, left).await;
        self.compaction.status.lock().expect("compaction lock").writing = None;
        match result {
            Ok((freed, moved)) => {
                // Index records name the old places until published again.
                self.publish_names(moved).await;
                Ok(freed)
            }
            Err(e) => {
                if let Err(e) = self.abandon_intent(id) {
                    tracing::warn!("Geo compaction: stripe {id}'s chunks wait for the next pass to be collected: {e}");
                }
                Err(e)
            }
        }
    }

    /// Records a new stripe for `chunks` as an intent, and returns it: data slots on the
    /// chunks' homes, parity on the other members with the least used, the rest of the
    /// data slots fillers (no file anywhere).
    fn stripe_intent(&self, key: &GroupKey, code: kintsugi_codes::CodeSpec, chunks: &[NewSlot]) -> Result<StripeRecord, WireError> {
        let (pg, class, members, small) = (key.0, key.2, &key.3, key.4);
        let len = stripe_len(key, chunks);
        let c = code.build().map_err(WireError::from)?;
        let (k, n) = (c.k(), c.n());
        let homes: Vec<NodeId> = chunks.iter().map(|c| c.node).collect();
        let mut others: Vec<NodeId> = members.iter().copied().filter(|x| !homes.contains(x)).collect();
        others.sort_by_key(|&x| (self.space.node(x).map_or(0, |(used, _)| used), x));
        let parity: Vec<NodeId> = others.drain(..n - k).collect();
        let nodes: Vec<NodeId> = homes.iter().copied().chain(others).chain(parity).collect();
        let mut record = None;
        self.meta.update(&mut |t| {
            let id = t.next_id("stripe")?;
            let counter = if small { format!("bucket.small.{pg}.{class}") } else { format!("bucket.{pg}.{class}") };
            let slot = t.next_id(&counter)? - 1;
            let mut s = StripeRecord::new(id, code, k as u64 * len, len, nodes.clone());
            s.pg = pg;
            if small {
                s.small = true;
                s.class = class;
                s.pieces = vec![vec![]; n];
            }
            s.slot = Some(slot);
            s.opened_ms = now_ms();
            s.changed_ms = now_ms();
            s.owners = vec![0; n];
            s.replicas = vec![vec![]; n];
            for (i, slot) in chunks.iter().enumerate() {
                if small {
                    s.pieces[i] =
                        slot.items.iter().map(|(c, at)| Piece { version: c.version, offset: *at, len: c.len, crc: Some(c.crc) }).collect();
                    s.owners[i] = PIECES;
                    s.crcs[i] = Some(slot_crc(&s.pieces[i], len)?);
                } else {
                    s.owners[i] = slot.items[0].0.version;
                    s.crcs[i] = Some(slot.items[0].0.crc);
                }
            }
            for i in chunks.len()..k {
                s.owners[i] = FILLER;
                s.crcs[i] = Some(zeros_crc(len));
            }
            // The intent: deleted by the collector unless committed before it comes due.
            let mut intent = s.clone();
            intent.discarded_ms = now_ms() + INTENT_MS;
            t.put(Change::PutGarbage(intent))?;
            record = Some(s);
            Ok(())
        })?;
        Ok(record.expect("set by the transaction"))
    }

    /// Copies `chunks` into new stripe `s` on their homes, computes its parity, and
    /// commits it; returns the old stripes released and the objects moved.
    async fn write_and_commit(
        self: &Arc<Self>,
        mut s: StripeRecord,
        chunks: &[NewSlot],
        left: &mut BTreeMap<u64, Vec<LiveChunk>>,
    ) -> Result<(Vec<u64>, BTreeSet<String>), WireError> {
        let (id, len) = (s.id, s.chunk_len);
        let c = s.code.build().map_err(WireError::from)?;
        let nodes = s.nodes.clone();
        // Each chunk copied into its new slot, checked against its checksum: within its
        // home's disk, or streamed to another member.
        let sub_chunks = if s.small { 1 } else { c.sub_chunks() };
        let limit = self.io_timeout() + Duration::from_secs_f64(len as f64 / 20e6);
        let mut copies = JoinSet::new();
        for (i, slot) in chunks.iter().enumerate() {
            let (from, node) = (slot.items[0].0.home, slot.node);
            let crc = s.crcs[i].expect("set with the intent");
            let store = StoreSpec { chunk: ChunkId::new(id, i), crc32c: crc, new_parity: false, bucket: s.bucket() };
            let pieces: Vec<(ChunkId, u64)> = slot.items.iter().map(|(c, at)| (ChunkId::new(c.stripe, c.index), *at)).collect();
            // Pieces are ranges of their old slots; a chunk is all of its.
            let ranges: Vec<(u64, u64)> = if s.small { slot.items.iter().map(|(c, _)| (c.offset, c.len)).collect() } else { vec![] };
            let me = self.clone();
            copies.spawn(async move {
                if from != node {
                    let (a, b) = ((from, me.addr_of(from), pieces[0].0.clone()), (node, me.addr_of(node)));
                    return me.copy_chunk(a, b, sub_chunks, len, me.cfg.repair_slice, store).await;
                }
                let req = NodeRequest::Assemble {
                    chunk: store.chunk,
                    len,
                    pieces,
                    crc32c: store.crc32c,
                    bucket: store.bucket,
                    sub_chunks: sub_chunks as u32,
                    ranges,
                };
                crate::placement::small_bucket::assemble_on(node, me.addr_of(node), req, limit).await
            });
        }
        let mut errors = Vec::new();
        while let Some(r) = copies.join_next().await {
            if let Err(e) = r.map_err(WireError::from).and_then(|x| x) {
                errors.push(e);
            }
        }
        if let Some(e) = WireError::merge(errors) {
            return Err(e);
        }
        let source = |h: usize, _p: usize| Ok((nodes[h], ChunkId::new(id, h)));
        for (p, crc) in self.write_parity(&s, &nodes, &source).await? {
            s.crcs[p] = Some(crc);
        }
        // Commit: the stripe goes live, objects that are still as they were move to it, and
        // old stripes left with no live object are released.
        let (mut moved, mut freed) = (BTreeSet::new(), Vec::new());
        let here: BTreeSet<(u64, usize, u64)> = chunks.iter().flat_map(|s| &s.items).map(|(c, _)| c.at()).collect();
        self.meta.update(&mut |t| {
            moved.clear();
            freed.clear();
            let intent = t.garbage(id)?.ok_or_else(|| WireError::internal(format!("stripe {id}'s intent was collected")))?;
            if intent.discarded_ms <= now_ms() {
                return Err(WireError::internal(format!("stripe {id}'s intent came due before its rewrite ended")));
            }
            for (i, slot) in chunks.iter().enumerate() {
                for (ch, at) in &slot.items {
                    let Some(mut o) = t.object(&ch.name)?.filter(|o| o.version == ch.version) else { continue };
                    let was = |e: &kintsugi_proto::Extent| {
                        o.stripes.get(e.stripe) == Some(&ch.stripe) && e.index == ch.index && e.offset == ch.offset
                    };
                    let Some(ei) = o.extents.iter().position(was) else { continue };
                    let e = &mut o.extents[ei];
                    (e.index, e.offset) = (i, *at);
                    let si = e.stripe;
                    o.stripes[si] = id;
                    t.put(Change::PutObject(o))?;
                    moved.insert(ch.name.clone());
                }
            }
            t.put(Change::DeleteGarbage(id))?;
            t.put(Change::PutStripe(s.clone()))?;
            let touched: BTreeSet<u64> = here.iter().map(|c| c.0).collect();
            for old in touched {
                let mut still = false;
                for ch in left.get(&old).into_iter().flatten().filter(|c| !here.contains(&c.at())) {
                    still |= t
                        .object(&ch.name)?
                        .is_some_and(|o| o.version == ch.version && o.extents.iter().any(|e| o.stripes.get(e.stripe) == Some(&old)));
                }
                if !still && t.stripe(old)?.is_some() {
                    t.discard_stripe(old, now_ms())?;
                    freed.push(old);
                }
            }
            Ok(())
        })?;
        for v in left.values_mut() {
            v.retain(|c| !here.contains(&c.at()));
        }
        tracing::debug!("Geo compaction: stripe {id} holds {} chunk(s) moved from {:?}; released {freed:?}", chunks.len(), here);
        Ok((freed, moved))
    }
}

/// The chunk length of a new stripe of `slots`: its size class, or for a small-size bucket
/// stripe its fullest slot (the rest of each slot is a hole in the bucket file).
fn stripe_len(key: &GroupKey, slots: &[NewSlot]) -> u64 {
    match key.4 {
        true => slots.iter().map(NewSlot::used).max().unwrap_or(0).max(1),
        false => key.2,
    }
}

/// Compacts every `compact_interval_ms` until the coordinator stops.
pub(crate) async fn compactor(coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    if coord.cfg.compact_below <= 0.0 || coord.cfg.compact_interval_ms == 0 {
        return;
    }
    while crate::coordinator::tick(coord.cfg.compact_interval_ms, &mut stop).await {
        if let Err(e) = coord.compact().await {
            tracing::warn!("Geo compaction: {e}");
        }
    }
}
