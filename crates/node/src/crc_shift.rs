//! The CRC-32C of a concatenation from its parts' CRCs, for parts of one fixed length: a
//! chunk's whole CRC from its blocks' CRCs, so a writer passes over its bytes once, not once
//! for the blocks and again for the chunk (a pass was 0.11 ns a byte on a 2-core Xeon with
//! the instruction-only CRC, a tenth of a repair sink's CPU; see `kintsugi_proto::crc`).
//!
//! CRC(A ‖ B) = Z(CRC(A)) ^ CRC(B), where Z appends len(B) zero bytes to a CRC register: a
//! linear map over GF(2), so a 32 x 32 bit matrix (as zlib's crc32_combine). The `crc32c`
//! crate's `crc32c_combine` builds Z again on every call (0.7 ns a byte for 64 KiB parts);
//! [`Shift`] builds it once per length ([`shift_for`] keeps the few a store uses) and applies
//! it in 32 XORs at most. A part of another length (a chunk's last, short block) is appended
//! by [`append_any`], which runs the hardware CRC over zeros instead.

use std::sync::{Arc, Mutex};

/// A 32 x 32 matrix over GF(2): column `i` is the image of bit `i`.
type Matrix = [u32; 32];

/// The CRC-32C polynomial, bit-reversed (as the register shifts right).
const POLY: u32 = 0x82F6_3B78;

fn times(m: &Matrix, mut v: u32) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while v != 0 {
        if v & 1 == 1 {
            sum ^= m[i];
        }
        v >>= 1;
        i += 1;
    }
    sum
}

/// `a` after `b`.
fn compose(a: &Matrix, b: &Matrix) -> Matrix {
    std::array::from_fn(|i| times(a, b[i]))
}

/// Appending `len` zero bytes to a CRC register, as a matrix.
fn zeros(len: u64) -> Matrix {
    // One zero bit: shift right, folding the polynomial in when bit 0 falls out.
    let mut op: Matrix = std::array::from_fn(|i| if i == 0 { POLY } else { 1 << (i - 1) });
    for _ in 0..3 {
        op = compose(&op, &op);
    }
    // `op` is now one zero byte; square it through len's bits.
    let mut out: Matrix = std::array::from_fn(|i| 1 << i);
    let mut len = len;
    while len != 0 {
        if len & 1 == 1 {
            out = compose(&op, &out);
        }
        op = compose(&op, &op);
        len >>= 1;
    }
    out
}

/// Combines CRCs across parts of `len` bytes each.
pub(crate) struct Shift {
    len: u64,
    zeros: Matrix,
}

impl Shift {
    pub(crate) fn new(len: u64) -> Self {
        Shift { len, zeros: zeros(len) }
    }

    /// The CRC of A ‖ B from `a` = CRC(A) and `b` = CRC(B), B of `len` bytes.
    pub(crate) fn append(&self, a: u32, b: u32) -> u32 {
        times(&self.zeros, a) ^ b
    }
}

/// Lengths whose shifts [`shift_for`] keeps: a store's block sizes are a few (64 KiB, and the
/// sub-chunk tilings of the codes in use).
const KEPT: usize = 16;

/// The shift for parts of `len` bytes, built once per length while at most [`KEPT`] are kept.
pub(crate) fn shift_for(len: u64) -> Arc<Shift> {
    static KEEP: Mutex<Vec<Arc<Shift>>> = Mutex::new(Vec::new());
    if let Some(s) = KEEP.lock().expect("shift cache lock").iter().find(|s| s.len == len) {
        return s.clone();
    }
    // Built outside the lock: about 50 µs.
    let s = Arc::new(Shift::new(len));
    let mut keep = KEEP.lock().expect("shift cache lock");
    if keep.len() >= KEPT {
        keep.remove(0);
    }
    keep.push(s.clone());
    s
}

/// The CRC of A ‖ B from `a` = CRC(A) and `b` = CRC(B), B of any `len` bytes: Z(a) is the
/// CRC of A followed by `len` zero bytes, less that of `len` zeros alone (the CRC's pre- and
/// post-inversion cancel). Two hardware passes over `len` zeros.
pub(crate) fn append_any(a: u32, b: u32, len: u64) -> u32 {
    static ZEROS: [u8; 4096] = [0; 4096];
    let (mut shifted, mut zeros, mut left) = (a, 0, len);
    while left > 0 {
        let n = left.min(ZEROS.len() as u64) as usize;
        shifted = kintsugi_proto::crc::crc32c_append(shifted, &ZEROS[..n]);
        zeros = kintsugi_proto::crc::crc32c_append(zeros, &ZEROS[..n]);
        left -= n as u64;
    }
    shifted ^ zeros ^ b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        (0..n as u32).map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 11) as u8).collect()
    }

    /// Against the crate's CRC of the concatenation, computed over the bytes (the oracle),
    /// for part lengths of one byte, odd ones, powers of two and a chunk's 64 KiB blocks.
    #[test]
    fn appending_a_part_gives_the_concatenations_crc() {
        for len in [1usize, 3, 7, 8, 100, 4096, 4099, 12_288, 65_536] {
            let shift = Shift::new(len as u64);
            assert_eq!(shift.len, len as u64);
            let mut whole = Vec::new();
            let mut crc = 0;
            for part in 0..5 {
                let b = bytes(len, part * 977 + len as u32);
                crc = shift.append(crc, kintsugi_proto::crc::crc32c(&b));
                whole.extend_from_slice(&b);
                assert_eq!(crc, kintsugi_proto::crc::crc32c(&whole), "{len}-byte parts, {} of them", part + 1);
            }
        }
    }

    #[test]
    fn it_agrees_with_the_crates_combine() {
        for (a, b, len) in [(0u32, 0u32, 1u64), (0xdead_beef, 0x1234_5678, 65_536), (u32::MAX, 7, 1_000_003)] {
            assert_eq!(Shift::new(len).append(a, b), crc32c::crc32c_combine(a, b, len as usize), "{a:x} {b:x} {len}");
        }
    }

    #[test]
    fn no_zeros_is_the_identity() {
        assert_eq!(Shift::new(0).append(0xabcd_ef01, 0), 0xabcd_ef01);
        assert_eq!(append_any(0xabcd_ef01, 0, 0), 0xabcd_ef01);
    }

    #[test]
    fn a_part_of_any_length_appends_by_zeros() {
        for (len, seed) in [(1usize, 1u32), (5, 2), (4095, 3), (4096, 4), (4097, 5), (65_535, 6)] {
            let (a, b) = (bytes(3001, seed), bytes(len, seed + 100));
            let whole = [a.as_slice(), b.as_slice()].concat();
            assert_eq!(
                append_any(kintsugi_proto::crc::crc32c(&a), kintsugi_proto::crc::crc32c(&b), len as u64),
                kintsugi_proto::crc::crc32c(&whole),
                "{len}"
            );
        }
    }

    #[test]
    fn shifts_are_kept_per_length() {
        let (a, b) = (shift_for(12_288), shift_for(12_288));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(shift_for(4099).len, 4099);
        // More lengths than are kept: still the right shift for each.
        for len in 1..=(KEPT as u64 + 3) {
            assert_eq!(shift_for(len).append(0x1234_5678, 9), crc32c::crc32c_combine(0x1234_5678, 9, len as usize));
        }
    }
}
