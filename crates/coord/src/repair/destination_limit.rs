//! Repairs one destination node receives at once (`repair_max_active_per_destination`):
//! Ceph's osd_recovery_max_active is per OSD, and the simulator's `--max-active` limits
//! each destination so. A ChameleonEC phase otherwise starts all its repairs together, and
//! a destination chosen for many of them splits its downlink many ways.

use kintsugi_plan::NodeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Per destination node: its slots, the limit they were made for, and the repairs running
/// on it now.
type Nodes = Arc<Mutex<HashMap<NodeId, Slots>>>;

struct Slots {
    semaphore: Arc<Semaphore>,
    made_for: usize,
    running: usize,
}

/// Per destination, a semaphore of `limit` permits (0: no limit), and the most repairs
/// any one destination ran at once, limited or not. A repair request may ask for another
/// limit for its run ([`DestinationLimit::limit_run`]); the configured one comes back after.
#[derive(Clone, Default)]
pub(crate) struct DestinationLimit {
    configured: usize,
    limit: Arc<AtomicUsize>,
    nodes: Nodes,
    peak: Arc<AtomicUsize>,
}

/// A run's own limit, until it is dropped.
pub(crate) struct RunLimit {
    limit: Arc<AtomicUsize>,
    configured: usize,
}

impl Drop for RunLimit {
    fn drop(&mut self) {
        self.limit.store(self.configured, Ordering::Relaxed);
    }
}

/// A repair running on its destination; leaving drops the count and frees the permit.
pub(crate) struct Running {
    node: NodeId,
    nodes: Nodes,
    _permit: Option<OwnedSemaphorePermit>,
}

impl DestinationLimit {
    pub(crate) fn new(limit: usize) -> Self {
        DestinationLimit { configured: limit, limit: Arc::new(AtomicUsize::new(limit)), ..Default::default() }
    }

    /// Repairs started until the guard is dropped take `limit` (None: the configured one).
    /// The caller runs one repair run at a time (the coordinator's `repairing` lock).
    pub(crate) fn limit_run(&self, limit: Option<usize>) -> RunLimit {
        self.limit.store(limit.unwrap_or(self.configured), Ordering::Relaxed);
        RunLimit { limit: self.limit.clone(), configured: self.configured }
    }

    /// Waits for a slot on `node` (in the order repairs ask), then counts the repair in.
    pub(crate) async fn enter(&self, node: NodeId) -> Running {
        let limit = self.limit.load(Ordering::Relaxed);
        let sem = {
            let mut nodes = self.nodes.lock().expect("limit lock");
            let e = nodes.entry(node).or_insert_with(|| Slots {
                semaphore: Arc::new(Semaphore::new(limit.max(1))),
                made_for: limit,
                running: 0,
            });
            // Slots made for another limit are remade once nothing holds them: a run asks
            // for its limit before it starts anything.
            if e.made_for != limit && e.running == 0 && Arc::strong_count(&e.semaphore) == 1 {
                *e = Slots { semaphore: Arc::new(Semaphore::new(limit.max(1))), made_for: limit, running: 0 };
            }
            e.semaphore.clone()
        };
        let permit = if limit > 0 { Some(sem.acquire_owned().await.expect("semaphore never closed")) } else { None };
        let now = {
            let mut nodes = self.nodes.lock().expect("limit lock");
            let e = nodes.get_mut(&node).expect("inserted above");
            e.running += 1;
            e.running
        };
        self.peak.fetch_max(now, Ordering::Relaxed);
        Running { node, nodes: self.nodes.clone(), _permit: permit }
    }

    /// The limit repairs start with now (0: none).
    pub(crate) fn current(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Starts counting the peak again (a new repair run).
    pub(crate) fn reset_peak(&self) {
        self.peak.store(0, Ordering::Relaxed);
    }

    /// The most repairs one destination ran at once so far.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(e) = self.nodes.lock().expect("limit lock").get_mut(&self.node) {
            e.running -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Many repairs to two destinations: at most `limit` run on either at once, and all run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_limit_per_destination() {
        for limit in [1, 3] {
            let l = DestinationLimit::new(limit);
            let mut set = tokio::task::JoinSet::new();
            for i in 0..24u32 {
                let l = l.clone();
                set.spawn(async move {
                    let _r = l.enter(i % 2).await;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                });
            }
            let mut done = 0;
            while set.join_next().await.transpose().unwrap().is_some() {
                done += 1;
            }
            assert_eq!(done, 24);
            assert_eq!(l.peak(), limit, "limit {limit}");
        }
        // No limit: every one at once, and the peak says so.
        let l = DestinationLimit::new(0);
        let held: Vec<Running> = enter_all(&l, 5).await;
        assert_eq!(l.peak(), 5);
        drop(held);
    }

    /// A run's own limit holds for that run, and the configured one comes back after it.
    #[tokio::test]
    async fn a_run_may_ask_for_its_own_limit() {
        let l = DestinationLimit::new(1);
        {
            let _run = l.limit_run(Some(3));
            let held = enter_all(&l, 3).await;
            assert_eq!(l.peak(), 3);
            drop(held);
        }
        l.reset_peak();
        let first = l.enter(7).await;
        // The configured limit, 1, again: a second repair waits for the first.
        let second = tokio::time::timeout(Duration::from_millis(50), l.enter(7)).await;
        assert!(second.is_err(), "a second repair entered under a limit of 1");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), l.enter(7)).await.expect("the slot was freed");
        assert_eq!(l.peak(), 1);
        // No limit for a run.
        let _run = l.limit_run(Some(0));
        drop(second);
        let held = enter_all(&l, 4).await;
        assert_eq!(l.peak(), 4);
        drop(held);
    }

    async fn enter_all(l: &DestinationLimit, n: usize) -> Vec<Running> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(l.enter(7).await);
        }
        out
    }
}
