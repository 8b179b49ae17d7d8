//! What the cluster reports of itself: a repair's report, a node's link report, and
//! `status` (nodes, what is lost or unrepairable, rebalancing).

use crate::wire_graph::{NodeId, WireGraph};
use serde::{Deserialize, Serialize};

/// What a full-node repair did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RepairReport {
    pub method: String,
    /// Lost chunks this repair set out to rebuild: repaired + skipped + waiting + failed.
    #[serde(default)]
    pub lost: usize,
    pub repaired: usize,
    /// Chunks that were no longer lost when their turn came (their node came back).
    #[serde(default)]
    pub skipped: usize,
    /// Chunks with no node to be rebuilt on: every node that can take chunks holds one of
    /// their stripe. They wait for their node to return or for a node to be added.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waiting: usize,
    pub failed: usize,
    pub retries: usize,
    pub bytes: u64,
    /// Bytes the helpers read from the nodes' chunk files meanwhile (`pread` bytes, as the
    /// nodes count them; degraded reads running at the same time included): a Clay
    /// repair reads only the sub-chunks it needs.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub helper_file_read: u64,
    pub seconds: f64,
    pub errors: Vec<String>,
    /// ChameleonEC's phases the repair ran in, each planned from fresh traffic reports
    /// (0: a scheduler without phases).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub phases: usize,
    /// RepairBoost's adaptive sub-processes the repair ran in (0: one round).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub subprocesses: usize,
    /// ChameleonEC's straggler-aware re-scheduling: repairs found running past 1.5x their
    /// expected time, and what was done about them: re-tuned (a delayed relay input sent
    /// to the destination instead, the repair restarted so), postponed (the phase stopped
    /// waiting for it), restarted (cancelled at the phase's end and planned again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stragglers: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retuned: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub postponed: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarted: usize,
    /// The graphs that rebuilt the chunks, in completion order (at most the first 1,024):
    /// what ran, with its helpers and destinations, for replaying it in the simulator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<WireGraph>,
    /// The timeslots each of `graphs` was gated by on the nodes (empty: not gated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graph_timeslots: Vec<Vec<Option<u32>>>,
    /// Seconds from the start until the first rebuilt chunk was durable and recorded (of
    /// the first round, with sub-processes or phases). Its distance to `seconds` shows how
    /// unevenly the repairs that started together progressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_done: Option<f64>,
    /// The most repairs one destination node ran at once (see the coordinator's
    /// `repair_max_active_per_destination`); 0 from an earlier build.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub most_at_once_per_destination: usize,
    /// What `--method auto` / `--scheduler auto` chose, before the repair and again at each
    /// ChameleonEC phase (empty: a fixed method and scheduler).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto: Vec<AutoChoice>,
}

/// One choice `auto` made: every candidate's predicted repair time on the cluster's own lost
/// chunks and its nodes' recent foreground, the one that runs, and what deciding cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoChoice {
    /// The ChameleonEC phase it was made before (0: the repair's start).
    pub phase: usize,
    /// Lost chunks it was made for.
    pub chunks: usize,
    /// The candidate that runs: `method+scheduler`, or `chameleon`.
    pub chosen: String,
    pub predicted_seconds: f64,
    /// Wall seconds spent planning and predicting every candidate.
    pub decide_seconds: f64,
    pub predictions: Vec<AutoPrediction>,
}

/// A candidate's predicted time, or why it cannot run here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoPrediction {
    pub candidate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A node's traffic over its last monitoring period, in bytes per second, split into
/// foreground (clients' chunk reads and writes) and repair (repair graphs, degraded reads),
/// and its link's capacity (0: unknown).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    pub period_ms: u64,
    pub fg_up: f64,
    pub fg_down: f64,
    pub repair_up: f64,
    pub repair_down: f64,
    pub capacity_up: f64,
    pub capacity_down: f64,
    /// Where the capacity came from: "configured", or the interface whose speed the kernel
    /// reports (empty: unknown, or a node of an earlier build).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub capacity_from: String,
    /// The node's disk: its sequential bandwidth in bytes per second (0: unknown, no
    /// storage limit), and the bytes per second of it users' I/O took over the period
    /// (disk time not spent on repair reads and writes, at that bandwidth). ChameleonEC-IO
    /// plans with what is left.
    #[serde(default)]
    pub disk_capacity: f64,
    #[serde(default)]
    pub disk_fg: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    pub addr: String,
    pub alive: bool,
    pub chunks: u64,
    /// As last reported (0 when unknown).
    #[serde(default)]
    pub used_bytes: u64,
    #[serde(default)]
    pub capacity_bytes: u64,
    /// Above the coordinator's nearfull ratio (a warning), full ratio (no new chunks).
    #[serde(default)]
    pub nearfull: bool,
    #[serde(default)]
    pub full: bool,
    /// The node's last traffic report.
    #[serde(default)]
    pub link: Option<LinkReport>,
    /// Bandwidth left for repair per direction (bytes/s): max(0.3 x capacity, capacity -
    /// foreground), ChameleonEC's rule; absent while the capacity is unknown.
    #[serde(default)]
    pub residual_up: Option<f64>,
    #[serde(default)]
    pub residual_down: Option<f64>,
    /// The file system holding the node's chunks, as last reported: nodes on one file
    /// system share its space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsReport>,
}

/// A file system's space, as a node on it sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsReport {
    /// The same for every node on this file system, on any host (host id and device).
    pub id: String,
    /// Bytes in use on it, by anything (other nodes, the coordinator's metadata, ...).
    pub used: u64,
    /// `used` plus what is still available to unprivileged writers.
    pub size: u64,
}

impl FsReport {
    /// Whether `bytes` more keep it at or below `ratio` full.
    pub fn has_room(&self, bytes: u64, ratio: f64) -> bool {
        self.used.saturating_add(bytes) as f64 <= ratio * self.size as f64
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// How the coordinator's connections are protected: encrypted, authenticated or open.
    #[serde(default)]
    pub protection: crate::secure::Protection,
    pub nodes: Vec<NodeInfo>,
    pub objects: usize,
    pub stripes: usize,
    /// Chunks to rebuild: `bad_chunks` and `chunks_on_down_nodes` together.
    pub lost_chunks: usize,
    /// Chunks found corrupt or missing on nodes that are up (by a read, the scrub, an
    /// inventory), not rebuilt yet.
    #[serde(default)]
    pub bad_chunks: usize,
    /// Chunks on nodes that are down or failed.
    #[serde(default)]
    pub chunks_on_down_nodes: usize,
    /// Stripes with too few healthy chunks left to rebuild the others, with their objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unrepairable: Vec<UnrepairableStripe>,
    /// Lost chunks with nowhere to be rebuilt (every live node holds a chunk of their
    /// stripe: a cluster of exactly k + m nodes with one down), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// Chunks in the widest stripe stored (0: none stored yet).
    #[serde(default)]
    pub widest_code: usize,
    /// Set when the widest stripe spans every node that can take chunks: a lost node
    /// cannot be rebuilt until it returns or a node is added, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_heal: Option<String>,
    /// The running or last rebalance, if any since the coordinator started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebalance: Option<RebalanceStatus>,
    pub pending_repairs: usize,
    /// A repair (automatic or asked for) is running.
    #[serde(default)]
    pub repairing: bool,
    /// What the last automatic repair did.
    #[serde(default)]
    pub last_auto_repair: Option<RepairReport>,
    /// Placement groups of the Geo layout, and nodes of each keeping its per-object index
    /// (0: no index): with `nodes`, what a client needs to read without the coordinator.
    #[serde(default)]
    pub placement_groups: u32,
    #[serde(default)]
    pub index_copies: usize,
    /// Geo compaction since the coordinator started.
    #[serde(default)]
    pub compaction: CompactionStatus,
}

impl ClusterStatus {
    /// Bytes of chunks stored and the space the nodes may use, each file system counted
    /// once: nodes sharing one may together fill what is free there, not that many times.
    pub fn space_totals(&self) -> (u64, u64) {
        let used: u64 = self.nodes.iter().map(|n| n.used_bytes).sum();
        let mut capacity = 0u64;
        let mut shared: std::collections::BTreeMap<&str, (u64, u64, u64)> = Default::default();
        for n in &self.nodes {
            match &n.fs {
                Some(fs) if n.capacity_bytes > 0 => {
                    // Per file system: the nodes' chunks plus what is free there, or the
                    // sum of their own capacities (quotas), whichever is less.
                    let e = shared.entry(fs.id.as_str()).or_insert((0, 0, fs.size.saturating_sub(fs.used)));
                    e.0 += n.used_bytes;
                    e.1 += n.capacity_bytes;
                }
                _ => capacity += n.capacity_bytes,
            }
        }
        for (_, (used, caps, free)) in shared {
            capacity += caps.min(used + free);
        }
        (used, capacity)
    }
}

/// What a rebalance has done.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RebalanceStatus {
    pub running: bool,
    /// Chunks moved, and their bytes; moves that failed.
    pub moved: usize,
    pub bytes: u64,
    pub failed: usize,
    /// (fullest - emptiest) / mean fill over the nodes, when last measured.
    pub spread: f64,
    pub seconds: f64,
}

/// What Geo compaction did: in one pass, or in all passes since the coordinator started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// Sealed Geo stripes looked at, and those whose live share was below the threshold.
    pub scanned: usize,
    pub below: usize,
    /// Stripes written with the live chunks of those, the chunks moved and their bytes.
    pub written: usize,
    pub moved: usize,
    pub moved_bytes: u64,
    /// Stripes released (to the garbage collector) and the bytes of their chunks.
    pub freed: usize,
    pub freed_bytes: u64,
    /// Stripes whose rewrite failed (they stay as they were and are tried again).
    pub failed: usize,
    /// New stripes an earlier coordinator left half-written (it stopped mid-rewrite),
    /// handed to the collector.
    #[serde(default)]
    pub abandoned: usize,
    /// Bytes of deleted objects still held in sealed Geo stripes when the pass looked.
    pub dead_bytes: u64,
}

/// Geo compaction as `status` shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionStatus {
    pub running: bool,
    /// The new stripe a running pass is writing, if any (written as an intent the
    /// collector deletes unless the pass commits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writing: Option<u64>,
    pub passes: u64,
    /// Everything done since the coordinator started (`dead_bytes`: the last pass's).
    pub total: CompactionReport,
}

/// A stripe that can no longer be rebuilt, as `status` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnrepairableStripe {
    pub stripe: u64,
    /// The objects with bytes in it.
    pub objects: Vec<String>,
    /// Which chunks are unhealthy, and why.
    pub why: String,
}
