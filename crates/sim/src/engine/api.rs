//! What a simulation takes and gives: jobs, admission, the model, options and results.

use kintsugi_plan::RepairGraph;
use serde::Serialize;

/// Units a relay receives ahead of what it has forwarded: the executor's bounded input
/// queue (`node::input::INPUT_AHEAD`). Without a bound an upstream hop would run
/// arbitrarily far ahead of a slower downstream one, which no real relay allows.
pub const RELAY_WINDOW: u32 = 4;

/// One repair to run: a graph, the chunk and slice sizes, and the earliest start.
#[derive(Clone, Debug)]
pub struct Job {
    pub graph: RepairGraph,
    pub chunk_len: usize,
    pub slice_len: usize,
    /// Seconds after the start of the simulation before which the job may not start.
    pub release: f64,
    /// A transmission schedule across jobs (RepairBoost's timeslots): per vertex, the slot
    /// of its send. A node sends a scheduled transfer only when all its sends of earlier
    /// slots have finished, and a node receives it only when all its receives of earlier
    /// slots have. Empty: no schedule.
    pub timeslots: Vec<Option<u32>>,
    /// Stop the job at this time if it has not finished (ChameleonEC's restart of a
    /// straggler): its transfers end where they are and it ends unfinished. Not with
    /// timeslots.
    pub cancel_at: Option<f64>,
    /// A user's request rather than a repair (see [`crate::requests`]).
    pub request: Option<Request>,
}

/// What marks a job as a user's request: it is never held by per-destination admission
/// (that limits repairs), and a closed-loop client's next request starts only once its
/// last one has finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The job (an earlier one, itself a request) this one waits for; it then starts at
    /// that job's end, or its own release if later.
    pub after: Option<u32>,
}

/// Which jobs run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    /// Every job starts at its release time.
    All,
    /// Each destination node runs at most this many repairs at a time, in job order
    /// (like Ceph's osd_recovery_max_active or HDFS's replication streams). Jobs gated by
    /// timeslots are ordered by their slots instead, and start at their release.
    PerDestination(usize),
}

/// How pipelined repairs are modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// Every slice of every edge is a transfer: the reference, exact for the executors'
    /// schedule, with cost proportional to chunk/slice per edge.
    #[default]
    Slice,
    /// A pipelined repair is one flow at one rate on all its edges (its weight on a link is
    /// the number of its edges there), plus its pipeline's fill; a timeslot-gated one moves
    /// edge by edge, each edge following its inputs. Store-and-forward graphs, and repairs
    /// reading from disks with a seek cost, run as in the slice model.
    Fluid,
}

impl std::str::FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "slice" => Ok(Model::Slice),
            "fluid" => Ok(Model::Fluid),
            _ => Err(format!("unknown model '{s}': expected slice or fluid")),
        }
    }
}

/// Knobs of one run.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub admission: Admission,
    pub model: Model,
    /// Keep each node's link rates over time (for utilisation CSVs and plots).
    pub track_utilization: bool,
    /// Recompute all fair shares at every event instead of only the affected flows
    /// (same result, much slower: the reference the incremental path is tested against).
    pub full_recompute: bool,
    /// Seconds within which events are taken together: transfers ending and timers firing
    /// up to this long after the next event are done with it, and links are shared out once
    /// for all of them. 0 (the default) is exact. Each event so comes at most this early,
    /// and a destination's queued repairs add up the error, so a repair ends at most
    /// (window x repairs before it on its destination) early; it buys fewer recomputes of
    /// the fair shares where thousands of repairs run at once.
    pub event_window: f64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions { admission: Admission::All, model: Model::Slice, track_utilization: false, full_recompute: false, event_window: 0.0 }
    }
}

/// When a job started and finished.
#[derive(Clone, Debug, Serialize)]
pub struct JobResult {
    pub start: f64,
    pub end: f64,
    /// Stopped at its `cancel_at` before it finished.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
}

/// Rate changes of one node: (time, uplink bytes/s, downlink bytes/s) from then on.
pub type RateLog = Vec<(f64, f64, f64)>;

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct SimResult {
    /// Time when the last job finished.
    pub makespan: f64,
    pub jobs: Vec<JobResult>,
    /// Bytes each node sent / received over the network.
    pub upload_bytes: Vec<f64>,
    pub download_bytes: Vec<f64>,
    /// Events processed and transfers simulated (the cost drivers).
    pub events: u64,
    pub transfers: u64,
    /// Fair-share updates done incrementally, and by full recompute.
    pub local_updates: u64,
    pub full_updates: u64,
    /// Per node, when tracking was asked for.
    pub rates: Option<Vec<RateLog>>,
}
