//! Errors of the plan layer.

use thiserror::Error;

/// A plan that cannot be built or run.
#[derive(Debug, Error)]
pub enum PlanError {
    #[error("unknown repair method '{0}' (expected one of cr, ppr, ecpipe, ecpipe-cyclic)")]
    UnknownMethod(String),
    #[error("'{0}' schedules full-node repair (repair --scheduler {0}); a per-chunk method is one of cr, ppr, ecpipe, ecpipe-cyclic")]
    SchedulerNotMethod(String),
    #[error("invalid repair graph: {0}")]
    Invalid(String),
    #[error(transparent)]
    Code(#[from] kintsugi_codes::CodeError),
    #[error("helper chunk for term {term} is {got} bytes, expected {expected}")]
    ChunkLength { term: usize, expected: usize, got: usize },
}

/// Result alias of the plan layer.
pub type Result<T> = std::result::Result<T, PlanError>;
