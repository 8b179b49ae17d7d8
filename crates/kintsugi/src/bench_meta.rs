//! `kintsugi bench meta`: the coordinator's metadata operations at N objects. The store is
//! filled directly (records as a put makes them, in large transactions, which is not what
//! is measured), then a real coordinator process serves the timed operations over its
//! protocol: create, commit, lookup, a listing page, delete, marking a chunk bad, and the
//! inventory reconcile of one node. The nodes are registered by heartbeats from the bench;
//! nothing listens at their addresses, since no operation here moves chunk bytes.
//! Reported: p50/p99 per operation, the store's size, the coordinator's RSS, and how long
//! it takes to answer again after a clean stop and after kill -9.

use crate::progress::Progress;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::metadata::{Change, MetaStore, ObjectRecord, RedbMeta, StripeRecord, VersionLinks};
use kintsugi_plan::NodeId;
use kintsugi_proto::{ChunkId, CoordRequest, CoordResponse, LayoutSpec};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct MetaBenchArgs {
    /// Objects in the metadata before the operations are timed (one stripe each).
    #[arg(long, default_value_t = 100_000)]
    pub objects: u64,
    /// Versions of each name among the objects (S3 versioning): the newest is the name's
    /// latest, the others kept versions; 1: unversioned names. A reused --dir keeps what it
    /// was filled with.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub versions_per_key: u64,
    /// Nodes the stripes are placed on.
    #[arg(long, default_value_t = 9)]
    pub nodes: u32,
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Timed operations of each kind (the inventory reconcile: a tenth as many, 3 to 10).
    #[arg(long, default_value_t = 300)]
    pub ops: usize,
    /// Keep the metadata here (reused by the next run when it holds enough objects);
    /// default: a temporary directory, removed afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct OpStats {
    op: String,
    count: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

#[derive(Serialize)]
struct MetaReport {
    objects: u64,
    /// Versions of each name among the objects (1: unversioned).
    versions_per_key: u64,
    nodes: u32,
    code: String,
    fill_seconds: f64,
    ops: Vec<OpStats>,
    /// Chunks in the reconciled node's inventory.
    inventory_chunks: usize,
    store_bytes: u64,
    coordinator_rss_bytes: u64,
    coordinator_peak_rss_bytes: u64,
    restart_clean_seconds: f64,
    restart_after_kill_seconds: f64,
    cpu: String,
}

/// A name spread over the key space (as real names are), from its ordinal.
fn object_name(i: u64) -> String {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("bench/{:02x}/{:016x}", z >> 56, z ^ (z >> 31))
}

/// Adds objects until the store holds `want`; returns the seconds it took.
fn fill(meta: &RedbMeta, want: u64, per_key: u64, code: CodeSpec, nodes: u32, quiet: bool) -> Result<f64> {
    let c = code.build().map_err(|e| anyhow!(e.to_string()))?;
    let (k, n) = (c.k() as u64, c.n());
    if (nodes as usize) < n {
        bail!("{code} needs {n} nodes; --nodes is {nodes}");
    }
    let have = meta.counts().map_err(|e| anyhow!(e))?.objects;
    if have >= want {
        return Ok(0.0);
    }
    let started = Instant::now();
    let progress = (!quiet).then(|| Progress::count("objects written to the metadata", want));
    const BATCH: u64 = 20_000;
    let size = 1024u64;
    let chunk_len = size.div_ceil(k);
    let mut next = have;
    while next < want {
        let end = (next + BATCH).min(want);
        meta.update(&mut |t| {
            for i in next..end {
                let id = t.next_id("stripe")?;
                let version = t.next_id("version")?;
                let first = (i % nodes as u64) as NodeId;
                let on: Vec<NodeId> = (0..n as u32).map(|j| (first + j) % nodes).collect();
                let mut s = StripeRecord::new(id, code, size, chunk_len, on);
                s.crcs = (0..n as u32).map(Some).collect();
                s.changed_ms = 1;
                t.put(Change::PutStripe(s))?;
                // Version j of name i / per_key; the versions of a name are consecutive
                // numbers, the newest its latest, the others kept and linked.
                let (key, j) = (object_name(i / per_key), i % per_key);
                let latest = j + 1 == per_key;
                let chain = VersionLinks {
                    versioned: per_key > 1,
                    older: if j > 0 { version - 1 } else { 0 },
                    newer: if latest { 0 } else { version + 1 },
                    ..Default::default()
                };
                t.put(Change::PutObject(ObjectRecord {
                    name: if latest { key } else { kintsugi_coord::metadata::versions::kept_name(&key, version) },
                    size,
                    code,
                    committed: true,
                    stripes: vec![id],
                    version,
                    created_ms: 1,
                    layout: LayoutSpec::Stripe,
                    extents: vec![],
                    attrs: Default::default(),
                    chain,
                    inline: None,
                }))?;
            }
            Ok(())
        })
        .map_err(|e| anyhow!(e))?;
        next = end;
        if let Some(p) = &progress {
            p.set(next);
        }
    }
    if let Some(p) = progress {
        p.finish();
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The CPU's model name, as /proc/cpuinfo gives it.
pub(crate) fn cpu_name() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines().find_map(|l| l.strip_prefix("model name")).map(|l| l.trim_start_matches([' ', '\t', ':']).to_string()).unwrap_or_default()
}

/// A coordinator process, killed if dropped while running (a failed bench leaves none).
struct Coord(Child);

impl Coord {
    /// Stops it with `signal` and waits for it to exit.
    fn stop(mut self, signal: i32) -> Result<()> {
        // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
        unsafe { libc::kill(self.0.id() as i32, signal) };
        self.0.wait()?;
        Ok(())
    }
}

impl Drop for Coord {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A coordinator process on `dir`, listening on `listen`.
fn spawn(dir: &Path, listen: &str) -> Result<Coord> {
    let exe = std::env::current_exe().context("cannot find the kintsugi executable")?;
    let toml = dir.join("bench-coordinator.toml");
    // No background work that would reach for the nodes: nothing listens at their addresses.
    std::fs::write(
        &toml,
        "dead_after_ms = 86400000\nauto_repair = false\nindex_copies = 0\nrebalance_on_join = false\n\
         gc_interval_ms = 86400000\nseal_interval_ms = 86400000\n",
    )?;
    Command::new(exe)
        .args(["coordinator", "--config"])
        .arg(&toml)
        .args(["--listen", listen, "--data-dir"])
        .arg(dir)
        .env_remove("KINTSUGI_SECRET_FILE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Coord)
        .context("cannot start the coordinator")
}

/// Seconds until the coordinator at `addr` answers a request.
async fn until_answering(client: &Client, child: &mut Coord) -> Result<f64> {
    let started = Instant::now();
    loop {
        if let Ok(CoordResponse::Objects { .. }) = client
            .call(
                &CoordRequest::List { prefix: String::new(), delimiter: String::new(), after: String::new(), limit: 1 },
                Duration::from_secs(5),
            )
            .await
        {
            return Ok(started.elapsed().as_secs_f64());
        }
        if let Some(status) = child.0.try_wait()? {
            bail!("the coordinator exited ({status}) before answering");
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the coordinator did not answer within 600 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn rss_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU seconds (user and system) process `pid` has used so far.
pub(crate) fn cpu_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name, which may hold spaces, in parentheses: utime and stime are
    // fields 14 and 15, the 12th and 13th after it.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse().ok()).collect();
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    f.iter().sum::<f64>() / tick
}

fn stats(op: &str, mut ms: Vec<f64>) -> OpStats {
    ms.sort_by(f64::total_cmp);
    let at =
        |q: f64| ms.get(((ms.len() as f64 * q).ceil() as usize).saturating_sub(1).min(ms.len().saturating_sub(1))).copied().unwrap_or(0.0);
    OpStats { op: op.into(), count: ms.len(), p50_ms: at(0.5), p99_ms: at(0.99), max_ms: ms.last().copied().unwrap_or(0.0) }
}

async fn timed(client: &Client, req: &CoordRequest) -> Result<(f64, CoordResponse)> {
    let t = Instant::now();
    let r = client.call(req, Duration::from_secs(600)).await.map_err(|e| anyhow!(e))?;
    Ok((t.elapsed().as_secs_f64() * 1e3, r))
}

pub fn run(a: MetaBenchArgs) -> Result<()> {
    if a.ops == 0 {
        bail!("--ops must be at least 1");
    }
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir)?;
    let store = dir.join("meta.redb");
    // Filled, and node 0's chunks read from its index, before the coordinator holds the file.
    let (fill_seconds, inventory) = {
        let meta = RedbMeta::open(&store).map_err(|e| anyhow!(e))?;
        let s = fill(&meta, a.objects, a.versions_per_key, a.code, a.nodes, a.json)?;
        let held: Vec<ChunkId> = meta.node_chunks(0).map_err(|e| anyhow!(e))?.iter().map(|c| ChunkId::new(c.stripe, c.index)).collect();
        (s, held)
    };
    // Names with a latest version to look up.
    let objects = (a.objects / a.versions_per_key).max(1);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut child = spawn(&dir, &listen)?;
    let client = Client::new(&listen);
    let report = rt.block_on(async move {
        until_answering(&client, &mut child).await?;
        for node in 0..a.nodes {
            let hb = CoordRequest::Heartbeat {
                node,
                addr: "127.0.0.1:9".into(),
                chunks: 0,
                boot: 1,
                used_bytes: 0,
                capacity_bytes: 0,
                cluster: 0,
                token: format!("bench-node-{node}"),
                link: None,
                fs: None,
            };
            client.call(&hb, Duration::from_secs(30)).await.map_err(|e| anyhow!(e))?;
        }
        let mut ms: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut rng_state = 0x1234_5678u64;
        let mut pick = || {
            rng_state ^= rng_state << 13;
            rng_state ^= rng_state >> 7;
            rng_state ^= rng_state << 17;
            rng_state % objects
        };
        let progress = (!a.json).then(|| Progress::count("timed operations", a.ops as u64));
        for i in 0..a.ops {
            let name = format!("bench-new/{i:08}");
            let create =
                CoordRequest::CreateObject { name: name.clone(), size: 1024, code: a.code, chunk_size: 0, layout: LayoutSpec::Stripe };
            let (t_create, r) = timed(&client, &create).await?;
            let CoordResponse::Layout(layout) = r else { bail!("create: {r:?}") };
            let crcs = layout.stripes.iter().map(|s| vec![0u32; s.chunks.len()]).collect();
            let (t_commit, r) = timed(
                &client,
                &CoordRequest::CommitObject {
                    name: name.clone(),
                    version: layout.version,
                    crcs,
                    attrs: Default::default(),
                    precondition: None,
                    versioning: Default::default(),
                },
            )
            .await?;
            if !matches!(r, CoordResponse::Layout(_) | CoordResponse::Ok | CoordResponse::Committed { .. }) {
                bail!("commit: {r:?}");
            }
            ms.entry("create").or_default().push(t_create);
            ms.entry("commit").or_default().push(t_commit);
            ms.entry("create+commit").or_default().push(t_create + t_commit);
            let (t, r) = timed(&client, &CoordRequest::Lookup { name: object_name(pick()) }).await?;
            if !matches!(r, CoordResponse::Layout(_)) {
                bail!("lookup: {r:?}");
            }
            ms.entry("lookup").or_default().push(t);
            let list = CoordRequest::List { prefix: String::new(), delimiter: String::new(), after: object_name(pick()), limit: 1000 };
            let (t, r) = timed(&client, &list).await?;
            let CoordResponse::Objects { objects: page, .. } = r else { bail!("list: {r:?}") };
            if page.is_empty() {
                bail!("a listing page came back empty");
            }
            ms.entry("list 1000").or_default().push(t);
            let versions = CoordRequest::ListVersions {
                prefix: "bench/".into(),
                delimiter: String::new(),
                key_marker: object_name(pick()),
                version_marker: None,
                limit: 1000,
            };
            let (t, r) = timed(&client, &versions).await?;
            let CoordResponse::Versions { versions: page, .. } = r else { bail!("list versions: {r:?}") };
            if page.is_empty() {
                bail!("a version listing page came back empty");
            }
            ms.entry("list versions 1000").or_default().push(t);
            let s = &layout.stripes[0];
            let holder = s.chunks[0].node;
            let report = CoordRequest::ReportChunk { node: holder, chunk: ChunkId::new(s.id, 0), reason: "bench".into() };
            let (t, _) = timed(&client, &report).await?;
            ms.entry("mark bad").or_default().push(t);
            let (t, r) = timed(&client, &CoordRequest::DeleteObject { name, versioning: Default::default(), precondition: None }).await?;
            if !matches!(r, CoordResponse::Deleted { existed: true, .. }) {
                bail!("delete: {r:?}");
            }
            ms.entry("delete").or_default().push(t);
            if let Some(p) = &progress {
                p.set(i as u64 + 1);
            }
        }
        if let Some(p) = progress {
            p.finish();
        }
        // Node 0's inventory, in pages as a node sends it.
        for _ in 0..(a.ops / 10).clamp(3, 10) {
            let t = Instant::now();
            let pages: Vec<&[ChunkId]> = if inventory.is_empty() { vec![&[]] } else { inventory.chunks(20_000).collect() };
            let last = pages.len() - 1;
            for (i, page) in pages.into_iter().enumerate() {
                let req =
                    CoordRequest::Inventory { node: 0, boot: 1, chunks: page.to_vec(), last: i == last, token: "bench-node-0".into() };
                client.call(&req, Duration::from_secs(600)).await.map_err(|e| anyhow!(e))?;
            }
            ms.entry("inventory").or_default().push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (rss, peak) = rss_of(child.0.id());
        let ops: Vec<OpStats> =
            ["create", "commit", "create+commit", "lookup", "list 1000", "list versions 1000", "mark bad", "delete", "inventory"]
                .iter()
                .map(|op| stats(op, ms.remove(op).unwrap_or_default()))
                .collect();
        let store_bytes = std::fs::metadata(&store).map(|m| m.len()).unwrap_or(0);
        // Restarts: after a clean stop, and after kill -9 (the store is reopened as after a crash).
        child.stop(libc::SIGINT)?;
        let mut again = spawn(&dir, &listen)?;
        let restart_clean_seconds = until_answering(&client, &mut again).await?;
        again.stop(libc::SIGKILL)?;
        let mut again = spawn(&dir, &listen)?;
        let restart_after_kill_seconds = until_answering(&client, &mut again).await?;
        again.stop(libc::SIGINT)?;
        Ok::<_, anyhow::Error>(MetaReport {
            objects: a.objects,
            versions_per_key: a.versions_per_key,
            nodes: a.nodes,
            code: a.code.to_string(),
            fill_seconds,
            ops,
            inventory_chunks: inventory.len(),
            store_bytes,
            coordinator_rss_bytes: rss,
            coordinator_peak_rss_bytes: peak,
            restart_clean_seconds,
            restart_after_kill_seconds,
            cpu: cpu_name(),
        })
    });
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "metadata at {} objects ({} versions a name; {}, one stripe each, {} nodes), {} ops each; CPU: {}",
        report.objects, report.versions_per_key, report.code, report.nodes, a.ops, report.cpu
    );
    println!("{:<18} {:>7} {:>10} {:>10} {:>10}", "operation", "count", "p50 ms", "p99 ms", "max ms");
    for o in &report.ops {
        println!("{:<18} {:>7} {:>10.2} {:>10.2} {:>10.2}", o.op, o.count, o.p50_ms, o.p99_ms, o.max_ms);
    }
    println!("inventory of node 0: {} chunks", report.inventory_chunks);
    println!(
        "store {:.1} MB; coordinator RSS {:.1} MB (peak {:.1} MB); answering again {:.2} s after a clean stop, {:.2} s after kill -9; fill {:.1} s",
        report.store_bytes as f64 / 1e6,
        report.coordinator_rss_bytes as f64 / 1e6,
        report.coordinator_peak_rss_bytes as f64 / 1e6,
        report.restart_clean_seconds,
        report.restart_after_kill_seconds,
        report.fill_seconds
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_spread() {
        let names: std::collections::BTreeSet<String> = (0..10_000).map(object_name).collect();
        assert_eq!(names.len(), 10_000);
        let firsts: std::collections::BTreeSet<&str> = names.iter().map(|n| &n[6..8]).collect();
        assert!(firsts.len() > 200, "{}", firsts.len());
    }
}
