//! HDD emulation for the chunk store (Geometric Partitioning's result rests on HDD seeks and
//! this machine has SSDs): every read and write first waits for an emulated disk that
//! serves one I/O at a time, charging the shared [`HddModel`] (a positioning, or less for a
//! short forward gap in the same file, plus bytes at the sequential rate). The simulator
//! uses the same model and parameters.
//!
//! An I/O reserves its slot on the emulated disk at once (I/Os queue behind each other
//! across threads, and the page cache does not hide them, like the paper's runs, which
//! dropped caches first); the caller then waits for it where a real disk would have blocked
//! it: [`settle`] in async code (the store's calls are synchronous and the embedded cluster
//! runs every node on one runtime, so sleeping there would stall other nodes), or
//! [`settle_blocking`] on a blocking thread. The wait is kept per thread between the two.

use kintsugi_hdd::HddModel;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct DiskEmulation {
    model: HddModel,
    state: Mutex<Head>,
    /// Nanoseconds of I/O served or queued so far (the bandwidth monitor's disk time).
    busy_ns: AtomicU64,
}

#[derive(Debug)]
struct Head {
    /// When the disk finishes what is queued on it.
    free_at: Instant,
    /// The file and offset the head was left at.
    at: Option<(u64, u64)>,
}

impl DiskEmulation {
    pub fn new(model: HddModel) -> Self {
        DiskEmulation { model, state: Mutex::new(Head { free_at: Instant::now(), at: None }), busy_ns: AtomicU64::new(0) }
    }

    /// Seconds of I/O the disk has been given so far.
    pub fn busy_seconds(&self) -> f64 {
        self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9
    }

    pub fn model(&self) -> HddModel {
        self.model
    }

    /// Queues an I/O of `len` bytes at `off` of file `file`; the calling thread's next
    /// [`settle`] or [`settle_blocking`] waits until the disk has served it. Returns the
    /// seconds the disk spends on it.
    pub fn io(&self, file: u64, off: u64, len: u64) -> f64 {
        let (done, cost) = {
            let mut h = self.state.lock().expect("disk lock");
            let end = h.at.and_then(|(f, e)| (f == file).then_some(e));
            let cost = self.model.positioning(end, off) + len as f64 / self.model.bandwidth;
            let start = h.free_at.max(Instant::now());
            h.free_at = start + Duration::from_secs_f64(cost);
            h.at = Some((file, off + len));
            (h.free_at, cost)
        };
        PENDING.with(|p| p.set(Some(p.get().map_or(done, |q: Instant| q.max(done)))));
        self.busy_ns.fetch_add((cost * 1e9) as u64, Ordering::Relaxed);
        cost
    }
}

thread_local! {
    /// When the emulated disk will have served this thread's I/Os not yet waited for.
    static PENDING: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Waits (asynchronously) for this thread's emulated I/Os; free without emulation.
pub async fn settle() {
    if let Some(t) = PENDING.with(|p| p.take()) {
        tokio::time::sleep_until(t.into()).await;
    }
}

/// Waits, blocking the thread, for its emulated I/Os.
pub fn settle_blocking() {
    if let Some(t) = PENDING.with(|p| p.take()) {
        let now = Instant::now();
        if t > now {
            std::thread::sleep(t - now);
        }
    }
}

/// A stable key for a file name (the head position is per file).
pub fn file_key(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_io_reads_through_and_jumps_seek() {
        let d = DiskEmulation::new(HddModel::new(0.005, 100e6).unwrap());
        let t = Instant::now();
        assert!((d.io(1, 0, 1_000_000) - 0.015).abs() < 1e-9, "first I/O positions");
        assert!((d.io(1, 1_000_000, 1_000_000) - 0.010).abs() < 1e-9, "the next one streams");
        assert!((d.io(2, 0, 0) - 0.005).abs() < 1e-9, "another file positions");
        settle_blocking();
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    /// Two threads' I/Os queue: together they take the sum of their times.
    #[test]
    fn concurrent_io_queues() {
        let d = std::sync::Arc::new(DiskEmulation::new(HddModel::new(0.02, 1e9).unwrap()));
        let t = Instant::now();
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let d = d.clone();
                std::thread::spawn(move || {
                    for j in 0..3 {
                        d.io(i, j * 1_000_000_000, 1);
                        settle_blocking();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(t.elapsed() >= Duration::from_millis(120), "{:?}", t.elapsed());
    }
}
