//! Algorithm 1 of Geometric Partitioning: cut an object of S bytes into a front remainder
//! R = S mod s0 (kept in the RS-coded small-size bucket) and chunks of s0, s0 q, s0 q^2, ...
//!
//! Pass 1 takes one chunk of every size, ascending, so there are no size gaps (20 MiB is
//! 4 + 8 + 8, not 4 + 16). Pass 2 fills what is left greedily, largest size first. Chunks
//! are capped (256 MiB in the paper, section 5.2); the paper does not say how the cap meets
//! Algorithm 1, so we do what the authors' public code does (../shared/papers/README.md):
//! grow to the cap, take as many cap-sized chunks as fit, then fill greedily downwards.

use serde::Serialize;

/// The paper's cap on a chunk: 256 MiB.
pub const DEFAULT_MAX_CHUNK: u64 = 256 << 20;

/// An object cut by [`partition`]: `remainder` bytes first (the small-size bucket), then
/// `chunks`, ascending, in object order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Partition {
    pub remainder: u64,
    pub chunks: Vec<u64>,
}

impl Partition {
    /// The object's size: the remainder plus every chunk.
    pub fn size(&self) -> u64 {
        self.remainder + self.chunks.iter().sum::<u64>()
    }

    /// Byte offset in the object where each chunk starts (the remainder comes first).
    pub fn offsets(&self) -> Vec<u64> {
        let mut at = self.remainder;
        self.chunks
            .iter()
            .map(|c| {
                let o = at;
                at += c;
                o
            })
            .collect()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PartitionError {
    #[error("s0 must be at least 1 byte")]
    ZeroS0,
    #[error("q must be at least 1 (1 means every chunk is s0)")]
    ZeroQ,
    #[error("s0 ({s0} bytes) is larger than the chunk cap ({cap} bytes)")]
    S0OverCap { s0: u64, cap: u64 },
}

/// The chunk sizes the partitioner may use: s0 q^i up to `cap`, ascending.
pub fn sizes(s0: u64, q: u64, cap: u64) -> Result<Vec<u64>, PartitionError> {
    if s0 == 0 {
        return Err(PartitionError::ZeroS0);
    }
    if q == 0 {
        return Err(PartitionError::ZeroQ);
    }
    if s0 > cap {
        return Err(PartitionError::S0OverCap { s0, cap });
    }
    let mut out = vec![s0];
    if q == 1 {
        return Ok(out);
    }
    while let Some(next) = out.last().unwrap().checked_mul(q).filter(|&n| n <= cap) {
        out.push(next);
    }
    Ok(out)
}

/// Cuts an object of `size` bytes. Objects smaller than s0 are all remainder.
pub fn partition(size: u64, s0: u64, q: u64, cap: u64) -> Result<Partition, PartitionError> {
    let sizes = sizes(s0, q, cap)?;
    let mut left = size;
    let mut count = vec![0u64; sizes.len()];
    // Pass 1: one chunk of every size, ascending, while it fits.
    let mut reached = 0;
    for (i, &s) in sizes.iter().enumerate() {
        if left < s {
            break;
        }
        count[i] = 1;
        left -= s;
        reached = i + 1;
    }
    // At the cap: as many of the largest size as fit.
    if reached == sizes.len() {
        let top = *sizes.last().unwrap();
        count[reached - 1] += left / top;
        left %= top;
    }
    // Pass 2: greedy, largest size first.
    for (i, &s) in sizes.iter().enumerate().rev() {
        count[i] += left / s;
        left %= s;
    }
    let chunks = sizes.iter().zip(&count).flat_map(|(&s, &n)| std::iter::repeat_n(s, n as usize)).collect();
    Ok(Partition { remainder: left, chunks })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    fn mib(p: &Partition) -> (f64, Vec<u64>) {
        (p.remainder as f64 / MIB as f64, p.chunks.iter().map(|c| c / MIB).collect())
    }

    /// The paper's worked examples (section 4.2-4.3), s0 = 4 MiB, q = 2.
    #[test]
    fn the_papers_examples() {
        let p = partition(73 * MIB + MIB / 2, 4 * MIB, 2, DEFAULT_MAX_CHUNK).unwrap();
        assert_eq!(mib(&p), (1.5, vec![4, 4, 8, 8, 16, 32]));
        let p = partition(32 * MIB, 4 * MIB, 2, DEFAULT_MAX_CHUNK).unwrap();
        assert_eq!(mib(&p), (0.0, vec![4, 4, 8, 16]));
        let p = partition(20 * MIB, 4 * MIB, 2, DEFAULT_MAX_CHUNK).unwrap();
        assert_eq!(mib(&p), (0.0, vec![4, 8, 8]));
    }

    #[test]
    fn a_4_gib_object_hits_the_cap() {
        let p = partition(4096 * MIB, 4 * MIB, 2, DEFAULT_MAX_CHUNK).unwrap();
        let mut want = vec![4, 4, 8, 16, 32, 64, 128];
        want.extend(std::iter::repeat_n(256, 15));
        assert_eq!(mib(&p), (0.0, want));
    }

    #[test]
    fn small_objects_are_all_remainder_and_q1_is_fixed_chunks() {
        assert_eq!(partition(3 * MIB, 4 * MIB, 2, DEFAULT_MAX_CHUNK).unwrap(), Partition { remainder: 3 * MIB, chunks: vec![] });
        assert_eq!(partition(0, 4 * MIB, 2, DEFAULT_MAX_CHUNK).unwrap().chunks, Vec::<u64>::new());
        let p = partition(13 * MIB, 4 * MIB, 1, DEFAULT_MAX_CHUNK).unwrap();
        assert_eq!(mib(&p), (1.0, vec![4, 4, 4]));
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert_eq!(partition(1, 0, 2, DEFAULT_MAX_CHUNK), Err(PartitionError::ZeroS0));
        assert_eq!(partition(1, 1, 0, DEFAULT_MAX_CHUNK), Err(PartitionError::ZeroQ));
        assert!(matches!(partition(1, 512 * MIB, 2, DEFAULT_MAX_CHUNK), Err(PartitionError::S0OverCap { .. })));
        // A q so large that the next size overflows u64 stops at the cap, not in a panic.
        assert_eq!(partition(u64::MAX, 1 << 40, 1 << 40, u64::MAX).unwrap().chunks[0], 1 << 40);
    }

    proptest! {
        /// Whatever the inputs: the pieces add up to the object, the remainder is below s0,
        /// chunks ascend, each is s0 q^i within the cap, adjacent sizes differ by at most q
        /// (no gaps), and every size below the largest one used appears.
        #[test]
        fn partitions_are_exact_and_gapless(size in 0u64..(1 << 34), s0_exp in 10u32..24, q in 1u64..5) {
            // q = 1 makes size/s0 chunks: keep those few enough to check quickly.
            let s0 = if q == 1 { 1u64 << (s0_exp + 10).min(28) } else { 1u64 << s0_exp };
            let p = partition(size, s0, q, DEFAULT_MAX_CHUNK).unwrap();
            prop_assert_eq!(p.size(), size);
            prop_assert!(p.remainder < s0);
            let allowed = sizes(s0, q, DEFAULT_MAX_CHUNK).unwrap();
            for w in p.chunks.windows(2) {
                prop_assert!(w[0] <= w[1]);
                prop_assert!(w[1] == w[0] || w[1] == w[0] * q);
            }
            for c in &p.chunks {
                prop_assert!(allowed.contains(c));
            }
            if let Some(first) = p.chunks.first() {
                prop_assert_eq!(*first, s0);
            }
            let offs = p.offsets();
            for (i, o) in offs.iter().enumerate() {
                prop_assert_eq!(*o, p.remainder + p.chunks[..i].iter().sum::<u64>());
            }
        }
    }
}
