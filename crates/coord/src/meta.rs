//! Cluster metadata: objects -> stripes -> chunk locations, nodes, and repairs in progress.
//! [`MetaStore`] is the interface (a distributed store can replace it later); [`RedbMeta`]
//! keeps it in redb, an embedded crash-safe B-tree (every write is one committed
//! transaction, so a crash loses nothing that was acknowledged).

use kintsugi_codes::CodeSpec;
use kintsugi_plan::{NodeId, Shape};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectRecord {
    pub name: String,
    pub size: u64,
    pub code: CodeSpec,
    pub committed: bool,
    pub stripes: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StripeRecord {
    pub id: u64,
    pub code: CodeSpec,
    pub data_len: u64,
    pub chunk_len: u64,
    /// Node holding each chunk.
    pub nodes: Vec<NodeId>,
    /// CRC of each chunk, known once the object is committed.
    pub crcs: Vec<Option<u32>>,
    /// Chunks reported bad (corrupt or missing) and not yet repaired.
    pub bad: Vec<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub id: NodeId,
    pub addr: String,
    /// Stopped by `fail`, or found dead; it takes a restart to come back.
    pub failed: bool,
    /// The process (boot id) that was failed: its late heartbeats are ignored.
    #[serde(default)]
    pub boot: u64,
}

/// A lost chunk whose repair was requested and has not finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingRepair {
    pub stripe: u64,
    pub index: usize,
    pub method: Shape,
    pub slice: u64,
}

/// What the coordinator needs from a metadata store.
pub trait MetaStore: Send + Sync {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, String>;
    fn objects(&self) -> Result<Vec<ObjectRecord>, String>;
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, String>;
    fn stripes(&self) -> Result<Vec<StripeRecord>, String>;
    fn nodes(&self) -> Result<Vec<NodeRecord>, String>;
    fn pending(&self) -> Result<Vec<PendingRepair>, String>;
    /// Applies a batch of changes atomically.
    fn apply(&self, changes: Vec<Change>) -> Result<(), String>;
    /// A fresh id from a persistent counter.
    fn next_id(&self, counter: &str) -> Result<u64, String>;
}

/// One change in a batch.
#[derive(Clone, Debug)]
pub enum Change {
    PutObject(ObjectRecord),
    PutStripe(StripeRecord),
    DeleteStripe(u64),
    PutNode(NodeRecord),
    PutPending(PendingRepair),
    DeletePending { stripe: u64, index: usize },
}

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const STRIPES: TableDefinition<u64, &[u8]> = TableDefinition::new("stripes");
const NODES: TableDefinition<u32, &[u8]> = TableDefinition::new("nodes");
const PENDING: TableDefinition<&str, &[u8]> = TableDefinition::new("pending");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// Metadata in one redb file.
pub struct RedbMeta {
    db: Database,
}

fn e(x: impl std::fmt::Display) -> String {
    format!("metadata store: {x}")
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|x| e(format!("corrupt record: {x}")))
}

fn pending_key(stripe: u64, index: usize) -> String {
    format!("{stripe:016}.{index:04}")
}

impl RedbMeta {
    /// Opens (creating) the database file.
    pub fn open(path: &Path) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|x| e(format!("cannot create {}: {x}", dir.display())))?;
        }
        let db = Database::create(path).map_err(|x| e(format!("cannot open {}: {x}", path.display())))?;
        // Create every table so reads never meet a missing one.
        let w = db.begin_write().map_err(e)?;
        {
            w.open_table(OBJECTS).map_err(e)?;
            w.open_table(STRIPES).map_err(e)?;
            w.open_table(NODES).map_err(e)?;
            w.open_table(PENDING).map_err(e)?;
            w.open_table(COUNTERS).map_err(e)?;
        }
        w.commit().map_err(e)?;
        Ok(RedbMeta { db })
    }
}

impl MetaStore for RedbMeta {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(OBJECTS).map_err(e)?;
        t.get(name).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn objects(&self) -> Result<Vec<ObjectRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(OBJECTS).map_err(e)?;
        t.iter().map_err(e)?.map(|kv| kv.map_err(e).and_then(|(_, v)| decode(v.value()))).collect()
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(STRIPES).map_err(e)?;
        t.get(id).map_err(e)?.map(|v| decode(v.value())).transpose()
    }
    fn stripes(&self) -> Result<Vec<StripeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(STRIPES).map_err(e)?;
        t.iter().map_err(e)?.map(|kv| kv.map_err(e).and_then(|(_, v)| decode(v.value()))).collect()
    }
    fn nodes(&self) -> Result<Vec<NodeRecord>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(NODES).map_err(e)?;
        t.iter().map_err(e)?.map(|kv| kv.map_err(e).and_then(|(_, v)| decode(v.value()))).collect()
    }
    fn pending(&self) -> Result<Vec<PendingRepair>, String> {
        let r = self.db.begin_read().map_err(e)?;
        let t = r.open_table(PENDING).map_err(e)?;
        t.iter().map_err(e)?.map(|kv| kv.map_err(e).and_then(|(_, v)| decode(v.value()))).collect()
    }
    fn apply(&self, changes: Vec<Change>) -> Result<(), String> {
        let w = self.db.begin_write().map_err(e)?;
        {
            let mut objects = w.open_table(OBJECTS).map_err(e)?;
            let mut stripes = w.open_table(STRIPES).map_err(e)?;
            let mut nodes = w.open_table(NODES).map_err(e)?;
            let mut pending = w.open_table(PENDING).map_err(e)?;
            for c in changes {
                match c {
                    Change::PutObject(o) => {
                        objects.insert(o.name.as_str(), json(&o).as_slice()).map_err(e)?;
                    }
                    Change::PutStripe(s) => {
                        stripes.insert(s.id, json(&s).as_slice()).map_err(e)?;
                    }
                    Change::DeleteStripe(id) => {
                        stripes.remove(id).map_err(e)?;
                    }
                    Change::PutNode(n) => {
                        nodes.insert(n.id, json(&n).as_slice()).map_err(e)?;
                    }
                    Change::PutPending(p) => {
                        pending.insert(pending_key(p.stripe, p.index).as_str(), json(&p).as_slice()).map_err(e)?;
                    }
                    Change::DeletePending { stripe, index } => {
                        pending.remove(pending_key(stripe, index).as_str()).map_err(e)?;
                    }
                }
            }
        }
        w.commit().map_err(e)
    }
    fn next_id(&self, counter: &str) -> Result<u64, String> {
        let w = self.db.begin_write().map_err(e)?;
        let id = {
            let mut t = w.open_table(COUNTERS).map_err(e)?;
            let next = t.get(counter).map_err(e)?.map_or(1, |v| v.value());
            t.insert(counter, next + 1).map_err(e)?;
            next
        };
        w.commit().map_err(e)?;
        Ok(id)
    }
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.redb");
        {
            let m = RedbMeta::open(&path).unwrap();
            let code: CodeSpec = "rs:2,1".parse().unwrap();
            m.apply(vec![
                Change::PutObject(ObjectRecord { name: "a".into(), size: 5, code, committed: true, stripes: vec![7] }),
                Change::PutStripe(StripeRecord {
                    id: 7,
                    code,
                    data_len: 5,
                    chunk_len: 3,
                    nodes: vec![1, 2, 3],
                    crcs: vec![Some(1), None, None],
                    bad: vec![false; 3],
                }),
                Change::PutNode(NodeRecord { id: 2, addr: "x".into(), failed: true, boot: 9 }),
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
}
