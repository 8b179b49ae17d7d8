//! Data safety on a real coordinator and real nodes. Object versions: concurrent and
//! staggered puts of one name, overwrite, delete, abandoned uploads, a read racing an
//! overwrite, and the clean-up of every replaced chunk, also from a node that was down at
//! the time (each of these lost or mixed acknowledged data before versions existed).
//! Knowing what is on disk and acting on it without a command: automatic repair after
//! down_out_ms, missing chunks found by reads and by inventories, corruption found by the
//! scrub, orphan chunks deleted.

mod common;

use common::{cluster_nodes, node_cfg, Cluster};
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::{start, CoordConfig};
use kintsugi_node::NodeConfig;
use kintsugi_plan::Shape;
use kintsugi_proto::{CoordRequest, CoordResponse, LayoutSpec};
use std::path::Path;
use std::time::Duration;

const CODE: &str = "rs:4,2";

/// What every cluster here shares: fast failure detection and an eager collector.
fn coord_cfg(dir: &Path) -> CoordConfig {
    CoordConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.join("coord"),
        dead_after_ms: 800,
        io_timeout_ms: 3000,
        chunk_size: 16 << 10,
        gc_grace_ms: 0,
        gc_interval_ms: 100,
        ..Default::default()
    }
}

async fn cluster(dir: &Path, n: usize, upload_timeout_ms: u64) -> Cluster {
    cluster_with(dir, n, CoordConfig { upload_timeout_ms, ..coord_cfg(dir) }, |c| c).await
}

/// A coordinator with `cfg` and `n` nodes, each configured by `node` from the defaults.
async fn cluster_with(dir: &Path, n: usize, cfg: CoordConfig, node: impl Fn(NodeConfig) -> NodeConfig) -> Cluster {
    cluster_nodes(cfg, dir, n, |_, c| node(c)).await
}

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Chunks an object of `len` bytes takes with 16 KiB chunks and RS(4,2).
fn chunks_of(len: usize) -> u64 {
    (len as u64).div_ceil(4 * (16 << 10)) * 6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_of_one_name_never_mix_and_leave_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 7, 3_600_000).await;
    let code: CodeSpec = CODE.parse().unwrap();
    for round in 0..4u64 {
        // Eight writers of different sizes race on one name; every put is acknowledged.
        let mut set = tokio::task::JoinSet::new();
        for w in 0..8u64 {
            let client = c.client.clone();
            let bytes = data(50_000 + w as usize * 7_001, round * 100 + w);
            set.spawn(async move {
                let layout = client.put("contested", &bytes, code, 0).await.expect("acknowledged put");
                (layout.version, bytes)
            });
        }
        let mut acked = Vec::new();
        while let Some(r) = set.join_next().await {
            acked.push(r.unwrap());
        }
        let (got, _) = c.client.get("contested", Shape::Cr, 4096).await.unwrap();
        let stat = c.client.stat("contested").await.unwrap();
        let winner = acked.iter().find(|(v, _)| *v == stat.version).expect("the current version is an acknowledged put");
        assert_eq!(got, winner.1, "round {round}: the read returns exactly the committed writer's bytes");
        // Every other version's chunks are collected: only the winner's remain.
        let want = chunks_of(winner.1.len());
        assert_eq!(c.settle_to(want).await, want, "round {round}: orphan chunks left on the nodes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwrite_delete_and_abandoned_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 7, 1_000).await;
    let code: CodeSpec = CODE.parse().unwrap();
    let (a, b) = (data(100_000, 1), data(30_000, 2));
    let va = c.client.put("obj", &a, code, 0).await.unwrap().version;
    let vb = c.client.put("obj", &b, code, 0).await.unwrap().version;
    assert!(vb > va);
    assert_eq!(c.client.get("obj", Shape::Ppr, 4096).await.unwrap().0, b, "the later put wins");
    // A streamed put whose source ends before the size it announced fails; the object
    // keeps its last committed version.
    let mut short: &[u8] = &a[..50_000];
    let err = c.client.put_from("obj", &mut short, a.len() as u64, code, 0, &|_| {}).await.unwrap_err();
    assert!(err.message().contains("reading the object"), "{err}");
    assert_eq!(err.kind(), kintsugi_client::ErrorKind::Input, "{err}");
    assert_eq!(c.client.get("obj", Shape::Cr, 4096).await.unwrap().0, b, "a failed put changes nothing");
    assert_eq!(c.settle_to(chunks_of(b.len())).await, chunks_of(b.len()));

    // A put that never commits is invisible, then reclaimed; its late commit is refused.
    let layout = match c
        .client
        .call(
            &CoordRequest::CreateObject { name: "obj".into(), size: 70_000, code, chunk_size: 0, layout: Default::default() },
            Duration::from_secs(5),
        )
        .await
        .unwrap()
    {
        CoordResponse::Layout(l) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(c.client.stat("obj").await.unwrap().version, vb, "an upload does not replace the object");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let crcs = vec![vec![0u32; 6]; layout.stripes.len()];
    let late = c
        .client
        .call(
            &CoordRequest::CommitObject {
                name: "obj".into(),
                version: layout.version,
                crcs,
                attrs: Default::default(),
                precondition: None,
                versioning: Default::default(),
            },
            Duration::from_secs(5),
        )
        .await;
    assert!(late.unwrap_err().message().contains("abandoned"), "a reclaimed upload cannot be committed");
    assert_eq!(c.client.get("obj", Shape::Cr, 4096).await.unwrap().0, b);

    // Delete while one node is down: its chunk goes once it is back.
    let down = c.client.stat("obj").await.unwrap().stripes[0].chunks[0].node as usize;
    c.nodes[down].take().unwrap().stop().await;
    assert!(c.client.delete("obj").await.unwrap());
    assert!(!c.client.delete("obj").await.unwrap(), "deleting twice is fine");
    let err = c.client.get("obj", Shape::Cr, 4096).await.unwrap_err();
    assert!(err.message().contains("no object"), "{err}");
    assert_eq!(c.settle_to(0).await, 0, "running nodes dropped every chunk");
    c.nodes[down] = Some(kintsugi_node::start(node_cfg(dir.path(), down, &c.coord_addr)).await.unwrap());
    c.wait_alive(7).await;
    assert_eq!(c.settle_to(0).await, 0, "the returning node dropped its chunk of the deleted object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_racing_overwrites_return_whole_versions() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 7, 3_600_000).await;
    let code: CodeSpec = CODE.parse().unwrap();
    let versions: Vec<Vec<u8>> = (0..6).map(|i| data(120_000 + i * 999, 50 + i as u64)).collect();
    c.client.put("hot", &versions[0], code, 0).await.unwrap();
    let writer = {
        let client = c.client.clone();
        let versions = versions.clone();
        tokio::spawn(async move {
            for v in &versions[1..] {
                client.put("hot", v, code, 0).await.unwrap();
            }
        })
    };
    while !writer.is_finished() {
        // Under back-to-back overwrites (and no grace before old chunks are deleted) a read
        // may give up; it must never return a mix.
        match c.client.get("hot", Shape::Cr, 4096).await {
            Ok((got, _)) => {
                assert!(versions.contains(&got), "a read returned bytes of no single version ({} bytes)", got.len());
            }
            Err(e) => assert!(
                e.message().contains("replaced") || e.message().contains("not found") || e.message().contains("no chunk"),
                "unexpected read error: {e}"
            ),
        }
    }
    writer.await.unwrap();
    assert_eq!(c.client.get("hot", Shape::Cr, 4096).await.unwrap().0, versions[5]);
}

/// Nobody runs `repair`: a node silent past down_out_ms, and a chunk file deleted from a
/// live node (found by a read), are both rebuilt by the coordinator on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_repair_of_a_dead_node_and_a_missing_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let cfg =
        CoordConfig { dead_after_ms: 500, down_out_ms: 1500, auto_repair_interval_ms: 200, repair_slice: 4096, ..coord_cfg(dir.path()) };
    let c = cluster_with(dir.path(), 8, cfg, |n| n).await;
    let code: CodeSpec = CODE.parse().unwrap();
    let objects: Vec<Vec<u8>> = (0..5).map(|i| data(90_000 + i * 1000, 70 + i as u64)).collect();
    for (i, o) in objects.iter().enumerate() {
        c.client.put(&format!("o{i}"), o, code, 0).await.unwrap();
    }
    let mut c = c;
    let victim = c.client.stat("o0").await.unwrap().stripes[0].chunks[1].node as usize;
    c.nodes[victim].take().unwrap().stop().await;
    // Lost at once, but not repaired before down_out_ms.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let s = c.client.status().await.unwrap();
    assert!(s.lost_chunks > 0 && s.last_auto_repair.is_none(), "repair must wait for down_out_ms: {s:?}");
    let mut settled = None;
    for _ in 0..150 {
        let s = c.client.status().await.unwrap();
        if s.lost_chunks == 0 && !s.repairing {
            settled = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = settled.expect("automatic repair never finished");
    let r = s.last_auto_repair.expect("an automatic repair ran");
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}");
    for (i, o) in objects.iter().enumerate() {
        let (got, rep) = c.client.get(&format!("o{i}"), Shape::Cr, 4096).await.unwrap();
        assert_eq!(&got, o);
        assert!(rep.degraded.is_empty(), "o{i} is whole again");
    }

    // A chunk file vanishes from a live node: the next read finds it missing and reports it.
    let loc = c.client.stat("o3").await.unwrap().stripes[0].chunks[0].clone();
    let holder = c.nodes[loc.node as usize].as_ref().unwrap();
    holder.exec.store.delete(&loc.chunk).unwrap();
    let (got, rep) = c.client.get("o3", Shape::Cr, 4096).await.unwrap();
    assert_eq!(got, objects[3]);
    assert_eq!(rep.degraded.len(), 1, "served by a degraded read");
    let mut whole = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok((_, rep)) = c.client.get("o3", Shape::Cr, 4096).await {
            if rep.degraded.is_empty() && c.client.status().await.unwrap().lost_chunks == 0 {
                whole = true;
                break;
            }
        }
    }
    assert!(whole, "the missing chunk was never rebuilt");
}

/// The nodes tell the coordinator what is on their disks: a node back with an empty disk
/// has its chunks rebuilt, a chunk file nobody references is deleted, and a byte flipped on
/// disk is found by the scrub before any read needs the chunk. Nobody runs `repair`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_and_scrub_find_lost_corrupt_and_orphan_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = CoordConfig {
        dead_after_ms: 500,
        down_out_ms: 60_000,
        auto_repair_interval_ms: 200,
        repair_slice: 4096,
        orphan_grace_ms: 300,
        inventory_slack_ms: 500,
        ..coord_cfg(dir.path())
    };
    let eager = |n: NodeConfig| NodeConfig { inventory_ms: 200, scrub_interval_ms: 300, scrub_bytes_per_s: 1e9, ..n };
    let mut c = cluster_with(dir.path(), 8, cfg, eager).await;
    let ncfg = |i: usize| eager(node_cfg(dir.path(), i, &c.coord_addr));
    let code: CodeSpec = CODE.parse().unwrap();
    let objects: Vec<Vec<u8>> = (0..4).map(|i| data(70_000 + i * 3001, 90 + i as u64)).collect();
    for (i, o) in objects.iter().enumerate() {
        c.client.put(&format!("o{i}"), o, code, 0).await.unwrap();
    }
    let whole = |c: &Cluster| {
        let client = c.client.clone();
        let objects = objects.clone();
        async move {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let s = client.status().await.unwrap();
                if s.lost_chunks > 0 || s.repairing || s.pending_repairs > 0 {
                    continue;
                }
                let mut clean = true;
                for (i, o) in objects.iter().enumerate() {
                    let (got, rep) = client.get(&format!("o{i}"), Shape::Cr, 4096).await.unwrap();
                    assert_eq!(&got, o, "o{i}");
                    clean &= rep.degraded.is_empty();
                }
                if clean {
                    return true;
                }
            }
            false
        }
    };

    // (1) A node comes back with an empty disk (a new disk under its id: `node replace`
    // first, else the coordinator refuses a directory that is not the one the id joined with).
    let victim = c.client.stat("o0").await.unwrap().stripes[0].chunks[2].node as usize;
    let held = c.nodes[victim].as_ref().unwrap().stat().chunks;
    assert!(held > 0);
    c.nodes[victim].take().unwrap().stop().await;
    std::fs::remove_dir_all(dir.path().join(format!("node{victim}"))).unwrap();
    c.client.call(&CoordRequest::ReplaceNode { node: victim as u32 }, Duration::from_secs(5)).await.unwrap();
    c.nodes[victim] = Some(kintsugi_node::start(ncfg(victim)).await.unwrap());
    assert!(whole(&c).await, "chunks of the emptied node were never rebuilt");
    // Every chunk of the emptied disk came back (whole() read everything without degraded
    // reads), by automatic repairs: possibly several, as inventories judge stripes in turn.
    let r = c.client.status().await.unwrap().last_auto_repair.expect("repaired by itself");
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}: {held} chunks were on the emptied disk");

    // (2) A byte flipped on disk, found by the scrub (no read touches the chunk first).
    let loc = c.client.stat("o2").await.unwrap().stripes[0].chunks[1].clone();
    let path = dir.path().join(format!("node{}", loc.node)).join(format!("{}.chunk", loc.chunk));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    // Rebuilt in place: the same node, its file whole again.
    let mut rebuilt = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = c.client.stat("o2").await.unwrap().stripes[0].chunks[1].clone();
        if now.node == loc.node && !now.lost && std::fs::read(&path).is_ok_and(|b| b != bytes) {
            rebuilt = true;
            break;
        }
    }
    assert!(rebuilt, "the corrupt chunk was never found and rebuilt in place");
    assert!(whole(&c).await);

    // (3) An orphan: a chunk file that nothing references.
    let some = dir.path().join(format!("node{}", (victim + 1) % 8));
    let any = std::fs::read_dir(&some).unwrap().flatten().find(|e| e.file_name().to_string_lossy().ends_with(".chunk")).unwrap();
    let orphan = some.join("s99999999.000.chunk");
    std::fs::copy(any.path(), &orphan).unwrap();
    let mut gone = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !orphan.exists() {
            gone = true;
            break;
        }
    }
    assert!(gone, "the orphan chunk was never deleted");
}

/// A node id live elsewhere is refused (its address never flips), and a data directory
/// belongs to the node id that first used it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_are_not_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 5, 3_600_000).await;
    let addr_of = |s: &kintsugi_proto::ClusterStatus, id: u32| s.nodes.iter().find(|n| n.id == id).unwrap().addr.clone();
    let before = addr_of(&c.client.status().await.unwrap(), 3);
    let impostor =
        kintsugi_node::start(NodeConfig { data_dir: dir.path().join("impostor"), ..node_cfg(dir.path(), 3, &c.coord_addr) }).await.unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(addr_of(&c.client.status().await.unwrap(), 3), before, "node 3's address flipped to the impostor's");
    }
    impostor.stop().await;

    // Node 4's directory under another id: refused while node 4 serves it (one process per
    // directory), and after, for the directory is node 4's.
    let err = kintsugi_node::start(NodeConfig { id: 9, ..node_cfg(dir.path(), 4, &c.coord_addr) }).await.err().expect("refused");
    assert!(err.contains("in use by another node process"), "{err}");
    let mut c = c;
    c.nodes[4].take().unwrap().stop().await;
    let err = kintsugi_node::start(NodeConfig { id: 9, ..node_cfg(dir.path(), 4, &c.coord_addr) }).await.err().expect("refused");
    assert!(err.contains("belongs to node 4"), "{err}");

    // Each data directory records the cluster that welcomed it; another cluster's
    // coordinator refuses that node.
    let identity: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("node2/identity.json")).unwrap()).unwrap();
    assert_eq!(identity["cluster"], c.coord.as_ref().unwrap().coord.cluster_id, "{identity}");
    let other_dir = tempfile::tempdir().unwrap();
    let other = start(coord_cfg(other_dir.path())).await.unwrap();
    assert_ne!(other.coord.cluster_id, c.coord.as_ref().unwrap().coord.cluster_id, "clusters get their own ids");
    // Node 2 moves its directory to the other cluster (stopped here first).
    c.nodes[2].take().unwrap().stop().await;
    let stray = kintsugi_node::start(node_cfg(dir.path(), 2, &other.addr.to_string())).await.unwrap();
    let fresh = kintsugi_node::start(node_cfg(other_dir.path(), 7, &other.addr.to_string())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut other_client = Client::new(&other.addr.to_string());
    other_client.io_timeout = Duration::from_secs(3);
    let s = other_client.status().await.unwrap();
    let ids: Vec<u32> = s.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![7], "only the node with a fresh directory joins the other cluster");
    stray.stop().await;
    fresh.stop().await;
}

/// `node remove`: a node gone for good has its chunks rebuilt elsewhere, then is forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_node_rebuilds_its_chunks_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 8, 3_600_000).await;
    let code: CodeSpec = CODE.parse().unwrap();
    let objects: Vec<Vec<u8>> = (0..4).map(|i| data(100_000 + i * 777, 300 + i as u64)).collect();
    for (i, o) in objects.iter().enumerate() {
        c.client.put(&format!("r{i}"), o, code, 0).await.unwrap();
    }
    let victim = c.client.stat("r0").await.unwrap().stripes[0].chunks[0].node;
    let held: usize = c.client.status().await.unwrap().nodes.iter().find(|n| n.id == victim).unwrap().chunks as usize;
    assert!(held > 0);
    let r = match c.client.call(&CoordRequest::RemoveNode { node: victim }, Duration::from_secs(60)).await.unwrap() {
        CoordResponse::Repaired(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!((r.repaired, r.failed), (held, 0), "{r:?}");
    c.nodes[victim as usize] = None;
    let s = c.client.status().await.unwrap();
    assert!(s.nodes.iter().all(|n| n.id != victim), "node {victim} is forgotten: {s:?}");
    assert_eq!(s.lost_chunks, 0);
    for (i, o) in objects.iter().enumerate() {
        let (got, rep) = c.client.get(&format!("r{i}"), Shape::Cr, 4096).await.unwrap();
        assert_eq!(&got, o);
        assert!(rep.degraded.is_empty(), "r{i} has every chunk on a member");
    }
    let err = c.client.call(&CoordRequest::RemoveNode { node: victim }, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.kind(), kintsugi_client::ErrorKind::NotFound, "{err}");
}

/// Nodes with little space: puts fill them up to the full ratio and no further, a put that
/// does not fit fails before writing anything, and status shows who is full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_nodes_take_no_more_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 300_000u64;
    let c = cluster_with(dir.path(), 7, coord_cfg(dir.path()), |n| NodeConfig { capacity_bytes: Some(cap), ..n }).await;
    let code: CodeSpec = CODE.parse().unwrap();
    // Far more than fits in one put: refused up front, nothing written.
    let err = c.client.put("huge", &data(2_000_000, 1), code, 0).await.unwrap_err();
    assert!(err.message().contains("room"), "{err}");
    assert_eq!(err.kind(), kintsugi_client::ErrorKind::Unavailable, "{err}");
    assert_eq!(c.chunk_files(), 0, "a put that cannot be placed writes nothing");
    // Fill up in small puts; wait for a heartbeat between puts so placement sees the space.
    let mut stored = Vec::new();
    for i in 0..100u64 {
        let bytes = data(60_000, 100 + i);
        match c.client.put(&format!("f{i}"), &bytes, code, 0).await {
            Ok(_) => stored.push((i, bytes)),
            Err(e) => {
                assert!(e.message().contains("room") || e.message().contains("full"), "{e}");
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(stored.len() >= 5, "only {} puts fitted", stored.len());
    assert!(stored.len() < 100, "the nodes never filled up");
    for n in c.nodes.iter().flatten() {
        assert!(n.stat().bytes <= cap, "node {} holds {} bytes, more than its {cap}", n.id, n.stat().bytes);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = c.client.status().await.unwrap();
    assert!(s.nodes.iter().all(|n| n.capacity_bytes == cap), "{s:?}");
    assert!(s.nodes.iter().any(|n| n.nearfull), "some node is nearfull: {s:?}");
    for (i, bytes) in &stored {
        assert_eq!(&c.client.get(&format!("f{i}"), Shape::Cr, 4096).await.unwrap().0, bytes, "f{i}");
    }
}

/// S3's multipart completion: parts composed into one object in one transaction, their
/// chunks kept where they are; the attributes committed with it; stale, mixed or self
/// parts refused; a composed object replaced like any other, its chunks collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composing_parts_makes_one_object_without_moving_a_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 7, 3_600_000).await;
    let code: CodeSpec = CODE.parse().unwrap();
    let parts = [data(100_000, 11), data(4 * (16 << 10) + 5, 12), data(1, 13)];
    let mut named = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        // Parts are striped whatever their size: one kept in the metadata is not composed.
        let mut terms = Some(kintsugi_client::CommitTerms { striped: true, ..Default::default() });
        let v = c
            .client
            .put_with_attrs(&format!("part{i}"), &mut &p[..], p.len() as u64, code, 0, LayoutSpec::Stripe, &|_| {}, &mut || {
                Ok(terms.take().unwrap_or_default())
            })
            .await
            .unwrap()
            .version;
        named.push((format!("part{i}"), v));
    }
    let chunks: u64 = parts.iter().map(|p| chunks_of(p.len())).sum();
    assert_eq!(c.settle_to(chunks).await, chunks);
    let attrs: kintsugi_proto::Attrs = [("etag".to_string(), "abc-3".to_string())].into();

    // Refused: a part at another version, a part named twice, the object itself.
    let stale = vec![named[0].clone(), (named[1].0.clone(), named[1].1 + 1000)];
    assert_eq!(c.client.compose("whole", stale, attrs.clone().into()).await.unwrap_err().kind(), kintsugi_client::ErrorKind::InvalidPart);
    assert!(c.client.compose("whole", vec![named[0].clone(), named[0].clone()], attrs.clone().into()).await.is_err());
    assert!(c.client.compose("part0", vec![named[0].clone()], attrs.clone().into()).await.is_err());
    let mut terms = Some(kintsugi_client::CommitTerms { striped: true, ..Default::default() });
    let other = c
        .client
        .put_with_attrs("other-code", &mut &parts[2][..], 1, "rs:3,2".parse().unwrap(), 0, LayoutSpec::Stripe, &|_| {}, &mut || {
            Ok(terms.take().unwrap_or_default())
        })
        .await
        .unwrap()
        .version;
    let mixed = vec![named[0].clone(), ("other-code".to_string(), other)];
    assert!(c.client.compose("whole", mixed, attrs.clone().into()).await.unwrap_err().message().contains("coded"));
    c.client.delete("other-code").await.unwrap();
    assert_eq!(c.client.stat("part0").await.unwrap().version, named[0].1, "a refused compose changes nothing");

    c.client.compose("whole", named.clone(), attrs.clone().into()).await.unwrap();
    let whole: Vec<u8> = parts.concat();
    assert_eq!(c.client.get("whole", Shape::Cr, 4096).await.unwrap().0, whole);
    let l = c.client.stat("whole").await.unwrap();
    assert_eq!((l.size, &l.attrs), (whole.len() as u64, &attrs));
    for (n, _) in &named {
        assert_eq!(c.client.stat(n).await.unwrap_err().kind(), kintsugi_client::ErrorKind::NotFound, "part {n} is gone");
    }
    assert_eq!(c.settle_to(chunks).await, chunks, "no chunk written or deleted");
    // A range across the parts' seam, read from exactly this version.
    let mut got = Vec::new();
    c.client.read_layout(&l, 99_990, 30, &mut got, Shape::Cr, 4096).await.unwrap();
    assert_eq!(got, whole[99_990..100_020]);
    // Replaced like any object: the composed chunks are collected.
    // (by a 1-byte object, kept in the metadata: no chunk file at all).
    c.client.put("whole", &parts[2], code, 0).await.unwrap();
    assert_eq!(c.settle_to(0).await, 0);
}

/// Conditional commits are a compare-and-swap in the commit's transaction: of eight puts
/// racing to create one name, exactly one wins and the others are refused with
/// PreconditionFailed (their uploads abandoned, their chunks collected); a put that requires
/// the version it read loses to one that committed after the read; a compose likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_commits_let_exactly_one_writer_win() {
    use kintsugi_client::{CommitTerms, ErrorKind};
    use kintsugi_proto::{LayoutSpec, Precondition};
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 7, 3_600_000).await;
    let code: CodeSpec = CODE.parse().unwrap();
    let put_if = |name: &'static str, body: Vec<u8>, p: Option<Precondition>| {
        let client = c.client.clone();
        async move {
            let mut r: &[u8] = &body;
            let mut terms = || Ok(CommitTerms { attrs: Default::default(), precondition: p, ..Default::default() });
            client.put_with_attrs(name, &mut r, body.len() as u64, code, 0, LayoutSpec::Stripe, &|_| {}, &mut terms).await
        }
    };
    let racers: Vec<_> =
        (0..8).map(|i| tokio::spawn(put_if("once", data(50_000 + i, 100 + i as u64), Some(Precondition::Absent)))).collect();
    let mut won = Vec::new();
    for (i, r) in racers.into_iter().enumerate() {
        match r.await.unwrap() {
            Ok(_) => won.push(i),
            Err(e) => assert_eq!(e.kind(), ErrorKind::PreconditionFailed, "racer {i}: {e}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one creation wins: {won:?}");
    let w = won[0];
    assert_eq!(c.client.get("once", Shape::Cr, 4096).await.unwrap().0, data(50_000 + w, 100 + w as u64), "the winner's bytes");
    // The losers' uploads are abandoned: only the winner's chunks stay.
    assert_eq!(c.settle_to(chunks_of(50_000 + w)).await, chunks_of(50_000 + w));

    // Compare-and-swap on a version: the one read wins once; a second writer holding the
    // same stale version loses.
    let v = c.client.stat("once").await.unwrap().version;
    put_if("once", data(1000, 1), Some(Precondition::Version(v))).await.unwrap();
    let stale = put_if("once", data(1000, 2), Some(Precondition::Version(v))).await.unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::PreconditionFailed);
    assert_eq!(c.client.get("once", Shape::Cr, 4096).await.unwrap().0, data(1000, 1));
    assert_eq!(put_if("never", data(10, 3), Some(Precondition::Version(v))).await.unwrap_err().kind(), ErrorKind::PreconditionFailed);

    // A compose that requires the name to be free, when it is not: the parts stay.
    let p = c.client.put("part", &data(3000, 4), code, 0).await.unwrap().version;
    let terms = CommitTerms { attrs: Default::default(), precondition: Some(Precondition::Absent), ..Default::default() };
    let e = c.client.compose("once", vec![("part".into(), p)], terms).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PreconditionFailed);
    assert_eq!(c.client.stat("part").await.unwrap().version, p, "a refused compose changes nothing");
    assert_eq!(c.client.get("once", Shape::Cr, 4096).await.unwrap().0, data(1000, 1));

    // Attributes replaced at the version read, bytes untouched; a stale version or a missing
    // object refused.
    let now = c.client.stat("once").await.unwrap().version;
    let tagged: kintsugi_proto::Attrs = [("s3.tag.k".to_string(), "v".to_string())].into();
    c.client.set_attrs("once", now, tagged.clone()).await.unwrap();
    let l = c.client.stat("once").await.unwrap();
    assert_eq!((&l.attrs, l.version), (&tagged, now), "same version, new attributes");
    assert_eq!(c.client.get("once", Shape::Cr, 4096).await.unwrap().0, data(1000, 1));
    assert_eq!(c.client.set_attrs("once", v, tagged.clone()).await.unwrap_err().kind(), ErrorKind::PreconditionFailed);
    assert_eq!(c.client.set_attrs("nothing", 1, tagged).await.unwrap_err().kind(), ErrorKind::NotFound);

    // A conditional delete (lifecycle's): refused at a stale version, nothing changed;
    // made at the version read; refused again once gone, with or without versioning.
    use kintsugi_proto::Versioning;
    let now = c.client.stat("once").await.unwrap().version;
    let e = c.client.delete_if("once", Versioning::Unversioned, Some(Precondition::Version(v))).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PreconditionFailed);
    assert_eq!(c.client.get("once", Shape::Cr, 4096).await.unwrap().0, data(1000, 1), "a refused delete changes nothing");
    assert!(c.client.delete_if("once", Versioning::Unversioned, Some(Precondition::Version(now))).await.unwrap().0);
    let again = c.client.delete_if("once", Versioning::Enabled, Some(Precondition::Version(now))).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::PreconditionFailed, "no delete marker over a version already gone");
    assert!(c
        .client
        .list_versions(kintsugi_client::client::VersionsPage {
            prefix: "once",
            delimiter: "",
            key_marker: "",
            version_marker: None,
            limit: 0
        })
        .await
        .unwrap()
        .versions
        .is_empty());
}
