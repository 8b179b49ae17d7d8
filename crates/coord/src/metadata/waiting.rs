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
