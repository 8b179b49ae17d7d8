//! Sealing Geo stripes (Geometric Partitioning, section 4.2; f4's hot-to-warm step): a stripe
//! whose data slots are full, or that has been open for `seal_after_ms`, gets its parity.
//!
//! 1. One transaction checks that no put is still writing into the stripe and turns its
//!    free data slots into fillers, so no put can take one while it is sealed. A filler is
//!    a virtual chunk of zeros, as Clay's shortened nodes: nothing is written or read for
//!    it, its terms drop out of every equation, and it is never lost.
//! 2. Each parity chunk is computed by a repair graph from the k data slots (the code's
//!    decode-from-k equation): the data never passes through the coordinator, and a slot
//!    whose node is down is read from one of its staging copies.
//! 3. One transaction records the parity checksums and closes the stripe; only then are the
//!    staging copies deleted (a copy left behind is an orphan, which the inventory removes).
//!
//! A crash anywhere leaves the stripe open with its copies intact: sealing starts again.

use crate::clock::now_ms;
use crate::coordinator::{bad, Coordinator};
use crate::metadata::{zeros_crc, Change, StripeRecord, FILLER};
use crate::placement::small_bucket;
use kintsugi_plan::{shapes, NodeId, RepairTask};
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{Assignment, ChunkId, NodeRequest, StoreSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

impl Coordinator {
    /// Seals the open stripes that are due (with `all`, every open stripe no put is writing
    /// into); returns how many it sealed.
    pub(crate) async fn seal_due(self: &Arc<Self>, all: bool) -> Result<usize, WireError> {
        let _one_at_a_time = self.sealing.lock().await;
        // Cleared before the scan: a put opening a stripe meanwhile sets it again.
        if !self.maybe_open.swap(false, Ordering::SeqCst) {
            return Ok(0);
        }
        let now = now_ms();
        let open: Vec<StripeRecord> = self.meta.open_stripes(None)?;
        if !open.is_empty() {
            self.maybe_open.store(true, Ordering::SeqCst);
        }
        let mut due = Vec::new();
        for s in open {
            let k = s.code.k();
            let full = if s.small { small_bucket::full(&s, k) } else { s.owners[..k].iter().all(|&o| o != 0) };
            let old = now.saturating_sub(s.opened_ms) >= self.cfg.seal_after_ms;
            // A stripe whose every slot was freed (its puts abandoned) waits for new ones.
            let empty = s.owners[..k].iter().all(|&o| o == 0 || o == FILLER);
            if (all || full || old) && !writing(&s, k) && !empty {
                due.push(s.id);
            }
        }
        // Several stripes at once: one stripe's graphs keep only its k + m disks busy, and
        // each seal is its own transactions, so stripes never see each other's.
        let mut sealed = 0;
        let mut running = JoinSet::new();
        let mut due = due.into_iter();
        loop {
            while running.len() < self.cfg.seal_parallel.max(1) {
                let Some(id) = due.next() else { break };
                let me = self.clone();
                running.spawn(async move { (id, me.seal(id).await) });
            }
            let Some(done) = running.join_next().await else { break };
            match done {
                Ok((_, Ok(true))) => sealed += 1,
                Ok((_, Ok(false))) => {}
                Ok((id, Err(e))) => tracing::warn!("sealing stripe {id}: {e}; it stays open and is tried again"),
                // The others go on: an unfinished seal leaves its stripe open, copies intact.
                Err(e) => tracing::error!("a sealing task failed: {e}"),
            }
        }
        Ok(sealed)
    }

    /// Seals stripe `id`; false when it was not sealable (closed, or a put still writing).
    async fn seal(self: &Arc<Self>, id: u64) -> Result<bool, WireError> {
        let mut reserved = None;
        self.meta.update(&mut |t| {
            reserved = None;
            let Some(mut s) = t.stripe(id)?.filter(|s| s.open) else { return Ok(()) };
            let k = s.code.k();
            if writing(&s, k) || s.owners[..k].iter().all(|&o| o == 0 || o == FILLER) {
                return Ok(());
            }
            for o in s.owners[..k].iter_mut().filter(|o| **o == 0) {
                *o = FILLER;
            }
            if s.small {
                small_bucket::start_sealing(&mut s, k);
            }
            t.put(Change::PutStripe(s.clone()))?;
            reserved = Some(s);
            Ok(())
        })?;
        let Some(s) = reserved else { return Ok(false) };
        let code = s.code.build().map_err(WireError::from)?;
        let (k, n) = (code.k(), code.n());
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|x| x.failed).map(|x| x.id).collect();
        let alive = self.alive();
        let up = |x: &NodeId| alive.contains_key(x) && !failed.contains(x);
        let mut nodes = s.nodes.clone();
        let mut crcs = s.crcs.clone();
        let zeros = zeros_crc(s.chunk_len);
        for i in (0..k).filter(|&i| s.is_filler(i)) {
            crcs[i] = Some(zeros);
        }
        // Where each data slot is read from: its node, else a live staging copy. A small
        // stripe's slots are assembled from their pieces first.
        let mut down_data = Vec::new();
        let mut copies: BTreeMap<usize, Vec<(NodeId, ChunkId)>> = BTreeMap::new();
        if s.small {
            let (assembled, from_copies) = self.assemble_slots(&s, k, &up).await?;
            for (i, crc) in assembled {
                crcs[i] = Some(crc);
            }
            for (i, live) in from_copies {
                copies.insert(i, live);
                down_data.push(i);
            }
        } else {
            for (i, node) in nodes.iter().enumerate().take(k) {
                if !up(node) && !s.is_filler(i) {
                    let live: Vec<(NodeId, ChunkId)> = s.replicas[i]
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| up(r))
                        .map(|(c, &r)| (r, ChunkId::replica(id, i, c + 1)))
                        .collect();
                    if live.is_empty() {
                        return bad(format!("chunk {} and all its staging copies are on nodes that are down", ChunkId::new(id, i)));
                    }
                    copies.insert(i, live);
                    down_data.push(i);
                }
            }
        }
        // A parity slot whose node is down goes to a spare node.
        for p in k..n {
            if !up(&nodes[p]) {
                nodes[p] = self.spare_node(id, &nodes, s.chunk_len, &BTreeSet::new())?;
            }
        }
        // A staging copy on the parity's own node is not used for it (a helper and the sink
        // on one node is no graph the shapes draw).
        let source = |h: usize, p: usize| -> Result<(NodeId, ChunkId), WireError> {
            match copies.get(&h) {
                None => Ok((nodes[h], ChunkId::new(id, h))),
                Some(live) => live.iter().find(|(r, _)| *r != nodes[p]).cloned().ok_or_else(|| {
                    WireError::bad_request(format!("the only live copy of chunk {} is on parity {p}'s node", ChunkId::new(id, h)))
                }),
            }
        };
        for (p, crc) in self.write_parity(&s, &nodes, &source).await? {
            crcs[p] = Some(crc);
        }
        let mut dropped = Vec::new();
        self.meta.update(&mut |t| {
            let Some(mut now) = t.stripe(id)? else { return bad("the stripe vanished while sealed") };
            now.nodes = nodes.clone();
            now.crcs = crcs.clone();
            for &i in &down_data {
                // Its node is down: the sealed stripe rebuilds it like any lost chunk.
                now.bad[i] = true;
            }
            dropped = std::mem::take(&mut now.replicas);
            now.open = false;
            now.changed_ms = now_ms();
            t.put(Change::PutStripe(now))
        })?;
        // Its pieces are ranges of its chunks now, and chunks of down homes are elsewhere.
        self.index.moved(id);
        tracing::info!(
            "sealed stripe {id} ({} data chunk(s), {} filler(s)): parity on {:?}",
            k,
            s.owners[..k].iter().filter(|&&o| o == FILLER).count(),
            &nodes[k..]
        );
        if s.small {
            self.drop_pieces(&s, &up).await;
        }
        for (i, copies) in dropped.iter().enumerate() {
            for (c, node) in copies.iter().enumerate() {
                if up(node) {
                    let _ = request(
                        &self.addr_of(*node),
                        &NodeRequest::DeleteChunk { chunk: ChunkId::replica(id, i, c + 1) },
                        Duration::from_secs(5),
                    )
                    .await;
                }
            }
        }
        Ok(true)
    }
    /// Writes the parity chunks of Geo stripe `s` with its chunks on `nodes`, each computed
    /// by a repair graph from the data slots (the code's decode-from-k equation; fillers
    /// drop out), data slot h read for parity p from `source(h, p)`. Returns each parity's
    /// index and checksum; fails if any parity could not be written.
    pub(crate) async fn write_parity(
        self: &Arc<Self>,
        s: &StripeRecord,
        nodes: &[NodeId],
        source: &(dyn Fn(usize, usize) -> Result<(NodeId, ChunkId), WireError> + Sync),
    ) -> Result<Vec<(usize, u32)>, WireError> {
        let code = s.code.build().map_err(WireError::from)?;
        let k = code.k();
        let data: Vec<usize> = (0..k).collect();
        let mut set = JoinSet::new();
        for (p, &destination) in nodes.iter().enumerate().skip(k) {
            let mut equation = code.repair_equation(p, &data).map_err(WireError::from)?;
            equation.terms.retain(|t| !s.is_filler(t.helper));
            let sources: Vec<(NodeId, ChunkId)> = equation.helpers().iter().map(|&h| source(h, p)).collect::<Result<_, _>>()?;
            let task = RepairTask { equation, helper_nodes: sources.iter().map(|x| x.0).collect(), destination };
            let graph = shapes::build(self.cfg.repair_shape(), &task).map_err(|e| WireError::internal(e.to_string()))?;
            let peers = graph.vertices.iter().map(|v| (v.node, self.addr_of(v.node))).collect();
            let a = Assignment {
                repair: self.repair_id()?,
                graph,
                chunk_len: s.chunk_len,
                slice_len: self.cfg.repair_slice.clamp(1, s.chunk_len.max(1)),
                term_chunks: sources.into_iter().map(|x| x.1).collect(),
                peers,
                store: Some(StoreSpec { chunk: ChunkId::new(s.id, p), crc32c: 0, new_parity: true, bucket: s.bucket() }),
                timeslots: Vec::new(),
                gate_batch: None,
                term_offset: None,
            };
            let me = self.clone();
            set.spawn(async move { (p, me.store_rebuilt(&a).await) });
        }
        let (mut crcs, mut errors) = (Vec::new(), Vec::new());
        while let Some(r) = set.join_next().await {
            match r.map_err(WireError::from)? {
                (p, Ok(crc)) => crcs.push((p, crc)),
                (p, Err(e)) => errors.push(e.context(format_args!("parity {p}"))),
            }
        }
        WireError::merge(errors).map_or(Ok(crcs), Err)
    }
}

/// A put is still writing into the stripe: a slot reserved by an upload not committed.
fn writing(s: &StripeRecord, k: usize) -> bool {
    if s.small {
        return small_bucket::writing(s);
    }
    (0..k).any(|i| s.owners[i] != 0 && s.owners[i] != FILLER && s.crcs[i].is_none())
}

/// Seals due stripes every `seal_interval_ms` until the coordinator stops.
pub(crate) async fn sealer(coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    while crate::coordinator::tick(coord.cfg.seal_interval_ms, &mut stop).await {
        match coord.seal_due(false).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("sealed {n} Geo stripe(s)"),
            Err(e) => tracing::warn!("sealing: {e}"),
        }
    }
}
