//! The cluster's processes: `kintsugi node` (and `node remove`) and `kintsugi coordinator`,
//! configured by TOML with flags on top.

use crate::cluster_cmd::{client, runtime, Target};
use crate::units::parse_rate;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use kintsugi_coord::CoordConfig;
use kintsugi_node::NodeConfig;
use kintsugi_plan::NodeId;
use kintsugi_proto::{CoordRequest, CoordResponse};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct NodeArgs {
    #[command(subcommand)]
    pub action: Option<NodeAction>,
    /// TOML configuration; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The node's id, unique in the cluster; the coordinator binds it to this node's data
    /// directory at its first join [default: 0].
    #[arg(long)]
    pub id: Option<NodeId>,
    /// Listen address (default 127.0.0.1:0).
    #[arg(long)]
    pub listen: Option<String>,
    /// Address others reach this node at (default: the listen address; required when
    /// listening on 0.0.0.0 or [::]).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Where the node keeps its chunks and its identity (identity.json) [default: ./kintsugi-node-data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The coordinator's address, HOST:PORT, or several comma-separated (coordinators sharing
    /// etcd: the node talks to the one leading) (none: the node runs alone) [default: none].
    #[arg(long)]
    pub coordinator: Option<String>,
    /// Emulated link in both directions (e.g. 1gbit); --uplink/--downlink set one.
    #[arg(long, value_parser = parse_rate)]
    pub link: Option<f64>,
    #[arg(long, value_parser = parse_rate)]
    pub uplink: Option<f64>,
    #[arg(long, value_parser = parse_rate)]
    pub downlink: Option<f64>,
    /// The node's link rate, both directions (e.g. 10gbit), for the coordinator's
    /// residual-bandwidth accounting [default: --link/--uplink/--downlink when given].
    #[arg(long, value_parser = parse_rate)]
    pub link_capacity: Option<f64>,
    /// Threads of the node's runtime [default: one per core]; the testbed gives each of its
    /// nodes cores/nodes of them, at least one.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
    /// Emulate an HDD under the chunk store: milliseconds of positioning per I/O (less for a
    /// short forward gap) [default when --hdd-bw is given: 8].
    #[arg(long)]
    pub hdd_seek_ms: Option<f64>,
    /// Emulated HDD's sequential rate (e.g. 180MB/s) [default when --hdd-seek-ms is given: 180MB/s].
    #[arg(long, value_parser = parse_rate)]
    pub hdd_bw: Option<f64>,
    /// Verified read-ahead per chunk a repair helper reads [default: 512KiB, 4MiB with an emulated HDD].
    #[arg(long, value_parser = crate::units::parse_nonzero_size)]
    pub read_ahead: Option<usize>,
    /// TCP congestion control of the node's connections (e.g. cubic, reno; the kernel's
    /// tcp_available_congestion_control lists them) [default: the host's].
    #[arg(long)]
    pub tcp_congestion: Option<String>,
    /// Mark what the node sends for repairs with this DSCP (0-63; 1 is RFC 8622's Lower
    /// Effort), so a priority or weighted qdisc, or a switch, carries repair below users'
    /// traffic (README: "Repair in its own traffic class") [default: unmarked].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub repair_dscp: Option<u8>,
    /// Serve Prometheus metrics at http://ADDR/metrics (bytes by class, repair work, what
    /// the node stores) [default: none].
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Serve without a cluster secret on an address other than loopback: anyone who reaches
    /// it is served (TOML: insecure) [default: refuse to start].
    #[arg(long)]
    pub insecure: bool,
}

/// What `kintsugi node` does besides running a node.
#[derive(clap::Subcommand, Debug)]
pub enum NodeAction {
    /// Take a node out of the cluster for good: it is failed, its chunks are rebuilt on
    /// other nodes (the coordinator's repair_method and repair_scheduler), then it is
    /// forgotten. Refused while any of its chunks could not be rebuilt.
    Remove {
        #[command(flatten)]
        target: Target,
        /// The node's id.
        id: NodeId,
    },
    /// Put a new disk under an old node id: the id is released from the data directory it
    /// was bound to, the next node to join under it (started on the new, empty directory)
    /// takes it, and the chunks it should hold are rebuilt onto it in place.
    Replace {
        #[command(flatten)]
        target: Target,
        /// The node's id.
        id: NodeId,
    },
}

#[derive(Args, Debug)]
pub struct CoordArgs {
    /// TOML configuration; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address (default 127.0.0.1:7400).
    #[arg(long)]
    pub listen: Option<String>,
    /// Where the coordinator keeps its metadata (a redb database) [default: ./kintsugi-coordinator-data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Metadata in etcd, shared by several coordinators of which one leads and the others
    /// stand by: etcd://HOST:PORT,HOST:PORT,...[/PREFIX] [default: redb in --data-dir].
    #[arg(long)]
    pub meta: Option<String>,
    /// Keep objects of at most 16 KiB in the metadata rather than in stripes (TOML:
    /// inline_objects) [default: true with redb, false with etcd].
    #[arg(long)]
    pub inline_objects: Option<bool>,
    /// Serve Prometheus metrics at http://ADDR/metrics (objects, lost chunks, nodes,
    /// repairs by method and scheduler) and the status page at http://ADDR/ [default: none].
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Serve without a cluster secret on an address other than loopback: anyone who reaches
    /// it is served (TOML: insecure) [default: refuse to start].
    #[arg(long)]
    pub insecure: bool,
}

fn load_toml<T: serde::de::DeserializeOwned + Default>(path: Option<&Path>) -> Result<T> {
    match path {
        None => Ok(T::default()),
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{} is not a valid configuration", p.display()))
        }
    }
}

/// `kintsugi node remove ID`.
fn remove_node(t: &Target, id: NodeId) -> Result<()> {
    runtime()?.block_on(async {
        let r = match client(t)?.call(&CoordRequest::RemoveNode { node: id }, Duration::from_secs(24 * 3600)).await {
            Ok(CoordResponse::Repaired(r)) => r,
            Ok(other) => bail!("unexpected answer {other:?}"),
            Err(e) => bail!(e),
        };
        if t.json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!("removed node {id}; {} chunk(s) rebuilt elsewhere first ({} failed, {} skipped)", r.repaired, r.failed, r.skipped);
        }
        Ok(())
    })
}

/// `kintsugi node replace ID`.
fn replace_node(t: &Target, id: NodeId) -> Result<()> {
    runtime()?.block_on(async {
        client(t)?.call(&CoordRequest::ReplaceNode { node: id }, Duration::from_secs(30)).await.map_err(|e| anyhow!(e))?;
        if t.json {
            println!("{}", serde_json::json!({ "replaced": id }));
        } else {
            println!("node id {id} released: start the node on its new data directory with --id {id}; its chunks are rebuilt onto it");
        }
        Ok(())
    })
}

/// `kintsugi node`: runs until Ctrl-C or a `fail`.
pub fn node(a: NodeArgs) -> Result<()> {
    match &a.action {
        Some(NodeAction::Remove { target, id }) => return remove_node(target, *id),
        Some(NodeAction::Replace { target, id }) => return replace_node(target, *id),
        None => {}
    }
    let mut cfg: NodeConfig = load_toml(a.config.as_deref())?;
    if let Some(v) = a.id {
        cfg.id = v;
    }
    if let Some(v) = a.listen {
        cfg.listen = v;
    }
    if let Some(v) = a.advertise {
        cfg.advertise = Some(v);
    }
    if let Some(v) = a.data_dir {
        cfg.data_dir = v;
    }
    if let Some(v) = a.coordinator {
        cfg.coordinator = Some(v);
    }
    cfg.uplink = a.uplink.or(a.link).or(cfg.uplink);
    cfg.downlink = a.downlink.or(a.link).or(cfg.downlink);
    if let Some(w) = a.worker_threads {
        cfg.worker_threads = Some(w as usize);
    }
    if let Some(c) = a.link_capacity {
        cfg.link_capacity = Some(c);
    }
    cfg.hdd_seek_ms = a.hdd_seek_ms.or(cfg.hdd_seek_ms);
    cfg.hdd_bandwidth = a.hdd_bw.or(cfg.hdd_bandwidth);
    cfg.read_ahead_bytes = a.read_ahead.or(cfg.read_ahead_bytes);
    cfg.tcp_congestion = a.tcp_congestion.or(cfg.tcp_congestion);
    cfg.repair_dscp = a.repair_dscp.or(cfg.repair_dscp);
    cfg.metrics_listen = a.metrics_listen.or(cfg.metrics_listen);
    cfg.insecure |= a.insecure;
    check_node(&cfg)?;
    use_security(cfg.secret_file.as_deref(), cfg.protection.as_deref(), cfg.insecure, &cfg.listen)?;
    check_advertise(&cfg)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(w) = cfg.worker_threads {
        rt.worker_threads(w);
    }
    rt.enable_all().build().context("cannot start the async runtime")?.block_on(async {
        let mut shutdown = crate::shutdown::listen();
        let mut h = kintsugi_node::start(cfg.clone()).await.map_err(|e| anyhow!(e))?;
        eprintln!("node {} listening on {} (data in {})", h.id, h.addr, cfg.data_dir.display());
        if let Some(m) = h.metrics_addr {
            eprintln!("metrics on http://{m}/metrics");
        }
        tokio::select! {
            why = shutdown.requested() => { eprintln!("{why}: node {} stopping", cfg.id); }
            _ = h.stopped() => { eprintln!("node {} stopped", cfg.id); return Ok(()); }
        }
        h.stop().await;
        Ok(())
    })
}

/// What a node refuses to start with (also `kintsugi config check`).
pub fn check_node(cfg: &NodeConfig) -> Result<()> {
    if cfg.hdd_seek_ms.is_some_and(|s| !(s >= 0.0 && s.is_finite())) {
        bail!("hdd_seek_ms must be a number of milliseconds >= 0");
    }
    if cfg.link_capacity.is_some_and(|c| !(c > 0.0 && c.is_finite())) {
        bail!("link_capacity must be a positive number of bytes per second");
    }
    for (what, r) in [("uplink", cfg.uplink), ("downlink", cfg.downlink)] {
        if r.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            bail!("{what} must be a positive number of bytes per second");
        }
    }
    if cfg.worker_threads == Some(0) {
        bail!("worker_threads must be at least 1");
    }
    if let Some(d) = cfg.repair_dscp.filter(|d| *d > 63) {
        bail!("repair_dscp must be 0 to 63 (a DSCP has six bits), got {d}");
    }
    check_endpoints(&cfg.listen, cfg.metrics_listen.as_deref(), cfg.secret_file.as_deref(), cfg.protection.as_deref())
}

/// That others can connect to the address a node tells the coordinator (also `kintsugi
/// config check`); checked after the secret, as the node does.
pub fn check_advertise(cfg: &NodeConfig) -> Result<()> {
    let unspecified = |a: &str| a.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_unspecified());
    match &cfg.advertise {
        None if unspecified(&cfg.listen) => bail!(
            "the node would listen on {}, an address nobody can connect to: give the address to advertise (--advertise HOST:PORT, or advertise in TOML)",
            cfg.listen
        ),
        Some(a) if unspecified(a) => bail!("cannot advertise {a}: others cannot connect to it"),
        Some(a) => check_address("advertise", a),
        None => Ok(()),
    }
}

/// What a coordinator refuses to start with (also `kintsugi config check`).
pub fn check_coordinator(cfg: &CoordConfig) -> Result<()> {
    let (near, backfill, full) = (cfg.nearfull_ratio, cfg.backfillfull_ratio, cfg.full_ratio);
    if !(0.0 < near && near <= backfill && backfill <= full && full <= 1.0) {
        bail!("fill ratios must be 0 < nearfull_ratio <= backfillfull_ratio <= full_ratio <= 1 (got {near}, {backfill}, {full})");
    }
    for (what, ms) in [("dead_after_ms", cfg.dead_after_ms), ("io_timeout_ms", cfg.io_timeout_ms), ("leader_lease_ms", cfg.leader_lease_ms)]
    {
        if ms == 0 {
            bail!("{what} must be at least 1");
        }
    }
    if !(cfg.meta.is_empty() || cfg.meta == "redb") {
        kintsugi_coord::metadata::etcd_store::parse_url(&cfg.meta).map_err(|e| anyhow!("meta: {e}"))?;
    }
    check_endpoints(&cfg.listen, cfg.metrics_listen.as_deref(), cfg.secret_file.as_deref(), cfg.protection.as_deref())
}

/// Why a service would refuse to serve `listen` for want of a cluster secret, if it would:
/// closed by default, it serves beyond loopback only with a secret or when told `insecure`.
pub fn refuses_open(listen: &str, has_secret: bool, insecure: bool) -> Option<String> {
    (!has_secret && !insecure && !loopback_only(listen)).then(|| {
        format!(
            "refusing to serve {listen} without a cluster secret: give one (--secret-file, KINTSUGI_SECRET_FILE or \
             secret_file; `kintsugi secret` makes one), listen on loopback, or pass --insecure (TOML: insecure = true) \
             to serve anyone who reaches it"
        )
    })
}

/// What every service checks: its addresses, that its secret file (if any) is readable, its
/// protection.
fn check_endpoints(listen: &str, metrics_listen: Option<&str>, secret_file: Option<&Path>, protection: Option<&str>) -> Result<()> {
    if let Some(p) = protection {
        p.parse::<kintsugi_proto::secure::Protection>().map_err(|e| anyhow!("protection: {e}"))?;
    }
    check_address("listen", listen)?;
    if let Some(m) = metrics_listen {
        check_address("metrics_listen", m)?;
    }
    if let Some(f) = secret_file {
        kintsugi_proto::auth::Secret::from_file(f).map_err(|e| anyhow!("secret_file: {e}"))?;
    }
    Ok(())
}

/// An address to listen on: HOST:PORT with a port number.
fn check_address(what: &str, addr: &str) -> Result<()> {
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => bail!("{what} must be HOST:PORT, got '{addr}'"),
    }
}

/// `kintsugi coordinator`: runs until Ctrl-C.
pub fn coordinator(a: CoordArgs) -> Result<()> {
    let mut cfg: CoordConfig = load_toml(a.config.as_deref())?;
    if let Some(v) = a.listen {
        cfg.listen = v;
    }
    if let Some(v) = a.data_dir {
        cfg.data_dir = v;
    }
    if let Some(v) = a.meta {
        cfg.meta = v;
    }
    cfg.inline_objects = a.inline_objects.or(cfg.inline_objects);
    cfg.metrics_listen = a.metrics_listen.or(cfg.metrics_listen);
    cfg.insecure |= a.insecure;
    check_coordinator(&cfg)?;
    use_security(cfg.secret_file.as_deref(), cfg.protection.as_deref(), cfg.insecure, &cfg.listen)?;
    // With etcd, metadata calls wait on the network inside request handlers: more workers,
    // so a slow etcd call does not hold up heartbeats.
    let rt = if cfg.meta.is_empty() {
        runtime()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(16).enable_all().build().context("cannot start the async runtime")?
    };
    rt.block_on(async {
        let mut shutdown = crate::shutdown::listen();
        if !cfg.meta.is_empty() {
            eprintln!("coordinator: metadata in {}; leading once no other coordinator does", cfg.meta);
        }
        // A standby waits in `start` until it leads: a stop asked for meanwhile ends the wait
        // (it holds nothing to hand over).
        let mut h = tokio::select! {
            h = kintsugi_coord::start(cfg.clone()) => h.map_err(|e| anyhow!(e))?,
            why = shutdown.requested() => {
                eprintln!("{why}: coordinator stopping (it was standing by)");
                return Ok(());
            }
        };
        let at = if cfg.meta.is_empty() { cfg.data_dir.display().to_string() } else { cfg.meta.clone() };
        eprintln!("coordinator listening on {} (metadata in {at})", h.addr);
        if let Some(m) = h.metrics_addr {
            eprintln!("status page on http://{m}/, metrics on http://{m}/metrics");
        }
        tokio::select! {
            why = shutdown.requested() => {
                eprintln!("{why}: coordinator stopping");
                h.stop().await;
                Ok(())
            }
            why = h.deposed() => {
                // A standby leads now; a supervisor restarts this one as a standby.
                bail!("no longer the leader: {why}")
            }
        }
    })
}

/// The TOML's secret file, unless `--secret-file` or the environment named one, and its
/// protection, unless `--protection` named one. Closed by default: without a secret a
/// service listens on loopback only, unless told `insecure`; then it serves everyone, and
/// says so.
fn use_security(path: Option<&std::path::Path>, protection: Option<&str>, insecure: bool, listen: &str) -> Result<()> {
    kintsugi_proto::tcp::raise_fd_limit();
    if kintsugi_proto::auth::secret().is_none() {
        if let Some(p) = path {
            kintsugi_proto::auth::set_secret(Some(kintsugi_proto::auth::Secret::from_file(p).map_err(|e| anyhow!(e))?));
        }
    }
    if let (Some(p), false) = (protection, crate::PROTECTION_GIVEN.load(std::sync::atomic::Ordering::Relaxed)) {
        kintsugi_proto::auth::set_protection(p.parse().map_err(|e: String| anyhow!("protection: {e}"))?);
    }
    if kintsugi_proto::auth::secret().is_none() {
        if let Some(why) = refuses_open(listen, false, insecure) {
            bail!(why);
        }
        eprintln!(
            "warning: no cluster secret (--secret-file, KINTSUGI_SECRET_FILE or secret_file): connections are open, anyone who can reach {listen} is served"
        );
    } else {
        eprintln!("connections: {}", kintsugi_proto::auth::protection());
    }
    Ok(())
}

/// Whether `listen`'s host is a loopback address (every address it resolves to).
pub(crate) fn loopback_only(listen: &str) -> bool {
    use std::net::ToSocketAddrs;
    match listen.to_socket_addrs() {
        Ok(addrs) => {
            let v: Vec<_> = addrs.collect();
            !v.is_empty() && v.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}
