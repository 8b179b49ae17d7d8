//! Geo puts that outlive a node: a node killed halfway through a Geo put (the object's
//! home, or a node holding its staging copies) does not fail the put; the chunks it could
//! not take move to other members, and the object reads back byte-exact, before and after
//! sealing. With too few members left the put fails and says why.

mod common;

use common::{cluster_with, data, Cluster};
use kintsugi_client::ErrorKind;
use kintsugi_coord::CoordConfig;
use kintsugi_plan::Shape;
use kintsugi_proto::LayoutSpec;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const NODES: usize = 6;

async fn cluster(dir: &Path) -> Cluster {
    let conf = CoordConfig { placement_groups: 1, seal_after_ms: 3_600_000, ..common::cfg(dir, "127.0.0.1:0") };
    cluster_with(conf, dir, NODES, None).await
}

/// Which role a node plays in the put so far, from its files: the home keeps the object's
/// chunks in bucket files, a staging node keeps copies as chunk files of their own.
fn role(dir: &Path, i: usize) -> (bool, bool) {
    let names: Vec<String> =
        std::fs::read_dir(dir.join(format!("node{i}"))).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    (names.iter().any(|n| n.ends_with(".bucket")), names.iter().any(|n| n.contains(".r") && n.ends_with(".chunk")))
}

/// Puts `len` bytes as Geo object `name`, killing a node (chosen by `pick` from the roles
/// once half the bytes are in) meanwhile; returns the put's outcome and the node killed.
async fn put_killing(
    c: &mut Cluster,
    dir: &Path,
    name: &str,
    bytes: &[u8],
    pick: impl Fn(&[(bool, bool)]) -> Option<usize>,
    more_kills: usize,
) -> (Result<kintsugi_proto::ObjectLayout, kintsugi_client::Error>, usize) {
    let client = c.client.clone();
    let (mut w, mut r) = tokio::io::duplex(1 << 20);
    let layout = LayoutSpec::Geo { s0: 1 << 20, q: 2, cap: 8 << 20 };
    let code = "clay:4,2,5".parse().unwrap();
    let len = bytes.len() as u64;
    // The reader goes with the put: a put that fails drops it, and the writer stops.
    let put = async move { client.put_with_layout(name, &mut r, len, code, 8 << 10, layout, &|_| {}).await };
    let feed = async {
        let half = bytes.len() / 2;
        w.write_all(&bytes[..half]).await.unwrap();
        // Every chunk so far is on its home and copies once the put reads on.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let roles: Vec<(bool, bool)> = (0..NODES).map(|i| if c.nodes[i].is_some() { role(dir, i) } else { (false, false) }).collect();
        let victim = pick(&roles).unwrap_or_else(|| panic!("no node to kill among {roles:?}"));
        c.kill(victim).await;
        let others: Vec<usize> = (0..NODES).filter(|&i| i != victim && c.nodes[i].is_some()).take(more_kills).collect();
        for i in others {
            c.kill(i).await;
        }
        // A put that fails stops reading: the rest of the bytes may find no reader.
        let _ = w.write_all(&bytes[half..]).await;
        victim
    };
    let (got, victim) = tokio::join!(put, feed);
    (got, victim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_geo_put_goes_on_when_its_home_or_a_staging_node_dies() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path()).await;
    let len = 48 << 20;
    let bytes = data(len, 7);
    // The home dies: the rest of the object's chunks take another member as home.
    let (got, home) = put_killing(&mut c, dir.path(), "by-home", &bytes, |r| r.iter().position(|x| x.0), 0).await;
    let l = got.unwrap_or_else(|e| panic!("the put failed when its home (node {home}) died: {e}"));
    let homes: std::collections::BTreeSet<u32> =
        l.extents.iter().filter(|e| !l.stripes[e.stripe].small).map(|e| l.stripes[e.stripe].chunks[e.index].node).collect();
    assert!(homes.len() >= 2 && homes.contains(&(home as u32)), "chunks before and after the kill: {homes:?}");
    let (back, _) = c.client.get("by-home", Shape::Cr, 1 << 16).await.unwrap();
    assert!(back == bytes, "bytes differ");
    c.restart(dir.path(), home).await;
    c.wait_alive(NODES).await;

    // A staging node dies: its copies go to other members.
    let bytes2 = data(len, 8);
    let (got, staging) = put_killing(&mut c, dir.path(), "by-copy", &bytes2, |r| r.iter().position(|x| x.1 && !x.0), 0).await;
    let l = got.unwrap_or_else(|e| panic!("the put failed when a staging node (node {staging}) died: {e}"));
    for e in &l.extents {
        let s = &l.stripes[e.stripe];
        let copies = s.replicas.get(e.index).map_or(0, |r| r.len());
        assert_eq!(copies, 2, "every chunk keeps its staging copies: {s:?}");
    }
    let (back, _) = c.client.get("by-copy", Shape::Cr, 1 << 16).await.unwrap();
    assert!(back == bytes2, "bytes differ");
    c.restart(dir.path(), staging).await;
    c.wait_alive(NODES).await;
    // Sealed, both read back by their parity like any Geo object.
    assert!(c.client.seal().await.unwrap() > 0);
    for (name, want) in [("by-home", &bytes), ("by-copy", &bytes2)] {
        let (back, _) = c.client.get(name, Shape::Cr, 1 << 16).await.unwrap();
        assert!(back == *want, "{name}: bytes differ after sealing");
    }

    // With four of six members dead, no chunk finds a home and two copies: the put fails,
    // saying so.
    let bytes3 = data(len, 9);
    let (got, _) = put_killing(&mut c, dir.path(), "too-few", &bytes3, |_| Some(0), 3).await;
    let e = got.expect_err("a put with too few members left");
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(e.to_string().contains("no live member of placement group"), "{e}");
    assert!(matches!(c.client.stat("too-few").await, Err(e) if e.kind() == ErrorKind::NotFound));
    c.stop().await;
}
