//! The wall clock the metadata records (creation, change and intent times, in ms since
//! the Unix epoch).

/// Milliseconds since the Unix epoch (0 if the clock is set before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
