//! What a repair is asked to run with: a method and a scheduler (either `auto`), and which
//! repairs RepairBoost's timeslots gate. Chosen by the configuration or by a request, read by
//! the planners.

use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Pick, RepairGraph, Shape};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a repair run asked for: a method and a scheduler, either of them `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairAsk {
    pub method: Pick<Shape>,
    pub scheduler: Pick<Scheduler>,
}

impl RepairAsk {
    pub fn fixed(method: Shape, scheduler: Scheduler) -> Self {
        RepairAsk { method: Pick::Fixed(method), scheduler: Pick::Fixed(scheduler) }
    }

    pub fn is_auto(&self) -> bool {
        self.method.is_auto() || self.scheduler.is_auto()
    }

    /// The method a chunk gets before `auto` has chosen (what a pending record carries).
    pub(crate) fn method_or_ecpipe(&self) -> Shape {
        self.method.fixed().unwrap_or(Shape::Ecpipe)
    }
}

impl fmt::Display for RepairAsk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.method, self.scheduler)
    }
}

/// Which repairs the nodes gate by RepairBoost's timeslots. The timeslots model whole
/// chunks moved store-and-forward (one per node and slot); a pipelined graph's slot would
/// wait for a whole chain, which measured slower on the testbed and in the simulator for
/// CR and ECPipe (REPRODUCTION.md), so by default only store-and-forward graphs (PPR) are
/// gated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeslotGating {
    /// Every transfer, as the paper and the simulator do.
    All,
    #[default]
    StoreAndForward,
    /// None: timeslots only order when repairs start.
    None,
}

impl TimeslotGating {
    pub fn gates(self, g: &RepairGraph) -> bool {
        match self {
            TimeslotGating::All => true,
            TimeslotGating::StoreAndForward => !g.pipelined,
            TimeslotGating::None => false,
        }
    }
}

impl std::str::FromStr for TimeslotGating {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(TimeslotGating::All),
            "store-and-forward" => Ok(TimeslotGating::StoreAndForward),
            "none" => Ok(TimeslotGating::None),
            _ => Err(format!("'{s}' is not a timeslot gating (all, store-and-forward, none)")),
        }
    }
}

impl std::fmt::Display for TimeslotGating {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeslotGating::All => "all",
            TimeslotGating::StoreAndForward => "store-and-forward",
            TimeslotGating::None => "none",
        })
    }
}
