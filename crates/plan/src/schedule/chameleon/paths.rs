//! Pairing a chunk's tasks into a repair tree (ChameleonEC Algorithm 1): nodes with an
//! upload and no unpaired download wait in a FIFO; the source with the fewest unpaired
//! downloads takes the next of them as its child; a relay whose downloads are all paired
//! joins the FIFO; what is left sends to the destination.

use super::super::LostChunk;
use super::dispatch::Dispatch;
use crate::graph::NodeId;
use std::collections::VecDeque;

/// Directed paths x -> y between the chunk's nodes (y may be the destination).
pub fn algorithm_1(d: &Dispatch) -> Vec<(NodeId, NodeId)> {
    let mut down: Vec<(NodeId, u32)> = d.sources.iter().map(|&(n, dl)| (n, dl)).collect();
    let mut up: std::collections::HashMap<NodeId, u32> = d.sources.iter().map(|&(n, _)| (n, 1)).collect();
    // Upload-only sources, in dispatch order (the figure's E = {N1, N7}).
    let mut e: VecDeque<NodeId> = d.sources.iter().filter(|s| s.1 == 0).map(|s| s.0).collect();
    let mut paths = Vec::new();
    while down.iter().any(|s| s.1 > 0) {
        // The source with the fewest unpaired downloads (ties: dispatch order).
        let y = down.iter().filter(|s| s.1 > 0).min_by_key(|s| s.1).map(|s| s.0).expect("one has downloads");
        let Some(pos) = e.iter().position(|&x| x != y) else { break };
        let x = e.remove(pos).expect("position is valid");
        paths.push((x, y));
        *up.get_mut(&x).expect("a source") -= 1;
        let dy = &mut down.iter_mut().find(|s| s.0 == y).expect("a source").1;
        *dy -= 1;
        if *dy == 0 {
            e.push_back(y);
        }
        if up[&x] > 0 {
            e.push_front(x);
        }
    }
    // Leftover uploads go to the destination.
    for x in e {
        if up[&x] > 0 {
            paths.push((x, d.destination));
        }
    }
    paths
}

/// The chunk's helper shards (one per source, in dispatch order) and, for each, the index
/// of the helper it sends to (None: the destination).
pub fn pair(d: &Dispatch, chunk: &LostChunk) -> (Vec<usize>, Vec<Option<usize>>) {
    let nodes: Vec<NodeId> = d.sources.iter().map(|s| s.0).collect();
    let helpers: Vec<usize> =
        nodes.iter().map(|&n| chunk.placement.iter().position(|&p| p == Some(n)).expect("a source holds a shard")).collect();
    let mut parents = vec![None; nodes.len()];
    for (x, y) in algorithm_1(d) {
        let xi = nodes.iter().position(|&n| n == x).expect("a source");
        parents[xi] = nodes.iter().position(|&n| n == y);
    }
    (helpers, parents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_9_paths() {
        // The figure's tuples: N1(1,0), N7(1,0), N3(1,2), N4(1,1), destination N6(0,1).
        let d = Dispatch { destination: 6, sources: vec![(3, 2), (4, 1), (1, 0), (7, 0)], destination_downloads: 1 };
        assert_eq!(algorithm_1(&d), [(1, 4), (7, 3), (4, 3), (3, 6)]);
    }

    #[test]
    fn every_source_sends_once_and_the_paths_form_a_tree_into_the_destination() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..500 {
            // Random valid tuples: k sources, downloads summing to k - dest_downloads.
            let k = rng.random_range(1..12usize);
            let dest_downloads = rng.random_range(1..=k) as u32;
            let mut downs = vec![0u32; k];
            for _ in 0..(k as u32 - dest_downloads) {
                // Never all sources relaying: one stays upload-only.
                let i = rng.random_range(0..k.saturating_sub(1).max(1));
                downs[i] += 1;
            }
            let sources: Vec<(NodeId, u32)> = (0..k).map(|i| (i as NodeId + 1, downs[i])).collect();
            let d = Dispatch { destination: 100, sources, destination_downloads: dest_downloads };
            let paths = algorithm_1(&d);
            assert_eq!(paths.len(), k, "{d:?} -> {paths:?}");
            let mut parent = std::collections::HashMap::new();
            for &(x, y) in &paths {
                assert!(parent.insert(x, y).is_none(), "{x} sends twice: {paths:?}");
            }
            assert_eq!(paths.iter().filter(|p| p.1 == 100).count() as u32, dest_downloads, "{d:?} -> {paths:?}");
            for (n, dl) in &d.sources {
                assert_eq!(paths.iter().filter(|p| p.1 == *n).count() as u32, *dl, "downloads of {n}: {paths:?}");
                // Following parents reaches the destination: no cycle.
                let (mut at, mut hops) = (*n, 0);
                while at != 100 {
                    at = parent[&at];
                    hops += 1;
                    assert!(hops <= k, "cycle: {paths:?}");
                }
            }
        }
    }
}
