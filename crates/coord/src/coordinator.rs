//! The coordinator's server: its state, the request loop, layouts and bad-chunk reports.
//! It moves no chunk bytes itself. Beside it: `membership` (heartbeats, identity, taking
//! nodes out), `cluster_status`, `objects` (versions, placement, garbage), `repair` (plans
//! and orchestration), `auto_repair` and `inventory` (what runs without being asked).

pub use crate::config::CoordConfig;
use crate::meta::{Change, MetaStore, ObjectRecord, RedbMeta};
use kintsugi_node::wire::{job_to_wire, method_from_wire, pick_method_from_wire, scheduler_from_wire};
use kintsugi_plan::NodeId;
use kintsugi_proto::{
    read_frame_timeout, send, ChunkId, ChunkLoc, CoordRequest, CoordResponse, Frame, FrameError, ObjectInfo, ObjectLayout, RepairReport,
    StripeLayout,
};
use kintsugi_proto::{ErrorKind, VersionInfo, VersionRef, Versioning, WireError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Shared state of a running coordinator.
pub struct Coordinator {
    pub cfg: CoordConfig,
    pub(crate) meta: Arc<dyn MetaStore>,
    /// Last heartbeat of each node.
    pub(crate) live: Mutex<HashMap<NodeId, (String, Instant)>>,
    /// One full-node repair at a time.
    pub(crate) repairing: tokio::sync::Mutex<()>,
    /// One sealing pass at a time.
    pub(crate) sealing: tokio::sync::Mutex<()>,
    /// Some Geo stripe may be open (set by Geo puts; cleared by a sealing pass that found
    /// none), so a cluster without Geo objects does not scan its stripes every second.
    pub(crate) maybe_open: std::sync::atomic::AtomicBool,
    /// One Geo compaction pass at a time, and what compaction has done.
    pub(crate) compaction: crate::geo_compaction::Compaction,
    /// When this coordinator started: a node not heard from since is down since then.
    pub(crate) started: Instant,
    /// The widest code stored: whether a lost node can be rebuilt.
    pub(crate) code_widths: crate::heal_margin::CodeWidths,
    /// Each node's and file system's space, as last reported.
    pub(crate) space: crate::space::Space,
    /// Each node's latest traffic report (bandwidth monitoring).
    pub(crate) links: Mutex<HashMap<NodeId, kintsugi_proto::LinkReport>>,
    /// Inventories being received and orphans seen.
    pub(crate) inventories: crate::inventory::Inventories,
    /// When automatic repair last logged the chunks waiting for a node.
    pub(crate) waiting_said: crate::auto_repair::SaidAt,
    /// What the last automatic repair did, for `status`.
    pub(crate) last_auto: Mutex<Option<RepairReport>>,
    /// The running ChameleonEC phase's straggler watch, if any.
    pub(crate) sar: Mutex<Option<Arc<crate::straggler::PhaseWatch>>>,
    /// Repairs each destination node runs at once (`repair_max_active_per_destination`).
    pub(crate) destinations: crate::destination_limit::DestinationLimit,
    /// Random per coordinator start, the high half of every repair id: ids never repeat
    /// across restarts or across clusters sharing hosts (and reused ports).
    pub(crate) epoch: u64,
    /// Repair ids (the low half under `epoch`), a block at a time from the metadata store.
    pub(crate) repair_ids: crate::id_blocks::IdBlocks,
    /// Timeslot batch ids, likewise.
    pub(crate) batch_ids: crate::id_blocks::IdBlocks,
    /// This cluster's id (made on the first start); nodes record it in their data
    /// directories and a node of another cluster is refused.
    pub cluster_id: u64,
    /// Index records left to publish (`object_index`).
    pub(crate) index: crate::object_index::IndexSync,
    /// Nodes being emptied by `node remove`: up and serving, but no new chunk goes there.
    pub(crate) draining: Mutex<BTreeSet<NodeId>>,
    /// Nodes removed (`node remove`) since this coordinator started, with their data
    /// directories' tokens: a heartbeat already on its way when the node was forgotten must
    /// not bring it back.
    pub(crate) removed: Mutex<BTreeMap<NodeId, String>>,
    /// One rebalance at a time, and what the running or last one did.
    pub(crate) rebalancing: tokio::sync::Mutex<()>,
    pub(crate) rebalance_status: Mutex<Option<kintsugi_proto::RebalanceStatus>>,
    /// Repairs' outcomes and bytes, for `/metrics`.
    pub(crate) repair_counters: crate::metrics::RepairCounters,
    /// Each node's recent traffic, for the status page's charts.
    pub(crate) link_history: crate::status_page::LinkHistory,
    /// Each node's foreground over the last minutes, what `auto` replays.
    pub(crate) foreground_record: crate::foreground_record::ForegroundRecord,
}

/// Ids a coordinator takes from its metadata store at a time (repairs, timeslot batches).
const ID_BLOCK: u64 = 1024;

/// A running coordinator.
pub struct CoordHandle {
    pub addr: SocketAddr,
    pub coord: Arc<Coordinator>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// With several coordinators: this one's leadership, and why it was lost once it is.
    leadership: Option<Arc<crate::leader::Leadership>>,
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
    /// Returns, saying why, once this coordinator no longer leads (it has stopped serving);
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
async fn open_meta(cfg: &CoordConfig) -> Result<(Arc<dyn MetaStore>, Option<Arc<crate::leader::Leadership>>), WireError> {
    if cfg.meta.is_empty() || cfg.meta == "redb" {
        return Ok((Arc::new(RedbMeta::open(&cfg.data_dir.join("meta.redb"))?), None));
    }
    let (endpoints, prefix) = crate::meta_etcd::parse_url(&cfg.meta)?;
    // A call keeps trying for as long as etcd takes to elect a new raft leader (a second or
    // two), and gives up within a client's own timeout and before the leader lease lapses
    // (when this coordinator would stop answering), so the client hears why.
    let request = Duration::from_millis((cfg.io_timeout_ms / 8).max(400));
    let retry_for = Duration::from_millis((cfg.io_timeout_ms / 3).max(2000).min(cfg.leader_lease_ms * 2 / 3).max(1000));
    let etcd = Arc::new(crate::etcd_http::Etcd::new(&endpoints, request, retry_for)?);
    let ttl = Duration::from_millis(cfg.leader_lease_ms.max(1000));
    let key = format!("{prefix}leader").into_bytes();
    let lead = Arc::new(crate::leader::campaign(etcd.clone(), key, &cfg.listen, ttl).await?);
    let fence = Some(lead.fence());
    let meta =
        tokio::task::spawn_blocking(move || crate::meta_etcd::EtcdMeta::open(etcd, &prefix, fence)).await.map_err(WireError::from)??;
    Ok((Arc::new(meta), Some(lead)))
}

/// Opens the metadata store, binds, serves; resumes repairs left pending by a previous run.
pub async fn start(cfg: CoordConfig) -> Result<CoordHandle, WireError> {
    // The metrics port answers from the start: a standby says so while it waits to lead.
    let slot = crate::metrics::Slot::default();
    let repair_counters = crate::metrics::RepairCounters::default();
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
    repair_counters: crate::metrics::RepairCounters,
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
        destinations: crate::destination_limit::DestinationLimit::new(per_destination),
        epoch,
        repair_ids: crate::id_blocks::IdBlocks::new("repair", ID_BLOCK),
        batch_ids: crate::id_blocks::IdBlocks::new("gate_batch", ID_BLOCK),
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
    tokio::spawn(crate::seal::sealer(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::geo_compaction::compactor(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::object_index::sync(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::heal_margin::scan(coord.clone(), stop_rx.clone()));
    if coord.cfg.auto_repair {
        tokio::spawn(crate::auto_repair::run(coord.clone(), stop_rx));
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

/// One period of a background task: sleeps `every_ms` (10 ms at least) and says whether to
/// go on, or returns false at once when the coordinator stops.
pub(crate) async fn tick(every_ms: u64, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = stop.changed() => false,
        _ = tokio::time::sleep(Duration::from_millis(every_ms.max(10))) => true,
    }
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

/// Runs metadata work that reads many records on a blocking thread: however long it takes,
/// the runtime's workers stay free for heartbeats, so a busy coordinator never takes live
/// nodes for dead ones.
async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> Result<T, WireError> + Send + 'static) -> Result<T, WireError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| WireError::bad_request(format!("metadata task failed: {e}")))?
}

/// A request refused: what the client asked cannot be done as asked.
pub(crate) fn bad<T>(m: impl Into<String>) -> Result<T, WireError> {
    Err(WireError::bad_request(m))
}

/// The object `name` is not there (never put, or deleted).
/// A version as listings and deletes answer it (`name` is the object's, wherever the record
/// is stored).
fn version_info(name: &str, o: ObjectRecord, latest: bool) -> VersionInfo {
    VersionInfo {
        name: name.to_string(),
        version: o.version,
        versioned: o.chain.versioned,
        delete_marker: o.chain.delete_marker,
        latest,
        size: o.size,
        created_ms: o.created_ms,
        attrs: o.attrs,
    }
}

pub(crate) fn no_object(name: &str) -> WireError {
    WireError::not_found(format!("no object named '{name}'"))
}

impl Coordinator {
    /// A fresh repair id: this start's epoch above, the persistent counter below.
    pub(crate) fn repair_id(&self) -> Result<u64, WireError> {
        Ok((self.epoch << 32) | (self.repair_ids.next(self.meta.as_ref())? & 0xffff_ffff))
    }

    /// A fresh timeslot batch id, likewise.
    pub(crate) fn batch_id(&self) -> Result<u64, WireError> {
        Ok((self.epoch << 32) | (self.batch_ids.next(self.meta.as_ref())? & 0xffff_ffff))
    }

    pub(crate) fn io_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.io_timeout_ms.max(1))
    }

    /// Serves one request.
    pub async fn handle(self: &Arc<Self>, req: CoordRequest) -> Result<CoordResponse, WireError> {
        match req {
            CoordRequest::Heartbeat { node, addr, chunks: _, boot, used_bytes, capacity_bytes, cluster, link, token, fs } => {
                if cluster != 0 && cluster != self.cluster_id {
                    return bad(format!(
                        "node {node}'s data directory belongs to cluster {cluster:016x}; this is cluster {:016x}",
                        self.cluster_id
                    ));
                }
                // A node joining a cluster that holds data, or returning to it after its
                // chunks were rebuilt elsewhere, gets its share (a new cluster's nodes join
                // before there is any).
                // Heard at once even while a long update holds the metadata's writer.
                if let Some(why) = crate::meta::peeking(|| self.heartbeat(node, addr, boot, &token))? {
                    if self.cfg.rebalance_on_join && self.meta.counts()?.objects > 0 {
                        self.rebalance_soon(why);
                    }
                }
                self.space.record(node, used_bytes, capacity_bytes, fs);
                if let Some(l) = link {
                    self.link_history.record(node, &l);
                    self.foreground_record.record(node, &l);
                    self.links.lock().expect("links lock").insert(node, l);
                }
                Ok(CoordResponse::Welcome { cluster: self.cluster_id })
            }
            CoordRequest::CreateObject { name, size, code, chunk_size, layout } => {
                let me = self.clone();
                Ok(CoordResponse::Layout(off_runtime(move || me.create(name, size, code, chunk_size, layout)).await?))
            }
            CoordRequest::Rebalance => Ok(CoordResponse::Rebalanced(self.rebalance().await?)),
            CoordRequest::Seal => {
                let stripes = self.seal_due(true).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Sealed { stripes })
            }
            CoordRequest::MoveGeoChunk { name, version, extent, avoid } => {
                let me = self.clone();
                let avoid = avoid.into_iter().collect();
                Ok(CoordResponse::Layout(off_runtime(move || me.move_geo_chunk(&name, version, extent, &avoid)).await?))
            }
            CoordRequest::Compact => Ok(CoordResponse::Compacted(self.compact().await?)),
            CoordRequest::MoveUploadChunk { name, version, stripe, index, avoid } => {
                Ok(CoordResponse::Moved(self.move_upload_chunk(&name, version, stripe, index, &avoid.into_iter().collect())?))
            }
            CoordRequest::CommitObject { name, version, crcs, attrs, precondition, versioning } => {
                let (c, indexed) = self.commit(&name, version, crcs, (attrs, precondition, versioning))?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Committed { version: c.version, versioned: c.versioned })
            }
            CoordRequest::PutInline { .. } if !self.cfg.keeps_inline() => Ok(CoordResponse::InlineRefused),
            CoordRequest::PutInline { name, data, code, attrs, precondition, versioning } => {
                let me = self.clone();
                let n = name.clone();
                let (c, indexed) = off_runtime(move || me.put_inline(&n, data, code, (attrs, precondition, versioning))).await?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Committed { version: c.version, versioned: c.versioned })
            }
            CoordRequest::AbortUpload { name, version } => {
                self.abort_upload(&name, version)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::ComposeObject { name, parts, attrs, precondition, versioning } => {
                let me = self.clone();
                let n = name.clone();
                // Never indexed itself (a Stripe layout), but it may replace an object that was.
                let (c, indexed) = off_runtime(move || me.compose(&n, &parts, (attrs, precondition, versioning))).await?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Committed { version: c.version, versioned: c.versioned })
            }
            CoordRequest::SetAttrs { name, version, attrs, bypass_governance } => {
                if self.set_attrs(&name, version, attrs, bypass_governance)? {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Ok)
            }
            CoordRequest::DeleteObject { name, versioning: Versioning::Unversioned, precondition } => {
                let (existed, indexed) = self.delete(&name, precondition)?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Deleted { existed, version: None })
            }
            CoordRequest::DeleteObject { name, versioning, precondition } => {
                let m = self.delete_marking(&name, versioning, precondition)?;
                Ok(CoordResponse::Deleted { existed: true, version: Some(Box::new(version_info(&name, m, true))) })
            }
            CoordRequest::DeleteVersion { name, version, bypass_governance } => {
                let gone = self.delete_version(&name, version, bypass_governance)?;
                if gone.as_ref().is_some_and(|o| o.shares_stripes()) {
                    self.publish_acknowledged(&name).await?;
                }
                let latest = gone.as_ref().is_some_and(|o| !crate::versions::is_kept(&o.name));
                Ok(CoordResponse::Deleted { existed: gone.is_some(), version: gone.map(|o| Box::new(version_info(&name, o, latest))) })
            }
            CoordRequest::LookupVersion { name, version } => Ok(CoordResponse::Layout(self.lookup_version(&name, version)?)),
            CoordRequest::ListVersions { prefix, delimiter, key_marker, version_marker, limit } => {
                let me = self.clone();
                let limit = if limit == 0 { crate::object_listing::MAX_PAGE } else { limit as usize };
                let page = off_runtime(move || {
                    crate::version_listing::list_versions(me.meta.as_ref(), &prefix, &delimiter, &key_marker, version_marker, limit)
                })
                .await?;
                Ok(CoordResponse::Versions { versions: page.versions, prefixes: page.prefixes, next: page.next })
            }
            CoordRequest::Inventory { node, boot, chunks, last, token } => {
                self.check_identity(node, &token)?;
                let me = self.clone();
                off_runtime(move || me.inventory(node, boot, chunks, last)).await?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::ReportChunk { node, chunk, reason } => {
                self.report_chunk(node, &chunk, &reason)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::Lookup { name } => Ok(CoordResponse::Layout(self.lookup(&name)?)),
            CoordRequest::List { prefix, delimiter, after, limit } => {
                let me = self.clone();
                let limit = if limit == 0 { crate::object_listing::MAX_PAGE } else { limit as usize };
                let page =
                    off_runtime(move || crate::object_listing::list_page(me.meta.as_ref(), &prefix, &delimiter, &after, limit)).await?;
                let objects = page
                    .objects
                    .into_iter()
                    .map(|o| ObjectInfo {
                        stripes: o.stripes.len(),
                        name: o.name,
                        size: o.size,
                        code: o.code,
                        committed: o.committed,
                        attrs: o.attrs,
                    })
                    .collect();
                Ok(CoordResponse::Objects { objects, prefixes: page.prefixes, next: page.next })
            }
            CoordRequest::DegradedRead { name, stripe, index, method, slice, version, avoid, range } => {
                let method = method_from_wire(&method)?;
                let a = self.degraded_plan(&name, version, stripe, index, method, slice, avoid, range).await?;
                Ok(CoordResponse::Plan { assignment: Box::new(job_to_wire(&a)) })
            }
            CoordRequest::ReportBad { name, stripe, index, reason, version } => {
                self.report_bad(&name, version, stripe, index, &reason)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::FailNode { node } => {
                self.fail_node(node).await?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::Repair { method, slice, parallel, scheduler, max_active_per_destination } => {
                // Either may be `auto` (`repair_auto`).
                let ask = crate::RepairAsk { method: pick_method_from_wire(&method)?, scheduler: scheduler_from_wire(&scheduler)? };
                let report = self.repair(ask, slice, parallel, max_active_per_destination).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Repaired(report))
            }
            CoordRequest::Status => {
                let me = self.clone();
                Ok(CoordResponse::Status(Box::new(off_runtime(move || me.status()).await?)))
            }
            CoordRequest::ReplaceNode { node } => {
                self.replace_node(node)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::RemoveNode { node } => {
                let report = self.remove_node(node).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Repaired(report))
            }
        }
    }

    /// The layout of `name`'s current version. The object record and its stripes are read
    /// in separate transactions, so an overwrite committing in between (whose garbage
    /// collection may already have dropped the old stripes) makes us look again.
    fn lookup(&self, name: &str) -> Result<ObjectLayout, WireError> {
        let mut tries = 0;
        loop {
            let o = self.meta.object(name)?.filter(|o| !o.chain.delete_marker).ok_or_else(|| no_object(name))?;
            match self.layout(&o) {
                Err(e) if tries < 5 && self.meta.object(name)?.is_none_or(|now| now.version != o.version) => {
                    tracing::debug!("'{name}' was replaced while its layout was read ({e}); reading again");
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    /// Version `want` of `name` (its latest, a delete marker included, when None).
    fn lookup_version(&self, name: &str, want: Option<VersionRef>) -> Result<ObjectLayout, WireError> {
        let mut tries = 0;
        loop {
            let o = crate::versions::find(self.meta.as_ref(), name, want)?.ok_or_else(|| match want {
                Some(v) => WireError::not_found(format!("no version {v} of '{name}'")),
                None => no_object(name),
            })?;
            match self.layout(&o) {
                Err(e) if tries < 5 && self.meta.object(&o.name)?.is_none_or(|now| now.version != o.version) => {
                    tracing::debug!("'{name}' changed while its layout was read ({e}); reading again");
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    pub(crate) fn layout(&self, o: &ObjectRecord) -> Result<ObjectLayout, WireError> {
        // Read after the record: gone if the version was dropped in between.
        let inline = match o.inline {
            None => None,
            Some(crc32c) => match self.meta.inline(o.version)? {
                Some(data) => Some(kintsugi_proto::Inline { data, crc32c }),
                None => return Err(WireError::new(ErrorKind::Replaced, format!("object '{}' was replaced while being looked up", o.name))),
            },
        };
        let alive = self.alive();
        let failed = self.failed_nodes()?;
        let mut stripes = Vec::new();
        let mut extents = o.extents.clone();
        for (si, id) in o.stripes.iter().enumerate() {
            let s = self.meta.stripe(*id)?.ok_or_else(|| WireError::bad_request(format!("stripe {id} is missing from the metadata")))?;
            // A piece of a small-size bucket slot carries its own checksum.
            for e in extents.iter_mut().filter(|e| e.stripe == si && s.small) {
                e.crc32c = s.pieces.get(e.index).and_then(|p| p.iter().find(|p| p.version == o.version && p.offset == e.offset)?.crc);
            }
            let chunks = s
                .nodes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let up = alive.contains_key(&n) && !failed.contains(&n);
                    ChunkLoc {
                        chunk: ChunkId::new(*id, i),
                        node: n,
                        addr: self.addr_of(n),
                        alive: up,
                        crc32c: s.crcs[i],
                        lost: !up || s.bad[i],
                        bucket: s.bucket(),
                    }
                })
                .collect();
            let replicas = s
                .replicas
                .iter()
                .enumerate()
                .map(|(i, copies)| {
                    copies
                        .iter()
                        .enumerate()
                        .map(|(c, &n)| {
                            let up = alive.contains_key(&n) && !failed.contains(&n);
                            ChunkLoc {
                                chunk: ChunkId::replica(*id, i, c + 1),
                                node: n,
                                addr: self.addr_of(n),
                                alive: up,
                                crc32c: s.crcs[i],
                                lost: !up,
                                bucket: None,
                            }
                        })
                        .collect()
                })
                .collect();
            stripes.push(StripeLayout {
                id: *id,
                data_len: s.data_len,
                chunk_len: s.chunk_len,
                chunks,
                open: s.open,
                replicas: if s.open { replicas } else { vec![] },
                code: (s.code != o.code).then_some(s.code),
                small: s.small,
            });
        }
        Ok(ObjectLayout {
            name: o.name.clone(),
            size: o.size,
            code: o.code,
            committed: o.committed,
            version: o.version,
            stripes,
            layout: o.layout,
            extents,
            attrs: o.attrs.clone(),
            versioned: o.chain.versioned,
            delete_marker: o.chain.delete_marker,
            inline,
        })
    }

    /// Stripe `stripe` of object `name`, of `version` when it is not 0.
    pub(crate) fn stripe_of(&self, name: &str, version: u64, stripe: usize) -> Result<u64, WireError> {
        let o = self.meta.object(name)?.ok_or_else(|| no_object(name))?;
        if version != 0 && o.version != version {
            return Err(WireError::new(
                ErrorKind::Replaced,
                format!("object '{name}' was replaced (version {version} read, {} now)", o.version),
            ));
        }
        o.stripes.get(stripe).copied().ok_or_else(|| WireError::bad_request(format!("object '{name}' has {} stripes", o.stripes.len())))
    }

    fn report_bad(&self, name: &str, version: u64, stripe: usize, index: usize, reason: &str) -> Result<(), WireError> {
        let id = self.stripe_of(name, version, stripe)?;
        self.mark_bad(id, index, reason)
    }

    pub(crate) fn mark_bad(&self, id: u64, index: usize, reason: &str) -> Result<(), WireError> {
        self.meta.update(&mut |t| {
            let mut s = t.stripe(id)?.ok_or_else(|| WireError::bad_request(format!("no stripe {id}")))?;
            if index >= s.bad.len() {
                return bad(format!("stripe {id} has {} chunks", s.bad.len()));
            }
            s.bad[index] = true;
            t.put(Change::PutStripe(s))
        })?;
        tracing::warn!("chunk {} marked bad: {reason}", ChunkId::new(id, index));
        Ok(())
    }
}
