//! Connections held back by the same slow hop must not stay in phase in the slice model.
//! Twelve repairs each send one chunk through a slow uplink (S, 60 MB/s, 5 MB/s each) and
//! one through a shared helper (H, 100 MB/s); H's edges run a window ahead and wait for S.
//! A thirteenth repair crosses H too and is bound by its own destination's downlink
//! (20 MB/s, 10 MB/s per edge), which H's other edges leave room for (100 - 12 x 5 = 40).
//! Max-min sharing, worked out by hand, gives it 2 chunks / 20 MB/s. If the twelve resumed
//! at the instant S delivers (all S's slices end together), they would take H together,
//! 100/13 = 7.7 MB/s each, for two thirds of every slice time, and the thirteenth repair
//! would take 0.470 s instead of 0.419 s (12% slower; the fluid model's random-case test
//! found the same lock 4.7% apart from it in a whole repair, case 80).

use kintsugi_plan::{shapes, RepairTask, Shape};
use kintsugi_sim::engine::{self, Job};
use kintsugi_sim::{Model, Network, NodeSpec, SimOptions};

const CHUNK: usize = 4 << 20;

fn cr(helpers: [u32; 2], dest: u32) -> Job {
    let code = "rs:2,1".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
    let equation = code.repair_equation(0, &[1, 2]).unwrap();
    let task = RepairTask { equation, helper_nodes: helpers.to_vec(), destination: dest };
    let graph = shapes::build(Shape::Cr, &task).unwrap();
    Job { graph, chunk_len: CHUNK, slice_len: 32 << 10, release: 0.0, timeslots: Vec::new(), cancel_at: None, request: None }
}

#[test]
fn repairs_held_by_one_slow_hop_do_not_move_in_phase() {
    let (s, h, z, y) = (0u32, 1u32, 2u32, 3u32);
    let mut nodes = vec![NodeSpec::link(1e9); 4 + 2 * 12];
    nodes[s as usize].up = 60e6;
    nodes[h as usize].up = 100e6;
    nodes[z as usize].down = 20e6;
    let net = Network { nodes, ..Default::default() };
    let mut jobs: Vec<Job> = (0..12).map(|i| cr([s, h], 4 + 2 * i + 1)).collect();
    jobs.push(cr([h, y], z));
    let free = 2.0 * CHUNK as f64 / 20e6;
    let held = CHUNK as f64 / 5e6;
    for model in [Model::Slice, Model::Fluid] {
        let r = engine::run(&net, &jobs, &SimOptions { model, ..Default::default() }).unwrap();
        let t = r.jobs[12].end;
        assert!((t / free - 1.0).abs() < 0.03, "{model:?}: the free repair took {t:.4} s, its bound is {free:.4} s");
        for j in &r.jobs[..12] {
            assert!((j.end / held - 1.0).abs() < 0.03, "{model:?}: a held repair took {:.4} s, S allows {held:.4} s", j.end);
        }
    }
}
