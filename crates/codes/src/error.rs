//! Errors of the codes layer: each says what was wrong and with which values.

use thiserror::Error;

/// Something a caller asked of a code that cannot be done.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CodeError {
    #[error("invalid code parameters: {0}")]
    InvalidParams(String),
    #[error("cannot parse code '{spec}': {reason} (expected e.g. rs:10,4, lrc:6,2,2 or clay:10,4,13)")]
    BadSpec { spec: String, reason: String },
    #[error("shard index {index} is out of range for a code with {n} shards")]
    BadIndex { index: usize, n: usize },
    #[error("shards have unequal lengths ({0} and {1} bytes)")]
    UnequalLengths(usize, usize),
    #[error("expected {expected} {what}, got {got}")]
    WrongCount { what: &'static str, expected: usize, got: usize },
    #[error("cannot recover shards {erased:?}: the {available} available shards do not determine them (the code tolerates {tolerance} arbitrary erasures)")]
    Unrecoverable { erased: Vec<usize>, available: usize, tolerance: usize },
    #[error("helpers {helpers:?} cannot rebuild shard {lost}")]
    HelpersInsufficient { lost: usize, helpers: Vec<usize> },
    #[error("coefficients: {0}")]
    BadCoefficients(String),
    #[error("chunk length {len} is not a multiple of the code's {sub_chunks} sub-chunks")]
    BadChunkLength { len: usize, sub_chunks: usize },
}

/// Result alias of the codes layer.
pub type Result<T> = std::result::Result<T, CodeError>;
