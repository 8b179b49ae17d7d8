//! Repair equations: which byte ranges each helper reads and with which coefficients, so
//! that lost = sum over helpers of (coefficient matrix x helper ranges).
//!
//! A chunk is cut into `sub_chunks` equal sub-chunks (1 for scalar codes such as RS and
//! LRC; more for sub-packetized codes such as Clay). A helper term reads some sub-chunks
//! and maps them, by a `sub_chunks x reads` matrix, onto every sub-chunk of the lost chunk.
//! Because everything is linear, any byte window [a, b) of every sub-chunk can be repaired
//! on its own: this is what lets repair graphs stream slices.

use crate::error::{CodeError, Result};
use kintsugi_gf::CoefMatrix;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// One helper's contribution to a lost chunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperTerm {
    /// Shard index (position in the stripe) of the helper.
    pub helper: usize,
    /// Sub-chunk index ranges the helper reads, in order.
    pub reads: Vec<Range<usize>>,
    /// Row-major `sub_chunks x read_count()` coefficients. On the wire, a compact string
    /// (see [`coef_wire`]): a Clay term's matrix is mostly zeros, and every node of a
    /// repair graph receives every term.
    #[serde(with = "coef_wire")]
    pub coefs: Vec<u8>,
}

/// Coefficient matrices on the wire: `x` + hex of every byte, or, when shorter, `z` + the
/// length + `:` + hex of (LEB128 gap from the previous non-zero entry, value) pairs. As a
/// JSON array of numbers, a Clay(10,4,13) repair equation took about 650 KB, sent to each of
/// the 14 nodes of its graph for every repaired chunk; sparse, it takes a few KB. Arrays of
/// numbers are still read.
pub mod coef_wire {
    use crate::error::CodeError;
    use serde::de::{self, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    fn bad(why: impl Into<String>) -> CodeError {
        CodeError::BadCoefficients(why.into())
    }

    /// The most coefficients one term may declare (a 2048 x 2048 matrix), so a short
    /// string cannot make a reader allocate without bound.
    pub const MAX_COEFS: usize = 1 << 22;

    /// The coefficients packed: `(true, pairs)` of (LEB128 gap from the previous non-zero
    /// entry, value) when that is shorter, else `(false, the bytes as they are)`.
    pub fn pack(coefs: &[u8]) -> (bool, Vec<u8>) {
        let mut sparse = Vec::new();
        let mut last = 0usize;
        for (i, &c) in coefs.iter().enumerate().filter(|(_, &c)| c != 0) {
            let mut gap = i - last;
            last = i;
            loop {
                let b = (gap & 0x7f) as u8;
                gap >>= 7;
                if gap == 0 {
                    sparse.push(b);
                    break;
                }
                sparse.push(b | 0x80);
            }
            sparse.push(c);
            if sparse.len() >= coefs.len() {
                break;
            }
        }
        if sparse.len() < coefs.len() {
            (true, sparse)
        } else {
            (false, coefs.to_vec())
        }
    }

    pub fn encode(coefs: &[u8]) -> String {
        match pack(coefs) {
            (true, sparse) => format!("z{}:{}", coefs.len(), hex::encode(sparse)),
            (false, dense) => format!("x{}", hex::encode(dense)),
        }
    }

    /// `len` coefficients from what [`pack`] made.
    pub fn unpack(sparse: bool, len: usize, bytes: &[u8]) -> Result<Vec<u8>, CodeError> {
        if len > MAX_COEFS {
            return Err(bad(format!("{len} is more than {MAX_COEFS}")));
        }
        if !sparse {
            if bytes.len() != len {
                return Err(bad(format!("{} bytes for {len}", bytes.len())));
            }
            return Ok(bytes.to_vec());
        }
        from_pairs(len, bytes)
    }

    pub fn decode(s: &str) -> Result<Vec<u8>, CodeError> {
        if let Some(h) = s.strip_prefix('x') {
            if h.len() / 2 > MAX_COEFS {
                return Err(bad("too many coefficients"));
            }
            return hex::decode(h).map_err(|e| bad(format!("{e}")));
        }
        let (len, h) = s.strip_prefix('z').and_then(|r| r.split_once(':')).ok_or_else(|| bad("neither x nor z form"))?;
        let len: usize = len.parse().map_err(|_| bad("bad length"))?;
        if len > MAX_COEFS {
            return Err(bad(format!("{len} is more than {MAX_COEFS}")));
        }
        let pairs = hex::decode(h).map_err(|e| bad(format!("{e}")))?;
        from_pairs(len, &pairs)
    }

    fn from_pairs(len: usize, pairs: &[u8]) -> Result<Vec<u8>, CodeError> {
        let mut out = vec![0u8; len];
        let (mut at, mut i, mut first) = (0usize, 0usize, true);
        while i < pairs.len() {
            let mut gap = 0usize;
            let mut shift = 0;
            loop {
                let b = *pairs.get(i).ok_or_else(|| bad("truncated gap"))?;
                i += 1;
                gap |= ((b & 0x7f) as usize).checked_shl(shift).filter(|_| shift < 28).ok_or_else(|| bad("gap too large"))?;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            if !first && gap == 0 {
                return Err(bad("repeated index"));
            }
            first = false;
            at = at.checked_add(gap).filter(|&a| a < len).ok_or_else(|| bad("index past the length"))?;
            let v = *pairs.get(i).ok_or_else(|| bad("truncated value"))?;
            i += 1;
            out[at] = v;
        }
        Ok(out)
    }

    pub fn serialize<S: Serializer>(coefs: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(coefs))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a coefficient string or an array of bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Vec<u8>, E> {
                decode(s).map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    if out.len() == MAX_COEFS {
                        return Err(de::Error::custom("too many coefficients"));
                    }
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

impl HelperTerm {
    /// A scalar-code term: read the whole chunk, multiply by `c`.
    pub fn scalar(helper: usize, c: u8) -> Self {
        HelperTerm { helper, reads: std::iter::once(0..1).collect(), coefs: vec![c] }
    }

    /// Number of sub-chunks read.
    pub fn read_count(&self) -> usize {
        self.reads.iter().map(|r| r.len()).sum()
    }

    /// The coefficient when the term is one scalar over one whole chunk.
    pub fn as_scalar(&self) -> Option<u8> {
        (self.coefs.len() == 1).then(|| self.coefs[0])
    }

    /// Byte ranges read from a chunk of `chunk_len` bytes.
    pub fn byte_ranges(&self, sub_chunks: usize, chunk_len: usize) -> Result<Vec<Range<usize>>> {
        let sub = sub_len(sub_chunks, chunk_len)?;
        Ok(self.reads.iter().map(|r| r.start * sub..r.end * sub).collect())
    }

    /// The coefficients ready for the region kernels: dense, or row by row over the
    /// non-zero entries when most are zero (a Clay term has a few per row of 64 or more).
    pub fn matrix(&self, sub_chunks: usize) -> TermMatrix {
        let cols = self.read_count();
        let nonzero = self.coefs.iter().filter(|&&c| c != 0).count();
        if sub_chunks == 1 || nonzero * 4 >= self.coefs.len() {
            return TermMatrix::Dense(CoefMatrix::new(sub_chunks, cols, &self.coefs));
        }
        let rows = self
            .coefs
            .chunks(cols.max(1))
            .map(|row| {
                let idx: Vec<usize> = (0..row.len()).filter(|&c| row[c] != 0).collect();
                let vals: Vec<u8> = idx.iter().map(|&c| row[c]).collect();
                (CoefMatrix::new(1, idx.len(), &vals), idx)
            })
            .collect();
        TermMatrix::Sparse(rows)
    }
}

/// A term's coefficient matrix prepared for the region kernels.
#[derive(Clone, Debug)]
pub enum TermMatrix {
    /// Every entry, in groups of rows that read each source once.
    Dense(CoefMatrix),
    /// Per row, the non-zero entries and the sources they multiply.
    Sparse(Vec<(CoefMatrix, Vec<usize>)>),
}

impl TermMatrix {
    /// dsts[r] = sum_c m[r][c] * srcs[c]: what [`TermMatrix::apply_add`] adds to zeros,
    /// without a pass to zero them first (a source's unit is its term alone).
    pub fn apply(&self, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
        match self {
            TermMatrix::Dense(m) if !srcs.is_empty() => kintsugi_gf::apply(m, srcs, dsts),
            TermMatrix::Dense(_) => dsts.iter_mut().for_each(|d| d.fill(0)),
            TermMatrix::Sparse(rows) => {
                for ((m, idx), dst) in rows.iter().zip(dsts.iter_mut()) {
                    if idx.is_empty() {
                        dst.fill(0);
                    } else {
                        let picked: Vec<&[u8]> = idx.iter().map(|&c| srcs[c]).collect();
                        kintsugi_gf::apply(m, &picked, &mut [&mut **dst]);
                    }
                }
            }
        }
    }

    /// dsts[r] ^= sum_c m[r][c] * srcs[c].
    pub fn apply_add(&self, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
        match self {
            TermMatrix::Dense(m) => kintsugi_gf::apply_add(m, srcs, dsts),
            TermMatrix::Sparse(rows) => {
                for ((m, idx), dst) in rows.iter().zip(dsts.iter_mut()) {
                    if !idx.is_empty() {
                        let picked: Vec<&[u8]> = idx.iter().map(|&c| srcs[c]).collect();
                        kintsugi_gf::apply_add(m, &picked, &mut [&mut **dst]);
                    }
                }
            }
        }
    }
}

/// How to rebuild one lost chunk from a set of helpers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairEquation {
    /// Shard index of the lost chunk.
    pub lost: usize,
    /// Sub-chunks per chunk (1 for scalar codes).
    pub sub_chunks: usize,
    /// One term per helper actually needed (terms with all-zero coefficients are dropped).
    pub terms: Vec<HelperTerm>,
    /// Set when the terms are this code's structured repair (Clay's MSR repair): a vertex
    /// that holds every term's raw reads may run the code's own repair (pairwise coupling
    /// and one MDS decode per plane) instead of multiplying by each term's matrix. It must
    /// check first that the terms are that code's ([`crate::ClayCode`]'s equation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<crate::CodeSpec>,
}

impl RepairEquation {
    /// Shard indices of the helpers, in term order.
    pub fn helpers(&self) -> Vec<usize> {
        self.terms.iter().map(|t| t.helper).collect()
    }

    /// Bytes read from all helpers to rebuild a chunk of `chunk_len` bytes.
    pub fn read_bytes(&self, chunk_len: usize) -> Result<usize> {
        let sub = sub_len(self.sub_chunks, chunk_len)?;
        Ok(self.terms.iter().map(|t| t.read_count() * sub).sum())
    }

    /// Rebuilds the whole lost chunk from whole helper chunks (given in term order).
    /// The reference evaluation; repair graphs compute the same sum in pieces.
    pub fn rebuild(&self, helper_chunks: &[&[u8]]) -> Result<Vec<u8>> {
        if helper_chunks.len() != self.terms.len() {
            return Err(CodeError::WrongCount { what: "helper chunks", expected: self.terms.len(), got: helper_chunks.len() });
        }
        let len = helper_chunks.first().map_or(0, |c| c.len());
        if let Some(c) = helper_chunks.iter().find(|c| c.len() != len) {
            return Err(CodeError::UnequalLengths(len, c.len()));
        }
        let sub = sub_len(self.sub_chunks, len)?;
        let mut out = vec![0u8; len];
        for (term, chunk) in self.terms.iter().zip(helper_chunks) {
            apply_term_window(term, &term.matrix(self.sub_chunks), chunk, sub, 0..sub, &mut out, sub);
        }
        Ok(out)
    }
}

/// Adds one term's contribution for the byte window `window` of every sub-chunk:
/// for each lost sub-chunk s, out[s*out_stride + (window - window.start)] ^= sum_r coef[s][r] * helper[r*sub + window].
///
/// `out` holds `sub_chunks` windows of `window.len()` bytes, `out_stride` apart.
pub fn apply_term_window(
    term: &HelperTerm,
    m: &TermMatrix,
    helper_chunk: &[u8],
    sub: usize,
    window: Range<usize>,
    out: &mut [u8],
    out_stride: usize,
) {
    let w = window.len();
    if w == 0 {
        return;
    }
    let srcs: Vec<&[u8]> =
        term.reads.iter().flat_map(|r| r.clone()).map(|r| &helper_chunk[r * sub + window.start..r * sub + window.end]).collect();
    let mut dsts: Vec<&mut [u8]> = out.chunks_mut(out_stride).map(|c| &mut c[..w]).collect();
    m.apply_add(&srcs, &mut dsts);
}

/// Sub-chunk length, or an error if the chunk does not divide evenly.
pub fn sub_len(sub_chunks: usize, chunk_len: usize) -> Result<usize> {
    if sub_chunks == 0 || !chunk_len.is_multiple_of(sub_chunks) {
        return Err(CodeError::BadChunkLength { len: chunk_len, sub_chunks });
    }
    Ok(chunk_len / sub_chunks)
}

#[cfg(test)]
mod tests {
    use super::coef_wire::{decode, encode, MAX_COEFS};
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any matrix, dense or mostly zeros, comes back as it was.
        #[test]
        fn coefficients_round_trip(len in 0usize..3000, density in 0u32..100, seed in any::<u64>()) {
            let mut x = seed | 1;
            let coefs: Vec<u8> = (0..len).map(|_| {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                if (x % 100) as u32 <= density { (x >> 8) as u8 } else { 0 }
            }).collect();
            let s = encode(&coefs);
            prop_assert_eq!(decode(&s).unwrap(), coefs);
        }
    }

    /// A Clay repair equation shrinks on the wire, reads back equal, and the old array form
    /// still parses.
    #[test]
    fn clay_terms_are_small_on_the_wire() {
        let code = crate::CodeSpec::Clay { k: 10, m: 4, d: 13 }.build().unwrap();
        let helpers: Vec<usize> = (1..14).collect();
        let eq = code.repair_equation(0, &helpers).unwrap();
        let wire = serde_json::to_string(&eq).unwrap();
        let arrays: usize = eq.terms.iter().map(|t| serde_json::to_string(&t.coefs).unwrap().len()).sum();
        assert!(wire.len() * 20 < arrays, "{} bytes on the wire, {arrays} as arrays of numbers", wire.len());
        let back: RepairEquation = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, eq);
        let old = r#"{"helper":3,"reads":[{"start":0,"end":1}],"coefs":[7]}"#;
        let t: HelperTerm = serde_json::from_str(old).unwrap();
        assert_eq!(t.coefs, vec![7]);
    }

    /// `apply` writes each row's sum whatever the rows held, dense and sparse, against the
    /// field's scalar multiply; `apply_add` adds the same sums.
    #[test]
    fn apply_overwrites_with_the_terms_sum() {
        let code = crate::CodeSpec::Clay { k: 4, m: 2, d: 5 }.build().unwrap();
        let clay = code.repair_equation(0, &[1, 2, 3, 4, 5]).unwrap().terms[0].clone();
        let rs = HelperTerm { helper: 1, reads: std::iter::once(0..1).collect(), coefs: vec![0x8e] };
        let zero_row = HelperTerm { helper: 2, reads: std::iter::once(0..2).collect(), coefs: vec![0, 0, 3, 0, 0, 0] };
        for (term, alpha) in [(clay, 8), (rs, 1), (zero_row, 3)] {
            let (cols, n) = (term.read_count(), 37);
            let srcs: Vec<Vec<u8>> = (0..cols).map(|c| (0..n).map(|i| (i * 31 + c * 7 + 1) as u8).collect()).collect();
            let want: Vec<Vec<u8>> = (0..alpha)
                .map(|r| (0..n).map(|i| (0..cols).fold(0, |x, c| x ^ kintsugi_gf::mul(term.coefs[r * cols + c], srcs[c][i]))).collect())
                .collect();
            let m = term.matrix(alpha);
            let refs: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
            let mut out = vec![vec![0xa5u8; n]; alpha];
            m.apply(&refs, &mut out.iter_mut().map(|o| o.as_mut_slice()).collect::<Vec<_>>());
            assert_eq!(out, want, "apply, {alpha} rows");
            let mut added = vec![vec![0xa5u8; n]; alpha];
            m.apply_add(&refs, &mut added.iter_mut().map(|o| o.as_mut_slice()).collect::<Vec<_>>());
            let want_added: Vec<Vec<u8>> = want.iter().map(|r| r.iter().map(|b| b ^ 0xa5).collect()).collect();
            assert_eq!(added, want_added, "apply_add, {alpha} rows");
        }
    }

    #[test]
    fn malformed_coefficients_are_refused() {
        for bad in [
            "q00".to_string(),
            "x0".to_string(),
            format!("z{}:", MAX_COEFS + 1),
            "z4:0401".to_string(),     // index 4 of 4
            "z4:00".to_string(),       // a gap without a value
            "z4:00010002".to_string(), // index 0 twice
            "z4:ffffffffff7f01".to_string(),
            "zz:00".to_string(),
        ] {
            assert!(decode(&bad).is_err(), "{bad}");
        }
        assert_eq!(decode("z4:0105").unwrap(), vec![0, 5, 0, 0]);
    }
}
