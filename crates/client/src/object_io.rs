//! Streaming put and get: the client encodes and writes an object stripe by stripe, and
//! reads it back stripe by stripe into a sink, so its memory is a couple of stripes
//! whatever the object's size.

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use kintsugi_codes::{Code, CodeSpec};
use kintsugi_node::Shaper;
use kintsugi_plan::{NodeId, Shape};
use kintsugi_proto::frame::{read_body, read_head};
use kintsugi_proto::secure::Conn;
use kintsugi_proto::WireError;
use kintsugi_proto::{
    recv, send, write_frame, Attrs, ChunkLoc, CoordRequest, CoordResponse, Kind, LayoutSpec, NodeRequest, NodeResponse, ObjectLayout,
    Precondition, Versioning,
};
use kintsugi_proto::{Fault, Scarce};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

/// Nodes a put's chunk may move to before the put gives up.
pub(crate) const MAX_MOVES: usize = 8;

/// A stripe's chunk writes under way: each ends with (stripe, index, where it landed).
type ChunkWrites = JoinSet<Result<(usize, usize, ChunkLoc), WireError>>;

/// How a read went.
#[derive(Clone, Debug, Default)]
pub struct ReadReport {
    /// (stripe, chunk) read through a degraded-read graph, and how long each took.
    pub degraded: Vec<(usize, usize, f64)>,
}

/// Where a get writes the object, in order.
pub trait ObjectSink: Send {
    fn write(&mut self, data: &[u8]) -> Result<(), WireError>;
    /// Takes a buffer of the object's next bytes whole: a sink that keeps what it is given
    /// (the S3 gateway's response windows) keeps this buffer instead of copying it.
    fn write_owned(&mut self, data: Vec<u8>) -> Result<(), WireError> {
        self.write(&data)
    }
    /// Drops what was written: the object was replaced mid-read and is read again from
    /// its start. A sink that cannot take back bytes (a pipe) says so.
    fn restart(&mut self) -> Result<(), WireError>;
}

impl ObjectSink for Vec<u8> {
    fn write(&mut self, data: &[u8]) -> Result<(), WireError> {
        self.extend_from_slice(data);
        Ok(())
    }
    fn restart(&mut self) -> Result<(), WireError> {
        self.clear();
        Ok(())
    }
}

/// Bytes done so far, called after every stripe.
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// What a put commits with once its bytes are written.
#[derive(Clone, Debug, Default)]
pub struct CommitTerms {
    /// Attributes the object carries from then on.
    pub attrs: Attrs,
    /// What the object must be at the commit (none: anything).
    pub precondition: Option<Precondition>,
    /// Whether the version it replaces is kept (see [`Versioning`]).
    pub versioning: Versioning,
    /// Stored in stripes even when small enough to be kept in the metadata (see
    /// [`kintsugi_proto::inline`]): a part to be composed, which only stripes can be.
    pub striped: bool,
}

impl From<Attrs> for CommitTerms {
    fn from(attrs: Attrs) -> Self {
        CommitTerms { attrs, ..Default::default() }
    }
}

impl Client {
    /// Stores `data` as object `name` (see [`Client::put_from`]).
    pub async fn put(&self, name: &str, data: &[u8], code: CodeSpec, chunk_size: u64) -> Result<ObjectLayout, Error> {
        let mut r = data;
        self.put_from(name, &mut r, data.len() as u64, code, chunk_size, &|_| {}).await
    }

    /// Stores the `size` bytes `reader` yields as object `name`: each stripe is read,
    /// encoded and its chunks written in parallel while the next stripe is read and
    /// encoded; then the chunks' checksums are committed, which makes this version the
    /// object's. Holds two stripes in memory.
    pub async fn put_from(
        &self,
        name: &str,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        size: u64,
        code: CodeSpec,
        chunk_size: u64,
        progress: Progress<'_>,
    ) -> Result<ObjectLayout, Error> {
        self.put_with_layout(name, reader, size, code, chunk_size, LayoutSpec::Stripe, progress).await
    }

    /// [`Client::put_from`] with any object layout (Stripe, Stripe-Max, Geo, Contiguous).
    #[allow(clippy::too_many_arguments)] // a put's parameters
    pub async fn put_with_layout(
        &self,
        name: &str,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        size: u64,
        code: CodeSpec,
        chunk_size: u64,
        kind: LayoutSpec,
        progress: Progress<'_>,
    ) -> Result<ObjectLayout, Error> {
        self.put_with_attrs(name, reader, size, code, chunk_size, kind, progress, &mut || Ok(CommitTerms::default())).await
    }

    /// [`Client::put_with_layout`], committing on the terms `terms` gives once every byte
    /// is written (attributes, a precondition); an error from it (a digest that does not
    /// match) abandons the upload instead: nothing becomes visible, and the upload's chunks
    /// are reclaimed. So does a precondition the object does not meet at the commit.
    #[allow(clippy::too_many_arguments)] // a put's parameters
    pub async fn put_with_attrs(
        &self,
        name: &str,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        size: u64,
        code: CodeSpec,
        chunk_size: u64,
        kind: LayoutSpec,
        progress: Progress<'_>,
        terms: &mut (dyn FnMut() -> Result<CommitTerms, WireError> + Send),
    ) -> Result<ObjectLayout, Error> {
        let c = code.build().map_err(WireError::from)?;
        if kind == LayoutSpec::Stripe && size <= kintsugi_proto::INLINE_MAX && !self.inline_refused.load(Ordering::Relaxed) {
            let data = read_all(reader, size).await?;
            let terms = terms()?;
            if !terms.striped {
                if let Some(layout) = self.put_inline(name, data.clone(), code, terms.clone()).await? {
                    progress(size);
                    return Ok(layout);
                }
            }
            let mut terms = Some(terms);
            let mut rest = &data[..];
            return self
                .put_striped(c.as_ref(), name, &mut rest, (size, code, chunk_size, kind), progress, &mut || {
                    Ok(terms.take().unwrap_or_default())
                })
                .await;
        }
        self.put_striped(c.as_ref(), name, reader, (size, code, chunk_size, kind), progress, terms).await
    }

    /// Stores `data` in the metadata (see [`kintsugi_proto::inline`]); None if the
    /// coordinator keeps no object there (it will not later either: this client stops asking).
    async fn put_inline(&self, name: &str, data: Vec<u8>, code: CodeSpec, terms: CommitTerms) -> Result<Option<ObjectLayout>, WireError> {
        let CommitTerms { attrs, precondition, versioning, .. } = terms;
        let inline = kintsugi_proto::Inline::new(data);
        let size = inline.data.len() as u64;
        let req = CoordRequest::PutInline { name: name.into(), data: inline, code, attrs, precondition, versioning };
        let (version, versioned) = match self.call(&req, self.io_timeout).await? {
            CoordResponse::Committed { version, versioned } => (version, versioned),
            CoordResponse::InlineRefused => {
                self.inline_refused.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            other => return Err(WireError::internal(format!("unexpected answer {other:?}"))),
        };
        let CoordRequest::PutInline { data, attrs, .. } = req else { unreachable!("built above") };
        Ok(Some(ObjectLayout {
            name: name.into(),
            size,
            code,
            committed: true,
            version,
            stripes: vec![],
            layout: LayoutSpec::Stripe,
            extents: vec![],
            attrs,
            versioned,
            delete_marker: false,
            inline: Some(data),
        }))
    }

    /// [`Client::put_with_attrs`] in stripes (or Geo/Contiguous extents), whatever the size.
    async fn put_striped(
        &self,
        c: &dyn Code,
        name: &str,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        (size, code, chunk_size, kind): (u64, CodeSpec, u64, LayoutSpec),
        progress: Progress<'_>,
        terms: &mut (dyn FnMut() -> Result<CommitTerms, WireError> + Send),
    ) -> Result<ObjectLayout, Error> {
        let layout = self.layout(CoordRequest::CreateObject { name: name.into(), size, code, chunk_size, layout: kind }).await?;
        let version = layout.version;
        let r = self.write_and_commit(c, name, layout, reader, progress, terms).await;
        if r.is_err() {
            // Abandoned now rather than after the upload timeout; if even this fails, the
            // coordinator reclaims it then.
            let _ = self.call(&CoordRequest::AbortUpload { name: name.into(), version }, self.io_timeout).await;
        }
        r
    }

    /// Writes an upload's chunks and commits it.
    async fn write_and_commit(
        &self,
        c: &dyn Code,
        name: &str,
        layout: ObjectLayout,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        progress: Progress<'_>,
        terms: &mut (dyn FnMut() -> Result<CommitTerms, WireError> + Send),
    ) -> Result<ObjectLayout, WireError> {
        let mut layout = layout;
        if !layout.extents.is_empty() {
            let crcs = self.put_extents(&mut layout, reader, progress).await?;
            return self.commit_put(name, layout, crcs, terms()?).await;
        }
        let mut crcs: Vec<Vec<u32>> = Vec::new();
        let mut writing: Option<ChunkWrites> = None;
        let mut done = 0u64;
        // Nodes this put could not write to: chunks meant for them go elsewhere.
        let failed: Arc<Mutex<BTreeSet<NodeId>>> = Arc::default();
        for si in 0..layout.stripes.len() {
            let s = &layout.stripes[si];
            let shards = read_stripe(c, reader, s.data_len as usize, s.chunk_len as usize).await?;
            crcs.push(shards.iter().map(|x| kintsugi_proto::crc::crc32c(x)).collect());
            if let Some(set) = writing.take() {
                self.placed(&mut layout, set).await?;
                progress(done);
            }
            let s = &layout.stripes[si];
            let mut set = JoinSet::new();
            for (i, (loc, shard)) in s.chunks.iter().zip(shards).enumerate() {
                let (me, loc, name, failed) = (self.clone(), loc.clone(), name.to_string(), failed.clone());
                let (version, sub) = (layout.version, c.sub_chunks());
                set.spawn(
                    async move { me.write_upload_chunk(&name, version, (si, i, sub), loc, &shard, &failed).await.map(|l| (si, i, l)) },
                );
            }
            writing = Some(set);
            done += s.data_len;
        }
        if let Some(set) = writing {
            self.placed(&mut layout, set).await?;
            progress(done);
        }
        self.commit_put(name, layout, crcs, terms()?).await
    }

    /// Waits for a stripe's chunk writes and records where each chunk landed.
    async fn placed(&self, layout: &mut ObjectLayout, mut set: ChunkWrites) -> Result<(), WireError> {
        let mut first = None;
        while let Some(r) = set.join_next().await {
            match r.map_err(WireError::from)? {
                Ok((si, i, loc)) => layout.stripes[si].chunks[i] = loc,
                Err(e) => first = first.or(Some(e)),
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Writes chunk `index` of stripe `stripe` of upload `version` (its code has
    /// `sub_chunks`); if its node cannot take it (dead, hung, full), the coordinator places
    /// it on another node and it is written there. Returns where it is. Fails once no
    /// eligible node is left.
    async fn write_upload_chunk(
        &self,
        name: &str,
        version: u64,
        (stripe, index, sub_chunks): (usize, usize, usize),
        mut loc: ChunkLoc,
        data: &[u8],
        failed: &Mutex<BTreeSet<NodeId>>,
    ) -> Result<ChunkLoc, WireError> {
        let mut last: Option<WireError> = None;
        for _ in 0..MAX_MOVES {
            if !failed.lock().expect("failed lock").contains(&loc.node) {
                match put_chunk(&loc, data, sub_chunks, self.io_timeout).await {
                    Ok(()) => return Ok(loc),
                    Err(e) => {
                        tracing::warn!("put of '{name}': chunk {} to node {}: {e}; writing it elsewhere", loc.chunk, loc.node);
                        failed.lock().expect("failed lock").insert(loc.node);
                        last = Some(e);
                    }
                }
            }
            let avoid: Vec<NodeId> = failed.lock().expect("failed lock").iter().copied().collect();
            let req = CoordRequest::MoveUploadChunk { name: name.into(), version, stripe, index, avoid };
            loc = match self.call(&req, self.io_timeout).await {
                Ok(CoordResponse::Moved(l)) => l,
                Ok(other) => return Err(WireError::internal(format!("unexpected answer {other:?}"))),
                Err(e) => return Err(WireError::merge(last.into_iter().chain([e]).collect()).expect("one error at least")),
            };
        }
        let last = last.unwrap_or_else(|| WireError::unavailable("no node took it"));
        Err(last
            .as_kind(ErrorKind::Unavailable)
            .context(format_args!("chunk {} of '{name}' could not be written after {MAX_MOVES} moves", loc.chunk)))
    }

    /// Commits a put's chunks with their checksums: one list per stripe, with one checksum
    /// for a Geo stripe (the object's chunk in it).
    async fn commit_put(
        &self,
        name: &str,
        layout: ObjectLayout,
        crcs: Vec<Vec<u32>>,
        terms: CommitTerms,
    ) -> Result<ObjectLayout, WireError> {
        let CommitTerms { attrs, precondition, versioning, .. } = terms;
        let req = CoordRequest::CommitObject {
            name: name.into(),
            version: layout.version,
            crcs: crcs.clone(),
            attrs: attrs.clone(),
            precondition,
            versioning,
        };
        let (version, versioned) = match self.call(&req, self.io_timeout).await? {
            CoordResponse::Committed { version, versioned } => (version, versioned),
            CoordResponse::Ok => (layout.version, false),
            other => return Err(WireError::internal(format!("unexpected answer {other:?}"))),
        };
        // Our version, as committed (a later put may replace it at any time).
        let mut layout = ObjectLayout { committed: true, attrs, version, versioned, ..layout };
        let extents = layout.extents.clone();
        for (si, (s, c)) in layout.stripes.iter_mut().zip(&crcs).enumerate() {
            if c.len() == 1 && s.chunks.len() > 1 {
                if let Some(e) = extents.iter().find(|e| e.stripe == si) {
                    s.chunks[e.index].crc32c = Some(c[0]);
                }
                continue;
            }
            for (loc, crc) in s.chunks.iter_mut().zip(c) {
                loc.crc32c = Some(*crc);
            }
        }
        Ok(layout)
    }

    /// Reads object `name` into memory (see [`Client::get_into`]).
    pub async fn get(&self, name: &str, method: Shape, slice: u64) -> Result<(Vec<u8>, ReadReport), Error> {
        let mut out = Vec::new();
        let report = self.get_into(name, &mut out, method, slice, &|_| {}).await?;
        Ok((out, report))
    }

    /// Reads object `name` into `sink`, stripe by stripe. Unavailable or corrupt data chunks
    /// are rebuilt by degraded reads with `method`; every chunk is checked against its
    /// committed checksum. A read that meets a version replaced under it (a concurrent put
    /// or delete) starts again on the current version, so the sink gets one whole version
    /// or an error, never a mix.
    pub async fn get_into(
        &self,
        name: &str,
        sink: &mut dyn ObjectSink,
        method: Shape,
        slice: u64,
        progress: Progress<'_>,
    ) -> Result<ReadReport, Error> {
        let (mut layout, mut from_index) = self.locate(name).await?;
        for _ in 0..3 {
            match self.get_version(name, &layout, sink, method, slice, progress).await {
                Ok(r) => return Ok(r),
                Err(e) if from_index => (layout, from_index) = (self.relocate(name, e, sink).await?, false),
                Err(e) => {
                    let now = self.layout(CoordRequest::Lookup { name: name.into() }).await?;
                    if now.version == layout.version {
                        return Err(e);
                    }
                    tracing::info!("'{name}' was replaced while being read ({e}); reading the new version");
                    sink.restart().map_err(|r| r.context(format_args!("object '{name}' was replaced while being read ({e}), and")))?;
                    layout = now;
                }
            }
        }
        Err(Error::new(ErrorKind::Replaced, format!("object '{name}' kept being replaced while being read")))
    }

    async fn get_version(
        &self,
        name: &str,
        layout: &ObjectLayout,
        sink: &mut dyn ObjectSink,
        method: Shape,
        slice: u64,
        progress: Progress<'_>,
    ) -> Result<ReadReport, WireError> {
        if !layout.extents.is_empty() || layout.inline.is_some() {
            return self.read_extents(layout, 0, u64::MAX, sink, method, slice, progress).await;
        }
        if !layout.committed {
            return Err(WireError::unavailable(format!("object '{name}' is still being written")));
        }
        let k = layout.code.build().map_err(WireError::from)?.k();
        let mut report = ReadReport::default();
        let mut done = 0u64;
        // Nodes that stalled during this read: not asked again, avoided as helpers.
        let mut suspects: BTreeSet<NodeId> = BTreeSet::new();
        for (si, s) in layout.stripes.iter().enumerate() {
            // The stripe's data chunks in parallel: from their nodes, and at the same time by
            // degraded reads for those known lost or on a node found hung.
            let mut fetches = JoinSet::new();
            let mut rebuilt: Vec<Option<(Vec<u8>, f64)>> = vec![None; k];
            let mut rebuilds = JoinSet::new();
            // Only the chunks holding data: a small object's stripe may not fill all k.
            let needed = (s.data_len.div_ceil(s.chunk_len.max(1)) as usize).min(k);
            for (i, loc) in s.chunks.iter().take(needed).enumerate() {
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
            let mut direct: Vec<Result<Vec<u8>, WireError>> = (0..needed).map(|_| Err(WireError::unavailable("marked lost"))).collect();
            while let Some(r) = fetches.join_next().await {
                let (i, r) = r.map_err(WireError::from)?;
                if let Err(e) = &r {
                    // A node that did not answer or broke the connection is a suspect: its
                    // chunks are rebuilt by degraded reads that avoid it.
                    if e.bad_nodes().any(|n| n == s.chunks[i].node) {
                        suspects.insert(s.chunks[i].node);
                    }
                }
                direct[i] = r;
            }
            while let Some(r) = rebuilds.join_next().await {
                let (i, r) = r.map_err(WireError::from)?;
                rebuilt[i] = Some(r?);
            }
            // Chunks that are corrupt, or gone from a node that answers, are lost: every one
            // is reported first (so that it is repaired, and so that no degraded read below
            // plans with it as a helper); a dead node is not.
            let mut found = Vec::new();
            for (i, d) in direct.iter().enumerate() {
                if let (Err(e), None) = (d, &rebuilt[i]) {
                    if e.bad_chunks().any(|c| *c == s.chunks[i].chunk) {
                        found.push(e.message().to_string());
                        let req = CoordRequest::ReportBad {
                            name: name.into(),
                            stripe: si,
                            index: i,
                            reason: e.message().to_string(),
                            version: layout.version,
                        };
                        let _ = self.call(&req, self.io_timeout).await;
                    }
                }
            }
            let mut left = s.data_len as usize;
            for (i, (loc, direct)) in s.chunks.iter().zip(direct).enumerate() {
                let chunk = match (direct, rebuilt[i].take()) {
                    (_, Some((c, secs))) => {
                        report.degraded.push((si, i, secs));
                        c
                    }
                    (Ok(c), None) => c,
                    (Err(e), None) => {
                        tracing::info!("chunk {}: {e}; a degraded read of it", loc.chunk);
                        let t = Instant::now();
                        let avoid: Vec<NodeId> = suspects.iter().copied().collect();
                        let c = match self.degraded_read_avoiding(name, layout.version, si, i, method, slice, avoid).await {
                            Ok(c) => c,
                            // Unreadable: also say what the direct reads found.
                            Err(x) if x.is_short_of(Scarce::Chunks) && !found.is_empty() => {
                                return Err(x.and_then_said(format_args!("Read directly: {}", found.join("; "))))
                            }
                            Err(x) => return Err(x),
                        };
                        report.degraded.push((si, i, t.elapsed().as_secs_f64()));
                        c
                    }
                };
                if Some(kintsugi_proto::crc::crc32c(&chunk)) != loc.crc32c {
                    return Err(WireError::new(ErrorKind::Corrupt, format!("chunk {} does not match its checksum", loc.chunk)));
                }
                let n = left.min(chunk.len());
                let mut chunk = chunk;
                chunk.truncate(n);
                sink.write_owned(chunk)?;
                self.egress.send(n).await;
                left -= n;
            }
            done += s.data_len;
            progress(done);
        }
        Ok(report)
    }
}

/// Reads the next `data_len` bytes of an object into k zero-padded chunks of `chunk_len`
/// and appends the parity.
async fn read_stripe(
    code: &dyn Code,
    reader: &mut (dyn AsyncRead + Unpin + Send),
    data_len: usize,
    chunk_len: usize,
) -> Result<Vec<Vec<u8>>, WireError> {
    let mut shards = Vec::with_capacity(code.n());
    for i in 0..code.k() {
        let mut c = vec![0u8; chunk_len];
        let want = data_len.saturating_sub(i * chunk_len).min(chunk_len);
        reader.read_exact(&mut c[..want]).await.map_err(|e| WireError::new(ErrorKind::Input, format!("reading the object: {e}")))?;
        shards.push(c);
    }
    with_parity(code, shards)
}

/// The k data chunks followed by the parity computed from them.
fn with_parity(code: &dyn Code, mut shards: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, WireError> {
    let len = shards.first().map_or(0, |s| s.len());
    let mut parity = vec![vec![0u8; len]; code.n() - code.k()];
    {
        let d: Vec<&[u8]> = shards.iter().map(|s| s.as_slice()).collect();
        let mut p: Vec<&mut [u8]> = parity.iter_mut().map(|s| s.as_mut_slice()).collect();
        code.encode(&d, &mut p).map_err(WireError::from)?;
    }
    shards.extend(parity);
    Ok(shards)
}

/// Exactly `size` bytes from `reader` (a small object's, read whole).
async fn read_all(reader: &mut (dyn AsyncRead + Unpin + Send), size: u64) -> Result<Vec<u8>, WireError> {
    let mut data = Vec::with_capacity(size as usize);
    (&mut *reader)
        .take(size)
        .read_to_end(&mut data)
        .await
        .map_err(|e| WireError::new(ErrorKind::Input, format!("reading the object: {e}")))?;
    if data.len() as u64 != size {
        return Err(WireError::new(ErrorKind::Input, format!("the object ended after {} of its {size} bytes", data.len())));
    }
    Ok(data)
}

/// Splits a stripe's data into k zero-padded chunks and appends the parity.
pub fn encode_stripe(code: &dyn Code, data: &[u8], chunk_len: usize) -> Result<Vec<Vec<u8>>, WireError> {
    let shards: Vec<Vec<u8>> = (0..code.k())
        .map(|i| {
            let mut c = vec![0u8; chunk_len];
            let start = (i * chunk_len).min(data.len());
            let end = ((i + 1) * chunk_len).min(data.len());
            c[..end - start].copy_from_slice(&data[start..end]);
            c
        })
        .collect();
    with_parity(code, shards)
}

/// One try at an exchange with a node on one connection.
enum Attempt {
    /// The connection was closed under it before any answer: on an idle connection, the
    /// node had closed it and never served the request, which a new connection may retry.
    Closed(WireError),
    Failed(WireError),
}

impl Attempt {
    /// A connection failure before the answer: on an idle connection, one the node closed
    /// (it never saw the request), when `e` says the peer closed it.
    fn unanswered(node: NodeId, e: kintsugi_proto::FrameError) -> Self {
        let closed = kintsugi_proto::rpc::closed(&e);
        let e = WireError::unreachable(node, format!("node {node}: {e}"));
        if closed {
            Attempt::Closed(e)
        } else {
            Attempt::Failed(e)
        }
    }
}

/// Runs an idempotent chunk exchange `on` a connection to `loc`'s node: an idle one when
/// there is one (a connection's setup costs more CPU than a small chunk's transfer), else a
/// new one; the connection goes back for the next exchange when `on` left it clean (Ok).
macro_rules! on_pooled_conn {
    ($loc:expr, $t:expr, |$s:ident| $on:expr) => {{
        let loc: &ChunkLoc = $loc;
        let node = loc.node;
        let a = &loc.addr;
        let mut done = None;
        if let Some(mut $s) = kintsugi_proto::rpc::take(a) {
            match $on.await {
                Ok(r) => {
                    kintsugi_proto::rpc::give_back(a, $s);
                    done = Some(Ok(r));
                }
                Err(Attempt::Closed(e)) => tracing::debug!("idle connection to node {node} was closed ({e}); connecting anew"),
                Err(Attempt::Failed(e)) => done = Some(Err(e)),
            }
        }
        match done {
            Some(r) => r,
            None => {
                let mut $s =
                    kintsugi_proto::auth::connect(a, $t).await.map_err(|e| WireError::unreachable(node, format!("node {node}: {e}")))?;
                match $on.await {
                    Ok(r) => {
                        kintsugi_proto::rpc::give_back(a, $s);
                        Ok(r)
                    }
                    Err(Attempt::Closed(e) | Attempt::Failed(e)) => Err(e),
                }
            }
        }
    }};
}

/// Writes one chunk to its node; `sub_chunks` is the code's (a Clay chunk's alpha, 1
/// otherwise): the node checksums each sub-chunk, so a repair reads only what it needs.
pub async fn put_chunk(loc: &ChunkLoc, data: &[u8], sub_chunks: usize, t: Duration) -> Result<(), WireError> {
    on_pooled_conn!(loc, t, |s| put_on(&mut s, loc, data, sub_chunks, t))
}

async fn put_on(s: &mut Conn, loc: &ChunkLoc, data: &[u8], sub_chunks: usize, t: Duration) -> Result<(), Attempt> {
    let node = loc.node;
    let sub_chunks = u32::try_from(sub_chunks).unwrap_or(0);
    let put = NodeRequest::PutChunk {
        chunk: loc.chunk.clone(),
        len: data.len() as u64,
        crc32c: kintsugi_proto::crc::crc32c(data),
        bucket: loc.bucket,
        sub_chunks,
    };
    // A node that stops reading (hung) fails the write within `t`, as one that stops answering.
    let stalled = || Attempt::Failed(WireError::silent(node, format!("node {node}: took no data for {t:?}")));
    let failed = |e: kintsugi_proto::FrameError| Attempt::unanswered(node, e);
    tokio::time::timeout(t, send(s, &put)).await.map_err(|_| stalled())?.map_err(failed)?;
    for piece in data.chunks(1 << 20) {
        tokio::time::timeout(t, write_frame(s, Kind::Data, piece)).await.map_err(|_| stalled())?.map_err(failed)?;
    }
    tokio::time::timeout(t, s.flush()).await.map_err(|_| stalled())?.map_err(|e| failed(e.into()))?;
    match tokio::time::timeout(t, recv(s))
        .await
        .map_err(|_| Attempt::Failed(WireError::silent(node, format!("node {node}: no answer"))))?
        .map_err(failed)?
    {
        NodeResponse::Ok => Ok(()),
        NodeResponse::Error(e) => Err(Attempt::Failed(e.context(format_args!("node {node}")))),
        other => Err(Attempt::Failed(WireError::internal(format!("node {node}: unexpected answer {other:?}")))),
    }
}

/// Reads a whole chunk from its node (downlink shaped by the reader's link). The node
/// streams it, verifying as it reads; a corrupt block it meets mid-way ends the stream
/// with its error.
pub async fn get_chunk(loc: &ChunkLoc, len: u64, t: Duration, shaper: &Shaper) -> Result<Vec<u8>, WireError> {
    fetch_chunk(loc, None, len, t, shaper).await
}

/// Bytes [offset, offset + len) of a chunk, each block verified by its node against the
/// block's checksum (the whole chunk's checksum cannot be checked on a part).
pub async fn get_chunk_range(loc: &ChunkLoc, offset: u64, len: u64, t: Duration, shaper: &Shaper) -> Result<Vec<u8>, WireError> {
    fetch_chunk(loc, Some((offset, len)), len, t, shaper).await
}

async fn fetch_chunk(loc: &ChunkLoc, range: Option<(u64, u64)>, len: u64, t: Duration, shaper: &Shaper) -> Result<Vec<u8>, WireError> {
    on_pooled_conn!(loc, t, |s| fetch_on(&mut s, loc, range, len, t, shaper))
}

async fn fetch_on(
    s: &mut Conn,
    loc: &ChunkLoc,
    range: Option<(u64, u64)>,
    len: u64,
    t: Duration,
    shaper: &Shaper,
) -> Result<Vec<u8>, Attempt> {
    let node = loc.node;
    let broken = |e: kintsugi_proto::FrameError| Attempt::Failed(WireError::unreachable(node, format!("node {node}: {e}")));
    let silent = |what: &str| Attempt::Failed(WireError::silent(node, format!("node {node}: {what}")));
    let unanswered = |e: kintsugi_proto::FrameError| Attempt::unanswered(node, e);
    send(s, &NodeRequest::GetChunk { chunk: loc.chunk.clone(), range }).await.map_err(unanswered)?;
    match tokio::time::timeout(t, recv(s)).await.map_err(|_| silent("no answer"))?.map_err(unanswered)? {
        NodeResponse::Chunk { len: l, .. } if l == len => {}
        NodeResponse::Chunk { len: l, .. } => {
            return Err(Attempt::Failed(
                WireError::new(ErrorKind::Corrupt, format!("node {node} holds {l} bytes of {}, expected {len}", loc.chunk))
                    .with_fault(Fault::CorruptChunk { chunk: loc.chunk.clone() }),
            ))
        }
        NodeResponse::Error(e) => return Err(Attempt::Failed(e.context(format_args!("node {node}")))),
        other => return Err(Attempt::Failed(WireError::internal(format!("node {node}: unexpected answer {other:?}")))),
    }
    // Bodies go straight into the chunk, each with the next header in one system call
    // (the connection's spill): no zeroing, no copy out of a buffer in between.
    let mut out = Vec::with_capacity(len as usize);
    while (out.len() as u64) < len {
        let (kind, n) = tokio::time::timeout(t, read_head(s)).await.map_err(|_| silent(&format!("no data for {t:?}")))?.map_err(broken)?;
        if kind == Kind::Data {
            if out.len() as u64 + n as u64 > len {
                return Err(Attempt::Failed(WireError::internal(format!("node {node} sent more than the {len} bytes of the chunk"))));
            }
            tokio::time::timeout(t, read_body(s, n, &mut out)).await.map_err(|_| silent("stalled mid-frame"))?.map_err(broken)?;
            shaper.recv(n).await;
        } else {
            let mut c = Vec::new();
            tokio::time::timeout(t, read_body(s, n, &mut c)).await.map_err(|_| silent("stalled mid-frame"))?.map_err(broken)?;
            return Err(Attempt::Failed(match kintsugi_proto::frame::decode_control::<NodeResponse>(&c) {
                Ok(NodeResponse::Error(e)) => e.context(format_args!("node {node}")),
                _ => WireError::unreachable(node, format!("node {node} interrupted the chunk")),
            }));
        }
    }
    if out.len() as u64 != len {
        return Err(Attempt::Failed(WireError::internal(format!("node {node} sent {} bytes, expected {len}", out.len()))));
    }
    Ok(out)
}
