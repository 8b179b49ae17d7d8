//! One timeslot's transfers (RepairBoost §3.3): a maximum matching between the nodes that
//! send and the nodes that receive, each at most once, taking candidates in preference
//! order first (the paper's max flow with unit capacities, here by augmenting paths).

use crate::graph::NodeId;

/// A maximum set of candidate (sender, receiver) transfers, no node sending or receiving
/// twice. Candidates come in preference order: a greedy pass takes preferred ones first,
/// then augmenting paths (Kuhn) grow it to maximum without unmatching any sender.
pub(super) fn max_matching(cands: &[(NodeId, NodeId)], index: &mut NodeIndex) -> Vec<usize> {
    index.clear();
    let id = |n: NodeId, index: &mut NodeIndex| index.get_or_insert(n);
    let mut adj: Vec<Vec<(usize, usize)>> = Vec::new(); // sender -> (receiver, candidate)
    let mut senders = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        let s = id(c.0, index);
        let r = id(c.1, index);
        if adj.len() <= s.max(r) {
            adj.resize(s.max(r) + 1, Vec::new());
        }
        if adj[s].is_empty() {
            senders.push(s);
        }
        adj[s].push((r, i));
    }
    let n = adj.len();
    let mut recv_of = vec![usize::MAX; n]; // sender -> candidate
    let mut owner = vec![usize::MAX; n]; // receiver -> sender
    for (i, c) in cands.iter().enumerate() {
        let (s, r) = (index.get(c.0), index.get(c.1));
        if recv_of[s] == usize::MAX && owner[r] == usize::MAX {
            recv_of[s] = i;
            owner[r] = s;
        }
    }
    let mut seen = vec![0u32; n];
    let mut round = 0u32;
    for &s in &senders {
        if recv_of[s] != usize::MAX {
            continue;
        }
        round += 1;
        augment(s, &adj, &mut recv_of, &mut owner, &mut seen, round);
    }
    let mut out: Vec<usize> = recv_of.into_iter().filter(|&i| i != usize::MAX).collect();
    out.sort_unstable();
    out
}

/// Dense local ids for the nodes of one slot's candidates (node ids are small integers, so
/// a vector with generation tags replaces a hash map in this hot loop).
#[derive(Default)]
pub(super) struct NodeIndex {
    slot: Vec<(u32, usize)>,
    generation: u32,
    len: usize,
}

impl NodeIndex {
    pub(super) fn clear(&mut self) {
        self.generation += 1;
        self.len = 0;
    }

    fn get_or_insert(&mut self, n: NodeId) -> usize {
        let n = n as usize;
        if self.slot.len() <= n {
            self.slot.resize(n + 1, (0, 0));
        }
        if self.slot[n].0 != self.generation {
            self.slot[n] = (self.generation, self.len);
            self.len += 1;
        }
        self.slot[n].1
    }

    fn get(&self, n: NodeId) -> usize {
        debug_assert_eq!(self.slot[n as usize].0, self.generation);
        self.slot[n as usize].1
    }
}

/// Finds an augmenting path from sender s (Kuhn's algorithm).
fn augment(s: usize, adj: &[Vec<(usize, usize)>], recv_of: &mut [usize], owner: &mut [usize], seen: &mut [u32], round: u32) -> bool {
    for &(r, i) in &adj[s] {
        if seen[r] == round {
            continue;
        }
        seen[r] = round;
        let o = owner[r];
        if o == usize::MAX || augment(o, adj, recv_of, owner, seen, round) {
            // The displaced sender (if any) moved to another receiver.
            owner[r] = s;
            recv_of[s] = i;
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matching is maximum: equal in size to the best subset found by brute force.
    #[test]
    fn matching_is_maximum() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..300 {
            let n = rng.random_range(2..6);
            let m = rng.random_range(1..11);
            let cands: Vec<(NodeId, NodeId)> = (0..m).map(|_| (rng.random_range(0..n), rng.random_range(0..n))).collect();
            let got = max_matching(&cands, &mut NodeIndex::default());
            let mut best = 0;
            for mask in 0u32..1 << m {
                let pick: Vec<&(NodeId, NodeId)> = (0..m as usize).filter(|&i| mask >> i & 1 == 1).map(|i| &cands[i]).collect();
                let ok = pick.iter().enumerate().all(|(i, a)| pick[i + 1..].iter().all(|b| a.0 != b.0 && a.1 != b.1));
                if ok {
                    best = best.max(pick.len());
                }
            }
            assert_eq!(got.len(), best);
        }
    }
}
