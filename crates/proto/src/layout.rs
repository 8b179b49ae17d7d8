//! Where an object's bytes are: its layout (Stripe, Stripe-Max, Geo, Contiguous), its
//! stripes and the chunks of each, as the coordinator tells clients.

use crate::messages::ChunkId;
use crate::wire_graph::NodeId;
use kintsugi_codes::CodeSpec;
use serde::{Deserialize, Serialize};

/// Where an object's chunks are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectLayout {
    pub name: String,
    pub size: u64,
    pub code: CodeSpec,
    pub committed: bool,
    /// The version these stripes belong to (a put commits exactly it).
    #[serde(default)]
    pub version: u64,
    pub stripes: Vec<StripeLayout>,
    #[serde(default)]
    pub layout: LayoutSpec,
    /// Where the object's bytes are, in object order (Geo and Contiguous layouts; empty for
    /// Stripe layouts, whose stripes hold the bytes in order, k chunks a stripe).
    #[serde(default)]
    pub extents: Vec<Extent>,
    /// What the writer attached at commit (the S3 gateway's ETag, content type and user
    /// metadata); opaque to the cluster.
    #[serde(default, skip_serializing_if = "Attrs::is_empty")]
    pub attrs: Attrs,
    /// Its version id is its own (written with versioning on; false: the "null" version).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub versioned: bool,
    /// A delete marker: the name's latest version says it is deleted (no bytes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
    /// The bytes of an object kept in the metadata (see [`crate::inline`]); it has no stripes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<crate::Inline>,
}

/// An object's attributes: names to values, set when it is committed.
pub type Attrs = std::collections::BTreeMap<String, String>;

/// The most bytes of names and values an object's attributes may take.
pub const MAX_ATTRS_BYTES: usize = 8192;

/// How an object's bytes map to chunks (Geometric Partitioning, section 6, names them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LayoutSpec {
    /// Striped across k nodes in rows of k chunks of the chunk size (HDFS-EC, Ceph).
    #[default]
    Stripe,
    /// One row: chunk = object size / k, so each node holds one chunk of the object.
    StripeMax,
    /// Cut into chunks of s0, s0 q, s0 q^2, ... (capped at 256 MiB) all on one node of a
    /// placement group, after a front remainder kept striped and RS-coded; the chunks are
    /// the data of Clay stripes formed across the group's nodes' same-size buckets. `cap`
    /// bounds a chunk (0: the paper's 256 MiB; smaller for scaled-down experiments).
    Geo {
        s0: u64,
        q: u64,
        #[serde(default)]
        cap: u64,
    },
    /// Cut into equal chunks of `chunk` bytes on one node (f4-style), coded like Geo.
    Contiguous { chunk: u64 },
}

impl std::fmt::Display for LayoutSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutSpec::Stripe => write!(f, "stripe"),
            LayoutSpec::StripeMax => write!(f, "stripe-max"),
            LayoutSpec::Geo { s0, q, cap: 0 } => write!(f, "geo (s0 {s0} B, q {q})"),
            LayoutSpec::Geo { s0, q, cap } => write!(f, "geo (s0 {s0} B, q {q}, chunks up to {cap} B)"),
            LayoutSpec::Contiguous { chunk } => write!(f, "contiguous ({chunk}-byte chunks)"),
        }
    }
}

/// A run of an object's bytes: `len` bytes at `offset` in chunk `index` of the object's
/// stripe number `stripe` (an index into [`ObjectLayout::stripes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub stripe: usize,
    pub index: usize,
    pub offset: u64,
    pub len: u64,
    /// A piece of a small-size bucket slot (a Geo remainder or small object): its own
    /// checksum, as the slot's chunk holds other objects' pieces too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StripeLayout {
    pub id: u64,
    /// Bytes of the object held by this stripe's data chunks.
    pub data_len: u64,
    pub chunk_len: u64,
    pub chunks: Vec<ChunkLoc>,
    /// Not sealed yet: its parity is not computed, its data chunks are replicated.
    #[serde(default)]
    pub open: bool,
    /// Staging copies of each chunk while the stripe is open (empty once sealed).
    #[serde(default)]
    pub replicas: Vec<Vec<ChunkLoc>>,
    /// The stripe's code where it is not the object's (a Geo object's RS remainder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeSpec>,
    /// A stripe of the small-size bucket: each data chunk packs pieces of several objects
    /// (staged as pieces of their own while the stripe is open).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub small: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkLoc {
    pub chunk: ChunkId,
    pub node: NodeId,
    pub addr: String,
    pub alive: bool,
    /// Known once the object is committed.
    pub crc32c: Option<u32>,
    /// Marked lost (node dead or chunk reported bad) and not yet repaired.
    pub lost: bool,
    /// The bucket slot holding it on its node (Geo and Contiguous stripes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<crate::BucketSlot>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectInfo {
    pub name: String,
    pub size: u64,
    pub code: CodeSpec,
    pub stripes: usize,
    pub committed: bool,
    #[serde(default, skip_serializing_if = "Attrs::is_empty")]
    pub attrs: Attrs,
}
