//! Failures of every kind, told apart by their variants: a corrupt, a missing helper chunk
//! and a dead helper node, each through every repair shape's relay chain; and the
//! coordinator's decisions that rest on them (report a chunk, re-plan a repair, refuse a
//! put, answer not found or unavailable). Run twice: as is (`typed_faults`), and with every
//! message on the wire reworded (`typed_faults_reworded`), which must change nothing.

use crate::common::{cluster, data};
use kintsugi_codes::{Code, CodeSpec};
use kintsugi_node::{exec, NodeConfig, NodeHandle, Shaper};
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{shapes, RepairTask, Shape, ALL_SHAPES};
use kintsugi_proto::graph_faults::{bad_chunks_named, unanswering};
use kintsugi_proto::rpc::request;
use kintsugi_proto::{
    send, write_frame, Assignment, ChunkId, ErrorKind, Fault, Kind, NodeId, NodeRequest, NodeResponse, Scarce, WireError, READER,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const T: Duration = Duration::from_secs(10);

/// Whether this process rewords the messages it sends, as the test binary asked.
fn reworded() -> bool {
    kintsugi_proto::wire_error::reword_for_tests()
}

async fn put(addr: &str, chunk: &ChunkId, bytes: &[u8]) {
    let mut s = kintsugi_proto::auth::connect(addr, T).await.unwrap();
    let crc32c = kintsugi_proto::crc::crc32c(bytes);
    send(&mut s, &NodeRequest::PutChunk { chunk: chunk.clone(), len: bytes.len() as u64, crc32c, bucket: None, sub_chunks: 0 })
        .await
        .unwrap();
    write_frame(&mut s, Kind::Data, bytes).await.unwrap();
    s.flush().await.unwrap();
    assert_eq!(kintsugi_proto::recv::<_, NodeResponse>(&mut s).await.unwrap(), NodeResponse::Ok);
}

fn stripe(code: &dyn Code, len: usize, seed: u64) -> Vec<Vec<u8>> {
    let d = data(len * code.k(), seed);
    let mut s: Vec<Option<Vec<u8>>> = d.chunks(len).map(|c| Some(c.to_vec())).collect();
    s.resize(code.n(), None);
    code.decode(&mut s).unwrap();
    s.into_iter().map(Option::unwrap).collect()
}

fn flip_a_byte(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(path, &bytes).unwrap();
}

/// What can go wrong with one helper of a degraded read.
#[derive(Clone, Copy, Debug)]
enum Harm {
    Corrupt,
    Missing,
    Dead,
}

/// Nodes 0..9 hold an RS(6,3) stripe each time; node i's files are under `dir/n{i}`. Every
/// shape reads chunk 0 at the test (the sink) while one helper is harmed; the error that
/// reaches the sink, relayed by the nodes between, names the harmed chunk or node.
pub async fn relay_chain_faults() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |i: u32| NodeConfig { id: i, data_dir: dir.path().join(format!("n{i}")), io_timeout_ms: 3000, ..Default::default() };
    let mut nodes: Vec<Option<NodeHandle>> = Vec::new();
    for i in 0..9 {
        nodes.push(Some(kintsugi_node::start(cfg(i)).await.unwrap()));
    }
    let addr = |nodes: &[Option<NodeHandle>], i: usize| nodes[i].as_ref().unwrap().addr.to_string();
    let code = "rs:6,3".parse::<CodeSpec>().unwrap().build().unwrap();
    let len = 50_001;

    // The words on the wire are the mode's: reworded or not, the kind and fault stay.
    let r = request(&addr(&nodes, 0), &NodeRequest::GetChunk { chunk: ChunkId::new(77, 7), range: None }, T).await.unwrap();
    let NodeResponse::Error(e) = r else { panic!("a missing chunk was served: {r:?}") };
    assert_eq!(e.message().starts_with("[reworded]"), reworded(), "{e}");
    assert_eq!((e.kind(), e.faults.clone()), (ErrorKind::NotFound, vec![Fault::MissingChunk { chunk: ChunkId::new(77, 7) }]));

    let mut sid = 0;
    for shape in ALL_SHAPES {
        for harm in [Harm::Corrupt, Harm::Missing, Harm::Dead] {
            sid += 1;
            let shards = stripe(code.as_ref(), len, sid);
            let peers: BTreeMap<NodeId, String> = (0..nodes.len()).map(|i| (i as NodeId, addr(&nodes, i))).collect();
            for (i, s) in shards.iter().enumerate() {
                put(&peers[&(i as u32)], &ChunkId::new(sid, i), s).await;
            }
            let avail: Vec<usize> = (1..code.n()).collect();
            let helpers = code.choose_helpers(0, &avail).unwrap();
            let eq = code.repair_equation(0, &helpers).unwrap();
            let terms: Vec<ChunkId> = eq.helpers().iter().map(|&h| ChunkId::new(sid, h)).collect();
            let helper_nodes: Vec<u32> = eq.helpers().iter().map(|&h| h as u32).collect();
            // The first helper: the head of ECPipe's chain, a leaf of PPR's tree, the
            // farthest from the sink.
            let victim = helper_nodes[0];
            let chunk = ChunkId::new(sid, victim as usize);
            let file = dir.path().join(format!("n{victim}")).join(format!("{chunk}.chunk"));
            match harm {
                Harm::Corrupt => flip_a_byte(&file),
                Harm::Missing => std::fs::remove_file(&file).unwrap(),
                Harm::Dead => nodes[victim as usize].take().unwrap().stop().await,
            }
            let task = RepairTask { equation: eq.clone(), helper_nodes, destination: READER };
            let a = Assignment {
                repair: sid,
                graph: shapes::build(shape, &task).unwrap(),
                chunk_len: len as u64,
                slice_len: 4096,
                term_chunks: terms.clone(),
                peers: peers.clone(),
                store: None,
                timeslots: Vec::new(),
                gate_batch: None,
                term_offset: None,
            };
            let wire = Box::new(kintsugi_node::wire::job_to_wire(&a));
            for n in a.graph.vertices.iter().map(|v| v.node).filter(|&n| n != READER).collect::<BTreeSet<_>>() {
                let r = request(&peers[&n], &NodeRequest::RunRepair { assignment: wire.clone() }, T).await;
                assert!(matches!(harm, Harm::Dead) && n == victim || r == Ok(NodeResponse::Ok), "{shape} {harm:?}: node {n}: {r:?}");
            }
            let units = exec::check_job(&a).unwrap();
            let sunk = exec::run_sink(&a, &units, None, Arc::new(Shaper::default()), Arc::default(), T).await;
            let err = sunk.err().unwrap_or_else(|| panic!("{shape} {harm:?}: the read succeeded"));
            let what = format!("{shape} {harm:?}: {err:?}");
            match harm {
                Harm::Corrupt => {
                    assert!(err.faults.contains(&Fault::CorruptChunk { chunk: chunk.clone() }), "{what}");
                    assert_eq!(bad_chunks_named(&err, &terms).into_iter().map(|(c, _)| c).collect::<Vec<_>>(), vec![chunk], "{what}");
                }
                Harm::Missing => {
                    assert!(err.faults.contains(&Fault::MissingChunk { chunk: chunk.clone() }), "{what}");
                    assert_eq!(bad_chunks_named(&err, &terms).into_iter().map(|(c, _)| c).collect::<Vec<_>>(), vec![chunk], "{what}");
                }
                Harm::Dead => {
                    assert!(err.bad_nodes().any(|n| n == victim), "{what}");
                    assert!(bad_chunks_named(&err, &terms).is_empty(), "a dead node's chunks are not corrupt: {what}");
                    assert_eq!(unanswering(&peers).await, vec![victim], "{what}");
                    // Back on its data directory, at a new address, for the next case.
                    nodes[victim as usize] = Some(kintsugi_node::start(cfg(victim)).await.unwrap());
                }
            }
        }
    }
    for n in nodes.into_iter().flatten() {
        n.stop().await;
    }
}

/// The coordinator's decisions that once read words: each made on the variant.
pub async fn coordinator_faults() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), 8, None).await;
    let code: CodeSpec = "rs:4,2".parse().unwrap();

    // Refusals by kind.
    let e = c.client.get("nothing here", Shape::Cr, 4096).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = c.client.put(&"n".repeat(kintsugi_coord::MAX_NAME + 1), b"x", code, 0).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidName, "{e}");
    let e = c.client.put("wide", b"x", "rs:6,3".parse().unwrap(), 0).await.unwrap_err();
    assert_eq!(
        (e.kind(), e.shortfall.map(|s| (s.what, s.needed, s.available))),
        (ErrorKind::BadRequest, Some((Scarce::Nodes, 9, 8))),
        "{e}"
    );

    let corrupt = |layout: &kintsugi_proto::ObjectLayout, i: usize| {
        let loc = &layout.stripes[0].chunks[i];
        flip_a_byte(&dir.path().join(format!("node{}", loc.node)).join(format!("{}.chunk", loc.chunk)));
    };

    // A corrupt data chunk met by a direct read, and a corrupt parity chunk met by the
    // degraded read that rebuilds it (through ECPipe's chain): each reported on its fault,
    // neither served, both lost in the coordinator's books.
    let body = data(200_003, 3);
    c.client.put("a", &body, code, 0).await.unwrap();
    let l = c.client.stat("a").await.unwrap();
    corrupt(&l, 1);
    corrupt(&l, 4);
    let (got, rep) = c.client.get("a", Shape::Ecpipe, 4096).await.unwrap();
    assert!(got == body, "a corrupt chunk was served");
    assert!(rep.degraded.iter().any(|&(s, i, _)| (s, i) == (0, 1)), "{rep:?}");
    let lost: Vec<bool> = c.client.stat("a").await.unwrap().stripes[0].chunks.iter().map(|x| x.lost).collect();
    assert_eq!(lost, [false, true, false, false, true, false], "the reads reported exactly the corrupt chunks");

    // Repairs whose helpers turn out corrupt: the coordinator learns which from the fault,
    // marks it bad, re-plans, and rebuilds both. Each object has another chunk corrupted
    // (the one 1, 2, ... places after the dead node's), so whichever helpers a plan picks,
    // some first plans meet a corrupt one.
    let names: Vec<String> = (0..5).map(|j| format!("c{j}")).collect();
    for (j, n) in names.iter().enumerate() {
        c.client.put(n, &data(200_005, 10 + j as u64), code, 0).await.unwrap();
    }
    let victim = c.client.stat("c0").await.unwrap().stripes[0].chunks[0].node;
    let mut corrupted = Vec::new();
    for (j, n) in names.iter().enumerate() {
        let l = c.client.stat(n).await.unwrap();
        if let Some(v) = l.stripes[0].chunks.iter().position(|x| x.node == victim) {
            corrupt(&l, (v + 1 + j) % 6);
            corrupted.push((n.clone(), (v + 1 + j) % 6));
        }
    }
    c.kill(victim as usize).await;
    c.client.fail(victim).await.unwrap();
    let r = c.client.repair(Shape::Ecpipe, 4096, 2, Scheduler::Index).await.unwrap();
    assert_eq!(r.failed, 0, "{:?}", r.errors);
    let r = c.client.repair(Shape::Ppr, 4096, 2, Scheduler::Index).await.unwrap();
    assert_eq!(r.failed, 0, "{:?}", r.errors);
    assert_eq!(c.client.status().await.unwrap().lost_chunks, 0);
    // A corrupt chunk a plan met was marked bad and rebuilt in place: its node serves it
    // intact now. One no plan met is still corrupt (the direct reads below find it).
    let mut rebuilt = 0;
    for (n, i) in &corrupted {
        let loc = c.client.stat(n).await.unwrap().stripes[0].chunks[*i].clone();
        match kintsugi_client::client::get_chunk(&loc, loc_len(&c, n).await, T, &Shaper::default()).await {
            Ok(_) => rebuilt += 1,
            Err(e) => assert!(e.faults.contains(&Fault::CorruptChunk { chunk: loc.chunk.clone() }), "{e:?}"),
        }
    }
    assert!(rebuilt > 0, "no repair plan met one of the corrupt helpers {corrupted:?}");
    assert!(c.client.get("a", Shape::Cr, 4096).await.unwrap().0 == body);
    for (j, n) in names.iter().enumerate() {
        assert!(c.client.get(n, Shape::Cr, 4096).await.unwrap().0 == data(200_005, 10 + j as u64), "{n}");
    }

    // Too few healthy chunks: unavailable, the counts said.
    c.client.put("b", &data(100_000, 4), code, 0).await.unwrap();
    let l = c.client.stat("b").await.unwrap();
    let holders: Vec<NodeId> = l.stripes[0].chunks.iter().map(|x| x.node).collect();
    for &n in &holders[..3] {
        c.kill(n as usize).await;
        c.client.fail(n).await.unwrap();
    }
    let e = c.client.get("b", Shape::Cr, 4096).await.unwrap_err();
    assert!(e.is_retryable() && e.is_short_of(Scarce::Chunks), "{e:?}");
    assert_eq!(e.shortfall.map(|s| (s.needed, s.available)), Some((4, 3)), "{e:?}");
    c.stop().await;
}

async fn loc_len(c: &crate::common::Cluster, name: &str) -> u64 {
    c.client.stat(name).await.unwrap().stripes[0].chunk_len
}

/// A node error relayed once more keeps what a decision needs.
pub fn context_keeps_the_variant() {
    let e = WireError::new(ErrorKind::Corrupt, "x").with_fault(Fault::CorruptChunk { chunk: ChunkId::new(1, 1) });
    let relayed = e.clone().context("node 3").context("node 4");
    assert_eq!((relayed.kind(), relayed.faults), (e.kind(), e.faults));
}
