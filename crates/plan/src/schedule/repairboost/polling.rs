//! RepairBoost's polling mode for heterogeneous bandwidth (§3.4). Timeslots assume every
//! transfer takes as long as every other; with links of different speeds they do not, so the
//! paper orders transfers by polling instead:
//! 1. pick the node N' with the least accumulated upload + download time;
//! 2. sort the ready transfers on N''s links by the links' bandwidth;
//! 3. send over the fastest of them (N' its sender or its receiver);
//! 4. repeat until every transfer is sent.
//!
//! A transfer is ready once everything its sender adds has arrived (store-and-forward, as
//! in [`super::timeslot`]); it costs each end chunk / bandwidth of its link. The result is a
//! total order, given as one slot per transfer: a node sends its transfers in that order.

use super::timeslot::{settle, Start, Timeslots};
use crate::graph::{NodeId, RepairGraph};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

/// A ready transfer: vertex `vertex` of graph `graph` sends to its output.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Transfer {
    graph: u32,
    vertex: u32,
}

/// A heap entry of one node's ready transfers: fastest link first, then input order.
#[derive(PartialEq)]
struct ByBandwidth(f64, Reverse<(u32, u32)>);
impl Eq for ByBandwidth {}
impl PartialOrd for ByBandwidth {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for ByBandwidth {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

/// A node's accumulated time, for the least-busy heap (smallest first, then lowest id).
#[derive(PartialEq)]
struct ByBusy(f64, NodeId);
impl Eq for ByBusy {}
impl PartialOrd for ByBusy {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for ByBusy {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// Orders every network transfer of `graphs` by polling. `bandwidth(a, b)` is the rate of
/// the link from a to b in bytes/s; `chunk` the bytes each transfer moves.
pub fn schedule(graphs: &[&RepairGraph], chunk: f64, bandwidth: impl Fn(NodeId, NodeId) -> f64) -> Timeslots {
    let Start { mut slots, mut pending, ready } = Start::of(graphs);
    // Each ready transfer sits in its sender's and its receiver's heap; taken through one,
    // it is skipped when it surfaces in the other.
    let mut on_node: HashMap<NodeId, BinaryHeap<ByBandwidth>> = HashMap::new();
    let mut busy: HashMap<NodeId, f64> = HashMap::new();
    let mut least = BinaryHeap::new();
    let ends = |t: Transfer| {
        let g = graphs[t.graph as usize];
        let o = g.vertices[t.vertex as usize].output.expect("ready vertices send");
        (g.vertices[t.vertex as usize].node, g.vertices[o.index()].node)
    };
    let offer = |t: Transfer,
                 on_node: &mut HashMap<NodeId, BinaryHeap<ByBandwidth>>,
                 least: &mut BinaryHeap<ByBusy>,
                 busy: &HashMap<NodeId, f64>| {
        let (from, to) = ends(t);
        let bw = bandwidth(from, to);
        for n in [from, to] {
            let heap = on_node.entry(n).or_default();
            if heap.is_empty() {
                least.push(ByBusy(busy.get(&n).copied().unwrap_or(0.0), n));
            }
            heap.push(ByBandwidth(bw, Reverse((t.graph, t.vertex))));
        }
    };
    for &(graph, vertex) in &ready {
        offer(Transfer { graph, vertex }, &mut on_node, &mut least, &busy);
    }
    let mut next: u32 = 0;
    while let Some(ByBusy(at, node)) = least.pop() {
        if busy.get(&node).copied().unwrap_or(0.0) != at {
            continue; // a stale entry: the node's time moved on
        }
        let heap = on_node.get_mut(&node).expect("nodes in the heap have transfers");
        let Some(ByBandwidth(bw, Reverse((graph, vertex)))) = heap.pop() else { continue };
        if !heap.is_empty() {
            least.push(ByBusy(at, node));
        }
        if slots[graph as usize][vertex as usize].is_some() {
            continue; // taken already through its other end
        }
        slots[graph as usize][vertex as usize] = Some(next);
        next += 1;
        let (from, to) = ends(Transfer { graph, vertex });
        let cost = chunk / bw.max(f64::MIN_POSITIVE);
        for n in [from, to] {
            let b = busy.entry(n).or_insert(0.0);
            *b += cost;
            if on_node.get(&n).is_some_and(|h| !h.is_empty()) {
                least.push(ByBusy(*b, n));
            }
        }
        // Its receiver may now be ready to send (and to pass on within its own node).
        let g = graphs[graph as usize];
        let o = g.vertices[vertex as usize].output.expect("sent vertices have outputs").index();
        pending[graph as usize][o] -= 1;
        if pending[graph as usize][o] == 0 && g.vertices[o].output.is_some() {
            let mut fresh = vec![(graph, o as u32)];
            settle(graphs, &mut pending, &mut fresh, 0);
            for (gi, v) in fresh {
                offer(Transfer { graph: gi, vertex: v }, &mut on_node, &mut least, &busy);
            }
        }
    }
    Timeslots { slots, timeslots: next }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::RepairTask;
    use crate::shapes;
    use crate::Shape;
    use kintsugi_codes::{Code, LinearCode};

    fn star(helpers: &[NodeId], dest: NodeId, shape: Shape) -> RepairGraph {
        let code = LinearCode::rs(helpers.len(), 2).unwrap();
        let eq = code.repair_equation(0, &(1..=helpers.len()).collect::<Vec<_>>()).unwrap();
        shapes::build(shape, &RepairTask { equation: eq, helper_nodes: helpers.to_vec(), destination: dest }).unwrap()
    }

    /// Sends in the order the polling steps give, by hand: node 9 is fast, the others slow.
    #[test]
    fn least_busy_node_sends_over_its_fastest_link_first() {
        // Chunk 1: helpers 1, 2 into 9. Chunk 2: helpers 3, 4 into 8. All links 1 B/s except
        // those touching 9 (4 B/s).
        let g1 = star(&[1, 2], 9, Shape::Cr);
        let g2 = star(&[3, 4], 8, Shape::Cr);
        let bw = |a: NodeId, b: NodeId| if a == 9 || b == 9 { 4.0 } else { 1.0 };
        let ts = schedule(&[&g1, &g2], 4.0, bw);
        // Every node is at 0 s: the lowest id, node 1, goes first over its only link (to 9:
        // 1 s each end). Then node 2 (0 s) sends to 9 (now 1 s): 1 s. Then node 3 (0 s) to 8:
        // 4 s, then node 4 to 8.
        let order = |g: &RepairGraph, s: &[Option<u32>], node: NodeId| {
            let v = g.vertices.iter().position(|v| v.node == node && v.output.is_some()).unwrap();
            s[v].unwrap()
        };
        assert_eq!(order(&g1, &ts.slots[0], 1), 0);
        assert_eq!(order(&g1, &ts.slots[0], 2), 1);
        assert_eq!(order(&g2, &ts.slots[1], 3), 2);
        assert_eq!(order(&g2, &ts.slots[1], 4), 3);
        assert_eq!(ts.timeslots, 4);
    }

    #[test]
    fn a_node_picks_its_fastest_ready_link() {
        // Node 5 helps two repairs: into 6 over a 1 B/s link and into 7 over 3 B/s. Node 5
        // is the least busy (lowest id among 0 s nodes after 1..4 have none), and picks 7.
        let g1 = star(&[5, 1], 6, Shape::Cr);
        let g2 = star(&[5, 2], 7, Shape::Cr);
        let bw = |a: NodeId, b: NodeId| match (a, b) {
            (5, 7) => 3.0,
            _ => 1.0,
        };
        let ts = schedule(&[&g1, &g2], 3.0, bw);
        let v5_in = |g: &RepairGraph| g.vertices.iter().position(|v| v.node == 5).unwrap();
        // Node 1 (lowest id at 0 s) goes first, to 6; then node 2 to 7; then node 5 (0 s),
        // whose fastest link is to 7.
        assert!(ts.slots[1][v5_in(&g2)].unwrap() < ts.slots[0][v5_in(&g1)].unwrap(), "{:?}", ts.slots);
    }

    #[test]
    fn every_transfer_is_ordered_once_and_after_its_inputs() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for shape in [Shape::Cr, Shape::Ppr, Shape::Ecpipe] {
            let graphs: Vec<RepairGraph> = (0..30)
                .map(|_| {
                    let mut nodes: Vec<NodeId> = (0..20).collect();
                    for i in 0..7 {
                        let j = rng.random_range(i..nodes.len());
                        nodes.swap(i, j);
                    }
                    star(&nodes[..6], nodes[6], shape)
                })
                .collect();
            let refs: Vec<&RepairGraph> = graphs.iter().collect();
            let ts = schedule(&refs, 1.0, |a, b| 1.0 + ((a * 7 + b * 3) % 5) as f64);
            let mut seen = std::collections::HashSet::new();
            for (g, s) in graphs.iter().zip(&ts.slots) {
                for (v, vx) in g.vertices.iter().enumerate() {
                    let Some(o) = vx.output else { continue };
                    let remote = g.vertices[o.index()].node != vx.node;
                    assert_eq!(s[v].is_some(), remote, "{shape}: every network transfer, and only those");
                    if let Some(t) = s[v] {
                        assert!(seen.insert(t), "slot {t} given twice");
                        // Store-and-forward: everything the sender adds arrived before.
                        for i in &vx.inputs {
                            if let Some(ti) = s[i.index()] {
                                assert!(ti < t, "{shape}: input sent at {ti}, after its receiver's send at {t}");
                            }
                        }
                    }
                }
            }
            assert_eq!(seen.len() as u32, ts.timeslots);
        }
    }
}
