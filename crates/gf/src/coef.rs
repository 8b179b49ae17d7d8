//! Per-coefficient tables that the region kernels consume.

use crate::field::{mul, MUL};

/// Everything a kernel needs to multiply a region by one constant `c`:
/// the two 16-entry nibble tables of the PSHUFB method (ISA-L's layout: low then high)
/// and the 8x8 bit matrix of the GFNI affine method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct CoefTable {
    /// `nib[i] = c * i` and `nib[16 + i] = c * (i << 4)` for i in 0..16.
    pub nib: [u8; 32],
    /// Bit matrix for `gf2p8affineqb`: byte (7 - i) holds row i, whose bit b is
    /// bit i of `c * (1 << b)`.
    pub affine: u64,
    /// The coefficient itself, for scalar tails.
    pub c: u8,
}

impl CoefTable {
    /// Tables for multiplying by `c`.
    pub fn new(c: u8) -> Self {
        let mut nib = [0u8; 32];
        for i in 0..16u8 {
            nib[i as usize] = mul(c, i);
            nib[16 + i as usize] = mul(c, i << 4);
        }
        let mut affine = 0u64;
        for i in 0..8 {
            let mut row = 0u8;
            for b in 0..8 {
                if mul(c, 1 << b) & (1 << i) != 0 {
                    row |= 1 << b;
                }
            }
            affine |= (row as u64) << (8 * (7 - i));
        }
        CoefTable { nib, affine, c }
    }

    /// The 256-entry product row, for scalar code.
    #[inline]
    pub fn row(&self) -> &'static [u8; 256] {
        &MUL[self.c as usize]
    }
}

/// What `gf2p8affineqb(x, A, 0)` computes for one byte: bit i of the result is the
/// parity of (byte 7-i of A) AND x. Used to check `CoefTable::affine` on machines
/// without GFNI.
#[cfg(test)]
pub(crate) fn affine_byte(a: u64, x: u8) -> u8 {
    let mut r = 0u8;
    for i in 0..8 {
        let row = (a >> (8 * (7 - i))) as u8;
        if (row & x).count_ones() % 2 == 1 {
            r |= 1 << i;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibble_tables_and_affine_matrix_multiply() {
        for c in 0..=255u8 {
            let t = CoefTable::new(c);
            for x in 0..=255u8 {
                let by_nib = t.nib[(x & 15) as usize] ^ t.nib[16 + (x >> 4) as usize];
                assert_eq!(by_nib, mul(c, x));
                assert_eq!(affine_byte(t.affine, x), mul(c, x), "c={c} x={x}");
            }
        }
    }
}
