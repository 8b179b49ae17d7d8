//! The redb store: records survive a reopen, and every index matches a brute-force
//! recomputation from the records after random changes and after a rebuild.
use super::*;
use crate::metadata::records::Piece;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::Shape;
use kintsugi_proto::LayoutSpec;
use rand::{Rng, SeedableRng};

#[test]
fn records_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.redb");
    {
        let m = RedbMeta::open(&path).unwrap();
        let code: CodeSpec = "rs:2,1".parse().unwrap();
        m.apply(vec![
            Change::PutObject(ObjectRecord {
                name: "a".into(),
                size: 5,
                code,
                committed: true,
                stripes: vec![7],
                version: 1,
                created_ms: 0,
                layout: LayoutSpec::Stripe,
                extents: vec![],
                attrs: Default::default(),
                chain: Default::default(),
                inline: None,
            }),
            Change::PutStripe(StripeRecord {
                crcs: vec![Some(1), None, None],
                slot: Some(4),
                small: true,
                pieces: vec![vec![Piece { version: 3, offset: 10, len: 5, crc: Some(9) }]],
                sealing: true,
                class: 64,
                ..StripeRecord::new(7, code, 5, 3, vec![1, 2, 3])
            }),
            Change::PutNode(NodeRecord { id: 2, addr: "x".into(), failed: true, boot: 9, token: "ab".into() }),
            Change::PutPending(PendingRepair { stripe: 7, index: 1, method: Shape::Ppr, slice: 4096 }),
        ])
        .unwrap();
        assert_eq!(m.next_id("stripe").unwrap(), 1);
        assert_eq!(m.next_id("stripe").unwrap(), 2);
    }
    let m = RedbMeta::open(&path).unwrap();
    assert_eq!(m.object("a").unwrap().unwrap().stripes, vec![7]);
    assert_eq!(m.stripe(7).unwrap().unwrap().nodes, vec![1, 2, 3]);
    assert!(m.nodes().unwrap()[0].failed);
    assert_eq!(m.pending().unwrap().len(), 1);
    assert_eq!(m.next_id("stripe").unwrap(), 3);
    m.apply(vec![Change::DeletePending { stripe: 7, index: 1 }]).unwrap();
    assert!(m.pending().unwrap().is_empty());
    assert!(m.object("zzz").unwrap().is_none());
}

/// Every index, as the store answers it.
type Indexes = (
    BTreeMap<NodeId, Vec<NodeChunk>>,
    Vec<(u64, usize)>,
    Vec<u64>,
    Vec<((NodeId, NodeId), u64)>,
    BTreeMap<NodeId, u64>,
    BTreeMap<u64, Vec<String>>,
);

fn indexes(m: &RedbMeta, nodes: &[NodeId], stripes: &[u64]) -> Indexes {
    let mut open: Vec<u64> = m.open_stripes(None).unwrap().iter().map(|s| s.id).collect();
    open.sort_unstable();
    (
        nodes.iter().map(|&n| (n, m.node_chunks(n).unwrap())).collect(),
        m.bad_chunks().unwrap(),
        open,
        m.spread().unwrap(),
        m.held_bytes().unwrap(),
        stripes.iter().map(|&s| (s, m.stripe_objects(s).unwrap())).filter(|(_, v)| !v.is_empty()).collect(),
    )
}

/// The same indexes computed by brute force from every record.
fn brute_force(m: &RedbMeta, nodes: &[NodeId], ids: &[u64]) -> Indexes {
    let stripes = m.stripes_from(0, usize::MAX).unwrap();
    let mut chunks: BTreeMap<NodeId, Vec<NodeChunk>> = nodes.iter().map(|&n| (n, vec![])).collect();
    let (mut bad, mut open) = (vec![], vec![]);
    let mut spread: BTreeMap<(NodeId, NodeId), u64> = BTreeMap::new();
    let mut held: BTreeMap<NodeId, u64> = BTreeMap::new();
    for s in &stripes {
        for (i, &n) in s.nodes.iter().enumerate() {
            let c = NodeChunk {
                stripe: s.id,
                index: i,
                committed: s.crcs[i].is_some(),
                bad: s.bad[i],
                filler: s.is_filler(i),
                whole: s.crcs.iter().all(|c| c.is_some()),
                changed_ms: s.changed_ms,
            };
            chunks.entry(n).or_default().push(c);
            if s.bad[i] {
                bad.push((s.id, i));
            }
            *spread.entry((n, n)).or_default() += 1;
            *held.entry(n).or_default() += s.chunk_len;
            for &b in &s.nodes[i + 1..] {
                *spread.entry((n.min(b), n.max(b))).or_default() += 1;
            }
        }
        if s.open {
            open.push(s.id);
        }
    }
    let mut objects: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut after = String::new();
    loop {
        let page = m.objects_from(&after, false, 7).unwrap();
        let Some(last) = page.last() else { break };
        after = last.name.clone();
        for o in page {
            for s in index::object_stripes(&o) {
                objects.entry(s).or_default().push(o.name.clone());
            }
        }
    }
    for v in objects.values_mut() {
        v.sort();
    }
    objects.retain(|s, _| ids.contains(s));
    (chunks, bad, open, spread.into_iter().collect(), held, objects)
}

#[test]
fn indexes_match_the_records_after_random_changes_and_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.redb");
    let m = RedbMeta::open(&path).unwrap();
    let code: CodeSpec = "rs:3,2".parse().unwrap();
    let nodes: Vec<NodeId> = (0..8).collect();
    let ids: Vec<u64> = (1..=12).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..300 {
        let id = ids[rng.random_range(0..ids.len())];
        let change = match rng.random_range(0..10) {
            0..=4 => {
                let mut pick = nodes.clone();
                for i in 0..5 {
                    let j = rng.random_range(i..pick.len());
                    pick.swap(i, j);
                }
                let mut s = StripeRecord::new(id, code, 30, rng.random_range(1..100), pick[..5].to_vec());
                for i in 0..5 {
                    s.crcs[i] = rng.random_bool(0.7).then_some(i as u32);
                    s.bad[i] = rng.random_bool(0.2);
                }
                s.open = rng.random_bool(0.3);
                s.pg = rng.random_range(0..3);
                if rng.random_bool(0.2) {
                    s.owners = vec![1, crate::metadata::records::FILLER, 0, 0, 0];
                }
                s.changed_ms = round;
                Change::PutStripe(s)
            }
            5 | 6 => Change::DeleteStripe(id),
            7 | 8 => {
                let stripes = (0..rng.random_range(0..4)).map(|_| ids[rng.random_range(0..ids.len())]).collect();
                Change::PutObject(ObjectRecord {
                    name: format!("o{}", rng.random_range(0..6)),
                    size: rng.random_range(0..1000),
                    code,
                    committed: true,
                    stripes,
                    version: round,
                    created_ms: 0,
                    layout: LayoutSpec::Stripe,
                    extents: vec![],
                    attrs: Default::default(),
                    chain: Default::default(),
                    inline: None,
                })
            }
            _ => Change::DeleteObject(format!("o{}", rng.random_range(0..6))),
        };
        m.apply(vec![change]).unwrap();
        assert_eq!(indexes(&m, &nodes, &ids), brute_force(&m, &nodes, &ids), "after change {round}");
    }
    let bytes: u64 = {
        let mut all = 0;
        let mut after = String::new();
        while let Some(last) = m.objects_from(&after, false, 100).unwrap().last().cloned() {
            all += m.objects_from(&after, false, 100).unwrap().iter().map(|o| o.size).sum::<u64>();
            after = last.name;
        }
        all
    };
    assert_eq!(m.counts().unwrap().bytes, bytes);
    let before = indexes(&m, &nodes, &ids);
    // A file from before the indexes: the format counter gone, the index tables empty.
    m.update(&mut |t| t.put(Change::SetCounter(FORMAT_COUNTER.into(), 1))).unwrap();
    {
        let w = m.db.begin_write().unwrap();
        {
            let mut t = RedbTxn::of(&w).unwrap();
            t.node_chunks.retain(|_, _| false).unwrap();
            t.spread.retain(|_, _| false).unwrap();
            t.stripe_objects.retain(|_, _| false).unwrap();
        }
        w.commit().unwrap();
    }
    drop(m);
    let m = RedbMeta::open(&path).unwrap();
    assert_eq!(indexes(&m, &nodes, &ids), before);
    assert_eq!(m.counts().unwrap().bytes, bytes);
}

/// An update that waits for the store's one writer (here, another update holding it for
/// a second, as a put of many stripes does) does not hold its async worker meanwhile: on a
/// runtime of one worker, a task that ticks every 10 ms keeps ticking. The coordinator's
/// collector once waited like this on both workers, and no heartbeat was heard for 13 s.
#[test]
fn an_update_waiting_for_the_writer_leaves_its_worker_to_other_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let m = std::sync::Arc::new(RedbMeta::open(&dir.path().join("meta.redb")).unwrap());
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = {
        let m = m.clone();
        std::thread::spawn(move || {
            m.update(&mut |t| {
                held_tx.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1000));
                t.put(Change::SetCounter("held".into(), 1))
            })
            .unwrap()
        })
    };
    held_rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let ticks = rt.block_on(async {
        let ticker = tokio::spawn(async {
            let mut ticks = 0;
            let start = tokio::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_millis(800) {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                ticks += 1;
            }
            ticks
        });
        // Let the ticker start on the one worker, then wait for the writer on it too.
        tokio::task::yield_now().await;
        let waiter = tokio::spawn({
            let m = m.clone();
            async move { m.update(&mut |t| t.put(Change::SetCounter("waited".into(), 1))) }
        });
        let ticks = ticker.await.unwrap();
        waiter.await.unwrap().unwrap();
        ticks
    });
    holder.join().unwrap();
    // Unhindered, about 70 ticks in 800 ms; a held worker gives none until the writer is free.
    assert!(ticks >= 20, "the ticker ticked {ticks} times in 800 ms while an update waited");
    m.update(&mut |t| {
        assert_eq!((t.counter("held")?, t.counter("waited")?), (Some(1), Some(1)));
        Ok(())
    })
    .unwrap();
}

/// The child of `acknowledged_updates_survive_a_kill_9_during_group_commits`: four threads
/// update counters as fast as they can and print each value once its update returned.
#[test]
fn group_commit_child() {
    let Ok(path) = std::env::var("KINTSUGI_GROUP_COMMIT_CHILD") else { return };
    let m = std::sync::Arc::new(RedbMeta::open(std::path::Path::new(&path)).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                // Counting on from where the last round's child was killed.
                let mut from = None;
                m.update(&mut |x| {
                    from = x.counter(&format!("k{t}"))?;
                    Ok(())
                })
                .unwrap();
                for i in from.unwrap_or(0) + 1.. {
                    m.update(&mut |x| x.put(Change::SetCounter(format!("k{t}"), i))).unwrap();
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{t} {i}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// A non-durable commit lives only in its process's memory (redb reopens at the last
/// durable one), so a kill -9 tells an update acknowledged before its group's fsync from
/// one acknowledged after: every value a writer printed is there after the kill, each round.
#[test]
fn acknowledged_updates_survive_a_kill_9_during_group_commits() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.redb");
    let exe = std::env::current_exe().unwrap();
    let mut acked = [0u64; 4];
    for round in 0..3 {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "metadata::redb_store::tests::group_commit_child", "--nocapture", "--test-threads", "1"])
            .env("KINTSUGI_GROUP_COMMIT_CHILD", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        // Killed at a different depth each round, mid-stream.
        while seen < 300 + 250 * round {
            let Some(Ok(line)) = lines.next() else { panic!("the child stopped after {seen} updates") };
            let Some((t, v)) = line.split_once(' ') else { continue };
            if let (Ok(t), Ok(v)) = (t.parse::<usize>(), v.parse::<u64>()) {
                acked[t] = acked[t].max(v);
                seen += 1;
            }
        }
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let m = RedbMeta::open(&path).unwrap();
        for (t, &want) in acked.iter().enumerate() {
            let mut got = None;
            m.update(&mut |x| {
                got = x.counter(&format!("k{t}"))?;
                Ok(())
            })
            .unwrap();
            assert!(got.unwrap_or(0) >= want, "round {round}: writer {t} was told {want} was stored, the store has {got:?}");
        }
    }
}

/// An inline version's bytes live beside its record and go exactly when the version is
/// discarded (a delete, an overwrite), not when its record moves (kept under another name).
#[test]
fn inline_bytes_go_with_their_version() {
    let dir = tempfile::tempdir().unwrap();
    let m = RedbMeta::open(&dir.path().join("meta.redb")).unwrap();
    let record = |version: u64| ObjectRecord {
        name: "k".into(),
        size: 3,
        code: "rs:2,1".parse().unwrap(),
        committed: true,
        stripes: vec![],
        version,
        created_ms: 0,
        layout: LayoutSpec::Stripe,
        extents: vec![],
        attrs: Default::default(),
        chain: Default::default(),
        inline: Some(kintsugi_proto::crc::crc32c(b"abc")),
    };
    for v in [1, 2] {
        m.update(&mut |t| {
            t.put(Change::PutInline { version: v, data: b"abc".to_vec() })?;
            t.put(Change::PutObject(ObjectRecord { name: format!("k{v}"), ..record(v) }))
        })
        .unwrap();
    }
    // Moved under another name: the bytes stay.
    m.update(&mut |t| {
        t.put(Change::DeleteObject("k1".into()))?;
        t.put(Change::PutObject(ObjectRecord { name: "moved".into(), ..record(1) }))
    })
    .unwrap();
    assert_eq!(m.inline(1).unwrap().as_deref(), Some(&b"abc"[..]));
    m.update(&mut |t| {
        let o = t.object("moved")?.unwrap();
        t.discard_version(&o, 0, false)?;
        t.put(Change::DeleteObject("moved".into()))
    })
    .unwrap();
    assert_eq!(m.inline(1).unwrap(), None);
    assert_eq!(m.inline(2).unwrap().as_deref(), Some(&b"abc"[..]), "another version's bytes stay");
}
