//! `kintsugi geo ...`: Geometric Partitioning's partitioner and the trace-only workload
//! figures (small-size bucket share, average chunk size, chunk size against q).

use crate::units::{human_bytes as human, parse_nonzero_size};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use kintsugi_geo::partition;
use kintsugi_geo::trace::SizeCdf;
use kintsugi_geo::workload::{figures, TraceFigures, Workload};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum GeoCmd {
    /// Cut one object into a front remainder and geometrically growing chunks (Algorithm 1,
    /// chunks capped at --max-chunk).
    Partition(PartitionArgs),
    /// Sample the paper's W1 or W2 workload from the Alibaba trace and report what the
    /// partitioner makes of it: small-size bucket share of capacity, average chunk size.
    Workload(WorkloadArgs),
    /// Simulate a disk's recovery and degraded reads for each layout on HDD models at the
    /// paper's scale (Figures 9/10/13, Table 3, range reads), beside the paper's figures.
    Sim(crate::geo_sim::SimArgs),
    /// The chunk-size tension of Clay on HDDs (the paper's Figure 4): a recovery helper's
    /// disk bandwidth and a degraded read's time, for chunks from 4 MiB to 256 MiB.
    ChunkSize(ChunkSizeArgs),
}

#[derive(Args, Debug)]
pub struct ChunkSizeArgs {
    /// Object read by the degraded read.
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_size)]
    pub object: usize,
    /// Client link.
    #[arg(long, default_value = "1gbit", value_parser = crate::units::parse_rate)]
    pub client: f64,
    /// Disk positioning time per request, milliseconds.
    #[arg(long, default_value_t = 8.0)]
    pub seek_ms: f64,
    /// Disk sequential bandwidth.
    #[arg(long, default_value = "180MB/s", value_parser = crate::units::parse_rate)]
    pub disk_bw: f64,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PartitionArgs {
    /// Object size (e.g. 73.5MiB, 4GiB, 1048576).
    #[arg(value_parser = crate::units::parse_size)]
    pub size: usize,
    /// Smallest chunk size, s0.
    #[arg(long, default_value = "4MiB", value_parser = parse_nonzero_size)]
    pub s0: usize,
    /// Common ratio of chunk sizes (1 = every chunk is s0).
    #[arg(long, default_value_t = 2)]
    pub q: u64,
    /// Largest chunk allowed (the paper's 256 MiB).
    #[arg(long, default_value = "256MiB", value_parser = parse_nonzero_size)]
    pub max_chunk: usize,
    /// Print JSON ({"remainder": bytes, "chunks": [bytes, ...]}, ascending).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct WorkloadArgs {
    /// w1 (4 MiB - 4 GiB objects, HDD) or w2 (4 KiB - 4 MiB, SSD).
    #[arg(long, default_value = "w1", value_parser = Workload::parse)]
    pub workload: Workload,
    /// Smallest chunk size [default: 4MiB for w1, 128KiB for w2].
    #[arg(long, value_parser = parse_nonzero_size)]
    pub s0: Option<usize>,
    /// Common ratio of chunk sizes.
    #[arg(long, default_value_t = 2)]
    pub q: u64,
    /// Largest chunk allowed.
    #[arg(long, default_value = "256MiB", value_parser = parse_nonzero_size)]
    pub max_chunk: usize,
    /// Objects to sample [default: the paper's count, 170000 for w1, 500000 for w2].
    #[arg(long)]
    pub objects: Option<usize>,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Object-size CDF (size,cdf rows) [default: the Alibaba OSS cdf_count compiled in].
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Also report the average chunk size for q = 1..=8 (the paper's Figure 14).
    #[arg(long)]
    pub sweep_q: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: GeoCmd) -> Result<()> {
    match cmd {
        GeoCmd::Partition(a) => run_partition(a),
        GeoCmd::Workload(a) => run_workload(a),
        GeoCmd::Sim(a) => crate::geo_sim::run(a),
        GeoCmd::ChunkSize(a) => run_chunk_size(a),
    }
}

fn run_partition(a: PartitionArgs) -> Result<()> {
    let p = partition(a.size as u64, a.s0 as u64, a.q, a.max_chunk as u64)?;
    if a.json {
        println!("{}", serde_json::to_string(&p)?);
        return Ok(());
    }
    println!("object {} = remainder {} + {} chunks", human(a.size as u64), human(p.remainder), p.chunks.len());
    println!("{:>5} {:>14} {:>14}", "chunk", "offset", "size");
    for (i, (c, o)) in p.chunks.iter().zip(p.offsets()).enumerate() {
        println!("{:>5} {:>14} {:>14}", i, o, human(*c));
    }
    Ok(())
}

#[derive(Serialize)]
struct WorkloadReport {
    workload: &'static str,
    seed: u64,
    max_chunk_bytes: u64,
    #[serde(flatten)]
    figures: TraceFigures,
    /// Average chunk size for q = 1..=8 (with --sweep-q).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    q_sweep: Vec<TraceFigures>,
}

fn run_workload(a: WorkloadArgs) -> Result<()> {
    let w = a.workload;
    let s0 = a.s0.map(|s| s as u64).unwrap_or(match w {
        Workload::W1 => 4 << 20,
        Workload::W2 => 128 << 10,
    });
    let n = a.objects.unwrap_or(w.paper_objects());
    if n == 0 {
        bail!("--objects must be at least 1");
    }
    if n > 50_000_000 {
        bail!("--objects {n} is more than the 50,000,000 this command samples in memory");
    }
    let cdf = match &a.trace {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            SizeCdf::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => SizeCdf::alibaba(),
    };
    let sizes = w.sample(&cdf, n, a.seed).map_err(anyhow::Error::msg)?;
    let cap = a.max_chunk as u64;
    let f = figures(&sizes, s0, a.q, cap)?;
    let sweep = if a.sweep_q { (1..=8).map(|q| figures(&sizes, s0, q, cap)).collect::<Result<Vec<_>, _>>()? } else { vec![] };
    if a.json {
        let r = WorkloadReport { workload: w.name(), seed: a.seed, max_chunk_bytes: cap, figures: f, q_sweep: sweep };
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!("workload {} ({} objects, seed {}), s0 {}, q {}, chunks at most {}", w.name(), f.objects, a.seed, human(s0), a.q, human(cap));
    println!("  average object        {:>12}", human(f.avg_object_bytes as u64));
    println!("  small-size bucket     {:>11.1}% of capacity", 100.0 * f.small_bucket_share);
    println!("  average chunk         {:>12}  ({:.1} MB)", human(f.avg_chunk_bytes as u64), f.avg_chunk_bytes / 1e6);
    println!("  chunks per object     {:>12.2}", f.chunks_per_object);
    println!("  largest chunk         {:>12}", human(f.max_chunk_bytes));
    if !sweep.is_empty() {
        println!("\n{:>3} {:>14} {:>12}", "q", "avg chunk", "small share");
        for s in &sweep {
            println!("{:>3} {:>14} {:>11.1}%", s.q, human(s.avg_chunk_bytes as u64), 100.0 * s.small_bucket_share);
        }
    }
    Ok(())
}

fn run_chunk_size(a: ChunkSizeArgs) -> Result<()> {
    if a.object as u64 > 1 << 40 {
        bail!("--object is limited to 1 TiB");
    }
    let disk = kintsugi_geo::HddModel::new(a.seek_ms / 1e3, a.disk_bw).map_err(anyhow::Error::msg)?;
    let m = kintsugi_geo::degraded::ReadModel { disk, ..kintsugi_geo::degraded::ReadModel::paper(a.client) };
    let pts: Vec<_> = (2..=8).map(|e| kintsugi_geo::tension::point(&m, a.object as u64, 1u64 << (20 + e))).collect();
    if a.json {
        println!("{}", serde_json::to_string(&pts)?);
        return Ok(());
    }
    println!(
        "Clay(10,4,13), disk {} ms + {:.0} MB/s, {} object over {:.2} Gbit/s",
        a.seek_ms,
        a.disk_bw / 1e6,
        human(a.object as u64),
        a.client * 8.0 / 1e9
    );
    println!("{:>10} {:>18} {:>18}", "chunk", "recovery MB/s", "degraded read ms");
    for p in &pts {
        println!("{:>10} {:>18.1} {:>18.0}", human(p.chunk_bytes), p.recovery_read_bw / 1e6, p.degraded_read_s * 1e3);
    }
    println!("paper (Figure 4): 40 -> 170 MB/s and 700 -> 1300 ms from 4 MB to 256 MB chunks");
    Ok(())
}
