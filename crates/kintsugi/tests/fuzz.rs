//! Fuzzing on the stable toolchain: valid inputs of every kind (frames, every control
//! message in its MessagePack encoding, repair assignments for every code and shape, codec
//! manifests in JSON) are mutated (bit flips, interesting bytes, insertions, deletions,
//! splices, and numbers swapped for extreme ones) and fed to the decoders and checks the node, the coordinator and the
//! codec run on untrusted input. Nothing may panic; anything accepted must pass the same
//! checks the servers apply before allocating. A second target sends mutated requests to a
//! live node and a live coordinator over TCP and checks they keep serving.
//!
//! This is mutation fuzzing, not coverage-guided: cargo-fuzz needs a nightly toolchain,
//! which CI does not have. `FUZZ_ITERS` (default 20,000 in-process, a tenth of that over
//! the network) and `FUZZ_SEED` set the run; a crash prints the input as hex.

mod common;

use common::untrusted::exercise;

use kintsugi_codes::CodeSpec;
use kintsugi_plan::{shapes, RepairTask, Shape};
use kintsugi_proto::frame::{decode_control, encode_control};
use kintsugi_proto::{
    recv, send, write_frame, Assignment, ChunkId, CoordRequest, CoordResponse, Kind, NodeRequest, NodeResponse, StoreSpec, READER,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn iterations(default: usize) -> usize {
    std::env::var("FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed)
}

/// Real repair assignments: every shape over RS, LRC and Clay, to a node and to a reader.
fn assignments() -> Vec<kintsugi_node::Job> {
    let mut out = Vec::new();
    for spec in ["rs:6,3", "rs:10,4", "lrc:6,2,2", "clay:4,2,5", "clay:6,3,8"] {
        let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
        let n = code.n();
        for shape in [Shape::Cr, Shape::Ppr, Shape::Ecpipe, Shape::EcpipeCyclic] {
            let lost = 1;
            let avail: Vec<usize> = (0..n).filter(|&i| i != lost).collect();
            let helpers = code.choose_helpers(lost, &avail).unwrap();
            let equation = code.repair_equation(lost, &helpers).unwrap();
            let helper_nodes: Vec<u32> = equation.helpers().iter().map(|&h| h as u32).collect();
            for destination in [n as u32 + 1, READER] {
                let task = RepairTask { equation: equation.clone(), helper_nodes: helper_nodes.clone(), destination };
                let Ok(graph) = shapes::build(shape, &task) else { continue };
                let peers: BTreeMap<u32, String> =
                    graph.vertices.iter().filter(|v| v.node != READER).map(|v| (v.node, format!("127.0.0.1:{}", 7000 + v.node))).collect();
                let term_chunks = equation.helpers().iter().map(|&h| ChunkId::new(9, h)).collect();
                let store =
                    (destination != READER).then(|| StoreSpec { chunk: ChunkId::new(9, lost), crc32c: 7, new_parity: false, bucket: None });
                let chunk_len = (code.sub_chunks() * 4096) as u64;
                out.push(Assignment {
                    repair: 1,
                    graph,
                    chunk_len,
                    slice_len: 1024,
                    term_chunks,
                    peers,
                    store,
                    timeslots: Vec::new(),
                    gate_batch: None,
                    term_offset: None,
                });
            }
        }
    }
    out
}

/// One valid encoding of every control message (and a manifest), as JSON.
fn seeds() -> Vec<Vec<u8>> {
    let chunk = ChunkId::new(3, 2);
    let a = assignments();
    let mut s: Vec<Vec<u8>> = Vec::new();
    let mut push = |v: serde_json::Value| s.push(encode_control(&v).unwrap());
    for r in [
        NodeRequest::Ping,
        NodeRequest::PutChunk { chunk: chunk.clone(), len: 100, crc32c: 5, bucket: None, sub_chunks: 0 },
        NodeRequest::GetChunk { chunk: chunk.clone(), range: None },
        NodeRequest::DeleteChunk { chunk: chunk.clone() },
        NodeRequest::Stat,
        NodeRequest::Pull { repair: 1, vertex: 2 },
        NodeRequest::WaitRepair { repair: 1, timeout_ms: 10 },
        NodeRequest::Progress { repair: 1 },
        NodeRequest::CancelRepair { repair: 1 },
        NodeRequest::ReserveTimeslots { batch: 7, sends: vec![0, 3, 3], receives: vec![1], hold_ms: 100 },
        NodeRequest::ReleaseTimeslots { batch: 7, sends: vec![3], receives: vec![], everything: false },
        NodeRequest::PutChunk {
            chunk: chunk.clone(),
            len: 100,
            crc32c: 5,
            bucket: Some(kintsugi_proto::BucketSlot { pg: 3, class: 4096, slot: 2, small: true }),
            sub_chunks: 256,
        },
        NodeRequest::Assemble {
            chunk: chunk.clone(),
            len: 4096,
            pieces: vec![(kintsugi_proto::ChunkId::piece(3, 2, 0, 0), 0), (kintsugi_proto::ChunkId::piece(3, 2, 100, 1), 100)],
            crc32c: 9,
            bucket: Some(kintsugi_proto::BucketSlot { pg: 3, class: 4096, slot: 2, small: true }),
            sub_chunks: 256,
            ranges: vec![(10, 50), (0, 3000)],
        },
    ] {
        push(serde_json::to_value(r).unwrap());
    }
    for (i, x) in a.iter().step_by(3).enumerate() {
        let x = Assignment { gate_batch: (i % 2 == 1).then_some(7), ..x.clone() };
        let x = kintsugi_node::wire::job_to_wire(&x);
        push(serde_json::to_value(NodeRequest::RunRepair { assignment: Box::new(x.clone()) }).unwrap());
        push(serde_json::to_value(CoordResponse::Plan { assignment: Box::new(x.clone()) }).unwrap());
    }
    for r in [
        CoordRequest::Heartbeat {
            node: 1,
            addr: "127.0.0.1:1".into(),
            chunks: 3,
            boot: 9,
            used_bytes: 5,
            capacity_bytes: 10,
            cluster: 0,
            link: Some(kintsugi_proto::LinkReport { period_ms: 500, fg_up: 1.0, capacity_up: 2.0, ..Default::default() }),
            token: "0f".repeat(16),
            fs: Some(kintsugi_proto::FsReport { id: "host:64768".into(), used: 7, size: 20 }),
        },
        CoordRequest::CreateObject {
            name: "o".into(),
            size: 1000,
            code: "clay:4,2,5".parse().unwrap(),
            chunk_size: 4096,
            layout: Default::default(),
        },
        CoordRequest::CommitObject {
            name: "o".into(),
            version: 2,
            crcs: vec![vec![1, 2, 3]],
            attrs: Default::default(),
            precondition: None,
            versioning: Default::default(),
        },
        CoordRequest::DeleteObject { name: "o".into(), versioning: Default::default(), precondition: None },
        CoordRequest::Inventory { node: 1, boot: 2, chunks: vec![chunk.clone()], last: true, token: String::new() },
        CoordRequest::ReportChunk { node: 1, chunk: chunk.clone(), reason: "corrupt chunk".into() },
        CoordRequest::Lookup { name: "o".into() },
        CoordRequest::List { prefix: "a".into(), delimiter: "/".into(), after: String::new(), limit: 5 },
        CoordRequest::DegradedRead {
            name: "o".into(),
            stripe: 0,
            index: 1,
            method: "ppr".into(),
            slice: 4096,
            version: 0,
            avoid: vec![2],
            range: Some((100, 50)),
        },
        CoordRequest::ReportBad { name: "o".into(), stripe: 0, index: 1, reason: "x".into(), version: 1 },
        CoordRequest::Repair {
            method: "ecpipe".into(),
            slice: 4096,
            parallel: 2,
            scheduler: "repairboost".into(),
            max_active_per_destination: None,
        },
        CoordRequest::Status,
        CoordRequest::RemoveNode { node: 3 },
        CoordRequest::ReplaceNode { node: 3 },
    ] {
        push(serde_json::to_value(r).unwrap());
    }
    for r in [
        NodeResponse::Ok,
        NodeResponse::Error(
            kintsugi_proto::WireError::unreachable(3, "e")
                .with_fault(kintsugi_proto::Fault::CorruptChunk { chunk: kintsugi_proto::ChunkId::new(1, 2) }),
        ),
        NodeResponse::Chunk { len: 4, crc32c: 1 },
        NodeResponse::Progress { bytes: 3, done: false },
    ] {
        push(serde_json::to_value(r).unwrap());
    }
    s.push(
        serde_json::to_vec(&serde_json::json!({
            "format": 1, "code": "rs:4,2", "k": 4, "m": 2, "size": 10, "shard_len": 3, "file": "f",
            "shards": (0..6).map(|i| serde_json::json!({"index": i, "file": format!("f.0{i}"), "crc32c": i})).collect::<Vec<_>>()
        }))
        .unwrap(),
    );
    s
}

const INTERESTING: &[&str] = &[
    "0",
    "-1",
    "1",
    "255",
    "256",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e400",
    "null",
    "\"\"",
    "[]",
    "{}",
];

/// One mutation of `input` (with `other` for splices).
fn mutate(rng: &mut StdRng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.random_range(1..4) {
        let len = v.len().max(1);
        match rng.random_range(0..8) {
            0 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] = *[0u8, 0xff, b'"', b'{', b'}', b'[', b']', b',', b':', b'9', b'-', b'\\'].get(rng.random_range(0..12)).unwrap();
            }
            2 => {
                let i = rng.random_range(0..=v.len());
                let bytes: Vec<u8> = (0..rng.random_range(1..9)).map(|_| rng.random()).collect();
                v.splice(i..i, bytes);
            }
            3 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                let j = (i + rng.random_range(1..=16)).min(v.len());
                v.drain(i..j);
            }
            4 if !other.is_empty() => {
                let cut = rng.random_range(0..=v.len());
                let from = rng.random_range(0..other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            5 => v.truncate(rng.random_range(0..len)),
            _ => {
                // A JSON number (or value after a colon) becomes an extreme one.
                let starts: Vec<usize> =
                    (0..v.len()).filter(|&i| v[i].is_ascii_digit() && (i == 0 || !v[i - 1].is_ascii_digit())).collect();
                if let Some(&i) = starts.get(rng.random_range(0..starts.len().max(1))) {
                    let mut j = i;
                    while j < v.len() && v[j].is_ascii_digit() {
                        j += 1;
                    }
                    let with = INTERESTING[rng.random_range(0..INTERESTING.len())];
                    v.splice(i..j, with.bytes());
                }
            }
        }
    }
    v
}

fn run_in_process(iters: usize, seed: u64) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let corpus = seeds();
    let mut framed: Vec<Vec<u8>> = Vec::new();
    for s in &corpus {
        let mut f = Vec::new();
        rt.block_on(write_frame(&mut f, Kind::Control, s)).unwrap();
        framed.push(f);
    }
    let all: Vec<&Vec<u8>> = corpus.iter().chain(&framed).collect();
    // Seeds for the coverage-guided target in fuzz/ (cargo-fuzz).
    if let Some(dir) = std::env::var_os("FUZZ_WRITE_CORPUS") {
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in all.iter().enumerate() {
            std::fs::write(std::path::Path::new(&dir).join(format!("seed{i:03}")), s).unwrap();
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    // Every seed as is first: the valid inputs must pass.
    for s in &all {
        exercise(&rt, s);
    }
    for i in 0..iters {
        let base = all[rng.random_range(0..all.len())];
        let other = all[rng.random_range(0..all.len())];
        let input = mutate(&mut rng, base, other);
        if std::panic::catch_unwind(AssertUnwindSafe(|| exercise(&rt, &input))).is_err() {
            panic!("fuzz seed {seed}, execution {i}: input {} panicked", hex(&input));
        }
    }
    all.len() + iters
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn decoders_and_checks_survive_mutated_input() {
    let (iters, seed) = (iterations(20_000), seed());
    let n = run_in_process(iters, seed);
    eprintln!("fuzz: {n} in-process executions (seed {seed}), no crash");
}

/// Passes `head` bytes, then a u16-length-prefixed message, from one side to the other.
async fn pass_block(from: &mut tokio::net::TcpStream, to: &mut tokio::net::TcpStream, head: usize) -> std::io::Result<()> {
    let mut block = vec![0u8; head + 2];
    from.read_exact(&mut block).await?;
    let len = u16::from_be_bytes([block[head], block[head + 1]]) as usize;
    block.resize(head + 2 + len, 0);
    from.read_exact(&mut block[head + 2..]).await?;
    to.write_all(&block).await
}

/// One connection's sealed stream after the handshake, mutated on the way: the proxy passes
/// the handshake through (its lengths are in its own bytes), then takes everything the
/// writer sent, mutates it and hands it to the reader.
async fn through_mutating_proxy(
    listener: &tokio::net::TcpListener,
    server: std::net::SocketAddr,
    mutate_stream: impl FnOnce(Vec<u8>) -> Vec<u8>,
) -> std::io::Result<()> {
    let (mut a, _) = listener.accept().await?;
    let mut b = tokio::net::TcpStream::connect(server).await?;
    // The preamble (7 bytes) and the first message; the status byte and the answer.
    pass_block(&mut a, &mut b, 7).await?;
    pass_block(&mut b, &mut a, 1).await?;
    let mut sealed = Vec::new();
    a.read_to_end(&mut sealed).await?;
    b.write_all(&mutate_stream(sealed)).await?;
    b.shutdown().await
}

/// Sealed records (both protections) mutated on the wire by the same mutations as the
/// decoders get, and spliced with other sessions' records (replays): the reader gets the
/// frames sent, or a prefix of them and an error; never a changed or an extra frame, never
/// a panic, and any change that is not a plain truncation fails a record's check.
#[test]
fn sealed_records_survive_mutation() {
    use kintsugi_proto::auth::Secret;
    use kintsugi_proto::secure::{self, Protection};
    use kintsugi_proto::{read_frame, Frame};
    let (iters, seed) = (iterations(20_000) / 10, seed());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let corpus = seeds();
    let secret = Secret::random();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut streams: Vec<Vec<u8>> = vec![vec![0u8; 64]];
    rt.block_on(async {
        let server_l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (server_addr, proxy_addr) = (server_l.local_addr().unwrap(), proxy_l.local_addr().unwrap());
        for i in 0..iters {
            let protection = if i % 2 == 0 { Protection::Encrypted } else { Protection::Authenticated };
            // What the writer sends: control frames from the corpus and a data frame that
            // spans several records.
            let mut frames: Vec<(Kind, Vec<u8>)> =
                (0..rng.random_range(1..4)).map(|_| (Kind::Control, corpus[rng.random_range(0..corpus.len())].clone())).collect();
            frames.push((Kind::Data, (0..rng.random_range(1..200_000)).map(|_| rng.random()).collect()));
            let (mutated_seed, other) = (rng.random::<u64>(), streams[rng.random_range(0..streams.len())].clone());
            let original = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let (orig, changed) = (original.clone(), std::sync::Arc::new(std::sync::Mutex::new(Vec::new())));
            let changed2 = changed.clone();
            let proxy = through_mutating_proxy(&proxy_l, server_addr, move |sealed| {
                let mut r = StdRng::seed_from_u64(mutated_seed);
                let m = if r.random_bool(0.1) { sealed.clone() } else { mutate(&mut r, &sealed, &other) };
                *orig.lock().unwrap() = sealed;
                *changed2.lock().unwrap() = m.clone();
                m
            });
            let writer = async {
                let tcp = tokio::net::TcpStream::connect(proxy_addr).await.unwrap();
                let mut c = secure::connect(tcp, Some(&secret), protection).await.unwrap();
                for (kind, body) in &frames {
                    write_frame(&mut c, *kind, body).await.unwrap();
                }
                c.flush().await.unwrap();
                c.shutdown().await.unwrap();
                c
            };
            let reader = async {
                let (tcp, _) = server_l.accept().await.unwrap();
                let mut c = secure::accept(tcp, Some(&secret), protection).await.unwrap();
                let mut got = Vec::new();
                loop {
                    match read_frame(&mut c).await {
                        Ok(Frame::Control(b)) => got.push((Kind::Control, b)),
                        Ok(Frame::Data(b)) => got.push((Kind::Data, b)),
                        Err(kintsugi_proto::FrameError::Closed) => return (got, None),
                        Err(e) => return (got, Some(e.to_string())),
                    }
                }
            };
            let (p, _w, (got, err)) = tokio::join!(proxy, writer, reader);
            p.unwrap();
            let (original, changed) = (original.lock().unwrap().clone(), changed.lock().unwrap().clone());
            let ctx =
                || format!("fuzz seed {seed}, connection {i} ({protection}): {} of {} frames, error {err:?}", got.len(), frames.len());
            assert!(got.len() <= frames.len() && got.iter().zip(&frames).all(|(g, f)| g == f), "{}: a frame changed or was added", ctx());
            if changed == original {
                assert!(err.is_none() && got.len() == frames.len(), "{}: the stream was not changed", ctx());
            } else if !original.starts_with(&changed) {
                assert!(err.is_some(), "{}: a changed stream was read without an error", ctx());
            } else {
                assert!(got.len() < frames.len() || err.is_some(), "{}: a truncated stream was read whole", ctx());
            }
            streams.push(original);
        }
    });
    eprintln!("fuzz: {iters} sealed connections mutated on the wire (seed {seed}), none misread");
}

/// Mutated requests to a live node and a live coordinator: each may be refused, none may
/// take the service down or wedge it.
#[test]
fn live_node_and_coordinator_survive_mutated_requests() {
    let iters = iterations(20_000) / 10;
    let seed = seed();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let coord = kintsugi_coord::start(kintsugi_coord::CoordConfig {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.path().join("coord"),
            ..Default::default()
        })
        .await
        .unwrap();
        let coord_addr = coord.addr.to_string();
        let node = kintsugi_node::start(kintsugi_node::NodeConfig {
            id: 1,
            data_dir: dir.path().join("node"),
            coordinator: Some(coord_addr.clone()),
            io_timeout_ms: 300,
            ..Default::default()
        })
        .await
        .unwrap();
        let node_addr = node.addr.to_string();
        let corpus = seeds();
        let mut rng = StdRng::seed_from_u64(seed);
        for i in 0..iters {
            let base = &corpus[rng.random_range(0..corpus.len())];
            let other = &corpus[rng.random_range(0..corpus.len())];
            let input = mutate(&mut rng, base, other);
            // Requests that legitimately take the node down (an authenticated operator's)
            // are not what this target is about.
            if matches!(decode_control(&input), Ok(CoordRequest::RemoveNode { .. } | CoordRequest::FailNode { .. }))
                || matches!(decode_control(&input), Ok(NodeRequest::Shutdown))
            {
                continue;
            }
            let to = if rng.random_bool(0.5) { &node_addr } else { &coord_addr };
            if rng.random_bool(0.5) {
                // After the handshake: the request decoders.
                if let Ok(mut s) = kintsugi_proto::auth::connect(to, Duration::from_secs(2)).await {
                    let _ = write_frame(&mut s, Kind::Control, &input).await;
                    let _ = s.flush().await;
                    let _ = tokio::time::timeout(Duration::from_millis(200), recv::<_, serde_json::Value>(&mut s)).await;
                }
            } else if let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(to)).await {
                // Before it: the handshake's decoder, fed a preamble mutated or not, then the
                // input as a handshake message.
                let mut pre = [&b"KSGN"[..], &kintsugi_proto::secure::PROTOCOL_VERSION.to_be_bytes(), &[2]].concat();
                if rng.random_bool(0.5) {
                    let at = rng.random_range(0..pre.len());
                    pre[at] = rng.random();
                }
                let len = (input.len() as u16).to_be_bytes();
                let _ = s.write_all(&[&pre[..], &len[..], &input[..]].concat()).await;
                let mut answer = [0u8; 64];
                let _ = tokio::time::timeout(Duration::from_millis(200), s.read(&mut answer)).await;
            }
            if i % 50 == 0 {
                let mut s = kintsugi_proto::auth::connect(&node_addr, Duration::from_secs(5))
                    .await
                    .unwrap_or_else(|e| panic!("execution {i}: node gone: {e}"));
                send(&mut s, &NodeRequest::Ping).await.unwrap();
                let r: NodeResponse = tokio::time::timeout(Duration::from_secs(5), recv(&mut s)).await.expect("node answers").unwrap();
                assert!(matches!(r, NodeResponse::Pong { .. }), "execution {i}: {r:?}");
                let mut s = kintsugi_proto::auth::connect(&coord_addr, Duration::from_secs(5))
                    .await
                    .unwrap_or_else(|e| panic!("execution {i}: coordinator gone: {e}"));
                send(&mut s, &CoordRequest::Status).await.unwrap();
                let r: CoordResponse =
                    tokio::time::timeout(Duration::from_secs(5), recv(&mut s)).await.expect("coordinator answers").unwrap();
                assert!(matches!(r, CoordResponse::Status(_)), "execution {i}: {r:?}");
            }
        }
        eprintln!("fuzz: {iters} mutated requests to a live node and coordinator (seed {seed}), both still serving");
        node.stop().await;
    });
}
