//! RepairBoost's adaptive sub-processes (§3.4): a full-node repair split into rounds of
//! `repair_subprocess_chunks` chunks. After each round every node's effective rate is
//! measured: the chunks it sent or received (the busier direction), over the time until
//! the last repair it took part in had finished. The next round is balanced with the
//! bandwidth of each node below the median rate scaled by its rate against the median. A
//! node slower than its link says (a failing disk or NIC, a noisy neighbour, traffic the
//! monitoring does not see) gets less of the next round.
//!
//! The measure is coarse, as the paper's is: a repair ends with its slowest node, so a fast
//! node whose repairs all waited for a slow one looks slow too, and is corrected in a later
//! round once it is paired with others.

use crate::coordinator::Coordinator;
use crate::metadata::PendingRepair;
use kintsugi_plan::schedule::{Cluster, Scheduler};
use kintsugi_plan::{NodeId, RepairGraph};
use kintsugi_proto::RepairReport;
use kintsugi_proto::WireError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A node is never planned with less than this share of its link: it may have recovered.
const MIN_FACTOR: f64 = 0.05;

/// Each node's measured rate per direction (upload, download), as a share of the median
/// node's in that direction (at most 1).
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeSpeed {
    factor: HashMap<NodeId, (f64, f64)>,
}

impl NodeSpeed {
    /// Takes a round's finished repairs: when each finished (seconds after the round
    /// started) and its graph. Uploads and downloads are measured apart, so a slow
    /// destination (many chunks down, finishing late) is told from the helpers that waited
    /// for it (one chunk up each). A direction the round did not use moves halfway back to 1.
    pub fn measure(&mut self, done: &[(f64, RepairGraph)]) {
        // Per direction and node: chunks moved, and when its last repair in it finished.
        let mut up: HashMap<NodeId, (f64, f64)> = HashMap::new();
        let mut down: HashMap<NodeId, (f64, f64)> = HashMap::new();
        for (t, g) in done {
            let tr = g.traffic();
            for (side, map) in [(&mut up, &tr.upload), (&mut down, &tr.download)] {
                for (&n, &c) in map {
                    let l = side.entry(n).or_default();
                    l.0 += c;
                    l.1 = l.1.max(*t);
                }
            }
        }
        for f in self.factor.values_mut() {
            *f = ((f.0 + 1.0) / 2.0, (f.1 + 1.0) / 2.0);
        }
        for (i, side) in [up, down].into_iter().enumerate() {
            let rate: HashMap<NodeId, f64> = side.iter().map(|(&n, &(c, t))| (n, c / t.max(1e-3))).collect();
            let mut sorted: Vec<f64> = rate.values().copied().collect();
            sorted.sort_by(f64::total_cmp);
            let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
            if median <= 0.0 {
                continue;
            }
            for (n, r) in rate {
                let f = self.factor.entry(n).or_insert((1.0, 1.0));
                let v = (r / median).clamp(MIN_FACTOR, 1.0);
                if i == 0 {
                    f.0 = v;
                } else {
                    f.1 = v;
                }
            }
        }
    }

    /// Scales every node's bandwidth in `cluster` by its factors.
    pub fn apply(&self, cluster: &mut Cluster) {
        for &n in &cluster.nodes.clone() {
            if let Some(&(fu, fd)) = self.factor.get(&n) {
                let (u, d) = cluster.bandwidth_of(n);
                cluster.bandwidth.insert(n, (u * fu, d * fd));
            }
        }
    }

    #[cfg(test)]
    pub fn factor(&self, n: NodeId) -> (f64, f64) {
        self.factor.get(&n).copied().unwrap_or((1.0, 1.0))
    }
}

impl Coordinator {
    /// Repairs `todo` in rounds of `size` chunks, each planned with the nodes' rates
    /// measured in the rounds before.
    pub(crate) async fn repair_in_subprocesses(
        self: &Arc<Self>,
        mut todo: Vec<PendingRepair>,
        label: &str,
        parallel: usize,
        scheduler: Scheduler,
        size: usize,
    ) -> Result<RepairReport, WireError> {
        let started = Instant::now();
        let mut total = RepairReport { method: label.to_string(), lost: todo.len(), ..Default::default() };
        let mut speed = NodeSpeed::default();
        while !todo.is_empty() {
            let mut round: Vec<PendingRepair> = todo.drain(..size.min(todo.len())).collect();
            let (choices, timeslots) = match self.schedule_scaled(&mut round, scheduler, &speed, &HashMap::new()) {
                Ok(p) => (p.choices, p.timeslots),
                Err(e) => {
                    tracing::warn!("scheduler {scheduler} could not plan: {e}");
                    Default::default()
                }
            };
            tracing::info!(round = total.subprocesses, chunks = round.len(), left = todo.len(), "RepairBoost sub-process");
            let mut done = Vec::new();
            let r = self.run_repairs_recorded(round, label, parallel, choices, timeslots, Some(&mut done)).await?;
            speed.measure(&done);
            tracing::debug!("node rates after sub-process {}: {:?}", total.subprocesses, speed.factor);
            total.subprocesses += 1;
            crate::repair::batch::absorb(&mut total, r);
        }
        total.seconds = started.elapsed().as_secs_f64();
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_plan::{shapes, RepairTask, Shape};

    fn cr(helpers: &[NodeId], dest: NodeId) -> RepairGraph {
        let code = "rs:2,1".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
        let eq = code.repair_equation(2, &[0, 1]).unwrap();
        shapes::build(Shape::Cr, &RepairTask { equation: eq, helper_nodes: helpers.to_vec(), destination: dest }).unwrap()
    }

    /// Node 3's repair ended at 4 s, the others' at 1 s: its helpers 3 and 8 (the measure
    /// is coarse: 8 only waited) are planned at a quarter of their uplinks, its destination
    /// 9 at a quarter of its downlink, every other node at all of its links.
    #[test]
    fn a_node_that_finished_late_gets_less_next_round() {
        let mut s = NodeSpeed::default();
        s.measure(&[(1.0, cr(&[1, 2], 5)), (1.0, cr(&[4, 6], 7)), (4.0, cr(&[3, 8], 9))]);
        assert_eq!((s.factor(1), s.factor(5), s.factor(7)), ((1.0, 1.0), (1.0, 1.0), (1.0, 1.0)));
        assert_eq!((s.factor(3), s.factor(8), s.factor(9)), ((0.25, 1.0), (0.25, 1.0), (1.0, 0.25)));
        let mut c = Cluster::homogeneous((1..=9).collect());
        c.default_bandwidth = 100.0;
        s.apply(&mut c);
        assert_eq!(c.bandwidth_of(3), (25.0, 100.0));
        assert_eq!(c.bandwidth_of(9), (100.0, 25.0));
        assert_eq!(c.bandwidth_of(2), (100.0, 100.0));
        // A round without node 3 brings it halfway back; a node is never planned at zero.
        s.measure(&[(1.0, cr(&[1, 2], 5))]);
        assert_eq!(s.factor(3), (0.625, 1.0));
        s.measure(&[(1.0, cr(&[1, 2], 5)), (1.0, cr(&[4, 6], 7)), (1e6, cr(&[8, 3], 9))]);
        assert_eq!(s.factor(3).0, MIN_FACTOR);
    }
}
