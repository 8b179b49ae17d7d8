//! The metadata in one redb file: an embedded, crash-safe B-tree where every write is one
//! committed transaction, so a crash loses nothing that was acknowledged. The secondary
//! indexes ([`crate::meta_index`]) are tables of the same file, changed in the same
//! transaction as the records they index.

use crate::meta::{Change, MetaCounts, MetaStore, NodeRecord, ObjectRecord, PendingRepair, SpreadCount, StripeRecord, Txn};
use crate::meta_index::{self, IndexTables, NodeChunk, StripeEntries, BYTES_COUNTER};
use kintsugi_plan::NodeId;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
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

/// The layout of the tables; a file of an older one has its indexes built when opened.
const FORMAT: u64 = 2;
const FORMAT_COUNTER: &str = "meta.format";

/// redb's page cache: the default (1 GiB) would let a coordinator of a million objects
/// grow past a gigabyte; the indexes a request touches stay hot in far less.
const CACHE_BYTES: usize = 256 << 20;

/// Metadata in one redb file.
pub struct RedbMeta {
    db: Database,
}

fn e(x: impl std::fmt::Display) -> String {
    format!("metadata store: {x}")
}

use crate::meta::{decode, encode};

fn pending_key(stripe: u64, index: usize) -> String {
    format!("{stripe:016}.{index:04}")
}

impl RedbMeta {
    /// Opens (creating) the database file; builds the indexes of a file that lacks them.
    pub fn open(path: &Path) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|x| e(format!("cannot create {}: {x}", dir.display())))?;
        }
        let db =
            Database::builder().set_cache_size(CACHE_BYTES).create(path).map_err(|x| e(format!("cannot open {}: {x}", path.display())))?;
        let meta = RedbMeta { db };
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

    fn read<T>(&self, f: impl FnOnce(&redb::ReadTransaction) -> Result<T, redb::Error>) -> Result<T, String> {
        let r = self.db.begin_read().map_err(e)?;
        f(&r).map_err(e)
    }
}

/// Decodes every value of an iterator of table entries.
fn all<'a, K: redb::Key + 'static, T: DeserializeOwned>(
    it: impl Iterator<Item = Result<(redb::AccessGuard<'a, K>, redb::AccessGuard<'a, &'static [u8]>), redb::StorageError>>,
    limit: usize,
) -> Result<Vec<T>, String> {
    it.take(limit).map(|kv| kv.map_err(e).and_then(|(_, v)| decode(v.value()))).collect()
}

impl MetaStore for RedbMeta {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(OBJECTS).map_err(e)?;
        t.get(name).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn objects_from(&self, from: &str, inclusive: bool, limit: usize) -> Result<Vec<ObjectRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(OBJECTS).map_err(e)?;
        let start = if inclusive { Bound::Included(from) } else { Bound::Excluded(from) };
        all(t.range::<&str>((start, Bound::Unbounded)).map_err(e)?, limit)
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(STRIPES).map_err(e)?;
        t.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn stripes_of(&self, ids: &[u64]) -> Result<Vec<StripeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(STRIPES).map_err(e)?;
        ids.iter()
            .filter_map(|&id| t.get(id).map_err(e).map(|v| v.map(|v| decode(v.value()))).transpose())
            .map(|r| r.and_then(|x| x))
            .collect()
    }
    fn stripes_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(STRIPES).map_err(e)?;
        all(t.range((Bound::Excluded(after), Bound::Unbounded)).map_err(e)?, limit)
    }
    fn nodes(&self) -> Result<Vec<NodeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(NODES).map_err(e)?;
        all(t.iter().map_err(e)?, usize::MAX)
    }
    fn pending(&self) -> Result<Vec<PendingRepair>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(PENDING).map_err(e)?;
        all(t.iter().map_err(e)?, usize::MAX)
    }
    fn uploads(&self) -> Result<Vec<ObjectRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(UPLOADS).map_err(e)?;
        all(t.iter().map_err(e)?, usize::MAX)
    }
    fn garbage_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(GARBAGE).map_err(e)?;
        all(t.range((Bound::Excluded(after), Bound::Unbounded)).map_err(e)?, limit)
    }
    fn garbage_among(&self, ids: &[u64]) -> Result<HashSet<u64>, String> {
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
    fn node_chunks_from(&self, node: NodeId, after: Option<(u64, usize)>, limit: usize) -> Result<Vec<NodeChunk>, String> {
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
    fn bad_chunks(&self) -> Result<Vec<(u64, usize)>, String> {
        self.read(|r| {
            let t = r.open_table(BAD)?;
            t.iter()?.map(|kv| kv.map(|(k, _)| (k.value().0, k.value().1 as usize)).map_err(Into::into)).collect()
        })
    }
    fn open_stripes(&self, pg: Option<u32>) -> Result<Vec<StripeRecord>, String> {
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
    fn spread(&self) -> Result<Vec<SpreadCount>, String> {
        self.read(|r| {
            let t = r.open_table(SPREAD)?;
            t.iter()?.map(|kv| kv.map(|(k, v)| (k.value(), v.value())).map_err(Into::into)).collect()
        })
    }
    fn held_bytes(&self) -> Result<BTreeMap<NodeId, u64>, String> {
        self.read(|r| {
            let t = r.open_table(HELD)?;
            t.iter()?.map(|kv| kv.map(|(k, v)| (k.value(), v.value())).map_err(Into::into)).collect()
        })
    }
    fn stripe_objects(&self, id: u64) -> Result<Vec<String>, String> {
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
    fn counts(&self) -> Result<MetaCounts, String> {
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
    fn update(&self, f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), String>) -> Result<(), String> {
        let w = self.db.begin_write().map_err(e)?;
        {
            let mut t = RedbTxn::of(&w)?;
            // On error the transaction is dropped uncommitted: nothing of it is written.
            f(&mut t)?;
        }
        w.commit().map_err(e)
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
}

impl<'t> RedbTxn<'t> {
    /// Opens (creating) every table in write transaction `w`.
    fn of(w: &'t redb::WriteTransaction) -> Result<Self, String> {
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
        })
    }

    /// Empties the index tables and derives them again from every record; returns the
    /// stripes indexed.
    fn rebuild_indexes(&mut self) -> Result<usize, String> {
        self.node_chunks.retain(|_, _| false).map_err(e)?;
        self.bad.retain(|_, _| false).map_err(e)?;
        self.open.retain(|_, _| false).map_err(e)?;
        self.spread.retain(|_, _| false).map_err(e)?;
        self.held.retain(|_, _| false).map_err(e)?;
        self.stripe_objects.retain(|_, _| false).map_err(e)?;
        self.counters.remove(BYTES_COUNTER).map_err(e)?;
        let stripes: Vec<StripeRecord> = all(self.stripes.iter().map_err(e)?, usize::MAX)?;
        for s in &stripes {
            meta_index::reindex_stripe(self, s.id, None, Some(&StripeEntries::of(s)))?;
        }
        let objects: Vec<ObjectRecord> = all(self.objects.iter().map_err(e)?, usize::MAX)?;
        for o in &objects {
            meta_index::reindex_object(self, &o.name, None, Some(o))?;
        }
        Ok(stripes.len())
    }
}

impl IndexTables for RedbTxn<'_> {
    fn set_node_chunk(&mut self, node: NodeId, stripe: u64, index: u32, value: Option<u64>) -> Result<(), String> {
        match value {
            Some(v) => self.node_chunks.insert((node, stripe, index), v).map(drop),
            None => self.node_chunks.remove((node, stripe, index)).map(drop),
        }
        .map_err(e)
    }
    fn set_bad(&mut self, stripe: u64, index: u32, bad: bool) -> Result<(), String> {
        if bad { self.bad.insert((stripe, index), 0).map(drop) } else { self.bad.remove((stripe, index)).map(drop) }.map_err(e)
    }
    fn set_open(&mut self, pg: u32, stripe: u64, open: bool) -> Result<(), String> {
        if open { self.open.insert((pg, stripe), 0).map(drop) } else { self.open.remove((pg, stripe)).map(drop) }.map_err(e)
    }
    fn spread(&self, pair: (NodeId, NodeId)) -> Result<u64, String> {
        Ok(self.spread.get(pair).map_err(e)?.map_or(0, |v| v.value()))
    }
    fn set_spread(&mut self, pair: (NodeId, NodeId), v: u64) -> Result<(), String> {
        if v == 0 { self.spread.remove(pair).map(drop) } else { self.spread.insert(pair, v).map(drop) }.map_err(e)
    }
    fn held(&self, node: NodeId) -> Result<u64, String> {
        Ok(self.held.get(node).map_err(e)?.map_or(0, |v| v.value()))
    }
    fn set_held(&mut self, node: NodeId, v: u64) -> Result<(), String> {
        if v == 0 { self.held.remove(node).map(drop) } else { self.held.insert(node, v).map(drop) }.map_err(e)
    }
    fn set_stripe_object(&mut self, stripe: u64, name: &str, on: bool) -> Result<(), String> {
        if on { self.stripe_objects.insert((stripe, name), 0).map(drop) } else { self.stripe_objects.remove((stripe, name)).map(drop) }
            .map_err(e)
    }
    fn count(&self, name: &str) -> Result<u64, String> {
        Ok(self.counters.get(name).map_err(e)?.map_or(0, |v| v.value()))
    }
    fn set_count(&mut self, name: &str, v: u64) -> Result<(), String> {
        self.counters.insert(name, v).map(drop).map_err(e)
    }
}

impl Txn for RedbTxn<'_> {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, String> {
        self.objects.get(name).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn upload(&self, version: u64) -> Result<Option<ObjectRecord>, String> {
        self.uploads.get(version).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, String> {
        self.stripes.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn garbage(&self, id: u64) -> Result<Option<StripeRecord>, String> {
        self.garbage.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn node(&self, id: NodeId) -> Result<Option<NodeRecord>, String> {
        self.nodes.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn put(&mut self, c: Change) -> Result<(), String> {
        match c {
            Change::PutObject(o) => {
                let old = self.object(&o.name)?;
                meta_index::reindex_object(self, &o.name, old.as_ref(), Some(&o))?;
                self.objects.insert(o.name.as_str(), encode(&o).as_slice()).map(drop)
            }
            Change::DeleteObject(name) => {
                let old = self.object(&name)?;
                meta_index::reindex_object(self, &name, old.as_ref(), None)?;
                self.objects.remove(name.as_str()).map(drop)
            }
            Change::PutUpload(o) => self.uploads.insert(o.version, encode(&o).as_slice()).map(drop),
            Change::DeleteUpload(v) => self.uploads.remove(v).map(drop),
            Change::PutGarbage(s) => self.garbage.insert(s.id, encode(&s).as_slice()).map(drop),
            Change::DeleteGarbage(id) => self.garbage.remove(id).map(drop),
            Change::PutStripe(s) => {
                let old = self.stripe(s.id)?.map(|o| StripeEntries::of(&o));
                meta_index::reindex_stripe(self, s.id, old.as_ref(), Some(&StripeEntries::of(&s)))?;
                self.stripes.insert(s.id, encode(&s).as_slice()).map(drop)
            }
            Change::DeleteStripe(id) => {
                let old = self.stripe(id)?.map(|o| StripeEntries::of(&o));
                meta_index::reindex_stripe(self, id, old.as_ref(), None)?;
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
    fn counter(&self, name: &str) -> Result<Option<u64>, String> {
        Ok(self.counters.get(name).map_err(e)?.map(|v| v.value()))
    }
    fn next_id(&mut self, counter: &str) -> Result<u64, String> {
        let next = self.counters.get(counter).map_err(e)?.map_or(1, |v| v.value());
        self.counters.insert(counter, next + 1).map_err(e)?;
        Ok(next)
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::Piece;
    use kintsugi_codes::CodeSpec;
    use kintsugi_plan::Shape;
    use kintsugi_proto::LayoutSpec;
    use rand::{Rng, SeedableRng};

    #[test]
    fn records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.redb");
        {
            let m = RedbMeta::open(&path).unwrap();
            let code: CodeSpec = "rs:2,1".parse().unwrap();
            m.apply(vec![
                Change::PutObject(ObjectRecord {
                    name: "a".into(),
                    size: 5,
                    code,
                    committed: true,
                    stripes: vec![7],
                    version: 1,
                    created_ms: 0,
                    layout: LayoutSpec::Stripe,
                    extents: vec![],
                }),
                Change::PutStripe(StripeRecord {
                    crcs: vec![Some(1), None, None],
                    slot: Some(4),
                    small: true,
                    pieces: vec![vec![Piece { version: 3, offset: 10, len: 5, crc: Some(9) }]],
                    sealing: true,
                    class: 64,
                    ..StripeRecord::new(7, code, 5, 3, vec![1, 2, 3])
                }),
                Change::PutNode(NodeRecord { id: 2, addr: "x".into(), failed: true, boot: 9, token: "ab".into() }),
                Change::PutPending(PendingRepair { stripe: 7, index: 1, method: Shape::Ppr, slice: 4096 }),
            ])
            .unwrap();
            assert_eq!(m.next_id("stripe").unwrap(), 1);
            assert_eq!(m.next_id("stripe").unwrap(), 2);
        }
        let m = RedbMeta::open(&path).unwrap();
        assert_eq!(m.object("a").unwrap().unwrap().stripes, vec![7]);
        assert_eq!(m.stripe(7).unwrap().unwrap().nodes, vec![1, 2, 3]);
        assert!(m.nodes().unwrap()[0].failed);
        assert_eq!(m.pending().unwrap().len(), 1);
        assert_eq!(m.next_id("stripe").unwrap(), 3);
        m.apply(vec![Change::DeletePending { stripe: 7, index: 1 }]).unwrap();
        assert!(m.pending().unwrap().is_empty());
        assert!(m.object("zzz").unwrap().is_none());
    }

    /// Every index, as the store answers it.
    type Indexes = (
        BTreeMap<NodeId, Vec<NodeChunk>>,
        Vec<(u64, usize)>,
        Vec<u64>,
        Vec<((NodeId, NodeId), u64)>,
        BTreeMap<NodeId, u64>,
        BTreeMap<u64, Vec<String>>,
    );

    fn indexes(m: &RedbMeta, nodes: &[NodeId], stripes: &[u64]) -> Indexes {
        let mut open: Vec<u64> = m.open_stripes(None).unwrap().iter().map(|s| s.id).collect();
        open.sort_unstable();
        (
            nodes.iter().map(|&n| (n, m.node_chunks(n).unwrap())).collect(),
            m.bad_chunks().unwrap(),
            open,
            m.spread().unwrap(),
            m.held_bytes().unwrap(),
            stripes.iter().map(|&s| (s, m.stripe_objects(s).unwrap())).filter(|(_, v)| !v.is_empty()).collect(),
        )
    }

    /// The same indexes computed by brute force from every record.
    fn brute_force(m: &RedbMeta, nodes: &[NodeId], ids: &[u64]) -> Indexes {
        let stripes = m.stripes_from(0, usize::MAX).unwrap();
        let mut chunks: BTreeMap<NodeId, Vec<NodeChunk>> = nodes.iter().map(|&n| (n, vec![])).collect();
        let (mut bad, mut open) = (vec![], vec![]);
        let mut spread: BTreeMap<(NodeId, NodeId), u64> = BTreeMap::new();
        let mut held: BTreeMap<NodeId, u64> = BTreeMap::new();
        for s in &stripes {
            for (i, &n) in s.nodes.iter().enumerate() {
                let c = NodeChunk {
                    stripe: s.id,
                    index: i,
                    committed: s.crcs[i].is_some(),
                    bad: s.bad[i],
                    filler: s.is_filler(i),
                    whole: s.crcs.iter().all(|c| c.is_some()),
                    changed_ms: s.changed_ms,
                };
                chunks.entry(n).or_default().push(c);
                if s.bad[i] {
                    bad.push((s.id, i));
                }
                *spread.entry((n, n)).or_default() += 1;
                *held.entry(n).or_default() += s.chunk_len;
                for &b in &s.nodes[i + 1..] {
                    *spread.entry((n.min(b), n.max(b))).or_default() += 1;
                }
            }
            if s.open {
                open.push(s.id);
            }
        }
        let mut objects: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        let mut after = String::new();
        loop {
            let page = m.objects_from(&after, false, 7).unwrap();
            let Some(last) = page.last() else { break };
            after = last.name.clone();
            for o in page {
                for s in meta_index::object_stripes(&o) {
                    objects.entry(s).or_default().push(o.name.clone());
                }
            }
        }
        for v in objects.values_mut() {
            v.sort();
        }
        objects.retain(|s, _| ids.contains(s));
        (chunks, bad, open, spread.into_iter().collect(), held, objects)
    }

    #[test]
    fn indexes_match_the_records_after_random_changes_and_a_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.redb");
        let m = RedbMeta::open(&path).unwrap();
        let code: CodeSpec = "rs:3,2".parse().unwrap();
        let nodes: Vec<NodeId> = (0..8).collect();
        let ids: Vec<u64> = (1..=12).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..300 {
            let id = ids[rng.random_range(0..ids.len())];
            let change = match rng.random_range(0..10) {
                0..=4 => {
                    let mut pick = nodes.clone();
                    for i in 0..5 {
                        let j = rng.random_range(i..pick.len());
                        pick.swap(i, j);
                    }
                    let mut s = StripeRecord::new(id, code, 30, rng.random_range(1..100), pick[..5].to_vec());
                    for i in 0..5 {
                        s.crcs[i] = rng.random_bool(0.7).then_some(i as u32);
                        s.bad[i] = rng.random_bool(0.2);
                    }
                    s.open = rng.random_bool(0.3);
                    s.pg = rng.random_range(0..3);
                    if rng.random_bool(0.2) {
                        s.owners = vec![1, crate::meta::FILLER, 0, 0, 0];
                    }
                    s.changed_ms = round;
                    Change::PutStripe(s)
                }
                5 | 6 => Change::DeleteStripe(id),
                7 | 8 => {
                    let stripes = (0..rng.random_range(0..4)).map(|_| ids[rng.random_range(0..ids.len())]).collect();
                    Change::PutObject(ObjectRecord {
                        name: format!("o{}", rng.random_range(0..6)),
                        size: rng.random_range(0..1000),
                        code,
                        committed: true,
                        stripes,
                        version: round,
                        created_ms: 0,
                        layout: LayoutSpec::Stripe,
                        extents: vec![],
                    })
                }
                _ => Change::DeleteObject(format!("o{}", rng.random_range(0..6))),
            };
            m.apply(vec![change]).unwrap();
            assert_eq!(indexes(&m, &nodes, &ids), brute_force(&m, &nodes, &ids), "after change {round}");
        }
        let bytes: u64 = {
            let mut all = 0;
            let mut after = String::new();
            while let Some(last) = m.objects_from(&after, false, 100).unwrap().last().cloned() {
                all += m.objects_from(&after, false, 100).unwrap().iter().map(|o| o.size).sum::<u64>();
                after = last.name;
            }
            all
        };
        assert_eq!(m.counts().unwrap().bytes, bytes);
        let before = indexes(&m, &nodes, &ids);
        // A file from before the indexes: the format counter gone, the index tables empty.
        m.update(&mut |t| t.put(Change::SetCounter(FORMAT_COUNTER.into(), 1))).unwrap();
        {
            let w = m.db.begin_write().unwrap();
            {
                let mut t = RedbTxn::of(&w).unwrap();
                t.node_chunks.retain(|_, _| false).unwrap();
                t.spread.retain(|_, _| false).unwrap();
                t.stripe_objects.retain(|_, _| false).unwrap();
            }
            w.commit().unwrap();
        }
        drop(m);
        let m = RedbMeta::open(&path).unwrap();
        assert_eq!(indexes(&m, &nodes, &ids), before);
        assert_eq!(m.counts().unwrap().bytes, bytes);
    }
}
