//! Task dispatch for one lost chunk (ChameleonEC §III-B): the destination by
//! minimum-time-first, then the other k-1 download tasks one by one to the node of the
//! stripe (or the destination) whose estimated repair time after taking it is smallest,
//! a source's first download bringing its upload (it becomes a relay, sending a partially
//! decoded chunk); then the remaining uploads to sources without downloads, again by
//! minimum-time-first, one per source.

use super::super::{no_destination, Cluster, LostChunk};
use crate::error::{PlanError, Result};
use crate::graph::NodeId;
use std::collections::{BTreeMap, HashMap};

/// Upload and download tasks assigned to each node in the current phase, over all chunks.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub up: HashMap<NodeId, u32>,
    pub down: HashMap<NodeId, u32>,
}

impl Counters {
    fn up(&self, n: NodeId) -> f64 {
        self.up.get(&n).copied().unwrap_or(0) as f64
    }
    fn down(&self, n: NodeId) -> f64 {
        self.down.get(&n).copied().unwrap_or(0) as f64
    }

    /// Seconds the busiest of `nodes` needs for all its tasks of the phase.
    pub fn finish_time(&self, nodes: &[NodeId], cluster: &Cluster, chunk: f64) -> f64 {
        nodes
            .iter()
            .map(|&n| {
                let (bu, bd) = bandwidth(cluster, n);
                (self.up(n) * chunk / bu).max(self.down(n) * chunk / bd)
            })
            .fold(0.0, f64::max)
    }
}

/// A node's residual (up, down) bandwidth as the planners see it.
fn bandwidth(cluster: &Cluster, n: NodeId) -> (f64, f64) {
    let d = if cluster.default_bandwidth > 0.0 { cluster.default_bandwidth } else { 1.0 };
    cluster.bandwidth.get(&n).copied().unwrap_or((d, d))
}

/// One chunk's tasks: per node, its (uploads, downloads) for this chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    pub destination: NodeId,
    /// Sources (one upload each) and their downloads, in the order they were chosen.
    pub sources: Vec<(NodeId, u32)>,
    /// Downloads at the destination.
    pub destination_downloads: u32,
}

impl Dispatch {
    /// Every node taking part.
    pub fn involved(&self) -> Vec<NodeId> {
        self.sources.iter().map(|s| s.0).chain(std::iter::once(self.destination)).collect()
    }

    /// (uploads, downloads) of a node for this chunk.
    pub fn tuple(&self, n: NodeId) -> (u32, u32) {
        if n == self.destination {
            return (0, self.destination_downloads);
        }
        self.sources.iter().find(|s| s.0 == n).map_or((0, 0), |&(_, d)| (1, d))
    }
}

/// Dispatches `chunk`'s tasks, updating `counters`. `pool` is its candidate helper shards
/// and how many sources it needs.
pub fn dispatch(chunk: &LostChunk, pool: &(Vec<usize>, usize), cluster: &Cluster, size: f64, counters: &mut Counters) -> Result<Dispatch> {
    let (shards, k) = (&pool.0, pool.1);
    let candidates: Vec<NodeId> = shards.iter().map(|&s| chunk.placement[s].expect("pool shards are available")).collect();
    if candidates.len() < k || k == 0 {
        return Err(PlanError::Invalid(format!("too few surviving helpers to rebuild shard {}", chunk.lost)));
    }
    let time = |n: NodeId, up: f64, down: f64| {
        let (bu, bd) = bandwidth(cluster, n);
        (up * size / bu).max(down * size / bd)
    };
    // Minimum-time-first destination; ties to the lower id.
    let dest = cluster
        .destinations(chunk)
        .into_iter()
        .min_by(|&a, &b| time(a, 0.0, counters.down(a) + 1.0).total_cmp(&time(b, 0.0, counters.down(b) + 1.0)).then(a.cmp(&b)))
        .ok_or_else(|| no_destination(chunk))?;
    *counters.down.entry(dest).or_default() += 1;
    let mut dest_downloads = 1u32;
    // Relays of this chunk and their downloads, in the order they were chosen.
    let mut relays: BTreeMap<NodeId, u32> = BTreeMap::new();
    let mut order: Vec<NodeId> = Vec::new();
    for _ in 1..k {
        // A relay count is bounded: every source but one upload-only source may relay.
        let room_for_new_relay = relays.len() + 1 < k;
        let mut best: Option<(f64, NodeId)> = None;
        for &n in candidates.iter().chain(std::iter::once(&dest)) {
            // The destination, or a source already relaying: one more download only.
            let r = if n == dest || relays.contains_key(&n) {
                time(n, counters.up(n), counters.down(n) + 1.0)
            } else if room_for_new_relay {
                time(n, counters.up(n) + 1.0, counters.down(n) + 1.0)
            } else {
                continue;
            };
            if best.is_none_or(|(b, bn)| r < b || (r == b && n < bn)) {
                best = Some((r, n));
            }
        }
        let (_, n) = best.expect("the destination is always a candidate");
        *counters.down.entry(n).or_default() += 1;
        if n == dest {
            dest_downloads += 1;
        } else {
            if !relays.contains_key(&n) {
                *counters.up.entry(n).or_default() += 1;
                order.push(n);
            }
            *relays.entry(n).or_default() += 1;
        }
    }
    // The remaining uploads: sources without downloads, minimum-time-first, one each.
    let mut sources: Vec<(NodeId, u32)> = order.iter().map(|n| (*n, relays[n])).collect();
    let mut rest: Vec<NodeId> = candidates.iter().copied().filter(|n| !relays.contains_key(n)).collect();
    while sources.len() < k {
        let (i, &n) = rest
            .iter()
            .enumerate()
            .min_by(|(_, &a), (_, &b)| time(a, counters.up(a) + 1.0, 0.0).total_cmp(&time(b, counters.up(b) + 1.0, 0.0)).then(a.cmp(&b)))
            .ok_or_else(|| PlanError::Invalid(format!("too few surviving helpers to rebuild shard {}", chunk.lost)))?;
        rest.remove(i);
        *counters.up.entry(n).or_default() += 1;
        sources.push((n, 0));
    }
    Ok(Dispatch { destination: dest, sources, destination_downloads: dest_downloads })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Fig. 8 (k = 4, m = 2): node 2 failed; nodes 1, 3, 4, 5 and 7 hold the
    /// stripe's other chunks; 6 and 8 hold none. The figure's bandwidths are not in the
    /// text; these (MB/s, up and down) make its choices, step by step: D1 to N6, D2+U1 to
    /// N3, D3+U2 to N4, D4 to N3, U3 to N1, U4 to N7.
    pub(crate) fn figure_8() -> (LostChunk, Cluster) {
        let placement = vec![Some(1), None, Some(3), Some(4), Some(5), Some(7)];
        let chunk = LostChunk { placement, lost: 1, avoid: vec![1, 2, 3, 4, 5, 7], size: 0 };
        let mut cluster = Cluster::homogeneous(vec![1, 3, 4, 5, 6, 7, 8]);
        for (n, up, down) in
            [(1, 60.0, 30.0), (3, 150.0, 150.0), (4, 90.0, 90.0), (5, 20.0, 20.0), (6, 60.0, 60.0), (7, 50.0, 20.0), (8, 40.0, 40.0)]
        {
            cluster.bandwidth.insert(n, (up * 1e6, down * 1e6));
        }
        (chunk, cluster)
    }

    #[test]
    fn figure_8_tuples() {
        let (chunk, cluster) = figure_8();
        let mut c = Counters::default();
        let d = dispatch(&chunk, &(vec![0, 2, 3, 4, 5], 4), &cluster, 64e6, &mut c).unwrap();
        assert_eq!(d.destination, 6);
        let mut srcs: Vec<NodeId> = d.sources.iter().map(|s| s.0).collect();
        srcs.sort();
        assert_eq!(srcs, [1, 3, 4, 7]);
        // The figure's (T_up, T_down): N1(1,0), N7(1,0), N3(1,2), N4(1,1), N6(0,1).
        for (n, t) in [(1, (1, 0)), (7, (1, 0)), (3, (1, 2)), (4, (1, 1)), (6, (0, 1))] {
            assert_eq!(d.tuple(n), t, "node {n}");
        }
        assert_eq!(d.tuple(5), (0, 0));
        // The phase counters hold the same tasks.
        assert_eq!((c.up(3), c.down(3), c.up(6), c.down(6)), (1.0, 2.0, 0.0, 1.0));
    }

    #[test]
    fn k_downloads_and_k_uploads_on_k_sources_whatever_the_bandwidths() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let (chunk, mut cluster) = figure_8();
            for b in cluster.bandwidth.values_mut() {
                *b = (rng.random_range(1.0..100.0), rng.random_range(1.0..100.0));
            }
            let mut c = Counters::default();
            for n in [1, 3, 4, 5, 6, 7, 8] {
                c.up.insert(n, rng.random_range(0..3));
                c.down.insert(n, rng.random_range(0..3));
            }
            let d = dispatch(&chunk, &(vec![0, 2, 3, 4, 5], 4), &cluster, 1.0, &mut c).unwrap();
            assert_eq!(d.sources.len(), 4);
            let downs: u32 = d.sources.iter().map(|s| s.1).sum::<u32>() + d.destination_downloads;
            assert_eq!(downs, 4, "{d:?}");
            assert!(d.destination_downloads >= 1);
            assert!(d.sources.iter().any(|s| s.1 == 0), "some source only uploads: {d:?}");
        }
    }
}
