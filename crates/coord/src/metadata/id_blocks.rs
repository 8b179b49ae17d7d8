//! Ids from a persistent counter, taken in blocks: one durable metadata transaction per
//! block instead of one per id. Every repair used to cost a transaction of its own (an
//! fsync of the metadata store) just to be numbered, on the dispatch path of every chunk.
//!
//! An id is never handed out twice, across restarts too: a block is recorded as taken
//! before any of its ids is used, and a restarted coordinator starts a new block (what was
//! left of the old one is skipped, as sequence caches in databases skip theirs).

use crate::metadata::records::{Change, MetaStore};
use kintsugi_proto::WireError;
use std::sync::Mutex;

/// Hands out ids of one counter, `block` at a time from the metadata store.
pub(crate) struct IdBlocks {
    counter: &'static str,
    block: u64,
    /// The next id to hand out and the end of the block taken (exclusive).
    range: Mutex<(u64, u64)>,
}

impl IdBlocks {
    pub(crate) fn new(counter: &'static str, block: u64) -> Self {
        IdBlocks { counter, block: block.max(1), range: Mutex::new((0, 0)) }
    }

    /// The next id: from the block in hand, or from a new block recorded first.
    pub(crate) fn next(&self, meta: &dyn MetaStore) -> Result<u64, WireError> {
        // Whoever finds the block empty waits for the store with the lock held.
        let mut range = crate::metadata::waiting::lock_may_wait(&self.range);
        if range.0 == range.1 {
            let mut start = 0;
            meta.update(&mut |t| {
                // The counter holds the next id never handed out (as `Txn::next_id` keeps it).
                start = t.counter(self.counter)?.unwrap_or(1);
                t.put(Change::SetCounter(self.counter.into(), start + self.block))
            })?;
            *range = (start, start + self.block);
        }
        let id = range.0;
        range.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::redb_store::RedbMeta;
    use std::collections::HashSet;

    fn stored(meta: &RedbMeta) -> u64 {
        let mut v = 0;
        meta.update(&mut |t| {
            v = t.counter("repair")?.expect("a block was taken");
            Ok(())
        })
        .unwrap();
        v
    }

    /// Ids are unique within a run and across restarts, and the store is written once a
    /// block, not once an id.
    #[test]
    fn ids_never_repeat_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.redb");
        let mut seen = HashSet::new();
        let mut block_ends = HashSet::new();
        let mut last = 0;
        for _restart in 0..3 {
            let meta = RedbMeta::open(&path).unwrap();
            let ids = IdBlocks::new("repair", 16);
            for _ in 0..40 {
                let id = ids.next(&meta).unwrap();
                assert!(seen.insert(id), "id {id} handed out twice");
                assert!(id > last, "ids grow: {id} after {last}");
                last = id;
                // Recorded before use: the stored counter is past every id handed out.
                let end = stored(&meta);
                assert!(end > id && end <= id + 16, "block end {end} for id {id}");
                block_ends.insert(end);
            }
        }
        assert_eq!(seen.len(), 120);
        // 40 ids in blocks of 16 are 3 blocks a run (the rest of the last one skipped).
        assert_eq!(block_ends.len(), 9, "{block_ends:?}");
    }

    /// Ids taken from several threads at once are all distinct.
    #[test]
    fn concurrent_takers_get_distinct_ids() {
        let dir = tempfile::tempdir().unwrap();
        let meta = std::sync::Arc::new(RedbMeta::open(&dir.path().join("meta.redb")).unwrap());
        let ids = std::sync::Arc::new(IdBlocks::new("repair", 8));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (meta, ids) = (meta.clone(), ids.clone());
                std::thread::spawn(move || (0..50).map(|_| ids.next(meta.as_ref()).unwrap()).collect::<Vec<u64>>())
            })
            .collect();
        let all: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let distinct: HashSet<u64> = all.iter().copied().collect();
        assert_eq!(distinct.len(), 200);
    }
}
