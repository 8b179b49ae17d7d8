//! `kintsugi bench degraded-read`: time a direct read of one chunk over one link, then a
//! degraded read of the same chunk with each method, in one run (ratios, not absolutes,
//! are what to compare on a shared machine). Runs an embedded cluster on loopback with
//! token-bucket links.

use crate::embedded::{pattern, Embedded};
use crate::units::{parse_nonzero_size, parse_rate};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use kintsugi_client::client::get_chunk;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::Shape;
use serde::Serialize;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct DegradedArgs {
    /// Run on the network-namespace testbed with tc-shaped links (needs root); default:
    /// an embedded cluster on loopback with token-bucket links.
    #[arg(long)]
    pub testbed: bool,
    /// Rate of every node's link, each direction (e.g. 200mbit, 1gbit, 25MB/s).
    #[arg(long, default_value = "200mbit", value_parser = parse_rate)]
    pub link: f64,
    /// Erasure code of the object read (rs:K,M, lrc:K,L,M or clay:K,M,D).
    #[arg(long, default_value = "rs:10,4")]
    pub code: CodeSpec,
    /// Size of the chunk read, whose node is taken as lost.
    #[arg(long, default_value = "16MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    /// Slice size of pipelined methods (a unit each hop forwards as soon as it has it).
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Methods to time, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', default_value = "cr,ppr,ecpipe,ecpipe-cyclic")]
    pub methods: Vec<Shape>,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Testbed only: TCP congestion control of the nodes' connections (cubic, reno, bbr,
    /// ...; `host`: the host's default). A chain has one flow per link: loss-free BBR kept
    /// it smoother than cubic on this host, and the recorded figures ran the host's (BBR).
    #[arg(long, default_value = "host")]
    pub tcp_congestion: String,
    /// Testbed only: longest queue of every shaped link, milliseconds at its rate (tc tbf's
    /// latency); the recorded figures ran 100.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub queue_ms: u32,
    /// Testbed only: MTU of every link (9000: jumbo frames).
    #[arg(long, default_value_t = crate::testbed::DEFAULT_MTU, value_parser = clap::value_parser!(u32).range(576..=9000))]
    pub mtu: u32,
    /// One JSON report on stdout instead of the table.
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
    /// Whole-machine CPU busy while this method ran, in cores (median over runs): every
    /// process of the cluster and the reader, kernel included.
    cpu_cores: f64,
}

/// Busy and total jiffies of the whole machine (/proc/stat), and its core count.
pub(crate) fn machine_jiffies() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let total: u64 = f.iter().take(8).sum();
    // idle and iowait are not busy.
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// Cores busy between two `machine_jiffies` readings.
pub(crate) fn cores_busy(a: (u64, u64), b: (u64, u64)) -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let total = b.1.saturating_sub(a.1) as f64;
    if total == 0.0 {
        return 0.0;
    }
    b.0.saturating_sub(a.0) as f64 / total * cores
}

#[derive(Serialize)]
struct Report {
    code: String,
    link_bytes_per_s: f64,
    chunk_bytes: usize,
    slice_bytes: usize,
    runs: usize,
    testbed: bool,
    /// The testbed nodes' TCP congestion control and the links' queue bound (milliseconds).
    tcp_congestion: Option<String>,
    queue_ms: Option<u32>,
    mtu: Option<u32>,
    direct_seconds: f64,
    direct_cpu_cores: f64,
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
            host_link: None,
            pace: None,
            tcp_congestion: a.tcp_congestion.clone(),
            queue_ms: a.queue_ms,
            mtu: a.mtu,
            repair_class: None,
            queues: crate::testbed_queues::LinkQueues::Fifo,
        };
        let state = crate::testbed::up(&up)?;
        let mut client = kintsugi_client::Client::new(&state.coordinator);
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
    let d = median(&direct.0);
    let methods: Vec<MethodTime> = a
        .methods
        .iter()
        .zip(times)
        .map(|(m, (t, cpu)): (&Shape, (Vec<f64>, Vec<f64>))| MethodTime {
            method: m.to_string(),
            seconds: median(&t),
            ratio: median(&t) / d,
            all_runs: t,
            cpu_cores: median(&cpu),
        })
        .collect();
    let report = Report {
        code: a.code.to_string(),
        link_bytes_per_s: a.link,
        chunk_bytes: a.chunk,
        slice_bytes: a.slice,
        runs: a.runs,
        testbed: a.testbed,
        tcp_congestion: a.testbed.then(|| crate::testbed::congestion_in_use(&a.tcp_congestion)),
        queue_ms: a.testbed.then_some(a.queue_ms),
        mtu: a.testbed.then_some(a.mtu),
        direct_seconds: d,
        direct_cpu_cores: median(&direct.1),
        direct_runs: direct.0,
        methods,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let how = crate::testbed::links_label(a.testbed, a.queue_ms, &a.tcp_congestion, a.mtu, crate::testbed_queues::LinkQueues::Fifo);
        println!(
            "{} chunk of {} bytes, slices of {}, links {:.0} Mbit/s ({how}), {} run(s)",
            a.code,
            a.chunk,
            a.slice,
            a.link * 8.0 / 1e6,
            a.runs
        );
        println!("{:<14} {:>10} {:>12} {:>10}", "read", "seconds", "x direct", "CPU cores");
        println!("{:<14} {:>10.3} {:>12.2} {:>10.2}", "direct", d, 1.0, report.direct_cpu_cores);
        for m in &report.methods {
            println!("{:<14} {:>10.3} {:>12.2} {:>10.2}", m.method, m.seconds, m.ratio, m.cpu_cores);
        }
    }
    Ok(())
}

/// Stores one stripe, then alternates a direct read of chunk 0 with a degraded read of it
/// by every method; returns the direct times and, per method, its times, each with the
/// machine's busy cores during the read.
async fn measure(client: &kintsugi_client::Client, a: &DegradedArgs, k: usize) -> Result<Runs> {
    let size = k * a.chunk;
    client.put("bench", &pattern(size, 1), a.code, a.chunk as u64).await.map_err(|e| anyhow!(e))?;
    let layout = client.stat("bench").await.map_err(|e| anyhow!(e))?;
    let loc = layout.stripes[0].chunks[0].clone();
    let want = loc.crc32c;
    let mut direct = (Vec::new(), Vec::new());
    let mut times: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); a.methods.len()];
    for _ in 0..a.runs {
        let (t, j) = (Instant::now(), machine_jiffies());
        let c = get_chunk(&loc, a.chunk as u64, client.io_timeout, &client.shaper).await.map_err(|e| anyhow!(e))?;
        direct.0.push(t.elapsed().as_secs_f64());
        direct.1.push(cores_busy(j, machine_jiffies()));
        anyhow::ensure!(Some(kintsugi_proto::crc::crc32c(&c)) == want, "direct read returned wrong bytes");
        for (mi, m) in a.methods.iter().enumerate() {
            let (t, j) = (Instant::now(), machine_jiffies());
            let c = client.degraded_read("bench", 0, 0, *m, a.slice as u64).await.map_err(|e| anyhow!(e))?;
            times[mi].0.push(t.elapsed().as_secs_f64());
            times[mi].1.push(cores_busy(j, machine_jiffies()));
            anyhow::ensure!(Some(kintsugi_proto::crc::crc32c(&c)) == want, "degraded read with {m} returned wrong bytes");
        }
    }
    Ok((direct, times))
}

/// Per read kind: seconds and busy cores of every run.
type Runs = ((Vec<f64>, Vec<f64>), Vec<(Vec<f64>, Vec<f64>)>);
