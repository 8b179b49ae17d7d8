//! Geo compaction survives its coordinator's death: a `kintsugi coordinator` process is
//! killed (-9) while a compaction pass over a Geo bucket with half its objects deleted is
//! writing a new stripe (the nodes are stopped, SIGSTOP, so the rewrite cannot finish
//! first), and restarted; the restarted one must find the half-written stripe to collect. Every live object must read back byte-exact after each kill, the
//! next passes finish the job, and the nodes must end up holding exactly the chunks the
//! metadata places (the half-written stripes collected, nothing else lost).

use kintsugi_client::Client;
use kintsugi_plan::Shape;
use kintsugi_proto::rpc::request;
use kintsugi_proto::{LayoutSpec, NodeRequest, NodeResponse};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use common::procs::{free_port, Proc};

const NODES: usize = 6;
const S0: u64 = 32 << 10;

struct Cluster {
    dir: PathBuf,
    coord_addr: String,
    coord: Option<Proc>,
    _nodes: Vec<Proc>,
}

impl Cluster {
    fn start(dir: &Path) -> Self {
        let coord_addr = format!("127.0.0.1:{}", free_port());
        // Compaction only when asked; a quick collector.
        std::fs::write(
            dir.join("coord.toml"),
            format!(
                "listen = \"{coord_addr}\"\ndata_dir = \"{}\"\ndead_after_ms = 1500\nauto_repair = false\n\
                 placement_groups = 1\nseal_after_ms = 3600000\ncompact_interval_ms = 0\ncompact_below = 1.0\n\
                 compact_bytes_per_s = 0.0\ngc_grace_ms = 300\ngc_interval_ms = 100\n",
                dir.join("coord").display()
            ),
        )
        .unwrap();
        let mut c = Cluster { dir: dir.to_path_buf(), coord_addr: coord_addr.clone(), coord: None, _nodes: Vec::new() };
        c.start_coordinator();
        for i in 0..NODES {
            let cfg = dir.join(format!("node{i}.toml"));
            std::fs::write(
                &cfg,
                format!(
                    "id = {i}\nlisten = \"127.0.0.1:{}\"\ndata_dir = \"{}\"\ncoordinator = \"{coord_addr}\"\nheartbeat_ms = 200\n",
                    free_port(),
                    dir.join(format!("n{i}")).display()
                ),
            )
            .unwrap();
            let node = c.spawn(&["node", "--config", cfg.to_str().unwrap()], &format!("node{i}.log"));
            c._nodes.push(node);
        }
        c
    }

    fn spawn(&self, args: &[&str], log: &str) -> Proc {
        common::procs::spawn_logged(&self.dir, args, log)
    }

    fn signal_nodes(&self, sig: i32) {
        for n in &self._nodes {
            // SAFETY: signalling a child process this test started.
            unsafe { libc::kill(n.0.id() as i32, sig) };
        }
    }

    fn start_coordinator(&mut self) {
        self.coord = Some(common::procs::coordinator(&self.dir));
    }
}

fn client(addr: &str) -> Client {
    let mut c = Client::new(addr);
    c.io_timeout = Duration::from_secs(5);
    c
}

/// Bytes of object `seed` (seeded, so every read is checked against a fresh copy).
fn data(len: usize, seed: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut bytes = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

async fn wait_alive(c: &Client) {
    common::wait_alive(c, NODES).await
}

/// Chunks (and bytes) the nodes hold, by their own count.
async fn held(c: &Client) -> (u64, u64) {
    let mut total = (0, 0);
    for n in c.status().await.unwrap().nodes {
        match request(&n.addr, &NodeRequest::Stat, Duration::from_secs(5)).await.unwrap() {
            NodeResponse::Stat(s) => total = (total.0 + s.chunks, total.1 + s.bytes),
            other => panic!("node {}: {other:?}", n.id),
        }
    }
    total
}

/// Chunks (and bytes) the metadata places for the live objects: every distinct stripe of
/// their layouts, fillers (zero chunks) excepted.
async fn placed(c: &Client, live: &[(usize, String, usize)]) -> (u64, u64) {
    let mut stripes = BTreeMap::new();
    for (_, name, _) in live {
        for s in c.stat(name).await.unwrap().stripes {
            stripes.insert(s.id, s);
        }
    }
    let mut total = (0, 0);
    for s in stripes.values() {
        let zeros = kintsugi_proto::crc::crc32c(&vec![0u8; s.chunk_len as usize]);
        let n = s.chunks.iter().filter(|c| c.crc32c != Some(zeros)).count() as u64;
        total = (total.0 + n, total.1 + n * s.chunk_len);
    }
    total
}

#[test]
fn a_coordinator_killed_mid_compaction_loses_nothing_and_leaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let c = client(&cluster.coord_addr);
        wait_alive(&c).await;
        let code = "clay:4,2,5".parse().unwrap();
        let layout = LayoutSpec::Geo { s0: S0, q: 1, cap: S0 };
        let mut live = Vec::new();
        for i in 0..40usize {
            let (name, len) = (format!("geo-{i:02}"), (1 + i % 3) * S0 as usize);
            let bytes = data(len, i as u64);
            c.put_with_layout(&name, &mut &bytes[..], len as u64, code, 8 << 10, layout, &|_| {}).await.unwrap();
            live.push((i, name, len));
        }
        c.seal().await.unwrap();
        for (_, name, _) in live.iter().filter(|x| x.0 % 2 == 1) {
            assert!(c.delete(name).await.unwrap());
        }
        live.retain(|x| x.0 % 2 == 0);
        let (mut kills, mut abandoned) = (0, 0);
        while abandoned == 0 {
            assert!(kills < 5, "no kill landed while a stripe was written");
            // Stopped nodes hold the rewrite after its intent is recorded (within the
            // coordinator's dead_after_ms, so they still count as up).
            cluster.signal_nodes(libc::SIGSTOP);
            let pass = {
                let c = c.clone();
                tokio::spawn(async move { c.compact().await })
            };
            let start = Instant::now();
            loop {
                let s = c.status().await.unwrap();
                if s.compaction.writing.is_some() {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(60) && !pass.is_finished(), "no stripe was written: {:?}", s.compaction);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            drop(cluster.coord.take());
            cluster.signal_nodes(libc::SIGCONT);
            kills += 1;
            assert!(pass.await.unwrap().is_err(), "the pass ended before its coordinator was killed");
            cluster.start_coordinator();
            wait_alive(&c).await;
            for (i, name, len) in &live {
                let (got, _) = c.get(name, Shape::Cr, 4096).await.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(got == data(*len, *i as u64), "{name}: bytes differ after the kill");
            }
            // The restarted coordinator's first pass collects a stripe left half-written.
            abandoned = c.compact().await.unwrap().abandoned;
        }
        // Stopped nodes keep the rewrite from finishing: the first kill always lands mid-way.
        assert_eq!((kills, abandoned), (1, 1));
        // The next passes finish; the first collects what the killed one left half-written.
        let mut passes = 0;
        loop {
            let r = c.compact().await.unwrap();
            assert_eq!(r.failed, 0, "{r:?}");
            passes += 1;
            if r.written + r.freed == 0 || passes == 5 {
                break;
            }
        }
        let want = placed(&c, &live).await;
        let start = Instant::now();
        while held(&c).await != want && start.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(held(&c).await, want, "the nodes hold exactly what the metadata places");
        let need = live.iter().map(|x| x.2 as u64).sum::<u64>() * 6 / 4;
        assert!(want.1 as f64 <= 1.1 * need as f64, "{} bytes stored for {need} needed", want.1);
        for (i, name, len) in &live {
            let (got, _) = c.get(name, Shape::Cr, 4096).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(got == data(*len, *i as u64), "{name}: bytes differ");
        }
    });
}
