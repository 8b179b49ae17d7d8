//! A flow-level discrete-event simulator that runs the very repair graphs the planners
//! produce, at thousand-node scale.
//!
//! ```
//! use kintsugi_sim::{engine, scenario::{closed_form, Single}};
//! use kintsugi_plan::Shape;
//! let s = Single { code: "rs:6,3".parse().unwrap(), method: Shape::Ecpipe, link: 125e6, chunk: 64 << 20, slice: 1 << 20, lost: 0 };
//! let (net, jobs) = s.build().unwrap();
//! let r = engine::run(&net, &jobs, &Default::default()).unwrap();
//! let want = closed_form(Shape::Ecpipe, 6, 64 << 20, 1 << 20, 125e6);
//! assert!((r.makespan / want - 1.0).abs() < 0.02);
//! ```

pub mod auto;
pub mod auto_follow;
pub mod auto_study;
pub mod chameleon_phases;
pub mod engine;
pub mod error;
pub mod maxmin;
pub mod network;
pub mod network_file;
pub mod requests;
pub mod scenario;
pub mod sharing;
pub mod under_load;
pub mod utilization;
pub mod zipf;

pub use engine::{run, run_with_progress, Admission, Job, Model, SimOptions, SimResult};
pub use error::{Result, SimError};
pub use network::{Direction, Foreground, Network, NodeSpec};
