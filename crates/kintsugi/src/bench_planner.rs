//! `kintsugi bench planner`: how long the schedulers take to plan. RepairBoost (balancing
//! plus timeslot matching) for many lost chunks on many nodes, and ECPipe's weighted path
//! search (Algorithm 1) for one chunk, against the paper's figures (< 0.9 s, ~1 ms).

use anyhow::{bail, Result};
use clap::Args;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::{self, weighted_path, Cluster, Scheduler};
use kintsugi_plan::Shape;
use kintsugi_sim::scenario::lost_chunks;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct PlannerArgs {
    /// Lost chunks to plan.
    #[arg(long, default_value_t = 1000)]
    pub chunks: usize,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 500)]
    pub nodes: usize,
    /// Code of the stripes.
    #[arg(long, default_value = "rs:10,4")]
    pub code: CodeSpec,
    /// Per-chunk graph shape.
    #[arg(long, default_value = "ppr")]
    pub method: Shape,
    /// Scheduler to time.
    #[arg(long, default_value = "repairboost")]
    pub scheduler: Scheduler,
    /// Runs (median reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    code: String,
    method: String,
    scheduler: String,
    chunks: usize,
    nodes: usize,
    /// Wall seconds to plan every chunk (helpers, destinations, graphs, timeslots).
    plan_seconds: super::bench::Stat,
    timeslots: u32,
    /// Weighted path (ECPipe Algorithm 1) over the code's n-1 helpers choosing k, random
    /// weights: milliseconds per search.
    weighted_path_ms: super::bench::Stat,
    weighted_path_helpers: usize,
    weighted_path_k: usize,
}

pub fn run(a: PlannerArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let code = a.code.build()?;
    if a.nodes < code.n() + 1 {
        bail!("{} needs {} nodes per stripe plus a destination", a.code, code.n());
    }
    let cluster = Cluster::homogeneous((1..a.nodes as u32).collect());
    let mut plan_s = Vec::new();
    let mut timeslots = 0;
    for run in 0..a.runs {
        let lost = lost_chunks(a.nodes, a.chunks, code.n(), run as u64 + 1);
        let t = Instant::now();
        let plan = schedule::plan(code.as_ref(), a.method, a.scheduler, &lost, &cluster, run as u64)?;
        plan_s.push(t.elapsed().as_secs_f64());
        timeslots = plan.timeslots;
    }
    // Weighted path: n-1 helpers, k chosen, random link weights (1/bandwidth).
    let (helpers, k) = (code.n() - 1, code.k());
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut path_ms = Vec::new();
    for _ in 0..(a.runs * 20) {
        let w: Vec<Vec<f64>> = (0..=helpers).map(|_| (0..=helpers).map(|_| 1.0 / rng.random_range(10.0..1000.0)).collect()).collect();
        let weight = |x: usize, y: usize| w[x][y];
        let hs: Vec<usize> = (0..helpers).collect();
        let t = Instant::now();
        let found = weighted_path::best_path(&hs, helpers, k, &weight);
        path_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(found.is_some(), "enough helpers for a path");
    }
    let r = Report {
        code: a.code.to_string(),
        method: a.method.to_string(),
        scheduler: a.scheduler.to_string(),
        chunks: a.chunks,
        nodes: a.nodes,
        plan_seconds: super::bench::stat(&plan_s),
        timeslots,
        weighted_path_ms: super::bench::stat(&path_ms),
        weighted_path_helpers: helpers,
        weighted_path_k: k,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} plan of {} lost {} chunks ({}) on {} nodes: median {:.3} s (min {:.3}, max {:.3}), {} timeslots",
            r.scheduler, r.chunks, r.code, r.method, r.nodes, r.plan_seconds.median, r.plan_seconds.min, r.plan_seconds.max, r.timeslots
        );
        println!(
            "weighted path, {} of {} helpers: median {:.3} ms (min {:.3}, max {:.3})",
            k, helpers, r.weighted_path_ms.median, r.weighted_path_ms.min, r.weighted_path_ms.max
        );
    }
    Ok(())
}
