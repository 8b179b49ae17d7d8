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
    /// Row-major `sub_chunks x read_count()` coefficients.
    pub coefs: Vec<u8>,
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
