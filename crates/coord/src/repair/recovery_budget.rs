//! Geometric Partitioning's recovery queue (section 4.4): repairs start in queue order, each
//! weighing its chunk size in 4 MiB units, and a node takes part in at most `budget` units
//! of repairs at a time. Large chunks are few in flight, small ones many, so every node's
//! disk stays busy with about the same number of bytes whatever the chunk sizes.

use kintsugi_plan::NodeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The unit of recovery weight: a 4 MiB chunk weighs 1.
pub const UNIT: u64 = 4 << 20;

/// A repair's weight: its chunk size in 4 MiB units, at least 1.
pub fn weight(chunk_len: u64) -> u64 {
    chunk_len.div_ceil(UNIT).max(1)
}

/// Units of repair in flight on each node.
pub struct NodeBudget {
    budget: u64,
    used: Mutex<HashMap<NodeId, u64>>,
    freed: Notify,
}

/// Units held on some nodes; given back when dropped.
pub struct Held {
    owner: Arc<NodeBudget>,
    nodes: Vec<NodeId>,
    units: u64,
}

impl NodeBudget {
    pub fn new(budget: u64) -> Arc<Self> {
        Arc::new(NodeBudget { budget: budget.max(1), used: Mutex::new(HashMap::new()), freed: Notify::new() })
    }

    /// Waits until every one of `nodes` has `units` to spare (a node with nothing in flight
    /// always has: one repair larger than the budget still runs, alone), then takes them.
    pub async fn acquire(self: &Arc<Self>, nodes: &[NodeId], units: u64) -> Held {
        loop {
            let freed = self.freed.notified();
            {
                let mut used = self.used.lock().expect("budget lock");
                let fits = nodes.iter().all(|n| used.get(n).is_none_or(|&u| u == 0 || u + units <= self.budget));
                if fits {
                    for n in nodes {
                        *used.entry(*n).or_default() += units;
                    }
                    return Held { owner: self.clone(), nodes: nodes.to_vec(), units };
                }
            }
            freed.await;
        }
    }

    /// Units in flight on `node`.
    pub fn in_flight(&self, node: NodeId) -> u64 {
        self.used.lock().expect("budget lock").get(&node).copied().unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut used = self.owner.used.lock().expect("budget lock");
        for n in &self.nodes {
            if let Some(u) = used.get_mut(n) {
                *u = u.saturating_sub(self.units);
            }
        }
        drop(used);
        self.owner.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn weights_count_4_mib_units() {
        assert_eq!(weight(1), 1);
        assert_eq!(weight(4 << 20), 1);
        assert_eq!(weight((4 << 20) + 1), 2);
        assert_eq!(weight(256 << 20), 64);
    }

    /// A node at its budget makes the next repair touching it wait until one finishes;
    /// repairs on other nodes go ahead; an oversize repair runs alone.
    #[tokio::test]
    async fn a_full_node_holds_back_repairs_that_touch_it() {
        let b = NodeBudget::new(8);
        let first = b.acquire(&[1, 2], 6).await;
        assert_eq!(b.in_flight(1), 6);
        // Node 3 is free: no wait.
        let other = tokio::time::timeout(Duration::from_millis(100), b.acquire(&[3], 8)).await.expect("node 3 has room");
        // Node 2 has 2 units left: a 4-unit repair on it waits.
        let b2 = b.clone();
        let waiting = tokio::spawn(async move { b2.acquire(&[2, 3], 4).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(first);
        drop(other);
        let held = tokio::time::timeout(Duration::from_secs(1), waiting).await.expect("released").unwrap();
        assert_eq!((b.in_flight(1), b.in_flight(2), b.in_flight(3)), (0, 4, 4));
        drop(held);
        let big = tokio::time::timeout(Duration::from_millis(100), b.acquire(&[1], 100)).await.expect("alone, oversize runs");
        assert_eq!(b.in_flight(1), 100);
        drop(big);
        assert_eq!(b.in_flight(1), 0);
    }
}
