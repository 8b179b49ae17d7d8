//! A repair graph as it travels: the wire's own types, apart from the planner's in-memory
//! `RepairGraph`, so that a planner can change its structures without changing what two
//! builds say to each other. Integers are fixed-width (`u32`), the method is a name (a
//! peer that does not know it says so), the coefficients travel in their compact form.
//! Conversions to and from the planner's types live with the node (`kintsugi_node::wire`),
//! which checks every graph it receives before running it.

use serde::{Deserialize, Serialize};

/// A cluster node's id on the wire.
pub type NodeId = u32;

/// One helper's contribution: the sub-chunk ranges it reads and its coefficient matrix
/// (`sub_chunks x` sub-chunks read, row-major).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireTerm {
    /// The helper's position in the stripe.
    pub helper: u32,
    /// `[start, end)` sub-chunk ranges, in order.
    pub reads: Vec<(u32, u32)>,
    /// How many coefficients the matrix has.
    pub coefs_len: u32,
    /// `coefs` holds (LEB128 gap from the previous non-zero entry, value) pairs of the
    /// non-zero ones: a Clay term's matrix is mostly zeros, and every node of a graph gets
    /// every term. Else `coefs` holds every coefficient.
    pub sparse: bool,
    /// Binary on the wire, not an array of numbers.
    #[serde(with = "serde_bytes")]
    pub coefs: Vec<u8>,
}

/// One step of a repair, on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireVertex {
    pub node: NodeId,
    /// The term this vertex reads and multiplies, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<u32>,
    pub lane: u32,
    /// Vertices (indices) whose streams are added here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<u32>,
    /// Where the sum goes; `None` only for the sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u32>,
}

/// A repair graph for one lost chunk: the equation it evaluates and where each vertex runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireGraph {
    /// The method the graph was built as (`cr`, `ppr`, `ecpipe`, `ecpipe-cyclic`, `tree`).
    pub shape: String,
    /// The lost chunk's position in the stripe.
    pub lost: u32,
    /// Sub-chunks per chunk (1 for RS and LRC).
    pub sub_chunks: u32,
    pub terms: Vec<WireTerm>,
    pub lanes: u32,
    pub vertices: Vec<WireVertex>,
    pub sink: u32,
    /// Each vertex's send slots as (offset, period), or none at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<Option<(u64, u64)>>,
    /// Relays forward each slice at once (else only after their whole input arrived).
    pub pipelined: bool,
    /// The code whose structured repair the terms are (e.g. `clay:10,4,13`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<String>,
}

impl WireGraph {
    /// The node of the sink vertex (the chunk's new home, or the reader), if the graph has it.
    pub fn sink_node(&self) -> Option<NodeId> {
        self.vertices.get(self.sink as usize).map(|v| v.node)
    }
}
