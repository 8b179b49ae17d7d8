//! Typed messages. Each request enum has one response enum; large data never travels
//! inside a message but as data frames after it.

use crate::versions::{VersionInfo, VersionRef, Versioning};
use kintsugi_codes::CodeSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::chunk_id::{BucketSlot, ChunkId};
pub use crate::layout::{Attrs, ChunkLoc, Extent, LayoutSpec, ObjectInfo, ObjectLayout, StripeLayout, MAX_ATTRS_BYTES};
pub use crate::status::{
    AutoChoice, AutoPrediction, ClusterStatus, CompactionReport, CompactionStatus, FsReport, LinkReport, NodeInfo, RebalanceStatus,
    RepairReport, UnrepairableStripe,
};
pub use crate::wire_error::{ErrorKind, Fault, Scarce, Shortfall, WireError};
pub use crate::wire_graph::{NodeId, WireGraph, WireTerm, WireVertex};

/// The node id of a client reading a chunk (the sink of a degraded read).
pub const READER: NodeId = u32::MAX;

/// Where a repair's sink puts the rebuilt chunk when it runs on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSpec {
    pub chunk: ChunkId,
    /// The checksum the rebuilt chunk must have; it is not stored otherwise.
    pub crc32c: u32,
    /// A parity computed for the first time (a Geo stripe being sealed): no checksum is
    /// known yet, the sink reports the one it computed.
    #[serde(default)]
    pub new_parity: bool,
    /// The bucket slot the chunk goes to (Geo stripes); else a file of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<BucketSlot>,
}

/// A node's part in a repair: the whole graph (each node runs the vertices placed on it).
/// On the wire the graph is a [`WireGraph`]; a coordinator builds, and a node runs, the
/// same assignment over the planner's graph (`G`), converted at the edges.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment<G = WireGraph> {
    pub repair: u64,
    pub graph: G,
    pub chunk_len: u64,
    pub slice_len: u64,
    /// The chunk read by each equation term, in term order.
    pub term_chunks: Vec<ChunkId>,
    /// Address of every node of the graph (the reader has none). Sent as [id, addr] pairs:
    /// JSON object keys are strings, which internally tagged enums cannot turn back into ids.
    #[serde(with = "pairs")]
    pub peers: BTreeMap<NodeId, String>,
    /// Set when the sink is on a node (full-node repair).
    pub store: Option<StoreSpec>,
    /// RepairBoost's timeslot of each vertex's send, in vertex order (`None`: the sink, a
    /// hop within one node, or an unscheduled send). Empty: the nodes do not gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeslots: Vec<Option<u32>>,
    /// The batch whose reserved transfers ([`NodeRequest::ReserveTimeslots`]) this repair's
    /// gated transfers claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_batch: Option<u64>,
    /// Set: the helpers read their chunks from this byte on (`chunk_len` bytes of each),
    /// a ranged repair, which rebuilds only that range of the lost chunk. Codes of one
    /// sub-chunk only (RS, LRC: each byte of a chunk is a combination of the same byte of
    /// the others); a small-size bucket piece's degraded read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term_offset: Option<u64>,
}

impl<G> Assignment<G> {
    /// The same assignment over another form of its graph, built from this one's.
    pub fn with_graph<H>(&self, graph: H) -> Assignment<H> {
        Assignment {
            repair: self.repair,
            graph,
            chunk_len: self.chunk_len,
            slice_len: self.slice_len,
            term_chunks: self.term_chunks.clone(),
            peers: self.peers.clone(),
            store: self.store.clone(),
            timeslots: self.timeslots.clone(),
            gate_batch: self.gate_batch,
            term_offset: self.term_offset,
        }
    }

    /// The same assignment over another form of its graph.
    pub fn map_graph<H, E>(self, f: impl FnOnce(G) -> Result<H, E>) -> Result<Assignment<H>, E> {
        Ok(Assignment {
            repair: self.repair,
            graph: f(self.graph)?,
            chunk_len: self.chunk_len,
            slice_len: self.slice_len,
            term_chunks: self.term_chunks,
            peers: self.peers,
            store: self.store,
            timeslots: self.timeslots,
            gate_batch: self.gate_batch,
            term_offset: self.term_offset,
        })
    }
}

mod pairs {
    use super::NodeId;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;
    pub fn serialize<S: Serializer>(m: &BTreeMap<NodeId, String>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<NodeId, String>, D::Error> {
        Ok(Vec::<(NodeId, String)>::deserialize(d)?.into_iter().collect())
    }
}

/// Requests a node serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum NodeRequest {
    Ping,
    /// Followed by data frames totalling `len` bytes; stored only if the CRC matches.
    PutChunk {
        chunk: ChunkId,
        len: u64,
        crc32c: u32,
        /// The bucket slot the chunk goes to (a Geo stripe's chunk); else a file of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bucket: Option<BucketSlot>,
        /// The chunk's sub-chunks (a Clay chunk's alpha; 0 or 1: none): the node
        /// checksums each sub-chunk, so a repair reading some of them reads only those.
        #[serde(default, skip_serializing_if = "is_zero_u32")]
        sub_chunks: u32,
    },
    /// Answered by `Chunk` and then data frames: the whole chunk, or with `range` the
    /// bytes [offset, offset + len) of it, each verified against its block's checksum
    /// (the `Chunk` answer's checksum is still the whole chunk's).
    GetChunk {
        chunk: ChunkId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        range: Option<(u64, u64)>,
    },
    DeleteChunk {
        chunk: ChunkId,
    },
    Stat,
    RunRepair {
        assignment: Box<Assignment>,
    },
    /// Streams the output of `vertex` of `repair` as data frames, one per unit.
    Pull {
        repair: u64,
        vertex: u32,
    },
    /// Waits until the repair's sink on this node has stored the chunk.
    WaitRepair {
        repair: u64,
        timeout_ms: u64,
    },
    /// Stops the node process (the client's `fail`).
    Shutdown,
    /// How far this node's sink of `repair` is (ChameleonEC's progress reports).
    Progress {
        repair: u64,
    },
    /// Reserves this node's transfers in a batch of gated repairs before any is dispatched
    /// (RepairBoost's timeslots): the slots of its sends and of its receives. Until a repair
    /// of the batch claims them, or they are released, or `hold_ms` passes, they hold this
    /// node's later slots back as dispatched ones do.
    ReserveTimeslots {
        batch: u64,
        sends: Vec<u32>,
        receives: Vec<u32>,
        hold_ms: u64,
    },
    /// Gives back reserved transfers of `batch` no repair will claim: those listed, or with
    /// `everything` all it has left on this node.
    ReleaseTimeslots {
        batch: u64,
        #[serde(default)]
        sends: Vec<u32>,
        #[serde(default)]
        receives: Vec<u32>,
        #[serde(default)]
        everything: bool,
    },
    /// Stops this node's part of `repair` (the coordinator re-plans it: ChameleonEC's
    /// straggler-aware re-scheduling). Unknown or finished repairs are not an error.
    CancelRepair {
        repair: u64,
    },
    /// Writes chunk `chunk` of `len` bytes from pieces stored here (each `(piece, offset)`,
    /// in ascending order, not overlapping), zeros between and after them: a small-size
    /// bucket slot sealed. The result must have checksum `crc32c` (the coordinator's, from
    /// the pieces' own), or nothing is stored. Answered by `Ok`.
    Assemble {
        chunk: ChunkId,
        len: u64,
        pieces: Vec<(ChunkId, u64)>,
        crc32c: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bucket: Option<BucketSlot>,
        /// The stripe's sub-chunks, as for `PutChunk`.
        #[serde(default, skip_serializing_if = "is_zero_u32")]
        sub_chunks: u32,
        /// For each piece, the bytes of it to take (offset, length), when not all of it:
        /// pieces of a sealed slot moved by compaction. Empty: every piece whole.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ranges: Vec<(u64, u64)>,
    },
    /// Keeps object `name`'s index record (`None`: deleted, or not indexed any more) for
    /// placement group `pg`, unless the node has one of a later `seq` already. Answered
    /// by `Ok`.
    IndexPut {
        pg: u32,
        name: String,
        seq: u64,
        record: Option<Vec<u8>>,
    },
    /// The node's index record of object `name`; answered by `IndexEntry`.
    IndexGet {
        pg: u32,
        name: String,
    },
}

/// A node's answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum NodeResponse {
    Ok,
    Error(WireError),
    Pong {
        node: NodeId,
    },
    Chunk {
        len: u64,
        crc32c: u32,
    },
    Stat(NodeStat),
    RepairDone {
        crc32c: u32,
    },
    /// Sent on an output stream while its vertex waits on its own inputs (a relay of a
    /// store-and-forward tree waits a whole chunk): alive, nothing to send yet. A slow
    /// upstream is then not mistaken for a dead one; a dead one is still found by the
    /// node reading from it.
    Working,
    /// Sent on an output stream while its node holds the send for an earlier timeslot.
    Gated,
    /// Bytes of the rebuilt chunk the sink has written so far, and whether it is done
    /// (stored, failed or cancelled). A sink that rebuilds out of chunk order (Clay)
    /// reports 0 until done.
    Progress {
        bytes: u64,
        done: bool,
    },
    /// An index record and its sequence number (`seq` 0: the node has none).
    IndexEntry {
        seq: u64,
        record: Option<Vec<u8>>,
    },
}

/// A node's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStat {
    pub node: NodeId,
    pub chunks: u64,
    pub bytes: u64,
    /// Repair data this node sent and received over the network.
    pub repair_sent: u64,
    pub repair_received: u64,
    /// Helper bytes repairs and degraded reads took from this node's chunks (each repair
    /// counts what it used; repairs reading one chunk at once share its disk reads).
    #[serde(default)]
    pub repair_read: u64,
    /// What those reads took from the chunk files (`pread` bytes): whole checksum blocks
    /// and read-ahead, once for repairs that share a chunk's reads.
    #[serde(default)]
    pub repair_file_read: u64,
    /// Rebuilt bytes this node's sinks computed by the code's structured repair (Clay).
    #[serde(default)]
    pub repair_structured: u64,
    pub active_repairs: u64,
    /// Transfers that waited at this node's timeslot gates for earlier slots (RepairBoost).
    #[serde(default)]
    pub timeslot_waits: u64,
    /// Batches of repairs with timeslots reserved on this node and not all claimed yet.
    #[serde(default)]
    pub timeslot_reservations: u64,
    /// Seconds of I/O the node's emulated disk has served or queued (0 on a real disk).
    #[serde(default)]
    pub disk_busy_seconds: f64,
}

/// What a commit requires of the object it replaces: a compare-and-swap on its committed
/// version, so that two writers never both succeed where one was meant to (S3's conditional
/// writes, `If-None-Match: *` and `If-Match`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precondition {
    /// No committed object has the name.
    Absent,
    /// The committed object is this version.
    Version(u64),
}

impl Precondition {
    /// Whether an object whose committed version is `current` (None: no object) meets it.
    pub fn holds(self, current: Option<u64>) -> bool {
        match self {
            Precondition::Absent => current.is_none(),
            Precondition::Version(v) => current == Some(v),
        }
    }
}

/// Requests the coordinator serves (from nodes and clients).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CoordRequest {
    /// `boot` is random per node process start: a failed node's old process is told apart
    /// from its restart.
    Heartbeat {
        node: NodeId,
        addr: String,
        chunks: u64,
        boot: u64,
        /// Bytes of chunks stored, and the space the node may use in all.
        #[serde(default)]
        used_bytes: u64,
        #[serde(default)]
        capacity_bytes: u64,
        /// The cluster this node's data directory joined (0: none yet).
        #[serde(default)]
        cluster: u64,
        /// Its data directory's random identity token: the coordinator binds the node id to
        /// it at the first join and refuses any other (a second process under a live or
        /// dead node's id) until `node remove` or `node replace`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        token: String,
        /// Traffic over the node's last monitoring period (absent from older nodes).
        #[serde(default)]
        link: Option<LinkReport>,
        /// The file system holding its chunks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fs: Option<FsReport>,
    },
    CreateObject {
        name: String,
        size: u64,
        code: CodeSpec,
        chunk_size: u64,
        /// How the object's bytes map to chunks (the Stripe layout when absent).
        #[serde(default)]
        layout: LayoutSpec,
    },
    /// A put could not write chunk `index` of stripe `stripe` (its ordinal) of upload
    /// `version` to its node: place it on another live node outside the stripe, none of
    /// `avoid` (Stripe layouts, before the commit). Answered with the chunk's new place.
    MoveUploadChunk {
        name: String,
        version: u64,
        stripe: usize,
        index: usize,
        #[serde(default)]
        avoid: Vec<NodeId>,
    },
    /// Moves extent `extent` of Geo upload `version` off the nodes in `avoid`, whose
    /// writes failed: its staging copies to other members, or the chunk to a slot of
    /// another member when its home failed. Answered by `Layout`: the upload's now.
    MoveGeoChunk {
        name: String,
        version: u64,
        extent: usize,
        avoid: Vec<NodeId>,
    },
    /// Seals every open Geo stripe now (computes its parity), whether full or not.
    Seal,
    /// Compacts the Geo stripes whose live share is below the coordinator's
    /// `compact_below` now (answered when done).
    Compact,
    /// Moves chunks from the fullest nodes to the emptiest until their fill is even
    /// (answered when done).
    Rebalance,
    /// Commits exactly upload `version` (from the layout `CreateObject` answered).
    CommitObject {
        name: String,
        version: u64,
        crcs: Vec<Vec<u32>>,
        /// Attributes the object carries from now on (at most [`MAX_ATTRS_BYTES`]).
        #[serde(default, skip_serializing_if = "Attrs::is_empty")]
        attrs: Attrs,
        /// What the object must be at the commit, checked in its transaction (refused with
        /// `PreconditionFailed` otherwise, the upload left to be aborted).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precondition: Option<Precondition>,
        /// Whether the version it replaces is kept (see [`Versioning`]).
        #[serde(default, skip_serializing_if = "Versioning::is_unversioned")]
        versioning: Versioning,
    },
    /// Stores object `name` of at most [`crate::INLINE_MAX`] bytes in the metadata itself
    /// (see [`crate::inline`]), committing it at once on the terms a `CommitObject` takes.
    /// Answered `Committed`, or `InlineRefused` by a coordinator that keeps no object
    /// inline (the caller puts it in stripes).
    PutInline {
        name: String,
        data: crate::Inline,
        /// Recorded as the object's code (it has no chunks).
        code: CodeSpec,
        #[serde(default, skip_serializing_if = "Attrs::is_empty")]
        attrs: Attrs,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precondition: Option<Precondition>,
        #[serde(default, skip_serializing_if = "Versioning::is_unversioned")]
        versioning: Versioning,
    },
    /// Abandons upload `version` of `name` now (a put that failed half-way): its chunks go
    /// to garbage at once instead of after the upload timeout. Idempotent.
    AbortUpload {
        name: String,
        version: u64,
    },
    /// Makes `name` the concatenation of committed objects `parts` (name, version), in
    /// order, in one transaction and without moving a byte: their stripes become the new
    /// version's and the parts are gone (S3's multipart completion). Stripe layouts of one
    /// code only.
    ComposeObject {
        name: String,
        parts: Vec<(String, u64)>,
        #[serde(default, skip_serializing_if = "Attrs::is_empty")]
        attrs: Attrs,
        /// As for `CommitObject`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precondition: Option<Precondition>,
        #[serde(default, skip_serializing_if = "Versioning::is_unversioned")]
        versioning: Versioning,
    },
    /// Replaces the attributes of committed object `name`, exactly at `version` (else
    /// `PreconditionFailed`; `NotFound` if there is none); its bytes stay as they are (S3's
    /// object tags, a bucket record's settings).
    SetAttrs {
        name: String,
        version: u64,
        attrs: Attrs,
        /// Shortens or lifts a GOVERNANCE retention (see [`crate::retention`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bypass_governance: bool,
    },
    /// Deletes an object (idempotent); with versioning, writes a delete marker instead
    /// (answered with it). With a precondition, only if the object is as it says
    /// (`PreconditionFailed` otherwise, nothing changed): lifecycle expires exactly the
    /// version it judged.
    DeleteObject {
        name: String,
        #[serde(default, skip_serializing_if = "Versioning::is_unversioned")]
        versioning: Versioning,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precondition: Option<Precondition>,
    },
    /// Deletes exactly one version of `name` (idempotent; answered with it, if it existed):
    /// its chunks go to garbage. Deleting the latest makes the next older one latest.
    DeleteVersion {
        name: String,
        version: VersionRef,
        /// Deletes a version under GOVERNANCE retention (see [`crate::retention`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bypass_governance: bool,
    },
    /// A version of `name`, or its latest when `version` is None: a layout to read, or a
    /// delete marker (flagged, no stripes). `Lookup` answers NotFound for a marker.
    LookupVersion {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<VersionRef>,
    },
    /// One page of the versions of names starting with `prefix`, in S3's order (names in
    /// order, each one's versions newest first), after version `version_marker` of
    /// `key_marker` (after all of its versions when None); with a `delimiter`, names roll up
    /// into common prefixes. At most `limit` (1 to 1000) entries and prefixes.
    ListVersions {
        #[serde(default)]
        prefix: String,
        #[serde(default)]
        delimiter: String,
        #[serde(default)]
        key_marker: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version_marker: Option<VersionRef>,
        #[serde(default)]
        limit: u32,
    },
    /// One page of the chunks a node holds (`last` on the final page of a listing):
    /// what it lacks is lost, what nobody references is an orphan.
    Inventory {
        node: NodeId,
        boot: u64,
        chunks: Vec<ChunkId>,
        last: bool,
        /// The data directory's identity token (see `Heartbeat`): an inventory from another
        /// directory is never taken for the node's.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        token: String,
    },
    /// A node found one of its chunks corrupt (scrub) or gone.
    ReportChunk {
        node: NodeId,
        chunk: ChunkId,
        reason: String,
    },
    Lookup {
        name: String,
    },
    /// One page of committed objects in name order: those starting with `prefix`, after
    /// `after` (a name or a common prefix a previous page ended with), at most `limit` (1 to
    /// 1000) entries. With a `delimiter`, names with it past the prefix roll up into common
    /// prefixes (S3's ListObjectsV2).
    List {
        #[serde(default)]
        prefix: String,
        #[serde(default)]
        delimiter: String,
        #[serde(default)]
        after: String,
        #[serde(default)]
        limit: u32,
    },
    /// `version` (when not 0) must still be the object's: a read never mixes versions.
    DegradedRead {
        name: String,
        stripe: usize,
        index: usize,
        /// The repair method by name (`cr`, `ppr`, `ecpipe`, `ecpipe-cyclic`).
        method: String,
        slice: u64,
        #[serde(default)]
        version: u64,
        /// Nodes the reader found hung: not used as helpers.
        #[serde(default)]
        avoid: Vec<NodeId>,
        /// Only bytes [offset, offset + len) of the chunk (codes of one sub-chunk).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        range: Option<(u64, u64)>,
    },
    ReportBad {
        name: String,
        stripe: usize,
        index: usize,
        reason: String,
        #[serde(default)]
        version: u64,
    },
    FailNode {
        node: NodeId,
    },
    Repair {
        /// The repair method by name, as `DegradedRead`'s.
        method: String,
        slice: u64,
        parallel: usize,
        /// Who picks helpers and destinations, by name (`index` when empty).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        scheduler: String,
        /// Repairs one destination runs at once in this run (0: no limit); absent: the
        /// coordinator's `repair_max_active_per_destination`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_active_per_destination: Option<usize>,
    },
    Status,
    /// Takes a node out for good: its chunks are rebuilt elsewhere first, then it is
    /// forgotten. Answered with the repair's report.
    RemoveNode {
        node: NodeId,
    },
    /// A new disk goes under an old node id (`node replace`): the id's binding to its old
    /// data directory is dropped, the next node to join under it is bound, and its chunks
    /// (missing from the new disk) are rebuilt onto it.
    ReplaceNode {
        node: NodeId,
    },
}

/// The coordinator's answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CoordResponse {
    Ok,
    Error(WireError),
    Layout(ObjectLayout),
    Deleted {
        existed: bool,
        /// The delete marker written (a versioned delete), or the version deleted
        /// (`DeleteVersion`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<Box<VersionInfo>>,
    },
    /// This coordinator keeps no object in its metadata (`inline_objects` off): put it in
    /// stripes.
    InlineRefused,
    /// A commit's version: its number and whether its S3 id is its own.
    Committed {
        version: u64,
        #[serde(default)]
        versioned: bool,
    },
    Versions {
        versions: Vec<VersionInfo>,
        #[serde(default)]
        prefixes: Vec<String>,
        /// Where the next page starts (`key_marker`, `version_marker`), if there is more.
        #[serde(default)]
        next: Option<(String, Option<VersionRef>)>,
    },
    Objects {
        objects: Vec<ObjectInfo>,
        /// Common prefixes (with a delimiter), in name order among the objects.
        #[serde(default)]
        prefixes: Vec<String>,
        /// Where the next page starts (`after`), if there is more.
        #[serde(default)]
        next: Option<String>,
    },
    Plan {
        assignment: Box<Assignment>,
    },
    Repaired(RepairReport),
    Status(Box<ClusterStatus>),
    /// Where a moved upload chunk goes now.
    Moved(ChunkLoc),
    Rebalanced(RebalanceStatus),
    Compacted(CompactionReport),
    /// Geo stripes sealed.
    Sealed {
        stripes: usize,
    },
    /// The answer to a heartbeat: the cluster the node belongs to (a new node's data
    /// directory records it).
    Welcome {
        cluster: u64,
    },
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_ids_are_safe_names() {
        assert_eq!(ChunkId::new(12, 3).as_str(), "s00000012.003");
        for bad in ["", "../x", "a/b", ".hidden", "a b", &"x".repeat(200)] {
            assert!(ChunkId::try_from(bad.to_string()).is_err(), "{bad}");
        }
        let r: Result<NodeRequest, _> = serde_json::from_str(r#"{"op":"get_chunk","chunk":"../../etc/passwd"}"#);
        assert!(r.is_err());
        let r: Result<NodeRequest, _> = serde_json::from_str(r#"{"op":"launch_missiles"}"#);
        assert!(r.is_err());
    }

    /// Requests from clients that predate layouts still parse, as the Stripe layout.
    #[test]
    fn create_object_defaults_to_the_stripe_layout() {
        let r: CoordRequest = serde_json::from_str(r#"{"op":"create_object","name":"a","size":1,"code":"rs:2,1","chunk_size":0}"#).unwrap();
        assert!(matches!(r, CoordRequest::CreateObject { layout: LayoutSpec::Stripe, .. }));
    }
}
