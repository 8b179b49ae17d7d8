//! `kintsugi demo`: for each repair method, an embedded cluster on loopback with shaped
//! links stores objects, loses a node, serves a degraded read, repairs the node's chunks,
//! and checks every object byte for byte; then one table compares the methods.

use crate::embedded::{pattern, Embedded};
use crate::units::{human_bytes, parse_nonzero_size, parse_rate};
use anyhow::{anyhow, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Shape, ALL_SHAPES};
use serde::Serialize;
use std::time::Instant;

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
    /// Only these methods (default: all).
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<Shape>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
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
    let methods = if a.methods.is_empty() { ALL_SHAPES.to_vec() } else { a.methods.clone() };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let runs: Vec<(CodeSpec, Shape)> = methods.iter().map(|&m| (a.code, m)).chain(a.clay.0.map(|c| (c, Shape::Cr))).collect();
    let pb = ProgressBar::new((runs.len() * 4) as u64);
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
        println!(
            "{:<14} {:<13} {:>6} {:>10} {:>10} {:>9} {:>11} {:>11} {:>11} {:>11} {:>13}",
            "method", "code", "lost", "repair s", "MB/s", "verified", "max up", "mean up", "max down", "mean down", "degraded s"
        );
        for m in &report.methods {
            println!(
                "{:<14} {:<13} {:>6} {:>10.3} {:>10.1} {:>9} {:>11} {:>11} {:>11} {:>11} {:>13.3}",
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
    }
    if report.methods.iter().any(|m| !m.verified) {
        anyhow::bail!("some repairs did not verify");
    }
    Ok(())
}

async fn one_method(a: &DemoArgs, code: CodeSpec, method: Shape, pb: &ProgressBar) -> Result<MethodResult> {
    let dir = tempfile::tempdir()?;
    pb.set_message(format!("{method}: starting {} nodes", a.nodes));
    let mut cluster = Embedded::start(dir.path(), a.nodes, Some(a.link)).await?;
    pb.set_message(format!("{method}: writing {} objects", a.objects));
    for i in 0..a.objects {
        cluster.client.put(&format!("object-{i:03}"), &pattern(a.size, i as u64), code, a.chunk as u64).await.map_err(|e| anyhow!(e))?;
    }
    pb.inc(1);
    pb.set_message(format!("{method}: node 0 fails"));
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
                let chunk = cluster.client.degraded_read(&name, si, idx, method, a.slice as u64).await.map_err(|e| anyhow!(e))?;
                degraded = t.elapsed().as_secs_f64();
                anyhow::ensure!(Some(crc32c::crc32c(&chunk)) == s.chunks[idx].crc32c, "degraded read of {name} returned wrong bytes");
                break 'find;
            }
        }
    }
    pb.inc(1);
    let before = cluster.stats();
    let lost = cluster.client.status().await.map_err(|e| anyhow!(e))?.lost_chunks;
    pb.set_message(format!("{method}: repairing {lost} chunks"));
    let report = cluster.client.repair(method, a.slice as u64, a.parallel, a.scheduler).await.map_err(|e| anyhow!(e))?;
    let after = cluster.stats();
    pb.inc(1);
    pb.set_message(format!("{method}: verifying"));
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
        method: method.to_string(),
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
    })
}
