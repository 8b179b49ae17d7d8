//! Where new chunks fit: each node's reported space (its chunks' bytes and what it may use)
//! and the file systems they sit on. Nodes sharing a file system share its space: the full
//! ratio guards the file system, counting everything on it (other nodes, the coordinator's
//! metadata), not once per node.

use kintsugi_plan::NodeId;
use kintsugi_proto::FsReport;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Space {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (used, capacity) bytes, as each node last reported.
    nodes: HashMap<NodeId, (u64, u64)>,
    /// The file system each node is on.
    fs_of: HashMap<NodeId, String>,
    /// Each file system, as its latest node's report saw it (plus what was placed since).
    fs: HashMap<String, FsReport>,
}

/// The room a put may fill, taken down chunk by chunk as it places them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Room {
    /// Bytes each node may still take (a node not listed has not reported: not limited).
    node: HashMap<NodeId, u64>,
    fs_of: HashMap<NodeId, String>,
    fs: HashMap<String, u64>,
}

impl Room {
    pub(crate) fn fits(&self, n: NodeId, bytes: u64) -> bool {
        self.node.get(&n).is_none_or(|&r| r >= bytes) && self.fs_of.get(&n).and_then(|f| self.fs.get(f)).is_none_or(|&r| r >= bytes)
    }

    pub(crate) fn take(&mut self, n: NodeId, bytes: u64) {
        if let Some(r) = self.node.get_mut(&n) {
            *r = r.saturating_sub(bytes);
        }
        if let Some(r) = self.fs_of.get(&n).and_then(|f| self.fs.get_mut(f)) {
            *r = r.saturating_sub(bytes);
        }
    }
}

impl Space {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("space lock")
    }

    /// A node's report (a capacity of 0: not known yet).
    pub(crate) fn record(&self, n: NodeId, used: u64, capacity: u64, fs: Option<FsReport>) {
        let mut s = self.lock();
        if capacity > 0 {
            s.nodes.insert(n, (used, capacity));
        }
        if let Some(fs) = fs {
            s.fs_of.insert(n, fs.id.clone());
            s.fs.insert(fs.id.clone(), fs);
        }
    }

    pub(crate) fn forget(&self, n: NodeId) {
        let mut s = self.lock();
        s.nodes.remove(&n);
        if let Some(f) = s.fs_of.remove(&n) {
            if !s.fs_of.values().any(|g| *g == f) {
                s.fs.remove(&f);
            }
        }
    }

    /// (used, capacity) as node `n` last reported.
    pub(crate) fn node(&self, n: NodeId) -> Option<(u64, u64)> {
        self.lock().nodes.get(&n).copied()
    }

    /// The file system node `n` is on, as last seen.
    pub(crate) fn fs_of(&self, n: NodeId) -> Option<FsReport> {
        let s = self.lock();
        s.fs_of.get(&n).and_then(|f| s.fs.get(f)).cloned()
    }

    /// Each node's capacity, as reported.
    pub(crate) fn capacities(&self) -> HashMap<NodeId, u64> {
        self.lock().nodes.iter().map(|(&n, &(_, c))| (n, c)).collect()
    }

    /// Counts `bytes` placed on `n` until its next report says so: a burst of puts would
    /// otherwise all see the same stale room.
    pub(crate) fn add(&self, n: NodeId, bytes: u64) {
        let mut s = self.lock();
        if let Some((used, _)) = s.nodes.get_mut(&n) {
            *used += bytes;
        }
        if let Some(f) = s.fs_of.get(&n).cloned() {
            if let Some(fs) = s.fs.get_mut(&f) {
                fs.used += bytes;
            }
        }
    }

    /// Whether `n` can take `bytes` more with it and its file system at or below `ratio`
    /// (a node that has not reported yet is given the benefit of the doubt).
    pub(crate) fn has_room(&self, n: NodeId, bytes: u64, ratio: f64) -> bool {
        let s = self.lock();
        let node = s.nodes.get(&n).is_none_or(|&(used, cap)| used.saturating_add(bytes) as f64 <= ratio * cap as f64);
        node && s.fs_of.get(&n).and_then(|f| s.fs.get(f)).is_none_or(|fs| fs.has_room(bytes, ratio))
    }

    /// The room `nodes` (and their file systems) have up to `ratio`.
    pub(crate) fn room(&self, nodes: &[NodeId], ratio: f64) -> Room {
        let s = self.lock();
        let below = |used: u64, cap: u64| ((ratio * cap as f64) as u64).saturating_sub(used);
        let mut room = Room::default();
        for n in nodes {
            if let Some(&(used, cap)) = s.nodes.get(n) {
                room.node.insert(*n, below(used, cap));
            }
            if let Some((f, fs)) = s.fs_of.get(n).and_then(|f| s.fs.get(f).map(|fs| (f, fs))) {
                room.fs_of.insert(*n, f.clone());
                room.fs.insert(f.clone(), below(fs.used, fs.size));
            }
        }
        room
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(id: &str, used: u64, size: u64) -> Option<FsReport> {
        Some(FsReport { id: id.into(), used, size })
    }

    #[test]
    fn nodes_on_one_file_system_share_its_room() {
        let s = Space::default();
        // Three nodes on one 1000-byte file system, 500 used: room for 450 more below
        // 0.95 among them, however large each one's own capacity.
        for n in 0..3 {
            s.record(n, 100, 2000, fs("a", 500, 1000));
        }
        s.record(3, 0, 1000, fs("b", 0, 1000));
        assert!(s.has_room(0, 450, 0.95) && !s.has_room(0, 451, 0.95));
        let mut room = s.room(&[0, 1, 2, 3], 0.95);
        assert!(room.fits(0, 300) && room.fits(1, 300));
        room.take(0, 300);
        assert!(!room.fits(1, 300), "the first 300 bytes filled the file system node 1 shares");
        assert!(room.fits(1, 150) && room.fits(3, 900));
        // What is placed counts until the next report.
        s.add(2, 400);
        assert!(!s.has_room(0, 100, 0.95), "node 2's 400 bytes are on node 0's file system too");
        assert!(s.has_room(3, 900, 0.95));
        s.forget(0);
        s.forget(1);
        s.forget(2);
        assert!(s.fs_of(2).is_none() && s.fs_of(3).is_some());
    }

    #[test]
    fn an_unreported_node_is_not_limited() {
        let s = Space::default();
        assert!(s.has_room(7, u64::MAX / 2, 0.5));
        assert!(s.room(&[7], 0.5).fits(7, u64::MAX));
        // A node's own capacity (a quota) still limits it on a roomy file system.
        s.record(1, 90, 100, fs("a", 0, 1 << 40));
        assert!(!s.has_room(1, 10, 0.95));
    }
}
