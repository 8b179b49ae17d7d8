//! The pairwise coupling transform: two coupled sub-chunks (C) and their uncoupled
//! counterparts (U) form a codeword of a (2,2) MDS code, so any two of the four give the
//! other two.
//!
//! Ceph's clay plugin uses its scalar MDS plugin for this transform; with isa/cauchy that
//! is ISA-L's Cauchy RS(2,2). The codeword is ordered [C_hi, C_lo, U_hi, U_lo], where "hi"
//! is the member of the pair with the larger row x, and
//! U_hi = C_hi/2 + C_lo/3, U_lo = C_hi/3 + C_lo/2 (1/(i xor j), i = 2, 3, j = 0, 1).

use kintsugi_gf::{inv, mul, CoefMatrix};

/// A position in the (2,2) codeword of one pair.
pub type Pos = usize;
pub const C_HI: Pos = 0;
pub const C_LO: Pos = 1;
pub const U_HI: Pos = 2;
pub const U_LO: Pos = 3;

/// The generator of the transform: each position as a combination of (C_hi, C_lo).
fn generator() -> [[u8; 2]; 4] {
    let (a, b) = (inv(2).expect("2 != 0"), inv(3).expect("3 != 0"));
    [[1, 0], [0, 1], [a, b], [b, a]]
}

/// Coefficients (c1, c2) with value[want] = c1 value[known.0] + c2 value[known.1].
pub fn solve(known: (Pos, Pos), want: Pos) -> [u8; 2] {
    let g = generator();
    let (r1, r2) = (g[known.0], g[known.1]);
    // Inverse of the 2x2 matrix [r1; r2] (characteristic 2: no signs).
    let det = mul(r1[0], r2[1]) ^ mul(r1[1], r2[0]);
    let di = inv(det).expect("any two positions of an MDS (2,2) code are independent");
    let invm = [[mul(di, r2[1]), mul(di, r1[1])], [mul(di, r2[0]), mul(di, r1[0])]];
    // value[want] = g[want] . data, data = invm . known  =>  coefs = g[want] . invm.
    let w = g[want];
    [mul(w[0], invm[0][0]) ^ mul(w[1], invm[1][0]), mul(w[0], invm[0][1]) ^ mul(w[1], invm[1][1])]
}

/// Kernel tables for every (known pair, wanted position), built once per code.
#[derive(Debug)]
pub struct Coupling {
    table: Vec<Option<CoefMatrix>>,
    coefs: Vec<[u8; 2]>,
}

impl Default for Coupling {
    fn default() -> Self {
        Self::new()
    }
}

impl Coupling {
    pub fn new() -> Self {
        let mut table = Vec::with_capacity(64);
        let mut coefs = Vec::with_capacity(64);
        for k1 in 0..4 {
            for k2 in 0..4 {
                for w in 0..4 {
                    let valid = k1 != k2 && w != k1 && w != k2;
                    let c = if valid { solve((k1, k2), w) } else { [0, 0] };
                    table.push(valid.then(|| CoefMatrix::new(1, 2, &c)));
                    coefs.push(c);
                }
            }
        }
        Coupling { table, coefs }
    }

    /// The two coefficients of [`Coupling::matrix`].
    pub fn coefs(&self, known: (Pos, Pos), want: Pos) -> [u8; 2] {
        self.coefs[known.0 * 16 + known.1 * 4 + want]
    }

    /// The 1x2 matrix computing position `want` from positions `known` (in that order).
    pub fn matrix(&self, known: (Pos, Pos), want: Pos) -> &CoefMatrix {
        self.table[known.0 * 16 + known.1 * 4 + want].as_ref().expect("known and wanted positions are distinct")
    }
}

/// Positions of (C, U) of node `i` in its pair with node `p` (rows `xi`, `xp`).
pub fn positions(xi: usize, xp: usize) -> (Pos, Pos) {
    if xi > xp {
        (C_HI, U_HI)
    } else {
        (C_LO, U_LO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_of_positions_recovers_the_others() {
        let g = generator();
        for (chi, clo) in [(0u8, 0u8), (1, 0), (0, 1), (0x53, 0xca), (255, 7)] {
            let v: Vec<u8> = g.iter().map(|r| mul(r[0], chi) ^ mul(r[1], clo)).collect();
            for k1 in 0..4 {
                for k2 in 0..4 {
                    for w in (0..4).filter(|&w| k1 != k2 && w != k1 && w != k2) {
                        let c = solve((k1, k2), w);
                        assert_eq!(mul(c[0], v[k1]) ^ mul(c[1], v[k2]), v[w], "known {k1},{k2} want {w}");
                    }
                }
            }
        }
    }
}
