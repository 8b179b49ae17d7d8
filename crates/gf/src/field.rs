//! Scalar arithmetic in GF(2^8) with the polynomial x^8+x^4+x^3+x^2+1 (0x11d),
//! the field of ISA-L, Jerasure, Hadoop and Ceph. Tables are built at compile time.

/// The reducing polynomial, including the x^8 term.
pub const POLY: u16 = 0x11d;

const fn build_exp_log() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // exp[510], exp[511] are never read through mul (log a + log b <= 508).
    (exp, log)
}

const EXP_LOG: ([u8; 512], [u8; 256]) = build_exp_log();
/// exp[i] = 2^i, doubled so that exp[log a + log b] needs no reduction.
pub(crate) static EXP: [u8; 512] = EXP_LOG.0;
/// log[a] for a != 0; log[0] is unused.
pub(crate) static LOG: [u8; 256] = EXP_LOG.1;

const fn build_mul_table() -> [[u8; 256]; 256] {
    let (exp, log) = build_exp_log();
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = exp[log[a] as usize + log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
}

/// Full 64 KiB product table: `MUL[a][b] = a*b`. Used by the scalar kernel and tails.
pub static MUL: [[u8; 256]; 256] = build_mul_table();

/// a * b in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// Multiplicative inverse. Returns `None` for 0, which has none.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        None
    } else {
        Some(EXP[255 - LOG[a as usize] as usize])
    }
}

/// a / b. Returns `None` when b is 0.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// a^e (with 0^0 = 1).
pub fn pow(a: u8, e: u32) -> u8 {
    if e == 0 {
        return 1;
    }
    if a == 0 {
        return 0;
    }
    let l = (LOG[a as usize] as u64 * e as u64) % 255;
    EXP[l as usize]
}

/// 2^i, the i-th power of the field's generator.
#[inline]
pub fn exp2(i: usize) -> u8 {
    EXP[i % 255]
}

/// Carry-less shift-and-add multiply, the definition the tables must agree with.
#[cfg(test)]
pub(crate) fn mul_slow(mut a: u8, mut b: u8) -> u8 {
    let mut p: u8 = 0;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= (POLY & 0xff) as u8;
        }
        b >>= 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_match_definition() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_slow(a, b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn inverses() {
        assert_eq!(inv(0), None);
        assert_eq!(inv(2), Some(0x8e)); // ISA-L's Cauchy entry 1/(0^2)
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a).unwrap()), 1);
        }
        assert_eq!(div(7, 0), None);
    }

    #[test]
    fn powers() {
        assert_eq!(pow(0, 0), 1);
        assert_eq!(pow(0, 5), 0);
        assert_eq!(pow(3, 1), 3);
        assert_eq!(pow(2, 8), 0x1d);
        assert_eq!(exp2(255), 1);
        for a in 1..=255u8 {
            assert_eq!(pow(a, 255), 1);
            assert_eq!(pow(a, 2), mul(a, a));
        }
    }
}
