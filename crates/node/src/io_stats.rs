//! What a store's chunk I/O did: blocks that failed their checksum, and, once the node
//! serves metrics, how long verified reads and durable commits took. The timings are off
//! until then, so a node without metrics pays nothing for them.

use kintsugi_metrics::prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// A store's I/O counters, shared by its readers and writers.
#[derive(Debug, Default)]
pub struct IoStats {
    /// Blocks whose CRC-32C did not match on a read, since the node started.
    pub crc_failures: AtomicU64,
    latency: OnceLock<IoLatency>,
}

/// Latency of chunk I/O, in seconds.
#[derive(Debug)]
pub struct IoLatency {
    /// One verified read: the read call and the checksum pass over what it read.
    pub read: Histogram,
    /// Making a written chunk durable and visible: footer, fsync, rename, directory sync.
    pub commit: Histogram,
}

/// Buckets from 50 µs (a page-cache read of a block) to 2.6 s (an fsync behind a busy HDD).
fn buckets() -> impl Iterator<Item = f64> {
    kintsugi_metrics::prometheus_client::metrics::histogram::exponential_buckets(50e-6, 2.0, 16)
}

impl IoStats {
    /// Starts timing chunk I/O (idempotent); returns the histograms to register.
    pub fn enable_latency(&self) -> &IoLatency {
        self.latency.get_or_init(|| IoLatency { read: Histogram::new(buckets()), commit: Histogram::new(buckets()) })
    }

    /// When an I/O starts, if I/O is timed.
    pub(crate) fn start(&self) -> Option<Instant> {
        self.latency.get().map(|_| Instant::now())
    }

    pub(crate) fn read_done(&self, started: Option<Instant>) {
        if let (Some(t), Some(l)) = (started, self.latency.get()) {
            l.read.observe(t.elapsed().as_secs_f64());
        }
    }

    pub(crate) fn commit_done(&self, started: Option<Instant>) {
        if let (Some(t), Some(l)) = (started, self.latency.get()) {
            l.commit.observe(t.elapsed().as_secs_f64());
        }
    }

    pub(crate) fn crc_failed(&self) {
        self.crc_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn crc_failures(&self) -> u64 {
        self.crc_failures.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_timed_until_latency_is_enabled() {
        let s = IoStats::default();
        assert!(s.start().is_none());
        s.read_done(Some(Instant::now()));
        let l = s.enable_latency();
        let t = s.start();
        assert!(t.is_some());
        s.read_done(t);
        s.commit_done(s.start());
        let mut text = String::new();
        let mut r = kintsugi_metrics::prometheus_client::registry::Registry::default();
        r.register("read", "r", l.read.clone());
        r.register("commit", "c", l.commit.clone());
        kintsugi_metrics::prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(text.contains("read_count 1"), "{text}");
        assert!(text.contains("commit_count 1"), "{text}");
    }
}
