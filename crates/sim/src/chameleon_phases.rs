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
use crate::network::{Foreground, Network};
use crate::scenario::FullNode;
use crate::Job;
use kintsugi_plan::schedule::{self, Scheduler};
use serde::Serialize;

/// How phases are cut and how late the monitor is.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseOptions {
    /// Length of a phase in seconds; 0: the paper's 20 s at 10 Gb/s, scaled to the links.
    pub phase_seconds: f64,
    /// The monitor's averaging period in seconds; 0: the phase length, as the prototype
    /// (`period.len` is both).
    pub monitor_period: f64,
}

/// One phase as it ran.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PhaseRecord {
    pub phase: usize,
    /// When it was planned and started, and when its last repair finished.
    pub start: f64,
    pub end: f64,
    pub chunks: usize,
}

/// A phased run: the engine's result over the whole repair, and its phases.
#[derive(Clone, Debug)]
pub struct PhasedRun {
    pub result: SimResult,
    pub phases: Vec<PhaseRecord>,
    pub phase_seconds: f64,
    pub monitor_period: f64,
}

/// Runs `s` (scheduler `chameleon`) phase by phase on `net`, its foreground included.
pub fn run(s: &FullNode, net: &Network, opts: &SimOptions, p: PhaseOptions) -> Result<PhasedRun> {
    if !s.scheduler.chameleon() {
        return Err(SimError::BadScenario(format!("phases are ChameleonEC's; the scheduler is {}", s.scheduler)));
    }
    for (what, v) in [("phase length", p.phase_seconds), ("monitor period", p.monitor_period)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(SimError::BadScenario(format!("the {what} must be a non-negative number of seconds, got {v}")));
        }
    }
    net.validate()?;
    // The phase length is fixed once, from the links' capacities, not from each phase's
    // residual bandwidth.
    let (code, lost, idle) = s.plan_input(Some(net), &|_| 0.0)?;
    let idle = match s.scheduler {
        Scheduler::ChameleonIo => idle.storage_bound(),
        _ => idle,
    };
    let phase_seconds = if p.phase_seconds > 0.0 { p.phase_seconds } else { schedule::chameleon_phase_seconds(&idle) };
    let monitor = if p.monitor_period > 0.0 { p.monitor_period } else { phase_seconds };
    let opts = SimOptions { admission: Admission::All, ..opts.clone() };

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
    let mut t = 0.0f64;
    while !todo.is_empty() {
        let window = ((t - monitor).max(0.0), t);
        let seen = |f: &Foreground| f.mean(window.0, window.1);
        let (_, _, mut cluster) = s.plan_input(Some(net), &seen)?;
        cluster.phase_seconds = phase_seconds;
        let chunks: Vec<_> = todo.iter().map(|&i| lost[i].clone()).collect();
        let seed = s.seed ^ 0x5eed ^ (phases.len() as u64) << 32;
        let plan = schedule::plan(code.as_ref(), s.method, s.scheduler, &chunks, &cluster, seed)?;
        // This phase: the plan's first; the rest waits for the next plan.
        let mut now = Vec::new();
        let mut later = Vec::new();
        for (r, &i) in plan.repairs.into_iter().zip(&todo) {
            if r.phase == 0 {
                now.push((i, Job { graph: r.graph, chunk_len: s.chunk, slice_len: s.slice, release: t, timeslots: r.slots }));
            } else {
                later.push(i);
            }
        }
        if now.is_empty() {
            return Err(SimError::BadScenario("ChameleonEC planned an empty first phase".into()));
        }
        let (ids, batch): (Vec<usize>, Vec<Job>) = now.into_iter().unzip();
        let r = engine::run(net, &batch, &opts)?;
        for (&i, j) in ids.iter().zip(r.jobs) {
            jobs[i] = Some(j);
        }
        for n in 0..nodes {
            total.upload_bytes[n] += r.upload_bytes[n];
            total.download_bytes[n] += r.download_bytes[n];
        }
        total.events += r.events;
        total.transfers += r.transfers;
        total.local_updates += r.local_updates;
        total.full_updates += r.full_updates;
        if let (Some(all), Some(logs)) = (&mut total.rates, r.rates) {
            // Phases do not overlap: each node's log goes on where the last phase's ended.
            for (all, log) in all.iter_mut().zip(logs) {
                let last = all.last().map_or(0.0, |e| e.0);
                all.extend(log.into_iter().filter(|e| e.0 >= last));
            }
        }
        phases.push(PhaseRecord { phase: phases.len(), start: t, end: r.makespan.max(t), chunks: ids.len() });
        t = r.makespan.max(t);
        todo = later;
    }
    total.makespan = t;
    total.jobs = jobs.into_iter().map(|j| j.expect("every chunk ran in some phase")).collect();
    Ok(PhasedRun { result: total, phases, phase_seconds, monitor_period: monitor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Direction;
    use kintsugi_plan::Shape;

    fn scenario(chunks: usize) -> FullNode {
        FullNode {
            nodes: 16,
            chunks,
            code: "rs:6,3".parse().unwrap(),
            method: Shape::Ecpipe,
            link: 25e6,
            chunk: 8 << 20,
            slice: 1 << 20,
            seed: 3,
            max_active: usize::MAX,
            scheduler: Scheduler::Chameleon,
            requestors: 0,
            failed: 1,
        }
    }

    /// Phases run one after another, each starting when the last ended, and take every
    /// chunk once; a phase's repairs start with it and end by its end.
    #[test]
    fn phases_are_barriers_and_cover_every_chunk() {
        let s = scenario(40);
        let net = Network::homogeneous(16, 25e6);
        let p = run(&s, &net, &SimOptions::default(), PhaseOptions { phase_seconds: 3.0, monitor_period: 0.0 }).unwrap();
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
        let plain = run(&s, &net, &SimOptions::default(), PhaseOptions { phase_seconds: 3.0, monitor_period: 0.0 }).unwrap();
        let t1 = plain.phases[1].start;
        net.foreground.push(Foreground { node: busy, direction: Direction::Down, points: vec![(t1, 24e6)] });
        let p = run(&s, &net, &SimOptions::default(), PhaseOptions { phase_seconds: 3.0, monitor_period: 1.0 }).unwrap();
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
        let p = PhaseOptions { phase_seconds: 20.0, monitor_period: 0.0 };
        let idle = run(&s, &net, &opts, p).unwrap().result.makespan;
        for busy in [3u32, 9] {
            for direction in [Direction::Read, Direction::Write] {
                net.foreground.push(Foreground { node: busy, direction, points: vec![(0.0, 9e6)] });
            }
        }
        let plain = run(&s, &net, &opts, p).unwrap().result.makespan;
        s.scheduler = Scheduler::ChameleonIo;
        let io = run(&s, &net, &opts, p).unwrap().result.makespan;
        assert!(plain > idle * 1.2, "users' disk I/O slows the network-only plan: {plain} s vs {idle} s idle");
        assert!(io < plain * 0.85, "ChameleonEC-IO {io} s against ChameleonEC {plain} s");
    }
}
