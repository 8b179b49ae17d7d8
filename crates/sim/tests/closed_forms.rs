//! The simulator reproduces the papers' closed forms within 2%: CR k*T, PPR
//! ceil(log2(k+1))*T, ECPipe basic and cyclic (1+(k-1)/s)*T, T = chunk/link, s = chunk/slice.

use kintsugi_plan::{Shape, ALL_SHAPES};
use kintsugi_sim::scenario::{closed_form, Single};
use kintsugi_sim::{engine, Network, NodeSpec, SimError};

const MIB: usize = 1 << 20;

fn simulate(code: &str, method: Shape, chunk: usize, slice: usize) -> (f64, f64) {
    let link = 125e6; // 1 Gbit/s
    let s = Single { code: code.parse().unwrap(), method, link, chunk, slice, lost: 0 };
    let (net, jobs) = s.build().unwrap();
    let k = jobs[0].graph.equation.terms.len();
    let r = engine::run(&net, &jobs, &Default::default()).unwrap();
    (r.makespan, closed_form(method, k, chunk, slice, link))
}

#[test]
fn every_method_matches_its_closed_form() {
    for code in ["rs:4,2", "rs:6,3", "rs:10,4", "rs:12,4"] {
        for method in ALL_SHAPES {
            for slice in [32 * 1024, MIB, 64 * MIB] {
                let (sim, want) = simulate(code, method, 64 * MIB, slice);
                let err = (sim / want - 1.0).abs();
                assert!(
                    err < 0.02,
                    "{code} {method} slice {slice}: simulated {sim:.4} s, closed form {want:.4} s ({:.2}% off)",
                    err * 100.0
                );
            }
        }
    }
}

#[test]
fn lrc_local_repair_reads_the_group() {
    // LRC(12,2,2): a data chunk is rebuilt from its 6 group members, so CR takes 6 T.
    let (sim, want) = simulate("lrc:12,2,2", Shape::Cr, 8 * MIB, 64 * 1024);
    assert!((sim / want - 1.0).abs() < 0.02);
    assert!((sim / (6.0 * 8.0 * MIB as f64 / 125e6) - 1.0).abs() < 0.02);
}

#[test]
fn odd_sizes_and_one_byte_slices() {
    // A chunk that the slices do not divide, and 1-byte slices, still finish and conserve bytes.
    let s = Single { code: "rs:3,2".parse().unwrap(), method: Shape::Ecpipe, link: 1e6, chunk: 1001, slice: 1, lost: 1 };
    let (net, jobs) = s.build().unwrap();
    let r = engine::run(&net, &jobs, &Default::default()).unwrap();
    let total_up: f64 = r.upload_bytes.iter().sum();
    assert!((total_up - 3.0 * 1001.0).abs() < 1e-3, "3 edges of 1001 bytes, got {total_up}");
    let want = closed_form(Shape::Ecpipe, 3, 1001, 1, 1e6);
    assert!((r.makespan / want - 1.0).abs() < 0.02);
}

#[test]
fn bad_scenarios_are_errors() {
    let bad_link = Single { code: "rs:6,3".parse().unwrap(), method: Shape::Cr, link: 0.0, chunk: 1 << 20, slice: 1 << 10, lost: 0 };
    assert!(matches!(bad_link.build(), Err(SimError::BadScenario(_))));
    let bad_lost = Single { lost: 9, link: 1.0, ..bad_link.clone() };
    assert!(bad_lost.build().is_err());
    let zero_slice = Single { slice: 0, link: 1.0, ..bad_link };
    assert!(zero_slice.build().is_err());
    let fnode = kintsugi_sim::scenario::FullNode {
        nodes: 14,
        chunks: 1,
        code: "rs:10,4".parse().unwrap(),
        method: Shape::Cr,
        link: 1e6,
        chunk: 1024,
        slice: 1024,
        seed: 1,
        max_active: 1,
        scheduler: kintsugi_plan::schedule::Scheduler::Index,
        requestors: 0,
        failed: 1,
        given: None,
    };
    let err = fnode.build().expect_err("14 nodes cannot host RS(10,4) plus a destination");
    assert!(err.to_string().contains("needs 14 nodes"), "{err}");
    let mut net = Network::homogeneous(3, 1.0);
    net.nodes[1] = NodeSpec { up: 0.0, ..NodeSpec::link(1.0) };
    assert!(engine::run(&net, &[], &Default::default()).is_err());
}

#[test]
fn clay_star_moves_d_over_q_chunks() {
    // Clay(10,4,13): 13 helpers each send 64 of 256 sub-chunks, so CR takes 13/4 T at the
    // destination's downlink (RS(10,4): 10 T); a chain relays whole partial sums (one raw
    // quarter, then 12 hops of a whole chunk), pipelined in units of one slice of every
    // sub-chunk: s = (chunk/alpha)/slice units of T/s. The first unit crosses the quarter
    // hop and 12 whole hops, the other s-1 follow at the chunk rate: (s + 11.25) T/s.
    let t = 64.0 * MIB as f64 / 125e6;
    for (lost, slice) in [(0usize, 32 * 1024), (7, MIB), (13, 16 * MIB)] {
        let s = Single { code: "clay:10,4,13".parse().unwrap(), method: Shape::Cr, link: 125e6, chunk: 64 * MIB, slice, lost };
        let (net, jobs) = s.build().unwrap();
        let r = engine::run(&net, &jobs, &Default::default()).unwrap();
        assert!((r.makespan / (3.25 * t) - 1.0).abs() < 0.02, "lost {lost} slice {slice}: {} s, want {} s", r.makespan, 3.25 * t);
    }
    for slice in [1024usize, 32 * 1024] {
        let s = Single { code: "clay:10,4,13".parse().unwrap(), method: Shape::Ecpipe, link: 125e6, chunk: 64 * MIB, slice, lost: 0 };
        let (net, jobs) = s.build().unwrap();
        let r = engine::run(&net, &jobs, &Default::default()).unwrap();
        let units = (64 * MIB / 256 / slice) as f64;
        let want = (units + 11.25) / units * t;
        assert!((r.makespan / want - 1.0).abs() < 0.02, "ecpipe over clay, slice {slice}: {} s, want about {want} s", r.makespan);
    }
}

/// A job cancelled halfway stops there: it ends at its `cancel_at`, marked cancelled, having
/// moved about half its bytes; a second job sharing its links finishes faster than beside a
/// job that runs on. For every method and both models (CR and PPR store-and-forward in
/// the slice model, the pipelines in either).
#[test]
fn a_cancelled_job_stops_and_frees_its_links() {
    for method in ALL_SHAPES {
        for model in [engine::Model::Slice, engine::Model::Fluid] {
            let s = Single { code: "rs:4,2".parse().unwrap(), method, link: 125e6, chunk: 8 * MIB, slice: 256 * 1024, lost: 0 };
            let (net, jobs) = s.build().unwrap();
            let opts = engine::SimOptions { model, ..Default::default() };
            let alone = engine::run(&net, &jobs, &opts).unwrap();
            let full: f64 = alone.download_bytes.iter().sum();
            let half = alone.makespan / 2.0;
            let mut cut = jobs.clone();
            cut[0].cancel_at = Some(half);
            let r = engine::run(&net, &cut, &opts).unwrap();
            assert!(r.jobs[0].cancelled && r.jobs[0].end == half, "{method} {model:?}: {:?}", r.jobs[0]);
            let moved: f64 = r.download_bytes.iter().sum();
            assert!(moved > 0.2 * full && moved < 0.8 * full, "{method} {model:?}: {moved} of {full} bytes by half time");
            // Two copies of the repair share every link; cancelling one frees them.
            let both = engine::run(&net, &[jobs[0].clone(), jobs[0].clone()], &opts).unwrap();
            let one_cut = engine::run(&net, &[cut[0].clone(), jobs[0].clone()], &opts).unwrap();
            assert!(!one_cut.jobs[1].cancelled && one_cut.jobs[1].end < both.jobs[1].end * 0.95, "{method} {model:?}");
            // A cancel time after the end changes nothing.
            cut[0].cancel_at = Some(alone.makespan * 2.0);
            let late = engine::run(&net, &cut, &opts).unwrap();
            assert!(!late.jobs[0].cancelled && late.makespan == alone.makespan);
        }
    }
}

/// Foreground that yields (`elastic_foreground`) is one more flow on its link: CR's 3
/// downloads and the users' flow share the destination's downlink a quarter each when the
/// users want more than that, and the users take only what they want when they want less.
/// Taken first (not elastic), the same foreground leaves repair only the rest.
#[test]
fn elastic_foreground_is_one_more_flow_on_its_link() {
    use kintsugi_sim::network::{Direction, Foreground};
    let (link, chunk) = (1e6, 1_000_000usize);
    let s = Single { code: "rs:3,2".parse().unwrap(), method: Shape::Cr, link, chunk, slice: chunk, lost: 0 };
    let (net, jobs) = s.build().unwrap();
    let dest = jobs[0].graph.vertex(jobs[0].graph.sink).node;
    let bytes = 3.0 * chunk as f64;
    for (users, elastic, repair_rate) in
        [(0.8 * link, false, 0.2 * link), (0.8 * link, true, 0.75 * link), (0.1 * link, true, 0.9 * link), (0.1 * link, false, 0.9 * link)]
    {
        let mut net = net.clone();
        net.foreground.push(Foreground { node: dest, direction: Direction::Down, points: vec![(0.0, users)] });
        net.elastic_foreground = elastic;
        let r = engine::run(&net, &jobs, &Default::default()).unwrap();
        let want = bytes / repair_rate;
        assert!((r.makespan / want - 1.0).abs() < 0.01, "users {users}, elastic {elastic}: {} s, want {want} s", r.makespan);
    }
    // ECPipe's pipeline (the fluid model) is one flow into the destination: half the link.
    let s = Single { method: Shape::Ecpipe, slice: chunk / 1000, ..s };
    let (mut net, jobs) = s.build().unwrap();
    let dest = jobs[0].graph.vertex(jobs[0].graph.sink).node;
    net.foreground.push(Foreground { node: dest, direction: Direction::Down, points: vec![(0.0, 0.8 * link)] });
    net.elastic_foreground = true;
    let r = engine::run(&net, &jobs, &Default::default()).unwrap();
    let want = chunk as f64 / (0.5 * link);
    assert!((r.makespan / want - 1.0).abs() < 0.02, "ecpipe: {} s, want {want} s", r.makespan);
}
