//! A full-node repair beside users' requests (see [`crate::requests`]): ChameleonEC's
//! Exp#1 and #2 measure repair throughput, the foreground's P99 latency and the
//! interference degree T*/T - 1, where T is the trace's execution time alone and T* with
//! the repair.
//!
//! The clients start at time 0 and the repair at `start`, so the planners, which see what
//! the nodes' traffic counters saw before (the requests run alone up to then), plan around
//! the busy nodes; random sources ignore it. The trace runs twice: alone, for T and the
//! baseline latency, and with the repair.

use crate::chameleon_phases::{self, PhaseOptions, PhaseRecord, WithRequests};
use crate::engine::{self, SimOptions, SimResult};
use crate::error::{Result, SimError};
use crate::network::{Direction, Network};
use crate::requests::{Latency, RequestLoad, Trace};
use crate::scenario::FullNode;
use kintsugi_plan::NodeId;
use serde::Serialize;

/// What the requests saw.
#[derive(Clone, Debug, Serialize)]
pub struct ForegroundReport {
    pub clients: usize,
    pub requests: usize,
    pub value_bytes: usize,
    /// When the repair started, seconds after the clients.
    pub repair_start: f64,
    /// The trace's execution time alone (T) and beside the repair (T*).
    pub trace_seconds_alone: f64,
    pub trace_seconds: f64,
    /// ChameleonEC's interference degree, T*/T - 1.
    pub interference: f64,
    /// T* - T: the time the repair added to the trace.
    pub delay_seconds: f64,
    /// Requests that started while the repair ran, and in the same window alone.
    pub during_repair: Latency,
    pub baseline: Latency,
    /// Every request of the trace beside the repair.
    pub whole_trace: Latency,
    /// The trace ended before the repair did, so T* understates the interference.
    pub trace_shorter_than_repair: bool,
}

/// A repair beside requests: the repair's result (its jobs only, times from the repair's
/// start, bytes without the requests'), its phases for ChameleonEC, and the requests' figures.
pub struct LoadedRun {
    pub result: SimResult,
    pub phases: Option<(f64, f64, Vec<PhaseRecord>)>,
    pub foreground: ForegroundReport,
}

/// Runs `s` on `net` with `load`'s clients (added to a copy of the network), the repair
/// from `start` on; ChameleonEC's schedulers phase by phase with `phases`.
pub fn run(s: &FullNode, net: &Network, load: &RequestLoad, start: f64, opts: &SimOptions, phases: PhaseOptions) -> Result<LoadedRun> {
    if !(start >= 0.0 && start.is_finite()) {
        return Err(SimError::BadScenario(format!("the repair's start must be a non-negative number of seconds, got {start}")));
    }
    let mut net = net.clone();
    let servers: Vec<NodeId> = (s.failed as NodeId..s.nodes as NodeId).collect();
    let trace = load.draw(&mut net, &servers)?;
    let mut alone_jobs = Vec::new();
    trace.append(&mut alone_jobs)?;
    let alone = engine::run(&net, &alone_jobs, opts)?.jobs;

    let (mut result, requests, phase_log) = if s.scheduler.chameleon() {
        let with = WithRequests { trace: &trace, alone: &alone, start };
        let p = chameleon_phases::run(s, &net, opts, phases, Some(with))?;
        // Phases on the repair's clock, as the repair's jobs below.
        let phases = p.phases.into_iter().map(|ph| PhaseRecord { start: ph.start - start, end: ph.end - start, ..ph }).collect();
        (p.result, p.requests, Some((p.phase_seconds, p.monitor_period, phases)))
    } else {
        // One plan, from what the monitor saw before the repair: the requests' mean rates
        // over the last monitoring period (the phase length's default, or all of it).
        let from = if phases.monitor_period > 0.0 { (start - phases.monitor_period).max(0.0) } else { 0.0 };
        let users = trace.rates(&alone, from, start);
        let seen = |n: NodeId, d: Direction| net.foreground_mean(n, d, from, start) + users.get(&(n, d)).copied().unwrap_or(0.0);
        let (_, mut jobs, admission) = s.build_seen(Some(&net), &seen, start)?;
        let repairs = jobs.len();
        trace.append(&mut jobs)?;
        let mut r = engine::run(&net, &jobs, &SimOptions { admission, ..opts.clone() })?;
        let requests = r.jobs.split_off(repairs);
        r.makespan = r.jobs.iter().map(|j| j.end).fold(start, f64::max);
        (r, requests, None)
    };

    // The repair alone in the figures: its time from `start`, its bytes without the requests'.
    let repair_end = result.makespan;
    for j in &mut result.jobs {
        j.start -= start;
        j.end -= start;
    }
    result.makespan = repair_end - start;
    let (up, down) = trace.bytes_per_node(net.nodes.len());
    for n in 0..net.nodes.len() {
        result.upload_bytes[n] = (result.upload_bytes[n] - up[n]).max(0.0);
        result.download_bytes[n] = (result.download_bytes[n] - down[n]).max(0.0);
    }
    // The clients' nodes are the load's, not the cluster's.
    let cluster = trace.first_client as usize;
    result.upload_bytes.truncate(cluster);
    result.download_bytes.truncate(cluster);
    if let Some(r) = &mut result.rates {
        r.truncate(cluster);
    }

    let (t_alone, t_with) = (Trace::end(&alone), Trace::end(&requests));
    let window = Some((start, repair_end));
    let foreground = ForegroundReport {
        clients: load.clients,
        requests: trace.len(),
        value_bytes: load.value,
        repair_start: start,
        trace_seconds_alone: t_alone,
        trace_seconds: t_with,
        interference: t_with / t_alone - 1.0,
        delay_seconds: t_with - t_alone,
        during_repair: Trace::latency(&requests, window),
        baseline: Trace::latency(&alone, window),
        whole_trace: Trace::latency(&requests, None),
        trace_shorter_than_repair: t_with < repair_end,
    };
    Ok(LoadedRun { result, phases: phase_log, foreground })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::small_chameleon;
    use kintsugi_plan::schedule::Scheduler;

    fn load() -> RequestLoad {
        RequestLoad { clients: 4, requests: 400, value: 512 << 10, read_share: 0.5, records: 200, zipf: 0.99, client_link: 25e6, seed: 5 }
    }

    /// The repair slows the trace and the trace slows the repair; ChameleonEC, planning
    /// around the nodes the requests keep busy, repairs faster than random sources and
    /// delays the trace less.
    #[test]
    fn chameleon_interferes_less_than_random_sources() {
        let s = small_chameleon(24);
        let net = Network::homogeneous(s.nodes, s.link);
        let p = PhaseOptions { phase_seconds: 3.0, ..Default::default() };
        let opts = SimOptions { model: crate::engine::Model::Fluid, ..Default::default() };
        let cham = run(&s, &net, &load(), 2.0, &opts, p).unwrap();
        let mut r = s.clone();
        r.scheduler = Scheduler::Random;
        r.max_active = 1;
        let random = run(&r, &net, &load(), 2.0, &opts, p).unwrap();
        for x in [&cham, &random] {
            let f = &x.foreground;
            assert_eq!(f.requests, 1600);
            assert!(f.interference > 0.0, "a repair delays the trace");
            assert!(f.during_repair.p99_ms > f.baseline.p99_ms, "{:?}", f);
            assert!(!f.trace_shorter_than_repair);
            assert_eq!(x.result.jobs.len(), s.chunks);
            assert!(x.result.jobs.iter().all(|j| j.start >= 0.0));
        }
        assert!(cham.phases.is_some());
        assert!(cham.result.makespan < random.result.makespan, "{} against {}", cham.result.makespan, random.result.makespan);
        assert!(cham.foreground.delay_seconds < random.foreground.delay_seconds);
        // The same phases a repair per destination at a time: every chunk still rebuilt once,
        // and requests wait behind fewer repair connections.
        let mut one = s.clone();
        one.max_active = 1;
        let capped = run(&one, &net, &load(), 2.0, &opts, p).unwrap();
        assert_eq!(capped.result.jobs.len(), s.chunks);
        assert!(capped.foreground.during_repair.p99_ms < cham.foreground.during_repair.p99_ms);
        // The same trace alone in both.
        assert_eq!(cham.foreground.trace_seconds_alone, random.foreground.trace_seconds_alone);
    }
}
