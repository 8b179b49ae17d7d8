//! Repair plans: a repair is a graph of linear combinations (DESIGN.md). Planners build
//! graphs from (lost chunk, helpers, destination); executors run them. This crate has the
//! graph type, one builder per method in [`shapes`], the full-node schedulers in
//! [`schedule`], traffic and timestep accounting, and the in-memory reference executor.
//!
//! ```
//! use kintsugi_codes::CodeSpec;
//! use kintsugi_plan::{shapes, RepairTask, Shape};
//! let code = "rs:6,3".parse::<CodeSpec>().unwrap().build().unwrap();
//! let eq = code.repair_equation(0, &[1, 2, 3, 4, 5, 6]).unwrap();
//! let task = RepairTask { equation: eq, helper_nodes: vec![11, 12, 13, 14, 15, 16], destination: 99 };
//! let g = shapes::build(Shape::Ppr, &task).unwrap();
//! assert_eq!(g.depth_timesteps(), 3.0); // ceil(log2(6 + 1))
//! assert_eq!(g.traffic().max_download(), 2.0);
//! ```

pub mod error;
pub mod graph;
pub mod memory_executor;
pub mod pick;
pub mod schedule;
pub mod shapes;

pub use error::{PlanError, Result};
pub use graph::{NodeId, RepairGraph, RepairTask, Shape, SlotRule, Traffic, Vertex, VertexId, ALL_SHAPES};
pub use pick::Pick;
