//! The client library's errors are the wire's: a kind a caller can act on (the S3 gateway
//! maps it to S3's error codes, the CLI to its exit), the chunks and nodes at fault, and
//! the message that says what happened. The coordinator's and the nodes' errors arrive
//! typed; the client's own (no coordinator, a timeout, a chunk that does not match its
//! checksum) are made typed here.

pub use kintsugi_proto::{ErrorKind, WireError as Error};
