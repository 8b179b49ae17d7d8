//! A node's configuration: every field defaults, and `kintsugi node --config` reads it
//! from TOML.

use kintsugi_plan::NodeId;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A node's configuration (TOML for `kintsugi node --config`); every field has a default.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Unique node id in the cluster.
    pub id: NodeId,
    /// Address to listen on; port 0 picks a free port.
    pub listen: String,
    /// Where `/metrics` (Prometheus) is served; none when absent.
    pub metrics_listen: Option<String>,
    /// Address others use to reach this node (default: the listening address).
    pub advertise: Option<String>,
    /// Where chunks are stored.
    pub data_dir: PathBuf,
    /// Coordinator to send heartbeats to.
    pub coordinator: Option<String>,
    /// Emulated uplink and downlink in bytes per second (unshaped when absent).
    pub uplink: Option<f64>,
    pub downlink: Option<f64>,
    pub heartbeat_ms: u64,
    /// How long to wait for a peer before giving up on a stream.
    pub io_timeout_ms: u64,
    /// Every this long (and at start) the node sends the coordinator its chunk list.
    pub inventory_ms: u64,
    /// Scrub: every chunk is re-read against its checksums once per this interval
    /// (0: never), at most `scrub_bytes_per_s` (like Ceph's deep scrub, throttled).
    pub scrub_interval_ms: u64,
    pub scrub_bytes_per_s: f64,
    /// Space this node may fill with chunks (default: what its file system has).
    pub capacity_bytes: Option<u64>,
    /// File holding the cluster secret (also `--secret-file`, `KINTSUGI_SECRET_FILE`).
    pub secret_file: Option<PathBuf>,
    /// How connections are protected with a secret: "encrypted" (default) or
    /// "authenticated" (integrity only; also `--protection`).
    pub protection: Option<String>,
    /// Serve without a cluster secret on an address other than loopback (also `--insecure`).
    pub insecure: bool,
    /// The node's link rate in bytes per second (both directions), for the coordinator's
    /// residual-bandwidth accounting; default: the emulated uplink and downlink, if any.
    pub link_capacity: Option<f64>,
    /// Threads of the node's async runtime (default: one per core). Many nodes on one
    /// host (the testbed) run best with one each: wake-ups stay on the thread.
    pub worker_threads: Option<usize>,
    /// HDD emulation of the chunk store: positioning milliseconds per I/O and sequential
    /// bytes per second (either one turns it on; the other defaults to 8 ms or 180 MB/s).
    pub hdd_seek_ms: Option<f64>,
    pub hdd_bandwidth: Option<f64>,
    /// Verified read-ahead per chunk a repair helper reads (default 512 KiB, 4 MiB on an
    /// emulated HDD).
    pub read_ahead_bytes: Option<usize>,
    /// TCP congestion control of the node's connections (e.g. cubic); default: the host's.
    /// Process-wide: nodes sharing a process (an embedded cluster) share it.
    /// The testbed sets cubic: with BBR, flows whose acknowledgements queue behind a busy
    /// link's data stall at their window (see `kintsugi_proto::tcp`).
    pub tcp_congestion: Option<String>,
    /// DSCP (0-63) of what the node sends for repairs, so the network can carry repair in
    /// a class of its own below users' traffic (a priority or weighted qdisc, a switch's
    /// queues); 1 is RFC 8622's Lower Effort. Degraded reads are users' reads and stay
    /// unmarked. Default: unmarked.
    pub repair_dscp: Option<u8>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            id: 0,
            listen: "127.0.0.1:0".into(),
            advertise: None,
            data_dir: PathBuf::from("kintsugi-node-data"),
            coordinator: None,
            uplink: None,
            downlink: None,
            heartbeat_ms: 500,
            io_timeout_ms: 10_000,
            inventory_ms: 60_000,
            scrub_interval_ms: 86_400_000,
            scrub_bytes_per_s: 64e6,
            capacity_bytes: None,
            secret_file: None,
            protection: None,
            insecure: false,
            metrics_listen: None,
            worker_threads: None,
            hdd_seek_ms: None,
            hdd_bandwidth: None,
            read_ahead_bytes: None,
            link_capacity: None,
            tcp_congestion: None,
            repair_dscp: None,
        }
    }
}
