//! kintsugi's S3 gateway: the S3 API (SigV4, XML and routing by the `s3s` crate, over
//! hyper) onto a kintsugi cluster through the client library. It keeps no state of its own
//! (buckets, uploads and parts are records in the cluster, see `names`), so any number of
//! gateways serve one cluster, and it streams bodies with bounded memory (`body`).

pub mod access;
pub mod access_keys;
pub mod acl;
pub mod body;
pub mod bucket_policy;
pub mod buckets;
pub mod checksums;
pub mod client_limits;
pub mod conditions;
pub mod cors;
pub mod credentials;
pub mod errors;
pub mod gateway;
pub mod hosts;
pub mod lifecycle;
pub mod lifecycle_worker;
pub mod listing;
pub mod memory_budget;
pub mod metrics;
pub mod multipart;
pub mod names;
pub mod object_lock;
pub mod object_meta;
pub mod objects;
pub mod region;
pub mod server;
pub mod settings;
pub mod sse;
pub mod tagging;
pub mod tls;
pub mod unread_body;
pub mod unsupported;
pub mod versioning;

pub use gateway::Gateway;
pub use server::{start, S3Config, S3Handle, DEFAULT_REGION};
