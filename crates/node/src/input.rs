//! The input side of a repair vertex: pulling an upstream vertex's output over TCP, unit
//! by unit, with bounded buffering and liveness that tells a slow upstream from a dead one.

use crate::exec::Counters;
use crate::shaper::Shaper;
use crate::timeslot_gate::{Side, Ticket};
use crate::wire::Job;
use kintsugi_plan::{NodeId, VertexId};
use kintsugi_proto::frame::{read_body, read_head};
use kintsugi_proto::WireError;
use kintsugi_proto::{send, Kind, NodeRequest, NodeResponse};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A stream of units pulled from one input vertex: either a task reads the socket and
/// hands units over a queue, or the consuming vertex reads the socket itself ([`Inline`]).
pub enum InputStream {
    Task(mpsc::Receiver<Result<Vec<u8>, WireError>>),
    Inline(Box<Inline>),
}

impl InputStream {
    /// The next unit, or why there is none.
    pub async fn next_unit(&mut self) -> Result<Vec<u8>, WireError> {
        match self {
            InputStream::Task(rx) => rx.recv().await.ok_or_else(|| WireError::internal("an input stream ended early"))?,
            InputStream::Inline(i) => i.next_unit().await,
        }
    }
}

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
async fn next_piece(s: &mut Upstream, node: NodeId, io_timeout: Duration, data: &mut Vec<u8>, room: usize) -> Result<usize, WireError> {
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
            Err(_) => return Err(WireError::silent(node, format!("node {node} sent nothing for {io_timeout:?}"))),
            Ok(Err(e)) => return Err(WireError::unreachable(node, format!("node {node}: {e}"))),
            Ok(Ok(Ok(n))) => return Ok(n),
            Ok(Ok(Err(c))) => c,
        };
        match kintsugi_proto::frame::decode_control::<NodeResponse>(&control) {
            Ok(NodeResponse::Working) if started.elapsed() < io_timeout * 10 => continue,
            // Waiting for its node's earlier timeslots: bounded by the repair's time limit.
            Ok(NodeResponse::Gated) => continue,
            Ok(NodeResponse::Working) => {
                return Err(WireError::silent(node, format!("node {node} kept waiting on its inputs for {:?}", io_timeout * 10)))
            }
            // The upstream's own error, its faults (a relay chain's corrupt helper) kept.
            Ok(NodeResponse::Error(e)) => return Err(e.context(format_args!("node {node}"))),
            Ok(other) => return Err(WireError::internal(format!("node {node} sent a control message instead of data: {other:?}"))),
            Err(e) => {
                return Err(WireError::internal(format!("node {node} sent a control message instead of data, and an unreadable one: {e}")))
            }
        }
    }
}

/// An upstream connection. Open, it reads each body straight into its unit, with the next
/// header in the same system call (`Conn`'s spill); sealed, a record at a time. A buffer in
/// front of it (tokio's `BufReader`) would copy every byte once more.
type Upstream = kintsugi_proto::secure::Conn;

async fn connect(addr: &str, node: NodeId, io_timeout: Duration) -> Result<Upstream, WireError> {
    kintsugi_proto::auth::connect(addr, io_timeout).await.map_err(|e| WireError::unreachable(node, format!("node {node} unreachable: {e}")))
}

async fn pull(s: &mut Upstream, repair: u64, from: VertexId, node: NodeId) -> Result<(), WireError> {
    send(s, &NodeRequest::Pull { repair, vertex: from.0 }).await.map_err(|e| WireError::unreachable(node, format!("node {node}: {e}")))
}

/// Where an input's units come from, and what receiving them is charged to.
#[derive(Clone)]
struct Feed {
    repair: u64,
    from: VertexId,
    node: NodeId,
    addr: String,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
    degraded: bool,
}

impl Feed {
    fn of(a: &Job, from: VertexId, shaper: Arc<Shaper>, counters: Arc<Counters>, io_timeout: Duration) -> Self {
        let node = a.graph.vertex(from).node;
        let addr = a.peers.get(&node).cloned().unwrap_or_default();
        Feed { repair: a.repair, from, node, addr, shaper, counters, io_timeout, degraded: a.store.is_none() }
    }

    async fn connect(&self) -> Result<Upstream, WireError> {
        connect(&self.addr, self.node, self.io_timeout).await
    }

    async fn pull(&self, s: &mut Upstream) -> Result<(), WireError> {
        pull(s, self.repair, self.from, self.node).await
    }

    /// Reads unit `u` of `size` bytes. A unit may come in frames of any size (a
    /// store-and-forward sender sends its lane as it computes it); none may run past the
    /// unit's end. `gated` names the input's timeslot, for the trace of its first bytes.
    async fn read_unit(&self, s: &mut Upstream, u: usize, size: usize, gated: Option<u32>) -> Result<Vec<u8>, WireError> {
        let mut data = crate::pool::take(size);
        loop {
            let room = size - data.len();
            let n = next_piece(s, self.node, self.io_timeout, &mut data, room).await?;
            if n == 0 && data.len() < size {
                return Err(WireError::internal(format!("node {} sent an empty frame inside unit {u} (expected {size} bytes)", self.node)));
            }
            if let (Some(slot), 0, true) = (gated, u, data.len() == n) {
                tracing::debug!(repair = self.repair, from = self.node, vertex = self.from.0, slot, "gated input's first bytes in");
            }
            self.shaper.recv(n).await;
            self.counters.repair_received(n as u64, self.degraded);
            if data.len() == size {
                return Ok(data);
            }
        }
    }
}

/// An input its vertex reads itself, with no task and no queue between the socket and the
/// sum: a unit's bytes reach the vertex without a wake-up of another task (on a
/// multi-threaded runtime, often on another core). Not for inputs gated by a timeslot
/// (RepairBoost): such an input must take its stream whatever its vertex waits on (see
/// [`open_task`]). A vertex waiting for its own send slot (ECPipe cyclic) holds one unit,
/// and its inputs come from earlier slots, so its inputs are read inline.
pub struct Inline {
    feed: Feed,
    sizes: Vec<usize>,
    next: usize,
    conn: Option<Upstream>,
    /// Connecting and pulling, started when the input is opened so that every input of a
    /// vertex (every subtree of a PPR tree) starts at once.
    connecting: Option<tokio::task::JoinHandle<Result<Upstream, WireError>>>,
}

impl Inline {
    async fn next_unit(&mut self) -> Result<Vec<u8>, WireError> {
        if self.conn.is_none() {
            let h = self.connecting.take().ok_or_else(|| WireError::internal("the input's connection failed before"))?;
            self.conn = Some(h.await.map_err(|e| WireError::internal(format!("connecting to node {}: {e}", self.feed.node)))??);
        }
        let u = self.next;
        let size =
            *self.sizes.get(u).ok_or_else(|| WireError::internal(format!("unit {u} asked of an input of {} units", self.sizes.len())))?;
        let s = self.conn.as_mut().expect("connected above");
        let data = self.feed.read_unit(s, u, size, None).await?;
        self.next += 1;
        Ok(data)
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        if let Some(h) = &self.connecting {
            h.abort();
        }
    }
}

/// How an input is read: by a task of its own (gated or not), or by its vertex ([`Inline`]).
pub enum Opening {
    Task(Option<InputGate>),
    Inline,
}

/// Opens the output stream of vertex `from` as `how` says: `sizes` are its units' bytes;
/// what arrives is downlink shaped and counted.
pub fn open(
    a: &Job,
    from: VertexId,
    sizes: Vec<usize>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
    how: Opening,
) -> InputStream {
    let feed = Feed::of(a, from, shaper, counters, io_timeout);
    match how {
        Opening::Task(gate) => open_task(feed, sizes, gate),
        Opening::Inline => open_inline(feed, sizes),
    }
}

/// An input for its vertex to read itself ([`Inline`]).
fn open_inline(feed: Feed, sizes: Vec<usize>) -> InputStream {
    let opener = feed.clone();
    let connecting = tokio::spawn(async move {
        let mut s = opener.connect().await?;
        opener.pull(&mut s).await?;
        Ok(s)
    });
    InputStream::Inline(Box::new(Inline { feed, sizes, next: 0, conn: None, connecting: Some(connecting) }))
}

/// An input read by a task of its own: it connects to the node, pulls, checks each unit's
/// size and passes it on. A gated input first waits for its timeslot, and then takes its
/// whole stream without backpressure: a vertex may wait on another input of a later slot,
/// and a sender held up by it would hold its own slot, and every later one on its node, for
/// ever.
fn open_task(feed: Feed, sizes: Vec<usize>, gate: Option<InputGate>) -> InputStream {
    let (tx, rx) = mpsc::channel(if gate.is_some() { sizes.len().max(1) } else { INPUT_AHEAD });
    tokio::spawn(async move {
        let (repair, node, from) = (feed.repair, feed.node, feed.from);
        let result: Result<(), WireError> = async {
            // Connected and authenticated before the gate (four round trips under load):
            // once it opens, only the `Pull` and the first byte are left on the critical
            // path, where the simulator's gated transfer starts at once.
            let mut s = feed.connect().await?;
            if let Some(g) = &gate {
                tracing::debug!(repair, from = node, vertex = from.0, slot = g.slot, "gated input connected");
                g.ticket.turn(Side::Receive, g.slot).await;
                tracing::debug!(repair, from = node, vertex = from.0, slot = g.slot, "receive gate open, pulling");
            }
            feed.pull(&mut s).await?;
            for (u, &size) in sizes.iter().enumerate() {
                let data = feed.read_unit(&mut s, u, size, gate.as_ref().map(|g| g.slot)).await?;
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
    InputStream::Task(rx)
}
