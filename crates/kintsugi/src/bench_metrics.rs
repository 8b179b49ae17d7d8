//! `kintsugi bench metrics`: what serving Prometheus metrics costs, on and off in one run.
//!
//! - The repair data path: `bench relay`'s ECPipe chain on two sets of three node processes,
//!   one serving metrics and scraped every `--scrape-ms` (as Prometheus would), one not.
//!   CPU per byte of each role, on / off.
//! - Put and get: two embedded clusters (RS(4,2) on six nodes) in this process, one with
//!   metrics on the coordinator and the nodes (scraped likewise), one without; objects
//!   written and read back through the client library. Throughput on / off.
//! - Scrapes of busy nodes: every scrape above is timed, while the nodes relay at full
//!   speed or serve the puts and gets.
//!
//! The two sides alternate which goes first in each run, so drift in the machine's speed
//! falls on both.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use kintsugi_plan::Shape;
use serde::Serialize;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bench::{stat, Stat};
use crate::bench_relay::NodeProcs;
use crate::embedded::Embedded;
use crate::units::parse_nonzero_size;

#[derive(Args, Debug)]
pub struct MetricsArgs {
    #[command(flatten)]
    pub chain: crate::bench_relay::ChainArgs,
    /// Size of each object put and got.
    #[arg(long, default_value = "32MiB", value_parser = parse_nonzero_size)]
    pub object: usize,
    /// Objects put and got per run and side.
    #[arg(long, default_value_t = 4)]
    pub objects: usize,
    /// Repetitions; medians and the spread are reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Milliseconds between scrapes of each endpoint with metrics on.
    #[arg(long, default_value_t = 1000)]
    pub scrape_ms: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct RoleRatio {
    role: &'static str,
    /// CPU per byte with metrics on / off, per run, summarised (null when the off side's
    /// CPU read zero in every run: a node's CPU comes in clock ticks).
    on_over_off: Option<Stat>,
}

#[derive(Serialize)]
struct Report {
    runs: usize,
    scrape_ms: u64,
    relay_bytes_per_run: usize,
    relay: Vec<RoleRatio>,
    object_bytes: usize,
    objects_per_run: usize,
    /// MB/s through the client library, metrics on and off, and on / off per run.
    put_mb_s_on: Stat,
    put_mb_s_off: Stat,
    put_on_over_off: Stat,
    get_mb_s_on: Stat,
    get_mb_s_off: Stat,
    get_on_over_off: Stat,
    /// Every scrape of a busy node or coordinator: how long until the whole answer was in.
    scrapes: usize,
    scrape_failures: usize,
    scrape_ms_p50: f64,
    scrape_ms_p99: f64,
    scrape_ms_max: f64,
}

pub fn run(a: MetricsArgs) -> Result<()> {
    if a.runs == 0 || a.objects == 0 {
        bail!("--runs and --objects must be at least 1");
    }
    let (repairs, relay_bytes) = a.chain.repairs()?;
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let latencies = Arc::new(Mutex::new(Latencies::default()));

    // The data path: two sets of node processes.
    // The nodes run as a cluster does: under a secret, encrypted unless --protection says.
    if kintsugi_proto::auth::secret().is_none() {
        kintsugi_proto::auth::set_secret(Some(kintsugi_proto::auth::Secret::random()));
    }
    let (on_dir, off_dir) = (dir.path().join("on"), dir.path().join("off"));
    std::fs::create_dir_all(&on_dir)?;
    std::fs::create_dir_all(&off_dir)?;
    let on = NodeProcs::start(&on_dir, a.chain.chunk, true, None)?;
    let off = NodeProcs::start(&off_dir, a.chain.chunk, false, None)?;
    let mut sides: Vec<[[f64; 3]; 2]> = Vec::new();
    let mut next = 1u64;
    for run in 0..a.runs {
        let mut per_side = [[0.0; 3]; 2];
        for side in if run % 2 == 0 { [0, 1] } else { [1, 0] } {
            let nodes = if side == 0 { &on } else { &off };
            let scraper = (side == 0).then(|| Scraper::start(nodes.metrics.clone(), a.scrape_ms, latencies.clone()));
            let before = nodes.cpu()?;
            let rebuilt = rt.block_on(nodes.repairs(&mut next, repairs, a.chain.slice))?;
            let after = nodes.cpu()?;
            rt.block_on(nodes.delete(rebuilt))?;
            drop(scraper);
            per_side[side] = std::array::from_fn(|i| (after[i] - before[i]) * 1e9 / relay_bytes as f64);
        }
        sides.push(per_side);
        if !a.json {
            let r: [String; 3] =
                std::array::from_fn(|i| crate::bench::ratio_cell(&crate::bench::ratio_stat([(per_side[0][i], per_side[1][i])])));
            eprintln!("relay run {}/{}: CPU per byte on/off source {}, relay {}, sink {}", run + 1, a.runs, r[0], r[1], r[2]);
        }
    }
    drop((on, off));
    let relay = ["source", "relay", "sink"]
        .iter()
        .enumerate()
        .map(|(i, &role)| RoleRatio { role, on_over_off: crate::bench::ratio_stat(sides.iter().map(|s| (s[0][i], s[1][i]))) })
        .collect();

    // Put and get: two embedded clusters.
    let (puts, gets) = rt.block_on(put_get(&a, dir.path(), latencies.clone()))?;
    let ratio = |v: &[[f64; 2]]| stat(&v.iter().map(|r| r[0] / r[1].max(1e-12)).collect::<Vec<_>>());
    let side = |v: &[[f64; 2]], i: usize| stat(&v.iter().map(|r| r[i]).collect::<Vec<_>>());
    let l = latencies.lock().expect("latency lock");
    let mut ms = l.ms.clone();
    ms.sort_by(|x, y| x.total_cmp(y));
    let pct = |p: f64| ms.get(((ms.len() as f64 * p).ceil() as usize).saturating_sub(1)).copied().unwrap_or(f64::NAN);
    let report = Report {
        runs: a.runs,
        scrape_ms: a.scrape_ms,
        relay_bytes_per_run: relay_bytes,
        relay,
        object_bytes: a.object,
        objects_per_run: a.objects,
        put_mb_s_on: side(&puts, 0),
        put_mb_s_off: side(&puts, 1),
        put_on_over_off: ratio(&puts),
        get_mb_s_on: side(&gets, 0),
        get_mb_s_off: side(&gets, 1),
        get_on_over_off: ratio(&gets),
        scrapes: ms.len(),
        scrape_failures: l.failures,
        scrape_ms_p50: pct(0.5),
        scrape_ms_p99: pct(0.99),
        scrape_ms_max: ms.last().copied().unwrap_or(f64::NAN),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("metrics on against off, {} run(s), endpoints scraped every {} ms while on (median, min-max)", a.runs, a.scrape_ms);
    println!("{:<28} {:>10} {:>18}", "what", "on/off", "spread");
    for r in &report.relay {
        let spread = r.on_over_off.as_ref().map_or("-".to_string(), |s| format!("{:.3}-{:.3}", s.min, s.max));
        println!("{:<28} {:>10} {:>18}", format!("relay CPU/byte, {}", r.role), crate::bench::ratio_cell(&r.on_over_off), spread);
    }
    for (what, s) in [("put throughput", &report.put_on_over_off), ("get throughput", &report.get_on_over_off)] {
        println!("{:<28} {:>10.3} {:>18}", what, s.median, format!("{:.3}-{:.3}", s.min, s.max));
    }
    println!(
        "put {:.0} MB/s on, {:.0} off; get {:.0} on, {:.0} off ({} objects of {} B per run and side)",
        report.put_mb_s_on.median, report.put_mb_s_off.median, report.get_mb_s_on.median, report.get_mb_s_off.median, a.objects, a.object
    );
    println!(
        "scrapes of busy endpoints: {} ({} failed), p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        report.scrapes, report.scrape_failures, report.scrape_ms_p50, report.scrape_ms_p99, report.scrape_ms_max
    );
    Ok(())
}

/// Puts and gets `a.objects` objects on each of two embedded clusters, alternately; returns
/// MB/s [on, off] per run for puts and for gets.
async fn put_get(a: &MetricsArgs, dir: &std::path::Path, latencies: Arc<Mutex<Latencies>>) -> Result<(Vec<[f64; 2]>, Vec<[f64; 2]>)> {
    let serve = Some("127.0.0.1:0".to_string());
    let (s1, s2) = (serve.clone(), serve.clone());
    let on = Embedded::start_custom(
        &dir.join("cluster-on"),
        6,
        None,
        None,
        move |c| c.metrics_listen = s1,
        move |_, n| n.metrics_listen = s2.clone(),
    )
    .await?;
    let off = Embedded::start(&dir.join("cluster-off"), 6, None).await?;
    let mut endpoints: Vec<String> = on.nodes.iter().flatten().filter_map(|n| n.metrics_addr).map(|m| format!("http://{m}")).collect();
    endpoints.extend(on.coord.as_ref().and_then(|c| c.metrics_addr).map(|m| format!("http://{m}")));
    let data = crate::embedded::pattern(a.object, 11);
    let code: kintsugi_codes::CodeSpec = "rs:4,2".parse().map_err(|e| anyhow!("{e}"))?;
    let (mut puts, mut gets) = (Vec::new(), Vec::new());
    for run in 0..a.runs {
        let (mut p, mut g) = ([0.0; 2], [0.0; 2]);
        for side in if run % 2 == 0 { [0, 1] } else { [1, 0] } {
            let cluster = if side == 0 { &on } else { &off };
            let scraper = (side == 0).then(|| Scraper::start(endpoints.clone(), a.scrape_ms, latencies.clone()));
            let names: Vec<String> = (0..a.objects).map(|i| format!("metrics-bench-{run}-{i}")).collect();
            let t = Instant::now();
            for n in &names {
                cluster.client.put(n, &data, code, 0).await.map_err(|e| anyhow!("put {n}: {e}"))?;
            }
            p[side] = (a.object * a.objects) as f64 / t.elapsed().as_secs_f64() / 1e6;
            let t = Instant::now();
            for n in &names {
                let (got, _) = cluster.client.get(n, Shape::Cr, 64 << 10).await.map_err(|e| anyhow!("get {n}: {e}"))?;
                anyhow::ensure!(got == data, "{n} read back different bytes");
            }
            g[side] = (a.object * a.objects) as f64 / t.elapsed().as_secs_f64() / 1e6;
            drop(scraper);
            for n in &names {
                cluster.client.delete(n).await.map_err(|e| anyhow!("delete {n}: {e}"))?;
            }
        }
        if !a.json {
            eprintln!("put/get run {}/{}: put on/off {:.3}, get on/off {:.3}", run + 1, a.runs, p[0] / p[1], g[0] / g[1]);
        }
        puts.push(p);
        gets.push(g);
    }
    on.stop().await;
    off.stop().await;
    Ok((puts, gets))
}

/// Scrape latencies in milliseconds, and scrapes that failed.
#[derive(Default)]
struct Latencies {
    ms: Vec<f64>,
    failures: usize,
}

/// Scrapes each endpoint every `every_ms` on a thread of its own until dropped.
struct Scraper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scraper {
    fn start(endpoints: Vec<String>, every_ms: u64, out: Arc<Mutex<Latencies>>) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let round = Instant::now();
                for e in &endpoints {
                    let t = Instant::now();
                    let ok = scrape(e).is_ok();
                    let mut l = out.lock().expect("latency lock");
                    if ok {
                        l.ms.push(t.elapsed().as_secs_f64() * 1e3);
                    } else {
                        l.failures += 1;
                    }
                }
                let rest = Duration::from_millis(every_ms).saturating_sub(round.elapsed());
                let until = Instant::now() + rest;
                while Instant::now() < until && !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10).min(rest));
                }
            }
        });
        Scraper { stop, thread: Some(thread) }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One GET of `base`/metrics, read to the end; its body must hold samples.
fn scrape(base: &str) -> Result<()> {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    anyhow::ensure!(text.starts_with("HTTP/1.1 200") && text.contains("kintsugi_"), "bad scrape of {base}");
    Ok(())
}
