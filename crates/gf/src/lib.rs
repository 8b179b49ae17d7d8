//! GF(2^8) arithmetic over the polynomial 0x11d and region kernels for erasure coding.
//!
//! The free functions use the fastest kernel this CPU supports for each kind of operation
//! ([`Kernel::fastest`]), or the one named by the `KINTSUGI_GF_KERNEL` environment variable;
//! a [`Kernel`] value runs one explicitly.
//!
//! ```
//! use kintsugi_gf::{mul, mul_add, CoefMatrix, apply};
//! let src = vec![3u8; 100];
//! let mut dst = vec![0u8; 100];
//! mul_add(7, &src, &mut dst); // dst ^= 7 * src
//! assert!(dst.iter().all(|&b| b == mul(7, 3)));
//!
//! // two outputs from two sources in one pass: [1 1; 1 2] x [a; b]
//! let (a, b) = (vec![5u8; 64], vec![9u8; 64]);
//! let m = CoefMatrix::new(2, 2, &[1, 1, 1, 2]);
//! let (mut p, mut q) = (vec![0u8; 64], vec![0u8; 64]);
//! apply(&m, &[&a, &b], &mut [&mut p, &mut q]);
//! assert_eq!(p[0], 5 ^ 9);
//! assert_eq!(q[0], 5 ^ mul(2, 9));
//! ```
#![deny(missing_docs)]

mod coef;
mod field;
mod kernel;
#[cfg(target_arch = "x86_64")]
#[allow(missing_docs)]
mod simd;

pub use coef::CoefTable;
pub use field::{div, exp2, inv, mul, pow, MUL, POLY};
pub use kernel::{CoefMatrix, Kernel, Op, ALL_KERNELS};

/// dst = c * src. Panics if the lengths differ.
pub fn mul_slice(c: u8, src: &[u8], dst: &mut [u8]) {
    Kernel::active_for(Op::Mul).mul_region::<false>(c, src, dst)
}

/// dst ^= c * src (multiply-accumulate, the relay combine step). Panics if the lengths differ.
pub fn mul_add(c: u8, src: &[u8], dst: &mut [u8]) {
    Kernel::active_for(Op::Mul).mul_region::<true>(c, src, dst)
}

/// dst = sum_i coefs[i] * srcs[i]. Panics if the counts or lengths differ.
pub fn dot_prod(coefs: &[u8], srcs: &[&[u8]], dst: &mut [u8]) {
    let m = CoefMatrix::new(1, coefs.len(), coefs);
    Kernel::active_for(Op::Dot).apply::<false>(&m, srcs, &mut [dst])
}

/// dsts[r] = sum_c m[r][c] * srcs[c]. Panics if the counts or lengths differ.
pub fn apply(m: &CoefMatrix, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
    Kernel::active_for(Op::Dot).apply::<false>(m, srcs, dsts)
}

/// [`apply`] for sources that are short runs scattered in memory: prefetches each ahead
/// (see [`Kernel::apply_with`]).
pub fn apply_gathered(m: &CoefMatrix, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
    Kernel::active_for(Op::Dot).apply_with::<false, true>(m, srcs, dsts)
}

/// dsts[r] ^= sum_c m[r][c] * srcs[c]. Panics if the counts or lengths differ.
pub fn apply_add(m: &CoefMatrix, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
    Kernel::active_for(Op::Dot).apply::<true>(m, srcs, dsts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference_apply(rows: usize, cols: usize, coefs: &[u8], srcs: &[Vec<u8>], len: usize) -> Vec<Vec<u8>> {
        (0..rows).map(|r| (0..len).map(|j| (0..cols).fold(0u8, |acc, c| acc ^ mul(coefs[r * cols + c], srcs[c][j]))).collect()).collect()
    }

    #[test]
    fn reports_kernels() {
        let avail = Kernel::available();
        assert_eq!(avail[0], Kernel::Scalar);
        for k in ALL_KERNELS {
            if !k.is_available() {
                eprintln!("note: GF kernel {k} is not supported by this CPU; its tests are skipped");
            }
        }
        assert_eq!("AVX2".parse::<Kernel>(), Ok(Kernel::Avx2));
        assert!("neon".parse::<Kernel>().is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_kernel_matches_reference_mul(c: u8, data in proptest::collection::vec(any::<u8>(), 0..700), init: u8) {
            let want_mul: Vec<u8> = data.iter().map(|&x| mul(c, x)).collect();
            let want_add: Vec<u8> = data.iter().map(|&x| init ^ mul(c, x)).collect();
            for k in Kernel::available() {
                let mut d = vec![0xAAu8; data.len()];
                k.mul_region::<false>(c, &data, &mut d);
                prop_assert_eq!(&d, &want_mul, "kernel {}", k);
                let mut d = vec![init; data.len()];
                k.mul_region::<true>(c, &data, &mut d);
                prop_assert_eq!(&d, &want_add, "kernel {}", k);
            }
        }

        #[test]
        fn every_kernel_matches_reference_matrix(
            rows in 1usize..11, cols in 0usize..12, len in 0usize..400, seed: u64, acc: bool,
        ) {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let coefs: Vec<u8> = (0..rows * cols).map(|_| rng.random()).collect();
            let srcs: Vec<Vec<u8>> = (0..cols).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
            let init: Vec<Vec<u8>> = (0..rows).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
            let mut want = reference_apply(rows, cols, &coefs, &srcs, len);
            if acc {
                for (w, i) in want.iter_mut().zip(&init) {
                    w.iter_mut().zip(i).for_each(|(a, b)| *a ^= b);
                }
            }
            let m = CoefMatrix::new(rows, cols, &coefs);
            let src_refs: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
            for k in Kernel::available() {
                let mut out = init.clone();
                let mut out_refs: Vec<&mut [u8]> = out.iter_mut().map(|d| d.as_mut_slice()).collect();
                if acc { k.apply::<true>(&m, &src_refs, &mut out_refs) } else { k.apply::<false>(&m, &src_refs, &mut out_refs) }
                prop_assert_eq!(&out, &want, "kernel {}", k);
            }
        }
    }

    #[test]
    fn dot_prod_of_large_unaligned_regions() {
        let len = (1 << 16) + 13;
        let srcs: Vec<Vec<u8>> = (0..5).map(|i| (0..len).map(|j| (j * 31 + i * 7) as u8).collect()).collect();
        let coefs = [1, 2, 0, 0x8e, 255];
        let refs: Vec<&[u8]> = srcs.iter().map(|s| &s[1..]).collect();
        let mut dst = vec![0u8; len - 1];
        dot_prod(&coefs, &refs, &mut dst);
        for j in [0, 1, 31, 32, 63, 64, 1000, len - 2] {
            let want = (0..5).fold(0u8, |a, i| a ^ mul(coefs[i], srcs[i][j + 1]));
            assert_eq!(dst[j], want, "byte {j}");
        }
        // The prefetching variant computes the same, for every kernel.
        let m = CoefMatrix::new(1, 5, &coefs);
        for k in Kernel::available() {
            let mut again = vec![0x5Au8; len - 1];
            k.apply_with::<false, true>(&m, &refs, &mut [&mut again]);
            assert!(again == dst, "kernel {k}");
        }
        let mut again = vec![0u8; len - 1];
        apply_gathered(&m, &refs, &mut [&mut again]);
        assert!(again == dst);
    }

    #[test]
    #[should_panic(expected = "region lengths differ")]
    fn mismatched_lengths_panic() {
        mul_add(3, &[1, 2, 3], &mut [0, 0]);
    }
}
