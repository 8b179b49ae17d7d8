//! `kintsugi load`: a YCSB-style foreground workload against a running cluster's object API
//! (ChameleonEC's foreground traffic). Workload A by default: 50% reads, 50% updates
//! (whole-object overwrites), keys drawn zipfian (0.99, scrambled), 512 KiB values, as in
//! the ChameleonEC paper's setup; or stand-ins for its other traces (`load_traces`), in turn
//! with `--switch`. A load phase writes every record first; then `--clients` concurrent
//! clients run for `--seconds`. Latencies go into HdrHistograms, overall and per second of
//! the run.

use crate::load_traces::Trace;
use crate::units::{human_bytes, parse_size};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::Shape;
use kintsugi_sim::zipf::Zipfian;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LoadArgs {
    #[command(flatten)]
    pub target: crate::cluster_cmd::Target,
    /// Concurrent clients (in the load phase too).
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Records (objects) the workload reads and updates.
    #[arg(long, default_value_t = 100)]
    pub records: u64,
    /// Bytes per value.
    #[arg(long, default_value = "512KiB", value_parser = parse_size)]
    pub value_size: usize,
    /// Fraction of operations that are reads (the rest update): 0.5 is YCSB workload A.
    #[arg(long, default_value_t = 0.5)]
    pub read_fraction: f64,
    /// Zipfian skew of the key choice (YCSB's default).
    #[arg(long, default_value_t = 0.99)]
    pub zipf: f64,
    /// Length of the run phase (0: the load phase only).
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Code of the records.
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Prefix of the record names.
    #[arg(long, default_value = "ycsb")]
    pub prefix: String,
    /// Workloads: ycsb-a, twitter, etc, ibm (stand-ins for ChameleonEC's traces), comma
    /// separated; with several, --switch rotates them.
    #[arg(long, value_delimiter = ',', default_value = "ycsb-a")]
    pub workload: Vec<Trace>,
    /// Switch to the next workload every this many seconds (ChameleonEC's Exp#4: 15);
    /// 0: only the first runs.
    #[arg(long, default_value_t = 0.0)]
    pub switch: f64,
    /// The IBM stand-in's largest value (the trace's 2.4 GB, scaled to this machine).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub max_value: usize,
    /// Skip the load phase (the records exist from an earlier run).
    #[arg(long)]
    pub no_load: bool,
    /// Per-second rows as CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Seed of the key and operation choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Latency percentiles of one operation kind, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub ops: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Self {
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        Latency { ops: h.len(), p50_ms: ms(0.5), p99_ms: ms(0.99), p999_ms: ms(0.999), max_ms: h.max() as f64 / 1000.0 }
    }
}

#[derive(Debug, Serialize)]
pub struct Second {
    pub second: u64,
    /// The workload running in that second.
    pub workload: &'static str,
    pub ops_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub errors: u64,
}

#[derive(Debug, Serialize)]
pub struct LoadReport {
    pub workload: String,
    pub clients: usize,
    pub records: u64,
    pub value_size: usize,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub mb_per_s: f64,
    pub errors: u64,
    pub all: Latency,
    pub read: Latency,
    pub update: Latency,
    pub per_second: Vec<Second>,
    /// Client CPU (user + system) per operation, microseconds: the generator's own cost.
    pub client_cpu_us_per_op: f64,
}

fn histogram() -> Histogram<u64> {
    // Microseconds, 1 us to 1 hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// What the clients share: histograms overall and per second.
struct Recorder {
    start: Instant,
    read: Histogram<u64>,
    update: Histogram<u64>,
    per_second: Vec<(Histogram<u64>, u64)>,
}

impl Recorder {
    fn record(&mut self, read: bool, at: Instant, latency: Duration, ok: bool) {
        let us = (latency.as_micros() as u64).clamp(1, 3_600_000_000);
        let sec = at.duration_since(self.start).as_secs() as usize;
        while self.per_second.len() <= sec {
            self.per_second.push((histogram(), 0));
        }
        if !ok {
            self.per_second[sec].1 += 1;
            return;
        }
        let h = if read { &mut self.read } else { &mut self.update };
        let _ = h.record(us);
        let _ = self.per_second[sec].0.record(us);
    }
}

fn value(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    }
}

pub fn run(a: LoadArgs) -> Result<()> {
    if a.clients == 0 || a.records == 0 || !(0.0..=1.0).contains(&a.read_fraction) || !(a.zipf > 0.0 && a.zipf < 1.0) {
        bail!("--clients and --records must be positive, --read-fraction within [0, 1], --zipf within (0, 1)");
    }
    if !(a.seconds >= 0.0 && a.seconds.is_finite()) {
        bail!("--seconds must be a number of seconds (0: the load phase only)");
    }
    if !(a.switch >= 0.0 && a.switch.is_finite()) || a.workload.is_empty() {
        bail!("--switch must be a non-negative number of seconds, and --workload name at least one workload");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let (load, report) = rt.block_on(run_async(&a))?;
    if !load.is_empty() {
        let rates: Vec<String> = load.iter().map(|r| format!("{r:.0}")).collect();
        let msg = format!("load: puts/s over each tenth of the {} records: {}", a.records * a.workload.len() as u64, rates.join(" "));
        if a.target.json && report.is_none() {
            println!("{}", serde_json::json!({ "load_puts_per_s_by_tenth": load }));
        } else {
            eprintln!("{msg}");
        }
    }
    let Some(report) = report else { return Ok(()) };
    if let Some(path) = &a.csv {
        let mut out = String::from("second,workload,ops_per_s,p50_ms,p99_ms,p999_ms,errors\n");
        for s in &report.per_second {
            out +=
                &format!("{},{},{:.1},{:.3},{:.3},{:.3},{}\n", s.second, s.workload, s.ops_per_s, s.p50_ms, s.p99_ms, s.p999_ms, s.errors);
        }
        std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if a.target.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {} clients, {:.1} s: {:.1} ops/s ({}/s), {} errors; client CPU {:.0} us/op",
            report.workload,
            report.clients,
            report.seconds,
            report.ops_per_s,
            human_bytes(report.mb_per_s as u64 * 1_000_000),
            report.errors,
            report.client_cpu_us_per_op
        );
        println!("{:<8} {:>8} {:>10} {:>10} {:>10} {:>10}", "op", "count", "p50 ms", "p99 ms", "p99.9 ms", "max ms");
        for (name, l) in [("read", &report.read), ("update", &report.update), ("all", &report.all)] {
            println!("{name:<8} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2}", l.ops, l.p50_ms, l.p99_ms, l.p999_ms, l.max_ms);
        }
        // Per second: how the latency moved during the run (a failure, a repair).
        println!();
        println!("{:>6} {:<10} {:>9} {:>10} {:>10} {:>10} {:>7}", "second", "workload", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "errors");
        for s in &report.per_second {
            println!(
                "{:>6} {:<10} {:>9.1} {:>10.2} {:>10.2} {:>10.2} {:>7}",
                s.second, s.workload, s.ops_per_s, s.p50_ms, s.p99_ms, s.p999_ms, s.errors
            );
        }
    }
    Ok(())
}

/// What the clients run: the workload's shape, without where or for how long.
#[derive(Clone, Debug)]
pub struct Workload {
    pub clients: usize,
    pub records: u64,
    pub value_size: usize,
    pub read_fraction: f64,
    pub zipf: f64,
    pub code: CodeSpec,
    pub prefix: String,
    pub seed: u64,
    /// The workloads, in turn every `switch` (none: the first throughout).
    pub traces: Vec<Trace>,
    pub switch: Option<Duration>,
    /// The IBM stand-in's largest value.
    pub max_value: usize,
}

/// The foreground workload before and during a repair, and ChameleonEC's interference
/// degree between them.
#[derive(Clone, Debug, Serialize)]
pub struct Interference {
    pub baseline_ops_per_s: f64,
    pub baseline_p50_ms: f64,
    pub baseline_p99_ms: f64,
    pub during_ops_per_s: f64,
    pub during_p50_ms: f64,
    pub during_p99_ms: f64,
    /// T*/T - 1 (ChameleonEC): how much longer a fixed set of operations takes while the
    /// repair runs, from the two throughputs (a trace that runs entirely during it).
    pub interference: f64,
    /// Seconds the repair adds to any trace that outlasts it: its length x the share of
    /// the baseline throughput lost meanwhile. ChameleonEC's interference degree for a
    /// trace of length T is this over T, so methods compare by it whatever their repair's
    /// length.
    pub delay_seconds: f64,
    pub errors: u64,
}

impl Interference {
    pub fn new(baseline: &LoadReport, during: &LoadReport) -> Self {
        Interference {
            baseline_ops_per_s: baseline.ops_per_s,
            baseline_p50_ms: baseline.all.p50_ms,
            baseline_p99_ms: baseline.all.p99_ms,
            during_ops_per_s: during.ops_per_s,
            during_p50_ms: during.all.p50_ms,
            during_p99_ms: during.all.p99_ms,
            interference: baseline.ops_per_s / during.ops_per_s.max(1e-9) - 1.0,
            delay_seconds: during.seconds * (1.0 - during.ops_per_s / baseline.ops_per_s.max(1e-9)),
            errors: baseline.errors + during.errors,
        }
    }

    /// Field by field medians of several runs' rows; None for none.
    pub fn median(rows: &[Interference]) -> Option<Interference> {
        if rows.is_empty() {
            return None;
        }
        let m = |f: fn(&Interference) -> f64| crate::bench::stat(&rows.iter().map(f).collect::<Vec<_>>()).median;
        Some(Interference {
            baseline_ops_per_s: m(|r| r.baseline_ops_per_s),
            baseline_p50_ms: m(|r| r.baseline_p50_ms),
            baseline_p99_ms: m(|r| r.baseline_p99_ms),
            during_ops_per_s: m(|r| r.during_ops_per_s),
            during_p50_ms: m(|r| r.during_p50_ms),
            during_p99_ms: m(|r| r.during_p99_ms),
            interference: m(|r| r.interference),
            delay_seconds: m(|r| r.delay_seconds),
            errors: rows.iter().map(|r| r.errors).sum(),
        })
    }
}

impl Workload {
    /// YCSB workload A (50% reads, 50% overwrites, zipfian 0.99) over `records` records
    /// named `ycsb...`, the foreground of the benchmarks and the demo.
    pub fn ycsb_a(clients: usize, records: u64, value_size: usize, code: CodeSpec) -> Self {
        Workload {
            clients,
            records,
            value_size,
            read_fraction: 0.5,
            zipf: 0.99,
            code,
            prefix: "ycsb".into(),
            seed: 1,
            traces: vec![Trace::YcsbA],
            switch: None,
            max_value: value_size,
        }
    }

    fn of(a: &LoadArgs) -> Self {
        Workload {
            clients: a.clients,
            records: a.records,
            value_size: a.value_size,
            read_fraction: a.read_fraction,
            zipf: a.zipf,
            code: a.code,
            prefix: a.prefix.clone(),
            seed: a.seed,
            traces: a.workload.clone(),
            switch: (a.switch > 0.0).then(|| Duration::from_secs_f64(a.switch)),
            max_value: a.max_value,
        }
    }

    /// What runs, for reports.
    fn describe(&self) -> String {
        let one = |t: Trace| match t {
            Trace::YcsbA => format!("ycsb-a (read {:.0}% / update {:.0}%)", self.read_fraction * 100.0, (1.0 - self.read_fraction) * 100.0),
            t => format!("{} (read {:.0}%)", t.name(), t.read_fraction(self.read_fraction) * 100.0),
        };
        let names: Vec<String> = self.traces.iter().map(|&t| one(t)).collect();
        match self.switch.filter(|_| self.traces.len() > 1) {
            Some(s) => format!("{}, switching every {} s, zipfian {}", names.join(" -> "), s.as_secs_f64(), self.zipf),
            None => format!("{}, zipfian {}", names[0], self.zipf),
        }
    }

    /// Record k of a workload: its key and value size.
    fn record(&self, t: Trace, k: u64) -> (String, usize) {
        (t.key(&self.prefix, k, self.seed), t.value_len(k, self.seed, self.value_size, self.max_value))
    }

    /// The load phase: writes every record of every workload once, `clients` puts at a
    /// time. Returns the put rate over each tenth of the records, in order (a rate that
    /// falls as the store fills is a cost that grows with the objects stored).
    pub async fn load(&self, client: &Client, progress: bool) -> Result<Vec<f64>> {
        use std::sync::atomic::{AtomicU64, Ordering};
        let total = self.records * self.traces.len() as u64;
        let bar = progress.then(|| Arc::new(crate::progress::Progress::count("load: records written", total)));
        let next = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        // When each tenth of the records was written.
        let marks = Arc::new(Mutex::new(Vec::new()));
        let mut set = tokio::task::JoinSet::new();
        for c in 0..self.clients.max(1) {
            let (w, client, next, done, bar, marks) =
                (self.clone(), client.clone(), next.clone(), done.clone(), bar.clone(), marks.clone());
            set.spawn(async move {
                let mut rng = StdRng::seed_from_u64(w.seed ^ 0x10ad ^ c as u64);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return Ok::<(), anyhow::Error>(());
                    }
                    let (t, k) = (w.traces[(i / w.records) as usize], i % w.records);
                    let (name, len) = w.record(t, k);
                    let v = value(&mut rng, len);
                    client.put(&name, &v, w.code, 0).await.map_err(|e| anyhow!("loading {name}: {e}"))?;
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if d * 10 / total != (d - 1) * 10 / total {
                        marks.lock().expect("marks lock").push(start.elapsed().as_secs_f64());
                    }
                    if let Some(b) = &bar {
                        b.set(d);
                    }
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.map_err(|e| anyhow!("a loading client failed: {e}"))??;
        }
        let marks = marks.lock().expect("marks lock").clone();
        let tenth = total as f64 / 10.0;
        Ok(marks.iter().enumerate().map(|(i, &t)| tenth / (t - if i == 0 { 0.0 } else { marks[i - 1] }).max(1e-9)).collect())
    }

    /// The run phase: the clients issue operations until `stop` is set or `limit` passes.
    pub async fn run(&self, client: &Client, stop: Arc<std::sync::atomic::AtomicBool>, limit: Duration) -> Result<LoadReport> {
        use std::sync::atomic::Ordering;
        let zipf = Arc::new(Zipfian::new(self.records, self.zipf));
        let start = Instant::now();
        let deadline = start + limit;
        let rec = Arc::new(Mutex::new(Recorder { start, read: histogram(), update: histogram(), per_second: Vec::new() }));
        let cpu0 = cpu_seconds();
        // Per workload: each record's key and value size.
        let records: Arc<Vec<Vec<(String, usize)>>> =
            Arc::new(self.traces.iter().map(|&t| (0..self.records).map(|k| self.record(t, k)).collect()).collect());
        let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut tasks = Vec::new();
        for c in 0..self.clients {
            let (client, zipf, rec, records, stop, bytes) =
                (client.clone(), zipf.clone(), rec.clone(), records.clone(), stop.clone(), bytes.clone());
            let (traces, switch, ycsb_read, code, seed) = (self.traces.clone(), self.switch, self.read_fraction, self.code, self.seed);
            tasks.push(tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003) ^ c as u64);
                while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                    let t = crate::load_traces::active(&traces, switch, start.elapsed());
                    let i = traces.iter().position(|&x| x == t).expect("the active workload is one of them");
                    let (key, len) = &records[i][zipf.key(&mut rng) as usize];
                    let read = rng.random_bool(t.read_fraction(ycsb_read));
                    let t0 = Instant::now();
                    let ok = if read {
                        client.get(key, Shape::Ecpipe, 32 << 10).await.is_ok()
                    } else {
                        let v = value(&mut rng, *len);
                        client.put(key, &v, code, 0).await.is_ok()
                    };
                    if ok {
                        bytes.fetch_add(*len as u64, Ordering::Relaxed);
                    }
                    rec.lock().expect("recorder").record(read, t0, t0.elapsed(), ok);
                }
            }));
        }
        for t in tasks {
            t.await.map_err(|e| anyhow!("a client failed: {e}"))?;
        }
        let elapsed = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        let r = rec.lock().expect("recorder");
        let mut all = histogram();
        all.add(&r.read).expect("same bounds");
        all.add(&r.update).expect("same bounds");
        let errors: u64 = r.per_second.iter().map(|s| s.1).sum();
        let per_second = r
            .per_second
            .iter()
            .enumerate()
            .map(|(i, (h, e))| {
                let l = Latency::of(h);
                let workload = crate::load_traces::active(&self.traces, self.switch, Duration::from_secs(i as u64)).name();
                Second {
                    second: i as u64,
                    workload,
                    ops_per_s: h.len() as f64,
                    p50_ms: l.p50_ms,
                    p99_ms: l.p99_ms,
                    p999_ms: l.p999_ms,
                    errors: *e,
                }
            })
            .collect();
        let ops = all.len();
        Ok(LoadReport {
            workload: self.describe(),
            clients: self.clients,
            records: self.records,
            value_size: self.value_size,
            seconds: elapsed,
            ops_per_s: ops as f64 / elapsed,
            mb_per_s: bytes.load(Ordering::Relaxed) as f64 / elapsed / 1e6,
            errors,
            all: Latency::of(&all),
            read: Latency::of(&r.read),
            update: Latency::of(&r.update),
            per_second,
            client_cpu_us_per_op: cpu / ops.max(1) as f64 * 1e6,
        })
    }
}

/// The load phase's put rates per tenth of the records, and the run phase's report.
async fn run_async(a: &LoadArgs) -> Result<(Vec<f64>, Option<LoadReport>)> {
    let mut client = Client::new(&a.target.address()?);
    client.io_timeout = Duration::from_secs(30);
    let w = Workload::of(a);
    let load = if a.no_load { Vec::new() } else { w.load(&client, true).await? };
    if a.seconds == 0.0 {
        return Ok((load, None));
    }
    Ok((load, Some(w.run(&client, Default::default(), Duration::from_secs_f64(a.seconds)).await?)))
}
