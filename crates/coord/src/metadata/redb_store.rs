//! The metadata in one redb file: an embedded, crash-safe B-tree where every write is one
//! committed transaction, so a crash loses nothing that was acknowledged. The secondary
//! indexes ([`crate::metadata::index`]) are tables of the same file, changed in the same
//! transaction as the records they index.

use crate::metadata::index::{self, IndexTables, StripeEntries, BYTES_COUNTER};
use crate::metadata::records::{
    Change, MetaCounts, MetaStore, NodeChunk, NodeRecord, ObjectRecord, PendingRepair, SpreadCount, StripeRecord, Txn,
};
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::path::Path;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const STRIPES: TableDefinition<u64, &[u8]> = TableDefinition::new("stripes");
const NODES: TableDefinition<u32, &[u8]> = TableDefinition::new("nodes");
const PENDING: TableDefinition<&str, &[u8]> = TableDefinition::new("pending");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
const UPLOADS: TableDefinition<u64, &[u8]> = TableDefinition::new("uploads");
const GARBAGE: TableDefinition<u64, &[u8]> = TableDefinition::new("garbage");
// Indexes.
const NODE_CHUNKS: TableDefinition<(u32, u64, u32), u64> = TableDefinition::new("node_chunks");
const BAD: TableDefinition<(u64, u32), u8> = TableDefinition::new("bad_chunks");
const OPEN: TableDefinition<(u32, u64), u8> = TableDefinition::new("open_stripes");
const SPREAD: TableDefinition<(u32, u32), u64> = TableDefinition::new("spread");
const HELD: TableDefinition<u32, u64> = TableDefinition::new("held_bytes");
const STRIPE_OBJECTS: TableDefinition<(u64, &str), u8> = TableDefinition::new("stripe_objects");
/// Inline objects' bytes by version (`ObjectRecord::inline`).
const INLINE: TableDefinition<u64, &[u8]> = TableDefinition::new("inline");

/// The layout of the tables; a file of an older one has its indexes built when opened.
const FORMAT: u64 = 2;
const FORMAT_COUNTER: &str = "meta.format";

/// redb's page cache: the default (1 GiB) would let a coordinator of a million objects
/// grow past a gigabyte; the indexes a request touches stay hot in far less.
const CACHE_BYTES: usize = 256 << 20;

/// Metadata in one redb file.
pub struct RedbMeta {
    db: Database,
    /// Held by the update under way (see `update`).
    writer: std::sync::Mutex<()>,
    /// Updates share their fsyncs (see `group_commit`).
    group: group_commit::GroupCommit,
}

pub(crate) mod group_commit;

fn e(x: impl std::fmt::Display) -> WireError {
    crate::metadata::records::MetaError::Backend(x.to_string()).into()
}

use crate::metadata::records::{decode, encode};

fn pending_key(stripe: u64, index: usize) -> String {
    format!("{stripe:016}.{index:04}")
}

impl RedbMeta {
    /// Opens (creating) the database file; builds the indexes of a file that lacks them.
    pub fn open(path: &Path) -> Result<Self, WireError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|x| e(format!("cannot create {}: {x}", dir.display())))?;
        }
        let db =
            Database::builder().set_cache_size(CACHE_BYTES).create(path).map_err(|x| e(format!("cannot open {}: {x}", path.display())))?;
        let meta = RedbMeta { db, writer: Default::default(), group: Default::default() };
        // Create every table so reads never meet a missing one.
        let mut built = 0;
        let w = meta.db.begin_write().map_err(e)?;
        {
            let mut t = RedbTxn::of(&w)?;
            if t.counter(FORMAT_COUNTER)? != Some(FORMAT) {
                built = t.rebuild_indexes()?;
                t.put(Change::SetCounter(FORMAT_COUNTER.into(), FORMAT))?;
            }
        }
        w.commit().map_err(e)?;
        if built > 0 {
            tracing::info!("metadata: built the indexes of {built} stripe(s) of an older metadata file");
        }
        Ok(meta)
    }

    fn read<T>(&self, f: impl FnOnce(&redb::ReadTransaction) -> Result<T, redb::Error>) -> Result<T, WireError> {
        let r = self.begin_read()?;
        f(&r).map_err(e)
    }

    /// A read of durable state only (see `group_commit`).
    fn begin_read(&self) -> Result<redb::ReadTransaction, WireError> {
        let (r, seen) = self.group.begin(|| self.db.begin_read().map_err(e))?;
        if !self.group.settled(seen) {
            crate::metadata::waiting::may_wait(|| self.group.wait_durable(seen, || self.sync()))?;
        }
        Ok(r)
    }

    /// A durable commit, which persists every commit before it; returns the last commit it
    /// covers.
    fn sync(&self) -> Result<u64, WireError> {
        let _one = crate::metadata::waiting::lock_may_wait(&self.writer);
        let covered = self.group.last();
        let mut w = self.db.begin_write().map_err(e)?;
        w.set_durability(Durability::Immediate).map_err(e)?;
        w.commit().map_err(e)?;
        Ok(covered)
    }
}

/// Decodes every value of an iterator of table entries.
fn all<'a, K: redb::Key + 'static, T: DeserializeOwned>(
    it: impl Iterator<Item = Result<(redb::AccessGuard<'a, K>, redb::AccessGuard<'a, &'static [u8]>), redb::StorageError>>,
    limit: usize,
) -> Result<Vec<T>, WireError> {
    it.take(limit).map(|kv| kv.map_err(e).and_then(|(_, v)| decode(v.value()))).collect()
}

impl MetaStore for RedbMeta {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(OBJECTS).map_err(e)?;
        t.get(name).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn inline(&self, version: u64) -> Result<Option<Vec<u8>>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(INLINE).map_err(e)?;
        Ok(t.get(version).map_err(e)?.map(|v| v.value().to_vec()))
    }
    fn objects_from(&self, from: &str, inclusive: bool, limit: usize) -> Result<Vec<ObjectRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(OBJECTS).map_err(e)?;
        let start = if inclusive { Bound::Included(from) } else { Bound::Excluded(from) };
        all(t.range::<&str>((start, Bound::Unbounded)).map_err(e)?, limit)
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(STRIPES).map_err(e)?;
        t.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn stripes_of(&self, ids: &[u64]) -> Result<Vec<StripeRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(STRIPES).map_err(e)?;
        ids.iter()
            .filter_map(|&id| t.get(id).map_err(e).map(|v| v.map(|v| decode(v.value()))).transpose())
            .map(|r| r.and_then(|x| x))
            .collect()
    }
    fn stripes_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(STRIPES).map_err(e)?;
        all(t.range((Bound::Excluded(after), Bound::Unbounded)).map_err(e)?, limit)
    }
    fn nodes(&self) -> Result<Vec<NodeRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(NODES).map_err(e)?;
        all(t.iter().map_err(e)?, usize::MAX)
    }
    fn pending(&self) -> Result<Vec<PendingRepair>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(PENDING).map_err(e)?;
        all(t.iter().map_err(e)?, usize::MAX)
    }
    fn uploads(&self) -> Result<Vec<ObjectRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(UPLOADS).map_err(e)?;
        all(t.iter().map_err(e)?, usize::MAX)
    }
    fn garbage_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, WireError> {
        let r = self.begin_read()?;
        let t = r.open_table(GARBAGE).map_err(e)?;
        all(t.range((Bound::Excluded(after), Bound::Unbounded)).map_err(e)?, limit)
    }
    fn garbage_among(&self, ids: &[u64]) -> Result<HashSet<u64>, WireError> {
        self.read(|r| {
            let t = r.open_table(GARBAGE)?;
            let mut found = HashSet::new();
            for &id in ids {
                if t.get(id)?.is_some() {
                    found.insert(id);
                }
            }
            Ok(found)
        })
    }
    fn node_chunks_from(&self, node: NodeId, after: Option<(u64, usize)>, limit: usize) -> Result<Vec<NodeChunk>, WireError> {
        self.read(|r| {
            let t = r.open_table(NODE_CHUNKS)?;
            let mut out = Vec::new();
            let start = match after {
                Some((s, i)) => Bound::Excluded((node, s, i as u32)),
                None => Bound::Included((node, 0, 0)),
            };
            for kv in t.range((start, Bound::Included((node, u64::MAX, u32::MAX))))?.take(limit) {
                let (k, v) = kv?;
                let (_, stripe, index) = k.value();
                out.push(NodeChunk::unpack(stripe, index as usize, v.value()));
            }
            Ok(out)
        })
    }
    fn bad_chunks(&self) -> Result<Vec<(u64, usize)>, WireError> {
        self.read(|r| {
            let t = r.open_table(BAD)?;
            t.iter()?.map(|kv| kv.map(|(k, _)| (k.value().0, k.value().1 as usize)).map_err(Into::into)).collect()
        })
    }
    fn open_stripes(&self, pg: Option<u32>) -> Result<Vec<StripeRecord>, WireError> {
        let ids: Vec<u64> = self.read(|r| {
            let t = r.open_table(OPEN)?;
            let range = match pg {
                Some(pg) => t.range((pg, 0)..=(pg, u64::MAX))?,
                None => t.range::<(u32, u64)>(..)?,
            };
            range.map(|kv| kv.map(|(k, _)| k.value().1).map_err(Into::into)).collect()
        })?;
        self.stripes_of(&ids)
    }
    fn spread(&self) -> Result<Vec<SpreadCount>, WireError> {
        self.read(|r| {
            let t = r.open_table(SPREAD)?;
            t.iter()?.map(|kv| kv.map(|(k, v)| (k.value(), v.value())).map_err(Into::into)).collect()
        })
    }
    fn held_bytes(&self) -> Result<BTreeMap<NodeId, u64>, WireError> {
        self.read(|r| {
            let t = r.open_table(HELD)?;
            t.iter()?.map(|kv| kv.map(|(k, v)| (k.value(), v.value())).map_err(Into::into)).collect()
        })
    }
    fn stripe_objects(&self, id: u64) -> Result<Vec<String>, WireError> {
        self.read(|r| {
            let t = r.open_table(STRIPE_OBJECTS)?;
            let mut names = Vec::new();
            for kv in t.range::<(u64, &str)>((id, "")..)? {
                let (k, _) = kv?;
                let (sid, name) = k.value();
                if sid != id {
                    break;
                }
                names.push(name.to_string());
            }
            Ok(names)
        })
    }
    fn counts(&self) -> Result<MetaCounts, WireError> {
        self.read(|r| {
            Ok(MetaCounts {
                objects: r.open_table(OBJECTS)?.len()?,
                bytes: r.open_table(COUNTERS)?.get(BYTES_COUNTER)?.map_or(0, |v| v.value()),
                stripes: r.open_table(STRIPES)?.len()?,
                uploads: r.open_table(UPLOADS)?.len()?,
                garbage: r.open_table(GARBAGE)?.len()?,
                pending: r.open_table(PENDING)?.len()?,
            })
        })
    }
    fn update(&self, f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), WireError>) -> Result<(), WireError> {
        // redb has one writer at a time; its turn is taken here first, so waiting for it
        // never holds an async worker.
        let seq = {
            let _one = self.group.turn(|| crate::metadata::waiting::lock_may_wait(&self.writer));
            let _updating = group_commit::Updating::start();
            let mut w = self.db.begin_write().map_err(e)?;
            w.set_durability(Durability::None).map_err(e)?;
            {
                let mut t = RedbTxn::of(&w)?;
                // On error the transaction is dropped uncommitted: nothing of it is written.
                f(&mut t)?;
            }
            self.group.committed(|| w.commit().map_err(e))?
        };
        // Acknowledged only once durable; the sync is shared with every update meanwhile.
        crate::metadata::waiting::may_wait(|| self.group.wait_durable(seq, || self.sync()))
    }
}

/// The tables of one write transaction.
struct RedbTxn<'t> {
    objects: redb::Table<'t, &'static str, &'static [u8]>,
    stripes: redb::Table<'t, u64, &'static [u8]>,
    nodes: redb::Table<'t, u32, &'static [u8]>,
    pending: redb::Table<'t, &'static str, &'static [u8]>,
    counters: redb::Table<'t, &'static str, u64>,
    uploads: redb::Table<'t, u64, &'static [u8]>,
    garbage: redb::Table<'t, u64, &'static [u8]>,
    node_chunks: redb::Table<'t, (u32, u64, u32), u64>,
    bad: redb::Table<'t, (u64, u32), u8>,
    open: redb::Table<'t, (u32, u64), u8>,
    spread: redb::Table<'t, (u32, u32), u64>,
    held: redb::Table<'t, u32, u64>,
    stripe_objects: redb::Table<'t, (u64, &'static str), u8>,
    inline: redb::Table<'t, u64, &'static [u8]>,
}

impl<'t> RedbTxn<'t> {
    /// Opens (creating) every table in write transaction `w`.
    fn of(w: &'t redb::WriteTransaction) -> Result<Self, WireError> {
        Ok(RedbTxn {
            objects: w.open_table(OBJECTS).map_err(e)?,
            stripes: w.open_table(STRIPES).map_err(e)?,
            nodes: w.open_table(NODES).map_err(e)?,
            pending: w.open_table(PENDING).map_err(e)?,
            counters: w.open_table(COUNTERS).map_err(e)?,
            uploads: w.open_table(UPLOADS).map_err(e)?,
            garbage: w.open_table(GARBAGE).map_err(e)?,
            node_chunks: w.open_table(NODE_CHUNKS).map_err(e)?,
            bad: w.open_table(BAD).map_err(e)?,
            open: w.open_table(OPEN).map_err(e)?,
            spread: w.open_table(SPREAD).map_err(e)?,
            held: w.open_table(HELD).map_err(e)?,
            stripe_objects: w.open_table(STRIPE_OBJECTS).map_err(e)?,
            inline: w.open_table(INLINE).map_err(e)?,
        })
    }

    /// Empties the index tables and derives them again from every record; returns the
    /// stripes indexed.
    fn rebuild_indexes(&mut self) -> Result<usize, WireError> {
        self.node_chunks.retain(|_, _| false).map_err(e)?;
        self.bad.retain(|_, _| false).map_err(e)?;
        self.open.retain(|_, _| false).map_err(e)?;
        self.spread.retain(|_, _| false).map_err(e)?;
        self.held.retain(|_, _| false).map_err(e)?;
        self.stripe_objects.retain(|_, _| false).map_err(e)?;
        self.counters.remove(BYTES_COUNTER).map_err(e)?;
        let stripes: Vec<StripeRecord> = all(self.stripes.iter().map_err(e)?, usize::MAX)?;
        for s in &stripes {
            index::reindex_stripe(self, s.id, None, Some(&StripeEntries::of(s)))?;
        }
        let objects: Vec<ObjectRecord> = all(self.objects.iter().map_err(e)?, usize::MAX)?;
        for o in &objects {
            index::reindex_object(self, &o.name, None, Some(o))?;
        }
        Ok(stripes.len())
    }
}

impl IndexTables for RedbTxn<'_> {
    fn set_node_chunk(&mut self, node: NodeId, stripe: u64, index: u32, value: Option<u64>) -> Result<(), WireError> {
        match value {
            Some(v) => self.node_chunks.insert((node, stripe, index), v).map(drop),
            None => self.node_chunks.remove((node, stripe, index)).map(drop),
        }
        .map_err(e)
    }
    fn set_bad(&mut self, stripe: u64, index: u32, bad: bool) -> Result<(), WireError> {
        if bad { self.bad.insert((stripe, index), 0).map(drop) } else { self.bad.remove((stripe, index)).map(drop) }.map_err(e)
    }
    fn set_open(&mut self, pg: u32, stripe: u64, open: bool) -> Result<(), WireError> {
        if open { self.open.insert((pg, stripe), 0).map(drop) } else { self.open.remove((pg, stripe)).map(drop) }.map_err(e)
    }
    fn spread(&self, pair: (NodeId, NodeId)) -> Result<u64, WireError> {
        Ok(self.spread.get(pair).map_err(e)?.map_or(0, |v| v.value()))
    }
    fn set_spread(&mut self, pair: (NodeId, NodeId), v: u64) -> Result<(), WireError> {
        if v == 0 { self.spread.remove(pair).map(drop) } else { self.spread.insert(pair, v).map(drop) }.map_err(e)
    }
    fn held(&self, node: NodeId) -> Result<u64, WireError> {
        Ok(self.held.get(node).map_err(e)?.map_or(0, |v| v.value()))
    }
    fn set_held(&mut self, node: NodeId, v: u64) -> Result<(), WireError> {
        if v == 0 { self.held.remove(node).map(drop) } else { self.held.insert(node, v).map(drop) }.map_err(e)
    }
    fn set_stripe_object(&mut self, stripe: u64, name: &str, on: bool) -> Result<(), WireError> {
        if on { self.stripe_objects.insert((stripe, name), 0).map(drop) } else { self.stripe_objects.remove((stripe, name)).map(drop) }
            .map_err(e)
    }
    fn count(&self, name: &str) -> Result<u64, WireError> {
        Ok(self.counters.get(name).map_err(e)?.map_or(0, |v| v.value()))
    }
    fn set_count(&mut self, name: &str, v: u64) -> Result<(), WireError> {
        self.counters.insert(name, v).map(drop).map_err(e)
    }
}

impl Txn for RedbTxn<'_> {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, WireError> {
        self.objects.get(name).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn upload(&self, version: u64) -> Result<Option<ObjectRecord>, WireError> {
        self.uploads.get(version).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, WireError> {
        self.stripes.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn garbage(&self, id: u64) -> Result<Option<StripeRecord>, WireError> {
        self.garbage.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn node(&self, id: NodeId) -> Result<Option<NodeRecord>, WireError> {
        self.nodes.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn put(&mut self, c: Change) -> Result<(), WireError> {
        match c {
            Change::PutObject(o) => {
                let old = self.object(&o.name)?;
                index::reindex_object(self, &o.name, old.as_ref(), Some(&o))?;
                self.objects.insert(o.name.as_str(), encode(&o).as_slice()).map(drop)
            }
            Change::DeleteObject(name) => {
                let old = self.object(&name)?;
                index::reindex_object(self, &name, old.as_ref(), None)?;
                self.objects.remove(name.as_str()).map(drop)
            }
            Change::PutInline { version, data } => self.inline.insert(version, data.as_slice()).map(drop),
            Change::DeleteInline(version) => self.inline.remove(version).map(drop),
            Change::PutUpload(o) => self.uploads.insert(o.version, encode(&o).as_slice()).map(drop),
            Change::DeleteUpload(v) => self.uploads.remove(v).map(drop),
            Change::PutGarbage(s) => self.garbage.insert(s.id, encode(&s).as_slice()).map(drop),
            Change::DeleteGarbage(id) => self.garbage.remove(id).map(drop),
            Change::PutStripe(s) => {
                let old = self.stripe(s.id)?.map(|o| StripeEntries::of(&o));
                index::reindex_stripe(self, s.id, old.as_ref(), Some(&StripeEntries::of(&s)))?;
                self.stripes.insert(s.id, encode(&s).as_slice()).map(drop)
            }
            Change::DeleteStripe(id) => {
                let old = self.stripe(id)?.map(|o| StripeEntries::of(&o));
                index::reindex_stripe(self, id, old.as_ref(), None)?;
                self.stripes.remove(id).map(drop)
            }
            Change::PutNode(n) => self.nodes.insert(n.id, encode(&n).as_slice()).map(drop),
            Change::DeleteNode(id) => self.nodes.remove(id).map(drop),
            Change::PutPending(p) => self.pending.insert(pending_key(p.stripe, p.index).as_str(), encode(&p).as_slice()).map(drop),
            Change::DeletePending { stripe, index } => self.pending.remove(pending_key(stripe, index).as_str()).map(drop),
            Change::SetCounter(name, v) => self.counters.insert(name.as_str(), v).map(drop),
        }
        .map_err(e)
    }
    fn counter(&self, name: &str) -> Result<Option<u64>, WireError> {
        Ok(self.counters.get(name).map_err(e)?.map(|v| v.value()))
    }
    fn next_id(&mut self, counter: &str) -> Result<u64, WireError> {
        let next = self.counters.get(counter).map_err(e)?.map_or(1, |v| v.value());
        self.counters.insert(counter, next + 1).map_err(e)?;
        Ok(next)
    }
}
#[cfg(test)]
mod tests;
