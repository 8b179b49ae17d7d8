//! `kintsugi bench geo`: Geometric Partitioning's headline experiment on the embedded cluster
//! with emulated HDDs (SOSP'21, section 6): objects sampled from the Alibaba trace are
//! stored in each layout (a fresh cluster per scheme), the node holding data chunks of the
//! most objects fails, and we time
//! - normal reads, then degraded reads (pipelined, and for extent layouts one chunk at a
//!   time) of the objects that had a data chunk on it, every byte checked;
//! - range reads before the failure (the paper's: a random length, half the object on average,
//!   at a random offset; `--range-bytes` for a fixed length);
//! - full-node recovery, every rebuilt chunk checked and every object read back after it.
//!
//! Sizes are the trace's divided by `--scale`, and so are s0, the chunk cap, the Stripe
//! layouts' 4 MiB recovery batch and Contiguous's 16 MiB chunk; the disk's positioning time
//! is divided by it too (`--hdd-seek-ms`), so positioning weighs against transfer as it does
//! at full size. The disks are slowed (18 MB/s by default) so that they, not this machine's
//! CPU, set the pace.

use crate::embedded::{pattern, Embedded};
use crate::units::{human_bytes, parse_rate};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use kintsugi_codes::CodeSpec;
use kintsugi_geo::trace::SizeCdf;
use kintsugi_geo::workload::Workload;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use kintsugi_proto::LayoutSpec;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct GeoBenchArgs {
    /// Storage nodes (the one holding data chunks of the most objects fails).
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Objects sampled from the trace.
    #[arg(long, default_value_t = 120)]
    pub objects: usize,
    /// w1 (4 MiB-4 GiB objects) or w2 (4 KiB-4 MiB).
    #[arg(long, default_value = "w1")]
    pub workload: String,
    /// Every size (objects, s0, chunk cap, batch) is the paper's divided by this.
    #[arg(long, default_value_t = 16)]
    pub scale: u64,
    /// Schemes, comma-separated: geo (Clay(10,4,13), s0 4 MiB, q 2), con (Clay, 16 MiB
    /// chunks), stripe-max (Clay), clay (Clay on the Stripe layout), rs (RS(10,4)) and lrc
    /// (LRC(10,2,2)) on the Stripe layout (4 MiB chunks: the paper's recovery batch).
    #[arg(long, value_delimiter = ',', default_value = "geo,con,rs,lrc,stripe-max")]
    pub schemes: Vec<String>,
    /// Positioning per disk I/O, milliseconds [default: 80 / scale, the paper's 8 ms with
    /// the disk slowed 10x].
    #[arg(long)]
    pub hdd_seek_ms: Option<f64>,
    /// Sequential rate of each disk.
    #[arg(long, default_value = "18MB/s", value_parser = parse_rate)]
    pub hdd_bw: f64,
    /// Every node's links.
    #[arg(long, default_value = "10gbit", value_parser = parse_rate)]
    pub link: f64,
    /// The link every timed read's bytes go on to after the reader: the paper's clients
    /// are limited to 1 Gbit/s, and its reader (the HTTP server) rebuilds the next chunk
    /// while it sends one, which is what pipelining gains. The default is that link slowed
    /// 10x, as the disks are.
    #[arg(long, default_value = "100mbit", value_parser = parse_rate)]
    pub client_link: f64,
    /// Per-chunk repair graph of the recovery.
    #[arg(long, default_value = "cr")]
    pub method: Shape,
    /// Chunks repaired at once, cluster-wide (the per-node budget of 512 units of 4 MiB
    /// applies as well).
    #[arg(long, default_value_t = 64)]
    pub parallel: usize,
    /// Placement groups (few, so that stripes fill with this few objects; the failed node
    /// is in most of them, at every position of the stripe, so all of Clay's read patterns
    /// occur).
    #[arg(long, default_value_t = 2)]
    pub pgs: u32,
    /// Objects stored at once.
    #[arg(long, default_value_t = 4)]
    pub put_parallel: usize,
    /// Objects read normally and degraded (those with a data chunk on the failed node).
    #[arg(long, default_value_t = 8)]
    pub reads: usize,
    /// Range reads timed per scheme, before the failure.
    #[arg(long, default_value_t = 16)]
    pub ranges: usize,
    /// Bytes of each range read, at a random offset; default: the paper's, a uniformly
    /// random length (half the object on average) at a random offset that fits it.
    #[arg(long, value_parser = crate::units::parse_nonzero_size)]
    pub range_bytes: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

struct Scheme {
    name: String,
    code: CodeSpec,
    layout: LayoutSpec,
    chunk: u64,
}

fn scheme(name: &str, scale: u64) -> Result<Scheme> {
    let clay: CodeSpec = "clay:10,4,13".parse()?;
    let mib = |m: u64| (m << 20) / scale;
    // Sizes must be whole Clay sub-chunks (alpha = 256).
    let round = |b: u64| b.next_multiple_of(256).max(256);
    Ok(match name {
        "geo" => {
            Scheme { name: name.into(), code: clay, layout: LayoutSpec::Geo { s0: round(mib(4)), q: 2, cap: round(mib(256)) }, chunk: 0 }
        }
        "con" => Scheme { name: name.into(), code: clay, layout: LayoutSpec::Contiguous { chunk: round(mib(16)) }, chunk: 0 },
        "stripe-max" => Scheme { name: name.into(), code: clay, layout: LayoutSpec::StripeMax, chunk: 0 },
        "clay" => Scheme { name: name.into(), code: clay, layout: LayoutSpec::Stripe, chunk: round(mib(4)) },
        "rs" => Scheme { name: name.into(), code: "rs:10,4".parse()?, layout: LayoutSpec::Stripe, chunk: mib(4) },
        "lrc" => Scheme { name: name.into(), code: "lrc:10,2,2".parse()?, layout: LayoutSpec::Stripe, chunk: mib(4) },
        other => bail!("unknown scheme '{other}' (geo, con, stripe-max, clay, rs, lrc)"),
    })
}

#[derive(Serialize, Clone, Debug)]
struct Row {
    scheme: String,
    code: String,
    layout: String,
    stored_bytes: u64,
    /// Storing every object, and sealing what was left open then (extent layouts).
    put_seconds: f64,
    /// The part of it after the last put was acknowledged (stripes sealed in the background
    /// meanwhile are not in it).
    seal_seconds: f64,
    lost_chunks: usize,
    lost_bytes: u64,
    recovery_seconds: f64,
    /// Rebuilt bytes per second.
    recovery_mb_per_s: f64,
    /// Recovery throughput over RS's on the Stripe layout (paper: geo 1.85).
    #[serde(skip_serializing_if = "Option::is_none")]
    recovery_vs_rs: Option<f64>,
    /// Bytes the surviving nodes read from their disks for the recovery.
    recovery_disk_read_bytes: u64,
    /// The busiest surviving disk's I/O time during the recovery (positioning plus transfer):
    /// the recovery's disk bound on these emulated disks.
    recovery_disk_busiest_seconds: f64,
    /// recovery_seconds / recovery_disk_busiest_seconds (1: the disks set the pace).
    recovery_over_disk_bound: f64,
    /// The objects read, normal and degraded (same objects).
    objects_read: usize,
    /// Their bytes (each read sends them on to the client link).
    read_bytes: u64,
    normal_read_seconds: f64,
    /// The first pass of degraded reads after the failure (not timed below: it ran 1.6x
    /// slower than the passes after it, whichever way it read, so a pass's place in the
    /// order decided the pipelining cut).
    degraded_cold_seconds: f64,
    /// Mean of two passes, alternating with the one-chunk-at-a-time passes.
    degraded_read_seconds: f64,
    /// degraded / normal (paper: geo 1.02).
    degraded_over_normal: f64,
    /// Extent layouts: degraded reads one chunk at a time, and the gain of pipelining
    /// (paper 23.4-35.9%).
    #[serde(skip_serializing_if = "Option::is_none")]
    unpipelined_degraded_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pipelining_gain: Option<f64>,
    /// The paper's figure: how much pipelining cuts the degraded read's time,
    /// 1 - degraded / one chunk at a time (SOSP'21 Figure 13: 23.4-35.9%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pipelining_cut: Option<f64>,
    /// Mean latency of a range read.
    range_read_ms: f64,
    /// Mean length of the objects' per-object index records (Geo, Contiguous; the paper's
    /// are about 40 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    index_record_bytes: Option<f64>,
    verified: bool,
}

#[derive(Serialize)]
struct Report {
    nodes: usize,
    workload: String,
    objects: usize,
    scale: u64,
    object_bytes: u64,
    hdd_seek_ms: f64,
    hdd_bytes_per_s: f64,
    link_bytes_per_s: f64,
    /// Where timed reads' bytes go on to (`--client-link`).
    client_link_bytes_per_s: f64,
    method: String,
    rows: Vec<Row>,
}

pub fn run(a: GeoBenchArgs) -> Result<()> {
    if a.nodes < 15 {
        bail!("the schemes are 14 chunks wide: at least 15 nodes (a stripe and a spare)");
    }
    if a.objects == 0 || a.scale == 0 || a.parallel == 0 {
        bail!("--objects, --scale and --parallel must be at least 1");
    }
    let seek_ms = a.hdd_seek_ms.unwrap_or(80.0 / a.scale as f64);
    if !(seek_ms >= 0.0 && seek_ms.is_finite()) {
        bail!("--hdd-seek-ms must be a number of milliseconds >= 0");
    }
    let schemes: Vec<Scheme> = a.schemes.iter().map(|s| scheme(s, a.scale)).collect::<Result<_>>()?;
    let workload = Workload::parse(&a.workload).map_err(|e| anyhow!(e))?;
    let sizes: Vec<u64> = workload
        .sample(&SizeCdf::alibaba(), a.objects, a.seed)
        .map_err(|e| anyhow!(e))?
        .into_iter()
        .map(|s| (s / a.scale).max(1))
        .collect();
    let total: u64 = sizes.iter().sum();
    eprintln!(
        "{} objects of {} ({} in all), {} nodes, disks {seek_ms} ms + {}/s, links {}/s, reads go on to a client at {}/s",
        sizes.len(),
        workload.name(),
        human_bytes(total),
        a.nodes,
        human_bytes(a.hdd_bw as u64),
        human_bytes(a.link as u64),
        human_bytes(a.client_link as u64)
    );
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    for s in &schemes {
        let row = rt.block_on(one(&a, s, &sizes, seek_ms))?;
        eprintln!(
            "{}: recovery {:.2} s ({:.1} MB/s), degraded read {:.2}x normal",
            row.scheme, row.recovery_seconds, row.recovery_mb_per_s, row.degraded_over_normal
        );
        rows.push(row);
    }
    let rs = rows.iter().find(|r| r.scheme == "rs").map(|r| r.recovery_mb_per_s);
    for r in &mut rows {
        r.recovery_vs_rs = rs.map(|x| r.recovery_mb_per_s / x);
    }
    let verified = rows.iter().all(|r| r.verified);
    let report = Report {
        nodes: a.nodes,
        workload: workload.name().to_string(),
        objects: sizes.len(),
        scale: a.scale,
        object_bytes: total,
        hdd_seek_ms: seek_ms,
        hdd_bytes_per_s: a.hdd_bw,
        link_bytes_per_s: a.link,
        client_link_bytes_per_s: a.client_link,
        method: a.method.to_string(),
        rows,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:<11} {:>9} {:>6} {:>9} {:>9} {:>7} {:>8} {:>7} {:>8} {:>7} {:>9} {:>8} {:>8}",
            "scheme",
            "stored",
            "lost",
            "lost",
            "recov s",
            "MB/s",
            "vs rs",
            "x disk",
            "normal s",
            "degr s",
            "degr/norm",
            "pipe cut",
            "range ms"
        );
        for r in &report.rows {
            println!(
                "{:<11} {:>9} {:>6} {:>9} {:>9.2} {:>7.1} {:>8} {:>7.2} {:>8.2} {:>7.2} {:>9.2} {:>8} {:>8.1}",
                r.scheme,
                human_bytes(r.stored_bytes),
                r.lost_chunks,
                human_bytes(r.lost_bytes),
                r.recovery_seconds,
                r.recovery_mb_per_s,
                r.recovery_vs_rs.map_or("-".into(), |x| format!("{x:.2}x")),
                r.recovery_over_disk_bound,
                r.normal_read_seconds,
                r.degraded_read_seconds,
                r.degraded_over_normal,
                r.pipelining_cut.map_or("-".into(), |x| format!("{:.0}%", x * 100.0)),
                r.range_read_ms
            );
        }
        println!("x disk: recovery time over the busiest emulated disk's I/O time during it (1: the disks set the pace)");
        println!("paper (SOSP'21): geo recovers 1.85x RS and 1.30x LRC; geo degraded read 1.02x normal; pipelining cuts degraded reads by 23.4-35.9%");
    }
    if !verified {
        bail!("some object did not read back exactly");
    }
    Ok(())
}

async fn one(a: &GeoBenchArgs, s: &Scheme, sizes: &[u64], seek_ms: f64) -> Result<Row> {
    let dir = tempfile::Builder::new().prefix("kintsugi-bench-geo").tempdir()?;
    let pgs = a.pgs;
    // The paper keeps each group's index on r + 1 of its disks (5 for Clay(10,4)).
    let index_copies = s.code.build().map_err(|e| anyhow!(e.to_string()))?;
    let index_copies = index_copies.n() - index_copies.k() + 1;
    let mut e = Embedded::start_tuned(dir.path(), a.nodes, Some(a.link), Some((seek_ms / 1e3, a.hdd_bw)), |c| {
        c.placement_groups = pgs;
        c.index_copies = index_copies;
    })
    .await?;
    let c = e.client.clone();
    // Timed reads go on to the paper's client link; puts, seals and checks do not.
    let reader = {
        let mut r = c.clone();
        r.egress = std::sync::Arc::new(kintsugi_node::Shaper::new(Some(a.client_link), None));
        r
    };
    let name = |i: usize| format!("obj{i:05}");
    let t = Instant::now();
    // Several puts at once: each writes to a few disks (its home and staging copies, or one
    // stripe), and the cluster has many.
    let mut puts = tokio::task::JoinSet::new();
    let mut todo = sizes.iter().copied().enumerate();
    loop {
        while puts.len() < a.put_parallel.max(1) {
            let Some((i, size)) = todo.next() else { break };
            let (c, code, chunk, layout) = (c.clone(), s.code, s.chunk, s.layout);
            puts.spawn(async move {
                let data = pattern(size as usize, i as u64 + 1);
                let mut r = &data[..];
                c.put_with_layout(&name(i), &mut r, size, code, chunk, layout, &|_| {}).await.map_err(|e| anyhow!("{}: {e}", name(i)))
            });
        }
        let Some(done) = puts.join_next().await else { break };
        done??;
    }
    let stored_seconds = t.elapsed().as_secs_f64();
    let before_seal = e.stats();
    if s.layout != LayoutSpec::Stripe && s.layout != LayoutSpec::StripeMax {
        c.seal().await.map_err(|e| anyhow!(e))?;
    }
    let put_seconds = t.elapsed().as_secs_f64();
    let seal_seconds = put_seconds - stored_seconds;
    let after_seal = e.stats();
    let seal_busiest = busiest_disk(&before_seal, &after_seal);
    eprintln!(
        "  {}: {} objects stored in {stored_seconds:.1} s, sealed {seal_seconds:.1} s later (busiest disk {seal_busiest:.1} s of I/O meanwhile)",
        s.name,
        sizes.len()
    );
    let stored: u64 = after_seal.iter().flatten().map(|st| st.bytes).sum();
    // Staging copies and small-size bucket pieces still on disk after sealing (should be
    // none): chunk files named as copies (`.rN`) or pieces (`.oOFFSET`).
    let mut copies_left = 0;
    for i in 0..a.nodes {
        if let Ok(d) = std::fs::read_dir(dir.path().join(format!("node{i:02}"))) {
            copies_left += d
                .flatten()
                .filter(|f| {
                    let name = f.file_name().to_string_lossy().to_string();
                    name.strip_suffix(".chunk")
                        .and_then(|id| kintsugi_proto::ChunkId::try_from(id.to_string()).ok())
                        .is_some_and(|id| id.replica_parts().is_some() || id.piece_parts().is_some())
                })
                .count();
        }
    }
    eprintln!(
        "  {}: {} stored ({:.2}x the objects), {copies_left} staging copies left",
        s.name,
        human_bytes(stored),
        stored as f64 / sizes.iter().sum::<u64>() as f64
    );
    // The node that fails: the one holding data chunks of the most objects (node 0 on a tie),
    // so that the degraded reads, of the objects with a data chunk on it, are as many as
    // can be (a Geo object lives whole on one member: with node 0 regardless, only the few
    // objects homed there qualified). They are read largest first.
    let mut holders: Vec<Vec<u32>> = Vec::new();
    let mut record_bytes = Vec::new();
    for i in 0..sizes.len() {
        let l = c.stat(&name(i)).await.map_err(|e| anyhow!(e))?;
        record_bytes.extend(kintsugi_proto::object_index::IndexRecord::from_layout(&l).map(|r| r.encode().len()));
        holders.push(kintsugi_client::geo_io::extents_of(&l).iter().map(|x| l.stripes[x.stripe].chunks[x.index].node).collect());
    }
    // Objects with a data chunk on each node.
    let mut data_on = vec![0usize; a.nodes];
    for h in &holders {
        for n in h.iter().collect::<std::collections::BTreeSet<_>>() {
            data_on[*n as usize] += 1;
        }
    }
    let victim = (0..a.nodes).max_by_key(|&n| (data_on[n], std::cmp::Reverse(n))).unwrap_or(0);
    eprintln!("  {}: node {victim} fails, holding data of {} object(s)", s.name, data_on[victim]);
    let mut on_victim: Vec<(u64, usize)> =
        sizes.iter().enumerate().filter(|(i, _)| holders[*i].contains(&(victim as u32))).map(|(i, &size)| (size, i)).collect();
    on_victim.sort_unstable_by(|x, y| y.cmp(x));
    let reads: Vec<usize> = on_victim.iter().take(a.reads).map(|x| x.1).collect();
    let timed_reads = |client: kintsugi_client::Client| {
        let reads = reads.clone();
        async move {
            let mut secs = 0.0;
            let mut ok = true;
            for &i in &reads {
                let t = Instant::now();
                let (got, _) = client.get(&name(i), Shape::Ppr, 256 << 10).await.map_err(|e| anyhow!("{}: {e}", name(i)))?;
                secs += t.elapsed().as_secs_f64();
                ok &= got == pattern(sizes[i] as usize, i as u64 + 1);
            }
            Ok::<_, anyhow::Error>((secs, ok))
        }
    };
    // A first pass warms what every read needs once (connections, index lookups) untimed.
    let (_, mut verified) = timed_reads(reader.clone()).await?;
    let (normal, ok) = timed_reads(reader.clone()).await?;
    verified &= ok;
    eprintln!("  {}: {} normal reads in {normal:.2} s", s.name, reads.len());
    // Range reads before the failure.
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let mut range_secs = 0.0;
    for _ in 0..a.ranges {
        let i = rng.random_range(0..sizes.len());
        let (off, range) = match a.range_bytes {
            Some(n) => (rng.random_range(0..sizes[i]), n as u64),
            None => {
                let len = rng.random_range(1..=sizes[i].max(1));
                (rng.random_range(0..=sizes[i] - len.min(sizes[i])), len)
            }
        };
        let mut out = Vec::new();
        let t = Instant::now();
        reader.get_range_into(&name(i), off, range, &mut out, Shape::Ppr, 256 << 10, &|_| {}).await.map_err(|e| anyhow!(e))?;
        range_secs += t.elapsed().as_secs_f64();
        let want = pattern(sizes[i] as usize, i as u64 + 1);
        verified &= out[..] == want[off as usize..(off + range).min(sizes[i]) as usize];
    }
    c.fail(victim as u32).await.map_err(|e| anyhow!(e))?;
    if let Some(n) = e.nodes[victim].take() {
        n.stop().await;
    }
    e.wait_alive(a.nodes - 1).await?;
    // The first degraded pass is slower than later ones, pipelined or not: it is timed
    // apart, then pipelined and one-chunk-at-a-time passes alternate, two of each.
    let (cold, ok) = timed_reads(reader.clone()).await?;
    verified &= ok;
    let extent_layout = matches!(s.layout, LayoutSpec::Geo { .. } | LayoutSpec::Contiguous { .. });
    let mut plain = reader.clone();
    plain.pipelined_reads = false;
    let (mut degraded, mut unpipelined) = (0.0, extent_layout.then_some(0.0));
    for _ in 0..2 {
        let (secs, ok) = timed_reads(reader.clone()).await?;
        verified &= ok;
        degraded += secs / 2.0;
        if let Some(u) = unpipelined.as_mut() {
            let (secs, ok) = timed_reads(plain.clone()).await?;
            verified &= ok;
            *u += secs / 2.0;
        }
    }
    eprintln!(
        "  {}: degraded reads in {degraded:.2} s ({:?} s one chunk at a time; the first pass {cold:.2} s); recovering node {victim}",
        s.name, unpipelined
    );
    let before = e.stats();
    let r = c.repair(a.method, 1 << 20, a.parallel, Scheduler::Repairboost).await.map_err(|e| anyhow!(e))?;
    let after = e.stats();
    let (mut disk_read, mut busy) = (0u64, Vec::new());
    for (was, now) in before.iter().zip(&after) {
        if let (Some(was), Some(now)) = (was, now) {
            // What the helpers' reads took from the chunk files (whole checksum blocks,
            // read-ahead, reads through short gaps on an HDD), not what they used.
            disk_read += now.repair_file_read.saturating_sub(was.repair_file_read);
            busy.push(now.disk_busy_seconds - was.disk_busy_seconds);
        }
    }
    let busiest = busy.iter().copied().fold(0.0, f64::max);
    tracing::info!("{}: disk seconds per surviving node during recovery: {busy:.2?}", s.name);
    eprintln!(
        "  {}: recovery read {} from the disks; busiest disk {busiest:.2} s of I/O ({:.2}x of it)",
        s.name,
        human_bytes(disk_read),
        r.seconds / busiest.max(1e-9)
    );
    eprintln!("  {}: {} lost chunks ({}) rebuilt in {:.2} s; reading everything back", s.name, r.lost, human_bytes(r.bytes), r.seconds);
    verified &= r.failed == 0;
    for (i, &size) in sizes.iter().enumerate() {
        let (got, rep) = c.get(&name(i), Shape::Cr, 1 << 20).await.map_err(|e| anyhow!("{}: {e}", name(i)))?;
        verified &= got == pattern(size as usize, i as u64 + 1) && rep.degraded.is_empty();
    }
    e.stop().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(Row {
        scheme: s.name.clone(),
        code: s.code.to_string(),
        layout: s.layout.to_string(),
        stored_bytes: stored,
        put_seconds,
        seal_seconds,
        lost_chunks: r.lost,
        lost_bytes: r.bytes,
        recovery_seconds: r.seconds,
        recovery_mb_per_s: r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
        recovery_vs_rs: None,
        recovery_disk_read_bytes: disk_read,
        recovery_disk_busiest_seconds: busiest,
        recovery_over_disk_bound: r.seconds / busiest.max(1e-9),
        objects_read: reads.len(),
        read_bytes: reads.iter().map(|&i| sizes[i]).sum(),
        normal_read_seconds: normal,
        degraded_cold_seconds: cold,
        degraded_read_seconds: degraded,
        degraded_over_normal: degraded / normal.max(1e-9),
        unpipelined_degraded_seconds: unpipelined,
        pipelining_gain: unpipelined.map(|u| u / degraded.max(1e-9) - 1.0),
        pipelining_cut: unpipelined.map(|u| 1.0 - degraded / u.max(1e-9)),
        range_read_ms: range_secs * 1e3 / a.ranges.max(1) as f64,
        index_record_bytes: (!record_bytes.is_empty()).then(|| record_bytes.iter().sum::<usize>() as f64 / record_bytes.len() as f64),
        verified,
    })
}

/// The most I/O time one node's emulated disk served between two stat snapshots.
fn busiest_disk(before: &[Option<kintsugi_proto::NodeStat>], after: &[Option<kintsugi_proto::NodeStat>]) -> f64 {
    before
        .iter()
        .zip(after)
        .filter_map(|(was, now)| Some(now.as_ref()?.disk_busy_seconds - was.as_ref()?.disk_busy_seconds))
        .fold(0.0, f64::max)
}
