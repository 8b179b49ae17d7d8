//! Writing a chunk: to a temporary file renamed into place once durable, or into its
//! bucket slot with its index entry committed once durable ([`crate::bucket`]); the
//! checksums (whole chunk and per block) are computed as the bytes go by.

use crate::bucket::{self, BucketIndex};
use crate::disk_emulation::{file_key, DiskEmulation};
use crate::footer_cache::{remember, FileStamp, FooterCache};
use crate::store::{file_len, io, ChunkStore, FileUsage, Footer, StoreError, BLOCK, MAGIC, MIN_BLOCK};
use kintsugi_proto::{BucketSlot, ChunkId};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// A writer's bucket slot.
struct InBucket {
    name: String,
    path: PathBuf,
    base: u64,
    class: u64,
    /// The writer created the bucket file: its directory entry is synced too.
    created: bool,
}

/// Appends a chunk in order, computing checksums as it goes.
pub struct ChunkWriter {
    id: ChunkId,
    path: PathBuf,
    /// The temporary file (the bucket file when writing into a bucket).
    tmp: PathBuf,
    bucket: Option<InBucket>,
    /// The store's bucket index (a chunk written to a file of its own leaves any bucket).
    index: Arc<BucketIndex>,
    file: Option<File>,
    len: u64,
    crc: u32,
    blocks: Vec<u32>,
    /// The checksum block ([`crate::store::block_for`]).
    block: usize,
    block_crc: u32,
    block_fill: usize,
    /// Appends a full block's CRC to the chunk's (built at the first full block).
    shift: Option<Arc<crate::crc_shift::Shift>>,
    disk: Option<(Arc<DiskEmulation>, u64)>,
    footers: FooterCache,
    /// The store's count of chunk files, adjusted as this writer replaces or removes one.
    files: Arc<std::sync::Mutex<FileUsage>>,
    /// The store's I/O counters (commit latency).
    io: Arc<crate::io_stats::IoStats>,
}

impl ChunkWriter {
    /// Checksums blocks of `block` bytes (held within 4-64 KiB) instead of 64 KiB; before
    /// the first byte only (later, nothing changes).
    pub fn with_block(mut self, block: usize) -> Self {
        if self.len == 0 {
            self.block = block.clamp(MIN_BLOCK, BLOCK);
        }
        self
    }

    pub fn write(&mut self, mut data: &[u8]) -> Result<(), StoreError> {
        if let Some(b) = &self.bucket {
            if self.len + data.len() as u64 > b.class {
                return Err(StoreError::BadBucket(format!("chunk {} is longer than its bucket's size class ({} bytes)", self.id, b.class)));
            }
        }
        self.file.as_mut().expect("open until finish").write_all(data).map_err(io(&self.tmp))?;
        self.len += data.len() as u64;
        // One CRC pass, per block: the whole chunk's CRC is combined from its blocks'.
        while !data.is_empty() {
            let take = (self.block - self.block_fill).min(data.len());
            self.block_crc = kintsugi_proto::crc::crc32c_append(self.block_crc, &data[..take]);
            self.block_fill += take;
            data = &data[take..];
            if self.block_fill == self.block {
                self.close_block();
            }
        }
        Ok(())
    }

    fn close_block(&mut self) {
        self.crc = if self.blocks.is_empty() {
            self.block_crc
        } else if self.block_fill == self.block {
            let shift = self.shift.get_or_insert_with(|| crate::crc_shift::shift_for(self.block as u64));
            shift.append(self.crc, self.block_crc)
        } else {
            // The last block, short: once a chunk.
            crate::crc_shift::append_any(self.crc, self.block_crc, self.block_fill as u64)
        };
        self.blocks.push(self.block_crc);
        self.block_crc = 0;
        self.block_fill = 0;
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before any byte was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks the CRC against `expected` (if given), then makes the chunk durable and
    /// visible. Returns its CRC.
    pub fn finish(mut self, expected: Option<u32>) -> Result<u32, StoreError> {
        if self.block_fill > 0 {
            self.close_block();
        }
        if let Some(want) = expected {
            if want != self.crc {
                return Err(StoreError::Mismatch { chunk: self.id.clone(), got: self.crc, want });
            }
        }
        let footer = Footer { len: self.len, block: self.block, crc32c: self.crc, blocks: std::mem::take(&mut self.blocks) };
        let (io, t) = (self.io.clone(), self.io.start());
        let done = if self.bucket.is_some() { self.finish_in_bucket(footer) } else { self.finish_in_file(footer) };
        if done.is_ok() {
            io.commit_done(t);
        }
        done
    }

    /// The chunk's own file: footer, fsync, rename over any older version, directory sync.
    fn finish_in_file(mut self, footer: Footer) -> Result<u32, StoreError> {
        let fbytes = serde_json::to_vec(&footer).expect("footer serialises");
        let footer = Arc::new(footer);
        let mut f = self.file.take().expect("finish once");
        let tmp = self.tmp.clone();
        f.write_all(&fbytes).map_err(io(&tmp))?;
        f.write_all(&(fbytes.len() as u32).to_le_bytes()).map_err(io(&tmp))?;
        f.write_all(MAGIC).map_err(io(&tmp))?;
        // Writes are buffered by the page cache; an emulated disk sees the whole file go out
        // in one sequential I/O at the fsync. `finish` runs on blocking threads.
        if let Some((d, key)) = &self.disk {
            d.io(*key, 0, self.len + fbytes.len() as u64 + 12);
            crate::disk_emulation::settle_blocking();
        }
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        let old = file_len(&self.path);
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path))?;
        self.files.lock().expect("usage lock").replaced(old, Some(self.len + fbytes.len() as u64 + 12));
        // The footer just written is the one a reader would find: keep it (the file's stamp
        // after the rename names this version).
        if let Ok(m) = std::fs::metadata(&self.path) {
            remember(&self.footers, &self.id, FileStamp::of(&m), footer);
        }
        if let Some(dir) = self.path.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
        }
        // A version of the chunk in a bucket is older than this one: its slot goes.
        if let Some(old) = self.index.remove(&self.id)? {
            bucket::punch(&self.dir_of().join(&old.file), old.offset, old.footer.len);
        }
        Ok(self.crc)
    }
}

impl ChunkWriter {
    /// The slot's bytes are durable before the index points at them; then a chunk file of
    /// the same id (an older version) goes.
    fn finish_in_bucket(mut self, footer: Footer) -> Result<u32, StoreError> {
        let b = self.bucket.take().expect("writing into a bucket");
        let f = self.file.take().expect("finish once");
        if let Some((d, key)) = &self.disk {
            d.io(*key, b.base, self.len);
            crate::disk_emulation::settle_blocking();
        }
        f.sync_data().map_err(io(&b.path))?;
        drop(f);
        if b.created {
            File::open(self.dir_of()).and_then(|d| d.sync_all()).map_err(io(&b.path))?;
        }
        let generation = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let entry = bucket::Entry { file: b.name.clone(), offset: b.base, footer, generation };
        if let Some(old) = self.index.put(&self.id, &entry)? {
            // Written meanwhile by another writer to another slot: that slot is dead now.
            if old.file != entry.file || old.offset != entry.offset {
                bucket::punch(&self.dir_of().join(&old.file), old.offset, old.footer.len);
            }
        }
        self.footers.lock().expect("footer cache").remove(&self.id);
        let old = file_len(&self.path);
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&self.path)(e)),
            Err(_) => {}
            Ok(()) => self.files.lock().expect("usage lock").replaced(old, None),
        }
        Ok(self.crc)
    }

    fn dir_of(&self) -> PathBuf {
        self.path.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

impl Drop for ChunkWriter {
    fn drop(&mut self) {
        // An unfinished bucket write leaves bytes in a slot nothing points at.
        if self.file.is_some() && self.bucket.is_none() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl ChunkWriter {
    /// See [`ChunkStore::writer_in`].
    pub(crate) fn open(store: &ChunkStore, id: &ChunkId, bucket: Option<BucketSlot>) -> Result<ChunkWriter, StoreError> {
        let path = store.path(id);
        let mut target = None;
        if let Some(slot) = bucket {
            let base = slot.offset().map_err(StoreError::BadBucket)?;
            let name = bucket::file_name(&slot);
            // The same chunk written into its own slot again (a put's retry, or a slot
            // reused after an abandoned put): it leaves the index first, so a write cut
            // short leaves it missing (and rebuilt) rather than half old, half new. In
            // another slot, the old version stays until the new one, a file of its own, is
            // durable.
            let existing = store.buckets.get(id)?;
            if existing.as_ref().is_some_and(|e| e.file == name && e.offset == base) {
                store.buckets.remove(id)?;
            }
            if existing.is_none_or(|e| e.file == name && e.offset == base) {
                let bpath = store.dir.join(&name);
                let created = !bpath.exists();
                let mut f = OpenOptions::new().write(true).create(true).truncate(false).open(&bpath).map_err(io(&bpath))?;
                f.seek(SeekFrom::Start(base)).map_err(io(&bpath))?;
                let disk = store.disk.clone().map(|d| (d, file_key(&bpath.to_string_lossy())));
                let into = InBucket { name, path: bpath.clone(), base, class: slot.class, created };
                target = Some((f, disk, into));
            }
        }
        let (file, disk, tmp, bucket) = match target {
            Some((f, disk, into)) => (f, disk, into.path.clone(), Some(into)),
            None => {
                let tmp = store.dir.join(format!("{id}.{}.tmp", unique()));
                let file = OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(io(&tmp))?;
                let disk = store.disk.clone().map(|d| (d, file_key(&tmp.to_string_lossy())));
                (file, disk, tmp, None)
            }
        };
        Ok(ChunkWriter {
            id: id.clone(),
            path,
            tmp,
            bucket,
            index: store.buckets.clone(),
            file: Some(file),
            len: 0,
            crc: 0,
            blocks: Vec::new(),
            block: BLOCK,
            block_crc: 0,
            shift: None,
            block_fill: 0,
            disk,
            footers: store.footers.clone(),
            files: store.files.clone(),
            io: store.io.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::store::ChunkStore;
    use kintsugi_proto::ChunkId;

    /// The chunk's CRC, combined from its blocks', equals the CRC of its bytes (the crate's,
    /// over the whole): block sizes of 64 KiB, a power of two and odd ones; chunks shorter
    /// than a block, whole blocks, and whole blocks with a short one after, written in odd
    /// pieces. Each reads back and verifies.
    #[test]
    fn the_chunks_crc_is_its_bytes_crc_for_every_block_and_length() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        for (b, block) in [65_536usize, 4096, 12_288, 4099].into_iter().enumerate() {
            for (l, len) in [0usize, 1, block - 1, block, 3 * block, 3 * block + 1, 5 * block + 777].into_iter().enumerate() {
                let data: Vec<u8> = (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> (9 + l)) as u8).collect();
                let id = ChunkId::new(b as u64, l);
                let mut w = store.writer(&id).unwrap().with_block(block);
                for piece in data.chunks(1000 + 333 * l) {
                    w.write(piece).unwrap();
                }
                let crc = w.finish(Some(kintsugi_proto::crc::crc32c(&data))).unwrap_or_else(|e| panic!("block {block}, {len} bytes: {e}"));
                assert_eq!(crc, kintsugi_proto::crc::crc32c(&data));
                let r = store.reader(&id).unwrap();
                assert_eq!(r.read(0, len as u64).unwrap(), data, "block {block}, {len} bytes");
            }
        }
    }
}
