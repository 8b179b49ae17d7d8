//! Repair traffic balancing (RepairBoost §3.2, Algorithm 1). Each graph position has a task
//! (u, d): chunks it uploads and downloads. Over all lost chunks at once:
//! 1. intermediate positions (u > 0, d > 0), by descending d, go to the surviving holder of
//!    their stripe with the least download so far;
//! 2. roots (destinations) go to the node with the least download that holds no shard of
//!    the stripe;
//! 3. leaves (d = 0) go to the surviving holder with the least upload so far;
//!
//! never two positions of one graph on the same node. Ties go to the lower node id. With
//! heterogeneous bandwidth the loads are in seconds (chunks / bandwidth), so that nodes
//! finish together (§3.4), and ties go to the faster node first. Where the batch's chunks
//! differ in size (Geo's grow geometrically), a chunk weighs its size over the mean (the
//! paper's chunks are all alike), and larger chunks are placed first within each step.

use super::super::{no_destination, Choice, Cluster, LostChunk, Template};
use crate::error::Result;
use crate::graph::{NodeId, Shape};
use std::collections::HashMap;

/// Upload and download repair traffic per node, in chunks (or seconds when heterogeneous).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loads {
    pub up: HashMap<NodeId, f64>,
    pub down: HashMap<NodeId, f64>,
}

impl Loads {
    fn up(&self, n: NodeId) -> f64 {
        self.up.get(&n).copied().unwrap_or(0.0)
    }
    fn down(&self, n: NodeId) -> f64 {
        self.down.get(&n).copied().unwrap_or(0.0)
    }
}

/// Which node takes each position of each graph: `positions[c][p]` for chunk c, position
/// p (0..k helper terms, k the destination).
pub fn map(
    templates: &[&Template],
    lost: &[LostChunk],
    pools: &[(Vec<usize>, usize)],
    cluster: &Cluster,
    loads: &mut Loads,
) -> Result<Vec<Vec<NodeId>>> {
    // Per-node cost of one chunk up or down: 1 (homogeneous) or 1/bandwidth.
    let per = |n: NodeId| chunk_cost(cluster, n);
    let w = weights(lost);
    let mut placed: Vec<Vec<Option<NodeId>>> = templates.iter().map(|t| vec![None; t.k() + 1]).collect();
    let add = |loads: &mut Loads, n: NodeId, u: f64, d: f64| {
        let (pu, pd) = per(n);
        *loads.up.entry(n).or_default() += u * pu;
        *loads.down.entry(n).or_default() += d * pd;
    };
    let holders = |c: usize, placed: &[Vec<Option<NodeId>>]| -> Vec<NodeId> {
        let (pool, _) = &pools[c];
        pool.iter().map(|&s| lost[c].placement[s].expect("pool shards are available")).filter(|n| !placed[c].contains(&Some(*n))).collect()
    };
    // 1. Intermediate vertices, most download first (stable: chunk order, then position).
    let mut inter: Vec<(usize, usize)> = Vec::new();
    let mut leaves: Vec<(usize, usize)> = Vec::new();
    for (c, t) in templates.iter().enumerate() {
        for p in 0..t.k() {
            if t.down[p] > 0.0 {
                inter.push((c, p));
            } else {
                leaves.push((c, p));
            }
        }
    }
    // Helper positions go to the stripe's unused holder with the least `load`.
    let place_helpers =
        |order: Vec<(usize, usize)>, placed: &mut Vec<Vec<Option<NodeId>>>, loads: &mut Loads, download: bool| -> Result<()> {
            for (c, p) in order {
                let cand = holders(c, placed);
                let load = |n| if download { (loads.down(n), per(n).1) } else { (loads.up(n), per(n).0) };
                let n = pick(&cand, load).ok_or_else(|| too_few(&lost[c]))?;
                placed[c][p] = Some(n);
                add(loads, n, templates[c].up[p] * w[c], templates[c].down[p] * w[c]);
            }
            Ok(())
        };
    inter.sort_by(|a, b| (templates[b.0].down[b.1] * w[b.0]).total_cmp(&(templates[a.0].down[a.1] * w[a.0])));
    place_helpers(inter, &mut placed, loads, true)?;
    // 2. Roots: the least download among nodes outside the stripe.
    let mut roots: Vec<usize> = (0..templates.len()).collect();
    roots.sort_by(|&a, &b| (templates[b].down[templates[b].k()] * w[b]).total_cmp(&(templates[a].down[templates[a].k()] * w[a])));
    for c in roots {
        let k = templates[c].k();
        let cand = cluster.destinations(&lost[c]);
        let n = pick(&cand, |n| (loads.down(n), per(n).1)).ok_or_else(|| no_destination(&lost[c]))?;
        placed[c][k] = Some(n);
        add(loads, n, templates[c].up[k] * w[c], templates[c].down[k] * w[c]);
    }
    // 3. Leaves: the least upload among the stripe's unused holders.
    leaves.sort_by(|a, b| (templates[b.0].up[b.1] * w[b.0]).total_cmp(&(templates[a.0].up[a.1] * w[a.0])));
    place_helpers(leaves, &mut placed, loads, false)?;
    Ok(placed.into_iter().map(|ps| ps.into_iter().map(|n| n.expect("every position placed")).collect()).collect())
}

/// Each chunk's weight in the loads: its size over the batch's mean when every size is
/// known, else 1 (every chunk alike, as in the paper).
pub(super) fn weights(lost: &[LostChunk]) -> Vec<f64> {
    if lost.is_empty() || lost.iter().any(|c| c.size == 0) {
        return vec![1.0; lost.len()];
    }
    let mean = lost.iter().map(|c| c.size as f64).sum::<f64>() / lost.len() as f64;
    lost.iter().map(|c| c.size as f64 / mean).collect()
}

/// The load of one chunk up and down at node n: 1 on a homogeneous cluster, else seconds at
/// its bandwidth. A node measured at no bandwidth is very slow, not infinitely: moving a
/// chunk off it must leave a number.
pub(super) fn chunk_cost(cluster: &Cluster, n: NodeId) -> (f64, f64) {
    if cluster.bandwidth.is_empty() {
        (1.0, 1.0)
    } else {
        let (u, d) = cluster.bandwidth_of(n);
        (1.0 / u.max(1e-3), 1.0 / d.max(1e-3))
    }
}

/// The candidate with the smallest load; ties to the faster node (the smaller cost of a
/// chunk), then to the lowest node id. On uneven links an empty slow node is not as good
/// as an empty fast one: with every load at zero, the lowest id would win each time.
fn pick(cand: &[NodeId], load: impl Fn(NodeId) -> (f64, f64)) -> Option<NodeId> {
    cand.iter().copied().min_by(|&a, &b| {
        let (la, ca) = load(a);
        let (lb, cb) = load(b);
        la.total_cmp(&lb).then(ca.total_cmp(&cb)).then(a.cmp(&b))
    })
}

fn too_few(c: &LostChunk) -> crate::error::PlanError {
    crate::error::PlanError::Invalid(format!("too few surviving helpers to rebuild shard {}", c.lost))
}

/// Balanced choices for every chunk, starting from no load.
pub fn plan(shape: Shape, lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster) -> Result<Vec<Choice>> {
    let mut cache: HashMap<usize, Template> = HashMap::new();
    for (_, need) in pools {
        if !cache.contains_key(need) {
            cache.insert(*need, Template::new(shape, *need)?);
        }
    }
    let templates: Vec<&Template> = pools.iter().map(|(_, need)| &cache[need]).collect();
    let mut nodes = map(&templates, lost, pools, cluster, &mut Loads::default())?;
    super::rebalance::improve(&templates, lost, pools, cluster, &mut nodes);
    Ok(lost
        .iter()
        .zip(nodes)
        .map(|(c, ns)| {
            let k = ns.len() - 1;
            let helpers = ns[..k].iter().map(|&n| c.placement.iter().position(|&p| p == Some(n)).expect("helper holds a shard")).collect();
            Choice { helpers, destination: ns[k], tree: None }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RepairBoost Figure 6: a PPR graph of RS(4,2) mapped onto N1..N6 with given loads.
    #[test]
    fn figure_6_tuples_before_and_after() {
        let t = Template::new(Shape::Ppr, 4).unwrap();
        // The paper's Figure 5 tree: v1, v3 leaves (1,0); v2 (1,1); v4 (1,2); root (0,1).
        assert_eq!(t.up, vec![1.0, 1.0, 1.0, 1.0, 0.0]);
        assert_eq!(t.down, vec![0.0, 1.0, 0.0, 2.0, 1.0]);
        let before = [(10.0, 15.0), (9.0, 23.0), (19.0, 14.0), (17.0, 20.0), (17.0, 13.0), (17.0, 20.0)];
        let mut loads = Loads::default();
        for (i, &(u, d)) in before.iter().enumerate() {
            loads.up.insert(i as NodeId + 1, u);
            loads.down.insert(i as NodeId + 1, d);
        }
        // RS(4,2): shards on N1, N2, N3, N5, N6 survive; the lost one was on a failed node.
        let chunk = LostChunk { placement: vec![None, Some(1), Some(2), Some(3), Some(5), Some(6)], lost: 0, avoid: vec![], size: 0 };
        let pools = vec![(vec![1, 2, 3, 4, 5], 4)];
        let cluster = Cluster::homogeneous(vec![1, 2, 3, 4, 5, 6]);
        let nodes = map(&[&t], &[chunk], &pools, &cluster, &mut loads).unwrap();
        // v4 -> N5 (least download 13), v2 -> N3 (14), root -> N4, leaves -> N2 (upload 9), N1 (10).
        assert_eq!(nodes[0][3], 5);
        assert_eq!(nodes[0][1], 3);
        assert_eq!(nodes[0][4], 4);
        assert_eq!((nodes[0][0], nodes[0][2]), (2, 1));
        let after: Vec<(f64, f64)> = (1..=6).map(|n| (loads.up(n), loads.down(n))).collect();
        assert_eq!(after, vec![(11.0, 15.0), (10.0, 23.0), (20.0, 15.0), (17.0, 21.0), (18.0, 15.0), (17.0, 20.0)]);
    }

    /// On uneven links a slow node is not picked for being empty: with every load at zero,
    /// the destination is the node that finishes the chunk first, not the lowest id.
    #[test]
    fn an_empty_slow_node_is_not_a_free_one() {
        let lost = vec![LostChunk { placement: vec![Some(3), Some(4), None], lost: 2, avoid: vec![], size: 0 }];
        let pools = vec![(vec![0, 1], 2)];
        let mut cluster = Cluster::homogeneous(vec![1, 2, 3, 4]);
        cluster.default_bandwidth = 100.0;
        cluster.bandwidth.insert(1, (10.0, 10.0));
        let c = plan(Shape::Cr, &lost, &pools, &cluster).unwrap();
        assert_eq!(c[0].destination, 2);
        cluster.bandwidth.clear();
        assert_eq!(plan(Shape::Cr, &lost, &pools, &cluster).unwrap()[0].destination, 1, "homogeneous: ties to the lowest id");
    }

    /// Chunks of unlike sizes (Geo's) are balanced by bytes: four chunks whose only possible
    /// destinations are nodes 1 and 2, one of 16 MiB and three of 1 MiB. By count each node
    /// would take two, one of them 17 MiB; by bytes the large one goes alone.
    #[test]
    fn unlike_chunks_balance_by_bytes() {
        let mib = 1u64 << 20;
        let lost: Vec<LostChunk> = [1, 16, 1, 1]
            .iter()
            .map(|&m| LostChunk { placement: vec![Some(3), Some(4), None], lost: 2, avoid: vec![], size: m * mib })
            .collect();
        let pools = vec![(vec![0, 1], 2); 4];
        let cluster = Cluster::homogeneous(vec![1, 2, 3, 4]);
        let per_node = |lost: &[LostChunk]| {
            let mut bytes = [0u64; 3];
            for (c, ch) in plan(Shape::Cr, lost, &pools, &cluster).unwrap().iter().zip(lost) {
                bytes[c.destination as usize] += ch.size;
            }
            bytes[1].max(bytes[2])
        };
        assert_eq!(per_node(&lost), 16 * mib);
        // Unknown sizes: by count, two each, as the paper's equal chunks.
        let unknown: Vec<LostChunk> = lost.iter().map(|c| LostChunk { size: 0, ..c.clone() }).collect();
        let dests: Vec<NodeId> = plan(Shape::Cr, &unknown, &pools, &cluster).unwrap().iter().map(|c| c.destination).collect();
        assert_eq!(dests.iter().filter(|&&d| d == 1).count(), 2, "{dests:?}");
    }
}
