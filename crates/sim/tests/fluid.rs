//! The fluid model against the slice model, its reference: within 2% of the papers' closed
//! forms for one chunk, and within 3% of the slice model on small random full-node repairs
//! (64 to 256 slices per edge) with every method and scheduler, heterogeneous links and
//! foreground traffic; and at a small fraction of its cost (events grow with repairs, not
//! slices).

use kintsugi_plan::schedule::{Scheduler, ALL_SCHEDULERS};
use kintsugi_plan::{Shape, ALL_SHAPES};
use kintsugi_sim::scenario::{closed_form, FullNode, Single};
use kintsugi_sim::{engine, Admission, Direction, Foreground, Model, Network, NodeSpec, SimOptions};
use proptest::prelude::*;
use rand::Rng;

fn run(net: &Network, jobs: &[engine::Job], admission: Admission, model: Model) -> engine::SimResult {
    engine::run(net, jobs, &SimOptions { admission, model, ..Default::default() }).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// One lost chunk, k = 4..12 helpers, s = 4..2048 slices (the last one short or not).
    #[test]
    fn fluid_matches_the_closed_forms(
        k in 4usize..=12,
        method in prop::sample::select(ALL_SHAPES.to_vec()),
        s in 4usize..=2048,
        slice in 1024usize..=65536,
        short in 0usize..1024,
    ) {
        // The closed forms take every slice as chunk/s; a short last slice leaves the fill at
        // full slices, (k-1) * short / (s * slice) off: keep that under 0.5%.
        let short = if s >= 512 { short.min(slice - 1) } else { 0 };
        let chunk = s * slice - short;
        let link = 125e6;
        let single = Single { code: format!("rs:{k},3").parse().unwrap(), method, link, chunk, slice, lost: 0 };
        let (net, jobs) = single.build().unwrap();
        let fluid = run(&net, &jobs, Admission::All, Model::Fluid).makespan;
        let want = closed_form(method, k, chunk, slice, link);
        prop_assert!((fluid / want - 1.0).abs() < 0.02, "{method} k {k} s {s}: fluid {fluid:.5} s, closed form {want:.5} s");
    }
}

/// A small random cluster: uneven links, some nodes behind a pair cap, foreground traffic
/// switching on and off on a few links.
fn random_network(nodes: usize, base: f64, seed: u64) -> Network {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut net = Network { nodes: (0..nodes).map(|_| NodeSpec::link(base * rng.random_range(0.5..1.5))).collect(), ..Default::default() };
    for n in &mut net.nodes {
        n.down = base * rng.random_range(0.5..1.5);
    }
    for _ in 0..nodes / 4 {
        let a = rng.random_range(0..nodes) as u32;
        let b = rng.random_range(0..nodes) as u32;
        if a != b {
            net.pair_caps.insert((a, b), base * rng.random_range(0.2..0.8));
        }
    }
    for _ in 0..nodes / 3 {
        let node = rng.random_range(0..nodes) as u32;
        let direction = if rng.random_bool(0.5) { Direction::Up } else { Direction::Down };
        let spec = &net.nodes[node as usize];
        let cap = if direction == Direction::Up { spec.up } else { spec.down };
        // Up to 70% of the link for a while, then quiet again. Rates hold for 1 to 4 s,
        // several repairs of a chunk here, as in ChameleonEC's measurements (15-s windows
        // against seconds per 64 MiB chunk). A fluid pipeline moves in step, while the slice
        // model lets a hop run ahead by the executor's few buffered slices: bottlenecks that
        // move within one repair separate the two models by that slack (up to 12% with
        // rates holding 0.3 s).
        let mut t = 0.0;
        let mut points: Vec<(f64, f64)> = (0..4)
            .map(|_| {
                t += rng.random_range(1.0..4.0);
                (t, cap * rng.random_range(0.0..0.7))
            })
            .collect();
        points.push((t + 0.5, 0.0));
        net.foreground.push(Foreground { node, direction, points });
    }
    net
}

/// One random small full-node repair: (fluid / slice - 1, description).
fn random_case(rng: &mut rand::rngs::StdRng, case: u64) -> (f64, String) {
    use rand::Rng;
    // Not k = 3 with ECPipe cyclic (LRC(6,2,2)'s local groups): two lanes leave a node idle
    // every other step, the slice model's eager sends then collide at the sink and take
    // 1.56 T against the paper's 1.13 T, which the fluid model keeps.
    let code = ["rs:4,2", "rs:6,3", "rs:10,4", "lrc:8,2,2", "clay:4,2,5"][rng.random_range(0..5)];
    let method = ALL_SHAPES[rng.random_range(0..ALL_SHAPES.len())];
    let scheduler = ALL_SCHEDULERS[rng.random_range(0..ALL_SCHEDULERS.len())];
    let nodes = rng.random_range(16..40);
    let chunk = 4 << 20;
    let alpha = code.parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap().sub_chunks();
    let units = rng.random_range(64..=256);
    let s = FullNode {
        nodes,
        chunks: rng.random_range(4..40),
        code: code.parse().unwrap(),
        method,
        link: 125e6,
        chunk,
        slice: (chunk / alpha).div_ceil(units),
        seed: case,
        max_active: [1, 2, usize::MAX][rng.random_range(0..3)],
        scheduler,
        requestors: 0,
        failed: 1,
        given: None,
    };
    let (net, jobs, admission) = s.build().unwrap();
    let uniform = rng.random_bool(0.5);
    let net = if uniform { net } else { random_network(nodes, 125e6, case) };
    let slice = run(&net, &jobs, admission, Model::Slice);
    let fluid = run(&net, &jobs, admission, Model::Fluid);
    let what = format!(
        "case {case}: {code} {method} {scheduler:?}, {nodes} nodes, {} chunks, {units} slices per edge, max_active {}, {}: fluid {:.4} s, slice {:.4} s",
        s.chunks,
        s.max_active,
        if uniform { "uniform links" } else { "uneven links and foreground" },
        fluid.makespan,
        slice.makespan
    );
    // The same bytes cross every node's links, in far fewer events.
    for n in 0..nodes {
        let (a, b) = (fluid.upload_bytes[n], slice.upload_bytes[n]);
        assert!((a - b).abs() <= 1e-6 * b.max(1.0), "{what}: node {n} uploads {a} (fluid) vs {b} (slice)");
    }
    assert!(fluid.events <= slice.events, "{what}: {} events (fluid) vs {} (slice)", fluid.events, slice.events);
    (fluid.makespan / slice.makespan - 1.0, what)
}

/// Random small full-node repairs (every method and scheduler, uniform or uneven links with
/// pair caps and foreground traffic, 64 to 256 slices per edge): the fluid model is within
/// 3% of the slice model on every case but ECPipe cyclic (1,200 cases with this seed), median
/// well under 1%, and ECPipe cyclic within 10%. KINTSUGI_FLUID_CASES sets the sample size
/// (default 150), KINTSUGI_FLUID_SEED the seed; KINTSUGI_FLUID_LIST=1 lists the cases more
/// than 2% apart.
///
/// Where they part: a fluid pipeline fills at the links' nominal rates, while a slice
/// crossing a shared link waits its turn; coupled max-min gives a repair held elsewhere
/// exactly its held rate on every link, where its slices take a full share while they move;
/// foreground that changes within a repair. Over 5,000 more cases (seeds 1-5), 8 of about
/// 3,700 outside ECPipe cyclic part by more than 3% (up to 9.1%, foreground switching on
/// under 38 concurrent repairs). And ECPipe cyclic, whose slices the slice model sends in
/// the paper's step order per node, as the executor's slot gate does. A send frees its slot
/// once the sender's uplink has taken it (the executor's socket buffers it for a busy
/// receiver), but each node's next step still waits for another node's last: a closed loop
/// that cannot make up, later, for link capacity its neighbours' bursts took, where one
/// fluid rate per repair does. Fluid is faster by up to 8.5% in 1,200 cases with this seed;
/// over seeds 1-5, from 6.8% faster to 6.0% slower.
#[test]
fn fluid_matches_slice_on_random_full_node_repairs() {
    use rand::SeedableRng;
    let cases: u64 = std::env::var("KINTSUGI_FLUID_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let seed = std::env::var("KINTSUGI_FLUID_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0xf101d);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut errors = Vec::new();
    for case in 0..cases {
        let (err, what) = random_case(&mut rng, case);
        // KINTSUGI_FLUID_LIST=1: list the cases more than 2% apart instead of failing.
        if std::env::var_os("KINTSUGI_FLUID_LIST").is_some() && err.abs() > 0.02 {
            eprintln!("{what} ({:+.2}%)", err * 100.0);
            continue;
        }
        let cyclic = what.contains("ecpipe-cyclic");
        let bound = if cyclic { 0.10 } else { 0.03 };
        assert!(err.abs() < bound, "{what} ({:+.2}%)", err * 100.0);
        if !cyclic {
            errors.push(err.abs());
        }
    }
    errors.sort_by(f64::total_cmp);
    let pct = |p: f64| errors[((errors.len() - 1) as f64 * p) as usize];
    let (median, p95) = (pct(0.5), pct(0.95));
    eprintln!(
        "fluid vs slice over {} cases: median {:.2}%, p95 {:.2}%, max {:.2}%",
        errors.len(),
        median * 100.0,
        p95 * 100.0,
        pct(1.0) * 100.0
    );
    assert!(median < 0.01 && p95 < 0.03, "median {:.2}%, p95 {:.2}%", median * 100.0, p95 * 100.0);
}

/// At scale the fluid model's events grow with repairs: ECPipe over 64 MiB chunks in
/// 32 KiB slices is 2048 slices per edge, yet a few events per repair.
#[test]
fn fluid_events_grow_with_repairs_not_slices() {
    let s = FullNode {
        nodes: 100,
        chunks: 300,
        code: "rs:10,4".parse().unwrap(),
        method: Shape::Ecpipe,
        link: 125e6,
        chunk: 64 << 20,
        slice: 32 << 10,
        seed: 1,
        max_active: 1,
        scheduler: Scheduler::Random,
        requestors: 0,
        failed: 1,
        given: None,
    };
    let (net, jobs, admission) = s.build().unwrap();
    let r = run(&net, &jobs, admission, Model::Fluid);
    assert!(r.events <= 4 * 300, "{} events for 300 repairs", r.events);
    let up: f64 = r.upload_bytes.iter().sum();
    let want = 300.0 * 10.0 * (64u64 << 20) as f64;
    assert!((up / want - 1.0).abs() < 1e-9, "ten edges of one chunk per repair: {up} vs {want}");
}
