//! A real coordinator and real nodes on loopback: writes, reads, degraded reads with every
//! method, full-node repair, corrupted chunks, a node killed during a repair, and a
//! coordinator restarted during a repair. Every read is compared byte for byte.

use kintsugi_coord::{start, CoordConfig, TimeslotGating};
use kintsugi_node::{NodeConfig, NodeHandle};
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Shape, ALL_SHAPES};
use std::time::Duration;

mod common;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_degraded_read_and_repair() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 10, None).await;
    let objects = [("a", 300_001usize, "rs:4,2"), ("b", 1, "rs:4,2"), ("c", 200_000, "lrc:4,2,1"), ("empty", 0, "rs:4,2")];
    for (name, len, code) in objects {
        c.client.put(name, &data(len, len as u64), code.parse().unwrap(), 0).await.unwrap();
        let (got, rep) = c.client.get(name, Shape::Ecpipe, 4096).await.unwrap();
        assert_eq!(got, data(len, len as u64), "{name}");
        assert!(rep.degraded.is_empty());
    }
    assert_eq!(c.client.list().await.unwrap().len(), 4);
    // A put of an existing name replaces it (the later commit wins).
    c.client.put("a", b"again", "rs:4,2".parse().unwrap(), 0).await.unwrap();
    assert_eq!(c.client.get("a", Shape::Cr, 4096).await.unwrap().0, b"again");
    c.client.put("a", &data(300_001, 300_001), "rs:4,2".parse().unwrap(), 0).await.unwrap();
    assert_eq!(c.client.get("nope", Shape::Cr, 4096).await.unwrap_err().kind(), kintsugi_client::ErrorKind::NotFound);

    // The node holding 'a''s first data chunk crashes: every method serves degraded reads,
    // byte for byte.
    let victim = c.client.stat("a").await.unwrap().stripes[0].chunks[0].node;
    c.kill(victim as usize).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    for method in ALL_SHAPES {
        for (name, len, _) in objects {
            let t = std::time::Instant::now();
            let (got, rep) = c.client.get(name, method, 1000).await.unwrap_or_else(|e| panic!("{name} via {method}: {e}"));
            if t.elapsed().as_secs_f64() > 1.0 {
                eprintln!("SLOW {name} via {method}: {:.3}s", t.elapsed().as_secs_f64());
            }
            assert_eq!(got, data(len, len as u64), "{name} via {method}");
            if name == "a" {
                assert!(!rep.degraded.is_empty(), "node {victim} held a data chunk of 'a'");
            }
        }
    }
    // Full-node repair (RepairBoost's plan) moves every lost chunk to a live node.
    let lost = c.client.status().await.unwrap().lost_chunks;
    assert!(lost > 0);
    let r = c.client.repair(Shape::Ppr, 8192, 4, Scheduler::Repairboost).await.unwrap();
    assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
    let s = c.client.status().await.unwrap();
    assert_eq!((s.lost_chunks, s.pending_repairs), (0, 0));
    for (name, len, _) in objects {
        let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
        assert_eq!(got, data(len, len as u64));
        assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
        assert!(c.client.stat(name).await.unwrap().stripes.iter().all(|s| s.chunks.iter().all(|l| l.node != victim)));
    }

    // A corrupted chunk is detected by its checksum, never served, and repaired.
    let layout = c.client.stat("a").await.unwrap();
    let loc = layout.stripes[0].chunks[1].clone();
    let path = dir.path().join(format!("node{}", loc.node)).join(format!("{}.chunk", loc.chunk));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x80;
    std::fs::write(&path, &bytes).unwrap();
    // A range read takes only its bytes from the chunk, verified block by block on the node:
    // a range in an intact block of it is served as is; one in the corrupt block is refused
    // there and rebuilt by a degraded read.
    let whole = data(300_001, 300_001);
    let chunk_len = layout.stripes[0].chunk_len;
    for (off, n, degraded) in [(chunk_len + 70_000, 1000, false), (chunk_len + 5, 100, true)] {
        let mut out = Vec::new();
        let rep = c.client.get_range_into("a", off, n, &mut out, Shape::Cr, 4096, &|_| {}).await.unwrap();
        assert!(out == whole[off as usize..(off + n) as usize], "range {off}+{n}");
        assert_eq!(!rep.degraded.is_empty(), degraded, "range {off}+{n}: {rep:?}");
    }
    let (got, rep) = c.client.get("a", Shape::Ecpipe, 4096).await.unwrap();
    assert_eq!(got, data(300_001, 300_001));
    assert!(rep.degraded.iter().any(|&(s, i, _)| (s, i) == (0, 1)), "the corrupt chunk was rebuilt, not served: {rep:?}");
    assert_eq!(c.client.status().await.unwrap().lost_chunks, 1);
    let r = c.client.repair(Shape::Cr, 4096, 2, Scheduler::Index).await.unwrap();
    assert_eq!((r.repaired, r.failed), (1, 0));
    let (got, rep) = c.client.get("a", Shape::Cr, 4096).await.unwrap();
    assert_eq!(got, data(300_001, 300_001));
    assert!(rep.degraded.is_empty());

    // `fail` stops nodes through the coordinator; two at once, so some stripes lose two
    // chunks, which must be rebuilt on two different nodes.
    let victims: Vec<u32> =
        c.client.status().await.unwrap().nodes.iter().filter(|n| n.alive && n.chunks > 0).take(2).map(|n| n.id).collect();
    for &victim in &victims {
        c.client.fail(victim).await.unwrap();
        if let Some(mut n) = c.nodes[victim as usize].take() {
            tokio::time::timeout(Duration::from_secs(5), n.stopped()).await.expect("node stops after `fail`");
        }
    }
    assert!(c.client.status().await.unwrap().lost_chunks > 0);
    let r = c.client.repair(Shape::EcpipeCyclic, 4096, 4, Scheduler::Mppr).await.unwrap();
    assert_eq!(r.failed, 0, "{r:?}");
    for (name, len, _) in objects {
        assert_eq!(c.client.get(name, Shape::Cr, 4096).await.unwrap().0, data(len, len as u64));
        for st in c.client.stat(name).await.unwrap().stripes {
            let mut nodes: Vec<u32> = st.chunks.iter().map(|l| l.node).collect();
            nodes.sort_unstable();
            nodes.dedup();
            assert_eq!(nodes.len(), st.chunks.len(), "{name}: a stripe's chunks sit on distinct nodes after repair");
        }
    }
    c.coord.take().unwrap().stop().await;
    for i in 0..c.nodes.len() {
        c.kill(i).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_killed_during_repair_and_coordinator_restart() {
    let t0 = std::time::Instant::now();
    let step = |m: &str| eprintln!("[{:.2}s] {m}", t0.elapsed().as_secs_f64());
    let dir = tempfile::tempdir().unwrap();
    // Slow links (1 MB/s) and 256 KiB chunks so that repairs are still running when things fail.
    let mut c = cluster(dir.path(), 10, Some(1e6)).await;
    let objects: Vec<(String, Vec<u8>)> = (0..4).map(|i| (format!("obj{i}"), data(1_500_000 + i, i as u64 + 7))).collect();
    for (name, d) in &objects {
        c.client.put(name, d, "rs:4,2".parse().unwrap(), 256 << 10).await.unwrap();
    }
    c.kill(0).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let lost_before = c.client.status().await.unwrap().lost_chunks;
    step(&format!("lost before first repair: {lost_before}"));
    assert!(lost_before > 0);

    // Kill a helper while the repair runs: affected chunks are re-planned with other helpers.
    let client = c.client.clone();
    let repair = tokio::spawn(async move { client.repair(Shape::Ecpipe, 4096, 8, Scheduler::Greedy).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(c.client.status().await.unwrap().pending_repairs > 0, "node 1 is killed while repairs are running");
    c.kill(1).await;
    let r = repair.await.unwrap().unwrap();
    step("first repair done");
    assert_eq!(r.failed, 0, "{r:?}");
    // Node 1's own chunks are lost now; the next repair takes them.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let r2 = c.client.repair(Shape::Cr, 4096, 8, Scheduler::Lru).await.unwrap();
    step("second repair done");
    assert_eq!(r2.failed, 0, "{r2:?}");
    assert_eq!(c.client.status().await.unwrap().lost_chunks, 0);
    for (name, d) in &objects {
        assert_eq!(&c.client.get(name, Shape::Cr, 4096).await.unwrap().0, d);
    }

    // Crash the coordinator in the middle of a repair; a new one on the same store resumes.
    c.kill(2).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    step(&format!("node 2 down, lost {}", c.client.status().await.unwrap().lost_chunks));
    assert!(c.client.status().await.unwrap().lost_chunks > 0);
    let client = c.client.clone();
    let repair = tokio::spawn(async move { client.repair(Shape::Ppr, 4096, 1, Scheduler::Random).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = c.client.status().await.unwrap();
    step(&format!("status before stop: lost {} pending {}", st.lost_chunks, st.pending_repairs));
    assert!(st.pending_repairs > 0, "the coordinator is stopped while repairs are pending");
    let addr = c.coord_addr.clone();
    c.coord.take().unwrap().stop().await;
    step("coordinator stopped");
    let _ = repair.await; // the client sees the coordinator go away
    step("client saw it");
    let coord = start(cfg(dir.path(), &addr)).await.unwrap();
    c.coord = Some(coord);
    let mut done = false;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(s) = c.client.status().await {
            if s.pending_repairs == 0 && s.lost_chunks == 0 {
                done = true;
                break;
            }
        }
    }
    step("resumed repairs done");
    assert!(done, "the restarted coordinator finished the pending repairs: {:?}", c.client.status().await);
    for (name, d) in &objects {
        assert_eq!(&c.client.get(name, Shape::Cr, 4096).await.unwrap().0, d);
    }
    c.coord.take().unwrap().stop().await;
    for i in 0..c.nodes.len() {
        c.kill(i).await;
    }
}

/// Bandwidth monitoring: nodes report their foreground and repair traffic with every
/// heartbeat, and `status` shows each node's residual bandwidth by ChameleonEC's rule.
/// Clients read an object over 20 MB/s node uplinks; the nodes serving it must report
/// foreground upload near what they sent, and a residual of max(0.3 x 20, 20 - fg) MB/s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_foreground_traffic_and_residual_bandwidth() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 20e6;
    let c = cluster(dir.path(), 4, Some(cap)).await;
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 31 + 7) as u8).collect();
    c.client.put("fg", &data, "rs:2,1".parse().unwrap(), 1 << 20).await.unwrap();
    let layout = c.client.stat("fg").await.unwrap();
    let servers: Vec<u32> = layout.stripes.iter().flat_map(|s| s.chunks.iter().take(2).map(|ch| ch.node)).collect();
    // Readers keep the serving nodes' uplinks busy while status is sampled.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (client, stop, want) = (c.client.clone(), stop.clone(), data.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (got, _) = client.get("fg", Shape::Cr, 32 << 10).await.unwrap();
                assert!(got == want, "a read returned other bytes");
            }
        }));
    }
    let mut best_fg = 0.0f64;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let st = c.client.status().await.unwrap();
        for n in st.nodes.iter().filter(|n| servers.contains(&n.id)) {
            let Some(l) = &n.link else { continue };
            assert_eq!((l.capacity_up, l.capacity_down), (cap, cap));
            let want = (cap - l.fg_up).max(0.3 * cap);
            let got = n.residual_up.expect("capacity known, residual shown");
            assert!((got - want).abs() < 1.0, "residual {got} for foreground {} on a {cap} link", l.fg_up);
            assert!(l.fg_up <= cap * 1.3, "node {} reports {} B/s up on a {cap} B/s link", n.id, l.fg_up);
            best_fg = best_fg.max(l.fg_up);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    assert!(best_fg > 0.3 * cap, "serving nodes never reported foreground upload near their link rate: {best_fg}");
}

/// Nodes told no capacity, on loopback (whose interface reports no speed), do not measure
/// one: one host's processes share no link, and each would measure its own peak. However
/// much readers make them carry, their capacity stays unknown (0, from nowhere).
/// Measuring itself is `monitor`'s unit test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_links_are_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 4, None).await;
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 17 + 3) as u8).collect();
    c.client.put("m", &data, "rs:2,1".parse().unwrap(), 1 << 20).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let mut reports = 0;
    while std::time::Instant::now() < deadline {
        let (got, _) = c.client.get("m", Shape::Cr, 64 << 10).await.unwrap();
        assert!(got == data, "a read returned other bytes");
        for n in c.client.status().await.unwrap().nodes {
            let Some(l) = &n.link else { continue };
            reports += 1;
            assert_eq!((l.capacity_up, l.capacity_down, l.capacity_from.as_str()), (0.0, 0.0, ""), "node {}: {l:?}", n.id);
        }
    }
    assert!(reports > 0, "no node reported its link");
}

/// RepairBoost's timeslots on the nodes: with `gate_timeslots = all`, a node holds each
/// transfer until its earlier slots' transfers are done (at both ends), which makes some
/// transfers wait; with `none`, none waits. Every method completes (no deadlock between gated
/// pipelines and store-and-forward trees) and every object reads back byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repairboost_timeslots_gate_transfers_on_the_nodes() {
    for gate in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let gating = if gate { TimeslotGating::All } else { TimeslotGating::None };
        let conf = CoordConfig { gate_timeslots: gating, ..cfg(dir.path(), "127.0.0.1:0") };
        let mut c = cluster_with(conf, dir.path(), 10, Some(40e6)).await;
        let objects: Vec<(String, usize)> = (0..6).map(|i| (format!("o{i}"), 1_000_003 + i * 7)).collect();
        for (name, len) in &objects {
            c.client.put(name, &data(*len, *len as u64), "rs:4,2".parse().unwrap(), 131_072).await.unwrap();
        }
        c.kill(0).await;
        c.wait_alive(9).await;
        let lost = c.client.status().await.unwrap().lost_chunks;
        assert!(lost >= 6, "node 0 held chunks of several stripes: {lost}");
        let r = c.client.repair(Shape::Ecpipe, 16_384, 32, Scheduler::Repairboost).await.unwrap();
        assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
        let waits: u64 = c.nodes.iter().flatten().map(|n| n.stat().timeslot_waits).sum();
        // The batch's reservation is claimed or released everywhere: nothing holds a gate.
        let reserved: u64 = c.nodes.iter().flatten().map(|n| n.stat().timeslot_reservations).sum();
        assert_eq!(reserved, 0, "reservations left on the nodes after the repair");
        if gate {
            assert!(waits > 0, "{lost} repairs in one go and no transfer waited for its timeslot");
        } else {
            assert_eq!(waits, 0, "nothing is gated with gate_timeslots = none");
        }
        for (name, len) in &objects {
            let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
            assert_eq!(got, data(*len, *len as u64), "{name}");
            assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
        }
        // Another node fails: PPR's store-and-forward trees and CR's stars, gated.
        for (i, method) in [(1, Shape::Ppr), (2, Shape::Cr)] {
            c.kill(i).await;
            c.wait_alive(9 - i).await;
            let lost = c.client.status().await.unwrap().lost_chunks;
            let r = c.client.repair(method, 16_384, 32, Scheduler::Repairboost).await.unwrap();
            assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{method}: {r:?}");
            for (name, len) in &objects {
                assert_eq!(c.client.get(name, Shape::Cr, 4096).await.unwrap().0, data(*len, *len as u64), "{name} after {method}");
            }
        }
        c.coord.take().unwrap().stop().await;
        for i in 0..c.nodes.len() {
            c.kill(i).await;
        }
    }
}

/// RepairBoost's adaptive sub-processes: node 4's links run at a tenth of the rate it
/// reports, which no monitoring of foreground traffic shows. Repaired in rounds of 4
/// chunks, each planned with the rates measured in the rounds before, node 4 carries a
/// smaller share of the repair traffic than in one round; every object reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subprocesses_give_a_slow_node_less_of_the_next_rounds() {
    let mut shares = Vec::new();
    for round in [0usize, 4] {
        let dir = tempfile::tempdir().unwrap();
        let conf = CoordConfig { repair_subprocess_chunks: round, ..cfg(dir.path(), "127.0.0.1:0") };
        let mut c = cluster_nodes(conf, dir.path(), 10, |i, n| {
            let rate = if i == 4 { 4e6 } else { 40e6 };
            NodeConfig { uplink: Some(rate), downlink: Some(rate), link_capacity: Some(40e6), ..n }
        })
        .await;
        let objects: Vec<(String, usize)> = (0..12).map(|i| (format!("o{i}"), 1_000_000 + i * 13)).collect();
        for (name, len) in &objects {
            c.client.put(name, &data(*len, *len as u64 + 3), "rs:4,2".parse().unwrap(), 131_072).await.unwrap();
        }
        c.kill(0).await;
        c.wait_alive(9).await;
        let lost = c.client.status().await.unwrap().lost_chunks;
        assert!(lost > 8, "node 0 held chunks of many stripes: {lost}");
        let r = c.client.repair(Shape::Cr, 16_384, 32, Scheduler::Repairboost).await.unwrap();
        assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{r:?}");
        assert_eq!(r.subprocesses, if round == 0 { 0 } else { lost.div_ceil(round) }, "{r:?}");
        let traffic = |n: &NodeHandle| n.stat().repair_sent + n.stat().repair_received;
        let total: u64 = c.nodes.iter().flatten().map(traffic).sum();
        shares.push(traffic(c.nodes[4].as_ref().unwrap()) as f64 / total as f64);
        for (name, len) in &objects {
            assert_eq!(c.client.get(name, Shape::Cr, 4096).await.unwrap().0, data(*len, *len as u64 + 3), "{name}");
        }
        c.coord.take().unwrap().stop().await;
        for i in 0..c.nodes.len() {
            c.kill(i).await;
        }
    }
    eprintln!("node 4's share of the repair traffic: one round {:.3}, rounds of 4 {:.3}", shares[0], shares[1]);
    assert!(shares[1] < shares[0] * 0.8, "the slow node's share did not shrink: {shares:?}");
}
