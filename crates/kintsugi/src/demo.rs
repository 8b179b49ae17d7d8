//! `kintsugi demo`: for each repair method, an embedded cluster on loopback with shaped
//! links stores objects, loses a node, serves a degraded read, repairs the node's chunks,
//! and checks every object byte for byte; then one table compares the methods.

use crate::embedded::{pattern, Embedded};
use crate::load::{Interference, Workload};
use crate::units::{human_bytes, parse_nonzero_size, parse_rate};
use anyhow::{anyhow, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Pick, Shape, ALL_SHAPES};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Storage nodes.
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Every node's uplink and downlink (token buckets on loopback).
    #[arg(long, default_value = "200mbit", value_parser = parse_rate)]
    pub link: f64,
    /// Code of the objects for the methods' rows.
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Also run the scenario with this Clay code and a CR star, the shape that keeps its
    /// MSR repair traffic (d/q chunks per lost chunk); "none" to skip.
    #[arg(long, default_value = "clay:6,3,8", value_parser = parse_clay)]
    pub clay: ClayChoice,
    /// Objects written.
    #[arg(long, default_value_t = 12)]
    pub objects: usize,
    /// Size of each object.
    #[arg(long, default_value = "6MiB", value_parser = parse_nonzero_size)]
    pub size: usize,
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Chunks repaired at once.
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// Who picks helpers and destinations (index, random, lru, greedy, repairboost, mppr, chameleon, ...).
    #[arg(long, default_value = "repairboost")]
    pub scheduler: Scheduler,
    /// Only these methods (default: all): cr, ppr, ecpipe, ecpipe-cyclic, planned by
    /// --scheduler; chameleon (ChameleonEC's scheduler drawing its own trees); and auto
    /// (method and scheduler predicted by the coordinator, as `repair --method auto
    /// --scheduler auto`).
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<DemoMethod>,
    /// Run a foreground workload (YCSB A: 50% reads, 50% overwrites, zipfian 0.99) for
    /// a baseline with the node down, then during each method's repair, and report its
    /// P99 and ChameleonEC's interference degree (T*/T - 1).
    #[arg(long)]
    pub load: bool,
    /// Foreground clients, with --load.
    #[arg(long, default_value_t = 4)]
    pub load_clients: usize,
    /// Foreground records, with --load (written after the node fails, so the repair moves
    /// only the demo's objects).
    #[arg(long, default_value_t = 32)]
    pub load_records: u64,
    /// Bytes per foreground record, with --load.
    #[arg(long, default_value = "512KiB", value_parser = parse_nonzero_size)]
    pub load_value: usize,
    /// Seconds of the foreground baseline (node down, no repair), with --load.
    #[arg(long, default_value_t = 3.0)]
    pub load_baseline: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A row of the demo: a repair shape planned by `--scheduler`, or ChameleonEC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoMethod {
    Shape(Shape),
    /// ChameleonEC's phases and trees (`--scheduler chameleon`, ECPipe where it draws none).
    Chameleon,
    /// Method and scheduler both `auto`: the coordinator predicts and picks.
    Auto,
}

impl std::str::FromStr for DemoMethod {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("chameleon") {
            return Ok(DemoMethod::Chameleon);
        }
        if s.eq_ignore_ascii_case("auto") {
            return Ok(DemoMethod::Auto);
        }
        s.parse::<Shape>().map(DemoMethod::Shape).map_err(|e| format!("{e} (or chameleon, or auto)"))
    }
}

impl DemoMethod {
    /// The shape and scheduler the repair runs with.
    fn plan(self, scheduler: Scheduler) -> (Pick<Shape>, Pick<Scheduler>) {
        match self {
            DemoMethod::Shape(s) => (Pick::Fixed(s), Pick::Fixed(scheduler)),
            DemoMethod::Chameleon => (Pick::Fixed(Shape::Ecpipe), Pick::Fixed(Scheduler::Chameleon)),
            DemoMethod::Auto => (Pick::Auto, Pick::Auto),
        }
    }

    fn name(self) -> String {
        match self {
            DemoMethod::Shape(s) => s.to_string(),
            DemoMethod::Chameleon => "chameleon".into(),
            DemoMethod::Auto => "auto".into(),
        }
    }
}

/// `--clay`: a Clay code, or none.
#[derive(Clone, Copy, Debug)]
pub struct ClayChoice(Option<CodeSpec>);

fn parse_clay(s: &str) -> std::result::Result<ClayChoice, String> {
    if s == "none" {
        return Ok(ClayChoice(None));
    }
    match s.parse::<CodeSpec>().map_err(|e| e.to_string())? {
        c @ CodeSpec::Clay { .. } => Ok(ClayChoice(Some(c))),
        other => Err(format!("{other} is not a clay code (clay:K,M,D, or none)")),
    }
}

#[derive(Serialize)]
struct MethodResult {
    method: String,
    /// The objects' code.
    code: String,
    repair_seconds: f64,
    /// MB (1e6 bytes) of lost chunks rebuilt per second.
    throughput_mb_s: f64,
    lost_chunks: usize,
    /// True only when every rebuilt chunk matched its checksum and every object read back exactly.
    verified: bool,
    max_upload_bytes: u64,
    mean_upload_bytes: f64,
    max_download_bytes: u64,
    mean_download_bytes: f64,
    degraded_read_seconds: f64,
    /// With --load: the foreground's P99 during the repair, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    foreground_p99_ms: Option<f64>,
    /// With --load: the foreground's P99 before the repair (node down), in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    foreground_baseline_p99_ms: Option<f64>,
    /// With --load: ChameleonEC's interference degree T*/T - 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    interference: Option<f64>,
    /// With --load: the whole foreground row (throughputs, P50s, errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    foreground: Option<Interference>,
}

#[derive(Serialize)]
struct DemoReport {
    nodes: usize,
    code: String,
    link_bytes_per_s: f64,
    objects: usize,
    object_bytes: usize,
    chunk_bytes: usize,
    slice_bytes: usize,
    methods: Vec<MethodResult>,
}

pub fn run(a: DemoArgs) -> Result<()> {
    for code in std::iter::once(a.code).chain(a.clay.0) {
        let c = code.build()?;
        if a.nodes < c.n() + 1 {
            anyhow::bail!(
                "{code} needs at least {} nodes (a stripe plus a destination outside it); see --nodes, --code, --clay",
                c.n() + 1
            );
        }
    }
    if a.parallel == 0 || a.objects == 0 {
        anyhow::bail!("--parallel and --objects must be at least 1");
    }
    if a.load && (a.load_clients == 0 || a.load_records == 0 || !(a.load_baseline > 0.0 && a.load_baseline.is_finite())) {
        anyhow::bail!("with --load, --load-clients and --load-records must be at least 1 and --load-baseline a positive number of seconds");
    }
    let methods: Vec<DemoMethod> = match a.methods.is_empty() {
        true => ALL_SHAPES.iter().map(|&s| DemoMethod::Shape(s)).chain([DemoMethod::Chameleon, DemoMethod::Auto]).collect(),
        false => a.methods.clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let runs: Vec<(CodeSpec, DemoMethod)> =
        methods.iter().map(|&m| (a.code, m)).chain(a.clay.0.map(|c| (c, DemoMethod::Shape(Shape::Cr)))).collect();
    let pb = ProgressBar::new((runs.len() * (4 + a.load as usize)) as u64);
    pb.set_style(ProgressStyle::with_template("{msg:<40} [{bar:30}] {pos}/{len}").expect("static template").progress_chars("=> "));
    let mut results = Vec::new();
    for &(code, method) in &runs {
        results.push(rt.block_on(one_method(&a, code, method, &pb))?);
    }
    pb.finish_and_clear();
    let report = DemoReport {
        nodes: a.nodes,
        code: a.code.to_string(),
        link_bytes_per_s: a.link,
        objects: a.objects,
        object_bytes: a.size,
        chunk_bytes: a.chunk,
        slice_bytes: a.slice,
        methods: results,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} nodes, {} over {:.0} Mbit/s links, {} objects of {}, chunks of {}, slices of {}; node 0 fails",
            a.nodes,
            a.code,
            a.link * 8.0 / 1e6,
            a.objects,
            human_bytes(a.size as u64),
            human_bytes(a.chunk as u64),
            human_bytes(a.slice as u64)
        );
        if a.load {
            println!(
                "foreground: {} clients, YCSB A, {} records of {}; its P99 and interference (T*/T - 1) against {} s with node 0 down and no repair",
                a.load_clients,
                a.load_records,
                human_bytes(a.load_value as u64),
                a.load_baseline
            );
        }
        let load_head = match a.load {
            true => format!(" {:>12} {:>12} {:>12} {:>10}", "base p99 ms", "fg p99 ms", "interference", "fg delay s"),
            false => String::new(),
        };
        // As wide as the longest method name ("auto: ecpipe+repairboost").
        let w = report.methods.iter().map(|m| m.method.len()).max().unwrap_or(0).max(14);
        println!(
            "{:<w$} {:<13} {:>6} {:>10} {:>10} {:>9} {:>11} {:>11} {:>11} {:>11} {:>13}{load_head}",
            "method", "code", "lost", "repair s", "MB/s", "verified", "max up", "mean up", "max down", "mean down", "degraded s"
        );
        for m in &report.methods {
            let load_cols = match &m.foreground {
                Some(f) => {
                    format!(" {:>12.1} {:>12.1} {:>12.3} {:>10.2}", f.baseline_p99_ms, f.during_p99_ms, f.interference, f.delay_seconds)
                }
                None => String::new(),
            };
            println!(
                "{:<w$} {:<13} {:>6} {:>10.3} {:>10.1} {:>9} {:>11} {:>11} {:>11} {:>11} {:>13.3}{load_cols}",
                m.method,
                m.code,
                m.lost_chunks,
                m.repair_seconds,
                m.throughput_mb_s,
                if m.verified { "yes" } else { "NO" },
                human_bytes(m.max_upload_bytes),
                human_bytes(m.mean_upload_bytes as u64),
                human_bytes(m.max_download_bytes),
                human_bytes(m.mean_download_bytes as u64),
                m.degraded_read_seconds
            );
        }
        println!(
            "\nlost: chunks node 0 held; repair s: its full-node repair; MB/s: rebuilt bytes per second; verified: every\n\
             rebuilt chunk equals the original, byte for byte; max/mean up and down: repair bytes a node sent and received\n\
             (the busiest node, and the mean over nodes); degraded s: one degraded read of a chunk node 0 held."
        );
        if a.load {
            println!(
                "base p99 ms: the foreground's P99 with node 0 down and no repair; fg p99 ms: during the repair;\n\
                 interference: ChameleonEC's T*/T - 1; fg delay s: the foreground time lost to the repair."
            );
        }
    }
    if report.methods.iter().any(|m| !m.verified) {
        anyhow::bail!("some repairs did not verify");
    }
    Ok(())
}

async fn one_method(a: &DemoArgs, code: CodeSpec, row: DemoMethod, pb: &ProgressBar) -> Result<MethodResult> {
    let (method, scheduler) = row.plan(a.scheduler);
    let method_name = row.name();
    let dir = tempfile::tempdir()?;
    pb.set_message(format!("{method_name}: starting {} nodes", a.nodes));
    let mut cluster = Embedded::start(dir.path(), a.nodes, Some(a.link)).await?;
    pb.set_message(format!("{method_name}: writing {} objects", a.objects));
    for i in 0..a.objects {
        cluster.client.put(&format!("object-{i:03}"), &pattern(a.size, i as u64), code, a.chunk as u64).await.map_err(|e| anyhow!(e))?;
    }
    pb.inc(1);
    pb.set_message(format!("{method_name}: node 0 fails"));
    cluster.client.fail(0).await.map_err(|e| anyhow!(e))?;
    if let Some(mut h) = cluster.nodes[0].take() {
        h.stopped().await;
    }
    cluster.wait_alive(a.nodes - 1).await?;
    // A degraded read of the first lost data chunk.
    let mut degraded = 0.0;
    'find: for i in 0..a.objects {
        let name = format!("object-{i:03}");
        let l = cluster.client.stat(&name).await.map_err(|e| anyhow!(e))?;
        let k = l.code.build()?.k();
        for (si, s) in l.stripes.iter().enumerate() {
            if let Some(idx) = s.chunks.iter().take(k).position(|c| c.lost) {
                let t = Instant::now();
                // A degraded read is one chunk, no schedule to predict: ECPipe under auto.
                let read_with = method.fixed().unwrap_or(Shape::Ecpipe);
                let chunk = cluster.client.degraded_read(&name, si, idx, read_with, a.slice as u64).await.map_err(|e| anyhow!(e))?;
                degraded = t.elapsed().as_secs_f64();
                anyhow::ensure!(
                    Some(kintsugi_proto::crc::crc32c(&chunk)) == s.chunks[idx].crc32c,
                    "degraded read of {name} returned wrong bytes"
                );
                break 'find;
            }
        }
    }
    pb.inc(1);
    // The foreground, written with the node already down so that the repair moves only the
    // demo's objects; a baseline without repair, then the clients run through the repair.
    let workload = a.load.then(|| Workload::ycsb_a(a.load_clients, a.load_records, a.load_value, a.code));
    let mut baseline = None;
    if let Some(w) = &workload {
        pb.set_message(format!("{method_name}: foreground baseline"));
        w.load(&cluster.client, false).await?;
        baseline = Some(w.run(&cluster.client, Default::default(), Duration::from_secs_f64(a.load_baseline)).await?);
        pb.inc(1);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let fg_task = workload.map(|w| {
        let (c, stop) = (cluster.client.clone(), stop.clone());
        tokio::spawn(async move { w.run(&c, stop, Duration::from_secs(3600)).await })
    });
    let before = cluster.stats();
    let lost = cluster.client.status().await.map_err(|e| anyhow!(e))?.lost_chunks;
    pb.set_message(format!("{method_name}: repairing {lost} chunks"));
    let report = cluster.client.repair_limited(method, a.slice as u64, a.parallel, scheduler, None).await.map_err(|e| anyhow!(e));
    stop.store(true, Ordering::Relaxed);
    let during = match fg_task {
        Some(t) => Some(t.await.map_err(|e| anyhow!("the foreground clients failed: {e}"))??),
        None => None,
    };
    let report = report?;
    let fg = baseline.zip(during).map(|(b, d)| Interference::new(&b, &d));
    let after = cluster.stats();
    pb.inc(1);
    pb.set_message(format!("{method_name}: verifying"));
    let mut verified = report.failed == 0 && report.repaired + report.skipped == lost;
    // Verification reads need no emulated link.
    let mut reader = cluster.client.clone();
    reader.shaper = Default::default();
    for i in 0..a.objects {
        let (data, r) = reader.get(&format!("object-{i:03}"), Shape::Cr, a.slice as u64).await.map_err(|e| anyhow!(e))?;
        verified &= data == pattern(a.size, i as u64) && r.degraded.is_empty();
    }
    pb.inc(1);
    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for (b, f) in before.iter().zip(&after) {
        if let (Some(b), Some(f)) = (b, f) {
            ups.push(f.repair_sent - b.repair_sent);
            downs.push(f.repair_received - b.repair_received);
        }
    }
    cluster.stop().await;
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    Ok(MethodResult {
        // What auto chose: "auto: ecpipe+repairboost".
        method: if row == DemoMethod::Auto { report.method.clone() } else { method_name },
        code: code.to_string(),
        repair_seconds: report.seconds,
        throughput_mb_s: report.bytes as f64 / report.seconds.max(1e-9) / 1e6,
        lost_chunks: lost,
        verified,
        max_upload_bytes: ups.iter().copied().max().unwrap_or(0),
        mean_upload_bytes: mean(&ups),
        max_download_bytes: downs.iter().copied().max().unwrap_or(0),
        mean_download_bytes: mean(&downs),
        degraded_read_seconds: degraded,
        foreground_p99_ms: fg.as_ref().map(|f| f.during_p99_ms),
        foreground_baseline_p99_ms: fg.as_ref().map(|f| f.baseline_p99_ms),
        interference: fg.as_ref().map(|f| f.interference),
        foreground: fg,
    })
}
