//! The kintsugi coordinator (metadata, placement, failure detection, repair orchestration)
//! and the client that talks to it and to the nodes.

mod auto_repair;
pub mod bandwidth;
mod chunk_move;
pub mod client;
mod cluster_status;
mod config;
pub mod coordinator;
pub mod etcd_http;
pub mod full_node_plan;
pub mod geo_io;
pub mod geo_layout;
pub mod graph_faults;
mod id_blocks;
pub mod index_reads;
mod inventory;
pub mod leader;
mod membership;
pub mod meta;
pub mod meta_etcd;
pub mod meta_index;
mod meta_redb;
mod node_drain;
pub mod object_index;
mod object_io;
pub mod object_listing;
mod objects;
mod phases;
mod rebalance;
pub mod recovery_budget;
mod repair;
mod repair_batch;
mod seal;
mod small_bucket;
mod straggler;
pub mod straggler_injector;
mod stripe_health;
mod stripe_placement;
mod subprocess;
mod timeslot_reservation;
mod upload_moves;

pub use client::Client;
pub use coordinator::{start, CoordConfig, CoordHandle, Coordinator};
pub use full_node_plan::TimeslotGating;
pub use objects::{MAX_NAME, MAX_PARTS, NO_PART};
