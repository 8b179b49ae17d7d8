//! Geometric Partitioning (Shan et al., SOSP'21): objects cut into chunks whose sizes grow
//! geometrically, so that a degraded read can stream chunk i while chunk i+1 is being
//! repaired and recovery still reads large, disk-efficient chunks.
//!
//! - [`partition`]: Algorithm 1, the 2-pass scan, with the 256 MiB cap.
//! - [`trace`]: the Alibaba OSS object-size CDF and inverse-CDF sampling from it.
//! - [`workload`]: the paper's W1/W2 workloads and the figures that follow from the trace
//!   alone (small-bucket share, average chunk size, chunk size against q).
//! - [`layout`]: the layouts the paper compares (Geo, Stripe, Stripe-Max, Contiguous) and
//!   the repair units a lost disk's share of them needs.
//! - [`recovery`]: recovery of a lost disk simulated on HDD models.
//! - [`degraded`]: degraded (and range) reads pipelined chunk by chunk, per layout.
//! - [`tension`]: the chunk-size tension of Figure 4 (recovery reads against degraded reads).
//!
//! The HDD model (positioning cost plus sequential bandwidth) that the node store's
//! emulation and these simulations share is `kintsugi_hdd`'s, re-exported here.

pub mod degraded;
pub mod layout;
pub mod partition;
pub mod recovery;
pub mod tension;
pub mod trace;
pub mod workload;

pub use kintsugi_hdd::HddModel;
pub use partition::{partition, Partition, PartitionError, DEFAULT_MAX_CHUNK};
