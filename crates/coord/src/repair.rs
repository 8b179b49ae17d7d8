//! Repair orchestration: the graph for one lost chunk (helpers, destination, method),
//! dispatching it to the nodes, diagnosing a failed attempt and re-planning around it,
//! degraded-read plans, and full-node repair (scheduling all lost chunks at once, then
//! rebuilding them `parallel` at a time, each stripe's chunks one after another).

use crate::coordinator::{bad, Coordinator};
use crate::meta::{Change, PendingRepair, StripeRecord};
use crate::recovery_budget::{weight, NodeBudget};
use crate::subprocess::NodeSpeed;
use kintsugi_node::exec::request;
use kintsugi_plan::schedule::{self, Choice, Cluster, LostChunk, Scheduler};
use kintsugi_plan::{shapes, NodeId, RepairGraph, RepairTask, Shape};
use kintsugi_proto::{Assignment, ChunkId, NodeRequest, NodeResponse, RepairReport, StoreSpec, READER};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

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
    ) -> Result<Assignment, String> {
        let (dest, scheduled) = match target {
            Target::Reader => (Some(READER), None),
            Target::Rebuild(choice) => (None, choice),
        };
        let code = s.code.build().map_err(|e| e.to_string())?;
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
        let dest = dest.or(scheduled.map(|c| c.destination));
        let helpers = match scheduled {
            Some(c) => c.helpers.clone(),
            None => code.choose_helpers(index, &avail).map_err(|e| format!("chunk {}: {e}", ChunkId::new(s.id, index)))?,
        };
        let mut equation = code.repair_equation(index, &helpers).map_err(|e| e.to_string())?;
        // Fillers hold zeros: their terms add nothing.
        equation.terms.retain(|t| !s.is_filler(t.helper));
        let helper_nodes: Vec<NodeId> = equation.helpers().iter().map(|&h| s.nodes[h]).collect();
        let destination = match dest {
            Some(d) => d,
            None => self.spare_node(s.id, &s.nodes, s.chunk_len, avoid)?,
        };
        let term_chunks = equation.helpers().iter().map(|&h| ChunkId::new(s.id, h)).collect();
        let task = RepairTask { equation, helper_nodes, destination };
        // A scheduler-drawn tree (ChameleonEC) is built as drawn; else the method's shape.
        let graph = match scheduled.and_then(|c| c.tree.as_ref()) {
            Some(parents) => shapes::tree::from_parents(&task, parents),
            None => shapes::build(method, &task),
        }
        .map_err(|e| e.to_string())?;
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
        });
        let repair = (self.epoch << 32) | (self.meta.next_id("repair")? & 0xffff_ffff);
        let slice_len = slice.clamp(1, s.chunk_len.max(1));
        Ok(Assignment { repair, graph, chunk_len: s.chunk_len, slice_len, term_chunks, peers, store, timeslots: Vec::new() })
    }

    /// A live node holding no chunk of stripe `id` (whose chunks are on `nodes`), with room
    /// for `chunk_len` bytes, least loaded first: where a rebuilt chunk goes.
    pub(crate) fn spare_node(&self, id: u64, nodes: &[NodeId], chunk_len: u64, avoid: &BTreeSet<NodeId>) -> Result<NodeId, String> {
        let mut load: HashMap<NodeId, usize> = HashMap::new();
        for st in self.meta.stripes()? {
            for n in st.nodes {
                *load.entry(n).or_default() += 1;
            }
        }
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        self.alive()
            .keys()
            .copied()
            .filter(|n| !nodes.contains(n) && !avoid.contains(n) && !failed.contains(n))
            .filter(|n| self.has_room(*n, chunk_len, self.cfg.backfillfull_ratio))
            .min_by_key(|n| (load.get(n).copied().unwrap_or(0), (*n as u64 + id) % 7919))
            .ok_or(format!(
                "no live node outside stripe {id} with room ({chunk_len} bytes below the backfillfull ratio {}) to rebuild its chunk on",
                self.cfg.backfillfull_ratio
            ))
    }

    /// Runs a plan whose sink stores a chunk: dispatches it and waits until the chunk is
    /// durable on the destination; returns the stored chunk's checksum.
    pub(crate) async fn store_rebuilt(&self, a: &Assignment) -> Result<u32, String> {
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
            NodeResponse::RepairDone { crc32c } => Ok(crc32c),
            NodeResponse::Error { message } => Err(message),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    /// Sends the plan to every node of the graph.
    pub(crate) async fn dispatch(&self, a: &Assignment) -> Result<(), String> {
        let mut set = JoinSet::new();
        for (&n, addr) in &a.peers {
            let (addr, req, t) = (addr.clone(), NodeRequest::RunRepair { assignment: Box::new(a.clone()) }, self.io_timeout());
            set.spawn(async move { (n, request(&addr, &req, t).await) });
        }
        let mut errors = Vec::new();
        while let Some(r) = set.join_next().await {
            match r.map_err(|e| e.to_string())? {
                (_, Ok(NodeResponse::Ok)) => {}
                (n, Ok(NodeResponse::Error { message })) => errors.push(format!("node {n}: {message}")),
                (n, Ok(other)) => errors.push(format!("node {n}: unexpected answer {other:?}")),
                (n, Err(e)) => errors.push(format!("node {n} unreachable: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// After a failed attempt: mark chunks named corrupt as bad, and nodes that do not answer
    /// as dead, so the next plan avoids them. Returns the nodes to avoid.
    pub(crate) async fn diagnose(&self, s: &StripeRecord, a: &Assignment, err: &str) -> BTreeSet<NodeId> {
        let mut avoid = BTreeSet::new();
        for (i, _) in err.match_indices("corrupt chunk ") {
            let name: String = err[i + 14..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.').collect();
            if let Some(j) = (0..s.nodes.len()).find(|&j| ChunkId::new(s.id, j).as_str() == name) {
                let _ = self.mark_bad(s.id, j, err);
            }
        }
        for (&n, addr) in &a.peers {
            let ok =
                matches!(request(addr, &NodeRequest::Ping, Duration::from_secs(2)).await, Ok(NodeResponse::Pong { node }) if node == n);
            if !ok {
                tracing::warn!("node {n} does not answer; marking it dead");
                self.mark_dead(n);
                avoid.insert(n);
            }
        }
        avoid
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
    ) -> Result<Assignment, String> {
        let id = self.stripe_of(name, version, stripe)?;
        // Nodes the reader found hung are not helpers (the chunk's own node is not one either).
        let mut avoid: BTreeSet<NodeId> = avoid.into_iter().collect();
        let mut last = String::new();
        for _ in 0..self.cfg.repair_attempts.max(1) {
            let s = self.meta.stripe(id)?.ok_or("stripe vanished")?;
            if index >= s.nodes.len() {
                return bad(format!("stripe has {} chunks", s.nodes.len()));
            }
            if s.open {
                return bad(format!("stripe {id} is not sealed yet (no parity): read a staging copy of its chunk"));
            }
            let a = self.plan(&s, index, method, slice, Target::Reader, &avoid)?;
            match self.dispatch(&a).await {
                Ok(()) => return Ok(a),
                Err(e) => {
                    last = e;
                    avoid.extend(self.diagnose(&s, &a, &last).await);
                }
            }
        }
        bad(format!("could not plan a degraded read: {last}"))
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
    ) -> Result<(usize, Option<RepairGraph>), String> {
        let mut avoid = BTreeSet::new();
        let mut last = String::new();
        for attempt in 1..=self.cfg.repair_attempts.max(1) {
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
            // The scheduler's choice on the first attempt; re-planned after a failure.
            let choice = if attempt == 1 { scheduled.as_ref() } else { None };
            let mut a = match self.plan(&s, p.index, p.method, p.slice, Target::Rebuild(choice), &avoid) {
                Ok(a) => a,
                Err(e) => return Err(e),
            };
            // The scheduler's timeslots hold for the graph it planned, on the first attempt.
            if let Some(t) = timeslots.as_ref().filter(|t| attempt == 1 && t.fits(&a.graph)) {
                a.timeslots = t.slots.clone();
            }
            let dest = a.graph.vertex(a.graph.sink).node;
            let outcome = match self.store_rebuilt(&a).await {
                Ok(crc) if Some(crc) == s.crcs[p.index] => Ok(()),
                Ok(crc) => Err(format!("rebuilt chunk has crc {crc:08x}")),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    // The rebuilt chunk now lives on dest; the stripe is whole again there.
                    // Read and written in one transaction: a concurrent report or commit is
                    // never overwritten with a stale copy of the stripe.
                    let mut old = None;
                    self.meta.update(&mut |t| {
                        t.put(Change::DeletePending { stripe: p.stripe, index: p.index })?;
                        if let Some(mut s) = t.stripe(p.stripe)? {
                            old = Some(s.nodes[p.index]);
                            s.nodes[p.index] = dest;
                            s.bad[p.index] = false;
                            s.changed_ms = crate::objects::now_ms();
                            t.put(Change::PutStripe(s))?;
                        } else if let Some(mut g) = t.garbage(p.stripe)? {
                            // Replaced or deleted meanwhile: the rebuilt copy is garbage too.
                            old = None;
                            g.nodes[p.index] = dest;
                            t.put(Change::PutGarbage(g))?;
                        }
                        Ok(())
                    })?;
                    let Some(old) = old else { return Ok((attempt, Some(a.graph))) };
                    // A corrupt copy left on another live node is removed (best effort).
                    let old_addr = if old == dest { None } else { self.alive().get(&old).cloned() };
                    if let Some(addr) = old_addr {
                        let _ =
                            request(&addr, &NodeRequest::DeleteChunk { chunk: ChunkId::new(p.stripe, p.index) }, Duration::from_secs(2))
                                .await;
                    }
                    return Ok((attempt, Some(a.graph)));
                }
                Err(e) => {
                    tracing::warn!("repair of {} (attempt {attempt}) failed: {e}", ChunkId::new(p.stripe, p.index));
                    last = e;
                    let s = self.meta.stripe(p.stripe)?.ok_or("stripe vanished")?;
                    avoid.extend(self.diagnose(&s, &a, &last).await);
                    avoid.insert(dest);
                }
            }
        }
        bad(format!("chunk {}: {last}", ChunkId::new(p.stripe, p.index)))
    }

    /// Every chunk of a committed object that is on a dead node or reported bad.
    pub(crate) fn lost_chunks(&self) -> Result<Vec<(u64, usize)>, String> {
        self.lost_chunks_where(&|_, _| true)
    }

    /// Lost chunks for which `due(stripe, node)` holds (`node` the chunk's holder).
    pub(crate) fn lost_chunks_where(&self, due: &dyn Fn(&StripeRecord, usize) -> bool) -> Result<Vec<(u64, usize)>, String> {
        let alive = self.alive();
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        let mut lost = Vec::new();
        for s in self.meta.stripes()? {
            if s.crcs.iter().any(|c| c.is_none()) {
                continue;
            }
            for (i, n) in s.nodes.iter().enumerate() {
                if (s.bad[i] || !alive.contains_key(n) || failed.contains(n)) && !s.is_filler(i) && due(&s, i) {
                    lost.push((s.id, i));
                }
            }
        }
        Ok(lost)
    }

    /// Helpers and destinations for `todo` from `scheduler`, and the order to start the
    /// repairs in (by first timeslot for RepairBoost, else as listed).
    pub(crate) fn schedule(&self, todo: &mut [PendingRepair], scheduler: Scheduler) -> Result<Planned, String> {
        self.schedule_scaled(todo, scheduler, &NodeSpeed::default())
    }

    /// [`schedule`](Self::schedule) with each node's bandwidth scaled by its measured rate
    /// (RepairBoost's adaptive sub-processes).
    pub(crate) fn schedule_scaled(&self, todo: &mut [PendingRepair], scheduler: Scheduler, speed: &NodeSpeed) -> Result<Planned, String> {
        let alive = self.alive();
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        let mut cluster = Cluster::homogeneous(alive.keys().copied().filter(|n| !failed.contains(n)).collect());
        // Every scheduler plans with live bandwidth: each node's residual, and its user load.
        crate::bandwidth::fill(&mut cluster, &self.links.lock().expect("links lock"));
        speed.apply(&mut cluster);
        tracing::debug!(scheduler = %scheduler, "planning with residual bandwidth (up, down) per node: {:?}", cluster.bandwidth);
        // One plan per code and method: a scheduler balances over chunks of one kind.
        let mut groups: BTreeMap<(String, &str), Vec<usize>> = BTreeMap::new();
        let mut stripes = HashMap::new();
        for (i, p) in todo.iter().enumerate() {
            // A stripe deleted since is skipped by repair_one.
            let Some(s) = self.meta.stripe(p.stripe)? else { continue };
            groups.entry((s.code.to_string(), p.method.name())).or_default().push(i);
            stripes.insert(p.stripe, s);
        }
        // Schedulers that plan in time (ChameleonEC's phases) need the chunk size.
        cluster.chunk_bytes = stripes.values().map(|s| s.chunk_len).max().unwrap_or(0) as f64;
        cluster.phase_seconds = self.cfg.repair_phase_ms as f64 / 1e3;
        let mut out = HashMap::new();
        let mut first_slot = HashMap::new();
        let mut timeslots = HashMap::new();
        let gate = |g: &RepairGraph| scheduler.timeslots() && self.cfg.gate_timeslots.gates(g);
        for (_, idx) in groups {
            let method = todo[idx[0]].method;
            let code = stripes[&todo[idx[0]].stripe].code.build().map_err(|e| e.to_string())?;
            let lost: Vec<LostChunk> = idx
                .iter()
                .map(|&i| {
                    let (p, s) = (&todo[i], &stripes[&todo[i].stripe]);
                    let placement = (0..s.nodes.len())
                        .map(|j| (j != p.index && !s.bad[j] && cluster.nodes.contains(&s.nodes[j])).then_some(s.nodes[j]))
                        .collect();
                    // Every node of the stripe stays out, also one holding a corrupt copy.
                    LostChunk { placement, lost: p.index, avoid: s.nodes.clone() }
                })
                .collect();
            let plan = schedule::plan(code.as_ref(), method, scheduler, &lost, &cluster, self.epoch).map_err(|e| e.to_string())?;
            for (&i, r) in idx.iter().zip(&plan.repairs) {
                let key = (todo[i].stripe, todo[i].index);
                out.insert(key, Choice { helpers: r.helpers(), destination: r.destination(), tree: r.tree_parents() });
                first_slot.insert(key, (r.phase, r.first_slot()));
                if gate(&r.graph) && r.slots.iter().any(Option::is_some) {
                    let nodes = r.graph.vertices.iter().map(|v| v.node).collect();
                    timeslots.insert(key, GraphSlots { nodes, slots: r.slots.clone() });
                }
            }
        }
        prioritise(todo, &first_slot);
        let phase = first_slot.into_iter().map(|(k, (p, _))| (k, p)).collect();
        Ok(Planned { choices: out, phase, timeslots })
    }

    /// Full-node repair of everything lost, `parallel` chunks at a time.
    pub async fn repair(
        self: &Arc<Self>,
        method: Shape,
        slice: u64,
        parallel: usize,
        scheduler: Scheduler,
    ) -> Result<RepairReport, String> {
        let _one = self.repairing.lock().await;
        let lost = self.lost_chunks()?;
        self.repair_locked(lost, method, slice, parallel, scheduler).await
    }

    /// Repairs `lost` (and what an earlier run left pending); the caller holds `repairing`.
    pub(crate) async fn repair_locked(
        self: &Arc<Self>,
        lost: Vec<(u64, usize)>,
        method: Shape,
        slice: u64,
        parallel: usize,
        scheduler: Scheduler,
    ) -> Result<RepairReport, String> {
        let mut todo: Vec<PendingRepair> = lost.into_iter().map(|(stripe, index)| PendingRepair { stripe, index, method, slice }).collect();
        // Chunks left pending by an earlier run are included with their own method.
        for p in self.meta.pending()? {
            if !todo.iter().any(|t| t.stripe == p.stripe && t.index == p.index) {
                todo.push(p);
            }
        }
        self.meta.apply(todo.iter().cloned().map(Change::PutPending).collect())?;
        // In this order also when planning fails below.
        prioritise(&mut todo, &HashMap::new());
        if scheduler == Scheduler::Chameleon {
            return self.repair_in_phases(todo, &format!("{method} ({scheduler})"), parallel).await;
        }
        let round = self.cfg.repair_subprocess_chunks;
        if round > 0 && round < todo.len() {
            return self.repair_in_subprocesses(todo, &format!("{method} ({scheduler})"), parallel, scheduler, round).await;
        }
        let (choices, timeslots) = match self.schedule(&mut todo, scheduler) {
            Ok(c) => (c.choices, c.timeslots),
            Err(e) => {
                // Planning can fail where a chunk has too few survivors; each chunk then
                // plans on its own and reports its own error.
                tracing::warn!("scheduler {scheduler} could not plan: {e}");
                (HashMap::new(), HashMap::new())
            }
        };
        if !timeslots.is_empty() {
            tracing::info!(repairs = timeslots.len(), "nodes gate transfers by RepairBoost's timeslots");
        }
        self.run_repairs(todo, &format!("{method} ({scheduler})"), parallel, choices, timeslots).await
    }

    pub(crate) async fn resume(self: &Arc<Self>) -> Result<RepairReport, String> {
        let _one = self.repairing.lock().await;
        let todo = self.meta.pending()?;
        self.run_repairs(todo, "resumed", 4, HashMap::new(), HashMap::new()).await
    }

    pub(crate) async fn run_repairs(
        self: &Arc<Self>,
        todo: Vec<PendingRepair>,
        method: &str,
        parallel: usize,
        choices: HashMap<(u64, usize), Choice>,
        timeslots: HashMap<(u64, usize), GraphSlots>,
    ) -> Result<RepairReport, String> {
        self.run_repairs_recorded(todo, method, parallel, choices, timeslots, None).await
    }

    /// [`run_repairs`](Self::run_repairs), also recording when each repair finished
    /// (seconds from the start) and its graph.
    pub(crate) async fn run_repairs_recorded(
        self: &Arc<Self>,
        todo: Vec<PendingRepair>,
        method: &str,
        parallel: usize,
        mut choices: HashMap<(u64, usize), Choice>,
        mut timeslots: HashMap<(u64, usize), GraphSlots>,
        mut record: Option<&mut Vec<(f64, RepairGraph)>>,
    ) -> Result<RepairReport, String> {
        let started = Instant::now();
        let lost = todo.len();
        let sem = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
        let mut set = JoinSet::new();
        // Chunks of one stripe are rebuilt one after another: each plans with its siblings'
        // new homes known, so no two land on the same node.
        let mut stripe_locks: HashMap<u64, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
        // Geometric Partitioning's per-node budget of repair weight (chunk size in 4 MiB
        // units), on the nodes a repair will read from and write to.
        let budget = NodeBudget::new(self.cfg.recovery_node_budget);
        for p in todo {
            let (c, sem) = (self.clone(), sem.clone());
            let choice = choices.remove(&(p.stripe, p.index));
            let slots = timeslots.remove(&(p.stripe, p.index));
            let lock = stripe_locks.entry(p.stripe).or_default().clone();
            // Permits are taken in this order, so repairs start in schedule order.
            let permit = sem.acquire_owned().await.expect("semaphore open");
            let (nodes, units) = match self.meta.stripe(p.stripe)? {
                Some(s) => {
                    let mut nodes: Vec<NodeId> = match &choice {
                        Some(ch) => ch.helpers.iter().map(|&h| s.nodes[h]).chain([ch.destination]).collect(),
                        // Helpers not chosen yet: any survivor may be one.
                        None => s.nodes.iter().enumerate().filter(|&(i, _)| i != p.index).map(|(_, &n)| n).collect(),
                    };
                    nodes.sort_unstable();
                    nodes.dedup();
                    (nodes, weight(s.chunk_len))
                }
                None => (vec![], 1),
            };
            let held = budget.acquire(&nodes, units).await;
            set.spawn(async move {
                let _permit = permit;
                let _held = held;
                let _stripe = lock.lock().await;
                let len = c.meta.stripe(p.stripe).ok().flatten().map_or(0, |s| s.chunk_len);
                let r = c.repair_one(&p, choice, slots).await;
                (r, len, started.elapsed().as_secs_f64())
            });
        }
        let mut report = RepairReport { method: method.to_string(), lost, ..Default::default() };
        let mut graph_bytes = 0usize;
        while let Some(r) = set.join_next().await {
            match r.map_err(|e| e.to_string())? {
                (Ok((0, _)), _, _) => report.skipped += 1,
                (Ok((attempts, graph)), len, finished) => {
                    if let (Some(rec), Some(g)) = (record.as_deref_mut(), &graph) {
                        rec.push((finished, g.clone()));
                    }
                    report.repaired += 1;
                    report.retries += attempts - 1;
                    report.bytes += len;
                    // Up to a count and a size: a Clay graph's coefficients run to hundreds
                    // of KiB, and the report must fit one frame.
                    if let Some(g) = graph.filter(|_| report.graphs.len() < REPORTED_GRAPHS && graph_bytes < REPORTED_GRAPH_BYTES) {
                        graph_bytes += serde_json::to_vec(&g).map_or(0, |v| v.len());
                        report.graphs.push(g);
                    }
                }
                (Err(e), _, _) => {
                    tracing::warn!("repair failed: {e}");
                    report.failed += 1;
                    report.errors.push(e);
                }
            }
        }
        report.seconds = started.elapsed().as_secs_f64();
        debug_assert_eq!(report.repaired + report.skipped + report.failed, report.lost);
        Ok(report)
    }
}

/// A scheduler's plan on the cluster: helpers and destination per chunk, and each chunk's
/// ChameleonEC phase (0 for schedulers without phases).
pub(crate) struct Planned {
    pub choices: HashMap<(u64, usize), Choice>,
    pub phase: HashMap<(u64, usize), u32>,
    /// RepairBoost's timeslots, when the nodes gate transfers by them.
    pub timeslots: HashMap<(u64, usize), GraphSlots>,
}

/// The timeslot of each vertex's send in the graph a scheduler planned, and where each
/// vertex was: they apply to the graph that runs only if it is that graph.
pub(crate) struct GraphSlots {
    pub nodes: Vec<NodeId>,
    pub slots: Vec<Option<u32>>,
}

impl GraphSlots {
    fn fits(&self, g: &RepairGraph) -> bool {
        g.slots.iter().all(Option::is_none)
            && self.slots.len() == g.vertices.len()
            && g.vertices.iter().map(|v| v.node).eq(self.nodes.iter().copied())
    }
}

/// The order repairs start in. First RepairBoost's multi-node priority (§3.4, option b):
/// stripes that lost more chunks, being nearest to data loss, before those that lost fewer.
/// Then the scheduler's order: ChameleonEC's phases, then RepairBoost's timeslots. The sort
/// is stable, so chunks equal in both keep their listed order.
pub(crate) fn prioritise(todo: &mut [PendingRepair], first_slot: &HashMap<(u64, usize), (u32, u32)>) {
    let mut lost_in: HashMap<u64, usize> = HashMap::new();
    for p in todo.iter() {
        *lost_in.entry(p.stripe).or_default() += 1;
    }
    todo.sort_by_key(|p| (std::cmp::Reverse(lost_in[&p.stripe]), first_slot.get(&(p.stripe, p.index)).copied().unwrap_or((0, 0))));
}

/// Graphs a repair report carries at most (what ran, for replaying it in the simulator).
pub(crate) const REPORTED_GRAPHS: usize = 1024;
/// ... and their serialized bytes at most (a frame is 8 MiB).
const REPORTED_GRAPH_BYTES: usize = 4 << 20;

/// Where a planned repair sends the rebuilt chunk.
pub(crate) enum Target<'a> {
    /// To the client, for a degraded read.
    Reader,
    /// To a new home: the scheduler's choice when it still holds, else the least loaded node.
    Rebuild(Option<&'a Choice>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(stripe: u64, index: usize) -> PendingRepair {
        PendingRepair { stripe, index, method: Shape::Cr, slice: 1 << 20 }
    }

    #[test]
    fn stripes_that_lost_more_chunks_start_first_then_by_slot() {
        // Stripe 7 lost three chunks, stripe 3 two, stripes 1 and 9 one each.
        let mut todo = vec![pending(1, 0), pending(3, 2), pending(7, 0), pending(9, 4), pending(7, 5), pending(3, 1), pending(7, 2)];
        let mut slots = HashMap::new();
        slots.insert((9, 4), (0, 0));
        slots.insert((1, 0), (0, 3));
        slots.insert((7, 5), (0, 1));
        slots.insert((7, 0), (0, 2));
        slots.insert((7, 2), (0, 2));
        slots.insert((3, 1), (1, 0)); // a later ChameleonEC phase
        slots.insert((3, 2), (0, 9));
        prioritise(&mut todo, &slots);
        let order: Vec<(u64, usize)> = todo.iter().map(|p| (p.stripe, p.index)).collect();
        assert_eq!(order, vec![(7, 5), (7, 0), (7, 2), (3, 2), (3, 1), (9, 4), (1, 0)]);
        // Without a schedule, the priority alone, listed order within it.
        let mut todo = vec![pending(1, 0), pending(3, 2), pending(3, 1)];
        prioritise(&mut todo, &HashMap::new());
        let order: Vec<(u64, usize)> = todo.iter().map(|p| (p.stripe, p.index)).collect();
        assert_eq!(order, vec![(3, 2), (3, 1), (1, 0)]);
    }

    /// The default gates PPR's store-and-forward trees only; `all` every graph, `none` none.
    /// A scheduler's slots apply only to the graph it planned.
    #[test]
    fn timeslot_gating_by_graph_kind_and_only_on_the_planned_graph() {
        use crate::coordinator::TimeslotGating;
        let code = "rs:4,2".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
        let eq = code.repair_equation(0, &[1, 2, 3, 4]).unwrap();
        let task = RepairTask { equation: eq, helper_nodes: vec![1, 2, 3, 4], destination: 9 };
        let graph = |m| shapes::build(m, &task).unwrap();
        for (m, default) in [(Shape::Ppr, true), (Shape::Cr, false), (Shape::Ecpipe, false)] {
            assert_eq!(TimeslotGating::default().gates(&graph(m)), default, "{m}");
            assert!(TimeslotGating::All.gates(&graph(m)));
            assert!(!TimeslotGating::None.gates(&graph(m)));
        }
        let g = graph(Shape::Ppr);
        let slots = GraphSlots { nodes: g.vertices.iter().map(|v| v.node).collect(), slots: vec![Some(0); g.vertices.len()] };
        assert!(slots.fits(&g));
        let other = shapes::build(Shape::Ppr, &RepairTask { destination: 8, ..task.clone() }).unwrap();
        assert!(!slots.fits(&other), "another destination: another graph");
        assert_eq!("all".parse::<TimeslotGating>(), Ok(TimeslotGating::All));
        assert!("some".parse::<TimeslotGating>().is_err());
    }
}
