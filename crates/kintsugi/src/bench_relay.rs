//! `kintsugi bench relay`: CPU per byte of the repair data path, role by role, beside a plain
//! TCP forwarder moving the same bytes in the same slices in the same run.
//!
//! Three real node processes on loopback, unshaped, run an ECPipe chain of RS(2,1) again and
//! again: node 0 is a source (reads and multiplies its chunk, sends), node 1 a relay (receives,
//! reads its own chunk, multiplies and adds, sends), node 2 the sink (receives, adds, writes the
//! chunk durably). Each process's user + system CPU comes from /proc/PID/stat, so the kernel's
//! share of TCP and disk is counted too. The forwarder is three threads of this process:
//! write, read-and-write, read; its CPU comes from getrusage(RUSAGE_THREAD). The ratio
//! node/forwarder per role is what this benchmark is for: perf's cycle counters are not
//! available on every machine (not here), and callgrind does not see the kernel's work.
//!
//! Beside it, an equal-work forwarder (`bench_relay_equal_work`) does the chain's own work
//! in plain threads: reads and checks the helper chunks, multiplies and adds, seals and opens
//! the records, writes and fsyncs the rebuilt chunk. Node / plain forwarder is what a role
//! costs over moving bytes; node / equal-work is what the system's framework (tasks, frames,
//! read caches, the plan) costs over that work itself.
//!
//! To see where a role's user-space instructions go, run its node under valgrind:
//! `KINTSUGI_WRAP1="--tool=callgrind --callgrind-out-file=relay.cg" kintsugi bench relay`
//! (0 source, 1 relay, 2 sink); its CPU figures are then valgrind's, not the node's.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use kintsugi_codes::{Code, CodeSpec};
use kintsugi_node::ChunkStore;
use kintsugi_plan::{shapes, RepairTask, Shape};
use kintsugi_proto::secure::Protection;
use kintsugi_proto::{Assignment, ChunkId, NodeRequest, NodeResponse, StoreSpec};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::units::parse_nonzero_size;

/// The repairs a relay benchmark runs: an ECPipe chain of RS(2,1) over three node processes.
#[derive(Args, Debug)]
pub struct ChainArgs {
    /// Chunk size of each repair.
    #[arg(long, default_value = "64MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    /// Slice size (the unit of pipelining and of the forwarder's reads and writes).
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Bytes every role moves per run (per side and run in `bench metrics`; whole chunks:
    /// rounded up).
    #[arg(long, default_value = "512MiB", value_parser = parse_nonzero_size)]
    pub bytes: usize,
}

impl ChainArgs {
    /// The repairs per run and the bytes they move, once the sizes are checked.
    pub fn repairs(&self) -> Result<(usize, usize)> {
        if self.slice > self.chunk {
            bail!("--slice ({}) must not exceed --chunk ({})", self.slice, self.chunk);
        }
        let repairs = self.bytes.div_ceil(self.chunk).max(1);
        Ok((repairs, repairs * self.chunk))
    }
}

#[derive(Args, Debug)]
pub struct RelayArgs {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// Repetitions; medians and the spread are reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Connection protections to measure, each on its own three nodes, in the same runs:
    /// encrypted, authenticated, open (comma-separated; the first is the table's).
    #[arg(long = "protections", default_value = "encrypted", value_delimiter = ',', value_parser = parse_protection)]
    pub protections: Vec<Protection>,
    /// Threads of each node's runtime [default: the node's own, one per core]. The testbed
    /// gives its nodes cores/nodes of them; 1 here is that rule for three nodes on two cores.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_protection(s: &str) -> Result<Protection, String> {
    if s == "open" {
        return Ok(Protection::Open);
    }
    s.parse()
}

#[derive(Serialize)]
struct RoleSummary {
    role: &'static str,
    node_ns_per_byte: crate::bench::Stat,
    forwarder_ns_per_byte: crate::bench::Stat,
    node_cycles_per_byte: f64,
    forwarder_cycles_per_byte: f64,
    /// node / forwarder, per run, summarised (null when the forwarder's CPU read zero).
    ratio: Option<crate::bench::Stat>,
    /// The equal-work forwarder (`bench_relay_equal_work`) under the same protection.
    equal_work_ns_per_byte: crate::bench::Stat,
    /// node / equal-work forwarder, per run: what the framework costs over the work itself
    /// (null when the equal-work forwarder's CPU read zero).
    over_equal_work: Option<crate::bench::Stat>,
}

/// One protection's figures.
#[derive(Serialize)]
struct ProtectionSummary {
    protection: Protection,
    chain_gbps: crate::bench::Stat,
    roles: Vec<RoleSummary>,
}

#[derive(Serialize)]
struct Report {
    /// Threads of each node's runtime, when set (else the node's default: one per core).
    worker_threads: Option<u16>,
    chunk_bytes: usize,
    slice_bytes: usize,
    bytes_per_run: usize,
    runs: usize,
    cpu_mhz: f64,
    /// Throughput of the unshaped chain and of the forwarder (GB/s of chunk data).
    chain_gbps: crate::bench::Stat,
    forwarder_gbps: crate::bench::Stat,
    /// The first protection's roles (the table's).
    roles: Vec<RoleSummary>,
    /// Every protection measured, in the order given.
    protections: Vec<ProtectionSummary>,
    /// CPU per byte encrypted / authenticated per role and run, summarised, when both ran.
    encrypted_over_authenticated: Option<Vec<(String, Option<crate::bench::Stat>)>>,
}

const ROLES: [&str; 3] = ["source", "relay", "sink"];

pub fn run(a: RelayArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let (repairs, bytes) = a.chain.repairs()?;
    let mhz = cpu_mhz();
    if a.protections.is_empty() {
        bail!("--protections needs at least one of encrypted, authenticated, open");
    }
    let dir = tempfile::tempdir()?;
    let secret = kintsugi_proto::auth::secret().unwrap_or_else(kintsugi_proto::auth::Secret::random);
    let mut sets = Vec::new();
    for (i, &p) in a.protections.iter().enumerate() {
        let d = dir.path().join(format!("set{i}"));
        std::fs::create_dir_all(&d)?;
        use_protection(p, &secret);
        sets.push(NodeProcs::start(&d, a.chain.chunk, false, a.worker_threads)?);
    }
    let equal = sets[0].equal_work(&dir.path().join("equal-work"))?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    // Per protection, per run: CPU per byte of each role, and the chain's GB/s.
    let mut node_runs: Vec<Vec<[f64; 3]>> = vec![Vec::new(); sets.len()];
    let mut equal_runs: Vec<Vec<[f64; 3]>> = vec![Vec::new(); sets.len()];
    let mut chain_gbps: Vec<Vec<f64>> = vec![Vec::new(); sets.len()];
    let mut fwd_runs: Vec<[f64; 3]> = Vec::new();
    let mut fwd_gbps = Vec::new();
    let mut next_repair = 1u64;
    for run in 0..a.runs {
        // Each run starts with another protection, so drift falls on all.
        for k in 0..sets.len() {
            let j = (k + run) % sets.len();
            use_protection(a.protections[j], &secret);
            let before = sets[j].cpu()?;
            let t = Instant::now();
            let rebuilt = rt.block_on(sets[j].repairs(&mut next_repair, repairs, a.chain.slice))?;
            let secs = t.elapsed().as_secs_f64();
            let after = sets[j].cpu()?;
            rt.block_on(sets[j].delete(rebuilt))?;
            chain_gbps[j].push(bytes as f64 / secs / 1e9);
            node_runs[j].push(std::array::from_fn(|i| (after[i] - before[i]) * 1e9 / bytes as f64));
        }
        let (cpu, secs) = forwarder(bytes, a.chain.slice)?;
        fwd_gbps.push(bytes as f64 / secs / 1e9);
        fwd_runs.push(std::array::from_fn(|i| cpu[i] * 1e9 / bytes as f64));
        // One uncounted chain first. On this VM the equal-work sink's page-cache writes
        // cost up to 0.9 ns/B more in some runs, by what ran before it (the cause is not
        // known): right after the nodes' chains it was slow whatever its protection, right
        // after another equal-work chain fast. A warm baseline is the cheaper one, so
        // node / equal-work can only come out larger for it.
        equal.run(repairs, a.chain.slice, a.protections[0])?;
        for (j, &p) in a.protections.iter().enumerate() {
            let (cpu, _) = equal.run(repairs, a.chain.slice, p)?;
            equal_runs[j].push(std::array::from_fn(|i| cpu[i] * 1e9 / bytes as f64));
        }
        if !a.json {
            let chains: Vec<String> = a.protections.iter().zip(&chain_gbps).map(|(p, g)| format!("{p} {:.2}", g[run])).collect();
            eprintln!("run {}/{}: chain GB/s {}, forwarder {:.2} GB/s", run + 1, a.runs, chains.join(", "), fwd_gbps[run]);
        }
    }
    drop(sets);
    let summary = |runs: &[[f64; 3]], equal: &[[f64; 3]]| -> Vec<RoleSummary> {
        ROLES
            .iter()
            .enumerate()
            .map(|(i, &role)| {
                let node: Vec<f64> = runs.iter().map(|r| r[i]).collect();
                let fwd: Vec<f64> = fwd_runs.iter().map(|r| r[i]).collect();
                let eq: Vec<f64> = equal.iter().map(|r| r[i]).collect();
                let (ns, fs) = (crate::bench::stat(&node), crate::bench::stat(&fwd));
                RoleSummary {
                    role,
                    node_cycles_per_byte: ns.median * mhz / 1e3,
                    forwarder_cycles_per_byte: fs.median * mhz / 1e3,
                    node_ns_per_byte: ns,
                    forwarder_ns_per_byte: fs,
                    ratio: crate::bench::ratio_stat(node.iter().copied().zip(fwd.iter().copied())),
                    equal_work_ns_per_byte: crate::bench::stat(&eq),
                    over_equal_work: crate::bench::ratio_stat(node.iter().copied().zip(eq.iter().copied())),
                }
            })
            .collect()
    };
    let protections: Vec<ProtectionSummary> = a
        .protections
        .iter()
        .enumerate()
        .map(|(j, &p)| ProtectionSummary {
            protection: p,
            chain_gbps: crate::bench::stat(&chain_gbps[j]),
            roles: summary(&node_runs[j], &equal_runs[j]),
        })
        .collect();
    let at = |p: Protection| a.protections.iter().position(|&q| q == p);
    let encrypted_over_authenticated = at(Protection::Encrypted).zip(at(Protection::Authenticated)).map(|(e, u)| {
        ROLES
            .iter()
            .enumerate()
            .map(|(i, &role)| {
                (role.to_string(), crate::bench::ratio_stat(node_runs[e].iter().zip(&node_runs[u]).map(|(x, y)| (x[i], y[i]))))
            })
            .collect()
    });
    let roles = summary(&node_runs[0], &equal_runs[0]);
    let report = Report {
        worker_threads: a.worker_threads,
        chunk_bytes: a.chain.chunk,
        slice_bytes: a.chain.slice,
        bytes_per_run: bytes,
        runs: a.runs,
        cpu_mhz: mhz,
        chain_gbps: crate::bench::stat(&chain_gbps[0]),
        forwarder_gbps: crate::bench::stat(&fwd_gbps),
        roles,
        protections,
        encrypted_over_authenticated,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let workers = a.worker_threads.map_or("one per core".to_string(), |w| w.to_string());
    println!(
        "ECPipe chain of RS(2,1) on loopback, {} B chunks in {} B slices, {} B per role per run, {} run(s), CPU at {:.0} MHz, node runtime threads: {workers}",
        a.chain.chunk, a.chain.slice, bytes, a.runs, mhz
    );
    println!("plain forwarder {:.2} GB/s (median)", report.forwarder_gbps.median);
    println!(
        "{:<14} {:<8} {:>10} {:>10} {:>9} {:>9} {:>13} {:>12} {:>9} {:>9}",
        "protection", "role", "chain GB/s", "node ns/B", "fwd ns/B", "eq ns/B", "node cycles/B", "fwd cycles/B", "node/fwd", "node/eq"
    );
    for p in &report.protections {
        for r in &p.roles {
            println!(
                "{:<14} {:<8} {:>10.2} {:>10.3} {:>9.3} {:>9.3} {:>13.2} {:>12.2} {:>9} {:>9}",
                p.protection.to_string(),
                r.role,
                p.chain_gbps.median,
                r.node_ns_per_byte.median,
                r.forwarder_ns_per_byte.median,
                r.equal_work_ns_per_byte.median,
                r.node_cycles_per_byte,
                r.forwarder_cycles_per_byte,
                crate::bench::ratio_cell(&r.ratio),
                crate::bench::ratio_cell(&r.over_equal_work)
            );
        }
    }
    if let Some(e) = &report.encrypted_over_authenticated {
        let parts: Vec<String> = e
            .iter()
            .map(|(role, s)| match s {
                Some(s) => format!("{role} {:.3} ({:.3}-{:.3})", s.median, s.min, s.max),
                None => format!("{role} - (its authenticated CPU read zero)"),
            })
            .collect();
        println!("CPU per byte, encrypted / authenticated: {}", parts.join(", "));
    }
    Ok(())
}

/// Makes this process connect as `p` does: open without the secret, else under it.
fn use_protection(p: Protection, secret: &kintsugi_proto::auth::Secret) {
    if p == Protection::Open {
        kintsugi_proto::auth::set_secret(None);
    } else {
        kintsugi_proto::auth::set_secret(Some(secret.clone()));
        kintsugi_proto::auth::set_protection(p);
    }
}

/// The CPU's clock rate from /proc/cpuinfo (the first core's), 1000 MHz when unknown.
pub(crate) fn cpu_mhz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("cpu MHz")).and_then(|l| l.split(':').nth(1)).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(1000.0)
}

/// User + system CPU seconds of a process, all its threads, live and exited.
pub(crate) fn process_cpu(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("no /proc entry for process {pid}"))?;
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or_else(|| anyhow!("unreadable /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the file are the 12th and 13th after the name.
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let ticks = field(11) + field(12);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz.max(1.0))
}

/// CPU seconds (user + system) the calling thread has run, read from the scheduler's own
/// nanosecond count. With `getrusage(RUSAGE_THREAD)`, one CI run read an equal-work source of
/// some 3 ms as none (not seen here); this clock is the count itself, not a split of it.
pub(crate) fn thread_cpu() -> f64 {
    // SAFETY: timespec is plain old data, for which all zeros is a valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a timespec the call fills in; this clock exists on every Linux we run on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Three node processes holding chunks 0 and 1 of an RS(2,1) stripe.
pub(crate) struct NodeProcs {
    children: Vec<Child>,
    peers: BTreeMap<u32, String>,
    /// Each node's metrics port, when they serve metrics.
    pub metrics: Vec<String>,
    code: std::sync::Arc<dyn Code>,
    parity: Vec<u8>,
    chunk: usize,
}

impl Drop for NodeProcs {
    fn drop(&mut self) {
        // A clean stop first (SIGINT, as Ctrl-C), so a wrapped profiler writes its output.
        for c in &self.children {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        }
        for c in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl NodeProcs {
    /// Starts the nodes under `dir` (`metrics`: each serving its metrics on a loopback port;
    /// `workers`: threads of each node's runtime, when not the node's default).
    pub(crate) fn start(dir: &Path, chunk: usize, metrics: bool, workers: Option<u16>) -> Result<NodeProcs> {
        let code = "rs:2,1".parse::<CodeSpec>().expect("a valid spec").build()?;
        let mut shards: Vec<Option<Vec<u8>>> = (0..2).map(|i| Some(crate::embedded::pattern(chunk, 7 + i))).collect();
        shards.push(None);
        code.decode(&mut shards).map_err(|e| anyhow!("{e}"))?;
        // The process's secret and protection (one secret per process: sets of nodes share
        // it); an open process starts open nodes.
        let secret = kintsugi_proto::auth::secret();
        let protection = kintsugi_proto::auth::protection();
        let secret_file = dir.join("secret");
        if let Some(s) = &secret {
            std::fs::write(&secret_file, s.expose())?;
        }
        let exe = std::env::current_exe().context("cannot find the kintsugi executable")?;
        let mut procs = NodeProcs { children: Vec::new(), peers: BTreeMap::new(), metrics: Vec::new(), code, parity: Vec::new(), chunk };
        for i in 0..3u32 {
            let data = dir.join(format!("node{i}"));
            if let Some(Some(s)) = shards.get(i as usize).filter(|_| i < 2) {
                ChunkStore::open(&data)?.put(&ChunkId::new(1, i as usize), s)?;
            }
            let log = dir.join(format!("node{i}.log"));
            // KINTSUGI_WRAP<role>: valgrind arguments to profile that role's node with.
            let wrap = std::env::var(format!("KINTSUGI_WRAP{i}")).ok();
            let mut cmd = match &wrap {
                Some(w) => {
                    let mut c = Command::new("valgrind");
                    c.args(w.split_whitespace()).arg(&exe);
                    c
                }
                None => Command::new(&exe),
            };
            cmd.args(["node", "--id", &i.to_string(), "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data);
            if metrics {
                cmd.args(["--metrics-listen", "127.0.0.1:0"]);
            }
            if let Some(w) = workers {
                cmd.args(["--worker-threads", &w.to_string()]);
            }
            if secret.is_some() {
                cmd.arg("--secret-file").arg(&secret_file).args(["--protection", &protection.to_string()]);
            }
            let child = cmd
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log)?)
                .spawn()
                .context("cannot start a node process")?;
            procs.children.push(child);
            procs.peers.insert(i, wait_for_line(&log, "listening on ")?);
            if metrics {
                let url = wait_for_line(&log, "metrics on http://")?;
                procs.metrics.push(url.trim_end_matches("/metrics").to_string());
            }
        }
        procs.parity = shards[2].take().expect("decoded");
        Ok(procs)
    }

    pub(crate) fn cpu(&self) -> Result<[f64; 3]> {
        let v: Vec<f64> = self.children.iter().map(|c| process_cpu(c.id())).collect::<Result<_>>()?;
        Ok([v[0], v[1], v[2]])
    }

    /// Rebuilds the parity chunk on node 2 `count` times, checking each result; returns
    /// the rebuilt chunks, for [`NodeProcs::delete`] once their CPU is counted (removing a
    /// file is not the repair's work, and the forwarders remove theirs uncounted too).
    pub(crate) async fn repairs(&self, next: &mut u64, count: usize, slice: usize) -> Result<Vec<ChunkId>> {
        let t = Duration::from_secs(120);
        let avail = [0usize, 1];
        let helpers = self.code.choose_helpers(2, &avail).map_err(|e| anyhow!("{e}"))?;
        let eq = self.code.repair_equation(2, &helpers).map_err(|e| anyhow!("{e}"))?;
        let term_chunks: Vec<ChunkId> = eq.helpers().iter().map(|&h| ChunkId::new(1, h)).collect();
        let helper_nodes: Vec<u32> = eq.helpers().iter().map(|&h| h as u32).collect();
        let want = kintsugi_proto::crc::crc32c(&self.parity);
        let mut rebuilt = Vec::with_capacity(count);
        for _ in 0..count {
            let repair = *next;
            *next += 1;
            let task = RepairTask { equation: eq.clone(), helper_nodes: helper_nodes.clone(), destination: 2 };
            let graph = shapes::build(Shape::Ecpipe, &task)?;
            let target = ChunkId::new(1000 + repair, 2);
            let a = Assignment {
                repair,
                graph: kintsugi_node::wire::graph_to_wire(&graph),
                chunk_len: self.chunk as u64,
                slice_len: slice as u64,
                term_chunks: term_chunks.clone(),
                peers: self.peers.clone(),
                store: Some(StoreSpec { chunk: target.clone(), crc32c: want, new_parity: false, bucket: None }),
                timeslots: Vec::new(),
                gate_batch: None,
                term_offset: None,
            };
            for addr in self.peers.values() {
                let r = kintsugi_proto::rpc::request(addr, &NodeRequest::RunRepair { assignment: Box::new(a.clone()) }, t)
                    .await
                    .map_err(|e| anyhow!(e))?;
                anyhow::ensure!(r == NodeResponse::Ok, "a node refused the plan: {r:?}");
            }
            let r = kintsugi_proto::rpc::request(&self.peers[&2], &NodeRequest::WaitRepair { repair, timeout_ms: 120_000 }, t)
                .await
                .map_err(|e| anyhow!(e))?;
            anyhow::ensure!(r == NodeResponse::RepairDone { crc32c: want }, "repair {repair} rebuilt the wrong bytes: {r:?}");
            rebuilt.push(target);
        }
        Ok(rebuilt)
    }

    /// Deletes rebuilt chunks from node 2.
    pub(crate) async fn delete(&self, rebuilt: Vec<ChunkId>) -> Result<()> {
        for chunk in rebuilt {
            let r = kintsugi_proto::rpc::request(&self.peers[&2], &NodeRequest::DeleteChunk { chunk }, Duration::from_secs(120))
                .await
                .map_err(|e| anyhow!(e))?;
            anyhow::ensure!(r == NodeResponse::Ok, "cannot delete the rebuilt chunk: {r:?}");
        }
        Ok(())
    }

    /// The helper chunks' bytes, the repair's coefficients and the rebuilt chunk's CRC:
    /// what the equal-work forwarder needs to do the same repair.
    pub(crate) fn equal_work(&self, dir: &Path) -> Result<crate::bench_relay_equal_work::EqualWork> {
        let eq = self.code.repair_equation(2, &[0, 1]).map_err(|e| anyhow!("{e}"))?;
        let coef = |h: usize| eq.terms.iter().find(|t| t.helper == h).map_or(0, |t| t.coefs[0]);
        let data: Vec<Vec<u8>> = (0..2).map(|i| crate::embedded::pattern(self.chunk, 7 + i)).collect();
        let want = kintsugi_proto::crc::crc32c(&self.parity);
        crate::bench_relay_equal_work::EqualWork::new(dir, [&data[0], &data[1]], [coef(0), coef(1)], want, kintsugi_node::store::READ_AHEAD)
    }
}

/// Waits for a line with `marker` in a node's log; returns the word after it (the address
/// of "listening on ADDR").
fn wait_for_line(log: &Path, marker: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = text.lines().find_map(|l| l.split_once(marker).map(|(_, r)| r.split_whitespace().next().unwrap_or(""))) {
            return Ok(addr.to_string());
        }
        if Instant::now() > deadline {
            bail!("a node did not start within 20 s; its log ({}):\n{text}", log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A plain forwarder on loopback: a source thread writes `bytes` in `slice` writes, a relay
/// thread reads slices and writes them on, a sink thread reads them. Returns each thread's
/// CPU seconds and the wall time.
fn forwarder(bytes: usize, slice: usize) -> Result<([f64; 3], f64)> {
    let l1 = std::net::TcpListener::bind("127.0.0.1:0")?;
    let l2 = std::net::TcpListener::bind("127.0.0.1:0")?;
    let (a1, a2) = (l1.local_addr()?, l2.local_addr()?);
    let start = Instant::now();
    let sink = std::thread::spawn(move || -> std::io::Result<f64> {
        let (mut s, _) = l2.accept()?;
        let c0 = thread_cpu();
        let mut buf = vec![0u8; slice];
        let mut got = 0;
        while got < bytes {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            got += n;
        }
        Ok(thread_cpu() - c0)
    });
    let relay = std::thread::spawn(move || -> std::io::Result<f64> {
        let (mut up, _) = l1.accept()?;
        let mut down = std::net::TcpStream::connect(a2)?;
        let c0 = thread_cpu();
        let mut buf = vec![0u8; slice];
        let mut moved = 0;
        while moved < bytes {
            let want = slice.min(bytes - moved);
            up.read_exact(&mut buf[..want])?;
            down.write_all(&buf[..want])?;
            moved += want;
        }
        Ok(thread_cpu() - c0)
    });
    let source = std::thread::spawn(move || -> std::io::Result<f64> {
        let mut s = std::net::TcpStream::connect(a1)?;
        let c0 = thread_cpu();
        let buf = crate::embedded::pattern(slice, 3);
        let mut sent = 0;
        while sent < bytes {
            let n = slice.min(bytes - sent);
            s.write_all(&buf[..n])?;
            sent += n;
        }
        Ok(thread_cpu() - c0)
    });
    let join = |h: std::thread::JoinHandle<std::io::Result<f64>>| -> Result<f64> {
        h.join().map_err(|_| anyhow!("a forwarder thread panicked"))?.context("forwarder")
    };
    let (s, r, k) = (join(source)?, join(relay)?, join(sink)?);
    Ok(([s, r, k], start.elapsed().as_secs_f64()))
}
