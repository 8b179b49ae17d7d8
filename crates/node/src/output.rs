//! The output side of a repair vertex: where its units go. Either a queue that the task
//! serving the downstream's `Pull` empties, or the pulled connection itself, which the
//! vertex writes. The queue is for RepairBoost's timeslots and for store-and-forward lanes;
//! every other vertex writes its connection itself, waiting for its units' send slots
//! (ECPipe cyclic) there, and hands no unit to another task, which on a multi-threaded
//! runtime cost a wake-up, often of another core, per unit.

use crate::counters::{Counters, OpenConnection};
use crate::exec::{UnitResult, WIRE_PIECE};
use crate::shaper::Shaper;
use crate::slot_gate::SlotGate;
use kintsugi_proto::secure::Conn;
use kintsugi_proto::WireError;
use kintsugi_proto::{send, NodeResponse};
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

/// A downstream's connection, handed by the task that served its `Pull` to the vertex.
pub struct PulledConn {
    pub conn: Conn,
    pub open: OpenConnection,
}

/// What serving a `Pull` of a vertex's output takes: the queue to empty, or where to hand
/// the connection.
pub enum OutputEnd {
    Queue(mpsc::Receiver<UnitResult>),
    Pulled(oneshot::Sender<PulledConn>),
}

/// Where a vertex's units go.
pub(crate) enum Output {
    Queue(mpsc::Sender<UnitResult>),
    Pulled(Box<Pulled>),
}

/// A vertex's output it writes itself, once its downstream has pulled.
pub(crate) struct Pulled {
    waiting: oneshot::Receiver<PulledConn>,
    conn: Option<PulledConn>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    degraded: bool,
    /// The node's send slots of this repair (ECPipe cyclic), if its graph has them.
    gate: Option<Arc<SlotGate>>,
    /// How long the downstream may go without a frame while this vertex waits on its
    /// inputs (it then hears `Working`).
    keepalive: Duration,
    io_timeout: Duration,
}

/// The connection, waiting for the downstream's `Pull` first if it has not come yet. The
/// receiver is never polled again once it gave the connection.
async fn pulled<'a>(waiting: &mut oneshot::Receiver<PulledConn>, conn: &'a mut Option<PulledConn>) -> Result<&'a mut Conn, WireError> {
    if conn.is_none() {
        *conn = Some(waiting.await.map_err(|_| WireError::unavailable("nobody pulled the output"))?);
    }
    Ok(&mut conn.as_mut().expect("set above").conn)
}

/// Writes a unit's bytes as data frames of at most [`WIRE_PIECE`] bytes (an empty unit
/// still takes one, empty, frame), uplink shaped. They are sealed where they lie: the unit
/// is not read again before it goes back to the pool.
pub(crate) async fn write_unit(sock: &mut Conn, bytes: &mut [u8], shaper: &Shaper) -> Result<(), kintsugi_proto::FrameError> {
    let len = bytes.len();
    let mut none = [];
    for piece in bytes.chunks_mut(WIRE_PIECE).chain((len == 0).then_some(&mut none[..])) {
        shaper.send(piece.len()).await;
        kintsugi_proto::frame::write_data_giving_up(sock, piece).await?;
    }
    Ok(())
}

impl Output {
    /// An output its vertex writes: the returned end goes where `Pull`s find it.
    pub fn pulled(
        shaper: Arc<Shaper>,
        counters: Arc<Counters>,
        degraded: bool,
        gate: Option<Arc<SlotGate>>,
        io_timeout: Duration,
    ) -> (Self, OutputEnd) {
        let (tx, rx) = oneshot::channel();
        let keepalive = (io_timeout / 4).max(Duration::from_millis(50));
        let p = Pulled { waiting: rx, conn: None, shaper, counters, degraded, gate, keepalive, io_timeout };
        (Output::Pulled(Box::new(p)), OutputEnd::Pulled(tx))
    }

    pub async fn send(&mut self, unit: crate::exec::Unit) -> Result<(), WireError> {
        match self {
            Output::Queue(tx) => tx.send(Ok(unit)).await.map_err(|_| WireError::unavailable("nobody pulled the output")),
            Output::Pulled(p) => {
                let slotted = p.gate.clone().zip(unit.slot);
                if let Some((gate, slot)) = &slotted {
                    // Waiting for an earlier slot's send on this node: working too.
                    p.alive(gate.turn(*slot)).await??;
                }
                let mut bytes = unit.bytes;
                let sock = pulled(&mut p.waiting, &mut p.conn).await?;
                let sent = write_unit(sock, &mut bytes, &p.shaper)
                    .await
                    .map_err(|e| WireError::unavailable(format!("sending to the next hop: {e}")));
                if let Some((gate, slot)) = &slotted {
                    gate.end(*slot, &sent);
                }
                sent?;
                p.counters.repair_sent(bytes.len() as u64, p.degraded);
                crate::pool::give(bytes);
                Ok(())
            }
        }
    }

    /// Runs `f` (the vertex waiting on its inputs); a pulled output meanwhile tells its
    /// downstream every `keepalive` that this vertex is working, as the queue's server does.
    pub async fn alive<F: Future>(&mut self, f: F) -> Result<F::Output, WireError> {
        match self {
            Output::Queue(_) => Ok(f.await),
            Output::Pulled(p) => p.alive(f).await,
        }
    }

    /// Tells the downstream why this vertex failed (waiting up to the I/O timeout for it
    /// to pull, if it has not yet).
    pub async fn fail(&mut self, error: WireError) {
        match self {
            Output::Queue(tx) => {
                let _ = tx.send(Err(error)).await;
            }
            Output::Pulled(p) => {
                let io_timeout = p.io_timeout;
                if let Ok(Ok(sock)) = tokio::time::timeout(io_timeout, pulled(&mut p.waiting, &mut p.conn)).await {
                    // Sent in full before the connection closes: the reader learns from
                    // it which helper chunk is corrupt or missing.
                    let _ = send(sock, &NodeResponse::Error(error)).await;
                    let _ = sock.shutdown().await;
                }
            }
        }
    }

    /// Every unit is out: a pulled connection is flushed and closed. An output of no units
    /// (a lane with nothing to carry: ECPipe cyclic's later lanes when a Clay chunk has
    /// fewer slices than lanes) does not wait for its pull: its downstream reads nothing
    /// from it and may have ended before it pulled, which left this vertex, and the read
    /// windows it holds, waiting until the repair's time limit.
    pub async fn finish(&mut self) -> Result<(), WireError> {
        if let Output::Pulled(p) = self {
            let Some(c) = p.conn.as_mut() else { return Ok(()) };
            let sock = &mut c.conn;
            sock.flush().await.map_err(|e| WireError::unavailable(format!("sending to the next hop: {e}")))?;
            let _ = sock.shutdown().await;
        }
        Ok(())
    }
}

impl Pulled {
    /// Runs `f`, telling the downstream every `keepalive` meanwhile that this vertex is
    /// working (once it has pulled).
    async fn alive<F: Future>(&mut self, f: F) -> Result<F::Output, WireError> {
        tokio::pin!(f);
        // Most units are in the socket already: no timer for them.
        if let Poll::Ready(r) = std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await {
            return Ok(r);
        }
        loop {
            match &mut self.conn {
                None => tokio::select! {
                    r = &mut f => return Ok(r),
                    c = &mut self.waiting => self.conn = Some(c.map_err(|_| WireError::unavailable("nobody pulled the output"))?),
                },
                Some(c) => tokio::select! {
                    r = &mut f => return Ok(r),
                    _ = tokio::time::sleep(self.keepalive) => send(&mut c.conn, &NodeResponse::Working).await.map_err(WireError::from)?,
                },
            }
        }
    }
}
