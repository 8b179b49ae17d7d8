//! Every graph shape rebuilds the lost chunk byte for byte, for RS and LRC, every single
//! failure and random multi-failure patterns, random slice sizes (1 byte, sizes that do not
//! divide the chunk); and each shape has the traffic and depth its paper claims.

use kintsugi_codes::{Code, CodeSpec};
use kintsugi_plan::{memory_executor, shapes, RepairTask, Shape, ALL_SHAPES};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const SPECS: &[&str] = &["rs:2,1", "rs:3,2", "rs:4,2", "rs:6,3", "rs:10,4", "rs:12,4", "rs:28,4", "lrc:6,2,2", "lrc:12,2,2", "lrc:10,2,3"];

fn stripe(code: &dyn Code, len: usize, rng: &mut impl Rng) -> Vec<Vec<u8>> {
    let data: Vec<Vec<u8>> = (0..code.k()).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
    let mut shards: Vec<Option<Vec<u8>>> = data.into_iter().map(Some).collect();
    shards.resize(code.n(), None);
    code.decode(&mut shards).unwrap();
    shards.into_iter().map(Option::unwrap).collect()
}

/// Nodes: shard i lives on node 100 + i; the destination is node 7.
fn task(code: &dyn Code, lost: usize, helpers: &[usize]) -> RepairTask {
    let equation = code.repair_equation(lost, helpers).unwrap();
    let helper_nodes = equation.helpers().iter().map(|&h| 100 + h as u32).collect();
    RepairTask { equation, helper_nodes, destination: 7 }
}

fn run(code: &dyn Code, shards: &[Vec<u8>], t: &RepairTask, shape: Shape, slice: usize) -> Vec<u8> {
    let g = shapes::build(shape, t).unwrap();
    let chunks: Vec<&[u8]> = g.equation.helpers().iter().map(|&h| shards[h].as_slice()).collect();
    let _ = code;
    memory_executor::execute(&g, &chunks, slice).unwrap()
}

#[test]
fn every_shape_every_single_failure() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for spec in SPECS {
        let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
        let shards = stripe(code.as_ref(), 997, &mut rng);
        let all: Vec<usize> = (0..code.n()).collect();
        for lost in 0..code.n() {
            let helpers = code.choose_helpers(lost, &all).unwrap();
            let t = task(code.as_ref(), lost, &helpers);
            for shape in ALL_SHAPES {
                for slice in [1, 64, 100, 997, 5000] {
                    assert_eq!(run(code.as_ref(), &shards, &t, shape, slice), shards[lost], "{spec} lost {lost} {shape} slice {slice}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_failures_random_slices(spec_i in 0..SPECS.len(), len in 0usize..2000, slice in 1usize..700, seed: u64) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let code = SPECS[spec_i].parse::<CodeSpec>().unwrap().build().unwrap();
        let shards = stripe(code.as_ref(), len, &mut rng);
        let mut idx: Vec<usize> = (0..code.n()).collect();
        idx.shuffle(&mut rng);
        let failed = rng.random_range(1..=code.tolerance());
        let avail = &idx[failed..];
        for &lost in &idx[..failed] {
            let helpers = code.choose_helpers(lost, avail).unwrap();
            let t = task(code.as_ref(), lost, &helpers);
            for shape in ALL_SHAPES {
                prop_assert_eq!(run(code.as_ref(), &shards, &t, shape, slice), shards[lost].clone(), "{} {} lost {}", SPECS[spec_i], shape, lost);
            }
        }
    }
}

fn rs_task(k: usize) -> RepairTask {
    let code = format!("rs:{k},2").parse::<CodeSpec>().unwrap().build().unwrap();
    task(code.as_ref(), 0, &(1..=k).collect::<Vec<_>>())
}

#[test]
fn ppr_depth_is_ceil_log2_k_plus_1() {
    for k in 1..=30usize {
        let g = shapes::build(Shape::Ppr, &rs_task(k)).unwrap();
        let want = ((k + 1) as f64).log2().ceil();
        assert_eq!(g.depth_timesteps(), want, "k={k}");
        // No node sends more than once; the total is still k chunk transfers.
        assert!(g.traffic().max_upload() <= 1.0);
        assert_eq!(g.traffic().total(), k as f64);
    }
}

#[test]
fn ppr_matches_paper_examples() {
    // RS(3,2) (PPR Fig. 3): step 1 S1->S2, step 2 S2->R... with the destination last:
    // [0,1,2,R]: (0->1),(2->R) then (1->R).
    assert_eq!(shapes::ppr_tree::steps(3), vec![vec![(0, 1), (2, 3)], vec![(1, 3)]]);
    // RS(6,3): three steps.
    assert_eq!(shapes::ppr_tree::steps(6), vec![vec![(0, 1), (2, 3), (4, 5)], vec![(1, 3), (5, 6)], vec![(3, 6)]]);
}

#[test]
fn cr_destination_downloads_k() {
    for k in [2, 6, 10, 28] {
        let g = shapes::build(Shape::Cr, &rs_task(k)).unwrap();
        let t = g.traffic();
        assert_eq!(t.download[&7], k as f64);
        assert_eq!(t.max_upload(), 1.0);
        assert_eq!(g.depth_timesteps(), k as f64);
    }
}

#[test]
fn ecpipe_chain_uploads_at_most_one_chunk_per_node() {
    for k in [2, 6, 10, 28] {
        for shape in [Shape::Ecpipe, Shape::EcpipeCyclic] {
            let g = shapes::build(shape, &rs_task(k)).unwrap();
            let t = g.traffic();
            assert!(t.max_upload() <= 1.0 + 1e-9, "{shape} k={k}: {}", t.max_upload());
            assert!((t.download[&7] - 1.0).abs() < 1e-9, "destination downloads one chunk");
            assert!((t.total() - k as f64).abs() < 1e-9);
        }
        let chain = shapes::build(Shape::Ecpipe, &rs_task(k)).unwrap();
        assert_eq!(chain.depth_timesteps(), k as f64, "without slicing a chain is k timesteps");
    }
}

#[test]
fn ecpipe_cyclic_destination_reads_from_k_minus_1_helpers() {
    let k = 6;
    let g = shapes::build(Shape::EcpipeCyclic, &rs_task(k)).unwrap();
    assert_eq!(g.lanes, k - 1);
    let senders: std::collections::BTreeSet<u32> = g.vertex(g.sink).inputs.iter().map(|&v| g.vertex(v).node).collect();
    assert_eq!(senders.len(), k - 1);
    // Whole lane shares store-and-forward: k-1 hops of 1/(k-1) chunk, then 1 into R = 2.
    assert_eq!(g.depth_timesteps(), 2.0);
}

#[test]
fn bad_plans_are_errors() {
    assert!("ppr2".parse::<Shape>().is_err());
    assert_eq!("ECPIPE-CYCLIC".parse::<Shape>().unwrap(), Shape::EcpipeCyclic);
    let mut t = rs_task(4);
    t.helper_nodes.pop();
    assert!(shapes::build(Shape::Cr, &t).is_err());
    let t = rs_task(4);
    let g = shapes::build(Shape::Cr, &t).unwrap();
    let short = vec![0u8; 10];
    let long = vec![0u8; 11];
    assert!(memory_executor::execute(&g, &[&short, &short, &short, &long], 4).is_err());
    assert!(memory_executor::execute(&g, &[&short, &short, &short], 4).is_err());
    assert!(memory_executor::execute(&g, &[&short, &short, &short, &short], 0).is_err());
    // A hand-made graph that adds a term twice is rejected.
    let mut bad = g.clone();
    bad.vertices[2].local = Some(0);
    assert!(bad.validate().is_err());
}
