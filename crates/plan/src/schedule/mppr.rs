//! m-PPR (Mitra et al., EuroSys'16, §5): many concurrent repairs scheduled greedily from a
//! FIFO queue of lost chunks. Each chunk takes the k sources with the best weight
//!   w_src = a1 * hasCache - a2 * #reconstructions - a3 * userLoad      (Eq. 2)
//! and the destination (outside the stripe and its failure domains) with the best
//!   w_dst = -(b1 * #repairDsts + b2 * userLoad)                        (Eq. 3)
//! then the weights are updated for the next chunk. kintsugi keeps no chunk cache, so
//! hasCache is always 0.

use super::{no_destination, Choice, Cluster, LostChunk};
use crate::error::{PlanError, Result};
use crate::graph::NodeId;
use std::collections::HashMap;

/// The weights' coefficients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coefficients {
    pub a1: f64,
    pub a2: f64,
    pub a3: f64,
    pub b1: f64,
    pub b2: f64,
}

impl Coefficients {
    /// The paper's rules: a2 = b1 = 1; a2/a3 = b1/b2 = C * ceil(log2 k) (C the chunk size in
    /// MB, turning user load into PPR repairs); a1/a2 = (alpha/beta) * ceil(log2(k+1)) with
    /// alpha/beta = 0.12, which the RS(6,3), 64 MB, 1 Gb/s example implies
    /// (a1 = 0.36, a2 = 1, a3 = 0.005).
    pub fn for_code(k: usize, chunk_mb: f64) -> Self {
        let log2 = |x: usize| (x as f64).log2().ceil().max(1.0);
        let per_mb = 1.0 / (chunk_mb * log2(k));
        Coefficients { a1: 0.12 * log2(k + 1), a2: 1.0, a3: per_mb, b1: 1.0, b2: per_mb }
    }
}

/// m-PPR's choices, chunk by chunk in queue order.
pub fn plan(lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster, co: &Coefficients) -> Result<Vec<Choice>> {
    let mut reconstructions: HashMap<NodeId, f64> = HashMap::new();
    let mut repair_dsts: HashMap<NodeId, f64> = HashMap::new();
    let user = |n: NodeId| cluster.user_load_mb.get(&n).copied().unwrap_or(0.0);
    let mut out = Vec::with_capacity(lost.len());
    for (c, (pool, need)) in lost.iter().zip(pools) {
        let w_src = |n: NodeId| -co.a2 * reconstructions.get(&n).copied().unwrap_or(0.0) - co.a3 * user(n);
        let mut sources: Vec<(f64, NodeId, usize)> = pool.iter().map(|&s| (0.0, c.placement[s].expect("available"), s)).collect();
        for s in &mut sources {
            s.0 = w_src(s.1);
        }
        if sources.len() < *need {
            return Err(PlanError::Invalid(format!("shard {} has {} sources, needs {need}", c.lost, sources.len())));
        }
        // Highest weight first, ties to the lower node id.
        sources.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        sources.truncate(*need);
        let dests = cluster.destinations(c);
        let w_dst = |n: NodeId| -(co.b1 * repair_dsts.get(&n).copied().unwrap_or(0.0) + co.b2 * user(n));
        let destination =
            dests.iter().copied().max_by(|&a, &b| w_dst(a).total_cmp(&w_dst(b)).then(b.cmp(&a))).ok_or_else(|| no_destination(c))?;
        for &(_, n, _) in &sources {
            *reconstructions.entry(n).or_default() += 1.0;
        }
        *repair_dsts.entry(destination).or_default() += 1.0;
        out.push(Choice { helpers: sources.into_iter().map(|(_, _, s)| s).collect(), destination, tree: None });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_match_the_papers_rs_6_3_example() {
        let co = Coefficients::for_code(6, 64.0);
        assert!((co.a1 - 0.36).abs() < 1e-12);
        assert_eq!((co.a2, co.b1), (1.0, 1.0));
        assert!((co.a3 - 0.005).abs() < 0.0005, "a3 = {}", co.a3);
    }

    #[test]
    fn busy_sources_and_loaded_destinations_are_avoided() {
        // Two stripes on nodes 0 (lost), 1, 2: RS(2,1) needs both survivors.
        let a = LostChunk { placement: vec![None, Some(1), Some(2)], lost: 0, avoid: vec![], size: 0 };
        let b = a.clone();
        let mut cluster = Cluster::homogeneous(vec![1, 2, 3, 4, 5]);
        cluster.user_load_mb.insert(4, 1000.0); // node 4 serves heavy user traffic
        let co = Coefficients::for_code(2, 64.0);
        let c = plan(&[a.clone(), b], &[(vec![1, 2], 2), (vec![1, 2], 2)], &cluster, &co).unwrap();
        assert_eq!(c[0].destination, 3, "node 4 is loaded by users; 3 is the least loaded outside the stripe");
        assert_eq!(c[1].destination, 5, "node 3 is now a repair destination and 4 still loaded");
        // With three candidates for two sources, the busy one is left out.
        let wide = LostChunk { placement: vec![None, Some(1), Some(2), Some(3)], lost: 0, avoid: vec![], size: 0 };
        let c = plan(&[a.clone(), wide], &[(vec![1, 2], 2), (vec![1, 2, 3], 2)], &cluster, &co).unwrap();
        assert_eq!(c[1].helpers, vec![3, 1], "node 3 has no reconstructions yet, then node 1 (lower id than 2)");
    }
}
