//! ChameleonEC on a real cluster (loopback, emulated links): its trees, its phases, and
//! straggler-aware re-scheduling against a node whose uplink readers take mid-phase.
//! Every object is read back byte for byte.

use kintsugi_client::straggler_injector::Straggler;
use kintsugi_coord::CoordConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use std::collections::HashMap;
use std::time::Duration;

mod common;
use common::*;

/// ChameleonEC's planner on the cluster: the coordinator plans with the nodes' residual
/// bandwidth (their links are emulated, so their capacity is known), each lost chunk is
/// rebuilt through the tree its tasks were paired into, and every object reads back
/// byte for byte, RS and LRC alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chameleon_trees_rebuild_every_lost_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 10, Some(50e6)).await;
    let objects = [("r", 700_003usize, "rs:4,2"), ("l", 300_000, "lrc:4,2,1"), ("s", 5, "rs:4,2")];
    for (name, len, code) in objects {
        c.client.put(name, &data(len, len as u64 + 1), code.parse().unwrap(), 65_536).await.unwrap();
    }
    c.kill(0).await;
    c.wait_alive(9).await;
    let lost = c.client.status().await.unwrap().lost_chunks;
    assert!(lost > 0, "node 0 held chunks");
    let r = c.client.repair(Shape::Cr, 4096, 8, Scheduler::Chameleon).await.unwrap();
    assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
    assert_eq!(r.phases, 1, "with the paper's phase length every chunk fits the first phase");
    for (name, len, _) in objects {
        let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
        assert_eq!(got, data(len, len as u64 + 1), "{name}");
        assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
    }
    c.coord.take().unwrap().stop().await;
    for i in 0..c.nodes.len() {
        c.kill(i).await;
    }
}

/// ChameleonEC's phases on the cluster: with phases far shorter than one chunk's tasks,
/// each phase takes one chunk (a phase always takes at least one), runs to its end, and
/// what is left is planned again; every chunk is rebuilt and every object reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chameleon_repairs_phase_by_phase() {
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { repair_phase_ms: 1, ..cfg(dir.path(), "127.0.0.1:0") };
    let mut c = cluster_with(conf, dir.path(), 9, Some(50e6)).await;
    // One code: each code's chunks are planned apart, their phases side by side.
    let objects = [("p", 600_001usize, "rs:4,2"), ("q", 250_000, "rs:4,2")];
    for (name, len, code) in objects {
        c.client.put(name, &data(len, len as u64 + 7), code.parse().unwrap(), 65_536).await.unwrap();
    }
    c.kill(0).await;
    c.wait_alive(8).await;
    let lost = c.client.status().await.unwrap().lost_chunks;
    assert!(lost >= 2, "node 0 held chunks of several stripes: {lost}");
    let r = c.client.repair(Shape::Ecpipe, 4096, 8, Scheduler::Chameleon).await.unwrap();
    assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
    assert_eq!(r.phases, lost, "one chunk per phase when no chunk fits a phase: {r:?}");
    assert_eq!(r.graphs.len(), lost, "every phase's graphs are reported");
    for (name, len, _) in objects {
        let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
        assert_eq!(got, data(len, len as u64 + 7), "{name}");
        assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
    }
    c.coord.take().unwrap().stop().await;
    for i in 0..c.nodes.len() {
        c.kill(i).await;
    }
}

/// ChameleonEC's phase at a per-destination concurrency (`repair_max_active_per_destination`,
/// the simulator's `--max-active`): with a limit of 1 no destination ever runs two repairs at
/// once; without one, a phase starts its repairs together and some destination runs several.
/// A repair request's own limit (`repair --max-active-per-destination`) holds for its run.
/// Every object reads back byte for byte either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chameleon_phases_at_a_per_destination_concurrency() {
    // (the coordinator's setting, what the repair request asks for)
    for (configured, asked) in [(1, None), (0, None), (0, Some(1))] {
        let limit = asked.unwrap_or(configured);
        let dir = tempfile::tempdir().unwrap();
        let conf = CoordConfig { repair_max_active_per_destination: configured, ..cfg(dir.path(), "127.0.0.1:0") };
        let mut c = cluster_with(conf, dir.path(), 8, Some(10e6)).await;
        let (name, len) = ("many", 3_000_017usize);
        c.client.put(name, &data(len, 41), "rs:4,2".parse().unwrap(), 65_536).await.unwrap();
        c.kill(0).await;
        c.wait_alive(7).await;
        let lost = c.client.status().await.unwrap().lost_chunks;
        assert!(lost > 7, "more lost chunks than destinations: {lost}");
        let r = c.client.repair_limited(Shape::Ecpipe, 4096, 64, Scheduler::Chameleon, asked).await.unwrap();
        assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
        if limit == 1 {
            assert_eq!(r.most_at_once_per_destination, 1, "limit 1: {r:?}");
        } else {
            assert!(r.most_at_once_per_destination >= 2, "no limit: {lost} repairs on 7 nodes at once: {r:?}");
        }
        let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
        assert_eq!(got, data(len, 41), "limit {limit}");
        assert!(rep.degraded.is_empty());
        c.coord.take().unwrap().stop().await;
        for i in 0..c.nodes.len() {
            c.kill(i).await;
        }
    }
}

/// SAR: readers take most of one node's uplink just after the first phase was planned (the
/// planner could not know). That node's repairs run past 1.5x their expected time; the
/// watch finds them, blames that node's uploads and postpones them (an upload is not
/// re-tuned), and the phases go on. Writers taking its downlink instead: its downloads as
/// a relay are re-tuned to go to the destination, the repairs rerun so. Then a node slower than it says (so no report shows
/// it): its repairs are postponed, and at their phase's end, not half done, cancelled on
/// their nodes and planned again. Every chunk is rebuilt once, every object reads back;
/// with SAR off nothing is judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stragglers_are_postponed_and_replanned() {
    // (SAR, node 5 slower than it reports, writers instead of readers)
    for (sar, hidden, writes) in [(true, false, false), (false, false, false), (true, true, false), (true, false, true)] {
        let dir = tempfile::tempdir().unwrap();
        let conf = CoordConfig {
            repair_phase_ms: 300,
            repair_progress_ms: 50,
            repair_straggler_aware: sar,
            chunk_size: 512 << 10,
            ..cfg(dir.path(), "127.0.0.1:0")
        };
        // Node 5 of the hidden case moves 1.5 MB/s and reports 10.
        let link = |i: usize| if hidden && i == 5 { 1.5e6 } else { 10e6 };
        let mut c = cluster_nodes(conf, dir.path(), 10, |i, n| kintsugi_node::NodeConfig {
            uplink: Some(link(i)),
            downlink: Some(link(i)),
            link_capacity: Some(10e6),
            ..n
        })
        .await;
        let objects: Vec<(String, usize)> = (0..24).map(|i| (format!("o{i}"), 2_000_000 + i * 7)).collect();
        for (name, len) in &objects {
            c.client.put(name, &data(*len, *len as u64), "rs:4,2".parse().unwrap(), 512 << 10).await.unwrap();
        }
        // The straggler: the node holding most chunks of the stripes node 0 is in.
        let mut held: HashMap<u32, usize> = HashMap::new();
        for (name, _) in &objects {
            for s in c.client.stat(name).await.unwrap().stripes {
                if s.chunks.iter().any(|ch| ch.node == 0) {
                    for ch in s.chunks.iter().filter(|ch| ch.node != 0) {
                        *held.entry(ch.node).or_default() += 1;
                    }
                }
            }
        }
        let (&slow, _) = held.iter().max_by_key(|(n, k)| (**k, std::cmp::Reverse(**n))).unwrap();
        c.kill(0).await;
        c.wait_alive(9).await;
        let lost = c.client.status().await.unwrap().lost_chunks;
        assert!(lost >= 8, "node 0 held chunks of many stripes: {lost}");
        let client = c.client.clone();
        let repair = tokio::spawn(async move { client.repair(Shape::Ecpipe, 65_536, 64, Scheduler::Chameleon).await });
        let readers = match (hidden, writes) {
            (true, _) => None,
            (false, false) => Some(Straggler::start(&c.client, slow, 8).await.unwrap()),
            (false, true) => Some(Straggler::start_writes(&c.client, slow, 8, 512 << 10).await.unwrap()),
        };
        let mut r = repair.await.unwrap().unwrap();
        let read = match readers {
            Some(r) => {
                // A quick repair can end before any reader finished its first chunk (each
                // shares the slowed node's 10 MB/s with 7 more): let one finish, so the
                // check below asks whether the injector works, not which was quicker.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
                while r.bytes.load(std::sync::atomic::Ordering::Relaxed) == 0 && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                r.stop().await
            }
            None => 0,
        };
        eprintln!(
            "sar {sar}, hidden {hidden}, writes {writes}: {:.2} s, {} phases, stragglers {} (re-tuned {}, postponed {}, restarted {}), the injector moved {} MB at node {slow}",
            r.seconds,
            r.phases,
            r.stragglers,
            r.retuned,
            r.postponed,
            r.restarted,
            read / 1_000_000
        );
        r.graphs.clear(); // not in the messages below
        assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
        assert!(hidden || read > 0, "the readers read");
        if sar {
            assert!(r.stragglers > 0, "the slowed node's repairs were judged stragglers: {r:?}");
            if writes {
                assert!(r.retuned > 0, "delayed downloads at the slowed relay are re-tuned: {r:?}");
            } else {
                assert!(r.postponed > 0, "stragglers waiting on an upload are postponed: {r:?}");
            }
            assert!(!hidden || r.restarted > 0, "a slow node's repair is restarted: {r:?}");
        } else {
            assert_eq!((r.stragglers, r.retuned, r.postponed, r.restarted), (0, 0, 0, 0), "{r:?}");
        }
        for (name, len) in &objects {
            let (got, rep) = c.client.get(name, Shape::Cr, 65_536).await.unwrap();
            assert_eq!(&got, &data(*len, *len as u64), "{name}");
            assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
        }
        c.coord.take().unwrap().stop().await;
        for i in 0..c.nodes.len() {
            c.kill(i).await;
        }
    }
}

/// ChameleonEC-IO on the cluster: every node's chunk store is an emulated HDD, and readers
/// keep node 3's disk busy. Its heartbeats report the disk time users took, the coordinator
/// plans with what is left, and `chameleon-io` reads from node 3 in at most half as many
/// repairs as `chameleon`, which sees only the links (unshaped, so the same everywhere). Every object reads back byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chameleon_io_reads_around_a_busy_disk() {
    let mut used = HashMap::new();
    for scheduler in [Scheduler::Chameleon, Scheduler::ChameleonIo] {
        let dir = tempfile::tempdir().unwrap();
        let hdd = |_, c| kintsugi_node::NodeConfig { hdd_seek_ms: Some(0.2), hdd_bandwidth: Some(200e6), ..c };
        let mut c = cluster_nodes(cfg(dir.path(), "127.0.0.1:0"), dir.path(), 10, hdd).await;
        let objects: Vec<(String, usize)> = (0..30).map(|i| (format!("o{i}"), 200_000 + i * 999)).collect();
        for (name, len) in &objects {
            c.client.put(name, &data(*len, *len as u64), "rs:4,2".parse().unwrap(), 65_536).await.unwrap();
        }
        c.kill(0).await;
        c.wait_alive(9).await;
        let busy = 3u32;
        let readers = Straggler::start(&c.client, busy, 8).await.unwrap();
        // A few heartbeats (100 ms) with the readers on: the reports show the busy disk.
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let r = c.client.repair(Shape::Ecpipe, 16_384, 8, scheduler).await.unwrap();
        readers.stop().await;
        assert_eq!((r.failed, r.repaired), (0, r.lost), "{scheduler}: {r:?}");
        // Stripes that could read from node 3 (it holds one of their shards), and did.
        let could: Vec<_> = r.graphs.iter().filter(|g| g.vertices.iter().any(|v| v.node == busy)).collect();
        let read = could.iter().filter(|g| g.vertices.iter().any(|v| v.node == busy && v.local.is_some())).count();
        used.insert(scheduler, (read, r.graphs.len()));
        for (name, len) in &objects {
            let (got, _) = c.client.get(name, Shape::Cr, 16_384).await.unwrap();
            assert_eq!(got, data(*len, *len as u64), "{scheduler}: {name}");
        }
        c.coord.take().unwrap().stop().await;
        for i in 0..c.nodes.len() {
            c.kill(i).await;
        }
    }
    let (plain, io) = (used[&Scheduler::Chameleon], used[&Scheduler::ChameleonIo]);
    eprintln!("repairs reading from the busy disk: chameleon {plain:?}, chameleon-io {io:?}");
    assert!(plain.0 >= 4, "chameleon reads from node 3 in several repairs: {plain:?}");
    // Node 3 has 30% of a disk left (the authors' floor): it still takes a share once the
    // others are loaded, but at most half of what the network-only plan gave it.
    assert!(io.0 * 2 <= plain.0, "chameleon-io keeps reads off the busy disk: {io:?} against {plain:?}");
}
