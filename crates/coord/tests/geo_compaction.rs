//! Geo compaction on a real coordinator and real nodes on loopback: a Geo bucket with half
//! of its objects deleted comes back to within 10% of what its live objects need, reads
//! stay byte-exact while compaction runs, a node killed in the middle loses nothing, and
//! no chunk is left behind (chunks counted on the nodes against the metadata); small
//! objects' pieces in the small-size bucket are packed into fewer stripes the same way.

mod common;

use common::{cluster_with, data, Cluster};
use kintsugi_coord::CoordConfig;
use kintsugi_plan::Shape;
use kintsugi_proto::LayoutSpec;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const S0: u64 = 32 << 10;
const NODES: usize = 6;

async fn cluster(dir: &Path, rate: f64) -> Cluster {
    let conf = CoordConfig {
        placement_groups: 1,
        // The tests seal and compact when they choose to.
        seal_after_ms: 3_600_000,
        compact_interval_ms: 0,
        // Any dead chunk makes a stripe a candidate; the space check decides.
        compact_below: 1.0,
        compact_bytes_per_s: rate,
        gc_grace_ms: 300,
        gc_interval_ms: 100,
        ..common::cfg(dir, "127.0.0.1:0")
    };
    cluster_with(conf, dir, NODES, None).await
}

/// Objects of one, two and three chunks of s0 (q = 1: one size class), no remainders.
fn objects() -> Vec<(String, usize)> {
    (0..40).map(|i| (format!("geo-{i:02}"), (1 + i % 3) * S0 as usize)).collect()
}

async fn put_all(c: &Cluster, objs: &[(String, usize)]) {
    let code = "clay:4,2,5".parse().unwrap();
    for (i, (name, len)) in objs.iter().enumerate() {
        let bytes = data(*len, i as u64 + 1);
        let mut r = &bytes[..];
        let layout = LayoutSpec::Geo { s0: S0, q: 1, cap: S0 };
        c.client.put_with_layout(name, &mut r, *len as u64, code, 8 << 10, layout, &|_| {}).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// Chunks the metadata says the nodes hold for `live` objects (fillers hold none), and
/// their bytes: every distinct stripe of their layouts.
async fn expected(c: &Cluster, live: &[(usize, String, usize)]) -> (u64, u64) {
    let mut stripes = BTreeMap::new();
    for (_, name, _) in live {
        let l = c.client.stat(name).await.unwrap();
        for s in l.stripes {
            assert!(!s.open, "{name}: stripe {} still open", s.id);
            stripes.insert(s.id, s);
        }
    }
    let mut chunks = 0;
    let mut bytes = 0;
    for s in stripes.values() {
        let zeros = kintsugi_proto::crc::crc32c(&vec![0u8; s.chunk_len as usize]);
        let held = s.chunks.iter().filter(|c| c.crc32c != Some(zeros)).count() as u64;
        chunks += held;
        bytes += held * s.chunk_len;
    }
    (chunks, bytes)
}

fn stored(c: &Cluster) -> (u64, u64) {
    c.nodes.iter().flatten().map(|n| n.stat()).fold((0, 0), |(c, b), s| (c + s.chunks, b + s.bytes))
}

/// Waits until the nodes hold exactly what the metadata says (the collector runs every
/// 100 ms after a 300 ms grace).
async fn settles(c: &Cluster, want: (u64, u64)) -> (u64, u64) {
    for _ in 0..200 {
        if stored(c) == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stored(c)
}

async fn check(c: &Cluster, live: &[(usize, String, usize)]) {
    for (i, name, len) in live {
        let (got, _) = c.client.get(name, Shape::Cr, 4096).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(got == data(*len, *i as u64 + 1), "{name}: bytes differ");
    }
}

/// Deletes every other object; returns the live ones as (seed index, name, length).
async fn delete_half(c: &Cluster, objs: &[(String, usize)]) -> Vec<(usize, String, usize)> {
    let mut live = Vec::new();
    for (i, (name, len)) in objs.iter().enumerate() {
        if i % 2 == 1 {
            assert!(c.client.delete(name).await.unwrap());
        } else {
            live.push((i, name.clone(), *len));
        }
    }
    live
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_deleted_bucket_comes_back_to_its_live_bytes_with_reads_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 0.0).await;
    let objs = objects();
    put_all(&c, &objs).await;
    assert!(c.client.seal().await.unwrap() > 0);
    let live = delete_half(&c, &objs).await;
    // Sealed stripes keep deleted objects' chunks.
    let before = stored(&c);
    let live_bytes: u64 = live.iter().map(|x| x.2 as u64).sum();
    // What the live objects need: their bytes times Clay(4,2)'s 6/4.
    let need = live_bytes * 6 / 4;
    assert!(before.1 as f64 > 1.5 * need as f64, "deletes left {} bytes for {need} needed: nothing to compact", before.1);

    // Readers run through the whole compaction.
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (client, live, done, reads) = (c.client.clone(), live.clone(), done.clone(), reads.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                for (i, name, len) in &live {
                    let (got, _) = client.get(name, Shape::Cr, 4096).await.unwrap_or_else(|e| panic!("{name} during compaction: {e}"));
                    assert!(got == data(*len, *i as u64 + 1), "{name}: bytes differ during compaction");
                    reads.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };
    let r = c.client.compact().await.unwrap();
    done.store(true, Ordering::SeqCst);
    reader.await.unwrap();
    assert!(reads.load(Ordering::SeqCst) >= live.len(), "the readers read");
    assert!(r.written > 0 && r.freed > 0 && r.failed == 0, "{r:?}");
    assert_eq!(r.moved_bytes, r.moved as u64 * S0, "{r:?}");

    let want = expected(&c, &live).await;
    let after = settles(&c, want).await;
    assert_eq!(after, want, "the nodes hold exactly what the metadata places (no leak)");
    eprintln!("stored bytes: {} before compaction, {} after, {need} needed by the live objects ({r:?})", before.1, after.1);
    assert!(after.1 as f64 <= 1.1 * need as f64, "{} bytes stored for {need} needed ({} before compaction)", after.1, before.1);
    check(&c, &live).await;
    // A second pass finds nothing to gain.
    let again = c.client.compact().await.unwrap();
    assert_eq!((again.written, again.freed), (0, 0), "{again:?}");
    let st = c.client.status().await.unwrap();
    assert_eq!(st.compaction.passes, 2);
    assert_eq!(st.compaction.total.written, r.written);
    assert_eq!(st.compaction.total.dead_bytes, 0, "{:?}", st.compaction);
    // Deleting everything releases every stripe.
    for (_, name, _) in &live {
        assert!(c.client.delete(name).await.unwrap());
    }
    let r = c.client.compact().await.unwrap();
    assert!(r.freed > 0 && r.written == 0, "{r:?}");
    assert_eq!(settles(&c, (0, 0)).await, (0, 0));
    c.stop().await;
}

/// A node killed while compaction rewrites: the rewrite that needs it fails and the old
/// stripes stay; after the node is back, a pass finishes the job, with nothing lost or left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_compaction_loses_nothing_and_leaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Throttled so the pass is still running when the node dies: each new stripe's
    // chunks and parity at 400 KB/s take a few hundred milliseconds.
    let mut c = cluster(dir.path(), 400e3).await;
    let objs = objects();
    put_all(&c, &objs).await;
    c.client.seal().await.unwrap();
    let live = delete_half(&c, &objs).await;
    let mut places = Vec::new();
    for (_, name, _) in &live {
        places.push(c.client.stat(name).await.unwrap().stripes.iter().map(|s| s.id).collect::<Vec<_>>());
    }
    let pass = {
        let client = c.client.clone();
        tokio::spawn(async move { client.compact().await })
    };
    // Kill a node once some object has moved (its layout names a new stripe).
    let mut moved = false;
    for _ in 0..400 {
        for ((_, name, _), was) in live.iter().zip(&places) {
            let l = c.client.stat(name).await.unwrap();
            moved |= l.stripes.iter().map(|s| s.id).collect::<Vec<_>>() != *was;
        }
        if moved {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(moved, "no object moved");
    c.kill(3).await;
    let r = pass.await.unwrap().unwrap();
    assert!(r.written > 0 && r.failed > 0, "the node died mid-pass: {r:?}");
    c.restart(dir.path(), 3).await;
    c.wait_alive(NODES).await;
    check(&c, &live).await;
    // Unthrottled passes finish what is left.
    for _ in 0..5 {
        let r = c.client.compact().await.unwrap();
        if r.written == 0 && r.freed == 0 {
            break;
        }
    }
    let want = expected(&c, &live).await;
    assert_eq!(settles(&c, want).await, want, "the nodes hold exactly what the metadata places");
    let need = live.iter().map(|x| x.2 as u64).sum::<u64>() * 6 / 4;
    let mut seen = BTreeMap::new();
    for (_, name, _) in &live {
        for s in c.client.stat(name).await.unwrap().stripes {
            let zeros = kintsugi_proto::crc::crc32c(&vec![0u8; s.chunk_len as usize]);
            seen.insert(
                s.id,
                s.chunks
                    .iter()
                    .map(|c| if c.crc32c == Some(zeros) { "0".to_string() } else { c.node.to_string() })
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
    }
    assert!(want.1 as f64 <= 1.1 * need as f64, "{} bytes stored for {need} needed; stripes' nodes (0: filler): {seen:?}", want.1);
    check(&c, &live).await;
    c.stop().await;
}

/// Small objects are pieces of the small-size bucket's RS stripes: with half deleted, their
/// live pieces are packed into fewer stripes, and everything reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_objects_pieces_are_packed_into_fewer_stripes() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 0.0).await;
    // 1 to 14 KiB: each a piece of a 32 KiB slot.
    let objs: Vec<(String, usize)> = (0..60).map(|i| (format!("small-{i:02}"), 1000 + (i * 2749) % 13_000)).collect();
    put_all(&c, &objs).await;
    assert!(c.client.seal().await.unwrap() > 0);
    let small = c.client.stat(&objs[0].0).await.unwrap();
    assert!(small.stripes[0].small, "a piece of the small-size bucket");
    let live = delete_half(&c, &objs).await;
    let before = stored(&c);
    let r = c.client.compact().await.unwrap();
    assert!(r.written > 0 && r.failed == 0, "{r:?}");
    assert_eq!(r.moved_bytes, live.iter().map(|x| x.2 as u64).sum::<u64>(), "every live piece moved once: {r:?}");
    let want = expected(&c, &live).await;
    let after = settles(&c, want).await;
    assert_eq!(after, want, "the nodes hold exactly what the metadata places (no leak)");
    eprintln!("small objects: {} bytes stored before compaction, {} after ({r:?})", before.1, after.1);
    assert!((after.1 as f64) < 0.75 * before.1 as f64, "{} bytes after, {} before", after.1, before.1);
    check(&c, &live).await;
    let again = c.client.compact().await.unwrap();
    assert_eq!(again.written, 0, "{again:?}");
    c.stop().await;
}
