//! A repair tree of any shape (ChameleonEC's tunable plans): every helper sends its term,
//! plus whatever it received, to one parent helper or to the destination. Slices are
//! pipelined through it like an ECPipe chain. The shape comes from a scheduler
//! (`schedule::chameleon`); on its own, `tree` has no edges to draw.

use super::Builder;
use crate::error::{PlanError, Result};
use crate::graph::{RepairGraph, RepairTask, Shape};

/// `parents[t]`: the term whose helper term t's helper sends to (None: the destination).
pub fn from_parents(task: &RepairTask, parents: &[Option<usize>]) -> Result<RepairGraph> {
    let k = task.equation.terms.len();
    if parents.len() != k {
        return Err(PlanError::Invalid(format!("{} parents for {k} helper terms", parents.len())));
    }
    let mut b = Builder::new();
    let sink = b.vertex(task.destination, None, 0);
    let vs: Vec<_> = (0..k).map(|t| b.helper(task, t, 0)).collect();
    for (t, p) in parents.iter().enumerate() {
        match p {
            Some(p) if *p >= k || *p == t => return Err(PlanError::Invalid(format!("term {t} cannot send to term {p}"))),
            Some(p) => b.edge(vs[t], vs[*p]),
            None => b.edge(vs[t], sink),
        }
    }
    // RepairGraph::new checks there is no cycle and every term reaches the sink once.
    b.finish(Shape::Tree, task, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_codes::{HelperTerm, RepairEquation};

    fn task(k: usize) -> RepairTask {
        let terms = (0..k).map(|i| HelperTerm::scalar(i + 1, 1)).collect();
        RepairTask {
            equation: RepairEquation { lost: 0, sub_chunks: 1, terms, structured: None },
            helper_nodes: (1..=k as u32).collect(),
            destination: 9,
        }
    }

    #[test]
    fn figure_9_tree_and_bad_parents() {
        // N1 -> N4, N7 -> N3, N4 -> N3, N3 -> N6 as terms 0..3 = N3, N4, N1, N7.
        let g = from_parents(&task(4), &[None, Some(0), Some(1), Some(0)]).unwrap();
        let t = g.traffic();
        assert_eq!(t.download.get(&9), Some(&1.0), "the destination downloads one chunk");
        assert_eq!(t.download.get(&1), Some(&2.0), "term 0's node relays two inputs");
        assert!(from_parents(&task(3), &[Some(1), Some(0), None]).is_err(), "a cycle is refused");
        assert!(from_parents(&task(2), &[Some(0), None]).is_err(), "a term cannot send to itself");
        assert!(from_parents(&task(2), &[None]).is_err());
    }
}
