//! `kintsugi bench degraded-read`: time a direct read of one chunk over one link, then a
//! degraded read of the same chunk with each method, in one run (ratios, not absolutes,
//! are what to compare on a shared machine). Runs an embedded cluster on loopback with
//! token-bucket links.

use crate::embedded::{pattern, Embedded};
use crate::units::{parse_nonzero_size, parse_rate};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::client::get_chunk;
use kintsugi_plan::{Shape, ALL_SHAPES};
use serde::Serialize;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct DegradedArgs {
    /// Run on the network-namespace testbed with tc-shaped links (needs root); default:
    /// an embedded cluster on loopback with token-bucket links.
    #[arg(long)]
    pub testbed: bool,
    #[arg(long, default_value = "200mbit", value_parser = parse_rate)]
    pub link: f64,
    #[arg(long, default_value = "rs:10,4")]
    pub code: CodeSpec,
    #[arg(long, default_value = "16MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct MethodTime {
    method: String,
    seconds: f64,
    /// seconds / direct_seconds.
    ratio: f64,
    all_runs: Vec<f64>,
}

#[derive(Serialize)]
struct Report {
    code: String,
    link_bytes_per_s: f64,
    chunk_bytes: usize,
    slice_bytes: usize,
    runs: usize,
    testbed: bool,
    direct_seconds: f64,
    direct_runs: Vec<f64>,
    methods: Vec<MethodTime>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

pub fn run(a: DegradedArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let code = a.code.build()?;
    let nodes = code.n() + 1;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (direct, times) = if a.testbed {
        let up = crate::testbed::UpArgs {
            nodes,
            link: a.link,
            name: "kbench".into(),
            octet: 215,
            dir: std::env::temp_dir().join("kintsugi-bench-testbed"),
            coordinator_config: None,
        };
        let state = crate::testbed::up(&up)?;
        let mut client = kintsugi_coord::Client::new(&state.coordinator);
        client.io_timeout = std::time::Duration::from_secs(120);
        // The nodes' links are shaped by tc. Traffic into the root namespace does not pass
        // the bridge port's qdisc here (see the testbed notes), so the reader's own downlink
        // is shaped in-process at the same rate.
        client.shaper = std::sync::Arc::new(kintsugi_node::Shaper::new(Some(a.link), Some(a.link)));
        let r = rt.block_on(measure(&client, &a, code.k()));
        crate::testbed::down(&up.name, &up.dir)?;
        r?
    } else {
        rt.block_on(async {
            let dir = tempfile::tempdir()?;
            let cluster = Embedded::start(dir.path(), nodes, Some(a.link)).await?;
            let r = measure(&cluster.client, &a, code.k()).await;
            cluster.stop().await;
            r
        })?
    };
    let d = median(&direct);
    let methods: Vec<MethodTime> = ALL_SHAPES
        .iter()
        .zip(times)
        .map(|(m, t): (&Shape, Vec<f64>)| MethodTime { method: m.to_string(), seconds: median(&t), ratio: median(&t) / d, all_runs: t })
        .collect();
    let report = Report {
        code: a.code.to_string(),
        link_bytes_per_s: a.link,
        chunk_bytes: a.chunk,
        slice_bytes: a.slice,
        runs: a.runs,
        testbed: a.testbed,
        direct_seconds: d,
        direct_runs: direct,
        methods,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let how = if a.testbed { "netns testbed, tc tbf" } else { "loopback, token buckets" };
        println!(
            "{} chunk of {} bytes, slices of {}, links {:.0} Mbit/s ({how}), {} run(s)",
            a.code,
            a.chunk,
            a.slice,
            a.link * 8.0 / 1e6,
            a.runs
        );
        println!("{:<14} {:>10} {:>12}", "read", "seconds", "x direct");
        println!("{:<14} {:>10.3} {:>12.2}", "direct", d, 1.0);
        for m in &report.methods {
            println!("{:<14} {:>10.3} {:>12.2}", m.method, m.seconds, m.ratio);
        }
    }
    Ok(())
}

/// Stores one stripe, then alternates a direct read of chunk 0 with a degraded read of it
/// by every method; returns the direct times and, per method, its times.
async fn measure(client: &kintsugi_coord::Client, a: &DegradedArgs, k: usize) -> Result<(Vec<f64>, Vec<Vec<f64>>)> {
    let size = k * a.chunk;
    client.put("bench", &pattern(size, 1), a.code, a.chunk as u64).await.map_err(|e| anyhow!(e))?;
    let layout = client.stat("bench").await.map_err(|e| anyhow!(e))?;
    let loc = layout.stripes[0].chunks[0].clone();
    let want = loc.crc32c;
    let mut direct = Vec::new();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); ALL_SHAPES.len()];
    for _ in 0..a.runs {
        let t = Instant::now();
        let c = get_chunk(&loc, a.chunk as u64, client.io_timeout, &client.shaper).await.map_err(|e| anyhow!(e))?;
        direct.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(Some(crc32c::crc32c(&c)) == want, "direct read returned wrong bytes");
        for (mi, m) in ALL_SHAPES.iter().enumerate() {
            let t = Instant::now();
            let c = client.degraded_read("bench", 0, 0, *m, a.slice as u64).await.map_err(|e| anyhow!(e))?;
            times[mi].push(t.elapsed().as_secs_f64());
            anyhow::ensure!(Some(crc32c::crc32c(&c)) == want, "degraded read with {m} returned wrong bytes");
        }
    }
    Ok((direct, times))
}
