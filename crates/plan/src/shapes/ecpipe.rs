//! ECPipe's repair pipelining (Li et al., ATC'17). Basic: one chain N1 -> N2 -> ... -> Nk ->
//! destination, slices following each other down it (1 + (k-1)/s timeslots). Cyclic: the
//! slices are dealt into k-1 lanes; lane r runs the rotated chain N(r+1) -> ... -> Nk -> N1
//! -> ... -> Nr (1-based) whose last node hands the slice to the destination, so the
//! destination reads from k-1 different helpers.

use super::Builder;
use crate::error::Result;
use crate::graph::{RepairGraph, RepairTask, Shape, SlotRule, VertexId};

/// The basic chain.
pub fn chain(task: &RepairTask) -> Result<RepairGraph> {
    let mut b = Builder::new();
    let sink = b.vertex(task.destination, None, 0);
    let order: Vec<usize> = (0..task.equation.terms.len()).collect();
    link_chain(&mut b, task, &order, 0, sink);
    b.finish(Shape::Ecpipe, task, 1)
}

/// The cyclic variant: k-1 rotated chains (a single chain when k = 1), with the paper's
/// step schedule. Group g holds the g-th slice of every lane. In step h of group g the
/// node at chain position h of lane r sends it on (slot g(k-1) + h); the last node of lane
/// r hands group g to the destination in step r of group g+1 (slot (g+1)(k-1) + r), while
/// it is the one node idle in that group's chains. So every node sends one slice per step.
pub fn cyclic(task: &RepairTask) -> Result<RepairGraph> {
    let k = task.equation.terms.len();
    let lanes = (k - 1).max(1);
    let mut b = Builder::new();
    let sink = b.vertex(task.destination, None, 0);
    let mut slots = vec![None];
    for lane in 0..lanes {
        // 0-based: lane r starts at helper r and wraps around, ending at helper r-1.
        let order: Vec<usize> = (0..k).map(|i| (lane + i) % k).collect();
        link_chain(&mut b, task, &order, lane, sink);
        let period = lanes as u64;
        for h in 0..k as u64 {
            let offset = if h + 1 < k as u64 { h } else { period + lane as u64 };
            slots.push(Some(SlotRule { offset, period }));
        }
    }
    let mut g = b.finish(Shape::EcpipeCyclic, task, lanes)?;
    if k > 1 {
        g.slots = slots;
        g.validate()?;
    }
    Ok(g)
}

/// Wires helpers `order[0] -> order[1] -> ... -> sink` in `lane`.
fn link_chain(b: &mut Builder, task: &RepairTask, order: &[usize], lane: usize, sink: VertexId) {
    let mut prev: Option<VertexId> = None;
    for &t in order {
        let v = b.helper(task, t, lane);
        if let Some(p) = prev {
            b.edge(p, v);
        }
        prev = Some(v);
    }
    if let Some(last) = prev {
        b.edge(last, sink);
    }
}
