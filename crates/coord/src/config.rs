//! The coordinator's configuration: every field defaults, and `kintsugi coordinator
//! --config` reads it from TOML.

use crate::repair::options::TimeslotGating;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Pick, Shape};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Coordinator configuration (TOML for `kintsugi coordinator --config`); all fields default.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoordConfig {
    pub listen: String,
    /// Where `/metrics` (Prometheus) and the status page (`/`, `/status.json`) are served;
    /// none when absent.
    pub metrics_listen: Option<String>,
    /// Holds `meta.redb`.
    pub data_dir: PathBuf,
    /// A node silent for this long is dead.
    pub dead_after_ms: u64,
    pub io_timeout_ms: u64,
    /// Default chunk size of new objects.
    pub chunk_size: u64,
    /// Attempts per lost chunk before a repair gives up on it.
    pub repair_attempts: usize,
    /// A node silent this long is out: its chunks are repaired without anyone asking
    /// (Ceph's mon_osd_down_out_interval). Chunks found corrupt or missing, and nodes
    /// stopped by `fail`, are repaired at once.
    pub down_out_ms: u64,
    /// Repair lost chunks by itself (every `auto_repair_interval_ms`).
    pub auto_repair: bool,
    pub auto_repair_interval_ms: u64,
    /// What automatic repair uses: method, scheduler, slice, and chunks rebuilt at once
    /// (like osd_recovery_max_active).
    /// Either may be `auto`: predicted and chosen per run (`repair::auto`).
    pub repair_method: Pick<Shape>,
    pub repair_scheduler: Pick<Scheduler>,
    pub repair_slice: u64,
    pub repair_max_active: usize,
    /// Repairs one destination node receives at once, whatever the run's chunks at once
    /// (Ceph's osd_recovery_max_active is per OSD; the simulator's `--max-active`); 0: no
    /// limit, so a ChameleonEC phase starts all its repairs together. Repairs whose
    /// transfers the nodes gate by RepairBoost's timeslots are ordered by those instead.
    pub repair_max_active_per_destination: usize,
    /// ChameleonEC's phase length; 0: the paper's 20 s at 10 Gb/s, scaled to the nodes'
    /// mean residual bandwidth (a phase moves as many bytes per link).
    pub repair_phase_ms: u64,
    /// Which repairs' transfers nodes hold to their RepairBoost timeslots (`repairboost`,
    /// `repairboost-ts`, `repairboost-poll`); the others' timeslots only order when
    /// repairs start.
    pub gate_timeslots: TimeslotGating,
    /// RepairBoost's adaptive sub-processes: a full-node repair in rounds of this many
    /// chunks, each balanced with the nodes' rates measured in the rounds before (0: one
    /// round; not with `chameleon`, which has its own phases).
    pub repair_subprocess_chunks: usize,
    /// ChameleonEC's straggler-aware re-scheduling (`chameleon` only; off: ETRP alone),
    /// judged every `repair_progress_ms`.
    pub repair_straggler_aware: bool,
    pub repair_progress_ms: u64,
    /// Fill ratios, as Ceph's: above `nearfull` a node is flagged, above `backfillfull` it
    /// takes no rebuilt chunks, above `full` no new chunks at all.
    pub nearfull_ratio: f64,
    pub backfillfull_ratio: f64,
    pub full_ratio: f64,
    /// Chunks placed this close before a node's inventory are not judged missing by it
    /// (the node may have listed its disk before they arrived).
    pub inventory_slack_ms: u64,
    /// A chunk a node holds that nothing references is deleted after this long.
    pub orphan_grace_ms: u64,
    /// File holding the cluster secret (also `--secret-file`, `KINTSUGI_SECRET_FILE`).
    pub secret_file: Option<PathBuf>,
    /// How connections are protected with a secret: "encrypted" (default) or
    /// "authenticated" (integrity only; also `--protection`).
    pub protection: Option<String>,
    /// Serve without a cluster secret on an address other than loopback (also `--insecure`).
    pub insecure: bool,
    /// A put not committed within this long is abandoned and its chunks reclaimed.
    pub upload_timeout_ms: u64,
    /// Chunks of replaced or deleted versions are removed from the nodes this long after
    /// (so reads already under way finish), then every `gc_interval_ms`.
    pub gc_grace_ms: u64,
    pub gc_interval_ms: u64,
    /// Geo layout: placement groups (an object's name picks one; each is n nodes).
    pub placement_groups: u32,
    /// Geo layout: copies of a chunk (its own included) until its stripe is sealed.
    pub staging_copies: usize,
    /// Geo layout: an open stripe is sealed once its data slots are full, or this long
    /// after it opened (checked every `seal_interval_ms`).
    pub seal_after_ms: u64,
    pub seal_interval_ms: u64,
    /// Geo layout: stripes sealed at once.
    pub seal_parallel: usize,
    /// Geo layout: a sealed stripe whose live share (data slots still holding a live
    /// object's chunk, of k) is below this is compacted: its live chunks are rewritten
    /// into new stripes with others' and it is released (0: never). Checked every
    /// `compact_interval_ms`, at most `compact_bytes_per_s` rewritten.
    pub compact_below: f64,
    pub compact_interval_ms: u64,
    pub compact_bytes_per_s: f64,
    /// Repair weight (chunk size in 4 MiB units) a node takes part in at once, as
    /// Geometric Partitioning's recovery queue (512 in the paper); `repair_max_active` and
    /// `--parallel` still bound the chunks in flight cluster-wide.
    pub recovery_node_budget: u64,
    /// Geo and Contiguous objects: nodes of each placement group keeping its per-object
    /// index (the paper's r + 1), so reads find chunks without the coordinator; 0: none.
    pub index_copies: usize,
    /// How often index records that missed a holder, or name chunks a repair moved, are
    /// published again.
    pub index_sync_ms: u64,
    /// Stripes one put may create at most (a put of many tiny chunks is refused before any
    /// metadata is written).
    pub max_stripes_per_object: u64,
    /// Rebalance when a new node joins: chunks move from the fullest nodes to the emptiest
    /// until their fill is within `rebalance_spread` of the mean (as a fraction), at most
    /// `rebalance_bytes_per_s` of moves (each a one-source repair graph).
    pub rebalance_on_join: bool,
    pub rebalance_spread: f64,
    pub rebalance_bytes_per_s: f64,
    /// Where the metadata is: empty for redb in `data_dir` (one coordinator), or
    /// `etcd://HOST:PORT,HOST:PORT,.../PREFIX` for etcd, shared by several coordinators of
    /// which one leads (the others stand by until its leader lease expires).
    pub meta: String,
    /// The leader lease in etcd: how long after a leader dies a standby takes over.
    pub leader_lease_ms: u64,
    /// Keep objects of at most `INLINE_MAX` (16 KiB) in the metadata itself, not in stripes
    /// (see `kintsugi_proto::inline`). Unset: on with redb, off with etcd, whose store is
    /// meant for megabytes, not for a bulk of small objects.
    pub inline_objects: Option<bool>,
}

impl CoordConfig {
    /// What automatic repair (and `remove-node` of a node that is down) asks for.
    pub fn repair_ask(&self) -> crate::repair::options::RepairAsk {
        crate::repair::options::RepairAsk { method: self.repair_method, scheduler: self.repair_scheduler }
    }

    /// Objects of at most `INLINE_MAX` are kept in the metadata (`inline_objects`).
    pub fn keeps_inline(&self) -> bool {
        self.inline_objects.unwrap_or(self.meta.is_empty() || self.meta == "redb")
    }

    /// The shape for moving or sealing one chunk (a drain, a seal): the configured method,
    /// ECPipe where it is `auto` (one chunk has no schedule to predict).
    pub fn repair_shape(&self) -> Shape {
        self.repair_method.fixed().unwrap_or(Shape::Ecpipe)
    }
}

impl Default for CoordConfig {
    fn default() -> Self {
        CoordConfig {
            listen: "127.0.0.1:7400".into(),
            data_dir: PathBuf::from("kintsugi-coordinator-data"),
            dead_after_ms: 10_000,
            io_timeout_ms: 10_000,
            chunk_size: 4 << 20,
            repair_attempts: 4,
            down_out_ms: 600_000,
            auto_repair: true,
            auto_repair_interval_ms: 5_000,
            repair_method: Pick::Fixed(Shape::Cr),
            repair_scheduler: Pick::Fixed(Scheduler::Repairboost),
            repair_slice: 1 << 20,
            repair_max_active: 4,
            repair_max_active_per_destination: 0,
            repair_phase_ms: 0,
            gate_timeslots: TimeslotGating::default(),
            repair_subprocess_chunks: 0,
            repair_straggler_aware: true,
            repair_progress_ms: 500,
            nearfull_ratio: 0.85,
            backfillfull_ratio: 0.90,
            full_ratio: 0.95,
            inventory_slack_ms: 10_000,
            orphan_grace_ms: 600_000,
            secret_file: None,
            protection: None,
            insecure: false,
            upload_timeout_ms: 3_600_000,
            metrics_listen: None,
            gc_grace_ms: 30_000,
            gc_interval_ms: 2_000,
            placement_groups: 64,
            staging_copies: 3,
            seal_after_ms: 60_000,
            seal_interval_ms: 1_000,
            seal_parallel: 8,
            compact_below: 0.5,
            compact_interval_ms: 60_000,
            compact_bytes_per_s: 50e6,
            recovery_node_budget: 512,
            index_copies: 3,
            index_sync_ms: 500,
            max_stripes_per_object: 1 << 20,
            rebalance_on_join: true,
            rebalance_spread: 0.1,
            rebalance_bytes_per_s: 50e6,
            meta: String::new(),
            leader_lease_ms: 4_000,
            inline_objects: None,
        }
    }
}
