//! The discrete-event engine. In the slice model every graph edge streams its lane's slices
//! in order, one slice in flight per edge (a TCP stream); a vertex sends slice j once slice
//! j has arrived on all its inputs (and its own disk read of slice j is done); a
//! store-and-forward graph (PPR) moves each lane as one unit. The fluid model ([`fluid`])
//! moves a whole pipelined repair as one flow instead, and a timeslot-gated one edge by
//! edge ([`overlap`]), so events scale with repairs, not slices. Concurrent transfers
//! share links max-min fairly, recomputed at every event; time jumps from event to event
//! (transfer completions, timers).

mod fluid;
mod gates;
mod overlap;

use crate::error::{Result, SimError};
use crate::maxmin::FlowResources;
use crate::network::{res_disk_read, res_disk_write, res_down, res_up, Direction, Network};
use crate::sharing::Sharing;
use kintsugi_plan::{NodeId, RepairGraph, VertexId};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// Units a relay receives ahead of what it has forwarded: the executor's bounded input
/// queue (`node::input::INPUT_AHEAD`). Without a bound an upstream hop would run
/// arbitrarily far ahead of a slower downstream one, which no real relay allows.
pub const RELAY_WINDOW: u32 = 4;

/// One repair to run: a graph, the chunk and slice sizes, and the earliest start.
#[derive(Clone, Debug)]
pub struct Job {
    pub graph: RepairGraph,
    pub chunk_len: usize,
    pub slice_len: usize,
    /// Seconds after the start of the simulation before which the job may not start.
    pub release: f64,
    /// A transmission schedule across jobs (RepairBoost's timeslots): per vertex, the slot
    /// of its send. A node sends a scheduled transfer only when all its sends of earlier
    /// slots have finished, and a node receives it only when all its receives of earlier
    /// slots have. Empty: no schedule.
    pub timeslots: Vec<Option<u32>>,
}

/// Which jobs run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    /// Every job starts at its release time.
    All,
    /// Each destination node runs at most this many repairs at a time, in job order
    /// (like Ceph's osd_recovery_max_active or HDFS's replication streams).
    PerDestination(usize),
}

/// How pipelined repairs are modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// Every slice of every edge is a transfer: the reference, exact for the executors'
    /// schedule, with cost proportional to chunk/slice per edge.
    #[default]
    Slice,
    /// A pipelined repair is one flow at one rate on all its edges (its weight on a link is
    /// the number of its edges there), plus its pipeline's fill; a timeslot-gated one moves
    /// edge by edge, each edge following its inputs. Store-and-forward graphs, and repairs
    /// reading from disks with a seek cost, run as in the slice model.
    Fluid,
}

impl std::str::FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "slice" => Ok(Model::Slice),
            "fluid" => Ok(Model::Fluid),
            _ => Err(format!("unknown model '{s}': expected slice or fluid")),
        }
    }
}

/// Knobs of one run.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub admission: Admission,
    pub model: Model,
    /// Keep each node's link rates over time (for utilisation CSVs and plots).
    pub track_utilization: bool,
    /// Recompute all fair shares at every event instead of only the affected flows
    /// (same result, much slower: the reference the incremental path is tested against).
    pub full_recompute: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions { admission: Admission::All, model: Model::Slice, track_utilization: false, full_recompute: false }
    }
}

/// When a job started and finished.
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    pub start: f64,
    pub end: f64,
}

/// Rate changes of one node: (time, uplink bytes/s, downlink bytes/s) from then on.
pub type RateLog = Vec<(f64, f64, f64)>;

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct SimResult {
    /// Time when the last job finished.
    pub makespan: f64,
    pub jobs: Vec<JobResult>,
    /// Bytes each node sent / received over the network.
    pub upload_bytes: Vec<f64>,
    pub download_bytes: Vec<f64>,
    /// Events processed and transfers simulated (the cost drivers).
    pub events: u64,
    pub transfers: u64,
    /// Fair-share updates done incrementally, and by full recompute.
    pub local_updates: u64,
    pub full_updates: u64,
    /// Per node, when tracking was asked for.
    pub rates: Option<Vec<RateLog>>,
}

#[derive(Clone, Copy, Debug)]
enum FlowKind {
    Net {
        job: u32,
        vertex: u32,
    },
    Read {
        job: u32,
        vertex: u32,
    },
    Write {
        job: u32,
    },
    /// A whole pipelined repair (the fluid model).
    Fluid {
        job: u32,
    },
}

struct Flow {
    kind: FlowKind,
    /// Bytes left at time `t0`, moving at `rate` since.
    remaining: f64,
    t0: f64,
    rate: f64,
    src: NodeId,
    dst: NodeId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Release(u32),
    StartRead {
        job: u32,
        vertex: u32,
    },
    Foreground(u32),
    /// An overlapped edge's last slice arrives (see [`overlap`]).
    Deliver {
        job: u32,
        vertex: u32,
    },
    /// A fluid repair's last slice reaches its sink (see [`fluid`]).
    Finish(u32),
}

/// f64 with a total order, for the timer heap.
#[derive(Clone, Copy, Debug, PartialEq)]
struct T(f64);
impl Eq for T {}
impl PartialOrd for T {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for T {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// How one job runs (see [`Model`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobMode {
    Slice,
    Fluid,
    Overlap,
}

struct JobState {
    mode: JobMode,
    /// Whether the graph's slot rules order this job's sends.
    slot_rules: bool,
    /// Whether a timeslot schedule gates this job's transfers.
    gated: bool,
    /// Window length of each lane-local unit, per lane (one unit per lane for fluid and
    /// overlapped jobs).
    windows: Vec<Vec<u32>>,
    /// Longest window of one slice: what a pipeline's fill moves per stage.
    slice_window: f64,
    alpha: f64,
    /// Sub-chunk windows each vertex sends per slice window (raw Clay reads or alpha).
    width: Vec<f64>,
    delivered: Vec<u32>,
    sending: Vec<bool>,
    read_done: Vec<u32>,
    reading: Vec<bool>,
    sink_next: Vec<u32>,
    /// Sink inputs per lane.
    sink_inputs: Vec<Vec<VertexId>>,
    write_queue: VecDeque<f64>,
    writing: bool,
    units_done: usize,
    units_total: usize,
    started: bool,
    finished: bool,
    /// With a slot schedule: per node, the slots of its sends not yet completed.
    pending_slots: HashMap<NodeId, std::collections::BTreeSet<u64>>,
    /// With a slot schedule: the vertices on each node.
    node_vertices: HashMap<NodeId, Vec<u32>>,
    /// Overlapped jobs: per vertex, whether it has begun sending, whether its own transfer
    /// is done (it may still wait for its inputs), and when it delivered.
    started_v: Vec<bool>,
    flow_done: Vec<bool>,
    delivered_at: Vec<f64>,
    /// Fluid jobs: the one flow's resources with weights, its volume (payload plus fill)
    /// and its payload, in window bytes.
    fluid: Option<fluid::FluidFlow>,
}

struct Engine<'a> {
    net: &'a Network,
    jobs: &'a [Job],
    st: Vec<JobState>,
    base_caps: Vec<f64>,
    pair_ids: HashMap<(NodeId, NodeId), u32>,
    /// Flows by sharing id (ids are reused after a flow ends).
    flows: Vec<Option<Flow>>,
    /// Per id, bumped at every rate change and reuse, so stale completion entries are skipped.
    versions: Vec<u32>,
    sharing: Sharing,
    changed: Vec<u32>,
    completions: BinaryHeap<Reverse<(T, u32, u32)>>,
    timers: BinaryHeap<Reverse<(T, u64, Timer)>>,
    seq: u64,
    now: f64,
    node_up: Vec<f64>,
    node_down: Vec<f64>,
    /// Nodes whose link rates changed by a removal since the last reshare.
    removed_nodes: Vec<NodeId>,
    results: Vec<JobResult>,
    up_bytes: Vec<f64>,
    down_bytes: Vec<f64>,
    events: u64,
    transfers: u64,
    // Admission per destination.
    queues: std::collections::BTreeMap<NodeId, VecDeque<u32>>,
    active: HashMap<NodeId, usize>,
    admission: Admission,
    jobs_left: usize,
    // Foreground: (time, resource, rate) changes, applied in order.
    fg_changes: Vec<(f64, u32, f64)>,
    rates_log: Option<Vec<RateLog>>,
    /// Timeslot gates (RepairBoost).
    gates: gates::Gates,
    /// Scratch: flows finishing at the current event.
    done: Vec<Flow>,
    /// The last event only ended fluid flows that now drain: share at the next one.
    defer_reshare: bool,
}

/// Runs `jobs` on `net` to completion.
pub fn run(net: &Network, jobs: &[Job], opts: &SimOptions) -> Result<SimResult> {
    run_with_progress(net, jobs, opts, &mut |_| {})
}

/// Like [`run`], calling `progress(jobs finished)` as repairs complete.
pub fn run_with_progress(net: &Network, jobs: &[Job], opts: &SimOptions, progress: &mut dyn FnMut(usize)) -> Result<SimResult> {
    net.validate()?;
    let n_nodes = net.nodes.len();
    let mut st = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        for v in &j.graph.vertices {
            if v.node as usize >= n_nodes {
                return Err(SimError::BadScenario(format!("job {i} places a vertex on node {}, the network has {n_nodes}", v.node)));
            }
        }
        if !(j.release >= 0.0 && j.release.is_finite()) {
            return Err(SimError::BadScenario(format!("job {i} has release time {}", j.release)));
        }
        st.push(JobState::new(j, job_mode(net, j, opts.model))?);
    }
    if let Admission::PerDestination(0) = opts.admission {
        return Err(SimError::BadScenario("at least one repair per destination must be allowed to run".into()));
    }
    let (base_caps, pair_ids) = net.resources();
    let mut fg_changes = Vec::new();
    for f in &net.foreground {
        let r = match f.direction {
            Direction::Up => res_up(f.node),
            Direction::Down => res_down(f.node),
        };
        fg_changes.extend(f.points.iter().map(|&(t, rate)| (t, r, rate)));
    }
    fg_changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut e = Engine {
        net,
        jobs,
        st,
        sharing: Sharing::new(base_caps.clone()),
        base_caps,
        pair_ids,
        flows: Vec::new(),
        versions: Vec::new(),
        changed: Vec::new(),
        completions: BinaryHeap::new(),
        timers: BinaryHeap::new(),
        seq: 0,
        now: 0.0,
        node_up: vec![0.0; n_nodes],
        node_down: vec![0.0; n_nodes],
        removed_nodes: Vec::new(),
        results: vec![JobResult { start: f64::NAN, end: f64::NAN }; jobs.len()],
        up_bytes: vec![0.0; n_nodes],
        down_bytes: vec![0.0; n_nodes],
        events: 0,
        transfers: 0,
        queues: std::collections::BTreeMap::new(),
        active: HashMap::new(),
        admission: opts.admission,
        jobs_left: jobs.len(),
        fg_changes,
        rates_log: opts.track_utilization.then(|| vec![Vec::new(); n_nodes]),
        gates: gates::Gates::new(n_nodes),
        done: Vec::new(),
        defer_reshare: false,
    };
    for j in jobs {
        let g = &j.graph;
        for (v, slot) in j.timeslots.iter().enumerate() {
            let (Some(slot), Some(vx)) = (slot, g.vertices.get(v)) else { continue };
            let Some(out) = vx.output else { continue };
            let to = g.vertex(out).node;
            if to != vx.node {
                e.gates.schedule(vx.node, to, *slot);
            }
        }
    }
    for i in 0..e.fg_changes.len() {
        let t = e.fg_changes[i].0;
        e.timer(t, Timer::Foreground(i as u32));
    }
    match opts.admission {
        Admission::All => {
            for (i, j) in jobs.iter().enumerate() {
                e.timer(j.release, Timer::Release(i as u32));
            }
        }
        Admission::PerDestination(_) => {
            for (i, j) in jobs.iter().enumerate() {
                let dest = j.graph.vertex(j.graph.sink).node;
                e.queues.entry(dest).or_default().push_back(i as u32);
            }
            let dests: Vec<NodeId> = e.queues.keys().copied().collect();
            for d in dests {
                e.admit(d);
            }
        }
    }
    e.sharing.always_full = opts.full_recompute;
    e.main_loop(progress)?;
    let makespan = e.results.iter().map(|r| r.end).fold(0.0, f64::max);
    if std::env::var_os("KINTSUGI_SIM_DEBUG").is_some() {
        let s = &e.sharing;
        eprintln!(
            "sharing: {} local (mean set {:.1}, {:.2} rounds), {} full",
            s.local_updates,
            s.set_sizes as f64 / s.local_updates.max(1) as f64,
            s.rounds as f64 / s.local_updates.max(1) as f64,
            s.full_updates
        );
    }
    Ok(SimResult {
        makespan,
        jobs: e.results,
        upload_bytes: e.up_bytes,
        download_bytes: e.down_bytes,
        events: e.events,
        transfers: e.transfers,
        local_updates: e.sharing.local_updates,
        full_updates: e.sharing.full_updates,
        rates: e.rates_log,
    })
}

/// The mode a job runs in under `model`.
fn job_mode(net: &Network, j: &Job, model: Model) -> JobMode {
    let g = &j.graph;
    if model == Model::Slice || !g.pipelined {
        return JobMode::Slice;
    }
    // A seek per slice read is a latency the fluid flow cannot carry: keep those slices.
    let seeks = g.vertices.iter().any(|v| {
        let n = &net.nodes[v.node as usize];
        v.local.is_some() && n.disk_read.is_some() && n.seek > 0.0
    });
    if seeks {
        JobMode::Slice
    } else if j.timeslots.iter().any(Option::is_some) {
        JobMode::Overlap
    } else {
        JobMode::Fluid
    }
}

impl JobState {
    fn new(j: &Job, mode: JobMode) -> Result<Self> {
        let g = &j.graph;
        let lanes = g.lanes;
        let bad = |e: kintsugi_plan::PlanError| SimError::BadScenario(e.to_string());
        // Slice j of each sub-chunk travels in lane j mod lanes (RepairGraph::slices); only
        // lengths matter here, so count them rather than list 2048 ranges per repair.
        let sub = kintsugi_codes::sub_len(g.equation.sub_chunks, j.chunk_len).map_err(|e| SimError::BadScenario(e.to_string()))?;
        if j.slice_len == 0 {
            return Err(bad(kintsugi_plan::PlanError::Invalid("slice size must be at least 1 byte".into())));
        }
        let n_slices = sub.div_ceil(j.slice_len);
        let slice_window = j.slice_len.min(sub) as f64;
        let lane_total = |l: usize| -> u64 {
            if l >= n_slices {
                return 0;
            }
            let count = (n_slices - 1 - l) / lanes + 1;
            let short = if (n_slices - 1) % lanes == l { n_slices * j.slice_len - sub } else { 0 };
            (count * j.slice_len - short) as u64
        };
        // Bytes of each unit per lane: a slice, or the whole lane for store-and-forward graphs
        // (the very units the network executor moves). Fluid and overlapped jobs move each
        // lane as one unit too: only its total matters.
        let windows: Vec<Vec<u32>> = if mode == JobMode::Slice && g.pipelined {
            g.lane_units(j.chunk_len, j.slice_len)
                .map_err(bad)?
                .iter()
                .map(|lane| lane.iter().map(|ws| ws.iter().map(|w| w.len() as u32).sum()).collect())
                .collect()
        } else {
            (0..lanes).map(lane_total).map(|t| if t == 0 { Vec::new() } else { vec![t as u32] }).collect()
        };
        let nv = g.vertices.len();
        let mut sink_inputs = vec![Vec::new(); lanes];
        for &i in &g.vertex(g.sink).inputs {
            sink_inputs[g.vertex(i).lane].push(i);
        }
        let units_total = windows.iter().map(|w| w.len()).sum();
        let mut pending_slots: HashMap<NodeId, std::collections::BTreeSet<u64>> = HashMap::new();
        let mut node_vertices: HashMap<NodeId, Vec<u32>> = HashMap::new();
        // Slot rules order a node's slices across lanes (ECPipe cyclic); with whole-lane
        // units fair sharing stands in for that interleaving. A timeslot schedule across
        // repairs (RepairBoost) replaces them: obeying both can deadlock, a node's next
        // slice by rule waiting behind a gate that only a later slice can open.
        let gated = j.timeslots.iter().any(Option::is_some);
        let slot_rules = mode == JobMode::Slice && !gated;
        for (v, rule) in g.slots.iter().enumerate() {
            let Some(rule) = rule.filter(|_| slot_rules) else { continue };
            let vx = &g.vertices[v];
            node_vertices.entry(vx.node).or_default().push(v as u32);
            let set = pending_slots.entry(vx.node).or_default();
            for u in 0..windows[vx.lane].len() as u64 {
                set.insert(rule.slot(u));
            }
        }
        let overlap = mode == JobMode::Overlap;
        Ok(JobState {
            mode,
            slot_rules,
            gated,
            windows,
            slice_window,
            alpha: g.equation.sub_chunks as f64,
            width: (0..nv).map(|v| g.payload_width(VertexId(v as u32)) as f64).collect(),
            delivered: vec![0; nv],
            sending: vec![false; nv],
            read_done: vec![0; nv],
            reading: vec![false; nv],
            sink_next: vec![0; lanes],
            sink_inputs,
            write_queue: VecDeque::new(),
            writing: false,
            units_done: 0,
            units_total,
            started: false,
            finished: false,
            pending_slots,
            node_vertices,
            started_v: if overlap { vec![false; nv] } else { Vec::new() },
            flow_done: if overlap { vec![false; nv] } else { Vec::new() },
            delivered_at: if overlap { vec![0.0; nv] } else { Vec::new() },
            fluid: None,
        })
    }
}

impl<'a> Engine<'a> {
    fn timer(&mut self, t: f64, what: Timer) {
        self.seq += 1;
        self.timers.push(Reverse((T(t), self.seq, what)));
    }

    fn admit(&mut self, dest: NodeId) {
        let Admission::PerDestination(max) = self.admission else { return };
        while self.active.get(&dest).copied().unwrap_or(0) < max {
            let Some(j) = self.queues.get_mut(&dest).and_then(|q| q.pop_front()) else { break };
            *self.active.entry(dest).or_default() += 1;
            let release = self.jobs[j as usize].release;
            if release > self.now {
                self.timer(release, Timer::Release(j));
            } else {
                self.start_job(j);
            }
        }
    }

    fn start_job(&mut self, j: u32) {
        let s = &mut self.st[j as usize];
        s.started = true;
        self.results[j as usize].start = self.now;
        if s.units_total == 0 {
            self.finish_job(j);
            return;
        }
        if s.mode == JobMode::Fluid {
            return self.start_fluid(j);
        }
        for v in 0..self.jobs[j as usize].graph.vertices.len() {
            self.try_vertex(j, v as u32);
        }
    }

    fn finish_job(&mut self, j: u32) {
        let s = &mut self.st[j as usize];
        if s.finished {
            return;
        }
        s.finished = true;
        self.results[j as usize].end = self.now;
        self.jobs_left -= 1;
        if let Admission::PerDestination(_) = self.admission {
            let g = &self.jobs[j as usize].graph;
            let dest = g.vertex(g.sink).node;
            if let Some(a) = self.active.get_mut(&dest) {
                *a -= 1;
            }
            self.admit(dest);
        }
    }

    fn add_flow(&mut self, kind: FlowKind, bytes: f64, res: FlowResources, src: NodeId, dst: NodeId) {
        let id = self.sharing.add(res) as usize;
        if self.flows.len() <= id {
            self.flows.resize_with(id + 1, || None);
            self.versions.resize(id + 1, 0);
        }
        self.versions[id] = self.versions[id].wrapping_add(1);
        self.flows[id] = Some(Flow { kind, remaining: bytes, t0: self.now, rate: 0.0, src, dst });
        self.transfers += 1;
    }

    /// Brings a flow's remaining bytes up to now at its current rate, counting the bytes moved.
    fn settle(&mut self, id: usize) {
        let now = self.now;
        let f = self.flows[id].as_mut().expect("live flow");
        let moved = if f.rate.is_infinite() { f.remaining } else { (f.rate * (now - f.t0)).min(f.remaining) };
        f.remaining -= moved;
        f.t0 = now;
        match f.kind {
            FlowKind::Net { .. } => {
                self.up_bytes[f.src as usize] += moved;
                self.down_bytes[f.dst as usize] += moved;
            }
            // Counted once, when the flow ends (its links' weights never change), rather
            // than over twenty links at every rate change.
            FlowKind::Fluid { .. } => {}
            _ => {}
        }
    }

    /// Adds `delta` (bytes/s of the flow) to the link rates of the nodes flow f crosses,
    /// noting them for the utilisation log.
    fn shift_node_rates(&mut self, kind: FlowKind, src: NodeId, dst: NodeId, delta: f64, touched: &mut Vec<NodeId>) {
        // Node rates feed only the utilisation log.
        if self.rates_log.is_none() {
            return;
        }
        match kind {
            FlowKind::Net { .. } => {
                self.node_up[src as usize] += delta;
                self.node_down[dst as usize] += delta;
                touched.extend([src, dst]);
            }
            FlowKind::Fluid { job } => {
                let fl = self.st[job as usize].fluid.as_ref().expect("fluid jobs carry their flow");
                for &(node, up, w) in &fl.links {
                    let rates = if up { &mut self.node_up } else { &mut self.node_down };
                    rates[node as usize] += delta * w;
                    touched.push(node);
                }
            }
            _ => {}
        }
    }

    fn read_modeled(&self, node: NodeId) -> bool {
        self.net.nodes[node as usize].disk_read.is_some()
    }

    /// Whether non-sink vertex v can send its lane-local unit u.
    fn ready(&self, j: u32, v: u32, u: u32) -> bool {
        let g = &self.jobs[j as usize].graph;
        let s = &self.st[j as usize];
        let vx = &g.vertices[v as usize];
        if s.mode == JobMode::Overlap {
            return self.overlap_ready(j, v);
        }
        if vx.local.is_some() && self.read_modeled(vx.node) && s.read_done[v as usize] <= u {
            return false;
        }
        // Back-pressure: a vertex holds at most RELAY_WINDOW units per input that it has
        // not used yet (a sink uses unit u once every input has sent it). Not under a
        // timeslot schedule, whose relays hold whole chunks between slots.
        if let (Some(out), false) = (vx.output, s.gated) {
            let used = if out == g.sink { s.sink_next[vx.lane] } else { s.delivered[out.index()] };
            if u >= used + RELAY_WINDOW && g.vertex(out).node != vx.node {
                return false;
            }
        }
        vx.inputs.iter().all(|i| s.delivered[i.index()] > u)
    }

    fn try_vertex(&mut self, j: u32, v: u32) {
        let jobs = self.jobs;
        let g = &jobs[j as usize].graph;
        if VertexId(v) == g.sink {
            return self.try_sink(j);
        }
        let vx = &g.vertices[v as usize];
        let lane = vx.lane;
        let n_units = self.st[j as usize].windows[lane].len() as u32;
        // Disk reads run ahead of sending, one I/O per unit.
        if vx.local.is_some() {
            let s = &self.st[j as usize];
            if self.read_modeled(vx.node) && !s.reading[v as usize] && s.read_done[v as usize] < n_units {
                self.st[j as usize].reading[v as usize] = true;
                let seek = self.net.nodes[vx.node as usize].seek;
                if seek > 0.0 {
                    self.timer(self.now + seek, Timer::StartRead { job: j, vertex: v });
                } else {
                    self.start_read(j, v);
                }
            }
        }
        let out = vx.output.expect("non-sink vertices have an output");
        loop {
            let s = &self.st[j as usize];
            let u = s.delivered[v as usize];
            let overlap = s.mode == JobMode::Overlap;
            if s.sending[v as usize] || u >= n_units || (overlap && s.started_v[v as usize]) || !self.ready(j, v, u) {
                return;
            }
            // A slot schedule lets a node send only its earliest outstanding slot.
            let slot = self.slot_of(j, v, u);
            if let Some(slot) = slot {
                if s.pending_slots.get(&vx.node).and_then(|p| p.first()) != Some(&slot) {
                    return;
                }
            }
            let to = g.vertex(out).node;
            if to == vx.node && overlap {
                self.overlap_started(j, v, true);
                return;
            }
            if to == vx.node {
                // Same node: handed over at once.
                self.st[j as usize].delivered[v as usize] += 1;
                self.slot_done(j, vx.node, slot);
                self.try_vertex(j, out.0);
                continue;
            }
            if let Some(&Some(ts)) = jobs[j as usize].timeslots.get(v as usize) {
                if !self.gates.admit(j, v, vx.node, to, ts) {
                    return;
                }
            }
            let bytes = self.st[j as usize].width[v as usize] * self.st[j as usize].windows[lane][u as usize] as f64;
            self.st[j as usize].sending[v as usize] = true;
            let mut res = [res_up(vx.node), res_down(to), 0];
            let mut len = 2;
            if let Some(p) = self.pair_res(vx.node, to) {
                res[2] = p;
                len = 3;
            }
            self.add_flow(FlowKind::Net { job: j, vertex: v }, bytes, FlowResources::new(&res[..len]), vx.node, to);
            if overlap {
                self.overlap_started(j, v, false);
            }
            return;
        }
    }

    /// The pair-cap resource of traffic from `a` to `b`, if it is capped.
    fn pair_res(&self, a: NodeId, b: NodeId) -> Option<u32> {
        if self.pair_ids.is_empty() {
            return None;
        }
        self.pair_ids.get(&(a, b)).copied()
    }

    /// The slot of vertex v's unit u under its graph's slot rule (slice model only).
    fn slot_of(&self, j: u32, v: u32, u: u32) -> Option<u64> {
        if !self.st[j as usize].slot_rules {
            return None;
        }
        self.jobs[j as usize].graph.slots.get(v as usize).copied().flatten().map(|r| r.slot(u as u64))
    }

    /// Marks a scheduled send as done and wakes the node's other vertices, whose turn it may be.
    fn slot_done(&mut self, j: u32, node: NodeId, slot: Option<u64>) {
        let Some(slot) = slot else { return };
        let s = &mut self.st[j as usize];
        if let Some(p) = s.pending_slots.get_mut(&node) {
            p.remove(&slot);
        }
        let others = s.node_vertices.get(&node).cloned().unwrap_or_default();
        for v in others {
            self.try_vertex(j, v);
        }
    }

    /// A scheduled transfer of slot `ts` from `from` to `to` has finished: later slots at
    /// those nodes may go once nothing earlier is left.
    fn gate_passed(&mut self, from: NodeId, to: NodeId, ts: u32) {
        for (j, v) in self.gates.pass(from, to, ts) {
            self.try_vertex(j, v);
        }
    }

    fn start_read(&mut self, j: u32, v: u32) {
        let g = &self.jobs[j as usize].graph;
        let vx = &g.vertices[v as usize];
        let s = &self.st[j as usize];
        let w = s.windows[vx.lane][s.read_done[v as usize] as usize] as f64;
        let reads = g.equation.terms[vx.local.expect("reading vertices have a term")].read_count() as f64;
        self.add_flow(FlowKind::Read { job: j, vertex: v }, reads * w, FlowResources::new(&[res_disk_read(vx.node)]), vx.node, vx.node);
    }

    fn try_sink(&mut self, j: u32) {
        let g = &self.jobs[j as usize].graph;
        let dest = g.vertex(g.sink).node;
        let writes = self.net.nodes[dest as usize].disk_write.is_some();
        let s = &mut self.st[j as usize];
        // Overlapped: the sink writes as its inputs stream in, and is done once they are.
        let overlap = s.mode == JobMode::Overlap;
        let mut advanced = false;
        for lane in 0..s.windows.len() {
            while (s.sink_next[lane] as usize) < s.windows[lane].len() {
                let u = s.sink_next[lane];
                if !s.sink_inputs[lane].iter().all(|i| if overlap { s.started_v[i.index()] } else { s.delivered[i.index()] > u }) {
                    break;
                }
                s.sink_next[lane] += 1;
                advanced = true;
                let bytes = s.alpha * s.windows[lane][u as usize] as f64;
                if writes {
                    s.write_queue.push_back(bytes);
                } else {
                    s.units_done += 1;
                }
            }
        }
        if !s.writing {
            if let Some(bytes) = s.write_queue.pop_front() {
                s.writing = true;
                self.add_flow(FlowKind::Write { job: j }, bytes, FlowResources::new(&[res_disk_write(dest)]), dest, dest);
            }
        }
        let s = &self.st[j as usize];
        let arrived = || !overlap || s.sink_inputs.iter().flatten().all(|i| s.delivered[i.index()] > 0);
        if s.units_done == s.units_total && !s.writing && s.write_queue.is_empty() && arrived() {
            return self.finish_job(j);
        }
        // Room in the sink's window: its inputs may send again.
        if advanced && s.mode == JobMode::Slice && !s.gated {
            let g = &self.jobs[j as usize].graph;
            for &i in &g.vertex(g.sink).inputs {
                self.try_vertex(j, i.0);
            }
        }
    }

    /// Vertex v's next unit has reached its output vertex.
    fn deliver(&mut self, job: u32, vertex: u32) {
        self.st[job as usize].delivered[vertex as usize] += 1;
        let g = &self.jobs[job as usize].graph;
        let vx = &g.vertices[vertex as usize];
        let out = vx.output.expect("delivering vertices have an output");
        let slot = self.slot_of(job, vertex, self.st[job as usize].delivered[vertex as usize] - 1);
        self.slot_done(job, vx.node, slot);
        let lane_units = self.st[job as usize].windows[vx.lane].len() as u32;
        if self.st[job as usize].delivered[vertex as usize] == lane_units {
            if let Some(&Some(ts)) = self.jobs[job as usize].timeslots.get(vertex as usize) {
                let to = g.vertex(out).node;
                if to != vx.node {
                    self.gate_passed(vx.node, to, ts);
                }
            }
        }
        self.try_vertex(job, vertex);
        self.try_vertex(job, out.0);
        // Room in this vertex's window: its inputs may send again.
        for &i in &g.vertices[vertex as usize].inputs {
            self.try_vertex(job, i.0);
        }
        if self.st[job as usize].mode == JobMode::Overlap {
            self.st[job as usize].delivered_at[vertex as usize] = self.now;
            if out != g.sink {
                self.try_deliver(job, out.0);
            }
        }
    }

    fn complete(&mut self, f: Flow) {
        match f.kind {
            FlowKind::Net { job, vertex } => {
                let s = &mut self.st[job as usize];
                s.sending[vertex as usize] = false;
                if s.mode == JobMode::Overlap {
                    s.flow_done[vertex as usize] = true;
                    return self.try_deliver(job, vertex);
                }
                self.deliver(job, vertex);
            }
            FlowKind::Read { job, vertex } => {
                let s = &mut self.st[job as usize];
                s.reading[vertex as usize] = false;
                s.read_done[vertex as usize] += 1;
                let overlap = s.mode == JobMode::Overlap;
                self.try_vertex(job, vertex);
                if overlap {
                    self.try_deliver(job, vertex);
                }
            }
            FlowKind::Fluid { job } => self.fluid_done(job),
            FlowKind::Write { job } => {
                let s = &mut self.st[job as usize];
                s.writing = false;
                s.units_done += 1;
                self.try_sink(job);
            }
        }
    }

    fn fire(&mut self, t: Timer) {
        match t {
            Timer::Release(j) => self.start_job(j),
            Timer::StartRead { job, vertex } => self.start_read(job, vertex),
            Timer::Deliver { job, vertex } => self.deliver(job, vertex),
            Timer::Finish(job) => self.finish_job(job),
            Timer::Foreground(i) => {
                let (_, r, rate) = self.fg_changes[i as usize];
                self.sharing.set_capacity(r, (self.base_caps[r as usize] - rate).max(0.0));
            }
        }
    }

    /// Applies the fair-share update: settles and re-times every flow whose rate changed.
    fn reshare(&mut self) {
        let mut changed = std::mem::take(&mut self.changed);
        changed.clear();
        self.sharing.update(&mut changed);
        let mut touched_nodes = std::mem::take(&mut self.removed_nodes);
        // When most flows change rate (a full recompute among dense fluid repairs), rebuild
        // the completion heap in one pass rather than push an entry per flow and pop as many
        // stale ones later.
        let rebuild = changed.len() > 64 && changed.len() * 2 > self.completions.len();
        for &id in &changed {
            let id = id as usize;
            self.settle(id);
            let new_rate = self.sharing.rate(id as u32);
            let now = self.now;
            let f = self.flows[id].as_ref().expect("changed flows are live");
            let (kind, src, dst, old_rate) = (f.kind, f.src, f.dst, f.rate);
            self.shift_node_rates(kind, src, dst, new_rate - old_rate, &mut touched_nodes);
            let f = self.flows[id].as_mut().expect("changed flows are live");
            f.rate = new_rate;
            self.versions[id] = self.versions[id].wrapping_add(1);
            if new_rate > 0.0 && !rebuild {
                let t = if new_rate.is_infinite() { now } else { now + f.remaining / new_rate };
                self.completions.push(Reverse((T(t), id as u32, self.versions[id])));
            }
        }
        self.changed = changed;
        if rebuild {
            let mut entries = std::mem::take(&mut self.completions).into_vec();
            entries.clear();
            for (id, f) in self.flows.iter().enumerate() {
                let Some(f) = f else { continue };
                if f.rate > 0.0 {
                    // Flows that did not change were settled earlier: their remaining bytes
                    // count from their own t0.
                    let t = if f.rate.is_infinite() { f.t0 } else { f.t0 + f.remaining / f.rate };
                    entries.push(Reverse((T(t), id as u32, self.versions[id])));
                }
            }
            self.completions = BinaryHeap::from(entries);
        }
        // Rate changes leave stale completion entries behind; drop them when they dominate.
        if self.completions.len() > 64 + 4 * self.flows.len() {
            let flows = &self.flows;
            let versions = &self.versions;
            self.completions.retain(|Reverse((_, id, v))| flows[*id as usize].is_some() && versions[*id as usize] == *v);
        }
        if let Some(log) = self.rates_log.as_mut() {
            touched_nodes.sort_unstable();
            touched_nodes.dedup();
            for n in touched_nodes {
                let (u, d) = (self.node_up[n as usize].max(0.0), self.node_down[n as usize].max(0.0));
                let l = &mut log[n as usize];
                match l.last_mut() {
                    Some(last) if last.0 == self.now => *last = (self.now, u, d),
                    Some(&mut (_, lu, ld)) if lu == u && ld == d => {}
                    _ => l.push((self.now, u, d)),
                }
            }
        }
    }

    /// The next valid completion time, dropping stale heap entries.
    fn next_completion(&mut self) -> f64 {
        while let Some(&Reverse((t, id, version))) = self.completions.peek() {
            match &self.flows[id as usize] {
                Some(_) if self.versions[id as usize] == version => return t.0,
                _ => {
                    self.completions.pop();
                }
            }
        }
        f64::INFINITY
    }

    fn main_loop(&mut self, progress: &mut dyn FnMut(usize)) -> Result<()> {
        let total = self.jobs.len();
        let mut reported = 0;
        while self.jobs_left > 0 {
            if total - self.jobs_left >= reported + (total / 200).max(1) {
                reported = total - self.jobs_left;
                progress(reported);
            }
            if !std::mem::take(&mut self.defer_reshare) {
                self.reshare();
            }
            let next_done = self.next_completion();
            let next_timer = self.timers.peek().map_or(f64::INFINITY, |Reverse((t, _, _))| t.0);
            let t = next_done.min(next_timer);
            if !t.is_finite() {
                return Err(SimError::Stalled { time: self.now, jobs_left: self.jobs_left });
            }
            self.now = t.max(self.now);
            self.events += 1;
            // Every transfer finishing now (several may finish together).
            let horizon = self.now + 1e-12 * self.now.max(1.0);
            let mut done = std::mem::take(&mut self.done);
            while self.next_completion() <= horizon {
                let Reverse((_, id, _)) = self.completions.pop().expect("peeked");
                self.settle(id as usize);
                let f = self.flows[id as usize].take().expect("valid entry");
                let mut touched = std::mem::take(&mut self.removed_nodes);
                self.shift_node_rates(f.kind, f.src, f.dst, -f.rate, &mut touched);
                self.removed_nodes = touched;
                self.sharing.remove(id);
                done.push(f);
            }
            // Only fluid repairs whose pipelines now drain ended: their links are shared out
            // again when the drain ends (or at any earlier event), not twice per repair. A
            // draining pipeline frees its hops one by one; holding them for the drain (one
            // slice per stage) errs as much as freeing them all at once, at half the cost
            // when every repair otherwise makes two full recomputes of dense sharing.
            let drain_only = !done.is_empty()
                && done.iter().all(|f| match f.kind {
                    FlowKind::Fluid { job } => self.st[job as usize].fluid.as_ref().is_some_and(|fl| fl.fill > 0.0),
                    _ => false,
                });
            for f in done.drain(..) {
                self.complete(f);
            }
            self.done = done;
            let mut fired = false;
            while let Some(Reverse((t, _, _))) = self.timers.peek() {
                if t.0 > horizon {
                    break;
                }
                let Reverse((_, _, what)) = self.timers.pop().expect("peeked");
                self.fire(what);
                fired = true;
            }
            self.defer_reshare = drain_only && !fired;
        }
        Ok(())
    }
}
