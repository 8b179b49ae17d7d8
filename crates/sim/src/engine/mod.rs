//! The discrete-event engine. In the slice model every graph edge streams its lane's slices
//! in order, one slice in flight per edge (a TCP stream); a vertex sends slice j once slice
//! j has arrived on all its inputs (and its own disk read of slice j is done); a
//! store-and-forward graph (PPR) moves each lane as one unit. The fluid model (`fluid`)
//! moves a whole pipelined repair as one flow instead, and a timeslot-gated one edge by
//! edge (`overlap`), so events scale with repairs, not slices. Concurrent transfers
//! share links max-min fairly, recomputed at every event; time jumps from event to event
//! (transfer completions, timers).

mod admission;
mod api;
mod capacity;
mod flows;
mod fluid;
mod gates;
mod job;
mod overlap;
mod vertex;

use crate::error::{Result, SimError};
use crate::maxmin::FlowResources;
use crate::network::{res_disk_read, res_disk_write, res_down, res_repair_down, res_repair_up, res_up, Network};
use crate::sharing::Sharing;
use capacity::{capacity_changes, CapacityChange};
use kintsugi_plan::{NodeId, VertexId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

pub use api::*;

#[derive(Clone, Copy, Debug)]
enum FlowKind {
    Net {
        job: u32,
        vertex: u32,
        part: Part,
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
    /// Users' traffic on one link that yields like any flow (`Network::elastic_foreground`):
    /// it never ends, and its demand is the foreground series' rate.
    Users,
}

/// Which links a network flow crosses. A send in a slot schedule (ECPipe cyclic) is two
/// flows: the sender's socket buffers what its uplink has sent, so its next slot may go
/// once the uplink is done with this one, while the receiver's downlink still takes it in
/// (see `vertex::start_send`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Uplink and downlink at one rate: the unit arrives when this flow ends.
    Both,
    /// The sender's uplink (and any pair cap): the sender's slot is done when it ends.
    Up,
    /// The receiver's downlink: the unit arrives when this and its `Up` flow have ended.
    Down,
}

impl Part {
    /// Whether the flow crosses the sender's uplink.
    fn up(self) -> bool {
        self != Part::Down
    }

    /// Whether the flow crosses the receiver's downlink.
    fn down(self) -> bool {
        self != Part::Up
    }
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
    /// A job's `cancel_at`.
    Cancel(u32),
    /// A vertex held back by its output's window may send again.
    Resume {
        job: u32,
        vertex: u32,
    },
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
    /// Per vertex: flows of its current send still moving (`Part::Up` and `Part::Down`).
    parts_left: Vec<u8>,
    /// Slice model: per vertex, whether it was held back by its output's window, when it
    /// may send again after the window opened, when its current send began, and how long its
    /// last send took (see `vertex::resume_delay`).
    held: Vec<bool>,
    not_before: Vec<f64>,
    sent_at: Vec<f64>,
    last_send: Vec<f64>,
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
    // Foreground and repair caps: (time, resource, capacity from then on), in order.
    fg_changes: Vec<CapacityChange>,
    /// Per node, whether repair is capped on its uplink and downlink.
    paced: Vec<(bool, bool)>,
    rates_log: Option<Vec<RateLog>>,
    /// Timeslot gates (RepairBoost).
    gates: gates::Gates,
    /// Scratch: flows finishing at the current event.
    done: Vec<Flow>,
    /// The last event only ended fluid flows that now drain: share at the next one.
    defer_reshare: bool,
    /// Per job, the request that waits for it (a closed-loop client's next one).
    next_request: Vec<Option<u32>>,
    /// `SimOptions::event_window`.
    event_window: f64,
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
        if let Some(c) = j.cancel_at {
            if !(c >= 0.0 && c.is_finite()) || j.timeslots.iter().any(Option::is_some) {
                return Err(SimError::BadScenario(format!("job {i} cannot be cancelled at {c} (a finite time, and no timeslots)")));
            }
        }
        if let Some(Request { after: Some(a) }) = j.request {
            if a as usize >= i || jobs[a as usize].request.is_none() {
                return Err(SimError::BadScenario(format!("request {i} waits for job {a}, which is not an earlier request")));
            }
        }
        st.push(JobState::new(j, job::job_mode(net, j, opts.model))?);
    }
    // Closed-loop clients: each request's successor.
    let mut next_request = vec![None; jobs.len()];
    for (i, j) in jobs.iter().enumerate() {
        if let Some(Request { after: Some(a) }) = j.request {
            next_request[a as usize] = Some(i as u32);
        }
    }
    if !(opts.event_window >= 0.0 && opts.event_window.is_finite()) {
        return Err(SimError::BadScenario(format!("the event window must be a non-negative number of seconds, got {}", opts.event_window)));
    }
    if let Admission::PerDestination(0) = opts.admission {
        return Err(SimError::BadScenario("at least one repair per destination must be allowed to run".into()));
    }
    let (base_caps, pair_ids) = net.resources();
    let (fg_changes, paced) = capacity_changes(net, &base_caps);
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
        results: vec![JobResult { start: f64::NAN, end: f64::NAN, cancelled: false }; jobs.len()],
        up_bytes: vec![0.0; n_nodes],
        down_bytes: vec![0.0; n_nodes],
        events: 0,
        transfers: 0,
        queues: std::collections::BTreeMap::new(),
        active: HashMap::new(),
        admission: opts.admission,
        jobs_left: jobs.len(),
        fg_changes,
        paced,
        rates_log: opts.track_utilization.then(|| vec![Vec::new(); n_nodes]),
        gates: gates::Gates::new(n_nodes),
        done: Vec::new(),
        defer_reshare: false,
        next_request,
        event_window: opts.event_window,
    };
    for j in jobs {
        e.gates.schedule_job(j);
    }
    e.add_users_flows();
    for i in 0..e.fg_changes.len() {
        let t = e.fg_changes[i].0;
        e.timer(t, Timer::Foreground(i as u32));
    }
    for (i, j) in jobs.iter().enumerate() {
        if let Some(t) = j.cancel_at {
            e.timer(t, Timer::Cancel(i as u32));
        }
    }
    // Requests bypass admission; a request after another is released when that one ends.
    for (i, j) in jobs.iter().enumerate() {
        if j.request.is_some_and(|r| r.after.is_none()) {
            e.timer(j.release, Timer::Release(i as u32));
        }
    }
    e.release_repairs();
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

impl<'a> Engine<'a> {
    /// The repair caps a repair's transfer from `src` to `dst` is held by, if any.
    fn repair_caps(&self, job: u32, src: NodeId, dst: NodeId) -> impl Iterator<Item = u32> {
        self.repair_cap_up(job, src).into_iter().chain(self.repair_cap_down(job, dst))
    }

    /// The repair cap on `src`'s uplink, if job is a repair and that uplink is capped.
    fn repair_cap_up(&self, job: u32, src: NodeId) -> Option<u32> {
        (self.jobs[job as usize].request.is_none() && self.paced[src as usize].0).then(|| res_repair_up(src))
    }

    /// The repair cap on `dst`'s downlink, if job is a repair and that downlink is capped.
    fn repair_cap_down(&self, job: u32, dst: NodeId) -> Option<u32> {
        (self.jobs[job as usize].request.is_none() && self.paced[dst as usize].1).then(|| res_repair_down(dst))
    }

    fn timer(&mut self, t: f64, what: Timer) {
        self.seq += 1;
        self.timers.push(Reverse((T(t), self.seq, what)));
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
        if let Some(next) = self.next_request[j as usize] {
            let t = self.jobs[next as usize].release.max(self.now);
            self.timer(t, Timer::Release(next));
        }
        if self.jobs[j as usize].request.is_some() {
            return;
        }
        self.leave_destination(j);
    }

    /// Stops job j where it is: its flows end with the bytes they moved, nothing of it
    /// starts again, and it ends now, unfinished.
    fn cancel_job(&mut self, j: u32) {
        if self.st[j as usize].finished {
            return;
        }
        self.remove_flows_of(j);
        if !self.st[j as usize].started {
            self.results[j as usize].start = self.now;
        }
        self.results[j as usize].cancelled = true;
        self.finish_job(j);
    }

    fn read_modeled(&self, node: NodeId) -> bool {
        self.net.nodes[node as usize].disk_read.is_some()
    }

    fn complete(&mut self, f: Flow) {
        match f.kind {
            FlowKind::Net { job, vertex, part } => {
                if part != Part::Both && !self.send_part_done(job, vertex, part) {
                    return;
                }
                let s = &mut self.st[job as usize];
                s.sending[vertex as usize] = false;
                s.last_send[vertex as usize] = self.now - s.sent_at[vertex as usize];
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
            FlowKind::Users => {}
            FlowKind::Write { job } => {
                let s = &mut self.st[job as usize];
                s.writing = false;
                s.units_done += 1;
                self.try_sink(job);
            }
        }
    }

    fn fire(&mut self, t: Timer) {
        // Nothing of a cancelled job goes on.
        let job = match t {
            Timer::Release(j) | Timer::Finish(j) | Timer::Cancel(j) => Some(j),
            Timer::StartRead { job, .. } | Timer::Deliver { job, .. } | Timer::Resume { job, .. } => Some(job),
            Timer::Foreground(_) => None,
        };
        if job.is_some_and(|j| self.st[j as usize].finished) {
            return;
        }
        match t {
            Timer::Release(j) => self.start_job(j),
            Timer::StartRead { job, vertex } => self.start_read(job, vertex),
            Timer::Deliver { job, vertex } => self.deliver(job, vertex),
            Timer::Resume { job, vertex } => self.try_vertex(job, vertex),
            Timer::Finish(job) => self.finish_job(job),
            Timer::Cancel(job) => self.cancel_job(job),
            Timer::Foreground(i) => {
                let (_, r, cap) = self.fg_changes[i as usize];
                self.sharing.set_capacity(r, cap);
            }
        }
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
            let horizon = self.now + (1e-12 * self.now.max(1.0)).max(self.event_window);
            let mut done = std::mem::take(&mut self.done);
            while self.next_completion() <= horizon {
                let Reverse((_, id, _)) = self.completions.pop().expect("peeked");
                self.settle(id as usize);
                let f = self.flows[id as usize].take().expect("valid entry");
                // Ended early within the event window: its last bytes count now.
                if let (FlowKind::Net { part, .. }, true) = (f.kind, f.remaining > 0.0) {
                    self.count_net_bytes(part, f.src, f.dst, f.remaining);
                }
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
