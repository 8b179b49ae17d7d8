//! The client's side of extent layouts (Geo, Contiguous): puts that write each chunk to its
//! home and its staging copies, and reads that stream chunk by chunk, fetching (or
//! rebuilding) the next chunk while the current one is handed to the sink, so a degraded
//! read overlaps its repair with sending (Geometric Partitioning, section 4.3). Range reads
//! start at the first chunk that overlaps the range, for every layout.

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::object_io::{encode_stripe, get_chunk, get_chunk_range, put_chunk, ObjectSink, Progress, ReadReport, MAX_MOVES};
use kintsugi_codes::CodeSpec;
use kintsugi_plan::{NodeId, Shape};
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, ChunkLoc, CoordRequest, CoordResponse, Extent, ObjectLayout, StripeLayout};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinSet;

/// Where an object's bytes are, in order: its extents (Geo, Contiguous), or for Stripe
/// layouts each stripe's data chunks in turn.
pub fn extents_of(layout: &ObjectLayout) -> Vec<Extent> {
    if !layout.extents.is_empty() {
        return layout.extents.clone();
    }
    let mut out = Vec::new();
    for (si, s) in layout.stripes.iter().enumerate() {
        let mut left = s.data_len;
        for index in 0..s.chunks.len() {
            if left == 0 {
                break;
            }
            let len = left.min(s.chunk_len);
            out.push(Extent { stripe: si, index, offset: 0, len, crc32c: None });
            left -= len;
        }
    }
    out
}

/// A Geo put's writes in flight: each answers the extent it moved and the upload's layout
/// after the move, if it moved.
type ExtentWrites = JoinSet<Result<Option<(usize, ObjectLayout)>, WireError>>;

/// Waits for `set` and records in `layout` where moved extents are now.
async fn moved_to(layout: &mut ObjectLayout, mut set: ExtentWrites) -> Result<(), WireError> {
    let mut first = None;
    while let Some(r) = set.join_next().await {
        match r.map_err(WireError::from)? {
            Ok(Some((ei, now))) => {
                let e = now.extents[ei];
                layout.stripes[e.stripe] = now.stripes[e.stripe].clone();
                layout.extents[ei] = e;
            }
            Ok(None) => {}
            Err(e) => first = first.or(Some(e)),
        }
    }
    first.map_or(Ok(()), Err)
}

/// Where extent `e` of `stripe` is written: its home and its staging copies (a piece of
/// a small-size bucket slot is a chunk of its own on each until sealed).
fn extent_locations(stripe: &StripeLayout, e: &Extent) -> Vec<ChunkLoc> {
    let mut locs = vec![stripe.chunks[e.index].clone()];
    locs.extend(stripe.replicas.get(e.index).into_iter().flatten().cloned());
    if stripe.small {
        for (copy, loc) in locs.iter_mut().enumerate() {
            loc.chunk = ChunkId::piece(stripe.id, e.index, e.offset, copy);
            loc.bucket = None;
        }
    }
    locs
}

impl Client {
    /// Writes an extent layout's object: the remainder stripe encoded whole, then each chunk
    /// to its home and staging copies at once, the next chunk read meanwhile (memory: two
    /// chunks, at most 2 x 256 MiB). A chunk that a node cannot take moves (the coordinator
    /// picks where) and `layout` is updated. Returns the checksums to commit, one list per
    /// stripe.
    pub(crate) async fn put_extents(
        &self,
        layout: &mut ObjectLayout,
        reader: &mut (dyn AsyncRead + Unpin + Send),
        progress: Progress<'_>,
    ) -> Result<Vec<Vec<u32>>, WireError> {
        let mut crcs: Vec<Vec<u32>> = vec![Vec::new(); layout.stripes.len()];
        let mut writing: Option<ExtentWrites> = None;
        let mut done = 0u64;
        let mut seen = vec![false; layout.stripes.len()];
        for ei in 0..layout.extents.len() {
            let e = layout.extents[ei];
            if std::mem::replace(&mut seen[e.stripe], true) {
                continue;
            }
            let s = &layout.stripes[e.stripe];
            let mut set = JoinSet::new();
            let t = self.io_timeout;
            // A small-size bucket's pieces are parts of a chunk: no sub-chunks of their own.
            let code: CodeSpec = s.code.unwrap_or(layout.code);
            let sub = if s.small { 1 } else { code.build().map_or(1, |c| c.sub_chunks()) };
            if !s.replicas.is_empty() || s.open {
                // One chunk of a shared stripe: home and staging copies get the same bytes.
                let mut chunk = vec![0u8; e.len as usize];
                reader.read_exact(&mut chunk).await.map_err(|x| WireError::new(ErrorKind::Input, format!("reading the object: {x}")))?;
                crcs[e.stripe] = vec![kintsugi_proto::crc::crc32c(&chunk)];
                let (me, name, version, s) = (self.clone(), layout.name.clone(), layout.version, s.clone());
                let chunk = Arc::new(chunk);
                set.spawn(async move { me.write_geo_extent(&name, version, ei, (s, e), chunk, sub).await });
                done += e.len;
            } else {
                // The remainder: a small stripe of its own, encoded and written whole.
                let c = code.build()?;
                let mut data = vec![0u8; s.data_len as usize];
                reader.read_exact(&mut data).await.map_err(|x| WireError::new(ErrorKind::Input, format!("reading the object: {x}")))?;
                let shards = encode_stripe(c.as_ref(), &data, s.chunk_len as usize)?;
                crcs[e.stripe] = shards.iter().map(|x| kintsugi_proto::crc::crc32c(x)).collect();
                for (loc, shard) in s.chunks.iter().cloned().zip(shards) {
                    set.spawn(async move { put_chunk(&loc, &shard, sub, t).await.map(|()| None) });
                }
                done += s.data_len;
            }
            if let Some(prev) = writing.replace(set) {
                moved_to(layout, prev).await?;
            }
            progress(done);
        }
        if let Some(prev) = writing {
            moved_to(layout, prev).await?;
        }
        progress(done);
        Ok(crcs)
    }

    /// Writes chunk `data` of extent `ei` of Geo upload `version` (in `stripe`) to its home
    /// and staging copies. Where a write fails, the coordinator moves the extent off that
    /// node and the write goes to the new place; returns the upload's layout after the last
    /// move, if any. Fails once no member can take it.
    async fn write_geo_extent(
        &self,
        name: &str,
        version: u64,
        ei: usize,
        (mut stripe, mut e): (StripeLayout, Extent),
        data: Arc<Vec<u8>>,
        sub: usize,
    ) -> Result<Option<(usize, ObjectLayout)>, WireError> {
        let mut written: BTreeSet<(ChunkId, NodeId)> = BTreeSet::new();
        let mut failed: BTreeSet<NodeId> = BTreeSet::new();
        let mut moved = None;
        let mut errors = Vec::new();
        for _ in 0..MAX_MOVES {
            let mut set = JoinSet::new();
            for loc in extent_locations(&stripe, &e).into_iter().filter(|l| !written.contains(&(l.chunk.clone(), l.node))) {
                let (c, t) = (data.clone(), self.io_timeout);
                set.spawn(async move { (put_chunk(&loc, &c, sub, t).await, loc) });
            }
            let mut failed_now = false;
            while let Some(r) = set.join_next().await {
                match r.map_err(WireError::from)? {
                    (Ok(()), loc) => {
                        written.insert((loc.chunk, loc.node));
                    }
                    (Err(err), loc) => {
                        tracing::warn!("put of '{name}': chunk {} to node {}: {err}; writing it elsewhere", loc.chunk, loc.node);
                        failed.insert(loc.node);
                        errors.push(err);
                        failed_now = true;
                    }
                }
            }
            if !failed_now {
                return Ok(moved.map(|l| (ei, l)));
            }
            let req = CoordRequest::MoveGeoChunk { name: name.into(), version, extent: ei, avoid: failed.iter().copied().collect() };
            let l = match self.call(&req, self.io_timeout).await {
                Ok(CoordResponse::Layout(l)) => l,
                Ok(other) => return Err(WireError::internal(format!("unexpected answer {other:?}"))),
                Err(err) => return Err(WireError::merge(errors.into_iter().chain([err]).collect()).expect("one error at least")),
            };
            e = l.extents.get(ei).copied().ok_or_else(|| WireError::internal(format!("the moved upload has no extent {ei}")))?;
            stripe = l
                .stripes
                .get(e.stripe)
                .cloned()
                .ok_or_else(|| WireError::internal(format!("the moved upload has no stripe {}", e.stripe)))?;
            moved = Some(l);
        }
        let last = errors.pop().unwrap_or_else(|| WireError::unavailable("no node took it"));
        Err(last.as_kind(ErrorKind::Unavailable).context(format_args!("a chunk of '{name}' could not be written after {MAX_MOVES} moves")))
    }

    /// Reads `len` bytes of the object from `offset` (the whole object: 0, u64::MAX) into
    /// `sink`, chunk by chunk, the next chunk fetched or rebuilt while the current one is
    /// written. Chunks are checked against their committed checksums.
    #[allow(clippy::too_many_arguments)] // a read's parameters
    pub(crate) async fn read_extents(
        &self,
        layout: &ObjectLayout,
        offset: u64,
        len: u64,
        sink: &mut dyn ObjectSink,
        method: Shape,
        slice: u64,
        progress: Progress<'_>,
    ) -> Result<ReadReport, WireError> {
        if !layout.committed {
            return Err(WireError::internal(format!("object '{}' is still being written", layout.name)));
        }
        let end = offset.saturating_add(len).min(layout.size);
        if let Some(inline) = &layout.inline {
            return self.read_inline(layout, inline, offset, end, sink, progress).await;
        }
        // The extents overlapping [offset, end), each with the part of it that is wanted.
        let mut wanted = Vec::new();
        let mut at = 0u64;
        for e in extents_of(layout) {
            let (from, to) = (at.max(offset), (at + e.len).min(end));
            if from < to {
                wanted.push((e, from - at, to - from));
            }
            at += e.len;
        }
        let layout = Arc::new(layout.clone());
        let mut report = ReadReport::default();
        // Each wanted part: the whole chunk (checked against its checksum), or, for a range
        // read, only the bytes asked for.
        let ranged = offset > 0 || end < layout.size;
        let fetch = |&(e, skip, take): &(Extent, u64, u64)| {
            let (me, layout) = (self.clone(), layout.clone());
            tokio::spawn(async move { me.fetch_part(&layout, e, e.offset + skip, take, ranged, method, slice).await })
        };
        let mut next = None;
        let mut done = 0u64;
        for (i, &(e, _, take)) in wanted.iter().enumerate() {
            let current = match next.take() {
                Some(f) => f,
                None => fetch(&wanted[i]),
            };
            if self.pipelined_reads {
                next = wanted.get(i + 1).map(fetch);
            }
            let (part, degraded) = current.await.map_err(WireError::from)??;
            if let Some(secs) = degraded {
                report.degraded.push((e.stripe, e.index, secs));
            }
            debug_assert_eq!(part.len() as u64, take);
            let n = part.len();
            sink.write_owned(part)?;
            // Sent on (the next chunk is being fetched or rebuilt meanwhile).
            self.egress.send(n).await;
            done += take;
            progress(done);
        }
        Ok(report)
    }

    /// Bytes [from, from + take) of an extent's chunk. For a range read, less than the whole
    /// chunk comes straight from its node as a range (its blocks verified there); if that
    /// fails (lost, unreachable, a corrupt block), and for whole-object reads, the chunk is
    /// fetched or rebuilt whole and checked as [`Client::fetch_extent`] does, then cut.
    #[allow(clippy::too_many_arguments)] // a read's parameters
    async fn fetch_part(
        &self,
        layout: &ObjectLayout,
        e: Extent,
        from: u64,
        take: u64,
        ranged: bool,
        method: Shape,
        slice: u64,
    ) -> Result<(Vec<u8>, Option<f64>), WireError> {
        let s = &layout.stripes[e.stripe];
        if s.small {
            return self.fetch_piece(layout, e, from - e.offset, take, method, slice).await;
        }
        let loc = &s.chunks[e.index];
        if ranged && take < s.chunk_len && !loc.lost {
            match get_chunk_range(loc, from, take, self.stall_timeout, &self.shaper).await {
                Ok(part) => return Ok((part, None)),
                Err(x) => tracing::info!("range of chunk {}: {x}; reading the chunk whole", loc.chunk),
            }
        }
        let (chunk, degraded) = self.fetch_extent(layout, e, method, slice).await?;
        let from = from as usize;
        match chunk.get(from..from + take as usize) {
            Some(_) if from == 0 && take as usize == chunk.len() => Ok((chunk, degraded)),
            Some(part) => Ok((part.to_vec(), degraded)),
            None => Err(WireError::internal(format!("chunk {} has {} bytes, the read wants {from}+{take}", loc.chunk, chunk.len()))),
        }
    }

    /// Bytes [skip, skip + take) of a piece of a small-size bucket slot, the whole piece
    /// checked against its own checksum: while its stripe is open, the piece's chunk from
    /// its home or a staging copy; once sealed, its range of the slot's chunk, else the
    /// slot's chunk whole (rebuilt by a degraded read if need be). A stripe sealed since
    /// the layout was read (its pieces gone) is read again as sealed.
    #[allow(clippy::too_many_arguments)] // a read's parameters
    async fn fetch_piece(
        &self,
        layout: &ObjectLayout,
        e: Extent,
        skip: u64,
        take: u64,
        method: Shape,
        slice: u64,
    ) -> Result<(Vec<u8>, Option<f64>), WireError> {
        let want = e
            .crc32c
            .ok_or_else(|| WireError::internal(format!("the piece of '{}' in stripe {} has no checksum", layout.name, e.stripe)))?;
        let cut = |p: Vec<u8>| -> Vec<u8> {
            if skip == 0 && take == p.len() as u64 {
                p
            } else {
                p[skip as usize..(skip + take) as usize].to_vec()
            }
        };
        let t = Instant::now();
        let mut fresh = None;
        for attempt in 0..2 {
            let layout = if attempt == 0 { layout } else { fresh.as_ref().expect("set before the second attempt") };
            let s = &layout.stripes[e.stripe];
            if s.open {
                let holders = std::iter::once(&s.chunks[e.index]).chain(s.replicas.get(e.index).into_iter().flatten());
                for (copy, loc) in holders.enumerate().filter(|(_, l)| !l.lost) {
                    let mut loc = loc.clone();
                    loc.chunk = ChunkId::piece(s.id, e.index, e.offset, copy);
                    loc.bucket = None;
                    match get_chunk(&loc, e.len, self.stall_timeout, &self.shaper).await {
                        Ok(p) if kintsugi_proto::crc::crc32c(&p) == want => {
                            return Ok((cut(p), (copy > 0).then(|| t.elapsed().as_secs_f64())))
                        }
                        Ok(_) => tracing::info!("piece {} on node {} does not match its checksum", loc.chunk, loc.node),
                        Err(x) => tracing::debug!("piece {}: {x}", loc.chunk),
                    }
                }
                if attempt == 0 {
                    let now = self.layout(CoordRequest::Lookup { name: layout.name.clone() }).await?;
                    if now.version != layout.version {
                        return Err(WireError::new(ErrorKind::Replaced, format!("'{}' was replaced while it was read", layout.name)));
                    }
                    fresh = Some(now);
                    continue;
                }
                return Err(WireError::internal(format!("no copy of the piece of '{}' in stripe {} could be read", layout.name, s.id)));
            }
            let loc = &s.chunks[e.index];
            if !loc.lost {
                match get_chunk_range(loc, e.offset, e.len, self.stall_timeout, &self.shaper).await {
                    Ok(p) if kintsugi_proto::crc::crc32c(&p) == want => return Ok((cut(p), None)),
                    Ok(_) => tracing::info!("the piece at {} of chunk {} does not match its checksum", e.offset, loc.chunk),
                    Err(x) => tracing::info!("the piece at {} of chunk {}: {x}; a degraded read of it", e.offset, loc.chunk),
                }
            }
            // RS rebuilds a byte range from the same range of k others: only the piece.
            let avoid: Vec<NodeId> = if loc.lost { vec![] } else { vec![loc.node] };
            let range = Some((e.offset, e.len));
            match self.degraded_read_range(&layout.name, layout.version, e.stripe, e.index, range, method, slice, avoid).await {
                Ok(p) if kintsugi_proto::crc::crc32c(&p) == want => return Ok((cut(p), Some(t.elapsed().as_secs_f64()))),
                Ok(_) => tracing::info!("the rebuilt piece at {} of chunk {} does not match its checksum", e.offset, loc.chunk),
                Err(x) => tracing::info!("a degraded read of the piece at {} of chunk {}: {x}; of the chunk whole", e.offset, loc.chunk),
            }
            let (chunk, degraded) = self.fetch_extent(layout, e, method, slice).await?;
            let p = chunk
                .get(e.offset as usize..(e.offset + e.len) as usize)
                .ok_or_else(|| WireError::internal("the piece is past its slot's chunk"))?
                .to_vec();
            if kintsugi_proto::crc::crc32c(&p) != want {
                return Err(WireError::new(
                    ErrorKind::Corrupt,
                    format!("the piece of '{}' in chunk {} does not match its checksum", layout.name, loc.chunk),
                ));
            }
            return Ok((cut(p), degraded));
        }
        Err(WireError::internal(format!("the piece of '{}' in stripe {} could not be read", layout.name, e.stripe)))
    }

    /// One chunk of an extent, checked: from its node; else (lost, unreachable, corrupt)
    /// from a staging copy while its stripe is open, or by a degraded read once sealed.
    /// Returns the chunk and, when it was rebuilt, how long that took.
    async fn fetch_extent(&self, layout: &ObjectLayout, e: Extent, method: Shape, slice: u64) -> Result<(Vec<u8>, Option<f64>), WireError> {
        let s = &layout.stripes[e.stripe];
        let loc = &s.chunks[e.index];
        let check = |c: Vec<u8>, from: &ChunkLoc| -> Result<Vec<u8>, WireError> {
            if Some(kintsugi_proto::crc::crc32c(&c)) == loc.crc32c {
                Ok(c)
            } else {
                Err(WireError::new(ErrorKind::Corrupt, format!("chunk {} from node {} does not match its checksum", from.chunk, from.node)))
            }
        };
        let mut why = WireError::unavailable("marked lost");
        if !loc.lost {
            match get_chunk(loc, s.chunk_len, self.stall_timeout, &self.shaper).await.and_then(|c| check(c, loc)) {
                Ok(c) => return Ok((c, None)),
                Err(x) => {
                    // A corrupt chunk is reported, so that a repair rebuilds it (a dead
                    // node's are found by its missed heartbeats).
                    if x.kind() == ErrorKind::Corrupt || x.bad_chunks().any(|c| *c == loc.chunk) {
                        let report = kintsugi_proto::CoordRequest::ReportBad {
                            name: layout.name.clone(),
                            stripe: e.stripe,
                            index: e.index,
                            reason: x.message().to_string(),
                            version: layout.version,
                        };
                        if let Err(r) = self.call(&report, self.io_timeout).await {
                            tracing::warn!("chunk {}: {x}; reporting it failed: {r}", loc.chunk);
                        }
                    }
                    why = x
                }
            }
        }
        let t = Instant::now();
        for copy in s.replicas.get(e.index).into_iter().flatten().filter(|c| !c.lost) {
            match get_chunk(copy, s.chunk_len, self.stall_timeout, &self.shaper).await.and_then(|c| check(c, copy)) {
                Ok(c) => return Ok((c, Some(t.elapsed().as_secs_f64()))),
                Err(x) => tracing::info!("staging copy {}: {x}", copy.chunk),
            }
        }
        tracing::debug!("chunk {}: {why}; degraded read", loc.chunk);
        let avoid: Vec<NodeId> = if loc.lost { vec![] } else { vec![loc.node] };
        let c = self.degraded_read_avoiding(&layout.name, layout.version, e.stripe, e.index, method, slice, avoid).await?;
        Ok((check(c, loc)?, Some(t.elapsed().as_secs_f64())))
    }

    /// Bytes [offset, end) of an object kept in the metadata, checked against their checksum.
    async fn read_inline(
        &self,
        layout: &ObjectLayout,
        inline: &kintsugi_proto::Inline,
        offset: u64,
        end: u64,
        sink: &mut dyn ObjectSink,
        progress: Progress<'_>,
    ) -> Result<ReadReport, WireError> {
        if !inline.intact() || inline.data.len() as u64 != layout.size {
            return Err(WireError::new(
                ErrorKind::Corrupt,
                format!("the bytes of '{}' kept in the metadata do not match their checksum", layout.name),
            ));
        }
        let part = inline.data.get(offset as usize..end as usize).unwrap_or_default();
        sink.write_owned(part.to_vec())?;
        self.egress.send(part.len()).await;
        progress(part.len() as u64);
        Ok(ReadReport::default())
    }

    /// Reads `len` bytes from `offset` of exactly the version `layout` (from [`Client::stat`])
    /// describes into `sink`; fails if that version is replaced or deleted before its
    /// chunks are read, rather than mix versions.
    #[allow(clippy::too_many_arguments)] // a read's parameters
    pub async fn read_layout(
        &self,
        layout: &ObjectLayout,
        offset: u64,
        len: u64,
        sink: &mut dyn ObjectSink,
        method: Shape,
        slice: u64,
    ) -> Result<ReadReport, Error> {
        self.read_extents(layout, offset, len, sink, method, slice, &|_| {}).await
    }

    /// Reads `len` bytes of object `name` from `offset` into `sink` (any layout).
    #[allow(clippy::too_many_arguments)] // a read's parameters
    pub async fn get_range_into(
        &self,
        name: &str,
        offset: u64,
        len: u64,
        sink: &mut dyn ObjectSink,
        method: Shape,
        slice: u64,
        progress: Progress<'_>,
    ) -> Result<ReadReport, Error> {
        let (layout, from_index) = self.locate(name).await?;
        if offset > layout.size {
            return Err(Error::new(ErrorKind::BadRequest, format!("offset {offset} is past the end of '{name}' ({} bytes)", layout.size)));
        }
        match self.read_extents(&layout, offset, len, sink, method, slice, progress).await {
            Err(e) if from_index => {
                let now = self.relocate(name, e, sink).await?;
                Ok(self.read_extents(&now, offset, len, sink, method, slice, progress).await?)
            }
            r => Ok(r?),
        }
    }

    /// Seals every open Geo stripe now; returns how many were sealed.
    pub async fn seal(&self) -> Result<usize, WireError> {
        match self.call(&CoordRequest::Seal, self.io_timeout * 10).await? {
            kintsugi_proto::CoordResponse::Sealed { stripes } => Ok(stripes),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Compacts the Geo stripes whose live share is below the coordinator's
    /// `compact_below` now; answers what the pass did.
    pub async fn compact(&self) -> Result<kintsugi_proto::CompactionReport, WireError> {
        match self.call(&CoordRequest::Compact, self.io_timeout * 60).await? {
            kintsugi_proto::CoordResponse::Compacted(r) => Ok(r),
            other => Err(WireError::internal(format!("unexpected answer {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_proto::StripeLayout;

    /// A Stripe layout's bytes are its stripes' data chunks in order, the last one short.
    #[test]
    fn stripe_layouts_map_to_extents_in_order() {
        let stripe = |data_len, chunk_len| StripeLayout {
            id: 0,
            data_len,
            chunk_len,
            chunks: vec![],
            open: false,
            replicas: vec![],
            code: None,
            small: false,
        };
        let mut l = ObjectLayout {
            name: "x".into(),
            size: 25,
            code: "rs:2,1".parse().unwrap(),
            committed: true,
            version: 1,
            stripes: vec![stripe(20, 10), stripe(5, 3)],
            layout: Default::default(),
            extents: vec![],
            attrs: Default::default(),
            versioned: false,
            delete_marker: false,
            inline: None,
        };
        for s in &mut l.stripes {
            s.chunks = (0..3)
                .map(|i| ChunkLoc {
                    chunk: kintsugi_proto::ChunkId::new(0, i),
                    node: 0,
                    addr: String::new(),
                    alive: true,
                    crc32c: None,
                    lost: false,
                    bucket: None,
                })
                .collect();
        }
        let e = extents_of(&l);
        let got: Vec<(usize, usize, u64)> = e.iter().map(|e| (e.stripe, e.index, e.len)).collect();
        assert_eq!(got, vec![(0, 0, 10), (0, 1, 10), (1, 0, 3), (1, 1, 2)]);
        assert_eq!(e.iter().map(|e| e.len).sum::<u64>(), l.size);
    }
}
