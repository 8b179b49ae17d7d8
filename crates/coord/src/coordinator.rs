//! The coordinator's server: the request loop, liveness from heartbeats,
//! layouts, bad-chunk reports and status. It moves no chunk bytes itself. Beside it:
//! `objects` (versions, placement, garbage), `repair` (plans and orchestration),
//! `auto_repair` and `inventory` (what runs without being asked).

pub use crate::config::CoordConfig;
use crate::meta::{Change, MetaStore, NodeRecord, ObjectRecord, RedbMeta};
use kintsugi_node::exec::request;
use kintsugi_plan::NodeId;
use kintsugi_proto::{
    read_frame_timeout, send, ChunkId, ChunkLoc, ClusterStatus, CoordRequest, CoordResponse, Frame, FrameError, NodeInfo, NodeRequest,
    ObjectInfo, ObjectLayout, RepairReport, StripeLayout, READER,
};
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
    /// When this coordinator started: a node not heard from since is down since then.
    pub(crate) started: Instant,
    /// Each node's last reported (used, capacity) bytes.
    pub(crate) space: Mutex<HashMap<NodeId, (u64, u64)>>,
    /// Each node's latest traffic report (bandwidth monitoring).
    pub(crate) links: Mutex<HashMap<NodeId, kintsugi_proto::LinkReport>>,
    /// Inventories being received and orphans seen.
    pub(crate) inventories: crate::inventory::Inventories,
    /// What the last automatic repair did, for `status`.
    pub(crate) last_auto: Mutex<Option<RepairReport>>,
    /// The running ChameleonEC phase's straggler watch, if any.
    pub(crate) sar: Mutex<Option<Arc<crate::straggler::PhaseWatch>>>,
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
    /// One rebalance at a time, and what the running or last one did.
    pub(crate) rebalancing: tokio::sync::Mutex<()>,
    pub(crate) rebalance_status: Mutex<Option<kintsugi_proto::RebalanceStatus>>,
}

/// Ids a coordinator takes from its metadata store at a time (repairs, timeslot batches).
const ID_BLOCK: u64 = 1024;

/// A running coordinator.
pub struct CoordHandle {
    pub addr: SocketAddr,
    pub coord: Arc<Coordinator>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl CoordHandle {
    /// Stops serving (as a crash would: in-flight requests are dropped). Returns once every
    /// task holding the coordinator is gone, so its store can be opened again.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        for _ in 0..500 {
            if Arc::strong_count(&self.coord) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Opens the metadata store, binds, serves; resumes repairs left pending by a previous run.
pub async fn start(cfg: CoordConfig) -> Result<CoordHandle, String> {
    let meta: Arc<dyn MetaStore> = Arc::new(RedbMeta::open(&cfg.data_dir.join("meta.redb"))?);
    let listener = TcpListener::bind(&cfg.listen).await.map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
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
    let coord = Arc::new(Coordinator {
        cluster_id,
        cfg,
        meta,
        live: Mutex::new(live),
        repairing: tokio::sync::Mutex::new(()),
        sealing: tokio::sync::Mutex::new(()),
        maybe_open: std::sync::atomic::AtomicBool::new(true),
        started: Instant::now(),
        inventories: Default::default(),
        space: Mutex::new(HashMap::new()),
        links: Mutex::new(HashMap::new()),
        last_auto: Mutex::new(None),
        sar: Mutex::new(None),
        epoch,
        repair_ids: crate::id_blocks::IdBlocks::new("repair", ID_BLOCK),
        batch_ids: crate::id_blocks::IdBlocks::new("gate_batch", ID_BLOCK),
        index: Default::default(),
        draining: Mutex::default(),
        rebalancing: tokio::sync::Mutex::new(()),
        rebalance_status: Mutex::default(),
    });
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(serve(listener, coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::objects::collector(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::seal::sealer(coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::object_index::sync(coord.clone(), stop_rx.clone()));
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
    Ok(CoordHandle { addr, coord, stop, task })
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

async fn connection(mut sock: TcpStream, coord: Arc<Coordinator>) {
    // Nothing is served before the peer proves it knows the cluster secret.
    if let Err(e) = kintsugi_proto::auth::accept(&mut sock).await {
        tracing::warn!("coordinator: {e} ({:?})", sock.peer_addr().ok());
        return;
    }
    loop {
        let req = match read_frame_timeout(&mut sock, Duration::from_secs(3600)).await {
            Ok(Frame::Control(body)) => match serde_json::from_slice::<CoordRequest>(&body) {
                Ok(r) => r,
                Err(e) => {
                    let _ = send(&mut sock, &CoordResponse::Error { message: format!("bad request: {e}") }).await;
                    return;
                }
            },
            Ok(Frame::Data(_)) => {
                let _ = send(&mut sock, &CoordResponse::Error { message: "unexpected data frame".into() }).await;
                return;
            }
            Err(FrameError::Closed) => return,
            Err(e) => {
                let _ = send(&mut sock, &CoordResponse::Error { message: format!("bad frame: {e}") }).await;
                return;
            }
        };
        let resp = coord.handle(req).await.unwrap_or_else(|message| CoordResponse::Error { message });
        if send(&mut sock, &resp).await.is_err() {
            return;
        }
    }
}

/// Why a process with data directory token `token` may not be node `n` (None: it may).
fn identity_refused(n: &NodeRecord, token: &str) -> Option<String> {
    (!n.token.is_empty() && n.token != token).then(|| {
        format!(
            "node id {} belongs to another data directory (the one it joined with, last at {}); this process's is not it. \
             Give this process another id, or, if node {}'s disk was replaced, run `kintsugi node replace {}` first",
            n.id, n.addr, n.id, n.id
        )
    })
}

/// Runs metadata work that reads many records on a blocking thread: however long it takes,
/// the runtime's workers stay free for heartbeats, so a busy coordinator never takes live
/// nodes for dead ones.
async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| format!("metadata task failed: {e}"))?
}

pub(crate) fn bad<T>(m: impl Into<String>) -> Result<T, String> {
    Err(m.into())
}

impl Coordinator {
    /// A fresh repair id: this start's epoch above, the persistent counter below.
    pub(crate) fn repair_id(&self) -> Result<u64, String> {
        Ok((self.epoch << 32) | (self.repair_ids.next(self.meta.as_ref())? & 0xffff_ffff))
    }

    /// A fresh timeslot batch id, likewise.
    pub(crate) fn batch_id(&self) -> Result<u64, String> {
        Ok((self.epoch << 32) | (self.batch_ids.next(self.meta.as_ref())? & 0xffff_ffff))
    }

    pub(crate) fn io_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.io_timeout_ms.max(1))
    }

    /// Serves one request.
    pub async fn handle(self: &Arc<Self>, req: CoordRequest) -> Result<CoordResponse, String> {
        match req {
            CoordRequest::Heartbeat { node, addr, chunks: _, boot, used_bytes, capacity_bytes, cluster, link, token } => {
                if cluster != 0 && cluster != self.cluster_id {
                    return bad(format!(
                        "node {node}'s data directory belongs to cluster {cluster:016x}; this is cluster {:016x}",
                        self.cluster_id
                    ));
                }
                // A node joining a cluster that holds data gets its share (a new cluster's
                // nodes join before there is any).
                if self.heartbeat(node, addr, boot, &token)? && self.cfg.rebalance_on_join && !self.meta.objects()?.is_empty() {
                    self.rebalance_soon(format!("node {node} joined"));
                }
                if capacity_bytes > 0 {
                    self.space.lock().expect("space lock").insert(node, (used_bytes, capacity_bytes));
                }
                if let Some(l) = link {
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
            CoordRequest::MoveUploadChunk { name, version, stripe, index, avoid } => {
                Ok(CoordResponse::Moved(self.move_upload_chunk(&name, version, stripe, index, &avoid.into_iter().collect())?))
            }
            CoordRequest::CommitObject { name, version, crcs } => {
                if self.commit(&name, version, crcs)? {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Ok)
            }
            CoordRequest::DeleteObject { name } => {
                let (existed, indexed) = self.delete(&name)?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Deleted { existed })
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
            CoordRequest::List => {
                let me = self.clone();
                let objects = off_runtime(move || me.meta.objects()).await?;
                let objects = objects
                    .into_iter()
                    .map(|o| ObjectInfo { stripes: o.stripes.len(), name: o.name, size: o.size, code: o.code, committed: o.committed })
                    .collect();
                Ok(CoordResponse::Objects { objects })
            }
            CoordRequest::DegradedRead { name, stripe, index, method, slice, version, avoid, range } => {
                let a = self.degraded_plan(&name, version, stripe, index, method, slice, avoid, range).await?;
                Ok(CoordResponse::Plan { assignment: Box::new(a) })
            }
            CoordRequest::ReportBad { name, stripe, index, reason, version } => {
                self.report_bad(&name, version, stripe, index, &reason)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::FailNode { node } => {
                self.fail_node(node).await?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::Repair { method, slice, parallel, scheduler } => {
                let report = self.repair(method, slice, parallel, scheduler).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Repaired(report))
            }
            CoordRequest::Status => {
                let me = self.clone();
                Ok(CoordResponse::Status(off_runtime(move || me.status()).await?))
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

    /// Records a heartbeat; says whether it came from a node never seen before (it joined).
    fn heartbeat(&self, node: NodeId, addr: String, boot: u64, token: &str) -> Result<bool, String> {
        if node == READER {
            return bad(format!("node id {READER} is reserved for readers"));
        }
        self.check_identity(node, token)?;
        let known = self.meta.nodes()?.into_iter().find(|n| n.id == node);
        if let Some(k) = &known {
            if k.failed && k.boot == boot {
                // A late heartbeat from the process that was failed: it stays failed.
                return Ok(false);
            }
        }
        if let Some(k) = &known {
            // Another process claims a node id that is live elsewhere: refused, so the id's
            // address never flips between two processes.
            let live_elsewhere = self.alive().get(&node).is_some_and(|a| *a != addr);
            if !k.failed && k.boot != boot && live_elsewhere {
                return bad(format!("node id {node} is already live at {}; refusing the node at {addr}", k.addr));
            }
        }
        if known.as_ref().is_none_or(|n| n.addr != addr || n.failed || n.boot != boot || n.token != token) {
            // Checked again where it is written: of two first joins at once, one binds.
            self.meta.update(&mut |t| {
                let now = t.node(node)?;
                if let Some(refused) = now.as_ref().and_then(|n| identity_refused(n, token)) {
                    return bad(refused);
                }
                if now.as_ref().is_none_or(|n| n.token.is_empty()) && !token.is_empty() {
                    tracing::info!("node id {node} is bound to the data directory of the node at {addr}");
                }
                t.put(Change::PutNode(NodeRecord { id: node, addr: addr.clone(), failed: false, boot, token: token.into() }))
            })?;
        }
        self.live.lock().expect("live lock").insert(node, (addr, Instant::now()));
        Ok(known.is_none())
    }

    /// Refuses a process whose data directory is not the one node id `node` is bound to.
    pub(crate) fn check_identity(&self, node: NodeId, token: &str) -> Result<(), String> {
        match self.meta.nodes()?.into_iter().find(|n| n.id == node).and_then(|n| identity_refused(&n, token)) {
            Some(refused) => bad(refused),
            None => Ok(()),
        }
    }

    /// Whether node `n` can take `bytes` more and stay at or below `ratio` of its capacity
    /// (a node that has not reported its space yet is given the benefit of the doubt).
    pub(crate) fn has_room(&self, n: NodeId, bytes: u64, ratio: f64) -> bool {
        match self.space.lock().expect("space lock").get(&n) {
            Some(&(used, cap)) => (used.saturating_add(bytes)) as f64 <= ratio * cap as f64,
            None => true,
        }
    }

    /// Nodes a new or rebuilt chunk may go to: up, not failed, not being drained.
    pub(crate) fn placeable(&self) -> Result<BTreeMap<NodeId, String>, String> {
        let failed = self.failed_nodes()?;
        let draining = self.draining.lock().expect("draining lock").clone();
        Ok(self.alive().into_iter().filter(|(n, _)| !failed.contains(n) && !draining.contains(n)).collect())
    }

    pub(crate) fn alive(&self) -> BTreeMap<NodeId, String> {
        let dead_after = Duration::from_millis(self.cfg.dead_after_ms);
        self.live
            .lock()
            .expect("live lock")
            .iter()
            .filter(|(_, (_, t))| t.elapsed() < dead_after)
            .map(|(&n, (a, _))| (n, a.clone()))
            .collect()
    }

    pub(crate) fn addr_of(&self, node: NodeId) -> String {
        if let Some((a, _)) = self.live.lock().expect("live lock").get(&node) {
            return a.clone();
        }
        self.meta.nodes().ok().and_then(|ns| ns.into_iter().find(|n| n.id == node)).map_or(String::new(), |n| n.addr)
    }

    /// The layout of `name`'s current version. The object record and its stripes are read
    /// in separate transactions, so an overwrite committing in between (whose garbage
    /// collection may already have dropped the old stripes) makes us look again.
    fn lookup(&self, name: &str) -> Result<ObjectLayout, String> {
        let mut tries = 0;
        loop {
            let o = self.meta.object(name)?.ok_or(format!("no object named '{name}'"))?;
            match self.layout(&o) {
                Err(e) if tries < 5 && self.meta.object(name)?.is_none_or(|now| now.version != o.version) => {
                    tracing::debug!("'{name}' was replaced while its layout was read ({e}); reading again");
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    pub(crate) fn layout(&self, o: &ObjectRecord) -> Result<ObjectLayout, String> {
        let alive = self.alive();
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        let mut stripes = Vec::new();
        let mut extents = o.extents.clone();
        for (si, id) in o.stripes.iter().enumerate() {
            let s = self.meta.stripe(*id)?.ok_or(format!("stripe {id} is missing from the metadata"))?;
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
        })
    }

    /// Stripe `stripe` of object `name`, of `version` when it is not 0.
    pub(crate) fn stripe_of(&self, name: &str, version: u64, stripe: usize) -> Result<u64, String> {
        let o = self.meta.object(name)?.ok_or(format!("no object named '{name}'"))?;
        if version != 0 && o.version != version {
            return bad(format!("object '{name}' was replaced (version {version} read, {} now)", o.version));
        }
        o.stripes.get(stripe).copied().ok_or(format!("object '{name}' has {} stripes", o.stripes.len()))
    }

    fn report_bad(&self, name: &str, version: u64, stripe: usize, index: usize, reason: &str) -> Result<(), String> {
        let id = self.stripe_of(name, version, stripe)?;
        self.mark_bad(id, index, reason)
    }

    pub(crate) fn mark_bad(&self, id: u64, index: usize, reason: &str) -> Result<(), String> {
        self.meta.update(&mut |t| {
            let mut s = t.stripe(id)?.ok_or(format!("no stripe {id}"))?;
            if index >= s.bad.len() {
                return bad(format!("stripe {id} has {} chunks", s.bad.len()));
            }
            s.bad[index] = true;
            t.put(Change::PutStripe(s))
        })?;
        tracing::warn!("chunk {} marked bad: {reason}", ChunkId::new(id, index));
        Ok(())
    }

    /// `node replace`: releases node id `node` from the data directory it is bound to, so
    /// that a new disk can join under it; its chunks, missing there, are then rebuilt onto
    /// it in place.
    fn replace_node(&self, node: NodeId) -> Result<(), String> {
        self.meta.update(&mut |t| {
            let n = t.node(node)?.ok_or(format!("no node {node}"))?;
            t.put(Change::PutNode(NodeRecord { token: String::new(), ..n }))
        })?;
        // Whoever runs under the id now must join again, with its own directory.
        self.live.lock().expect("live lock").remove(&node);
        tracing::warn!("node id {node} released from its data directory: the next node to join under it takes it");
        Ok(())
    }

    async fn fail_node(&self, node: NodeId) -> Result<(), String> {
        let rec = self.meta.nodes()?.into_iter().find(|n| n.id == node).ok_or(format!("no node {node}"))?;
        self.meta.apply(vec![Change::PutNode(NodeRecord { failed: true, ..rec.clone() })])?;
        self.live.lock().expect("live lock").remove(&node);
        // Best effort: the node may already be gone.
        let _ = request(&rec.addr, &NodeRequest::Shutdown, Duration::from_secs(2)).await;
        Ok(())
    }

    /// Takes a node out for good (`kintsugi node remove`): fails it, rebuilds its chunks
    /// elsewhere with the configured method and scheduler, and forgets it once no stripe
    /// names it. Refused, with the node left failed, while any chunk could not be moved.
    async fn remove_node(self: &Arc<Self>, node: NodeId) -> Result<RepairReport, String> {
        let Some(rec) = self.meta.nodes()?.into_iter().find(|n| n.id == node) else {
            return bad(format!("no node {node}"));
        };
        if !rec.failed && self.alive().contains_key(&node) {
            // Up: drained while it serves, and stopped only once nothing is left on it.
            return self.drain_node(node).await;
        }
        // Down: its chunks can only be rebuilt from the others.
        self.fail_node(node).await?;
        let c = &self.cfg;
        let report = self.repair(c.repair_method, c.repair_slice, c.repair_max_active.max(1), c.repair_scheduler).await?;
        let left: Vec<String> = self
            .meta
            .stripes()?
            .iter()
            .flat_map(|s| s.nodes.iter().enumerate().filter(|&(_, &n)| n == node).map(|(i, _)| ChunkId::new(s.id, i).to_string()))
            .collect();
        if !left.is_empty() {
            return bad(format!(
                "node {node} is down and still holds {} chunk(s) that could not be rebuilt elsewhere: {} ({}); it stays, failed",
                left.len(),
                left.join(", "),
                report.errors.join("; ")
            ));
        }
        self.meta.apply(vec![Change::DeleteNode(node)])?;
        self.space.lock().expect("space lock").remove(&node);
        self.links.lock().expect("links lock").remove(&node);
        tracing::info!("node {node} removed after {} chunk(s) were rebuilt elsewhere", report.repaired);
        Ok(report)
    }

    /// A node that stopped answering is dead until its next heartbeat: a slow node comes
    /// back by itself, unlike one stopped by `fail`.
    pub(crate) fn mark_dead(&self, node: NodeId) {
        self.live.lock().expect("live lock").remove(&node);
    }

    fn status(&self) -> Result<ClusterStatus, String> {
        let alive = self.alive();
        let mut chunks: HashMap<NodeId, u64> = HashMap::new();
        let stripes = self.meta.stripes()?;
        for s in &stripes {
            for n in &s.nodes {
                *chunks.entry(*n).or_default() += 1;
            }
        }
        let nodes = self
            .meta
            .nodes()?
            .into_iter()
            .map(|n| {
                let (used, cap) = self.space.lock().expect("space lock").get(&n.id).copied().unwrap_or((0, 0));
                let over = |r: f64| cap > 0 && used as f64 > r * cap as f64;
                let link = self.links.lock().expect("links lock").get(&n.id).copied();
                let residual = link.as_ref().and_then(crate::bandwidth::residual_of);
                NodeInfo {
                    alive: alive.contains_key(&n.id) && !n.failed,
                    chunks: chunks.get(&n.id).copied().unwrap_or(0),
                    id: n.id,
                    addr: n.addr,
                    used_bytes: used,
                    capacity_bytes: cap,
                    nearfull: over(self.cfg.nearfull_ratio),
                    full: over(self.cfg.full_ratio),
                    link,
                    residual_up: residual.map(|r| r.0),
                    residual_down: residual.map(|r| r.1),
                }
            })
            .collect();
        let health = self.health_summary(&stripes)?;
        Ok(ClusterStatus {
            nodes,
            objects: self.meta.objects()?.len(),
            stripes: stripes.len(),
            lost_chunks: health.bad + health.on_down_nodes,
            bad_chunks: health.bad,
            chunks_on_down_nodes: health.on_down_nodes,
            unrepairable: health.unrepairable,
            waiting: health.waiting,
            rebalance: self.rebalance_status.lock().expect("rebalance lock").clone(),
            pending_repairs: self.meta.pending()?.len(),
            repairing: self.repairing.try_lock().is_err(),
            last_auto_repair: self.last_auto.lock().expect("last auto lock").clone(),
            placement_groups: self.cfg.placement_groups,
            index_copies: self.cfg.index_copies,
        })
    }
}
