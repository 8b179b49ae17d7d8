//! This node's share of the per-object index (Geometric Partitioning, section 5.1): the
//! records of objects in the placement groups it is an index holder of, each with the
//! sequence number the coordinator gave it. A record is kept only over one of a lower
//! sequence number, so records arriving late or out of order never undo newer ones; a
//! deleted object keeps a record with no body (a tombstone) for the same reason.
//!
//! Records are opaque here (the reader decodes them); they live in a redb database in the
//! store's directory, one committed (fsynced) transaction per record, so a record the node
//! acknowledged survives a crash.

use crate::lazy_db::LazyDb;
use kintsugi_proto::WireError;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use std::sync::Arc;

const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("object_index");
/// The index's file in the store's directory.
pub const INDEX_FILE: &str = "objects.redb";
/// Longest object name a record is kept for.
pub const MAX_NAME: usize = 1100;

/// The object index of a store, opened on first use.
#[derive(Debug)]
pub struct ObjectIndex {
    db: LazyDb,
}

fn key(pg: u32, name: &str) -> String {
    format!("{pg:05}/{name}")
}

/// Stored: the sequence number (8 bytes, little-endian), a tag (0 tombstone, 1 record),
/// then the record.
fn entry(seq: u64, record: Option<&[u8]>) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.push(record.is_some() as u8);
    v.extend_from_slice(record.unwrap_or_default());
    v
}

fn parse(v: &[u8]) -> Result<(u64, Option<Vec<u8>>), WireError> {
    if v.len() < 9 || v[8] > 1 || (v[8] == 0 && v.len() > 9) {
        return Err(WireError::internal("a damaged index entry"));
    }
    let seq = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
    Ok((seq, (v[8] == 1).then(|| v[9..].to_vec())))
}

impl ObjectIndex {
    pub fn new(dir: &Path) -> Self {
        ObjectIndex { db: LazyDb::new(dir, INDEX_FILE, RECORDS) }
    }

    fn db(&self, create: bool) -> Result<Option<&Arc<Database>>, WireError> {
        self.db.get(create).map_err(|x| WireError::internal(format!("{}: {x}", self.db.path.display())))
    }

    fn check(name: &str, record: Option<&[u8]>) -> Result<(), WireError> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(WireError::bad_request(format!("an object name of {} bytes (1 to {MAX_NAME})", name.len())));
        }
        if record.is_some_and(|r| r.len() > kintsugi_proto::object_index::MAX_RECORD) {
            return Err(WireError::bad_request(format!("an index record longer than {} bytes", kintsugi_proto::object_index::MAX_RECORD)));
        }
        Ok(())
    }

    /// Keeps `record` (None: a tombstone) as object `name`'s in group `pg` unless a record of
    /// a later or equal `seq` is kept already; returns whether it was kept. Durable on return.
    pub fn put(&self, pg: u32, name: &str, seq: u64, record: Option<&[u8]>) -> Result<bool, WireError> {
        Self::check(name, record)?;
        if seq == 0 {
            return Err(WireError::bad_request("index sequence numbers start at 1"));
        }
        let db = self.db(true)?.expect("created");
        let e = |x: redb::Error| WireError::internal(format!("{}: {x}", self.db.path.display()));
        let w = db.begin_write().map_err(|x| e(x.into()))?;
        let kept = {
            let mut t = w.open_table(RECORDS).map_err(|x| e(x.into()))?;
            let k = key(pg, name);
            // A damaged entry is overwritten: the coordinator's record replaces it.
            let have = t.get(k.as_str()).map_err(|x| e(x.into()))?.and_then(|v| parse(v.value()).ok()).map_or(0, |(s, _)| s);
            if have >= seq {
                false
            } else {
                t.insert(k.as_str(), entry(seq, record).as_slice()).map_err(|x| e(x.into()))?;
                true
            }
        };
        w.commit().map_err(|x| e(x.into()))?;
        Ok(kept)
    }

    /// Object `name`'s record in group `pg`: (0, None) when there is none.
    pub fn get(&self, pg: u32, name: &str) -> Result<(u64, Option<Vec<u8>>), WireError> {
        Self::check(name, None)?;
        let Some(db) = self.db(false)? else { return Ok((0, None)) };
        let e = |x: redb::Error| WireError::internal(format!("{}: {x}", self.db.path.display()));
        let r = db.begin_read().map_err(|x| e(x.into()))?;
        let t = r.open_table(RECORDS).map_err(|x| e(x.into()))?;
        match t.get(key(pg, name).as_str()).map_err(|x| e(x.into()))? {
            None => Ok((0, None)),
            Some(v) => parse(v.value()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_records_win_whatever_order_they_arrive_in() {
        let dir = tempfile::tempdir().unwrap();
        let ix = ObjectIndex::new(dir.path());
        assert_eq!(ix.get(3, "a").unwrap(), (0, None));
        assert!(!dir.path().join(INDEX_FILE).exists(), "a read creates nothing");
        assert!(ix.put(3, "a", 5, Some(b"v5")).unwrap());
        assert!(!ix.put(3, "a", 4, Some(b"v4")).unwrap(), "an older record arriving late");
        assert!(!ix.put(3, "a", 5, Some(b"again")).unwrap());
        assert_eq!(ix.get(3, "a").unwrap(), (5, Some(b"v5".to_vec())));
        // A delete is a tombstone: an older put arriving after it does not bring it back.
        assert!(ix.put(3, "a", 9, None).unwrap());
        assert!(!ix.put(3, "a", 7, Some(b"v7")).unwrap());
        assert_eq!(ix.get(3, "a").unwrap(), (9, None));
        // Groups are apart.
        assert_eq!(ix.get(4, "a").unwrap(), (0, None));
    }

    #[test]
    fn records_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        ObjectIndex::new(dir.path()).put(1, "x/y", 2, Some(&[7; 300])).unwrap();
        let again = ObjectIndex::new(dir.path());
        assert_eq!(again.get(1, "x/y").unwrap(), (2, Some(vec![7; 300])));
    }

    #[test]
    fn bad_requests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ix = ObjectIndex::new(dir.path());
        assert!(ix.put(1, "", 1, None).is_err());
        assert!(ix.put(1, &"n".repeat(MAX_NAME + 1), 1, None).is_err());
        assert!(ix.put(1, "a", 0, None).is_err());
        assert!(ix.put(1, "a", 1, Some(&vec![0; kintsugi_proto::object_index::MAX_RECORD + 1])).is_err());
        assert!(parse(&[1, 2, 3]).is_err());
        assert!(parse(&entry(3, None)[..8]).is_err());
        assert_eq!(parse(&entry(3, Some(b""))).unwrap(), (3, Some(vec![])));
    }
}
