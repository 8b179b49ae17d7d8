//! Chunk footers (length and checksums) remembered per file version, so reopening an
//! unchanged chunk reads no footer: a positioning on an HDD, and a parse everywhere.

use crate::store::Footer;
use kintsugi_proto::ChunkId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(crate) type FooterCache = Arc<Mutex<HashMap<ChunkId, (FileStamp, Arc<Footer>)>>>;

pub(crate) fn remember(cache: &FooterCache, id: &ChunkId, stamp: FileStamp, footer: Arc<Footer>) {
    let mut c = cache.lock().expect("footer cache");
    if c.len() >= FOOTER_CACHE {
        c.clear();
    }
    c.insert(id.clone(), (stamp, footer));
}

/// What identifies one version of a chunk file without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStamp {
    ino: u64,
    dev: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileStamp {
    pub(crate) fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            ino: m.ino(),
            dev: m.dev(),
            len: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
        }
    }

    /// One version of a chunk in a bucket: the bucket file, the slot and the write's
    /// generation (the bucket file itself changes with every other slot's write).
    pub(crate) fn of_slot(m: &std::fs::Metadata, offset: u64, generation: u64) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileStamp { ino: m.ino(), dev: m.dev(), len: offset, mtime_ns: generation as i128, ctime_ns: -1 }
    }
}

/// Footers kept at most; the cache starts over beyond (a footer is ~10 bytes per 64 KiB).
const FOOTER_CACHE: usize = 4096;
