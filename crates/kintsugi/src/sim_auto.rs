//! `kintsugi sim auto-study`: `auto` against every fixed method and scheduler over the
//! generated scenarios of `kintsugi_sim::auto_study` (issue 43's acceptance table).

use crate::atomic_file::write_atomic;
use anyhow::{bail, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kintsugi_sim::auto::{self, Pick};
use kintsugi_sim::auto_study::{self, AutoMode, StudyRow};
use kintsugi_sim::chameleon_phases::PhaseOptions;
use kintsugi_sim::{Model, SimOptions};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(Args, Debug)]
pub struct AutoStudyArgs {
    /// Seed the scenarios are drawn from.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Instead of issue 43's 45 scenarios, this many of issue 72's: foreground that changes
    /// during the repair (random walks, on/off bursts, moving hot spots), RS, LRC and Clay,
    /// 10 to 60 nodes, 1, 3 or all repairs at once per destination.
    #[arg(long)]
    pub changing: Option<usize>,
    /// How auto runs: follow (decides again every round of the repair) or once (decides at
    /// the start only).
    #[arg(long, default_value = "follow", value_parser = parse_mode)]
    pub auto: AutoMode,
    /// Run only these scenario ids (comma-separated), e.g. to look at one again.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<usize>,
    /// Worker threads [default: the CPUs].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write one row per scenario as CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_mode(s: &str) -> std::result::Result<AutoMode, String> {
    match s {
        "follow" => Ok(AutoMode::Follow),
        "once" => Ok(AutoMode::Once),
        _ => Err(format!("'{s}' is not a way auto runs: follow or once")),
    }
}

#[derive(Serialize)]
struct Summary {
    seed: u64,
    auto_mode: AutoMode,
    scenarios: usize,
    /// Geometric mean of repair seconds per candidate, and of auto's.
    geomean_seconds: Vec<(String, f64)>,
    auto_geomean_seconds: f64,
    /// Scenarios where auto took more than 5% longer than the best fixed candidate.
    auto_over_5pct: usize,
    worst_auto_over_best: f64,
    /// The longest decision (following: every round's together), and its share of the repair.
    max_decide_seconds: f64,
    max_decide_share: f64,
    rows: Vec<StudyRow>,
}

pub fn run(a: AutoStudyArgs) -> Result<()> {
    let mut scenarios = match a.changing {
        Some(n) => auto_study::generate_changing(a.seed, n),
        None => auto_study::generate(a.seed),
    };
    if !a.only.is_empty() {
        if let Some(bad) = a.only.iter().find(|&&i| i >= scenarios.len()) {
            bail!("--only {bad}: the study has scenarios 0 to {}", scenarios.len() - 1);
        }
        scenarios.retain(|s| a.only.contains(&s.id));
    }
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let cands = auto::candidates(Pick::Auto, Pick::Auto);
    let opts = SimOptions { model: Model::Fluid, ..Default::default() };
    let phases = PhaseOptions::default();
    let pb = ProgressBar::new(scenarios.len() as u64);
    pb.set_style(
        ProgressStyle::with_template("scenarios [{bar:30}] {pos}/{len}, eta {eta}").expect("static template").progress_chars("=> "),
    );
    let next = Mutex::new(0usize);
    let rows: Mutex<Vec<Result<StudyRow>>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = {
                    let mut n = next.lock().expect("no panics holding it");
                    *n += 1;
                    *n - 1
                };
                let Some(sc) = scenarios.get(i) else { break };
                let r = auto_study::evaluate(sc, &cands, &opts, phases, a.auto).map_err(anyhow::Error::from);
                rows.lock().expect("no panics holding it").push(r);
                pb.inc(1);
            });
        }
    });
    pb.finish_and_clear();
    let mut rows = rows.into_inner().expect("threads joined").into_iter().collect::<Result<Vec<_>>>()?;
    rows.sort_by_key(|r| r.scenario.id);

    let geomean = |f: &dyn Fn(&StudyRow) -> f64| (rows.iter().map(|r| f(r).ln()).sum::<f64>() / rows.len().max(1) as f64).exp();
    let geomean_seconds: Vec<(String, f64)> = cands.iter().enumerate().map(|(i, c)| (c.to_string(), geomean(&|r| r.fixed[i].1))).collect();
    let summary = Summary {
        seed: a.seed,
        auto_mode: a.auto,
        scenarios: rows.len(),
        auto_geomean_seconds: geomean(&|r| r.auto_seconds),
        geomean_seconds,
        auto_over_5pct: rows.iter().filter(|r| r.auto_over_best > 1.05).count(),
        worst_auto_over_best: rows.iter().map(|r| r.auto_over_best).fold(0.0, f64::max),
        max_decide_seconds: rows.iter().map(|r| r.decide_seconds).fold(0.0, f64::max),
        max_decide_share: rows.iter().map(|r| r.decide_seconds / r.auto_seconds).fold(0.0, f64::max),
        rows,
    };
    if let Some(path) = &a.csv {
        write_atomic(path, csv(&summary).as_bytes())?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    print_table(&summary);
    if let Some(p) = &a.csv {
        println!("csv: {}", p.display());
    }
    Ok(())
}

fn csv(s: &Summary) -> String {
    let mut out = String::from("id,kind,code,nodes,chunks,concurrency");
    for (c, _) in &s.geomean_seconds {
        out += &format!(",{c}_s");
    }
    out += ",auto_pick,auto_s,best_fixed,auto_over_best,decide_s\n";
    for r in &s.rows {
        let sc = &r.scenario;
        // Codes have commas (rs:6,3): quoted.
        out +=
            &format!("{},{},\"{}\",{},{},{}", sc.id, sc.kind.name(), sc.code, sc.nodes, sc.chunks, auto_study::concurrency(sc.max_active));
        for (_, t) in &r.fixed {
            out += &format!(",{t:.3}");
        }
        out += &format!(",{},{:.3},{},{:.4},{:.3}\n", r.picks(), r.auto_seconds, r.best_fixed, r.auto_over_best, r.decide_seconds);
    }
    out
}

fn print_table(s: &Summary) {
    let names: Vec<&str> = s.geomean_seconds.iter().map(|(c, _)| c.as_str()).collect();
    print!("{:>3} {:<11} {:<12} {:>5} {:>5} {:>4}", "id", "foreground", "code", "nodes", "lost", "conc");
    for n in &names {
        print!(" {:>15}", n);
    }
    println!(" {:>15} {:>8} {:>7}", "auto picks", "auto/best", "decide");
    for r in &s.rows {
        let sc = &r.scenario;
        print!(
            "{:>3} {:<11} {:<12} {:>5} {:>5} {:>4}",
            sc.id,
            sc.kind.name(),
            sc.code.to_string(),
            sc.nodes,
            sc.chunks,
            auto_study::concurrency(sc.max_active)
        );
        for (c, t) in &r.fixed {
            let mark = if *c == r.best_fixed { "*" } else { " " };
            print!(" {:>14.1}{mark}", t);
        }
        println!(" {:>15} {:>8.3} {:>6.2}s", r.picks(), r.auto_over_best, r.decide_seconds);
    }
    print!("{:<44}", "geometric mean, s");
    for (_, g) in &s.geomean_seconds {
        print!(" {:>15.1}", g);
    }
    println!(" {:>15.1}", s.auto_geomean_seconds);
    println!(
        "auto: {} of {} scenarios more than 5% behind the best fixed candidate (worst {:.3}x); deciding took at most {:.2} s, {:.2}% of the repair",
        s.auto_over_5pct,
        s.scenarios,
        s.worst_auto_over_best,
        s.max_decide_seconds,
        s.max_decide_share * 100.0
    );
}
