//! Repair orchestration: the graph for one lost chunk (helpers, destination, method),
//! dispatching it to the nodes, diagnosing a failed attempt and re-planning around it,
//! degraded-read plans, and rebuilding one chunk (with a straggler watch's re-tunes and
//! restarts). Full-node repair, which plans every lost chunk at once, is `full_node`;
//! the rest of this folder is what it runs with (planning, `auto`, ChameleonEC's phases
//! and stragglers, RepairBoost's sub-processes and timeslots, per-destination limits).

pub mod auto;
pub(crate) mod batch;
pub(crate) mod counters;
pub(crate) mod destination_limit;
pub(crate) mod full_node;
pub mod full_node_plan;
pub mod options;
pub(crate) mod phases;
pub mod recovery_budget;
pub(crate) mod straggler;
pub(crate) mod stripe_health;
pub(crate) mod subprocess;
pub(crate) mod timeslot_reservation;

use crate::coordinator::{bad, Coordinator};
use crate::metadata::{Change, PendingRepair, StripeRecord};
use crate::repair::full_node_plan::GraphSlots;
use crate::repair::straggler::{Running, Verdict};
use crate::repair::timeslot_reservation::Claim;
use kintsugi_node::wire::job_to_wire;
use kintsugi_node::Job;
use kintsugi_plan::schedule::Choice;
use kintsugi_plan::{shapes, NodeId, RepairGraph, RepairTask, Shape};
use kintsugi_proto::rpc::request;
use kintsugi_proto::{Assignment, ChunkId, NodeRequest, NodeResponse, StoreSpec, READER};
use kintsugi_proto::{ErrorKind, Fault, Scarce, Shortfall, WireError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// What rebuilt a chunk: its graph, and the timeslots its transfers were gated by (empty:
/// none), for replaying it in the simulator.
pub(crate) struct Ran {
    pub graph: RepairGraph,
    pub timeslots: Vec<Option<u32>>,
}

impl Coordinator {
    /// Builds a repair graph for chunk `index` of stripe `s` towards `target`, avoiding `avoid`.
    pub(crate) fn plan(
        &self,
        s: &StripeRecord,
        index: usize,
        method: Shape,
        slice: u64,
        target: Target<'_>,
        avoid: &BTreeSet<NodeId>,
    ) -> Result<Job, WireError> {
        let (dest, scheduled) = match target {
            Target::Reader => (Some(READER), None),
            Target::Rebuild(choice) => (None, choice),
        };
        let code = s.code.build().map_err(WireError::from)?;
        let alive = self.alive();
        // A filler (virtual zeros) is always there, wherever its node is.
        let avail: Vec<usize> = (0..s.nodes.len())
            .filter(|&j| j != index && (s.is_filler(j) || (!s.bad[j] && alive.contains_key(&s.nodes[j]) && !avoid.contains(&s.nodes[j]))))
            .collect();
        // A scheduler's choice holds while its helpers and destination are still usable.
        let roomy = |n: &NodeId| self.has_room(*n, s.chunk_len, self.cfg.backfillfull_ratio);
        let asked = scheduled;
        let scheduled = scheduled.filter(|c| {
            c.helpers.iter().all(|h| avail.contains(h))
                && roomy(&c.destination)
                && alive.contains_key(&c.destination)
                && !avoid.contains(&c.destination)
                && !s.nodes.contains(&c.destination)
        });
        if let (Some(c), None) = (asked, scheduled) {
            tracing::info!(
                "chunk {}: the scheduler's choice (helpers {:?}, destination {}) no longer holds; planning anew",
                ChunkId::new(s.id, index),
                c.helpers,
                c.destination
            );
        }
        // A bad chunk on a node that is up is rebuilt in place (as Ceph repairs an object on
        // its OSD): no data moves, and it works with no node to spare (exactly k + m).
        let holder = s.nodes[index];
        let in_place = dest.is_none()
            && s.bad[index]
            && alive.contains_key(&holder)
            && !self.failed_nodes()?.contains(&holder)
            && !avoid.contains(&holder)
            && !self.draining.lock().expect("draining lock").contains(&holder)
            && roomy(&holder);
        let dest = dest.or(in_place.then_some(holder)).or(scheduled.map(|c| c.destination));
        let helpers = match scheduled {
            Some(c) => c.helpers.clone(),
            None => code.choose_helpers(index, &avail).map_err(|e| {
                let e = WireError::from(e).context(format_args!("chunk {}", ChunkId::new(s.id, index)));
                // Too few helpers left: a shortfall of chunks, which callers say as such.
                if e.is_retryable() {
                    WireError {
                        shortfall: Some(Shortfall { what: Scarce::Chunks, needed: code.k() as u64, available: avail.len() as u64 }),
                        ..e
                    }
                } else {
                    e
                }
            })?,
        };
        let mut equation = code.repair_equation(index, &helpers).map_err(WireError::from)?;
        // Fillers hold zeros: their terms add nothing.
        equation.terms.retain(|t| !s.is_filler(t.helper));
        let helper_nodes: Vec<NodeId> = equation.helpers().iter().map(|&h| s.nodes[h]).collect();
        let destination = match dest {
            Some(d) => d,
            None => self.spare_node(s.id, &s.nodes, s.chunk_len, avoid).map_err(|e| {
                if e.is_short_of(Scarce::Nodes) {
                    WireError { message: format!("stripe {}: no eligible node; waiting for node {holder} or its replacement", s.id), ..e }
                } else {
                    e
                }
            })?,
        };
        let term_chunks = equation.helpers().iter().map(|&h| ChunkId::new(s.id, h)).collect();
        let task = RepairTask { equation, helper_nodes, destination };
        // A scheduler-drawn tree (ChameleonEC) is built as drawn; else the method's shape.
        let graph = match scheduled.and_then(|c| c.tree.as_ref()) {
            Some(parents) => shapes::tree::from_parents(&task, parents),
            None => shapes::build(method, &task),
        }
        .map_err(|e| WireError::internal(e.to_string()))?;
        let mut peers = BTreeMap::new();
        for v in &graph.vertices {
            if v.node != READER {
                peers.insert(v.node, alive.get(&v.node).cloned().unwrap_or_else(|| self.addr_of(v.node)));
            }
        }
        let store = (destination != READER).then(|| StoreSpec {
            chunk: ChunkId::new(s.id, index),
            crc32c: s.crcs[index].unwrap_or(0),
            new_parity: false,
            bucket: s.bucket(),
        });
        let repair = self.repair_id()?;
        let slice_len = slice.clamp(1, s.chunk_len.max(1));
        Ok(Assignment {
            repair,
            graph,
            chunk_len: s.chunk_len,
            slice_len,
            term_chunks,
            peers,
            store,
            timeslots: Vec::new(),
            gate_batch: None,
            term_offset: None,
        })
    }

    /// A live node holding no chunk of stripe `id` (whose chunks are on `nodes`), with room
    /// for `chunk_len` bytes, least loaded first: where a rebuilt chunk goes.
    pub(crate) fn spare_node(&self, id: u64, nodes: &[NodeId], chunk_len: u64, avoid: &BTreeSet<NodeId>) -> Result<NodeId, WireError> {
        let load: HashMap<NodeId, u64> = self.meta.spread()?.into_iter().filter(|((a, b), _)| a == b).map(|((a, _), v)| (a, v)).collect();
        let outside: Vec<NodeId> = self.placeable()?.keys().copied().filter(|n| !nodes.contains(n) && !avoid.contains(n)).collect();
        if outside.is_empty() {
            // None at all (a cluster of exactly k + m nodes with one down), as opposed to
            // none with room.
            let live = self.placeable()?.len() as u64;
            return Err(WireError::shortfall(Scarce::Nodes, nodes.len() as u64 + 1, live, format!("no live node is outside stripe {id}")));
        }
        outside
            .into_iter()
            .filter(|n| self.has_room(*n, chunk_len, self.cfg.backfillfull_ratio))
            .min_by_key(|n| (load.get(n).copied().unwrap_or(0), (*n as u64 + id) % 7919))
            .ok_or_else(|| {
                WireError::bad_request(format!(
                "no live node outside stripe {id} with room ({chunk_len} bytes below the backfillfull ratio {}) to rebuild its chunk on",
                self.cfg.backfillfull_ratio
            ))
            })
    }

    /// Runs a plan whose sink stores a chunk: dispatches it and waits until the chunk is
    /// durable on the destination; returns the stored chunk's checksum.
    pub(crate) async fn store_rebuilt(&self, a: &Job) -> Result<u32, WireError> {
        let dest = a.graph.vertex(a.graph.sink).node;
        self.dispatch(a).await?;
        let limit = Duration::from_secs_f64((a.chunk_len as f64 / 1e6 * 10.0).max(60.0));
        match request(
            &a.peers[&dest],
            &NodeRequest::WaitRepair { repair: a.repair, timeout_ms: limit.as_millis() as u64 },
            limit + self.io_timeout(),
        )
        .await?
        {
            NodeResponse::RepairDone { crc32c } => {
                tracing::debug!(repair = a.repair, "the sink has the chunk durable");
                Ok(crc32c)
            }
            NodeResponse::Error(e) => Err(e.context(format_args!("node {dest}"))),
            other => Err(WireError::bad_request(format!("unexpected answer {other:?}"))),
        }
    }

    /// Sends the plan to every node of the graph.
    pub(crate) async fn dispatch(&self, a: &Job) -> Result<(), WireError> {
        let mut set = JoinSet::new();
        let wire: Box<Assignment> = Box::new(job_to_wire(a));
        for (&n, addr) in &a.peers {
            let (addr, req, t) = (addr.clone(), NodeRequest::RunRepair { assignment: wire.clone() }, self.io_timeout());
            set.spawn(async move { (n, request(&addr, &req, t).await) });
        }
        let mut errors = Vec::new();
        while let Some(r) = set.join_next().await {
            match r.map_err(WireError::from)? {
                (_, Ok(NodeResponse::Ok)) => {}
                (n, Ok(NodeResponse::Error(e))) => errors.push(e.context(format_args!("node {n}"))),
                (n, Ok(other)) => errors.push(WireError::internal(format!("node {n}: unexpected answer {other:?}"))),
                (n, Err(e)) => errors.push(e.with_fault(Fault::Unreachable { node: n }).context(format_args!("node {n} unreachable"))),
            }
        }
        WireError::merge(errors).map_or(Ok(()), Err)
    }

    /// After a failed attempt: mark the helper chunks named corrupt or missing as bad, and
    /// nodes that do not answer as dead, so the next plan avoids them. Returns the nodes to
    /// avoid and whether anything was learnt that the plan did not know.
    pub(crate) async fn diagnose(&self, s: &StripeRecord, a: &Job, err: &WireError) -> (BTreeSet<NodeId>, bool) {
        let mut learnt = false;
        for (chunk, why) in kintsugi_proto::graph_faults::bad_chunks_named(err, &a.term_chunks) {
            if let Some((_, j)) = chunk.parts().filter(|&(sid, j)| sid == s.id && j < s.nodes.len()) {
                learnt |= !s.bad[j];
                let _ = self.mark_bad(s.id, j, &why);
            }
        }
        let mut avoid = BTreeSet::new();
        for n in kintsugi_proto::graph_faults::unanswering(&a.peers).await {
            tracing::warn!("node {n} does not answer; marking it dead");
            self.mark_dead(n);
            avoid.insert(n);
            learnt = true;
        }
        (avoid, learnt)
    }

    #[allow(clippy::too_many_arguments)] // one request's fields
    pub(crate) async fn degraded_plan(
        &self,
        name: &str,
        version: u64,
        stripe: usize,
        index: usize,
        method: Shape,
        slice: u64,
        avoid: Vec<NodeId>,
        range: Option<(u64, u64)>,
    ) -> Result<Job, WireError> {
        let id = self.stripe_of(name, version, stripe)?;
        // Nodes the reader found hung are not helpers (the chunk's own node is not one either).
        let mut avoid: BTreeSet<NodeId> = avoid.into_iter().collect();
        let mut last = WireError::internal("no attempt made");
        for _ in 0..self.cfg.repair_attempts.max(1) {
            let s = self.meta.stripe(id)?.ok_or_else(|| WireError::bad_request("stripe vanished"))?;
            if index >= s.nodes.len() {
                return bad(format!("stripe has {} chunks", s.nodes.len()));
            }
            if s.open {
                return bad(format!("stripe {id} is not sealed yet (no parity): read a staging copy of its chunk"));
            }
            let mut a = match self.plan(&s, index, method, slice, Target::Reader, &avoid) {
                Ok(a) => a,
                Err(e) if e.is_short_of(Scarce::Chunks) => return Err(self.unreadable(name, stripe, &s, index, &avoid)),
                Err(e) => return Err(e),
            };
            if let Some((offset, len)) = range {
                // Only the range: each helper reads the same range of its chunk.
                if a.graph.equation.sub_chunks != 1 {
                    return bad(format!("{}: a range of a chunk is rebuilt only by codes of one sub-chunk", s.code));
                }
                if len == 0 || offset.checked_add(len).is_none_or(|end| end > s.chunk_len) {
                    return bad(format!("range {offset}+{len} is outside the chunk's {} bytes", s.chunk_len));
                }
                a.term_offset = Some(offset);
                a.chunk_len = len;
                a.slice_len = a.slice_len.clamp(1, len);
            }
            match self.dispatch(&a).await {
                Ok(()) => return Ok(a),
                Err(e) => {
                    last = e;
                    avoid.extend(self.diagnose(&s, &a, &last).await.0);
                }
            }
        }
        Err(last.as_kind(ErrorKind::Unavailable).context("could not plan a degraded read"))
    }

    /// Rebuilds one lost chunk onto a new node; Ok(attempts used), Ok(0) when the chunk
    /// turned out not to be lost (its node reported in again).
    /// Rebuilds one chunk: the attempts it took and the graph that succeeded, or 0 attempts
    /// when there was nothing to do.
    pub(crate) async fn repair_one(
        self: &Arc<Self>,
        p: &PendingRepair,
        scheduled: Option<Choice>,
        timeslots: Option<GraphSlots>,
        mut claim: Option<Claim>,
    ) -> Result<(usize, Option<Ran>), WireError> {
        let mut avoid = BTreeSet::new();
        let mut last = WireError::internal("no attempt made");
        let key = (p.stripe, p.index);
        // ChameleonEC's straggler watch of this chunk's phase, if it has one.
        let sar = self.sar.lock().expect("sar lock").clone().filter(|w| w.covers(key));
        // The scheduler's choice on the first attempt; re-planned after a failure, or the
        // re-tuned tree after a straggler's re-tune.
        let mut choice = scheduled;
        let mut attempt = 0;
        let mut lessons = 0;
        while attempt < self.cfg.repair_attempts.max(1) {
            attempt += 1;
            let Some(s) = self.meta.stripe(p.stripe)? else {
                // Its version was replaced or deleted: nothing to repair.
                self.meta.apply(vec![Change::DeletePending { stripe: p.stripe, index: p.index }])?;
                return Ok((0, None));
            };
            if s.crcs[p.index].is_none() {
                return bad(format!("chunk {} was never committed", ChunkId::new(s.id, p.index)));
            }
            let holder = s.nodes[p.index];
            let holder_ok =
                !s.bad[p.index] && self.alive().contains_key(&holder) && !self.meta.nodes()?.iter().any(|n| n.id == holder && n.failed);
            if holder_ok {
                self.meta.apply(vec![Change::DeletePending { stripe: p.stripe, index: p.index }])?;
                return Ok((0, None));
            }
            let mut a = match self.plan(&s, p.index, p.method, p.slice, Target::Rebuild(choice.as_ref()), &avoid) {
                Ok(a) => a,
                Err(e) if e.is_short_of(Scarce::Chunks) => return Err(self.unrepairable(&s, &avoid)),
                Err(e) => return Err(e),
            };
            // The scheduler's timeslots hold for the graph it planned, on the first attempt.
            if let Some(t) = timeslots.as_ref().filter(|t| attempt == 1 && t.fits(&a.graph)) {
                a.timeslots = t.slots.clone();
                a.gate_batch = claim.as_mut().map(Claim::claim);
            }
            // Not running the planned graph: its reserved transfers go back now.
            drop(claim.take());
            let dest = a.graph.vertex(a.graph.sink).node;
            if let Some(w) = &sar {
                let graph = a.graph.clone();
                let running = Running {
                    repair: a.repair,
                    peers: a.peers.clone(),
                    graph,
                    chunk_len: a.chunk_len,
                    started: Instant::now(),
                    choice: choice.clone(),
                };
                w.register(key, running);
            }
            tracing::debug!(repair = a.repair, chunk = %ChunkId::new(p.stripe, p.index), attempt, "dispatching");
            let outcome = match self.store_rebuilt(&a).await {
                Ok(crc) if Some(crc) == s.crcs[p.index] => Ok(()),
                Ok(crc) => Err(WireError::bad_request(format!("rebuilt chunk has crc {crc:08x}"))),
                Err(e) => Err(e),
            };
            choice = None;
            if let Some(w) = &sar {
                w.finished(key);
                if outcome.is_ok() {
                    w.succeeded(key);
                } else {
                    // Cancelled by the straggler watch: rerun re-tuned (not a failed
                    // attempt), or leave the chunk pending for a later phase.
                    if let Some(c) = w.take_retune(key) {
                        choice = Some(c);
                        attempt -= 1;
                        continue;
                    }
                    if w.verdict(key) == Some(Verdict::Restart) {
                        return Ok((0, None));
                    }
                }
            }
            match outcome {
                Ok(()) => {
                    // The rebuilt chunk now lives on dest; the stripe is whole again there.
                    // Read and written in one transaction: a concurrent report or commit is
                    // never overwritten with a stale copy of the stripe.
                    let mut old = None;
                    let recording = Instant::now();
                    self.meta.update(&mut |t| {
                        t.put(Change::DeletePending { stripe: p.stripe, index: p.index })?;
                        if let Some(mut s) = t.stripe(p.stripe)? {
                            old = Some(s.nodes[p.index]);
                            s.nodes[p.index] = dest;
                            s.bad[p.index] = false;
                            s.changed_ms = crate::clock::now_ms();
                            t.put(Change::PutStripe(s))?;
                        } else if let Some(mut g) = t.garbage(p.stripe)? {
                            // Replaced or deleted meanwhile: the rebuilt copy is garbage too.
                            old = None;
                            g.nodes[p.index] = dest;
                            t.put(Change::PutGarbage(g))?;
                        }
                        Ok(())
                    })?;
                    // Index records naming the chunk's old node are published again.
                    self.index.moved(p.stripe);
                    tracing::debug!(
                        repair = a.repair,
                        chunk = %ChunkId::new(p.stripe, p.index),
                        record_ms = recording.elapsed().as_secs_f64() * 1e3,
                        "rebuilt chunk durable and recorded"
                    );
                    let ran = Ran { graph: a.graph, timeslots: a.timeslots };
                    let Some(old) = old else { return Ok((attempt, Some(ran))) };
                    // A corrupt copy left on another live node is removed (best effort).
                    let old_addr = if old == dest { None } else { self.alive().get(&old).cloned() };
                    if let Some(addr) = old_addr {
                        let _ =
                            request(&addr, &NodeRequest::DeleteChunk { chunk: ChunkId::new(p.stripe, p.index) }, Duration::from_secs(2))
                                .await;
                    }
                    return Ok((attempt, Some(ran)));
                }
                Err(e) => {
                    tracing::warn!("repair of {} (attempt {attempt}) failed: {e}", ChunkId::new(p.stripe, p.index));
                    last = e;
                    let s = self.meta.stripe(p.stripe)?.ok_or_else(|| WireError::bad_request("stripe vanished"))?;
                    let (gone, learnt) = self.diagnose(&s, &a, &last).await;
                    avoid.extend(gone);
                    avoid.insert(dest);
                    // An attempt that found a bad helper or a dead node is not one of the
                    // failures counted against the chunk: the next plan goes without it, and
                    // a stripe has only so many chunks and nodes to find bad.
                    if learnt && lessons < s.nodes.len() {
                        lessons += 1;
                        attempt -= 1;
                    }
                }
            }
        }
        Err(last.context(ChunkId::new(p.stripe, p.index)))
    }
}

/// Where a planned repair sends the rebuilt chunk.
pub(crate) enum Target<'a> {
    /// To the client, for a degraded read.
    Reader,
    /// To a new home: the scheduler's choice when it still holds, else the least loaded node.
    Rebuild(Option<&'a Choice>),
}
