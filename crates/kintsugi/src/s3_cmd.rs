//! `kintsugi s3` (the S3 gateway), `kintsugi bucket` (buckets with their code and layout)
//! and `kintsugi serve` (a whole store on one machine: coordinator, nodes and gateway).

use crate::cluster_cmd::{client, runtime, Target};
use crate::gateway_config::GatewayConfig;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use kintsugi_codes::CodeSpec;
use kintsugi_coord::CoordConfig;
use kintsugi_node::NodeConfig;
use kintsugi_plan::Shape;
use kintsugi_s3::credentials;
use kintsugi_s3::settings::{layout_name, parse_layout, BucketSettings};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What new buckets store their objects as, unless their creation says otherwise.
#[derive(Args, Debug, Clone)]
pub struct BucketDefaults {
    /// Code of buckets created without an x-kintsugi-code header.
    #[arg(long, default_value = "rs:6,3")]
    pub code: CodeSpec,
    /// Layout of buckets created without an x-kintsugi-layout header: stripe, stripe-max,
    /// geo, geo:S0,Q[,CAP] or contiguous:CHUNK.
    #[arg(long, default_value = "stripe", value_parser = parse_layout_arg)]
    pub layout: kintsugi_proto::LayoutSpec,
    /// Chunk size of Stripe layouts [default: the coordinator's].
    #[arg(long, value_parser = crate::units::parse_nonzero_size)]
    pub chunk_size: Option<usize>,
}

fn parse_layout_arg(s: &str) -> Result<kintsugi_proto::LayoutSpec, String> {
    parse_layout(s)
}

impl BucketDefaults {
    fn settings(&self) -> BucketSettings {
        BucketSettings {
            code: self.code,
            layout: self.layout,
            chunk_size: self.chunk_size.unwrap_or(0) as u64,
            versioning: Default::default(),
        }
    }
}

/// How the gateway reads chunks it cannot fetch.
#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    /// Degraded-read method for unavailable chunks: cr, ppr, ecpipe or ecpipe-cyclic.
    #[arg(long, default_value = "ecpipe")]
    pub method: Shape,
    #[arg(long, default_value = "32KiB", value_parser = crate::units::parse_nonzero_size)]
    pub slice: usize,
}

/// `kintsugi s3`'s flags: each overrides the configuration file's setting (see
/// `gateway_config::GatewayConfig` for the defaults).
#[derive(Args, Debug)]
pub struct S3Args {
    /// TOML configuration (the settings below by name; `kintsugi config check --role s3`
    /// checks one); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to serve S3 on [default: 127.0.0.1:9000].
    #[arg(long)]
    pub listen: Option<String>,
    /// Coordinator address (host:port), or several comma-separated [default: 127.0.0.1:7400].
    #[arg(long, env = "KINTSUGI_COORDINATOR")]
    pub coordinator: Option<String>,
    /// TOML file of access keys: [[keys]] tables of access_key and secret_key (required,
    /// here or in the configuration).
    #[arg(long)]
    pub credentials: Option<PathBuf>,
    /// Code of buckets created without an x-kintsugi-code header [default: rs:6,3].
    #[arg(long)]
    pub code: Option<CodeSpec>,
    /// Layout of buckets created without an x-kintsugi-layout header: stripe, stripe-max,
    /// geo, geo:S0,Q[,CAP] or contiguous:CHUNK [default: stripe].
    #[arg(long)]
    pub layout: Option<String>,
    /// Chunk size of Stripe layouts [default: the coordinator's].
    #[arg(long)]
    pub chunk_size: Option<String>,
    /// Degraded-read method for unavailable chunks: cr, ppr, ecpipe or ecpipe-cyclic
    /// [default: ecpipe].
    #[arg(long)]
    pub method: Option<Shape>,
    /// Slice size of pipelined degraded reads [default: 32KiB].
    #[arg(long)]
    pub slice: Option<String>,
    /// Smallest part of a multipart upload but the last [default: 5MiB, S3's rule].
    #[arg(long)]
    pub min_part_size: Option<String>,
    /// Memory for request and response bodies in flight at once: a PUT holds two stripes,
    /// a GET its read-ahead; requests beyond it wait [default: 96MiB].
    #[arg(long)]
    pub memory_budget: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (requests by method and status, their
    /// latency) [default: none].
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// The region the gateway answers for (GetBucketLocation, CreateBucket's
    /// LocationConstraint); a request signed for another region is answered with S3's
    /// redirection to this one (so s3cmd's default "US" signs again for it) [default: us-east-1].
    #[arg(long)]
    pub region: Option<String>,
    /// Base domain for virtual-hosted-style requests (bucket.DOMAIN/key), beside path style;
    /// repeat for several [default: path style only].
    #[arg(long = "domain")]
    pub domains: Vec<String>,
    /// Seconds in a bucket lifecycle rule's "day"; shorter only to test rules [default: 86400].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub lifecycle_day_seconds: Option<u64>,
    /// Seconds between lifecycle passes over the buckets [default: 3600].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub lifecycle_interval_seconds: Option<u64>,
    /// Lifecycle deletions per second at most [default: 100].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub lifecycle_rate: Option<u32>,
    /// Seconds a client has to send a request's head [default: 20].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_seconds: Option<u64>,
    /// Seconds a request body may send nothing, or a response go unread, before the
    /// connection is closed [default: 30].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_seconds: Option<u64>,
    /// Connections open at once from one client address [default: 256].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections_per_address: Option<u32>,
    /// Serve HTTPS with this certificate chain (PEM), reread at SIGHUP; with --tls-key
    /// [default: plain HTTP].
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// SSE-S3's master keys: a file of `ID BASE64-OF-32-BYTES` lines, mode 0600, the first
    /// wrapping new objects [default: none; SSE-S3 refused, SSE-C served]. Make one with
    /// `kintsugi key master FILE`.
    #[arg(long)]
    pub sse_key_file: Option<PathBuf>,
}

impl S3Args {
    /// The configuration file's settings with the flags given on top.
    fn config(self) -> Result<GatewayConfig> {
        let mut c = match &self.config {
            Some(p) => GatewayConfig::load(p)?,
            None => GatewayConfig::default(),
        };
        macro_rules! over {
            ($($f:ident),*) => {$( if let Some(v) = self.$f { c.$f = v; } )*};
        }
        over!(
            listen,
            coordinator,
            code,
            layout,
            method,
            slice,
            min_part_size,
            memory_budget,
            region,
            lifecycle_day_seconds,
            lifecycle_interval_seconds,
            lifecycle_rate,
            header_timeout_seconds,
            idle_timeout_seconds
        );
        if let Some(n) = self.connections_per_address {
            c.connections_per_address = n as usize;
        }
        c.credentials = self.credentials.or(c.credentials);
        c.tls_cert = self.tls_cert.or(c.tls_cert);
        c.tls_key = self.tls_key.or(c.tls_key);
        c.sse_key_file = self.sse_key_file.or(c.sse_key_file);
        c.chunk_size = self.chunk_size.or(c.chunk_size);
        c.metrics_listen = self.metrics_listen.or(c.metrics_listen);
        if !self.domains.is_empty() {
            c.domains = self.domains;
        }
        Ok(c)
    }
}

#[derive(Subcommand, Debug)]
pub enum BucketCmd {
    /// Create a bucket whose objects are stored with a code and a layout.
    Create {
        name: String,
        #[command(flatten)]
        defaults: BucketDefaults,
        #[command(flatten)]
        target: Target,
    },
    /// List buckets with their code and layout.
    Ls {
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where the store keeps everything (metadata, chunks, secret, credentials); kept across
    /// restarts.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Storage nodes, each in its own directory under --data-dir (at least 2: a code needs
    /// a parity chunk).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(2..=64))]
    pub nodes: u16,
    /// Address to serve S3 on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: String,
    /// Code of new buckets [default: rs:K,2 with K = nodes - 3 up to 6, one node narrower
    /// than the cluster, so that a lost node can be rebuilt on the spare; rs:2,1 on 4 nodes;
    /// two replicas (rs:1,1) on 2 or 3].
    #[arg(long)]
    pub code: Option<CodeSpec>,
    /// Layout of new buckets: stripe, stripe-max, geo, geo:S0,Q[,CAP] or contiguous:CHUNK.
    #[arg(long, default_value = "stripe", value_parser = parse_layout_arg)]
    pub layout: kintsugi_proto::LayoutSpec,
    /// Seconds in a bucket lifecycle rule's "day"; shorter only to test rules.
    #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..))]
    pub lifecycle_day_seconds: u64,
    /// Seconds between lifecycle passes over the buckets.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    pub lifecycle_interval_seconds: u64,
    /// Serve HTTPS with this certificate chain (PEM), reread at SIGHUP; with --tls-key
    /// [default: plain HTTP].
    #[arg(long, requires = "tls_key", conflicts_with = "tls_self_signed")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve HTTPS with a self-signed certificate made at the first start in
    /// DATA_DIR/tls/ (for localhost, this host's name and the listening address); clients
    /// trust it with e.g. `aws --ca-bundle DATA_DIR/tls/cert.pem`.
    #[arg(long)]
    pub tls_self_signed: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// The names a self-signed certificate for a gateway on `listen` is good for.
fn self_signed_names(listen: &str) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        names.push(h.trim().to_string());
    }
    if let Ok(a) = listen.parse::<std::net::SocketAddr>() {
        if !a.ip().is_unspecified() {
            names.push(a.ip().to_string());
        }
    }
    names.retain(|n| !n.is_empty());
    names.dedup();
    names
}

/// Rereads the gateway's certificate at each SIGHUP, saying what came of it.
fn reload_on_hangup(certs: Option<std::sync::Arc<kintsugi_s3::tls::Certificates>>) {
    let Some(certs) = certs else { return };
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch for SIGHUP ({e}): the certificate is not reloaded");
            return;
        }
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            match certs.reload() {
                Ok(()) => eprintln!("SIGHUP: certificate reloaded from {}", certs.files().cert.display()),
                Err(e) => eprintln!("SIGHUP: {e}; the certificate in use stays"),
            }
        }
    });
}

/// `http` or `https`, as the gateway speaks.
fn scheme(h: &kintsugi_s3::S3Handle) -> &'static str {
    if h.tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// `kintsugi s3`: serves until Ctrl-C or SIGTERM.
pub fn s3(a: S3Args) -> Result<()> {
    let cfg = a.config()?.resolve()?;
    runtime()?.block_on(async {
        let mut shutdown = crate::shutdown::listen();
        let h = kintsugi_s3::start(cfg.clone()).await.map_err(|e| anyhow!(e))?;
        reload_on_hangup(h.tls.clone());
        eprintln!("S3 gateway on {}://{} for the cluster at {}", scheme(&h), h.addr, cfg.coordinator);
        if let Some(m) = h.metrics_addr {
            eprintln!("metrics on http://{m}/metrics");
        }
        let why = shutdown.requested().await;
        eprintln!("{why}: stopping");
        h.stop().await;
        Ok(())
    })
}

fn gateway_of(t: &Target, defaults: BucketSettings) -> Result<kintsugi_s3::Gateway> {
    Ok(kintsugi_s3::Gateway::new(client(t)?, defaults, Shape::Cr, 32 << 10))
}

/// `kintsugi bucket ...`.
pub fn bucket(cmd: BucketCmd) -> Result<()> {
    runtime()?.block_on(async {
        match cmd {
            BucketCmd::Create { name, defaults, target } => {
                if !s3s::path::check_bucket_name(&name) {
                    bail!("'{name}' is not a bucket name: 3 to 63 lower-case letters, digits, dots and hyphens");
                }
                let s = defaults.settings();
                let g = gateway_of(&target, s)?;
                g.create_bucket_with(&name, s).await.map_err(|e| anyhow!("{}", e.message().unwrap_or("failed")))?;
                let width = s.code.build().map_err(|e| anyhow!("{e}"))?.n();
                if let Ok(Some(why)) = client(&target)?.cannot_heal(width).await {
                    eprintln!("warning: bucket '{name}': {why}");
                }
                if target.json {
                    println!("{}", serde_json::json!({ "bucket": name, "code": s.code.to_string(), "layout": layout_name(s.layout) }));
                } else {
                    println!("bucket '{name}' created: {} in layout {}", s.code, layout_name(s.layout));
                }
            }
            BucketCmd::Ls { target } => {
                // Listing uses no defaults: each bucket's record holds its own settings.
                let none = BucketSettings {
                    code: CodeSpec::Rs { k: 1, m: 1 },
                    layout: Default::default(),
                    chunk_size: 0,
                    versioning: Default::default(),
                };
                let buckets = gateway_of(&target, none)?.buckets().await.map_err(|e| anyhow!("{}", e.message().unwrap_or("failed")))?;
                let rows: Vec<(String, BucketSettings)> = buckets.into_iter().map(|b| (b.name, b.settings)).collect();
                if target.json {
                    let v: Vec<_> = rows
                        .iter()
                        .map(|(n, s)| serde_json::json!({ "bucket": n, "code": s.code.to_string(), "layout": layout_name(s.layout) }))
                        .collect();
                    println!("{}", serde_json::Value::Array(v));
                } else {
                    println!("{:<40} {:<16} layout", "bucket", "code");
                    for (n, s) in rows {
                        println!("{n:<40} {:<16} {}", s.code.to_string(), layout_name(s.layout));
                    }
                }
            }
        }
        Ok(())
    })
}

/// The code `serve` gives new buckets on `nodes` nodes: one node narrower than the cluster,
/// so that a lost node's chunks can be rebuilt on the spare at once.
fn default_code(nodes: u16) -> CodeSpec {
    match nodes {
        0..=3 => CodeSpec::Rs { k: 1, m: 1 },
        4 => CodeSpec::Rs { k: 2, m: 1 },
        n => CodeSpec::Rs { k: (n as usize - 3).min(6), m: 2 },
    }
}

/// A file made once: its contents, created by `make` if it does not exist yet (temp, fsync,
/// rename).
fn once(path: &Path, make: impl FnOnce() -> Vec<u8>) -> Result<(Vec<u8>, bool)> {
    if path.exists() {
        return Ok((std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?, false));
    }
    let bytes = make();
    crate::atomic_file::write_atomic(path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok((bytes, true))
}

/// `kintsugi serve`: a store on this machine until Ctrl-C or SIGTERM.
pub fn serve(a: ServeArgs) -> Result<()> {
    let code = a.code.unwrap_or_else(|| default_code(a.nodes));
    let n = code.build().map_err(|e| anyhow!("{e}"))?.n();
    if n > a.nodes as usize {
        bail!("{code} needs {n} nodes; --nodes is {}", a.nodes);
    }
    std::fs::create_dir_all(&a.data_dir).with_context(|| format!("cannot create {}", a.data_dir.display()))?;
    let (secret, _) = once(&a.data_dir.join("secret"), || kintsugi_proto::auth::Secret::random().expose().to_vec())?;
    kintsugi_proto::auth::set_secret(Some(kintsugi_proto::auth::Secret::new(secret).map_err(|e| anyhow!(e))?));
    let creds = a.data_dir.join("credentials.toml");
    let first = !creds.exists();
    if first {
        credentials::write(&creds, &credentials::generate()).map_err(|e| anyhow!(e))?;
    }
    let keys = credentials::load(&creds).map_err(|e| anyhow!(e))?;
    let last = crate::serve_state::ServeState::load(&a.data_dir)?;
    // SSE-S3's master key, made at the first start beside the store's other secrets.
    let sse_key = a.data_dir.join("sse.key");
    if kintsugi_s3::sse::MasterKeys::create(&sse_key, "serve-1").with_context(|| format!("cannot write {}", sse_key.display()))? {
        eprintln!("SSE-S3 master key made: {} (keep a copy: encrypted objects cannot be read without it)", sse_key.display());
    }
    let master_keys = Some(std::sync::Arc::new(kintsugi_s3::sse::MasterKeys::load(&sse_key)?));
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(kintsugi_s3::tls::TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ if a.tls_self_signed => {
            let (files, made) = kintsugi_s3::tls::self_signed(&a.data_dir.join("tls"), &self_signed_names(&a.listen))?;
            if made {
                eprintln!("self-signed certificate made: {} (key {})", files.cert.display(), files.key.display());
            }
            Some(files)
        }
        _ => None,
    };
    runtime()?.block_on(async {
        let mut shutdown = crate::shutdown::listen();
        // The ports of the last start, so that nodes, clients and `--data-dir` find the
        // restarted store where it was.
        let coord = kintsugi_coord::start(CoordConfig {
            listen: crate::serve_state::reuse_or_fresh("the coordinator", last.as_ref().map(|l| l.coordinator.as_str())),
            data_dir: a.data_dir.join("coordinator"),
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow!(e))?;
        let addr = coord.addr.to_string();
        let mut nodes = Vec::new();
        for i in 0..a.nodes as usize {
            let was = last.as_ref().and_then(|l| l.nodes.get(i)).map(String::as_str);
            let cfg = NodeConfig {
                id: i as u32,
                listen: crate::serve_state::reuse_or_fresh(&format!("node {i}"), was),
                data_dir: a.data_dir.join(format!("node{i:02}")),
                coordinator: Some(addr.clone()),
                ..Default::default()
            };
            nodes.push(kintsugi_node::start(cfg).await.map_err(|e| anyhow!(e))?);
        }
        let client = kintsugi_client::Client::new(&addr);
        let mut alive = 0;
        for _ in 0..200 {
            alive = client.status().await.map(|s| s.nodes.iter().filter(|n| n.alive).count()).unwrap_or(0);
            if alive >= a.nodes as usize {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if alive < n {
            bail!("only {alive} of {} nodes came up; {code} needs {n}", a.nodes);
        }
        let defaults = BucketSettings { code, layout: a.layout, chunk_size: 0, versioning: Default::default() };
        let cfg = kintsugi_s3::S3Config {
            listen: a.listen.clone(),
            coordinator: addr.clone(),
            keys: keys.clone(),
            defaults,
            method: a.read.method,
            slice: a.read.slice as u64,
            min_part: kintsugi_s3::multipart::MIN_PART,
            memory_budget: kintsugi_s3::memory_budget::DEFAULT_BUDGET,
            metrics_listen: None,
            region: kintsugi_s3::DEFAULT_REGION.into(),
            domains: vec![],
            lifecycle: kintsugi_s3::lifecycle_worker::LifecyclePace {
                day: Duration::from_secs(a.lifecycle_day_seconds),
                interval: Duration::from_secs(a.lifecycle_interval_seconds),
                ..Default::default()
            },
            limits: Default::default(),
            tls,
            master_keys,
        };
        let s3 = kintsugi_s3::start(cfg).await.map_err(|e| anyhow!(e))?;
        reload_on_hangup(s3.tls.clone());
        let state = crate::serve_state::ServeState {
            coordinator: addr.clone(),
            secret_file: std::path::absolute(a.data_dir.join("secret")).context("cannot name the secret file")?,
            s3: s3.addr.to_string(),
            nodes: nodes.iter().map(|h| h.addr.to_string()).collect(),
        };
        state.save(&a.data_dir)?;
        eprintln!(
            "kintsugi store in {}: {} nodes, new buckets {} in layout {}; S3 on {}://{}",
            a.data_dir.display(),
            a.nodes,
            code,
            layout_name(a.layout),
            scheme(&s3),
            s3.addr
        );
        if first {
            eprintln!("credentials (kept in {}):", creds.display());
        } else {
            eprintln!("credentials in {}:", creds.display());
        }
        eprintln!("  access key: {}\n  secret key: {}", keys[0].access_key, keys[0].secret_key);
        let ca = match &s3.tls {
            Some(c) if a.tls_self_signed => format!(" --ca-bundle {}", c.files().cert.display()),
            _ => String::new(),
        };
        eprintln!(
            "  e.g. AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY=... aws --endpoint-url {}://{}{ca} s3 ls",
            keys[0].access_key,
            scheme(&s3),
            s3.addr
        );
        eprintln!(
            "coordinator on {addr} (recorded in {}); e.g. kintsugi status --data-dir {}",
            crate::serve_state::ServeState::path(&a.data_dir).display(),
            a.data_dir.display()
        );
        let why = shutdown.requested().await;
        eprintln!("{why}: stopping (the gateway first, so no request is cut by a missing node)");
        s3.stop().await;
        coord.stop().await;
        for h in nodes {
            h.stop().await;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_picks_a_code_its_nodes_can_hold_and_heal_with_a_node_lost() {
        for n in 2..=20u16 {
            let c = default_code(n).build().unwrap();
            assert!(c.n() - c.k() >= 1, "{n}: survives a lost node");
            // A spare node to rebuild on, from 3 nodes up (2 nodes hold 2 replicas).
            assert!(c.n() < n as usize || n == 2, "{n}: {} leaves no spare node", default_code(n));
        }
        assert_eq!(default_code(6), CodeSpec::Rs { k: 3, m: 2 });
        assert_eq!(default_code(9), CodeSpec::Rs { k: 6, m: 2 });
    }
}
