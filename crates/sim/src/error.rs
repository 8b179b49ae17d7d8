//! Errors of the simulator.

use thiserror::Error;

/// A scenario that cannot be simulated.
#[derive(Debug, Error)]
pub enum SimError {
    #[error("bad scenario: {0}")]
    BadScenario(String),
    #[error("the simulation stalled at t = {time:.3} s with {jobs_left} repairs unfinished (a link with no capacity left?)")]
    Stalled { time: f64, jobs_left: usize },
    #[error(transparent)]
    Code(#[from] kintsugi_codes::CodeError),
    #[error(transparent)]
    Plan(#[from] kintsugi_plan::PlanError),
}

/// Result alias of the simulator.
pub type Result<T> = std::result::Result<T, SimError>;
