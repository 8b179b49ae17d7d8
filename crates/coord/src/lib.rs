//! The kintsugi coordinator: metadata, placement, failure detection, repair orchestration.
//! Clients talk to it through `kintsugi-client`.

mod auto_repair;
pub mod bandwidth;
mod chunk_move;
mod cluster_status;
mod config;
pub mod coordinator;
mod destination_limit;
pub mod etcd_http;
mod foreground_record;
pub mod full_node_plan;
mod full_node_repair;
pub mod geo_layout;
mod id_blocks;
mod inventory;
pub mod leader;
mod membership;
pub mod meta;
pub mod meta_etcd;
pub mod meta_index;
mod meta_redb;
pub mod metrics;
mod node_drain;
pub mod object_index;
pub mod object_listing;
mod objects;
mod phases;
mod rebalance;
pub mod recovery_budget;
mod repair;
pub mod repair_auto;
mod repair_batch;
mod seal;
mod small_bucket;
pub mod status_page;
mod straggler;
mod stripe_health;
mod stripe_placement;
mod subprocess;
mod timeslot_reservation;
mod upload_moves;

pub use coordinator::{start, CoordConfig, CoordHandle, Coordinator};
pub use full_node_plan::TimeslotGating;
pub use objects::{MAX_NAME, MAX_PARTS};
pub use repair_auto::RepairAsk;
