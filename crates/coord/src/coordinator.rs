//! The coordinator: placement of new stripes, liveness from heartbeats, degraded-read plans,
//! and full-node repair orchestration. It moves no chunk bytes itself: it builds repair
//! graphs, hands them to the nodes, and records where rebuilt chunks landed.

use crate::meta::{Change, MetaStore, NodeRecord, ObjectRecord, PendingRepair, RedbMeta, StripeRecord};
use kintsugi_node::exec::request;
use kintsugi_plan::schedule::{self, Choice, Cluster, LostChunk, Scheduler};
use kintsugi_plan::{shapes, NodeId, RepairTask, Shape};
use kintsugi_proto::{
    read_frame_timeout, send, Assignment, ChunkId, ChunkLoc, ClusterStatus, CoordRequest, CoordResponse, Frame, FrameError, NodeInfo,
    NodeRequest, NodeResponse, ObjectInfo, ObjectLayout, RepairReport, StoreSpec, StripeLayout, READER,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Coordinator configuration (TOML for `kintsugi coordinator --config`); all fields default.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoordConfig {
    pub listen: String,
    /// Holds `meta.redb`.
    pub data_dir: PathBuf,
    /// A node silent for this long is dead.
    pub dead_after_ms: u64,
    pub io_timeout_ms: u64,
    /// Default chunk size of new objects.
    pub chunk_size: u64,
    /// Attempts per lost chunk before a repair gives up on it.
    pub repair_attempts: usize,
    /// A node silent this long is out: its chunks are repaired without anyone asking
    /// (Ceph's mon_osd_down_out_interval). Chunks found corrupt or missing, and nodes
    /// stopped by `fail`, are repaired at once.
    pub down_out_ms: u64,
    /// Repair lost chunks by itself (every `auto_repair_interval_ms`).
    pub auto_repair: bool,
    pub auto_repair_interval_ms: u64,
    /// What automatic repair uses: method, scheduler, slice, and chunks rebuilt at once
    /// (like osd_recovery_max_active).
    pub repair_method: Shape,
    pub repair_scheduler: Scheduler,
    pub repair_slice: u64,
    pub repair_max_active: usize,
    /// Fill ratios, as Ceph's: above `nearfull` a node is flagged, above `backfillfull` it
    /// takes no rebuilt chunks, above `full` no new chunks at all.
    pub nearfull_ratio: f64,
    pub backfillfull_ratio: f64,
    pub full_ratio: f64,
    /// A chunk a node holds that nothing references is deleted after this long.
    pub orphan_grace_ms: u64,
    /// File holding the cluster secret (also `--secret-file`, `KINTSUGI_SECRET_FILE`).
    pub secret_file: Option<PathBuf>,
    /// A put not committed within this long is abandoned and its chunks reclaimed.
    pub upload_timeout_ms: u64,
    /// Chunks of replaced or deleted versions are removed from the nodes this long after
    /// (so reads already under way finish), then every `gc_interval_ms`.
    pub gc_grace_ms: u64,
    pub gc_interval_ms: u64,
}

impl Default for CoordConfig {
    fn default() -> Self {
        CoordConfig {
            listen: "127.0.0.1:7400".into(),
            data_dir: PathBuf::from("kintsugi-coordinator-data"),
            dead_after_ms: 10_000,
            io_timeout_ms: 10_000,
            chunk_size: 4 << 20,
            repair_attempts: 4,
            down_out_ms: 600_000,
            auto_repair: true,
            auto_repair_interval_ms: 5_000,
            repair_method: Shape::Cr,
            repair_scheduler: Scheduler::Repairboost,
            repair_slice: 1 << 20,
            repair_max_active: 4,
            nearfull_ratio: 0.85,
            backfillfull_ratio: 0.90,
            full_ratio: 0.95,
            orphan_grace_ms: 600_000,
            secret_file: None,
            upload_timeout_ms: 3_600_000,
            gc_grace_ms: 30_000,
            gc_interval_ms: 2_000,
        }
    }
}

/// Shared state of a running coordinator.
pub struct Coordinator {
    pub cfg: CoordConfig,
    pub(crate) meta: Arc<dyn MetaStore>,
    /// Last heartbeat of each node.
    pub(crate) live: Mutex<HashMap<NodeId, (String, Instant)>>,
    /// One full-node repair at a time.
    pub(crate) repairing: tokio::sync::Mutex<()>,
    /// When this coordinator started: a node not heard from since is down since then.
    pub(crate) started: Instant,
    /// Each node's last reported (used, capacity) bytes.
    pub(crate) space: Mutex<HashMap<NodeId, (u64, u64)>>,
    /// Inventories being received and orphans seen.
    pub(crate) inventories: crate::inventory::Inventories,
    /// What the last automatic repair did, for `status`.
    pub(crate) last_auto: Mutex<Option<RepairReport>>,
    /// Random per coordinator start, the high half of every repair id: ids never repeat
    /// across restarts or across clusters sharing hosts (and reused ports).
    epoch: u64,
}

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
    let coord = Arc::new(Coordinator {
        cfg,
        meta,
        live: Mutex::new(HashMap::new()),
        repairing: tokio::sync::Mutex::new(()),
        started: Instant::now(),
        inventories: Default::default(),
        space: Mutex::new(HashMap::new()),
        last_auto: Mutex::new(None),
        epoch,
    });
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(serve(listener, coord.clone(), stop_rx.clone()));
    tokio::spawn(crate::objects::collector(coord.clone(), stop_rx.clone()));
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

async fn serve(listener: TcpListener, coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => if let Ok((sock, _)) = accepted {
                let _ = sock.set_nodelay(true);
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

pub(crate) fn bad<T>(m: impl Into<String>) -> Result<T, String> {
    Err(m.into())
}

impl Coordinator {
    fn io_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.io_timeout_ms.max(1))
    }

    /// Serves one request.
    pub async fn handle(self: &Arc<Self>, req: CoordRequest) -> Result<CoordResponse, String> {
        match req {
            CoordRequest::Heartbeat { node, addr, chunks: _, boot, used_bytes, capacity_bytes } => {
                self.heartbeat(node, addr, boot)?;
                if capacity_bytes > 0 {
                    self.space.lock().expect("space lock").insert(node, (used_bytes, capacity_bytes));
                }
                Ok(CoordResponse::Ok)
            }
            CoordRequest::CreateObject { name, size, code, chunk_size } => {
                Ok(CoordResponse::Layout(self.create(name, size, code, chunk_size)?))
            }
            CoordRequest::CommitObject { name, version, crcs } => {
                self.commit(&name, version, crcs)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::DeleteObject { name } => Ok(CoordResponse::Deleted { existed: self.delete(&name)? }),
            CoordRequest::Inventory { node, boot, chunks, last } => {
                self.inventory(node, boot, chunks, last)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::ReportChunk { node, chunk, reason } => {
                self.report_chunk(node, &chunk, &reason)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::Lookup { name } => {
                let o = self.meta.object(&name)?.ok_or(format!("no object named '{name}'"))?;
                Ok(CoordResponse::Layout(self.layout(&o)?))
            }
            CoordRequest::List => {
                let objects = self
                    .meta
                    .objects()?
                    .into_iter()
                    .map(|o| ObjectInfo { stripes: o.stripes.len(), name: o.name, size: o.size, code: o.code, committed: o.committed })
                    .collect();
                Ok(CoordResponse::Objects { objects })
            }
            CoordRequest::DegradedRead { name, stripe, index, method, slice, version, avoid } => {
                let a = self.degraded_plan(&name, version, stripe, index, method, slice, avoid).await?;
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
                Ok(CoordResponse::Repaired(self.repair(method, slice, parallel, scheduler).await?))
            }
            CoordRequest::Status => Ok(CoordResponse::Status(self.status()?)),
        }
    }

    fn heartbeat(&self, node: NodeId, addr: String, boot: u64) -> Result<(), String> {
        if node == READER {
            return bad(format!("node id {READER} is reserved for readers"));
        }
        let known = self.meta.nodes()?.into_iter().find(|n| n.id == node);
        if let Some(k) = &known {
            if k.failed && k.boot == boot {
                // A late heartbeat from the process that was failed: it stays failed.
                return Ok(());
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
        if known.as_ref().is_none_or(|n| n.addr != addr || n.failed || n.boot != boot) {
            self.meta.apply(vec![Change::PutNode(NodeRecord { id: node, addr: addr.clone(), failed: false, boot })])?;
        }
        self.live.lock().expect("live lock").insert(node, (addr, Instant::now()));
        Ok(())
    }

    /// Whether node `n` can take `bytes` more and stay at or below `ratio` of its capacity
    /// (a node that has not reported its space yet is given the benefit of the doubt).
    pub(crate) fn has_room(&self, n: NodeId, bytes: u64, ratio: f64) -> bool {
        match self.space.lock().expect("space lock").get(&n) {
            Some(&(used, cap)) => (used.saturating_add(bytes)) as f64 <= ratio * cap as f64,
            None => true,
        }
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

    fn addr_of(&self, node: NodeId) -> String {
        if let Some((a, _)) = self.live.lock().expect("live lock").get(&node) {
            return a.clone();
        }
        self.meta.nodes().ok().and_then(|ns| ns.into_iter().find(|n| n.id == node)).map_or(String::new(), |n| n.addr)
    }

    pub(crate) fn layout(&self, o: &ObjectRecord) -> Result<ObjectLayout, String> {
        let alive = self.alive();
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        let mut stripes = Vec::new();
        for id in &o.stripes {
            let s = self.meta.stripe(*id)?.ok_or(format!("stripe {id} is missing from the metadata"))?;
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
                    }
                })
                .collect();
            stripes.push(StripeLayout { id: *id, data_len: s.data_len, chunk_len: s.chunk_len, chunks });
        }
        Ok(ObjectLayout { name: o.name.clone(), size: o.size, code: o.code, committed: o.committed, version: o.version, stripes })
    }

    /// Stripe `stripe` of object `name`, of `version` when it is not 0.
    fn stripe_of(&self, name: &str, version: u64, stripe: usize) -> Result<u64, String> {
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

    async fn fail_node(&self, node: NodeId) -> Result<(), String> {
        let rec = self.meta.nodes()?.into_iter().find(|n| n.id == node).ok_or(format!("no node {node}"))?;
        self.meta.apply(vec![Change::PutNode(NodeRecord { failed: true, ..rec.clone() })])?;
        self.live.lock().expect("live lock").remove(&node);
        // Best effort: the node may already be gone.
        let _ = request(&rec.addr, &NodeRequest::Shutdown, Duration::from_secs(2)).await;
        Ok(())
    }

    /// A node that stopped answering is dead until its next heartbeat: a slow node comes
    /// back by itself, unlike one stopped by `fail`.
    fn mark_dead(&self, node: NodeId) {
        self.live.lock().expect("live lock").remove(&node);
    }

    /// Builds a repair graph for chunk `index` of stripe `s` towards `target`, avoiding `avoid`.
    fn plan(
        &self,
        s: &StripeRecord,
        index: usize,
        method: Shape,
        slice: u64,
        target: Target<'_>,
        avoid: &BTreeSet<NodeId>,
    ) -> Result<Assignment, String> {
        let (dest, scheduled) = match target {
            Target::Reader => (Some(READER), None),
            Target::Rebuild(choice) => (None, choice),
        };
        let code = s.code.build().map_err(|e| e.to_string())?;
        let alive = self.alive();
        let avail: Vec<usize> = (0..s.nodes.len())
            .filter(|&j| j != index && !s.bad[j] && alive.contains_key(&s.nodes[j]) && !avoid.contains(&s.nodes[j]))
            .collect();
        // A scheduler's choice holds while its helpers and destination are still usable.
        let roomy = |n: &NodeId| self.has_room(*n, s.chunk_len, self.cfg.backfillfull_ratio);
        let scheduled = scheduled.filter(|c| {
            c.helpers.iter().all(|h| avail.contains(h))
                && roomy(&c.destination)
                && alive.contains_key(&c.destination)
                && !avoid.contains(&c.destination)
                && !s.nodes.contains(&c.destination)
        });
        let dest = dest.or(scheduled.map(|c| c.destination));
        let helpers = match scheduled {
            Some(c) => c.helpers.clone(),
            None => code.choose_helpers(index, &avail).map_err(|e| format!("chunk {}: {e}", ChunkId::new(s.id, index)))?,
        };
        let equation = code.repair_equation(index, &helpers).map_err(|e| e.to_string())?;
        let helper_nodes: Vec<NodeId> = equation.helpers().iter().map(|&h| s.nodes[h]).collect();
        let destination = match dest {
            Some(d) => d,
            None => {
                // A live node holding no chunk of the stripe, least loaded first.
                let mut load: HashMap<NodeId, usize> = HashMap::new();
                for st in self.meta.stripes()? {
                    for n in st.nodes {
                        *load.entry(n).or_default() += 1;
                    }
                }
                alive
                    .keys()
                    .copied()
                    .filter(|n| !s.nodes.contains(n) && !avoid.contains(n) && roomy(n))
                    .min_by_key(|n| (load.get(n).copied().unwrap_or(0), (*n as u64 + s.id) % 7919))
                    .ok_or(format!(
                        "no live node outside stripe {} with room ({} bytes below the backfillfull ratio {}) to rebuild its chunk on",
                        s.id, s.chunk_len, self.cfg.backfillfull_ratio
                    ))?
            }
        };
        let term_chunks = equation.helpers().iter().map(|&h| ChunkId::new(s.id, h)).collect();
        let task = RepairTask { equation, helper_nodes, destination };
        let graph = shapes::build(method, &task).map_err(|e| e.to_string())?;
        let mut peers = BTreeMap::new();
        for v in &graph.vertices {
            if v.node != READER {
                peers.insert(v.node, alive.get(&v.node).cloned().unwrap_or_else(|| self.addr_of(v.node)));
            }
        }
        let store = (destination != READER).then(|| StoreSpec { chunk: ChunkId::new(s.id, index), crc32c: s.crcs[index].unwrap_or(0) });
        let repair = (self.epoch << 32) | (self.meta.next_id("repair")? & 0xffff_ffff);
        Ok(Assignment { repair, graph, chunk_len: s.chunk_len, slice_len: slice.clamp(1, s.chunk_len.max(1)), term_chunks, peers, store })
    }

    /// Sends the plan to every node of the graph.
    async fn dispatch(&self, a: &Assignment) -> Result<(), String> {
        let mut set = JoinSet::new();
        for (&n, addr) in &a.peers {
            let (addr, req, t) = (addr.clone(), NodeRequest::RunRepair { assignment: Box::new(a.clone()) }, self.io_timeout());
            set.spawn(async move { (n, request(&addr, &req, t).await) });
        }
        let mut errors = Vec::new();
        while let Some(r) = set.join_next().await {
            match r.map_err(|e| e.to_string())? {
                (_, Ok(NodeResponse::Ok)) => {}
                (n, Ok(NodeResponse::Error { message })) => errors.push(format!("node {n}: {message}")),
                (n, Ok(other)) => errors.push(format!("node {n}: unexpected answer {other:?}")),
                (n, Err(e)) => errors.push(format!("node {n} unreachable: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// After a failed attempt: mark chunks named corrupt as bad, and nodes that do not answer
    /// as dead, so the next plan avoids them. Returns the nodes to avoid.
    async fn diagnose(&self, s: &StripeRecord, a: &Assignment, err: &str) -> BTreeSet<NodeId> {
        let mut avoid = BTreeSet::new();
        for (i, _) in err.match_indices("corrupt chunk ") {
            let name: String = err[i + 14..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.').collect();
            if let Some(j) = (0..s.nodes.len()).find(|&j| ChunkId::new(s.id, j).as_str() == name) {
                let _ = self.mark_bad(s.id, j, err);
            }
        }
        for (&n, addr) in &a.peers {
            let ok =
                matches!(request(addr, &NodeRequest::Ping, Duration::from_secs(2)).await, Ok(NodeResponse::Pong { node }) if node == n);
            if !ok {
                tracing::warn!("node {n} does not answer; marking it dead");
                self.mark_dead(n);
                avoid.insert(n);
            }
        }
        avoid
    }

    #[allow(clippy::too_many_arguments)] // one request's fields
    async fn degraded_plan(
        &self,
        name: &str,
        version: u64,
        stripe: usize,
        index: usize,
        method: Shape,
        slice: u64,
        avoid: Vec<NodeId>,
    ) -> Result<Assignment, String> {
        let id = self.stripe_of(name, version, stripe)?;
        // Nodes the reader found hung are not helpers (the chunk's own node is not one either).
        let mut avoid: BTreeSet<NodeId> = avoid.into_iter().collect();
        let mut last = String::new();
        for _ in 0..self.cfg.repair_attempts.max(1) {
            let s = self.meta.stripe(id)?.ok_or("stripe vanished")?;
            if index >= s.nodes.len() {
                return bad(format!("stripe has {} chunks", s.nodes.len()));
            }
            let a = self.plan(&s, index, method, slice, Target::Reader, &avoid)?;
            match self.dispatch(&a).await {
                Ok(()) => return Ok(a),
                Err(e) => {
                    last = e;
                    avoid.extend(self.diagnose(&s, &a, &last).await);
                }
            }
        }
        bad(format!("could not plan a degraded read: {last}"))
    }

    /// Rebuilds one lost chunk onto a new node; Ok(attempts used), Ok(0) when the chunk
    /// turned out not to be lost (its node reported in again).
    async fn repair_one(self: &Arc<Self>, p: &PendingRepair, scheduled: Option<Choice>) -> Result<usize, String> {
        let mut avoid = BTreeSet::new();
        let mut last = String::new();
        for attempt in 1..=self.cfg.repair_attempts.max(1) {
            let Some(s) = self.meta.stripe(p.stripe)? else {
                // Its version was replaced or deleted: nothing to repair.
                self.meta.apply(vec![Change::DeletePending { stripe: p.stripe, index: p.index }])?;
                return Ok(0);
            };
            if s.crcs[p.index].is_none() {
                return bad(format!("chunk {} was never committed", ChunkId::new(s.id, p.index)));
            }
            let holder = s.nodes[p.index];
            let holder_ok =
                !s.bad[p.index] && self.alive().contains_key(&holder) && !self.meta.nodes()?.iter().any(|n| n.id == holder && n.failed);
            if holder_ok {
                self.meta.apply(vec![Change::DeletePending { stripe: p.stripe, index: p.index }])?;
                return Ok(0);
            }
            // The scheduler's choice on the first attempt; re-planned after a failure.
            let choice = if attempt == 1 { scheduled.as_ref() } else { None };
            let a = match self.plan(&s, p.index, p.method, p.slice, Target::Rebuild(choice), &avoid) {
                Ok(a) => a,
                Err(e) => return Err(e),
            };
            let dest = a.graph.vertex(a.graph.sink).node;
            let outcome = async {
                self.dispatch(&a).await?;
                let limit = Duration::from_secs_f64((a.chunk_len as f64 / 1e6 * 10.0).max(60.0));
                match request(
                    &a.peers[&dest],
                    &NodeRequest::WaitRepair { repair: a.repair, timeout_ms: limit.as_millis() as u64 },
                    limit + self.io_timeout(),
                )
                .await?
                {
                    NodeResponse::RepairDone { crc32c } if Some(crc32c) == s.crcs[p.index] => Ok(()),
                    NodeResponse::RepairDone { crc32c } => Err(format!("rebuilt chunk has crc {crc32c:08x}")),
                    NodeResponse::Error { message } => Err(message),
                    other => Err(format!("unexpected answer {other:?}")),
                }
            }
            .await;
            match outcome {
                Ok(()) => {
                    // The rebuilt chunk now lives on dest; the stripe is whole again there.
                    // Read and written in one transaction: a concurrent report or commit is
                    // never overwritten with a stale copy of the stripe.
                    let mut old = None;
                    self.meta.update(&mut |t| {
                        t.put(Change::DeletePending { stripe: p.stripe, index: p.index })?;
                        if let Some(mut s) = t.stripe(p.stripe)? {
                            old = Some(s.nodes[p.index]);
                            s.nodes[p.index] = dest;
                            s.bad[p.index] = false;
                            t.put(Change::PutStripe(s))?;
                        } else if let Some(mut g) = t.garbage(p.stripe)? {
                            // Replaced or deleted meanwhile: the rebuilt copy is garbage too.
                            old = None;
                            g.nodes[p.index] = dest;
                            t.put(Change::PutGarbage(g))?;
                        }
                        Ok(())
                    })?;
                    let Some(old) = old else { return Ok(attempt) };
                    // A corrupt copy left on another live node is removed (best effort).
                    let old_addr = if old == dest { None } else { self.alive().get(&old).cloned() };
                    if let Some(addr) = old_addr {
                        let _ =
                            request(&addr, &NodeRequest::DeleteChunk { chunk: ChunkId::new(p.stripe, p.index) }, Duration::from_secs(2))
                                .await;
                    }
                    return Ok(attempt);
                }
                Err(e) => {
                    tracing::warn!("repair of {} (attempt {attempt}) failed: {e}", ChunkId::new(p.stripe, p.index));
                    last = e;
                    let s = self.meta.stripe(p.stripe)?.ok_or("stripe vanished")?;
                    avoid.extend(self.diagnose(&s, &a, &last).await);
                    avoid.insert(dest);
                }
            }
        }
        bad(format!("chunk {}: {last}", ChunkId::new(p.stripe, p.index)))
    }

    /// Every chunk of a committed object that is on a dead node or reported bad.
    pub(crate) fn lost_chunks(&self) -> Result<Vec<(u64, usize)>, String> {
        self.lost_chunks_where(&|_, _| true)
    }

    /// Lost chunks for which `due(stripe, node)` holds (`node` the chunk's holder).
    pub(crate) fn lost_chunks_where(&self, due: &dyn Fn(&StripeRecord, usize) -> bool) -> Result<Vec<(u64, usize)>, String> {
        let alive = self.alive();
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        let mut lost = Vec::new();
        for s in self.meta.stripes()? {
            if s.crcs.iter().any(|c| c.is_none()) {
                continue;
            }
            for (i, n) in s.nodes.iter().enumerate() {
                if (s.bad[i] || !alive.contains_key(n) || failed.contains(n)) && due(&s, i) {
                    lost.push((s.id, i));
                }
            }
        }
        Ok(lost)
    }

    /// Helpers and destinations for `todo` from `scheduler`, and the order to start the
    /// repairs in (by first timeslot for RepairBoost, else as listed).
    fn schedule(&self, todo: &mut [PendingRepair], scheduler: Scheduler) -> Result<HashMap<(u64, usize), Choice>, String> {
        let alive = self.alive();
        let failed: BTreeSet<NodeId> = self.meta.nodes()?.into_iter().filter(|n| n.failed).map(|n| n.id).collect();
        let cluster = Cluster::homogeneous(alive.keys().copied().filter(|n| !failed.contains(n)).collect());
        // One plan per code and method: a scheduler balances over chunks of one kind.
        let mut groups: BTreeMap<(String, &str), Vec<usize>> = BTreeMap::new();
        let mut stripes = HashMap::new();
        for (i, p) in todo.iter().enumerate() {
            // A stripe deleted since is skipped by repair_one.
            let Some(s) = self.meta.stripe(p.stripe)? else { continue };
            groups.entry((s.code.to_string(), p.method.name())).or_default().push(i);
            stripes.insert(p.stripe, s);
        }
        let mut out = HashMap::new();
        let mut first_slot = HashMap::new();
        for (_, idx) in groups {
            let method = todo[idx[0]].method;
            let code = stripes[&todo[idx[0]].stripe].code.build().map_err(|e| e.to_string())?;
            let lost: Vec<LostChunk> = idx
                .iter()
                .map(|&i| {
                    let (p, s) = (&todo[i], &stripes[&todo[i].stripe]);
                    let placement = (0..s.nodes.len())
                        .map(|j| (j != p.index && !s.bad[j] && cluster.nodes.contains(&s.nodes[j])).then_some(s.nodes[j]))
                        .collect();
                    // Every node of the stripe stays out, also one holding a corrupt copy.
                    LostChunk { placement, lost: p.index, avoid: s.nodes.clone() }
                })
                .collect();
            let plan = schedule::plan(code.as_ref(), method, scheduler, &lost, &cluster, self.epoch).map_err(|e| e.to_string())?;
            for (&i, r) in idx.iter().zip(&plan.repairs) {
                let key = (todo[i].stripe, todo[i].index);
                out.insert(key, Choice { helpers: r.helpers(), destination: r.destination() });
                first_slot.insert(key, r.first_slot());
            }
        }
        todo.sort_by_key(|p| first_slot.get(&(p.stripe, p.index)).copied().unwrap_or(0));
        Ok(out)
    }

    /// Full-node repair of everything lost, `parallel` chunks at a time.
    pub async fn repair(
        self: &Arc<Self>,
        method: Shape,
        slice: u64,
        parallel: usize,
        scheduler: Scheduler,
    ) -> Result<RepairReport, String> {
        let _one = self.repairing.lock().await;
        let lost = self.lost_chunks()?;
        self.repair_locked(lost, method, slice, parallel, scheduler).await
    }

    /// Repairs `lost` (and what an earlier run left pending); the caller holds `repairing`.
    pub(crate) async fn repair_locked(
        self: &Arc<Self>,
        lost: Vec<(u64, usize)>,
        method: Shape,
        slice: u64,
        parallel: usize,
        scheduler: Scheduler,
    ) -> Result<RepairReport, String> {
        let mut todo: Vec<PendingRepair> = lost.into_iter().map(|(stripe, index)| PendingRepair { stripe, index, method, slice }).collect();
        // Chunks left pending by an earlier run are included with their own method.
        for p in self.meta.pending()? {
            if !todo.iter().any(|t| t.stripe == p.stripe && t.index == p.index) {
                todo.push(p);
            }
        }
        self.meta.apply(todo.iter().cloned().map(Change::PutPending).collect())?;
        let choices = match self.schedule(&mut todo, scheduler) {
            Ok(c) => c,
            Err(e) => {
                // Planning can fail where a chunk has too few survivors; each chunk then
                // plans on its own and reports its own error.
                tracing::warn!("scheduler {scheduler} could not plan: {e}");
                HashMap::new()
            }
        };
        self.run_repairs(todo, &format!("{method} ({scheduler})"), parallel, choices).await
    }

    async fn resume(self: &Arc<Self>) -> Result<RepairReport, String> {
        let _one = self.repairing.lock().await;
        let todo = self.meta.pending()?;
        self.run_repairs(todo, "resumed", 4, HashMap::new()).await
    }

    async fn run_repairs(
        self: &Arc<Self>,
        todo: Vec<PendingRepair>,
        method: &str,
        parallel: usize,
        mut choices: HashMap<(u64, usize), Choice>,
    ) -> Result<RepairReport, String> {
        let started = Instant::now();
        let lost = todo.len();
        let sem = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
        let mut set = JoinSet::new();
        // Chunks of one stripe are rebuilt one after another: each plans with its siblings'
        // new homes known, so no two land on the same node.
        let mut stripe_locks: HashMap<u64, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
        for p in todo {
            let (c, sem) = (self.clone(), sem.clone());
            let choice = choices.remove(&(p.stripe, p.index));
            let lock = stripe_locks.entry(p.stripe).or_default().clone();
            // Permits are taken in this order, so repairs start in schedule order.
            let permit = sem.acquire_owned().await.expect("semaphore open");
            set.spawn(async move {
                let _permit = permit;
                let _stripe = lock.lock().await;
                let len = c.meta.stripe(p.stripe).ok().flatten().map_or(0, |s| s.chunk_len);
                (c.repair_one(&p, choice).await, len)
            });
        }
        let mut report = RepairReport { method: method.to_string(), lost, ..Default::default() };
        while let Some(r) = set.join_next().await {
            match r.map_err(|e| e.to_string())? {
                (Ok(0), _) => report.skipped += 1,
                (Ok(attempts), len) => {
                    report.repaired += 1;
                    report.retries += attempts - 1;
                    report.bytes += len;
                }
                (Err(e), _) => {
                    tracing::warn!("repair failed: {e}");
                    report.failed += 1;
                    report.errors.push(e);
                }
            }
        }
        report.seconds = started.elapsed().as_secs_f64();
        debug_assert_eq!(report.repaired + report.skipped + report.failed, report.lost);
        Ok(report)
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
                NodeInfo {
                    alive: alive.contains_key(&n.id) && !n.failed,
                    chunks: chunks.get(&n.id).copied().unwrap_or(0),
                    id: n.id,
                    addr: n.addr,
                    used_bytes: used,
                    capacity_bytes: cap,
                    nearfull: over(self.cfg.nearfull_ratio),
                    full: over(self.cfg.full_ratio),
                }
            })
            .collect();
        Ok(ClusterStatus {
            nodes,
            objects: self.meta.objects()?.len(),
            stripes: stripes.len(),
            lost_chunks: self.lost_chunks()?.len(),
            pending_repairs: self.meta.pending()?.len(),
            repairing: self.repairing.try_lock().is_err(),
            last_auto_repair: self.last_auto.lock().expect("last auto lock").clone(),
        })
    }
}

/// Where a planned repair sends the rebuilt chunk.
enum Target<'a> {
    /// To the client, for a degraded read.
    Reader,
    /// To a new home: the scheduler's choice when it still holds, else the least loaded node.
    Rebuild(Option<&'a Choice>),
}
