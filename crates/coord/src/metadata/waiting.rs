//! Waiting on the metadata store without stalling a runtime's other tasks.

/// Runs a metadata call that may wait long: for etcd, or for a lock another update holds
/// (a put of many stripes holds the store's writer for seconds). On a worker of a
/// multi-threaded runtime the worker's other tasks move to another thread meanwhile, so
/// heartbeats are still heard while it waits; elsewhere (a blocking thread, a
/// single-threaded runtime) `f` just runs.
pub(crate) fn may_wait<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Takes `lock`: at once when it is free, else waiting as [`may_wait`] does (handing a
/// worker's tasks to another thread costs a thread switch, so only a wait pays it).
pub(crate) fn lock_may_wait<T>(lock: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match lock.try_lock() {
        Ok(g) => g,
        // Poisoned or held: a panicked holder left nothing half-done that a guard protects.
        Err(_) => may_wait(|| lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner)),
    }
}

/// What can go wrong in the metadata store itself, as opposed to what a transaction's own
/// logic refuses (which travels as the caller's `WireError`).
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The database failed: an I/O error, a transaction that did not commit, a file that
    /// cannot be opened.
    #[error("metadata store: {0}")]
    Backend(String),
    /// A stored record or key that does not decode.
    #[error("metadata store: corrupt record: {0}")]
    Corrupt(String),
    /// The store cannot be reached now (no etcd member answers).
    #[error("metadata store: {0}")]
    Unreachable(String),
    /// Another coordinator holds the leader key: this one may not write.
    #[error("metadata store: this coordinator is no longer the leader (another one holds the leader key in etcd)")]
    NotLeader,
    /// A setting of the store that is wrong (a bad URL).
    #[error("{0}")]
    Config(String),
}

/// Unreachable and not leading pass (a client retries, the next leader serves); a broken
/// or corrupt store does not.
impl From<MetaError> for WireError {
    fn from(e: MetaError) -> Self {
        match e {
            MetaError::Unreachable(_) | MetaError::NotLeader => WireError::unavailable(e.to_string()),
            MetaError::Config(_) => WireError::bad_request(e.to_string()),
            MetaError::Backend(_) | MetaError::Corrupt(_) => WireError::internal(e.to_string()),
        }
    }
}

/// A record as stored (JSON: fields added later read as their defaults from older records).
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(bytes).map_err(|x| MetaError::Corrupt(x.to_string()).into())
}

/// One change in a batch.
#[derive(Clone, Debug)]
pub enum Change {
    PutObject(ObjectRecord),
    /// The bytes of inline version `version` (see [`ObjectRecord::inline`]).
    PutInline {
        version: u64,
        data: Vec<u8>,
    },
    DeleteInline(u64),
    DeleteObject(String),
    PutUpload(ObjectRecord),
    DeleteUpload(u64),
    PutGarbage(StripeRecord),
    DeleteGarbage(u64),
    PutStripe(StripeRecord),
    DeleteStripe(u64),
    PutNode(NodeRecord),
    DeleteNode(NodeId),
    PutPending(PendingRepair),
    SetCounter(String, u64),
    DeletePending {
        stripe: u64,
        index: usize,
    },
}
