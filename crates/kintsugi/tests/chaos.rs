//! Chaos: a `kintsugi coordinator` and 10 `kintsugi node` processes on loopback; clients
//! put, overwrite, read and delete overlapping names while nodes are killed (-9), hung
//! (SIGSTOP/SIGCONT) and restarted, the coordinator is killed once and restarted, and chunk
//! files are deleted or have a byte flipped. Once repair settles, every object must read
//! back byte-exact as its last acknowledged version (or a write whose outcome the client
//! never learned), deleted objects must be gone, every chunk of every stripe must be on
//! its node and pass its checksums, no node may hold an orphan, and `status` must say 0
//! lost. No read during the run may return a mix of versions. Half the names are Geo
//! objects (Clay chunks in shared stripes and bucket files, remainders in the small-size
//! bucket), sealed and compacted (overwritten and deleted objects' chunks given back) in the
//! background while the faults go on; a fifth of the striped names'
//! versions are small enough to be kept in the coordinator's metadata, which must survive
//! its kill as every chunk does.
//!
//! Seeded and bounded: `CHAOS_SEED` (default: random, printed), `CHAOS_SECS` (default 20).
//! Striped names use RS(4,2), LRC(4,2,1) and Clay(4,2,5). Faults stay within what they
//! tolerate: at most one node down at a time, and each stripe's files damaged at most once;
//! one kind of fault goes to the limit on purpose (a node down and, in its stripes, one more
//! chunk corrupt), and every object must read while it lasts.

use kintsugi_client::client::get_chunk;
use kintsugi_client::{Client, ErrorKind};
use kintsugi_codes::CodeSpec;
use kintsugi_node::Shaper;
use kintsugi_plan::Shape;
use kintsugi_proto::LayoutSpec;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::history::{allowed_finals, History, Write};
use common::procs::{free_port, Proc};
const NODES: usize = 10;
const NAMES: usize = 8;

struct Cluster {
    dir: PathBuf,
    coord_addr: String,
    coord: Option<Proc>,
    nodes: Vec<Option<Proc>>,
}

impl Cluster {
    fn start(dir: &Path) -> Self {
        let coord_addr = format!("127.0.0.1:{}", free_port());
        // Under a secret, so every connection of the run is encrypted, as in production.
        let secret = kintsugi_proto::auth::Secret::random();
        let secret_file = dir.join("secret");
        std::fs::write(&secret_file, secret.expose()).unwrap();
        kintsugi_proto::auth::set_secret(Some(secret));
        // Fast detection, repair, clean-up and scrubbing, so that a short run exercises all.
        std::fs::write(
            dir.join("coord.toml"),
            format!(
                "listen = \"{coord_addr}\"\ndata_dir = \"{}\"\ndead_after_ms = 1000\ndown_out_ms = 2500\n\
                 auto_repair_interval_ms = 300\nrepair_slice = 8192\nchunk_size = 32768\nio_timeout_ms = 3000\n\
                 upload_timeout_ms = 4000\ngc_grace_ms = 1000\ngc_interval_ms = 300\norphan_grace_ms = 3000\n\
                 inventory_slack_ms = 2000\nplacement_groups = 2\nseal_after_ms = 1500\nseal_interval_ms = 300\n\
                 compact_below = 0.9\ncompact_interval_ms = 700\n\
                 secret_file = \"{}\"\n",
                dir.join("coord").display(),
                secret_file.display()
            ),
        )
        .unwrap();
        for i in 0..NODES {
            std::fs::write(
                dir.join(format!("node{i}.toml")),
                format!(
                    "id = {i}\nlisten = \"127.0.0.1:{}\"\ndata_dir = \"{}\"\ncoordinator = \"{coord_addr}\"\nheartbeat_ms = 200\n\
                     io_timeout_ms = 3000\ninventory_ms = 1000\nscrub_interval_ms = 1000\nscrub_bytes_per_s = 100000000.0\n\
                     secret_file = \"{}\"\n",
                    free_port(),
                    dir.join(format!("n{i}")).display(),
                    secret_file.display()
                ),
            )
            .unwrap();
        }
        let mut c = Cluster { dir: dir.to_path_buf(), coord_addr, coord: None, nodes: (0..NODES).map(|_| None).collect() };
        c.start_coordinator();
        for i in 0..NODES {
            c.start_node(i);
        }
        c
    }

    fn spawn(&self, args: &[&str], log: &str) -> Proc {
        common::procs::spawn_logged(&self.dir, args, log)
    }

    fn start_coordinator(&mut self) {
        self.coord = Some(common::procs::coordinator(&self.dir));
    }

    fn start_node(&mut self, i: usize) {
        let cfg = self.dir.join(format!("node{i}.toml"));
        self.nodes[i] = Some(self.spawn(&["node", "--config", cfg.to_str().unwrap()], &format!("node{i}.log")));
    }

    fn node_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{i}"))
    }

    fn signal(&self, i: usize, sig: i32) {
        let pid = self.nodes[i].as_ref().expect("running").0.id() as i32;
        // SAFETY: signalling a child process this test started.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Chunk files on a node: (stripe id, index) -> path.
fn chunk_files(dir: &Path) -> BTreeMap<(u64, usize), PathBuf> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        // s00000012.003.chunk
        let Some(stem) = name.strip_suffix(".chunk") else { continue };
        let Some((s, i)) = stem.strip_prefix('s').and_then(|r| r.split_once('.')) else { continue };
        if let (Ok(s), Ok(i)) = (s.parse(), i.parse()) {
            out.insert((s, i), e.path());
        }
    }
    out
}

fn content(name: usize, serial: u64, seed: u64, rng: &mut StdRng) -> Vec<u8> {
    // Sizes from empty to a few stripes of 4 x 32 KiB, a fifth small enough to be kept in the
    // coordinator's metadata (striped names); bytes unique to (seed, name, serial).
    let small = kintsugi_proto::INLINE_MAX as usize;
    let len = match rng.random_range(0..10) {
        0 => rng.random_range(0..64),
        1 => rng.random_range(1_000..=small),
        2..=6 => rng.random_range(small + 1..140_000),
        _ => rng.random_range(140_000..400_000),
    };
    let mut bytes = vec![0u8; len];
    StdRng::seed_from_u64(seed ^ (name as u64) << 32 ^ serial.wrapping_mul(0x9e37_79b9_7f4a_7c15)).fill(&mut bytes[..]);
    bytes
}

fn client(coord: &str) -> Client {
    let mut c = Client::new(coord);
    c.io_timeout = Duration::from_secs(3);
    c
}

async fn worker(coord: String, seed: u64, id: u64, deadline: Instant, hist: Arc<Mutex<History>>) {
    let c = client(&coord);
    let mut rng = StdRng::seed_from_u64(seed ^ (id + 1).wrapping_mul(0x1234_5678_9abc_def1));
    // Even names are striped: RS, LRC or Clay by name. Odd names are Geo objects: Clay
    // chunks of 32 KiB, 64 KiB, ... in shared stripes, remainders in the small-size bucket,
    // staged with copies and sealed in the background.
    let codes: [CodeSpec; 4] = ["rs:4,2", "lrc:4,2,1", "rs:4,2", "clay:4,2,5"].map(|c| c.parse().unwrap());
    let clay: CodeSpec = "clay:4,2,5".parse().unwrap();
    let geo = LayoutSpec::Geo { s0: 32 << 10, q: 2, cap: 0 };
    let mut serial = id << 40;
    let mut failures = 0;
    while Instant::now() < deadline {
        // Clients back off a little when things fail, as real ones do.
        let before: usize = hist.lock().unwrap().errors.values().sum();
        if before > failures {
            failures = before;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let name = rng.random_range(0..NAMES);
        let key = format!("obj{name}");
        let op = rng.random_range(0..100);
        let start = Instant::now();
        if op < 45 {
            serial += 1;
            let data = Arc::new(content(name, serial, seed, &mut rng));
            hist.lock().unwrap().versions[name].push(data.clone());
            let r = if name % 2 == 1 {
                let mut reader = &data[..];
                c.put_with_layout(&key, &mut reader, data.len() as u64, clay, 0, geo, &|_| {}).await.map(|_| ())
            } else {
                c.put(&key, &data, codes[name / 2 % codes.len()], 0).await.map(|_| ())
            };
            if let Err(e) = &r {
                hist.lock().unwrap().error("put", e.message());
            }
            let acked = r.is_ok();
            hist.lock().unwrap().writes[name].push(Write { start, end: Instant::now(), acked, data: Some(data) });
        } else if op < 85 {
            match c.get(&key, Shape::Ecpipe, 8192).await {
                Ok((got, _)) => {
                    let mut h = hist.lock().unwrap();
                    assert!(h.versions[name].iter().any(|v| **v == got), "a read of {key} returned {} bytes of no version put", got.len());
                    h.reads_ok += 1;
                }
                Err(e) => {
                    let mut h = hist.lock().unwrap();
                    h.reads_failed += 1;
                    h.error("get", e.message());
                }
            }
        } else {
            let r = c.delete(&key).await;
            if let Err(e) = &r {
                hist.lock().unwrap().error("delete", e.message());
            }
            let acked = r.is_ok();
            hist.lock().unwrap().writes[name].push(Write { start, end: Instant::now(), acked, data: None });
        }
    }
}

/// Flips one bit of a chunk file in place, as a failing disk would (not through a rename);
/// returns the byte's offset.
fn flip_a_bit(path: &Path, rng: &mut StdRng) -> Option<usize> {
    let mut bytes = std::fs::read(path).ok().filter(|b| !b.is_empty())?;
    let at = rng.random_range(0..bytes.len());
    bytes[at] ^= 1 << rng.random_range(0..8);
    std::fs::OpenOptions::new().write(true).open(path).and_then(|mut f| std::io::Write::write_all(&mut f, &bytes)).ok()?;
    Some(at)
}

/// Faults, one at a time, until the deadline; returns a log of what was done and the reads
/// that failed while stripes were at the code's limit.
fn chaos(c: &mut Cluster, rng: &mut StdRng, deadline: Instant, rt: &tokio::runtime::Handle) -> (Vec<String>, Vec<String>) {
    let mut at_limit_failures = Vec::new();
    let mut log = Vec::new();
    let mut damaged: BTreeSet<u64> = BTreeSet::new();
    let coordinator_kill_at = Instant::now() + (deadline - Instant::now()) / 2;
    let mut coordinator_killed = false;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(rng.random_range(200..700)));
        if !coordinator_killed && Instant::now() >= coordinator_kill_at {
            coordinator_killed = true;
            drop(c.coord.take());
            log.push("kill -9 coordinator".to_string());
            std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
            c.start_coordinator();
            let t = Instant::now();
            while std::net::TcpStream::connect(&c.coord_addr).is_err() && t.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
            log.push(format!("coordinator restarted, serving after {} ms", t.elapsed().as_millis()));
            continue;
        }
        let node = rng.random_range(0..NODES);
        match rng.random_range(0..5) {
            0 => {
                drop(c.nodes[node].take());
                let down = rng.random_range(500..4000);
                log.push(format!("kill -9 node {node} for {down} ms"));
                std::thread::sleep(Duration::from_millis(down));
                c.start_node(node);
            }
            1 => {
                let hung = rng.random_range(300..2500);
                log.push(format!("SIGSTOP node {node} for {hung} ms"));
                c.signal(node, libc::SIGSTOP);
                std::thread::sleep(Duration::from_millis(hung));
                c.signal(node, libc::SIGCONT);
            }
            4 => {
                // At the code's limit: a node down, and in stripes with a chunk on it, one
                // more chunk corrupt on another node (RS(4,2), LRC(4,2,1), Clay(4,2,5): two
                // lost of six or seven). Every object must still read.
                let on_it: BTreeSet<u64> = chunk_files(&c.node_dir(node)).into_keys().map(|(s, _)| s).collect();
                drop(c.nodes[node].take());
                let mut flipped = Vec::new();
                for other in (0..NODES).filter(|&o| o != node) {
                    for ((stripe, index), path) in chunk_files(&c.node_dir(other)) {
                        if flipped.len() < 6 && on_it.contains(&stripe) && damaged.insert(stripe) && flip_a_bit(&path, rng).is_some() {
                            flipped.push(format!("s{stripe}.{index}"));
                        }
                    }
                }
                log.push(format!("kill -9 node {node}, and one more chunk of its stripes corrupt: {flipped:?}"));
                let cl = client(&c.coord_addr);
                rt.block_on(async {
                    for name in 0..NAMES {
                        if let Err(e) = cl.get(&format!("obj{name}"), Shape::Ecpipe, 8192).await {
                            let expected = matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Replaced)
                                || e.message().contains("still being written");
                            if !expected {
                                at_limit_failures.push(format!("obj{name} with node {node} down and {flipped:?} corrupt: {e}"));
                            }
                        }
                    }
                });
                std::thread::sleep(Duration::from_millis(rng.random_range(200..1500)));
                c.start_node(node);
            }
            op => {
                let files: Vec<((u64, usize), PathBuf)> =
                    chunk_files(&c.node_dir(node)).into_iter().filter(|((s, _), _)| !damaged.contains(s)).collect();
                if files.is_empty() {
                    continue;
                }
                let ((stripe, index), path) = files[rng.random_range(0..files.len())].clone();
                damaged.insert(stripe);
                if op == 2 {
                    if std::fs::remove_file(&path).is_ok() {
                        log.push(format!("deleted chunk s{stripe}.{index} on node {node}"));
                    }
                } else if let Some(at) = flip_a_bit(&path, rng) {
                    log.push(format!("flipped a bit at byte {at} of chunk s{stripe}.{index} on node {node}"));
                }
            }
        }
    }
    (log, at_limit_failures)
}

#[test]
fn chaos_never_loses_or_mixes_acknowledged_data() {
    let seed: u64 = std::env::var("CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let secs: u64 = std::env::var("CHAOS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    eprintln!("chaos: CHAOS_SEED={seed} CHAOS_SECS={secs}");
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(tmp.path());
    let coord = cluster.coord_addr.clone();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(wait_alive(&coord, NODES));

    let hist = Arc::new(Mutex::new(History { writes: vec![Vec::new(); NAMES], versions: vec![Vec::new(); NAMES], ..Default::default() }));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let workers: Vec<_> = (0..4).map(|w| rt.spawn(worker(coord.clone(), seed, w, deadline, hist.clone()))).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let (log, at_limit_failures) = chaos(&mut cluster, &mut rng, deadline, rt.handle());
    for w in workers {
        rt.block_on(w).expect("a worker failed");
    }
    eprintln!("chaos: {} faults: {log:#?}", log.len());
    eprintln!("chaos: failed operations by cause: {:#?}", hist.lock().unwrap().errors);

    assert!(at_limit_failures.is_empty(), "chaos seed {seed}: reads failed at the code's limit: {at_limit_failures:#?}");
    // Settle: every node up, repair and clean-up done.
    let h = hist.lock().unwrap();
    let verdict = rt.block_on(settle_and_check(&cluster, &h));
    if let Err(e) = verdict {
        for f in std::fs::read_dir(tmp.path()).unwrap().flatten() {
            if f.path().extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(f.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                eprintln!("--- {} (last lines) ---\n{}", f.path().display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
        }
        // The processes' logs and data stay for a look.
        let kept = tmp.keep();
        panic!("chaos seed {seed}: {e} (logs and data kept in {})", kept.display());
    }
    let acked = h.writes.iter().flatten().filter(|w| w.acked).count();
    let total = h.writes.iter().flatten().count();
    let compaction = rt.block_on(client(&coord).status()).map(|s| s.compaction);
    eprintln!("chaos: Geo compaction since the coordinator's restart: {compaction:?}");
    eprintln!(
        "chaos seed {seed}: {acked} of {total} writes acknowledged, {} reads ok, {} failed, {} faults; all checks passed",
        h.reads_ok,
        h.reads_failed,
        log.len()
    );
    assert!(acked > 0 && h.reads_ok > 0, "the workload did nothing");
}

async fn wait_alive(coord: &str, n: usize) {
    common::wait_alive(&client(coord), n).await
}

/// Waits until the cluster is whole again, then checks everything; Err says what is wrong.
async fn settle_and_check(cluster: &Cluster, h: &History) -> Result<(), String> {
    let c = client(&cluster.coord_addr);
    wait_alive(&cluster.coord_addr, NODES).await;
    let start = Instant::now();
    let mut last = String::new();
    // Reading every object once finds damage the scrub has not reached yet (and reports it).
    let mut read_all = true;
    while start.elapsed() < Duration::from_secs(120) {
        if read_all {
            for name in 0..NAMES {
                let _ = c.get(&format!("obj{name}"), Shape::Cr, 8192).await;
            }
            read_all = false;
        }
        match whole(cluster, &c).await {
            Ok(()) => return check(cluster, &c, h).await,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        if start.elapsed() > Duration::from_secs(20) && start.elapsed() < Duration::from_secs(21) {
            read_all = true;
        }
    }
    Err(format!("the cluster did not settle in 120 s: {last}"))
}

/// The cluster is whole: nothing lost or being repaired, every chunk of every object on its
/// node and intact, no other chunk file anywhere.
async fn whole(cluster: &Cluster, c: &Client) -> Result<(), String> {
    let s = c.status().await?;
    if s.lost_chunks > 0 || s.repairing {
        return Err(format!("status: {} lost, repairing {}", s.lost_chunks, s.repairing));
    }
    // Geo stripes still open are sealed now (parity computed, copies dropped).
    c.seal().await?;
    let mut referenced: BTreeSet<(u32, u64, usize)> = BTreeSet::new();
    for o in c.list().await? {
        let l = c.stat(&o.name).await?;
        if !l.committed {
            return Err(format!("{} still has an uncommitted version", o.name));
        }
        for st in &l.stripes {
            if st.open {
                return Err(format!("{}: stripe {} is still open", o.name, st.id));
            }
            for (i, loc) in st.chunks.iter().enumerate() {
                referenced.insert((loc.node, st.id, i));
                // An empty slot of a sealed Geo stripe: virtual zeros, stored nowhere.
                if l.layout != LayoutSpec::Stripe && loc.crc32c == Some(crc32c::crc32c(&vec![0u8; st.chunk_len as usize])) {
                    continue;
                }
                let got = get_chunk(loc, st.chunk_len, Duration::from_secs(3), &Shaper::default()).await?;
                if Some(crc32c::crc32c(&got)) != loc.crc32c {
                    return Err(format!("chunk {} on node {} does not match its checksum", loc.chunk, loc.node));
                }
            }
        }
    }
    for n in 0..NODES {
        for (s, i) in chunk_files(&cluster.node_dir(n)).into_keys() {
            if !referenced.contains(&(n as u32, s, i)) {
                return Err(format!("node {n} holds chunk s{s}.{i}, which no object references"));
            }
        }
    }
    Ok(())
}

/// Every object as the history allows, every deleted one gone.
async fn check(cluster: &Cluster, c: &Client, h: &History) -> Result<(), String> {
    let _ = cluster;
    for name in 0..NAMES {
        let key = format!("obj{name}");
        let allowed = allowed_finals(&h.writes[name]);
        let now = match c.get(&key, Shape::Ppr, 8192).await {
            Ok((bytes, _)) => Some(bytes),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{key} cannot be read: {e}")),
        };
        let ok = allowed.iter().any(|a| a.as_deref().map(|v| v.as_slice()) == now.as_deref());
        if !ok {
            let what = now.map_or("absent".to_string(), |b| format!("{} bytes", b.len()));
            let acked: Vec<String> = h.writes[name]
                .iter()
                .filter(|w| w.acked)
                .map(|w| w.data.as_ref().map_or("delete".to_string(), |d| format!("put {} B", d.len())))
                .collect();
            return Err(format!("{key} is {what}, not an allowed outcome; acknowledged writes in order: {acked:?}"));
        }
    }
    Ok(())
}

#[test]
fn the_checker_allows_only_what_a_client_could_observe() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let v = |b: u8| Some(Arc::new(vec![b]));
    let w = |s, e, acked, data| Write { start: at(s), end: at(e), acked, data };
    // Sequential acknowledged puts: only the last.
    assert_eq!(allowed_finals(&[w(0, 10, true, v(1)), w(20, 30, true, v(2))]), vec![v(2)]);
    // Overlapping: either.
    assert_eq!(allowed_finals(&[w(0, 30, true, v(1)), w(20, 40, true, v(2))]).len(), 2);
    // A failed put after an acknowledged delete: absent or the failed put (it may have
    // committed before its answer was lost).
    let f = allowed_finals(&[w(0, 10, true, v(1)), w(20, 30, true, None), w(40, 50, false, v(3))]);
    assert_eq!(f, vec![None, v(3)]);
    // Nothing acknowledged: absent is allowed too.
    assert_eq!(allowed_finals(&[w(0, 10, false, v(1))]), vec![v(1), None]);
}
