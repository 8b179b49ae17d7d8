//! Metadata in etcd and several coordinators: a 3-member etcd on loopback, three
//! `kintsugi coordinator` processes sharing it (one leads, two stand by) and node processes
//! that know all three. Killing the leader (-9) during puts, gets and deletes, or during a
//! full-node repair, hands the cluster to a standby within 10 s, and nothing acknowledged is
//! lost or mixed; etcd losing one member changes nothing, losing two stops writes with an
//! error until one returns. Before all that: the etcd store keeps exactly the records and
//! indexes redb keeps, for the same changes. And under S3 load (boto3, two gateways), every
//! process restarted in turn with SIGTERM fails no request; kill -9 of a gateway, the
//! leader and a node fails only requests in flight, and loses nothing acknowledged.
//!
//! Skips itself (saying so) where no `etcd` binary is installed; `.ci/run` installs
//! Debian's `etcd-server`.

use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::metadata::etcd_http::{Cmp, Op};
use kintsugi_coord::metadata::etcd_store::EtcdMeta;
use kintsugi_coord::metadata::{Change, MetaStore, ObjectRecord, RedbMeta, StripeRecord};
use kintsugi_plan::Shape;
use kintsugi_proto::retention;
use kintsugi_proto::LayoutSpec;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::etcd::{self, EtcdCluster};
use common::history::{allowed_finals, History, Write};
use common::procs::{free_port, Proc, BIN};

const NODES: usize = 7;
const NAMES: usize = 8;

/// One cluster of 13 processes at a time: on 2 cores, two at once would slow each other's
/// failovers past what is measured.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

fn skip() -> bool {
    if etcd::available() {
        return false;
    }
    eprintln!("skipped: no etcd binary on the PATH (Debian: apt-get install etcd-server; .ci/run installs it)");
    true
}

/// Everything the store answers, for comparing two stores.
fn snapshot(m: &dyn MetaStore) -> String {
    let mut out = String::new();
    for n in 0..8 {
        out += &format!("node {n}: {:?}\n", m.node_chunks(n).unwrap());
    }
    out += &format!("bad {:?}\n", m.bad_chunks().unwrap());
    let mut open: Vec<u64> = m.open_stripes(None).unwrap().iter().map(|s| s.id).collect();
    open.sort_unstable();
    out += &format!("open {open:?}\nspread {:?}\nheld {:?}\n", m.spread().unwrap(), m.held_bytes().unwrap());
    for id in 1..=12 {
        out += &format!("stripe {id}: {:?} objects {:?}\n", m.stripe(id).unwrap(), m.stripe_objects(id).unwrap());
    }
    let names: Vec<String> = m.objects_from("", true, 1000).unwrap().into_iter().map(|o| format!("{}:{}", o.name, o.size)).collect();
    let c = m.counts().unwrap();
    out += &format!("objects {names:?}\ncounts {} {} {}\n", c.objects, c.bytes, c.stripes);
    out += &format!("stripes {:?}\n", m.stripes_from(3, 4).unwrap().iter().map(|s| s.id).collect::<Vec<_>>());
    out
}

#[test]
fn the_etcd_store_keeps_what_redb_keeps_and_refuses_a_deposed_leader() {
    if skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(tmp.path());
    let etcd = Arc::new(cluster.client());
    let em = EtcdMeta::open(etcd.clone(), "/kintsugi/t/", None).unwrap();
    let rm = RedbMeta::open(&tmp.path().join("meta.redb")).unwrap();
    let code: CodeSpec = "rs:3,2".parse().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for round in 0..120u64 {
        let id = rng.random_range(1..=12u64);
        let change = match rng.random_range(0..10) {
            0..=4 => {
                let mut nodes: Vec<u32> = (0..8).collect();
                for i in 0..5 {
                    let j = rng.random_range(i..8);
                    nodes.swap(i, j);
                }
                let mut s = StripeRecord::new(id, code, 30, rng.random_range(1..100), nodes[..5].to_vec());
                for i in 0..5 {
                    s.crcs[i] = rng.random_bool(0.7).then_some(i as u32);
                    s.bad[i] = rng.random_bool(0.2);
                }
                s.open = rng.random_bool(0.3);
                s.pg = rng.random_range(0..3);
                s.changed_ms = round;
                Change::PutStripe(s)
            }
            5 | 6 => Change::DeleteStripe(id),
            7 | 8 => Change::PutObject(ObjectRecord {
                name: format!("o{}/{}", rng.random_range(0..3), rng.random_range(0..4)),
                size: rng.random_range(0..1000),
                code,
                committed: true,
                stripes: (0..rng.random_range(0..3)).map(|_| rng.random_range(1..=12)).collect(),
                version: round,
                created_ms: 0,
                layout: LayoutSpec::Stripe,
                extents: vec![],
                attrs: Default::default(),
                chain: Default::default(),
                inline: None,
            }),
            _ => Change::DeleteObject(format!("o{}/{}", rng.random_range(0..3), rng.random_range(0..4))),
        };
        em.apply(vec![change.clone()]).unwrap();
        rm.apply(vec![change]).unwrap();
        assert_eq!(em.next_id("version").unwrap(), rm.next_id("version").unwrap());
        if round % 20 == 19 {
            assert_eq!(snapshot(&em), snapshot(&rm), "after change {round}");
        }
    }
    // A second coordinator opening the store sees the same (the in-memory tables come from etcd).
    let again = EtcdMeta::open(etcd.clone(), "/kintsugi/t/", None).unwrap();
    assert_eq!(snapshot(&again), snapshot(&rm));
    // A coordinator whose leader key another holds now cannot write.
    let key = b"/kintsugi/t/leader".to_vec();
    etcd.txn(&[], &[Op::Put { key: key.clone(), value: b"someone else".to_vec(), lease: 0 }], &[]).unwrap();
    let deposed = EtcdMeta::open(etcd, "/kintsugi/t/", Some(Cmp::ValueIs { key, value: b"me".to_vec() })).unwrap();
    let err = deposed.apply(vec![Change::DeleteStripe(1)]).unwrap_err();
    assert_eq!(err.kind(), kintsugi_proto::ErrorKind::Unavailable, "a deposed leader's write is retried at the next: {err}");
    assert_eq!(snapshot(&again), snapshot(&rm), "the refused change left nothing");
}

/// Three coordinators on one etcd, and nodes that know all three.
struct Cluster {
    dir: PathBuf,
    etcd: EtcdCluster,
    coords: Vec<String>,
    /// Each coordinator's metrics port.
    metrics: Vec<String>,
    coord_procs: Vec<Option<Proc>>,
    nodes: Vec<Option<Proc>>,
}

impl Cluster {
    fn start(dir: &Path) -> Self {
        Self::start_with(dir, NODES)
    }

    fn start_with(dir: &Path, nodes: usize) -> Self {
        let etcd = EtcdCluster::start(dir);
        let coords: Vec<String> = (0..3).map(|_| format!("127.0.0.1:{}", free_port())).collect();
        let metrics: Vec<String> = (0..3).map(|_| format!("127.0.0.1:{}", free_port())).collect();
        for (i, addr) in coords.iter().enumerate() {
            std::fs::write(
                dir.join(format!("coord{i}.toml")),
                format!(
                    "listen = \"{addr}\"\nmetrics_listen = \"{}\"\ndata_dir = \"{}\"\nmeta = \"{}\"\nleader_lease_ms = 3000\ndead_after_ms = 1500\n\
                     down_out_ms = 2500\nauto_repair_interval_ms = 300\nrepair_slice = 8192\nchunk_size = 16384\n\
                     io_timeout_ms = 3000\nupload_timeout_ms = 4000\ngc_grace_ms = 1000\ngc_interval_ms = 500\n\
                     orphan_grace_ms = 3000\ninventory_slack_ms = 2000\nindex_copies = 0\nrebalance_on_join = false\n",
                    metrics[i],
                    dir.join(format!("coord{i}")).display(),
                    etcd.url()
                ),
            )
            .unwrap();
        }
        let list = coords.join(",");
        for i in 0..nodes {
            std::fs::write(
                dir.join(format!("node{i}.toml")),
                format!(
                    "id = {i}\nlisten = \"127.0.0.1:{}\"\ndata_dir = \"{}\"\ncoordinator = \"{list}\"\nheartbeat_ms = 200\n\
                     io_timeout_ms = 3000\ninventory_ms = 1000\n",
                    free_port(),
                    dir.join(format!("n{i}")).display()
                ),
            )
            .unwrap();
        }
        let mut c = Cluster {
            dir: dir.to_path_buf(),
            etcd,
            coords,
            metrics,
            coord_procs: vec![None, None, None],
            nodes: (0..nodes).map(|_| None).collect(),
        };
        for i in 0..3 {
            c.start_coordinator(i);
        }
        for i in 0..nodes {
            c.start_node(i);
        }
        c
    }

    fn spawn(&self, args: &[&str], log: &str) -> Proc {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(log)).unwrap();
        Proc(Command::new(BIN).args(args).env("KINTSUGI_LOG", "info").stdout(Stdio::null()).stderr(log).spawn().unwrap())
    }

    fn start_coordinator(&mut self, i: usize) {
        let cfg = self.dir.join(format!("coord{i}.toml"));
        self.coord_procs[i] = Some(self.spawn(&["coordinator", "--config", cfg.to_str().unwrap()], &format!("coord{i}.log")));
    }

    fn start_node(&mut self, i: usize) {
        let cfg = self.dir.join(format!("node{i}.toml"));
        self.nodes[i] = Some(self.spawn(&["node", "--config", cfg.to_str().unwrap()], &format!("node{i}.log")));
    }

    fn client(&self) -> Client {
        let mut c = Client::new(&self.coords.join(","));
        c.io_timeout = Duration::from_secs(6);
        c
    }

    /// What coordinator `i`'s metrics port says of its role: `kintsugi_leader`'s value.
    fn leader_metric(&self, i: usize) -> Option<f64> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.metrics[i]).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        text.lines().find_map(|l| l.strip_prefix("kintsugi_leader ")?.parse().ok())
    }

    /// The coordinator that accepts connections (standbys do not listen).
    fn leader(&self) -> Option<usize> {
        (0..3).find(|&i| self.coord_procs[i].is_some() && std::net::TcpStream::connect(&self.coords[i]).is_ok())
    }

    /// kill -9 of the leader; returns which it was and how long until another one answered
    /// `status` (the failover time).
    async fn kill_leader(&mut self) -> (usize, Duration) {
        let old = self.wait_leader(Duration::from_secs(20)).await;
        self.coord_procs[old] = None;
        let killed = Instant::now();
        let new = self.wait_leader(Duration::from_secs(30)).await;
        assert_ne!(new, old);
        let c = self.client();
        while c.status().await.is_err() {
            assert!(killed.elapsed() < Duration::from_secs(30), "the new leader never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (old, killed.elapsed())
    }

    async fn wait_leader(&self, limit: Duration) -> usize {
        let start = Instant::now();
        loop {
            if let Some(i) = self.leader() {
                return i;
            }
            assert!(start.elapsed() < limit, "no coordinator led within {limit:?}; logs in {}", self.dir.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_alive(&self, n: usize) {
        let c = self.client();
        let start = Instant::now();
        loop {
            if let Ok(s) = c.status().await {
                if s.nodes.iter().filter(|n| n.alive).count() == n {
                    return;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(60), "never saw {n} live nodes");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The logs' last lines, for a failing test's report.
    fn logs(&self) -> String {
        let mut out = String::new();
        for f in std::fs::read_dir(&self.dir).unwrap().flatten() {
            if f.path().extension().is_some_and(|e| e == "log") && f.file_name().to_string_lossy().starts_with("coord") {
                let text = std::fs::read_to_string(f.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(12).collect();
                out += &format!("--- {} ---\n{}\n", f.path().display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
        }
        out
    }
}

/// A running cluster with every node up, one at a time (None: no etcd here, skipped).
fn setup() -> Option<(std::sync::MutexGuard<'static, ()>, tempfile::TempDir, tokio::runtime::Runtime, Cluster)> {
    if skip() {
        return None;
    }
    let one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cluster = Cluster::start(tmp.path());
    rt.block_on(cluster.wait_alive(NODES));
    Some((one, tmp, rt, cluster))
}

fn content(name: usize, serial: u64, rng: &mut StdRng) -> Vec<u8> {
    let len = rng.random_range(0..120_000);
    let mut bytes = vec![0u8; len];
    StdRng::seed_from_u64((name as u64) << 32 ^ serial).fill(&mut bytes[..]);
    bytes
}

async fn worker(c: Client, id: u64, deadline: Instant, hist: Arc<Mutex<History>>) {
    let mut rng = StdRng::seed_from_u64(id);
    let code: CodeSpec = "rs:4,2".parse().unwrap();
    let mut serial = id << 40;
    while Instant::now() < deadline {
        let name = rng.random_range(0..NAMES);
        let key = format!("obj{name}");
        let op = rng.random_range(0..100);
        let start = Instant::now();
        if op < 45 {
            serial += 1;
            let data = Arc::new(content(name, serial, &mut rng));
            hist.lock().unwrap().versions[name].push(data.clone());
            let r = c.put(&key, &data, code, 0).await.map(|_| ());
            if let Err(e) = &r {
                hist.lock().unwrap().error("put", e);
            }
            hist.lock().unwrap().writes[name].push(Write { start, end: Instant::now(), acked: r.is_ok(), data: Some(data) });
        } else if op < 85 {
            match c.get(&key, Shape::Cr, 8192).await {
                Ok((got, _)) => {
                    let mut h = hist.lock().unwrap();
                    assert!(h.versions[name].iter().any(|v| **v == got), "a read of {key} returned bytes of no version put");
                    h.reads_ok += 1;
                }
                Err(e) => {
                    let mut h = hist.lock().unwrap();
                    h.reads_failed += 1;
                    h.error("get", &e);
                }
            }
        } else {
            let r = c.delete(&key).await;
            if let Err(e) = &r {
                hist.lock().unwrap().error("delete", e);
            }
            hist.lock().unwrap().writes[name].push(Write { start, end: Instant::now(), acked: r.is_ok(), data: None });
        }
        if hist.lock().unwrap().errors.values().sum::<usize>() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[test]
fn a_standby_leads_within_10s_of_a_leader_killed_during_puts_gets_and_deletes() {
    let Some((_one, _tmp, rt, mut cluster)) = setup() else { return };
    // Two objects under object lock (a COMPLIANCE retention a day long, a legal hold): the
    // lock is metadata in etcd, and holds on every leader.
    let locked = rt.block_on(async {
        let c = cluster.client();
        let mut locked = Vec::new();
        for (name, retention, hold) in [("locked-c", true, false), ("locked-h", false, true)] {
            let data = content(99, locked.len() as u64, &mut StdRng::seed_from_u64(99));
            let l = c.put(name, &data, "rs:4,2".parse().unwrap(), 0).await.unwrap();
            let mut attrs = l.attrs.clone();
            let until_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64 + 86_400_000;
            let r = retention.then_some(retention::Retention { mode: retention::Mode::Compliance, until_ms });
            retention::set_retention(&mut attrs, r);
            retention::set_legal_hold(&mut attrs, hold);
            c.set_attrs(name, l.version, attrs).await.unwrap();
            locked.push((name, data));
        }
        locked
    });
    let hist = Arc::new(Mutex::new(History { writes: vec![Vec::new(); NAMES], versions: vec![Vec::new(); NAMES], ..Default::default() }));
    let deadline = Instant::now() + Duration::from_secs(16);
    let workers: Vec<_> = (0..4).map(|w| rt.spawn(worker(cluster.client(), w + 1, deadline, hist.clone()))).collect();
    let mut failovers = Vec::new();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(3));
        let (old, took) = rt.block_on(cluster.kill_leader());
        eprintln!("failover: coordinator {old} killed, another answered {took:?} later");
        failovers.push(took);
        // Back as a standby.
        cluster.start_coordinator(old);
    }
    for w in workers {
        rt.block_on(w).expect("a worker failed");
    }
    let h = hist.lock().unwrap();
    eprintln!("failover: failed operations by cause: {:#?}", h.errors);
    for took in &failovers {
        assert!(*took < Duration::from_secs(10), "a standby took {took:?} to lead:\n{}", cluster.logs());
    }
    // Every coordinator answers scrapes: the leader as one, the standbys (one restarted
    // after each failover) as standbys.
    let leader = rt.block_on(cluster.wait_leader(Duration::from_secs(20)));
    for i in 0..3 {
        let want = if i == leader { 1.0 } else { 0.0 };
        assert_eq!(cluster.leader_metric(i), Some(want), "coordinator {i}'s kintsugi_leader (the leader is {leader})");
    }
    let c = cluster.client();
    rt.block_on(async {
        for name in 0..NAMES {
            let key = format!("obj{name}");
            let allowed = allowed_finals(&h.writes[name]);
            let now = match c.get(&key, Shape::Ppr, 8192).await {
                Ok((bytes, _)) => Some(bytes),
                Err(e) if e.kind() == kintsugi_client::ErrorKind::NotFound => None,
                Err(e) => panic!("{key} cannot be read: {e}\n{}", cluster.logs()),
            };
            assert!(
                allowed.iter().any(|a| a.as_deref().map(|v| v.as_slice()) == now.as_deref()),
                "{key}: {} is not an outcome the clients allow",
                now.map_or("absent".into(), |b| format!("{} bytes", b.len()))
            );
        }
    });
    rt.block_on(async {
        for (name, data) in &locked {
            let e = c.delete(name).await.expect_err("a locked object is not deleted after failovers");
            assert_eq!(e.kind(), kintsugi_client::ErrorKind::Locked, "{name}: {e}");
            assert_eq!(&c.get(name, Shape::Ppr, 8192).await.unwrap().0, data, "{name} reads back whole");
        }
    });
    let acked = h.writes.iter().flatten().filter(|w| w.acked).count();
    let after: usize = h.writes.iter().flatten().filter(|w| w.acked && w.start > deadline - Duration::from_secs(4)).count();
    eprintln!("failover: {acked} writes acknowledged, {after} in the last 4 s, {} reads ok", h.reads_ok);
    assert!(after > 0, "no write succeeded after the second failover");
}

#[test]
fn a_full_node_repair_interrupted_by_a_failover_finishes_on_the_new_leader() {
    let Some((_one, _tmp, rt, mut cluster)) = setup() else { return };
    let c = cluster.client();
    let code: CodeSpec = "rs:4,2".parse().unwrap();
    let objects: Vec<Vec<u8>> = (0..16).map(|i| content(i, 1, &mut StdRng::seed_from_u64(i as u64)).repeat(2)).collect();
    rt.block_on(async {
        for (i, o) in objects.iter().enumerate() {
            c.put(&format!("r{i}"), o, code, 0).await.unwrap();
        }
    });
    // Node 0 dies; the leader starts rebuilding its chunks, and dies too.
    cluster.nodes[0] = None;
    rt.block_on(async {
        while c.status().await.unwrap().chunks_on_down_nodes == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let repairing = {
        let c = cluster.client();
        rt.spawn(async move { c.repair(Shape::Ppr, 8192, 2, kintsugi_plan::schedule::Scheduler::Random).await })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (old, took) = rt.block_on(cluster.kill_leader());
    eprintln!("repair failover: coordinator {old} killed, another answered {took:?} later");
    let _ = rt.block_on(repairing);
    // The new leader resumes what was pending (and automatic repair finds the rest).
    rt.block_on(async {
        let start = Instant::now();
        loop {
            let s = c.status().await.unwrap();
            // A new leader takes the nodes as up until they miss `dead_after_ms`: node 0's
            // chunks count as lost once it has seen it silent.
            let zero_down = s.nodes.iter().any(|n| n.id == 0 && !n.alive);
            if zero_down && s.lost_chunks == 0 && s.pending_repairs == 0 && !s.repairing {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "still {} lost after 60 s:\n{}", s.lost_chunks, cluster.logs());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for (i, o) in objects.iter().enumerate() {
            let l = c.stat(&format!("r{i}")).await.unwrap();
            assert!(l.stripes.iter().all(|s| s.chunks.iter().all(|ch| ch.node != 0)), "r{i} still has a chunk on the dead node");
            assert_eq!(&c.get(&format!("r{i}"), Shape::Cr, 8192).await.unwrap().0, o, "r{i}");
        }
    });
    assert!(took < Duration::from_secs(10), "a standby took {took:?} to lead");
}

#[test]
fn etcd_losing_one_member_changes_nothing_and_losing_two_stops_writes_until_one_returns() {
    let Some((_one, _tmp, rt, mut cluster)) = setup() else { return };
    let c = cluster.client();
    let code: CodeSpec = "rs:4,2".parse().unwrap();
    let put = |name: &str| {
        let (c, name) = (c.clone(), name.to_string());
        let data = name.repeat(5000).into_bytes();
        rt.block_on(async move { c.put(&name, &data, code, 0).await.map(|_| data) })
    };
    let mut kept = vec![("before".to_string(), put("before").unwrap())];
    cluster.etcd.kill(2);
    kept.push(("one-member-down".into(), put("one-member-down").expect("a put with one etcd member down")));
    cluster.etcd.kill(1);
    let err = put("no-quorum").expect_err("a put without an etcd quorum");
    eprintln!("without a quorum: {err}");
    // Back: a coordinator leads again (the one that led may have stepped down meanwhile).
    cluster.etcd.start_member(1);
    let start = Instant::now();
    let back = loop {
        match put("after") {
            Ok(d) => break d,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(40), "writes did not resume: {e}\n{}", cluster.logs());
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    };
    kept.push(("after".into(), back));
    rt.block_on(async {
        for (name, data) in &kept {
            assert_eq!(&c.get(name, Shape::Cr, 8192).await.unwrap().0, data, "{name}");
        }
        // The put that failed may have landed after all (etcd applies a proposal that timed
        // out once a quorum is back), but never as other bytes.
        if let Ok((got, _)) = c.get("no-quorum", Shape::Cr, 8192).await {
            assert_eq!(got, "no-quorum".repeat(5000).into_bytes());
        }
    });
    let err = err.to_string();
    assert!(err.contains("etcd") || err.contains("coordinator"), "{err}");
}

/// The process's pid, for a signal.
fn signal(p: &Proc, sig: i32) {
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(p.0.id() as i32, sig) }, 0);
}

/// SIGTERM, then waits for the process to exit; says whether it exited cleanly.
fn terminate(p: &mut Option<Proc>, within: Duration) -> bool {
    let mut p = p.take().expect("running");
    signal(&p, libc::SIGTERM);
    let deadline = Instant::now() + within;
    loop {
        if let Some(st) = p.0.try_wait().unwrap() {
            return st.success();
        }
        assert!(Instant::now() < deadline, "no exit within {within:?} of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The rolling restart an operator does for an upgrade, under steady S3 load from boto3
/// clients (standard retry mode) spread over two gateways: each gateway, each of 9 nodes
/// and each of 3 coordinators on etcd (the leader last) is stopped with SIGTERM and started
/// again, in turn. No request fails and no byte is wrong. Then kill -9 of a gateway, the
/// leading coordinator and a node: only requests in flight at a kill may fail (counted),
/// and every acknowledged object reads back byte-exact. The p99 of each phase is printed.
#[test]
fn a_rolling_restart_under_s3_load_fails_no_request() {
    if skip() {
        return;
    }
    let boto = Command::new("python3").args(["-c", "import boto3"]).output().is_ok_and(|o| o.status.success());
    if !boto {
        assert!(std::env::var_os("CI").is_none(), "CI must have boto3 (.ci/run installs it)");
        eprintln!("skipped: boto3 is not installed");
        return;
    }
    const N: usize = 9;
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut cluster = Cluster::start_with(dir, N);
    rt.block_on(cluster.wait_alive(N));
    let creds = dir.join("credentials.toml");
    let (ak, sk) = ("KIROLLINGRESTART001", "rolling-restart-secret-key-0123456789abcd");
    std::fs::write(&creds, format!("[[keys]]\naccess_key = \"{ak}\"\nsecret_key = \"{sk}\"\n")).unwrap();
    let gw_addrs: Vec<String> = (0..2).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let coords = cluster.coords.join(",");
    let start_gateway = |c: &Cluster, i: usize| -> Proc {
        let args = ["s3", "--listen", &gw_addrs[i], "--coordinator", &coords, "--credentials", creds.to_str().unwrap()];
        c.spawn(&[&args[..], &["--code", "rs:4,2", "--min-part-size", "64KiB"]].concat(), &format!("gw{i}.log"))
    };
    let answers = |addr: &str| std::net::TcpStream::connect(addr).is_ok();
    let mut gateways: Vec<Option<Proc>> = (0..2).map(|i| Some(start_gateway(&cluster, i))).collect();
    for a in &gw_addrs {
        until("a gateway listens", Duration::from_secs(30), || answers(a));
    }

    let (phase, progress, stop) = (dir.join("phase"), dir.join("progress"), dir.join("stop"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_restart_load.py");
    let endpoints: Vec<String> = gw_addrs.iter().map(|a| format!("http://{a}")).collect();
    let mut load = Proc(
        Command::new("python3")
            .arg(&script)
            .arg("rolling")
            .args([&phase, &progress, &stop])
            .env("S3_ENDPOINT", endpoints.join(","))
            .env("LOAD_PART", "65536")
            .env("AWS_ACCESS_KEY_ID", ak)
            .env("AWS_SECRET_ACCESS_KEY", sk)
            .env_remove("AWS_PROFILE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let acked = || std::fs::read_to_string(&progress).ok().and_then(|s| s.trim().parse::<usize>().ok()).unwrap_or(0);
    let more = |n: usize| {
        let from = acked();
        until("the load goes on", Duration::from_secs(120), || acked() >= from + n);
    };
    let set_phase = |p: &str| std::fs::write(&phase, p).unwrap();
    more(10);

    // Rolling, with SIGTERM: gateways, nodes, the standbys, then the leader.
    for i in 0..2 {
        set_phase(&format!("term-gateway{i}"));
        assert!(terminate(&mut gateways[i], Duration::from_secs(40)), "gateway {i} exits cleanly at SIGTERM");
        gateways[i] = Some(start_gateway(&cluster, i));
        until("the gateway listens again", Duration::from_secs(30), || answers(&gw_addrs[i]));
        more(5);
    }
    for i in 0..N {
        set_phase(&format!("term-node{i}"));
        assert!(terminate(&mut cluster.nodes[i], Duration::from_secs(40)), "node {i} exits cleanly at SIGTERM");
        cluster.start_node(i);
        rt.block_on(cluster.wait_alive(N));
        more(5);
    }
    let leader = rt.block_on(cluster.wait_leader(Duration::from_secs(20)));
    for i in (0..3).filter(|&i| i != leader).chain([leader]) {
        set_phase(&format!("term-coordinator{i}"));
        assert!(terminate(&mut cluster.coord_procs[i], Duration::from_secs(40)), "coordinator {i} exits cleanly at SIGTERM");
        cluster.start_coordinator(i);
        rt.block_on(cluster.wait_leader(Duration::from_secs(20)));
        until("the coordinator answers its metrics", Duration::from_secs(30), || cluster.leader_metric(i).is_some());
        more(5);
    }
    set_phase("after-rolling");
    more(5);

    // kill -9, one at a time.
    set_phase("kill-gateway0");
    gateways[0] = None;
    gateways[0] = Some(start_gateway(&cluster, 0));
    until("the gateway listens again", Duration::from_secs(30), || answers(&gw_addrs[0]));
    more(5);
    set_phase("kill-leader");
    let (old, took) = rt.block_on(cluster.kill_leader());
    cluster.start_coordinator(old);
    more(5);
    set_phase("kill-node3");
    cluster.nodes[3] = None;
    cluster.start_node(3);
    rt.block_on(cluster.wait_alive(N));
    more(5);
    set_phase("after-kills");
    more(5);
    std::fs::write(&stop, "").unwrap();

    until("the load finishes", Duration::from_secs(300), || load.0.try_wait().unwrap().is_some());
    let (mut out, mut err) = (String::new(), String::new());
    use std::io::Read;
    load.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    load.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("load summary ({e}): {out}\n{err}"));
    eprintln!("rolling restart: failover after the leader's kill -9 took {took:?}; p99 per phase (s): {}", r["p99_seconds"]);
    assert_eq!((r["wrong"].as_u64(), r["unreadable"].as_u64()), (Some(0), Some(0)), "every acknowledged object byte-exact: {r}");
    let counts = r["counts"].as_array().unwrap();
    assert!(counts.iter().all(|c| c["outcome"] != "wrong"), "{r}");
    let mut at_kills = 0;
    for c in counts.iter().filter(|c| c["outcome"] == "failed") {
        let phase = c["phase"].as_str().unwrap();
        // A request in flight at a kill began in or before a kill phase and ended in one
        // or after it.
        assert!(phase.contains("kill-"), "a request failed outside the kills: {c}\n{r}\n{}", cluster.logs());
        at_kills += c["n"].as_u64().unwrap();
    }
    let total: u64 = counts.iter().map(|c| c["n"].as_u64().unwrap()).sum();
    eprintln!("rolling restart: {total} requests, {} objects acknowledged, {at_kills} failed at the kills", r["acknowledged"]);
    assert!(r["acknowledged"].as_u64().unwrap() > 100, "{r}");
}
