//! Transmission scheduling (RepairBoost §3.3). Repairs move whole chunks store-and-forward
//! through their graphs: a vertex sends once everything it adds has arrived. In one
//! timeslot a node sends at most one chunk and receives at most one, so the transfers of a
//! slot are a matching between senders and receivers; each slot takes a maximum one (the
//! paper's max flow with unit capacities, here by augmenting paths: [`super::matching`]), preferring transfers
//! that complete their parent, so that it becomes a sender in the next slot. A slot ends
//! when all its transfers have (a barrier), then the graphs are updated and the next slot
//! is matched.

use super::matching::{max_matching, NodeIndex};
use crate::graph::{NodeId, RepairGraph};

/// Which of several candidate transfers a sender prefers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    /// The paper's rule: a transfer that makes its parent ready to send next slot.
    NewLeaves,
    /// The first graph in input order (no preference; for comparison).
    GraphOrder,
    /// The paper's rule, then the transfer with the longest work behind it: the transfers
    /// left at its busier end (a node with L left needs L more slots, so idling it in a
    /// slot lengthens the schedule; covering the busiest nodes in every matching is what
    /// makes the load bound reachable, as in König's edge colouring) plus those that must
    /// follow it down its graph.
    NewLeavesThenBusiest,
}

/// A transmission schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeslots {
    /// Per graph, per vertex: the slot in which it sends (`None`: sink, or a same-node hop).
    pub slots: Vec<Vec<Option<u32>>>,
    /// Slots until every graph's sink has everything.
    pub timeslots: u32,
}

#[derive(Clone, Copy)]
struct Ready {
    graph: u32,
    vertex: u32,
    /// The vertex it sends to.
    output: u32,
    from: NodeId,
    to: NodeId,
    completes: bool,
    /// Transfers left at its busier end (sends at the sender, receives at the receiver).
    load: u32,
    /// Network transfers that must follow it in its graph, down to the sink.
    after: u32,
}

/// Per vertex of g: the network transfers after its own on the way to the sink.
fn transfers_after(g: &RepairGraph) -> Vec<u32> {
    let mut after = vec![0; g.vertices.len()];
    // Outputs come after their inputs in topological order: walk it backwards.
    for v in g.topological_order().into_iter().rev() {
        let vx = g.vertex(v);
        if let Some(o) = vx.output {
            let ox = g.vertex(o);
            after[v.index()] = after[o.index()] + ox.output.map_or(0, |oo| u32::from(g.vertex(oo).node != ox.node));
        }
    }
    after
}

/// Network transfers not yet scheduled, per node: (sends, receives).
fn loads(graphs: &[&RepairGraph]) -> Vec<(u32, u32)> {
    let mut l: Vec<(u32, u32)> = Vec::new();
    for g in graphs {
        for (from, to) in g.network_edges().map(|(a, b)| (g.vertices[a.index()].node as usize, g.vertices[b.index()].node as usize)) {
            if l.len() <= from.max(to) {
                l.resize(from.max(to) + 1, (0, 0));
            }
            l[from].0 += 1;
            l[to].1 += 1;
        }
    }
    l
}

/// Schedules every network transfer of `graphs` into timeslots.
pub fn schedule(graphs: &[&RepairGraph], pref: Preference) -> Timeslots {
    let Start { mut slots, mut pending, ready } = Start::of(graphs);
    let mut t: u32 = 0;
    let mut node_index = NodeIndex::default();
    let mut left = loads(graphs);
    let after: Vec<Vec<u32>> =
        if pref == Preference::NewLeavesThenBusiest { graphs.iter().map(|g| transfers_after(g)).collect() } else { Vec::new() };
    // A ready transfer's fixed part, looked up once rather than every slot it waits.
    let candidate = |(gi, v): (u32, u32)| {
        let g = graphs[gi as usize];
        let o = g.vertices[v as usize].output.expect("ready vertices send");
        Ready {
            graph: gi,
            vertex: v,
            output: o.index() as u32,
            from: g.vertices[v as usize].node,
            to: g.vertices[o.index()].node,
            completes: false,
            load: 0,
            after: after.get(gi as usize).map_or(0, |a| a[v as usize]),
        }
    };
    // The candidates stay in (graph, vertex) order, so that a stable sort by preference
    // alone puts them in (preference, graph, vertex) order.
    let mut cands: Vec<Ready> = ready.into_iter().map(candidate).collect();
    cands.sort_unstable_by_key(|c| (c.graph, c.vertex));
    let mut fresh: Vec<(u32, u32)> = Vec::new();
    while !cands.is_empty() {
        for c in &mut cands {
            let g = graphs[c.graph as usize];
            c.completes = pending[c.graph as usize][c.output as usize] == 1 && c.output as usize != g.sink.index();
            c.load = left[c.from as usize].0.max(left[c.to as usize].1);
        }
        let order = preference_order(&cands, pref);
        let by_preference: Vec<(NodeId, NodeId)> = order.iter().map(|&i| (cands[i].from, cands[i].to)).collect();
        let chosen = max_matching(&by_preference, &mut node_index);
        let mut chosen_set = vec![false; cands.len()];
        fresh.clear();
        for &p in &chosen {
            let i = order[p];
            chosen_set[i] = true;
            let c = &cands[i];
            slots[c.graph as usize][c.vertex as usize] = Some(t);
            left[c.from as usize].0 -= 1;
            left[c.to as usize].1 -= 1;
            let o = c.output as usize;
            pending[c.graph as usize][o] -= 1;
            if pending[c.graph as usize][o] == 0 && graphs[c.graph as usize].vertices[o].output.is_some() {
                fresh.push((c.graph, o as u32));
            }
        }
        let mut i = 0;
        cands.retain(|_| {
            i += 1;
            !chosen_set[i - 1]
        });
        // Only vertices made ready now can hand over on their own node: the rest were settled.
        settle(graphs, &mut pending, &mut fresh, 0);
        if !fresh.is_empty() {
            let mut new: Vec<Ready> = fresh.iter().map(|&r| candidate(r)).collect();
            new.sort_unstable_by_key(|c| (c.graph, c.vertex));
            cands = merge_sorted(cands, new);
        }
        t += 1;
    }
    Timeslots { slots, timeslots: t }
}

/// Indices of the candidates, which come in (graph, vertex) order, in (preference, graph,
/// vertex) order: a stable counting sort on the preference alone. With 100,000 lost chunks
/// a slot has hundreds of thousands of candidates and a schedule about a thousand slots,
/// and a comparison sort of every slot's candidates was most of RepairBoost's planning.
fn preference_order(cands: &[Ready], pref: Preference) -> Vec<usize> {
    debug_assert!(cands.windows(2).all(|w| (w[0].graph, w[0].vertex) < (w[1].graph, w[1].vertex)));
    let busy = |c: &Ready| match pref {
        Preference::NewLeavesThenBusiest => c.load.saturating_add(c.after) as usize,
        _ => 0,
    };
    let later = |c: &Ready| pref != Preference::GraphOrder && !c.completes;
    let top = cands.iter().map(busy).max().unwrap_or(0);
    // Buckets: transfers that complete their parent first, then the busiest first.
    let bucket = |c: &Ready| usize::from(later(c)) * (top + 1) + (top - busy(c));
    let mut start = vec![0usize; 2 * (top + 1) + 1];
    for c in cands {
        start[bucket(c) + 1] += 1;
    }
    for b in 1..start.len() {
        start[b] += start[b - 1];
    }
    let mut place = vec![0usize; cands.len()];
    for (i, c) in cands.iter().enumerate() {
        let b = bucket(c);
        place[start[b]] = i;
        start[b] += 1;
    }
    place
}

/// Two lists of candidates in (graph, vertex) order as one.
fn merge_sorted(a: Vec<Ready>, b: Vec<Ready>) -> Vec<Ready> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        out.push(if (x.graph, x.vertex) <= (y.graph, y.vertex) { a.next() } else { b.next() }.expect("peeked"));
    }
    out.extend(a);
    out.extend(b);
    out
}

/// Graphs scheduled over all tries, at most: each try is a whole schedule (a batch of 25
/// RS(6,3) PPR graphs takes about 0.04 ms, 500 about 4 ms), so large batches get fewer tries.
const SHUFFLE_BUDGET: usize = 16_000;

/// The fewest slots of up to `tries` schedules: the graphs in their own order, then
/// shuffled (seeded, so a plan is repeatable), stopping at the first that reaches
/// [`lower_bound`]. The greedy matching breaks ties by graph order, and on a balanced
/// batch, where every node has about as many transfers as the load bound, one order may
/// leave a node idle in a slot where another does not (RS(6,3), 25 chunks on 16 nodes: 10
/// to 14 slots by order; the bound took up to 32 orders in 36 random batches, and 11 slots
/// instead of 10 after 32 on the testbed's). Large batches get fewer tries
/// (`SHUFFLE_BUDGET`), from 8,000 graphs one: their slots are already within a few percent
/// of the bound.
pub fn schedule_best(graphs: &[&RepairGraph], pref: Preference, tries: usize, seed: u64) -> Timeslots {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut best = schedule(graphs, pref);
    let tries = tries.min(SHUFFLE_BUDGET / graphs.len().max(1));
    let floor = lower_bound(graphs);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..graphs.len()).collect();
    for _ in 1..tries {
        if best.timeslots <= floor {
            break;
        }
        order.shuffle(&mut rng);
        let shuffled: Vec<&RepairGraph> = order.iter().map(|&i| graphs[i]).collect();
        let ts = schedule(&shuffled, pref);
        if ts.timeslots < best.timeslots {
            let mut slots = vec![Vec::new(); graphs.len()];
            for (s, &i) in ts.slots.into_iter().zip(&order) {
                slots[i] = s;
            }
            best = Timeslots { slots, timeslots: ts.timeslots };
        }
    }
    best
}

/// No schedule of `graphs` takes fewer slots: the most transfers one node sends or
/// receives (one a slot), and the longest chain of transfers in one graph (store and
/// forward: one a slot).
pub fn lower_bound(graphs: &[&RepairGraph]) -> u32 {
    let load = loads(graphs).iter().map(|&(s, r)| s.max(r)).max().unwrap_or(0);
    let chain = graphs
        .iter()
        .flat_map(|g| {
            let after = transfers_after(g);
            g.network_edges().map(move |(a, _)| after[a.index()] + 1).collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0);
    load.max(chain)
}

/// Where an ordering of transfers starts: no slot given, every vertex waiting for all its
/// inputs, and the vertices that may send now (all inputs in; same-node hops passed on).
pub(super) struct Start {
    pub slots: Vec<Vec<Option<u32>>>,
    pub pending: Vec<Vec<usize>>,
    pub ready: Vec<(u32, u32)>,
}

impl Start {
    pub(super) fn of(graphs: &[&RepairGraph]) -> Start {
        let slots = graphs.iter().map(|g| vec![None; g.vertices.len()]).collect();
        let mut pending: Vec<Vec<usize>> = graphs.iter().map(|g| g.vertices.iter().map(|v| v.inputs.len()).collect()).collect();
        let mut ready: Vec<(u32, u32)> = Vec::new();
        for (gi, g) in graphs.iter().enumerate() {
            for (v, vx) in g.vertices.iter().enumerate() {
                if vx.inputs.is_empty() && vx.output.is_some() {
                    ready.push((gi as u32, v as u32));
                }
            }
        }
        settle(graphs, &mut pending, &mut ready, 0);
        Start { slots, pending, ready }
    }
}

/// Passes on at once what a vertex sends to a vertex on its own node (no network), for
/// the ready vertices from index `from` on.
pub(super) fn settle(graphs: &[&RepairGraph], pending: &mut [Vec<usize>], ready: &mut Vec<(u32, u32)>, from: usize) {
    let mut i = from;
    while i < ready.len() {
        let (gi, v) = ready[i];
        let g = graphs[gi as usize];
        let o = g.vertices[v as usize].output.expect("ready vertices send");
        if g.vertices[o.index()].node == g.vertices[v as usize].node {
            ready.swap_remove(i);
            pending[gi as usize][o.index()] -= 1;
            if pending[gi as usize][o.index()] == 0 && g.vertices[o.index()].output.is_some() {
                ready.push((gi, o.index() as u32));
            }
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{RepairTask, Shape};
    use crate::shapes;
    use kintsugi_codes::{HelperTerm, RepairEquation};
    use std::collections::HashMap;

    fn graph(shape: Shape, helpers: &[NodeId], dest: NodeId) -> RepairGraph {
        let terms = (0..helpers.len()).map(|i| HelperTerm::scalar(i + 1, 1)).collect();
        let task = RepairTask {
            equation: RepairEquation { lost: 0, sub_chunks: 1, terms, structured: None },
            helper_nodes: helpers.to_vec(),
            destination: dest,
        };
        shapes::build(shape, &task).unwrap()
    }

    /// Every slot: a node sends at most once and receives at most once; and every vertex
    /// sends after all its inputs.
    pub(super) fn check(graphs: &[&RepairGraph], ts: &Timeslots) {
        let mut per_slot: HashMap<u32, (Vec<NodeId>, Vec<NodeId>)> = HashMap::new();
        for (g, s) in graphs.iter().zip(&ts.slots) {
            for (v, slot) in s.iter().enumerate() {
                let Some(t) = slot else { continue };
                let vx = &g.vertices[v];
                let to = g.vertices[vx.output.unwrap().index()].node;
                let e = per_slot.entry(*t).or_default();
                assert!(!e.0.contains(&vx.node) && !e.1.contains(&to), "slot {t}: node sends or receives twice");
                e.0.push(vx.node);
                e.1.push(to);
                for i in &vx.inputs {
                    if let Some(ti) = s[i.index()] {
                        assert!(ti < *t, "vertex {v} sends before its input {i:?} arrived");
                    }
                }
            }
        }
    }

    /// RepairBoost Figure 2: one RS(4,2) chunk takes 4 slots with CR, 3 with PPR.
    #[test]
    fn figure_2_single_chunk() {
        for (shape, want) in [(Shape::Cr, 4), (Shape::Ppr, 3)] {
            let g = graph(shape, &[2, 3, 4, 5], 1);
            let ts = schedule(&[&g], Preference::NewLeaves);
            assert_eq!(ts.timeslots, want, "{shape}");
            check(&[&g], &ts);
        }
    }

    /// RepairBoost Figure 4: after C2 (N1->N3) and C4 (N4->N2), C3 (N5->N3) and C7
    /// (N2->N3) compete for N3's downlink; C6 (N3->N6) needs C7. Sending C7 first takes 3
    /// slots, C3 first takes 4.
    #[test]
    fn figure_4_new_leaves_first() {
        let a = graph(Shape::Cr, &[1, 5], 3); // C2 = N1->N3, C3 = N5->N3
        let b = graph(Shape::Ecpipe, &[4, 2, 3], 6); // C4 = N4->N2, C7 = N2->N3, C6 = N3->N6
        let best = schedule(&[&a, &b], Preference::NewLeaves);
        assert_eq!(best.timeslots, 3);
        check(&[&a, &b], &best);
        let naive = schedule(&[&a, &b], Preference::GraphOrder);
        assert_eq!(naive.timeslots, 4);
        check(&[&a, &b], &naive);
    }

    /// RepairBoost Figure 7: two PPR graphs (k = 4) over N1..N5. N1, N2 and N4 can send at
    /// first; the first maximum flow is N1->N5 (chunk 1), N2->N1 and N4->N3 (chunk 2). The
    /// figure's graphs are not in the text; these are ones with exactly that situation.
    #[test]
    fn figure_7_first_max_flow() {
        // PPR k=4: v1->v2, v3->v4, v2->v4, v4->root.
        let c1 = graph(Shape::Ppr, &[1, 5, 2, 3], 4);
        let c2 = graph(Shape::Ppr, &[2, 1, 4, 3], 5);
        let ts = schedule(&[&c1, &c2], Preference::NewLeaves);
        check(&[&c1, &c2], &ts);
        let first: Vec<(usize, NodeId, NodeId)> = [&c1, &c2]
            .iter()
            .enumerate()
            .flat_map(|(gi, g)| {
                let s = &ts.slots[gi];
                g.vertices
                    .iter()
                    .enumerate()
                    .filter(move |(v, _)| s[*v] == Some(0))
                    .map(move |(_, vx)| (gi + 1, vx.node, g.vertices[vx.output.unwrap().index()].node))
            })
            .collect();
        assert_eq!(first.len(), 3, "the first max flow moves three chunks: {first:?}");
        assert!(first.contains(&(1, 1, 5)) && first.contains(&(2, 2, 1)) && first.contains(&(2, 4, 3)), "{first:?}");
    }

    /// Random graphs: the schedule respects the one-send-one-receive rule and the inputs.
    #[test]
    fn random_schedules_are_valid() {
        use rand::{seq::SliceRandom, Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..30 {
            let n = rng.random_range(6..14);
            let k = rng.random_range(2..5);
            let count = rng.random_range(1..12);
            let gs: Vec<RepairGraph> = (0..count)
                .map(|_| {
                    let mut nodes: Vec<NodeId> = (0..n).collect();
                    nodes.shuffle(&mut rng);
                    let shape = [Shape::Cr, Shape::Ppr, Shape::Ecpipe][rng.random_range(0..3)];
                    graph(shape, &nodes[..k as usize], nodes[k as usize])
                })
                .collect();
            let refs: Vec<&RepairGraph> = gs.iter().collect();
            let ts = schedule(&refs, Preference::NewLeaves);
            check(&refs, &ts);
            let sends: usize = ts.slots.iter().flatten().flatten().count();
            assert_eq!(sends, gs.iter().map(|g| g.network_edges().count()).sum::<usize>(), "every transfer scheduled once");
        }
    }
}

#[cfg(test)]
mod against_the_bound {
    use super::*;
    use crate::graph::Shape;
    use crate::schedule::{plan, random_lost_chunks, Cluster, Scheduler};

    /// The load bound: the most transfers any node sends or receives (each takes a slot of
    /// its own at that node).
    fn bound(graphs: &[&RepairGraph]) -> u32 {
        loads(graphs).iter().map(|&(s, r)| s.max(r)).max().unwrap_or(0).max(1)
    }

    /// RepairBoost-balanced full-node batches of RS(6,3): taking the busiest work first
    /// after the paper's rule takes fewer slots overall, most for ECPipe's long chains, and
    /// at most one more in any batch (a greedy order, not an optimum); the best of 32
    /// shuffled orders fewer still, PPR within 1% of the load bound. (Measured over 10 seeds each, slots over the load bound: PPR on
    /// 16 nodes with 24 chunks 1.100 -> 1.090, on 30 with 100 1.067 -> 1.043; ECPipe 1.560
    /// -> 1.460 and 1.295 -> 1.210.)
    #[test]
    fn busiest_first_comes_closer_to_the_load_bound() {
        let code = "rs:6,3".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
        for shape in [Shape::Ppr, Shape::Ecpipe, Shape::Cr] {
            let (mut paper, mut ours, mut floor, mut shuffled) = (0, 0, 0, 0);
            for (nodes, chunks) in [(16, 24), (16, 48), (30, 100)] {
                for seed in 0..6 {
                    let lost = random_lost_chunks(nodes, chunks, 9, seed);
                    let cluster = Cluster::homogeneous((1..nodes as NodeId).collect());
                    let s = plan(code.as_ref(), shape, Scheduler::Repairboost, &lost, &cluster, seed).unwrap();
                    let graphs: Vec<&RepairGraph> = s.repairs.iter().map(|r| &r.graph).collect();
                    let a = schedule(&graphs, Preference::NewLeaves);
                    let b = schedule(&graphs, Preference::NewLeavesThenBusiest);
                    super::tests::check(&graphs, &b);
                    let c = schedule_best(&graphs, Preference::NewLeavesThenBusiest, 32, seed);
                    super::tests::check(&graphs, &c);
                    assert!(c.timeslots <= b.timeslots);
                    assert!(c.timeslots >= lower_bound(&graphs));
                    shuffled += c.timeslots;
                    let lb = bound(&graphs);
                    assert!(b.timeslots >= lb);
                    assert!(
                        b.timeslots <= a.timeslots + 1,
                        "{shape}, {nodes} nodes, {chunks} chunks, seed {seed}: {} > {}",
                        b.timeslots,
                        a.timeslots
                    );
                    (paper, ours, floor) = (paper + a.timeslots, ours + b.timeslots, floor + lb);
                }
            }
            eprintln!(
                "{shape}: slots over the load bound, paper's rule {:.3}, busiest first {:.3}, best of 32 orders {:.3}",
                paper as f64 / floor as f64,
                ours as f64 / floor as f64,
                shuffled as f64 / floor as f64
            );
            if shape != Shape::Cr {
                assert!(ours < paper, "{shape}: {ours} slots against the paper's rule's {paper}");
                assert!(shuffled < ours, "{shape}: the best of 32 orders took {shuffled} slots, one order {ours}");
            }
            if shape == Shape::Ppr {
                // Measured 1.010: PPR's balanced batches reach their load bound nearly always.
                assert!((shuffled as f64) < 1.03 * floor as f64, "PPR: {shuffled} slots against a load bound of {floor}");
            }
        }
    }

    /// Balanced PPR batches of the testbed's size (RS(6,3), 16 nodes, 25 and 48 lost
    /// chunks): enough shuffled orders always find a schedule at the lower bound, where a
    /// single order misses it in most batches.
    #[test]
    fn enough_orders_reach_the_lower_bound() {
        let code = "rs:6,3".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
        let mut one_order_missed = 0;
        for chunks in [25, 48] {
            for seed in 0..12 {
                let lost = random_lost_chunks(16, chunks, 9, seed);
                let cluster = Cluster::homogeneous((1..16).collect());
                let s = plan(code.as_ref(), Shape::Ppr, Scheduler::Repairboost, &lost, &cluster, seed).unwrap();
                let graphs: Vec<&RepairGraph> = s.repairs.iter().map(|r| &r.graph).collect();
                let floor = lower_bound(&graphs);
                let best = schedule_best(&graphs, Preference::NewLeavesThenBusiest, 1024, seed);
                super::tests::check(&graphs, &best);
                assert_eq!(best.timeslots, floor, "{chunks} chunks, seed {seed}");
                one_order_missed += usize::from(schedule(&graphs, Preference::NewLeavesThenBusiest).timeslots > floor);
            }
        }
        assert!(one_order_missed >= 6, "one order missed the bound in only {one_order_missed} of 24 batches");
    }

    /// The schedule as first written: every slot, every ready transfer looked up again and
    /// all of them sorted by (preference, graph, vertex). `schedule` keeps its candidates
    /// across slots and counting-sorts them; it must give exactly these slots.
    fn schedule_by_sorting(graphs: &[&RepairGraph], pref: Preference) -> Timeslots {
        let Start { mut slots, mut pending, mut ready } = Start::of(graphs);
        let mut left = loads(graphs);
        let after: Vec<Vec<u32>> = graphs.iter().map(|g| transfers_after(g)).collect();
        let mut t = 0;
        while !ready.is_empty() {
            let mut cands: Vec<Ready> = ready
                .iter()
                .map(|&(gi, v)| {
                    let g = graphs[gi as usize];
                    let o = g.vertices[v as usize].output.unwrap();
                    let (from, to) = (g.vertices[v as usize].node, g.vertices[o.index()].node);
                    Ready {
                        graph: gi,
                        vertex: v,
                        output: o.index() as u32,
                        from,
                        to,
                        completes: pending[gi as usize][o.index()] == 1 && o != g.sink,
                        load: left[from as usize].0.max(left[to as usize].1),
                        after: after[gi as usize][v as usize],
                    }
                })
                .collect();
            match pref {
                Preference::NewLeaves => cands.sort_by_key(|c| (!c.completes, c.graph, c.vertex)),
                Preference::GraphOrder => cands.sort_by_key(|c| (c.graph, c.vertex)),
                Preference::NewLeavesThenBusiest => {
                    cands.sort_by_key(|c| (!c.completes, std::cmp::Reverse(c.load + c.after), c.graph, c.vertex))
                }
            }
            let pairs: Vec<(NodeId, NodeId)> = cands.iter().map(|c| (c.from, c.to)).collect();
            let chosen = max_matching(&pairs, &mut NodeIndex::default());
            let mut taken = vec![false; cands.len()];
            for &i in &chosen {
                taken[i] = true;
                let c = &cands[i];
                slots[c.graph as usize][c.vertex as usize] = Some(t);
                left[c.from as usize].0 -= 1;
                left[c.to as usize].1 -= 1;
            }
            ready = cands.iter().zip(&taken).filter(|(_, &x)| !x).map(|(c, _)| (c.graph, c.vertex)).collect();
            let fresh = ready.len();
            for &i in &chosen {
                let (gi, o) = (cands[i].graph as usize, cands[i].output as usize);
                pending[gi][o] -= 1;
                if pending[gi][o] == 0 && graphs[gi].vertices[o].output.is_some() {
                    ready.push((gi as u32, o as u32));
                }
            }
            settle(graphs, &mut pending, &mut ready, fresh);
            t += 1;
        }
        Timeslots { slots, timeslots: t }
    }

    /// Every preference, every shape, balanced batches and random ones (RS(6,3) and
    /// RS(10,4), up to 300 chunks): the same slot for every transfer as sorting every slot.
    #[test]
    fn counting_sort_schedules_as_sorting_every_slot() {
        for (code, nodes) in [("rs:6,3", 16), ("rs:10,4", 40)] {
            let code = code.parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
            let width = code.n();
            for shape in [Shape::Cr, Shape::Ppr, Shape::Ecpipe] {
                for (scheduler, chunks, seed) in
                    [(Scheduler::Repairboost, 40, 1), (Scheduler::Repairboost, 300, 2), (Scheduler::Random, 120, 3)]
                {
                    let lost = random_lost_chunks(nodes, chunks, width, seed);
                    let cluster = Cluster::homogeneous((1..nodes as NodeId).collect());
                    let s = plan(code.as_ref(), shape, scheduler, &lost, &cluster, seed).unwrap();
                    let graphs: Vec<&RepairGraph> = s.repairs.iter().map(|r| &r.graph).collect();
                    for pref in [Preference::NewLeaves, Preference::GraphOrder, Preference::NewLeavesThenBusiest] {
                        let (ours, want) = (schedule(&graphs, pref), schedule_by_sorting(&graphs, pref));
                        assert_eq!(ours, want, "{shape} {scheduler:?} {chunks} chunks {pref:?}");
                        super::tests::check(&graphs, &ours);
                    }
                }
            }
        }
    }
}
