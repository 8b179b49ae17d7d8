//! Every scheduler, with every shape, yields valid plans: distinct helpers that hold the
//! stripe's shards, a destination outside the stripe, and graphs that rebuild the chunk.
//! RepairBoost's balancing lowers the load-balancing degree below random selection.

use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::{self, lb_degree::lb_degree, random_lost_chunks, Cluster, ALL_SCHEDULERS};
use kintsugi_plan::Shape;

#[test]
fn every_scheduler_makes_valid_plans() {
    for spec in ["rs:6,3", "lrc:6,2,2"] {
        let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
        let lost = random_lost_chunks(16, 40, code.n(), 9);
        let cluster = Cluster::homogeneous((1..16).collect());
        for shape in [Shape::Cr, Shape::Ppr, Shape::Ecpipe, Shape::EcpipeCyclic] {
            for sched in ALL_SCHEDULERS {
                let plan = schedule::plan(code.as_ref(), shape, sched, &lost, &cluster, 1).unwrap();
                assert_eq!(plan.repairs.len(), lost.len());
                for (c, r) in lost.iter().zip(&plan.repairs) {
                    r.graph.validate().unwrap();
                    let helpers: Vec<usize> = r.helpers();
                    for (&h, &node) in helpers.iter().zip(&r.helper_nodes()) {
                        assert_eq!(c.placement[h], Some(node), "{spec} {shape} {sched}: helper node holds the shard");
                    }
                    let mut nodes = r.helper_nodes();
                    nodes.sort_unstable();
                    nodes.dedup();
                    assert_eq!(nodes.len(), helpers.len(), "{spec} {shape} {sched}: distinct helpers");
                    assert!(!c.holds(r.destination()) && r.destination() != 0, "{spec} {shape} {sched}: destination outside");
                    assert_eq!(r.slots.is_empty(), !sched.timeslots());
                }
            }
        }
    }
}

#[test]
fn balancing_lowers_lb_degree() {
    let code = "rs:6,3".parse::<CodeSpec>().unwrap().build().unwrap();
    let cluster = Cluster::homogeneous((1..16).collect());
    for shape in [Shape::Cr, Shape::Ppr, Shape::Ecpipe] {
        let mut ran = 0.0;
        let mut rb = 0.0;
        for seed in 0..5 {
            let lost = random_lost_chunks(16, 100, code.n(), seed);
            let lb = |s| {
                let p = schedule::plan(code.as_ref(), shape, s, &lost, &cluster, seed).unwrap();
                lb_degree(p.repairs.iter().map(|r| &r.graph), 15)
            };
            ran += lb(schedule::Scheduler::Random) / 5.0;
            rb += lb(schedule::Scheduler::Repairboost) / 5.0;
        }
        assert!(rb < ran, "{shape}: RepairBoost lb_degree {rb:.3} vs RAN {ran:.3}");
        assert!(rb < 1.2, "{shape}: RepairBoost is near balance ({rb:.3})");
    }
}

/// A node to avoid (say, one holding a corrupt copy of the lost chunk) never receives it.
#[test]
fn avoided_nodes_never_receive() {
    let code = "rs:6,3".parse::<CodeSpec>().unwrap().build().unwrap();
    let mut lost = random_lost_chunks(12, 30, code.n(), 4);
    for c in &mut lost {
        // Avoid every live node outside the stripe but two.
        let outside: Vec<u32> = (1..12).filter(|&n| !c.holds(n)).collect();
        c.avoid = outside[2..].to_vec();
    }
    let cluster = Cluster::homogeneous((1..12).collect());
    for sched in ALL_SCHEDULERS {
        let plan = schedule::plan(code.as_ref(), Shape::Cr, sched, &lost, &cluster, 3).unwrap();
        for (c, r) in lost.iter().zip(&plan.repairs) {
            assert!(!c.avoid.contains(&r.destination()), "{sched}: rebuilt onto an avoided node");
        }
    }
}

/// ChameleonEC on LRC (its §4, "LRC: dispatch k/l upload and k/l download tasks"): a lost
/// data chunk or local parity is rebuilt from the k/l other members of its local group, so
/// its tree has k/l uploads and k/l downloads; a global parity needs k of each. Every tree
/// rebuilds the lost chunk's bytes.
#[test]
fn chameleon_dispatches_k_over_l_tasks_for_lrc_local_repairs() {
    use kintsugi_codes::{Code, LinearCode};
    use rand::{Rng, SeedableRng};
    for (k, l, m) in [(8, 2, 2), (10, 2, 2), (4, 2, 2)] {
        let code = LinearCode::lrc(k, l, m).unwrap();
        let n = code.n();
        let lost = random_lost_chunks(20, 60, n, 5);
        let cluster = Cluster::homogeneous((1..20).collect());
        let plan = schedule::plan(&code, Shape::Ecpipe, schedule::Scheduler::Chameleon, &lost, &cluster, 1).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(k as u64);
        let len = 3000 + k;
        let data: Vec<Vec<u8>> = (0..k).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
        let mut parity = vec![vec![0u8; len]; n - k];
        {
            let d: Vec<&[u8]> = data.iter().map(|x| x.as_slice()).collect();
            let mut p: Vec<&mut [u8]> = parity.iter_mut().map(|x| x.as_mut_slice()).collect();
            code.encode(&d, &mut p).unwrap();
        }
        let shards: Vec<&[u8]> = data.iter().chain(&parity).map(|x| x.as_slice()).collect();
        let (mut local, mut global) = (0, 0);
        for (c, r) in lost.iter().zip(&plan.repairs) {
            let want = match code.group_of(c.lost) {
                Some(_) => {
                    local += 1;
                    k / l
                }
                None => {
                    global += 1;
                    k
                }
            };
            let g = &r.graph;
            let edges = g.network_edges().count();
            let senders: std::collections::BTreeSet<u32> = g.network_edges().map(|(a, _)| g.vertices[a.index()].node).collect();
            assert_eq!(edges, want, "LRC({k},{l},{m}) shard {}: {want} downloads", c.lost);
            assert_eq!(senders.len(), want, "LRC({k},{l},{m}) shard {}: {want} sources uploading once each", c.lost);
            let helpers: Vec<&[u8]> = g.equation.terms.iter().map(|t| shards[t.helper]).collect();
            let rebuilt = kintsugi_plan::memory_executor::execute(g, &helpers, 512).unwrap();
            assert!(rebuilt == shards[c.lost], "LRC({k},{l},{m}) shard {}: wrong bytes", c.lost);
        }
        assert!(local > 0 && global > 0, "LRC({k},{l},{m}): both kinds of repair were drawn");
    }
}

/// ChameleonEC-IO (its §4, "storage bottleneck"): a node whose disk users keep busy (a
/// tenth of its read and write bandwidth left, network idle) is given fewer sources and
/// destinations than under plain ChameleonEC, which sees only the idle network; without
/// storage figures the two plan the same.
#[test]
fn chameleon_io_plans_around_a_busy_disk() {
    use kintsugi_codes::LinearCode;
    let code = LinearCode::rs(6, 3).unwrap();
    let lost = random_lost_chunks(16, 60, 9, 7);
    let mut cluster = Cluster::homogeneous((1..16).collect());
    cluster.default_bandwidth = 125e6;
    cluster.chunk_bytes = 8.0 * 1024.0 * 1024.0;
    let plan = |s, c: &Cluster| schedule::plan(&code, Shape::Ecpipe, s, &lost, c, 1).unwrap();
    let plain = plan(schedule::Scheduler::Chameleon, &cluster);
    let same = plan(schedule::Scheduler::ChameleonIo, &cluster);
    let graphs = |p: &schedule::Schedule| p.repairs.iter().map(|r| format!("{:?}", r.graph)).collect::<Vec<_>>();
    assert_eq!(graphs(&plain), graphs(&same), "no storage figures: the same plan");
    let busy = 4;
    for n in 1..16u32 {
        let disk = if n == busy { 5e6 } else { 50e6 };
        cluster.storage.insert(n, (disk, disk));
    }
    let io = plan(schedule::Scheduler::ChameleonIo, &cluster);
    let net_only = plan(schedule::Scheduler::Chameleon, &cluster);
    // Reads: node `busy` as a source; writes: as a destination.
    let roles = |p: &schedule::Schedule| {
        let reads = p.repairs.iter().filter(|r| r.helper_nodes().contains(&busy)).count();
        let writes = p.repairs.iter().filter(|r| r.destination() == busy).count();
        (reads, writes)
    };
    let ((r_net, w_net), (r_io, w_io)) = (roles(&net_only), roles(&io));
    // With a tenth of the others' disk, it takes a small fraction of its network share.
    assert!(r_io * 5 <= r_net && w_io < w_net, "busy disk: reads {r_net} -> {r_io}, writes {w_net} -> {w_io}");
}
