//! The client: erasure-codes objects itself (as HDFS-EC clients do) and writes chunks straight
//! to the nodes; reads data chunks straight from them and, when one is unavailable or
//! corrupt, runs the sink of a degraded-read graph the coordinator planned.

use crate::error::Error;
use crate::object_io::CommitTerms;
use kintsugi_node::exec::check_assignment;
use kintsugi_node::{run_sink, Counters, Shaper};
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{NodeId, Pick, Shape};
use kintsugi_proto::graph_faults;
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{
    ChunkId, ClusterStatus, CoordRequest, CoordResponse, NodeRequest, NodeResponse, ObjectInfo, ObjectLayout, RepairReport, READER,
};
use kintsugi_proto::{Fault, Precondition, Scarce, VersionInfo, VersionRef, Versioning};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

pub use crate::object_io::{encode_stripe, get_chunk, get_chunk_range, put_chunk, ObjectSink, ReadReport};

/// A connection-less client of one cluster.
#[derive(Clone)]
pub struct Client {
    pub coordinator: String,
    pub io_timeout: Duration,
    /// The reader's own link (for emulated clusters); unshaped by default.
    pub shaper: Arc<Shaper>,
    pub counters: Arc<Counters>,
    /// A node that sends nothing for this long while a chunk is read from it is taken as
    /// hung for the rest of the read: its chunks are rebuilt by degraded reads that avoid it.
    pub stall_timeout: Duration,
    /// Extent layouts: fetch (or rebuild) the next chunk while the current one is written
    /// (Geometric Partitioning's pipelined reads). Off: one chunk after another.
    pub pipelined_reads: bool,
    /// The link a read's bytes go on to after this client (its uplink): Geometric
    /// Partitioning's HTTP server, which rebuilds inside the data centre and streams to a
    /// client limited to 1 Gbit/s. Unshaped by default.
    pub egress: Arc<Shaper>,
    /// Find Geo and Contiguous objects through their placement group's index (on by
    /// default); off: always ask the coordinator.
    pub index_reads: bool,
    /// The cluster map, once learnt (`index_reads`).
    pub(crate) map: Arc<std::sync::Mutex<Option<Arc<crate::index_reads::ClusterMap>>>>,
    /// Told how long each degraded read took that rebuilt its bytes (a server's metrics).
    pub on_degraded_read: Option<DegradedReadObserver>,
    /// The coordinator keeps no object in its metadata: small ones go in stripes too.
    pub(crate) inline_refused: Arc<std::sync::atomic::AtomicBool>,
}

/// What a server hands the client to time its degraded reads.
pub type DegradedReadObserver = Arc<dyn Fn(Duration) + Send + Sync>;

/// How long a client with several coordinators waits for one to lead.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(20);

impl Client {
    pub fn new(coordinator: &str) -> Self {
        Client {
            coordinator: coordinator.to_string(),
            io_timeout: Duration::from_secs(30),
            shaper: Arc::new(Shaper::default()),
            counters: Arc::default(),
            stall_timeout: Duration::from_millis(500),
            pipelined_reads: true,
            egress: Arc::new(Shaper::default()),
            index_reads: true,
            map: Arc::default(),
            on_degraded_read: None,
            inline_refused: Arc::default(),
        }
    }

    /// One request to the coordinator, on an idle connection to it when there is one: a
    /// connection's setup (TCP and the secret's handshake) costs more CPU than a small
    /// object's whole exchange. Every answer, errors too, leaves the connection clean.
    pub async fn call(&self, req: &CoordRequest, limit: Duration) -> Result<CoordResponse, WireError> {
        let c = &self.coordinator;
        let unheard = |m: String| WireError::unavailable(format!("coordinator {m}")).with_fault(Fault::NoCoordinator);
        match kintsugi_proto::rpc::pooled_exchange(c, req, limit, || self.connect(), |_: &CoordResponse| true).await {
            Ok(CoordResponse::Error(e)) => Err(e),
            Ok(r) => Ok(r),
            Err(kintsugi_proto::rpc::PooledError::Connect(e)) => Err(e),
            Err(kintsugi_proto::rpc::PooledError::NoAnswer(m)) => Err(unheard(m)),
        }
    }

    /// A connection to the coordinator. Given several (one leads, the others stand by and do
    /// not listen), the one that accepts; while none does (a failover: the leader died and
    /// its lease has not expired yet), tried again for up to [`FAILOVER_WAIT`].
    async fn connect(&self) -> Result<kintsugi_proto::secure::Conn, WireError> {
        let c = &self.coordinator;
        let started = std::time::Instant::now();
        loop {
            match kintsugi_proto::auth::connect(c, self.io_timeout).await {
                Ok(s) => return Ok(s),
                Err(e) if c.contains(',') && started.elapsed() < FAILOVER_WAIT => {
                    tracing::debug!("no coordinator answers ({e}); trying again");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(WireError::unavailable(format!("coordinator {e}")).with_fault(Fault::NoCoordinator)),
            }
        }
    }

    pub(crate) async fn layout(&self, req: CoordRequest) -> Result<ObjectLayout, WireError> {
        match self.call(&req, self.io_timeout).await? {
            CoordResponse::Layout(l) => Ok(l),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Deletes object `name`; says whether it existed (deleting twice is not an error).
    pub async fn delete(&self, name: &str) -> Result<bool, Error> {
        let req = CoordRequest::DeleteObject { name: name.into(), versioning: Versioning::Unversioned, precondition: None };
        match self.call(&req, self.io_timeout).await? {
            CoordResponse::Deleted { existed, .. } => Ok(existed),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Deletes `name` as a bucket with `versioning` does: without versioning as
    /// [`Client::delete`] (None); with it, a delete marker becomes its latest version
    /// (answered).
    pub async fn delete_versioned(&self, name: &str, versioning: Versioning) -> Result<Option<VersionInfo>, Error> {
        self.delete_if(name, versioning, None).await.map(|(_, v)| v)
    }

    /// Deletes `name` as [`Client::delete_versioned`] does, only if it meets `precondition`
    /// (`PreconditionFailed` otherwise, nothing changed). Says whether an object was there,
    /// and the delete marker made, if one was.
    pub async fn delete_if(
        &self,
        name: &str,
        versioning: Versioning,
        precondition: Option<Precondition>,
    ) -> Result<(bool, Option<VersionInfo>), Error> {
        match self.call(&CoordRequest::DeleteObject { name: name.into(), versioning, precondition }, self.io_timeout).await? {
            CoordResponse::Deleted { existed, version } => Ok((existed, version.map(|v| *v))),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Deletes exactly version `version` of `name`; answers it, if it existed (see
    /// `CoordRequest::DeleteVersion`).
    pub async fn delete_version(&self, name: &str, version: VersionRef) -> Result<Option<VersionInfo>, Error> {
        self.delete_version_as(name, version, false).await
    }

    /// As [`Client::delete_version`]; with `bypass_governance`, a version under GOVERNANCE
    /// retention is deleted too (COMPLIANCE and legal holds never yield: `Locked`).
    pub async fn delete_version_as(&self, name: &str, version: VersionRef, bypass_governance: bool) -> Result<Option<VersionInfo>, Error> {
        match self.call(&CoordRequest::DeleteVersion { name: name.into(), version, bypass_governance }, self.io_timeout).await? {
            CoordResponse::Deleted { version, .. } => Ok(version.map(|v| *v)),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Version `version` of `name`, or its latest when None: a layout to read, or a delete
    /// marker (`delete_marker`, no stripes); NotFound if there is no such version.
    pub async fn stat_version(&self, name: &str, version: Option<VersionRef>) -> Result<ObjectLayout, Error> {
        self.layout(CoordRequest::LookupVersion { name: name.into(), version }).await
    }

    /// Reads version `version` of `name` (its latest when None; kept versions too) into
    /// memory; NotFound for a delete marker.
    pub async fn get_kept(
        &self,
        name: &str,
        version: Option<VersionRef>,
        method: Shape,
        slice: u64,
    ) -> Result<(Vec<u8>, crate::ReadReport), Error> {
        let l = self.stat_version(name, version).await?;
        if l.delete_marker {
            return Err(WireError::not_found(format!("version {} of '{name}' is a delete marker", l.version)));
        }
        let mut out = Vec::with_capacity(l.size.min(1 << 30) as usize);
        let report = self.read_layout(&l, 0, l.size, &mut out, method, slice).await?;
        Ok((out, report))
    }

    /// One page of the versions of names under `prefix` (see `CoordRequest::ListVersions`).
    pub async fn list_versions(&self, page: VersionsPage<'_>) -> Result<VersionListing, Error> {
        let req = CoordRequest::ListVersions {
            prefix: page.prefix.into(),
            delimiter: page.delimiter.into(),
            key_marker: page.key_marker.into(),
            version_marker: page.version_marker,
            limit: page.limit,
        };
        match self.call(&req, self.io_timeout).await? {
            CoordResponse::Versions { versions, prefixes, next } => Ok(VersionListing { versions, prefixes, next }),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Rebuilds chunk `index` of stripe `stripe` at this client through a repair graph.
    pub async fn degraded_read(&self, name: &str, stripe: usize, index: usize, method: Shape, slice: u64) -> Result<Vec<u8>, WireError> {
        self.degraded_read_avoiding(name, 0, stripe, index, method, slice, Vec::new()).await
    }

    /// The same, failing if the object is no longer at `version` (0: any), with helpers
    /// chosen among nodes other than `avoid`.
    #[allow(clippy::too_many_arguments)] // one request's fields
    pub async fn degraded_read_avoiding(
        &self,
        name: &str,
        version: u64,
        stripe: usize,
        index: usize,
        method: Shape,
        slice: u64,
        avoid: Vec<NodeId>,
    ) -> Result<Vec<u8>, WireError> {
        self.degraded_read_range(name, version, stripe, index, None, method, slice, avoid).await
    }

    /// A degraded read of bytes [offset, offset + len) of a chunk only (`range`; codes of
    /// one sub-chunk), or of the whole chunk.
    ///
    /// Re-planned around every helper that fails it: a helper chunk a node finds corrupt or
    /// missing is reported (the coordinator marks it bad and plans without it), a node of the
    /// graph that no longer answers is avoided; until the coordinator says fewer than k
    /// healthy chunks remain, and then the error says which chunks are bad and why.
    #[allow(clippy::too_many_arguments)] // one request's fields
    pub async fn degraded_read_range(
        &self,
        name: &str,
        version: u64,
        stripe: usize,
        index: usize,
        range: Option<(u64, u64)>,
        method: Shape,
        slice: u64,
        avoid: Vec<NodeId>,
    ) -> Result<Vec<u8>, WireError> {
        // Nodes the caller found slow are suspects, avoided only while enough chunks remain
        // without them; nodes that did not answer a ping after a failed graph are avoided.
        let mut suspects: BTreeSet<NodeId> = avoid.into_iter().collect();
        let mut gone: BTreeSet<NodeId> = BTreeSet::new();
        let mut found: Vec<String> = Vec::new();
        let mut reported: BTreeSet<ChunkId> = BTreeSet::new();
        // Failures that taught nothing new: a few, then the read gives up.
        let mut blind = 0;
        let started = std::time::Instant::now();
        loop {
            let avoid: Vec<NodeId> = suspects.union(&gone).copied().collect();
            let req =
                CoordRequest::DegradedRead { name: name.into(), stripe, index, method: method.name().into(), slice, version, avoid, range };
            let a = match self.call(&req, self.io_timeout).await {
                Ok(CoordResponse::Plan { assignment }) => *assignment,
                Ok(other) => return Err(WireError::internal(format!("unexpected answer {other:?}"))),
                Err(e) if e.is_short_of(Scarce::Chunks) && !suspects.is_empty() => {
                    // Too few chunks without the suspects (a node may only have missed a
                    // heartbeat): once more with them.
                    tracing::info!("chunk {index} of stripe {stripe} of '{name}': {e}; trying the nodes found slow again");
                    suspects.clear();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(e) if e.is_short_of(Scarce::Chunks) && !found.is_empty() => {
                    return Err(e.and_then_said(format_args!("This read found: {}", found.join("; "))));
                }
                Err(e) => return Err(e),
            };
            let (a, units) = check_assignment(a)?;
            let err = match run_sink(&a, &units, None, self.shaper.clone(), self.counters.clone(), self.io_timeout).await {
                Ok(c) => {
                    if let Some(f) = &self.on_degraded_read {
                        f(started.elapsed());
                    }
                    return Ok(c);
                }
                Err(e) => e,
            };
            let mut learnt = false;
            for (chunk, why) in graph_faults::bad_chunks_named(&err, &a.term_chunks) {
                let Some((_, j)) = chunk.parts() else { continue };
                if reported.insert(chunk.clone()) {
                    tracing::warn!("degraded read of '{name}': helper {why}; reported, planning without it");
                    let report = CoordRequest::ReportBad { name: name.into(), stripe, index: j, reason: why.clone(), version };
                    self.call(&report, self.io_timeout).await?;
                    found.push(why);
                    learnt = true;
                }
            }
            for n in graph_faults::unanswering(&a.peers).await {
                if n != READER && gone.insert(n) {
                    tracing::warn!("degraded read of '{name}': node {n} does not answer; planning without it");
                    found.push(format!("node {n} does not answer"));
                    learnt = true;
                }
            }
            if !learnt {
                blind += 1;
                if blind >= 3 {
                    // Unavailable, with what the graph said of itself: the reader may retry.
                    return Err(err
                        .as_kind(kintsugi_proto::ErrorKind::Unavailable)
                        .context(format_args!("degraded read of chunk {index} of stripe {stripe} of '{name}' failed {blind} times")));
                }
                tracing::info!("degraded read of '{name}' failed ({err}); trying again");
            }
        }
    }

    /// Every committed object, in name order (a page at a time).
    pub async fn list(&self) -> Result<Vec<ObjectInfo>, Error> {
        self.list_prefix("").await
    }

    /// Every committed object whose name starts with `prefix`, in name order.
    pub async fn list_prefix(&self, prefix: &str) -> Result<Vec<ObjectInfo>, Error> {
        let (mut all, mut after) = (Vec::new(), String::new());
        loop {
            let (objects, _, next) = self.list_page(prefix, "", &after, 0).await?;
            all.extend(objects);
            match next {
                Some(n) => after = n,
                None => return Ok(all),
            }
        }
    }

    /// One page of a listing: objects, common prefixes (with a `delimiter`), and where the
    /// next page starts. `limit` 0 is the largest page, 1000 entries.
    pub async fn list_page(
        &self,
        prefix: &str,
        delimiter: &str,
        after: &str,
        limit: u32,
    ) -> Result<(Vec<ObjectInfo>, Vec<String>, Option<String>), Error> {
        let req = CoordRequest::List { prefix: prefix.into(), delimiter: delimiter.into(), after: after.into(), limit };
        match self.call(&req, self.io_timeout).await? {
            CoordResponse::Objects { objects, prefixes, next } => Ok((objects, prefixes, next)),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Makes `name` the concatenation of committed objects `parts` (name, version), which
    /// are gone afterwards; no byte moves (see `CoordRequest::ComposeObject`).
    pub async fn compose(&self, name: &str, parts: Vec<(String, u64)>, terms: CommitTerms) -> Result<VersionRef, Error> {
        let CommitTerms { attrs, precondition, versioning, .. } = terms;
        let req = CoordRequest::ComposeObject { name: name.into(), parts, attrs, precondition, versioning };
        match self.call(&req, self.io_timeout).await? {
            CoordResponse::Committed { version, versioned: true } => Ok(VersionRef::Id(version)),
            _ => Ok(VersionRef::Null),
        }
    }

    /// Replaces the attributes of committed object `name` at exactly `version` (see
    /// `CoordRequest::SetAttrs`): PreconditionFailed if it changed meanwhile.
    pub async fn set_attrs(&self, name: &str, version: u64, attrs: kintsugi_proto::Attrs) -> Result<(), Error> {
        self.set_attrs_as(name, version, attrs, false).await
    }

    /// As [`Client::set_attrs`]; with `bypass_governance`, a GOVERNANCE retention in force
    /// may be shortened or removed.
    pub async fn set_attrs_as(&self, name: &str, version: u64, attrs: kintsugi_proto::Attrs, bypass_governance: bool) -> Result<(), Error> {
        self.call(&CoordRequest::SetAttrs { name: name.into(), version, attrs, bypass_governance }, self.io_timeout).await?;
        Ok(())
    }

    pub async fn stat(&self, name: &str) -> Result<ObjectLayout, Error> {
        self.layout(CoordRequest::Lookup { name: name.into() }).await
    }

    pub async fn fail(&self, node: NodeId) -> Result<(), WireError> {
        self.call(&CoordRequest::FailNode { node }, self.io_timeout).await.map(|_| ())
    }

    pub async fn repair(&self, method: Shape, slice: u64, parallel: usize, scheduler: Scheduler) -> Result<RepairReport, WireError> {
        self.repair_limited(method, slice, parallel, scheduler, None).await
    }

    /// [`Client::repair`] with either choice possibly `auto` (the coordinator predicts
    /// every candidate and runs the fastest), and at most `per_destination` repairs running
    /// on one destination at once (0: no limit; None: the coordinator's setting).
    pub async fn repair_limited(
        &self,
        method: impl Into<Pick<Shape>>,
        slice: u64,
        parallel: usize,
        scheduler: impl Into<Pick<Scheduler>>,
        per_destination: Option<usize>,
    ) -> Result<RepairReport, WireError> {
        match self
            .call(
                &CoordRequest::Repair {
                    method: method.into().to_string(),
                    slice,
                    parallel,
                    scheduler: scheduler.into().to_string(),
                    max_active_per_destination: per_destination,
                },
                Duration::from_secs(24 * 3600),
            )
            .await?
        {
            CoordResponse::Repaired(r) => Ok(r),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    pub async fn status(&self) -> Result<ClusterStatus, WireError> {
        match self.call(&CoordRequest::Status, self.io_timeout).await? {
            CoordResponse::Status(s) => Ok(*s),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Why stripes `width` chunks wide could not be healed after losing a node, if they
    /// could not: a lost chunk is rebuilt on a live node holding none of its stripe, so a
    /// stripe as wide as the live nodes waits for the lost node to return.
    pub async fn cannot_heal(&self, width: usize) -> Result<Option<String>, WireError> {
        let live = self.status().await?.nodes.iter().filter(|n| n.alive).count();
        Ok(cannot_heal(width, live))
    }
}

/// Why stripes `width` wide cannot be healed on `live` nodes, if they cannot.
/// Which page of a version listing to read.
#[derive(Clone, Copy, Debug, Default)]
pub struct VersionsPage<'a> {
    pub prefix: &'a str,
    pub delimiter: &'a str,
    pub key_marker: &'a str,
    pub version_marker: Option<VersionRef>,
    /// At most this many entries (1 to 1000; 0: 1000).
    pub limit: u32,
}

/// A page of versions: in S3's order, the common prefixes, and where the next page starts.
#[derive(Clone, Debug, Default)]
pub struct VersionListing {
    pub versions: Vec<VersionInfo>,
    pub prefixes: Vec<String>,
    pub next: Option<(String, Option<VersionRef>)>,
}

pub fn cannot_heal(width: usize, live: usize) -> Option<String> {
    (width >= live).then(|| {
        format!(
            "{width} chunks per stripe on {live} live node(s): a lost node's chunks cannot be rebuilt until it returns or a \
             node is added; use a narrower code or add a node"
        )
    })
}

/// Pings a node.
pub async fn ping(addr: &str, t: Duration) -> bool {
    matches!(request(addr, &NodeRequest::Ping, t).await, Ok(NodeResponse::Pong { .. }))
}
