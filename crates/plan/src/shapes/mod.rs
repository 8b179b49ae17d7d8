//! Graph builders, one per repair method: the method is only the shape of the graph and
//! where its vertices sit. Every builder places vertex i's helper term on the node that
//! holds it and the sink on the task's destination.

pub mod cr;
pub mod ecpipe;
pub mod ppr_tree;
pub mod tree;

use crate::error::{PlanError, Result};
use crate::graph::{RepairGraph, RepairTask, Shape, Vertex, VertexId};

/// Builds the graph of `shape` for one lost chunk.
pub fn build(shape: Shape, task: &RepairTask) -> Result<RepairGraph> {
    let k = task.equation.terms.len();
    if k == 0 {
        return Err(PlanError::Invalid("the repair equation has no helper terms".into()));
    }
    if task.helper_nodes.len() != k {
        return Err(PlanError::Invalid(format!("{} helper nodes for {k} equation terms", task.helper_nodes.len())));
    }
    match shape {
        Shape::Cr => cr::star(task),
        Shape::Ppr => ppr_tree::tree(task),
        Shape::Ecpipe => ecpipe::chain(task),
        Shape::EcpipeCyclic => ecpipe::cyclic(task),
        Shape::Tree => Err(PlanError::Invalid("a tree's edges come from its scheduler (--scheduler chameleon)".into())),
    }
}

/// Accumulates vertices and wires edges, so builders read as the shape they draw.
pub(crate) struct Builder {
    pub vertices: Vec<Vertex>,
}

impl Builder {
    pub fn new() -> Self {
        Builder { vertices: Vec::new() }
    }

    /// A vertex on `node`, reading term `local` (if any), in `lane`.
    pub fn vertex(&mut self, node: u32, local: Option<usize>, lane: usize) -> VertexId {
        self.vertices.push(Vertex { node, local, lane, inputs: Vec::new(), output: None });
        VertexId(self.vertices.len() as u32 - 1)
    }

    /// A source reading term `t` of the task on its helper's node.
    pub fn helper(&mut self, task: &RepairTask, t: usize, lane: usize) -> VertexId {
        self.vertex(task.helper_nodes[t], Some(t), lane)
    }

    pub fn edge(&mut self, from: VertexId, to: VertexId) {
        self.vertices[from.index()].output = Some(to);
        self.vertices[to.index()].inputs.push(from);
    }

    pub fn finish(self, shape: Shape, task: &RepairTask, lanes: usize) -> Result<RepairGraph> {
        RepairGraph::new(shape, task.equation.clone(), lanes, self.vertices)
    }
}
