//! The metadata in etcd, for a cluster with several coordinators: records and indexes are
//! keys under one prefix, and every read-modify-write is one etcd transaction, guarded by the
//! leader key ([`crate::metadata::leader`]): a transaction from a coordinator that does not
//! hold the key fails, so two coordinators never both change the metadata.
//!
//! The leader is the only writer, and its updates run one at a time (as redb's write
//! transactions do): what a transaction reads is what the last one left, whether etcd
//! has taken it yet or it is still in a batch on its way (`pipeline`). The small, hot
//! tables (counters, the placement counters every new stripe changes: spread and held
//! bytes, and the node records every heartbeat reads) are kept in memory, loaded when the
//! store is opened and changed only after etcd took the transaction that changed them.
//!
//! Keys (after the prefix): `o/NAME` objects, `s/ID` stripes, `n/ID` nodes, `p/ID.INDEX`
//! pending repairs, `u/VERSION` uploads, `g/ID` garbage, `c/NAME` counters, `d/VERSION`
//! the bytes of objects kept inline (when `inline_objects` is on), and the indexes
//! under `i/` (`nc/NODE/STRIPE/INDEX`, `bad/STRIPE/INDEX`, `open/PG/STRIPE`, `sp/A/B`,
//! `held/NODE`, `so/STRIPE/NAME`); numbers in fixed-width hex so keys sort as numbers.

use crate::metadata::etcd_http::{prefix_end, Cmp, Etcd, Kv, Op};
use crate::metadata::index::{self, IndexTables, StripeEntries};
use crate::metadata::records::{
    decode, encode, Change, MetaCounts, MetaStore, NodeChunk, NodeRecord, ObjectRecord, PendingRepair, SpreadCount, StripeRecord, Txn,
};
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

/// A key (relative to the table scanned) and its value.
type Pair = (Vec<u8>, Vec<u8>);

/// Records and index entries of a batch read, per transaction.
const BATCH: usize = 256;

/// Metadata in etcd.
pub struct EtcdMeta {
    etcd: Arc<Etcd>,
    prefix: Vec<u8>,
    /// The leader key's value this coordinator holds: every transaction requires it.
    fence: Option<Cmp>,
    /// Counters, spread and held bytes.
    hot: RwLock<HashMap<Vec<u8>, Vec<u8>>>,
    /// Held by the one update running.
    writer: Mutex<()>,
    /// A transaction's outcome is unknown (etcd did not answer; it may still apply it): the
    /// in-memory tables are read again from etcd before the next update.
    stale: std::sync::atomic::AtomicBool,
    /// Updates' writes on their way to etcd, a batch per transaction (see `pipeline`).
    pipeline: pipeline::Pipeline,
    /// What this leader wrote last (see `recent`).
    recent: recent::Recent,
}

mod pipeline;
mod recent;

fn hex8(x: u32) -> String {
    format!("{x:08x}")
}

fn hex16(x: u64) -> String {
    format!("{x:016x}")
}

fn parse_hex(s: &[u8]) -> Result<u64, WireError> {
    u64::from_str_radix(std::str::from_utf8(s).unwrap_or(""), 16)
        .map_err(|_| crate::metadata::records::MetaError::Corrupt(format!("bad key part {s:?}")).into())
}

fn number(v: &[u8]) -> u64 {
    std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The tables kept in memory: small, and read by every request or heartbeat.
const HOT: [&[u8]; 4] = [b"c/", b"i/sp/", b"i/held/", b"n/"];

/// Whether the key is one of the tables kept in memory.
fn hot(rel: &[u8]) -> bool {
    HOT.iter().any(|t| rel.starts_with(t))
}

/// The members and key prefix of `etcd://HOST:PORT,HOST:PORT/PREFIX` (the prefix names a
/// cluster, so several can share one etcd; keys go under `/kintsugi/PREFIX/`).
pub fn parse_url(url: &str) -> Result<(Vec<String>, String), WireError> {
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| WireError::bad_request(format!("metadata '{url}': expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")))?;
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let endpoints: Vec<String> = hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(String::from).collect();
    if endpoints.is_empty() || endpoints.iter().any(|h| !h.contains(':')) {
        return Err(WireError::bad_request(format!("metadata '{url}': every etcd member is HOST:PORT")));
    }
    let path = path.trim_matches('/');
    Ok((endpoints, if path.is_empty() { "/kintsugi/".into() } else { format!("/kintsugi/{path}/") }))
}

/// The tables kept in memory, as etcd holds them.
fn load_hot(etcd: &Etcd, prefix: &[u8]) -> Result<HashMap<Vec<u8>, Vec<u8>>, WireError> {
    let mut hot = HashMap::new();
    for table in HOT {
        for kv in etcd.scan(&[prefix, table].concat(), 4096)? {
            hot.insert(kv.key[prefix.len()..].to_vec(), kv.value);
        }
    }
    Ok(hot)
}

impl EtcdMeta {
    /// The store under `prefix` of `etcd`; `fence`: the leader key this coordinator holds.
    pub fn open(etcd: Arc<Etcd>, prefix: &str, fence: Option<Cmp>) -> Result<Self, WireError> {
        let prefix = prefix.as_bytes().to_vec();
        let hot = RwLock::new(load_hot(&etcd, &prefix)?);
        Ok(EtcdMeta {
            etcd,
            prefix,
            fence,
            hot,
            writer: Mutex::new(()),
            stale: Default::default(),
            pipeline: Default::default(),
            recent: Default::default(),
        })
    }

    fn key(&self, rel: &str) -> Vec<u8> {
        [&self.prefix[..], rel.as_bytes()].concat()
    }

    fn get<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Result<Option<T>, WireError> {
        self.etcd.get(&self.key(rel))?.map(|kv| decode(&kv.value)).transpose()
    }

    /// Every pair under `rel`, keys relative to it.
    fn scan(&self, rel: &str) -> Result<Vec<Pair>, WireError> {
        let p = self.key(rel);
        Ok(self.etcd.scan(&p, 4096)?.into_iter().map(|kv| (kv.key[p.len()..].to_vec(), kv.value)).collect())
    }

    fn records<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Result<Vec<T>, WireError> {
        self.scan(rel)?.iter().map(|(_, v)| decode(v)).collect()
    }

    /// Up to `limit` records from key `from` (relative) up to the end of table `table`.
    fn range_records<T: serde::de::DeserializeOwned>(&self, table: &str, from: &[u8], limit: usize) -> Result<Vec<T>, WireError> {
        let end = prefix_end(&self.key(table));
        let (kvs, _) = self.etcd.range(&[&self.prefix[..], from].concat(), Some(&end), limit)?;
        kvs.iter().map(|kv| decode(&kv.value)).collect()
    }

    /// Several keys in one round trip (a transaction of reads).
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Kv>>, WireError> {
        let mut out = Vec::with_capacity(keys.len());
        for part in keys.chunks(BATCH) {
            let ops: Vec<Op> = part.iter().map(|k| Op::Range { key: k.clone(), end: None }).collect();
            let (_, ranges) = self.etcd.txn(&[], &ops, &[])?;
            out.extend(ranges.into_iter().map(|r| r.into_iter().next()));
        }
        Ok(out)
    }

    fn hot_number(&self, rel: &str) -> u64 {
        self.hot.read().expect("hot lock").get(rel.as_bytes()).map_or(0, |v| number(v))
    }
}

impl MetaStore for EtcdMeta {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, WireError> {
        self.get(&format!("o/{name}"))
    }
    fn inline(&self, version: u64) -> Result<Option<Vec<u8>>, WireError> {
        Ok(self.etcd.get(&self.key(&format!("d/{}", hex16(version))))?.map(|kv| kv.value))
    }
    fn objects_from(&self, from: &str, inclusive: bool, limit: usize) -> Result<Vec<ObjectRecord>, WireError> {
        let mut start = format!("o/{from}").into_bytes();
        if !inclusive {
            start.push(0);
        }
        self.range_records("o/", &start, limit)
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, WireError> {
        self.get(&format!("s/{}", hex16(id)))
    }
    fn stripes_of(&self, ids: &[u64]) -> Result<Vec<StripeRecord>, WireError> {
        let keys: Vec<Vec<u8>> = ids.iter().map(|id| self.key(&format!("s/{}", hex16(*id)))).collect();
        self.get_many(&keys)?.into_iter().flatten().map(|kv| decode(&kv.value)).collect()
    }
    fn stripes_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, WireError> {
        if after == u64::MAX {
            return Ok(Vec::new());
        }
        self.range_records("s/", format!("s/{}", hex16(after + 1)).as_bytes(), limit)
    }
    fn nodes(&self) -> Result<Vec<NodeRecord>, WireError> {
        let hot = self.hot.read().expect("hot lock");
        let mut nodes: Vec<(&Vec<u8>, &Vec<u8>)> = hot.iter().filter(|(k, _)| k.starts_with(b"n/")).collect();
        nodes.sort();
        nodes.into_iter().map(|(_, v)| decode(v)).collect()
    }
    fn pending(&self) -> Result<Vec<PendingRepair>, WireError> {
        self.records("p/")
    }
    fn uploads(&self) -> Result<Vec<ObjectRecord>, WireError> {
        self.records("u/")
    }
    fn garbage_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, WireError> {
        if after == u64::MAX {
            return Ok(Vec::new());
        }
        self.range_records("g/", format!("g/{}", hex16(after + 1)).as_bytes(), limit)
    }
    fn garbage_among(&self, ids: &[u64]) -> Result<HashSet<u64>, WireError> {
        let keys: Vec<Vec<u8>> = ids.iter().map(|id| self.key(&format!("g/{}", hex16(*id)))).collect();
        Ok(ids.iter().zip(self.get_many(&keys)?).filter(|(_, kv)| kv.is_some()).map(|(id, _)| *id).collect())
    }
    fn node_chunks_from(&self, node: NodeId, after: Option<(u64, usize)>, limit: usize) -> Result<Vec<NodeChunk>, WireError> {
        let table = format!("i/nc/{}/", hex8(node));
        let from = match after {
            Some((s, i)) => format!("{table}{}/{}\0", hex16(s), hex8(i as u32)),
            None => table.clone(),
        };
        let end = prefix_end(&self.key(&table));
        let (kvs, _) = self.etcd.range(&self.key(&from), Some(&end), limit)?;
        let skip = self.prefix.len() + table.len();
        kvs.iter()
            .map(|kv| {
                let rest = &kv.key[skip..];
                let (stripe, index) = (parse_hex(&rest[..16])?, parse_hex(&rest[17..])?);
                Ok(NodeChunk::unpack(stripe, index as usize, number(&kv.value)))
            })
            .collect()
    }
    fn bad_chunks(&self) -> Result<Vec<(u64, usize)>, WireError> {
        self.scan("i/bad/")?.iter().map(|(k, _)| Ok((parse_hex(&k[..16])?, parse_hex(&k[17..])? as usize))).collect()
    }
    fn open_stripes(&self, pg: Option<u32>) -> Result<Vec<StripeRecord>, WireError> {
        let table = match pg {
            Some(pg) => format!("i/open/{}/", hex8(pg)),
            None => "i/open/".to_string(),
        };
        let ids: Vec<u64> = self.scan(&table)?.iter().map(|(k, _)| parse_hex(&k[k.len() - 16..])).collect::<Result<_, _>>()?;
        self.stripes_of(&ids)
    }
    fn spread(&self) -> Result<Vec<SpreadCount>, WireError> {
        let hot = self.hot.read().expect("hot lock");
        let mut out: Vec<SpreadCount> = hot
            .iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix(b"i/sp/")?;
                Some(((parse_hex(&rest[..8]).ok()? as NodeId, parse_hex(&rest[9..]).ok()? as NodeId), number(v)))
            })
            .collect();
        out.sort_unstable();
        Ok(out)
    }
    fn held_bytes(&self) -> Result<BTreeMap<NodeId, u64>, WireError> {
        let hot = self.hot.read().expect("hot lock");
        Ok(hot.iter().filter_map(|(k, v)| Some((parse_hex(k.strip_prefix(b"i/held/")?).ok()? as NodeId, number(v)))).collect())
    }
    fn stripe_objects(&self, id: u64) -> Result<Vec<String>, WireError> {
        Ok(self.scan(&format!("i/so/{}/", hex16(id)))?.into_iter().map(|(k, _)| String::from_utf8_lossy(&k).into_owned()).collect())
    }
    fn counts(&self) -> Result<MetaCounts, WireError> {
        Ok(MetaCounts {
            objects: self.hot_number("c/count.objects"),
            bytes: self.hot_number(&format!("c/{}", index::BYTES_COUNTER)),
            stripes: self.hot_number("c/count.stripes"),
            uploads: self.hot_number("c/count.uploads"),
            garbage: self.hot_number("c/count.garbage"),
            pending: self.hot_number("c/count.pending"),
        })
    }
    fn update(&self, f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), WireError>) -> Result<(), WireError> {
        crate::metadata::waiting::may_wait(|| self.update_now(f))
    }
}

impl EtcdMeta {
    /// One update: run in the writer's turn, its writes then wait for their batch to land
    /// (see `pipeline`) while the next update runs.
    fn update_now(&self, f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), WireError>) -> Result<(), WireError> {
        let batch = {
            let _one = self.writer.lock().expect("writer lock");
            if self.stale.load(std::sync::atomic::Ordering::SeqCst) {
                *self.hot.write().expect("hot lock") = load_hot(&self.etcd, &self.prefix)?;
                self.stale.store(false, std::sync::atomic::Ordering::SeqCst);
            }
            let began = self.pipeline.epoch();
            let mut t = EtcdTxn { meta: self, writes: BTreeMap::new(), read: Default::default() };
            f(&mut t)?;
            let writes = std::mem::take(&mut t.writes);
            self.pipeline.add(began, writes)?
        };
        self.pipeline.wait(batch, |writes| self.send(writes))
    }

    /// One batch of updates as one etcd transaction, fenced by the leader key; once etcd took
    /// it, its changes to the tables kept in memory.
    fn send(&self, writes: &pipeline::Writes) -> Result<(), WireError> {
        let ops: Vec<Op> = writes
            .iter()
            .map(|(k, v)| match v {
                Some(v) => Op::Put { key: self.key_bytes(k), value: v.clone(), lease: 0 },
                None => Op::Delete { key: self.key_bytes(k) },
            })
            .collect();
        let fence: Vec<Cmp> = self.fence.iter().cloned().collect();
        let (ok, _) = self.etcd.txn(&fence, &ops, &[]).inspect_err(|_| {
            self.stale.store(true, std::sync::atomic::Ordering::SeqCst);
            self.recent.clear();
        })?;
        if !ok {
            return Err(crate::metadata::records::MetaError::NotLeader.into());
        }
        self.recent.took(writes.iter().filter(|(k, _)| !hot(k)));
        let mut hot_tables = self.hot.write().expect("hot lock");
        for (k, v) in writes.iter().filter(|(k, _)| hot(k)) {
            match v {
                Some(v) => hot_tables.insert(k.clone(), v.clone()),
                None => hot_tables.remove(k),
            };
        }
        Ok(())
    }

    fn key_bytes(&self, rel: &[u8]) -> Vec<u8> {
        [&self.prefix[..], rel].concat()
    }
}

/// One update: reads go to etcd (the hot tables to memory), writes wait for the commit.
struct EtcdTxn<'a> {
    meta: &'a EtcdMeta,
    /// Relative key -> new value (None: deleted).
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// What this update read from etcd: a record read again (a commit reads the stripe, then
    /// `PutStripe` reads it for its old index entries) costs no second round trip. Nobody
    /// else writes meanwhile (one update at a time, one leader; the batches of earlier
    /// updates not yet in etcd are read first).
    read: std::cell::RefCell<HashMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl EtcdTxn<'_> {
    fn raw(&self, rel: &str) -> Result<Option<Vec<u8>>, WireError> {
        if let Some(w) = self.writes.get(rel.as_bytes()) {
            return Ok(w.clone());
        }
        // Written by an update before this one, not yet in etcd.
        if let Some(w) = self.meta.pipeline.lookup(rel.as_bytes()) {
            return Ok(w);
        }
        if hot(rel.as_bytes()) {
            return Ok(self.meta.hot.read().expect("hot lock").get(rel.as_bytes()).cloned());
        }
        if let Some(v) = self.read.borrow().get(rel.as_bytes()) {
            return Ok(v.clone());
        }
        if let Some(v) = self.meta.recent.get(rel.as_bytes()) {
            return Ok(v);
        }
        let v = self.meta.etcd.get(&self.meta.key(rel))?.map(|kv| kv.value);
        self.read.borrow_mut().insert(rel.as_bytes().to_vec(), v.clone());
        Ok(v)
    }

    fn record<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Result<Option<T>, WireError> {
        self.raw(rel)?.map(|v| decode(&v)).transpose()
    }

    fn set(&mut self, rel: String, v: Option<Vec<u8>>) {
        self.writes.insert(rel.into_bytes(), v);
    }

    fn number(&self, rel: &str) -> Result<u64, WireError> {
        Ok(self.raw(rel)?.map_or(0, |v| number(&v)))
    }

    fn set_number(&mut self, rel: String, v: u64) {
        self.set(rel, (v != 0).then(|| v.to_string().into_bytes()));
    }

    /// Adjusts count `name` when a record appears (`was` false, `is` true) or goes.
    fn tally(&mut self, name: &str, was: bool, is: bool) -> Result<(), WireError> {
        if was != is {
            let rel = format!("c/count.{name}");
            let v = self.number(&rel)?;
            self.set_number(rel, if is { v + 1 } else { v.saturating_sub(1) });
        }
        Ok(())
    }
}

impl IndexTables for EtcdTxn<'_> {
    fn set_node_chunk(&mut self, node: NodeId, stripe: u64, index: u32, value: Option<u64>) -> Result<(), WireError> {
        self.set(format!("i/nc/{}/{}/{}", hex8(node), hex16(stripe), hex8(index)), value.map(|v| v.to_string().into_bytes()));
        Ok(())
    }
    fn set_bad(&mut self, stripe: u64, index: u32, bad: bool) -> Result<(), WireError> {
        self.set(format!("i/bad/{}/{}", hex16(stripe), hex8(index)), bad.then(Vec::new));
        Ok(())
    }
    fn set_open(&mut self, pg: u32, stripe: u64, open: bool) -> Result<(), WireError> {
        self.set(format!("i/open/{}/{}", hex8(pg), hex16(stripe)), open.then(Vec::new));
        Ok(())
    }
    fn spread(&self, (a, b): (NodeId, NodeId)) -> Result<u64, WireError> {
        self.number(&format!("i/sp/{}/{}", hex8(a), hex8(b)))
    }
    fn set_spread(&mut self, (a, b): (NodeId, NodeId), v: u64) -> Result<(), WireError> {
        self.set_number(format!("i/sp/{}/{}", hex8(a), hex8(b)), v);
        Ok(())
    }
    fn held(&self, node: NodeId) -> Result<u64, WireError> {
        self.number(&format!("i/held/{}", hex8(node)))
    }
    fn set_held(&mut self, node: NodeId, v: u64) -> Result<(), WireError> {
        self.set_number(format!("i/held/{}", hex8(node)), v);
        Ok(())
    }
    fn set_stripe_object(&mut self, stripe: u64, name: &str, on: bool) -> Result<(), WireError> {
        self.set(format!("i/so/{}/{name}", hex16(stripe)), on.then(Vec::new));
        Ok(())
    }
    fn count(&self, name: &str) -> Result<u64, WireError> {
        self.number(&format!("c/{name}"))
    }
    fn set_count(&mut self, name: &str, v: u64) -> Result<(), WireError> {
        self.set(format!("c/{name}"), Some(v.to_string().into_bytes()));
        Ok(())
    }
}

impl Txn for EtcdTxn<'_> {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, WireError> {
        self.record(&format!("o/{name}"))
    }
    fn upload(&self, version: u64) -> Result<Option<ObjectRecord>, WireError> {
        self.record(&format!("u/{}", hex16(version)))
    }
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, WireError> {
        self.record(&format!("s/{}", hex16(id)))
    }
    fn garbage(&self, id: u64) -> Result<Option<StripeRecord>, WireError> {
        self.record(&format!("g/{}", hex16(id)))
    }
    fn node(&self, id: NodeId) -> Result<Option<NodeRecord>, WireError> {
        self.record(&format!("n/{}", hex8(id)))
    }
    fn put(&mut self, c: Change) -> Result<(), WireError> {
        match c {
            Change::PutObject(o) => {
                let old = self.object(&o.name)?;
                index::reindex_object(self, &o.name, old.as_ref(), Some(&o))?;
                self.tally("objects", old.is_some(), true)?;
                self.set(format!("o/{}", o.name), Some(encode(&o)));
            }
            Change::DeleteObject(name) => {
                let old = self.object(&name)?;
                index::reindex_object(self, &name, old.as_ref(), None)?;
                self.tally("objects", old.is_some(), false)?;
                self.set(format!("o/{name}"), None);
            }
            Change::PutInline { version, data } => self.set(format!("d/{}", hex16(version)), Some(data)),
            Change::DeleteInline(version) => self.set(format!("d/{}", hex16(version)), None),
            Change::PutUpload(o) => {
                let rel = format!("u/{}", hex16(o.version));
                self.tally("uploads", self.raw(&rel)?.is_some(), true)?;
                self.set(rel, Some(encode(&o)));
            }
            Change::DeleteUpload(v) => {
                let rel = format!("u/{}", hex16(v));
                self.tally("uploads", self.raw(&rel)?.is_some(), false)?;
                self.set(rel, None);
            }
            Change::PutGarbage(s) => {
                let rel = format!("g/{}", hex16(s.id));
                self.tally("garbage", self.raw(&rel)?.is_some(), true)?;
                self.set(rel, Some(encode(&s)));
            }
            Change::DeleteGarbage(id) => {
                let rel = format!("g/{}", hex16(id));
                self.tally("garbage", self.raw(&rel)?.is_some(), false)?;
                self.set(rel, None);
            }
            Change::PutStripe(s) => {
                let old = self.stripe(s.id)?;
                let entries = old.as_ref().map(StripeEntries::of);
                index::reindex_stripe(self, s.id, entries.as_ref(), Some(&StripeEntries::of(&s)))?;
                self.tally("stripes", old.is_some(), true)?;
                self.set(format!("s/{}", hex16(s.id)), Some(encode(&s)));
            }
            Change::DeleteStripe(id) => {
                let old = self.stripe(id)?;
                let entries = old.as_ref().map(StripeEntries::of);
                index::reindex_stripe(self, id, entries.as_ref(), None)?;
                self.tally("stripes", old.is_some(), false)?;
                self.set(format!("s/{}", hex16(id)), None);
            }
            Change::PutNode(n) => self.set(format!("n/{}", hex8(n.id)), Some(encode(&n))),
            Change::DeleteNode(id) => self.set(format!("n/{}", hex8(id)), None),
            Change::PutPending(p) => {
                let rel = format!("p/{}.{:04}", hex16(p.stripe), p.index);
                self.tally("pending", self.raw(&rel)?.is_some(), true)?;
                self.set(rel, Some(encode(&p)));
            }
            Change::DeletePending { stripe, index } => {
                let rel = format!("p/{}.{index:04}", hex16(stripe));
                self.tally("pending", self.raw(&rel)?.is_some(), false)?;
                self.set(rel, None);
            }
            Change::SetCounter(name, v) => self.set(format!("c/{name}"), Some(v.to_string().into_bytes())),
        }
        Ok(())
    }
    fn counter(&self, name: &str) -> Result<Option<u64>, WireError> {
        Ok(self.raw(&format!("c/{name}"))?.map(|v| number(&v)))
    }
    fn next_id(&mut self, counter: &str) -> Result<u64, WireError> {
        let next = self.counter(counter)?.unwrap_or(1);
        self.set(format!("c/{counter}"), Some((next + 1).to_string().into_bytes()));
        // Ids are never reused: nothing is stored under a fresh one yet, which a put would
        // otherwise ask etcd (an upload's and a new stripe's record, read to count them).
        let fresh: &[&str] = match counter {
            "version" => &["u/", "d/"],
            "stripe" => &["s/", "g/"],
            _ => &[],
        };
        let mut read = self.read.borrow_mut();
        for table in fresh {
            read.insert(format!("{table}{}", hex16(next)).into_bytes(), None);
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_members_and_a_prefix() {
        let (e, p) = parse_url("etcd://a:2379,b:2379").unwrap();
        assert_eq!((e, p.as_str()), (vec!["a:2379".to_string(), "b:2379".to_string()], "/kintsugi/"));
        assert_eq!(parse_url("etcd://a:1/c1/").unwrap().1, "/kintsugi/c1/");
        for bad in ["redb://x", "etcd://", "etcd://a", "etcd://a:1,b"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }
}
