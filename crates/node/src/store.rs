//! The chunk store: one file per chunk, `<dir>/<chunk id>.chunk`, laid out as
//! `data | footer JSON | u32 footer length | "KSCHNK01"`. The footer holds the length, the
//! CRC-32C of the whole chunk and of every block (64 KiB, or a sub-chunk of a Clay chunk:
//! see [`block_for`]), so any range can be verified as it is read and a corrupted chunk is
//! detected before a single bad byte is served. Writes go
//! to a temporary file, are fsynced and renamed into place. A Geo stripe's chunk goes to a
//! slot of a size-class bucket file instead, its footer in the bucket index ([`bucket`]);
//! a chunk file of the same id, if any, takes precedence (it is the newer version).
//!
//! [`bucket`]: crate::bucket
//!
//! File I/O here is synchronous: chunks live on local disks and the calls are short; the
//! network executor streams slices, so no call reads more than one slice's blocks.

use kintsugi_proto::ChunkId;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

use crate::disk_emulation::{file_key, DiskEmulation};
use kintsugi_hdd::HddModel;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::bucket::{self, BucketIndex};
pub use crate::chunk_reader::ChunkReader;
pub use crate::chunk_writer::ChunkWriter;
use crate::footer_cache::{remember, FileStamp, FooterCache};
pub use crate::read_window::{ReadCache, Window};
use kintsugi_proto::BucketSlot;

pub(crate) const MAGIC: &[u8; 8] = b"KSCHNK01";
use crate::checksum_block::footer_fits;
pub use crate::checksum_block::{block_for, BLOCK, MIN_BLOCK};
const MAX_FOOTER: u32 = 64 << 20;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("chunk {0} not found")]
    NotFound(ChunkId),
    #[error("corrupt chunk {chunk}: {detail}")]
    Corrupt { chunk: ChunkId, detail: String },
    #[error("range {off}+{len} is outside chunk {chunk} of {size} bytes")]
    OutOfRange { chunk: ChunkId, off: u64, len: u64, size: u64 },
    #[error("chunk {chunk} checksum {got:08x} differs from the expected {want:08x}; not stored")]
    Mismatch { chunk: ChunkId, got: u32, want: u32 },
    #[error("i/o on {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{0}")]
    BadBucket(String),
}

/// A store error as it leaves the node: a missing or corrupt chunk is named as the fault,
/// so whoever planned the read marks that chunk lost.
impl From<StoreError> for kintsugi_proto::WireError {
    fn from(e: StoreError) -> Self {
        use kintsugi_proto::{ErrorKind, Fault, WireError};
        let message = e.to_string();
        match e {
            StoreError::NotFound(chunk) => WireError::new(ErrorKind::NotFound, message).with_fault(Fault::MissingChunk { chunk }),
            StoreError::Corrupt { chunk, .. } => WireError::new(ErrorKind::Corrupt, message).with_fault(Fault::CorruptChunk { chunk }),
            StoreError::OutOfRange { .. } | StoreError::Mismatch { .. } => WireError::bad_request(message),
            StoreError::Io { err, .. } if err.raw_os_error() == Some(libc_enospc()) => WireError::unavailable(message),
            StoreError::Io { .. } | StoreError::BadBucket(_) => WireError::internal(message),
        }
    }
}

/// ENOSPC: a full disk is a condition that passes (collection, rebalancing), not a bug.
const fn libc_enospc() -> i32 {
    28
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |err| StoreError::Io { path: path.display().to_string(), err }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Footer {
    pub(crate) len: u64,
    pub(crate) block: usize,
    pub(crate) crc32c: u32,
    pub(crate) blocks: Vec<u32>,
}

/// A directory of chunk files.
#[derive(Debug)]
pub struct ChunkStore {
    pub(crate) dir: PathBuf,
    /// When set, every read and write first waits for the emulated HDD.
    pub(crate) disk: Option<Arc<DiskEmulation>>,
    pub(crate) read_ahead: usize,
    /// Footers of recently opened chunks, each with the stamp of the file it came from:
    /// reopening an unchanged file skips the footer read (a positioning on an HDD) and its
    /// parse. Any rewrite, rename or truncation changes the stamp and reloads it.
    pub(crate) footers: FooterCache,
    /// Where chunks in size-class buckets are.
    pub(crate) buckets: Arc<BucketIndex>,
    /// The records of the per-object index this node holds.
    pub objects: Arc<crate::object_index::ObjectIndex>,
    /// Chunk files' count and bytes, kept up as files come and go.
    pub(crate) files: Arc<Mutex<FileUsage>>,
    /// CRC failures and I/O latency of its readers and writers.
    pub io: Arc<crate::io_stats::IoStats>,
}

/// The count and bytes of a store's chunk files. Heartbeats report them twice a second, and
/// listing and stat-ing every file each time cost O(chunks) (100,000 stats a second on a node
/// of 50,000 chunks): writers and deletes adjust them instead, and a scan every
/// [`USAGE_RESCAN`] corrects what concurrent writers of one chunk may have miscounted.
#[derive(Debug, Default)]
pub(crate) struct FileUsage {
    chunks: u64,
    bytes: u64,
    scanned: Option<std::time::Instant>,
}

/// How long counted usage is trusted before the directory is scanned again.
pub(crate) const USAGE_RESCAN: std::time::Duration = std::time::Duration::from_secs(600);

impl FileUsage {
    /// A chunk file of `new` bytes took the place of one of `old` bytes (None: none), or
    /// (`new` None) went away.
    pub(crate) fn replaced(&mut self, old: Option<u64>, new: Option<u64>) {
        self.chunks = (self.chunks + new.is_some() as u64).saturating_sub(old.is_some() as u64);
        self.bytes = (self.bytes + new.unwrap_or(0)).saturating_sub(old.unwrap_or(0));
    }
}

/// The size of the file at `path`, if there is one.
pub(crate) fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Bytes of verified read-ahead a repair helper keeps per chunk it reads (shared among its
/// sub-chunk reads and lanes): enough for SSDs and the page cache.
pub const READ_AHEAD: usize = 512 * 1024;
/// On an HDD every read pays a positioning, so reads are larger: the 4 MB batches the
/// Geometric Partitioning paper gives its baselines' recovery reads.
pub const HDD_READ_AHEAD: usize = 4 << 20;

impl ChunkStore {
    /// Opens (creating) the directory and removes temporary files left by a crash.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        for e in std::fs::read_dir(dir).map_err(io(dir))?.flatten() {
            if e.file_name().to_string_lossy().ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(ChunkStore {
            dir: dir.to_path_buf(),
            disk: None,
            read_ahead: READ_AHEAD,
            footers: Arc::new(Mutex::new(HashMap::new())),
            buckets: Arc::new(BucketIndex::new(dir)),
            objects: Arc::new(crate::object_index::ObjectIndex::new(dir)),
            files: Arc::new(Mutex::new(FileUsage::default())),
            io: Arc::default(),
        })
    }

    /// Opens the store with every I/O going through an emulated HDD.
    pub fn open_emulating(dir: &Path, hdd: HddModel) -> Result<Self, StoreError> {
        let mut s = Self::open(dir)?;
        s.disk = Some(Arc::new(DiskEmulation::new(hdd)));
        s.read_ahead = HDD_READ_AHEAD;
        Ok(s)
    }

    /// Read-ahead per helper chunk (see [`READ_AHEAD`]).
    pub fn read_ahead(&self) -> usize {
        self.read_ahead
    }

    /// Sets the read-ahead (at least one checksum block).
    pub fn set_read_ahead(&mut self, bytes: usize) {
        self.read_ahead = bytes.max(BLOCK);
    }

    /// The emulated disk, if any.
    pub fn disk(&self) -> Option<&Arc<DiskEmulation>> {
        self.disk.as_ref()
    }

    /// Every chunk stored here (chunk files by name, files that are not chunks passed over;
    /// and the chunks in buckets).
    pub fn list(&self) -> Result<Vec<ChunkId>, StoreError> {
        let mut ids: Vec<ChunkId> = self.buckets.list()?.into_iter().map(|(id, _)| id).collect();
        for e in std::fs::read_dir(&self.dir).map_err(io(&self.dir))?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(id) = name.strip_suffix(".chunk").and_then(|n| ChunkId::try_from(n.to_string()).ok()) {
                ids.push(id);
            }
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    pub(crate) fn path(&self, id: &ChunkId) -> PathBuf {
        self.dir.join(format!("{id}.chunk"))
    }

    /// Starts writing a chunk; nothing is visible until [`ChunkWriter::finish`].
    pub fn writer(&self, id: &ChunkId) -> Result<ChunkWriter, StoreError> {
        self.writer_in(id, None)
    }

    /// Starts writing a chunk into bucket slot `bucket` (a file of its own without one);
    /// nothing new is visible until [`ChunkWriter::finish`]. A chunk already in another
    /// slot is rewritten as a file of its own, so its slot keeps the old version until the
    /// new one is durable; one already in this slot is dropped from the index first (it is
    /// missing, never mixed, until the new version is durable).
    pub fn writer_in(&self, id: &ChunkId, bucket: Option<BucketSlot>) -> Result<ChunkWriter, StoreError> {
        ChunkWriter::open(self, id, bucket)
    }

    /// Writes a whole chunk.
    pub fn put(&self, id: &ChunkId, data: &[u8]) -> Result<u32, StoreError> {
        let mut w = self.writer(id)?;
        w.write(data)?;
        w.finish(None)
    }

    /// Opens a chunk for verified reads.
    pub fn reader(&self, id: &ChunkId) -> Result<ChunkReader, StoreError> {
        let path = self.path(id);
        let mut f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return self.bucket_reader(id),
            Err(e) => return Err(io(&path)(e)),
        };
        let corrupt = |detail: String| StoreError::Corrupt { chunk: id.clone(), detail };
        let meta = f.metadata().map_err(io(&path))?;
        let stamp = FileStamp::of(&meta);
        let disk = self.disk.clone().map(|d| (d, file_key(&path.to_string_lossy())));
        if let Some((st, footer)) = self.footers.lock().expect("footer cache").get(id) {
            if *st == stamp {
                return Ok(ChunkReader { id: id.clone(), file: f, base: 0, footer: footer.clone(), disk, stamp, io: self.io.clone() });
            }
        }
        let size = meta.len();
        if size < 12 {
            return Err(corrupt(format!("file of {size} bytes has no footer")));
        }
        let mut tail = [0u8; 12];
        f.seek(SeekFrom::End(-12)).map_err(io(&path))?;
        f.read_exact(&mut tail).map_err(io(&path))?;
        if &tail[4..] != MAGIC {
            return Err(corrupt("bad magic".into()));
        }
        let flen = u32::from_le_bytes(tail[..4].try_into().unwrap());
        if flen > MAX_FOOTER || flen as u64 + 12 > size {
            return Err(corrupt(format!("footer length {flen} does not fit a file of {size} bytes")));
        }
        let mut fbytes = vec![0u8; flen as usize];
        if let Some(d) = &self.disk {
            d.io(file_key(&path.to_string_lossy()), size - 12 - flen as u64, flen as u64 + 12);
        }
        f.read_exact_at(&mut fbytes, size - 12 - flen as u64).map_err(io(&path))?;
        let footer: Footer = serde_json::from_slice(&fbytes).map_err(|e| corrupt(format!("unreadable footer: {e}")))?;
        if footer.len != size - 12 - flen as u64 || !footer_fits(&footer) {
            return Err(corrupt("footer does not match the file".into()));
        }
        let footer = Arc::new(footer);
        remember(&self.footers, id, stamp, footer.clone());
        Ok(ChunkReader { id: id.clone(), file: f, base: 0, footer, disk, stamp, io: self.io.clone() })
    }

    /// A chunk in a bucket: its slot of the bucket file, its footer from the index.
    fn bucket_reader(&self, id: &ChunkId) -> Result<ChunkReader, StoreError> {
        let Some(e) = self.buckets.get(id)? else { return Err(StoreError::NotFound(id.clone())) };
        let path = self.dir.join(&e.file);
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(x) if x.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Corrupt { chunk: id.clone(), detail: format!("its bucket {} is missing", e.file) })
            }
            Err(x) => return Err(io(&path)(x)),
        };
        let meta = f.metadata().map_err(io(&path))?;
        let footer = e.footer;
        if !footer_fits(&footer) {
            return Err(StoreError::Corrupt { chunk: id.clone(), detail: "its bucket index entry does not match".into() });
        }
        if meta.len() < e.offset + footer.len {
            return Err(StoreError::Corrupt {
                chunk: id.clone(),
                detail: format!("bucket {} ends at {} bytes, before the chunk's end {}", e.file, meta.len(), e.offset + footer.len),
            });
        }
        let disk = self.disk.clone().map(|d| (d, file_key(&path.to_string_lossy())));
        let stamp = FileStamp::of_slot(&meta, e.offset, e.generation);
        Ok(ChunkReader { id: id.clone(), file: f, base: e.offset, footer: Arc::new(footer), disk, stamp, io: self.io.clone() })
    }

    /// Removes a chunk (absent is fine): its file, and its bucket slot (punched out).
    pub fn delete(&self, id: &ChunkId) -> Result<(), StoreError> {
        self.footers.lock().expect("footer cache").remove(id);
        let p = self.path(id);
        let old = file_len(&p);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&p)(e)),
            Err(_) => {}
            Ok(()) => self.files.lock().expect("usage lock").replaced(old, None),
        }
        if let Some(e) = self.buckets.remove(id)? {
            bucket::punch(&self.dir.join(&e.file), e.offset, e.footer.len);
        }
        Ok(())
    }

    /// The file system holding the store: its identity (host and device, so nodes sharing
    /// it are told so) and space.
    pub fn fs_report(&self) -> Option<kintsugi_proto::FsReport> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(&self.dir).ok()?.dev();
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs is plain old data, for which all zeros is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid NUL-terminated path and a statvfs the call fills in.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let unit = st.f_frsize as u64;
        let used = (st.f_blocks as u64).saturating_sub(st.f_bfree as u64) * unit;
        Some(kintsugi_proto::FsReport { id: format!("{}:{dev}", host_id()), used, size: used + st.f_bavail as u64 * unit })
    }

    /// Bytes still free on the file system holding the store.
    pub fn fs_free(&self) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs is plain old data, for which all zeros is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid NUL-terminated path and a statvfs the call fills in.
        let r = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
        (r == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
    }

    /// Number of chunks and their total size (chunk files whole, bucket chunks' bytes).
    pub fn usage(&self) -> (u64, u64) {
        let (mut n, mut bytes) = self.buckets.usage().unwrap_or_default();
        let mut files = self.files.lock().expect("usage lock");
        if files.scanned.is_none_or(|t| t.elapsed() >= USAGE_RESCAN) {
            let (mut count, mut total) = (0, 0);
            if let Ok(rd) = std::fs::read_dir(&self.dir) {
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().ends_with(".chunk") {
                        count += 1;
                        total += e.metadata().map(|m| m.len()).unwrap_or(0);
                    }
                }
            }
            *files = FileUsage { chunks: count, bytes: total, scanned: Some(std::time::Instant::now()) };
        }
        n += files.chunks;
        bytes += files.bytes;
        (n, bytes)
    }
}

/// This host, as stable as it gets: its machine id, else its boot id, else its name.
fn host_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        ["/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/random/boot_id", "/etc/hostname"]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
            .unwrap_or_default()
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ChunkId {
        ChunkId::try_from(s.to_string()).unwrap()
    }

    /// What a scan of the directory finds, to check the counted usage against.
    fn scanned(dir: &Path) -> (u64, u64) {
        let files: Vec<u64> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".chunk"))
            .map(|e| e.metadata().unwrap().len())
            .collect();
        (files.len() as u64, files.iter().sum())
    }

    #[test]
    fn counted_usage_follows_writes_rewrites_and_deletes_without_scanning() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        assert_eq!(store.usage(), (0, 0));
        store.put(&id("c1"), &[1; 1000]).unwrap();
        store.put(&id("c2"), &[2; 70_000]).unwrap();
        assert_eq!(store.usage(), scanned(dir.path()));
        // A rewrite with another size, a delete, a delete of nothing.
        store.put(&id("c1"), &[3; 5]).unwrap();
        store.delete(&id("c2")).unwrap();
        store.delete(&id("c9")).unwrap();
        let counted = store.usage();
        assert_eq!(counted, scanned(dir.path()));
        assert_eq!(counted.0, 1);
        // Counted, not scanned: a file appearing behind the store's back is not seen until
        // the next rescan.
        std::fs::copy(store.path(&id("c1")), store.path(&id("c7"))).unwrap();
        assert_eq!(store.usage(), counted);
        store.files.lock().unwrap().scanned = None;
        assert_eq!(store.usage(), scanned(dir.path()));
    }

    #[test]
    fn write_read_verify_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        let data: Vec<u8> = (0..200_001u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut w = store.writer(&id("c1")).unwrap();
        for part in data.chunks(7777) {
            w.write(part).unwrap();
        }
        let crc = w.finish(Some(kintsugi_proto::crc::crc32c(&data))).unwrap();
        assert_eq!(crc, kintsugi_proto::crc::crc32c(&data));
        let r = store.reader(&id("c1")).unwrap();
        assert_eq!(r.len(), data.len() as u64);
        assert_eq!(r.read(0, data.len() as u64).unwrap(), data);
        assert_eq!(r.read(65_530, 20).unwrap(), &data[65_530..65_550]);
        assert!(matches!(r.read(200_000, 5), Err(StoreError::OutOfRange { .. })));
        // A window serves forward ranges of any size, across its refills.
        let mut w = Window::new(BLOCK);
        for (off, len) in [(0usize, 10usize), (100, 70_000), (65_535, 2), (130_000, 70_001), (199_999, 2), (5, 1)] {
            assert_eq!(w.get(&r, off as u64, len).unwrap(), &data[off..off + len], "{off}+{len}");
        }
        assert!(matches!(w.get(&r, 199_999, 3), Err(StoreError::OutOfRange { .. })));
        // Two interleaved readers share a cache of two windows.
        let mut c = ReadCache::new(store.reader(&id("c1")).unwrap(), 2, BLOCK);
        for i in 0..6u64 {
            let (a, b) = (i * 10_000, 100_000 + i * 15_000);
            c.fetch(a, 5000).unwrap();
            c.fetch(b, 5000).unwrap();
            assert_eq!(c.peek(a, 5000), &data[a as usize..a as usize + 5000]);
            assert_eq!(c.peek(b, 5000), &data[b as usize..b as usize + 5000]);
        }
        assert_eq!(store.usage().0, 1);

        // Flip one byte in block 2: reads touching it fail, others still work.
        let path = dir.path().join("c1.chunk");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[2 * BLOCK + 5] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let r = store.reader(&id("c1")).unwrap();
        assert!(r.read(0, 100).is_ok());
        let err = r.read(2 * BLOCK as u64, 10).unwrap_err();
        assert!(err.to_string().contains("corrupt chunk c1"), "{err}");
        let mut w = Window::new(4 * BLOCK);
        let err = w.get(&r, 0, 100).unwrap_err();
        assert!(err.to_string().contains("block 2"), "a window verifies every block it holds: {err}");
        // A window whose read failed holds nothing: asked again, it fails again rather than
        // serve the bytes it read and did not verify (a cache two repairs share).
        for _ in 0..2 {
            assert!(!w.holds(0, 100));
            assert!(w.get(&r, 2 * BLOCK as u64, 10).is_err(), "the corrupt block, asked again");
        }
        let mut c = ReadCache::new(store.reader(&id("c1")).unwrap(), 2, 4 * BLOCK);
        assert!(c.fetch(2 * BLOCK as u64, 10).is_err());
        assert!(c.fetch(2 * BLOCK as u64, 10).is_err(), "a shared cache serves no unverified bytes");

        // A wrong expected checksum stores nothing; a truncated file is corrupt, not a panic.
        let mut w = store.writer(&id("c2")).unwrap();
        w.write(b"hello").unwrap();
        assert!(matches!(w.finish(Some(1)), Err(StoreError::Mismatch { .. })));
        assert!(matches!(store.reader(&id("c2")), Err(StoreError::NotFound(_))));
        std::fs::write(dir.path().join("c3.chunk"), b"short").unwrap();
        assert!(matches!(store.reader(&id("c3")), Err(StoreError::Corrupt { .. })));
        std::fs::write(dir.path().join("c4.chunk"), [&[0u8; 4][..], &0xffff_ffffu32.to_le_bytes(), MAGIC].concat()).unwrap();
        assert!(matches!(store.reader(&id("c4")), Err(StoreError::Corrupt { .. })));
        // No temporary files are left behind.
        assert!(std::fs::read_dir(dir.path()).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".tmp")));
    }
}

#[cfg(test)]
mod footer_cache_tests {
    use super::*;
    use std::fs::OpenOptions;

    /// A cached footer serves reopens of the same file only: a file changed in place (its
    /// footer or its data) or replaced is read and checked again.
    #[test]
    fn changed_files_are_checked_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        let id = ChunkId::try_from("c9".to_string()).unwrap();
        let data = vec![7u8; 200_000];
        store.put(&id, &data).unwrap();
        assert_eq!(store.reader(&id).unwrap().read(0, 10).unwrap(), vec![7u8; 10]);
        let path = dir.path().join("c9.chunk");
        let len = std::fs::metadata(&path).unwrap().len();
        // Corrupt the footer's JSON in place: the next open must see it.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(b"}", len - 12 - 20).unwrap();
        drop(f);
        assert!(matches!(store.reader(&id), Err(StoreError::Corrupt { .. })));
        // Replaced by a new version: the new footer.
        store.put(&id, &[1u8; 1000]).unwrap();
        assert_eq!(store.reader(&id).unwrap().len(), 1000);
        // Data corrupted under a cached footer: the block checksum catches it.
        let r = store.reader(&id).unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[9], 10).unwrap();
        drop(f);
        assert!(matches!(r.read(0, 100), Err(StoreError::Corrupt { .. })));
        assert!(matches!(store.reader(&id).and_then(|r| r.read(0, 100)), Err(StoreError::Corrupt { .. })));
        store.delete(&id).unwrap();
        assert!(matches!(store.reader(&id), Err(StoreError::NotFound(_))));
    }
}

#[cfg(test)]
mod emulation_tests {
    use super::*;
    use crate::disk_emulation::settle_blocking;
    use std::time::Instant;

    /// With an emulated HDD, a write costs one sequential I/O at the fsync, opening a chunk
    /// written here nothing (its footer is remembered), and reads a positioning, or the gap's
    /// read time for a short forward gap, while the bytes stay exact.
    #[test]
    fn emulated_hdd_charges_positioning_and_keeps_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open_emulating(dir.path(), HddModel::new(0.2, 1e9).unwrap()).unwrap();
        let data: Vec<u8> = (0..(4 << 20) as u32).map(|i| (i * 7 % 251) as u8).collect();
        let id = ChunkId::try_from("c1".to_string()).unwrap();
        let t = Instant::now();
        store.put(&id, &data).unwrap();
        assert!(t.elapsed().as_secs_f64() >= 0.2, "the fsync waits for the disk");
        let t = Instant::now();
        let r = store.reader(&id).unwrap();
        let mut got = Vec::new();
        for k in 0..4u64 {
            let off = k * (1 << 20);
            got.extend(r.read(off, 1000).unwrap());
        }
        settle_blocking();
        // Four reads 1 MiB apart: the first positions (200 ms), each later gap of ~1 MiB at
        // 1 GB/s reads through in 1 ms. No footer read (another 200 ms): the put kept it.
        let e = t.elapsed().as_secs_f64();
        assert!((0.203..0.35).contains(&e), "{e}");
        let want: Vec<u8> = (0..4).flat_map(|k| data[k << 20..(k << 20) + 1000].to_vec()).collect();
        assert_eq!(got, want);
        // Without emulation the same reads do not wait.
        let plain = ChunkStore::open(dir.path()).unwrap();
        let t = Instant::now();
        plain.reader(&id).unwrap().read(0, 1000).unwrap();
        settle_blocking();
        assert!(t.elapsed().as_secs_f64() < 0.2);
    }
}
