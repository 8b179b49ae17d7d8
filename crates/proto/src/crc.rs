//! CRC-32C (Castagnoli), the checksum of every chunk block, object and stored record.
//!
//! One place computes it, with `crc-fast` (already in the build through `s3s`): it folds with
//! carry-less multiplies beside the CRC32 instruction, 0.013 ns a byte at 64 KiB on an
//! AVX-512 Xeon against the `crc32c` crate's 0.055, and 0.038 on its SSE path (the path an
//! AVX2-only CPU takes). Every node verifies each block it reads and checksums each it
//! writes, so the old CRC was 6-11% of a repair source's, relay's and sink's CPU
//! (`perf record` over `kintsugi bench relay --protections open`).

use crc_fast::{CrcAlgorithm, Digest};

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// CRC-32C of `a ‖ data`, given `crc` = CRC-32C of `a`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    // The register is the finished CRC with its final inversion undone.
    let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

/// CRC-32C of `a ‖ b`, given `crc_a`, `crc_b` and the length of `b`.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    crc_fast::checksum_combine(CrcAlgorithm::Crc32Iscsi, u64::from(crc_a), u64::from(crc_b), len_b) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The `crc32c` crate is the oracle: an independent implementation of the same polynomial.
    #[test]
    fn matches_an_independent_crc32c_at_every_length_and_split() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283, "the catalogue's check value");
        let mut rng = rand::rngs::StdRng::seed_from_u64(41);
        let mut data = vec![0u8; 200_000];
        rng.fill(&mut data[..]);
        let lens = (0..300).chain([511, 4096, 4097, 65_535, 65_536, 65_537, 131_072, 199_999]);
        for len in lens {
            let d = &data[..len];
            let want = crc32c::crc32c(d);
            assert_eq!(crc32c(d), want, "len {len}");
            let cut = rng.random_range(0..=len);
            let (a, b) = d.split_at(cut);
            assert_eq!(crc32c_append(crc32c(a), b), want, "len {len} cut {cut}");
            assert_eq!(crc32c_combine(crc32c(a), crc32c(b), b.len() as u64), want, "len {len} cut {cut}");
        }
        // An unaligned start takes the vector paths' head handling.
        for off in 1..64 {
            assert_eq!(crc32c(&data[off..off + 70_000]), crc32c::crc32c(&data[off..off + 70_000]), "offset {off}");
        }
    }
}
