//! The client: erasure-codes objects itself (as HDFS-EC clients do) and writes chunks straight
//! to the nodes; reads data chunks straight from them and, when one is unavailable or
//! corrupt, runs the sink of a degraded-read graph the coordinator planned.

use kintsugi_codes::{Code, CodeSpec};
use kintsugi_node::exec::{check_assignment, request};
use kintsugi_node::{run_sink, Counters, Shaper};
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{NodeId, Shape};
use kintsugi_proto::{
    read_frame_timeout, recv, send, write_frame, ChunkLoc, ClusterStatus, CoordRequest, CoordResponse, Frame, Kind, NodeRequest,
    NodeResponse, ObjectInfo, ObjectLayout, RepairReport,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

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
}

/// How a read went.
#[derive(Clone, Debug, Default)]
pub struct ReadReport {
    /// (stripe, chunk) read through a degraded-read graph, and how long each took.
    pub degraded: Vec<(usize, usize, f64)>,
}

impl Client {
    pub fn new(coordinator: &str) -> Self {
        Client {
            coordinator: coordinator.to_string(),
            io_timeout: Duration::from_secs(30),
            shaper: Arc::new(Shaper::default()),
            counters: Arc::default(),
            stall_timeout: Duration::from_millis(500),
        }
    }

    /// One request to the coordinator.
    pub async fn call(&self, req: &CoordRequest, limit: Duration) -> Result<CoordResponse, String> {
        let c = &self.coordinator;
        let mut s = kintsugi_proto::auth::connect(c, self.io_timeout).await.map_err(|e| format!("coordinator {e}"))?;
        send(&mut s, req).await.map_err(|e| format!("coordinator {c}: {e}"))?;
        match tokio::time::timeout(limit, recv(&mut s)).await {
            Err(_) => Err(format!("coordinator {c} did not answer within {limit:?}")),
            Ok(Err(e)) => Err(format!("coordinator {c}: {e}")),
            Ok(Ok(CoordResponse::Error { message })) => Err(message),
            Ok(Ok(r)) => Ok(r),
        }
    }

    async fn layout(&self, req: CoordRequest) -> Result<ObjectLayout, String> {
        match self.call(&req, self.io_timeout).await? {
            CoordResponse::Layout(l) => Ok(l),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    /// Stores `data` as object `name`: encode each stripe, write its chunks in parallel,
    /// then commit their checksums.
    pub async fn put(&self, name: &str, data: &[u8], code: CodeSpec, chunk_size: u64) -> Result<ObjectLayout, String> {
        let c = code.build().map_err(|e| e.to_string())?;
        let layout = self.layout(CoordRequest::CreateObject { name: name.into(), size: data.len() as u64, code, chunk_size }).await?;
        let mut crcs: Vec<Vec<u32>> = Vec::new();
        let mut off = 0usize;
        for s in &layout.stripes {
            let shards = encode_stripe(c.as_ref(), &data[off..off + s.data_len as usize], s.chunk_len as usize)?;
            off += s.data_len as usize;
            crcs.push(shards.iter().map(|x| crc32c::crc32c(x)).collect());
            let mut set = JoinSet::new();
            for (loc, shard) in s.chunks.iter().zip(shards) {
                let (loc, t) = (loc.clone(), self.io_timeout);
                set.spawn(async move { put_chunk(&loc, &shard, t).await });
            }
            while let Some(r) = set.join_next().await {
                r.map_err(|e| e.to_string())??;
            }
        }
        let req = CoordRequest::CommitObject { name: name.into(), version: layout.version, crcs: crcs.clone() };
        match self.call(&req, self.io_timeout).await? {
            // Our version, as committed (a later put may replace it at any time).
            CoordResponse::Ok => {
                let mut layout = ObjectLayout { committed: true, ..layout };
                for (s, c) in layout.stripes.iter_mut().zip(&crcs) {
                    for (loc, crc) in s.chunks.iter_mut().zip(c) {
                        loc.crc32c = Some(*crc);
                    }
                }
                Ok(layout)
            }
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    /// Deletes object `name`; says whether it existed (deleting twice is not an error).
    pub async fn delete(&self, name: &str) -> Result<bool, String> {
        match self.call(&CoordRequest::DeleteObject { name: name.into() }, self.io_timeout).await? {
            CoordResponse::Deleted { existed } => Ok(existed),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    /// Reads object `name`. Unavailable or corrupt data chunks are rebuilt by degraded reads
    /// with `method`; every chunk is checked against its committed checksum. A read that
    /// meets a version replaced under it (a concurrent put or delete) starts again on the
    /// current version, so it returns one whole version or an error, never a mix.
    pub async fn get(&self, name: &str, method: Shape, slice: u64) -> Result<(Vec<u8>, ReadReport), String> {
        let mut layout = self.layout(CoordRequest::Lookup { name: name.into() }).await?;
        for _ in 0..3 {
            match self.get_version(name, &layout, method, slice).await {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let now = self.layout(CoordRequest::Lookup { name: name.into() }).await?;
                    if now.version == layout.version {
                        return Err(e);
                    }
                    tracing::info!("'{name}' was replaced while being read ({e}); reading the new version");
                    layout = now;
                }
            }
        }
        Err(format!("object '{name}' kept being replaced while being read"))
    }

    async fn get_version(&self, name: &str, layout: &ObjectLayout, method: Shape, slice: u64) -> Result<(Vec<u8>, ReadReport), String> {
        if !layout.committed {
            return Err(format!("object '{name}' is still being written"));
        }
        let k = layout.code.build().map_err(|e| e.to_string())?.k();
        let mut out = Vec::with_capacity(layout.size as usize);
        let mut report = ReadReport::default();
        // Nodes that stalled during this read: not asked again, avoided as helpers.
        let mut suspects: BTreeSet<NodeId> = BTreeSet::new();
        for (si, s) in layout.stripes.iter().enumerate() {
            // The stripe's data chunks in parallel: from their nodes, and at the same time by
            // degraded reads for those known lost or on a node found hung.
            let mut fetches = JoinSet::new();
            let mut rebuilt: Vec<Option<(Vec<u8>, f64)>> = vec![None; k];
            let mut rebuilds = JoinSet::new();
            for (i, loc) in s.chunks.iter().take(k).enumerate() {
                if loc.lost || suspects.contains(&loc.node) {
                    let (me, name, avoid) = (self.clone(), name.to_string(), suspects.iter().copied().collect::<Vec<_>>());
                    let version = layout.version;
                    rebuilds.spawn(async move {
                        let t = Instant::now();
                        let r = me.degraded_read_avoiding(&name, version, si, i, method, slice, avoid).await;
                        (i, r.map(|c| (c, t.elapsed().as_secs_f64())))
                    });
                    continue;
                }
                let (loc, len, t, shaper) = (loc.clone(), s.chunk_len, self.stall_timeout, self.shaper.clone());
                fetches.spawn(async move { (i, get_chunk(&loc, len, t, &shaper).await) });
            }
            let mut direct: Vec<Result<Vec<u8>, String>> = (0..k).map(|_| Err("marked lost".to_string())).collect();
            while let Some(r) = fetches.join_next().await {
                let (i, r) = r.map_err(|e| e.to_string())?;
                if let Err(e) = &r {
                    if e.contains("timed out") || e.contains("no answer") || e.contains("unreachable") || e.contains("Connection refused") {
                        suspects.insert(s.chunks[i].node);
                    }
                }
                direct[i] = r;
            }
            while let Some(r) = rebuilds.join_next().await {
                let (i, r) = r.map_err(|e| e.to_string())?;
                rebuilt[i] = Some(r?);
            }
            let mut stripe_data = Vec::with_capacity(k * s.chunk_len as usize);
            for (i, (loc, direct)) in s.chunks.iter().zip(direct).enumerate() {
                let chunk = match (direct, rebuilt[i].take()) {
                    (_, Some((c, secs))) => {
                        report.degraded.push((si, i, secs));
                        c
                    }
                    (Ok(c), None) => c,
                    (Err(e), None) => {
                        // A chunk that is corrupt, or gone from a node that answers, is
                        // lost: reported so that it is repaired (a dead node is not).
                        if e.contains("corrupt chunk") || e.contains("checksum") || e.contains("not found") {
                            let _ = self
                                .call(
                                    &CoordRequest::ReportBad {
                                        name: name.into(),
                                        stripe: si,
                                        index: i,
                                        reason: e.clone(),
                                        version: layout.version,
                                    },
                                    self.io_timeout,
                                )
                                .await;
                        }
                        let t = Instant::now();
                        let avoid: Vec<NodeId> = suspects.iter().copied().collect();
                        let c = self.degraded_read_avoiding(name, layout.version, si, i, method, slice, avoid).await?;
                        report.degraded.push((si, i, t.elapsed().as_secs_f64()));
                        c
                    }
                };
                if Some(crc32c::crc32c(&chunk)) != loc.crc32c {
                    return Err(format!("chunk {} does not match its checksum", loc.chunk));
                }
                stripe_data.extend_from_slice(&chunk);
            }
            out.extend_from_slice(&stripe_data[..s.data_len as usize]);
        }
        Ok((out, report))
    }

    /// Rebuilds chunk `index` of stripe `stripe` at this client through a repair graph.
    pub async fn degraded_read(&self, name: &str, stripe: usize, index: usize, method: Shape, slice: u64) -> Result<Vec<u8>, String> {
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
    ) -> Result<Vec<u8>, String> {
        let mut req = CoordRequest::DegradedRead { name: name.into(), stripe, index, method, slice, version, avoid };
        let mut answer = self.call(&req, self.io_timeout).await;
        if matches!(&answer, Err(e) if e.contains("cannot recover")) {
            // Too few chunks looked available: the nodes this read found slow are only
            // suspects, and a node may have missed a heartbeat. Once more, avoiding no one.
            if let CoordRequest::DegradedRead { avoid, .. } = &mut req {
                avoid.clear();
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            answer = self.call(&req, self.io_timeout).await;
        }
        let a = match answer? {
            CoordResponse::Plan { assignment } => *assignment,
            other => return Err(format!("unexpected answer {other:?}")),
        };
        let units = check_assignment(&a)?;
        run_sink(&a, &units, None, self.shaper.clone(), self.counters.clone(), self.io_timeout).await
    }

    pub async fn list(&self) -> Result<Vec<ObjectInfo>, String> {
        match self.call(&CoordRequest::List, self.io_timeout).await? {
            CoordResponse::Objects { objects } => Ok(objects),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    pub async fn stat(&self, name: &str) -> Result<ObjectLayout, String> {
        self.layout(CoordRequest::Lookup { name: name.into() }).await
    }

    pub async fn fail(&self, node: NodeId) -> Result<(), String> {
        self.call(&CoordRequest::FailNode { node }, self.io_timeout).await.map(|_| ())
    }

    pub async fn repair(&self, method: Shape, slice: u64, parallel: usize, scheduler: Scheduler) -> Result<RepairReport, String> {
        match self.call(&CoordRequest::Repair { method, slice, parallel, scheduler }, Duration::from_secs(24 * 3600)).await? {
            CoordResponse::Repaired(r) => Ok(r),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    pub async fn status(&self) -> Result<ClusterStatus, String> {
        match self.call(&CoordRequest::Status, self.io_timeout).await? {
            CoordResponse::Status(s) => Ok(s),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }
}

/// Splits a stripe's data into k zero-padded chunks and appends the parity.
pub fn encode_stripe(code: &dyn Code, data: &[u8], chunk_len: usize) -> Result<Vec<Vec<u8>>, String> {
    let (k, n) = (code.k(), code.n());
    let mut shards: Vec<Vec<u8>> = (0..k)
        .map(|i| {
            let mut c = vec![0u8; chunk_len];
            let start = (i * chunk_len).min(data.len());
            let end = ((i + 1) * chunk_len).min(data.len());
            c[..end - start].copy_from_slice(&data[start..end]);
            c
        })
        .collect();
    let mut parity = vec![vec![0u8; chunk_len]; n - k];
    {
        let d: Vec<&[u8]> = shards.iter().map(|s| s.as_slice()).collect();
        let mut p: Vec<&mut [u8]> = parity.iter_mut().map(|s| s.as_mut_slice()).collect();
        code.encode(&d, &mut p).map_err(|e| e.to_string())?;
    }
    shards.extend(parity);
    Ok(shards)
}

async fn put_chunk(loc: &ChunkLoc, data: &[u8], t: Duration) -> Result<(), String> {
    let a = &loc.addr;
    let mut s = kintsugi_proto::auth::connect(a, t).await.map_err(|e| format!("node {}: {e}", loc.node))?;
    send(&mut s, &NodeRequest::PutChunk { chunk: loc.chunk.clone(), len: data.len() as u64, crc32c: crc32c::crc32c(data) })
        .await
        .map_err(|e| e.to_string())?;
    for piece in data.chunks(1 << 20) {
        write_frame(&mut s, Kind::Data, piece).await.map_err(|e| e.to_string())?;
    }
    s.flush().await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(t, recv(&mut s)).await.map_err(|_| format!("node {}: no answer", loc.node))?.map_err(|e| e.to_string())? {
        NodeResponse::Ok => Ok(()),
        NodeResponse::Error { message } => Err(format!("node {}: {message}", loc.node)),
        other => Err(format!("node {}: unexpected answer {other:?}", loc.node)),
    }
}

/// Reads a whole chunk from its node (downlink shaped by the reader's link).
pub async fn get_chunk(loc: &ChunkLoc, len: u64, t: Duration, shaper: &Shaper) -> Result<Vec<u8>, String> {
    let a = &loc.addr;
    let mut s = kintsugi_proto::auth::connect(a, t).await.map_err(|e| format!("node {}: {e}", loc.node))?;
    send(&mut s, &NodeRequest::GetChunk { chunk: loc.chunk.clone() }).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(t, recv(&mut s)).await.map_err(|_| format!("node {}: no answer", loc.node))?.map_err(|e| e.to_string())? {
        NodeResponse::Chunk { len: l, .. } if l == len => {}
        NodeResponse::Chunk { len: l, .. } => return Err(format!("node {} holds {l} bytes of {}, expected {len}", loc.node, loc.chunk)),
        NodeResponse::Error { message } => return Err(format!("node {}: {message}", loc.node)),
        other => return Err(format!("node {}: unexpected answer {other:?}", loc.node)),
    }
    let mut out = Vec::with_capacity(len as usize);
    while (out.len() as u64) < len {
        match read_frame_timeout(&mut s, t).await.map_err(|e| format!("node {}: {e}", loc.node))? {
            Frame::Data(d) => {
                shaper.recv(d.len()).await;
                out.extend_from_slice(&d);
            }
            Frame::Control(_) => return Err(format!("node {} interrupted the chunk", loc.node)),
        }
    }
    if out.len() as u64 != len {
        return Err(format!("node {} sent {} bytes, expected {len}", loc.node, out.len()));
    }
    Ok(out)
}

/// Pings a node.
pub async fn ping(addr: &str, t: Duration) -> bool {
    matches!(request(addr, &NodeRequest::Ping, t).await, Ok(NodeResponse::Pong { .. }))
}
