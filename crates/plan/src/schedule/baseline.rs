//! The baselines the papers compare against: smallest-id helpers (ECPipe's "RP"),
//! RepairBoost's RAN and LRU, and ECPipe's greedy least-recently-selected helpers (§3.3).

use super::{argmin_by, no_destination, Choice, Cluster, LostChunk};
use crate::error::Result;
use crate::graph::NodeId;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng;
use std::collections::HashMap;

/// ECPipe's plain "RP": the k helpers with the smallest node ids, a random destination
/// (requestors in turn when given). Every stripe leans on the same few nodes.
pub fn index(lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster, rng: &mut impl Rng) -> Result<Vec<Choice>> {
    let mut out = Vec::with_capacity(lost.len());
    for (i, (c, (pool, need))) in lost.iter().zip(pools).enumerate() {
        let mut by_node = pool.clone();
        by_node.sort_by_key(|&s| c.placement[s]);
        let mut helpers = by_node[..*need].to_vec();
        helpers.sort_unstable();
        out.push(Choice { helpers, destination: random_or_requestor(c, cluster, i, rng)?, tree: None });
    }
    Ok(out)
}

/// RAN: k helpers at random among the survivors, a random destination outside the stripe.
pub fn random(lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster, rng: &mut impl Rng) -> Result<Vec<Choice>> {
    let mut out = Vec::with_capacity(lost.len());
    for (i, (c, (pool, need))) in lost.iter().zip(pools).enumerate() {
        let mut helpers: Vec<usize> = pool.choose_multiple(rng, *need).copied().collect();
        helpers.shuffle(rng);
        out.push(Choice { helpers, destination: random_or_requestor(c, cluster, i, rng)?, tree: None });
    }
    Ok(out)
}

fn random_or_requestor(c: &LostChunk, cluster: &Cluster, i: usize, rng: &mut impl Rng) -> Result<NodeId> {
    if !cluster.requestors.is_empty() {
        return in_turn(c, cluster, i).ok_or_else(|| no_destination(c));
    }
    cluster.destinations(c).choose(rng).copied().ok_or_else(|| no_destination(c))
}

/// The i-th chunk goes to requestor i mod r, or the next one that holds no shard of it.
fn in_turn(c: &LostChunk, cluster: &Cluster, i: usize) -> Option<NodeId> {
    let r = &cluster.requestors;
    (0..r.len()).map(|j| r[(i + j) % r.len()]).find(|&n| !c.holds(n))
}

/// Last-selected timestamps: a node never selected has timestamp 0.
#[derive(Default)]
struct Recency {
    stamp: HashMap<NodeId, u64>,
    clock: u64,
}

impl Recency {
    fn get(&self, n: NodeId) -> u64 {
        self.stamp.get(&n).copied().unwrap_or(0)
    }

    /// The `need` least recently selected of `pool` (ties to the lowest node id), in
    /// that order, stamped as selected now.
    fn pick(&mut self, c: &LostChunk, pool: &[usize], need: usize) -> Vec<usize> {
        let mut cand: Vec<(u64, NodeId, usize)> =
            pool.iter().map(|&s| (self.get(c.placement[s].expect("available")), c.placement[s].unwrap(), s)).collect();
        // Quickselect, as the paper does, then order the chosen few.
        if need < cand.len() {
            cand.select_nth_unstable(need);
            cand.truncate(need);
        }
        cand.sort_unstable();
        self.clock += 1;
        for &(_, n, _) in &cand {
            self.stamp.insert(n, self.clock);
        }
        cand.into_iter().map(|(_, _, s)| s).collect()
    }
}

/// RepairBoost's LRU: helpers and destination are the least recently selected nodes,
/// ties to the smallest node id.
pub fn lru(lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster) -> Result<Vec<Choice>> {
    let mut rec = Recency::default();
    let mut out = Vec::with_capacity(lost.len());
    for (c, (pool, need)) in lost.iter().zip(pools) {
        let helpers = rec.pick(c, pool, *need);
        let dests = cluster.destinations(c);
        let d = argmin_by(&dests, |&n| (rec.get(n), n)).ok_or_else(|| no_destination(c))?;
        rec.clock += 1;
        rec.stamp.insert(dests[d], rec.clock);
        out.push(Choice { helpers, destination: dests[d], tree: None });
    }
    Ok(out)
}

/// ECPipe's greedy scheduling: the k least recently selected helpers per stripe; rebuilt
/// chunks spread evenly over the requestors (or, without requestors, over the least
/// loaded live nodes).
pub fn greedy(lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster) -> Result<Vec<Choice>> {
    let mut rec = Recency::default();
    let mut received: HashMap<NodeId, usize> = HashMap::new();
    let mut out = Vec::with_capacity(lost.len());
    for (i, (c, (pool, need))) in lost.iter().zip(pools).enumerate() {
        let helpers = rec.pick(c, pool, *need);
        let destination = if cluster.requestors.is_empty() {
            let dests = cluster.destinations(c);
            let d = argmin_by(&dests, |&n| (received.get(&n).copied().unwrap_or(0), n)).ok_or_else(|| no_destination(c))?;
            dests[d]
        } else {
            in_turn(c, cluster, i).ok_or_else(|| no_destination(c))?
        };
        *received.entry(destination).or_default() += 1;
        out.push(Choice { helpers, destination, tree: None });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripe(nodes: &[NodeId], lost: usize) -> LostChunk {
        LostChunk { placement: nodes.iter().enumerate().map(|(i, &n)| (i != lost).then_some(n)).collect(), lost, avoid: vec![], size: 0 }
    }

    #[test]
    fn lru_rotates_helpers_and_breaks_ties_by_id() {
        // RS(2,2)-like stripes over nodes 1..=4, shard 0 lost (on node 0): pool = shards 1..4.
        let lost = vec![stripe(&[0, 1, 2, 3], 0), stripe(&[0, 1, 2, 3], 0)];
        let pools = vec![(vec![1, 2, 3], 2), (vec![1, 2, 3], 2)];
        let cluster = Cluster::homogeneous(vec![1, 2, 3, 4, 5]);
        let c = lru(&lost, &pools, &cluster).unwrap();
        assert_eq!(c[0].helpers, vec![1, 2]); // nodes 1, 2: all fresh, lowest ids
        assert_eq!(c[0].destination, 4);
        assert_eq!(c[1].helpers[0], 3, "node 3 was never selected, so it goes first");
        assert_eq!(c[1].destination, 5);
    }

    #[test]
    fn greedy_spreads_over_requestors() {
        let lost: Vec<LostChunk> = (0..4).map(|_| stripe(&[0, 1, 2, 3], 0)).collect();
        let pools = vec![(vec![1, 2, 3], 2); 4];
        let cluster = Cluster { requestors: vec![7, 8], ..Cluster::homogeneous(vec![1, 2, 3, 7, 8]) };
        let d: Vec<NodeId> = greedy(&lost, &pools, &cluster).unwrap().iter().map(|c| c.destination).collect();
        assert_eq!(d, vec![7, 8, 7, 8]);
    }
}
