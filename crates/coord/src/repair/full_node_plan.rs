//! Planning a full-node repair with a scheduler: the cluster as the schedulers see it
//! (live nodes, residual bandwidth, measured rates), one plan per code and method, the
//! choices and RepairBoost timeslots handed to the repairs, and the order they start in.

use crate::coordinator::Coordinator;
use crate::metadata::PendingRepair;
use crate::repair::subprocess::NodeSpeed;
use kintsugi_plan::schedule::{self, Choice, Cluster, LostChunk, Scheduler};
use kintsugi_plan::{NodeId, RepairGraph};
use kintsugi_proto::WireError;
use std::collections::{BTreeMap, HashMap};

impl Coordinator {
    /// Helpers and destinations for `todo` from `scheduler`, and the order to start the
    /// repairs in (by first timeslot for RepairBoost, else as listed).
    pub(crate) fn schedule(&self, todo: &mut [PendingRepair], scheduler: Scheduler) -> Result<Planned, WireError> {
        self.schedule_scaled(todo, scheduler, &NodeSpeed::default(), &HashMap::new())
    }

    /// [`schedule`](Self::schedule) with each node's bandwidth scaled by its measured rate
    /// (RepairBoost's adaptive sub-processes), and chunks kept off a node (`shun`: a
    /// ChameleonEC straggler's chunk planned again without the node that held it up) where
    /// the code can do without it at no more reads.
    pub(crate) fn schedule_scaled(
        &self,
        todo: &mut [PendingRepair],
        scheduler: Scheduler,
        speed: &NodeSpeed,
        shun: &HashMap<(u64, usize), NodeId>,
    ) -> Result<Planned, WireError> {
        let alive = self.alive();
        let failed = self.failed_nodes()?;
        let mut cluster = Cluster::homogeneous(alive.keys().copied().filter(|n| !failed.contains(n)).collect());
        // Every scheduler plans with live bandwidth: each node's residual, and its user load.
        crate::membership::bandwidth::fill(&mut cluster, &self.links.lock().expect("links lock"));
        speed.apply(&mut cluster);
        tracing::debug!(scheduler = %scheduler, "planning with residual bandwidth (up, down) per node: {:?}", cluster.bandwidth);
        // One plan per code and method: a scheduler balances over chunks of one kind.
        let mut groups: BTreeMap<(String, &str), Vec<usize>> = BTreeMap::new();
        let mut stripes = HashMap::new();
        for (i, p) in todo.iter().enumerate() {
            // A stripe deleted since is skipped by repair_one.
            let Some(s) = self.meta.stripe(p.stripe)? else { continue };
            groups.entry((s.code.to_string(), p.method.name())).or_default().push(i);
            stripes.insert(p.stripe, s);
        }
        // Schedulers that plan in time (ChameleonEC's phases) need the chunk size.
        cluster.chunk_bytes = stripes.values().map(|s| s.chunk_len).max().unwrap_or(0) as f64;
        cluster.phase_seconds = self.cfg.repair_phase_ms as f64 / 1e3;
        let mut out = HashMap::new();
        let mut first_slot = HashMap::new();
        let mut timeslots = HashMap::new();
        let gate = |g: &RepairGraph| scheduler.timeslots() && self.cfg.gate_timeslots.gates(g);
        for (_, idx) in groups {
            let method = todo[idx[0]].method;
            let code = stripes[&todo[idx[0]].stripe].code.build().map_err(WireError::from)?;
            let lost: Vec<LostChunk> = idx
                .iter()
                .map(|&i| {
                    let (p, s) = (&todo[i], &stripes[&todo[i].stripe]);
                    let usable = |j: usize| j != p.index && !s.bad[j] && cluster.nodes.contains(&s.nodes[j]);
                    let avail: Vec<usize> = (0..s.nodes.len()).filter(|&j| usable(j)).collect();
                    let shunned = shun.get(&(p.stripe, p.index)).filter(|&&x| {
                        let without: Vec<usize> = avail.iter().copied().filter(|&j| s.nodes[j] != x).collect();
                        let reads = |a: &[usize]| code.choose_helpers(p.index, a).map(|h| h.len()).ok();
                        reads(&without).is_some_and(|n| Some(n) <= reads(&avail))
                    });
                    let placement = (0..s.nodes.len()).map(|j| (usable(j) && Some(&s.nodes[j]) != shunned).then_some(s.nodes[j])).collect();
                    // Every node of the stripe stays out, also one holding a corrupt copy.
                    LostChunk { placement, lost: p.index, avoid: s.nodes.clone(), size: s.chunk_len }
                })
                .collect();
            let plan = schedule::plan(code.as_ref(), method, scheduler, &lost, &cluster, self.epoch)
                .map_err(|e| WireError::internal(e.to_string()))?;
            for (&i, r) in idx.iter().zip(&plan.repairs) {
                let key = (todo[i].stripe, todo[i].index);
                out.insert(key, Choice { helpers: r.helpers(), destination: r.destination(), tree: r.tree_parents() });
                first_slot.insert(key, (r.phase, r.first_slot()));
                if gate(&r.graph) && r.slots.iter().any(Option::is_some) {
                    timeslots.insert(key, GraphSlots::of(&r.graph, r.slots.clone()));
                }
            }
        }
        prioritise(todo, &first_slot);
        let phase = first_slot.into_iter().map(|(k, (p, _))| (k, p)).collect();
        Ok(Planned { choices: out, phase, timeslots, cluster })
    }
}

/// A scheduler's plan on the cluster: helpers and destination per chunk, and each chunk's
/// ChameleonEC phase (0 for schedulers without phases).
pub(crate) struct Planned {
    pub choices: HashMap<(u64, usize), Choice>,
    pub phase: HashMap<(u64, usize), u32>,
    /// RepairBoost's timeslots, when the nodes gate transfers by them.
    pub timeslots: HashMap<(u64, usize), GraphSlots>,
    /// The cluster as the scheduler saw it (residual bandwidth per node).
    pub cluster: Cluster,
}

/// The timeslot of each vertex's send in the graph a scheduler planned, and where each
/// vertex was: they apply to the graph that runs only if it is that graph.
pub(crate) struct GraphSlots {
    pub nodes: Vec<NodeId>,
    pub slots: Vec<Option<u32>>,
    /// Its gated transfers between nodes: (from, to, slot).
    pub transfers: Vec<(NodeId, NodeId, u32)>,
}

impl GraphSlots {
    pub(crate) fn of(g: &RepairGraph, slots: Vec<Option<u32>>) -> Self {
        let transfers = g
            .vertices
            .iter()
            .zip(&slots)
            .filter_map(|(v, &slot)| {
                let to = g.vertex(v.output?).node;
                (to != v.node).then_some((v.node, to, slot?))
            })
            .collect();
        GraphSlots { nodes: g.vertices.iter().map(|v| v.node).collect(), slots, transfers }
    }

    pub(crate) fn fits(&self, g: &RepairGraph) -> bool {
        g.slots.iter().all(Option::is_none)
            && self.slots.len() == g.vertices.len()
            && g.vertices.iter().map(|v| v.node).eq(self.nodes.iter().copied())
    }
}

/// The order repairs start in. First RepairBoost's multi-node priority (§3.4, option b):
/// stripes that lost more chunks, being nearest to data loss, before those that lost fewer.
/// Then the scheduler's order: ChameleonEC's phases, then RepairBoost's timeslots. The sort
/// is stable, so chunks equal in both keep their listed order.
pub(crate) fn prioritise(todo: &mut [PendingRepair], first_slot: &HashMap<(u64, usize), (u32, u32)>) {
    let mut lost_in: HashMap<u64, usize> = HashMap::new();
    for p in todo.iter() {
        *lost_in.entry(p.stripe).or_default() += 1;
    }
    todo.sort_by_key(|p| (std::cmp::Reverse(lost_in[&p.stripe]), first_slot.get(&(p.stripe, p.index)).copied().unwrap_or((0, 0))));
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_plan::{shapes, RepairTask, Shape};

    fn pending(stripe: u64, index: usize) -> PendingRepair {
        PendingRepair { stripe, index, method: Shape::Cr, slice: 1 << 20 }
    }

    #[test]
    fn stripes_that_lost_more_chunks_start_first_then_by_slot() {
        // Stripe 7 lost three chunks, stripe 3 two, stripes 1 and 9 one each.
        let mut todo = vec![pending(1, 0), pending(3, 2), pending(7, 0), pending(9, 4), pending(7, 5), pending(3, 1), pending(7, 2)];
        let mut slots = HashMap::new();
        slots.insert((9, 4), (0, 0));
        slots.insert((1, 0), (0, 3));
        slots.insert((7, 5), (0, 1));
        slots.insert((7, 0), (0, 2));
        slots.insert((7, 2), (0, 2));
        slots.insert((3, 1), (1, 0)); // a later ChameleonEC phase
        slots.insert((3, 2), (0, 9));
        prioritise(&mut todo, &slots);
        let order: Vec<(u64, usize)> = todo.iter().map(|p| (p.stripe, p.index)).collect();
        assert_eq!(order, vec![(7, 5), (7, 0), (7, 2), (3, 2), (3, 1), (9, 4), (1, 0)]);
        // Without a schedule, the priority alone, listed order within it.
        let mut todo = vec![pending(1, 0), pending(3, 2), pending(3, 1)];
        prioritise(&mut todo, &HashMap::new());
        let order: Vec<(u64, usize)> = todo.iter().map(|p| (p.stripe, p.index)).collect();
        assert_eq!(order, vec![(3, 2), (3, 1), (1, 0)]);
    }

    /// The default gates PPR's store-and-forward trees only; `all` every graph, `none` none.
    /// A scheduler's slots apply only to the graph it planned.
    #[test]
    fn timeslot_gating_by_graph_kind_and_only_on_the_planned_graph() {
        use crate::repair::options::TimeslotGating;
        let code = "rs:4,2".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
        let eq = code.repair_equation(0, &[1, 2, 3, 4]).unwrap();
        let task = RepairTask { equation: eq, helper_nodes: vec![1, 2, 3, 4], destination: 9 };
        let graph = |m| shapes::build(m, &task).unwrap();
        for (m, default) in [(Shape::Ppr, true), (Shape::Cr, false), (Shape::Ecpipe, false)] {
            assert_eq!(TimeslotGating::default().gates(&graph(m)), default, "{m}");
            assert!(TimeslotGating::All.gates(&graph(m)));
            assert!(!TimeslotGating::None.gates(&graph(m)));
        }
        let g = graph(Shape::Ppr);
        let slots = GraphSlots::of(&g, vec![Some(0); g.vertices.len()]);
        assert_eq!(slots.transfers.len(), g.network_edges().count());
        assert!(slots.fits(&g));
        let other = shapes::build(Shape::Ppr, &RepairTask { destination: 8, ..task.clone() }).unwrap();
        assert!(!slots.fits(&other), "another destination: another graph");
        assert_eq!("all".parse::<TimeslotGating>(), Ok(TimeslotGating::All));
        assert!("some".parse::<TimeslotGating>().is_err());
    }
}
