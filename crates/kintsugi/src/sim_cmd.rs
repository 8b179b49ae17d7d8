//! `kintsugi sim`: run the planners' repair graphs in the flow-level simulator.

use crate::atomic_file::write_atomic;
use crate::sim_requests::RequestArgs;
use crate::units::{parse_nonzero_size, parse_rate};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use kintsugi_sim::auto::{self, Decision, History, Pick};
use kintsugi_sim::auto_follow::{self, Round};
use kintsugi_sim::chameleon_phases::{self, PhaseOptions, PhaseRecord};
use kintsugi_sim::network_file::NetworkFile;
use kintsugi_sim::requests::RequestLoad;
use kintsugi_sim::scenario::{closed_form, FullNode, Single};
use kintsugi_sim::under_load::{self, ForegroundReport};
use kintsugi_sim::utilization;
use kintsugi_sim::{run_with_progress, Job, Model, Network, SimOptions};
use serde::Serialize;
use std::path::PathBuf;

/// Subcommands of `kintsugi sim`.
#[derive(Subcommand, Debug)]
pub enum SimCmd {
    /// Repair one lost chunk to a requestor (a degraded read).
    Single(SingleArgs),
    /// Repair every chunk of a failed node holding chunks of random stripes.
    FullNode(FullNodeArgs),
    /// Load-balancing degree of a scheduler's plans (RepairBoost's Table 1 metric).
    Balance(crate::sim_planner_checks::BalanceArgs),
    /// ECPipe's geo experiment: a random path vs weighted path selection on the EC2 links.
    Geo(crate::sim_planner_checks::GeoArgs),
    /// `--method auto --scheduler auto` against every fixed method and scheduler over
    /// generated scenarios (foreground kinds x codes x concurrency; seeded).
    AutoStudy(crate::sim_auto::AutoStudyArgs),
}

/// Options shared by every scenario.
#[derive(Args, Debug)]
pub struct Common {
    /// Code: rs:K,M or lrc:K,L,M.
    #[arg(long, default_value = "rs:10,4")]
    pub code: CodeSpec,
    /// Repair graph shape: cr, ppr, ecpipe or ecpipe-cyclic; full-node also takes auto
    /// (each method predicted on what the monitor saw, the fastest run).
    #[arg(long, default_value = "ecpipe")]
    pub method: Pick<Shape>,
    /// Every node's uplink and downlink (e.g. 1gbit, 100mbit, 125MB/s).
    #[arg(long, default_value = "1gbit", value_parser = parse_rate)]
    pub link: f64,
    /// Chunk size.
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    /// Slice size (equal to the chunk for store-and-forward).
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Network description (JSON: nodes, pair_caps, foreground) replacing the uniform --link.
    #[arg(long)]
    pub network: Option<PathBuf>,
    /// Disk read bandwidth of every node (default: disks not modelled).
    #[arg(long, value_parser = parse_rate)]
    pub disk_read: Option<f64>,
    /// Disk write bandwidth of every node.
    #[arg(long, value_parser = parse_rate)]
    pub disk_write: Option<f64>,
    /// Seconds of positioning per disk I/O (one I/O per slice).
    #[arg(long, default_value_t = 0.0)]
    pub seek: f64,
    /// Write link utilisation over time as CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Plot link utilisation over time (SVG); also writes the CSV beside it.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Time bins in the CSV and plot.
    #[arg(long, default_value_t = 200)]
    pub bins: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// slice: every slice of every edge is an event (the reference; default for `single`);
    /// fluid: a pipelined repair is one flow plus its pipeline fill, so cost grows with
    /// repairs, not slices (default for `full-node`; mostly within 3% of slice, but ECPipe
    /// cyclic under contention can come out up to 10% faster).
    #[arg(long)]
    pub model: Option<Model>,
    /// Take events within this many seconds together, sharing links out once for all of
    /// them (each comes at most this early); 0 is exact. For tens of thousands of repairs
    /// running at once, where every event would recompute every fair share.
    #[arg(long, default_value_t = 0.0)]
    pub event_window: f64,
}

#[derive(Args, Debug)]
pub struct SingleArgs {
    #[command(flatten)]
    pub common: Common,
    /// Index of the lost shard in its stripe.
    #[arg(long, default_value_t = 0)]
    pub lost: usize,
}

#[derive(Args, Debug)]
pub struct FullNodeArgs {
    #[command(flatten)]
    pub common: Common,
    /// Nodes in the cluster (node 0 fails; nodes 0..N with --failed N).
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Chunks each failed node held.
    #[arg(long, default_value_t = 100)]
    pub chunks: usize,
    /// Repairs running at once per destination node (Ceph's osd_recovery_max_active is 3),
    /// or "all" [default: 1; ChameleonEC: all of a phase; with auto: 1 for every candidate]. Schedulers with timeslots
    /// (repairboost, repairboost-ts, repairboost-poll) start everything and order transfers by
    /// their schedule instead.
    #[arg(long, value_parser = parse_max_active)]
    pub max_active: Option<usize>,
    /// Who picks helpers and destinations: index, random, lru, greedy, repairboost,
    /// repairboost-rtb, repairboost-ts, repairboost-poll, mppr, chameleon (which draws its own
    /// trees) or chameleon-io (the same, planned with disk bandwidth where it is scarcer); or
    /// auto: CR, PPR and ECPipe (or --method) with random, repairboost and chameleon, each
    /// predicted on the foreground the monitor recorded (--history), the fastest run.
    #[arg(long, default_value = "random")]
    pub scheduler: Pick<Scheduler>,
    /// With auto: the network file's first this many seconds are the foreground before the
    /// repair, the monitor's record that auto replays to predict; the repair starts after
    /// them. 0: auto predicts from the rates at the start, held.
    #[arg(long, default_value_t = 0.0)]
    pub history: f64,
    /// With auto: decide once, at the start, and run the pick to the end. Without it auto
    /// follows the foreground: it decides again every round of the repair, and repairs not
    /// started by then may go to another candidate.
    #[arg(long)]
    pub auto_once: bool,
    /// With auto following: seconds between decisions; 0: a quarter of the first
    /// prediction, at least 5 s.
    #[arg(long, default_value_t = 0.0)]
    pub auto_round: f64,
    /// Extra requestor nodes, holding no data, that receive the rebuilt chunks in turn
    /// (ECPipe's full-node recovery); 0: rebuilt chunks go to storage nodes.
    #[arg(long, default_value_t = 0)]
    pub requestors: usize,
    /// Nodes failing at once (nodes 0..N), each holding about --chunks chunks; stripes lose
    /// one chunk per failed node they span (RepairBoost's multi-node repair).
    #[arg(long, default_value_t = 1)]
    pub failed: usize,
    /// Seed for stripe placement and destinations.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// ChameleonEC's phase length in seconds (`--scheduler chameleon`, which runs phase by
    /// phase, each planned when the last has finished); 0: the paper's 20 s at 10 Gb/s,
    /// scaled to the links.
    #[arg(long, default_value_t = 0.0)]
    pub phase_seconds: f64,
    /// ChameleonEC's bandwidth monitor (`--scheduler chameleon`): each phase is planned
    /// with every node's mean foreground over this many seconds before it; 0: one phase
    /// length, as the authors' prototype.
    #[arg(long, default_value_t = 0.0)]
    pub monitor_period: f64,
    /// ChameleonEC without straggler-aware re-scheduling (ETRP alone): every phase waits
    /// for its slowest repair.
    #[arg(long)]
    pub no_sar: bool,
    /// ChameleonEC yielding to users (`--scheduler chameleon`): every node paces each phase's repair at the residual
    /// bandwidth the phase was planned with (what the monitor saw users leave, never below
    /// 30% of the link), instead of sharing links connection by connection.
    #[arg(long)]
    pub pace_repair: bool,
    /// Inject ChameleonEC Exp#11's straggler from this many seconds on: readers take
    /// --straggler-share of the uplink of the node in the most stripes that lost a chunk.
    #[arg(long)]
    pub straggler_at: Option<f64>,
    /// The share of that node's uplink the straggler's readers take (8 readers beside the
    /// repair's stream: 8/9).
    #[arg(long, default_value_t = 8.0 / 9.0)]
    pub straggler_share: f64,
    #[command(flatten)]
    pub requests: RequestArgs,
}

fn parse_max_active(s: &str) -> std::result::Result<usize, String> {
    if s == "all" {
        return Ok(usize::MAX);
    }
    s.parse::<usize>().map_err(|_| format!("'{s}' is not a number of repairs or \"all\""))
}

/// Runs a sim subcommand.
pub fn run(cmd: SimCmd) -> Result<()> {
    match cmd {
        SimCmd::Single(a) => {
            let c = &a.common;
            let cpu0 = cpu_seconds();
            let method = c.method.fixed().context("--method auto chooses among full-node repairs; a single chunk needs a method")?;
            let s = Single { code: c.code, method, link: c.link, chunk: c.chunk, slice: c.slice, lost: a.lost };
            let (net, jobs) = s.build()?;
            let eq = &jobs[0].graph.equation;
            let k = eq.terms.len();
            // The papers' formulas are for scalar codes; a Clay star moves d*beta sub-chunks.
            let closed = match (c.network.is_none(), eq.sub_chunks, method) {
                (false, _, _) => None,
                (true, 1, _) => Some(closed_form(method, k, c.chunk, c.slice, c.link)),
                (true, alpha, Shape::Cr) => {
                    let reads: usize = eq.terms.iter().map(|t| t.read_count()).sum();
                    Some(reads as f64 / alpha as f64 * c.chunk as f64 / c.link)
                }
                _ => None,
            };
            let excluded = [a.lost as u32];
            let opts = SimOptions { model: c.model.unwrap_or(Model::Slice), event_window: c.event_window, ..Default::default() };
            simulate("single", c, method, net, jobs, opts, cpu_seconds() - cpu0, closed, 1, &excluded, None, &[])
        }
        SimCmd::FullNode(a) => {
            let c = &a.common;
            let cpu0 = cpu_seconds();
            let auto = c.method == Pick::Auto || a.scheduler == Pick::Auto;
            let mut s = FullNode {
                nodes: a.nodes,
                chunks: a.chunks,
                code: c.code,
                method: c.method.fixed().unwrap_or(Shape::Ecpipe),
                link: c.link,
                chunk: c.chunk,
                slice: c.slice,
                seed: a.seed,
                max_active: a.max_active.unwrap_or(if a.scheduler.fixed().is_some_and(|s| s.chameleon()) { usize::MAX } else { 1 }),
                scheduler: a.scheduler.fixed().unwrap_or(Scheduler::Random),
                requestors: a.requestors,
                failed: a.failed,
                given: None,
            };
            // With a network file, schedulers plan with its residual bandwidth at the start.
            let mut custom = match &c.network {
                Some(path) => {
                    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read network file {}", path.display()))?;
                    Some(NetworkFile::parse(&text)?)
                }
                None => None,
            };
            let phase_options = PhaseOptions {
                phase_seconds: a.phase_seconds,
                monitor_period: a.monitor_period,
                sar: !a.no_sar,
                progress_period: 0.5,
                pace: a.pace_repair,
            };
            if !(a.history >= 0.0 && a.history.is_finite()) {
                bail!("--history must be a non-negative number of seconds");
            }
            let requests = a.requests.load(c.link, a.seed)?;
            let mut decision = None;
            let mut followed = None;
            if auto {
                if requests.is_some() || a.straggler_at.is_some() || a.pace_repair {
                    bail!(
                        "auto predicts from the network's foreground alone: run it without --fg-clients, --straggler-at and --pace-repair"
                    );
                }
                let net = match custom.take() {
                    Some(net) => net,
                    None if a.history > 0.0 => bail!("--history cuts the foreground of a --network file; there is none"),
                    None => Network::homogeneous(s.nodes + s.requestors, c.link),
                };
                let (net, history) = History::split(&net, a.history);
                let cands = auto::candidates(c.method, a.scheduler);
                let opts = SimOptions { model: c.model.unwrap_or(Model::Fluid), event_window: c.event_window, ..Default::default() };
                if a.auto_once {
                    let d = auto::decide(&s, &net, &history, &opts, phase_options, &cands)?;
                    if !c.json {
                        print_decision(&d, s.max_active);
                    }
                    s = auto::with(&s, d.pick);
                    decision = Some(d);
                } else {
                    let f = auto_follow::follow(&s, &net, &history, &opts, phase_options, &cands, a.auto_round)?;
                    if !c.json {
                        print_decision(&f.first, s.max_active);
                        print_rounds(&f);
                    }
                    s = auto::with(&s, f.first.pick);
                    decision = Some(f.first);
                    followed = Some((f.jobs, f.admission, f.rounds));
                }
                custom = Some(net);
            } else if a.auto_once || a.auto_round != 0.0 {
                bail!("--auto-once and --auto-round are how auto runs; give --method auto or --scheduler auto");
            } else if a.history > 0.0 {
                bail!("--history is what auto predicts from; give --method auto or --scheduler auto");
            }
            let (net, mut jobs, mut admission) = s.build_on(custom.as_ref())?;
            let mut rounds = None;
            if let Some((released, how, r)) = followed {
                (jobs, admission, rounds) = (released, how, Some(r));
            }
            let opts = SimOptions { admission, model: c.model.unwrap_or(Model::Fluid), event_window: c.event_window, ..Default::default() };
            let failed: Vec<u32> = (0..a.failed as u32).collect();
            let lost = jobs.len();
            let mut extra = Vec::new();
            if let Some(at) = a.straggler_at {
                if !(at >= 0.0 && at.is_finite() && a.straggler_share > 0.0 && a.straggler_share < 1.0) {
                    bail!("--straggler-at must be a non-negative number of seconds and --straggler-share within (0, 1)");
                }
                let node = s.busiest_participant()?;
                extra.push((node, at, a.straggler_share));
            }
            if a.pace_repair && !s.scheduler.chameleon() {
                bail!("--pace-repair paces ChameleonEC's phases; use it with --scheduler chameleon or chameleon-io");
            }
            // ChameleonEC runs phase by phase, planning each from the monitor's last period;
            // with requests every scheduler plans from what the monitor saw before.
            let full = FullRun { scenario: &s, phases: phase_options, requests, decision, rounds, network: custom };
            simulate("full-node", c, s.method, net, jobs, opts, cpu_seconds() - cpu0, None, lost, &failed, Some(full), &extra)
        }
        SimCmd::Balance(a) => crate::sim_planner_checks::balance(a),
        SimCmd::Geo(a) => crate::sim_planner_checks::geo(a),
        SimCmd::AutoStudy(a) => crate::sim_auto::run(a),
    }
}

#[derive(Serialize)]
struct MaxMean {
    max: f64,
    mean: f64,
}

#[derive(Serialize)]
struct SimReport {
    scenario: &'static str,
    model: Model,
    code: String,
    method: String,
    /// Who picked helpers and destinations (full-node).
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduler: Option<String>,
    nodes: usize,
    lost_chunks: usize,
    chunk_bytes: usize,
    slice_bytes: usize,
    /// Uniform link rate, when no network file was given.
    link_bytes_per_s: Option<f64>,
    repair_seconds: f64,
    /// MB (1e6 bytes) of lost data rebuilt per second.
    throughput_mb_s: f64,
    /// The paper's formula for this scenario, when one applies.
    closed_form_seconds: Option<f64>,
    /// Bytes per node over the surviving nodes.
    upload_bytes: MaxMean,
    download_bytes: MaxMean,
    /// CPU spent building the plans, and running the simulation.
    plan_cpu_seconds: f64,
    sim_cpu_seconds: f64,
    max_rss_mib: f64,
    events: u64,
    transfers: u64,
    /// ChameleonEC's phases as they ran (`--scheduler chameleon`).
    #[serde(skip_serializing_if = "Option::is_none")]
    phases: Option<Phases>,
    /// Users' requests beside the repair (`--fg-clients`): their latency and the
    /// interference degree.
    #[serde(skip_serializing_if = "Option::is_none")]
    foreground: Option<ForegroundReport>,
    /// `--method auto` / `--scheduler auto`: every candidate's predicted time and the pick
    /// (following, the first round's).
    #[serde(skip_serializing_if = "Option::is_none")]
    auto: Option<Decision>,
    /// auto following the foreground: each round's pick.
    #[serde(skip_serializing_if = "Option::is_none")]
    auto_rounds: Option<Vec<Round>>,
}

/// A full-node scenario's own settings for [`simulate`].
struct FullRun<'a> {
    scenario: &'a FullNode,
    phases: PhaseOptions,
    requests: Option<(RequestLoad, f64)>,
    /// What `auto` predicted and chose.
    decision: Option<Decision>,
    /// auto following the foreground: its rounds (the jobs are their repairs, as released).
    rounds: Option<Vec<Round>>,
    /// The network file's network (from the repair's start, with `--history`).
    network: Option<Network>,
}

#[derive(Serialize)]
struct Phases {
    phase_seconds: f64,
    monitor_period: f64,
    phases: Vec<PhaseRecord>,
}

#[allow(clippy::too_many_arguments)]
fn simulate(
    scenario: &'static str,
    c: &Common,
    method: Shape,
    mut net: Network,
    jobs: Vec<Job>,
    mut opts: SimOptions,
    plan_cpu: f64,
    closed: Option<f64>,
    lost_chunks: usize,
    failed: &[u32],
    mut full: Option<FullRun>,
    stragglers: &[(u32, f64, f64)],
) -> Result<()> {
    let parsed = full.as_mut().and_then(|f| f.network.take());
    if let Some(custom) = parsed {
        if custom.nodes.len() < net.nodes.len() {
            bail!("the scenario needs {} nodes, the network file has {}", net.nodes.len(), custom.nodes.len());
        }
        net = custom;
    } else if let Some(path) = &c.network {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read network file {}", path.display()))?;
        let custom = NetworkFile::parse(&text)?;
        if custom.nodes.len() < net.nodes.len() {
            bail!("the scenario needs {} nodes, the network file has {}", net.nodes.len(), custom.nodes.len());
        }
        net = custom;
    }
    if !(c.seek >= 0.0 && c.seek.is_finite()) {
        bail!("--seek must be a non-negative number of seconds");
    }
    // Stragglers: (node, from, share of its uplink) taken by readers to the end.
    for &(node, at, share) in stragglers {
        let rate = net.nodes.get(node as usize).map_or(0.0, |n| n.up) * share;
        net.foreground.push(kintsugi_sim::Foreground { node, direction: kintsugi_sim::Direction::Up, points: vec![(at, rate)] });
        if !c.json {
            println!("straggler: readers take {:.0}% of node {node}'s uplink from {at} s", share * 100.0);
        }
    }
    for n in &mut net.nodes {
        n.disk_read = c.disk_read.or(n.disk_read);
        n.disk_write = c.disk_write.or(n.disk_write);
        n.seek = if c.seek > 0.0 { c.seek } else { n.seek };
    }
    let csv_path = c.csv.clone().or_else(|| c.plot.as_ref().map(|p| p.with_extension("csv")));
    opts.track_utilization = csv_path.is_some();
    let pb = ProgressBar::new(jobs.len() as u64);
    pb.set_style(
        ProgressStyle::with_template("simulating [{bar:30}] {pos}/{len} repairs, eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let full_scheduler = full.as_ref().map(|f| if f.rounds.is_some() { "auto".to_string() } else { f.scenario.scheduler.to_string() });
    let auto_rounds = full.as_mut().and_then(|f| f.rounds.take());
    let cpu0 = cpu_seconds();
    let mut phases = None;
    let mut foreground = None;
    let auto = full.as_mut().and_then(|f| f.decision.take());
    let r = match full {
        Some(FullRun { scenario: s, phases: p, requests: Some((load, start)), .. }) => {
            let run = under_load::run(s, &net, &load, start, &opts, p)?;
            pb.set_position(jobs.len() as u64);
            phases = run.phases.map(|(phase_seconds, monitor_period, phases)| Phases { phase_seconds, monitor_period, phases });
            foreground = Some(run.foreground);
            run.result
        }
        _ if auto_rounds.is_some() => run_with_progress(&net, &jobs, &opts, &mut |done| pb.set_position(done as u64))?,
        Some(FullRun { scenario: s, phases: p, requests: None, .. }) if s.scheduler.chameleon() => {
            let run = chameleon_phases::run(s, &net, &opts, p, None)?;
            pb.set_position(jobs.len() as u64);
            phases = Some(Phases { phase_seconds: run.phase_seconds, monitor_period: run.monitor_period, phases: run.phases });
            run.result
        }
        _ => run_with_progress(&net, &jobs, &opts, &mut |done| pb.set_position(done as u64))?,
    };
    let sim_cpu = cpu_seconds() - cpu0;
    pb.finish_and_clear();

    let alive: Vec<u32> = (0..net.nodes.len() as u32).filter(|n| !failed.contains(n)).collect();
    let summary = |v: &[f64]| MaxMean {
        max: alive.iter().map(|&n| v[n as usize]).fold(0.0, f64::max),
        mean: alive.iter().map(|&n| v[n as usize]).sum::<f64>() / alive.len().max(1) as f64,
    };
    let report = SimReport {
        scenario,
        model: opts.model,
        code: c.code.to_string(),
        method: method.to_string(),
        scheduler: full_scheduler,
        nodes: net.nodes.len(),
        lost_chunks,
        chunk_bytes: c.chunk,
        slice_bytes: c.slice,
        link_bytes_per_s: c.network.is_none().then_some(c.link),
        repair_seconds: r.makespan,
        throughput_mb_s: if r.makespan > 0.0 { lost_chunks as f64 * c.chunk as f64 / r.makespan / 1e6 } else { 0.0 },
        closed_form_seconds: closed,
        upload_bytes: summary(&r.upload_bytes),
        download_bytes: summary(&r.download_bytes),
        plan_cpu_seconds: plan_cpu,
        sim_cpu_seconds: sim_cpu,
        max_rss_mib: max_rss_mib(),
        events: r.events,
        transfers: r.transfers,
        phases,
        foreground,
        auto,
        auto_rounds,
    };
    if let (Some(path), Some(logs)) = (&csv_path, &r.rates) {
        let rows = utilization::bin(&net, logs, r.makespan, c.bins.max(1));
        write_atomic(path, utilization::to_csv(&rows).as_bytes())?;
        if let Some(plot) = &c.plot {
            let title = format!("{} {} {}, {} lost chunk(s)", scenario, c.code, method, lost_chunks);
            crate::plot::utilization_svg(&rows, &alive, &title, plot)?;
        }
    }
    if c.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} repair, {} with {}, {} nodes, {} lost chunk(s) of {} bytes, slice {}",
        scenario, report.code, report.method, report.nodes, lost_chunks, c.chunk, c.slice
    );
    println!("  repair time      {:.4} s{}", r.makespan, closed.map_or(String::new(), |c| format!("  (closed form {c:.4} s)")));
    println!("  throughput       {:.1} MB/s", report.throughput_mb_s);
    println!("  model            {}", model_line(opts.model, method, lost_chunks));
    println!("  upload per node  max {:.1} MB, mean {:.1} MB", report.upload_bytes.max / 1e6, report.upload_bytes.mean / 1e6);
    println!("  download         max {:.1} MB, mean {:.1} MB", report.download_bytes.max / 1e6, report.download_bytes.mean / 1e6);
    println!(
        "  cost             {:.2} s CPU to plan, {:.2} s CPU to simulate, {} events, {:.0} MiB peak",
        plan_cpu, sim_cpu, r.events, report.max_rss_mib
    );
    if let Some(p) = &report.phases {
        let longest = p.phases.iter().map(|ph| ph.end - ph.start).fold(0.0, f64::max);
        println!(
            "  phases           {} of {:.1} s planned (longest ran {:.1} s), monitor averaging {:.1} s; stragglers {}, restarted {}",
            p.phases.len(),
            p.phase_seconds,
            longest,
            p.monitor_period,
            p.phases.iter().map(|ph| ph.stragglers).sum::<usize>(),
            p.phases.iter().map(|ph| ph.restarted).sum::<usize>()
        );
    }
    if let Some(f) = &report.foreground {
        crate::sim_requests::print(f);
    }
    if let Some(p) = &csv_path {
        println!("  utilisation      {}", p.display());
    }
    if let Some(p) = &c.plot {
        println!("  plot             {}", p.display());
    }
    Ok(())
}

/// What auto predicted for each candidate, and what it runs.
fn print_decision(d: &Decision, max_active: usize) {
    let conc = if max_active == usize::MAX { "all".to_string() } else { max_active.to_string() };
    println!("auto: every candidate predicted on what the monitor saw, {conc} repair(s) at once per destination:");
    for p in &d.predictions {
        match (p.seconds, &p.error) {
            (Some(t), _) => println!("  {:<20} {:>10.1} s{}", p.candidate, t, if p.candidate == d.chosen { "  <- runs" } else { "" }),
            (None, e) => println!("  {:<20} cannot run: {}", p.candidate, e.as_deref().unwrap_or("?")),
        }
    }
    println!(
        "  deciding took {:.2} s, {:.2}% of the predicted repair",
        d.decide_seconds,
        100.0 * d.decide_seconds / d.predicted_seconds.max(f64::MIN_POSITIVE)
    );
}

/// Each round of auto following the foreground.
fn print_rounds(f: &auto_follow::Followed) {
    println!("auto follows the foreground: decided again every round, repairs not started by then going to the round's pick");
    for r in &f.rounds {
        println!(
            "  at {:>8.1} s  {:<20} {:>5} repair(s) started, {:>5} left; predicted {:.1} s for what was left",
            r.start, r.chosen, r.chunks, r.left, r.predicted_seconds
        );
    }
    println!("  deciding took {:.2} s over {} round(s)", f.decide_seconds, f.rounds.len());
}

/// The model that ran, and where its figure is known to part from the reference.
fn model_line(model: Model, method: Shape, lost_chunks: usize) -> String {
    match model {
        Model::Slice => "slice (every slice of every edge, the reference)".into(),
        // REPRODUCTION.md, issue #13: with several cyclic repairs sharing links the slice
        // model (and the netns testbed) came out up to 8.5% slower; one rate per repair
        // cannot carry the others' bursts.
        Model::Fluid if method == Shape::EcpipeCyclic && lost_chunks > 1 => {
            "fluid (ECPipe cyclic repairs sharing links: may be up to 10% optimistic; --model slice is the reference)".into()
        }
        Model::Fluid => "fluid (one flow per repair; --model slice is the reference)".into(),
    }
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is always valid.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    }
}

/// User plus system CPU time of this process so far.
pub fn cpu_seconds() -> f64 {
    let u = rusage();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Peak resident memory of this process.
pub fn max_rss_mib() -> f64 {
    rusage().ru_maxrss as f64 / 1024.0
}
