//! ChameleonEC's phases in the simulator (Zhou et al. §3.2), as the coordinator runs them
//! (ChameleonEC-IO's too, which plans with disk bandwidth where it is scarcer):
//! the lost chunks are planned, the first phase's repairs run, and once every one of them
//! has finished (the phase barrier) the rest is planned again. Each plan sees what the
//! bandwidth monitor saw: every node's mean foreground over the period before the phase
//! starts, not the traffic to come (the prototype averages NetHogs' readings over each
//! period; ../shared/papers/notes/000-chameleonec.md, "Staleness"). So foreground that
//! changes within a phase catches the plan out, which is what ChameleonEC's phases are for.

use crate::engine::{self, Admission, JobResult, RateLog, SimOptions, SimResult};
use crate::error::{Result, SimError};
use crate::network::{Direction, Network};
use crate::requests::Trace;
use crate::scenario::FullNode;
use crate::Job;
use kintsugi_plan::schedule::LostChunk;
use kintsugi_plan::schedule::{self, Scheduler};
use kintsugi_plan::NodeId;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// How phases are cut, how late the monitor is, and whether stragglers are let go.
#[derive(Clone, Copy, Debug)]
pub struct PhaseOptions {
    /// Length of a phase in seconds; 0: the paper's 20 s at 10 Gb/s, scaled to the links.
    pub phase_seconds: f64,
    /// The monitor's averaging period in seconds; 0: the phase length, as the prototype
    /// (`period.len` is both).
    pub monitor_period: f64,
    /// Straggler-aware re-scheduling (ChameleonEC §3.5, as on the cluster): a repair running
    /// past 1.5x its expected time, and at least one progress period late, is postponed. It
    /// keeps running, and the phase no longer waits for it. At the phase's end, a postponed
    /// repair less than half done is cancelled and planned again in the next phase, once,
    /// without the node it waited for where the code can spare it. Off: ETRP alone.
    pub sar: bool,
    /// How often progress is checked, seconds (the coordinator's repair_progress_ms).
    pub progress_period: f64,
    /// Repair yields to users: each phase's repair is paced, on every node, at the residual
    /// bandwidth the phase was planned with, so users keep what the monitor saw them take
    /// (rather than a per-connection share against many repair streams).
    pub pace: bool,
}

impl Default for PhaseOptions {
    fn default() -> Self {
        PhaseOptions { phase_seconds: 0.0, monitor_period: 0.0, sar: true, progress_period: 0.5, pace: false }
    }
}

/// One phase as it ran.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PhaseRecord {
    pub phase: usize,
    /// When it was planned and started, and when it ended: its last repair finished, or,
    /// with SAR, its last repair that was not postponed finished or its last straggler was
    /// let go.
    pub start: f64,
    pub end: f64,
    pub chunks: usize,
    /// Its repairs postponed as stragglers (SAR), and of those, the ones cancelled at its
    /// end to be planned again.
    pub stragglers: usize,
    pub restarted: usize,
}

/// A phased run: the engine's result over the whole repair, and its phases.
#[derive(Clone, Debug)]
pub struct PhasedRun {
    pub result: SimResult,
    pub phases: Vec<PhaseRecord>,
    pub phase_seconds: f64,
    pub monitor_period: f64,
    /// With users' requests: their results in the run with the whole repair, in
    /// [`Trace::append`]'s order (the repair's jobs are in `result`).
    pub requests: Vec<JobResult>,
}

/// Users' requests beside the phases (see [`crate::requests`]): the trace (its clients
/// already in the network), its results when run alone, and when the repair starts.
#[derive(Clone, Copy)]
pub struct WithRequests<'a> {
    pub trace: &'a Trace,
    pub alone: &'a [JobResult],
    pub start: f64,
}

/// Runs `s` (scheduler `chameleon` or `chameleon-io`) phase by phase on `net`, its
/// foreground included.
///
/// A postponed straggler runs on into later phases, sharing links with their repairs. The
/// engine runs a set of repairs from the start, so the repairs since the last moment nothing
/// was running (an epoch) are simulated again, with the new phase's, at each phase: the
/// same history up to the phase's start (the engine is deterministic and the new repairs
/// start only then), and their overlap after it.
///
/// With `requests`, the repair starts at their `start`, every run carries the whole trace,
/// and each plan sees, beside the foreground series, what the requests moved over each
/// node's links in the monitor's period, as the nodes' traffic counters would report it.
/// Requests outlive phases, so epochs are not cut: every run has every repair since the
/// start.
pub fn run(s: &FullNode, net: &Network, opts: &SimOptions, p: PhaseOptions, requests: Option<WithRequests>) -> Result<PhasedRun> {
    if !s.scheduler.chameleon() {
        return Err(SimError::BadScenario(format!("phases are ChameleonEC's; the scheduler is {}", s.scheduler)));
    }
    for (what, v) in [("phase length", p.phase_seconds), ("monitor period", p.monitor_period), ("progress period", p.progress_period)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(SimError::BadScenario(format!("the {what} must be a non-negative number of seconds, got {v}")));
        }
    }
    net.validate()?;
    // The phase length is fixed once, from the links' capacities, not from each phase's
    // residual bandwidth.
    let (code, lost, idle) = s.plan_input(Some(net), &|_, _| 0.0)?;
    let io = s.scheduler == Scheduler::ChameleonIo;
    let idle = if io { idle.storage_bound() } else { idle };
    let phase_seconds = if p.phase_seconds > 0.0 { p.phase_seconds } else { schedule::chameleon_phase_seconds(&idle) };
    let monitor = if p.monitor_period > 0.0 { p.monitor_period } else { phase_seconds };
    // A phase's repairs start at once, or a few per destination at a time (the plan's
    // per-node budget is a sum of task times, so it holds either way).
    let admission = if s.max_active == usize::MAX { Admission::All } else { Admission::PerDestination(s.max_active) };
    let opts = SimOptions { admission, ..opts.clone() };

    let mut jobs: Vec<Option<JobResult>> = vec![None; lost.len()];
    let nodes = net.nodes.len();
    let mut total = SimResult {
        makespan: 0.0,
        jobs: Vec::new(),
        upload_bytes: vec![0.0; nodes],
        download_bytes: vec![0.0; nodes],
        events: 0,
        transfers: 0,
        local_updates: 0,
        full_updates: 0,
        rates: opts.track_utilization.then(|| vec![RateLog::new(); nodes]),
    };
    let mut phases = Vec::new();
    let mut todo: Vec<usize> = (0..lost.len()).collect();
    // Chunks restarted once already, and the node each restarted chunk is planned without.
    let mut restarted: HashSet<usize> = HashSet::new();
    let mut shun: HashMap<usize, u32> = HashMap::new();
    // The repairs of the current epoch (chunk index, job), and its latest run.
    let mut epoch: Vec<(usize, Job)> = Vec::new();
    let mut last: Option<SimResult> = None;
    // With pacing, each phase adds its repair caps from its start on.
    let mut paced = net.clone();
    let net = &mut paced;
    let mut t = requests.map_or(0.0, |r| r.start);
    // The requests' latest results: the history every later run repeats up to its phase.
    let mut seen_requests: Vec<JobResult> = requests.map_or(Vec::new(), |r| r.alone.to_vec());
    let request_rates = |results: &[JobResult], a: f64, b: f64| requests.map_or(HashMap::new(), |r| r.trace.rates(results, a, b));
    while !todo.is_empty() {
        let window = ((t - monitor).max(0.0), t);
        let users = request_rates(&seen_requests, window.0, window.1);
        let seen = |n: NodeId, d: Direction| net.foreground_mean(n, d, window.0, window.1) + users.get(&(n, d)).copied().unwrap_or(0.0);
        let mut cluster = s.cluster_seen(Some(net), &seen);
        cluster.phase_seconds = phase_seconds;
        if p.pace {
            pace_from(net, &cluster, t);
        }
        let chunks: Vec<_> = todo.iter().map(|&i| without(code.as_ref(), &lost[i], shun.get(&i).copied())).collect();
        let seed = s.seed ^ 0x5eed ^ (phases.len() as u64) << 32;
        let plan = schedule::plan(code.as_ref(), s.method, s.scheduler, &chunks, &cluster, seed)?;
        // This phase: the plan's first; the rest waits for the next plan.
        let first = epoch.len();
        let mut later = Vec::new();
        for (r, &i) in plan.repairs.into_iter().zip(&todo) {
            if r.phase == 0 {
                epoch.push((
                    i,
                    Job {
                        graph: r.graph,
                        chunk_len: s.chunk,
                        slice_len: s.slice,
                        release: t,
                        timeslots: r.slots,
                        cancel_at: None,
                        request: None,
                    },
                ));
            } else {
                later.push(i);
            }
        }
        if epoch.len() == first {
            return Err(SimError::BadScenario("ChameleonEC planned an empty first phase".into()));
        }
        let r = run_batch(net, &epoch, requests, &opts)?;
        total.events += r.events;
        total.transfers += r.transfers;
        total.local_updates += r.local_updates;
        total.full_updates += r.full_updates;
        for ((i, _), j) in epoch.iter().zip(&r.jobs) {
            jobs[*i] = Some(j.clone());
        }
        // When the phase ends: its last repair, or with SAR its last one not let go.
        let seen_by_plan = if io { cluster.storage_bound() } else { cluster };
        let expected = expectations(&epoch[first..], &seen_by_plan, s.chunk as f64);
        let mut end = t;
        let mut late = Vec::new();
        for (x, (j, e)) in r.jobs[first..].iter().zip(&expected).enumerate() {
            let noticed = j.start + (1.5 * e).max(e + p.progress_period);
            if p.sar && j.end > noticed {
                late.push(first + x);
                end = end.max(noticed);
            } else {
                end = end.max(j.end);
            }
        }
        // Postponed repairs less than half done at the phase's end (progress read off this
        // run at the repair's mean rate) start over in the next phase, once.
        let mut again = Vec::new();
        for &x in &late {
            let (i, j) = (epoch[x].0, &r.jobs[x]);
            let done = (end - j.start) / (j.end - j.start).max(f64::MIN_POSITIVE);
            if j.end > end && done < 0.5 && restarted.insert(i) {
                epoch[x].1.cancel_at = Some(end);
                let users = request_rates(&r.jobs[epoch.len()..], (end - p.progress_period).max(0.0), end);
                let users = |n: NodeId, d: Direction| users.get(&(n, d)).copied().unwrap_or(0.0);
                if let Some(n) = waited_for(net, &epoch[x].1, end, p.progress_period, &users) {
                    shun.insert(i, n);
                }
                again.push(i);
            }
        }
        phases.push(PhaseRecord {
            phase: phases.len(),
            start: t,
            end,
            chunks: epoch.len() - first,
            stragglers: late.len(),
            restarted: again.len(),
        });
        t = end;
        todo = later;
        todo.extend(again.iter().copied());
        let r = if again.is_empty() {
            r
        } else {
            // The run again with the cancellations: the same up to the phase's end.
            let r = run_batch(net, &epoch, requests, &opts)?;
            total.events += r.events;
            r
        };
        if requests.is_some() {
            seen_requests = r.jobs[epoch.len()..].to_vec();
        }
        // Nothing running past the phase's end: the epoch is over (never with requests).
        if requests.is_none() && r.jobs[..epoch.len()].iter().all(|j| j.end <= end) {
            close_epoch(&mut total, r);
            epoch.clear();
        } else {
            last = Some(r);
        }
    }
    if !epoch.is_empty() {
        if let Some(r) = last.take() {
            close_epoch(&mut total, r);
        }
    }
    total.jobs = jobs.into_iter().map(|j| j.expect("every chunk ran in some phase")).collect();
    total.makespan = total.jobs.iter().map(|j| j.end).fold(t, f64::max);
    let requests = if requests.is_some() { seen_requests } else { Vec::new() };
    Ok(PhasedRun { result: total, phases, phase_seconds, monitor_period: monitor, requests })
}

/// From `t` on, repair takes at most the residual bandwidth `cluster` plans each live node
/// with.
fn pace_from(net: &mut Network, cluster: &schedule::Cluster, t: f64) {
    for &n in &cluster.nodes {
        let (up, down) = cluster.bandwidth_of(n);
        for (direction, rate) in [(Direction::Up, up), (Direction::Down, down)] {
            match net.repair_caps.iter_mut().find(|c| c.node == n && c.direction == direction) {
                Some(c) => c.points.push((t, rate)),
                None => net.repair_caps.push(crate::network::Foreground { node: n, direction, points: vec![(t, rate)] }),
            }
        }
    }
}

/// Runs an epoch's repairs, and the users' requests after them when there are any.
fn run_batch(net: &Network, epoch: &[(usize, Job)], requests: Option<WithRequests>, opts: &SimOptions) -> Result<SimResult> {
    let mut batch: Vec<Job> = epoch.iter().map(|(_, j)| j.clone()).collect();
    if let Some(r) = requests {
        r.trace.append(&mut batch)?;
    }
    engine::run(net, &batch, opts)
}

/// `chunk` without `node` among its helpers and destinations, where the code can rebuild it
/// from the others with no more reads.
fn without(code: &dyn kintsugi_codes::Code, chunk: &LostChunk, node: Option<u32>) -> LostChunk {
    let mut c = chunk.clone();
    let Some(node) = node else { return c };
    let avail = chunk.available();
    let rest: Vec<usize> = avail.iter().copied().filter(|&j| chunk.placement[j] != Some(node)).collect();
    let reads = |a: &[usize]| code.choose_helpers(chunk.lost, a).map(|h| h.len()).ok();
    if reads(&rest).is_some_and(|n| Some(n) <= reads(&avail)) {
        for p in c.placement.iter_mut() {
            if *p == Some(node) {
                *p = None;
            }
        }
        c.avoid.push(node);
    }
    c
}

/// The node a straggling repair waited for, as the coordinator's latest traffic reports show
/// it: among the repair's senders' uplinks and receivers' downlinks, the one foreground
/// left the least of over the last progress period, when that is under 0.75x the median
/// link's share; None when the reports single out nothing.
fn waited_for(net: &Network, job: &Job, t: f64, period: f64, users: &dyn Fn(NodeId, Direction) -> f64) -> Option<u32> {
    let g = &job.graph;
    let share = |n: u32, d: Direction| {
        let spec = &net.nodes[n as usize];
        let cap = if d == Direction::Up { spec.up } else { spec.down };
        let fg = net.foreground_mean(n, d, (t - period).max(0.0), t) + users(n, d);
        (cap - fg).max(0.0) / cap
    };
    let mut links: Vec<(f64, u32)> = Vec::new();
    for (a, b) in g.network_edges() {
        links.push((share(g.vertices[a.index()].node, Direction::Up), g.vertices[a.index()].node));
        links.push((share(g.vertices[b.index()].node, Direction::Down), g.vertices[b.index()].node));
    }
    if links.is_empty() {
        return None;
    }
    let mut shares: Vec<f64> = links.iter().map(|l| l.0).collect();
    shares.sort_by(f64::total_cmp);
    let median = shares[shares.len() / 2];
    let (least, node) = links.into_iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
    (least < 0.75 * median).then_some(node)
}

/// Adds an epoch's final run to the total: its bytes and its rate logs (epochs do not
/// overlap, so each node's log goes on where the last one's ended).
fn close_epoch(total: &mut SimResult, r: SimResult) {
    for n in 0..total.upload_bytes.len() {
        total.upload_bytes[n] += r.upload_bytes[n];
        total.download_bytes[n] += r.download_bytes[n];
    }
    if let (Some(all), Some(logs)) = (&mut total.rates, r.rates) {
        for (all, log) in all.iter_mut().zip(logs) {
            let last = all.last().map_or(0.0, |e| e.0);
            all.extend(log.into_iter().filter(|e| e.0 >= last));
        }
    }
}

/// Each repair's expected time, as the coordinator's straggler watch computes it: its
/// busiest link's time, that link's transfers in the phase x the chunk over the residual
/// bandwidth the phase was planned with.
fn expectations(phase: &[(usize, Job)], cluster: &schedule::Cluster, chunk: f64) -> Vec<f64> {
    let edges = |j: &Job| -> Vec<(u32, u32)> {
        let g = &j.graph;
        g.network_edges().map(|(a, b)| (g.vertices[a.index()].node, g.vertices[b.index()].node)).collect()
    };
    let (mut up, mut down): (HashMap<u32, f64>, HashMap<u32, f64>) = Default::default();
    for (_, j) in phase {
        for (a, b) in edges(j) {
            *up.entry(a).or_default() += 1.0;
            *down.entry(b).or_default() += 1.0;
        }
    }
    phase
        .iter()
        .map(|(_, j)| {
            edges(j)
                .into_iter()
                .map(|(a, b)| (up[&a] * chunk / cluster.bandwidth_of(a).0).max(down[&b] * chunk / cluster.bandwidth_of(b).1))
                .fold(0.0, f64::max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Foreground;

    use crate::scenario::small_chameleon as scenario;

    /// Phases run one after another, each starting when the last ended, and take every
    /// chunk once; a phase's repairs start with it and end by its end.
    #[test]
    fn phases_are_barriers_and_cover_every_chunk() {
        let s = scenario(40);
        let net = Network::homogeneous(16, 25e6);
        let p = run(&s, &net, &SimOptions::default(), PhaseOptions { phase_seconds: 3.0, sar: false, ..Default::default() }, None).unwrap();
        assert!(p.phases.len() >= 3, "40 chunks of 8 MiB in 3-s phases on 25 MB/s links: {:?}", p.phases);
        assert_eq!(p.phases.iter().map(|ph| ph.chunks).sum::<usize>(), 40);
        assert_eq!(p.result.jobs.len(), 40);
        for w in p.phases.windows(2) {
            assert_eq!(w[1].start, w[0].end);
        }
        let mut starts: Vec<f64> = p.phases.iter().map(|ph| ph.start).collect();
        for j in &p.result.jobs {
            let ph = p.phases.iter().rfind(|ph| ph.start <= j.start).unwrap();
            assert!(j.end <= ph.end + 1e-9, "a repair outlived its phase: {j:?} in {ph:?}");
            starts.retain(|&s| s != j.start);
        }
        assert!(starts.is_empty(), "every phase started some repair at its start: {starts:?} did not");
        assert_eq!(p.result.makespan, p.phases.last().unwrap().end);
        // Every lost chunk rebuilt: 8 MiB downloaded per lost chunk at the destinations at least.
        let down: f64 = p.result.download_bytes.iter().sum();
        assert!(down >= 40.0 * 6.0 * (8 << 20) as f64 - 1.0, "{down}");
    }

    /// The monitor is late: a node whose downlink users fill from the second phase on is
    /// still planned at full rate in that phase (its last period was idle), and avoided
    /// from the next one, once a period of the traffic has been seen.
    #[test]
    fn the_planner_sees_the_last_periods_foreground() {
        let s = scenario(60);
        let mut net = Network::homogeneous(16, 25e6);
        let busy = 5u32;
        let plain =
            run(&s, &net, &SimOptions::default(), PhaseOptions { phase_seconds: 3.0, sar: false, ..Default::default() }, None).unwrap();
        let t1 = plain.phases[1].start;
        net.foreground.push(Foreground { node: busy, direction: Direction::Down, points: vec![(t1, 24e6)] });
        let p = run(
            &s,
            &net,
            &SimOptions::default(),
            PhaseOptions { phase_seconds: 3.0, monitor_period: 1.0, sar: false, ..Default::default() },
            None,
        )
        .unwrap();
        assert_eq!(p.phases[0], plain.phases[0], "the first phase sees no foreground in either");
        assert!(p.phases.len() > 3);
        // Phase 1 was planned as without foreground, so it runs slower; later phases plan
        // around node 5, whose downlink has 30% left (the authors' floor) in their plans.
        let d1 = p.phases[1].end - p.phases[1].start;
        let d1_plain = plain.phases[1].end - plain.phases[1].start;
        assert!(d1 > d1_plain * 1.2, "phase 1 ran into foreground it could not see: {d1} vs {d1_plain}");
        assert!(p.result.download_bytes[busy as usize] < plain.result.download_bytes[busy as usize]);
    }

    /// ChameleonEC-IO: with two nodes' disks nearly taken by users' I/O (the links idle),
    /// planning with disk bandwidth keeps reads and writes off them, and the repair ends
    /// sooner than ChameleonEC's, which sees only the idle network. The users' I/O slows
    /// the repair: the engine applies disk foreground.
    #[test]
    fn chameleon_io_beats_chameleon_when_disks_are_busy() {
        let mut s = scenario(60);
        let mut net = Network::homogeneous(16, 25e6);
        for n in &mut net.nodes {
            n.disk_read = Some(10e6);
            n.disk_write = Some(10e6);
        }
        let opts = SimOptions::default();
        let p = PhaseOptions { phase_seconds: 20.0, ..Default::default() };
        let idle = run(&s, &net, &opts, p, None).unwrap().result.makespan;
        for busy in [3u32, 9] {
            for direction in [Direction::Read, Direction::Write] {
                net.foreground.push(Foreground { node: busy, direction, points: vec![(0.0, 9e6)] });
            }
        }
        let plain = run(&s, &net, &opts, p, None).unwrap().result.makespan;
        s.scheduler = Scheduler::ChameleonIo;
        let io = run(&s, &net, &opts, p, None).unwrap().result.makespan;
        assert!(plain > idle * 1.2, "users' disk I/O slows the network-only plan: {plain} s vs {idle} s idle");
        assert!(io < plain * 0.85, "ChameleonEC-IO {io} s against ChameleonEC {plain} s");
    }

    /// SAR in the simulator (ChameleonEC Exp#11): readers take 8/9 of one node's uplink from
    /// a quarter into the first phase, which the monitor has not seen. ETRP waits for that
    /// node's repairs at every phase's end; with SAR they are postponed (and run on beside
    /// the next phases) or, under half done, restarted without the node, and the repair as a
    /// whole ends sooner. Without a straggler SAR changes nothing. Every chunk is rebuilt
    /// either way.
    #[test]
    fn sar_postpones_stragglers_and_ends_sooner() {
        let s = scenario(24);
        let plain = Network::homogeneous(16, 25e6);
        let p = |sar| PhaseOptions { phase_seconds: 1.5, sar, ..Default::default() };
        let (etrp, sar) = (
            run(&s, &plain, &SimOptions::default(), p(false), None).unwrap(),
            run(&s, &plain, &SimOptions::default(), p(true), None).unwrap(),
        );
        assert_eq!(sar.phases.iter().map(|ph| ph.stragglers).sum::<usize>(), 0, "no straggler: {:?}", sar.phases);
        assert_eq!(etrp.result.makespan, sar.result.makespan);
        // The node in most stripes: the paper's injector targets a participant.
        let (_, lost, _) = s.plan_input(None, &|_, _| 0.0).unwrap();
        let busy = (1..16u32).max_by_key(|&n| lost.iter().filter(|c| c.holds(n)).count()).unwrap();
        let mut net = plain.clone();
        let at = etrp.phases[0].start + 0.25 * 1.5;
        net.foreground.push(Foreground { node: busy, direction: Direction::Up, points: vec![(at, 25e6 * 8.0 / 9.0)] });
        let (etrp, sar) =
            (run(&s, &net, &SimOptions::default(), p(false), None).unwrap(), run(&s, &net, &SimOptions::default(), p(true), None).unwrap());
        let late: usize = sar.phases.iter().map(|ph| ph.stragglers).sum();
        assert!(late > 0, "node {busy}'s repairs run late: {:?}", sar.phases);
        assert!(sar.result.makespan < etrp.result.makespan * 0.9, "SAR {} s against ETRP {} s", sar.result.makespan, etrp.result.makespan);
        for r in [&etrp, &sar] {
            // Every chunk planned once, and once more for each restart; none cancelled last.
            let (planned, again) = r.phases.iter().fold((0, 0), |(p, a), ph| (p + ph.chunks, a + ph.restarted));
            assert_eq!(planned - again, 24);
            assert!(r.result.jobs.iter().all(|j| !j.cancelled));
            // Every chunk's transfers ran to the end once; a restarted one also moved some
            // bytes before it was cancelled.
            let down: f64 = r.result.download_bytes.iter().sum();
            let once = 24.0 * 6.0 * (8 << 20) as f64;
            assert!(down >= once - 1.0 && (again > 0 || down <= once + 1.0), "{down} bytes downloaded, {again} restarts");
        }
        assert!(sar.phases.iter().any(|ph| ph.restarted > 0), "a straggler under half done was restarted");
        // A postponed repair that was not restarted ran on past its phase's end.
        let ran_on = sar.result.jobs.iter().any(|j| sar.phases.iter().any(|ph| j.start == ph.start && j.end > ph.end + 1e-9));
        assert!(ran_on, "{:?}", sar.phases);
    }
}
