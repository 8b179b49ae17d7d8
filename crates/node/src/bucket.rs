//! Size-class bucket files (Geometric Partitioning, section 4.2): a Geo stripe's chunk on a
//! node is slot `slot` of the node's bucket file for its placement group and size class,
//! at byte `slot * class`, so a node holds one file per size class per placement group,
//! chunks aligned in it, and recovery of one bucket reads it front to back.
//!
//! A chunk in a bucket has no footer in the file: its length and checksums (the same
//! [`Footer`] a chunk file ends with) are in the node's bucket index, a redb database in
//! the store's directory. A write goes to a slot no index entry points at, is fsynced, and
//! only then is its index entry committed: the commit is the bucket's rename, so a crash
//! leaves either the old state or the new one, never a half-written chunk that reads as
//! valid. A deleted chunk's slot is punched out of the file (its space returns to the file
//! system; the file keeps its length so other slots keep their offsets).

use crate::lazy_db::LazyDb;
use crate::store::{Footer, StoreError};
use kintsugi_proto::{BucketSlot, ChunkId};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const INDEX: TableDefinition<&str, &[u8]> = TableDefinition::new("bucket_chunks");
/// The index's file in the store's directory.
pub const INDEX_FILE: &str = "buckets.redb";

/// Where one chunk is in its bucket, and its checksums.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The bucket's file name in the store's directory.
    pub file: String,
    pub offset: u64,
    pub footer: Footer,
    /// Tells versions of a chunk apart (readers caching a chunk's blocks compare it).
    pub generation: u64,
}

/// The bucket file name of a slot.
pub fn file_name(slot: &BucketSlot) -> String {
    match slot.small {
        false => format!("pg{:05}.c{:010}.bucket", slot.pg, slot.class),
        true => format!("pg{:05}.small.c{:010}.bucket", slot.pg, slot.class),
    }
}

/// The bucket index of a store, opened on first use (a store that never sees a bucket
/// write never creates one).
#[derive(Debug)]
pub(crate) struct BucketIndex {
    path: PathBuf,
    db: LazyDb,
    /// Chunks in buckets and their bytes, counted from one listing and then kept up by
    /// `put` and `remove` (heartbeats report them twice a second).
    usage: std::sync::Mutex<Option<(u64, u64)>>,
}

fn err(path: &Path) -> impl Fn(String) -> StoreError + '_ {
    move |x| StoreError::Io { path: path.display().to_string(), err: std::io::Error::other(x) }
}

impl BucketIndex {
    pub fn new(dir: &Path) -> Self {
        BucketIndex { path: dir.join(INDEX_FILE), db: LazyDb::new(dir, INDEX_FILE, INDEX), usage: Default::default() }
    }

    /// The database, created when `create` (a bucket write); None while there is none.
    fn db(&self, create: bool) -> Result<Option<&Arc<Database>>, StoreError> {
        self.db.get(create).map_err(|e| err(&self.path)(e.to_string()))
    }

    /// The entry of chunk `id`, if it is in a bucket.
    pub fn get(&self, id: &ChunkId) -> Result<Option<Entry>, StoreError> {
        let Some(db) = self.db(false)? else { return Ok(None) };
        let e = err(&self.path);
        let r = db.begin_read().map_err(|x| e(x.to_string()))?;
        let t = r.open_table(INDEX).map_err(|x| e(x.to_string()))?;
        let Some(v) = t.get(id.as_str()).map_err(|x| e(x.to_string()))? else { return Ok(None) };
        serde_json::from_slice(v.value())
            .map(Some)
            .map_err(|x| StoreError::Corrupt { chunk: id.clone(), detail: format!("unreadable bucket index entry: {x}") })
    }

    /// Records (durably) that chunk `id` is `entry`; returns the entry it replaced.
    pub fn put(&self, id: &ChunkId, entry: &Entry) -> Result<Option<Entry>, StoreError> {
        let db = self.db(true)?.expect("created");
        let e = err(&self.path);
        let w = db.begin_write().map_err(|x| e(x.to_string()))?;
        let old = {
            let mut t = w.open_table(INDEX).map_err(|x| e(x.to_string()))?;
            let bytes = serde_json::to_vec(entry).expect("entries serialise");
            let old = t.insert(id.as_str(), bytes.as_slice()).map_err(|x| e(x.to_string()))?;
            old.and_then(|v| serde_json::from_slice(v.value()).ok())
        };
        w.commit().map_err(|x| e(x.to_string()))?;
        self.count(old.as_ref(), Some(entry));
        Ok(old)
    }

    /// Counts an entry `new` taking the place of `old`.
    fn count(&self, old: Option<&Entry>, new: Option<&Entry>) {
        if let Some((n, bytes)) = self.usage.lock().expect("usage lock").as_mut() {
            *n = (*n + new.is_some() as u64).saturating_sub(old.is_some() as u64);
            *bytes = (*bytes + new.map_or(0, |e| e.footer.len)).saturating_sub(old.map_or(0, |e| e.footer.len));
        }
    }

    /// Chunks in buckets and their bytes (listed once, then counted).
    pub fn usage(&self) -> Result<(u64, u64), StoreError> {
        let mut usage = self.usage.lock().expect("usage lock");
        if let Some(u) = *usage {
            return Ok(u);
        }
        let all = self.list()?;
        let u = (all.len() as u64, all.iter().map(|(_, len)| len).sum());
        *usage = Some(u);
        Ok(u)
    }

    /// Drops chunk `id` from the index (durably); returns its entry.
    pub fn remove(&self, id: &ChunkId) -> Result<Option<Entry>, StoreError> {
        let Some(db) = self.db(false)? else { return Ok(None) };
        let e = err(&self.path);
        let w = db.begin_write().map_err(|x| e(x.to_string()))?;
        let old = {
            let mut t = w.open_table(INDEX).map_err(|x| e(x.to_string()))?;
            let old = t.remove(id.as_str()).map_err(|x| e(x.to_string()))?;
            old.and_then(|v| serde_json::from_slice(v.value()).ok())
        };
        w.commit().map_err(|x| e(x.to_string()))?;
        self.count(old.as_ref(), None);
        Ok(old)
    }

    /// Every chunk in a bucket, with its length.
    pub fn list(&self) -> Result<Vec<(ChunkId, u64)>, StoreError> {
        let Some(db) = self.db(false)? else { return Ok(Vec::new()) };
        let e = err(&self.path);
        let r = db.begin_read().map_err(|x| e(x.to_string()))?;
        let t = r.open_table(INDEX).map_err(|x| e(x.to_string()))?;
        let mut out = Vec::new();
        for item in t.iter().map_err(|x| e(x.to_string()))? {
            let (k, v) = item.map_err(|x| e(x.to_string()))?;
            let Ok(id) = ChunkId::try_from(k.value().to_string()) else { continue };
            // A length without parsing the whole footer's block list.
            #[derive(Deserialize)]
            struct Len {
                footer: LenOnly,
            }
            #[derive(Deserialize)]
            struct LenOnly {
                len: u64,
            }
            let len = serde_json::from_slice::<Len>(v.value()).map_or(0, |l| l.footer.len);
            out.push((id, len));
        }
        Ok(out)
    }
}

/// Gives a slot's bytes back to the file system (the file keeps its length). Best effort:
/// a file system without hole punching keeps them as dead space.
pub(crate) fn punch(path: &Path, offset: u64, len: u64) {
    use std::os::unix::io::AsRawFd;
    let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) else { return };
    // SAFETY: an open descriptor and a byte range; the call touches nothing else.
    let r = unsafe {
        libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset as libc::off_t, len as libc::off_t)
    };
    if r != 0 {
        tracing::debug!("punching {len} bytes at {offset} of {}: {}", path.display(), std::io::Error::last_os_error());
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{ChunkStore, StoreError};
    use kintsugi_proto::{BucketSlot, ChunkId};

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    fn put(store: &ChunkStore, id: &ChunkId, slot: BucketSlot, data: &[u8]) -> Result<u32, StoreError> {
        let mut w = store.writer_in(id, Some(slot))?;
        for part in data.chunks(10_000) {
            w.write(part)?;
        }
        w.finish(Some(kintsugi_proto::crc::crc32c(data)))
    }

    /// Bucket usage counted as chunks come, are rewritten and go equals a fresh listing's.
    #[test]
    fn counted_bucket_usage_follows_puts_rewrites_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        assert_eq!(store.usage(), (0, 0), "counted from here on");
        let slot = |slot| BucketSlot { pg: 1, class: 100_000, slot, small: false };
        let (a, b) = (ChunkId::new(1, 0), ChunkId::new(2, 0));
        put(&store, &a, slot(0), &bytes(90_000, 1)).unwrap();
        put(&store, &b, slot(1), &bytes(50_000, 2)).unwrap();
        put(&store, &a, slot(0), &bytes(10_000, 3)).unwrap();
        assert_eq!(store.usage(), (2, 60_000));
        store.delete(&b).unwrap();
        store.delete(&b).unwrap();
        assert_eq!(store.usage(), (1, 10_000));
        let listed = store.buckets.list().unwrap();
        assert_eq!((listed.len() as u64, listed.iter().map(|(_, l)| l).sum::<u64>()), store.usage());
    }

    /// Chunks land in their slots of one file per (placement group, size class), read back
    /// verified, survive reopening; an unfinished or mismatched write leaves nothing
    /// visible; corruption is caught per chunk; deletes free only their own slot.
    #[test]
    fn chunks_live_in_aligned_slots_of_size_class_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        let class = 200_000u64;
        let slot = |pg, class, slot| BucketSlot { pg, class, slot, small: false };
        let (a, b, c) = (ChunkId::new(1, 0), ChunkId::new(7, 3), ChunkId::new(9, 1));
        let (da, db, dc) = (bytes(class as usize, 1), bytes(class as usize, 2), bytes(70_000, 3));
        put(&store, &a, slot(3, class, 0), &da).unwrap();
        put(&store, &b, slot(3, class, 2), &db).unwrap();
        put(&store, &c, slot(3, 100_000, 5), &dc).unwrap();
        // Two buckets, no chunk files; the slots are aligned at slot * class.
        let mut files: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect();
        files.sort();
        assert_eq!(files, vec![super::INDEX_FILE.to_string(), "pg00003.c0000100000.bucket".into(), "pg00003.c0000200000.bucket".into()]);
        let raw = std::fs::read(dir.path().join("pg00003.c0000200000.bucket")).unwrap();
        assert_eq!(raw.len() as u64, 3 * class);
        assert_eq!(&raw[2 * class as usize..], &db[..]);
        assert_eq!(store.list().unwrap(), vec![a.clone(), b.clone(), c.clone()]);
        assert_eq!(store.usage(), (3, 2 * class + 70_000));
        for (id, data) in [(&a, &da), (&b, &db), (&c, &dc)] {
            let r = store.reader(id).unwrap();
            assert_eq!(r.crc32c(), kintsugi_proto::crc::crc32c(data));
            assert_eq!(r.read(0, data.len() as u64).unwrap(), *data);
            assert_eq!(r.read(65_530, 20).unwrap(), &data[65_530..65_550]);
        }

        // Unfinished (a crash mid-write) and mismatched writes: nothing visible.
        let d = ChunkId::new(11, 0);
        let mut w = store.writer_in(&d, Some(slot(3, class, 1))).unwrap();
        w.write(&bytes(1000, 9)).unwrap();
        drop(w);
        assert!(matches!(store.reader(&d), Err(StoreError::NotFound(_))));
        let mut w = store.writer_in(&d, Some(slot(3, class, 1))).unwrap();
        w.write(b"hello").unwrap();
        assert!(matches!(w.finish(Some(1)), Err(StoreError::Mismatch { .. })));
        assert!(matches!(store.reader(&d), Err(StoreError::NotFound(_))));
        // Too long for its class, or a slot past any sane file: refused.
        let mut w = store.writer_in(&d, Some(slot(3, 10, 1))).unwrap();
        assert!(matches!(w.write(&[0; 11]), Err(StoreError::BadBucket(_))));
        assert!(matches!(store.writer_in(&d, Some(slot(3, 0, 1))), Err(StoreError::BadBucket(_))));
        assert!(matches!(store.writer_in(&d, Some(slot(3, 1 << 20, u64::MAX / 2))), Err(StoreError::BadBucket(_))));

        // Reopened (as after a restart), the index still finds every chunk.
        drop(store);
        let store = ChunkStore::open(dir.path()).unwrap();
        assert_eq!(store.reader(&b).unwrap().read(0, class).unwrap(), db);

        // A flipped byte in b's slot: b is corrupt, a (same bucket) is not.
        let path = dir.path().join("pg00003.c0000200000.bucket");
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[raw[2 * class as usize + 70_000] ^ 1], 2 * class + 70_000).unwrap();
        drop(f);
        let err = store.reader(&b).unwrap().read(0, class).unwrap_err();
        assert!(err.to_string().contains("corrupt chunk"), "{err}");
        assert_eq!(store.reader(&a).unwrap().read(0, class).unwrap(), da);

        // Rewriting a chunk into its own slot (a retried put) leaves it missing, never half
        // old and half new, until the new version is durable; then it is read from there.
        let mut w = store.writer_in(&b, Some(slot(3, class, 2))).unwrap();
        w.write(&db[..1000]).unwrap();
        drop(w);
        assert!(matches!(store.reader(&b), Err(StoreError::NotFound(_))), "a cut-short rewrite");
        let fixed = db.clone();
        put(&store, &b, slot(3, class, 2), &fixed).unwrap();
        assert!(!dir.path().join(format!("{b}.chunk")).exists());
        assert_eq!(store.reader(&b).unwrap().read(0, class).unwrap(), fixed);
        // Into another slot, the old version stays until the new one, a file of its own, is
        // durable; the new one is read.
        let other: Vec<u8> = bytes(class as usize, 7);
        put(&store, &b, slot(3, class, 4), &other).unwrap();
        assert!(dir.path().join(format!("{b}.chunk")).exists());
        assert_eq!(store.reader(&b).unwrap().read(0, class).unwrap(), other);
        assert_eq!(store.list().unwrap().len(), 3);

        // Deleting a frees its slot only (punched: the file keeps its length).
        store.delete(&a).unwrap();
        assert!(matches!(store.reader(&a), Err(StoreError::NotFound(_))));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * class);
        assert_eq!(store.reader(&c).unwrap().read(0, 70_000).unwrap(), dc);
        store.delete(&b).unwrap();
        assert!(matches!(store.reader(&b), Err(StoreError::NotFound(_))));
        assert!(!dir.path().join(format!("{b}.chunk")).exists());
        assert_eq!(store.list().unwrap(), vec![c]);
    }

    /// A chunk whose bucket file went missing or was cut short reads as corrupt (the
    /// coordinator then rebuilds it), never as other bytes.
    #[test]
    fn a_truncated_bucket_is_corrupt_not_short() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        let id = ChunkId::new(2, 0);
        put(&store, &id, BucketSlot { pg: 0, class: 100_000, slot: 1, small: true }, &bytes(100_000, 5)).unwrap();
        let path = dir.path().join("pg00000.small.c0000100000.bucket");
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(150_000).unwrap();
        assert!(matches!(store.reader(&id), Err(StoreError::Corrupt { .. })));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(store.reader(&id), Err(StoreError::Corrupt { .. })));
    }
}
