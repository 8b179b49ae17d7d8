//! A man in the middle between this process and a real node process, on an encrypted
//! cluster: a byte flipped in either direction, a record replayed within its connection, a
//! whole recorded session replayed on a new one, a forged record injected: each closes the
//! connection, and nothing it carried is done (the chunk is neither written, deleted nor
//! handed out altered). Connections straight to the node keep working throughout.
//! (Its own test binary: the cluster secret is process-wide.)

use kintsugi_proto::auth::{connect, set_secret, Secret};
use kintsugi_proto::{recv, send, write_frame, ChunkId, Kind, NodeRequest, NodeResponse};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(10);

mod common;

/// What the proxy does to the stream from the client to the node (`Up`) or back (`Down`).
#[derive(Clone, Copy, Debug)]
enum Attack {
    /// Flip a byte this far into the first record after the handshake.
    FlipUp(usize),
    FlipDown(usize),
    /// Send the client's first record twice.
    DuplicateUp,
    /// Put a forged record before the client's first.
    InjectUp,
    /// Pass everything on (and record it).
    None,
}

/// The handshake's bytes from the client: the preamble, then `u16 length | message`.
fn handshake_len(up: &[u8]) -> Option<usize> {
    (up.len() >= 9).then(|| 9 + u16::from_be_bytes([up[7], up[8]]) as usize)
}

/// The node's answer to the handshake: status, `u16 length | message`.
fn answer_len(down: &[u8]) -> Option<usize> {
    (down.len() >= 3).then(|| 3 + u16::from_be_bytes([down[1], down[2]]) as usize)
}

/// A proxy to `node` applying `attack` to every connection; it records what each client
/// sent (for a replay).
async fn proxy(node: String, attack: Attack, sent: Arc<Mutex<Vec<u8>>>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let (client, _) = l.accept().await.unwrap();
            let server = TcpStream::connect(&node).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let sent = sent.clone();
            tokio::spawn(async move {
                let mut seen: Vec<u8> = Vec::new();
                let mut done = false;
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let start = seen.len();
                    seen.extend_from_slice(&buf[..n]);
                    sent.lock().unwrap().extend_from_slice(&buf[..n]);
                    let mut out = buf[..n].to_vec();
                    if let (false, Some(h), Attack::InjectUp) = (done, handshake_len(&seen), attack) {
                        // Right after the handshake, before anything the client sends.
                        if seen.len() >= h && h >= start {
                            let mut forged = 100u32.to_be_bytes().to_vec();
                            forged.extend((0..100).map(|i| (i * 37) as u8));
                            out.splice(h - start..h - start, forged);
                            done = true;
                        }
                    }
                    if let (false, Some(h)) = (done, handshake_len(&seen)) {
                        // The first record after the handshake: its header and length.
                        if seen.len() >= h + 4 {
                            let len = u32::from_be_bytes(seen[h..h + 4].try_into().unwrap()) as usize;
                            match attack {
                                Attack::FlipUp(k) if seen.len() > h + 4 + k.min(len - 1) => {
                                    out[h + 4 + k.min(len - 1) - start] ^= 0x20;
                                    done = true;
                                }
                                Attack::DuplicateUp if seen.len() >= h + 4 + len => {
                                    out.extend_from_slice(&seen[h..h + 4 + len]);
                                    done = true;
                                }
                                _ => {}
                            }
                        }
                    }
                    if sw.write_all(&out).await.is_err() {
                        break;
                    }
                }
                let _ = sw.shutdown().await;
            });
            tokio::spawn(async move {
                let mut seen = 0usize;
                let mut head: Vec<u8> = Vec::new();
                let mut done = false;
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let n = match sr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if head.len() < 8 {
                        head.extend_from_slice(&buf[..n.min(8 - head.len())]);
                    }
                    if let (Attack::FlipDown(k), false, Some(h)) = (attack, done, answer_len(&head)) {
                        let at = h + 4 + k;
                        if seen + n > at && at >= seen {
                            buf[at - seen] ^= 0x01;
                            done = true;
                        }
                    }
                    seen += n;
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = cw.shutdown().await;
            });
        }
    });
    addr
}

async fn put(addr: &str, chunk: &ChunkId, data: &[u8]) -> Result<(), String> {
    let mut s = connect(addr, T).await.map_err(|e| e.to_string())?;
    let req =
        NodeRequest::PutChunk { chunk: chunk.clone(), len: data.len() as u64, crc32c: crc32c::crc32c(data), bucket: None, sub_chunks: 0 };
    send(&mut s, &req).await.map_err(|e| e.to_string())?;
    for piece in data.chunks(100_000) {
        write_frame(&mut s, Kind::Data, piece).await.map_err(|e| e.to_string())?;
    }
    s.flush().await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(T, recv::<_, NodeResponse>(&mut s)).await {
        Ok(Ok(NodeResponse::Ok)) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

async fn request(addr: &str, req: &NodeRequest) -> Result<NodeResponse, kintsugi_proto::WireError> {
    kintsugi_proto::rpc::request(addr, req, T).await
}

/// Whether a request failed: no answer, or the node's word that a record failed its check
/// (sealed under the connection's keys before it closes it).
fn refused(r: Result<NodeResponse, kintsugi_proto::WireError>) -> bool {
    match r {
        Err(_) => true,
        Ok(NodeResponse::Error(e)) => {
            assert!(e.message().contains("record"), "{e}");
            true
        }
        Ok(_) => false,
    }
}

/// The chunk's bytes as the node hands them out on a clean connection, or None.
async fn stored(node: &str, chunk: &ChunkId) -> Option<Vec<u8>> {
    let mut s = connect(node, T).await.unwrap();
    send(&mut s, &NodeRequest::GetChunk { chunk: chunk.clone(), range: None }).await.unwrap();
    match recv::<_, NodeResponse>(&mut s).await.unwrap() {
        NodeResponse::Chunk { len, .. } => {
            let mut data = Vec::new();
            while (data.len() as u64) < len {
                data.extend(kintsugi_proto::recv_data(&mut s).await.unwrap());
            }
            Some(data)
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampering_replaying_and_injecting_close_the_connection_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let secret = Secret::random();
    std::fs::write(dir.path().join("secret"), secret.expose()).unwrap();
    set_secret(Some(secret));
    let (_node, node) = common::procs::node_with_secret(dir.path(), &dir.path().join("secret"));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();

    // A byte flipped in the request's record, anywhere in it: the put fails, nothing is
    // stored.
    for k in [0, 3, 40, 5000] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let p = proxy(node.clone(), Attack::FlipUp(k), log).await;
        let chunk = ChunkId::new(10 + k as u64, 0);
        assert!(put(&p, &chunk, &data).await.is_err(), "a tampered put succeeded");
        assert_eq!(stored(&node, &chunk).await, None, "a tampered put stored something");
    }

    // A stored chunk, then attacks on requests that would delete or read it.
    let chunk = ChunkId::new(1, 0);
    put(&node, &chunk, &data).await.unwrap();
    let delete = NodeRequest::DeleteChunk { chunk: chunk.clone() };
    // A forged record before the request: the connection closes before the request.
    let p = proxy(node.clone(), Attack::InjectUp, Arc::default()).await;
    assert!(refused(request(&p, &delete).await), "a delete behind a forged record was carried out");
    // A byte flipped in the request: not carried out.
    let p = proxy(node.clone(), Attack::FlipUp(7), Arc::default()).await;
    assert!(refused(request(&p, &delete).await), "a tampered delete was carried out");
    assert_eq!(stored(&node, &chunk).await.as_deref(), Some(&data[..]), "the chunk changed");

    // A byte flipped in the node's answer: the reader gets an error, never altered bytes.
    let p = proxy(node.clone(), Attack::FlipDown(100), Arc::default()).await;
    let mut s = connect(&p, T).await.unwrap();
    send(&mut s, &NodeRequest::GetChunk { chunk: chunk.clone(), range: None }).await.unwrap();
    let mut read = Vec::new();
    let outcome: Result<(), String> = async {
        match recv::<_, NodeResponse>(&mut s).await.map_err(|e| e.to_string())? {
            NodeResponse::Chunk { len, .. } => {
                while (read.len() as u64) < len {
                    read.extend(kintsugi_proto::recv_data(&mut s).await.map_err(|e| e.to_string())?);
                }
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    }
    .await;
    assert!(outcome.is_err(), "a tampered answer was read whole");
    assert!(data.starts_with(&read), "bytes handed out differ from the chunk's");

    // A record replayed within its connection: the first copy is served, the second closes
    // the connection.
    let p = proxy(node.clone(), Attack::DuplicateUp, Arc::default()).await;
    let mut s = connect(&p, T).await.unwrap();
    send(&mut s, &NodeRequest::Ping).await.unwrap();
    assert!(matches!(recv::<_, NodeResponse>(&mut s).await, Ok(NodeResponse::Pong { .. })));
    let second = tokio::time::timeout(T, recv::<_, NodeResponse>(&mut s)).await.unwrap().map_err(kintsugi_proto::WireError::from);
    assert!(refused(second), "the replayed record was served");
    assert!(recv::<_, NodeResponse>(&mut s).await.is_err(), "the connection stays closed");

    // A whole recorded session replayed on a new connection: the node's new ephemeral key
    // makes every recorded record fail; the delete it carried is not done again.
    let log = Arc::new(Mutex::new(Vec::new()));
    let p = proxy(node.clone(), Attack::None, log.clone()).await;
    let other = ChunkId::new(2, 0);
    put(&node, &other, &data).await.unwrap();
    assert_eq!(request(&p, &NodeRequest::DeleteChunk { chunk: other.clone() }).await.unwrap(), NodeResponse::Ok);
    assert_eq!(stored(&node, &other).await, None);
    put(&node, &other, &data).await.unwrap();
    let recorded = log.lock().unwrap().clone();
    let mut s = TcpStream::connect(&node).await.unwrap();
    s.write_all(&recorded).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(T, s.read_to_end(&mut answer)).await;
    assert_eq!(stored(&node, &other).await.as_deref(), Some(&data[..]), "a replayed session deleted the chunk");

    // Through it all, clean connections are served.
    assert!(matches!(request(&node, &NodeRequest::Ping).await, Ok(NodeResponse::Pong { .. })));
}
