//! Erasure codes behind one trait: encode, decode any recoverable erasure set, and
//! *repair equations* (which helper ranges, which coefficients) that planners turn into
//! repair graphs.
//!
//! ```
//! use kintsugi_codes::{Code, CodeSpec};
//! let code = "rs:4,2".parse::<CodeSpec>().unwrap().build().unwrap();
//! let data: Vec<Vec<u8>> = (0..4).map(|i| vec![i as u8 + 1; 8]).collect();
//! let mut shards: Vec<Option<Vec<u8>>> = data.iter().cloned().map(Some).chain([None, None]).collect();
//! code.decode(&mut shards).unwrap(); // computes the missing parities
//! shards[0] = None;
//! shards[5] = None;
//! code.decode(&mut shards).unwrap(); // rebuilds data 0 and parity 5
//! assert_eq!(shards[0].as_deref(), Some(&data[0][..]));
//!
//! // Shard 0 from helpers 1, 2, 3 and 4: lost = sum of c_i * helper_i.
//! let eq = code.repair_equation(0, &[1, 2, 3, 4]).unwrap();
//! let helpers: Vec<&[u8]> = eq.helpers().iter().map(|&h| shards[h].as_deref().unwrap()).collect();
//! assert_eq!(eq.rebuild(&helpers).unwrap(), data[0]);
//! ```

pub mod clay;
mod equation;
mod error;
mod linear;
pub mod matrix;
mod spec;

pub use clay::ClayCode;
pub use equation::{apply_term_window, coef_wire, sub_len, HelperTerm, RepairEquation, TermMatrix};
pub use error::{CodeError, Result};
pub use linear::LinearCode;
pub use spec::{CodeSpec, MAX_SHARDS};

use kintsugi_gf::CoefMatrix;
use std::fmt::Debug;
use std::sync::Arc;

/// An erasure code over GF(2^8). Shards 0..k are data, k..n parity.
pub trait Code: Send + Sync + Debug {
    /// The code's name and parameters.
    fn spec(&self) -> CodeSpec;
    /// Data shards per stripe.
    fn k(&self) -> usize;
    /// Shards per stripe.
    fn n(&self) -> usize;
    /// Sub-chunks per chunk: 1 for scalar codes, more for sub-packetized ones.
    fn sub_chunks(&self) -> usize {
        1
    }
    /// Every erasure set of at most this many shards is recoverable.
    fn tolerance(&self) -> usize;

    /// Computes the n-k parity shards from the k data shards (all of one length).
    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()>;

    /// A plan to compute the `erased` shards from some of the `available` ones.
    fn decoder(&self, erased: &[usize], available: &[usize]) -> Result<Decoder>;

    /// The equation that rebuilds shard `lost` from exactly the given helpers.
    fn repair_equation(&self, lost: usize, helpers: &[usize]) -> Result<RepairEquation>;

    /// The helpers this code would read by default to rebuild `lost` (the local group for
    /// LRC; the first k available for RS).
    fn choose_helpers(&self, lost: usize, available: &[usize]) -> Result<Vec<usize>>;

    /// Fills every `None` shard in place from the present ones.
    fn decode(&self, shards: &mut [Option<Vec<u8>>]) -> Result<()> {
        if shards.len() != self.n() {
            return Err(CodeError::WrongCount { what: "shards", expected: self.n(), got: shards.len() });
        }
        let present: Vec<usize> = (0..shards.len()).filter(|&i| shards[i].is_some()).collect();
        let erased: Vec<usize> = (0..shards.len()).filter(|&i| shards[i].is_none()).collect();
        if erased.is_empty() {
            return Ok(());
        }
        let len = present.first().map_or(0, |&i| shards[i].as_ref().map_or(0, |s| s.len()));
        if let Some(&bad) = present.iter().find(|&&i| shards[i].as_ref().map_or(0, |s| s.len()) != len) {
            return Err(CodeError::UnequalLengths(len, shards[bad].as_ref().map_or(0, |s| s.len())));
        }
        let dec = self.decoder(&erased, &present)?;
        let mut outs: Vec<Vec<u8>> = vec![vec![0u8; len]; dec.targets.len()];
        {
            let srcs: Vec<&[u8]> = dec.sources.iter().map(|&i| shards[i].as_deref().expect("present")).collect();
            let mut dsts: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
            dec.apply(&srcs, &mut dsts)?;
        }
        for (t, out) in dec.targets.iter().zip(outs) {
            shards[*t] = Some(out);
        }
        Ok(())
    }
}

/// Computes `targets` from `sources` (see [`Code::decoder`]): one matrix product for
/// scalar codes, a layered plane-by-plane decode for Clay.
#[derive(Clone, Debug)]
pub struct Decoder {
    /// Shard indices read, in source order.
    pub sources: Vec<usize>,
    /// Shard indices produced, in output order.
    pub targets: Vec<usize>,
    kind: DecoderKind,
}

#[derive(Clone, Debug)]
enum DecoderKind {
    Matrix(CoefMatrix),
    Layered(Arc<clay::ClayDecoder>),
}

impl Decoder {
    /// A decoder that computes `targets x sources` coefficients times the sources.
    pub fn from_matrix(sources: Vec<usize>, targets: Vec<usize>, matrix: CoefMatrix) -> Self {
        Decoder { sources, targets, kind: DecoderKind::Matrix(matrix) }
    }

    fn layered(sources: Vec<usize>, targets: Vec<usize>, dec: Arc<clay::ClayDecoder>) -> Self {
        Decoder { sources, targets, kind: DecoderKind::Layered(dec) }
    }

    /// The coefficient matrix, when the decode is one matrix product.
    pub fn matrix(&self) -> Option<&CoefMatrix> {
        match &self.kind {
            DecoderKind::Matrix(m) => Some(m),
            DecoderKind::Layered(_) => None,
        }
    }

    /// Sub-chunks per chunk: regions given to [`Decoder::apply`] must be whole chunks, or
    /// the same byte window of each of this many sub-chunks laid back to back.
    pub fn sub_chunks(&self) -> usize {
        match &self.kind {
            DecoderKind::Matrix(_) => 1,
            DecoderKind::Layered(d) => d.sub_chunks(),
        }
    }

    /// Fills `dsts` (one per target) from `srcs` (one per source), all equally long.
    pub fn apply(&self, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) -> Result<()> {
        if srcs.len() != self.sources.len() {
            return Err(CodeError::WrongCount { what: "source regions", expected: self.sources.len(), got: srcs.len() });
        }
        if dsts.len() != self.targets.len() {
            return Err(CodeError::WrongCount { what: "target regions", expected: self.targets.len(), got: dsts.len() });
        }
        let len = srcs.first().map(|s| s.len()).or(dsts.first().map(|d| d.len())).unwrap_or(0);
        if let Some(l) = srcs.iter().map(|s| s.len()).chain(dsts.iter().map(|d| d.len())).find(|&l| l != len) {
            return Err(CodeError::UnequalLengths(len, l));
        }
        match &self.kind {
            DecoderKind::Matrix(m) => {
                kintsugi_gf::apply(m, srcs, dsts);
                Ok(())
            }
            DecoderKind::Layered(d) => d.apply(srcs, dsts),
        }
    }
}
