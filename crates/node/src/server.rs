//! The node process: a TCP server for chunk reads and writes and repair plans, heartbeats to
//! the coordinator, and a clean stop. A bad frame or request fails that connection only.

pub use crate::config::NodeConfig;
use crate::counters::OpenConnection;
use crate::exec::Executor;
use crate::identity::{claim_data_dir, write_identity, DirLock, Identity};
use crate::shaper::Shaper;
use crate::store::ChunkStore;
use kintsugi_plan::NodeId;
use kintsugi_proto::secure::Conn;
use kintsugi_proto::WireError;
use kintsugi_proto::{
    read_frame_timeout, recv, send, write_frame, CoordRequest, Frame, FrameError, Kind, NodeRequest, NodeResponse, NodeStat,
};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The longest a timeslot reservation holds a node's gates (a coordinator asking for more
/// gets this).
const MAX_RESERVATION_HOLD_MS: u64 = 600_000;

/// A running node.
pub struct NodeHandle {
    pub id: NodeId,
    pub addr: SocketAddr,
    pub exec: Arc<Executor>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// Where `/metrics` is served (`metrics_listen`), and its task.
    pub metrics_addr: Option<SocketAddr>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

impl NodeHandle {
    /// Stops the node as a crash would: listener closed, connections and repairs dropped.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Some(m) = &self.metrics {
            m.abort();
        }
        self.exec.abort_all();
        let _ = self.task.await;
    }

    /// Resolves when the node stopped (e.g. after a `Shutdown` request).
    pub async fn stopped(&mut self) {
        let _ = (&mut self.task).await;
    }

    pub fn stat(&self) -> NodeStat {
        stat(&self.exec)
    }
}

fn stat(exec: &Executor) -> NodeStat {
    let (chunks, bytes) = exec.store.usage();
    NodeStat {
        node: exec.node,
        chunks,
        bytes,
        repair_sent: exec.counters.sent.load(Ordering::Relaxed),
        repair_received: exec.counters.received.load(Ordering::Relaxed),
        repair_read: exec.counters.read.load(Ordering::Relaxed),
        repair_file_read: exec.counters.file_read.load(Ordering::Relaxed),
        repair_structured: exec.counters.structured.load(Ordering::Relaxed),
        active_repairs: exec.counters.active.load(Ordering::Relaxed),
        timeslot_waits: exec.timeslots.waited.load(Ordering::Relaxed),
        timeslot_reservations: exec.timeslots.reserved_batches() as u64,
        disk_busy_seconds: exec.store.disk().map_or(0.0, |d| d.busy_seconds()),
    }
}

/// Starts a node: opens its store, binds its port, serves until stopped.
pub async fn start(cfg: NodeConfig) -> Result<NodeHandle, String> {
    if cfg.tcp_congestion.is_some() {
        kintsugi_proto::tcp::set_congestion_control(cfg.tcp_congestion.as_deref())?;
    }
    for (what, r) in [("uplink", cfg.uplink), ("downlink", cfg.downlink)] {
        if let Some(r) = r {
            if !(r > 0.0 && r.is_finite()) {
                return Err(format!("{what} must be a positive number of bytes per second, got {r}"));
            }
        }
    }
    // Before anything in the directory is read: one process per directory.
    let dir_lock = crate::identity::lock_data_dir(&cfg.data_dir)?;
    let store = match (cfg.hdd_seek_ms, cfg.hdd_bandwidth) {
        (None, None) => ChunkStore::open(&cfg.data_dir),
        (seek, bw) => {
            let d = kintsugi_hdd::HddModel::default();
            let hdd = kintsugi_hdd::HddModel::new(seek.map(|ms| ms / 1e3).unwrap_or(d.seek), bw.unwrap_or(d.bandwidth))
                .map_err(|e| e.to_string())?;
            tracing::info!(seek_ms = hdd.seek * 1e3, bandwidth = hdd.bandwidth, "chunk store on an emulated HDD");
            ChunkStore::open_emulating(&cfg.data_dir, hdd)
        }
    };
    let mut store = store.map_err(|e| e.to_string())?;
    if let Some(r) = cfg.read_ahead_bytes {
        store.set_read_ahead(r);
    }
    let store = Arc::new(store);
    let identity = claim_data_dir(&cfg)?;
    let listener = TcpListener::bind(&cfg.listen).await.map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let io_timeout = Duration::from_millis(cfg.io_timeout_ms.max(1));
    let mut exec = Executor::new(cfg.id, store, Arc::new(Shaper::new(cfg.uplink, cfg.downlink)), io_timeout);
    exec.capacity_bytes = cfg.capacity_bytes;
    if let Some(d) = cfg.repair_dscp.filter(|d| *d > 63) {
        return Err(format!("repair_dscp must be 0 to 63 (a DSCP has six bits), got {d}"));
    }
    exec.repair_dscp = cfg.repair_dscp;
    let exec = Arc::new(exec);
    let (stop_tx, stop_rx) = watch::channel(false);
    let advertise = match &cfg.advertise {
        Some(a) => a.clone(),
        None if addr.ip().is_unspecified() => {
            return Err(format!(
                "node listens on {addr}, an address nobody can connect to: give the address to advertise (--advertise HOST:PORT, or advertise in TOML)"
            ))
        }
        None => addr.to_string(),
    };
    if advertise.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_unspecified()) {
        return Err(format!("cannot advertise {advertise}: others cannot connect to it"));
    }
    let (metrics_addr, metrics) = match &cfg.metrics_listen {
        Some(listen) => {
            let (a, t) = kintsugi_metrics::serve(listen, Arc::new(crate::metrics::registry(&exec))).await?;
            (Some(a), Some(t))
        }
        None => (None, None),
    };
    let task = tokio::spawn(serve(listener, exec.clone(), stop_tx.clone(), stop_rx, cfg.clone(), advertise, (identity, dir_lock)));
    Ok(NodeHandle { id: cfg.id, addr, exec, stop: stop_tx, task, metrics_addr, metrics })
}

async fn serve(
    listener: TcpListener,
    exec: Arc<Executor>,
    stop_tx: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
    cfg: NodeConfig,
    advertise: String,
    identity: (Identity, DirLock),
) {
    // The directory stays locked until this task ends.
    let (identity, _dir_lock) = identity;
    let mut conns = JoinSet::new();
    if let Some(coord) = cfg.coordinator.clone() {
        let every = Duration::from_millis(cfg.heartbeat_ms.max(10));
        let capacity = crate::link_speed::link_capacity(&cfg, &coord);
        let token = identity.token.clone();
        // A node the coordinator accepts after refusing it (a `node replace` released its
        // id for this directory) tells what it holds at once, not at its next inventory.
        let inventory_now = Arc::new(tokio::sync::Notify::new());
        let identity = (cfg.data_dir.clone(), identity);
        conns.spawn(heartbeats(coord.clone(), exec.clone(), advertise, every, identity, capacity, (inventory_now.clone(), stop.clone())));
        conns.spawn(crate::inventory::report(coord.clone(), exec.clone(), cfg.clone(), token, (inventory_now, stop.clone())));
        if cfg.scrub_interval_ms > 0 {
            conns.spawn(crate::inventory::scrub(coord, exec.clone(), cfg.clone(), stop.clone()));
        }
    }
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    kintsugi_proto::tcp::tune(&sock);
                    let (exec, stop_tx) = (exec.clone(), stop_tx.clone());
                    conns.spawn(async move {
                        let open = OpenConnection::new(exec.counters.clone());
                        connection(sock, open, exec, stop_tx).await
                    });
                }
                Err(e) => tracing::warn!("node {}: accept failed: {e}", exec.node),
            },
            // Reap finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // Stopped: nothing new is accepted; repairs end (their coordinator plans them again);
    // requests in flight finish, for up to DRAIN_DEADLINE.
    exec.abort_all();
    let drained = tokio::time::timeout(DRAIN_DEADLINE, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("node {}: requests still running {DRAIN_DEADLINE:?} after the stop are cut", exec.node);
    }
    conns.abort_all();
}

/// How long a stopping node lets requests in flight finish.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Heartbeats to the coordinator; `identity` is the data directory and its identity (the
/// cluster it joined is recorded at the first welcome).
async fn heartbeats(
    coord: String,
    exec: Arc<Executor>,
    advertise: String,
    every: Duration,
    identity: (std::path::PathBuf, Identity),
    capacity: ((f64, f64), String),
    (inventory_now, mut stop): (Arc<tokio::sync::Notify>, watch::Receiver<bool>),
) {
    let (data_dir, mut identity) = identity;
    let mut refused = false;
    // Said once per streak: a node that cannot reach or is refused by its coordinator says
    // why, instead of retrying in silence.
    let mut complained = false;
    let mut conn: Option<kintsugi_proto::secure::Conn> = None;
    let mut monitor =
        crate::monitor::Monitor::new(capacity.0).capacity_from(capacity.1).measuring(crate::link_speed::measures_link(capacity.0, &coord));
    let boot = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
        h.finish()
    };
    loop {
        // Listing the store touches the disk: off the async runtime, so a busy disk never
        // delays the heartbeat task's siblings.
        let e = exec.clone();
        let (chunks, used_bytes, capacity_bytes, fs) = tokio::task::spawn_blocking(move || {
            let (chunks, used) = e.store.usage();
            (chunks, used, e.capacity(used), e.store.fs_report())
        })
        .await
        .unwrap_or((0, 0, 0, None));
        let link = Some(monitor.report(&exec.counters, exec.store.disk().map(|d| d.as_ref())));
        *exec.last_link.lock().expect("link lock") = link.clone();
        let msg = CoordRequest::Heartbeat {
            node: exec.node,
            addr: advertise.clone(),
            chunks,
            boot,
            used_bytes,
            capacity_bytes,
            cluster: identity.cluster,
            link,
            token: identity.token.clone(),
            fs,
        };
        if conn.is_none() {
            conn = match kintsugi_proto::auth::connect(&coord, every * 4).await {
                Ok(c) => Some(c),
                Err(e) => {
                    if !complained {
                        tracing::error!("node {}: cannot reach the coordinator at {coord}: {e}; retrying", exec.node);
                        complained = true;
                    } else {
                        tracing::debug!("node {}: coordinator: {e}", exec.node);
                    }
                    None
                }
            };
        }
        if let Some(c) = conn.as_mut() {
            let answer = match send(c, &msg).await {
                Ok(()) => tokio::time::timeout(every * 4, recv::<_, kintsugi_proto::CoordResponse>(c)).await.ok().and_then(|r| r.ok()),
                Err(_) => None,
            };
            let accepted = answer.as_ref().is_some_and(|a| !matches!(a, kintsugi_proto::CoordResponse::Error(_)));
            if accepted && std::mem::take(&mut refused) {
                inventory_now.notify_one();
            }
            match answer {
                Some(kintsugi_proto::CoordResponse::Error(message)) => {
                    refused = true;
                    if !complained {
                        tracing::error!("node {}: the coordinator refuses this node: {message}", exec.node);
                        complained = true;
                    }
                }
                Some(kintsugi_proto::CoordResponse::Welcome { cluster: c }) if identity.cluster == 0 && c != 0 => {
                    complained = false;
                    let joined = Identity { cluster: c, ..identity.clone() };
                    match write_identity(&data_dir, &joined) {
                        Ok(()) => {
                            tracing::info!("node {}: joined cluster {c:016x}", exec.node);
                            identity = joined;
                        }
                        Err(e) => tracing::warn!("node {}: {e}", exec.node),
                    }
                }
                Some(_) => {
                    if complained {
                        tracing::info!("node {}: the coordinator at {coord} accepts this node again", exec.node);
                    }
                    complained = false;
                }
                None => conn = None,
            }
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Serves requests on one connection until it closes or misbehaves.
async fn connection(tcp: TcpStream, open: OpenConnection, exec: Arc<Executor>, stop: watch::Sender<bool>) {
    // Nothing is served before the peer proves it knows the cluster secret.
    let peer = tcp.peer_addr().ok();
    let mut sock = match kintsugi_proto::auth::accept(tcp).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("node {}: {e} ({peer:?})", exec.node);
            return;
        }
    };
    let idle = Duration::from_secs(600);
    let mut stopping = stop.subscribe();
    loop {
        // Between requests a stopping node closes the connection; a request being served
        // is finished first.
        let next = tokio::select! {
            r = read_frame_timeout(&mut sock, idle) => r,
            _ = stopping.wait_for(|s| *s) => return,
        };
        let req = match next {
            Ok(Frame::Control(body)) => match kintsugi_proto::frame::decode_control::<NodeRequest>(&body) {
                Ok(r) => r,
                Err(e) => {
                    let _ = send(&mut sock, &NodeResponse::Error(WireError::bad_request(format!("bad request: {e}")))).await;
                    return;
                }
            },
            Ok(Frame::Data(_)) => {
                let _ = send(&mut sock, &NodeResponse::Error(WireError::bad_request("unexpected data frame: send a request first"))).await;
                return;
            }
            Err(FrameError::Closed) => return,
            Err(e) => {
                tracing::debug!("node {}: dropping connection: {e}", exec.node);
                let _ = send(&mut sock, &NodeResponse::Error(WireError::bad_request(format!("bad frame: {e}")))).await;
                return;
            }
        };
        // A pull is the connection's last request, and the connection may go to the vertex.
        if let NodeRequest::Pull { repair, vertex } = req {
            return crate::pull::serve(sock, open, &exec, repair, vertex).await;
        }
        let keep = match handle(&mut sock, &exec, req, &stop).await {
            Ok(keep) => keep,
            Err(e) => {
                let _ = send(&mut sock, &NodeResponse::Error(e)).await;
                false
            }
        };
        if !keep {
            let _ = sock.shutdown().await;
            return;
        }
    }
}

/// Handles one request; Ok(true) keeps the connection open for another.
async fn handle(sock: &mut Conn, exec: &Arc<Executor>, req: NodeRequest, stop: &watch::Sender<bool>) -> Result<bool, WireError> {
    let io = WireError::from;
    match req {
        NodeRequest::Ping => send(sock, &NodeResponse::Pong { node: exec.node }).await.map_err(io)?,
        NodeRequest::Stat => send(sock, &NodeResponse::Stat(stat(exec))).await.map_err(io)?,
        NodeRequest::PutChunk { chunk, len, crc32c, bucket, sub_chunks } => {
            exec.check_space(len)?;
            let block = crate::store::block_for(len, sub_chunks);
            let mut w = exec.store.writer_in(&chunk, bucket)?.with_block(block);
            while w.len() < len {
                let data = match read_frame_timeout(sock, exec.io_timeout).await.map_err(io)? {
                    Frame::Data(d) => d,
                    Frame::Control(_) => return Err(WireError::bad_request("expected chunk data")),
                };
                if w.len() + data.len() as u64 > len {
                    return Err(WireError::bad_request(format!("more than the announced {len} bytes")));
                }
                exec.shaper.recv(data.len()).await;
                exec.counters.fg_received.fetch_add(data.len() as u64, Ordering::Relaxed);
                w.write(&data)?;
            }
            // The fsync and rename block: off the async runtime.
            tokio::task::spawn_blocking(move || w.finish(Some(crc32c))).await.map_err(|e| WireError::internal(e.to_string()))??;
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::GetChunk { chunk, range } => {
            let r = exec.store.reader(&chunk)?;
            // A range read (an object's range GET) reads and verifies only the blocks it
            // covers.
            let (start, end) = match range {
                None => (0, r.len()),
                Some((off, len)) if off.checked_add(len).is_some_and(|e| e <= r.len()) => (off, off + len),
                Some((off, len)) => {
                    return Err(WireError::bad_request(format!("range {off}+{len} is outside chunk {chunk} ({} bytes)", r.len())))
                }
            };
            // Streamed piece by piece out of a verified read window (memory: one window);
            // a corrupt block found mid-way ends the stream with an error frame, and the
            // reader's whole-chunk checksum catches anything else.
            const PIECE: u64 = crate::exec::WIRE_PIECE as u64;
            // A short range reads no more than its own blocks.
            let mut window = crate::store::Window::new((1 << 20).min((end - start) as usize + crate::store::BLOCK));
            if end > start {
                window.get(&r, start, PIECE.min(end - start) as usize)?;
            }
            crate::disk_emulation::settle().await;
            send(sock, &NodeResponse::Chunk { len: end - start, crc32c: r.crc32c() }).await.map_err(io)?;
            let mut off = start;
            while off < end {
                let n = PIECE.min(end - off);
                let piece = match window.get(&r, off, n as usize) {
                    Ok(p) => p,
                    Err(e) => {
                        send(sock, &NodeResponse::Error(e.into())).await.map_err(io)?;
                        return Ok(false);
                    }
                };
                crate::disk_emulation::settle().await;
                exec.shaper.send(piece.len()).await;
                write_frame(sock, Kind::Data, piece).await.map_err(io)?;
                exec.counters.fg_sent.fetch_add(n, Ordering::Relaxed);
                off += n;
            }
            sock.flush().await.map_err(|e| WireError::unavailable(e.to_string()))?;
        }
        NodeRequest::Assemble { chunk, len, pieces, crc32c, bucket, sub_chunks, ranges } => {
            if len > kintsugi_proto::BucketSlot::MAX_CLASS {
                return Err(WireError::bad_request(format!("a slot of {len} bytes is larger than any bucket's")));
            }
            exec.check_space(len)?;
            let store = exec.store.clone();
            tokio::task::spawn_blocking(move || {
                crate::assemble::assemble(&store, &chunk, (len, sub_chunks), (&pieces, &ranges), crc32c, bucket)
            })
            .await
            .map_err(|e| WireError::internal(e.to_string()))??;
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::IndexPut { pg, name, seq, record } => {
            let ix = exec.store.objects.clone();
            tokio::task::spawn_blocking(move || ix.put(pg, &name, seq, record.as_deref())).await??;
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::IndexGet { pg, name } => {
            let ix = exec.store.objects.clone();
            let (seq, record) = tokio::task::spawn_blocking(move || ix.get(pg, &name)).await??;
            send(sock, &NodeResponse::IndexEntry { seq, record }).await.map_err(io)?;
        }
        NodeRequest::DeleteChunk { chunk } => {
            exec.store.delete(&chunk)?;
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::RunRepair { assignment } => {
            exec.start(*assignment)?;
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::Pull { .. } => return Err(WireError::internal("a pull is served by `pull::serve`")),
        NodeRequest::WaitRepair { repair, timeout_ms } => {
            let crc = exec.wait(repair, Duration::from_millis(timeout_ms)).await?;
            send(sock, &NodeResponse::RepairDone { crc32c: crc }).await.map_err(io)?;
        }
        NodeRequest::Progress { repair } => {
            let r = match exec.progress(repair) {
                Some((bytes, done)) => NodeResponse::Progress { bytes, done },
                None => NodeResponse::Error(WireError::not_found(format!("repair {repair} is not known on node {}", exec.node))),
            };
            send(sock, &r).await.map_err(io)?;
        }
        NodeRequest::ReserveTimeslots { batch, sends, receives, hold_ms } => {
            exec.timeslots.reserve(batch, &sends, &receives);
            tracing::debug!(node = exec.node, batch, sends = sends.len(), receives = receives.len(), hold_ms, "timeslots reserved");
            // A reservation left by a coordinator that went away must not hold the node's
            // gates for ever: what is still unclaimed after the hold is released.
            let (gates, hold) = (exec.timeslots.clone(), Duration::from_millis(hold_ms.min(MAX_RESERVATION_HOLD_MS)));
            tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                gates.release(batch, &[], &[], true);
            });
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::ReleaseTimeslots { batch, sends, receives, everything } => {
            exec.timeslots.release(batch, &sends, &receives, everything);
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::CancelRepair { repair } => {
            exec.cancel(repair);
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
        }
        NodeRequest::Shutdown => {
            send(sock, &NodeResponse::Ok).await.map_err(io)?;
            let _ = stop.send(true);
            return Ok(false);
        }
    }
    Ok(true)
}
