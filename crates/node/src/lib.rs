//! The kintsugi storage node: a chunk store on local disk, a network executor for its part
//! of repair graphs, emulated links, and the server tying them together.

pub mod assemble;
pub mod bucket;
mod checksum_block;
mod chunk_reader;
mod chunk_writer;
pub mod config;
mod counters;
mod crc_shift;
pub mod disk_emulation;
pub mod exec;
mod footer_cache;
mod identity;
mod input;
mod inventory;
pub mod io_stats;
mod lazy_db;
pub mod link_speed;
pub mod metrics;
pub mod monitor;
pub mod object_index;
mod output;
pub mod pool;
mod pull;
mod read_window;
pub mod server;
pub mod shaper;
mod sink;
mod slot_gate;
pub mod store;
mod structured_repair;
mod terms;
pub mod timeslot_gate;
pub mod wire;

pub use exec::{run_sink, Counters, Executor};
pub use server::{start, NodeConfig, NodeHandle};
pub use shaper::Shaper;
pub use store::ChunkStore;
pub use wire::Job;
