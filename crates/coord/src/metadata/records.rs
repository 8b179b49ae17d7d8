//! The records the metadata service keeps (objects, stripes, nodes, repairs in progress),
//! the store interface ([`MetaStore`], [`Txn`]) and the records' encoding.

use kintsugi_codes::CodeSpec;
use kintsugi_plan::{NodeId, Shape};
use kintsugi_proto::WireError;
use kintsugi_proto::{Extent, LayoutSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectRecord {
    pub name: String,
    pub size: u64,
    pub code: CodeSpec,
    pub committed: bool,
    pub stripes: Vec<u64>,
    /// Unique per put: a commit names the version it commits.
    #[serde(default)]
    pub version: u64,
    /// When the put started (ms since the Unix epoch): abandoned uploads are reclaimed.
    #[serde(default)]
    pub created_ms: u64,
    #[serde(default)]
    pub layout: LayoutSpec,
    /// Geo and Contiguous layouts: where the bytes are, in order (see [`Extent`]).
    #[serde(default)]
    pub extents: Vec<Extent>,
    /// What the writer attached at commit (see [`kintsugi_proto::Attrs`]).
    #[serde(default, skip_serializing_if = "kintsugi_proto::Attrs::is_empty")]
    pub attrs: kintsugi_proto::Attrs,
    /// Where it stands among its name's versions (see [`crate::metadata::versions`]).
    #[serde(default, skip_serializing_if = "VersionLinks::is_plain")]
    pub chain: VersionLinks,
    /// Kept in the metadata (see [`kintsugi_proto::inline`]): its bytes' CRC-32C. The bytes
    /// lie beside the record under its version (listings never read them); it has no stripes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<u32>,
}

/// A version's place among its name's versions: its kind and its neighbours, by version
/// number (0: none). All empty for a name that was never versioned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionLinks {
    /// Its S3 version id is its own (false: the "null" version).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub versioned: bool,
    /// A delete marker: no bytes; as the latest, the name reads as deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
    /// The next older kept version.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub older: u64,
    /// The next newer version (kept versions only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub newer: u64,
    /// The latest only: the kept null version, if one of the older ones is.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kept_null: u64,
}

impl VersionLinks {
    pub fn is_plain(&self) -> bool {
        *self == VersionLinks::default()
    }
}

impl ObjectRecord {
    /// Geo and Contiguous objects share their stripes with other objects.
    pub fn shares_stripes(&self) -> bool {
        matches!(self.layout, LayoutSpec::Geo { .. } | LayoutSpec::Contiguous { .. })
    }
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
    /// When the stripe's version was replaced or deleted (ms since the epoch; 0 while live).
    #[serde(default)]
    pub discarded_ms: u64,
    /// When its chunks last changed place (commit, repair): an inventory listed before then
    /// may not show them yet.
    #[serde(default)]
    pub changed_ms: u64,
    /// A Geo stripe not sealed yet: objects' chunks are landing in its data slots, each
    /// replicated (`replicas`); its parity is computed once it is sealed.
    #[serde(default)]
    pub open: bool,
    /// Geo stripes: the version of the object holding each data slot (0: free,
    /// [`FILLER`]: zeros written at sealing).
    #[serde(default)]
    pub owners: Vec<u64>,
    /// Geo stripes while open: the nodes holding staging copies of each chunk.
    #[serde(default)]
    pub replicas: Vec<Vec<NodeId>>,
    /// Geo stripes: the placement group, and when the stripe was opened (ms since the epoch).
    #[serde(default)]
    pub pg: u32,
    #[serde(default)]
    pub opened_ms: u64,
    /// Geo stripes: the slot of its placement group's size-class bucket it occupies on every
    /// member (numbered per placement group and size class; Geometric Partitioning keeps a
    /// stripe's chunks at the same offset of the members' same-size buckets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u64>,
    /// A stripe of its placement group's small-size bucket (RS): each data slot packs the
    /// pieces (`pieces`) of several objects, remainders and small objects.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub small: bool,
    /// Small-size bucket stripes: the pieces in each data slot, by offset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pieces: Vec<Vec<Piece>>,
    /// Small-size bucket stripes being sealed: no piece is added any more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealing: bool,
    /// The bucket size class of its slots when not `chunk_len`: a small-size bucket stripe
    /// keeps its s0-byte slots but is sealed with chunks only as long as its fullest slot
    /// (the rest of each slot is a hole in the bucket file).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub class: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// An object's piece of a small-size bucket slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The object version it belongs to.
    pub version: u64,
    pub offset: u64,
    pub len: u64,
    /// Known once the object is committed.
    pub crc: Option<u32>,
}

impl StripeRecord {
    /// A stripe of the Stripe layout: `code`'s chunks of `chunk_len` bytes on `nodes`,
    /// nothing committed or reported yet.
    pub fn new(id: u64, code: CodeSpec, data_len: u64, chunk_len: u64, nodes: Vec<NodeId>) -> Self {
        let n = nodes.len();
        StripeRecord {
            id,
            code,
            data_len,
            chunk_len,
            nodes,
            crcs: vec![None; n],
            bad: vec![false; n],
            discarded_ms: 0,
            changed_ms: 0,
            open: false,
            owners: vec![],
            replicas: vec![],
            pg: 0,
            opened_ms: 0,
            slot: None,
            small: false,
            pieces: vec![],
            sealing: false,
            class: 0,
        }
    }

    /// Where chunk `index`'s node keeps it: a bucket slot (Geo stripes), or a file.
    pub fn bucket(&self) -> Option<kintsugi_proto::BucketSlot> {
        let class = if self.class > 0 { self.class } else { self.chunk_len };
        self.slot.map(|slot| kintsugi_proto::BucketSlot { pg: self.pg, class, slot, small: self.small })
    }

    /// Where data slot `slot`'s staging copies go (`copies` in all, its own node included):
    /// the parity members first (they hold no data of the stripe), then other data members.
    pub fn staging_nodes(&self, slot: usize, k: usize, copies: usize) -> Vec<NodeId> {
        let home = self.nodes[slot];
        (k..self.nodes.len()).chain(0..k).map(|i| self.nodes[i]).filter(|&x| x != home).take(copies.saturating_sub(1)).collect()
    }

    /// Bytes of data slot `i` taken by pieces (small-size bucket stripes).
    pub fn slot_used(&self, i: usize) -> u64 {
        self.pieces.get(i).and_then(|p| p.iter().map(|p| p.offset + p.len).max()).unwrap_or(0)
    }
}

/// The owner of a small-size bucket data slot that holds pieces (each piece names its own).
pub const PIECES: u64 = u64::MAX - 1;

/// The owner of a Geo data slot left empty when its stripe was sealed: a virtual chunk of
/// zeros (no file anywhere), which contributes nothing to any equation and is never lost,
/// as Clay's shortened nodes.
pub const FILLER: u64 = u64::MAX;

impl StripeRecord {
    /// Slot `i` is a virtual zero chunk.
    pub fn is_filler(&self, i: usize) -> bool {
        self.owners.get(i) == Some(&FILLER)
    }
}

/// CRC-32C of `len` zero bytes (a filler's checksum).
pub fn zeros_crc(len: u64) -> u32 {
    const PIECE: usize = 1 << 16;
    let zeros = [0u8; PIECE];
    let mut crc = 0u32;
    let mut left = len;
    while left > 0 {
        let n = left.min(PIECE as u64) as usize;
        crc = kintsugi_proto::crc::crc32c_append(crc, &zeros[..n]);
        left -= n as u64;
    }
    crc
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
    /// The identity token of the data directory the id is bound to (empty: none yet, or
    /// released by `node replace`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
}

/// A lost chunk whose repair was requested and has not finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingRepair {
    pub stripe: u64,
    pub index: usize,
    pub method: Shape,
    pub slice: u64,
}

/// Reads and writes inside one write transaction.
pub trait Txn {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, WireError>;
    fn upload(&self, version: u64) -> Result<Option<ObjectRecord>, WireError>;
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, WireError>;
    fn garbage(&self, id: u64) -> Result<Option<StripeRecord>, WireError>;
    fn node(&self, id: NodeId) -> Result<Option<NodeRecord>, WireError>;
    fn put(&mut self, change: Change) -> Result<(), WireError>;
    fn next_id(&mut self, counter: &str) -> Result<u64, WireError>;
    fn counter(&self, name: &str) -> Result<Option<u64>, WireError>;

    /// Drops version `o` of an object: its own stripes go to garbage. Stripes it shares with
    /// other objects (Geo, Contiguous) stay: a slot of an open stripe that was reserved but
    /// never committed is freed for the next put; a committed chunk stays in its stripe as
    /// dead space (parity is never updated in place; `geo_compaction` reclaims it).
    ///
    /// Every path that deletes or replaces a version comes here, so object lock is checked
    /// here: a version under retention or legal hold is refused (`Locked`), GOVERNANCE
    /// retention yielding to `bypass_governance`.
    fn discard_version(&mut self, o: &ObjectRecord, now_ms: u64, bypass_governance: bool) -> Result<(), WireError> {
        // Named as the user knows it: a kept version by its name and number.
        let shown = match crate::metadata::version_names::parse_kept(&o.name) {
            Some((name, v)) => format!("{name}' version '{v}"),
            None => o.name.clone(),
        };
        kintsugi_proto::retention::may_delete(&shown, &o.attrs, now_ms, bypass_governance)?;
        if o.inline.is_some() {
            self.put(Change::DeleteInline(o.version))?;
        }
        for (si, &id) in o.stripes.iter().enumerate() {
            let Some(mut s) = self.stripe(id)? else { continue };
            if s.owners.is_empty() {
                self.discard_stripe(id, now_ms)?;
                continue;
            }
            let mut changed = false;
            for e in o.extents.iter().filter(|e| e.stripe == si) {
                // A piece reserved but never committed leaves its slot; committed ones stay.
                if s.small && s.open {
                    if let Some(p) = s.pieces.get_mut(e.index) {
                        let before = p.len();
                        p.retain(|p| p.version != o.version || p.crc.is_some());
                        changed |= p.len() != before;
                        if p.is_empty() {
                            s.owners[e.index] = 0;
                            s.replicas[e.index].clear();
                        }
                    }
                    continue;
                }
                if s.open && s.owners.get(e.index) == Some(&o.version) && s.crcs[e.index].is_none() {
                    s.owners[e.index] = 0;
                    s.replicas[e.index].clear();
                    changed = true;
                }
            }
            if changed {
                self.put(Change::PutStripe(s))?;
            }
        }
        Ok(())
    }

    /// Moves a stripe to garbage (its chunks are deleted from the nodes later).
    fn discard_stripe(&mut self, id: u64, now_ms: u64) -> Result<(), WireError> {
        if let Some(mut s) = self.stripe(id)? {
            s.discarded_ms = now_ms;
            self.put(Change::DeleteStripe(id))?;
            self.put(Change::PutGarbage(s))?;
        }
        Ok(())
    }
}

/// A spread counter: ((a, a), stripes on a) or ((a, b), stripes a and b share).
pub type SpreadCount = ((NodeId, NodeId), u64);

/// Counts kept by the store, each read in O(1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetaCounts {
    /// Committed objects.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    pub stripes: u64,
    pub uploads: u64,
    pub garbage: u64,
    pub pending: u64,
}

/// What the coordinator needs from a metadata store. No request path reads every record:
/// everything a request needs is a record by key, a page of records, or an index entry
/// ([`crate::metadata::index`]).
pub trait MetaStore: Send + Sync {
    fn object(&self, name: &str) -> Result<Option<ObjectRecord>, WireError>;
    /// The bytes of inline version `version` (see [`ObjectRecord::inline`]).
    fn inline(&self, version: u64) -> Result<Option<Vec<u8>>, WireError>;
    /// Up to `limit` committed objects in name order, from `from` (included when
    /// `inclusive`).
    fn objects_from(&self, from: &str, inclusive: bool, limit: usize) -> Result<Vec<ObjectRecord>, WireError>;
    fn stripe(&self, id: u64) -> Result<Option<StripeRecord>, WireError>;
    /// The stripes of `ids` that exist, in one read.
    fn stripes_of(&self, ids: &[u64]) -> Result<Vec<StripeRecord>, WireError>;
    /// Up to `limit` stripes with ids above `after`, in id order.
    fn stripes_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, WireError>;
    fn nodes(&self) -> Result<Vec<NodeRecord>, WireError>;
    fn pending(&self) -> Result<Vec<PendingRepair>, WireError>;
    /// Uploads (puts not yet committed).
    fn uploads(&self) -> Result<Vec<ObjectRecord>, WireError>;
    /// Up to `limit` stripes whose chunks are still to be deleted from nodes, ids above
    /// `after`.
    fn garbage_from(&self, after: u64, limit: usize) -> Result<Vec<StripeRecord>, WireError>;
    /// Which of `ids` are garbage stripes.
    fn garbage_among(&self, ids: &[u64]) -> Result<HashSet<u64>, WireError>;
    /// Up to `limit` chunks placed on `node` (of live stripes; garbage is the collector's),
    /// in (stripe, index) order after `after`.
    fn node_chunks_from(&self, node: NodeId, after: Option<(u64, usize)>, limit: usize) -> Result<Vec<NodeChunk>, WireError>;
    /// Every chunk placed on `node`.
    fn node_chunks(&self, node: NodeId) -> Result<Vec<NodeChunk>, WireError> {
        self.node_chunks_from(node, None, usize::MAX)
    }
    /// Chunks reported bad and not repaired: (stripe, index).
    fn bad_chunks(&self) -> Result<Vec<(u64, usize)>, WireError>;
    /// Open Geo stripes, of placement group `pg` or of all.
    fn open_stripes(&self, pg: Option<u32>) -> Result<Vec<StripeRecord>, WireError>;
    /// Stripes per node ((a, a)) and shared per pair of nodes ((a, b), a < b).
    fn spread(&self) -> Result<Vec<SpreadCount>, WireError>;
    /// Bytes of chunks placed on each node.
    fn held_bytes(&self) -> Result<BTreeMap<NodeId, u64>, WireError>;
    /// Names of the committed objects with bytes in stripe `id`.
    fn stripe_objects(&self, id: u64) -> Result<Vec<String>, WireError>;
    fn counts(&self) -> Result<MetaCounts, WireError>;
    /// Runs `f` in one write transaction: everything it reads and writes is atomic and
    /// isolated from every other update; an error from `f` aborts it all.
    fn update(&self, f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), WireError>) -> Result<(), WireError>;
    /// Applies a batch of changes atomically.
    fn apply(&self, changes: Vec<Change>) -> Result<(), WireError> {
        let mut changes = Some(changes);
        self.update(&mut |t| changes.take().into_iter().flatten().try_for_each(|c| t.put(c)))
    }
    /// This cluster's id: random, made on the first start, kept for good.
    fn cluster_id(&self) -> Result<u64, WireError> {
        let mut id = 0;
        self.update(&mut |t| {
            id = match t.counter("cluster_id")? {
                Some(id) => id,
                None => {
                    // Nonzero: 0 is "no cluster yet" in a node's identity.
                    let id = rand::random::<u64>() | 1 << 63;
                    t.put(Change::SetCounter("cluster_id".into(), id))?;
                    id
                }
            };
            Ok(())
        })?;
        Ok(id)
    }
    /// A fresh id from a persistent counter.
    fn next_id(&self, counter: &str) -> Result<u64, WireError> {
        let mut id = 0;
        self.update(&mut |t| {
            id = t.next_id(counter)?;
            Ok(())
        })?;
        Ok(id)
    }
}

/// What can go wrong in the metadata store itself, as opposed to what a transaction's own
/// logic refuses (which travels as the caller's `WireError`).
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The database failed: an I/O error, a transaction that did not commit, a file that
    /// cannot be opened.
    #[error("metadata store: {0}")]
    Backend(String),
    /// A stored record or key that does not decode.
    #[error("metadata store: corrupt record: {0}")]
    Corrupt(String),
    /// The store cannot be reached now (no etcd member answers).
    #[error("metadata store: {0}")]
    Unreachable(String),
    /// Another coordinator holds the leader key: this one may not write.
    #[error("metadata store: this coordinator is no longer the leader (another one holds the leader key in etcd)")]
    NotLeader,
    /// A setting of the store that is wrong (a bad URL).
    #[error("{0}")]
    Config(String),
}

/// Unreachable and not leading pass (a client retries, the next leader serves); a broken
/// or corrupt store does not.
impl From<MetaError> for WireError {
    fn from(e: MetaError) -> Self {
        match e {
            MetaError::Unreachable(_) | MetaError::NotLeader => WireError::unavailable(e.to_string()),
            MetaError::Config(_) => WireError::bad_request(e.to_string()),
            MetaError::Backend(_) | MetaError::Corrupt(_) => WireError::internal(e.to_string()),
        }
    }
}

/// A record as stored (JSON: fields added later read as their defaults from older records).
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(bytes).map_err(|x| MetaError::Corrupt(x.to_string()).into())
}

/// One change in a batch.
#[derive(Clone, Debug)]
pub enum Change {
    PutObject(ObjectRecord),
    /// The bytes of inline version `version` (see [`ObjectRecord::inline`]).
    PutInline {
        version: u64,
        data: Vec<u8>,
    },
    DeleteInline(u64),
    DeleteObject(String),
    PutUpload(ObjectRecord),
    DeleteUpload(u64),
    PutGarbage(StripeRecord),
    DeleteGarbage(u64),
    PutStripe(StripeRecord),
    DeleteStripe(u64),
    PutNode(NodeRecord),
    DeleteNode(NodeId),
    PutPending(PendingRepair),
    SetCounter(String, u64),
    DeletePending {
        stripe: u64,
        index: usize,
    },
}

/// One chunk as a node's index keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeChunk {
    pub stripe: u64,
    pub index: usize,
    /// Its checksum is known: the chunk was committed (or sealed).
    pub committed: bool,
    pub bad: bool,
    /// A Geo filler slot: zeros, stored nowhere.
    pub filler: bool,
    /// Every chunk of its stripe is committed (no put is still writing it).
    pub whole: bool,
    /// When its stripe's chunks last changed place (see [`StripeRecord::changed_ms`]).
    pub changed_ms: u64,
}

/// The checksum of a data slot assembled from its pieces: each piece's own, zeros between
/// and after, combined without reading a byte.
pub(crate) fn slot_crc(pieces: &[Piece], len: u64) -> Result<u32, WireError> {
    let mut sorted: Vec<&Piece> = pieces.iter().collect();
    sorted.sort_by_key(|p| p.offset);
    let (mut crc, mut at) = (0u32, 0u64);
    for p in sorted {
        let Some(c) = p.crc else { return Err(WireError::bad_request(format!("the piece at {} is not committed", p.offset))) };
        if p.offset < at {
            return Err(WireError::bad_request(format!("the piece at {} overlaps the one before", p.offset)));
        }
        let gap = p.offset - at;
        crc = kintsugi_proto::crc::crc32c_combine(crc, zeros_crc(gap), gap);
        crc = kintsugi_proto::crc::crc32c_combine(crc, c, p.len);
        at = p.offset + p.len;
    }
    if at > len {
        return Err(WireError::bad_request(format!("pieces end at {at}, past the slot's {len} bytes")));
    }
    Ok(kintsugi_proto::crc::crc32c_combine(crc, zeros_crc(len - at), len - at))
}
