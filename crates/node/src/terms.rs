//! A vertex's two sources of bytes besides summed inputs: raw sub-chunk reads sent by a
//! Clay helper (multiplied by the receiver), and the helper chunk on this node (read through
//! verified windows and multiplied straight out of them).

use crate::exec::Counters;
use crate::store::{ChunkReader, ChunkStore, ReadCache};
use crate::wire::Job;
use kintsugi_codes::TermMatrix;
use kintsugi_gf::mul_add;
use kintsugi_plan::{NodeId, RepairGraph, VertexId};
use kintsugi_proto::ChunkId;
use kintsugi_proto::WireError;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};

/// An input that sends raw reads (a Clay helper): its coefficients, applied here.
pub struct RawInput {
    matrix: TermMatrix,
    reads: usize,
}

impl RawInput {
    pub(crate) fn of(g: &RepairGraph, v: VertexId) -> Option<Self> {
        let t = g.vertex(v).local.filter(|_| g.sends_raw(v))?;
        let term = &g.equation.terms[t];
        Some(RawInput { matrix: term.matrix(g.equation.sub_chunks), reads: term.read_count() })
    }
}

/// Adds one input's unit into `acc` (alpha windows per unit window): summed as it is, or
/// multiplied by the sender's coefficients when it carries raw reads.
pub(crate) fn add_input(
    raw: Option<&RawInput>,
    windows: &[Range<usize>],
    alpha: usize,
    data: &[u8],
    acc: &mut [u8],
) -> Result<(), WireError> {
    let Some(raw) = raw else {
        mul_add(1, data, acc);
        return Ok(());
    };
    let (mut pos_in, mut pos_out) = (0, 0);
    for w in windows {
        let n = w.len();
        if n > 0 {
            let srcs: Vec<&[u8]> = data[pos_in..pos_in + raw.reads * n].chunks(n).collect();
            let mut dsts: Vec<&mut [u8]> = acc[pos_out..pos_out + alpha * n].chunks_mut(n).collect();
            raw.matrix.apply_add(&srcs, &mut dsts);
        }
        pos_in += raw.reads * n;
        pos_out += alpha * n;
    }
    Ok(())
}

/// Receives one unit from every input and sums them into `start` (if given) or a unit of
/// `size` bytes. The first summed input's buffer becomes the sum: no zeroing, no pass over
/// it. Raw inputs (Clay helpers) are multiplied by their coefficients on the way in.
pub(crate) async fn sum_inputs(
    inputs: &mut [(crate::exec::InputStream, Option<RawInput>)],
    windows: &[Range<usize>],
    alpha: usize,
    size: usize,
    start: Option<Vec<u8>>,
) -> Result<Vec<u8>, WireError> {
    let mut acc = start;
    for (rx, raw) in inputs.iter_mut() {
        let data = rx.next_unit().await?;
        match (&mut acc, raw) {
            (None, None) => acc = Some(data),
            (acc, raw) => {
                let acc = acc.get_or_insert_with(|| crate::pool::zeroed(size));
                add_input(raw.as_ref(), windows, alpha, &data, acc)?;
                crate::pool::give(data);
            }
        }
    }
    Ok(acc.unwrap_or_else(|| crate::pool::zeroed(size)))
}

/// Read windows of the helper chunks this node's repairs read, by chunk, while some repair
/// still reads it. The m parity graphs that seal a Geo stripe read every data chunk at once
/// (and repairs of several chunks of one stripe read the same helpers): one read and one
/// checksum pass serve them all, where each read the chunk itself before.
#[derive(Default)]
pub struct SharedReads(Mutex<HashMap<ChunkId, Weak<Mutex<ReadCache>>>>);

impl SharedReads {
    /// The live cache of `reader`'s chunk, if it reads the same version of the file.
    fn get(&self, reader: &ChunkReader) -> Option<Arc<Mutex<ReadCache>>> {
        let c = self.0.lock().expect("shared reads lock").get(&reader.id)?.upgrade()?;
        let same = c.lock().expect("cache lock").reader().stamp == reader.stamp;
        same.then_some(c)
    }

    fn insert(&self, id: ChunkId, cache: &Arc<Mutex<ReadCache>>) {
        let mut m = self.0.lock().expect("shared reads lock");
        // Entries of chunks nobody reads any more go, so the map stays as small as the
        // chunks being read.
        if m.len() >= 64 {
            m.retain(|_, w| w.strong_count() > 0);
        }
        m.insert(id, Arc::downgrade(cache));
    }

    /// Chunks some repair reads now.
    pub fn live(&self) -> usize {
        self.0.lock().expect("shared reads lock").values().filter(|w| w.strong_count() > 0).count()
    }
}

/// Groups of slices apart that the lanes of one node read at once (ECPipe cyclic: lane r
/// reads slice g(k-1)+r of group g). Measured 5-6 with [`crate::exec::SLOTTED_DEPTH`] units
/// ready ahead of their slots (the lane that starts its chain has no input to wait for) and
/// strict slots; about 8 once a send may start a period early (`slot_gate`): the 7.3 groups
/// four read-aheads held then re-read 1.3-2.1% of the chunk. 12 leaves room for a loaded host.
const LANE_SPREAD_GROUPS: usize = 12;

/// Windows enough to hold what this node's `lanes` read between one lane's read of a block
/// and the last lane's (a block holds several lanes' slices): with fewer, the block was
/// evicted first and read again (a fifth of a 64 MiB chunk at 32 KiB slices). At most eight
/// read-aheads of memory (4 MiB on an SSD); one lane (no sharing) needs none of this.
fn lane_windows(lanes: usize, slice: usize, size: usize, block: usize, read_ahead: usize) -> usize {
    if lanes < 2 {
        return 0;
    }
    let window = size.max(slice).max(1).next_multiple_of(block.max(1));
    let spread = LANE_SPREAD_GROUPS.saturating_mul(lanes).saturating_mul(slice);
    (spread.div_ceil(window) + 1).min(8 * read_ahead / window + 1)
}

/// A helper chunk on this node and its term of the equation.
pub struct LocalTerm {
    term: kintsugi_codes::HelperTerm,
    matrix: TermMatrix,
    sub: usize,
    counters: Arc<Counters>,
    /// The repair serves a degraded read (its result goes to a client, not a store).
    degraded: bool,
    /// Verified read windows, shared by every vertex of this node reading the same term.
    cache: Arc<Mutex<ReadCache>>,
    /// The largest span read in one go (the store's read-ahead).
    span: usize,
    /// Where the bytes this repair combines start in the chunk (a ranged repair's offset).
    view: u64,
    /// The longest gap between ranges a read covers rather than skips: on an HDD, what
    /// the disk transfers in one positioning time (cheaper to read through than to seek
    /// over); elsewhere 0 (only touching ranges are merged).
    read_through: u64,
}

impl LocalTerm {
    /// Opens term `t` for one vertex; `shared` holds the caches of the run's terms on this
    /// node, so lanes reading the same chunk read and verify each block once, and `across`
    /// those of every repair here, so concurrent repairs reading one chunk do too.
    pub fn open(
        store: &ChunkStore,
        a: &Job,
        t: usize,
        counters: Arc<Counters>,
        shared: &Mutex<HashMap<usize, Arc<Mutex<ReadCache>>>>,
        across: &SharedReads,
        node: NodeId,
    ) -> Result<Self, WireError> {
        let term = a.graph.equation.terms[t].clone();
        let alpha = a.graph.equation.sub_chunks;
        let reads = term.read_count().max(1);
        let cache = match shared.lock().expect("cache lock").entry(t) {
            std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let reader = store.reader(&a.term_chunks[t]).map_err(WireError::from)?;
                // A ranged repair reads `chunk_len` bytes from `term_offset` on.
                let fits = match a.term_offset {
                    None => reader.len() == a.chunk_len,
                    Some(off) => off.checked_add(a.chunk_len).is_some_and(|end| end <= reader.len()),
                };
                if !fits {
                    return Err(WireError::internal(format!(
                        "chunk {} is {} bytes, the plan reads {} from byte {}",
                        a.term_chunks[t],
                        reader.len(),
                        a.chunk_len,
                        a.term_offset.unwrap_or(0)
                    )));
                }
                if let Some(c) = across.get(&reader) {
                    e.insert(c.clone());
                    return Self::with_cache(store, term, alpha, a, counters, c);
                }
                // A window per read stream per lane here, one spare; the store's read-ahead
                // in all, and more windows where lanes read apart (`lane_windows`).
                let lanes = a.graph.vertices.iter().filter(|v| v.node == node && v.local == Some(t)).count().max(1);
                let size = store.read_ahead() / (reads * lanes);
                let count =
                    ((reads * lanes).min(64) + 1).max(lane_windows(lanes, a.slice_len as usize, size, reader.block(), store.read_ahead()));
                let id = reader.id.clone();
                let c = Arc::new(Mutex::new(ReadCache::new(reader, count, size)));
                across.insert(id, &c);
                e.insert(c.clone());
                c
            }
        };
        Self::with_cache(store, term, alpha, a, counters, cache)
    }

    fn with_cache(
        store: &ChunkStore,
        term: kintsugi_codes::HelperTerm,
        alpha: usize,
        a: &Job,
        counters: Arc<Counters>,
        cache: Arc<Mutex<ReadCache>>,
    ) -> Result<Self, WireError> {
        Ok(LocalTerm {
            matrix: term.matrix(alpha),
            term,
            sub: a.chunk_len as usize / alpha,
            view: a.term_offset.unwrap_or(0),
            counters,
            degraded: a.store.is_none(),
            cache,
            span: store.read_ahead(),
            read_through: store.disk().map_or(0, |d| {
                let m = d.model();
                (m.seek * m.bandwidth) as u64
            }),
        })
    }

    /// Reads a window's sub-chunk ranges in as few I/Os as the read-ahead allows: the
    /// ranges, in offset order, are cut into groups spanning at most the read-ahead, and a
    /// group of two or more is read in one go. A Clay helper's ranges for one lost node are
    /// runs; read one by one, other repairs' reads get between them (a positioning each on
    /// an HDD). On an HDD a group may read through a gap between runs when the disk moves
    /// the gap's bytes faster than it positions (a longer gap is sought over: reading a
    /// 16 MiB Clay chunk's 64 runs through their gaps read the whole chunk, 4x the runs,
    /// once per slice window); elsewhere only touching ranges are merged, so nothing is
    /// read that is not needed.
    fn prefetch_runs(&self, cache: &mut ReadCache, reads: &[(u64, u64)], n: usize) -> Result<(), WireError> {
        if reads.len() < 2 || n == 0 {
            return Ok(());
        }
        let mut sorted = reads.to_vec();
        sorted.sort_unstable();
        let (mut lo, mut hi, mut until, mut count) = (sorted[0].0, sorted[0].0 + n as u64, sorted[0].1, 1);
        let flush = |lo: u64, hi: u64, until: u64, count: usize, cache: &mut ReadCache| -> Result<(), WireError> {
            if count > 1 {
                cache.fetch_until(lo, (hi - lo) as usize, until).map_err(WireError::from)?;
            }
            Ok(())
        };
        for &(off, run_end) in &sorted[1..] {
            let end = off + n as u64;
            let joins = off <= hi.saturating_add(self.read_through) && end - lo <= self.span as u64;
            if joins {
                hi = hi.max(end);
                until = until.max(run_end);
                count += 1;
            } else {
                flush(lo, hi, until, count, cache)?;
                (lo, hi, until, count) = (off, end, run_end, 1);
            }
        }
        flush(lo, hi, until, count, cache)
    }

    /// This term's sub-chunk reads for window `w`: each read's offset, and where its run of
    /// sub-chunks ends (read-ahead stops there: the next sub-chunks are not this term's).
    fn offsets(&self, w: &Range<usize>) -> Vec<(u64, u64)> {
        let at = |r: usize| (r * self.sub) as u64 + self.view;
        self.term.reads.iter().flat_map(|run| run.clone().map(move |r| (at(r) + w.start as u64, at(run.end)))).collect()
    }

    /// Fetches `reads` (each `n` bytes) into the cache, and counts the bytes that took
    /// from the chunk's file.
    fn fetch(&self, cache: &mut ReadCache, reads: &[(u64, u64)], n: usize) -> Result<(), WireError> {
        let before = cache.file_bytes();
        self.prefetch_runs(cache, reads, n)?;
        for &(off, until) in reads {
            cache.fetch_until(off, n, until).map_err(WireError::from)?;
        }
        self.counters.helper_file_read(cache.file_bytes() - before);
        Ok(())
    }

    /// The unit's windows of the sub-chunks this term reads, unmultiplied, window by
    /// window (what a raw sender sends).
    pub(crate) fn raw(&self, windows: &[Range<usize>]) -> Result<Vec<u8>, WireError> {
        let mut out = crate::pool::take(self.term.read_count() * windows.iter().map(|w| w.len()).sum::<usize>());
        let mut cache = self.cache.lock().expect("cache lock");
        for w in windows {
            let reads = self.offsets(w);
            let before = cache.file_bytes();
            self.prefetch_runs(&mut cache, &reads, w.len())?;
            for (off, until) in reads {
                cache.fetch_until(off, w.len(), until).map_err(WireError::from)?;
                out.extend_from_slice(cache.peek(off, w.len()));
            }
            self.counters.helper_file_read(cache.file_bytes() - before);
        }
        self.counters.helper_read(out.len() as u64, self.degraded);
        Ok(out)
    }

    /// Adds this term's contribution for the unit's windows into `acc` (payload layout of
    /// `RepairGraph::lane_units`), multiplying straight out of the verified read windows.
    pub(crate) fn add(&self, windows: &[Range<usize>], alpha: usize, acc: &mut [u8]) -> Result<(), WireError> {
        self.combine::<true>(windows, alpha, acc)
    }

    /// This term's contribution alone, written over `out`'s bytes (a vertex with no
    /// inputs: no zeroed buffer, no pass to zero it).
    pub(crate) fn put(&self, windows: &[Range<usize>], alpha: usize, out: &mut [u8]) -> Result<(), WireError> {
        self.combine::<false>(windows, alpha, out)
    }

    /// [`LocalTerm::add`] when `ADD`, else [`LocalTerm::put`].
    fn combine<const ADD: bool>(&self, windows: &[Range<usize>], alpha: usize, acc: &mut [u8]) -> Result<(), WireError> {
        let mut pos = 0;
        let mut cache = self.cache.lock().expect("cache lock");
        for w in windows {
            let n = w.len();
            if n > 0 {
                let offsets = self.offsets(w);
                // Fetch every range first (the cache has a window more than there are
                // reads), then borrow them all at once for the kernel.
                self.fetch(&mut cache, &offsets, n)?;
                let srcs: Vec<&[u8]> = offsets.iter().map(|&(off, _)| cache.peek(off, n)).collect();
                let mut dsts: Vec<&mut [u8]> = acc[pos..pos + alpha * n].chunks_mut(n).take(alpha).collect();
                if ADD {
                    self.matrix.apply_add(&srcs, &mut dsts);
                } else {
                    self.matrix.apply(&srcs, &mut dsts);
                }
                self.counters.helper_read((n * offsets.len()) as u64, self.degraded);
            }
            pos += alpha * n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::lane_windows;

    const KIB: usize = 1024;

    /// Cyclic RS(10,4) at 32 KiB slices gets windows for ten groups and more of its nine
    /// lanes' slices, within eight read-aheads; one lane, an HDD's large windows and large
    /// slices get no more than the one window per lane they had.
    #[test]
    fn lanes_get_windows_for_their_spread_within_eight_read_aheads() {
        let (block, ssd, hdd) = (64 * KIB, 512 * KIB, 4096 * KIB);
        assert_eq!(lane_windows(1, 32 * KIB, ssd, block, ssd), 0);
        let n = lane_windows(9, 32 * KIB, ssd / 9, block, ssd);
        assert!(n * block <= 8 * ssd + block, "{n} windows of 64 KiB");
        assert!(n * block >= 10 * 9 * 32 * KIB, "{n} windows cover ten groups");
        assert!(lane_windows(9, 32 * KIB, hdd / 9, block, hdd) <= 10);
        assert!(lane_windows(9, 1024 * KIB, ssd / 9, block, ssd) <= 10);
        assert!(lane_windows(usize::MAX / 2, usize::MAX / 2, 1, block, ssd) <= 10, "no overflow");
    }
}
