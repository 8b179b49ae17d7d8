//! Cluster metadata: objects -> stripes -> chunk locations, nodes, and repairs in progress.
//! [`MetaStore`] is the interface (a distributed store can replace it later); [`RedbMeta`]
//! keeps it in redb, an embedded crash-safe B-tree (every write is one committed
//! transaction, so a crash loses nothing that was acknowledged).
//!
//! Every read-modify-write runs inside one write transaction ([`MetaStore::update`]), so
//! concurrent requests never overwrite each other's changes. An object name maps to its
//! committed version; a put is an *upload* (its own version id, its own stripes) until its
//! commit replaces the name's current version in one transaction (the later commit wins, as
//! in S3). Stripes of replaced, deleted or abandoned versions move to *garbage* until every
//! node holding one of their chunks has deleted it.
//!
//! This folder is the metadata service and knows nothing of the coordinator above it: the
//! records and the store interface (`records`), the two stores (`redb_store`, `etcd_store` with its
//! HTTP client and leader lease), the indexes they keep (`index`), listings (`listing`,
//! `version_listing`), the versions of a name (`versions`, `version_names`), id blocks
//! (`id_blocks`) and how a call waits on a store (`waiting`).

pub mod etcd_http;
pub mod etcd_store;
pub(crate) mod id_blocks;
pub mod index;
pub mod leader;
pub mod listing;
pub mod records;
pub(crate) mod redb_store;
pub mod version_listing;
pub mod version_names;
pub mod versions;
pub(crate) mod waiting;

pub use records::*;
pub use redb_store::RedbMeta;

/// Runs `f`, whose metadata reads are to show or to hear (`status`, a heartbeat), not to
/// act on: with redb they do not wait until what they see is durable, which a long update
/// can hold back for seconds (etcd's reads never wait).
pub(crate) fn peeking<T>(f: impl FnOnce() -> T) -> T {
    redb_store::group_commit::peeking(f)
}
