//! `repair --method auto --scheduler auto` on a real cluster (loopback, emulated links): the
//! coordinator predicts every candidate on its own lost chunks and runs the fastest, asks
//! again before each ChameleonEC phase, and says what it needs when nothing can run.
//! Every object is read back byte for byte.

use kintsugi_coord::CoordConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Pick, Shape};

mod common;
use common::*;

const OBJECTS: [(&str, usize); 3] = [("a", 700_003), ("b", 300_000), ("c", 5)];

async fn put_all(c: &Cluster) {
    for (name, len) in OBJECTS {
        c.client.put(name, &data(len, len as u64 + 3), "rs:4,2".parse().unwrap(), 65_536).await.unwrap();
    }
}

async fn read_all(c: &Cluster) {
    for (name, len) in OBJECTS {
        let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
        assert_eq!(got, data(len, len as u64 + 3), "{name}");
        assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
    }
}

/// Both choices `auto`: seven candidates predicted, each with a time; the one that ran is
/// the one predicted fastest; deciding took a small share of the repair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_runs_the_candidate_predicted_fastest() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 10, Some(50e6)).await;
    put_all(&c).await;
    c.kill(0).await;
    c.wait_alive(9).await;
    let lost = c.client.status().await.unwrap().lost_chunks;
    assert!(lost > 0, "node 0 held chunks");
    let r = c.client.repair_limited(Pick::Auto, 4096, 8, Pick::Auto, None).await.unwrap();
    assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
    let first = &r.auto[0];
    assert_eq!((first.phase, first.chunks), (0, lost));
    assert_eq!(first.predictions.len(), 7, "{first:?}");
    assert!(first.predictions.iter().all(|p| p.seconds.is_some_and(|s| s > 0.0)), "every candidate can run: {first:?}");
    let fastest = first.predictions.iter().min_by(|a, b| a.seconds.partial_cmp(&b.seconds).unwrap()).unwrap();
    assert_eq!(first.chosen, fastest.candidate);
    assert_eq!(Some(first.predicted_seconds), fastest.seconds);
    assert!(r.method.starts_with("auto: ") && r.method.contains(&first.chosen), "{}", r.method);
    assert!(first.decide_seconds < 2.0, "deciding took {} s", first.decide_seconds);
    read_all(&c).await;
    c.stop().await;
}

/// ChameleonEC chosen by `auto` asks again before every phase: with phases far shorter
/// than a chunk's tasks, one chunk per phase and one choice per phase, each for the
/// chunks then left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_asks_again_before_each_chameleon_phase() {
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { repair_phase_ms: 1, ..cfg(dir.path(), "127.0.0.1:0") };
    let mut c = cluster_with(conf, dir.path(), 9, Some(50e6)).await;
    put_all(&c).await;
    c.kill(0).await;
    c.wait_alive(8).await;
    let lost = c.client.status().await.unwrap().lost_chunks;
    assert!(lost >= 2, "node 0 held chunks of several stripes: {lost}");
    // Method auto with ChameleonEC: it draws its own trees, so it is the one candidate.
    let r = c.client.repair_limited(Pick::Auto, 4096, 8, Scheduler::Chameleon, None).await.unwrap();
    assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
    assert_eq!(r.phases, lost, "one chunk per phase: {r:?}");
    let phases: Vec<(usize, usize)> = r.auto.iter().map(|a| (a.phase, a.chunks)).collect();
    let expected: Vec<(usize, usize)> = (0..lost).map(|p| (p, lost - p)).collect();
    assert_eq!(phases, expected, "a choice before every phase, for what is left");
    assert!(r.auto.iter().all(|a| a.chosen == "chameleon" && a.predictions.len() == 1), "{:?}", r.auto);
    read_all(&c).await;
    c.stop().await;
}

/// With too few live nodes for the code, `auto` says so and what it needs; nothing is
/// lost, and the objects still read (degraded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_with_too_few_live_nodes_says_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 6, Some(50e6)).await;
    put_all(&c).await;
    c.kill(0).await;
    c.wait_alive(5).await;
    let e = c.client.repair_limited(Pick::Auto, 4096, 8, Pick::Auto, None).await.unwrap_err();
    assert!(e.message().contains("needs 6 live nodes") && e.message().contains("5 are up"), "{e}");
    for (name, len) in OBJECTS {
        let (got, _) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
        assert_eq!(got, data(len, len as u64 + 3), "{name}");
    }
    c.stop().await;
}

/// Automatic repair with `repair_method = "auto"` and `repair_scheduler = "auto"`: a node
/// stopped by `fail` has its chunks rebuilt without a command, by what `auto` chose, and
/// `status` says what that was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_repair_may_leave_the_choice_to_auto() {
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig {
        auto_repair: true,
        auto_repair_interval_ms: 200,
        repair_method: Pick::Auto,
        repair_scheduler: Pick::Auto,
        ..cfg(dir.path(), "127.0.0.1:0")
    };
    let mut c = cluster_with(conf, dir.path(), 9, Some(50e6)).await;
    put_all(&c).await;
    c.client.fail(0).await.unwrap();
    c.kill(0).await;
    let mut last = None;
    for _ in 0..200 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let s = c.client.status().await.unwrap();
        if s.lost_chunks == 0 && !s.repairing && s.last_auto_repair.is_some() {
            last = s.last_auto_repair;
            break;
        }
    }
    let r = last.expect("automatic repair ran and rebuilt every chunk");
    assert!(r.failed == 0 && r.repaired > 0, "{r:?}");
    assert!(r.method.starts_with("auto: ") && !r.auto.is_empty(), "{r:?}");
    assert_eq!(r.auto[0].predictions.len(), 7);
    read_all(&c).await;
    c.stop().await;
}
