//! Users' requests in the simulator: closed-loop clients issuing YCSB-style reads and
//! updates to key-value servers on the storage nodes, as ChameleonEC's foreground (YCSB-A
//! against servers on the repairing nodes; ../shared/papers/notes/000-chameleonec.md,
//! "estimate [foreground latency] from the completion times of simulated request flows").
//!
//! Each client is a node of its own (its link `client_link`) and runs its requests one
//! after another, with no think time, as YCSB's threads do. A request moves one value
//! between the client and the node holding its record: a read from the node (its disk,
//! where modelled, then its uplink) to the client, an update the other way. Records are
//! spread over the live nodes at random and chosen zipfian. Requests share every link
//! flow by flow with repair (weighted max-min, as TCP shares a link per connection),
//! whereas foreground rate series take their rate first. So a repair slows requests and
//! requests slow a repair, and the two figures ChameleonEC reports come out of the run:
//! request latency (P99) and the interference degree T*/T - 1 (the trace's time with the
//! repair over its time alone).

use crate::engine::{Job, JobResult, Request};
use crate::error::{Result, SimError};
use crate::network::{Direction, Network, NodeSpec};
use crate::zipf::Zipfian;
use kintsugi_codes::{HelperTerm, RepairEquation};
use kintsugi_plan::{shapes, NodeId, RepairGraph, RepairTask, Shape};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// The most requests one run holds (clients x requests per client): the paper's trace is
/// 400,000.
pub const MAX_REQUESTS: usize = 1_000_000;
/// The most records (each has its node, and the zipfian draw sums over all of them).
pub const MAX_RECORDS: u64 = 10_000_000;

/// The clients and what they ask for.
#[derive(Clone, Debug)]
pub struct RequestLoad {
    /// Closed-loop clients, each on a node of its own.
    pub clients: usize,
    /// Requests each client makes.
    pub requests: usize,
    /// Bytes of a value (YCSB-A in ChameleonEC: 512 KiB).
    pub value: usize,
    /// Share of reads; the rest are whole-value updates.
    pub read_share: f64,
    /// Records, each on one live node.
    pub records: u64,
    /// Zipfian skew of the record chosen (YCSB's 0.99).
    pub zipf: f64,
    /// Each client's link, bytes per second both ways.
    pub client_link: f64,
    pub seed: u64,
}

/// The requests drawn for one run: per client, in order, (server node, read?).
#[derive(Clone, Debug)]
pub struct Trace {
    /// Client c is node `first_client + c`.
    pub first_client: NodeId,
    pub value: usize,
    pub ops: Vec<Vec<(NodeId, bool)>>,
}

impl RequestLoad {
    /// Draws the trace over the live `servers`, and adds the clients' nodes to `net`.
    pub fn draw(&self, net: &mut Network, servers: &[NodeId]) -> Result<Trace> {
        let bad = |m: &str| Err(SimError::BadScenario(m.into()));
        if self.clients == 0 || self.requests == 0 || self.records == 0 || self.value == 0 {
            return bad("request clients, requests per client, records and the value size must all be positive");
        }
        // Every request is a job held in memory (about a kilobyte each with its state).
        if self.clients.saturating_mul(self.requests) > MAX_REQUESTS {
            return Err(SimError::BadScenario(format!("at most {MAX_REQUESTS} requests in all (clients x requests per client)")));
        }
        if self.records > MAX_RECORDS {
            return Err(SimError::BadScenario(format!("at most {MAX_RECORDS} records")));
        }
        if !((0.0..=1.0).contains(&self.read_share) && self.zipf > 0.0 && self.zipf < 1.0) {
            return bad("the read share must be within [0, 1] and the zipfian skew within (0, 1)");
        }
        if !(self.client_link > 0.0 && self.client_link.is_finite()) {
            return bad("the clients' link rate must be positive");
        }
        if servers.is_empty() {
            return bad("requests need at least one live node to serve them");
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed ^ 0x7265_7175_6573_7473);
        let home: Vec<NodeId> = (0..self.records).map(|_| servers[rng.random_range(0..servers.len())]).collect();
        let zipf = Zipfian::new(self.records, self.zipf);
        let ops = (0..self.clients)
            .map(|_| (0..self.requests).map(|_| (home[zipf.key(&mut rng) as usize], rng.random::<f64>() < self.read_share)).collect())
            .collect();
        let first_client = net.nodes.len() as NodeId;
        net.nodes.extend((0..self.clients).map(|_| NodeSpec::link(self.client_link)));
        Ok(Trace { first_client, value: self.value, ops })
    }
}

/// One transfer of `len` bytes from `from` to `to`: a one-helper star.
fn transfer(from: NodeId, to: NodeId) -> Result<RepairGraph> {
    let equation = RepairEquation {
        lost: 1,
        sub_chunks: 1,
        terms: vec![HelperTerm { helper: 0, reads: std::iter::once(0..1).collect(), coefs: vec![1] }],
        structured: None,
    };
    let task = RepairTask { equation, helper_nodes: vec![from], destination: to };
    shapes::build(Shape::Cr, &task).map_err(|e| SimError::BadScenario(e.to_string()))
}

/// Latency figures of a set of requests, milliseconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    pub requests: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
}

impl Trace {
    /// Requests in all.
    pub fn len(&self) -> usize {
        self.ops.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the requests to `jobs`, every client starting at time 0, each request after
    /// its client's last; returns the index of the first. Results come back in this order.
    pub fn append(&self, jobs: &mut Vec<Job>) -> Result<usize> {
        let first = jobs.len();
        // 64 KiB slices: a value streams as TCP moves it, not store-and-forward.
        let slice = self.value.min(64 << 10);
        for (c, ops) in self.ops.iter().enumerate() {
            let client = self.first_client + c as NodeId;
            for (i, &(node, read)) in ops.iter().enumerate() {
                let graph = if read { transfer(node, client)? } else { transfer(client, node)? };
                let after = (i > 0).then(|| (jobs.len() - 1) as u32);
                jobs.push(Job {
                    graph,
                    chunk_len: self.value,
                    slice_len: slice,
                    release: 0.0,
                    timeslots: Vec::new(),
                    cancel_at: None,
                    request: Some(Request { after }),
                });
            }
        }
        Ok(first)
    }

    /// The requests' (server node, read?) in [`Trace::append`]'s order.
    fn flat(&self) -> impl Iterator<Item = (NodeId, bool)> + '_ {
        self.ops.iter().flatten().copied()
    }

    /// Mean bytes per second the requests moved over each server's uplink and downlink in
    /// [a, b], from their results (in append order; each request's bytes spread evenly
    /// over its time): what a node's traffic monitor would have counted as foreground.
    /// Requests that have not started by `b` count nothing.
    pub fn rates(&self, results: &[JobResult], a: f64, b: f64) -> HashMap<(NodeId, Direction), f64> {
        let mut out: HashMap<(NodeId, Direction), f64> = HashMap::new();
        if b <= a {
            return out;
        }
        for ((node, read), r) in self.flat().zip(results) {
            let (lo, hi) = (r.start.max(a), r.end.min(b));
            if hi <= lo {
                continue;
            }
            let share = if r.end > r.start { (hi - lo) / (r.end - r.start) } else { 1.0 };
            let dir = if read { Direction::Up } else { Direction::Down };
            *out.entry((node, dir)).or_default() += share * self.value as f64 / (b - a);
        }
        out
    }

    /// Bytes every request moves, per node and direction (uplink, downlink): a read's value
    /// leaves its server and reaches its client, an update's the other way.
    pub fn bytes_per_node(&self, nodes: usize) -> (Vec<f64>, Vec<f64>) {
        let (mut up, mut down) = (vec![0.0; nodes], vec![0.0; nodes]);
        for (c, ops) in self.ops.iter().enumerate() {
            let client = self.first_client as usize + c;
            for &(node, read) in ops {
                let (from, to) = if read { (node as usize, client) } else { (client, node as usize) };
                up[from] += self.value as f64;
                down[to] += self.value as f64;
            }
        }
        (up, down)
    }

    /// When the last request ended: the trace's execution time.
    pub fn end(results: &[JobResult]) -> f64 {
        results.iter().map(|r| r.end).fold(0.0, f64::max)
    }

    /// Latency of the requests that started in [a, b) (all of them when `window` is None).
    pub fn latency(results: &[JobResult], window: Option<(f64, f64)>) -> Latency {
        let mut ms: Vec<f64> =
            results.iter().filter(|r| window.is_none_or(|(a, b)| r.start >= a && r.start < b)).map(|r| (r.end - r.start) * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        // Nearest rank, as HdrHistogram's value_at_quantile.
        let q = |p: f64| if ms.is_empty() { 0.0 } else { ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1] };
        Latency { requests: ms.len(), p50_ms: q(0.5), p99_ms: q(0.99), p999_ms: q(0.999) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{self, SimOptions};

    /// A repair moving `bytes` from one node to another.
    fn repair_job(from: NodeId, to: NodeId, bytes: usize) -> Job {
        Job {
            graph: transfer(from, to).unwrap(),
            chunk_len: bytes,
            slice_len: 64 << 10,
            release: 0.0,
            timeslots: Vec::new(),
            cancel_at: None,
            request: None,
        }
    }

    fn load(clients: usize, requests: usize) -> RequestLoad {
        RequestLoad { clients, requests, value: 1 << 20, read_share: 0.5, records: 100, zipf: 0.99, client_link: 100e6, seed: 3 }
    }

    /// One client alone on idle links: every request takes value / link, one after
    /// another, so the trace lasts requests x that (the pipeline's fill adds a slice per hop).
    #[test]
    fn a_lone_client_runs_its_requests_back_to_back() {
        let mut net = Network::homogeneous(4, 100e6);
        let trace = load(1, 20).draw(&mut net, &[0, 1, 2, 3]).unwrap();
        assert_eq!(net.nodes.len(), 5);
        let mut jobs = Vec::new();
        trace.append(&mut jobs).unwrap();
        let r = engine::run(&net, &jobs, &SimOptions::default()).unwrap();
        let one = (1 << 20) as f64 / 100e6;
        for w in r.jobs.windows(2) {
            assert!((w[1].start - w[0].end).abs() < 1e-9, "a request starts when the last ends");
        }
        let lat = Trace::latency(&r.jobs, None);
        assert_eq!(lat.requests, 20);
        assert!((lat.p50_ms / 1e3 / one - 1.0).abs() < 0.08, "{} ms against {} ms", lat.p50_ms, one * 1e3);
        assert!((Trace::end(&r.jobs) / (20.0 * one) - 1.0).abs() < 0.08);
        // What a monitor sees: the value's bytes over the trace, split by direction.
        let rates = trace.rates(&r.jobs, 0.0, Trace::end(&r.jobs));
        let total: f64 = rates.values().sum::<f64>() * Trace::end(&r.jobs);
        assert!((total / (20.0 * (1 << 20) as f64) - 1.0).abs() < 1e-6);
    }

    /// Clients contending for one server share its link, and a repair through that link
    /// slows them: the latency model the interference figures rest on.
    #[test]
    fn requests_share_links_with_a_repair() {
        let mut net = Network::homogeneous(3, 100e6);
        let mut l = load(2, 10);
        l.read_share = 1.0;
        let trace = l.draw(&mut net, &[1]).unwrap();
        let mut alone = Vec::new();
        trace.append(&mut alone).unwrap();
        let base = engine::run(&net, &alone, &SimOptions::default()).unwrap();
        // Two clients reading node 1 at once: each at half its uplink.
        let one = (1 << 20) as f64 / 100e6;
        let p50 = Trace::latency(&base.jobs, None).p50_ms / 1e3;
        assert!((p50 / (2.0 * one) - 1.0).abs() < 0.1, "{p50} s against {} s", 2.0 * one);
        // A repair reading 4 MiB from node 1 to node 2 takes a third of the uplink.
        let mut with = vec![repair_job(1, 2, 4 << 20)];
        let first = trace.append(&mut with).unwrap();
        assert_eq!(first, 1);
        let r = engine::run(&net, &with, &SimOptions::default()).unwrap();
        let t_alone = Trace::end(&base.jobs);
        let t_with = Trace::end(&r.jobs[first..]);
        let extra = (4 << 20) as f64 / 100e6;
        assert!(
            (t_with - t_alone - extra).abs() < 0.05 * extra,
            "the trace ends {:.4} s later, the repair moved {extra:.4} s of bytes",
            t_with - t_alone
        );
        let during = Trace::latency(&r.jobs[first..], Some((0.0, r.jobs[0].end)));
        assert!(during.p50_ms / 1e3 > 1.3 * p50, "requests during the repair are slower");
    }

    /// A repair cap holds repair's transfers, not users' requests: a 4 MiB repair under a
    /// cap of a quarter of the link takes four times as long, while a request beside it
    /// takes the rest of the link.
    #[test]
    fn repair_caps_hold_repair_but_not_requests() {
        let mut net = Network::homogeneous(3, 100e6);
        net.repair_caps.push(crate::network::Foreground { node: 1, direction: Direction::Up, points: vec![(0.0, 25e6)] });
        let mut l = load(1, 4);
        l.read_share = 1.0;
        let trace = l.draw(&mut net, &[1]).unwrap();
        let repair = repair_job(1, 2, 4 << 20);
        for model in [crate::engine::Model::Slice, crate::engine::Model::Fluid] {
            let mut jobs = vec![repair.clone()];
            let first = trace.append(&mut jobs).unwrap();
            let r = engine::run(&net, &jobs, &SimOptions { model, ..Default::default() }).unwrap();
            let t = (4 << 20) as f64 / 25e6;
            assert!((r.jobs[0].end / t - 1.0).abs() < 0.03, "{model:?}: the repair took {} s against {t} s", r.jobs[0].end);
            let four = 4.0 * (1 << 20) as f64 / 75e6;
            assert!((Trace::end(&r.jobs[first..]) / four - 1.0).abs() < 0.05, "{model:?}: requests took {}", Trace::end(&r.jobs[first..]));
        }
        net.repair_caps[0].points[0].1 = 0.0;
        assert!(net.validate().is_err(), "a cap of nothing would stall the repair");
    }

    #[test]
    fn bad_loads_are_refused() {
        let mut net = Network::homogeneous(2, 1e6);
        for f in [|l: &mut RequestLoad| l.clients = 0, |l: &mut RequestLoad| l.zipf = 1.0, |l: &mut RequestLoad| l.read_share = 2.0] {
            let mut l = load(1, 1);
            f(&mut l);
            assert!(l.draw(&mut net, &[0]).is_err());
        }
        assert!(load(1, 1).draw(&mut net, &[]).is_err());
        assert!(load(1000, 1001).draw(&mut net, &[0]).is_err(), "memory stays bounded");
    }
}
