//! The repair graph: sources that read and multiply helper data, combine vertices that add
//! what reaches them, and one sink that receives the rebuilt chunk. See DESIGN.md, "The one
//! idea". Edges carry slice streams; a graph may split the slices of the lost chunk into
//! `lanes` (slice j travels in lane j mod lanes), each lane with its own vertices, which is
//! how ECPipe's cyclic variant sends different slices along different rotated chains.

use crate::error::{PlanError, Result};
use kintsugi_codes::RepairEquation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A cluster node (a storage process, or a reader for degraded reads).
pub type NodeId = u32;

/// Index of a vertex in [`RepairGraph::vertices`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct VertexId(pub u32);

impl VertexId {
    /// The position in the vertex list.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One step of a repair, placed on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vertex {
    /// Where this vertex runs.
    pub node: NodeId,
    /// Index into the equation's terms of the helper data read and multiplied here.
    pub local: Option<usize>,
    /// Which lane's slices this vertex handles (ignored for the sink, which takes all).
    pub lane: usize,
    /// Vertices whose streams are added here.
    pub inputs: Vec<VertexId>,
    /// Where the sum goes; `None` only for the sink.
    pub output: Option<VertexId>,
}

/// The repair shapes of DESIGN.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Conventional repair: a star of k sources into the destination.
    Cr,
    /// PPR's partial-parallel reduction tree.
    Ppr,
    /// ECPipe's basic chain through the helpers.
    Ecpipe,
    /// ECPipe's cyclic variant: k-1 rotated chains, the destination reads from k-1 helpers.
    EcpipeCyclic,
    /// A pipelined tree of any shape, drawn by a scheduler (ChameleonEC's tunable plans).
    Tree,
}

/// Every shape, in the order the demos report them.
pub const ALL_SHAPES: [Shape; 4] = [Shape::Cr, Shape::Ppr, Shape::Ecpipe, Shape::EcpipeCyclic];

impl Shape {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Cr => "cr",
            Shape::Ppr => "ppr",
            Shape::Ecpipe => "ecpipe",
            Shape::EcpipeCyclic => "ecpipe-cyclic",
            Shape::Tree => "tree",
        }
    }
}

impl Shape {
    /// The shape of this name, [`Shape::Tree`] included (which the command line does not take).
    pub fn from_name(name: &str) -> Option<Shape> {
        [Shape::Cr, Shape::Ppr, Shape::Ecpipe, Shape::EcpipeCyclic, Shape::Tree].into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Shape {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        ALL_SHAPES.into_iter().find(|m| m.name() == lower).ok_or_else(|| {
            // A scheduler (ChameleonEC, RepairBoost, ...) is not a per-chunk graph: say where it goes.
            match lower.parse::<crate::schedule::Scheduler>() {
                Ok(sched) => PlanError::SchedulerNotMethod(sched.name().to_string()),
                Err(_) => PlanError::UnknownMethod(s.to_string()),
            }
        })
    }
}

/// The slot of a vertex's lane-local unit u is `offset + u * period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRule {
    /// Slot of unit 0.
    pub offset: u64,
    /// Slots between consecutive units.
    pub period: u64,
}

impl SlotRule {
    /// The slot of unit u.
    pub fn slot(&self, u: u64) -> u64 {
        self.offset + u * self.period
    }
}

/// What a planner needs to know about one lost chunk: how to compute it, where each
/// helper's data lives, and where the result goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairTask {
    /// Coefficients and helper reads.
    pub equation: RepairEquation,
    /// Node holding each term's helper chunk (same order as `equation.terms`).
    pub helper_nodes: Vec<NodeId>,
    /// The new home of the chunk (full-node repair) or the reader (degraded read).
    pub destination: NodeId,
}

/// Chunk transfers per node, in units of one chunk (a lane edge carries 1/lanes chunk).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Chunks sent by each node.
    pub upload: BTreeMap<NodeId, f64>,
    /// Chunks received by each node.
    pub download: BTreeMap<NodeId, f64>,
}

impl Traffic {
    /// Largest upload of any node.
    pub fn max_upload(&self) -> f64 {
        self.upload.values().copied().fold(0.0, f64::max)
    }
    /// Largest download of any node.
    pub fn max_download(&self) -> f64 {
        self.download.values().copied().fold(0.0, f64::max)
    }
    /// Sum over nodes of uploads (equals the sum of downloads).
    pub fn total(&self) -> f64 {
        self.upload.values().sum()
    }
}

/// A validated repair graph for one lost chunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairGraph {
    /// The shape this graph was built as.
    pub shape: Shape,
    /// The equation the graph evaluates.
    pub equation: RepairEquation,
    /// Number of lanes the slices are dealt into.
    pub lanes: usize,
    /// All vertices.
    pub vertices: Vec<Vertex>,
    /// The one vertex without an output.
    pub sink: VertexId,
    /// Optional send order per vertex (empty: none). When set, each node sends its units
    /// in increasing slot order, one slot at a time, across all its vertices: the timestep
    /// schedule a paper assumes (ECPipe cyclic: every node sends one slice per step). The
    /// network executor lets a send start up to one period early (the node crate's
    /// `slot_gate`), so one late process does not stall every lane behind it.
    #[serde(default)]
    pub slots: Vec<Option<SlotRule>>,
    /// Whether relays forward slice j as soon as they have it (ECPipe, CR), or only after
    /// their whole input has arrived (PPR as published: whole partial chunks per timestep).
    pub pipelined: bool,
}

impl RepairGraph {
    /// Builds a graph from parts and checks it (see [`RepairGraph::validate`]).
    pub fn new(shape: Shape, equation: RepairEquation, lanes: usize, vertices: Vec<Vertex>) -> Result<Self> {
        let sinks: Vec<usize> = (0..vertices.len()).filter(|&i| vertices[i].output.is_none()).collect();
        let [sink] = sinks[..] else {
            return Err(PlanError::Invalid(format!("a graph has exactly one sink, this one has {}", sinks.len())));
        };
        let pipelined = shape != Shape::Ppr;
        let g = RepairGraph { shape, equation, lanes, vertices, sink: VertexId(sink as u32), pipelined, slots: Vec::new() };
        g.validate()?;
        Ok(g)
    }

    /// Checks that edges agree in both directions, every lane is acyclic and sums every
    /// equation term exactly once, and lanes only meet at the sink.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PlanError::Invalid(m));
        let n = self.vertices.len();
        if self.lanes == 0 || self.lanes > n {
            return bad(format!("a graph of {n} vertices cannot have {} lanes", self.lanes));
        }
        // The equation must be well formed before anything sizes buffers from it.
        let alpha = self.equation.sub_chunks;
        if alpha == 0 || alpha > 1 << 16 {
            return bad(format!("{alpha} sub-chunks per chunk is out of range"));
        }
        for (i, t) in self.equation.terms.iter().enumerate() {
            if t.reads.iter().any(|r| r.start >= r.end || r.end > alpha) {
                return bad(format!("term {i} reads sub-chunks outside 0..{alpha}"));
            }
            if t.coefs.len() != alpha * t.read_count() {
                return bad(format!("term {i} has {} coefficients for {alpha} x {} reads", t.coefs.len(), t.read_count()));
            }
        }
        if !self.slots.is_empty() && self.slots.len() != n {
            return bad(format!("{} slot rules for {n} vertices", self.slots.len()));
        }
        for (i, v) in self.vertices.iter().enumerate() {
            let id = VertexId(i as u32);
            if let Some(o) = v.output {
                if o.index() >= n || !self.vertices[o.index()].inputs.contains(&id) {
                    return bad(format!("vertex {i} sends to {o:?}, which does not list it as an input"));
                }
                if o != self.sink && self.vertices[o.index()].lane != v.lane {
                    return bad(format!("vertex {i} crosses from lane {} into another lane", v.lane));
                }
            }
            for inp in &v.inputs {
                if inp.index() >= n || self.vertices[inp.index()].output != Some(id) {
                    return bad(format!("vertex {i} lists input {inp:?}, which does not send to it"));
                }
            }
            if v.lane >= self.lanes && id != self.sink {
                return bad(format!("vertex {i} is in lane {} of {}", v.lane, self.lanes));
            }
            if let Some(t) = v.local {
                if t >= self.equation.terms.len() {
                    return bad(format!("vertex {i} reads term {t}, the equation has {}", self.equation.terms.len()));
                }
            }
        }
        // Following outputs from any vertex must reach the sink (no cycles, no strays).
        for start in 0..n {
            let mut cur = start;
            for _ in 0..=n {
                match self.vertices[cur].output {
                    Some(o) => cur = o.index(),
                    None => break,
                }
            }
            if cur != self.sink.index() {
                return bad(format!("vertex {start} never reaches the sink"));
            }
        }
        // Each lane must add every term exactly once.
        let sink_local = self.vertices[self.sink.index()].local;
        for lane in 0..self.lanes {
            let mut count = vec![0usize; self.equation.terms.len()];
            for (i, v) in self.vertices.iter().enumerate() {
                if i != self.sink.index() && v.lane == lane {
                    if let Some(t) = v.local {
                        count[t] += 1;
                    }
                }
            }
            if let Some(t) = sink_local {
                count[t] += 1;
            }
            if let Some(t) = count.iter().position(|&c| c != 1) {
                return bad(format!("lane {lane} adds term {t} {} times", count[t]));
            }
        }
        Ok(())
    }

    /// The vertex at `id`.
    pub fn vertex(&self, id: VertexId) -> &Vertex {
        &self.vertices[id.index()]
    }

    /// Vertex ids ordered so that every vertex comes after all of its inputs.
    pub fn topological_order(&self) -> Vec<VertexId> {
        let mut order = Vec::with_capacity(self.vertices.len());
        let mut visited = vec![false; self.vertices.len()];
        fn visit(g: &RepairGraph, v: VertexId, visited: &mut [bool], order: &mut Vec<VertexId>) {
            if visited[v.index()] {
                return;
            }
            visited[v.index()] = true;
            for &i in &g.vertex(v).inputs {
                visit(g, i, visited, order);
            }
            order.push(v);
        }
        visit(self, self.sink, &mut visited, &mut order);
        order
    }

    /// Edges between different nodes: (from vertex, to vertex).
    pub fn network_edges(&self) -> impl Iterator<Item = (VertexId, VertexId)> + '_ {
        self.vertices.iter().enumerate().filter_map(|(i, v)| {
            let o = v.output?;
            (self.vertices[o.index()].node != v.node).then_some((VertexId(i as u32), o))
        })
    }

    /// Sub-chunk windows vertex v sends per slice window. A vertex that only reads (no
    /// inputs) and reads fewer sub-chunks than a chunk has (a Clay helper: beta of alpha)
    /// sends its raw reads and the receiver applies its coefficients; every other vertex
    /// sends its partial sum, a window of every sub-chunk. So a Clay star moves d*beta
    /// sub-chunks while each relay of a chain or tree moves alpha.
    pub fn payload_width(&self, v: VertexId) -> usize {
        let vx = self.vertex(v);
        let alpha = self.equation.sub_chunks;
        match vx.local {
            Some(t) if vx.inputs.is_empty() => self.equation.terms.get(t).map_or(alpha, |term| term.read_count().min(alpha)),
            _ => alpha,
        }
    }

    /// Whether vertex v sends raw reads (see [`RepairGraph::payload_width`]).
    pub fn sends_raw(&self, v: VertexId) -> bool {
        self.payload_width(v) < self.equation.sub_chunks
    }

    /// Chunk transfers uploaded and downloaded per node (each lane edge is 1/lanes chunk,
    /// scaled by the share of sub-chunks it carries).
    pub fn traffic(&self) -> Traffic {
        let mut t = Traffic::default();
        let alpha = self.equation.sub_chunks as f64;
        for (a, b) in self.network_edges() {
            let w = self.payload_width(a) as f64 / alpha / self.lanes as f64;
            *t.upload.entry(self.vertex(a).node).or_default() += w;
            *t.download.entry(self.vertex(b).node).or_default() += w;
        }
        t
    }

    /// Timesteps to finish when whole chunks (or whole lane shares) move store-and-forward:
    /// in one timestep a node sends at most one chunk and receives at most one, and a vertex
    /// sends only after everything it adds has arrived. Edges are scheduled greedily,
    /// longest remaining path first. CR gives k, PPR ceil(log2(k+1)), a chain k.
    pub fn depth_timesteps(&self) -> f64 {
        let n = self.vertices.len();
        // Hops to the sink, as the priority.
        let mut height = vec![0usize; n];
        for v in self.topological_order().into_iter().rev() {
            if let Some(o) = self.vertex(v).output {
                height[v.index()] = height[o.index()] + 1;
            }
        }
        let mut pending: Vec<usize> = self.vertices.iter().map(|v| v.inputs.len()).collect();
        let mut sent = vec![false; n];
        let mut t = 0usize;
        // Same-node edges complete at once; resolve them until nothing changes.
        let settle = |pending: &mut Vec<usize>, sent: &mut Vec<bool>| loop {
            let mut changed = false;
            for i in 0..n {
                if let Some(o) = self.vertices[i].output {
                    if !sent[i] && pending[i] == 0 && self.vertices[o.index()].node == self.vertices[i].node {
                        sent[i] = true;
                        pending[o.index()] -= 1;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        };
        settle(&mut pending, &mut sent);
        while pending[self.sink.index()] > 0 {
            let mut ready: Vec<usize> = (0..n).filter(|&i| !sent[i] && pending[i] == 0 && self.vertices[i].output.is_some()).collect();
            ready.sort_by_key(|&i| (std::cmp::Reverse(height[i]), i));
            let mut up_busy = std::collections::HashSet::new();
            let mut down_busy = std::collections::HashSet::new();
            let mut done = Vec::new();
            for i in ready {
                let from = self.vertices[i].node;
                let o = self.vertices[i].output.expect("ready vertices have outputs");
                let to = self.vertices[o.index()].node;
                if !up_busy.contains(&from) && !down_busy.contains(&to) {
                    up_busy.insert(from);
                    down_busy.insert(to);
                    done.push(i);
                }
            }
            assert!(!done.is_empty(), "a validated graph always has a ready edge");
            for i in done {
                sent[i] = true;
                pending[self.vertices[i].output.unwrap().index()] -= 1;
            }
            t += 1;
            settle(&mut pending, &mut sent);
        }
        t as f64 / self.lanes as f64
    }

    /// What each lane moves, unit by unit: per lane, per unit, the byte windows (of every
    /// sub-chunk) the unit covers. A pipelined graph moves one slice per unit; a
    /// store-and-forward graph moves each lane as a single unit. A unit's payload is, for
    /// each of its windows in order, that window of sub-chunk 0, then of sub-chunk 1, ...
    pub fn lane_units(&self, chunk_len: usize, slice_len: usize) -> Result<Vec<Vec<Vec<std::ops::Range<usize>>>>> {
        let mut lanes: Vec<Vec<Vec<std::ops::Range<usize>>>> = vec![Vec::new(); self.lanes];
        for (j, w) in self.slices(chunk_len, slice_len)?.into_iter().enumerate() {
            lanes[j % self.lanes].push(vec![w]);
        }
        if !self.pipelined {
            for lane in lanes.iter_mut() {
                let all: Vec<_> = lane.drain(..).flatten().collect();
                if !all.is_empty() {
                    lane.push(all);
                }
            }
        }
        Ok(lanes)
    }

    /// Byte windows of each sub-chunk, in slice order: slice j is [j*slice, (j+1)*slice)
    /// clipped to the sub-chunk, and travels in lane j mod lanes.
    pub fn slices(&self, chunk_len: usize, slice_len: usize) -> Result<Vec<std::ops::Range<usize>>> {
        if slice_len == 0 {
            return Err(PlanError::Invalid("slice size must be at least 1 byte".into()));
        }
        let sub = kintsugi_codes::sub_len(self.equation.sub_chunks, chunk_len)?;
        Ok((0..sub.div_ceil(slice_len)).map(|j| j * slice_len..((j + 1) * slice_len).min(sub)).collect())
    }
}
