//! PPR's reduction tree (Mitra et al., EuroSys'16). The project's rule (papers/README.md):
//! list the k sources with the destination last; at each step the left node of each
//! neighbouring pair sends its partial sum to the right one; an odd one out waits.
//! That takes ceil(log2(k+1)) steps and matches the paper's RS(3,2) and RS(6,3) examples.

use super::Builder;
use crate::error::Result;
use crate::graph::{RepairGraph, RepairTask, Shape, VertexId};

/// The reduction tree for one lost chunk.
pub fn tree(task: &RepairTask) -> Result<RepairGraph> {
    let mut b = Builder::new();
    let mut active: Vec<VertexId> = (0..task.equation.terms.len()).map(|t| b.helper(task, t, 0)).collect();
    active.push(b.vertex(task.destination, None, 0));
    while active.len() > 1 {
        let mut next = Vec::with_capacity(active.len().div_ceil(2));
        for pair in active.chunks(2) {
            match *pair {
                [left, right] => {
                    b.edge(left, right);
                    next.push(right);
                }
                [alone] => next.push(alone),
                _ => unreachable!("chunks(2) yields one or two"),
            }
        }
        active = next;
    }
    b.finish(Shape::Ppr, task, 1)
}

/// The steps of the tree as (sender term, receiver position) pairs, per step; positions
/// 0..k are helper terms and k is the destination. For tests and documentation.
pub fn steps(k: usize) -> Vec<Vec<(usize, usize)>> {
    let mut active: Vec<usize> = (0..=k).collect();
    let mut out = Vec::new();
    while active.len() > 1 {
        let step: Vec<(usize, usize)> = active.chunks(2).filter(|p| p.len() == 2).map(|p| (p[0], p[1])).collect();
        active = active.chunks(2).map(|p| *p.last().unwrap()).collect();
        out.push(step);
    }
    out
}
