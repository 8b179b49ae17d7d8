//! Reads, repairs and puts at the code's limit, on a real coordinator and real nodes on
//! loopback: a stripe that lost as many chunks as its code tolerates, to dead nodes and to
//! corruption mixed, reads back byte for byte with every method; one more lost chunk fails
//! with an error that says which chunks are bad and why. A full-node repair that meets a
//! corrupt helper in every stripe rebuilds everything. A put whose node dies mid-put
//! finishes on another node.

use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Shape, ALL_SHAPES};
use kintsugi_proto::ChunkLoc;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::*;

/// Flips one byte of a chunk file, as a failing disk would.
fn corrupt(dir: &Path, loc: &ChunkLoc) {
    let path = dir.join(format!("node{}", loc.node)).join(format!("{}.chunk", loc.chunk));
    let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes[777] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
}

/// Lost chunks by index: (on dead nodes, corrupt).
type Pattern = (Vec<usize>, Vec<usize>);

/// A deterministic stream of numbers for picking fault patterns.
struct Pick(u64);
impl Pick {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below as u64) as usize
    }
    /// `t` distinct indexes out of `n`.
    fn subset(&mut self, n: usize, t: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..t {
            let j = i + self.next(n - i);
            all.swap(i, j);
        }
        let mut s = all[..t].to_vec();
        s.sort_unstable();
        s
    }
}

/// Puts `name`, then loses `dead` chunks to their nodes' crash and `rotten` ones to a byte
/// flipped on disk; returns the killed nodes (to be restarted).
async fn put_and_break(
    c: &mut Cluster,
    dir: &Path,
    name: &str,
    data: &[u8],
    code: CodeSpec,
    dead: &[usize],
    rotten: &[usize],
) -> Vec<usize> {
    c.client.put(name, data, code, 0).await.unwrap_or_else(|e| panic!("put {name}: {e}"));
    let l = c.client.stat(name).await.unwrap();
    assert_eq!(l.stripes.len(), 1, "one stripe per object here");
    let chunks = &l.stripes[0].chunks;
    for &i in rotten {
        corrupt(dir, &chunks[i]);
    }
    let mut killed = Vec::new();
    for &i in dead {
        let n = chunks[i].node as usize;
        c.kill(n).await;
        killed.push(n);
    }
    killed
}

async fn bring_back(c: &mut Cluster, dir: &Path, killed: &[usize], nodes: usize) {
    for &n in killed {
        c.restart(dir, n).await;
    }
    c.wait_alive(nodes).await;
    // A restarted node listens on a new port: wait until the coordinator has heard it.
    for _ in 0..100 {
        let s = c.client.status().await.unwrap();
        let known = |n: usize| {
            let addr = c.nodes[n].as_ref().expect("restarted").addr.to_string();
            s.nodes.iter().any(|x| x.id == n as u32 && x.alive && x.addr == addr)
        };
        if killed.iter().all(|&n| known(n)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("nodes {killed:?} never reported in again");
}

/// For each code: sampled patterns of exactly `tolerance` lost chunks (dead and corrupt in
/// every proportion), each read with every method (and a range read); then one pattern past
/// the tolerance, whose read must fail saying why, and which `status` lists by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_lost_chunks_the_code_tolerates_read_back_and_one_more_fails_clearly() {
    // (code, patterns sampled, a pattern the code cannot decode: dead, corrupt).
    let cases: [(&str, usize, Pattern); 4] = [
        ("rs:6,3", 4, (vec![0, 4, 8], vec![2])),
        ("rs:10,4", 3, (vec![1, 11], vec![3, 9, 12])),
        // A local group's three data chunks and its XOR: the two global parities cannot
        // solve three unknowns.
        ("lrc:6,2,2", 4, (vec![0, 6], vec![1, 2])),
        ("clay:6,3,8", 3, (vec![5], vec![0, 3, 7])),
    ];
    for (spec, samples, past) in cases {
        let dir = tempfile::tempdir().unwrap();
        let code: CodeSpec = spec.parse().unwrap();
        let built = code.build().unwrap();
        let (n, k, t) = (built.n(), built.k(), built.tolerance());
        let mut c = cluster(dir.path(), n, None).await;
        let mut pick = Pick(0x9e37_79b9_7f4a_7c15 ^ n as u64);
        for sample in 0..samples {
            let lost = pick.subset(n, t);
            // Sample j loses j % (t + 1) chunks to dead nodes, the rest to corruption.
            let ndead = sample % (t + 1);
            let (dead, rotten) = lost.split_at(ndead);
            for method in ALL_SHAPES {
                let name = format!("{spec}-{sample}-{method}");
                // An odd size inside one stripe: the last data chunk is partly padding.
                let len = k * (64 << 10) - 1000 - 7 * sample;
                let bytes = data(len, (sample * 31 + method as usize) as u64);
                let killed = put_and_break(&mut c, dir.path(), &name, &bytes, code, dead, rotten).await;
                let what = format!("{spec}: chunks {dead:?} on dead nodes, {rotten:?} corrupt, read via {method}");
                let (got, _) = c.client.get(&name, method, 4096).await.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(got == bytes, "{what}: bytes differ");
                if method == Shape::Cr {
                    let mut part = Vec::new();
                    let (off, want) = (len / 3 + 11, len / 2);
                    c.client
                        .get_range_into(&name, off as u64, want as u64, &mut part, method, 4096, &|_| {})
                        .await
                        .unwrap_or_else(|e| panic!("{what}, a range: {e}"));
                    assert!(part == bytes[off..off + want], "{what}: range bytes differ");
                }
                bring_back(&mut c, dir.path(), &killed, n).await;
            }
        }
        // One more than the code tolerates: a clear error, naming the bad chunks.
        let (dead, rotten) = past;
        let name = format!("{spec}-past");
        let bytes = data(k * (64 << 10) - 333, 99);
        let killed = put_and_break(&mut c, dir.path(), &name, &bytes, code, &dead, &rotten).await;
        let err = c.client.get(&name, Shape::Cr, 4096).await.expect_err("past the code's limit");
        assert!(err.message().starts_with(&format!("object '{name}' is unreadable:")), "{spec}: {err}");
        assert_eq!(err.kind(), kintsugi_client::ErrorKind::Unavailable, "{spec}: {err}");
        assert!(err.message().contains("corrupt chunk"), "{spec}: the error names what was found corrupt: {err}");
        // `status` lists the stripe and its object once the dead nodes count as down.
        let mut listed = false;
        for _ in 0..40 {
            let s = c.client.status().await.unwrap();
            if s.unrepairable.iter().any(|u| u.objects.contains(&name)) {
                assert!(s.bad_chunks >= 1 && s.chunks_on_down_nodes >= dead.len(), "{s:?}");
                listed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(listed, "{spec}: status never listed '{name}' as unrepairable");
        bring_back(&mut c, dir.path(), &killed, n).await;
        c.stop().await;
    }
}

/// A node dies, and every stripe that had a chunk on it also has a corrupt chunk elsewhere,
/// not known to anyone: the repair meets it, re-plans without it, rebuilds it too, and
/// `status` shows nothing lost or bad afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_node_repair_rebuilds_around_a_corrupt_helper_in_every_stripe() {
    for (method, scheduler) in
        [(Shape::Cr, Scheduler::Repairboost), (Shape::Ppr, Scheduler::Random), (Shape::Ecpipe, Scheduler::Repairboost)]
    {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cluster(dir.path(), 11, None).await;
        let code: CodeSpec = "rs:6,3".parse().unwrap();
        let objects: Vec<(String, Vec<u8>)> = (0..10).map(|i| (format!("o{i}"), data(300_000 + 4099 * i, i as u64))).collect();
        for (name, bytes) in &objects {
            c.client.put(name, bytes, code, 0).await.unwrap();
        }
        let victim = 4u32;
        let mut pick = Pick(77);
        let mut stripes = 0;
        for (name, _) in &objects {
            for s in c.client.stat(name).await.unwrap().stripes {
                if let Some(gone) = s.chunks.iter().position(|l| l.node == victim) {
                    // A helper the repair will likely want: another data chunk of the stripe
                    // (whole-object reads then find the ones no repair graph touched; a
                    // corrupt parity chunk nothing reads waits for the scrub).
                    let mut other = pick.next(6);
                    if other == gone {
                        other = (other + 1) % 6;
                    }
                    corrupt(dir.path(), &s.chunks[other]);
                    stripes += 1;
                }
            }
        }
        assert!(stripes > 0);
        c.client.fail(victim).await.unwrap();
        c.kill(victim as usize).await;
        let lost = c.client.status().await.unwrap().lost_chunks;
        assert_eq!(lost, stripes);
        let r = c.client.repair(method, 8192, 4, scheduler).await.unwrap();
        assert_eq!(r.failed, 0, "{method} ({scheduler}): {r:?}");
        // Helpers found corrupt on the way were rebuilt too.
        assert!(r.repaired > lost, "{method}: no repair met a corrupt helper: {r:?}");
        let s = c.client.status().await.unwrap();
        assert_eq!((s.lost_chunks, s.bad_chunks, s.chunks_on_down_nodes), (0, 0, 0), "{method}: {s:?} after {r:?}");
        assert!(s.unrepairable.is_empty());
        // Corrupt chunks no repair graph touched are found by reads (byte-exact all the
        // same), rebuilt by the next repair, and then every read is direct.
        for (name, bytes) in &objects {
            let (got, _) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
            assert!(got == *bytes, "{name} after {method}");
        }
        let again = c.client.repair(method, 8192, 4, scheduler).await.unwrap();
        assert_eq!(r.repaired + again.repaired, lost + stripes, "{method}: every corrupt chunk rebuilt once: {r:?} {again:?}");
        let s = c.client.status().await.unwrap();
        assert_eq!((s.lost_chunks, s.bad_chunks), (0, 0), "{s:?}");
        for (name, bytes) in &objects {
            let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
            assert!(got == *bytes, "{name} after {method}, twice");
            assert!(rep.degraded.is_empty(), "{name} reads directly after the second repair ({method})");
        }
        c.stop().await;
    }
}

/// Stops `node` (as a crash would) once `now` is set.
fn stop_when(node: kintsugi_node::NodeHandle, now: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !now.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        node.stop().await;
    })
}

/// A 300 MB put loses a node halfway: its chunks go to another node, the put succeeds and
/// reads back. With no spare node (exactly k + m), the same put fails saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_survives_a_node_killed_halfway() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 10, None).await;
    let code: CodeSpec = "rs:6,3".parse().unwrap();
    let len = 300_000_000;
    let bytes = data(len, 5);
    let victim = 3usize;
    let half = Arc::new(AtomicBool::new(false));
    let killer = stop_when(c.nodes[victim].take().expect("running"), half.clone());
    let progress = |done: u64| {
        if done >= len as u64 / 2 {
            half.store(true, Ordering::Relaxed);
        }
    };
    let mut reader = &bytes[..];
    let l = c.client.put_from("big", &mut reader, len as u64, code, 4 << 20, &progress).await.expect("the put finishes elsewhere");
    killer.await.unwrap();
    // The last stripes were written after the kill: none of their chunks is on the victim.
    let last = l.stripes.last().unwrap();
    assert!(last.chunks.iter().all(|ch| ch.node != victim as u32), "{:?}", last.chunks);
    let (got, _) = c.client.get("big", Shape::Cr, 1 << 20).await.unwrap();
    assert!(got == bytes, "the object reads back byte for byte");
    drop(got);
    c.stop().await;

    // Exactly k + m nodes: nowhere to go.
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 9, None).await;
    let half = Arc::new(AtomicBool::new(false));
    let killer = stop_when(c.nodes[victim].take().expect("running"), half.clone());
    let small = &bytes[..40_000_000];
    let progress = |done: u64| {
        if done >= small.len() as u64 / 2 {
            half.store(true, Ordering::Relaxed);
        }
    };
    let mut reader = small;
    let err = c.client.put_from("nowhere", &mut reader, small.len() as u64, code, 1 << 20, &progress).await.expect_err("no spare node");
    killer.await.unwrap();
    assert!(err.message().contains("no other live node outside the stripe"), "{err}");
    c.stop().await;
}

/// Geometric Partitioning at the limit: a sealed Geo object (Clay(4,2,5) chunks in bucket
/// files, the remainder in the small-size bucket) whose home node is down, with one more
/// chunk of each of its stripes corrupt in a bucket file: read whole (pipelined, through
/// the placement group's index) and by ranges, byte for byte, with every method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_geo_object_reads_with_its_node_down_and_a_corrupt_helper_in_every_stripe() {
    let dir = tempfile::tempdir().unwrap();
    let conf = kintsugi_coord::CoordConfig { placement_groups: 1, seal_after_ms: 3_600_000, ..cfg(dir.path(), "127.0.0.1:0") };
    let mut c = cluster_with(conf, dir.path(), 8, None).await;
    let code: CodeSpec = "clay:4,2,5".parse().unwrap();
    let geo = kintsugi_proto::LayoutSpec::Geo { s0: 16 << 10, q: 2, cap: 0 };
    let len = 301_000;
    let bytes = data(len, 11);
    let mut r = &bytes[..];
    c.client.put_with_layout("g", &mut r, len as u64, code, 0, geo, &|_| {}).await.unwrap();
    assert!(c.client.seal().await.unwrap() > 0);
    let l = c.client.stat("g").await.unwrap();
    let home = l.stripes[l.extents[0].stripe].chunks[l.extents[0].index].node;
    let mut damaged = 0;
    for e in &l.extents {
        let s = &l.stripes[e.stripe];
        assert_eq!(s.chunks[e.index].node, home, "a Geo object's chunks share one node");
        // A parity chunk (a data slot may be a filler, zeros stored nowhere).
        let last = s.chunks.len() - 1;
        let other = &s.chunks[if e.index == last { last - 1 } else { last }];
        let slot = other.bucket.expect("sealed Geo chunks are in buckets");
        let path = dir.path().join(format!("node{}", other.node)).join(kintsugi_node::bucket::file_name(&slot));
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let at = slot.slot * slot.class + 100;
        let mut b = [0u8; 1];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, at).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[b[0] ^ 0x21], at).unwrap();
        damaged += 1;
    }
    assert!(damaged >= 2, "{:?}", l.extents);
    c.kill(home as usize).await;
    for method in ALL_SHAPES {
        let (got, rep) = c.client.get("g", method, 4096).await.unwrap_or_else(|e| panic!("g via {method}: {e}"));
        assert!(got == bytes, "g via {method}");
        assert!(!rep.degraded.is_empty());
        let (off, want) = (12_345usize, 150_001usize);
        let mut part = Vec::new();
        c.client
            .get_range_into("g", off as u64, want as u64, &mut part, method, 4096, &|_| {})
            .await
            .unwrap_or_else(|e| panic!("a range of g via {method}: {e}"));
        assert!(part == bytes[off..off + want], "a range of g via {method}");
    }
    c.stop().await;
}
