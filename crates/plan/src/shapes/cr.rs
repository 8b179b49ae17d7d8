//! Conventional repair: every helper sends its scaled chunk straight to the destination,
//! which adds them. The destination downloads k chunks, so it takes k timesteps.

use super::Builder;
use crate::error::Result;
use crate::graph::{RepairGraph, RepairTask, Shape};

/// A star of k sources into the sink.
pub fn star(task: &RepairTask) -> Result<RepairGraph> {
    let mut b = Builder::new();
    let sink = b.vertex(task.destination, None, 0);
    for t in 0..task.equation.terms.len() {
        let s = b.helper(task, t, 0);
        b.edge(s, sink);
    }
    b.finish(Shape::Cr, task, 1)
}
