//! Serving a `Pull`: a downstream vertex asking for the output of a vertex on this node. A
//! queued output is sent from here, through the gates its units wait on; otherwise the
//! connection goes to the vertex, which writes it itself (`output`).

use crate::counters::OpenConnection;
use crate::exec::{Executor, Run, Unit, UnitResult};
use crate::output::{write_unit, OutputEnd, PulledConn};
use crate::timeslot_gate::Side;
use kintsugi_proto::secure::Conn;
use kintsugi_proto::WireError;
use kintsugi_proto::{send, NodeResponse};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// Serves the `Pull` of `vertex` of `repair` that came on `sock`.
pub(crate) async fn serve(mut sock: Conn, open: OpenConnection, exec: &Executor, repair: u64, vertex: u32) {
    let (run, end) = match exec.take_output(repair, vertex).await {
        Ok(taken) => taken,
        Err(e) => return refuse(sock, e).await,
    };
    // A repair's bytes (it has a chunk to store; a degraded read has a reader) go out in
    // the repair class, so the network can put users' traffic first.
    if let (Some(dscp), true) = (exec.repair_dscp, run.assignment.store.is_some()) {
        if let Err(e) = sock.set_dscp(dscp) {
            tracing::warn!(node = exec.node, repair, error = %e, "cannot mark a repair's connection");
        }
    }
    match end {
        OutputEnd::Pulled(to_vertex) => {
            if let Err(back) = to_vertex.send(PulledConn { conn: sock, open }) {
                refuse(back.conn, WireError::not_found(format!("vertex {vertex} of repair {repair} has ended"))).await;
            }
        }
        OutputEnd::Queue(rx) => match queued(&mut sock, exec, &run, repair, vertex, rx).await {
            Ok(()) => {
                let _ = sock.shutdown().await;
            }
            Err(e) => refuse(sock, e).await,
        },
    }
}

/// Tells the puller why there is nothing (more) to pull, and closes the connection.
async fn refuse(mut sock: Conn, error: WireError) {
    let _ = send(&mut sock, &NodeResponse::Error(error)).await;
    let _ = sock.shutdown().await;
}

/// Sends a queued output's units as the vertex produces them, each after its gate.
async fn queued(
    sock: &mut Conn,
    exec: &Executor,
    run: &Run,
    repair: u64,
    vertex: u32,
    mut rx: mpsc::Receiver<UnitResult>,
) -> Result<(), WireError> {
    let io = |e: kintsugi_proto::FrameError| WireError::unavailable(format!("sending to the next hop: {e}"));
    let keepalive = (exec.io_timeout / 4).max(Duration::from_millis(50));
    // RepairBoost's timeslot: no send of an earlier slot outstanding on this node.
    let timeslot = run.ticket.clone().zip(run.assignment.timeslots.get(vertex as usize).copied().flatten());
    if let Some((ticket, slot)) = &timeslot {
        tracing::debug!(node = exec.node, repair, vertex, slot, "gated pull received");
        let turn = ticket.turn(Side::Send, *slot);
        tokio::pin!(turn);
        loop {
            tokio::select! {
                _ = &mut turn => {
                    tracing::debug!(node = exec.node, repair, vertex, slot, "send gate open");
                    break;
                }
                _ = tokio::time::sleep(keepalive) => {
                    if let Err(e) = send(sock, &NodeResponse::Gated).await {
                        ticket.release();
                        return Err(e.into());
                    }
                }
            }
        }
    }
    let mut first_unit = timeslot.as_ref().map(|(_, s)| *s);
    loop {
        let item = match tokio::time::timeout(keepalive, rx.recv()).await {
            Err(_) => {
                send(sock, &NodeResponse::Working).await.map_err(io)?;
                continue;
            }
            Ok(None) => break,
            Ok(Some(item)) => item,
        };
        if let Some(slot) = first_unit.take() {
            tracing::debug!(node = exec.node, repair, vertex, slot, "gated send's first unit ready");
        }
        let Unit { mut bytes, slot } = match item {
            Ok(u) => u,
            Err(e) => {
                if let Some(gate) = &run.gate {
                    gate.fail(&e);
                }
                return Err(e);
            }
        };
        if let (Some(gate), Some(slot)) = (&run.gate, slot) {
            // Waiting for an earlier timeslot's transfers on this node: working too.
            let turn = gate.turn(slot);
            tokio::pin!(turn);
            loop {
                tokio::select! {
                    r = &mut turn => {
                        r?;
                        break;
                    }
                    _ = tokio::time::sleep(keepalive) => send(sock, &NodeResponse::Working).await.map_err(io)?,
                }
            }
        }
        let len = bytes.len() as u64;
        let sent = write_unit(sock, &mut bytes, &exec.shaper).await;
        if let (Some(gate), Some(slot)) = (&run.gate, slot) {
            gate.end(slot, &sent.as_ref().map_err(|e| WireError::unavailable(format!("sending to the next hop: {e}"))));
        }
        if let (Err(_), Some((ticket, _))) = (&sent, &timeslot) {
            ticket.release();
        }
        sent.map_err(io)?;
        exec.counters.repair_sent(len, run.assignment.store.is_none());
        crate::pool::give(bytes);
    }
    sock.flush().await.map_err(|e| WireError::unavailable(format!("sending to the next hop: {e}")))?;
    if let Some((ticket, slot)) = timeslot {
        // The uplink's slot ends once the last byte has left the socket for the
        // link: bytes still in the socket's buffer would share the uplink with the
        // next slot's send, while bytes already in the link's queue go out ahead of
        // it, so the link neither shares nor idles. Waiting for the receiver's word
        // instead (a trip back through the receiver's own busy uplink) idled it
        // meanwhile. A receiver that went away ends the slot as well.
        tracing::debug!(node = exec.node, repair, vertex, slot, "gated send written");
        if let Err(e) = sock.sent_out(exec.io_timeout).await {
            tracing::debug!(node = exec.node, repair, vertex, slot, error = %e, "gated send not all sent");
        }
        tracing::debug!(node = exec.node, repair, vertex, slot, "gated send out");
        ticket.done(Side::Send, slot);
        let _ = kintsugi_proto::frame::read_frame_timeout(sock, exec.io_timeout).await;
        tracing::debug!(node = exec.node, repair, vertex, slot, "gated send acknowledged");
    }
    Ok(())
}
