//! `kintsugi bench codec`: single-thread GF kernel and code throughput, optionally side by
//! side with ISA-L (`../shared/tools/isal_ref.c`) in the same run, because this machine is
//! shared and noisy: ratios measured in one run are what we compare, not absolute numbers.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use kintsugi_codes::CodeSpec;
use kintsugi_gf::{mul_add, Kernel};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::units::parse_nonzero_size;

/// Subcommands of `kintsugi bench`.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// GF kernel and RS(10,4) encode/decode throughput, one thread (GB = 1e9 source bytes).
    Codec(CodecBenchArgs),
    /// Degraded read of one chunk with every method vs a direct read, on shaped links.
    DegradedRead(crate::bench_degraded::DegradedArgs),
    /// Planning time of a full-node scheduler and of ECPipe's weighted path search.
    Planner(crate::bench_planner::PlannerArgs),
    /// The simulator's cost curve: CPU and memory of full-node repair as chunks and nodes
    /// grow (each point a child `sim full-node` process).
    SimScale(crate::bench_sim::SimScaleArgs),
    /// CPU per byte of a repair source, relay and sink (node processes on loopback) beside a
    /// plain TCP forwarder moving the same bytes.
    Relay(crate::bench_relay::RelayArgs),
    /// Full-node repair time against the network's lower bound, every object verified
    /// (embedded cluster, or the netns testbed with --testbed).
    FullNode(crate::bench_fullnode::FullNodeArgs),
}

#[derive(Args, Debug)]
pub struct CodecBenchArgs {
    /// Shard size.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub shard_size: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    /// Repetitions; the median and the spread are reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Force a GF kernel (scalar, ssse3, avx2, gfni, avx512); default: the fastest available.
    #[arg(long)]
    pub kernel: Option<Kernel>,
    /// Path to a built isal_ref (gcc -O2 ../shared/tools/isal_ref.c -lisal): run it
    /// between our measurements and report ours/ISA-L ratios.
    #[arg(long)]
    pub isal: Option<PathBuf>,
    /// Code to measure: rs:10,4 (GF kernels, RS encode/decode/repair, against ISA-L) or a
    /// Clay code such as clay:10,4,13 (encode, decode, repair, against Ceph).
    #[arg(long, default_value = "rs:10,4")]
    pub code: CodeSpec,
    /// Path to a built Ceph clay reference (tools/clay_ref.cc, built as its header says, see the
    /// README): run it between our measurements and report ours/Ceph ratios.
    #[arg(long)]
    pub ceph: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs a bench subcommand.
pub fn run(cmd: BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Codec(a) => codec(&a),
        BenchCmd::DegradedRead(a) => crate::bench_degraded::run(a),
        BenchCmd::Planner(a) => crate::bench_planner::run(a),
        BenchCmd::SimScale(a) => crate::bench_sim::run(a),
        BenchCmd::Relay(a) => crate::bench_relay::run(a),
        BenchCmd::FullNode(a) => crate::bench_fullnode::run(a),
    }
}

/// Median and spread of one metric over the runs.
#[derive(Serialize, Clone, Debug)]
pub(crate) struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

pub(crate) fn stat(v: &[f64]) -> Stat {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let median = if s.len() % 2 == 1 { s[s.len() / 2] } else { (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0 };
    Stat { median, min: s[0], max: s[s.len() - 1] }
}

/// Repeats `f` for about `seconds` and returns GB/s for `bytes` processed per call.
pub(crate) fn rate(seconds: f64, bytes: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm caches and page in buffers
    let start = Instant::now();
    let mut it = 0u64;
    loop {
        f();
        it += 1;
        let t = start.elapsed().as_secs_f64();
        if t >= seconds {
            return it as f64 * bytes as f64 / t / 1e9;
        }
    }
}

#[derive(Serialize)]
struct CodecReport {
    kernel: String,
    kernels_available: Vec<String>,
    shard_bytes: usize,
    runs: usize,
    /// Medians, the fields scripts read.
    mad_gbps: f64,
    encode_rs10_4_gbps: f64,
    decode_rs10_4_gbps: f64,
    repair_rs10_4_gbps: f64,
    /// Median, min and max per metric.
    spread: BTreeMap<String, Stat>,
    /// ISA-L's figures measured between ours, when --isal is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    isal: Option<BTreeMap<String, Stat>>,
    /// ours / ISA-L per run, summarised, when --isal is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<BTreeMap<String, Stat>>,
}

fn run_isal(bin: &PathBuf, len: usize, seconds: f64) -> Result<BTreeMap<String, f64>> {
    let out = std::process::Command::new(bin)
        .args(["10", "4", &len.to_string(), &seconds.to_string()])
        .output()
        .with_context(|| format!("cannot run ISA-L reference {}", bin.display()))?;
    if !out.status.success() {
        bail!("{} exited with {}", bin.display(), out.status);
    }
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut it = line.split_whitespace();
        if let (Some(name), Some(v)) = (it.next(), it.next()) {
            let key = match name {
                "encode_rs10_4" => "encode_rs10_4_gbps",
                "dot_k10" => "repair_rs10_4_gbps",
                "mad" => "mad_gbps",
                _ => continue,
            };
            m.insert(key.to_string(), v.parse::<f64>().with_context(|| format!("bad ISA-L output line '{line}'"))?);
        }
    }
    if m.len() != 3 {
        bail!("unexpected ISA-L output: {}", String::from_utf8_lossy(&out.stdout));
    }
    Ok(m)
}

fn codec(a: &CodecBenchArgs) -> Result<()> {
    if a.runs == 0 || !(a.seconds > 0.0 && a.seconds.is_finite()) {
        bail!("--runs must be at least 1 and --seconds positive");
    }
    if let Some(k) = a.kernel {
        if !k.is_available() {
            bail!("GF kernel {k} is not supported by this CPU (available: {:?})", Kernel::available());
        }
        // Read once by Kernel::active(), which nothing has called yet in this process.
        std::env::set_var("KINTSUGI_GF_KERNEL", k.name());
    }
    let kernel = Kernel::active();
    match a.code {
        CodeSpec::Clay { k, m, d } => return crate::bench_clay::run(a, kintsugi_codes::ClayCode::new(k, m, d)?),
        CodeSpec::Rs { k: 10, m: 4 } => {}
        other => bail!("bench codec measures rs:10,4 or a clay code, not {other}"),
    }
    if a.ceph.is_some() {
        bail!("--ceph compares Clay codes: add --code clay:K,M,D");
    }
    let len = a.shard_size;
    let code = CodeSpec::Rs { k: 10, m: 4 }.build()?;
    let (k, n) = (code.k(), code.n());
    let mut rng_state = 0x9E3779B97F4A7C15u64;
    let mut random = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state as u8
    };
    let mut shards: Vec<Vec<u8>> = (0..n).map(|_| (0..len).map(|_| random()).collect()).collect();
    {
        let (d, p) = shards.split_at_mut(k);
        let dr: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
        let mut pr: Vec<&mut [u8]> = p.iter_mut().map(|x| x.as_mut_slice()).collect();
        code.encode(&dr, &mut pr)?;
    }
    // Decode: the four first data shards lost, rebuilt from the other ten.
    let lost: Vec<usize> = (0..4).collect();
    let avail: Vec<usize> = (4..n).collect();
    let dec = code.decoder(&lost, &avail)?;
    // Repair: one data shard from k helpers (one output row, the degraded-read kernel).
    let rep = code.decoder(&[0], &(1..=k).collect::<Vec<_>>())?;

    let mut ours: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut theirs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut out = vec![vec![0u8; len]; 4];
    for _ in 0..a.runs {
        let mut r = BTreeMap::new();
        let mut dst = vec![0u8; len];
        r.insert("mad_gbps".to_string(), rate(a.seconds, len, || mul_add(0x5d, &shards[0], &mut dst)));
        r.insert(
            "encode_rs10_4_gbps".to_string(),
            rate(a.seconds, k * len, || {
                let dr: Vec<&[u8]> = shards[..k].iter().map(|x| x.as_slice()).collect();
                let mut pr: Vec<&mut [u8]> = out.iter_mut().map(|x| x.as_mut_slice()).collect();
                code.encode(&dr, &mut pr).expect("valid shapes");
            }),
        );
        r.insert(
            "decode_rs10_4_gbps".to_string(),
            rate(a.seconds, k * len, || {
                let sr: Vec<&[u8]> = dec.sources.iter().map(|&i| shards[i].as_slice()).collect();
                let mut dr: Vec<&mut [u8]> = out.iter_mut().map(|x| x.as_mut_slice()).collect();
                dec.apply(&sr, &mut dr).expect("valid shapes");
            }),
        );
        r.insert(
            "repair_rs10_4_gbps".to_string(),
            rate(a.seconds, k * len, || {
                let sr: Vec<&[u8]> = rep.sources.iter().map(|&i| shards[i].as_slice()).collect();
                rep.apply(&sr, &mut [out[0].as_mut_slice()]).expect("valid shapes");
            }),
        );
        // Check the measured work was right, so a fast wrong kernel cannot pass.
        {
            let sr: Vec<&[u8]> = dec.sources.iter().map(|&i| shards[i].as_slice()).collect();
            let mut dr: Vec<&mut [u8]> = out.iter_mut().map(|x| x.as_mut_slice()).collect();
            dec.apply(&sr, &mut dr)?;
            if (0..4).any(|i| out[i] != shards[lost[i]]) {
                bail!("decode produced wrong bytes with kernel {kernel}");
            }
        }
        let isal = match &a.isal {
            Some(bin) => Some(run_isal(bin, len, a.seconds)?),
            None => None,
        };
        for (key, v) in r {
            if let Some(i) = isal.as_ref().and_then(|m| m.get(&key)) {
                theirs.entry(key.clone()).or_default().push(*i);
                ratios.entry(key.clone()).or_default().push(v / i);
            }
            ours.entry(key).or_default().push(v);
        }
    }
    let spread: BTreeMap<String, Stat> = ours.iter().map(|(k, v)| (k.clone(), stat(v))).collect();
    let summarise =
        |m: &BTreeMap<String, Vec<f64>>| (!m.is_empty()).then(|| m.iter().map(|(k, v)| (k.clone(), stat(v))).collect::<BTreeMap<_, _>>());
    let report = CodecReport {
        kernel: kernel.to_string(),
        kernels_available: Kernel::available().iter().map(|k| k.to_string()).collect(),
        shard_bytes: len,
        runs: a.runs,
        mad_gbps: spread["mad_gbps"].median,
        encode_rs10_4_gbps: spread["encode_rs10_4_gbps"].median,
        decode_rs10_4_gbps: spread["decode_rs10_4_gbps"].median,
        repair_rs10_4_gbps: spread["repair_rs10_4_gbps"].median,
        spread: spread.clone(),
        isal: summarise(&theirs),
        ratio: summarise(&ratios),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "kernel {} (available: {}), shards of {} bytes, {} runs of {} s, one thread",
        report.kernel,
        report.kernels_available.join(", "),
        len,
        a.runs,
        a.seconds
    );
    println!("{:<22} {:>10} {:>16} {:>10} {:>14}", "metric (GB/s)", "median", "min..max", "ISA-L", "ours/ISA-L");
    for (key, s) in &spread {
        let isal = report.isal.as_ref().and_then(|m| m.get(key)).map_or("-".to_string(), |s| format!("{:.2}", s.median));
        let ratio = report
            .ratio
            .as_ref()
            .and_then(|m| m.get(key))
            .map_or("-".to_string(), |s| format!("{:.2} ({:.2}..{:.2})", s.median, s.min, s.max));
        println!("{:<22} {:>10.2} {:>16} {:>10} {:>14}", key, s.median, format!("{:.2}..{:.2}", s.min, s.max), isal, ratio);
    }
    Ok(())
}
