//! What clients saw of a run (each write with when it started and ended and whether it was
//! acknowledged), and what the store may hold at the end given that.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// A write as the client saw it.
#[derive(Clone, Debug)]
pub struct Write {
    pub start: Instant,
    pub end: Instant,
    pub acked: bool,
    /// The bytes put, or `None` for a delete.
    pub data: Option<Arc<Vec<u8>>>,
}

#[derive(Default)]
pub struct History {
    pub writes: Vec<Vec<Write>>,
    /// Every version ever put, per name (reads must return one of them).
    pub versions: Vec<Vec<Arc<Vec<u8>>>>,
    pub reads_ok: usize,
    pub reads_failed: usize,
    /// Why operations failed (first words of the error), for the report.
    pub errors: BTreeMap<String, usize>,
}

impl History {
    pub fn error(&mut self, op: &str, e: impl std::fmt::Display) {
        let e = e.to_string();
        let words: String = e.split_whitespace().filter(|w| !w.chars().any(|c| c.is_ascii_digit())).take(8).collect::<Vec<_>>().join(" ");
        *self.errors.entry(format!("{op}: {words}")).or_default() += 1;
    }
}

/// What the object may hold at the end: the outcome of any write that no acknowledged
/// write started after (later writes overwrite it), and "absent" if nothing was ever
/// acknowledged. `None` is "absent".
pub fn allowed_finals(writes: &[Write]) -> Vec<Option<Arc<Vec<u8>>>> {
    let mut out: Vec<Option<Arc<Vec<u8>>>> =
        writes.iter().filter(|w| !writes.iter().any(|p| p.acked && p.start > w.end)).map(|w| w.data.clone()).collect();
    if !writes.iter().any(|w| w.acked) {
        out.push(None);
    }
    out
}
