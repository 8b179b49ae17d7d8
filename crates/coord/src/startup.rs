//! Starting a coordinator: its metadata store opened (after winning the leader lease, with
//! etcd), its port bound, its connections served and its background workers started;
//! [`CoordHandle`] stops it.

use crate::config::CoordConfig;
use crate::coordinator::Coordinator;
use crate::metadata::{MetaStore, RedbMeta};
use kintsugi_proto::WireError;
use kintsugi_proto::{read_frame_timeout, send, CoordRequest, CoordResponse, Frame, FrameError};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Ids a coordinator takes from its metadata store at a time (repairs, timeslot batches).
const ID_BLOCK: u64 = 1024;

/// A running coordinator.
pub struct CoordHandle {
    pub addr: SocketAddr,
    pub coord: Arc<Coordinator>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// With several coordinators: this one's leadership, and why it was lost once it is.
    leadership: Option<Arc<crate::metadata::leader::Leadership>>,
    deposed: watch::Receiver<Option<String>>,
    /// Where `/metrics` and the status page (`/`) are served (`metrics_listen`), and its task.
    pub metrics_addr: Option<SocketAddr>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

impl CoordHandle {
    /// Stops serving (as a crash would: in-flight requests are dropped). Returns once every
    /// task holding the coordinator is gone, so its store can be opened again.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Some(m) = &self.metrics {
            m.abort();
        }
        let _ = self.task.await;
        if let Some(l) = &self.leadership {
            // A standby need not wait for the lease to expire.
            l.resign().await;
        }
        for _ in 0..500 {
            if Arc::strong_count(&self.coord) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl CoordHandle {
    /// Returns, saying why, when this coordinator's leadership ends (it stops serving then);
    /// never with redb.
    pub async fn deposed(&mut self) -> String {
        loop {
            if let Some(why) = self.deposed.borrow().clone() {
                return why;
            }
            if self.deposed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The metadata store `cfg` names: redb in the data directory, or etcd once this
/// coordinator leads (it stands by until then).
async fn open_meta(cfg: &CoordConfig) -> Result<(Arc<dyn MetaStore>, Option<Arc<crate::metadata::leader::Leadership>>), WireError> {
    if cfg.meta.is_empty() || cfg.meta == "redb" {
        return Ok((Arc::new(RedbMeta::open(&cfg.data_dir.join("meta.redb"))?), None));
    }
    let (endpoints, prefix) = crate::metadata::etcd_store::parse_url(&cfg.meta)?;
    // A call keeps trying for as long as etcd takes to elect a new raft leader (a second or
    // two), and gives up within a client's own timeout and before the leader lease lapses
    // (when this coordinator would stop answering), so the client hears why.
    let request = Duration::from_millis((cfg.io_timeout_ms / 8).max(400));
    let retry_for = Duration::from_millis((cfg.io_timeout_ms / 3).max(2000).min(cfg.leader_lease_ms * 2 / 3).max(1000));
    let etcd = Arc::new(crate::metadata::etcd_http::Etcd::new(&endpoints, request, retry_for)?);
    let ttl = Duration::from_millis(cfg.leader_lease_ms.max(1000));
    let key = format!("{prefix}leader").into_bytes();
    let lead = Arc::new(crate::metadata::leader::campaign(etcd.clone(), key, &cfg.listen, ttl).await?);
    let fence = Some(lead.fence());
    let meta = tokio::task::spawn_blocking(move || crate::metadata::etcd_store::EtcdMeta::open(etcd, &prefix, fence))
        .await
        .map_err(WireError::from)??;
    Ok((Arc::new(meta), Some(lead)))
}

/// Opens the metadata store, binds, serves; resumes repairs left pending by a previous run.
pub async fn start(cfg: CoordConfig) -> Result<CoordHandle, WireError> {
    // The metrics port answers from the start: a standby says so while it waits to lead.
    let slot = crate::metrics::Slot::default();
    let repair_counters = crate::repair::counters::RepairCounters::default();
    let (metrics_addr, metrics) = match &cfg.metrics_listen {
        Some(listen) => {
            let pages = Some(crate::status_page::pages(&slot));
            let registry = Arc::new(crate::metrics::registry(&slot, &repair_counters));
            let (a, t) = kintsugi_metrics::serve_with_pages(listen, registry, pages).await.map_err(WireError::bad_request)?;
            (Some(a), Some(t))
        }
        None => (None, None),
    };
    match serve_cluster(cfg, slot, repair_counters).await {
        Ok(h) => Ok(CoordHandle { metrics_addr, metrics, ..h }),
        Err(e) => {
            if let Some(t) = &metrics {
                t.abort();
            }
            Err(e)
        }
    }
}

/// Opens the metadata store (waiting to lead, with etcd), binds and serves; fills `slot`
/// for the metrics port once the coordinator exists. The handle's metrics are the caller's.
async fn serve_cluster(
    cfg: CoordConfig,
    slot: crate::metrics::Slot,
    repair_counters: crate::repair::counters::RepairCounters,
) -> Result<CoordHandle, WireError> {
    let (meta, leadership) = open_meta(&cfg).await?;
    let listener =
        TcpListener::bind(&cfg.listen).await.map_err(|e| WireError::bad_request(format!("cannot listen on {}: {e}", cfg.listen)))?;
    let addr = listener.local_addr().map_err(|e| WireError::internal(e.to_string()))?;
    let epoch = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish() & 0x7fff_ffff
    };
    let cluster_id = meta.cluster_id()?;
    // Nodes that were up are taken as up until they miss `dead_after_ms` of heartbeats, as
    // if they had just sent one: a restarted coordinator does not count every chunk lost
    // in the moments before the nodes report in.
    let now = Instant::now();
    let live = meta.nodes()?.into_iter().filter(|n| !n.failed).map(|n| (n.id, (n.addr, now))).collect();
    let per_destination = cfg.repair_max_active_per_destination;
    let coord = Arc::new(Coordinator {
        cluster_id,
        cfg,
        meta,
        live: Mutex::new(live),
        repairing: tokio::sync::Mutex::new(()),
        sealing: tokio::sync::Mutex::new(()),
        maybe_open: std::sync::atomic::AtomicBool::new(true),
        compaction: Default::default(),
        started: Instant::now(),
        inventories: Default::default(),
        space: Default::default(),
        code_widths: Default::default(),
        links: Mutex::new(HashMap::new()),
        last_auto: Mutex::new(None),
        waiting_said: Default::default(),
        sar: Mutex::new(None),
        destinations: crate::repair::destination_limit::DestinationLimit::new(per_destination),
        epoch,
        repair_ids: crate::metadata::id_blocks::IdBlocks::new("repair", ID_BLOCK),
        batch_ids: crate::metadata::id_blocks::IdBlocks::new("gate_batch", ID_BLOCK),
        index: Default::default(),
        draining: Mutex::default(),
        removed: Mutex::default(),
        rebalancing: tokio::sync::Mutex::new(()),
        rebalance_status: Mutex::default(),
        repair_counters,
        link_history: Default::default(),
        foreground_record: Default::default(),
    });
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(serve(listener, coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::objects::collector(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::workers::seal::sealer(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::workers::geo_compaction::pass::compactor(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::object_index::publish::sync(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::workers::heal_margin::scan(coord.clone(), stop_rx.clone()));
    if coord.cfg.auto_repair {
        tokio::spawn(crate::workers::auto_repair::run(coord.clone(), stop_rx));
    }
    if !coord.meta.pending()?.is_empty() {
        let c = coord.clone();
        tokio::spawn(async move {
            // Give the nodes time to report in, then finish what the last run started.
            tokio::time::sleep(Duration::from_millis(c.cfg.dead_after_ms)).await;
            match c.resume().await {
                Ok(r) => tracing::info!("resumed repairs: {} repaired, {} failed", r.repaired, r.failed),
                Err(e) => tracing::warn!("resuming repairs failed: {e}"),
            }
        });
    }
    let _ = slot.set(Arc::downgrade(&coord));
    let (lost, deposed) = watch::channel(None);
    if let Some(l) = leadership.clone() {
        let stop = stop.clone();
        tokio::spawn(async move {
            let why = l.hold().await;
            tracing::error!("no longer the leader: {why}; this coordinator stops serving");
            let _ = stop.send(true);
            let _ = lost.send(Some(why));
        });
    }
    Ok(CoordHandle { addr, coord, stop, task, leadership, deposed, metrics_addr: None, metrics: None })
}

async fn serve(listener: TcpListener, coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => if let Ok((sock, _)) = accepted {
                kintsugi_proto::tcp::tune(&sock);
                conns.spawn(connection(sock, coord.clone()));
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

async fn connection(tcp: TcpStream, coord: Arc<Coordinator>) {
    // Nothing is served before the peer proves it knows the cluster secret.
    let peer = tcp.peer_addr().ok();
    let mut sock = match kintsugi_proto::auth::accept(tcp).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("coordinator: {e} ({peer:?})");
            return;
        }
    };
    loop {
        let req = match read_frame_timeout(&mut sock, Duration::from_secs(3600)).await {
            Ok(Frame::Control(body)) => match kintsugi_proto::frame::decode_control::<CoordRequest>(&body) {
                Ok(r) => r,
                Err(e) => {
                    let _ = send(&mut sock, &CoordResponse::Error(WireError::bad_request(format!("bad request: {e}")))).await;
                    return;
                }
            },
            Ok(Frame::Data(_)) => {
                let _ = send(&mut sock, &CoordResponse::Error(WireError::bad_request("unexpected data frame"))).await;
                return;
            }
            Err(FrameError::Closed) => return,
            Err(e) => {
                let _ = send(&mut sock, &CoordResponse::Error(WireError::bad_request(format!("bad frame: {e}")))).await;
                return;
            }
        };
        let resp = coord.handle(req).await.unwrap_or_else(CoordResponse::Error);
        if send(&mut sock, &resp).await.is_err() {
            return;
        }
    }
}
