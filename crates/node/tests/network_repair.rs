//! Real node servers on loopback run every repair shape over TCP: degraded reads (the test
//! is the sink) and full-node repairs (a node stores the chunk), byte for byte, shaped and
//! unshaped; and a node survives malformed frames.

use kintsugi_codes::{Code, CodeSpec};
use kintsugi_node::{exec, start, NodeConfig, NodeHandle, Shaper};
use kintsugi_plan::{shapes, RepairTask, Shape, ALL_SHAPES};
use kintsugi_proto::{send, write_frame, Assignment, ChunkId, ErrorKind, Fault, Kind, NodeRequest, NodeResponse, StoreSpec, READER};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const T: Duration = Duration::from_secs(10);

async fn cluster(n: usize, dir: &std::path::Path, link: Option<f64>) -> Vec<NodeHandle> {
    cluster_with(n, dir, |_, cfg| {
        cfg.uplink = link;
        cfg.downlink = link;
    })
    .await
}

/// Nodes 0..n, each configured by `tweak` (its id, its config).
async fn cluster_with(n: usize, dir: &std::path::Path, tweak: impl Fn(u32, &mut NodeConfig)) -> Vec<NodeHandle> {
    let mut nodes = Vec::new();
    for i in 0..n as u32 {
        let mut cfg = NodeConfig { id: i, data_dir: dir.join(format!("n{i}")), ..Default::default() };
        tweak(i, &mut cfg);
        nodes.push(start(cfg).await.unwrap());
    }
    nodes
}

fn peers_of(nodes: &[NodeHandle]) -> BTreeMap<u32, String> {
    nodes.iter().map(|n| (n.id, n.addr.to_string())).collect()
}

/// Stores chunk i of stripe `id` on node i.
async fn put_stripe(peers: &BTreeMap<u32, String>, id: u64, shards: &[Vec<u8>]) {
    for (i, s) in shards.iter().enumerate() {
        put(&peers[&(i as u32)], &ChunkId::new(id, i), s).await;
    }
}

async fn put(addr: &str, chunk: &ChunkId, data: &[u8]) {
    let mut s = kintsugi_proto::auth::connect(addr, Duration::from_secs(10)).await.unwrap();
    send(
        &mut s,
        &NodeRequest::PutChunk { chunk: chunk.clone(), len: data.len() as u64, crc32c: crc32c::crc32c(data), bucket: None, sub_chunks: 0 },
    )
    .await
    .unwrap();
    for piece in data.chunks(100_000) {
        write_frame(&mut s, Kind::Data, piece).await.unwrap();
    }
    s.flush().await.unwrap();
    let r: NodeResponse = kintsugi_proto::recv(&mut s).await.unwrap();
    assert_eq!(r, NodeResponse::Ok);
}

/// Sends the plan to every node of its graph (the reader has no address) and expects Ok.
async fn dispatch(a: &kintsugi_node::Job) {
    let wire = Box::new(kintsugi_node::wire::job_to_wire(a));
    for n in a.graph.vertices.iter().map(|v| v.node).filter(|&n| n != READER).collect::<std::collections::BTreeSet<_>>() {
        let r = kintsugi_proto::rpc::request(&a.peers[&n], &NodeRequest::RunRepair { assignment: wire.clone() }, T).await.unwrap();
        assert_eq!(r, NodeResponse::Ok, "plan {} on node {n}", a.repair);
    }
}

fn stripe(code: &dyn Code, len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut s: Vec<Option<Vec<u8>>> = (0..code.k()).map(|_| Some((0..len).map(|_| rng.random()).collect())).collect();
    s.resize(code.n(), None);
    code.decode(&mut s).unwrap();
    s.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shape_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster(12, dir.path(), None).await;
    let peers = peers_of(&nodes);
    let mut repair = 1;
    for (spec, len, slice) in
        [("rs:6,3", 100_003usize, 4096u64), ("lrc:6,2,2", 65_536, 1000), ("rs:3,2", 10, 1), ("clay:6,3,8", 27 * 1001, 300)]
    {
        let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
        let shards = stripe(code.as_ref(), len, repair);
        let sid = repair;
        put_stripe(&peers, sid, &shards).await;
        let lost = 1;
        let avail: Vec<usize> = (0..code.n()).filter(|&i| i != lost).collect();
        let helpers = code.choose_helpers(lost, &avail).unwrap();
        let eq = code.repair_equation(lost, &helpers).unwrap();
        let term_chunks: Vec<ChunkId> = eq.helpers().iter().map(|&h| ChunkId::new(sid, h)).collect();
        let helper_nodes: Vec<u32> = eq.helpers().iter().map(|&h| h as u32).collect();
        for shape in ALL_SHAPES {
            // Degraded read: this test is the sink.
            let task = RepairTask { equation: eq.clone(), helper_nodes: helper_nodes.clone(), destination: READER };
            let graph = shapes::build(shape, &task).unwrap();
            let a = Assignment {
                repair,
                graph,
                chunk_len: len as u64,
                slice_len: slice,
                term_chunks: term_chunks.clone(),
                peers: peers.clone(),
                store: None,
                timeslots: Vec::new(),
                gate_batch: None,
                term_offset: None,
            };
            repair += 1;
            dispatch(&a).await;
            let units = exec::check_job(&a).unwrap();
            let got = exec::run_sink(&a, &units, None, Arc::new(Shaper::default()), Arc::default(), T).await.unwrap();
            assert_eq!(got, shards[lost], "{spec} {shape} degraded read");

            // Full-node repair: node 11 (outside the stripe) stores the chunk.
            let dest = 11u32;
            let task = RepairTask { equation: eq.clone(), helper_nodes: helper_nodes.clone(), destination: dest };
            let graph = shapes::build(shape, &task).unwrap();
            let target = ChunkId::new(1000 + repair, lost);
            let store = Some(StoreSpec { chunk: target.clone(), crc32c: crc32c::crc32c(&shards[lost]), new_parity: false, bucket: None });
            let a = Assignment {
                repair,
                graph,
                chunk_len: len as u64,
                slice_len: slice,
                term_chunks: term_chunks.clone(),
                peers: peers.clone(),
                store,
                timeslots: Vec::new(),
                gate_batch: None,
                term_offset: None,
            };
            repair += 1;
            dispatch(&a).await;
            let r = kintsugi_proto::rpc::request(&peers[&dest], &NodeRequest::WaitRepair { repair: a.repair, timeout_ms: 10_000 }, T)
                .await
                .unwrap();
            assert_eq!(r, NodeResponse::RepairDone { crc32c: crc32c::crc32c(&shards[lost]) }, "{spec} {shape} stored");
            let r = nodes[dest as usize].exec.store.reader(&target).unwrap();
            assert_eq!(r.read(0, len as u64).unwrap(), shards[lost]);
        }
    }
    for n in nodes {
        n.stop().await;
    }
}

/// A Clay star's sink runs Clay's structured repair: for a reader (degraded read) and for a
/// node storing the chunk, that node outside the stripe or itself one of the helpers (whose
/// raw sub-chunks then reach the sink within the node), with slices that cut sub-chunks into
/// odd windows. Every
/// byte is compared with the lost chunk, and the sinks count every rebuilt byte as
/// structured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clay_star_sinks_run_the_structured_repair() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster(10, dir.path(), None).await;
    let peers = peers_of(&nodes);
    let code = "clay:6,3,8".parse::<CodeSpec>().unwrap().build().unwrap();
    let len = code.sub_chunks() * 1001;
    let shards = stripe(code.as_ref(), len, 77);
    put_stripe(&peers, 1, &shards).await;
    let structured = |n: &NodeHandle| n.exec.counters.structured.load(Ordering::Relaxed);
    let mut repair = 1;
    for lost in [0usize, 4, 8] {
        let avail: Vec<usize> = (0..code.n()).filter(|&i| i != lost).collect();
        let eq = code.repair_equation(lost, &code.choose_helpers(lost, &avail).unwrap()).unwrap();
        assert!(eq.structured.is_some(), "an MSR repair names its code");
        let helper_nodes: Vec<u32> = eq.helpers().iter().map(|&h| h as u32).collect();
        let job = |repair: u64, destination: u32, store: Option<StoreSpec>| Assignment {
            repair,
            graph: shapes::build(Shape::Cr, &RepairTask { equation: eq.clone(), helper_nodes: helper_nodes.clone(), destination }).unwrap(),
            chunk_len: len as u64,
            slice_len: 300,
            term_chunks: eq.helpers().iter().map(|&h| ChunkId::new(1, h)).collect(),
            peers: peers.clone(),
            store,
            timeslots: Vec::new(),
            gate_batch: None,
            term_offset: None,
        };
        let a = job(repair, READER, None);
        repair += 1;
        dispatch(&a).await;
        let units = exec::check_job(&a).unwrap();
        let counters: Arc<exec::Counters> = Arc::default();
        let got = exec::run_sink(&a, &units, None, Arc::new(Shaper::default()), counters.clone(), T).await.unwrap();
        assert_eq!(got, shards[lost], "lost {lost}, degraded read");
        assert_eq!(counters.structured.load(Ordering::Relaxed), len as u64, "lost {lost}: the reader ran the structured repair");
        // Stored on node 9 (outside the stripe), then on a helper's node.
        for dest in [9u32, helper_nodes[2]] {
            let target = ChunkId::new(1000 + repair, lost);
            let store = Some(StoreSpec { chunk: target.clone(), crc32c: crc32c::crc32c(&shards[lost]), new_parity: false, bucket: None });
            let a = job(repair, dest, store);
            repair += 1;
            let before = structured(&nodes[dest as usize]);
            dispatch(&a).await;
            let r = kintsugi_proto::rpc::request(&peers[&dest], &NodeRequest::WaitRepair { repair: a.repair, timeout_ms: 10_000 }, T)
                .await
                .unwrap();
            assert_eq!(r, NodeResponse::RepairDone { crc32c: crc32c::crc32c(&shards[lost]) }, "lost {lost} stored on node {dest}");
            assert_eq!(nodes[dest as usize].exec.store.reader(&target).unwrap().read(0, len as u64).unwrap(), shards[lost]);
            assert_eq!(structured(&nodes[dest as usize]) - before, len as u64, "lost {lost}: node {dest} ran the structured repair");
        }
    }
    for n in nodes {
        n.stop().await;
    }
}

/// A store-and-forward PPR tree on slow links: each relay waits for whole chunks from
/// below for longer than the nodes' I/O timeout. Relays say they are working meanwhile, so
/// the repair completes instead of failing with "sent nothing" (it did before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_waiting_longer_than_the_io_timeout_are_not_dead() {
    relays_wait_longer_than_the_io_timeout(Shape::Ppr, 400_000, 1).await;
}

/// The same with an ECPipe chain of one slice per chunk: its relays write their pulled
/// connections themselves (no queue, no task serving it), so it is they that must say
/// they are working while their upstream's slice crawls in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_writing_their_own_connections_say_they_are_working() {
    relays_wait_longer_than_the_io_timeout(Shape::Ecpipe, 400_000, 1).await;
}

/// The same with ECPipe cyclic, a slice of 400 KB per lane (three lanes): its relays also
/// write their pulled connections themselves, after their send slots, and say they are
/// working while their upstreams' slices crawl in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_waiting_for_their_send_slots_say_they_are_working() {
    relays_wait_longer_than_the_io_timeout(Shape::EcpipeCyclic, 1_200_000, 3).await;
}

/// Repairs a chunk of `len` bytes cut in `slices` slices over 1 MB/s uplinks by a `shape`
/// graph, with an I/O timeout of 300 ms.
async fn relays_wait_longer_than_the_io_timeout(shape: Shape, len: usize, slices: usize) {
    let dir = tempfile::tempdir().unwrap();
    let t = Duration::from_millis(300);
    let nodes = cluster_with(7, dir.path(), |_, cfg| {
        cfg.uplink = Some(1e6);
        cfg.io_timeout_ms = t.as_millis() as u64;
    })
    .await;
    let peers = peers_of(&nodes);
    let code = "rs:4,2".parse::<CodeSpec>().unwrap().build().unwrap();
    let shards = stripe(code.as_ref(), len, 5);
    put_stripe(&peers, 1, &shards).await;
    let lost = 0;
    let avail: Vec<usize> = (1..code.n()).collect();
    let eq = code.repair_equation(lost, &code.choose_helpers(lost, &avail).unwrap()).unwrap();
    let helper_nodes: Vec<u32> = eq.helpers().iter().map(|&h| h as u32).collect();
    let task = RepairTask { equation: eq.clone(), helper_nodes, destination: READER };
    let a = Assignment {
        repair: 1,
        graph: shapes::build(shape, &task).unwrap(),
        chunk_len: len as u64,
        // Few slices: every hop stores and forwards hundreds of KB at 1 MB/s.
        slice_len: len.div_ceil(slices) as u64,
        term_chunks: eq.helpers().iter().map(|&h| ChunkId::new(1, h)).collect(),
        peers,
        store: None,
        timeslots: Vec::new(),
        gate_batch: None,
        term_offset: None,
    };
    dispatch(&a).await;
    let units = exec::check_job(&a).unwrap();
    let started = std::time::Instant::now();
    let got = exec::run_sink(&a, &units, None, Arc::new(Shaper::default()), Arc::default(), t).await.unwrap();
    assert_eq!(got, shards[lost]);
    assert!(started.elapsed() > t * 2, "the {shape:?} graph took {:?}: longer than the timeout, as the test needs", started.elapsed());
    for n in nodes {
        n.stop().await;
    }
}

/// The bytes helpers read from disk and send for one lost chunk, as the nodes count them:
/// 13/4 of the chunk for Clay(10,4,13) (each helper sends its 64 of 256 sub-chunks raw and
/// the reader combines), 10 chunks for RS(10,4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clay_repair_moves_d_over_q_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster(14, dir.path(), None).await;
    let peers = peers_of(&nodes);
    let len = 256 * 1000;
    for (sid, spec, expect) in [(1u64, "clay:10,4,13", 13 * len / 4), (2, "rs:10,4", 10 * len)] {
        let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
        let shards = stripe(code.as_ref(), len, sid);
        put_stripe(&peers, sid, &shards).await;
        for lost in [0usize, 6, 13] {
            let avail: Vec<usize> = (0..code.n()).filter(|&i| i != lost).collect();
            let eq = code.repair_equation(lost, &code.choose_helpers(lost, &avail).unwrap()).unwrap();
            let task =
                RepairTask { helper_nodes: eq.helpers().iter().map(|&h| h as u32).collect(), equation: eq.clone(), destination: READER };
            let a = Assignment {
                repair: sid * 100 + lost as u64,
                graph: shapes::build(Shape::Cr, &task).unwrap(),
                chunk_len: len as u64,
                slice_len: 4096,
                term_chunks: eq.helpers().iter().map(|&h| ChunkId::new(sid, h)).collect(),
                peers: peers.clone(),
                store: None,
                timeslots: Vec::new(),
                gate_batch: None,
                term_offset: None,
            };
            let count = |f: fn(&exec::Counters) -> u64| nodes.iter().map(|n| f(&n.exec.counters)).sum::<u64>();
            let (read0, sent0) = (count(|c| c.read.load(Ordering::Relaxed)), count(|c| c.sent.load(Ordering::Relaxed)));
            dispatch(&a).await;
            let units = exec::check_job(&a).unwrap();
            let got = exec::run_sink(&a, &units, None, Arc::new(Shaper::default()), Arc::default(), T).await.unwrap();
            assert_eq!(got, shards[lost], "{spec} lost {lost}");
            // A helper counts what it sent after the write returns, which can be after the
            // sink has everything: give the counters a moment to settle.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while count(|c| c.sent.load(Ordering::Relaxed)) - sent0 < expect as u64 && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let read = count(|c| c.read.load(Ordering::Relaxed)) - read0;
            let sent = count(|c| c.sent.load(Ordering::Relaxed)) - sent0;
            assert_eq!(read as usize, expect, "{spec} lost {lost}: bytes read by helpers");
            assert_eq!(sent as usize, expect, "{spec} lost {lost}: bytes sent by helpers");
        }
    }
    for n in nodes {
        n.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_fail_one_connection_only() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster(1, dir.path(), None).await;
    let addr = nodes[0].addr.to_string();
    let garbage: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),                                   // not a frame: huge length
        vec![0, 0, 0, 3, 7, 1, 2],                                            // unknown kind
        vec![0, 0, 0, 50, 1, b'{'],                                           // truncated, then closed
        [&[0u8, 0, 0, 6, 1][..], b"{\"op\""].concat(),                        // bad JSON
        [&[0u8, 0, 0, 27, 1][..], br#"{"op":"launch_missiles"}  "#].concat(), // unknown message
        vec![0, 0, 0, 0],                                                     // empty frame
        [&[0u8, 0, 0, 4, 2][..], b"abc"].concat(),                            // data before any request
    ];
    for g in garbage {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&g).await.unwrap();
        s.shutdown().await.unwrap();
        // The node answers with an error or just closes; it must not crash.
        let _ = tokio::time::timeout(T, kintsugi_proto::recv::<_, NodeResponse>(&mut s)).await;
    }
    // Requests that are well-formed but wrong get errors, not panics.
    let bad_put = NodeRequest::PutChunk { chunk: ChunkId::new(1, 1), len: 5, crc32c: 0, bucket: None, sub_chunks: 0 };
    let mut s = kintsugi_proto::auth::connect(&addr, T).await.unwrap();
    send(&mut s, &bad_put).await.unwrap();
    write_frame(&mut s, Kind::Data, b"12345").await.unwrap();
    let r: NodeResponse = kintsugi_proto::recv(&mut s).await.unwrap();
    assert!(matches!(r, NodeResponse::Error(ref e) if e.kind() == ErrorKind::BadRequest && e.faults.is_empty()), "{r:?}");
    let r = kintsugi_proto::rpc::request(&addr, &NodeRequest::GetChunk { chunk: ChunkId::new(9, 9), range: None }, T).await.unwrap();
    let missing = Fault::MissingChunk { chunk: ChunkId::new(9, 9) };
    assert!(matches!(r, NodeResponse::Error(ref e) if e.kind() == ErrorKind::NotFound && e.faults == [missing.clone()]), "{r:?}");
    // Ranges past a chunk's end (or overflowing) are refused.
    put(&addr, &ChunkId::new(2, 2), &[7u8; 1000]).await;
    for range in [(900, 200), (u64::MAX, 2), (1001, 0)] {
        let r =
            kintsugi_proto::rpc::request(&addr, &NodeRequest::GetChunk { chunk: ChunkId::new(2, 2), range: Some(range) }, T).await.unwrap();
        assert!(matches!(r, NodeResponse::Error(ref e) if e.kind() == ErrorKind::BadRequest), "{range:?}: {r:?}");
    }
    let r = kintsugi_proto::rpc::request(&addr, &NodeRequest::Pull { repair: 77, vertex: 0 }, Duration::from_secs(15)).await.unwrap();
    assert!(matches!(r, NodeResponse::Error { .. }), "{r:?}");
    // Hostile repair plans are refused before anything is allocated for them.
    let code = "rs:3,2".parse::<CodeSpec>().unwrap().build().unwrap();
    let eq = code.repair_equation(0, &[1, 2, 3]).unwrap();
    let task = RepairTask { equation: eq, helper_nodes: vec![0, 0, 0], destination: READER };
    let good = Assignment {
        repair: 5,
        graph: shapes::build(kintsugi_plan::Shape::Cr, &task).unwrap(),
        chunk_len: 1024,
        slice_len: 64,
        term_chunks: (1..4).map(|i| ChunkId::new(1, i)).collect(),
        peers: [(0u32, addr.clone())].into_iter().collect(),
        store: None,
        timeslots: Vec::new(),
        gate_batch: None,
        term_offset: None,
    };
    let mut lanes = good.clone();
    lanes.graph.lanes = 1 << 40;
    let mut coefs = good.clone();
    coefs.graph.equation.terms[0].coefs = vec![1, 2, 3];
    let mut huge = good.clone();
    huge.chunk_len = 1 << 50;
    let mut slices = good.clone();
    slices.slice_len = 0;
    for (what, bad) in [("lanes", lanes), ("coefficients", coefs), ("chunk length", huge), ("slice", slices)] {
        let r = kintsugi_proto::rpc::request(
            &addr,
            &NodeRequest::RunRepair { assignment: Box::new(kintsugi_node::wire::job_to_wire(&bad)) },
            T,
        )
        .await
        .unwrap();
        assert!(matches!(r, NodeResponse::Error { .. }), "{what}: {r:?}");
    }
    // Still serving.
    assert_eq!(kintsugi_proto::rpc::request(&addr, &NodeRequest::Ping, T).await.unwrap(), NodeResponse::Pong { node: 0 });
    for n in nodes {
        n.stop().await;
    }
}

/// A RepairBoost sender's timeslot ends when its bytes have left its socket for the network,
/// not when a slow receiver has read them all: the sender's uplink is free then. The slot-0
/// destination downloads at 50 KB/s (its node reads slowly, and the chunk waits in its
/// socket's buffer, as bytes would in a slow link's queue); the slot-1 destination at full
/// speed. Slot 1 finishes first; while the slot ended at delivery, it waited for slot 0.
/// That a sender waits while its bytes cannot leave is `kintsugi-proto`'s `sent_out` test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_receiver_does_not_hold_its_senders_next_timeslot() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster_with(5, dir.path(), |i, cfg| cfg.downlink = (i == 3).then_some(50_000.0)).await;
    let peers = peers_of(&nodes);
    let code = "rs:2,1".parse::<CodeSpec>().unwrap().build().unwrap();
    let len = 100_000usize;
    let shards = stripe(code.as_ref(), len, 7);
    put_stripe(&peers, 1, &shards).await;
    let lost = 2;
    let eq = code.repair_equation(lost, &[0, 1]).unwrap();
    let started = std::time::Instant::now();
    let mut waits = Vec::new();
    for (slot, dest) in [(0u32, 3u32), (1, 4)] {
        let task = RepairTask { equation: eq.clone(), helper_nodes: vec![0, 1], destination: dest };
        let graph = shapes::build(Shape::Cr, &task).unwrap();
        let timeslots = (0..graph.vertices.len()).map(|v| (v != graph.sink.index()).then_some(slot)).collect();
        let a = Assignment {
            repair: 10 + slot as u64,
            graph,
            chunk_len: len as u64,
            slice_len: 4096,
            term_chunks: vec![ChunkId::new(1, 0), ChunkId::new(1, 1)],
            peers: peers.clone(),
            store: Some(StoreSpec {
                chunk: ChunkId::new(100 + slot as u64, lost),
                crc32c: crc32c::crc32c(&shards[lost]),
                new_parity: false,
                bucket: None,
            }),
            timeslots,
            gate_batch: None,
            term_offset: None,
        };
        dispatch(&a).await;
        let addr = peers[&dest].clone();
        waits.push(tokio::spawn(async move {
            let r = kintsugi_proto::rpc::request(
                &addr,
                &NodeRequest::WaitRepair { repair: a.repair, timeout_ms: 20_000 },
                Duration::from_secs(30),
            )
            .await;
            (r, started.elapsed().as_secs_f64())
        }));
    }
    let mut done = Vec::new();
    for w in waits {
        let (r, at) = w.await.unwrap();
        assert_eq!(r.unwrap(), NodeResponse::RepairDone { crc32c: crc32c::crc32c(&shards[lost]) });
        done.push(at);
    }
    assert!(done[0] > 1.0, "the slow destination took only {:.2} s", done[0]);
    assert!(done[1] < done[0] * 0.75, "slot 1 finished at {:.2} s, held until slot 0 was delivered at {:.2} s", done[1], done[0]);
    for n in nodes {
        n.stop().await;
    }
}

/// Repairs that read the same helper chunk at once share its reads: four degraded reads of
/// one RS(4,2) chunk, run together, keep each helper's emulated disk busy about as long as
/// one of them alone (each read the whole chunk before: four times as long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_repairs_read_a_shared_helper_chunk_once() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster_with(6, dir.path(), |_, cfg| {
        cfg.hdd_seek_ms = Some(1.0);
        cfg.hdd_bandwidth = Some(10e6);
    })
    .await;
    let peers = peers_of(&nodes);
    let code = "rs:4,2".parse::<CodeSpec>().unwrap().build().unwrap();
    let len = 1_000_003;
    let shards = stripe(code.as_ref(), len, 9);
    put_stripe(&peers, 9, &shards).await;
    let eq = code.repair_equation(0, &[1, 2, 3, 4]).unwrap();
    let plan = |repair: u64| Assignment {
        repair,
        graph: shapes::build(Shape::Cr, &RepairTask { equation: eq.clone(), helper_nodes: vec![1, 2, 3, 4], destination: READER }).unwrap(),
        chunk_len: len as u64,
        slice_len: 65_536,
        term_chunks: (1..5).map(|h| ChunkId::new(9, h)).collect(),
        peers: peers.clone(),
        store: None,
        timeslots: Vec::new(),
        gate_batch: None,
        term_offset: None,
    };
    let busy = || nodes[1..5].iter().map(|n| n.exec.store.disk().unwrap().busy_seconds()).collect::<Vec<f64>>();
    let (plan, shards) = (&plan, &shards);
    let run = |repairs: Vec<u64>| async move {
        let plans: Vec<kintsugi_node::Job> = repairs.into_iter().map(plan).collect();
        for a in &plans {
            dispatch(a).await;
        }
        let sinks: Vec<_> = plans
            .into_iter()
            .map(|a| {
                tokio::spawn(async move {
                    let units = exec::check_job(&a).unwrap();
                    exec::run_sink(&a, &units, None, Arc::new(Shaper::default()), Arc::default(), T).await.unwrap()
                })
            })
            .collect();
        for s in sinks {
            assert_eq!(s.await.unwrap(), shards[0]);
        }
    };
    let b0 = busy();
    run(vec![1]).await;
    let b1 = busy();
    run(vec![2, 3, 4, 5]).await;
    let b2 = busy();
    for h in 0..4 {
        let (one, four) = (b1[h] - b0[h], b2[h] - b1[h]);
        // One read of the chunk: 0.1 s at 10 MB/s.
        assert!(one >= 0.09, "helper {}: {one:.3} s for one read of 1 MB", h + 1);
        assert!(four < 1.6 * one, "helper {}: four repairs at once kept the disk busy {four:.3} s, one alone {one:.3} s", h + 1);
    }
    for n in nodes {
        n.stop().await;
    }
}

/// Short exchanges reuse one connection per node; an answer that is an error, or one with
/// data behind it, leaves none behind; a connection the node closed while idle (here: the
/// node restarted on its address) is replaced by a new one without failing the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reuse_connections_and_survive_a_closed_one() {
    use kintsugi_proto::rpc::idle_to;
    let dir = tempfile::tempdir().unwrap();
    let cfg = |listen: String| NodeConfig { id: 0, data_dir: dir.path().join("n0"), listen, ..Default::default() };
    let node = start(cfg("127.0.0.1:0".into())).await.unwrap();
    let addr = node.addr.to_string();
    assert_eq!(idle_to(&addr), 0);
    for _ in 0..3 {
        assert_eq!(kintsugi_proto::rpc::request(&addr, &NodeRequest::Ping, T).await.unwrap(), NodeResponse::Pong { node: 0 });
    }
    assert_eq!(idle_to(&addr), 1, "one connection served all three");
    let r = kintsugi_proto::rpc::request(&addr, &NodeRequest::Progress { repair: 12_345 }, T).await.unwrap();
    assert!(matches!(r, NodeResponse::Error { .. }), "{r:?}");
    assert_eq!(idle_to(&addr), 0, "an error answer gives no connection back");
    put(&addr, &ChunkId::new(1, 1), &[7u8; 1000]).await;
    let r = kintsugi_proto::rpc::request(&addr, &NodeRequest::GetChunk { chunk: ChunkId::new(1, 1), range: None }, T).await.unwrap();
    assert!(matches!(r, NodeResponse::Chunk { len: 1000, .. }), "{r:?}");
    assert_eq!(idle_to(&addr), 0, "a chunk's data frames follow its answer: not reused");
    assert_eq!(kintsugi_proto::rpc::request(&addr, &NodeRequest::Ping, T).await.unwrap(), NodeResponse::Pong { node: 0 });
    assert_eq!(idle_to(&addr), 1);
    node.stop().await;
    let node = start(cfg(addr.clone())).await.unwrap();
    assert_eq!(kintsugi_proto::rpc::request(&addr, &NodeRequest::Stat, T).await.map(|r| matches!(r, NodeResponse::Stat(_))), Ok(true));
    assert_eq!(idle_to(&addr), 1);
    node.stop().await;
}

/// A connection made in one runtime is never handed to another (a benchmark builds and
/// drops runtimes): requests from a second runtime, after the first is gone, still work.
#[test]
fn requests_from_a_new_runtime_do_not_reuse_a_dead_runtimes_connections() {
    use kintsugi_proto::rpc::idle_to;
    let dir = tempfile::tempdir().unwrap();
    let nodes_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let node = nodes_rt.block_on(start(NodeConfig { id: 0, data_dir: dir.path().join("n0"), ..Default::default() })).unwrap();
    let addr = node.addr.to_string();
    for _ in 0..2 {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            assert_eq!(idle_to(&addr), 0, "a fresh runtime starts with no idle connection");
            assert_eq!(kintsugi_proto::rpc::request(&addr, &NodeRequest::Ping, T).await.unwrap(), NodeResponse::Pong { node: 0 });
            assert_eq!(idle_to(&addr), 1);
        });
    }
    nodes_rt.block_on(node.stop());
}
