//! `kintsugi bench full-node`: full-node repair time against the network's lower bound.
//! Each method gets a fresh cluster (the netns testbed with tc-shaped links, or an embedded
//! one on loopback with token buckets): the objects are written, node 0 fails, every lost
//! chunk is rebuilt with the method and scheduler, and every object is read back and
//! compared byte for byte. The bound is what the surviving nodes' downlinks must carry at
//! least: f lost chunks, each needing k chunks' worth of traffic, into n-1 downlinks of B,
//! f*k*C / ((n-1)*B) (Clay: d/q chunks each instead of k). Beside it, the simulator's
//! time for the very graphs the coordinator ran (from its report), so the two can be held
//! against each other (the simulator starts every chunk at once: `--parallel` limits only
//! the cluster).

use crate::bench_fullnode_report::{method_row, print, report, Run};
use crate::bench_fullnode_sim::{lost_chunks, simulate_same};
use crate::embedded::{pattern, Embedded};
use crate::load::{Interference, Workload};
use crate::units::{parse_fraction, parse_nonzero_size, parse_rate};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::TimeslotGating;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{Pick, Shape};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct FullNodeArgs {
    /// Run on the network-namespace testbed (needs root); default: an embedded cluster on
    /// loopback with token-bucket links.
    #[arg(long)]
    pub testbed: bool,
    /// Storage nodes (node 0 fails).
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Code of every object.
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Every node's uplink and downlink.
    #[arg(long, default_value = "200mbit", value_parser = parse_rate)]
    pub link: f64,
    /// Objects written before node 0 fails.
    #[arg(long, default_value_t = 44)]
    pub objects: usize,
    /// Size of each object.
    #[arg(long, default_value = "48MiB", value_parser = parse_nonzero_size)]
    pub size: usize,
    /// Chunk size.
    #[arg(long, default_value = "8MiB", value_parser = parse_nonzero_size)]
    pub chunk: usize,
    /// Slice size of pipelined methods.
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Methods, comma-separated; auto: the coordinator predicts and picks (with
    /// --scheduler, or among every scheduler with --scheduler auto).
    #[arg(long, value_delimiter = ',', default_value = "cr,ppr,ecpipe")]
    pub methods: Vec<Pick<Shape>>,
    /// Who picks helpers and destinations (index, random, repairboost, mppr, chameleon, ...,
    /// or auto).
    #[arg(long, default_value = "repairboost")]
    pub scheduler: Pick<Scheduler>,
    /// Chunks repaired at once [default: every lost chunk].
    #[arg(long)]
    pub parallel: Option<usize>,
    /// Repetitions per method (a fresh cluster each); medians are reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Put every node's chunk store on an emulated HDD with this many milliseconds of
    /// positioning per I/O (embedded cluster only; see --hdd-bw).
    #[arg(long)]
    pub hdd_seek_ms: Option<f64>,
    /// The emulated HDD's sequential rate [default with --hdd-seek-ms: 180MB/s].
    #[arg(long, value_parser = parse_rate)]
    pub hdd_bw: Option<f64>,
    /// Foreground clients running YCSB workload A (50% reads, 50% overwrites, zipfian
    /// 0.99) during the repair, and for a baseline without repair before it; 0: no load.
    #[arg(long, default_value_t = 0)]
    pub load_clients: usize,
    /// Records of the foreground workload (written after node 0 fails, so the repair
    /// moves only the benchmark's objects).
    #[arg(long, default_value_t = 64)]
    pub load_records: u64,
    /// Bytes per foreground record.
    #[arg(long, default_value = "512KiB", value_parser = parse_nonzero_size)]
    pub load_value: usize,
    /// Seconds of the foreground baseline (node 0 down, no repair running).
    #[arg(long, default_value_t = 5.0)]
    pub load_baseline: f64,
    /// The foreground's workloads (ycsb-a, twitter, etc, ibm), in turn with --load-switch.
    #[arg(long, value_delimiter = ',', default_value = "ycsb-a")]
    pub load_workload: Vec<crate::load_traces::Trace>,
    /// Switch the foreground to its next workload every this many seconds (ChameleonEC's
    /// Exp#4: 15); 0: only the first runs.
    #[arg(long, default_value_t = 0.0)]
    pub load_switch: f64,
    /// ChameleonEC's phase length in milliseconds (the coordinator's repair_phase_ms): each
    /// phase runs to its end and the rest is planned again from fresh traffic reports;
    /// 0: the paper's 20 s at 10 Gb/s, scaled to the links.
    #[arg(long, default_value_t = 0)]
    pub phase_ms: u64,
    /// Repairs one destination node runs at once (the coordinator's
    /// repair_max_active_per_destination, the simulator's --max-active); 0: no limit, so a
    /// ChameleonEC phase starts all its repairs together.
    #[arg(long, default_value_t = 0)]
    pub max_active: usize,
    /// Which repairs' transfers nodes hold to their RepairBoost timeslots (the
    /// coordinator's gate_timeslots: all, store-and-forward or none); the others' slots
    /// only order repair starts.
    #[arg(long, default_value_t = TimeslotGating::default())]
    pub gate_timeslots: TimeslotGating,
    /// Testbed only: also pace what every node sends, in the node process, at this
    /// fraction of --link (e.g. 0.95), below tc's rate, so tc's queues stay short and each
    /// uplink is shared evenly among its transfers.
    #[arg(long, value_parser = parse_fraction)]
    pub pace: Option<f64>,
    /// Testbed only: TCP congestion control of the nodes' connections (cubic, reno, bbr, ...;
    /// `host`: the host's default).
    #[arg(long, default_value = "cubic")]
    pub tcp_congestion: String,
    /// Testbed only: longest queue of every shaped link, milliseconds at its rate (tc tbf's latency).
    #[arg(long, default_value_t = crate::testbed::DEFAULT_QUEUE_MS, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub queue_ms: u32,
    /// Testbed only: MTU of every link (9000: jumbo frames).
    #[arg(long, default_value_t = crate::testbed::DEFAULT_MTU, value_parser = clap::value_parser!(u32).range(576..=9000))]
    pub mtu: u32,
    /// Testbed only: repair in a class of its own below users' traffic, with this share of
    /// every link as its floor (`testbed up --repair-class`) [default: one class].
    #[arg(long, value_parser = parse_fraction, conflicts_with = "queues")]
    pub repair_class: Option<f64>,
    /// Testbed only: how a link shares its rate among its transfers (`testbed up --queues`):
    /// fifo, peer-send (a round-robin queue per peer on what a node sends), peer (both ends).
    #[arg(long, value_enum, default_value_t = crate::testbed_queues::LinkQueues::Fifo)]
    pub queues: crate::testbed_queues::LinkQueues,
    /// Embedded cluster only: node 1's links run at this fraction of --link while it
    /// reports the full rate (a failing NIC or a noisy neighbour no monitoring sees).
    #[arg(long, value_parser = parse_fraction)]
    pub slow_node: Option<f64>,
    /// RepairBoost's adaptive sub-processes: repair in rounds of this many chunks, each
    /// planned with the node rates measured in the rounds before (the coordinator's
    /// repair_subprocess_chunks; 0: one round).
    #[arg(long, default_value_t = 0)]
    pub subprocess: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: FullNodeArgs) -> Result<()> {
    let code = a.code.build()?;
    if a.nodes < code.n() + 1 {
        bail!("{} needs at least {} nodes (a stripe plus a destination outside it)", a.code, code.n() + 1);
    }
    if a.runs == 0 || a.objects == 0 || a.parallel == Some(0) {
        bail!("--runs, --objects and --parallel must be at least 1");
    }
    if a.load_clients > 0 && !(a.load_switch >= 0.0 && a.load_switch.is_finite() && !a.load_workload.is_empty()) {
        bail!("--load-switch must be a non-negative number of seconds and --load-workload name a workload");
    }
    if a.load_clients > 0 && (a.load_records == 0 || !(a.load_baseline > 0.0 && a.load_baseline.is_finite())) {
        bail!("with --load-clients, --load-records must be at least 1 and --load-baseline a positive number of seconds");
    }
    if a.testbed && (a.hdd_seek_ms.is_some() || a.hdd_bw.is_some()) {
        bail!("--hdd-seek-ms and --hdd-bw apply to the embedded cluster; start testbed nodes with `kintsugi node --hdd-seek-ms` instead");
    }
    if a.testbed && a.slow_node.is_some() {
        bail!("--slow-node applies to the embedded cluster (the testbed shapes every link alike)");
    }
    if !a.testbed && a.queues != crate::testbed_queues::LinkQueues::Fifo {
        bail!("--queues applies to the testbed (tc makes the queues)");
    }
    if !a.testbed && a.repair_class.is_some() {
        bail!("--repair-class applies to the testbed (tc carries the classes)");
    }
    if a.repair_class.is_some_and(|f| f >= 1.0) {
        bail!("--repair-class is repair's floor, a share of the link below 1 (e.g. 0.1)");
    }
    if !a.testbed && a.pace.is_some() {
        bail!("--pace applies to the testbed (the embedded cluster's links are the nodes' own token buckets)");
    }
    if a.hdd_seek_ms.is_some_and(|s| !(s >= 0.0 && s.is_finite())) {
        bail!("--hdd-seek-ms must be a number of milliseconds >= 0");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    for &method in &a.methods {
        let mut runs = Vec::new();
        for r in 0..a.runs {
            if !a.json {
                eprintln!("{method}: run {}/{}", r + 1, a.runs);
            }
            runs.push(if a.testbed { on_testbed(&a, method, &rt)? } else { rt.block_on(embedded(&a, method))? });
        }
        rows.push(method_row(&a, method, &runs));
    }
    let report = report(&a, rows);
    print(&a, &report)?;
    if !report.verified() {
        bail!("some repairs did not verify");
    }
    Ok(())
}

async fn embedded(a: &FullNodeArgs, method: Pick<Shape>) -> Result<Run> {
    let dir = tempfile::tempdir()?;
    let hdd = match (a.hdd_seek_ms, a.hdd_bw) {
        (None, None) => None,
        (s, b) => Some((s.unwrap_or(8.0), b.unwrap_or(180e6))),
    };
    let (phase_ms, gate, subprocess, link, max_active) = (a.phase_ms, a.gate_timeslots, a.subprocess, a.link, a.max_active);
    let tune = |c: &mut kintsugi_coord::CoordConfig| {
        c.repair_phase_ms = phase_ms;
        c.repair_max_active_per_destination = max_active;
        c.gate_timeslots = gate;
        c.repair_subprocess_chunks = subprocess;
    };
    let slow = a.slow_node;
    let tune_node = |i: usize, n: &mut kintsugi_node::NodeConfig| {
        if let (1, Some(f)) = (i, slow) {
            n.uplink = Some(link * f);
            n.downlink = Some(link * f);
            n.link_capacity = Some(link);
        }
    };
    let cluster = Embedded::start_custom(dir.path(), a.nodes, Some(a.link), hdd, tune, tune_node).await?;
    let r = scenario(&cluster.client, a, method).await;
    cluster.stop().await;
    r
}

fn on_testbed(a: &FullNodeArgs, method: Pick<Shape>, rt: &tokio::runtime::Runtime) -> Result<Run> {
    let dir = std::env::temp_dir().join("kintsugi-bench-fullnode");
    std::fs::create_dir_all(&dir)?;
    let conf = dir.join("coordinator.toml");
    // Repairs are started (and timed) by this benchmark, not by the coordinator.
    std::fs::write(
        &conf,
        format!(
            "auto_repair = false\nrepair_phase_ms = {}\ngate_timeslots = \"{}\"\nrepair_subprocess_chunks = {}\nrepair_max_active_per_destination = {}\n",
            a.phase_ms, a.gate_timeslots, a.subprocess, a.max_active
        ),
    )?;
    let up = crate::testbed::UpArgs {
        nodes: a.nodes,
        link: a.link,
        name: "kfull".into(),
        octet: 216,
        dir: dir.join("tb"),
        coordinator_config: Some(conf),
        // The benchmark's writes and verifying reads are not what is measured.
        host_link: Some(a.link * 50.0),
        pace: a.pace,
        tcp_congestion: a.tcp_congestion.clone(),
        queue_ms: a.queue_ms,
        mtu: a.mtu,
        repair_class: a.repair_class,
        queues: a.queues,
    };
    let state = crate::testbed::up(&up)?;
    let mut client = Client::new(&state.coordinator);
    client.io_timeout = Duration::from_secs(120);
    let r = rt.block_on(scenario(&client, a, method));
    crate::testbed::down(&up.name, &up.dir)?;
    r
}

/// Writes the objects, fails node 0, repairs, verifies.
async fn scenario(client: &Client, a: &FullNodeArgs, method: Pick<Shape>) -> Result<Run> {
    let (plain, lost) = write_and_fail(client, a.nodes, a.objects, a.code, a.chunk, a.size).await?;
    let parallel = a.parallel.unwrap_or(lost);
    // The simulator knows no disks and no foreground: only the plain runs of a fixed
    // method and scheduler are compared.
    let fixed = method.fixed().zip(a.scheduler.fixed());
    let compare = a.hdd_seek_ms.is_none() && a.hdd_bw.is_none() && a.load_clients == 0 && fixed.is_some();
    let lost_chunks = match compare {
        true => Some(lost_chunks(&plain, a).await?),
        false => None,
    };
    let workload = (a.load_clients > 0).then(|| Workload {
        traces: a.load_workload.clone(),
        switch: (a.load_switch > 0.0).then(|| Duration::from_secs_f64(a.load_switch)),
        max_value: 64 << 20,
        ..Workload::ycsb_a(a.load_clients, a.load_records, a.load_value, a.code)
    });
    let mut baseline = None;
    if let Some(w) = &workload {
        // Foreground clients go through the client's own link (on the testbed, the host's).
        w.load(&plain, false).await?;
        baseline = Some(w.run(&plain, Default::default(), Duration::from_secs_f64(a.load_baseline)).await?);
    }
    if let Some(w) = &workload {
        // The monitoring reports show the foreground before the schedulers plan: two
        // seconds of it first, not counted.
        w.run(&plain, Default::default(), Duration::from_secs(2)).await?;
    }
    // Counted from here to the repair's end.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fg_task = workload.map(|w| {
        let (c, stop) = (plain.clone(), stop.clone());
        tokio::spawn(async move { w.run(&c, stop, Duration::from_secs(3600)).await })
    });
    let before = node_stats(&plain).await?;
    let jiffies = crate::bench_degraded::machine_jiffies();
    let report = plain.repair_limited(method, a.slice as u64, parallel, a.scheduler, None).await.map_err(|e| anyhow!(e));
    let cpu = crate::bench_degraded::cores_busy(jiffies, crate::bench_degraded::machine_jiffies());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let during = match fg_task {
        Some(t) => Some(t.await.map_err(|e| anyhow!("the foreground clients failed: {e}"))??),
        None => None,
    };
    let report = report?;
    let sim = match lost_chunks.zip(fixed) {
        Some((lost, (method, scheduler))) => {
            let graphs = report
                .graphs
                .iter()
                .cloned()
                .map(kintsugi_node::wire::graph_from_wire)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow!(e))?;
            Some(simulate_same(a, method, scheduler, &lost, &graphs, &report.graph_timeslots)?)
        }
        None => None,
    };
    let fg = baseline.zip(during).map(|(b, d)| Interference::new(&b, &d));
    let after = node_stats(&plain).await?;
    let loads: Vec<(u32, f64, f64)> = after
        .iter()
        .filter_map(|(n, (up, down))| {
            before.get(n).map(|(u0, d0)| (*n, (up - u0) as f64 / a.chunk as f64, (down - d0) as f64 / a.chunk as f64))
        })
        .collect();
    // The busiest link of the plan: what no data path can beat.
    let busiest = after.iter().filter_map(|(n, (up, down))| before.get(n).map(|(u0, d0)| (up - u0).max(down - d0))).max().unwrap_or(0);
    let mut verified = report.failed == 0 && report.repaired + report.skipped == lost;
    if !verified {
        eprintln!("the repair of {lost} chunks: {} repaired, {} skipped, {} failed", report.repaired, report.skipped, report.failed);
    }
    for i in 0..a.objects {
        let (data, r) = plain.get(&format!("object-{i:04}"), Shape::Cr, a.slice as u64).await.map_err(|e| anyhow!(e))?;
        if data != pattern(a.size, i as u64) {
            eprintln!("object-{i:04} read back different bytes");
            verified = false;
        }
        if !r.degraded.is_empty() {
            eprintln!("object-{i:04} needed degraded reads after the repair: {:?} (stripe, chunk, seconds)", r.degraded);
            verified = false;
        }
    }
    // Chunks' worth a lost chunk's repair reads: k for RS, d/q for Clay (its equation's reads).
    let code = a.code.build()?;
    let avail: Vec<usize> = (1..code.n()).collect();
    let helpers = code.choose_helpers(0, &avail).map_err(|e| anyhow!("{e}"))?;
    let eq = code.repair_equation(0, &helpers).map_err(|e| anyhow!("{e}"))?;
    let per_chunk = eq.terms.iter().map(|t| t.read_count() as f64).sum::<f64>() / eq.sub_chunks as f64;
    let bound = lost as f64 * per_chunk * a.chunk as f64 / ((a.nodes - 1) as f64 * a.link);
    Ok(Run {
        lost,
        seconds: report.seconds,
        bound,
        busiest: busiest as f64 / a.link,
        cpu,
        file_read_chunks: report.helper_file_read as f64 / (lost as f64 * a.chunk as f64).max(1.0),
        sim,
        loads,
        first_done: report.first_done,
        fg,
        verified,
        chosen: (!report.auto.is_empty()).then(|| report.method.clone()),
        auto: report.auto.clone(),
    })
}

/// Writes `objects` objects of `size` bytes (`object-NNNN`, [`pattern`] contents), fails
/// node 0 and waits until the cluster sees it; returns a client without an emulated link of
/// its own (writes and verification reads are not what is measured) and the lost chunks.
pub(crate) async fn write_and_fail(
    client: &Client,
    nodes: usize,
    objects: usize,
    code: CodeSpec,
    chunk: usize,
    size: usize,
) -> Result<(Client, usize)> {
    let mut plain = client.clone();
    plain.shaper = Default::default();
    wait_alive(&plain, nodes).await?;
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..objects {
        if writes.len() >= 4 {
            writes.join_next().await.expect("a write in flight")??;
        }
        let c = plain.clone();
        writes.spawn(async move {
            c.put(&format!("object-{i:04}"), &pattern(size, i as u64), code, chunk as u64).await.map_err(|e| anyhow!(e))
        });
    }
    while let Some(w) = writes.join_next().await {
        w??;
    }
    // The nodes report their traffic every heartbeat: wait until the reports no longer
    // show the writes, or bandwidth-aware schedulers would plan around foreground traffic
    // that has ended (ChameleonEC plans with the last period's rates).
    tokio::time::sleep(Duration::from_secs(2)).await;
    plain.fail(0).await.map_err(|e| anyhow!(e))?;
    wait_alive(&plain, nodes - 1).await?;
    let lost = plain.status().await.map_err(|e| anyhow!(e))?.lost_chunks;
    if lost == 0 {
        bail!("node 0 held no chunk: nothing to repair");
    }
    Ok((plain, lost))
}

/// Repair bytes sent and received so far by every live node.
async fn node_stats(c: &Client) -> Result<std::collections::BTreeMap<u32, (u64, u64)>> {
    let mut m = std::collections::BTreeMap::new();
    for n in c.status().await.map_err(|e| anyhow!(e))?.nodes.into_iter().filter(|n| n.alive) {
        let r = kintsugi_proto::rpc::request(&n.addr, &kintsugi_proto::NodeRequest::Stat, c.io_timeout).await.map_err(|e| anyhow!(e))?;
        if let kintsugi_proto::NodeResponse::Stat(s) = r {
            m.insert(n.id, (s.repair_sent, s.repair_received));
        }
    }
    Ok(m)
}

async fn wait_alive(c: &Client, n: usize) -> Result<()> {
    for _ in 0..600 {
        if let Ok(s) = c.status().await {
            if s.nodes.iter().filter(|x| x.alive).count() == n {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the cluster never reached {n} live nodes")
}
