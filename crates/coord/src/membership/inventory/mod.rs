//! Reconciling what the nodes hold with what the metadata expects. A node's chunk list
//! (sent at its start and periodically) turns a chunk it should hold but lacks into a lost
//! chunk (a replaced disk, a deleted file), which repair then rebuilds; a chunk nobody
//! references (a stale copy on a returning node, the leftovers of an interrupted write) is
//! an orphan, deleted once it has stayed one for `orphan_grace_ms` (so a chunk being
//! written or repaired right now is never taken for one).

use kintsugi_plan::NodeId;
use kintsugi_proto::ChunkId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

pub(crate) mod reconcile;

/// A node's inventory being received: boot, chunks so far, and when the first page
/// arrived (ms since the epoch).
type Listing = (u64, Vec<ChunkId>, u64);

/// Pages of inventories being received, and orphans seen, per node.
#[derive(Default)]
pub(crate) struct Inventories {
    pages: Mutex<HashMap<NodeId, Listing>>,
    orphans: Mutex<HashMap<(NodeId, ChunkId), Instant>>,
}
