//! Where a Clay node sits and whom it is coupled with, in Ceph's numbering.
//!
//! The k data shards are nodes 0..k, then `nu` virtual (all-zero, never stored) nodes that
//! shorten the code so that q divides the node count, then the m parity shards. Node i
//! sits at column y = i / q, row x = i % q. A chunk holds alpha = q^t sub-chunks, one per
//! *plane* z; digit y of z (the first digit most significant) names the row of column y
//! that is *unpaired* in plane z. Every other node (x, y) of that column is coupled with
//! node (z_y, y) of plane z', which is z with digit y set to x.

use std::ops::Range;

/// The shape of one Clay code: q x t grid of nodes, alpha planes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub k: usize,
    pub m: usize,
    pub d: usize,
    /// d - k + 1: nodes per column.
    pub q: usize,
    /// Columns.
    pub t: usize,
    /// Virtual (shortened) nodes between the data and the parity nodes.
    pub nu: usize,
    /// Sub-chunks (planes) per chunk: q^t.
    pub alpha: usize,
    /// q^(t-1-y) for each column y: the weight of digit y in a plane index.
    weight: Vec<usize>,
}

/// The most sub-chunks we accept; beyond this a chunk is mostly plane bookkeeping.
pub const MAX_SUB_CHUNKS: usize = 1 << 16;

impl Geometry {
    pub fn new(k: usize, m: usize, d: usize) -> Result<Self, String> {
        if k == 0 || m == 0 {
            return Err("clay needs k >= 1 data and m >= 1 parity shards".into());
        }
        if k.max(m).max(d) > 256 {
            return Err(format!("clay:{k},{m},{d}: at most 256 shards fit GF(2^8)"));
        }
        if d < k || d + 1 > k + m {
            return Err(format!("clay:{k},{m},{d}: d (helpers per repair) must be between k = {k} (plain RS) and k+m-1 = {}", k + m - 1));
        }
        let q = d - k + 1;
        let nu = (q - (k + m) % q) % q;
        let nodes = k + m + nu;
        if nodes > 254 {
            return Err(format!("clay:{k},{m},{d} needs {nodes} nodes with its virtual ones; at most 254 fit GF(2^8)"));
        }
        let t = nodes / q;
        let mut alpha: usize = 1;
        for _ in 0..t {
            alpha = alpha.checked_mul(q).filter(|&a| a <= MAX_SUB_CHUNKS).ok_or_else(|| {
                format!("clay:{k},{m},{d} has q^t = {q}^{t} sub-chunks per chunk, more than the {MAX_SUB_CHUNKS} supported")
            })?;
        }
        let weight = (0..t).map(|y| q.pow((t - 1 - y) as u32)).collect();
        Ok(Geometry { k, m, d, q, t, nu, alpha, weight })
    }

    /// Nodes in the grid, virtual ones included.
    pub fn nodes(&self) -> usize {
        self.q * self.t
    }

    /// Beta: sub-chunks each helper reads to repair one node (alpha / q).
    pub fn beta(&self) -> usize {
        self.alpha / self.q
    }

    /// The grid node of shard `s`.
    pub fn node_of(&self, s: usize) -> usize {
        if s < self.k {
            s
        } else {
            s + self.nu
        }
    }

    /// The shard stored at grid node `i`, or `None` for a virtual node.
    pub fn shard_of(&self, i: usize) -> Option<usize> {
        if i < self.k {
            Some(i)
        } else if i < self.k + self.nu {
            None
        } else {
            Some(i - self.nu)
        }
    }

    pub fn is_virtual(&self, i: usize) -> bool {
        (self.k..self.k + self.nu).contains(&i)
    }

    /// Row x of node i.
    pub fn x(&self, i: usize) -> usize {
        i % self.q
    }

    /// Column y of node i.
    pub fn y(&self, i: usize) -> usize {
        i / self.q
    }

    /// The weight of column y's digit in a plane index: q^(t-1-y).
    pub fn weight(&self, y: usize) -> usize {
        self.weight[y]
    }

    /// Digit y of plane z.
    pub fn digit(&self, z: usize, y: usize) -> usize {
        (z / self.weight[y]) % self.q
    }

    /// Whether node i is unpaired in plane z (its coupled and uncoupled values agree).
    pub fn unpaired(&self, i: usize, z: usize) -> bool {
        self.digit(z, self.y(i)) == self.x(i)
    }

    /// The node and plane node i is coupled with in plane z, or `None` when unpaired.
    pub fn partner(&self, i: usize, z: usize) -> Option<(usize, usize)> {
        let (x, y) = (self.x(i), self.y(i));
        let zy = self.digit(z, y);
        if zy == x {
            return None;
        }
        Some((y * self.q + zy, z + x * self.weight[y] - zy * self.weight[y]))
    }

    /// The planes in which node i is unpaired: the sub-chunks every helper reads to repair
    /// it, as runs of consecutive planes (1 run for column 0, q^(t-1) runs of 1 for the
    /// last column).
    pub fn repair_runs(&self, i: usize) -> Vec<Range<usize>> {
        let (x, y) = (self.x(i), self.y(i));
        let w = self.weight[y];
        let block = w * self.q;
        (0..self.alpha / block).map(|b| b * block + x * w..b * block + (x + 1) * w).collect()
    }

    /// The planes of `repair_runs`, one by one.
    pub fn repair_planes(&self, i: usize) -> Vec<usize> {
        self.repair_runs(i).into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clay_10_4_13_has_the_papers_shape() {
        let g = Geometry::new(10, 4, 13).unwrap();
        assert_eq!((g.q, g.t, g.nu, g.alpha, g.beta()), (4, 4, 2, 256, 64));
        assert_eq!(g.node_of(10), 12, "the first parity follows the two virtual nodes");
        assert_eq!(g.shard_of(11), None);
        // Geometric Partitioning Fig. 2: 1, 4, 16 or 64 runs by the lost node's column.
        let runs: Vec<usize> = [0, 4, 8, 12].iter().map(|&i| g.repair_runs(i).len()).collect();
        assert_eq!(runs, vec![1, 4, 16, 64]);
        for i in 0..g.nodes() {
            let planes = g.repair_planes(i);
            assert_eq!(planes.len(), g.beta());
            assert!(planes.iter().all(|&z| g.unpaired(i, z)));
        }
    }

    #[test]
    fn pairing_is_an_involution() {
        let g = Geometry::new(5, 3, 6).unwrap();
        assert_eq!((g.q, g.t, g.nu, g.alpha), (2, 4, 0, 16));
        for i in 0..g.nodes() {
            for z in 0..g.alpha {
                if let Some((p, zs)) = g.partner(i, z) {
                    assert_eq!(g.y(p), g.y(i));
                    assert!(g.unpaired(p, z) && g.unpaired(i, zs));
                    assert_eq!(g.partner(p, zs), Some((i, z)));
                }
            }
        }
    }

    #[test]
    fn d_out_of_range_is_refused() {
        assert!(Geometry::new(4, 2, 3).is_err());
        assert_eq!(Geometry::new(4, 2, 4).unwrap().alpha, 1, "d = k is plain RS");
        assert!(Geometry::new(4, 2, 6).is_err());
        assert!(Geometry::new(4, 2, 5).is_ok());
        assert!(Geometry::new(20, 20, 21).is_err(), "2^20 sub-chunks is too many");
    }
}
