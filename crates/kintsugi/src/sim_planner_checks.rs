//! `kintsugi sim geo` (ECPipe's random against weighted path on the EC2 links) and `kintsugi
//! sim balance` (RepairBoost's load-balancing degree of a scheduler's plans): the simulator's
//! two subcommands that check planners rather than run a full-node repair.

use crate::sim_cmd::cpu_seconds;
use crate::units::parse_nonzero_size;
use anyhow::{bail, Context, Result};
use clap::Args;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::{self, lb_degree::lb_degree, Cluster, Scheduler};
use kintsugi_plan::Shape;
use kintsugi_sim::scenario::lost_chunks;
use kintsugi_sim::SimOptions;
use serde::Serialize;

#[derive(Args, Debug)]
pub struct GeoArgs {
    /// Link matrix of ECPipe's Table 1: na or asia.
    #[arg(long, default_value = "na")]
    pub region: String,
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Random paths tried per requestor.
    #[arg(long, default_value_t = 5)]
    pub runs: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct GeoRow {
    /// The node whose shard is read back (and which reads it).
    requestor: usize,
    region: usize,
    random_path_seconds: f64,
    weighted_path_seconds: f64,
    reduction_pct: f64,
}

pub fn geo(a: GeoArgs) -> Result<()> {
    use kintsugi_plan::schedule::weighted_path::best_path;
    use kintsugi_sim::scenario::{Geo, EC2_ASIA, EC2_NA};
    use rand::seq::{IndexedRandom, SliceRandom};
    use rand::SeedableRng;
    let matrix = match a.region.as_str() {
        "na" => EC2_NA,
        "asia" => EC2_ASIA,
        other => bail!("unknown region '{other}' (expected na or asia)"),
    };
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut rows = Vec::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    // One requestor per region, in turn (the paper runs the requestor in each region).
    for region in 0..4 {
        let lost = region * 4;
        let g = Geo { matrix, chunk: a.chunk, slice: a.slice, lost };
        let net = g.network();
        let others: Vec<usize> = (0..Geo::NODES).filter(|&i| i != lost).collect();
        let time = |helpers: &[usize]| -> Result<f64> {
            let job = g.job(helpers)?;
            Ok(kintsugi_sim::engine::run(&net, &[job], &SimOptions::default())?.makespan)
        };
        let mut random = 0.0;
        for _ in 0..a.runs {
            let mut hs: Vec<usize> = others.choose_multiple(&mut rng, 12).copied().collect();
            hs.shuffle(&mut rng);
            random += time(&hs)? / a.runs as f64;
        }
        let weight = |x: usize, y: usize| 1.0 / g.link(x as u32, y as u32);
        let (best, _) = best_path(&others, lost, 12, &weight).context("15 helpers hold a path of 12")?;
        let weighted = time(&best)?;
        rows.push(GeoRow {
            requestor: lost,
            region,
            random_path_seconds: random,
            weighted_path_seconds: weighted,
            reduction_pct: (1.0 - weighted / random) * 100.0,
        });
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("ECPipe on the {} EC2 links (RS(12,4), {} B chunk, {} B slices)", a.region, a.chunk, a.slice);
        println!("{:>9} {:>12} {:>14} {:>10}", "requestor", "random path", "weighted path", "reduction");
        for r in &rows {
            println!("{:>9} {:>11.2}s {:>13.2}s {:>9.1}%", r.requestor, r.random_path_seconds, r.weighted_path_seconds, r.reduction_pct);
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct BalanceArgs {
    /// Nodes in the cluster (node 0 fails).
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Code: rs:K,M or lrc:K,L,M.
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Repair graph shape: cr, ppr, ecpipe or ecpipe-cyclic.
    #[arg(long, default_value = "cr")]
    pub method: Shape,
    /// Scheduler choosing helpers and destinations (ran, lru, repairboost, ...).
    #[arg(long, default_value = "ran")]
    pub selector: Scheduler,
    /// Chunks the failed node held.
    #[arg(long, default_value_t = 100)]
    pub chunks: usize,
    /// Runs, each with its own random placement (seeds 1..=runs).
    #[arg(long, default_value_t = 5)]
    pub runs: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct BalanceReport {
    code: String,
    method: String,
    selector: String,
    nodes: usize,
    chunks: usize,
    /// Per run: max over nodes of upload or download chunks / (total traffic / survivors).
    lb_degree_runs: Vec<f64>,
    lb_degree: f64,
    plan_cpu_seconds: f64,
}

pub fn balance(a: BalanceArgs) -> Result<()> {
    let code = a.code.build()?;
    if a.nodes < code.n() + 1 {
        bail!("{} needs {} nodes per stripe plus a destination outside it, but the cluster has {} nodes", a.code, code.n(), a.nodes);
    }
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let cluster = Cluster::homogeneous((1..a.nodes as u32).collect());
    let cpu0 = cpu_seconds();
    let mut runs = Vec::new();
    for seed in 1..=a.runs {
        let lost = lost_chunks(a.nodes, a.chunks, code.n(), seed);
        let plan = schedule::plan(code.as_ref(), a.method, a.selector, &lost, &cluster, seed)?;
        runs.push(lb_degree(plan.repairs.iter().map(|r| &r.graph), a.nodes - 1));
    }
    let report = BalanceReport {
        code: a.code.to_string(),
        method: a.method.to_string(),
        selector: a.selector.to_string(),
        nodes: a.nodes,
        chunks: a.chunks,
        lb_degree: runs.iter().sum::<f64>() / runs.len() as f64,
        lb_degree_runs: runs,
        plan_cpu_seconds: cpu_seconds() - cpu0,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let runs: Vec<String> = report.lb_degree_runs.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "{} {} with {}, {} nodes, {} chunks: lb_degree {:.2} (runs {})",
            report.code,
            report.method,
            report.selector,
            a.nodes,
            a.chunks,
            report.lb_degree,
            runs.join(", ")
        );
    }
    Ok(())
}
