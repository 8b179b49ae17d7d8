//! ECPipe cyclic in the slice model: a node's sends go in the paper's step order, one at a
//! time, and a send frees the node's slot once the sender's uplink has taken it, as the
//! executor's socket write does; the receiver's downlink takes it in meanwhile. So a busy
//! receiver holds up only the units meant for it, not the sender's other lanes.

use kintsugi_plan::{shapes, RepairTask, Shape};
use kintsugi_sim::engine::{self, Job};
use kintsugi_sim::{Model, Network, NodeSpec, SimOptions};

const CHUNK: usize = 4 << 20;

/// An ECPipe cyclic repair of chunk 0 of `code` from `helpers` (lane 0's chain order) to `dest`.
fn cyclic(code: &str, helpers: &[u32], dest: u32, slice: usize) -> Job {
    let code = code.parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
    let sources: Vec<usize> = (1..=helpers.len()).collect();
    let equation = code.repair_equation(0, &sources).unwrap();
    let task = RepairTask { equation, helper_nodes: helpers.to_vec(), destination: dest };
    let graph = shapes::build(Shape::EcpipeCyclic, &task).unwrap();
    Job { graph, chunk_len: CHUNK, slice_len: slice, release: 0.0, timeslots: Vec::new(), cancel_at: None, request: None }
}

/// Four RS(6,3) repairs on uniform 125 MB/s links (the fluid test's random case 827), each
/// sharing a helper with another: 15 (repairs 0 and 3), 4 and 23 (1 and 3), 8 (0 and 2).
/// Every helper sends a chunk per repair, so those four uplinks carry two chunks each: the
/// last repair cannot end before 2 chunks / 125 MB/s (0.0671 s), and max-min gives every
/// repair half a link, which ends them all there, plus a pipeline's fill (2%). No downlink
/// is full at those rates: node 3, repair 1's destination and a helper of repair 3, takes
/// 62.5 + 4/5 x 62.5 = 112.5 MB/s. When a send held its sender's slot until it arrived,
/// node 3's downlink, busy in bursts, held up the other lanes of the nodes sending to it:
/// the last repair ended at 0.0743 s, 11% over.
#[test]
fn a_busy_downlink_holds_up_only_the_units_it_takes_in() {
    let net = Network { nodes: vec![NodeSpec::link(125e6); 30], ..Default::default() };
    let slice = CHUNK.div_ceil(126);
    let jobs = [
        cyclic("rs:6,3", &[2, 6, 8, 10, 15, 19], 1, slice),
        cyclic("rs:6,3", &[4, 7, 9, 16, 17, 23], 3, slice),
        cyclic("rs:6,3", &[13, 21, 26, 27, 28, 8], 5, slice),
        cyclic("rs:6,3", &[22, 29, 15, 4, 23, 3], 11, slice),
    ];
    let bound = 2.0 * CHUNK as f64 / 125e6;
    for model in [Model::Slice, Model::Fluid] {
        let t = engine::run(&net, &jobs, &SimOptions { model, ..Default::default() }).unwrap().makespan;
        assert!(
            t >= bound * 0.999 && t < bound * 1.06,
            "{model:?}: the last repair ended at {t:.4} s, the shared uplinks allow {bound:.4} s"
        );
    }
}
