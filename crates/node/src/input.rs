//! The input side of a repair vertex: pulling an upstream vertex's output over TCP, unit
//! by unit, with bounded buffering and liveness that tells a slow upstream from a dead one.

use crate::exec::{Counters, WIRE_PIECE};
use crate::shaper::Shaper;
use kintsugi_plan::{NodeId, VertexId};
use kintsugi_proto::{read_frame, send, Assignment, Frame, NodeRequest, NodeResponse};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A stream of units pulled from one input vertex.
pub type InputStream = mpsc::Receiver<Result<Vec<u8>, String>>;

/// Units an input may hold ahead of its consumer: beyond this the pulling task stops
/// reading its socket, so a slow consumer slows its sender (TCP flow control) instead of
/// buffering the chunk.
const INPUT_AHEAD: usize = 4;

/// The next data frame from an upstream vertex. `Working` frames say the upstream is alive
/// and waiting on its own inputs: waited through, up to ten I/O timeouts without data.
async fn next_piece(s: &mut tokio::net::TcpStream, node: NodeId, io_timeout: Duration) -> Result<Vec<u8>, String> {
    let started = tokio::time::Instant::now();
    loop {
        match tokio::time::timeout(io_timeout, read_frame(s)).await {
            Err(_) => return Err(format!("node {node} sent nothing for {io_timeout:?}")),
            Ok(Err(e)) => return Err(format!("node {node}: {e}")),
            Ok(Ok(Frame::Data(d))) => return Ok(d),
            Ok(Ok(Frame::Control(c))) => match serde_json::from_slice::<NodeResponse>(&c) {
                Ok(NodeResponse::Working) if started.elapsed() < io_timeout * 10 => continue,
                Ok(NodeResponse::Working) => return Err(format!("node {node} kept waiting on its inputs for {:?}", io_timeout * 10)),
                Ok(NodeResponse::Error { message }) => return Err(format!("node {node}: {message}")),
                _ => return Err(format!("node {node} sent a control message instead of data: {}", String::from_utf8_lossy(&c))),
            },
        }
    }
}

/// Opens the output stream of vertex `from`: a task connects to its node, pulls, checks
/// each unit's size and passes it on (downlink shaped, counted).
pub fn open_input(
    a: &Assignment,
    from: VertexId,
    sizes: Vec<usize>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
) -> InputStream {
    let (tx, rx) = mpsc::channel(INPUT_AHEAD);
    let node = a.graph.vertex(from).node;
    let addr = a.peers.get(&node).cloned().unwrap_or_default();
    let repair = a.repair;
    tokio::spawn(async move {
        let result: Result<(), String> = async {
            let mut s = kintsugi_proto::auth::connect(&addr, io_timeout).await.map_err(|e| format!("node {node} unreachable: {e}"))?;
            let _ = s.set_nodelay(true);
            send(&mut s, &NodeRequest::Pull { repair, vertex: from.0 }).await.map_err(|e| format!("node {node}: {e}"))?;
            for (u, &size) in sizes.iter().enumerate() {
                let mut data = Vec::with_capacity(size);
                loop {
                    let piece = next_piece(&mut s, node, io_timeout).await?;
                    if data.len() + piece.len() > size || (piece.len() < WIRE_PIECE && data.len() + piece.len() < size) {
                        return Err(format!("node {node} sent a malformed unit {u} (expected {size} bytes)"));
                    }
                    shaper.recv(piece.len()).await;
                    counters.received.fetch_add(piece.len() as u64, Ordering::Relaxed);
                    data.extend_from_slice(&piece);
                    if data.len() == size {
                        break;
                    }
                }
                if tx.send(Ok(data)).await.is_err() {
                    return Ok(());
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let _ = tx.send(Err(e)).await;
        }
    });
    rx
}
