//! Verified read windows over a chunk: a reader that moves forward through a chunk (a
//! repair helper reading slice after slice) reads and checks each block once and serves
//! many small ranges from memory.

use crate::store::{ChunkReader, StoreError};

/// A verified window of one chunk for a reader that moves forward through it (a repair
/// helper reading slice after slice): ranges inside the window are served without a read
/// call or a checksum pass; a range outside it refills the window from its first block.
pub struct Window {
    start: u64,
    buf: Vec<u8>,
    max: usize,
    /// Bytes this window has read from the chunk's file, over all its refills.
    file_bytes: u64,
}

impl Window {
    /// A window of about `max` bytes (whole blocks, at least one).
    pub fn new(max: usize) -> Self {
        Window { start: 0, buf: Vec::new(), max, file_bytes: 0 }
    }

    /// The verified bytes [off, off+len) of `r`'s chunk.
    pub fn get(&mut self, r: &ChunkReader, off: u64, len: usize) -> Result<&[u8], StoreError> {
        self.get_until(r, off, len, u64::MAX)
    }

    /// Bytes read from the chunk's file so far.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// [`Window::get`], reading ahead no further than the block holding `until - 1`: a Clay
    /// helper's run of sub-chunks ends there, and the bytes after it are not its to read.
    pub fn get_until(&mut self, r: &ChunkReader, off: u64, len: usize, until: u64) -> Result<&[u8], StoreError> {
        let size = r.len();
        if off.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(StoreError::OutOfRange { chunk: r.id.clone(), off, len: len as u64, size });
        }
        if len == 0 {
            return Ok(&[]);
        }
        if !self.holds(off, len) {
            let need = (off % r.block() as u64) as usize + len;
            let until = until.max(off + len as u64);
            match r.read_window(off, self.max.max(need), until, &mut self.buf) {
                Ok(start) => {
                    self.start = start;
                    self.file_bytes += self.buf.len() as u64;
                }
                Err(e) => {
                    // The buffer holds what was read, unverified: nothing of it may be
                    // served, to this reader or to another repair sharing the window.
                    self.buf.clear();
                    return Err(e);
                }
            }
        }
        Ok(self.peek(off, len))
    }

    /// Whether [off, off+len) is in the window.
    pub fn holds(&self, off: u64, len: usize) -> bool {
        len == 0 || (off >= self.start && off + len as u64 <= self.start + self.buf.len() as u64)
    }

    /// Bytes [off, off+len) that a successful `get` of that range just made present.
    pub fn peek(&self, off: u64, len: usize) -> &[u8] {
        if len == 0 {
            return &[];
        }
        let s = (off - self.start) as usize;
        &self.buf[s..s + len]
    }
}

/// Several verified windows of one chunk, least recently used replaced first: for readers
/// at several places at once (a Clay helper reading several sub-chunk runs, the lanes of
/// an ECPipe-cyclic repair on one node reading interleaved slices of the same chunk).
pub struct ReadCache {
    reader: ChunkReader,
    windows: Vec<(Window, u64)>,
    tick: u64,
}

impl ReadCache {
    /// `count` windows (at least one) of about `size` bytes each.
    pub fn new(reader: ChunkReader, count: usize, size: usize) -> Self {
        ReadCache { reader, windows: (0..count.max(1)).map(|_| (Window::new(size), 0)).collect(), tick: 0 }
    }

    pub fn reader(&self) -> &ChunkReader {
        &self.reader
    }

    /// Makes [off, off+len) present and verified. Fewer ranges than windows stay present
    /// together until the next `fetch` of a range outside all of them.
    pub fn fetch(&mut self, off: u64, len: usize) -> Result<(), StoreError> {
        self.fetch_until(off, len, u64::MAX)
    }

    /// Bytes read from the chunk's file so far, by every window.
    pub fn file_bytes(&self) -> u64 {
        self.windows.iter().map(|(w, _)| w.file_bytes()).sum()
    }

    /// [`ReadCache::fetch`], reading ahead no further than `until` (see [`Window::get_until`]).
    pub fn fetch_until(&mut self, off: u64, len: usize, until: u64) -> Result<(), StoreError> {
        self.tick += 1;
        if let Some(w) = self.windows.iter_mut().find(|(w, _)| w.holds(off, len)) {
            w.1 = self.tick;
            return Ok(());
        }
        let lru = self.windows.iter_mut().min_by_key(|(_, t)| *t).expect("at least one window");
        lru.1 = self.tick;
        lru.0.get_until(&self.reader, off, len, until).map(|_| ())
    }

    /// The bytes of a range fetched before (and not evicted since).
    pub fn peek(&self, off: u64, len: usize) -> &[u8] {
        match self.windows.iter().find(|(w, _)| w.holds(off, len)) {
            Some((w, _)) => w.peek(off, len),
            None => panic!("range {off}+{len} was not fetched"),
        }
    }
}
