//! Repairs one destination node receives at once (`repair_max_active_per_destination`):
//! Ceph's osd_recovery_max_active is per OSD, and the simulator's `--max-active` limits
//! each destination so. A ChameleonEC phase otherwise starts all its repairs together, and
//! a destination chosen for many of them splits its downlink many ways.

use kintsugi_plan::NodeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Per destination node: its slots, and the repairs running on it now.
type Nodes = Arc<Mutex<HashMap<NodeId, (Arc<Semaphore>, usize)>>>;

/// Per destination, a semaphore of `limit` permits (0: no limit), and the most repairs
/// any one destination ran at once, limited or not.
#[derive(Clone, Default)]
pub(crate) struct DestinationLimit {
    limit: usize,
    nodes: Nodes,
    peak: Arc<AtomicUsize>,
}

/// A repair running on its destination; leaving drops the count and frees the permit.
pub(crate) struct Running {
    node: NodeId,
    nodes: Nodes,
    _permit: Option<OwnedSemaphorePermit>,
}

impl DestinationLimit {
    pub(crate) fn new(limit: usize) -> Self {
        DestinationLimit { limit, ..Default::default() }
    }

    /// Waits for a slot on `node` (in the order repairs ask), then counts the repair in.
    pub(crate) async fn enter(&self, node: NodeId) -> Running {
        let sem = self
            .nodes
            .lock()
            .expect("limit lock")
            .entry(node)
            .or_insert_with(|| (Arc::new(Semaphore::new(self.limit.max(1))), 0))
            .0
            .clone();
        let permit = if self.limit > 0 { Some(sem.acquire_owned().await.expect("semaphore never closed")) } else { None };
        let now = {
            let mut nodes = self.nodes.lock().expect("limit lock");
            let e = nodes.get_mut(&node).expect("inserted above");
            e.1 += 1;
            e.1
        };
        self.peak.fetch_max(now, Ordering::Relaxed);
        Running { node, nodes: self.nodes.clone(), _permit: permit }
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
            e.1 -= 1;
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

    async fn enter_all(l: &DestinationLimit, n: usize) -> Vec<Running> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(l.enter(7).await);
        }
        out
    }
}
