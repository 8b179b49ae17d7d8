//! The per-object index (Geometric Partitioning, section 5.1) on a real coordinator and
//! real nodes on loopback: records kept by a majority of each placement group's holders
//! name exactly the chunks the coordinator's metadata does (after puts, overwrites,
//! deletes, sealing and a repair); reads go on with the coordinator stopped; a change is
//! acknowledged only once a majority of holders keep it, so a holder that missed it never
//! makes a reader see an older version.

mod common;

use common::{cfg, cluster_with, data, Cluster};
use kintsugi_client::index_reads::IndexAnswer;
use kintsugi_client::Client;
use kintsugi_coord::object_index::holders;
use kintsugi_coord::placement::geo_layout::placement_group;
use kintsugi_coord::CoordConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{NodeId, Shape};
use kintsugi_proto::object_index::IndexRecord;
use kintsugi_proto::{LayoutSpec, NodeRequest, NodeResponse, ObjectLayout};
use std::path::Path;
use std::time::Duration;

const S0: u64 = 16 << 10;
const GROUPS: u32 = 4;

/// A cluster of `n` nodes whose coordinator publishes index records again every `sync_ms`.
async fn cluster(dir: &Path, n: usize, sync_ms: u64) -> Cluster {
    let conf = CoordConfig {
        io_timeout_ms: 2000,
        placement_groups: GROUPS,
        index_copies: 3,
        index_sync_ms: sync_ms,
        seal_after_ms: 3_600_000,
        ..cfg(dir, "127.0.0.1:0")
    };
    cluster_with(conf, dir, n, None).await
}

fn the_holders(name: &str, n: usize) -> Vec<NodeId> {
    let ids: Vec<NodeId> = (0..n as NodeId).collect();
    holders(placement_group(name, GROUPS), &ids, 3)
}

async fn put(c: &Client, name: &str, len: usize, seed: u64) -> Result<ObjectLayout, String> {
    let bytes = data(len, seed);
    let mut r = &bytes[..];
    let code = "clay:4,2,5".parse().unwrap();
    Ok(c.put_with_layout(name, &mut r, len as u64, code, 0, LayoutSpec::Geo { s0: S0, q: 2, cap: 0 }, &|_| {}).await?)
}

/// Each holder's record of `name`, asked directly (None: no answer).
async fn records(c: &Client, name: &str, n: usize) -> Vec<Option<(u64, Option<Vec<u8>>)>> {
    let map = c.cluster_map(false).await.unwrap();
    let pg = placement_group(name, GROUPS);
    let mut out = Vec::new();
    for h in the_holders(name, n) {
        let req = NodeRequest::IndexGet { pg, name: name.to_string() };
        out.push(match kintsugi_proto::rpc::request(&map.nodes[&h], &req, Duration::from_millis(500)).await {
            Ok(NodeResponse::IndexEntry { seq, record }) => Some((seq, record)),
            _ => None,
        });
    }
    out
}

/// The index agrees with the coordinator: the highest record a majority of `name`'s holders
/// keep names the same chunks, nodes, lengths and checksums as the coordinator's layout.
async fn check_record(c: &Client, name: &str, n: usize) {
    let truth = c.stat(name).await.unwrap();
    let rs = records(c, name, n).await;
    let mut best: Option<(u64, Option<Vec<u8>>)> = None;
    for r in rs.iter().flatten() {
        if best.as_ref().is_none_or(|b| r.0 > b.0) {
            best = Some(r.clone());
        }
    }
    let (_, bytes) = best.unwrap_or_else(|| panic!("{name}: no holder answered"));
    let rec = IndexRecord::decode(&bytes.unwrap_or_else(|| panic!("{name}: a tombstone"))).unwrap();
    assert_eq!((rec.version, rec.size), (truth.version, truth.size), "{name}");
    let l = rec.to_layout(name, placement_group(name, GROUPS), &|_| Some(String::new()));
    assert_eq!(l.extents.len(), truth.extents.len(), "{name}");
    for (g, e) in l.extents.iter().zip(&truth.extents) {
        let (gs, ts) = (&l.stripes[g.stripe], &truth.stripes[e.stripe]);
        let (gl, tl) = (&gs.chunks[g.index], &ts.chunks[e.index]);
        assert_eq!((gs.id, g.index, g.offset, g.len, g.crc32c), (ts.id, e.index, e.offset, e.len, e.crc32c), "{name}");
        assert_eq!((gl.node, gl.bucket), (tl.node, tl.bucket), "{name}: {}", tl.chunk);
        if !ts.small {
            assert_eq!(gl.crc32c, tl.crc32c, "{name}: {}", tl.chunk);
        }
        assert_eq!(gs.open, ts.small && ts.open, "{name}: a piece's sealing");
    }
}

fn sizes() -> Vec<(String, usize)> {
    // Whole chunks, chunks after a remainder, a small object (one piece), odd sizes.
    [1usize, 3_001, 16_384, 20_000, 49_153, 70_001, 131_072, 250_003, 400_009]
        .iter()
        .enumerate()
        .map(|(i, &len)| (format!("obj-{i}"), len))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_on_without_the_coordinator_and_the_index_follows_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let n = 7;
    let mut c = cluster(dir.path(), n, 500).await;
    let objs = sizes();
    for (name, len) in &objs[..5] {
        put(&c.client, name, *len, *len as u64).await.unwrap();
    }
    // Some stripes sealed, some open: records follow the pieces into their slots.
    assert!(c.client.seal().await.unwrap() > 0);
    for (name, len) in &objs[5..] {
        put(&c.client, name, *len, *len as u64).await.unwrap();
    }
    // An overwrite and a delete; a Stripe-layout object, which is not indexed.
    put(&c.client, "obj-2", 33_333, 99).await.unwrap();
    c.client.delete("obj-4").await.unwrap();
    let stripe = data(50_000, 5);
    c.client.put("plain", &stripe, "rs:4,2".parse().unwrap(), 8 << 10).await.unwrap();
    let expect = |name: &str| -> Option<Vec<u8>> {
        match name {
            "obj-2" => Some(data(33_333, 99)),
            "obj-4" => None,
            _ => objs.iter().find(|o| o.0 == name).map(|&(_, len)| data(len, len as u64)),
        }
    };
    for (name, _) in &objs {
        if name != "obj-4" {
            check_record(&c.client, name, n).await;
        }
    }
    let gone = records(&c.client, "obj-4", n).await;
    assert!(gone.iter().flatten().filter(|r| r.0 > 0 && r.1.is_none()).count() >= 2, "obj-4's tombstone: {gone:?}");
    assert!(matches!(c.client.index_lookup("plain").await, IndexAnswer::Absent));

    // A node of the cluster fails; the repair moves its chunks and the records follow.
    let victim = c.client.stat("obj-8").await.unwrap().extents.last().map(|e| e.index).unwrap();
    let victim = c.client.stat("obj-8").await.unwrap().stripes.last().unwrap().chunks[victim].node;
    c.client.seal().await.unwrap();
    c.kill(victim as usize).await;
    c.client.fail(victim).await.unwrap();
    let r = c.client.repair(Shape::Cr, 4096, 4, Scheduler::Random).await.unwrap();
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}");
    for (name, _) in &objs {
        if name != "obj-4" {
            check_record(&c.client, name, n).await;
        }
    }

    // The coordinator stops. Every Geo object still reads back whole, and by range, from
    // where its record says, with no chunk rebuilt.
    c.client.cluster_map(false).await.unwrap();
    c.coord.take().unwrap().stop().await;
    for (name, _) in &objs {
        match expect(name) {
            Some(want) => {
                let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(got == want, "{name}: bytes differ");
                assert!(rep.degraded.is_empty(), "{name}: {:?}", rep.degraded);
                let mut part = Vec::new();
                let (off, len) = (want.len() as u64 / 3, want.len() as u64 / 2 + 1);
                c.client.get_range_into(name, off, len, &mut part, Shape::Cr, 4096, &|_| {}).await.unwrap();
                assert!(part == want[off as usize..(off + len) as usize], "{name}: a range");
            }
            None => {
                let e = c.client.get(name, Shape::Cr, 4096).await.unwrap_err();
                assert!(e.message().contains("no object named 'obj-4' in the index"), "{e}");
                assert_eq!(e.kind(), kintsugi_client::ErrorKind::NotFound, "{e}");
            }
        }
    }
    // A Stripe object needs the coordinator.
    assert!(c.client.get("plain", Shape::Cr, 4096).await.is_err());
    // One holder of a group down: a majority still answers. Two: the index cannot say.
    // A holder is taken down that keeps no chunk the read takes, where one can be found: a
    // record names only the chunks read, so rebuilding one needs the coordinator.
    let mut pick = None;
    for (name, _) in objs.iter().filter(|o| o.0 != "obj-4") {
        let IndexAnswer::Found(l) = c.client.index_lookup(name).await else { panic!("{name}: not in the index") };
        let read_from: Vec<NodeId> = l.extents.iter().map(|e| l.stripes[e.stripe].chunks[e.index].node).collect();
        let mut hs: Vec<NodeId> = the_holders(name, n).into_iter().filter(|&h| h != victim).collect();
        hs.sort_by_key(|h| read_from.contains(h));
        let best = hs.len() == 3 && !read_from.contains(&hs[0]);
        if best || pick.is_none() {
            pick = Some((name.as_str(), hs, read_from));
        }
        if best {
            break;
        }
    }
    let (name, hs, read_from) = pick.unwrap();
    eprintln!("{name}: holders {hs:?} (node {victim} repaired), the read takes chunks of {read_from:?}");
    c.kill(hs[0] as usize).await;
    let holders_alive = the_holders(name, n).iter().filter(|&&h| h != victim && h != hs[0]).count();
    if holders_alive >= 2 {
        let got = c.client.get(name, Shape::Cr, 4096).await;
        if read_from.contains(&hs[0]) {
            let e = got.err().unwrap_or_else(|| panic!("{name}: read a chunk of node {} while it was down", hs[0]));
            assert_eq!(e.kind(), kintsugi_client::ErrorKind::Unavailable, "{name}: {e}");
        } else {
            assert!(got.unwrap_or_else(|e| panic!("{name}: {e}")).0 == expect(name).unwrap(), "{name}: bytes differ");
        }
    }
    c.kill(hs[1] as usize).await;
    assert!(matches!(c.client.index_lookup(name).await, IndexAnswer::Unavailable(_)), "{name}");
    assert!(c.client.get(name, Shape::Cr, 4096).await.is_err());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_missed_a_change_never_serves_an_older_version() {
    let dir = tempfile::tempdir().unwrap();
    let n = 8;
    // No background publishing: a holder that missed a change stays behind.
    let mut c = cluster(dir.path(), n, 3_600_000).await;
    let name = "contested";
    let hs = the_holders(name, n);
    put(&c.client, name, 90_001, 1).await.unwrap();
    // One holder misses the overwrite: two of three keep it, so it is acknowledged.
    c.kill(hs[0] as usize).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    put(&c.client, name, 40_007, 2).await.unwrap();
    // Two holders down: a change cannot reach a majority, so it is not acknowledged (it is
    // committed at the coordinator, and its index is retried in the background).
    c.kill(hs[1] as usize).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let e = put(&c.client, name, 12_345, 3).await.unwrap_err();
    assert!(e.contains("index holders"), "{e}");
    // The stale holder comes back, the up-to-date one stays down, and the coordinator
    // stops before it can publish again: the majority a reader gets holds the newer record
    // of the acknowledged overwrite or of the unacknowledged one, never the first version.
    c.restart(dir.path(), hs[0] as usize).await;
    c.wait_alive(n - 1).await;
    c.client.cluster_map(true).await.unwrap();
    c.coord.take().unwrap().stop().await;
    let (got, _) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
    assert!(got == data(40_007, 2) || got == data(12_345, 3), "read {} bytes: an older version", got.len());
    c.stop().await;
}
