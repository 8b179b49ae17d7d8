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
    /// What serving Prometheus metrics costs: relay CPU per byte and put/get throughput with
    /// metrics on (scraped) and off in one run, and how long scrapes of busy nodes take.
    Metrics(crate::bench_metrics::MetricsArgs),
    /// Full-node repair time against the network's lower bound, every object verified
    /// (embedded cluster, or the netns testbed with --testbed).
    FullNode(crate::bench_fullnode::FullNodeArgs),
    /// ChameleonEC's straggler-aware re-scheduling against ETRP alone: full-node repair
    /// with readers taking one participant's uplink mid-phase, every object verified.
    Sar(crate::bench_sar::SarArgs),
    /// Geometric Partitioning on the embedded cluster with emulated HDDs: recovery, normal,
    /// degraded and range reads for the Geo, Contiguous, Stripe-Max and Stripe layouts.
    Geo(crate::bench_geo::GeoBenchArgs),
    /// The coordinator's metadata operations at N objects: p50/p99 of create, commit,
    /// lookup, a listing page, delete, marking a chunk bad and a node's inventory reconcile;
    /// store size, coordinator RSS and restart time.
    Meta(crate::bench_meta::MetaBenchArgs),
    /// The S3 gateway (its own process) against the client library on one embedded cluster:
    /// large-object PUT/GET throughput ratio, small-object PUT/GET/LIST rates and latency
    /// with many clients, and the gateway's peak RSS.
    S3(crate::bench_s3::S3BenchArgs),
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
    /// Force a GF kernel (scalar, ssse3, avx2, gfni, avx512, gfni512); default: the fastest
    /// available for each operation.
    #[arg(long)]
    pub kernel: Option<Kernel>,
    /// ISA-L to compare with, in the same run: a shared library (`libisal.so.2`, Debian's
    /// libisal2), loaded into this process and interleaved with ours in short bursts on the
    /// same buffers, its output checked against ours; or a built isal_ref program (gcc -O2
    /// ../shared/tools/isal_ref.c -lisal), run between our measurements.
    #[arg(long)]
    pub isal: Option<PathBuf>,
    /// With a loaded ISA-L library: which of its entry points to run, `auto` (its own
    /// dispatch) or one instruction set it exports (sse, avx, avx2, avx512), e.g. `avx2` with
    /// `--kernel avx2` for what an AVX2-only machine runs.
    #[arg(long, default_value = "auto")]
    pub isal_arch: String,
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
        BenchCmd::Sar(a) => crate::bench_sar::run(a),
        BenchCmd::Geo(a) => crate::bench_geo::run(a),
        BenchCmd::Meta(a) => crate::bench_meta::run(a),
        BenchCmd::S3(a) => crate::bench_s3::run(a),
        BenchCmd::Metrics(a) => crate::bench_metrics::run(a),
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

/// `numerator / denominator` per run, summarised over the runs whose denominator counted
/// something. A CPU clock can read zero for a short run (a node's counts come in 10 ms
/// ticks); that run says nothing about the ratio, and dividing by it would report ratios
/// like 1e12. `None` when no run's denominator counted.
pub(crate) fn ratio_stat(runs: impl IntoIterator<Item = (f64, f64)>) -> Option<Stat> {
    let r: Vec<f64> = runs.into_iter().filter(|&(_, d)| d > 0.0 && d.is_finite()).map(|(n, d)| n / d).collect();
    (!r.is_empty()).then(|| stat(&r))
}

/// A ratio for a table: three decimals, or "-" when no run measured it.
pub(crate) fn ratio_cell(s: &Option<Stat>) -> String {
    s.as_ref().map_or("-".to_string(), |s| format!("{:.3}", s.median))
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
    /// The kernel of dot products (encode, decode, repair).
    kernel: String,
    /// The kernel of a single multiply-add (mad).
    mul_kernel: String,
    /// What ISA-L ran: its own dispatch ("auto") or one instruction set's entry points.
    #[serde(skip_serializing_if = "Option::is_none")]
    isal_arch: Option<String>,
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

/// Whether `--isal` names a shared library (loaded in-process) rather than a program.
fn is_shared_library(p: &std::path::Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".so") || n.contains(".so."))
}

/// ISA-L in this process, with its tables for the benchmark's four operations.
struct InProcess {
    isal: crate::bench_isal::Isal,
    mad: crate::bench_isal::Tables,
    encode: crate::bench_isal::Tables,
    decode: crate::bench_isal::Tables,
    repair: crate::bench_isal::Tables,
}

impl InProcess {
    fn new(
        isal: crate::bench_isal::Isal,
        code: &dyn kintsugi_codes::Code,
        dec: &kintsugi_codes::Decoder,
        rep: &kintsugi_codes::Decoder,
    ) -> Result<InProcess> {
        let (k, m) = (code.k(), code.n() - code.k());
        // ISA-L encodes with its own Cauchy matrix, independent of ours; check() compares.
        let gen = isal.cauchy(k, m);
        let coefs = |d: &kintsugi_codes::Decoder| -> Result<Vec<u8>> {
            let mx = d.matrix().context("an RS decoder is one matrix")?;
            Ok((0..mx.rows()).flat_map(|r| (0..mx.cols()).map(move |c| mx.coef(r, c))).collect())
        };
        Ok(InProcess {
            mad: isal.tables(1, 1, &[0x5d]),
            encode: isal.tables(k, m, &gen[k * k..]),
            decode: isal.tables(dec.sources.len(), dec.targets.len(), &coefs(dec)?),
            repair: isal.tables(rep.sources.len(), rep.targets.len(), &coefs(rep)?),
            isal,
        })
    }

    /// ISA-L's results equal ours and the original shards: an independent oracle for our
    /// kernels, and proof that both sides do the same work.
    fn check(
        &self,
        shards: &[Vec<u8>],
        k: usize,
        dec: &kintsugi_codes::Decoder,
        rep: &kintsugi_codes::Decoder,
        lost: &[usize],
    ) -> Result<()> {
        let len = shards[0].len();
        let data: Vec<&[u8]> = shards[..k].iter().map(|x| x.as_slice()).collect();
        let mut par = vec![vec![0u8; len]; shards.len() - k];
        let mut pr: Vec<&mut [u8]> = par.iter_mut().map(|x| x.as_mut_slice()).collect();
        self.isal.encode(&self.encode, &data, &mut pr);
        if par.iter().zip(&shards[k..]).any(|(a, b)| a != b) {
            bail!("ISA-L's parity differs from ours");
        }
        let src: Vec<&[u8]> = dec.sources.iter().map(|&i| shards[i].as_slice()).collect();
        let mut out = vec![vec![0u8; len]; lost.len()];
        let mut or: Vec<&mut [u8]> = out.iter_mut().map(|x| x.as_mut_slice()).collect();
        self.isal.encode(&self.decode, &src, &mut or);
        let src: Vec<&[u8]> = rep.sources.iter().map(|&i| shards[i].as_slice()).collect();
        let mut one = vec![0u8; len];
        self.isal.encode(&self.repair, &src, &mut [one.as_mut_slice()]);
        if out.iter().zip(lost).any(|(o, &i)| *o != shards[i]) || one != shards[rep.targets[0]] {
            bail!("ISA-L's decode with our decoding matrices does not give the lost shards");
        }
        let mut a = shards[1].clone();
        let mut b = shards[1].clone();
        self.isal.mad(&self.mad, &shards[0], &mut a);
        mul_add(0x5d, &shards[0], &mut b);
        if a != b {
            bail!("ISA-L's multiply-add differs from ours");
        }
        Ok(())
    }
}

/// GB/s of `ours` and `theirs` on `bytes` per call, alternating bursts of a few ms for about
/// 2 x `seconds`, each side going first in turn: both see the same machine.
fn interleaved(seconds: f64, bytes: usize, ours: &mut dyn FnMut(), theirs: &mut dyn FnMut()) -> (f64, f64) {
    ours();
    theirs();
    let burst = (seconds / 25.0).max(0.002);
    let mut time = [0f64; 2];
    let mut calls = [0u64; 2];
    let start = Instant::now();
    let mut round = 0usize;
    while start.elapsed().as_secs_f64() < 2.0 * seconds {
        for side in [round % 2, 1 - round % 2] {
            let t0 = Instant::now();
            loop {
                if side == 0 {
                    ours()
                } else {
                    theirs()
                }
                calls[side] += 1;
                if t0.elapsed().as_secs_f64() >= burst {
                    break;
                }
            }
            time[side] += t0.elapsed().as_secs_f64();
        }
        round += 1;
    }
    (calls[0] as f64 * bytes as f64 / time[0] / 1e9, calls[1] as f64 * bytes as f64 / time[1] / 1e9)
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
    // Ours and ISA-L write the same output buffers, so alignment and cache state are alike.
    let out = std::cell::RefCell::new(vec![vec![0u8; len]; 4]);
    let in_process = match &a.isal {
        Some(p) if is_shared_library(p) => {
            Some(InProcess::new(crate::bench_isal::Isal::open(p, &a.isal_arch)?, code.as_ref(), &dec, &rep)?)
        }
        _ if a.isal_arch != "auto" => bail!("--isal-arch needs --isal with ISA-L's shared library (libisal.so.2)"),
        _ => None,
    };
    if let Some(ip) = &in_process {
        ip.check(&shards, k, &dec, &rep, &lost)?;
    }
    for _ in 0..a.runs {
        let mut r = BTreeMap::new();
        let mut t = BTreeMap::new();
        let dst = std::cell::RefCell::new(vec![0u8; len]);
        let data: Vec<&[u8]> = shards[..k].iter().map(|x| x.as_slice()).collect();
        let dec_src: Vec<&[u8]> = dec.sources.iter().map(|&i| shards[i].as_slice()).collect();
        let rep_src: Vec<&[u8]> = rep.sources.iter().map(|&i| shards[i].as_slice()).collect();
        let mut measure = |key: &str, bytes: usize, ours_fn: &mut dyn FnMut(), theirs_fn: Option<Box<dyn FnMut() + '_>>| match theirs_fn {
            Some(mut f) => {
                let (o, i) = interleaved(a.seconds, bytes, ours_fn, &mut *f);
                r.insert(key.to_string(), o);
                t.insert(key.to_string(), i);
            }
            None => {
                r.insert(key.to_string(), rate(a.seconds, bytes, ours_fn));
            }
        };
        let ip = in_process.as_ref();
        measure(
            "mad_gbps",
            len,
            &mut || mul_add(0x5d, &shards[0], &mut dst.borrow_mut()),
            ip.map(|ip| Box::new(|| ip.isal.mad(&ip.mad, &shards[0], &mut dst.borrow_mut())) as Box<dyn FnMut()>),
        );
        measure(
            "encode_rs10_4_gbps",
            k * len,
            &mut || {
                let mut o = out.borrow_mut();
                let mut pr: Vec<&mut [u8]> = o.iter_mut().map(|x| x.as_mut_slice()).collect();
                code.encode(&data, &mut pr).expect("valid shapes");
            },
            ip.map(|ip| {
                Box::new(|| {
                    let mut o = out.borrow_mut();
                    let mut pr: Vec<&mut [u8]> = o.iter_mut().map(|x| x.as_mut_slice()).collect();
                    ip.isal.encode(&ip.encode, &data, &mut pr)
                }) as Box<dyn FnMut()>
            }),
        );
        measure(
            "decode_rs10_4_gbps",
            k * len,
            &mut || {
                let mut o = out.borrow_mut();
                let mut dr: Vec<&mut [u8]> = o.iter_mut().map(|x| x.as_mut_slice()).collect();
                dec.apply(&dec_src, &mut dr).expect("valid shapes");
            },
            ip.map(|ip| {
                Box::new(|| {
                    let mut o = out.borrow_mut();
                    let mut dr: Vec<&mut [u8]> = o.iter_mut().map(|x| x.as_mut_slice()).collect();
                    ip.isal.encode(&ip.decode, &dec_src, &mut dr)
                }) as Box<dyn FnMut()>
            }),
        );
        measure(
            "repair_rs10_4_gbps",
            k * len,
            &mut || rep.apply(&rep_src, &mut [out.borrow_mut()[0].as_mut_slice()]).expect("valid shapes"),
            ip.map(|ip| Box::new(|| ip.isal.encode(&ip.repair, &rep_src, &mut [out.borrow_mut()[0].as_mut_slice()])) as Box<dyn FnMut()>),
        );
        // Check the measured work was right, so a fast wrong kernel cannot pass.
        {
            let mut o = out.borrow_mut();
            let mut dr: Vec<&mut [u8]> = o.iter_mut().map(|x| x.as_mut_slice()).collect();
            dec.apply(&dec_src, &mut dr)?;
            if (0..4).any(|i| o[i] != shards[lost[i]]) {
                bail!("decode produced wrong bytes with kernel {kernel}");
            }
        }
        if in_process.is_none() {
            if let Some(bin) = &a.isal {
                t = run_isal(bin, len, a.seconds)?;
            }
        }
        for (key, v) in r {
            if let Some(i) = t.get(&key) {
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
        mul_kernel: Kernel::active_for(kintsugi_gf::Op::Mul).to_string(),
        isal_arch: in_process.as_ref().map(|ip| ip.isal.arch.clone()).or(a.isal.as_ref().map(|_| "auto".to_string())),
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
        "kernel {} for dot products, {} for mad (available: {}){}, shards of {} bytes, {} runs of {} s, one thread",
        report.kernel,
        report.mul_kernel,
        report.kernels_available.join(", "),
        match (&in_process, &report.isal_arch) {
            (Some(_), Some(arch)) => format!("; ISA-L in this process, interleaved, entry points {arch}"),
            (None, Some(_)) => "; ISA-L's reference program between runs".to_string(),
            _ => String::new(),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_stat_skips_runs_whose_denominator_read_zero() {
        let s = ratio_stat([(3.0, 2.0), (5.0, 0.0), (1.0, 1.0), (4.0, f64::NAN)]).expect("two runs counted");
        assert_eq!((s.median, s.min, s.max), (1.25, 1.0, 1.5));
        assert!(ratio_stat([(1.0, 0.0), (0.0, 0.0)]).is_none());
        assert_eq!(ratio_cell(&None), "-");
        assert_eq!(ratio_cell(&ratio_stat([(0.0, 2.0)])), "0.000");
    }
}
