//! `bench sim-scale`: the simulator's cost curve. Each point runs `kintsugi sim full-node`
//! in a child process, so its CPU time and peak memory are its own; the child reports them
//! (getrusage), with the simulated repair time and the event count.

use crate::units::parse_nonzero_size;
use anyhow::{bail, Context, Result};
use clap::Args;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::Command;

#[derive(Args, Debug)]
pub struct SimScaleArgs {
    /// Points as NODES:CHUNKS, comma-separated (default: the chunk curve at 1,000 nodes and
    /// the node curve at 100,000 chunks).
    #[arg(long, default_value = "1000:10000,1000:30000,1000:100000,100:100000,10000:100000", value_delimiter = ',')]
    pub points: Vec<String>,
    /// Repair methods, comma-separated.
    #[arg(long, default_value = "cr,ppr,ecpipe", value_delimiter = ',')]
    pub methods: Vec<String>,
    /// Schedulers, comma-separated.
    #[arg(long, default_value = "random,repairboost", value_delimiter = ',')]
    pub schedulers: Vec<String>,
    /// Code of every stripe.
    #[arg(long, default_value = "rs:10,4")]
    pub code: String,
    /// Simulator model (fluid or slice).
    #[arg(long, default_value = "fluid")]
    pub model: String,
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// `sim --event-window`: events within this many seconds taken together (0: exact).
    #[arg(long, default_value_t = 0.0)]
    pub event_window: f64,
    /// Runs per point; the median CPU and the spread are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Write the rows as CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Plot CPU seconds against chunks and nodes (SVG); also writes the CSV beside it.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// What a `sim full-node --json` child reports (the fields used here).
#[derive(Deserialize)]
struct Child {
    repair_seconds: f64,
    plan_cpu_seconds: f64,
    sim_cpu_seconds: f64,
    max_rss_mib: f64,
    events: u64,
}

#[derive(Serialize, Clone)]
struct Row {
    nodes: usize,
    chunks: usize,
    method: String,
    scheduler: String,
    /// Plan plus simulation, median over runs, and the range.
    cpu_seconds: f64,
    cpu_min: f64,
    cpu_max: f64,
    plan_cpu_seconds: f64,
    sim_cpu_seconds: f64,
    max_rss_mib: f64,
    events: u64,
    repair_seconds: f64,
}

pub fn run(a: SimScaleArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut points = Vec::new();
    for p in &a.points {
        let (n, c) = p.split_once(':').with_context(|| format!("point '{p}' is not NODES:CHUNKS"))?;
        let n: usize = n.trim().parse().with_context(|| format!("bad node count in '{p}'"))?;
        let c: usize = c.trim().parse().with_context(|| format!("bad chunk count in '{p}'"))?;
        points.push((n, c));
    }
    let exe = std::env::current_exe().context("cannot find the kintsugi executable")?;
    let mut rows = Vec::new();
    let total = points.len() * a.methods.len() * a.schedulers.len() * a.runs;
    let mut done = 0;
    for &(nodes, chunks) in &points {
        for method in &a.methods {
            for scheduler in &a.schedulers {
                let mut runs = Vec::new();
                for _ in 0..a.runs {
                    done += 1;
                    eprintln!("[{done}/{total}] {nodes} nodes, {chunks} chunks, {method} with {scheduler}");
                    let out = Command::new(&exe)
                        .args(["sim", "full-node", "--json", "--code", &a.code, "--method", method, "--scheduler", scheduler])
                        .args(["--model", &a.model, "--nodes", &nodes.to_string(), "--chunks", &chunks.to_string()])
                        .args(["--chunk", &a.chunk.to_string(), "--slice", &a.slice.to_string()])
                        .args(["--event-window", &a.event_window.to_string()])
                        .output()
                        .context("cannot run kintsugi sim")?;
                    if !out.status.success() {
                        bail!(
                            "sim full-node failed for {nodes}:{chunks} {method} {scheduler}: {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        );
                    }
                    let c: Child = serde_json::from_slice(&out.stdout).context("sim full-node printed no report")?;
                    runs.push(c);
                }
                let mut cpu: Vec<f64> = runs.iter().map(|c| c.plan_cpu_seconds + c.sim_cpu_seconds).collect();
                cpu.sort_by(f64::total_cmp);
                let mid = runs.iter().min_by(|x, y| {
                    let d = |c: &Child| (c.plan_cpu_seconds + c.sim_cpu_seconds - cpu[cpu.len() / 2]).abs();
                    d(x).total_cmp(&d(y))
                });
                let m = mid.expect("at least one run");
                rows.push(Row {
                    nodes,
                    chunks,
                    method: method.clone(),
                    scheduler: scheduler.clone(),
                    cpu_seconds: cpu[cpu.len() / 2],
                    cpu_min: cpu[0],
                    cpu_max: cpu[cpu.len() - 1],
                    plan_cpu_seconds: m.plan_cpu_seconds,
                    sim_cpu_seconds: m.sim_cpu_seconds,
                    max_rss_mib: runs.iter().map(|c| c.max_rss_mib).fold(0.0, f64::max),
                    events: m.events,
                    repair_seconds: m.repair_seconds,
                });
            }
        }
    }
    let csv_path = a.csv.clone().or_else(|| a.plot.as_ref().map(|p| p.with_extension("csv")));
    if let Some(path) = &csv_path {
        let mut text = String::from("nodes,chunks,method,scheduler,cpu_seconds,cpu_min,cpu_max,plan_cpu_seconds,sim_cpu_seconds,max_rss_mib,events,repair_seconds\n");
        for r in &rows {
            text += &format!(
                "{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.1},{},{:.3}\n",
                r.nodes,
                r.chunks,
                r.method,
                r.scheduler,
                r.cpu_seconds,
                r.cpu_min,
                r.cpu_max,
                r.plan_cpu_seconds,
                r.sim_cpu_seconds,
                r.max_rss_mib,
                r.events,
                r.repair_seconds
            );
        }
        crate::atomic_file::write_atomic(path, text.as_bytes())?;
    }
    if let Some(path) = &a.plot {
        plot(&rows, path)?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "code": a.code, "model": a.model, "chunk_bytes": a.chunk, "slice_bytes": a.slice, "runs": a.runs, "rows": rows })
            )?
        );
        return Ok(());
    }
    println!(
        "{:>6} {:>7} {:>7} {:>12} {:>9} {:>15} {:>8} {:>8} {:>9} {:>11}",
        "nodes", "chunks", "method", "scheduler", "cpu s", "range", "plan s", "rss MiB", "events", "repair s"
    );
    for r in &rows {
        println!(
            "{:>6} {:>7} {:>7} {:>12} {:>9.2} {:>15} {:>8.2} {:>8.0} {:>9} {:>11.1}",
            r.nodes,
            r.chunks,
            r.method,
            r.scheduler,
            r.cpu_seconds,
            format!("{:.2}-{:.2}", r.cpu_min, r.cpu_max),
            r.plan_cpu_seconds,
            r.max_rss_mib,
            r.events,
            r.repair_seconds
        );
    }
    if let Some(p) = &csv_path {
        println!("csv: {}", p.display());
    }
    Ok(())
}

/// Two panels: CPU against chunks (at the most common node count) and against nodes (at
/// the most common chunk count), one line per method and scheduler, log-log.
fn plot(rows: &[Row], path: &std::path::Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot draw {}: {e}", path.display());
    let mode = |v: Vec<usize>| -> usize {
        let mut best = (0, 0);
        for &x in &v {
            let n = v.iter().filter(|&&y| y == x).count();
            if n > best.1 {
                best = (x, n);
            }
        }
        best.0
    };
    let base_nodes = mode(rows.iter().map(|r| r.nodes).collect());
    let base_chunks = mode(rows.iter().map(|r| r.chunks).collect());
    let root = SVGBackend::new(path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let panels = root.split_evenly((1, 2));
    let series: Vec<(String, String)> = {
        let mut s: Vec<(String, String)> = rows.iter().map(|r| (r.method.clone(), r.scheduler.clone())).collect();
        s.dedup();
        s.sort();
        s.dedup();
        s
    };
    let ymax = rows.iter().map(|r| r.cpu_max).fold(1.0, f64::max) * 1.5;
    let ymin = rows.iter().map(|r| r.cpu_min).fold(f64::INFINITY, f64::min).max(1e-3) / 1.5;
    for (panel, by_chunks) in panels.iter().zip([true, false]) {
        let pick =
            |r: &Row| if by_chunks { (r.nodes == base_nodes).then_some(r.chunks) } else { (r.chunks == base_chunks).then_some(r.nodes) };
        let xs: Vec<usize> = rows.iter().filter_map(pick).collect();
        let (xmin, xmax) = (xs.iter().copied().min().unwrap_or(1) as f64, xs.iter().copied().max().unwrap_or(10) as f64);
        let title = if by_chunks {
            format!("CPU against lost chunks, {base_nodes} nodes")
        } else {
            format!("CPU against nodes, {base_chunks} chunks")
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d((xmin / 1.3..xmax * 1.3).log_scale(), (ymin..ymax).log_scale())
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(if by_chunks { "lost chunks" } else { "nodes" })
            .y_desc("CPU seconds (plan + simulate)")
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (method, scheduler)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| &r.method == method && &r.scheduler == scheduler)
                .filter_map(|r| pick(r).map(|x| (x as f64, r.cpu_seconds)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(format!("{method} / {scheduler}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| err(&e))?;
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
