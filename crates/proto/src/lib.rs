//! The wire protocol of kintsugi: length-prefixed frames carrying JSON control messages or
//! raw data slices, and the typed messages nodes, the coordinator and clients exchange.

pub mod auth;
pub mod chunk_id;
pub mod frame;
pub mod layout;
pub mod messages;
pub mod object_index;
pub mod placement;
pub mod secure;
pub mod status;
pub mod tcp;
pub mod wire_graph;

pub use frame::{read_frame, read_frame_timeout, recv, recv_data, send, write_frame, Frame, FrameError, Kind, MAX_FRAME};
pub use messages::*;
