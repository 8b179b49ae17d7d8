//! Between the planner's repair graphs and the wire's ([`kintsugi_proto::wire_graph`]): a
//! coordinator sends what it planned, a node turns what it received back into a graph and
//! checks it ([`crate::exec::check_assignment`]) before running any of it.

use kintsugi_codes::{coef_wire, CodeSpec, HelperTerm, RepairEquation};
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Pick, RepairGraph, Shape, SlotRule, Vertex, VertexId};
use kintsugi_proto::WireError;
use kintsugi_proto::{Assignment, WireGraph, WireTerm, WireVertex};

/// An assignment over the planner's graph: what a coordinator builds and a node runs.
pub type Job = Assignment<RepairGraph>;

/// The graph as it travels.
pub fn graph_to_wire(g: &RepairGraph) -> WireGraph {
    let n = |x: usize| x as u32;
    WireGraph {
        shape: g.shape.name().to_string(),
        lost: n(g.equation.lost),
        sub_chunks: n(g.equation.sub_chunks),
        terms: g
            .equation
            .terms
            .iter()
            .map(|t| {
                let (sparse, coefs) = coef_wire::pack(&t.coefs);
                WireTerm {
                    helper: n(t.helper),
                    reads: t.reads.iter().map(|r| (n(r.start), n(r.end))).collect(),
                    coefs_len: n(t.coefs.len()),
                    sparse,
                    coefs,
                }
            })
            .collect(),
        lanes: n(g.lanes),
        vertices: g
            .vertices
            .iter()
            .map(|v| WireVertex {
                node: v.node,
                local: v.local.map(n),
                lane: n(v.lane),
                inputs: v.inputs.iter().map(|i| i.0).collect(),
                output: v.output.map(|o| o.0),
            })
            .collect(),
        sink: g.sink.0,
        slots: g.slots.iter().map(|s| s.map(|s| (s.offset, s.period))).collect(),
        pipelined: g.pipelined,
        structured: g.equation.structured.map(|c| c.to_string()),
    }
}

/// The graph a peer sent, as the planner's type. Only the shape of the data is checked
/// here; [`RepairGraph::validate`] checks that it is a graph that can run.
pub fn graph_from_wire(w: WireGraph) -> Result<RepairGraph, WireError> {
    let shape = Shape::from_name(&w.shape).ok_or_else(|| WireError::bad_request(format!("unknown repair shape '{}'", w.shape)))?;
    let u = |x: u32| x as usize;
    let terms = w
        .terms
        .into_iter()
        .map(|t| {
            let coefs = coef_wire::unpack(t.sparse, u(t.coefs_len), &t.coefs).map_err(|e| WireError::bad_request(e.to_string()))?;
            Ok(HelperTerm { helper: u(t.helper), reads: t.reads.iter().map(|&(a, b)| u(a)..u(b)).collect(), coefs })
        })
        .collect::<Result<_, WireError>>()?;
    let structured = match &w.structured {
        Some(s) => Some(s.parse::<CodeSpec>().map_err(|e| WireError::bad_request(format!("bad structured-repair code '{s}': {e}")))?),
        None => None,
    };
    Ok(RepairGraph {
        shape,
        equation: RepairEquation { lost: u(w.lost), sub_chunks: u(w.sub_chunks), terms, structured },
        lanes: u(w.lanes),
        vertices: w
            .vertices
            .into_iter()
            .map(|v| Vertex {
                node: v.node,
                local: v.local.map(u),
                lane: u(v.lane),
                inputs: v.inputs.into_iter().map(VertexId).collect(),
                output: v.output.map(VertexId),
            })
            .collect(),
        sink: VertexId(w.sink),
        slots: w.slots.into_iter().map(|s| s.map(|(offset, period)| SlotRule { offset, period })).collect(),
        pipelined: w.pipelined,
    })
}

/// A job as it travels.
pub fn job_to_wire(j: &Job) -> Assignment {
    j.with_graph(graph_to_wire(&j.graph))
}

/// The scheduler a repair request names: empty is the default (`index`), `auto` lets the
/// coordinator choose (`coord::repair_auto`).
pub fn scheduler_from_wire(name: &str) -> Result<Pick<Scheduler>, WireError> {
    if name.is_empty() {
        return Ok(Pick::Fixed(Scheduler::default()));
    }
    name.parse::<Pick<Scheduler>>().map_err(|e| WireError::bad_request(format!("{e} (or auto)")))
}

/// The method a request names.
pub fn method_from_wire(name: &str) -> Result<Shape, WireError> {
    name.parse::<Shape>().map_err(|e| WireError::bad_request(e.to_string()))
}

/// The method a repair request names, which may be `auto`.
pub fn pick_method_from_wire(name: &str) -> Result<Pick<Shape>, WireError> {
    name.parse::<Pick<Shape>>().map_err(|e| WireError::bad_request(format!("{e} (or auto)")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_codes::CodeSpec;
    use kintsugi_plan::{shapes::build, RepairTask};

    #[test]
    fn every_shape_survives_the_wire() {
        // Clay's terms (sparse matrices, several read ranges) and RS's alike.
        for spec in ["rs:6,3", "clay:4,2,5"] {
            let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
            let eq = code.repair_equation(1, &(0..code.n()).filter(|&h| h != 1).collect::<Vec<_>>()).unwrap();
            let task = RepairTask { helper_nodes: (0..eq.terms.len() as u32).collect(), destination: 99, equation: eq };
            for shape in [Shape::Cr, Shape::Ppr, Shape::Ecpipe, Shape::EcpipeCyclic] {
                let g = build(shape, &task).unwrap();
                let back = graph_from_wire(graph_to_wire(&g)).unwrap();
                assert_eq!(back, g, "{spec} {shape}");
                back.validate().unwrap();
            }
        }
    }

    #[test]
    fn plans_travel_smaller_than_as_json() {
        // A Clay(10,4,13) repair of chunk 0 as a node receives it.
        let code = "clay:10,4,13".parse::<CodeSpec>().unwrap().build().unwrap();
        let eq = code.repair_equation(0, &(1..code.n()).collect::<Vec<_>>()).unwrap();
        let task = RepairTask { helper_nodes: (1..code.n() as u32).collect(), destination: 99, equation: eq };
        let g = build(Shape::Ecpipe, &task).unwrap();
        let req = kintsugi_proto::NodeRequest::RunRepair {
            assignment: Box::new(Assignment {
                repair: 7,
                graph: graph_to_wire(&g),
                chunk_len: 64 << 20,
                slice_len: 32 << 10,
                term_chunks: (1..code.n()).map(|h| kintsugi_proto::ChunkId::new(3, h)).collect(),
                peers: (1..code.n() as u32).chain([99]).map(|n| (n, format!("10.0.0.{n}:7500"))).collect(),
                store: None,
                timeslots: vec![],
                gate_batch: None,
                term_offset: None,
            }),
        };
        let (packed, json) = (kintsugi_proto::frame::encode_control(&req).unwrap(), serde_json::to_vec(&req).unwrap());
        eprintln!("Clay(10,4,13) ECPipe plan: {} bytes as MessagePack, {} as JSON", packed.len(), json.len());
        assert!(packed.len() < json.len());
        assert_eq!(kintsugi_proto::frame::decode_control::<kintsugi_proto::NodeRequest>(&packed).unwrap(), req);
    }

    #[test]
    fn names_the_peer_got_wrong() {
        let mut w = WireGraph {
            shape: "teleport".into(),
            lost: 0,
            sub_chunks: 1,
            terms: vec![],
            lanes: 1,
            vertices: vec![],
            sink: 0,
            slots: vec![],
            pipelined: true,
            structured: None,
        };
        assert!(graph_from_wire(w.clone()).unwrap_err().message().contains("teleport"));
        w.shape = "tree".into();
        w.structured = Some("clay:10,4".into());
        assert!(graph_from_wire(w.clone()).unwrap_err().message().contains("structured-repair code 'clay:10,4'"));
        w.structured = None;
        assert!(graph_from_wire(w).is_ok());
        assert!(method_from_wire("warp").is_err());
        assert_eq!(method_from_wire("ppr").unwrap(), Shape::Ppr);
        assert_eq!(scheduler_from_wire("").unwrap(), Pick::Fixed(Scheduler::default()));
        assert_eq!(scheduler_from_wire("auto").unwrap(), Pick::Auto);
        assert_eq!(scheduler_from_wire("repairboost").unwrap(), Pick::Fixed(Scheduler::Repairboost));
        assert!(scheduler_from_wire("chaos").unwrap_err().message().contains("or auto"));
        assert_eq!(pick_method_from_wire("auto").unwrap(), Pick::Auto);
        assert_eq!(pick_method_from_wire("ecpipe").unwrap(), Pick::Fixed(Shape::Ecpipe));
        assert!(pick_method_from_wire("").is_err());
    }
}
