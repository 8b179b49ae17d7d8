//! Ready-made scenarios: one lost chunk (a degraded read), and a failed node holding many
//! chunks of random stripes (full-node repair). Both build their graphs with the same
//! planners the real cluster uses.

use crate::engine::{Admission, Job};
use crate::error::{Result, SimError};
use crate::network::Network;
use kintsugi_codes::{Code, CodeSpec, RepairEquation};
use kintsugi_plan::{shapes, NodeId, RepairTask, Shape};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
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
        let job = Job { graph, chunk_len: self.chunk, slice_len: self.slice, release: 0.0 };
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
    /// Repairs running at once per destination.
    pub max_active: usize,
}

impl FullNode {
    /// Stripes place their n shards on n distinct random nodes, one of them node 0. Each
    /// lost chunk is rebuilt from the code's default helpers (the first k available shards)
    /// onto a random live node that holds no shard of the stripe.
    pub fn build(&self) -> Result<(Network, Vec<Job>, Admission)> {
        check_common(self.link, self.chunk, self.slice)?;
        let code: Arc<dyn Code> = self.code.build()?;
        let n = code.n();
        if n + 1 > self.nodes {
            return Err(SimError::BadScenario(format!(
                "{} needs {} nodes per stripe plus a destination outside it, but the cluster has {} nodes",
                self.code, n, self.nodes
            )));
        }
        if self.max_active == 0 {
            return Err(SimError::BadScenario("--max-active must be at least 1".into()));
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let mut equations: HashMap<(usize, Vec<usize>), RepairEquation> = HashMap::new();
        let mut jobs = Vec::with_capacity(self.chunks);
        let others: Vec<NodeId> = (1..self.nodes as NodeId).collect();
        for _ in 0..self.chunks {
            // n - 1 distinct live nodes plus the failed node 0, in random shard order.
            let mut stripe: Vec<NodeId> = others.choose_multiple(&mut rng, n - 1).copied().collect();
            stripe.push(0);
            stripe.shuffle(&mut rng);
            let lost = stripe.iter().position(|&x| x == 0).expect("node 0 is in the stripe");
            let avail: Vec<usize> = (0..n).filter(|&i| i != lost).collect();
            let helpers = code.choose_helpers(lost, &avail)?;
            let eq = match equations.get(&(lost, helpers.clone())) {
                Some(e) => e.clone(),
                None => {
                    let e = code.repair_equation(lost, &helpers)?;
                    equations.insert((lost, helpers.clone()), e.clone());
                    e
                }
            };
            let destination = loop {
                let d = rng.random_range(1..self.nodes as NodeId);
                if !stripe.contains(&d) {
                    break d;
                }
            };
            let helper_nodes = eq.helpers().iter().map(|&h| stripe[h]).collect();
            let graph = shapes::build(self.method, &RepairTask { equation: eq, helper_nodes, destination })?;
            jobs.push(Job { graph, chunk_len: self.chunk, slice_len: self.slice, release: 0.0 });
        }
        Ok((Network::homogeneous(self.nodes, self.link), jobs, Admission::PerDestination(self.max_active)))
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
