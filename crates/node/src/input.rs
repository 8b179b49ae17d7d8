//! The input side of a repair vertex: pulling an upstream vertex's output over TCP, unit
//! by unit, with bounded buffering and liveness that tells a slow upstream from a dead one.

use crate::exec::Counters;
use crate::shaper::Shaper;
use crate::timeslot_gate::{Side, Ticket};
use crate::wire::Job;
use kintsugi_plan::{NodeId, VertexId};
use kintsugi_proto::frame::{read_body, read_head};
use kintsugi_proto::{send, Kind, NodeRequest, NodeResponse};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A stream of units pulled from one input vertex.
pub type InputStream = mpsc::Receiver<Result<Vec<u8>, String>>;

/// Units an input may hold ahead of its consumer: beyond this the pulling task stops
/// reading its socket, so a slow consumer slows its sender (TCP flow control) instead of
/// buffering the chunk.
const INPUT_AHEAD: usize = 4;

/// The timeslot an input's transfer waits for at the receiving node's gate (RepairBoost).
pub struct InputGate {
    pub ticket: Arc<Ticket>,
    pub slot: u32,
}

/// Reads the next data frame from an upstream vertex onto the end of `data`, refusing one
/// longer than `room`; returns its length. `Working` frames say the upstream is alive and
/// waiting on its own inputs: waited through, up to ten I/O timeouts without data.
async fn next_piece(s: &mut Upstream, node: NodeId, io_timeout: Duration, data: &mut Vec<u8>, room: usize) -> Result<usize, String> {
    let started = tokio::time::Instant::now();
    loop {
        let read = async {
            let (kind, len) = read_head(s).await?;
            if kind == Kind::Data && len <= room {
                read_body(s, len, data).await?;
                return Ok(Ok(len));
            }
            let mut body = Vec::new();
            if kind == Kind::Data {
                // Too large for the unit: said as the frame limit it is.
                return Err(kintsugi_proto::FrameError::TooLarge { len: len as u32, max: room.min(u32::MAX as usize) as u32 });
            }
            read_body(s, len, &mut body).await?;
            Ok::<_, kintsugi_proto::FrameError>(Err(body))
        };
        let control = match tokio::time::timeout(io_timeout, read).await {
            Err(_) => return Err(format!("node {node} sent nothing for {io_timeout:?}")),
            Ok(Err(e)) => return Err(format!("node {node}: {e}")),
            Ok(Ok(Ok(n))) => return Ok(n),
            Ok(Ok(Err(c))) => c,
        };
        match kintsugi_proto::frame::decode_control::<NodeResponse>(&control) {
            Ok(NodeResponse::Working) if started.elapsed() < io_timeout * 10 => continue,
            // Waiting for its node's earlier timeslots: bounded by the repair's time limit.
            Ok(NodeResponse::Gated) => continue,
            Ok(NodeResponse::Working) => return Err(format!("node {node} kept waiting on its inputs for {:?}", io_timeout * 10)),
            Ok(NodeResponse::Error { message }) => return Err(format!("node {node}: {message}")),
            Ok(other) => return Err(format!("node {node} sent a control message instead of data: {other:?}")),
            Err(e) => return Err(format!("node {node} sent a control message instead of data, and an unreadable one: {e}")),
        }
    }
}

/// An upstream connection. Open, it reads each body straight into its unit, with the next
/// header in the same system call (`Conn`'s spill); sealed, a record at a time. A buffer in
/// front of it (tokio's `BufReader`) would copy every byte once more.
type Upstream = kintsugi_proto::secure::Conn;

/// Opens the output stream of vertex `from`: a task connects to its node, pulls, checks
/// each unit's size and passes it on (downlink shaped, counted). A gated input first waits
/// for its timeslot, and then takes its whole stream without backpressure: a vertex may
/// wait on another input of a later slot, and a sender held up by it would hold its own
/// slot, and every later one on its node, for ever.
pub fn open_input(
    a: &Job,
    from: VertexId,
    sizes: Vec<usize>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
    gate: Option<InputGate>,
) -> InputStream {
    let (tx, rx) = mpsc::channel(if gate.is_some() { sizes.len().max(1) } else { INPUT_AHEAD });
    let node = a.graph.vertex(from).node;
    let addr = a.peers.get(&node).cloned().unwrap_or_default();
    let repair = a.repair;
    let degraded = a.store.is_none();
    tokio::spawn(async move {
        let result: Result<(), String> = async {
            // Connected and authenticated before the gate (four round trips under load):
            // once it opens, only the `Pull` and the first byte are left on the critical
            // path, where the simulator's gated transfer starts at once.
            let mut s = kintsugi_proto::auth::connect(&addr, io_timeout).await.map_err(|e| format!("node {node} unreachable: {e}"))?;
            if let Some(g) = &gate {
                tracing::debug!(repair, from = node, vertex = from.0, slot = g.slot, "gated input connected");
                g.ticket.turn(Side::Receive, g.slot).await;
                tracing::debug!(repair, from = node, vertex = from.0, slot = g.slot, "receive gate open, pulling");
            }
            send(&mut s, &NodeRequest::Pull { repair, vertex: from.0 }).await.map_err(|e| format!("node {node}: {e}"))?;
            for (u, &size) in sizes.iter().enumerate() {
                let mut data = crate::pool::take(size);
                loop {
                    let room = size - data.len();
                    // A unit may come in frames of any size (a store-and-forward sender
                    // sends its lane as it computes it); none may run past the unit's end.
                    let n = next_piece(&mut s, node, io_timeout, &mut data, room).await?;
                    if n == 0 && data.len() < size {
                        return Err(format!("node {node} sent an empty frame inside unit {u} (expected {size} bytes)"));
                    }
                    if let (Some(g), 0) = (&gate, u) {
                        if data.len() == n {
                            tracing::debug!(repair, from = node, vertex = from.0, slot = g.slot, "gated input's first bytes in");
                        }
                    }
                    shaper.recv(n).await;
                    counters.repair_received(n as u64, degraded);
                    if data.len() == size {
                        break;
                    }
                }
                if tx.send(Ok(data)).await.is_err() {
                    return Ok(());
                }
            }
            if let Some(g) = &gate {
                tracing::debug!(repair, from = node, vertex = from.0, slot = g.slot, "gated input complete");
                g.ticket.done(Side::Receive, g.slot);
                // The sender's slot ended when its last byte left for the link; it holds
                // the connection until this word that everything arrived.
                let _ = send(&mut s, &NodeResponse::Ok).await;
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
