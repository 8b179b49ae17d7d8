//! The client commands: `put / get / ls / stat / delete / fail / repair / status / seal`
//! (the processes themselves, `node` and `coordinator`, are in `service_cmd`).

use crate::atomic_file::AtomicFile;
use crate::progress::Progress;
use crate::units::{human_bytes, parse_nonzero_size};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use kintsugi_client::client::ObjectSink;
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{NodeId, Pick, Shape};
use kintsugi_proto::LayoutSpec;
use std::path::PathBuf;
use std::time::Duration;

/// Where the coordinator is, for every client command.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Coordinator address (host:port), or several comma-separated (coordinators sharing etcd:
    /// the one leading answers; a failover is waited out for up to 20 s).
    #[arg(long, env = "KINTSUGI_COORDINATOR", default_value = "127.0.0.1:7400", global = true)]
    pub coordinator: String,
    /// The data directory of a `kintsugi serve` store: its coordinator and secret are read
    /// from DIR/cluster.toml (instead of --coordinator and --secret-file).
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct PutArgs {
    /// Object name.
    pub name: String,
    /// File to store.
    pub file: PathBuf,
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Chunk size (default: the coordinator's; contiguous: 16MiB).
    #[arg(long, value_parser = parse_nonzero_size)]
    pub chunk_size: Option<usize>,
    /// How the object maps to chunks: stripe (rows of k chunks across k nodes), stripe-max
    /// (one row, chunk = size/k), geo (Geometric Partitioning: chunks s0, s0 q, ... on one
    /// node, coded across its placement group; e.g. --code clay:10,4,13) or contiguous
    /// (equal --chunk-size chunks on one node, coded the same way).
    #[arg(long, value_enum, default_value = "stripe")]
    pub layout: LayoutArg,
    /// Geo: the smallest chunk [default: 4MiB, rounded up to a whole number of the code's
    /// sub-chunks, e.g. 4194318 bytes for clay:6,3,8's 27].
    #[arg(long, value_parser = parse_nonzero_size)]
    pub s0: Option<usize>,
    /// Geo: the ratio between successive chunk sizes.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=16))]
    pub q: u64,
    /// Geo: the largest chunk (the paper's 256 MiB cap).
    #[arg(long, default_value = "256MiB", value_parser = parse_nonzero_size)]
    pub max_chunk: usize,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutArg {
    Stripe,
    StripeMax,
    Geo,
    Contiguous,
}

impl PutArgs {
    fn layout(&self) -> LayoutSpec {
        match self.layout {
            LayoutArg::Stripe => LayoutSpec::Stripe,
            LayoutArg::StripeMax => LayoutSpec::StripeMax,
            LayoutArg::Geo => {
                // Clay's chunks are whole numbers of sub-chunks: the default s0 is rounded
                // up to one (a given --s0 is taken as it is, and refused if it is not).
                let alpha = self.code.build().map_or(1, |c| c.sub_chunks()) as u64;
                let s0 = self.s0.map_or((4u64 << 20).next_multiple_of(alpha), |s| s as u64);
                LayoutSpec::Geo { s0, q: self.q, cap: self.max_chunk as u64 }
            }
            LayoutArg::Contiguous => LayoutSpec::Contiguous { chunk: self.chunk_size.unwrap_or(16 << 20) as u64 },
        }
    }
}

#[derive(Args, Debug)]
pub struct GetArgs {
    pub name: String,
    /// Where to write the object (`-`: standard output). A file is replaced only once the
    /// whole object has been read and verified.
    #[arg(long)]
    pub out: PathBuf,
    /// Method for degraded reads of unavailable chunks: cr, ppr, ecpipe or ecpipe-cyclic
    /// (ChameleonEC and RepairBoost schedule full-node repair: `repair --scheduler`).
    #[arg(long, default_value = "ecpipe")]
    pub method: Shape,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Read from this byte of the object (a range read starts at the first chunk that
    /// overlaps it).
    #[arg(long, value_parser = crate::units::parse_size)]
    pub offset: Option<usize>,
    /// Read at most this many bytes [default: to the end].
    #[arg(long, value_parser = crate::units::parse_size)]
    pub length: Option<usize>,
}

#[derive(Args, Debug)]
pub struct RepairArgs {
    /// Per-chunk repair graph: cr, ppr, ecpipe or ecpipe-cyclic; or auto: the coordinator
    /// predicts CR, PPR and ECPipe in its simulator on the cluster's lost chunks and recent
    /// traffic, and runs the fastest.
    #[arg(long, default_value = "ecpipe")]
    pub method: Pick<Shape>,
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Chunks repaired at once.
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// Who picks helpers and destinations: index, random, lru, greedy, repairboost,
    /// repairboost-rtb, repairboost-ts, repairboost-poll, mppr or chameleon (which draws its own trees);
    /// or auto: random, repairboost or chameleon, predicted as --method auto, and asked
    /// again before each ChameleonEC phase.
    #[arg(long, default_value = "repairboost")]
    pub scheduler: Pick<Scheduler>,
    /// Repairs one destination node runs at once in this run (0: no limit; Ceph's
    /// osd_recovery_max_active, the simulator's --max-active) [default: the coordinator's
    /// repair_max_active_per_destination].
    #[arg(long)]
    pub max_active_per_destination: Option<usize>,
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}

impl Target {
    /// The coordinator's address: `--data-dir`'s serve state (whose secret it also takes), or
    /// `--coordinator`.
    pub(crate) fn address(&self) -> Result<String> {
        let Some(dir) = &self.data_dir else { return Ok(self.coordinator.clone()) };
        let state = crate::serve_state::ServeState::require(dir)?;
        let secret = kintsugi_proto::auth::Secret::from_file(&state.secret_file).map_err(|e| anyhow!(e))?;
        kintsugi_proto::auth::set_secret(Some(secret));
        Ok(state.coordinator)
    }
}

pub(crate) fn client(t: &Target) -> Result<Client> {
    Ok(Client::new(&t.address()?))
}

/// `kintsugi put`: streams the file stripe by stripe (memory: two stripes).
pub fn put(t: &Target, a: PutArgs) -> Result<()> {
    runtime()?.block_on(async {
        let mut file = tokio::fs::File::open(&a.file).await.with_context(|| format!("cannot read {}", a.file.display()))?;
        let size = file.metadata().await.with_context(|| format!("cannot read {}", a.file.display()))?.len();
        let progress = Progress::new(&format!("put {}", a.name), size);
        let layout = client(t)?
            .put_with_layout(&a.name, &mut file, size, a.code, a.chunk_size.unwrap_or(0) as u64, a.layout(), &|d| progress.set(d))
            .await
            .map_err(|e| anyhow!(e))?;
        progress.finish();
        let width = layout.stripes.first().map_or(0, |s| s.chunks.len());
        if let Ok(Some(why)) = client(t)?.cannot_heal(width).await {
            eprintln!("warning: '{}': {why}", a.name);
        }
        if t.json {
            println!("{}", serde_json::to_string(&layout)?);
        } else if layout.extents.is_empty() {
            println!("stored '{}' ({}) as {} stripe(s) of {}", a.name, human_bytes(size), layout.stripes.len(), layout.code);
        } else {
            let home = layout.extents.last().map(|e| layout.stripes[e.stripe].chunks[e.index].node);
            println!(
                "stored '{}' ({}) in the {} layout: {} extent(s) in {} stripe(s) of {}, chunks on node {}",
                a.name,
                human_bytes(size),
                layout.layout,
                layout.extents.len(),
                layout.stripes.len(),
                layout.code,
                home.map_or("-".to_string(), |h| h.to_string())
            );
        }
        Ok(())
    })
}

/// Where `get` writes: a file replaced atomically once the whole object is verified, or
/// standard output (`--out -`), which cannot take bytes back if the object is replaced
/// mid-read.
enum GetSink {
    File(AtomicFile, u64),
    Stdout(std::io::Stdout, u64),
}

/// The output of a `get` failed: the caller's own I/O, not the cluster.
fn output_error(m: String) -> kintsugi_client::Error {
    kintsugi_client::Error::new(kintsugi_client::ErrorKind::Input, m)
}

impl ObjectSink for GetSink {
    fn write(&mut self, data: &[u8]) -> Result<(), kintsugi_client::Error> {
        use std::io::Write;
        match self {
            GetSink::File(f, n) => {
                f.file().write_all(data).map_err(|e| output_error(format!("cannot write the output: {e}")))?;
                *n += data.len() as u64;
            }
            GetSink::Stdout(o, n) => {
                o.write_all(data).map_err(|e| output_error(format!("cannot write to standard output: {e}")))?;
                *n += data.len() as u64;
            }
        }
        Ok(())
    }
    fn restart(&mut self) -> Result<(), kintsugi_client::Error> {
        use std::io::Seek;
        match self {
            GetSink::File(f, n) => {
                f.file().set_len(0).map_err(|e| output_error(e.to_string()))?;
                f.file().seek(std::io::SeekFrom::Start(0)).map_err(|e| output_error(e.to_string()))?;
                *n = 0;
                Ok(())
            }
            GetSink::Stdout(_, 0) => Ok(()),
            GetSink::Stdout(..) => Err(output_error("part of the old version was already written to standard output".into())),
        }
    }
}

/// `kintsugi get`: streams the object stripe by stripe into the output.
pub fn get(t: &Target, a: GetArgs) -> Result<()> {
    runtime()?.block_on(async {
        let c = client(t)?;
        let size = c.stat(&a.name).await.map_err(|e| anyhow!(e))?.size;
        let to_stdout = a.out.as_os_str() == "-";
        let mut sink = if to_stdout { GetSink::Stdout(std::io::stdout(), 0) } else { GetSink::File(AtomicFile::create(&a.out)?, 0) };
        let ranged = a.offset.is_some() || a.length.is_some();
        let (offset, length) = (a.offset.unwrap_or(0) as u64, a.length.map_or(u64::MAX, |l| l as u64));
        let progress = Progress::new(&format!("get {}", a.name), length.min(size.saturating_sub(offset)));
        let report = if ranged {
            c.get_range_into(&a.name, offset, length, &mut sink, a.method, a.slice as u64, &|d| progress.set(d)).await
        } else {
            c.get_into(&a.name, &mut sink, a.method, a.slice as u64, &|d| progress.set(d)).await
        }
        .map_err(|e| anyhow!(e))?;
        progress.finish();
        let bytes = match sink {
            GetSink::File(f, n) => {
                f.commit()?;
                n
            }
            GetSink::Stdout(mut o, n) => {
                use std::io::Write;
                o.flush().context("cannot write to standard output")?;
                n
            }
        };
        // With the object on standard output, the report goes to standard error.
        let report_line = if t.json {
            let degraded: Vec<_> =
                report.degraded.iter().map(|&(s, i, secs)| serde_json::json!({"stripe": s, "chunk": i, "seconds": secs})).collect();
            serde_json::json!({"name": a.name, "bytes": bytes, "degraded_reads": degraded}).to_string()
        } else {
            format!(
                "read '{}' ({}) to {}; {} chunk(s) rebuilt by degraded reads ({})",
                a.name,
                human_bytes(bytes),
                a.out.display(),
                report.degraded.len(),
                a.method
            )
        };
        if to_stdout {
            eprintln!("{report_line}");
        } else {
            println!("{report_line}");
        }
        Ok(())
    })
}

/// `kintsugi ls`: page after page, printed as it comes (a table), or one JSON array.
pub fn ls(t: &Target, prefix: &str, delimiter: &str) -> Result<()> {
    runtime()?.block_on(async {
        let c = client(t)?;
        let (mut after, mut all, mut common) = (String::new(), Vec::new(), Vec::new());
        if !t.json {
            println!("{:<30} {:>12} {:>12} {:>8}", "name", "size", "code", "stripes");
        }
        loop {
            let (objects, prefixes, next) = c.list_page(prefix, delimiter, &after, 0).await.map_err(|e| anyhow!(e))?;
            if t.json {
                all.extend(objects);
                common.extend(prefixes);
            } else {
                for p in prefixes {
                    println!("{p:<30} {:>12} {:>12} {:>8}", "(prefix)", "", "");
                }
                for o in objects {
                    println!(
                        "{:<30} {:>12} {:>12} {:>8}{}",
                        o.name,
                        human_bytes(o.size),
                        o.code.to_string(),
                        o.stripes,
                        if o.committed { "" } else { " (uncommitted)" }
                    );
                }
            }
            match next {
                Some(n) => after = n,
                None => break,
            }
        }
        if t.json && delimiter.is_empty() {
            println!("{}", serde_json::to_string(&all)?);
        } else if t.json {
            println!("{}", serde_json::json!({ "objects": all, "prefixes": common }));
        }
        Ok(())
    })
}

pub fn stat(t: &Target, name: &str) -> Result<()> {
    runtime()?.block_on(async {
        let l = client(t)?.stat(name).await.map_err(|e| anyhow!(e))?;
        if t.json {
            println!("{}", serde_json::to_string(&l)?);
        } else {
            println!("'{}': {} with {}, {} stripe(s)", l.name, human_bytes(l.size), l.code, l.stripes.len());
            for s in &l.stripes {
                let locs: Vec<String> = s.chunks.iter().map(|c| format!("{}{}", c.node, if c.lost { "!" } else { "" })).collect();
                println!("  stripe {:>8}: chunk {} on nodes [{}]", s.id, human_bytes(s.chunk_len), locs.join(" "));
            }
            println!("  (! = lost)");
        }
        Ok(())
    })
}

pub fn delete(t: &Target, name: &str) -> Result<()> {
    runtime()?.block_on(async {
        let existed = client(t)?.delete(name).await.map_err(|e| anyhow!(e))?;
        if existed {
            println!("deleted {name}; its chunks are removed from the nodes in the background");
        } else {
            println!("no object named {name} (nothing to delete)");
        }
        Ok(())
    })
}

pub fn fail(t: &Target, node: NodeId) -> Result<()> {
    runtime()?.block_on(async {
        client(t)?.fail(node).await.map_err(|e| anyhow!(e))?;
        println!("node {node} stopped and marked failed");
        Ok(())
    })
}

pub fn repair(t: &Target, a: RepairArgs) -> Result<()> {
    if a.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    runtime()?.block_on(async {
        let c = client(t)?;
        // Progress while the coordinator works: the lost chunks left, from its status.
        let watcher = {
            let c = c.clone();
            tokio::spawn(async move {
                let Ok(first) = c.status().await else { return };
                let progress = crate::progress::Progress::count("repair: chunks rebuilt", first.lost_chunks as u64);
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if let Ok(s) = c.status().await {
                        progress.set((first.lost_chunks as u64).saturating_sub(s.lost_chunks as u64));
                    }
                }
            })
        };
        let r =
            c.repair_limited(a.method, a.slice as u64, a.parallel, a.scheduler, a.max_active_per_destination).await.map_err(|e| anyhow!(e));
        watcher.abort();
        let _ = watcher.await;
        let r = r?;
        if t.json {
            println!("{}", serde_json::to_string(&r)?);
            for e in &r.errors {
                eprintln!("error: {e}");
            }
        } else {
            println!(
                "repaired {} chunk(s) ({}) with {} in {:.2} s; {} failed, {} retried, {} no longer lost",
                r.repaired,
                human_bytes(r.bytes),
                r.method,
                r.seconds,
                r.failed,
                r.retries,
                r.skipped
            );
            if r.helper_file_read > 0 && r.bytes > 0 {
                println!(
                    "  helpers read {} from their chunk files ({:.2}x the rebuilt bytes)",
                    human_bytes(r.helper_file_read),
                    r.helper_file_read as f64 / r.bytes as f64
                );
            }
            for c in &r.auto {
                let when = if c.phase == 0 { "at the start".to_string() } else { format!("before phase {}", c.phase) };
                let table: Vec<String> = c
                    .predictions
                    .iter()
                    .map(|p| match (p.seconds, &p.error) {
                        (Some(s), _) => format!("{} {s:.1} s", p.candidate),
                        (None, e) => format!("{} cannot run ({})", p.candidate, e.as_deref().unwrap_or("?")),
                    })
                    .collect();
                println!(
                    "  auto {when}, {} chunk(s): {} (predicted {:.1} s; decided in {:.0} ms): {}",
                    c.chunks,
                    c.chosen,
                    c.predicted_seconds,
                    c.decide_seconds * 1e3,
                    table.join(", ")
                );
            }
            if r.phases > 0 {
                println!("  in {} ChameleonEC phase(s), each planned from the nodes' latest traffic reports", r.phases);
            }
            if r.stragglers > 0 {
                println!(
                    "  {} straggler(s): {} re-tuned, {} postponed, {} restarted in a later phase",
                    r.stragglers, r.retuned, r.postponed, r.restarted
                );
            }
            for e in &r.errors {
                println!("  error: {e}");
            }
        }
        if r.failed > 0 {
            bail!("{} chunk(s) could not be repaired", r.failed);
        }
        Ok(())
    })
}

pub fn status(t: &Target) -> Result<()> {
    runtime()?.block_on(async {
        let s = client(t)?.status().await.map_err(|e| anyhow!(e))?;
        if t.json {
            println!("{}", serde_json::to_string(&s)?);
        } else {
            println!(
                "{} object(s), {} stripe(s), {} lost chunk(s) ({} bad, {} on down nodes), {} repair(s) pending; connections {}",
                s.objects, s.stripes, s.lost_chunks, s.bad_chunks, s.chunks_on_down_nodes, s.pending_repairs, s.protection
            );
            let (used, capacity) = s.space_totals();
            if capacity > 0 {
                let shared = |id: &str| s.nodes.iter().filter(|n| n.fs.as_ref().is_some_and(|f| f.id == id)).count();
                let fss: std::collections::BTreeSet<&str> = s.nodes.iter().filter_map(|n| n.fs.as_ref().map(|f| f.id.as_str())).collect();
                let sharing = fss.iter().filter(|f| shared(f) > 1).count();
                println!(
                    "space: {} stored of {} the nodes may use{}",
                    human_bytes(used),
                    human_bytes(capacity),
                    if sharing > 0 {
                        format!(" ({sharing} file system(s) shared by several nodes, each counted once)")
                    } else {
                        String::new()
                    }
                );
            }
            for u in &s.unrepairable {
                println!("unrepairable: stripe {} of {}: {}", u.stripe, u.objects.join(", "), u.why);
            }
            for w in &s.waiting {
                println!("waiting: {w}");
            }
            if let Some(r) = &s.rebalance {
                println!(
                    "rebalance{}: {} chunk(s) moved ({}), {} failed, fill spread {:.1}% of the mean",
                    if r.running { " running" } else { " done" },
                    r.moved,
                    human_bytes(r.bytes),
                    r.failed,
                    r.spread * 100.0
                );
            }
            let c = &s.compaction;
            if c.passes > 0 || c.running {
                println!(
                    "Geo compaction{}: {} pass(es), {} stripe(s) written with {} chunk(s) ({}), {} stripe(s) released ({}), {} failed; {} dead in sealed stripes",
                    if c.running { " running" } else { "" },
                    c.passes,
                    c.total.written,
                    c.total.moved,
                    human_bytes(c.total.moved_bytes),
                    c.total.freed,
                    human_bytes(c.total.freed_bytes),
                    c.total.failed,
                    human_bytes(c.total.dead_bytes)
                );
            }
            // Traffic in MB/s over each node's last period; residual = what repair may use.
            // Space: bytes stored of what the node may use. Emulated disks' rates only when
            // some node has one.
            let disks = s.nodes.iter().any(|n| n.link.as_ref().is_some_and(|l| l.disk_capacity > 0.0));
            let disk_head = if disks { format!(" {:>15}", "disk MB/s fg/cap") } else { String::new() };
            println!(
                "{:>6} {:<24} {:>6} {:>8} {:>20} {:>22} {:>17} {:>17} {:>17}{disk_head}",
                "node",
                "address",
                "alive",
                "chunks",
                "space used/total",
                "link MB/s (from)",
                "fg up/down MB/s",
                "repair up/down",
                "residual up/down"
            );
            let mb = |v: f64| format!("{:.1}", v / 1e6);
            for n in &s.nodes {
                let (fg, rep) = match &n.link {
                    Some(l) => (format!("{}/{}", mb(l.fg_up), mb(l.fg_down)), format!("{}/{}", mb(l.repair_up), mb(l.repair_down))),
                    None => ("-".into(), "-".into()),
                };
                // The link's capacity and where it came from (configured, or an interface).
                let link = match &n.link {
                    Some(l) if l.capacity_up > 0.0 || l.capacity_down > 0.0 => {
                        let from = if l.capacity_from.is_empty() { String::new() } else { format!(" ({})", l.capacity_from) };
                        if l.capacity_up == l.capacity_down {
                            format!("{}{from}", mb(l.capacity_up))
                        } else {
                            format!("{}/{}{from}", mb(l.capacity_up), mb(l.capacity_down))
                        }
                    }
                    Some(_) => "unknown".into(),
                    None => "-".into(),
                };
                let res = match (n.residual_up, n.residual_down) {
                    (Some(u), Some(d)) => format!("{}/{}", mb(u), mb(d)),
                    _ => "-".into(),
                };
                let space = match n.capacity_bytes {
                    0 => "not reported".to_string(),
                    cap => format!(
                        "{}/{} {:.0}%{}{}",
                        human_bytes(n.used_bytes),
                        human_bytes(cap),
                        100.0 * n.used_bytes as f64 / cap as f64,
                        // Nodes sharing a file system fill it together: its fill is the guard.
                        match &n.fs {
                            Some(f) if s.nodes.iter().filter(|m| m.fs.as_ref().is_some_and(|g| g.id == f.id)).count() > 1 => {
                                format!(" (shared fs {:.0}%)", 100.0 * f.used as f64 / f.size.max(1) as f64)
                            }
                            _ => String::new(),
                        },
                        if n.full {
                            " full"
                        } else if n.nearfull {
                            " near"
                        } else {
                            ""
                        }
                    ),
                };
                // Emulated disks: users' I/O and the disk's rate (ChameleonEC-IO plans with them).
                let disk = match &n.link {
                    Some(l) if disks && l.disk_capacity > 0.0 => format!(" {:>15}", format!("{}/{}", mb(l.disk_fg), mb(l.disk_capacity))),
                    _ if disks => format!(" {:>15}", "none"),
                    _ => String::new(),
                };
                println!(
                    "{:>6} {:<24} {:>6} {:>8} {:>20} {:>22} {:>17} {:>17} {:>17}{disk}",
                    n.id,
                    n.addr,
                    if n.alive { "yes" } else { "no" },
                    n.chunks,
                    space,
                    link,
                    fg,
                    rep,
                    res
                );
            }
        }
        Ok(())
    })
}

/// `kintsugi rebalance`: evens out the nodes' fill, and says what moved.
pub fn rebalance(t: &Target) -> Result<()> {
    runtime()?.block_on(async {
        let r = match client(t)?
            .call(&kintsugi_proto::CoordRequest::Rebalance, Duration::from_secs(7 * 24 * 3600))
            .await
            .map_err(|e| anyhow!(e))?
        {
            kintsugi_proto::CoordResponse::Rebalanced(r) => r,
            other => bail!("unexpected answer {other:?}"),
        };
        if t.json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!(
                "moved {} chunk(s) ({}) in {:.1} s, {} failed; fill spread now {:.1}% of the mean",
                r.moved,
                human_bytes(r.bytes),
                r.seconds,
                r.failed,
                r.spread * 100.0
            );
        }
        Ok(())
    })
}

/// `kintsugi compact`: one Geo compaction pass now.
pub fn compact(t: &Target) -> Result<()> {
    runtime()?.block_on(async {
        let r = client(t)?.compact().await.map_err(|e| anyhow!(e))?;
        if t.json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!(
                "scanned {} sealed Geo stripe(s), {} below the threshold; wrote {} stripe(s) with {} live chunk(s) ({}); \
                 released {} stripe(s) ({}); {} rewrite(s) failed; {} dead left",
                r.scanned,
                r.below,
                r.written,
                r.moved,
                human_bytes(r.moved_bytes),
                r.freed,
                human_bytes(r.freed_bytes),
                r.failed,
                human_bytes(r.dead_bytes)
            );
        }
        Ok(())
    })
}

/// `kintsugi seal`: seals every open Geo stripe now.
pub fn seal(t: &Target) -> Result<()> {
    runtime()?.block_on(async {
        let n = client(t)?.seal().await.map_err(|e| anyhow!(e))?;
        if t.json {
            println!("{}", serde_json::json!({ "sealed": n }));
        } else {
            println!("sealed {n} Geo stripe(s)");
        }
        Ok(())
    })
}
