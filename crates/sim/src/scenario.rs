//! Ready-made scenarios: one lost chunk (a degraded read), and a failed node holding many
//! chunks of random stripes (full-node repair). Both build their graphs with the same
//! planners the real cluster uses.

use crate::engine::{Admission, Job};
use crate::error::{Result, SimError};
use crate::network::Network;
use kintsugi_codes::{Code, CodeSpec, LinearCode};
use kintsugi_plan::schedule::{self, Cluster, LostChunk, Scheduler};
use kintsugi_plan::{shapes, NodeId, RepairGraph, RepairTask, Shape};
use std::sync::Arc;

/// One lost chunk, repaired to a requestor.
#[derive(Clone, Debug)]
pub struct Single {
    pub code: CodeSpec,
    pub method: Shape,
    /// Bytes per second of every link.
    pub link: f64,
    pub chunk: usize,
    pub slice: usize,
    /// Which shard of the stripe is lost.
    pub lost: usize,
}

impl Single {
    /// Shard i on node i; the requestor is node n. The lost shard's node holds no vertex.
    pub fn build(&self) -> Result<(Network, Vec<Job>)> {
        check_common(self.link, self.chunk, self.slice)?;
        let code = self.code.build()?;
        let n = code.n();
        if self.lost >= n {
            return Err(SimError::BadScenario(format!("lost shard {} is outside 0..{n}", self.lost)));
        }
        let all: Vec<usize> = (0..n).filter(|&i| i != self.lost).collect();
        let helpers = code.choose_helpers(self.lost, &all)?;
        let equation = code.repair_equation(self.lost, &helpers)?;
        let helper_nodes = equation.helpers().iter().map(|&h| h as NodeId).collect();
        let task = RepairTask { equation, helper_nodes, destination: n as NodeId };
        let graph = shapes::build(self.method, &task)?;
        let job = Job {
            graph,
            chunk_len: self.chunk,
            slice_len: self.slice,
            release: 0.0,
            timeslots: Vec::new(),
            cancel_at: None,
            request: None,
        };
        Ok((Network::homogeneous(n + 1, self.link), vec![job]))
    }
}

/// Closed-form repair time of one chunk on homogeneous links (the papers' formulas):
/// CR k*T, PPR ceil(log2(k+1))*T, ECPipe basic and cyclic (1+(k-1)/s)*T, with T = chunk/link,
/// s = chunk/slice and k the number of helpers.
pub fn closed_form(method: Shape, k: usize, chunk: usize, slice: usize, link: f64) -> f64 {
    let t = chunk as f64 / link;
    let s = chunk.div_ceil(slice) as f64;
    match method {
        Shape::Cr => k as f64 * t,
        Shape::Ppr => ((k + 1) as f64).log2().ceil() * t,
        Shape::Ecpipe | Shape::EcpipeCyclic => (1.0 + (k as f64 - 1.0) / s) * t,
        // A scheduler-drawn tree has no one formula.
        Shape::Tree => f64::NAN,
    }
}

/// A failed node (node 0) holding `chunks` chunks of random stripes over `nodes` nodes.
#[derive(Clone, Debug)]
pub struct FullNode {
    pub nodes: usize,
    pub chunks: usize,
    pub code: CodeSpec,
    pub method: Shape,
    pub link: f64,
    pub chunk: usize,
    pub slice: usize,
    pub seed: u64,
    /// Repairs running at once per destination; `usize::MAX` starts every repair at once.
    /// Ignored by schedulers with timeslots, whose schedule orders the transfers.
    pub max_active: usize,
    /// Who picks helpers and destinations.
    pub scheduler: Scheduler,
    /// Extra nodes (ids nodes..nodes+requestors) that hold no data and receive the rebuilt
    /// chunks in turn, as ECPipe's requestors; 0: rebuilt chunks go to storage nodes.
    pub requestors: usize,
    /// Nodes failed at once (nodes 0..failed), each holding about `chunks` chunks; stripes
    /// lose 1 to `failed` chunks (RepairBoost's multi-node repair, its Exp. 5).
    pub failed: usize,
    /// A real cluster's lost chunks and live nodes, in place of the random ones `nodes`,
    /// `chunks`, `failed` and `seed` draw (the coordinator's `auto`).
    pub given: Option<Arc<Given>>,
}

/// What a running cluster has lost, for predicting its repair: each lost chunk with its
/// stripe's placement (node ids are the network's), and the nodes that are up and may
/// help or take a rebuilt chunk.
#[derive(Clone, Debug, Default)]
pub struct Given {
    pub lost: Vec<LostChunk>,
    pub live: Vec<NodeId>,
    /// Which graphs the cluster's nodes hold to their RepairBoost timeslots (the
    /// coordinator's `gate_timeslots`); the others run as soon as their inputs allow. None:
    /// every graph, as the paper.
    pub gates: Option<fn(&RepairGraph) -> bool>,
}

pub use kintsugi_plan::schedule::random_lost_chunks as lost_chunks;

/// What the bandwidth monitor reports: the foreground on a node's link or disk, in bytes
/// per second, that the planners subtract from its capacity.
pub type Seen<'a> = &'a dyn Fn(NodeId, crate::network::Direction) -> f64;
use kintsugi_plan::schedule::random_lost_chunks_of;

impl FullNode {
    /// The lost chunks, the cluster and the scheduler's plan, as jobs.
    pub fn build(&self) -> Result<(Network, Vec<Job>, Admission)> {
        self.build_on(None)
    }

    /// The code, the lost chunks and the cluster the schedulers plan with. With `net`, each
    /// node's bandwidth is its links less the foreground `seen` reports on them (never
    /// below 30%, ChameleonEC's rule), and the network's pair caps are the planners' link rates.
    pub(crate) fn plan_input(&self, net: Option<&Network>, seen: Seen) -> Result<(Arc<dyn Code>, Vec<LostChunk>, Cluster)> {
        check_common(self.link, self.chunk, self.slice)?;
        let code: Arc<dyn Code> = self.code.build()?;
        let n = code.n();
        if self.max_active == 0 {
            return Err(SimError::BadScenario("--max-active must be at least 1".into()));
        }
        if let Some(g) = &self.given {
            // A stripe that lost one chunk reads from its n - 1 others and rebuilds outside them.
            if g.live.len() < n {
                return Err(SimError::BadScenario(format!(
                    "{} needs {} live nodes (the {} other chunks of a stripe plus a destination outside it), but {} are up",
                    self.code,
                    n,
                    n - 1,
                    g.live.len()
                )));
            }
            return Ok((code, g.lost.clone(), self.cluster_seen(net, seen)));
        }
        if n + (self.requestors == 0) as usize > self.nodes {
            return Err(SimError::BadScenario(format!(
                "{} needs {} nodes per stripe plus a destination outside it, but the cluster has {} nodes",
                self.code, n, self.nodes
            )));
        }
        if self.failed == 0 || self.failed > code.tolerance() || (self.requestors == 0 && n + self.failed > self.nodes) {
            return Err(SimError::BadScenario(format!(
                "--failed must be 1 to {} for {} (the failures it tolerates), and leave a live node outside each stripe",
                code.tolerance(),
                self.code
            )));
        }
        let lost = random_lost_chunks_of(self.nodes, self.chunks, n, self.failed, self.seed);
        Ok((code, lost, self.cluster_seen(net, seen)))
    }

    /// The cluster the schedulers plan with, as [`FullNode::plan_input`] builds it (each
    /// ChameleonEC phase builds it again from what the monitor saw; the chunks stay).
    pub(crate) fn cluster_seen(&self, net: Option<&Network>, seen: Seen) -> Cluster {
        let total = self.nodes + self.requestors;
        let live = match &self.given {
            Some(g) => g.live.clone(),
            None => (self.failed as NodeId..total as NodeId).collect(),
        };
        let mut cluster = Cluster::homogeneous(live.clone());
        cluster.default_bandwidth = self.link;
        cluster.requestors = (self.nodes as NodeId..total as NodeId).collect();
        cluster.chunk_bytes = self.chunk as f64;
        if let Some(net) = net {
            let fg = |n: usize, d: crate::network::Direction| seen(n as NodeId, d);
            use crate::network::Direction;
            for n in live.iter().map(|&n| n as usize).filter(|&n| n < net.nodes.len()) {
                let spec = &net.nodes[n];
                let up = schedule::residual(spec.up, fg(n, Direction::Up));
                let down = schedule::residual(spec.down, fg(n, Direction::Down));
                cluster.bandwidth.insert(n as NodeId, (up, down));
                // Modelled disks: what users' I/O leaves of them (ChameleonEC-IO plans with it).
                if spec.disk_read.is_some() || spec.disk_write.is_some() {
                    let read = spec.disk_read.map_or(f64::INFINITY, |c| schedule::residual(c, fg(n, Direction::Read)));
                    let write = spec.disk_write.map_or(f64::INFINITY, |c| schedule::residual(c, fg(n, Direction::Write)));
                    cluster.storage.insert(n as NodeId, (read, write));
                }
            }
            // Links with caps of their own (racks, regions): what ECPipe's weighted path and
            // RepairBoost's polling mode plan with, as they would with measured link rates.
            for (&(a, b), &cap) in &net.pair_caps {
                if live.contains(&a) && live.contains(&b) {
                    cluster.links.insert((a, b), cap);
                }
            }
        }
        cluster
    }

    /// Whether `g`'s transfers keep to their timeslots (see [`Given::gates`]).
    fn gates(&self, g: &RepairGraph) -> bool {
        self.given.as_ref().and_then(|c| c.gates).is_none_or(|f| f(g))
    }

    /// The live node in the most stripes that lost a chunk: where ChameleonEC's Exp#11 puts
    /// its straggler (readers on a participant of many repairs).
    pub fn busiest_participant(&self) -> Result<NodeId> {
        let (_, lost, cluster) = self.plan_input(None, &|_, _| 0.0)?;
        cluster
            .nodes
            .iter()
            .copied()
            .max_by_key(|&n| (lost.iter().filter(|c| c.placement.contains(&Some(n))).count(), std::cmp::Reverse(n)))
            .ok_or_else(|| SimError::BadScenario("no live node".into()))
    }

    /// As [`FullNode::build`], the schedulers planning with the residual bandwidth `net`
    /// leaves at time 0: each node's links less the foreground traffic then, never below
    /// 30% (ChameleonEC's rule, the coordinator's too). The monitoring lag is the whole
    /// repair: the plan is made once, from the start (see `chameleon_phases` for a plan
    /// made again at each phase).
    pub fn build_on(&self, net: Option<&Network>) -> Result<(Network, Vec<Job>, Admission)> {
        let at_start = |n, d| net.map_or(0.0, |net| net.foreground_mean(n, d, 0.0, 0.0));
        self.build_seen(net, &at_start, 0.0)
    }

    /// As [`FullNode::build_on`], planning with the foreground `seen` reports, every repair
    /// released at `release`.
    pub fn build_seen(&self, net: Option<&Network>, seen: Seen, release: f64) -> Result<(Network, Vec<Job>, Admission)> {
        let (code, lost, cluster) = self.plan_input(net, seen)?;
        let plan = schedule::plan(code.as_ref(), self.method, self.scheduler, &lost, &cluster, self.seed ^ 0x5eed)?;
        let jobs = plan
            .repairs
            .into_iter()
            .map(|r| Job {
                timeslots: if self.gates(&r.graph) { r.slots } else { Vec::new() },
                graph: r.graph,
                chunk_len: self.chunk,
                slice_len: self.slice,
                release,
                cancel_at: None,
                request: None,
            })
            .collect();
        let admission = if self.scheduler.timeslots() || self.max_active == usize::MAX {
            Admission::All
        } else {
            Admission::PerDestination(self.max_active)
        };
        Ok((Network::homogeneous(self.nodes + self.requestors, self.link), jobs, admission))
    }
}

/// ECPipe's EC2 experiment (§6.2): 16 nodes, four per region, one RS(12,4) stripe with a
/// shard on each; links between regions capped by the paper's Table 1 (Mb/s, from row
/// region to column region; the diagonal within a region). The node holding `lost` reads
/// it back degraded through an ECPipe chain.
#[derive(Clone, Debug)]
pub struct Geo {
    pub matrix: [[f64; 4]; 4],
    pub chunk: usize,
    pub slice: usize,
    pub lost: usize,
}

/// ECPipe Table 1, North America (California, Canada, Ohio, Oregon), Mb/s.
pub const EC2_NA: [[f64; 4]; 4] =
    [[501.3, 57.2, 44.1, 299.9], [55.3, 732.0, 63.3, 48.0], [46.3, 65.7, 332.5, 95.6], [297.8, 50.2, 93.6, 250.1]];
/// ECPipe Table 1, Asia (Mumbai, Seoul, Singapore, Tokyo), Mb/s.
pub const EC2_ASIA: [[f64; 4]; 4] =
    [[624.8, 62.3, 39.5, 37.7], [63.8, 265.7, 86.1, 183.2], [41.5, 88.1, 493.0, 49.1], [39.7, 181.0, 46.9, 489.1]];

impl Geo {
    pub const NODES: usize = 16;

    /// Bytes per second from node a to node b.
    pub fn link(&self, a: NodeId, b: NodeId) -> f64 {
        self.matrix[a as usize / 4][b as usize / 4] * 1e6 / 8.0
    }

    /// The network: nodes with fast NICs (10 Gb/s) behind the region-pair caps.
    pub fn network(&self) -> Network {
        let mut net = Network::homogeneous(Self::NODES, 10e9 / 8.0);
        for a in 0..Self::NODES as NodeId {
            for b in 0..Self::NODES as NodeId {
                if a != b {
                    net.pair_caps.insert((a, b), self.link(a, b));
                }
            }
        }
        net
    }

    /// The job for a chain through `helpers` (shard = node index), in that order.
    pub fn job(&self, helpers: &[usize]) -> Result<Job> {
        check_common(1.0, self.chunk, self.slice)?;
        let code = LinearCode::rs(12, 4)?;
        let equation = code.repair_equation(self.lost, helpers)?;
        let helper_nodes = equation.helpers().iter().map(|&h| h as NodeId).collect();
        let task = RepairTask { equation, helper_nodes, destination: self.lost as NodeId };
        let graph = shapes::build(Shape::Ecpipe, &task)?;
        Ok(Job { graph, chunk_len: self.chunk, slice_len: self.slice, release: 0.0, timeslots: Vec::new(), cancel_at: None, request: None })
    }
}

fn check_common(link: f64, chunk: usize, slice: usize) -> Result<()> {
    if !(link > 0.0 && link.is_finite()) {
        return Err(SimError::BadScenario(format!("link bandwidth must be positive, got {link} bytes/s")));
    }
    if chunk == 0 || slice == 0 {
        return Err(SimError::BadScenario("chunk and slice sizes must be at least 1 byte".into()));
    }
    Ok(())
}

/// ChameleonEC's test scenario: 16 nodes over 25 MB/s links, RS(6,3), `chunks` lost chunks
/// of 8 MiB in 1 MiB slices, every repair admitted at once.
#[cfg(test)]
pub(crate) fn small_chameleon(chunks: usize) -> FullNode {
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
        given: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster's own chunks and live nodes, given, plan as the same ones drawn; too few
    /// live nodes for the code is refused with what it needs.
    #[test]
    fn given_chunks_plan_as_the_drawn_ones() {
        for scheduler in [Scheduler::Random, Scheduler::Repairboost, Scheduler::Chameleon] {
            let drawn = FullNode { scheduler, chunks: 12, ..small_chameleon(12) };
            let lost = random_lost_chunks_of(drawn.nodes, drawn.chunks, 9, 1, drawn.seed);
            let given = FullNode { given: Some(Arc::new(Given { lost, live: (1..16).collect(), gates: None })), ..drawn.clone() };
            let net = Network::homogeneous(16, drawn.link);
            let graphs = |s: &FullNode| s.build_on(Some(&net)).unwrap().1.into_iter().map(|j| j.graph.vertices.len()).collect::<Vec<_>>();
            assert_eq!(graphs(&given), graphs(&drawn), "{scheduler}");
            let few = FullNode { given: Some(Arc::new(Given { lost: Vec::new(), live: (1..9).collect(), gates: None })), ..drawn };
            let e = few.build_on(Some(&net)).unwrap_err().to_string();
            assert!(e.contains("needs 9 live nodes") && e.contains("8 are up"), "{e}");
        }
    }

    /// RepairBoost's timeslots hold for the graphs the cluster gates, and only those.
    #[test]
    fn given_gating_keeps_slots_only_on_gated_graphs() {
        let base = FullNode { scheduler: Scheduler::Repairboost, chunks: 12, ..small_chameleon(12) };
        let lost = random_lost_chunks_of(base.nodes, base.chunks, 9, 1, base.seed);
        let net = Network::homogeneous(16, base.link);
        let slotted = |method: Shape, gates: Option<fn(&RepairGraph) -> bool>| {
            let s =
                FullNode { method, given: Some(Arc::new(Given { lost: lost.clone(), live: (1..16).collect(), gates })), ..base.clone() };
            s.build_on(Some(&net)).unwrap().1.iter().filter(|j| !j.timeslots.is_empty()).count()
        };
        let store_and_forward: fn(&RepairGraph) -> bool = |g| !g.pipelined;
        assert_eq!(slotted(Shape::Ecpipe, None), 12, "the paper gates every graph");
        assert_eq!(slotted(Shape::Ecpipe, Some(store_and_forward)), 0, "ECPipe pipelines: not gated");
        assert_eq!(slotted(Shape::Ppr, Some(store_and_forward)), 12, "PPR stores and forwards: gated");
    }
    use crate::network::{Direction, Foreground};

    /// Downloads planned onto each node by the scheduler's graphs.
    fn downloads(jobs: &[Job], nodes: usize) -> Vec<f64> {
        let mut d = vec![0.0; nodes];
        for j in jobs {
            for (n, v) in j.graph.traffic().download {
                d[n as usize] += v;
            }
        }
        d
    }

    /// A node whose downlink users fill at the start gets fewer repair downloads from
    /// ChameleonEC's planner: it plans with the residual bandwidth, here 30% of the link.
    #[test]
    fn chameleon_plans_around_foreground_traffic_at_the_start() {
        let s = small_chameleon(40);
        let (_, plain, _) = s.build().unwrap();
        let mut net = Network::homogeneous(16, 25e6);
        let busy = 5u32;
        net.foreground.push(Foreground { node: busy, direction: Direction::Down, points: vec![(0.0, 24e6), (10.0, 0.0)] });
        let (_, aware, _) = s.build_on(Some(&net)).unwrap();
        let (before, after) = (downloads(&plain, 16)[busy as usize], downloads(&aware, 16)[busy as usize]);
        assert!(before >= 8.0, "without foreground node {busy} takes its share: {before}");
        assert!(after * 2.5 < before, "with its downlink 96% busy node {busy} takes {after} downloads, {before} without");
    }
}
