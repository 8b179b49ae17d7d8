//! Objects of at most `INLINE_MAX` bytes are kept in the metadata (no chunk file on any
//! node): they read back byte-exact whole and in odd ranges, through overwrites in both
//! directions (inline by striped, striped by inline), kept versions and their deletion, a
//! coordinator restart, and with every node down; a part kept inline is never composed,
//! and a coordinator told to keep none stripes them as before.

mod common;

use common::{cfg, cluster_with, data};
use kintsugi_client::{CommitTerms, ErrorKind};
use kintsugi_codes::CodeSpec;
use kintsugi_coord::CoordConfig;
use kintsugi_plan::Shape;
use kintsugi_proto::{LayoutSpec, ObjectLayout, VersionRef, Versioning, INLINE_MAX};

async fn put_on(c: &kintsugi_client::Client, name: &str, bytes: &[u8], terms: CommitTerms) -> ObjectLayout {
    let mut terms = Some(terms);
    c.put_with_attrs(name, &mut &bytes[..], bytes.len() as u64, CodeSpec::Rs { k: 4, m: 2 }, 0, LayoutSpec::Stripe, &|_| {}, &mut || {
        Ok(terms.take().unwrap_or_default())
    })
    .await
    .unwrap()
}

async fn read(c: &kintsugi_client::Client, name: &str) -> Vec<u8> {
    c.get(name, Shape::Cr, 0).await.unwrap().0
}

async fn read_range(c: &kintsugi_client::Client, name: &str, offset: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    c.get_range_into(name, offset, len, &mut out, Shape::Cr, 0, &|_| {}).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_objects_live_in_the_metadata_and_read_back_byte_exact_through_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { gc_grace_ms: 0, gc_interval_ms: 100, ..cfg(dir.path(), "127.0.0.1:0") };
    let mut c = cluster_with(conf.clone(), dir.path(), 6, None).await;
    let max = INLINE_MAX as usize;
    let mut kept = Vec::new();
    for (i, len) in [0, 1, 4095, 4096, 9_999, max].into_iter().enumerate() {
        let bytes = data(len, 100 + i as u64);
        let name = format!("small/{i}");
        let l = put_on(&c.client, &name, &bytes, CommitTerms::default()).await;
        assert!(l.inline.is_some() && l.stripes.is_empty(), "{len} bytes: {l:?}");
        assert_eq!(c.chunk_files(), 0, "{len} bytes wrote chunk files");
        assert_eq!(c.client.stat(&name).await.unwrap().size, len as u64);
        assert_eq!(read(&c.client, &name).await, bytes, "{len} bytes");
        // Odd ranges, a range past the end cut at it.
        for (off, n) in [(0, 1), (1, 4093), (len as u64 / 3, 777), (len as u64 / 2, u64::MAX)] {
            if off <= len as u64 {
                let end = (off.saturating_add(n)).min(len as u64) as usize;
                assert_eq!(read_range(&c.client, &name, off, n).await, bytes[off as usize..end], "{len} bytes, {off}+{n}");
            }
        }
        kept.push((name, bytes));
    }
    // One byte more is striped as before.
    let big = data(max + 1, 7);
    let l = put_on(&c.client, "big", &big, CommitTerms::default()).await;
    assert!(l.inline.is_none() && !l.stripes.is_empty());
    let striped_files = c.chunk_files();
    assert!(striped_files >= 6, "{striped_files} chunk files for a striped object");

    // Inline replaced by striped and back; the striped version's chunks are collected.
    let name = "flip";
    let small = data(3000, 1);
    put_on(&c.client, name, &small, CommitTerms::default()).await;
    let large = data(200_000, 2);
    put_on(&c.client, name, &large, CommitTerms::default()).await;
    assert_eq!(read(&c.client, name).await, large);
    let small2 = data(2000, 3);
    put_on(&c.client, name, &small2, CommitTerms::default()).await;
    assert_eq!(read(&c.client, name).await, small2);
    assert_eq!(c.settle_to(striped_files).await, striped_files, "the replaced striped version's chunks stay");

    // Kept versions: every one reads back; deleting one by its id leaves the others.
    let versioned = CommitTerms { versioning: Versioning::Enabled, ..Default::default() };
    let mut versions = Vec::new();
    for i in 0..3u64 {
        let bytes = data(1000 + i as usize * 500, 200 + i);
        let l = put_on(&c.client, "ver", &bytes, versioned.clone()).await;
        assert!(l.versioned && l.inline.is_some());
        versions.push((l.version, bytes));
    }
    for (v, bytes) in &versions {
        assert_eq!(&c.client.get_kept("ver", Some(VersionRef::Id(*v)), Shape::Cr, 0).await.unwrap().0, bytes);
    }
    c.client.delete_version("ver", VersionRef::Id(versions[1].0)).await.unwrap().expect("it existed");
    let gone = c.client.get_kept("ver", Some(VersionRef::Id(versions[1].0)), Shape::Cr, 0).await.unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::NotFound, "{gone}");
    assert_eq!(c.client.get_kept("ver", Some(VersionRef::Id(versions[0].0)), Shape::Cr, 0).await.unwrap().0, versions[0].1);
    assert_eq!(read(&c.client, "ver").await, versions[2].1);
    assert!(c.client.delete("small/1").await.unwrap());
    assert_eq!(c.client.get("small/1", Shape::Cr, 0).await.unwrap_err().kind(), ErrorKind::NotFound);
    kept.remove(1);

    // A part kept inline cannot be composed; a striped one can.
    let part = data(5000, 9);
    let p = put_on(&c.client, "part-inline", &part, CommitTerms::default()).await;
    let err = c.client.compose("whole", vec![("part-inline".into(), p.version)], CommitTerms::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadRequest, "{err}");
    let p = put_on(&c.client, "part-striped", &part, CommitTerms { striped: true, ..Default::default() }).await;
    assert!(p.inline.is_none());
    c.client.compose("whole", vec![("part-striped".into(), p.version)], CommitTerms::default()).await.unwrap();
    assert_eq!(read(&c.client, "whole").await, part);

    // The coordinator restarts on its metadata: everything acknowledged is there.
    c.coord.take().unwrap().stop().await;
    let coord = kintsugi_coord::start(CoordConfig { listen: c.coord_addr.clone(), ..conf.clone() }).await.unwrap();
    c.coord = Some(coord);
    for (name, bytes) in &kept {
        assert_eq!(&read(&c.client, name).await, bytes, "{name} after a restart");
    }
    assert_eq!(read(&c.client, "flip").await, small2);

    // Every node down: the objects kept in the metadata still read.
    for i in 0..6 {
        c.kill(i).await;
    }
    for (name, bytes) in &kept {
        assert_eq!(&read(&c.client, name).await, bytes, "{name} with every node down");
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_keeps_no_object_inline_stripes_small_ones() {
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { inline_objects: Some(false), ..cfg(dir.path(), "127.0.0.1:0") };
    let c = cluster_with(conf, dir.path(), 6, None).await;
    for i in 0..3u64 {
        let bytes = data(4096, i);
        let l = put_on(&c.client, &format!("o{i}"), &bytes, CommitTerms::default()).await;
        assert!(l.inline.is_none() && l.stripes.len() == 1, "{l:?}");
        assert_eq!(read(&c.client, &format!("o{i}")).await, bytes);
    }
    assert!(c.chunk_files() >= 3 * 6);
    c.stop().await;
}
