//! What `kintsugi bench full-node` reports: each method's row from its runs (medians,
//! the simulator beside them), the whole report, and how it is printed (JSON or tables).

use crate::bench_fullnode::FullNodeArgs;
use crate::bench_fullnode_sim::SimSame;
use crate::load::Interference;
use anyhow::Result;
use kintsugi_plan::{Pick, Shape};
use serde::Serialize;

#[derive(Serialize)]
pub(crate) struct MethodRow {
    method: String,
    /// Per run, what `auto` chose (empty: a fixed method and scheduler).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    auto_chosen: Vec<String>,
    /// Per run, every choice `auto` made with each candidate's predicted seconds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    auto_choices: Vec<Vec<kintsugi_proto::AutoChoice>>,
    lost_chunks: usize,
    repair_seconds: f64,
    bound_seconds: f64,
    /// The most bytes one node sent or received during the repair, over the link rate:
    /// the plan's own bound (balance), where bound_seconds assumes perfect balance.
    busiest_link_seconds: f64,
    /// Whole-machine CPU busy during the repair, in cores (every process, kernel included).
    cpu_cores: f64,
    /// What the helpers read from the nodes' chunk files per lost chunk, in chunks (median):
    /// k for RS, 13/4 for Clay(10,4,13); more where whole blocks or read-ahead add to it.
    file_read_chunks: f64,
    /// The first run's repair traffic per node: (node, chunks sent, chunks received).
    node_loads: Vec<(u32, f64, f64)>,
    /// The simulator's time for the graphs the coordinator ran (slice model, uniform links,
    /// every chunk at once, each transfer as soon as its inputs allow, as the nodes run
    /// it), median over runs.
    /// Absent with emulated disks, which the simulator does not model.
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_seconds: Option<f64>,
    /// repair_seconds / sim_seconds, median over runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    over_sim: Option<f64>,
    /// The replay of what ran (gated where the nodes gated) in the fluid model, which
    /// `sim full-node` runs by default, median over runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_fluid_seconds: Option<f64>,
    /// repair_seconds / sim_fluid_seconds, median over runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    over_sim_fluid: Option<f64>,
    /// The coordinator's graphs gated by the timeslots the nodes gated them by, median;
    /// absent when the nodes gated none.
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_replay_gated_seconds: Option<f64>,
    /// The same lost chunks planned afresh by the scheduler and gated by its timeslots
    /// (RepairBoost), as `sim full-node` runs them, median.
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_slotted_seconds: Option<f64>,
    /// The busiest link of the replayed graphs (first run), seconds: equal to
    /// busiest_link_seconds when the replay is what ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_busiest_link_seconds: Option<f64>,
    /// Seconds from the first rebuilt chunk done to the last, median over runs: how
    /// unevenly repairs that started together progressed (all chunks start at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_spread_seconds: Option<f64>,
    /// The same in the simulator's replay of what ran (gated where the nodes gated),
    /// median over runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_finish_spread_seconds: Option<f64>,
    /// Rebuilt bytes per second of repair, median over runs.
    repair_mb_per_s: f64,
    /// The foreground workload before and during the repair (medians over runs), with
    /// --load-clients.
    #[serde(skip_serializing_if = "Option::is_none")]
    foreground: Option<Interference>,
    /// Every run's foreground, in order (the medians above are taken field by field).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    all_foreground: Vec<Interference>,
    /// repair_seconds / bound_seconds, median over runs.
    ratio: f64,
    all_ratios: Vec<f64>,
    /// The bound at the rate TCP payload gets of a link (`sim_link_bytes_per_s`): on the
    /// testbed tc counts whole frames, so payload gets 1448/1514 of it at MTU 1500 and the
    /// bound is that much longer; on loopback it is bound_seconds.
    payload_bound_seconds: f64,
    /// repair_seconds / payload_bound_seconds, median over runs: issue #41's "over the
    /// bound at TCP payload rate".
    payload_ratio: f64,
    all_payload_ratios: Vec<f64>,
    /// Every run's repair seconds, and beside them the simulator's replay of that run in
    /// the slice and the fluid model (absent with emulated disks).
    all_seconds: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    all_sim_seconds: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    all_sim_fluid_seconds: Option<Vec<f64>>,
    /// Every rebuilt chunk matched its checksum and every object read back exactly, in
    /// every run.
    verified: bool,
}

#[derive(Serialize)]
pub(crate) struct Report {
    testbed: bool,
    nodes: usize,
    code: String,
    link_bytes_per_s: f64,
    objects: usize,
    object_bytes: usize,
    chunk_bytes: usize,
    slice_bytes: usize,
    scheduler: String,
    /// Which repairs the nodes held to RepairBoost's timeslots.
    gate_timeslots: String,
    /// The nodes' own pacing, as a fraction of the link (testbed).
    pace: Option<f64>,
    /// The nodes' TCP congestion control (testbed).
    tcp_congestion: Option<String>,
    /// The testbed links' queue bound, milliseconds.
    queue_ms: Option<u32>,
    /// The testbed links' MTU.
    mtu: Option<u32>,
    /// Repair's floor when it has a class of its own below users' traffic (testbed).
    repair_class_floor: Option<f64>,
    /// How the testbed's links share their rate among transfers (fifo, peer-send, peer).
    queues: Option<String>,
    /// The rate the simulator runs every link at: on the testbed, the TCP payload share of
    /// it (tc counts frames); on loopback, the link's (token buckets count payload).
    sim_link_bytes_per_s: f64,
    /// Node 1's real link rate as a fraction of the one it reports (embedded cluster).
    slow_node: Option<f64>,
    /// RepairBoost's adaptive sub-processes: chunks per round (0: one round).
    subprocess: usize,
    runs: usize,
    /// The emulated HDD under every chunk store: (positioning seconds, bytes per second).
    hdd: Option<(f64, f64)>,
    methods: Vec<MethodRow>,
}

/// One run's outcome.
pub(crate) struct Run {
    pub(crate) lost: usize,
    pub(crate) seconds: f64,
    pub(crate) bound: f64,
    /// Seconds the busiest node's uplink or downlink needs for the bytes it moved.
    pub(crate) busiest: f64,
    /// Whole-machine CPU busy during the repair, in cores.
    pub(crate) cpu: f64,
    /// Helpers' chunk-file reads over the lost bytes.
    pub(crate) file_read_chunks: f64,
    /// The simulator on the same lost chunks (slice model, same scheduler); not with
    /// emulated disks, which it does not model.
    pub(crate) sim: Option<SimSame>,
    /// Per node: chunks' worth of repair traffic sent and received.
    pub(crate) loads: Vec<(u32, f64, f64)>,
    /// Seconds until the first rebuilt chunk was durable and recorded.
    pub(crate) first_done: Option<f64>,
    /// The foreground workload, with --load-clients.
    pub(crate) fg: Option<Interference>,
    pub(crate) verified: bool,
    /// What `auto` chose, as the repair report names it ("auto: ecpipe+repairboost").
    pub(crate) chosen: Option<String>,
    /// Each choice `auto` made, with every candidate's prediction.
    pub(crate) auto: Vec<kintsugi_proto::AutoChoice>,
}

impl Report {
    /// Every run of every method verified.
    pub(crate) fn verified(&self) -> bool {
        self.methods.iter().all(|m| m.verified)
    }
}

/// One method's row: medians over its runs, the first run's loads and plan.
pub(crate) fn method_row(a: &FullNodeArgs, method: Pick<Shape>, runs: &[Run]) -> MethodRow {
    let all_ratios: Vec<f64> = runs.iter().map(|r| r.seconds / r.bound).collect();
    // The bound scales inversely with the rate: at the payload rate it is this much longer.
    let payload_stretch = a.link / crate::bench_fullnode_sim::sim_link_rate(a);
    let all_payload_ratios: Vec<f64> = all_ratios.iter().map(|r| r / payload_stretch).collect();
    let secs: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    let sims: Option<Vec<f64>> = runs.iter().map(|r| r.sim.map(|s| s.seconds)).collect();
    let over_sim: Option<Vec<f64>> = runs.iter().map(|r| r.sim.map(|s| r.seconds / s.seconds)).collect();
    let fluid: Option<Vec<f64>> = runs.iter().map(|r| r.sim.map(|s| s.fluid)).collect();
    let over_fluid: Option<Vec<f64>> = runs.iter().map(|r| r.sim.map(|s| r.seconds / s.fluid)).collect();
    let slotted: Option<Vec<f64>> = runs.iter().map(|r| r.sim.and_then(|s| s.slotted)).collect();
    let replay_gated: Option<Vec<f64>> = runs.iter().map(|r| r.sim.and_then(|s| s.replay_gated)).collect();
    let spread: Option<Vec<f64>> = runs.iter().map(|r| r.first_done.map(|f| r.seconds - f)).collect();
    let sim_spread: Option<Vec<f64>> = runs.iter().map(|r| r.sim.map(|s| s.replay() - s.first_done)).collect();
    MethodRow {
        method: method.to_string(),
        lost_chunks: runs[0].lost,
        repair_seconds: crate::bench::stat(&secs).median,
        bound_seconds: runs[0].bound,
        busiest_link_seconds: runs[0].busiest,
        cpu_cores: runs[0].cpu,
        file_read_chunks: crate::bench::stat(&runs.iter().map(|r| r.file_read_chunks).collect::<Vec<_>>()).median,
        sim_seconds: sims.as_ref().map(|v| crate::bench::stat(v).median),
        over_sim: over_sim.map(|v| crate::bench::stat(&v).median),
        sim_fluid_seconds: fluid.as_ref().map(|v| crate::bench::stat(v).median),
        over_sim_fluid: over_fluid.map(|v| crate::bench::stat(&v).median),
        sim_slotted_seconds: slotted.map(|v| crate::bench::stat(&v).median),
        sim_replay_gated_seconds: replay_gated.map(|v| crate::bench::stat(&v).median),
        sim_busiest_link_seconds: runs[0].sim.map(|s| s.busiest),
        node_loads: runs[0].loads.clone(),
        finish_spread_seconds: spread.map(|v| crate::bench::stat(&v).median),
        sim_finish_spread_seconds: sim_spread.map(|v| crate::bench::stat(&v).median),
        repair_mb_per_s: crate::bench::stat(&runs.iter().map(|r| r.lost as f64 * a.chunk as f64 / r.seconds / 1e6).collect::<Vec<_>>())
            .median,
        foreground: Interference::median(&runs.iter().filter_map(|r| r.fg.clone()).collect::<Vec<_>>()),
        all_foreground: runs.iter().filter_map(|r| r.fg.clone()).collect(),
        ratio: crate::bench::stat(&all_ratios).median,
        all_ratios,
        payload_bound_seconds: runs[0].bound * payload_stretch,
        payload_ratio: crate::bench::stat(&all_payload_ratios).median,
        all_payload_ratios,
        all_seconds: secs,
        all_sim_seconds: sims,
        all_sim_fluid_seconds: fluid,
        verified: runs.iter().all(|r| r.verified),
        auto_chosen: runs.iter().filter_map(|r| r.chosen.clone()).collect(),
        auto_choices: runs.iter().map(|r| r.auto.clone()).filter(|a| !a.is_empty()).collect(),
    }
}

/// The whole report: the setting and a row per method.
pub(crate) fn report(a: &FullNodeArgs, rows: Vec<MethodRow>) -> Report {
    Report {
        testbed: a.testbed,
        nodes: a.nodes,
        code: a.code.to_string(),
        link_bytes_per_s: a.link,
        objects: a.objects,
        object_bytes: a.size,
        chunk_bytes: a.chunk,
        slice_bytes: a.slice,
        scheduler: a.scheduler.to_string(),
        gate_timeslots: a.gate_timeslots.to_string(),
        pace: a.pace,
        tcp_congestion: a.testbed.then(|| crate::testbed::congestion_in_use(&a.tcp_congestion)),
        queue_ms: a.testbed.then_some(a.queue_ms),
        mtu: a.testbed.then_some(a.mtu),
        repair_class_floor: a.repair_class,
        queues: a.testbed.then(|| a.queues.to_string()),
        sim_link_bytes_per_s: crate::bench_fullnode_sim::sim_link_rate(a),
        slow_node: a.slow_node,
        subprocess: a.subprocess,
        runs: a.runs,
        hdd: (a.hdd_seek_ms.is_some() || a.hdd_bw.is_some()).then(|| (a.hdd_seek_ms.unwrap_or(8.0) / 1e3, a.hdd_bw.unwrap_or(180e6))),
        methods: rows,
    }
}

/// Prints the report: JSON, or tables for people.
pub(crate) fn print(a: &FullNodeArgs, report: &Report) -> Result<()> {
    if a.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        let how = crate::testbed::links_label(a.testbed, a.queue_ms, &a.tcp_congestion, a.mtu, a.queues);
        println!(
            "{} nodes, {}, {} objects of {} B in {} B chunks, links {:.0} Mbit/s ({how}{}{}), scheduler {} (timeslot gating: {}), node 0 fails",
            a.nodes,
            a.code,
            a.objects,
            a.size,
            a.chunk,
            a.link * 8.0 / 1e6,
            a.pace.map(|f| format!(", nodes pace their sends at {f}")).unwrap_or_default(),
            a.repair_class.map(|f| format!(", repair in its own class below users', floor {f}")).unwrap_or_default(),
            a.scheduler,
            a.gate_timeslots
        );
        println!(
            "{:<14} {:>6} {:>10} {:>10} {:>10} {:>8} {:>10} {:>8} {:>6} {:>8} {:>10} {:>12} {:>16} {:>9} {:>10} {:>10}",
            "method",
            "lost",
            "repair s",
            "bound s",
            "busiest s",
            "x bound",
            "x payload",
            "sim s",
            "x sim",
            "fluid s",
            "sim gated",
            "sim slots s",
            "spread s (sim)",
            "verified",
            "CPU cores",
            "file reads"
        );
        for m in &report.methods {
            println!(
                "{:<14} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>8.2} {:>10.2} {:>8} {:>6} {:>8} {:>10} {:>12} {:>16} {:>9} {:>10.2} {:>10.2}",
                m.method,
                m.lost_chunks,
                m.repair_seconds,
                m.bound_seconds,
                m.busiest_link_seconds,
                m.ratio,
                m.payload_ratio,
                m.sim_seconds.map_or("-".to_string(), |s| format!("{s:.3}")),
                m.over_sim.map_or("-".to_string(), |s| format!("{s:.2}")),
                m.sim_fluid_seconds.map_or("-".to_string(), |s| format!("{s:.3}")),
                m.sim_replay_gated_seconds.map_or("-".to_string(), |s| format!("{s:.3}")),
                m.sim_slotted_seconds.map_or("-".to_string(), |s| format!("{s:.3}")),
                match (m.finish_spread_seconds, m.sim_finish_spread_seconds) {
                    (Some(s), Some(t)) => format!("{s:.2} ({t:.2})"),
                    (Some(s), None) => format!("{s:.2}"),
                    _ => "-".to_string(),
                },
                if m.verified { "yes" } else { "NO" },
                m.cpu_cores,
                m.file_read_chunks
            );
        }
        for m in report.methods.iter().filter(|m| !m.auto_chosen.is_empty()) {
            let runs: Vec<&str> = m.auto_chosen.iter().map(|c| c.strip_prefix("auto: ").unwrap_or(c)).collect();
            println!("{} (scheduler {}): auto chose, per run: {}", m.method, a.scheduler, runs.join("; "));
        }
    }
    if !a.json && report.methods.iter().any(|m| m.foreground.is_some()) {
        let names: Vec<&str> = a.load_workload.iter().map(|t| t.name()).collect();
        let switch = if a.load_switch > 0.0 && names.len() > 1 { format!(", {} s each", a.load_switch) } else { String::new() };
        println!(
            "foreground: {} clients, {}{switch}, {} records each (YCSB A values of {} B); baseline with node 0 down and no repair",
            a.load_clients,
            names.join(" -> "),
            a.load_records,
            a.load_value
        );
        println!(
            "{:<14} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>8}",
            "method", "repair MB/s", "base ops/s", "base p99 ms", "ops/s", "p99 ms", "interference", "fg delay s", "errors"
        );
        for m in &report.methods {
            if let Some(f) = &m.foreground {
                println!(
                    "{:<14} {:>10.1} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>12.3} {:>10.2} {:>8}",
                    m.method,
                    m.repair_mb_per_s,
                    f.baseline_ops_per_s,
                    f.baseline_p99_ms,
                    f.during_ops_per_s,
                    f.during_p99_ms,
                    f.interference,
                    f.delay_seconds,
                    f.errors
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: FullNodeArgs,
    }

    fn run(seconds: f64, bound: f64) -> Run {
        Run {
            lost: 24,
            seconds,
            bound,
            busiest: bound,
            cpu: 1.0,
            file_read_chunks: 6.0,
            sim: None,
            loads: Vec::new(),
            first_done: None,
            fg: None,
            verified: true,
            chosen: None,
            auto: Vec::new(),
        }
    }

    /// Issue #41 counts the bound at the rate TCP payload gets: on the testbed, tc counts
    /// 1514-byte frames that carry 1448 payload bytes at MTU 1500, so the payload bound is
    /// 1514/1448 of the frame-rate bound; loopback's token buckets count payload.
    #[test]
    fn the_payload_bound_is_longer_by_the_frames_headers_on_the_testbed_only() {
        let runs = [run(4.2, 3.355), run(4.0, 3.355), run(4.4, 3.355)];
        let tb = Cli::parse_from(["x", "--testbed", "--mtu", "1500"]).a;
        let row = method_row(&tb, Pick::Fixed(Shape::Ecpipe), &runs);
        assert!((row.payload_bound_seconds - 3.355 * 1514.0 / 1448.0).abs() < 1e-9);
        assert!((row.ratio - 4.2 / 3.355).abs() < 1e-9);
        assert!((row.payload_ratio - 4.2 / (3.355 * 1514.0 / 1448.0)).abs() < 1e-9);
        assert_eq!(row.all_payload_ratios.len(), 3);
        let lo = Cli::parse_from(["x"]).a;
        let row = method_row(&lo, Pick::Fixed(Shape::Ecpipe), &runs);
        assert_eq!((row.payload_bound_seconds, row.payload_ratio), (row.bound_seconds, row.ratio));
    }
}
