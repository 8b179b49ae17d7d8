//! Strangers before their handshake get almost nothing from a node: 2,000 idle connections
//! and 100 peers each announcing a 64 MiB frame (protocol 1's way) or a full-size handshake
//! message, then sending a byte a second, leave the node process under 200 MiB of RSS and
//! its service to a member (connect, handshake, a request) within 2x of its latency
//! without them. Members cannot exhaust it either: past `KINTSUGI_MAX_CONNECTIONS` open
//! connections, one more is closed at once. (Its own test binary: the cluster secret is
//! process-wide.)

use kintsugi_proto::auth::{set_secret, Secret};
use kintsugi_proto::{NodeRequest, NodeResponse};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap();
    kib / 1024.0
}

/// A member's connection, checked with a ping.
async fn ping_on_new_connection(addr: &str) -> Result<kintsugi_proto::secure::Conn, String> {
    let mut s = kintsugi_proto::auth::connect(addr, Duration::from_secs(10)).await.map_err(|e| e.to_string())?;
    kintsugi_proto::send(&mut s, &NodeRequest::Ping).await.map_err(|e| e.to_string())?;
    match kintsugi_proto::recv::<_, NodeResponse>(&mut s).await.map_err(|e| e.to_string())? {
        NodeResponse::Pong { .. } => Ok(s),
        other => Err(format!("{other:?}")),
    }
}

/// The median of 30 members' requests, each on a new connection (handshake included), ms.
async fn member_latency(addr: &str) -> f64 {
    let mut v = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let mut s = kintsugi_proto::auth::connect(addr, Duration::from_secs(10)).await.expect("a member connects");
        kintsugi_proto::send(&mut s, &NodeRequest::Ping).await.unwrap();
        let r: NodeResponse = kintsugi_proto::recv(&mut s).await.unwrap();
        assert!(matches!(r, NodeResponse::Pong { .. }), "{r:?}");
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_before_the_handshake_cost_a_node_little() {
    kintsugi_proto::tcp::raise_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    let secret = Secret::random();
    std::fs::write(dir.path().join("secret"), secret.expose()).unwrap();
    set_secret(Some(secret));
    let (node, addr) = common::procs::node_with_secret(dir.path(), &dir.path().join("secret"));
    let pid = node.0.id();

    let normal = member_latency(&addr).await;
    let rss_before = rss_mib(pid);

    // 2,000 connections that send nothing.
    let mut idle = Vec::new();
    for _ in 0..2000 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    // 100 slow peers: half announce a 64 MiB frame as protocol 1 would, half a full-size
    // handshake message; then a byte a second.
    let mut slow = Vec::new();
    for i in 0..100 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let head: Vec<u8> = if i % 2 == 0 {
            [&(64u32 << 20).to_be_bytes()[..], &[1u8][..]].concat()
        } else {
            [&b"KSGN"[..], &kintsugi_proto::secure::PROTOCOL_VERSION.to_be_bytes(), &[2], &1024u16.to_be_bytes()[..]].concat()
        };
        s.write_all(&head).await.unwrap();
        slow.push(tokio::spawn(async move {
            for _ in 0..30 {
                if s.write_all(&[7]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let busy = member_latency(&addr).await;
    let rss = rss_mib(pid);
    eprintln!(
        "preauth: member latency {normal:.2} ms alone, {busy:.2} ms beside 2,100 strangers; node RSS {rss_before:.1} -> {rss:.1} MiB"
    );
    assert!(rss < 200.0, "node RSS {rss:.1} MiB with strangers connected");
    assert!(busy <= 2.0 * normal.max(0.5), "a member's request took {busy:.2} ms beside strangers, {normal:.2} ms without");
    // The handshake's deadline closes the idle ones.
    tokio::time::sleep(kintsugi_proto::secure::HANDSHAKE_LIMIT + Duration::from_secs(1)).await;
    let mut closed = 0;
    for s in &idle {
        let mut b = [0u8; 1];
        if matches!(s.try_read(&mut b), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed > 1900, "only {closed} of 2000 idle strangers were closed after the handshake deadline");
    for t in slow {
        t.abort();
    }

    // A node serving at most 40 connections: 40 members are served, the 41st is closed at
    // once, and a slot given back is served again.
    let capped_dir = tempfile::tempdir().unwrap();
    let (_capped, addr) =
        common::procs::node_with_secret_env(capped_dir.path(), &dir.path().join("secret"), &[("KINTSUGI_MAX_CONNECTIONS", "40")]);
    let mut held = Vec::new();
    for i in 0..40 {
        held.push(ping_on_new_connection(&addr).await.unwrap_or_else(|e| panic!("member connection {i}: {e}")));
    }
    let t = Instant::now();
    let err = ping_on_new_connection(&addr).await.expect_err("a 41st connection is refused");
    assert!(t.elapsed() < Duration::from_secs(2), "the 41st connection took {:?} to be closed: {err}", t.elapsed());
    drop(held.pop());
    let mut served = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if ping_on_new_connection(&addr).await.is_ok() {
            served = true;
            break;
        }
    }
    assert!(served, "a connection slot given back was not served again");
    // The held ones still work.
    for s in held.iter_mut().take(3) {
        kintsugi_proto::send(s, &NodeRequest::Ping).await.unwrap();
        assert!(matches!(kintsugi_proto::recv::<_, NodeResponse>(s).await.unwrap(), NodeResponse::Pong { .. }));
    }
}
