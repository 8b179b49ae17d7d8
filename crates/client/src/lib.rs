//! kintsugi's client library: what the CLI, the benchmarks and the S3 gateway use to reach a
//! cluster. It erasure-codes objects itself and writes chunks straight to the nodes (as
//! HDFS-EC clients do), reads data chunks straight from them, and runs the sink of a
//! degraded-read graph the coordinator plans when one is unavailable or corrupt.

pub mod client;
pub mod error;
pub mod geo_io;
pub mod index_reads;
mod object_io;
pub mod straggler_injector;

pub use client::{ping, Client, DegradedReadObserver, VersionListing, VersionsPage, FAILOVER_WAIT};
pub use error::{Error, ErrorKind};
pub use object_io::{CommitTerms, ObjectSink, Progress, ReadReport};
