//! `kintsugi testbed up|down`: a one-host cluster with real network stacks. Each node runs in
//! its own network namespace, joined to a bridge by a veth pair; tc's token-bucket filter on
//! both ends of every pair shapes the node's uplink (namespace side) and downlink (bridge
//! side), unless `--queues` (`testbed_queues`) or `--repair-class` ask for HTB classes
//! instead. The coordinator and the client live in the root namespace behind their own veth
//! pair, shaped the same way. Needs root; `down` removes everything `up` made.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use kintsugi_client::Client;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::testbed_queues::{per_peer_commands, LinkQueues, PeerBy};
use crate::units::parse_rate;

#[derive(Subcommand, Debug)]
pub enum TestbedCmd {
    /// Create namespaces, links and shaping; start the coordinator and the nodes.
    Up(UpArgs),
    /// Stop the processes and remove everything `up` created.
    Down(DownArgs),
}

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,
    /// Rate of every link, both directions (tc syntax is accepted: 1gbit, 100mbit).
    #[arg(long, default_value = "1gbit", value_parser = parse_rate)]
    pub link: f64,
    /// Prefix of every interface and namespace (at most 6 characters).
    #[arg(long, default_value = "ks")]
    pub name: String,
    /// Second octet of the testbed subnet 10.X.0.0/24.
    #[arg(long, default_value_t = 213)]
    pub octet: u8,
    /// Where node data, logs and the testbed state go.
    #[arg(long, default_value = "/tmp/kintsugi-testbed")]
    pub dir: PathBuf,
    /// Coordinator TOML (e.g. `auto_repair = false` to time `repair` by hand); its listen
    /// address and data directory are the testbed's.
    #[arg(long)]
    pub coordinator_config: Option<PathBuf>,
    /// Rate of the root namespace's port (coordinator and clients) [default: --link].
    /// Benchmarks give it more, so writing the data set is not what takes the time.
    #[arg(long, value_parser = parse_rate)]
    pub host_link: Option<f64>,
    /// Also pace what each node sends, in the node process, at this fraction of --link
    /// (e.g. 0.95), below tc's rate: tc's queues then stay short, and a node's transfers
    /// share its uplink as its token bucket serves them rather than as drop-tail queues do.
    /// Receiving is not paced: a shaper taking tokens after a frame is read holds a
    /// receiver's many streams back by TCP flow control, not evenly (full-node CR lost 5%).
    #[arg(long, value_parser = crate::units::parse_fraction)]
    pub pace: Option<f64>,
    /// TCP congestion control of the nodes' connections (cubic, reno, bbr, ...; `host`:
    /// the host's default). cubic, Linux's usual default, whatever this host's: with BBR and
    /// deep queues, a flow whose acknowledgements wait behind a busy link's data stalls at
    /// its window while its own path idles.
    #[arg(long, default_value = "cubic")]
    pub tcp_congestion: String,
    /// Longest queue of every shaped link, in milliseconds at its rate (tc tbf's latency).
    /// Short, as a switch port's buffer is: with 100 ms, acknowledgements waited behind a
    /// busy link's data, and flows starved while their own path idled.
    #[arg(long, default_value_t = DEFAULT_QUEUE_MS, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub queue_ms: u32,
    /// MTU of every link (9000: jumbo frames, as storage networks usually run; a frame
    /// then carries 99.3% payload instead of 95.6%).
    #[arg(long, default_value_t = DEFAULT_MTU, value_parser = clap::value_parser!(u32).range(576..=9000))]
    pub mtu: u32,
    /// Carry repair in a class of its own below users' traffic, with this share of every
    /// link as its floor (e.g. 0.1): nodes mark repair with DSCP Lower Effort, and every
    /// node's links run an HTB qdisc whose users' class goes first and whose repair class
    /// is guaranteed the floor and borrows whatever users leave [default: one class, tbf].
    #[arg(long, value_parser = crate::units::parse_fraction, conflicts_with = "queues")]
    pub repair_class: Option<f64>,
    /// How a link shares its rate among the transfers queued on it: fifo (one drop-tail
    /// queue, a switch port's), peer-send (a round-robin queue per peer on what a node
    /// sends, as a Linux host's fq_codel), peer (one per peer on both ends).
    #[arg(long, value_enum, default_value_t = LinkQueues::Fifo)]
    pub queues: LinkQueues,
}

/// tc tbf's queue bound on the testbed's links by default, milliseconds.
pub const DEFAULT_QUEUE_MS: u32 = 20;

/// The testbed's links' MTU by default (Ethernet's).
pub const DEFAULT_MTU: u32 = 1500;

/// The share of a tc-shaped link's rate that TCP payload gets: tbf counts whole frames, and
/// a full-size segment carries the MTU less 52 bytes of IP and TCP headers (with
/// timestamps) in a frame of the MTU and 14 bytes of Ethernet header: 1448 in 1514 at 1500.
/// The simulator models payload, so it runs the testbed's links at this.
pub fn tcp_payload_share(mtu: u32) -> f64 {
    (mtu as f64 - 52.0) / (mtu as f64 + 14.0)
}

#[derive(Args, Debug)]
pub struct DownArgs {
    #[arg(long, default_value = "ks")]
    pub name: String,
    #[arg(long, default_value = "/tmp/kintsugi-testbed")]
    pub dir: PathBuf,
}

/// What `up` created, for `down`.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct State {
    pub name: String,
    pub nodes: usize,
    pub coordinator: String,
    pub pids: Vec<u32>,
    /// The cluster secret every process of the testbed uses.
    #[serde(default)]
    pub secret_file: PathBuf,
}

pub fn run(cmd: TestbedCmd) -> Result<()> {
    match cmd {
        TestbedCmd::Up(a) => {
            let s = up(&a)?;
            println!("testbed '{}' is up: {} nodes at {:.0} Mbit/s; coordinator {}", a.name, s.nodes, a.link * 8.0 / 1e6, s.coordinator);
            println!("export KINTSUGI_COORDINATOR={}", s.coordinator);
            println!("export KINTSUGI_SECRET_FILE={}", s.secret_file.display());
            Ok(())
        }
        TestbedCmd::Down(a) => down(&a.name, &a.dir),
    }
}

/// Whether this process may build a testbed (root with `ip` and `tc`), and why not.
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the testbed needs root (network namespaces and tc)".into());
    }
    for tool in ["ip", "tc"] {
        if Command::new(tool).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            return Err(format!("the testbed needs '{tool}' (Debian package iproute2)"));
        }
    }
    Ok(())
}

fn sh(args: &[&str]) -> Result<()> {
    let out = Command::new(args[0]).args(&args[1..]).output().with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

fn quiet(args: &[&str]) {
    let _ = Command::new(args[0]).args(&args[1..]).stdout(Stdio::null()).stderr(Stdio::null()).status();
}

/// The algorithm `--tcp-congestion` names; `None` for `host`, the host's default.
fn congestion(name: &str) -> Option<&str> {
    (name != "host").then_some(name)
}

/// The algorithm the testbed's connections run under `--tcp-congestion name`, for reports.
pub fn congestion_in_use(name: &str) -> String {
    match congestion(name) {
        Some(c) => c.to_string(),
        None => {
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").map_or("host default".into(), |s| s.trim().to_string())
        }
    }
}

/// How a benchmark's links are made, for its table header.
pub fn links_label(testbed: bool, queue_ms: u32, tcp_congestion: &str, mtu: u32, queues: LinkQueues) -> String {
    let tc = match queues {
        LinkQueues::Fifo => "tc tbf".to_string(),
        q => format!("tc htb, {q} queues"),
    };
    match testbed {
        true => format!("netns testbed, {tc}, {queue_ms} ms queues, {}, MTU {mtu}", congestion_in_use(tcp_congestion)),
        false => "loopback, token buckets".to_string(),
    }
}

/// A rate in bytes per second as tc writes it.
pub(crate) fn tc_bits(rate: f64) -> String {
    format!("{}bit", (rate * 8.0) as u64)
}

/// A shaped link's burst, bytes: it must cover one timer tick at the rate.
pub(crate) fn tc_burst(rate: f64) -> u64 {
    ((rate / 250.0) as u64).max(64 * 1024)
}

/// The bytes a link's queue holds: `queue_ms` at its rate, plus one burst (tbf's latency bound).
pub(crate) fn tc_queue_limit(rate: f64, queue_ms: u32) -> u64 {
    (rate * queue_ms as f64 / 1e3) as u64 + tc_burst(rate)
}

/// tc's token bucket on one interface, optionally inside a namespace.
fn shape(ns: Option<&str>, dev: &str, rate: f64, queue_ms: u32) -> Result<()> {
    let bits = tc_bits(rate);
    // Latency bounds the queue.
    let burst = tc_burst(rate).to_string();
    let latency = format!("{queue_ms}ms");
    sh_in(ns, &["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", &bits, "burst", &burst, "latency", &latency])
}

/// Runs `args` in namespace `ns` (None: this one).
fn sh_in(ns: Option<&str>, args: &[&str]) -> Result<()> {
    let mut all: Vec<&str> = Vec::new();
    if let Some(ns) = ns {
        all.extend(["ip", "netns", "exec", ns]);
    }
    all.extend(args);
    sh(&all)
}

/// Two classes on one interface: users' traffic first, repair (DSCP Lower Effort) after it
/// but never below `floor` of the link. HTB guarantees each class its rate and lends what
/// one leaves to the other, the users' class first (prio 0); the pair together never
/// exceeds the link. Each class's queue is as long as tbf's would be. `tc_class_commands`
/// is what README's "Repair in its own traffic class" gives for a real NIC.
fn shape_classes(ns: Option<&str>, dev: &str, rate: f64, queue_ms: u32, floor: f64) -> Result<()> {
    for cmd in tc_class_commands(dev, rate, queue_ms, floor) {
        sh_in(ns, &cmd.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    Ok(())
}

/// The tc commands of [`shape_classes`], for interface `dev` at `rate` bytes per second.
pub fn tc_class_commands(dev: &str, rate: f64, queue_ms: u32, floor: f64) -> Vec<Vec<String>> {
    let bits = tc_bits;
    let limit = tc_queue_limit(rate, queue_ms).to_string();
    let burst = tc_burst(rate).to_string();
    // The TOS byte holds the DSCP in its top six bits.
    let tos = format!("{:#04x}", kintsugi_proto::tcp::DSCP_LOWER_EFFORT << 2);
    let class = |id: &str, parent: &str, r: f64, prio: &str| -> Vec<String> {
        let (r, ceil) = (bits(r), bits(rate));
        let mut c = vec!["tc", "class", "add", "dev", dev, "parent", parent, "classid", id, "htb", "rate", &r, "ceil", &ceil];
        c.extend(["burst", &burst, "cburst", &burst, "quantum", "200000", "prio", prio]);
        c.into_iter().map(str::to_string).collect()
    };
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        words(&["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10"]),
        class("1:1", "1:", rate, "0"),
        class("1:10", "1:1", rate * (1.0 - floor), "0"),
        class("1:20", "1:1", rate * floor, "1"),
        words(&["tc", "qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:", "bfifo", "limit", &limit]),
        words(&["tc", "qdisc", "add", "dev", dev, "parent", "1:20", "handle", "20:", "bfifo", "limit", &limit]),
        words(&[
            "tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dsfield", &tos,
            "0xfc", "flowid", "1:20",
        ]),
        words(&[
            "tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ipv6", "prio", "2", "u32", "match", "ip6", "priority", &tos,
            "0xfc", "flowid", "1:20",
        ]),
    ]
}

/// Builds the testbed and starts the processes; returns its state.
pub fn up(a: &UpArgs) -> Result<State> {
    available().map_err(|e| anyhow!(e))?;
    if a.name.is_empty() || a.name.len() > 6 || !a.name.chars().all(|c| c.is_ascii_alphanumeric()) {
        bail!("--name must be 1 to 6 letters or digits (interface names are short)");
    }
    if a.nodes == 0 || a.nodes > 200 {
        bail!("--nodes must be between 1 and 200");
    }
    if a.repair_class.is_some_and(|f| !(f > 0.0 && f < 1.0)) {
        bail!("--repair-class is repair's floor, a share of the link above 0 and below 1 (e.g. 0.1)");
    }
    // Refuse an algorithm this kernel lacks before building anything; this process's own
    // connections (a benchmark's client) then use it too.
    kintsugi_proto::tcp::set_congestion_control(congestion(&a.tcp_congestion)).map_err(|e| anyhow!(e))?;
    let n = &a.name;
    if Path::new(&format!("/sys/class/net/{n}br")).exists() {
        bail!("a testbed named '{n}' already exists; run `kintsugi testbed down --name {n}` first");
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("cannot create {}", a.dir.display()))?;
    let result = build(a);
    if result.is_err() {
        let _ = down(n, &a.dir);
    }
    result
}

fn build(a: &UpArgs) -> Result<State> {
    let n = &a.name;
    let net = format!("10.{}.0", a.octet);
    let exe = std::env::current_exe().context("cannot find the kintsugi binary")?;
    let exe = exe.to_str().ok_or(anyhow!("binary path is not UTF-8"))?.to_string();
    let br = format!("{n}br");
    sh(&["ip", "link", "add", &br, "type", "bridge"])?;
    let mtu = a.mtu.to_string();
    sh(&["ip", "link", "set", &br, "mtu", &mtu])?;
    sh(&["ip", "link", "set", &br, "up"])?;
    // The root namespace's port: coordinator and client.
    let (h, hb) = (format!("{n}h"), format!("{n}hb"));
    sh(&["ip", "link", "add", &h, "mtu", &mtu, "type", "veth", "peer", "name", &hb, "mtu", &mtu])?;
    sh(&["ip", "link", "set", &hb, "master", &br])?;
    sh(&["ip", "link", "set", &hb, "up"])?;
    sh(&["ip", "addr", "add", &format!("{net}.1/24"), "dev", &h])?;
    sh(&["ip", "link", "set", &h, "up"])?;
    shape(None, &h, a.host_link.unwrap_or(a.link), a.queue_ms)?;
    shape(None, &hb, a.host_link.unwrap_or(a.link), a.queue_ms)?;
    let coordinator = format!("{net}.1:7400");
    // The testbed's own secret (mode 0600), used by every process it starts and by this one.
    let secret_file = a.dir.join("secret");
    let secret = kintsugi_proto::auth::secret().unwrap_or_else(kintsugi_proto::auth::Secret::random);
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&secret_file)
            .context("cannot write the testbed's secret file")?;
        f.write_all(secret.expose())?;
    }
    kintsugi_proto::auth::set_secret(Some(secret));
    let secret_arg = secret_file.to_str().context("the testbed directory is not valid UTF-8")?.to_string();
    // Every process of the testbed runs this one's protection (`--protection`, or
    // KINTSUGI_PROTECTION), not only those that inherit its environment.
    let protection = kintsugi_proto::auth::protection().to_string();
    let mut state =
        State { name: n.clone(), nodes: a.nodes, coordinator: coordinator.clone(), pids: Vec::new(), secret_file: secret_file.clone() };
    let log = |name: &str| -> Result<std::fs::File> {
        std::fs::File::create(a.dir.join(format!("{name}.log"))).context("cannot create a log file")
    };
    let spawn = |cmd: &mut Command, name: &str| -> Result<u32> {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .stdout(log(name)?)
            .stderr(log(name)?)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        Ok(child.id())
    };
    // A process left from an earlier testbed can still hold the address (a listening socket
    // outlives its interface's address): the new coordinator would fail to bind, and the
    // nodes would register with the stale one.
    if let Err(e) = std::net::TcpListener::bind(&coordinator) {
        bail!("cannot take the coordinator's address {coordinator} ({e}): a process of an earlier testbed may still hold it (`ss -ltnp 'sport = :7400'` names it)");
    }
    let coord_dir = a.dir.join("coordinator");
    let _ = std::fs::remove_dir_all(&coord_dir);
    let mut coord_cmd = Command::new(&exe);
    coord_cmd.args([
        "--secret-file",
        &secret_arg,
        "--protection",
        &protection,
        "coordinator",
        "--listen",
        &coordinator,
        "--data-dir",
        coord_dir.to_str().unwrap_or("coordinator"),
    ]);
    if let Some(c) = &a.coordinator_config {
        coord_cmd.arg("--config").arg(c);
    }
    state.pids.push(spawn(&mut coord_cmd, "coordinator")?);
    save(&a.dir, &state)?;
    // Every node is a process on this one host: a runtime thread per core in each would
    // put dozens of threads on a few cores and make every wake-up a cross-thread one.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = (cores / a.nodes.max(1)).max(1);
    for i in 0..a.nodes {
        let (ns, v, p) = (format!("{n}n{i}"), format!("{n}v{i}"), format!("{n}p{i}"));
        let ip = format!("{net}.{}", 10 + i);
        sh(&["ip", "netns", "add", &ns])?;
        sh(&["ip", "link", "add", &v, "mtu", &mtu, "type", "veth", "peer", "name", &p, "mtu", &mtu])?;
        sh(&["ip", "link", "set", &p, "netns", &ns])?;
        sh(&["ip", "link", "set", &v, "master", &br])?;
        sh(&["ip", "link", "set", &v, "up"])?;
        sh(&["ip", "netns", "exec", &ns, "ip", "addr", "add", &format!("{ip}/24"), "dev", &p])?;
        sh(&["ip", "netns", "exec", &ns, "ip", "link", "set", &p, "up"])?;
        sh(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        // Namespace side = what the node sends (uplink); bridge side = what it receives.
        // Everyone this node exchanges packets with: the root namespace and the other nodes.
        let peers: Vec<String> =
            std::iter::once(format!("{net}.1")).chain((0..a.nodes).filter(|&j| j != i).map(|j| format!("{net}.{}", 10 + j))).collect();
        let per_peer = |ns: Option<&str>, dev: &str, by: PeerBy| -> Result<()> {
            let batch = a.dir.join(format!("tc-{dev}.batch"));
            std::fs::write(&batch, per_peer_commands(dev, a.link, a.queue_ms, a.mtu, &peers, by).join("\n") + "\n")?;
            sh_in(ns, &["tc", "-batch", batch.to_str().context("the testbed directory is not valid UTF-8")?])
        };
        match a.repair_class {
            None => {
                match a.queues {
                    LinkQueues::Fifo => shape(Some(&ns), &p, a.link, a.queue_ms)?,
                    LinkQueues::PeerSend | LinkQueues::Peer => per_peer(Some(&ns), &p, PeerBy::Destination)?,
                }
                match a.queues {
                    LinkQueues::Peer => per_peer(None, &v, PeerBy::Source)?,
                    LinkQueues::Fifo | LinkQueues::PeerSend => shape(None, &v, a.link, a.queue_ms)?,
                }
            }
            Some(floor) => {
                shape_classes(Some(&ns), &p, a.link, a.queue_ms, floor)?;
                shape_classes(None, &v, a.link, a.queue_ms, floor)?;
            }
        }
        let data = a.dir.join(format!("node{i:03}"));
        let _ = std::fs::remove_dir_all(&data);
        let pid = spawn(
            Command::new("ip")
                .args(["netns", "exec", &ns, &exe, "--secret-file", &secret_arg, "--protection", &protection])
                .args(["node", "--id", &i.to_string()])
                .args(["--listen", &format!("{ip}:7500"), "--data-dir"])
                .arg(&data)
                .args(["--coordinator", &coordinator])
                .args(["--worker-threads", &workers.to_string()])
                // tc shapes the links: the node is told their rate for residual bandwidth.
                .args(["--link-capacity", &format!("{}B/s", a.link)])
                .args(congestion(&a.tcp_congestion).map(|c| ["--tcp-congestion", c]).into_iter().flatten())
                .args(a.pace.map(|f| ["--uplink".to_string(), format!("{}B/s", a.link * f)]).into_iter().flatten())
                .args(
                    a.repair_class
                        .map(|_| ["--repair-dscp".to_string(), kintsugi_proto::tcp::DSCP_LOWER_EFFORT.to_string()])
                        .into_iter()
                        .flatten(),
                ),
            &format!("node{i:03}"),
        )?;
        state.pids.push(pid);
        save(&a.dir, &state)?;
    }
    // Wait until every node has reported in.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let client = Client::new(&coordinator);
    let ok = rt.block_on(async {
        for _ in 0..300 {
            if let Ok(s) = client.status().await {
                if s.nodes.iter().filter(|x| x.alive).count() == a.nodes {
                    // Heartbeats prove namespace -> root; the client needs root -> namespace
                    // too, which can take a moment longer on a fresh bridge.
                    for _ in 0..100 {
                        let mut all = true;
                        for n in &s.nodes {
                            all &= kintsugi_client::client::ping(&n.addr, Duration::from_millis(500)).await;
                        }
                        if all {
                            return true;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    return false;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    });
    if !ok {
        bail!("the nodes did not all report to the coordinator; logs are in {}", a.dir.display());
    }
    Ok(state)
}

fn save(dir: &Path, s: &State) -> Result<()> {
    crate::atomic_file::write_atomic(&dir.join("testbed.json"), serde_json::to_string_pretty(s)?.as_bytes())
}

/// Stops the processes and deletes namespaces, links and the bridge. Safe to repeat.
pub fn down(name: &str, dir: &Path) -> Result<()> {
    available().map_err(|e| anyhow!(e))?;
    let state: State =
        std::fs::read_to_string(dir.join("testbed.json")).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    for pid in &state.pids {
        // SAFETY: kill with a pid we started; a stale pid at worst gets a signal it ignores.
        unsafe {
            libc::kill(-(*pid as i32), libc::SIGKILL);
            libc::kill(*pid as i32, libc::SIGKILL);
        }
    }
    // Every namespace and interface with our prefix, whether or not the state file knew it.
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let ns = line.split_whitespace().next().unwrap_or("");
            if ns.strip_prefix(&format!("{name}n")).is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())) {
                quiet(&["ip", "netns", "del", ns]);
            }
        }
    }
    for i in 0..256 {
        let v = format!("{name}v{i}");
        if Path::new(&format!("/sys/class/net/{v}")).exists() {
            quiet(&["ip", "link", "del", &v]);
        }
    }
    quiet(&["ip", "link", "del", &format!("{name}h")]);
    quiet(&["ip", "link", "del", &format!("{name}br")]);
    let _ = std::fs::remove_file(dir.join("testbed.json"));
    if Path::new(&format!("/sys/class/net/{name}br")).exists() {
        bail!("could not remove bridge {name}br");
    }
    eprintln!("testbed '{name}' is down");
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Repair's class gets the floor, users' the rest, both may take the whole link, and
    /// the filter matches DSCP 1 (TOS byte 0x04) with the ECN bits masked off.
    #[test]
    fn class_commands_give_repair_its_floor() {
        let cmds: Vec<String> = super::tc_class_commands("eth0", 125e6, 20, 0.1).iter().map(|c| c.join(" ")).collect();
        assert!(cmds[2].contains("classid 1:10 htb rate 900000000bit ceil 1000000000bit"), "{}", cmds[2]);
        assert!(cmds[2].ends_with("prio 0"));
        assert!(cmds[3].contains("classid 1:20 htb rate 100000000bit ceil 1000000000bit"), "{}", cmds[3]);
        assert!(cmds[3].ends_with("prio 1"));
        assert!(cmds[6].contains("match ip dsfield 0x04 0xfc flowid 1:20"), "{}", cmds[6]);
        // 20 ms at 125 MB/s plus a 500 kB burst.
        assert!(cmds[4].ends_with("bfifo limit 3000000"), "{}", cmds[4]);
    }

    /// Payload per frame: 1448 of 1514 bytes at Ethernet's MTU, 8948 of 9014 with jumbo frames.
    #[test]
    fn tcp_payload_share_counts_headers() {
        assert_eq!(super::tcp_payload_share(1500), 1448.0 / 1514.0);
        assert_eq!(super::tcp_payload_share(9000), 8948.0 / 9014.0);
    }
}
