//! ECPipe's weighted path selection (Li et al., ATC'17, §4.2, Algorithm 1). With links of
//! different speeds, a pipelined repair runs at the pace of its slowest link, so among the
//! helpers choose and order k of them into a path ending at the requestor that minimises
//! the largest link weight (weight = 1 / bandwidth). Branch and bound: extend the path
//! backwards from the requestor, only over links lighter than the best complete path so
//! far. [`brute_force`] tries every ordered selection, as the reference; [`best_cycle`] is
//! the same search for the cyclic variant's ring.

use super::{Cluster, LostChunk};
use crate::graph::NodeId;

/// The best path: `k` of `helpers` in sending order (the last sends to `requestor`) and
/// its largest link weight. `None` when there are fewer than k helpers.
pub fn best_path(helpers: &[usize], requestor: usize, k: usize, weight: &dyn Fn(usize, usize) -> f64) -> Option<(Vec<usize>, f64)> {
    if helpers.len() < k {
        return None;
    }
    struct Search<'a> {
        helpers: &'a [usize],
        k: usize,
        weight: &'a dyn Fn(usize, usize) -> f64,
        path: Vec<usize>,
        used: Vec<bool>,
        best: Option<Vec<usize>>,
        best_w: f64,
    }
    impl Search<'_> {
        /// `head` is the node the next (earlier) helper sends to; `w` the path's max so far.
        fn extend(&mut self, head: usize, w: f64) {
            if self.path.len() == self.k {
                // Every link was lighter than best_w, so this path is better.
                self.best = Some(self.path.iter().rev().copied().collect());
                self.best_w = w;
                return;
            }
            // Lightest links first: good paths come early and prune the rest. The paper
            // leaves the order open; it changes the speed, not the answer.
            let mut next: Vec<(f64, usize)> =
                (0..self.helpers.len()).filter(|&i| !self.used[i]).map(|i| ((self.weight)(self.helpers[i], head), i)).collect();
            next.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (lw, i) in next {
                if lw >= self.best_w {
                    break;
                }
                let n = self.helpers[i];
                self.used[i] = true;
                self.path.push(n);
                self.extend(n, w.max(lw));
                self.path.pop();
                self.used[i] = false;
            }
        }
    }
    let mut s = Search { helpers, k, weight, path: Vec::new(), used: vec![false; helpers.len()], best: None, best_w: f64::INFINITY };
    s.extend(requestor, 0.0);
    if k == 0 {
        return Some((Vec::new(), 0.0));
    }
    s.best.map(|p| (p, s.best_w))
}

/// The reference: every ordered selection of k helpers.
pub fn brute_force(helpers: &[usize], requestor: usize, k: usize, weight: &dyn Fn(usize, usize) -> f64) -> Option<(Vec<usize>, f64)> {
    fn rec(
        helpers: &[usize],
        used: &mut Vec<bool>,
        path: &mut Vec<usize>,
        k: usize,
        requestor: usize,
        weight: &dyn Fn(usize, usize) -> f64,
        best: &mut Option<(Vec<usize>, f64)>,
    ) {
        if path.len() == k {
            let mut w: f64 = 0.0;
            for i in 0..k {
                let next = if i + 1 < k { path[i + 1] } else { requestor };
                w = w.max(weight(path[i], next));
            }
            if best.as_ref().is_none_or(|(_, b)| w < *b) {
                *best = Some((path.clone(), w));
            }
            return;
        }
        for i in 0..helpers.len() {
            if !used[i] {
                used[i] = true;
                path.push(helpers[i]);
                rec(helpers, used, path, k, requestor, weight, best);
                path.pop();
                used[i] = false;
            }
        }
    }
    if helpers.len() < k {
        return None;
    }
    let mut best = None;
    rec(helpers, &mut vec![false; helpers.len()], &mut Vec::new(), k, requestor, weight, &mut best);
    best
}

/// The ring through all of `helpers` (the cyclic variant's order) whose largest link
/// weight is least, by the same branch and bound; the ring starts at `helpers[0]`.
pub fn best_cycle(helpers: &[usize], weight: &dyn Fn(usize, usize) -> f64) -> (Vec<usize>, f64) {
    let n = helpers.len();
    if n <= 1 {
        return (helpers.to_vec(), 0.0);
    }
    let mut best: (Vec<usize>, f64) = (helpers.to_vec(), f64::INFINITY);
    fn rec(
        helpers: &[usize],
        used: &mut [bool],
        path: &mut Vec<usize>,
        w: f64,
        weight: &dyn Fn(usize, usize) -> f64,
        best: &mut (Vec<usize>, f64),
    ) {
        let last = *path.last().expect("ring has a start");
        if path.len() == helpers.len() {
            let close = w.max(weight(last, path[0]));
            if close < best.1 {
                *best = (path.clone(), close);
            }
            return;
        }
        for i in 1..helpers.len() {
            if used[i] {
                continue;
            }
            let lw = weight(last, helpers[i]);
            if lw < best.1 {
                used[i] = true;
                path.push(helpers[i]);
                rec(helpers, used, path, w.max(lw), weight, best);
                path.pop();
                used[i] = false;
            }
        }
    }
    let mut used = vec![false; n];
    used[0] = true;
    rec(helpers, &mut used, &mut vec![helpers[0]], 0.0, weight, &mut best);
    best
}

/// Orders a chunk's chosen helper shards into the chain with the lightest slowest link.
pub fn order_chain(cluster: &Cluster, chunk: &LostChunk, helpers: &[usize], destination: NodeId) -> Vec<usize> {
    let node = |s: usize| chunk.placement[s].expect("helpers are available");
    // Index space: shard indices for helpers, usize::MAX for the destination.
    let weight = |a: usize, b: usize| {
        let nb = if b == usize::MAX { destination } else { node(b) };
        1.0 / cluster.link_bandwidth(node(a), nb)
    };
    best_path(helpers, usize::MAX, helpers.len(), &weight).map_or_else(|| helpers.to_vec(), |(p, _)| p)
}

/// Orders a chunk's helper shards into the ring (cyclic variant) with the lightest
/// slowest link.
pub fn order_ring(cluster: &Cluster, chunk: &LostChunk, helpers: &[usize]) -> Vec<usize> {
    let node = |s: usize| chunk.placement[s].expect("helpers are available");
    best_cycle(helpers, &|a, b| 1.0 / cluster.link_bandwidth(node(a), node(b))).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn branch_and_bound_equals_brute_force_on_random_matrices() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..200 {
            let n = rng.random_range(2..8);
            let k = rng.random_range(1..n);
            let w: Vec<Vec<f64>> = (0..n).map(|_| (0..n).map(|_| rng.random_range(1..50) as f64).collect()).collect();
            let weight = |a: usize, b: usize| w[a][b];
            let helpers: Vec<usize> = (0..n - 1).collect();
            let r = n - 1;
            let (p, bw) = best_path(&helpers, r, k, &weight).unwrap();
            let (_, fw) = brute_force(&helpers, r, k, &weight).unwrap();
            assert_eq!(bw, fw, "n={n} k={k}");
            assert_eq!(p.len(), k);
            let mut check: f64 = 0.0;
            for i in 0..k {
                check = check.max(weight(p[i], if i + 1 < k { p[i + 1] } else { r }));
            }
            assert_eq!(check, bw, "the returned path has the weight reported");
        }
    }

    #[test]
    fn best_cycle_equals_brute_force() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..100 {
            let n = rng.random_range(2..7);
            let w: Vec<Vec<f64>> = (0..n).map(|_| (0..n).map(|_| rng.random_range(1..30) as f64).collect()).collect();
            let weight = |a: usize, b: usize| w[a][b];
            let helpers: Vec<usize> = (0..n).collect();
            let (ring, got) = best_cycle(&helpers, &weight);
            // Brute force over rings starting at 0: paths through the rest, closed.
            let rest: Vec<usize> = (1..n).collect();
            let mut want = f64::INFINITY;
            let mut perm = rest.clone();
            permute(&mut perm, 0, &mut |p| {
                let mut m: f64 = weight(0, p.first().copied().unwrap_or(0));
                for i in 0..p.len() {
                    m = m.max(weight(p[i], if i + 1 < p.len() { p[i + 1] } else { 0 }));
                }
                want = want.min(m);
            });
            assert_eq!(got, want);
            assert_eq!(ring.len(), n);
        }
    }

    fn permute(v: &mut Vec<usize>, i: usize, f: &mut dyn FnMut(&[usize])) {
        if i == v.len() {
            f(v);
            return;
        }
        for j in i..v.len() {
            v.swap(i, j);
            permute(v, i + 1, f);
            v.swap(i, j);
        }
    }
}
