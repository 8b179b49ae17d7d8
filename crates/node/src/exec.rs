//! The network executor: runs this node's vertices of a repair graph over TCP.
//!
//! Edges are *pulled*: a vertex connects to the node of each of its inputs and asks for that
//! vertex's output stream (`Pull`), so a reader behind a firewall can be a sink. A vertex
//! produces unit u (a slice, or its whole lane for store-and-forward graphs) as soon as unit
//! u has arrived from every input: read the helper range from disk (checksums verified),
//! multiply, add the inputs, hand it to whoever pulls. Bounded channels, or where no
//! transfer waits on a timeslot the sockets themselves (a vertex then reads its inputs and
//! writes its pulled connection in one task), give backpressure from the slowest link back
//! to the disks. When a graph carries send slots (ECPipe cyclic), this node starts its
//! units' sends in slot order, at most one period ahead of the earliest unsent one
//! (`slot_gate`): the vertex waits for a unit's slot before it writes it.

use crate::shaper::Shaper;
use crate::store::{ChunkStore, ReadCache};
use crate::wire::{graph_from_wire, Job};
use kintsugi_plan::{NodeId, RepairGraph, VertexId};
use kintsugi_proto::WireError;
use kintsugi_proto::{Assignment, READER};
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};

/// Largest chunk a repair may rebuild (the coordinator allows 1 GiB chunks).
pub const MAX_CHUNK: u64 = 1 << 30;
/// Units (slices) a single repair may have at most: bounds memory for hostile plans.
pub const MAX_UNITS: usize = 1 << 22;
/// Units buffered between a vertex and whoever pulls its output.
const CHANNEL_DEPTH: usize = 8;
/// Units a vertex with send slots may have ready before their slots when its sends are
/// queued (a store-and-forward graph with slots; ECPipe cyclic's pipelined vertices wait for
/// each slot themselves, one unit ready): its sends go one per step, so a unit ready earlier
/// only waits. With [`CHANNEL_DEPTH`], the lane that starts a chain (no input to wait for)
/// ran about ten groups of slices ahead of its node's other lanes, and the blocks it read
/// left the shared read windows before they came (`terms::lane_windows`).
pub(crate) const SLOTTED_DEPTH: usize = 2;
/// Largest data frame on the wire. A unit (a slice, or a whole lane for store-and-forward
/// graphs) larger than this travels as several frames, so the sender's and the receiver's
/// links are busy at the same time instead of one after the other.
pub const WIRE_PIECE: usize = 64 * 1024;

pub use crate::counters::Counters;

/// One unit of a vertex's output and its send slot, if the graph has a schedule.
pub struct Unit {
    pub bytes: Vec<u8>,
    pub slot: Option<u64>,
}

pub(crate) type UnitResult = Result<Unit, WireError>;
pub use crate::input::{InputGate, InputStream, Opening};
use crate::output::{Output, OutputEnd};
pub use crate::sink::run_sink;
use crate::sink::store_and_forward;
pub use crate::slot_gate::SlotGate;
use crate::terms::{sum_inputs, SharedReads};
pub use crate::terms::{LocalTerm, RawInput};
use crate::timeslot_gate::{Ticket, TimeslotGates};

/// A repair registered on this node.
pub struct Run {
    pub assignment: Job,
    pub(crate) units: Vec<Vec<Vec<Range<usize>>>>,
    outputs: Mutex<HashMap<u32, OutputEnd>>,
    pub gate: Option<Arc<SlotGate>>,
    /// This repair's transfers at the node's timeslot gates (RepairBoost), if gated.
    pub ticket: Option<Arc<Ticket>>,
    /// The sink's result. Set with `send_replace`: a plain `send` is dropped while nobody
    /// waits yet, and a sink that finished before `WaitRepair` arrived would be waited for
    /// until the time limit.
    done: watch::Sender<Option<Result<u32, WireError>>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Read caches of the helper chunks this node reads, by term.
    pub(crate) caches: Mutex<HashMap<usize, Arc<Mutex<ReadCache>>>>,
    /// Bytes of the rebuilt chunk the sink here has written (progress reports).
    pub(crate) written: Arc<AtomicU64>,
}

impl Run {
    /// Whether this node's vertices of the repair write their pulled connections and read
    /// their inputs themselves (`output`, `input::Inline`), the sink too: pipelined graphs
    /// whose transfers wait on no timeslot. A send slot (ECPipe cyclic) is waited for by
    /// the vertex before it writes its unit. Sends gated by timeslots (RepairBoost) are
    /// served from a queue and their inputs read by tasks of their own; store-and-forward
    /// lanes keep both.
    fn inline_pipeline(&self) -> bool {
        self.assignment.graph.pipelined && self.ticket.is_none()
    }
}

/// The repairs a node is running.
pub struct Executor {
    pub node: NodeId,
    pub store: Arc<ChunkStore>,
    /// Space the node may fill (None: its file system's).
    pub capacity_bytes: Option<u64>,
    pub shaper: Arc<Shaper>,
    pub counters: Arc<Counters>,
    pub io_timeout: Duration,
    /// DSCP of what this node sends for repairs (not degraded reads); None: unmarked.
    pub repair_dscp: Option<u8>,
    runs: Mutex<HashMap<u64, Arc<Run>>>,
    registered: Notify,
    /// RepairBoost's timeslots across this node's repairs.
    pub timeslots: Arc<TimeslotGates>,
    /// Read windows of helper chunks, shared by every repair reading the same chunk at once.
    pub(crate) shared_reads: SharedReads,
    /// What the link carried over the last heartbeat period, as reported to the coordinator.
    pub last_link: std::sync::Mutex<Option<kintsugi_proto::LinkReport>>,
}

impl Executor {
    pub fn new(node: NodeId, store: Arc<ChunkStore>, shaper: Arc<Shaper>, io_timeout: Duration) -> Self {
        Executor {
            node,
            store,
            capacity_bytes: None,
            shaper,
            counters: Arc::new(Counters::default()),
            io_timeout,
            repair_dscp: None,
            runs: Mutex::new(HashMap::new()),
            registered: Notify::new(),
            timeslots: Arc::default(),
            shared_reads: SharedReads::default(),
            last_link: Default::default(),
        }
    }

    /// The space this node may fill: its configured capacity, or what its file system
    /// holds (`used` plus what is still free there).
    pub fn capacity(&self, used: u64) -> u64 {
        let fs = self.store.fs_free().map_or(u64::MAX, |free| used.saturating_add(free));
        self.capacity_bytes.map_or(fs, |c| c.min(fs))
    }

    /// Refuses a new chunk of `len` bytes that would not fit.
    pub fn check_space(&self, len: u64) -> Result<(), WireError> {
        let used = self.store.usage().1;
        let cap = self.capacity(used);
        if used.saturating_add(len) > cap {
            // Unavailable, not refused: another node may take the chunk, or collection free room.
            return Err(WireError::unavailable(format!(
                "node {} is full: {used} of {cap} bytes used, a chunk of {len} does not fit",
                self.node
            )));
        }
        Ok(())
    }

    /// Registers a repair and starts this node's vertices.
    pub fn start(self: &Arc<Self>, a: Assignment) -> Result<(), WireError> {
        let (a, units) = check_assignment(a)?;
        let g = &a.graph;
        if !g.vertices.iter().any(|v| v.node == self.node) {
            return Err(WireError::internal(format!("node {} holds no vertex of repair {}", self.node, a.repair)));
        }
        let mut pending = BTreeSet::new();
        for (v, rule) in g.slots.iter().enumerate() {
            if let Some(rule) = rule {
                if g.vertices[v].node == self.node {
                    for u in 0..units[g.vertices[v].lane].len() as u64 {
                        pending.insert(rule.slot(u));
                    }
                }
            }
        }
        // Slack of one period: a node's lanes keep within one slice of each other.
        let slack = g.slots.iter().flatten().map(|r| r.period).max().unwrap_or(0);
        let gate = (!pending.is_empty()).then(|| Arc::new(SlotGate::new(pending, slack)));
        let ticket = self.timeslot_ticket(&a);
        let (done, _) = watch::channel(None);
        let run = Arc::new(Run {
            assignment: a,
            units,
            outputs: Mutex::new(HashMap::new()),
            gate,
            ticket,
            done,
            tasks: Mutex::new(Vec::new()),
            caches: Mutex::default(),
            written: Arc::default(),
        });
        // Every output exists before the run is visible to `Pull`s.
        let mut senders = HashMap::new();
        let degraded = run.assignment.store.is_none();
        for (i, vx) in run.assignment.graph.vertices.iter().enumerate() {
            if vx.node == self.node && VertexId(i as u32) != run.assignment.graph.sink {
                let (out, end) = if run.inline_pipeline() {
                    Output::pulled(self.shaper.clone(), self.counters.clone(), degraded, run.gate.clone(), self.io_timeout)
                } else {
                    // A send gated by a timeslot may wait for it: the vertex then keeps
                    // taking its inputs (see `input::open_task`) and holds its whole lane.
                    let slotted = run.assignment.graph.slots.get(i).copied().flatten().is_some();
                    let depth = if run.ticket.is_some() {
                        run.units[vx.lane].len().max(1)
                    } else if slotted {
                        SLOTTED_DEPTH
                    } else {
                        CHANNEL_DEPTH
                    };
                    let (tx, rx) = mpsc::channel(depth);
                    (Output::Queue(tx), OutputEnd::Queue(rx))
                };
                run.outputs.lock().expect("outputs lock").insert(i as u32, end);
                senders.insert(i as u32, out);
            }
        }
        {
            let mut runs = self.runs.lock().expect("runs lock");
            if runs.contains_key(&run.assignment.repair) {
                return Err(WireError::internal(format!("repair {} is already running here", run.assignment.repair)));
            }
            runs.insert(run.assignment.repair, run.clone());
        }
        self.registered.notify_waiters();
        tracing::debug!(node = self.node, repair = run.assignment.repair, "repair registered");
        self.counters.active.fetch_add(1, Ordering::Relaxed);
        let g = &run.assignment.graph;
        let mut handles = Vec::new();
        for (i, vx) in g.vertices.iter().enumerate() {
            if vx.node != self.node {
                continue;
            }
            let v = VertexId(i as u32);
            let (exec, run2) = (self.clone(), run.clone());
            if v == g.sink {
                handles.push(tokio::spawn(async move {
                    let result = exec.store_sink(&run2).await;
                    tracing::debug!(node = exec.node, repair = run2.assignment.repair, ?result, "sink finished");
                    if let Some(t) = &run2.ticket {
                        t.release();
                    }
                    run2.done.send_replace(Some(result));
                }));
            } else {
                let mut out = senders.remove(&(i as u32)).expect("an output per vertex");
                handles.push(tokio::spawn(async move {
                    let r = exec.vertex(&run2, v, &mut out).await;
                    tracing::debug!(node = exec.node, repair = run2.assignment.repair, vertex = v.0, ?r, "vertex finished");
                    if let Err(e) = r {
                        if let Some(gate) = &run2.gate {
                            gate.fail(&e);
                        }
                        // A failed repair holds no timeslot: it is re-planned elsewhere.
                        if let Some(t) = &run2.ticket {
                            t.release();
                        }
                        out.fail(e).await;
                    }
                }));
            }
        }
        // Forget the repair once its tasks are done, or abort it when it outlives its time.
        let limit = self.repair_time_limit(&run.assignment);
        let (exec, run2) = (self.clone(), run.clone());
        let aborts: Vec<_> = handles.iter().map(|h| h.abort_handle()).collect();
        run.tasks.lock().expect("tasks lock").extend(aborts);
        tokio::spawn(async move {
            let all = futures_join(handles);
            if tokio::time::timeout(limit, all).await.is_err() {
                for h in run2.tasks.lock().expect("tasks lock").iter() {
                    h.abort();
                }
                run2.done
                    .send_replace(Some(Err(WireError::internal(format!("repair {} timed out after {limit:?}", run2.assignment.repair)))));
            }
            // The helper chunks' read windows go now: nothing reads them any more. Kept with
            // the run, they held memory for io_timeout, and a later repair or degraded read
            // of the same chunk got its bytes from them without the disk.
            run2.caches.lock().expect("caches lock").clear();
            // Outputs may still be pulled for a while after the vertices finish producing.
            tokio::time::sleep(exec.io_timeout).await;
            if let Some(t) = &run2.ticket {
                t.release();
            }
            exec.runs.lock().expect("runs lock").remove(&run2.assignment.repair);
            exec.counters.active.fetch_sub(1, Ordering::Relaxed);
        });
        Ok(())
    }

    /// Registers a repair's transfers at this node's timeslot gates: the sends of its
    /// vertices here to other nodes, and what its vertices here receive from other nodes.
    /// Graphs with their own send slots (ECPipe cyclic) order themselves and are not gated.
    fn timeslot_ticket(&self, a: &Job) -> Option<Arc<Ticket>> {
        let g = &a.graph;
        if a.timeslots.is_empty() || g.slots.iter().any(Option::is_some) {
            return None;
        }
        let (mut sends, mut receives) = (Vec::new(), Vec::new());
        for (i, vx) in g.vertices.iter().enumerate() {
            let (Some(out), Some(slot)) = (vx.output, a.timeslots[i]) else { continue };
            let to = g.vertex(out).node;
            if vx.node == to {
                continue;
            }
            if vx.node == self.node {
                sends.push(slot);
            }
            if to == self.node {
                receives.push(slot);
            }
        }
        (!sends.is_empty() || !receives.is_empty()).then(|| self.timeslots.register_in(a.gate_batch, sends, receives))
    }

    /// The gate an input of a vertex on this node waits at, if its transfer is gated.
    pub(crate) fn input_gate(run: &Run, node: NodeId, from: VertexId) -> Option<InputGate> {
        let ticket = run.ticket.clone()?;
        let slot = run.assignment.timeslots.get(from.index()).copied().flatten()?;
        (run.assignment.graph.vertex(from).node != node).then_some(InputGate { ticket, slot })
    }

    /// How an input of a vertex on this node is read.
    pub(crate) fn input_opening(run: &Run, node: NodeId, from: VertexId) -> Opening {
        match Self::input_gate(run, node, from) {
            Some(gate) => Opening::Task(Some(gate)),
            None if run.inline_pipeline() => Opening::Inline,
            None => Opening::Task(None),
        }
    }

    /// Helper chunks some repair here is reading now (repairs reading one chunk at once
    /// share its verified reads: a read of it starting now may take no bytes from disk).
    pub fn chunks_being_read(&self) -> usize {
        self.shared_reads.live()
    }

    /// Generous: ten times the time the whole chunk needs at 1 MB/s, at least a minute.
    fn repair_time_limit(&self, a: &Job) -> Duration {
        Duration::from_secs_f64((a.chunk_len as f64 / 1e6 * 10.0).max(60.0))
    }

    /// The output of a vertex, once (waits for the repair to be registered).
    pub async fn take_output(&self, repair: u64, vertex: u32) -> Result<(Arc<Run>, OutputEnd), WireError> {
        let deadline = tokio::time::Instant::now() + self.io_timeout;
        loop {
            let notified = self.registered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(run) = self.runs.lock().expect("runs lock").get(&repair).cloned() {
                let rx = run.outputs.lock().expect("outputs lock").remove(&vertex);
                return match rx {
                    Some(rx) => Ok((run, rx)),
                    None => Err(WireError::internal(format!(
                        "vertex {vertex} of repair {repair} is not on node {} or was already pulled",
                        self.node
                    ))),
                };
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(WireError::internal(format!("repair {repair} is not registered on node {}", self.node)));
            }
        }
    }

    /// Waits for this node's sink of `repair` to store the chunk.
    pub async fn wait(&self, repair: u64, limit: Duration) -> Result<u32, WireError> {
        let run = self
            .runs
            .lock()
            .expect("runs lock")
            .get(&repair)
            .cloned()
            .ok_or_else(|| WireError::not_found(format!("repair {repair} is not known on node {}", self.node)))?;
        let mut rx = run.done.subscribe();
        let r = tokio::time::timeout(limit, rx.wait_for(|d| d.is_some())).await;
        match r {
            Ok(Ok(v)) => v.clone().expect("waited for some"),
            Ok(Err(_)) => Err(WireError::internal("repair ended without a result")),
            Err(_) => Err(WireError::internal(format!("repair {repair} did not finish within {limit:?}"))),
        }
    }

    /// How far this node's sink of `repair` is: bytes written and whether it is done;
    /// None when the repair is not known here.
    pub fn progress(&self, repair: u64) -> Option<(u64, bool)> {
        let run = self.runs.lock().expect("runs lock").get(&repair).cloned()?;
        let done = run.done.borrow().is_some();
        Some((run.written.load(Ordering::Relaxed), done))
    }

    /// Stops this node's part of `repair`: its tasks end (their sockets close, so peers
    /// reading from them stop too), a waiter hears that it was cancelled, and its
    /// timeslots are freed. The temporary file of a half-written chunk is removed by the
    /// store's writer when its task is dropped. Returns whether the repair was known.
    pub fn cancel(&self, repair: u64) -> bool {
        let Some(run) = self.runs.lock().expect("runs lock").get(&repair).cloned() else { return false };
        for h in run.tasks.lock().expect("tasks lock").iter() {
            h.abort();
        }
        if let Some(gate) = &run.gate {
            gate.fail(&WireError::internal("cancelled"));
        }
        if let Some(t) = &run.ticket {
            t.release();
        }
        run.done.send_if_modified(|d| {
            let fresh = d.is_none();
            if fresh {
                *d = Some(Err(WireError::internal(format!("repair {repair} was cancelled by the coordinator"))));
            }
            fresh
        });
        tracing::debug!(node = self.node, repair, "repair cancelled");
        true
    }

    /// Aborts every running repair (the node is stopping).
    pub fn abort_all(&self) {
        for run in self.runs.lock().expect("runs lock").values() {
            for h in run.tasks.lock().expect("tasks lock").iter() {
                h.abort();
            }
        }
    }

    async fn vertex(&self, run: &Run, v: VertexId, out: &mut Output) -> Result<(), WireError> {
        let a = &run.assignment;
        let g = &a.graph;
        let vx = g.vertex(v);
        let units = &run.units[vx.lane];
        let alpha = g.equation.sub_chunks;
        let sizes: Vec<usize> = units.iter().map(|ws| alpha * ws.iter().map(|w| w.len()).sum::<usize>()).collect();
        let mut inputs: Vec<(InputStream, Option<RawInput>)> = vx
            .inputs
            .iter()
            .map(|&i| {
                let raw = RawInput::of(g, i);
                let sizes = unit_sizes(units, g.payload_width(i));
                let how = Self::input_opening(run, self.node, i);
                (crate::input::open(a, i, sizes, self.shaper.clone(), self.counters.clone(), self.io_timeout, how), raw)
            })
            .collect();
        let local = match vx.local {
            Some(t) => Some(LocalTerm::open(&self.store, a, t, self.counters.clone(), &run.caches, &self.shared_reads, self.node)?),
            None => None,
        };
        crate::disk_emulation::settle().await;
        let raw_out = g.sends_raw(v);
        let rule = g.slots.get(v.index()).copied().flatten();
        if !g.pipelined && rule.is_none() {
            let widths: Vec<usize> = vx.inputs.iter().map(|&i| g.payload_width(i)).collect();
            return store_and_forward(units, alpha, &mut inputs, &widths, local.as_ref(), raw_out, out).await;
        }
        let mut held = Vec::new();
        for (u, windows) in units.iter().enumerate() {
            let start = match local.as_ref() {
                Some(l) if raw_out => Some(l.raw(windows)?),
                _ => None,
            };
            crate::disk_emulation::settle().await;
            let acc = match local.as_ref().filter(|_| !raw_out) {
                // A source: its term is the whole unit.
                Some(l) if inputs.is_empty() => {
                    let mut acc = crate::pool::overwritable(sizes[u]);
                    l.put(windows, alpha, &mut acc)?;
                    crate::disk_emulation::settle().await;
                    acc
                }
                Some(l) => {
                    let mut acc = out.alive(sum_inputs(&mut inputs, windows, alpha, sizes[u], start)).await??;
                    l.add(windows, alpha, &mut acc)?;
                    crate::disk_emulation::settle().await;
                    acc
                }
                None => out.alive(sum_inputs(&mut inputs, windows, alpha, sizes[u], start)).await??,
            };
            let unit = Unit { bytes: acc, slot: rule.map(|r| r.slot(u as u64)) };
            if g.pipelined {
                out.send(unit).await?;
            } else {
                held.push(unit);
            }
        }
        for unit in held {
            out.send(unit).await?;
        }
        out.finish().await
    }
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        let _ = h.await;
    }
}

/// The slices each lane of a checked job streams: per lane, per unit, the sub-chunk windows.
pub type LaneUnits = Vec<Vec<Vec<Range<usize>>>>;

/// Turns a plan from the network into a job and checks it before anything is allocated
/// for it.
pub fn check_assignment(a: Assignment) -> Result<(Job, LaneUnits), WireError> {
    let a = a.map_graph(graph_from_wire)?;
    let units = check_job(&a)?;
    Ok((a, units))
}

/// Checks a job (a plan already in the planner's types) as [`check_assignment`] does.
pub fn check_job(a: &Job) -> Result<LaneUnits, WireError> {
    let g: &RepairGraph = &a.graph;
    g.validate().map_err(|e| WireError::bad_request(e.to_string()))?;
    if a.term_chunks.len() != g.equation.terms.len() {
        return Err(WireError::bad_request(format!("{} chunk names for {} equation terms", a.term_chunks.len(), g.equation.terms.len())));
    }
    if a.chunk_len == 0 || a.slice_len == 0 || a.chunk_len > MAX_CHUNK {
        return Err(WireError::bad_request(format!(
            "chunk length {} and slice length {} must be positive (and the chunk at most {MAX_CHUNK} bytes)",
            a.chunk_len, a.slice_len
        )));
    }
    if let Some(off) = a.term_offset.filter(|_| g.equation.sub_chunks != 1 || a.store.is_some()) {
        return Err(WireError::bad_request(format!(
            "a ranged repair (from byte {off}) needs a code of one sub-chunk and goes to a reader"
        )));
    }
    if !a.timeslots.is_empty() && a.timeslots.len() != g.vertices.len() {
        return Err(WireError::bad_request(format!("{} timeslots for {} vertices", a.timeslots.len(), g.vertices.len())));
    }
    for v in &g.vertices {
        if v.node != READER && !a.peers.contains_key(&v.node) {
            return Err(WireError::bad_request(format!("the plan has no address for node {}", v.node)));
        }
    }
    let sub = kintsugi_codes::sub_len(g.equation.sub_chunks, a.chunk_len as usize).map_err(|e| WireError::bad_request(e.to_string()))?;
    let units = sub.div_ceil(a.slice_len as usize);
    if units > MAX_UNITS {
        return Err(WireError::bad_request(format!("{units} slices per chunk exceed the limit of {MAX_UNITS}; use larger slices")));
    }
    g.lane_units(a.chunk_len as usize, a.slice_len as usize).map_err(|e| WireError::bad_request(e.to_string()))
}

/// Bytes of each unit when every window carries `width` sub-chunk windows.
pub(crate) fn unit_sizes(units: &[Vec<Range<usize>>], width: usize) -> Vec<usize> {
    units.iter().map(|ws| width * ws.iter().map(|w| w.len()).sum::<usize>()).collect()
}
