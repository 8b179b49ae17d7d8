//! A node's traffic and I/O counters: what its repairs, clients and scrub moved (read by
//! `stat`, the monitor's link reports and `/metrics`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Traffic counters of a node.
#[derive(Debug, Default)]
pub struct Counters {
    /// Repair traffic: repair graphs' edges and degraded reads.
    pub sent: AtomicU64,
    pub received: AtomicU64,
    /// Foreground traffic: clients' chunk writes (received) and reads (sent).
    pub fg_sent: AtomicU64,
    pub fg_received: AtomicU64,
    /// Helper bytes read from the local store: what repairs used.
    pub read: AtomicU64,
    /// What that took from the chunk files: whole checksum blocks, read-ahead, and once for
    /// repairs sharing a chunk's reads (what `pread` returned, footers aside).
    pub file_read: AtomicU64,
    /// Rebuilt chunk bytes this node's sinks stored (counted once durable).
    pub written: AtomicU64,
    /// Rebuilt bytes this node's sinks computed by the code's structured repair (Clay's
    /// coupling and per-plane decode) rather than by adding the equation's terms.
    pub structured: AtomicU64,
    pub active: AtomicU64,
    /// Connections open to this node (clients, peers, the coordinator).
    pub connections: AtomicU64,
    /// The part of `sent`, `received` and `read` that served degraded reads (repairs whose
    /// result goes to a client rather than into a store).
    pub degraded_sent: AtomicU64,
    pub degraded_received: AtomicU64,
    pub degraded_read: AtomicU64,
    /// The scrub: bytes it read and verified, passes it finished, and where the current
    /// pass is (chunks checked of the chunks it lists).
    pub scrub_read: AtomicU64,
    pub scrub_passes: AtomicU64,
    pub scrub_checked: AtomicU64,
    pub scrub_chunks: AtomicU64,
}

impl Counters {
    /// A repair's bytes sent on (`degraded`: it serves a degraded read).
    pub fn repair_sent(&self, n: u64, degraded: bool) {
        self.sent.fetch_add(n, Ordering::Relaxed);
        if degraded {
            self.degraded_sent.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn repair_received(&self, n: u64, degraded: bool) {
        self.received.fetch_add(n, Ordering::Relaxed);
        if degraded {
            self.degraded_received.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Bytes a repair's helper reads took from this node's chunk files.
    pub fn helper_file_read(&self, n: u64) {
        self.file_read.fetch_add(n, Ordering::Relaxed);
    }

    /// Helper bytes a repair read from this node's chunks.
    pub fn helper_read(&self, n: u64, degraded: bool) {
        self.read.fetch_add(n, Ordering::Relaxed);
        if degraded {
            self.degraded_read.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// One connection open to the node, in `connections` for as long as it lives, however it
/// ends (a served `Pull` hands it on to the vertex writing it).
pub struct OpenConnection(Arc<Counters>);

impl OpenConnection {
    pub fn new(c: Arc<Counters>) -> Self {
        c.connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(c)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
