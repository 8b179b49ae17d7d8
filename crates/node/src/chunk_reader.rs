//! Verified reads of one chunk: whole checksum blocks (64 KiB, or a Clay chunk's sub-chunk)
//! read at once and checked against the footer's CRC-32Cs before a byte is handed out (the
//! store's readers, `ChunkStore::reader`).

use crate::disk_emulation::DiskEmulation;
use crate::footer_cache::FileStamp;
use crate::store::{Footer, StoreError};
use kintsugi_proto::ChunkId;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Verified reads of one chunk.
pub struct ChunkReader {
    pub(crate) id: ChunkId,
    pub(crate) file: File,
    /// Where the chunk starts in the file (its slot, in a bucket).
    pub(crate) base: u64,
    pub(crate) footer: Arc<Footer>,
    pub(crate) disk: Option<(Arc<DiskEmulation>, u64)>,
    /// Which version of the chunk's file this reads.
    pub(crate) stamp: FileStamp,
    /// The store's I/O counters.
    pub(crate) io: Arc<crate::io_stats::IoStats>,
}

impl ChunkReader {
    pub fn len(&self) -> u64 {
        self.footer.len
    }
    pub fn is_empty(&self) -> bool {
        self.footer.len == 0
    }
    pub fn crc32c(&self) -> u32 {
        self.footer.crc32c
    }
    /// The checksum block: the least a verified read reads.
    pub fn block(&self) -> usize {
        self.footer.block
    }

    /// Reads whole blocks from the one holding `off`, `max` bytes rounded up to blocks,
    /// but not past the block holding `until - 1` (what the reader will not need), into
    /// `buf` (resized to them, contents replaced), verifying each. Returns the offset of
    /// the first byte read. Sequential readers keep such a window and serve many small
    /// ranges from it: one read call and one checksum pass per byte.
    pub fn read_window(&self, off: u64, max: usize, until: u64, buf: &mut Vec<u8>) -> Result<u64, StoreError> {
        let size = self.footer.len;
        if off >= size {
            return Err(StoreError::OutOfRange { chunk: self.id.clone(), off, len: 1, size });
        }
        let block = self.footer.block as u64;
        let start = off / block * block;
        let want = (max as u64).div_ceil(block).max(1) * block;
        let limit = until.max(off + 1).div_ceil(block).saturating_mul(block);
        let end = (start + want).min(limit).min(size);
        // Reused buffers keep their length: the read overwrites every byte, so nothing is
        // zeroed except when the window grows.
        buf.resize((end - start) as usize, 0);
        let t = self.io.start();
        self.emulate(self.base + start, end - start);
        self.file
            .read_exact_at(buf, self.base + start)
            .map_err(|e| StoreError::Corrupt { chunk: self.id.clone(), detail: format!("short read: {e}") })?;
        self.verify(start, buf)?;
        self.io.read_done(t);
        Ok(start)
    }

    /// Waits for the emulated disk, if any, to serve `len` bytes at `off`.
    fn emulate(&self, off: u64, len: u64) {
        if let Some((d, key)) = &self.disk {
            d.io(*key, off, len);
        }
    }

    /// Checks the blocks of `buf`, which starts at block-aligned `start`.
    fn verify(&self, start: u64, buf: &[u8]) -> Result<(), StoreError> {
        let b0 = (start / self.footer.block as u64) as usize;
        for (i, block) in buf.chunks(self.footer.block).enumerate() {
            let b = b0 + i;
            let got = kintsugi_proto::crc::crc32c(block);
            if got != self.footer.blocks[b] {
                self.io.crc_failed();
                return Err(StoreError::Corrupt {
                    chunk: self.id.clone(),
                    detail: format!("block {b} has crc32c {got:08x}, expected {:08x}", self.footer.blocks[b]),
                });
            }
        }
        Ok(())
    }

    /// Reads [off, off+len), verifying every block it touches.
    pub fn read(&self, off: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        let size = self.footer.len;
        if off.checked_add(len).is_none_or(|end| end > size) {
            return Err(StoreError::OutOfRange { chunk: self.id.clone(), off, len, size });
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let block = self.footer.block as u64;
        let b0 = off / block;
        let b1 = (off + len - 1) / block;
        let start = b0 * block;
        let end = ((b1 + 1) * block).min(size);
        let mut buf = vec![0u8; (end - start) as usize];
        let t = self.io.start();
        self.emulate(self.base + start, end - start);
        self.file
            .read_exact_at(&mut buf, self.base + start)
            .map_err(|e| StoreError::Corrupt { chunk: self.id.clone(), detail: format!("short read: {e}") })?;
        self.verify(start, &buf)?;
        self.io.read_done(t);
        let s = (off - start) as usize;
        Ok(buf[s..s + len as usize].to_vec())
    }
}
