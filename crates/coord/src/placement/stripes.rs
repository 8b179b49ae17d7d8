//! Where a Stripe-layout stripe's chunks go: the least loaded nodes, and among equally
//! loaded ones those that share the fewest stripes with the nodes already chosen.
//!
//! The second rule is declustering (as CRUSH's pseudo-random spread and HDFS's random
//! placement aim for): when a node fails, its stripes' other chunks should be spread over
//! every other node, so a full-node repair can draw its helpers evenly from all of them.
//! Breaking ties by a rotation of node ids instead puts consecutive stripes on windows of
//! neighbouring nodes, and a failed node then shares most of its stripes with a few
//! neighbours: on 16 nodes with RS(6,3), some node had to upload 15 chunks where an even
//! spread needs 10 (see the tests).

use kintsugi_plan::NodeId;
use kintsugi_proto::placement::stable_hash;
use std::collections::HashMap;

/// How many stripes each node, and each pair of nodes, holds chunks of.
#[derive(Clone, Debug, Default)]
pub(crate) struct StripeSpread {
    load: HashMap<NodeId, u32>,
    pairs: HashMap<(NodeId, NodeId), u32>,
}

fn pair(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

impl StripeSpread {
    /// From the node lists of existing stripes.
    #[cfg(test)]
    pub(crate) fn of<'a>(stripes: impl IntoIterator<Item = &'a [NodeId]>) -> Self {
        let mut s = StripeSpread::default();
        for nodes in stripes {
            s.add(nodes);
        }
        s
    }

    /// From the store's spread counters ([`crate::metadata::MetaStore::spread`]): (a, a) is a's
    /// load, (a, b) the stripes a and b share.
    pub(crate) fn from_counts(counts: impl IntoIterator<Item = ((NodeId, NodeId), u64)>) -> Self {
        let mut s = StripeSpread::default();
        for ((a, b), v) in counts {
            let v = v.min(u32::MAX as u64) as u32;
            if a == b {
                s.load.insert(a, v);
            } else {
                s.pairs.insert(pair(a, b), v);
            }
        }
        s
    }

    /// Counts a stripe placed on `nodes`.
    pub(crate) fn add(&mut self, nodes: &[NodeId]) {
        for (i, &a) in nodes.iter().enumerate() {
            *self.load.entry(a).or_default() += 1;
            for &b in &nodes[i + 1..] {
                if a != b {
                    *self.pairs.entry(pair(a, b)).or_default() += 1;
                }
            }
        }
    }

    pub(crate) fn load(&self, n: NodeId) -> u32 {
        self.load.get(&n).copied().unwrap_or(0)
    }

    fn shared(&self, a: NodeId, b: NodeId) -> u32 {
        self.pairs.get(&pair(a, b)).copied().unwrap_or(0)
    }

    /// `width` distinct nodes of `candidates` for stripe `id`, one at a time: least loaded
    /// first, then fewest stripes shared with those already chosen, then a hash of the
    /// stripe and node (so remaining ties fall differently for each stripe). None when
    /// there are fewer candidates than `width`.
    pub(crate) fn choose(&self, candidates: &[NodeId], width: usize, id: u64) -> Option<Vec<NodeId>> {
        if candidates.len() < width {
            return None;
        }
        let mut chosen: Vec<NodeId> = Vec::with_capacity(width);
        let mut left: Vec<NodeId> = candidates.to_vec();
        while chosen.len() < width {
            let key = |n: NodeId| {
                let shared: u32 = chosen.iter().map(|&c| self.shared(n, c)).sum();
                (self.load(n), shared, stable_hash(&[&id.to_le_bytes(), &n.to_le_bytes()]))
            };
            let (at, _) = left.iter().enumerate().min_by_key(|(_, &n)| key(n))?;
            chosen.push(left.swap_remove(at));
        }
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places `stripes` stripes of `width` on `nodes` nodes as the coordinator does.
    fn place(nodes: u32, width: usize, stripes: u64) -> Vec<Vec<NodeId>> {
        let all: Vec<NodeId> = (0..nodes).collect();
        let mut spread = StripeSpread::default();
        (0..stripes)
            .map(|id| {
                let c = spread.choose(&all, width, id).unwrap();
                spread.add(&c);
                c
            })
            .collect()
    }

    #[test]
    fn chooses_distinct_least_loaded_nodes() {
        let p = place(16, 9, 44);
        let mut load = vec![0; 16];
        for s in &p {
            let mut d = s.clone();
            d.sort_unstable();
            d.dedup();
            assert_eq!(d.len(), 9, "distinct nodes: {s:?}");
            for &n in s {
                load[n as usize] += 1;
            }
        }
        let (lo, hi) = (*load.iter().min().unwrap(), *load.iter().max().unwrap());
        assert!(hi - lo <= 1, "stripes per node {load:?}");
        assert_eq!(StripeSpread::default().choose(&[1, 2], 3, 0), None);
    }

    /// Every pair of nodes shares about the same number of stripes (44 stripes of 9 on 16
    /// nodes: 13.2 on average). A rotation of ids as tie-break gave pairs from 5 to 25, a
    /// hash alone (random placement) 8 to 19.
    #[test]
    fn pairs_of_nodes_share_stripes_evenly() {
        for width in [9usize, 14] {
            let p = place(16, width, 44);
            let s = StripeSpread::of(p.iter().map(|x| &x[..]));
            let counts: Vec<u32> = (0..16).flat_map(|a| (a + 1..16).map(move |b| (a, b))).map(|(a, b)| s.shared(a, b)).collect();
            let (lo, hi) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
            assert!(hi - lo <= 5, "width {width}: pairs share {lo}..{hi} stripes");
        }
    }

    /// The upload floor of a full-node repair: the fewest chunks the busiest surviving node
    /// must upload when each of the failed node's stripes takes `k` helpers among its other
    /// members, by max-flow (an independent check of the spread, not of the scheduler).
    fn upload_floor(stripes: &[Vec<NodeId>], failed: NodeId, k: usize, nodes: usize) -> usize {
        let lost: Vec<Vec<NodeId>> =
            stripes.iter().filter(|s| s.contains(&failed)).map(|s| s.iter().copied().filter(|&n| n != failed).collect()).collect();
        let need = k * lost.len();
        (1..).find(|&cap| max_flow(&lost, k, cap, nodes) == need).unwrap()
    }

    /// Source -> stripe (k) -> member (1) -> sink (cap), by augmenting paths.
    fn max_flow(lost: &[Vec<NodeId>], k: usize, cap: usize, nodes: usize) -> usize {
        let (s, t) = (0, 1);
        let v = 2 + lost.len() + nodes;
        let mut c = vec![vec![0i64; v]; v];
        for (i, st) in lost.iter().enumerate() {
            c[s][2 + i] = k as i64;
            for &n in st {
                c[2 + i][2 + lost.len() + n as usize] = 1;
            }
        }
        for n in 0..nodes {
            c[2 + lost.len() + n][t] = cap as i64;
        }
        let mut flow = 0;
        loop {
            let mut prev = vec![usize::MAX; v];
            prev[s] = s;
            let mut q = std::collections::VecDeque::from([s]);
            while let Some(u) = q.pop_front() {
                for w in 0..v {
                    if c[u][w] > 0 && prev[w] == usize::MAX {
                        prev[w] = u;
                        q.push_back(w);
                    }
                }
            }
            if prev[t] == usize::MAX {
                return flow;
            }
            let mut w = t;
            while w != s {
                let u = prev[w];
                c[u][w] -= 1;
                c[w][u] += 1;
                w = u;
            }
            flow += 1;
        }
    }

    /// The issue-14 scenario: 44 stripes of RS(6,3) on 16 nodes. Whichever node fails,
    /// the others can share its repair's uploads evenly: ceil(6 x lost / 15) chunks each.
    #[test]
    fn a_failed_nodes_helpers_can_share_its_repair_evenly() {
        let p = place(16, 9, 44);
        for failed in 0..16 {
            let lost = p.iter().filter(|s| s.contains(&failed)).count();
            let even = (6 * lost).div_ceil(15);
            assert_eq!(upload_floor(&p, failed, 6, 16), even, "node {failed} failed ({lost} stripes lost)");
        }
    }
}
