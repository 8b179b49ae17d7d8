//! Full-node repair scheduling: for every lost chunk of a failed node, which helpers serve
//! it, where it is rebuilt, and (for RepairBoost) in which timeslot each transfer goes.
//! Schedulers only choose nodes; the graph shapes come from [`crate::shapes`], so every
//! scheduler combines with every per-chunk method (CR, PPR, ECPipe).
//!
//! | scheduler | helpers | destination | order |
//! |---|---|---|---|
//! | `index` (ECPipe's RP) | the k survivors with the smallest node ids | random outside the stripe | none |
//! | `random` (RepairBoost's RAN) | random k of the survivors | random outside the stripe | none |
//! | `lru` (RepairBoost's LRU) | least recently selected, ties to the lowest id | least recently selected | none |
//! | `greedy` (ECPipe §3.3) | least recently selected | requestors in turn, else least loaded | none |
//! | `repairboost` | [`repairboost::balance`] | [`repairboost::balance`] | [`repairboost::timeslot`] |
//! | `repairboost-rtb` | balance only | balance only | none |
//! | `repairboost-ts` | random (RAN) | random | timeslots only |
//! | `repairboost-poll` | [`repairboost::balance`] | [`repairboost::balance`] | [`repairboost::polling`] (§3.4, heterogeneous links) |
//! | `mppr` (PPR §5) | best source weight (Eq. 2) | best destination weight (Eq. 3) | FIFO |

pub mod baseline;
pub mod chameleon;
pub mod lb_degree;
pub mod mppr;
pub mod repairboost;
pub mod weighted_path;

use crate::error::{PlanError, Result};
use crate::graph::{NodeId, RepairGraph, RepairTask, Shape};
use crate::shapes;
use kintsugi_codes::{Code, HelperTerm, RepairEquation};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// One chunk to rebuild: where each shard of its stripe lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostChunk {
    /// Node of each shard of the stripe; `None` where the shard is unavailable.
    pub placement: Vec<Option<NodeId>>,
    /// Shard index of the lost chunk.
    pub lost: usize,
    /// Live nodes that must not receive it either, such as the holder of a corrupt copy.
    pub avoid: Vec<NodeId>,
    /// The chunk's bytes; 0 when unknown. RepairBoost balances a batch whose sizes are all
    /// known by bytes (Geo's chunks differ up to 64-fold), any other by count.
    pub size: u64,
}

impl LostChunk {
    /// Shard indices that can serve as helpers.
    pub fn available(&self) -> Vec<usize> {
        (0..self.placement.len()).filter(|&i| i != self.lost && self.placement[i].is_some()).collect()
    }

    /// Whether `node` holds a shard of this stripe (or must be avoided as if it did).
    pub fn holds(&self, node: NodeId) -> bool {
        self.placement.contains(&Some(node)) || self.avoid.contains(&node)
    }
}

/// What schedulers know about the cluster.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Live nodes: every destination is one of these.
    pub nodes: Vec<NodeId>,
    /// Failure domain (rack) of each node; a node missing here is its own domain. A
    /// destination is never in the domain of a surviving shard of its stripe when another
    /// choice exists.
    pub domains: BTreeMap<NodeId, u32>,
    /// Where rebuilt chunks go (ECPipe's requestors), in turn; empty: any live node.
    pub requestors: Vec<NodeId>,
    /// Upload and download bandwidth per node (bytes/s) for heterogeneous balancing;
    /// a node missing here has `default_bandwidth`.
    pub bandwidth: BTreeMap<NodeId, (f64, f64)>,
    pub default_bandwidth: f64,
    /// Bandwidth of directed links (bytes/s) where it differs from the nodes' (geo links);
    /// with it, ECPipe chains are ordered by weighted path selection.
    pub links: BTreeMap<(NodeId, NodeId), f64>,
    /// Foreground (user) traffic per node in MB, for m-PPR's weights.
    pub user_load_mb: BTreeMap<NodeId, f64>,
    /// Bytes of a chunk, for schedulers that plan in time (ChameleonEC's phases); 0: 64 MiB.
    pub chunk_bytes: f64,
    /// ChameleonEC's phase length in seconds; 0: the paper's 20 s at 10 Gb/s, scaled to the
    /// cluster's mean bandwidth (a phase moves as many bytes per link).
    pub phase_seconds: f64,
    /// Residual disk read and write bandwidth per node (bytes/s), for ChameleonEC-IO; a node
    /// missing here has no storage limit.
    pub storage: BTreeMap<NodeId, (f64, f64)>,
}

impl Cluster {
    /// A homogeneous cluster of these live nodes.
    pub fn homogeneous(nodes: Vec<NodeId>) -> Self {
        Cluster { nodes, default_bandwidth: 1.0, ..Default::default() }
    }

    /// A node's (upload, download) bandwidth: its own, or the default.
    pub fn bandwidth_of(&self, n: NodeId) -> (f64, f64) {
        let d = if self.default_bandwidth > 0.0 { self.default_bandwidth } else { 1.0 };
        self.bandwidth.get(&n).copied().unwrap_or((d, d))
    }

    /// ChameleonEC-IO's view: each node's upload and download bandwidth capped by its disk's
    /// read and write bandwidth. Every helper reads one chunk per chunk it uploads, and the
    /// destination writes what it downloads, so where storage is the tighter resource the
    /// dispatch balances disk reads and writes (the paper's "monitor storage bandwidth
    /// instead"); relays, which download without writing, are counted as writers too.
    /// Where no node's network bandwidth is known, storage alone counts, and a node without
    /// disk figures is taken to be as fast as the fastest disk.
    pub fn storage_bound(&self) -> Cluster {
        let mut c = self.clone();
        let net_known = !self.bandwidth.is_empty();
        for &n in &self.nodes {
            if let Some(&(read, write)) = self.storage.get(&n) {
                let (up, down) = if net_known { self.bandwidth_of(n) } else { (f64::INFINITY, f64::INFINITY) };
                c.bandwidth.insert(n, (up.min(read), down.min(write)));
            }
        }
        if !net_known {
            let fastest = self.storage.values().map(|&(r, w)| r.max(w)).fold(0.0, f64::max);
            if fastest > 0.0 && fastest.is_finite() {
                c.default_bandwidth = fastest;
            }
        }
        c
    }

    /// Bytes of a chunk for schedulers that plan in time: `chunk_bytes`, or 64 MiB unset.
    pub fn chunk_len(&self) -> f64 {
        if self.chunk_bytes > 0.0 {
            self.chunk_bytes
        } else {
            64.0 * 1024.0 * 1024.0
        }
    }

    /// Bandwidth of the directed link a -> b: its own cap, or the smaller of a's upload
    /// and b's download.
    pub fn link_bandwidth(&self, a: NodeId, b: NodeId) -> f64 {
        let node = self.bandwidth_of(a).0.min(self.bandwidth_of(b).1);
        self.links.get(&(a, b)).map_or(node, |&l| l.min(node))
    }

    /// Nodes that may receive the rebuilt `chunk`: live, holding no shard of its stripe,
    /// outside the failure domains of its shards when possible, and among the requestors
    /// when there are any.
    pub fn destinations(&self, chunk: &LostChunk) -> Vec<NodeId> {
        let pool: &[NodeId] = if self.requestors.is_empty() { &self.nodes } else { &self.requestors };
        let outside: Vec<NodeId> = pool.iter().copied().filter(|&n| !chunk.holds(n)).collect();
        if self.domains.is_empty() {
            return outside;
        }
        let used: Vec<u32> = chunk.placement.iter().flatten().filter_map(|n| self.domains.get(n).copied()).collect();
        let apart: Vec<NodeId> = outside.iter().copied().filter(|n| self.domains.get(n).is_none_or(|d| !used.contains(d))).collect();
        if apart.is_empty() {
            outside
        } else {
            apart
        }
    }
}

/// The share of a link repair may always count on (ChameleonEC's rule).
pub const RESIDUAL_FLOOR: f64 = 0.3;

/// Residual bandwidth of a link of `capacity` carrying `foreground` (bytes/s): what the
/// foreground leaves, never below 30% of the link, so repair always gets a share and a busy
/// node is not planned out entirely (ChameleonEC: max(0.3 x capacity, capacity - foreground)).
pub fn residual(capacity: f64, foreground: f64) -> f64 {
    (capacity - foreground.max(0.0)).max(RESIDUAL_FLOOR * capacity)
}

/// The schedulers, by the names `--scheduler` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    Index,
    Random,
    Lru,
    Greedy,
    Repairboost,
    RepairboostRtb,
    RepairboostTs,
    RepairboostPoll,
    Mppr,
    Chameleon,
    /// ChameleonEC-IO: ChameleonEC planned with storage bandwidth where it is scarcer.
    ChameleonIo,
}

/// Every scheduler, in the order reports list them.
pub const ALL_SCHEDULERS: [Scheduler; 11] = [
    Scheduler::Index,
    Scheduler::Random,
    Scheduler::Lru,
    Scheduler::Greedy,
    Scheduler::Repairboost,
    Scheduler::RepairboostRtb,
    Scheduler::RepairboostTs,
    Scheduler::RepairboostPoll,
    Scheduler::Mppr,
    Scheduler::Chameleon,
    Scheduler::ChameleonIo,
];

impl Scheduler {
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Index => "index",
            Scheduler::Random => "random",
            Scheduler::Lru => "lru",
            Scheduler::Greedy => "greedy",
            Scheduler::Repairboost => "repairboost",
            Scheduler::RepairboostRtb => "repairboost-rtb",
            Scheduler::RepairboostTs => "repairboost-ts",
            Scheduler::RepairboostPoll => "repairboost-poll",
            Scheduler::Mppr => "mppr",
            Scheduler::Chameleon => "chameleon",
            Scheduler::ChameleonIo => "chameleon-io",
        }
    }

    /// ChameleonEC or ChameleonEC-IO: planned and run in phases, drawing its own trees.
    pub fn chameleon(self) -> bool {
        matches!(self, Scheduler::Chameleon | Scheduler::ChameleonIo)
    }

    /// Whether this scheduler orders transfers into timeslots.
    pub fn timeslots(self) -> bool {
        matches!(self, Scheduler::Repairboost | Scheduler::RepairboostTs | Scheduler::RepairboostPoll)
    }
}

impl Default for Scheduler {
    /// What a plain system does: the code's default helpers.
    fn default() -> Self {
        Scheduler::Index
    }
}

impl fmt::Display for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scheduler {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.to_ascii_lowercase();
        let s = match s.as_str() {
            "ran" => "random",
            "rtb" => "repairboost-rtb",
            "ts" => "repairboost-ts",
            other => other,
        };
        ALL_SCHEDULERS.into_iter().find(|x| x.name() == s).ok_or_else(|| {
            let names: Vec<&str> = ALL_SCHEDULERS.iter().map(|x| x.name()).collect();
            PlanError::Invalid(format!("unknown scheduler '{s}' (expected one of {})", names.join(", ")))
        })
    }
}

/// A scheduler's choice for one chunk: helper shards in term order, and the destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub helpers: Vec<usize>,
    pub destination: NodeId,
    /// For a scheduler-drawn tree (ChameleonEC): the term each helper term sends to (None:
    /// the destination), in the order of `helpers`. None: the method's own shape.
    pub tree: Option<Vec<Option<usize>>>,
}

/// One planned repair: its graph (which holds the equation, and where every vertex sits).
#[derive(Clone, Debug)]
pub struct ScheduledRepair {
    pub graph: RepairGraph,
    /// Timeslot in which each vertex sends its output (RepairBoost's transmission
    /// scheduling); `None` for the sink and for vertices whose output stays on their node.
    /// Empty when the scheduler does not order transfers.
    pub slots: Vec<Option<u32>>,
    /// The phase this repair belongs to (ChameleonEC; 0 for every other scheduler).
    pub phase: u32,
}

impl ScheduledRepair {
    /// Helper shards, in term order.
    pub fn helpers(&self) -> Vec<usize> {
        self.graph.equation.helpers()
    }

    /// Node reading each helper term, in term order.
    pub fn helper_nodes(&self) -> Vec<NodeId> {
        let mut nodes = vec![0; self.graph.equation.terms.len()];
        for (i, v) in self.graph.vertices.iter().enumerate() {
            if let (Some(t), true) = (v.local, i != self.graph.sink.index()) {
                nodes[t] = v.node;
            }
        }
        nodes
    }

    /// Where the rebuilt chunk goes.
    pub fn destination(&self) -> NodeId {
        self.graph.vertex(self.graph.sink).node
    }

    /// For a scheduler-drawn tree: the term each helper term sends to (None: the sink).
    pub fn tree_parents(&self) -> Option<Vec<Option<usize>>> {
        if self.graph.shape != Shape::Tree {
            return None;
        }
        let g = &self.graph;
        let mut parents = vec![None; g.equation.terms.len()];
        for (i, v) in g.vertices.iter().enumerate() {
            if let (Some(t), true) = (v.local, i != g.sink.index()) {
                parents[t] = v.output.and_then(|o| g.vertex(o).local.filter(|_| o != g.sink));
            }
        }
        Some(parents)
    }

    /// The first timeslot in which this repair sends anything (0 without timeslots).
    pub fn first_slot(&self) -> u32 {
        self.slots.iter().flatten().copied().min().unwrap_or(0)
    }
}

/// The plan of a whole full-node repair, one entry per lost chunk in input order.
#[derive(Clone, Debug)]
pub struct Schedule {
    pub repairs: Vec<ScheduledRepair>,
    /// Timeslots the transmission schedule takes (0 without one).
    pub timeslots: u32,
}

/// The helpers a chunk can choose from and how many it needs: any `need` of `pool` work.
/// For an MDS code that is any k survivors; otherwise the code's own choice (an LRC local
/// group, or the helpers of a global repair).
pub fn helper_pool(code: &dyn Code, chunk: &LostChunk) -> Result<(Vec<usize>, usize)> {
    let avail = chunk.available();
    let default = code.choose_helpers(chunk.lost, &avail)?;
    let mds = code.tolerance() == code.n() - code.k();
    if mds && default.len() == code.k() {
        Ok((avail, code.k()))
    } else {
        let n = default.len();
        Ok((default, n))
    }
}

/// Chunks each position of a shape's graph uploads and downloads, for k helpers: positions
/// 0..k are the helper terms, k is the destination.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    pub up: Vec<f64>,
    pub down: Vec<f64>,
}

impl Template {
    pub fn new(shape: Shape, k: usize) -> Result<Self> {
        let terms = (0..k).map(|i| HelperTerm::scalar(i + 1, 1)).collect();
        let equation = RepairEquation { lost: 0, sub_chunks: 1, terms, structured: None };
        let task = RepairTask { equation, helper_nodes: (0..k as NodeId).collect(), destination: k as NodeId };
        let t = shapes::build(shape, &task)?.traffic();
        let get = |m: &BTreeMap<NodeId, f64>, p: usize| m.get(&(p as NodeId)).copied().unwrap_or(0.0);
        Ok(Template { up: (0..=k).map(|p| get(&t.upload, p)).collect(), down: (0..=k).map(|p| get(&t.download, p)).collect() })
    }

    /// Helper positions.
    pub fn k(&self) -> usize {
        self.up.len() - 1
    }
}

/// Plans the repair of `lost` with `scheduler`, building `shape` graphs. `seed` drives the
/// random choices (RAN, and destinations of `index`).
pub fn plan(code: &dyn Code, shape: Shape, scheduler: Scheduler, lost: &[LostChunk], cluster: &Cluster, seed: u64) -> Result<Schedule> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut pools = Vec::with_capacity(lost.len());
    for c in lost {
        if c.placement.len() != code.n() {
            return Err(PlanError::Invalid(format!("a stripe of {} shards for a code of {}", c.placement.len(), code.n())));
        }
        pools.push(helper_pool(code, c)?);
    }
    match scheduler {
        Scheduler::Chameleon => return plan_chameleon(code, lost, &pools, cluster),
        Scheduler::ChameleonIo => return plan_chameleon(code, lost, &pools, &cluster.storage_bound()),
        _ => {}
    }
    let choices: Vec<Choice> = match scheduler {
        Scheduler::Index => baseline::index(lost, &pools, cluster, &mut rng)?,
        Scheduler::Random | Scheduler::RepairboostTs => baseline::random(lost, &pools, cluster, &mut rng)?,
        Scheduler::Lru => baseline::lru(lost, &pools, cluster)?,
        Scheduler::Greedy => baseline::greedy(lost, &pools, cluster)?,
        Scheduler::Repairboost | Scheduler::RepairboostRtb | Scheduler::RepairboostPoll => {
            repairboost::balance::plan(shape, lost, &pools, cluster)?
        }
        Scheduler::Mppr => mppr::plan(lost, &pools, cluster, &mppr::Coefficients::for_code(code.k(), 64.0))?,
        Scheduler::Chameleon | Scheduler::ChameleonIo => unreachable!("planned above"),
    };
    let mut equations: HashMap<(usize, Vec<usize>), RepairEquation> = HashMap::new();
    let mut repairs = Vec::with_capacity(lost.len());
    for (c, choice) in lost.iter().zip(choices) {
        let mut helpers = choice.helpers;
        if !cluster.links.is_empty() {
            match shape {
                Shape::Ecpipe => helpers = weighted_path::order_chain(cluster, c, &helpers, choice.destination),
                Shape::EcpipeCyclic => helpers = weighted_path::order_ring(cluster, c, &helpers),
                _ => {}
            }
        }
        let eq = match equations.get(&(c.lost, helpers.clone())) {
            Some(e) => e.clone(),
            None => {
                let e = code.repair_equation(c.lost, &helpers)?;
                equations.insert((c.lost, helpers), e.clone());
                e
            }
        };
        let helper_nodes = eq.helpers().iter().map(|&h| c.placement[h].expect("helpers are available shards")).collect();
        let graph = shapes::build(shape, &RepairTask { equation: eq, helper_nodes, destination: choice.destination })?;
        repairs.push(ScheduledRepair { graph, slots: Vec::new(), phase: 0 });
    }
    let mut timeslots = 0;
    if scheduler.timeslots() {
        let graphs: Vec<&RepairGraph> = repairs.iter().map(|r| &r.graph).collect();
        let ts = if scheduler == Scheduler::RepairboostPoll {
            repairboost::polling::schedule(&graphs, cluster.chunk_len(), |a, b| cluster.link_bandwidth(a, b))
        } else {
            repairboost::timeslot::schedule_best(&graphs, repairboost::timeslot::Preference::NewLeavesThenBusiest, 1024, seed)
        };
        timeslots = ts.timeslots;
        for (r, s) in repairs.iter_mut().zip(ts.slots) {
            r.slots = s;
        }
    }
    Ok(Schedule { repairs, timeslots })
}

/// ChameleonEC's phase length on `cluster`: its own setting, else the paper's 20 s on 10 Gb/s
/// links scaled to the cluster's mean bandwidth (a phase moves as many bytes per link).
pub fn chameleon_phase_seconds(cluster: &Cluster) -> f64 {
    if cluster.phase_seconds > 0.0 {
        return cluster.phase_seconds;
    }
    // 20 s on the paper's 10 Gb/s (1.25 GB/s) links: 25 GB per link and phase.
    let mean = if cluster.bandwidth.is_empty() {
        cluster.default_bandwidth.max(f64::MIN_POSITIVE)
    } else {
        cluster.bandwidth.values().map(|(u, d)| (u + d) / 2.0).sum::<f64>() / cluster.bandwidth.len() as f64
    };
    20.0 * 1.25e9 / mean
}

/// ChameleonEC: trees drawn by its task dispatch and Algorithm 1, in phases. The shape
/// asked for is not used: the scheduler chooses each chunk's.
fn plan_chameleon(code: &dyn Code, lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster) -> Result<Schedule> {
    let chunk_bytes = cluster.chunk_len();
    let phase_seconds = chameleon_phase_seconds(cluster);
    let trees = chameleon::plan(lost, pools, cluster, chameleon::Config { phase_seconds, chunk_bytes })?;
    let mut repairs = Vec::with_capacity(lost.len());
    for (c, t) in lost.iter().zip(trees) {
        let eq = code.repair_equation(c.lost, &t.helpers)?;
        // Terms follow the helpers given, less any with zero coefficients: map by shard.
        let term_of = |shard: usize| eq.terms.iter().position(|term| term.helper == shard);
        let mut parents = vec![None; eq.terms.len()];
        for (i, &h) in t.helpers.iter().enumerate() {
            if let Some(ti) = term_of(h) {
                // A parent whose term was dropped passes its children to the destination.
                parents[ti] = t.parents[i].and_then(|p| term_of(t.helpers[p]));
            }
        }
        let helper_nodes = eq.helpers().iter().map(|&h| c.placement[h].expect("helpers are available shards")).collect();
        let graph = shapes::tree::from_parents(&RepairTask { equation: eq, helper_nodes, destination: t.destination }, &parents)?;
        repairs.push(ScheduledRepair { graph, slots: Vec::new(), phase: t.phase });
    }
    Ok(Schedule { repairs, timeslots: 0 })
}

/// `chunks` lost chunks of a failed node 0: each stripe puts its n shards on n distinct
/// random nodes of `nodes`, one of them node 0 (unavailable), in random shard order.
pub fn random_lost_chunks(nodes: usize, chunks: usize, n: usize, seed: u64) -> Vec<LostChunk> {
    use rand::seq::{IndexedRandom, SliceRandom};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let others: Vec<NodeId> = (1..nodes as NodeId).collect();
    (0..chunks)
        .map(|_| {
            let mut stripe: Vec<NodeId> = others.choose_multiple(&mut rng, n - 1).copied().collect();
            stripe.push(0);
            stripe.shuffle(&mut rng);
            let lost = stripe.iter().position(|&x| x == 0).expect("node 0 is in the stripe");
            LostChunk { placement: stripe.iter().map(|&x| (x != 0).then_some(x)).collect(), lost, avoid: Vec::new(), size: 0 }
        })
        .collect()
}

/// Lost chunks of nodes 0..failed failing at once: each failed node is in `chunks` random
/// stripes of n shards over `nodes` nodes (the other members drawn from every other node,
/// failed ones included), and every shard of such a stripe on a failed node is lost, so
/// stripes lose 1 to `failed` chunks. Sibling chunks of a stripe are listed one after the
/// other. With one failed node, exactly [`random_lost_chunks`].
pub fn random_lost_chunks_of(nodes: usize, chunks: usize, n: usize, failed: usize, seed: u64) -> Vec<LostChunk> {
    use rand::seq::{IndexedRandom, SliceRandom};
    if failed <= 1 {
        return random_lost_chunks(nodes, chunks, n, seed);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let is_failed = |x: NodeId| (x as usize) < failed;
    let mut out = Vec::new();
    for f in 0..failed as NodeId {
        let others: Vec<NodeId> = (0..nodes as NodeId).filter(|&x| x != f).collect();
        for _ in 0..chunks {
            let mut stripe: Vec<NodeId> = others.choose_multiple(&mut rng, n - 1).copied().collect();
            // A stripe with an earlier failed node is drawn from that node's share, so each
            // failed node keeps about `chunks` lost chunks.
            if stripe.iter().any(|&x| is_failed(x) && x < f) {
                continue;
            }
            stripe.push(f);
            stripe.shuffle(&mut rng);
            let placement: Vec<Option<NodeId>> = stripe.iter().map(|&x| (!is_failed(x)).then_some(x)).collect();
            for (i, &x) in stripe.iter().enumerate() {
                if is_failed(x) {
                    out.push(LostChunk { placement: placement.clone(), lost: i, avoid: Vec::new(), size: 0 });
                }
            }
        }
    }
    out
}

/// Picks the index of the smallest key, ties to the first; `None` for an empty slice.
pub(crate) fn argmin_by<T, K: PartialOrd>(items: &[T], mut key: impl FnMut(&T) -> K) -> Option<usize> {
    let mut best: Option<(usize, K)> = None;
    for (i, it) in items.iter().enumerate() {
        let k = key(it);
        if best.as_ref().is_none_or(|(_, b)| k < *b) {
            best = Some((i, k));
        }
    }
    best.map(|(i, _)| i)
}

/// Error for a chunk with no possible destination.
pub(crate) fn no_destination(chunk: &LostChunk) -> PlanError {
    PlanError::Invalid(format!("no live node outside the stripe of lost shard {} can receive it", chunk.lost))
}
