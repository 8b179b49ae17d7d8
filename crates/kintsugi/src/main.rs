//! kintsugi: erasure-coded storage with state-of-the-art repair. One binary, many commands.

mod atomic_file;
mod bench;
mod bench_clay;
mod bench_degraded;
mod bench_fullnode;
mod bench_fullnode_report;
mod bench_fullnode_sim;
mod bench_geo;
mod bench_isal;
mod bench_meta;
mod bench_metrics;
mod bench_planner;
mod bench_relay;
mod bench_relay_equal_work;
mod bench_s3;
mod bench_sar;
mod bench_sim;
mod cluster_cmd;
mod codec;
mod config_cmd;
mod demo;
mod embedded;
mod gateway_config;
mod geo_cmd;
mod geo_sim;
mod key_cmd;
mod load;
mod load_traces;
mod plot;
mod progress;
mod s3_cmd;
mod s3_http;
mod serve_state;
mod service_cmd;
mod shutdown;
mod sim_auto;
mod sim_cmd;
mod sim_planner_checks;
mod sim_requests;
mod testbed;
mod testbed_queues;
mod units;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "kintsugi",
    version,
    about = "Erasure-coded storage with state-of-the-art repair (RS, LRC and Clay codes; CR, PPR, ECPipe, RepairBoost, m-PPR)"
)]
struct Cli {
    /// File holding the cluster secret: every connection proves knowledge of it before any
    /// request is served (node, coordinator and client commands; TOML: secret_file)
    /// [env: KINTSUGI_SECRET_FILE].
    // The variable is read by hand, not by clap: clap counts a flag its variable sets as
    // given, and printed it in every usage line as if it were required.
    #[arg(long, global = true)]
    secret_file: Option<std::path::PathBuf>,
    /// How connections are protected under the secret: encrypted (AES-256-GCM) or
    /// authenticated (integrity only, for trusted networks); every process of a cluster
    /// alike (TOML: protection) [env: KINTSUGI_PROTECTION] [default: encrypted].
    #[arg(long, global = true)]
    protection: Option<String>,
    /// Log lines as text for people, or as one JSON object per line for log collectors
    /// (levels by KINTSUGI_LOG, e.g. info or kintsugi_coord=debug).
    #[arg(long, global = true, env = "KINTSUGI_LOG_FORMAT", default_value = "text", hide_env_values = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Encode, decode and repair files as shard files on local disk.
    #[command(subcommand)]
    Codec(codec::CodecCmd),
    /// Measure throughput (use --json for scripts).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Simulate repairs at scale with the same plans (use --json for scripts).
    #[command(subcommand)]
    Sim(sim_cmd::SimCmd),
    /// Embedded cluster on loopback: write, fail a node, repair with every method, verify, compare.
    Demo(demo::DemoArgs),
    /// One-host testbed: a network namespace per node, tc-shaped links (root).
    #[command(subcommand)]
    Testbed(testbed::TestbedCmd),
    /// Geometric Partitioning: the partitioner and the trace workloads' figures.
    #[command(subcommand)]
    Geo(geo_cmd::GeoCmd),
    /// Run a storage node.
    Node(service_cmd::NodeArgs),
    /// Run the coordinator.
    Coordinator(service_cmd::CoordArgs),
    /// Serve the S3 API for a cluster (SigV4 with the keys of a credentials file).
    S3(s3_cmd::S3Args),
    /// Buckets of the S3 gateway, each with the code and layout its objects are stored in.
    #[command(subcommand)]
    Bucket(s3_cmd::BucketCmd),
    /// S3 access keys kept in the cluster, each with read, write or owner permission per
    /// bucket (the credentials file's keys may do everything).
    #[command(subcommand)]
    Key(key_cmd::KeyCmd),
    /// A whole store on this machine: a coordinator, N nodes and the S3 gateway, kept in
    /// one data directory across restarts (credentials printed at start).
    Serve(s3_cmd::ServeArgs),
    /// Write a new random cluster secret to FILE (readable by its owner only).
    Secret {
        /// Where to write it; an existing file is not overwritten.
        file: std::path::PathBuf,
    },
    /// Check a coordinator's or a node's TOML configuration.
    #[command(subcommand)]
    Config(config_cmd::ConfigCmd),
    /// Store a file as an object.
    Put {
        #[command(flatten)]
        target: cluster_cmd::Target,
        #[command(flatten)]
        args: cluster_cmd::PutArgs,
    },
    /// Read an object (degraded reads for unavailable chunks).
    Get {
        #[command(flatten)]
        target: cluster_cmd::Target,
        #[command(flatten)]
        args: cluster_cmd::GetArgs,
    },
    /// List objects in name order, a page of 1000 at a time.
    Ls {
        /// Only names starting with this.
        #[arg(default_value = "")]
        prefix: String,
        /// Roll names up at this delimiter past the prefix into common prefixes (as S3's
        /// ListObjectsV2 with `delimiter=/` shows folders).
        #[arg(long, default_value = "")]
        delimiter: String,
        #[command(flatten)]
        target: cluster_cmd::Target,
    },
    /// Show where an object's chunks are.
    Stat {
        #[command(flatten)]
        target: cluster_cmd::Target,
        name: String,
    },
    /// Delete an object (idempotent); a put of an existing name replaces it.
    Delete {
        #[command(flatten)]
        target: cluster_cmd::Target,
        name: String,
    },
    /// Stop a node and mark it failed.
    Fail {
        #[command(flatten)]
        target: cluster_cmd::Target,
        node: u32,
    },
    /// Full-node repair of every lost chunk.
    Repair {
        #[command(flatten)]
        target: cluster_cmd::Target,
        #[command(flatten)]
        args: cluster_cmd::RepairArgs,
    },
    /// Foreground workload (YCSB-style; workload A by default) against a running cluster:
    /// throughput and latency percentiles overall and per second.
    Load(load::LoadArgs),
    /// Seal every open Geo stripe now (compute its parity and drop the staging copies),
    /// full or not; the coordinator also seals by itself (full stripes, and any open for
    /// seal_after_ms).
    Seal {
        #[command(flatten)]
        target: cluster_cmd::Target,
    },
    /// Compact Geo stripes now: stripes whose live share is below the coordinator's
    /// compact_below have their live chunks rewritten into new stripes and are released
    /// (the coordinator also does this every compact_interval_ms). Waits until done.
    Compact {
        #[command(flatten)]
        target: cluster_cmd::Target,
    },
    /// Move chunks from the fullest nodes to the emptiest until every node's fill is within
    /// the coordinator's rebalance_spread of the mean (throttled to rebalance_bytes_per_s);
    /// the coordinator also does this when a node joins. Waits until done.
    Rebalance {
        #[command(flatten)]
        target: cluster_cmd::Target,
    },
    /// Nodes, objects, lost chunks.
    Status {
        #[command(flatten)]
        target: cluster_cmd::Target,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if matches!(cli.cmd, Cmd::Codec(_) | Cmd::Sim(_) | Cmd::Geo(_) | Cmd::Ls { .. } | Cmd::Stat { .. } | Cmd::Status { .. }) {
        // Like other Unix tools, stop quietly when whoever reads our output goes away
        // (`kintsugi status | head -1`). Everything that holds connections (services, the
        // embedded clusters of demo and bench, clients moving data) keeps Rust's default:
        // a write to a closed socket fails instead of killing the process.
        // SAFETY: restoring a signal's default disposition at start-up, before any thread.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let filter =
        || tracing_subscriber::EnvFilter::try_from_env("KINTSUGI_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = match cli.log_format {
        LogFormat::Json => tracing_subscriber::fmt().json().with_env_filter(filter()).with_writer(std::io::stderr).try_init(),
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter())
            .with_writer(std::io::stderr)
            // Colour codes only for a person at a terminal, not in log files.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
    let secret_file =
        cli.secret_file.clone().or_else(|| std::env::var_os("KINTSUGI_SECRET_FILE").filter(|v| !v.is_empty()).map(Into::into));
    if let Some(path) = &secret_file {
        match kintsugi_proto::auth::Secret::from_file(path) {
            Ok(s) => kintsugi_proto::auth::set_secret(Some(s)),
            Err(e) => {
                eprintln!("error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let protection = cli.protection.clone().or_else(|| std::env::var("KINTSUGI_PROTECTION").ok().filter(|v| !v.is_empty()));
    if let Some(p) = protection {
        match p.parse() {
            Ok(p) => {
                kintsugi_proto::auth::set_protection(p);
                PROTECTION_GIVEN.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("error: --protection: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let result = match cli.cmd {
        Cmd::Codec(c) => codec::run(c),
        Cmd::Bench(b) => bench::run(b),
        Cmd::Sim(s) => sim_cmd::run(s),
        Cmd::Demo(a) => demo::run(a),
        Cmd::Testbed(t) => testbed::run(t),
        Cmd::Geo(g) => geo_cmd::run(g),
        Cmd::Node(a) => service_cmd::node(a),
        Cmd::Coordinator(a) => service_cmd::coordinator(a),
        Cmd::S3(a) => s3_cmd::s3(a),
        Cmd::Bucket(c) => s3_cmd::bucket(c),
        Cmd::Key(c) => key_cmd::key(c),
        Cmd::Serve(a) => s3_cmd::serve(a),
        Cmd::Config(c) => config_cmd::run(c),
        Cmd::Secret { file } => write_secret(&file),
        Cmd::Put { target, args } => cluster_cmd::put(&target, args),
        Cmd::Get { target, args } => cluster_cmd::get(&target, args),
        Cmd::Ls { prefix, delimiter, target } => cluster_cmd::ls(&target, &prefix, &delimiter),
        Cmd::Stat { target, name } => cluster_cmd::stat(&target, &name),
        Cmd::Delete { target, name } => cluster_cmd::delete(&target, &name),
        Cmd::Fail { target, node } => cluster_cmd::fail(&target, node),
        Cmd::Repair { target, args } => cluster_cmd::repair(&target, args),
        Cmd::Status { target } => cluster_cmd::status(&target),
        Cmd::Seal { target } => cluster_cmd::seal(&target),
        Cmd::Compact { target } => cluster_cmd::compact(&target),
        Cmd::Rebalance { target } => cluster_cmd::rebalance(&target),
        Cmd::Load(a) => load::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Set when `--protection` or KINTSUGI_PROTECTION chose the protection: a TOML's
/// `protection` does not override it.
pub(crate) static PROTECTION_GIVEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `kintsugi secret FILE`: 32 random bytes, hex, in a new file of mode 0600.
fn write_secret(file: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", file.display()))?;
    let s = kintsugi_proto::auth::Secret::random();
    f.write_all(s.expose())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    eprintln!("wrote a new cluster secret to {}: give it to every node, coordinator and client (--secret-file)", file.display());
    Ok(())
}
