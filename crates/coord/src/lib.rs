//! The kintsugi coordinator: metadata, placement, failure detection, repair orchestration.
//! Clients talk to it through `kintsugi-client`.
//!
//! `startup` opens the metadata store and serves; `requests` routes each request to the
//! part that answers it. The parts, each in its own folder: `metadata` (the store, its
//! indexes, listings and versions; it knows nothing of the rest), `membership` (nodes,
//! heartbeats, identity, space, traffic, inventories, draining), `placement` (where chunks
//! go and how they move), `objects` (puts, commits, deletes, garbage), `object_index`
//! (Geometric Partitioning's replicated index), `repair` (planning, scheduling, dispatch,
//! ChameleonEC's phases and stragglers) and `workers` (what runs on its own period).
//! `Coordinator` holds their state; no file of the crate imports one that imports it back.

mod clock;
mod cluster_status;
mod config;
pub mod coordinator;
pub mod membership;
pub mod metadata;
pub mod metrics;
pub mod object_index;
mod objects;
pub mod placement;
pub mod repair;
mod requests;
mod startup;
pub mod status_page;
mod workers;

pub use config::CoordConfig;
pub use coordinator::Coordinator;
pub use objects::{MAX_NAME, MAX_PARTS};
pub use repair::options::{RepairAsk, TimeslotGating};
pub use startup::{start, CoordHandle};
