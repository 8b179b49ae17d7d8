//! The wire protocol of kintsugi: length-prefixed frames carrying control messages
//! (MessagePack) or raw data slices, the typed messages nodes, the coordinator and clients
//! exchange, and the repair graph as it travels (`wire_graph`).

pub mod auth;
pub mod chunk_id;
pub mod crc;
pub mod frame;
pub mod graph_faults;
pub mod handshake;
pub mod inline;
pub mod layout;
pub mod messages;
pub mod object_index;
pub mod placement;
pub mod retention;
pub mod rpc;
pub mod secure;
mod spill_read;
pub mod status;
pub mod tcp;
pub mod versions;
pub mod wire_error;
pub mod wire_graph;

pub use frame::{read_frame, read_frame_timeout, recv, recv_data, send, write_frame, Frame, FrameError, Kind, MAX_FRAME};
pub use inline::{Inline, INLINE_MAX};
pub use messages::*;
pub use versions::{VersionInfo, VersionRef, Versioning};
