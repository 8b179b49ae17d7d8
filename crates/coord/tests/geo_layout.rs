//! Geometric Partitioning's layout on a real coordinator and real nodes on loopback: objects
//! of many sizes in Geo, Contiguous, Stripe-Max and Stripe layouts read back byte for byte
//! while their stripes are open (from staging copies when a home node dies), after sealing
//! (by Clay degraded reads), after full-node recovery, and by range reads; concurrent puts
//! into one placement group never share a slot.

mod common;

use common::{cluster_with, Cluster};
use kintsugi_client::Client;
use kintsugi_coord::CoordConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use kintsugi_proto::LayoutSpec;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

async fn cluster(dir: &Path, n: usize, groups: u32) -> Cluster {
    let conf = CoordConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.join("coord"),
        dead_after_ms: 800,
        io_timeout_ms: 3000,
        auto_repair: false,
        placement_groups: groups,
        // The tests seal when they choose to.
        seal_after_ms: 3_600_000,
        ..Default::default()
    };
    cluster_with(conf, dir, n, None).await
}

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const S0: u64 = 16 << 10;

fn objects() -> Vec<(String, usize, LayoutSpec)> {
    let geo = LayoutSpec::Geo { s0: S0, q: 2, cap: 0 };
    let mut v: Vec<(String, usize, LayoutSpec)> = Vec::new();
    // 73.5 MiB at s0 = 4 MiB cuts into 1.5 | 4,4,8,8,16,32 (the paper's example), scaled
    // to s0 = 16 KiB: 18.375 s0.
    for (i, len) in
        [1usize, 10_000, S0 as usize, 18 * S0 as usize + 3 * S0 as usize / 8, 100_003, 301_000, 1_200_017].into_iter().enumerate()
    {
        v.push((format!("geo-{i}"), len, geo));
    }
    v.push(("con-0".into(), 250_000, LayoutSpec::Contiguous { chunk: 32 << 10 }));
    v.push(("con-1".into(), 70_001, LayoutSpec::Contiguous { chunk: 32 << 10 }));
    v.push(("max-0".into(), 90_001, LayoutSpec::StripeMax));
    v.push(("stripe-0".into(), 90_001, LayoutSpec::Stripe));
    v
}

async fn check_all(c: &Client, objs: &[(String, usize, LayoutSpec)], method: Shape) -> usize {
    let mut degraded = 0;
    for (name, len, _) in objs {
        let (got, rep) = c.get(name, method, 4096).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(got == data(*len, *len as u64), "{name}: bytes differ");
        degraded += rep.degraded.len();
    }
    degraded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geo_objects_survive_a_lost_node_before_and_after_sealing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 9, 2).await;
    let code = "clay:4,2,5".parse().unwrap();
    let objs = objects();
    for (name, len, layout) in &objs {
        let bytes = data(*len, *len as u64);
        let mut r = &bytes[..];
        c.client
            .put_with_layout(name, &mut r, *len as u64, code, 8 << 10, *layout, &|_| {})
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // The partitioner's cut, as stored: 0.375 | 1,1,2,2,4,8 in units of s0.
    let l = c.client.stat("geo-3").await.unwrap();
    let lens: Vec<u64> = l.extents.iter().map(|e| e.len).collect();
    let units: Vec<u64> = lens[lens.len() - 6..].iter().map(|x| x / S0).collect();
    assert_eq!(units, vec![1, 1, 2, 2, 4, 8], "{lens:?}");
    assert_eq!(lens[..lens.len() - 6].iter().sum::<u64>(), 3 * S0 / 8);
    // Every chunk of a Geo object is on one node (its home).
    let homes: HashSet<u32> = l.extents[lens.len() - 6..].iter().map(|e| l.stripes[e.stripe].chunks[e.index].node).collect();
    assert_eq!(homes.len(), 1, "one home per object");
    assert_eq!(check_all(&c.client, &objs, Shape::Cr).await, 0);
    // Two objects in one placement group share stripes, in different slots.
    let mut slots = HashSet::new();
    let mut shared = 0;
    // Remainders and small objects: one piece each, packed into the small-size bucket's
    // RS stripes, several objects' pieces to a stripe.
    let mut small_uses = 0;
    let mut small_stripes = HashSet::new();
    for (name, len, layout) in &objs {
        if !matches!(layout, LayoutSpec::Geo { .. } | LayoutSpec::Contiguous { .. }) {
            continue;
        }
        let l = c.client.stat(name).await.unwrap();
        let pieces: Vec<_> = l.extents.iter().filter(|e| l.stripes[e.stripe].small).collect();
        let (s0, cut) = match layout {
            LayoutSpec::Contiguous { chunk } => (*chunk, *chunk),
            _ => (S0, S0),
        };
        assert_eq!(pieces.len(), usize::from(!(*len as u64).is_multiple_of(cut) || (*len as u64) < s0 && *len > 0), "{name}: {pieces:?}");
        for e in pieces {
            assert!(e.crc32c.is_some() && e.len < s0, "{name}: {e:?}");
            assert_eq!(l.stripes[e.stripe].code, Some("rs:4,2".parse().unwrap()), "{name}: the small-size bucket is RS");
            small_uses += 1;
            small_stripes.insert(l.stripes[e.stripe].id);
        }
        for e in l.extents.iter().filter(|e| l.stripes[e.stripe].open) {
            let key = (l.stripes[e.stripe].id, e.index, e.offset);
            assert!(slots.insert(key), "{name}: slot {key:?} taken twice");
        }
        shared += l.stripes.iter().filter(|s| s.open).count();
    }
    let stripes: HashSet<u64> = slots.iter().map(|s| s.0).collect();
    assert!(stripes.len() < shared, "no stripe holds chunks of two objects ({} stripes, {shared} uses)", stripes.len());
    assert!(small_stripes.len() < small_uses, "no small-size bucket stripe holds two objects' pieces ({small_uses} pieces)");

    // Range reads start at the first overlapping chunk, any layout.
    for (name, len, _) in &objs {
        let whole = data(*len, *len as u64);
        for (off, n) in [(0usize, 1usize), (*len / 3, *len / 2 + 1), (len.saturating_sub(5), 100), (S0 as usize + 7, 3 * S0 as usize)] {
            let mut out = Vec::new();
            let off = off.min(*len);
            c.client.get_range_into(name, off as u64, n as u64, &mut out, Shape::Cr, 4096, &|_| {}).await.unwrap();
            assert!(out == whole[off..(off + n).min(*len)], "{name} range {off}+{n}");
        }
    }

    // The home of the largest Geo object dies while its stripes are open: reads come from
    // the staging copies.
    let big = c.client.stat("geo-6").await.unwrap();
    let e = big.extents.last().unwrap();
    let victim = big.stripes[e.stripe].chunks[e.index].node;
    c.nodes[victim as usize].take().unwrap().stop().await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (got, rep) = c.client.get("geo-6", Shape::Cr, 4096).await.unwrap();
    assert!(got == data(1_200_017, 1_200_017));
    assert!(!rep.degraded.is_empty(), "geo-6's chunks were read from staging copies");
    check_all(&c.client, &objs, Shape::Ecpipe).await;

    // Sealing with the home down computes parity from the staging copies; the lost chunks
    // are then rebuilt like any other, by Clay degraded reads and by repair.
    let sealed = c.client.seal().await.unwrap();
    assert!(sealed > 0);
    for name in ["geo-6", "geo-3", "con-0"] {
        assert!(c.client.stat(name).await.unwrap().stripes.iter().all(|s| !s.open), "{name} sealed");
    }
    for method in [Shape::Cr, Shape::Ppr, Shape::Ecpipe] {
        check_all(&c.client, &objs, method).await;
    }
    let (_, rep) = c.client.get("geo-6", Shape::Ppr, 4096).await.unwrap();
    assert!(!rep.degraded.is_empty(), "geo-6 is read by degraded reads after sealing");
    // Its front remainder, a piece of a small-size bucket slot on the dead node, is rebuilt
    // alone: RS combines the same byte range of k other slots.
    let l = c.client.stat("geo-6").await.unwrap();
    let e = l.extents[0];
    assert!(l.stripes[e.stripe].small && l.stripes[e.stripe].chunks[e.index].node == victim, "{e:?}");
    for method in [Shape::Cr, Shape::Ecpipe] {
        let piece =
            c.client.degraded_read_range("geo-6", 0, e.stripe, e.index, Some((e.offset, e.len)), method, 1024, vec![]).await.unwrap();
        assert!(piece == data(1_200_017, 1_200_017)[..e.len as usize], "{method}: the piece rebuilt alone");
    }
    // A Clay chunk's bytes are not combinations of the same bytes of others: no ranges.
    let big = l.extents.last().unwrap();
    let err = c.client.degraded_read_range("geo-6", 0, big.stripe, big.index, Some((0, 100)), Shape::Cr, 1024, vec![]).await.unwrap_err();
    assert_eq!(err.kind(), kintsugi_proto::ErrorKind::BadRequest, "{err}");
    assert!(err.message().contains("one sub-chunk"), "{err}");
    let lost = c.client.status().await.unwrap().lost_chunks;
    assert!(lost > 0);
    let r = c.client.repair(Shape::Ppr, 8192, 4, Scheduler::Repairboost).await.unwrap();
    assert_eq!((r.repaired, r.failed), (lost, 0), "{r:?}");
    assert_eq!(check_all(&c.client, &objs, Shape::Cr).await, 0, "every chunk is on a live node again");
    // Nothing of any object, and no parity, is left on the dead node (a stripe's empty
    // slots, virtual zeros, stay where they were: there is nothing to move).
    for (name, _, _) in &objs {
        let l = c.client.stat(name).await.unwrap();
        assert!(l.extents.iter().all(|e| l.stripes[e.stripe].chunks[e.index].node != victim), "{name}");
        assert!(l.stripes.iter().all(|s| s.chunks[4..].iter().all(|x| x.node != victim)), "{name}");
    }
    // Staging copies are gone from the live nodes once their stripes are sealed.
    for i in 0..9 {
        if i == victim as usize {
            continue;
        }
        let copies = std::fs::read_dir(dir.path().join(format!("node{i}")))
            .unwrap()
            .filter(|f| {
                let name = f.as_ref().unwrap().file_name().to_string_lossy().to_string();
                name.ends_with(".chunk") && (name.contains(".r") || name.contains(".o"))
            })
            .count();
        assert_eq!(copies, 0, "node {i} still holds staging copies or pieces");
    }
    // Sealed Geo and Contiguous chunks, data, parity and rebuilt alike, are slots of their
    // placement group's size-class bucket files, aligned at slot * class, not files of
    // their own; a stripe's chunks share one slot number.
    let mut in_buckets = 0;
    let mut trimmed = 0;
    for (name, _, layout) in &objs {
        if !matches!(layout, LayoutSpec::Geo { .. } | LayoutSpec::Contiguous { .. }) {
            continue;
        }
        let l = c.client.stat(name).await.unwrap();
        for e in &l.extents {
            let s = &l.stripes[e.stripe];
            let Some(slot) = s.chunks[e.index].bucket else { continue };
            assert!(s.chunks.iter().all(|x| x.bucket == Some(slot)), "{name}: one slot per stripe");
            // Empty slots (fillers, virtual zeros) are stored nowhere.
            let filler = Some(crc32c::crc32c(&vec![0u8; s.chunk_len as usize]));
            for x in s.chunks.iter().filter(|x| x.node != victim && x.crc32c.is_some() && x.crc32c != filler) {
                let node = dir.path().join(format!("node{}", x.node));
                assert!(!node.join(format!("{}.chunk", x.chunk)).exists(), "{name}: {} is a file of its own", x.chunk);
                let bucket = node.join(kintsugi_node::bucket::file_name(&slot));
                let len = std::fs::metadata(&bucket).unwrap_or_else(|e| panic!("{}: {e}", bucket.display())).len();
                // A small-size bucket stripe's chunks are as long as its fullest slot, less than
                // the slot (the rest is a hole).
                assert!(s.chunk_len <= slot.class, "{name}: chunks of {} bytes in slots of {}", s.chunk_len, slot.class);
                trimmed += usize::from(s.small && s.chunk_len < slot.class);
                assert!(len >= slot.slot * slot.class + s.chunk_len, "{name}: {} ends before slot {}", bucket.display(), slot.slot);
                in_buckets += 1;
            }
        }
    }
    assert!(in_buckets > 20, "{in_buckets} chunks found in buckets");
    assert!(trimmed > 0, "no small-size bucket stripe was sealed shorter than its slots");
    let small_buckets = (0..9)
        .flat_map(|i| std::fs::read_dir(dir.path().join(format!("node{i}"))).unwrap().flatten())
        .filter(|f| f.file_name().to_string_lossy().contains(".small."))
        .count();
    assert!(small_buckets > 0, "no small-size bucket file");
    c.stop().await;
}

/// Sealing with every node up, a delete and an overwrite of Geo objects, and a pile of
/// concurrent puts into one placement group: each reads back whole, and no slot is shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_geo_puts_overwrites_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(dir.path(), 7, 1).await;
    let code = "clay:4,2,5".parse().unwrap();
    let layout = LayoutSpec::Geo { s0: S0, q: 2, cap: 0 };
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12usize {
        let client = c.client.clone();
        tasks.spawn(async move {
            let len = 20_000 + i * 17_001;
            let bytes = data(len, i as u64);
            let mut r = &bytes[..];
            client.put_with_layout(&format!("o{i}"), &mut r, len as u64, code, 0, layout, &|_| {}).await.map(|_| (i, len))
        });
    }
    let mut put = Vec::new();
    while let Some(r) = tasks.join_next().await {
        put.push(r.unwrap().unwrap());
    }
    let mut slots = HashSet::new();
    for &(i, len) in &put {
        let (got, _) = c.client.get(&format!("o{i}"), Shape::Cr, 4096).await.unwrap();
        assert!(got == data(len, i as u64), "o{i}");
        let l = c.client.stat(&format!("o{i}")).await.unwrap();
        for e in l.extents.iter().filter(|e| l.stripes[e.stripe].open) {
            assert!(slots.insert((l.stripes[e.stripe].id, e.index, e.offset)), "o{i}: a slot taken twice");
        }
    }
    // Overwrite one, delete another, while their stripes are open; then seal everything.
    let bytes = data(99_999, 777);
    let mut r = &bytes[..];
    c.client.put_with_layout("o3", &mut r, 99_999, code, 0, layout, &|_| {}).await.unwrap();
    c.client.delete("o5").await.unwrap();
    assert!(c.client.seal().await.unwrap() > 0);
    assert_eq!(c.client.seal().await.unwrap(), 0, "nothing left open");
    for &(i, len) in &put {
        let name = format!("o{i}");
        match i {
            3 => assert!(c.client.get(&name, Shape::Ecpipe, 4096).await.unwrap().0 == bytes),
            5 => assert!(c.client.get(&name, Shape::Ecpipe, 4096).await.is_err()),
            _ => assert!(c.client.get(&name, Shape::Ecpipe, 4096).await.unwrap().0 == data(len, i as u64), "{name}"),
        }
    }
    // Sealed parity is right: every chunk of every object rebuilt by a degraded read
    // equals what was stored.
    for &(i, _) in put.iter().filter(|p| p.0 != 5) {
        let name = format!("o{i}");
        let l = c.client.stat(&name).await.unwrap();
        for e in &l.extents {
            let got = c.client.degraded_read(&name, e.stripe, e.index, Shape::Ppr, 4096).await.unwrap();
            assert_eq!(Some(crc32c::crc32c(&got)), l.stripes[e.stripe].chunks[e.index].crc32c, "{name} {e:?}");
            if l.stripes[e.stripe].small {
                // A small-size bucket slot: the object's piece of it is its own bytes.
                let piece = &got[e.offset as usize..(e.offset + e.len) as usize];
                assert_eq!(Some(crc32c::crc32c(piece)), e.crc32c, "{name} {e:?}");
            }
        }
    }
    // A failing disk flips a bit inside a bucket file, in one object's Clay chunk and in
    // another's small-size bucket piece: reads notice (block checksums), rebuild what they
    // need, and return the stored bytes.
    let mut flipped = Vec::new();
    for &(i, len) in put.iter().filter(|p| p.0 != 5 && p.0 != 3) {
        let l = c.client.stat(&format!("o{i}")).await.unwrap();
        let want_small = flipped.is_empty();
        let Some(e) = l.extents.iter().find(|e| l.stripes[e.stripe].small == want_small) else { continue };
        let loc = &l.stripes[e.stripe].chunks[e.index];
        let slot = loc.bucket.expect("sealed Geo chunks are in buckets");
        let path = dir.path().join(format!("node{}", loc.node)).join(kintsugi_node::bucket::file_name(&slot));
        let at = slot.slot * slot.class + e.offset + e.len / 2;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let mut b = [0u8; 1];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, at).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[b[0] ^ 0x10], at).unwrap();
        flipped.push((i, len));
        if flipped.len() == 2 {
            break;
        }
    }
    assert_eq!(flipped.len(), 2, "a Clay chunk and a piece to damage");
    for &(i, len) in &flipped {
        let (got, rep) = c.client.get(&format!("o{i}"), Shape::Ppr, 4096).await.unwrap();
        assert!(got == data(len, i as u64), "o{i} after a bit flip in its bucket");
        assert!(!rep.degraded.is_empty(), "o{i}: the damaged part was rebuilt");
    }
    c.stop().await;
}
