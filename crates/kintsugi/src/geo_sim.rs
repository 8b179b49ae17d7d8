//! `kintsugi geo sim`: the paper's recovery and degraded-read comparison of layouts
//! (Figures 9, 10 and 13, Table 3, the range-read figures), on the HDD model at the
//! paper's scale: 16 servers x 6 disks, 255 GB per disk for W1 (4.4 GB on one SSD per
//! server for W2).

use crate::units::{parse_rate, parse_size};
use anyhow::{bail, Context, Result};
use clap::Args;
use kintsugi_geo::degraded::{degraded_pieces, normal_pieces, pipeline, Range, ReadModel};
use kintsugi_geo::layout::{lost_units, Scheme};
use kintsugi_geo::recovery::{simulate, Cluster, Outcome};
use kintsugi_geo::trace::SizeCdf;
use kintsugi_geo::workload::Workload;
use kintsugi_geo::HddModel;
use rand::{rngs::StdRng, SeedableRng};
use serde::Serialize;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// w1 (HDDs) or w2 (SSDs).
    #[arg(long, default_value = "w1", value_parser = Workload::parse)]
    pub workload: Workload,
    /// Schemes, comma-separated [default: the paper's set for the workload].
    #[arg(long, value_delimiter = ',')]
    pub schemes: Vec<String>,
    /// Bytes stored on the failed disk [default: 255GB for w1, 4.4GB for w2, as in the paper].
    #[arg(long, value_parser = parse_size)]
    pub disk_bytes: Option<usize>,
    /// Servers.
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Disks per server [default: 6 for w1, 1 for w2].
    #[arg(long)]
    pub disks_per_node: Option<usize>,
    /// Placement groups of 14 disks.
    #[arg(long, default_value_t = 1000)]
    pub pgs: usize,
    /// Disk positioning time per request, milliseconds [default: 8 for w1 (HDD), 0.1 for w2 (SSD)].
    #[arg(long)]
    pub seek_ms: Option<f64>,
    /// Disk sequential bandwidth [default: 180MB/s for w1, 520MB/s for w2].
    #[arg(long, value_parser = parse_rate)]
    pub disk_bw: Option<f64>,
    /// Client link for degraded reads.
    #[arg(long, default_value = "1gbit", value_parser = parse_rate)]
    pub client: f64,
    /// Objects whose degraded reads are modelled (sizes from the workload).
    #[arg(long, default_value_t = 2000)]
    pub reads: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write one CSV row per scheme (recovery and read figures) to FILE.
    #[arg(long)]
    pub csv: Option<std::path::PathBuf>,
    /// Draw degraded read time against recovery time per scheme (the paper's Figures 9/10)
    /// as SVG to FILE.
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Row {
    scheme: String,
    #[serde(flatten)]
    recovery: Outcome,
    /// Mean time to last byte of a whole-object degraded read, and over a normal read.
    degraded_read_s: f64,
    degraded_over_normal: f64,
    /// Mean time of a degraded read of a random range (uniform length).
    range_read_s: f64,
}

#[derive(Serialize)]
struct Report {
    workload: &'static str,
    disk_bytes: u64,
    disks: usize,
    seek_s: f64,
    disk_bw: f64,
    client: f64,
    normal_read_s: f64,
    rows: Vec<Row>,
    /// Geo (the first geo scheme) degraded-read time saved by pipelining, per client rate
    /// (1, 2, 4 Gbit/s): 1 - pipelined / (repair + transfer).
    pipelining_gain: Vec<(f64, f64)>,
}

pub fn run(a: SimArgs) -> Result<()> {
    let w = a.workload;
    let names: Vec<String> = if a.schemes.is_empty() {
        match w {
            Workload::W1 => ["geo-1m", "geo-4m", "geo-16m", "con-16m", "con-64m", "con-256m", "stripe", "stripe-max", "rs", "lrc"],
            Workload::W2 => ["geo-128k", "geo-256k", "con-128k", "con-512k", "stripe-32k", "stripe-max", "rs-32k", "lrc-32k", "", ""],
        }
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.to_string())
        .collect()
    } else {
        a.schemes.clone()
    };
    let schemes = names.iter().map(|n| Scheme::parse(n)).collect::<Result<Vec<_>, _>>().map_err(anyhow::Error::msg)?;
    let (def_bytes, def_dpn, def_seek, def_bw) = match w {
        Workload::W1 => (255e9 as u64, 6, 8.0, 180e6),
        Workload::W2 => (4.4e9 as u64, 1, 0.1, 520e6),
    };
    let disk_bytes = a.disk_bytes.map(|b| b as u64).unwrap_or(def_bytes);
    if disk_bytes == 0 || disk_bytes > 1 << 44 {
        bail!("--disk-bytes must be between 1 byte and 16 TiB");
    }
    let disk = HddModel::new(a.seek_ms.unwrap_or(def_seek) / 1e3, a.disk_bw.unwrap_or(def_bw)).map_err(anyhow::Error::msg)?;
    let cluster = Cluster { nodes: a.nodes, disks_per_node: a.disks_per_node.unwrap_or(def_dpn), pgs: a.pgs, disk, weight_per_node: 512 };
    if a.reads == 0 || a.reads > 1_000_000 {
        bail!("--reads must be between 1 and 1000000");
    }
    let cdf = SizeCdf::alibaba();
    let reads = w.sample(&cdf, a.reads, a.seed ^ 0x5eed).map_err(anyhow::Error::msg)?;
    let model = ReadModel { disk, ..ReadModel::paper(a.client) };
    let normal: f64 =
        reads.iter().map(|&s| pipeline(&normal_pieces(Range::whole(s), &model), a.client, true)).sum::<f64>() / reads.len() as f64;

    let mut rows = Vec::new();
    for s in &schemes {
        let mut rng = StdRng::seed_from_u64(a.seed);
        let mut objects = std::iter::repeat_with({
            let cdf = cdf.clone();
            let mut orng = StdRng::seed_from_u64(a.seed.wrapping_add(7));
            let (lo, hi) = w.range();
            move || cdf.range(lo, hi).expect("workload range").sample(&mut orng)
        });
        let units = lost_units(s, &mut objects, disk_bytes, &mut rng);
        if !a.json {
            eprintln!("{}: {} repair units, simulating ...", s.name, units.len());
        }
        let recovery = simulate(&cluster, &units, 0, &mut rng).map_err(anyhow::Error::msg)?;
        let mut rrng = StdRng::seed_from_u64(a.seed ^ 0xdead);
        let deg: f64 =
            reads.iter().map(|&sz| pipeline(&degraded_pieces(s, sz, Range::whole(sz), &model, &mut rrng), a.client, true)).sum::<f64>()
                / reads.len() as f64;
        let range: f64 = reads
            .iter()
            .map(|&sz| {
                let r = Range::random(sz, &mut rrng);
                pipeline(&degraded_pieces(s, sz, r, &model, &mut rrng), a.client, true)
            })
            .sum::<f64>()
            / reads.len() as f64;
        rows.push(Row { scheme: s.name.clone(), recovery, degraded_read_s: deg, degraded_over_normal: deg / normal, range_read_s: range });
    }
    let mut gains = Vec::new();
    if let Some(g) = schemes.iter().find(|s| s.name.starts_with("geo-")) {
        for gbit in [1.0, 2.0, 4.0] {
            let client = gbit * 125e6;
            let m = ReadModel { disk, ..ReadModel::paper(client) };
            let mut rrng = StdRng::seed_from_u64(a.seed ^ 0xbeef);
            let (mut piped, mut plain) = (0.0, 0.0);
            for &sz in &reads {
                let p = degraded_pieces(g, sz, Range::whole(sz), &m, &mut rrng);
                piped += pipeline(&p, client, true);
                plain += pipeline(&p, client, false);
            }
            gains.push((gbit, 1.0 - piped / plain));
        }
    }
    let report = Report {
        workload: w.name(),
        disk_bytes,
        disks: cluster.disks(),
        seek_s: disk.seek,
        disk_bw: disk.bandwidth,
        client: a.client,
        normal_read_s: normal,
        rows,
        pipelining_gain: gains,
    };
    if let Some(path) = &a.csv {
        let mut out = String::from("scheme,lost_bytes,recovery_seconds,throughput_bytes_per_s,read_traffic,disk_read_per_disk,disk_busy_share,degraded_read_s,degraded_over_normal,range_read_s\n");
        for r in &report.rows {
            let o = &r.recovery;
            out += &format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                r.scheme,
                o.lost_bytes,
                o.seconds,
                o.throughput,
                o.read_traffic,
                o.disk_read_per_disk,
                o.disk_busy_share,
                r.degraded_read_s,
                r.degraded_over_normal,
                r.range_read_s
            );
        }
        std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.plot {
        let pts: Vec<(String, f64, f64)> =
            report.rows.iter().map(|r| (r.scheme.clone(), r.degraded_read_s * 1e3, r.recovery.seconds)).collect();
        let title = format!("{}: recovery of {:.0} GB against degraded reads (lower left is better)", w.name(), disk_bytes as f64 / 1e9);
        crate::plot::scatter_svg(&pts, "mean degraded read (ms)", "recovery time (s)", &title, path)?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "{} on {} disks ({:.0} GB lost), disk {:.1} ms + {:.0} MB/s, client {:.2} Gbit/s, normal read {:.0} ms",
        w.name(),
        report.disks,
        disk_bytes as f64 / 1e9,
        disk.seek * 1e3,
        disk.bandwidth / 1e6,
        a.client * 8.0 / 1e9,
        normal * 1e3
    );
    println!(
        "{:<12} {:>10} {:>9} {:>10} {:>10} {:>12} {:>10} {:>10}",
        "scheme", "recovery", "traffic", "disk MB/s", "disk busy", "degraded ms", "x normal", "range ms"
    );
    for r in &report.rows {
        println!(
            "{:<12} {:>7.2} GB/s {:>8.2}x {:>10.1} {:>9.0}% {:>12.1} {:>9.2}x {:>10.1}",
            r.scheme,
            r.recovery.throughput / 1e9,
            r.recovery.read_traffic,
            r.recovery.disk_read_per_disk / 1e6,
            100.0 * r.recovery.disk_busy_share,
            r.degraded_read_s * 1e3,
            r.degraded_over_normal,
            r.range_read_s * 1e3
        );
    }
    let find = |n: &str| report.rows.iter().find(|r| r.scheme == n);
    if let (Some(g), Some(rs), Some(lrc)) = (find("geo-4m"), find("rs"), find("lrc")) {
        println!(
            "\ngeo-4m recovers {:.2}x as fast as rs (paper 1.85x), {:.2}x lrc (paper 1.30x)",
            g.recovery.throughput / rs.recovery.throughput,
            g.recovery.throughput / lrc.recovery.throughput
        );
    }
    if let (Some(g), Some(sm)) = (find("geo-4m"), find("stripe-max")) {
        println!("stripe-max takes {:.2}x geo-4m's recovery time (paper 1.37x)", g.recovery.throughput / sm.recovery.throughput);
    }
    if let (Some(g), Some(c), Some(sm)) = (find("geo-4m"), find("con-16m"), find("stripe-max")) {
        println!(
            "geo-4m range reads take {:.1}% of con-16m's (paper 67.6%) and {:.1}% of stripe-max's (paper 55.3%)",
            100.0 * g.range_read_s / c.range_read_s,
            100.0 * g.range_read_s / sm.range_read_s
        );
    }
    for (gbit, gain) in &report.pipelining_gain {
        println!("pipelining saves {:.1}% of geo's degraded read at {gbit} Gbit/s (paper 23.4-35.9%)", 100.0 * gain);
    }
    Ok(())
}
