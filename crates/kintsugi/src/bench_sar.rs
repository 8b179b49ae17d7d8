//! `kintsugi bench sar`: ChameleonEC's straggler-aware re-scheduling against ETRP alone
//! (the paper's Exp#11). Full-node repair with the `chameleon` scheduler, on a fresh
//! cluster per run; at a given point of the first phase, readers start pulling chunks from
//! the node that takes part in most lost stripes, and keep on until the repair ends. The
//! same runs with SAR off and on, every object read back and compared byte for byte.

use crate::bench_fullnode::write_and_fail;
use crate::embedded::{pattern, Embedded};
use crate::units::{parse_nonzero_size, parse_rate};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use kintsugi_client::straggler_injector::Straggler;
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SarArgs {
    /// Run on the network-namespace testbed (needs root); default: an embedded cluster on
    /// loopback with token-bucket links.
    #[arg(long)]
    pub testbed: bool,
    /// Storage nodes (node 0 fails).
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Every node's uplink and downlink.
    #[arg(long, default_value = "200mbit", value_parser = parse_rate)]
    pub link: f64,
    #[arg(long, default_value_t = 44)]
    pub objects: usize,
    #[arg(long, default_value = "48MiB", value_parser = parse_nonzero_size)]
    pub size: usize,
    #[arg(long, default_value = "8MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// ChameleonEC's phase length in milliseconds (the paper: 20 s at 10 Gb/s; here short
    /// enough that the repair takes several phases).
    #[arg(long, default_value_t = 1500)]
    pub phase_ms: u64,
    /// When the straggler starts, as fractions of a phase, comma-separated (the paper: 0, 5
    /// and 10 s of a 20-s phase).
    #[arg(long, value_delimiter = ',', default_value = "0,0.25,0.5")]
    pub at: Vec<f64>,
    /// Readers pulling chunks from the straggler node (the paper: 8 threads).
    #[arg(long, default_value_t = 8)]
    pub readers: usize,
    /// Repetitions of each point (a fresh cluster each); medians are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Clone, Debug, Default)]
struct Outcome {
    seconds: f64,
    mb_per_s: f64,
    phases: usize,
    stragglers: usize,
    retuned: usize,
    postponed: usize,
    restarted: usize,
    /// Bytes the readers took from the straggler node.
    reader_mb: f64,
    verified: bool,
}

#[derive(Serialize)]
struct Row {
    /// Straggler start, fraction of a phase; None: no straggler.
    at: Option<f64>,
    straggler_node: u32,
    lost_chunks: usize,
    etrp: Outcome,
    sar: Outcome,
    /// SAR's repair throughput over ETRP's, minus 1 (the paper: +31.4% for ChameleonEC).
    gain: f64,
    all_etrp_seconds: Vec<f64>,
    all_sar_seconds: Vec<f64>,
}

pub fn run(a: SarArgs) -> Result<()> {
    let code = a.code.build()?;
    if a.nodes < code.n() + 1 {
        bail!("{} needs at least {} nodes (a stripe plus a destination outside it)", a.code, code.n() + 1);
    }
    if a.runs == 0 || a.objects == 0 || a.readers == 0 || a.phase_ms == 0 {
        bail!("--runs, --objects, --readers and --phase-ms must be at least 1");
    }
    if let Some(bad) = a.at.iter().find(|f| !(f.is_finite() && **f >= 0.0)) {
        bail!("--at takes fractions of a phase >= 0, not {bad}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    let points: Vec<Option<f64>> = std::iter::once(None).chain(a.at.iter().copied().map(Some)).collect();
    for at in points {
        let (mut etrp, mut sar, mut node, mut lost) = (Vec::new(), Vec::new(), 0, 0);
        for r in 0..a.runs {
            for on in [false, true] {
                if !a.json {
                    let when = at.map_or("no straggler".to_string(), |f| format!("straggler at {f} of a phase"));
                    eprintln!("{when}, SAR {}: run {}/{}", if on { "on" } else { "off" }, r + 1, a.runs);
                }
                let (o, n, l) = if a.testbed { on_testbed(&a, at, on, &rt)? } else { rt.block_on(embedded(&a, at, on))? };
                (node, lost) = (n, l);
                if on { &mut sar } else { &mut etrp }.push(o);
            }
        }
        let (e, s) = (median(&etrp), median(&sar));
        rows.push(Row {
            at,
            straggler_node: node,
            lost_chunks: lost,
            gain: s.mb_per_s / e.mb_per_s - 1.0,
            all_etrp_seconds: etrp.iter().map(|o| o.seconds).collect(),
            all_sar_seconds: sar.iter().map(|o| o.seconds).collect(),
            etrp: e,
            sar: s,
        });
    }
    let verified = rows.iter().all(|r| r.etrp.verified && r.sar.verified);
    if a.json {
        let report = serde_json::json!({
            "testbed": a.testbed, "nodes": a.nodes, "code": a.code.to_string(), "link_bytes_per_s": a.link,
            "objects": a.objects, "object_bytes": a.size, "chunk_bytes": a.chunk, "phase_ms": a.phase_ms,
            "readers": a.readers, "runs": a.runs, "rows": rows,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let how = if a.testbed { "netns testbed, tc tbf" } else { "loopback, token buckets" };
        println!(
            "{} nodes, {}, {} objects of {} B in {} B chunks, links {:.0} Mbit/s ({how}), chameleon with {} ms phases, {} readers on the straggler",
            a.nodes,
            a.code,
            a.objects,
            a.size,
            a.chunk,
            a.link * 8.0 / 1e6,
            a.phase_ms,
            a.readers
        );
        println!(
            "{:<13} {:>5} {:>5} {:>8} {:>8} {:>8} {:>8} {:>7} {:>22} {:>9}",
            "straggler at", "node", "lost", "ETRP s", "SAR s", "ETRP MB/s", "SAR MB/s", "gain", "SAR: late/tune/post/re", "verified"
        );
        for r in &rows {
            println!(
                "{:<13} {:>5} {:>5} {:>8.2} {:>8.2} {:>8.1} {:>8.1} {:>6.1}% {:>22} {:>9}",
                r.at.map_or("none".to_string(), |f| format!("{f} phase")),
                r.straggler_node,
                r.lost_chunks,
                r.etrp.seconds,
                r.sar.seconds,
                r.etrp.mb_per_s,
                r.sar.mb_per_s,
                r.gain * 100.0,
                format!("{}/{}/{}/{}", r.sar.stragglers, r.sar.retuned, r.sar.postponed, r.sar.restarted),
                if r.etrp.verified && r.sar.verified { "yes" } else { "NO" }
            );
        }
    }
    if !verified {
        bail!("some repairs did not verify");
    }
    Ok(())
}

/// The run with the median time, its counts as they were.
fn median(v: &[Outcome]) -> Outcome {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    let mut m = s[s.len() / 2].clone();
    m.verified = v.iter().all(|o| o.verified);
    m
}

async fn embedded(a: &SarArgs, at: Option<f64>, sar: bool) -> Result<(Outcome, u32, usize)> {
    let dir = tempfile::tempdir()?;
    let phase_ms = a.phase_ms;
    let tune = |c: &mut kintsugi_coord::CoordConfig| {
        c.repair_phase_ms = phase_ms;
        c.repair_straggler_aware = sar;
    };
    let cluster = Embedded::start_custom(dir.path(), a.nodes, Some(a.link), None, tune, |_, _| {}).await?;
    let r = scenario(&cluster.client, a, at).await;
    cluster.stop().await;
    r
}

fn on_testbed(a: &SarArgs, at: Option<f64>, sar: bool, rt: &tokio::runtime::Runtime) -> Result<(Outcome, u32, usize)> {
    let dir = std::env::temp_dir().join("kintsugi-bench-sar");
    std::fs::create_dir_all(&dir)?;
    let conf = dir.join("coordinator.toml");
    std::fs::write(&conf, format!("auto_repair = false\nrepair_phase_ms = {}\nrepair_straggler_aware = {sar}\n", a.phase_ms))?;
    let up = crate::testbed::UpArgs {
        nodes: a.nodes,
        link: a.link,
        name: "ksar".into(),
        octet: 217,
        dir: dir.join("tb"),
        coordinator_config: Some(conf),
        // The benchmark's writes and verifying reads are not what is measured; the readers'
        // bytes are limited by the straggler's shaped uplink.
        host_link: Some(a.link * 50.0),
        pace: None,
        // As its recorded figures ran: the host's algorithm, tc's 100 ms queues.
        tcp_congestion: "host".into(),
        queue_ms: 100,
        mtu: crate::testbed::DEFAULT_MTU,
        repair_class: None,
        queues: crate::testbed_queues::LinkQueues::Fifo,
    };
    let state = crate::testbed::up(&up)?;
    let mut client = Client::new(&state.coordinator);
    client.io_timeout = Duration::from_secs(120);
    let r = rt.block_on(scenario(&client, a, at));
    crate::testbed::down(&up.name, &up.dir)?;
    r
}

/// Writes, fails node 0, repairs with a straggler injected at `at` of the first phase,
/// verifies. Returns the outcome, the straggler node and the lost chunks.
async fn scenario(client: &Client, a: &SarArgs, at: Option<f64>) -> Result<(Outcome, u32, usize)> {
    let (plain, lost) = write_and_fail(client, a.nodes, a.objects, a.code, a.chunk, a.size).await?;
    // The straggler: the live node in most stripes that lost a chunk, so it takes part in
    // the repair whatever the plan (ties to the lowest id).
    let mut held: HashMap<u32, usize> = HashMap::new();
    for i in 0..a.objects {
        for s in plain.stat(&format!("object-{i:04}")).await.map_err(|e| anyhow!(e))?.stripes {
            if s.chunks.iter().any(|c| c.node == 0) {
                for c in s.chunks.iter().filter(|c| c.node != 0) {
                    *held.entry(c.node).or_default() += 1;
                }
            }
        }
    }
    let node = held.iter().max_by_key(|(n, k)| (**k, std::cmp::Reverse(**n))).map(|(n, _)| *n).ok_or(anyhow!("no stripe lost a chunk"))?;
    let repair = {
        let c = plain.clone();
        let slice = a.slice as u64;
        tokio::spawn(async move { c.repair(Shape::Ecpipe, slice, lost, Scheduler::Chameleon).await })
    };
    let mut readers = None;
    if let Some(f) = at {
        tokio::time::sleep(Duration::from_secs_f64(f * a.phase_ms as f64 / 1e3)).await;
        if !repair.is_finished() {
            readers = Some(Straggler::start(&plain, node, a.readers).await.map_err(|e| anyhow!(e))?);
        }
    }
    let report = repair.await?.map_err(|e| anyhow!(e));
    let read = match readers {
        Some(r) => r.stop().await,
        None => 0,
    };
    let report = report?;
    let mut verified = report.failed == 0 && report.repaired + report.skipped == lost;
    for i in 0..a.objects {
        let (data, r) = plain.get(&format!("object-{i:04}"), Shape::Cr, a.slice as u64).await.map_err(|e| anyhow!(e))?;
        verified &= data == pattern(a.size, i as u64) && r.degraded.is_empty();
    }
    let o = Outcome {
        seconds: report.seconds,
        mb_per_s: lost as f64 * a.chunk as f64 / report.seconds / 1e6,
        phases: report.phases,
        stragglers: report.stragglers,
        retuned: report.retuned,
        postponed: report.postponed,
        restarted: report.restarted,
        reader_mb: read as f64 / 1e6,
        verified,
    };
    Ok((o, node, lost))
}
