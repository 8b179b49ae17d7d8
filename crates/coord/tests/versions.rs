//! Kept versions on a real cluster are objects like any other: with a node down every
//! version of an RS(6,3) and a Clay(6,3,8) object reads byte-exact (degraded), a full-node
//! repair rebuilds their chunks too (0 lost, every version read direct afterwards), and
//! deleting one version by its id frees exactly its chunk files on the nodes.

mod common;

use common::{cfg, cluster_with, data};
use kintsugi_client::CommitTerms;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::CoordConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use kintsugi_proto::{LayoutSpec, VersionRef, Versioning};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_survives_a_node_loss_and_its_repair_and_a_delete_frees_exactly_its_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { gc_grace_ms: 0, gc_interval_ms: 100, ..cfg(dir.path(), "127.0.0.1:0") };
    // Ten nodes: a 9-wide code leaves one to rebuild on.
    let mut c = cluster_with(conf, dir.path(), 10, None).await;
    let mut versions = Vec::new();
    for (ci, code) in ["rs:6,3", "clay:6,3,8"].into_iter().enumerate() {
        let code: CodeSpec = code.parse().unwrap();
        let name = format!("b{ci}/k");
        for i in 0..4u64 {
            // Odd sizes, several stripes each (64 KiB chunks).
            let bytes = data(300_000 + 70_001 * i as usize, 10 * ci as u64 + i);
            let terms = CommitTerms { versioning: Versioning::Enabled, ..Default::default() };
            let mut terms = Some(terms);
            let l = c
                .client
                .put_with_attrs(&name, &mut bytes.as_slice(), bytes.len() as u64, code, 0, LayoutSpec::Stripe, &|_| {}, &mut || {
                    Ok(terms.take().unwrap_or_default())
                })
                .await
                .unwrap();
            assert!(l.versioned);
            versions.push((name.clone(), l.version, bytes));
            if i == 1 {
                // A delete marker among them changes nothing below it.
                c.client.delete_versioned(&name, Versioning::Enabled).await.unwrap().expect("a marker");
            }
        }
    }
    // Kill the node holding the most chunks of the kept versions.
    let victim = {
        let mut held = std::collections::BTreeMap::<u32, usize>::new();
        for (name, v, _) in &versions {
            let l = c.client.stat_version(name, Some(VersionRef::Id(*v))).await.unwrap();
            for s in &l.stripes {
                for ch in &s.chunks {
                    *held.entry(ch.node).or_default() += 1;
                }
            }
        }
        held.into_iter().max_by_key(|(_, n)| *n).unwrap().0
    };
    c.kill(victim as usize).await;
    c.client.fail(victim).await.unwrap();
    let mut degraded = 0;
    for (name, v, bytes) in &versions {
        let (got, rep) = c.client.get_kept(name, Some(VersionRef::Id(*v)), Shape::Ppr, 16 << 10).await.unwrap();
        assert!(got == *bytes, "version {v} of {name} with node {victim} down");
        degraded += rep.degraded.len();
    }
    assert!(degraded > 0, "node {victim}'s chunks were read through degraded reads");
    let r = c.client.repair(Shape::Cr, 16 << 10, 8, Scheduler::Random).await.unwrap();
    assert_eq!(r.failed, 0, "{r:?}");
    let s = c.client.status().await.unwrap();
    assert_eq!(s.lost_chunks, 0, "every version's chunks rebuilt: {r:?}");
    for (name, v, bytes) in &versions {
        let (got, rep) = c.client.get_kept(name, Some(VersionRef::Id(*v)), Shape::Cr, 16 << 10).await.unwrap();
        assert!(got == *bytes, "version {v} of {name} after the repair");
        assert!(rep.degraded.is_empty(), "version {v} of {name} reads direct after the repair");
    }
    // Deleting one kept version frees exactly its chunk files, and no other version's.
    let (name, v, _) = &versions[1];
    let l = c.client.stat_version(name, Some(VersionRef::Id(*v))).await.unwrap();
    let its: u64 = l.stripes.iter().map(|s| s.chunks.len() as u64).sum();
    let before = c.settle_to(c.chunk_files()).await;
    let gone = c.client.delete_version(name, VersionRef::Id(*v)).await.unwrap().expect("it existed");
    assert_eq!(gone.version, *v);
    assert_eq!(c.settle_to(before - its).await, before - its, "exactly the {its} chunk files of version {v}");
    for (n, w, bytes) in versions.iter().filter(|(_, w, _)| w != v) {
        let (got, rep) = c.client.get_kept(n, Some(VersionRef::Id(*w)), Shape::Cr, 4096).await.unwrap();
        assert!(got == *bytes && rep.degraded.is_empty(), "version {w} of {n} keeps every chunk");
    }
    assert_eq!(
        c.client.get_kept(name, Some(VersionRef::Id(*v)), Shape::Cr, 4096).await.unwrap_err().kind(),
        kintsugi_client::ErrorKind::NotFound
    );
    c.stop().await;
}
