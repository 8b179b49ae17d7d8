//! `kintsugi bench s3`: the S3 gateway against the client library on the same embedded
//! cluster, in the same run. The gateway runs as its own process (`kintsugi s3`), so its
//! memory is its own: large objects PUT and GET both ways (throughput ratio, median and
//! spread over runs), small objects' PUT, GET and LIST with many clients (operations per
//! second, p50 and p99), and optionally several clients moving huge objects at once while
//! the gateway's peak RSS is watched. Every byte read back is checked (CRC-32C, both ways).

use crate::bench_meta::{cpu_name, cpu_of, rss_of};
use crate::embedded::Embedded;
use crate::s3_http::S3Http;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use kintsugi_client::client::ObjectSink;
use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::Shape;
use serde::Serialize;
use std::ffi::OsStr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct S3BenchArgs {
    /// Nodes of the embedded cluster.
    #[arg(long, default_value_t = 6)]
    pub nodes: usize,
    #[arg(long, default_value = "rs:4,2")]
    pub code: CodeSpec,
    /// Size of the large objects.
    #[arg(long, default_value = "256MiB", value_parser = crate::units::parse_nonzero_size)]
    pub size: usize,
    /// Repetitions of the large-object transfers; the median and the spread are reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Concurrent clients of the small-object operations.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Small-object operations of each kind (PUT, GET, LIST), each way.
    #[arg(long, default_value_t = 2000)]
    pub small_ops: usize,
    #[arg(long, default_value = "4KiB", value_parser = crate::units::parse_size)]
    pub small_size: usize,
    /// Clients that each PUT and then GET one --memory-size object through the gateway at
    /// once, the gateway's peak RSS watched (0: skip).
    #[arg(long, default_value_t = 0)]
    pub memory_clients: usize,
    #[arg(long, default_value = "1GiB", value_parser = crate::units::parse_nonzero_size)]
    pub memory_size: usize,
    /// Also PUT (new keys, then overwrites, which keep the version they replace) and GET
    /// small objects through the gateway into a bucket with versioning enabled, beside the
    /// same into the unversioned bucket, in the same run.
    #[arg(long)]
    pub versioned: bool,
    /// Also move the large objects through a second gateway that serves HTTPS (a
    /// self-signed certificate), in turn with the plain-HTTP one, for the cost of TLS.
    #[arg(long)]
    pub tls: bool,
    /// Also move the large objects through the HTTP gateway into a bucket that seals them by
    /// default (SSE-S3, a master key file made for the run), in turn with the unencrypted
    /// bucket, for the cost of encryption at rest.
    #[arg(long)]
    pub sse: bool,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Default)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
    runs: Vec<f64>,
}

fn spread(mut v: Vec<f64>) -> Spread {
    let runs = v.clone();
    v.sort_by(f64::total_cmp);
    Spread { median: v[v.len() / 2], min: v[0], max: v[v.len() - 1], runs }
}

#[derive(Serialize)]
struct SmallOps {
    op: String,
    path: String,
    ops: usize,
    ops_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

#[derive(Serialize)]
struct S3Report {
    nodes: usize,
    code: String,
    size: usize,
    /// MB/s (1e6 bytes) per run.
    lib_put_mb_s: Spread,
    s3_put_mb_s: Spread,
    lib_get_mb_s: Spread,
    s3_get_mb_s: Spread,
    /// MD5 alone on one core, MB/s: the hash every byte a PUT through S3 costs.
    md5_mb_s: f64,
    /// Gateway against library, per run: throughput ratio.
    put_ratio: Spread,
    get_ratio: Spread,
    /// With --tls: the HTTPS gateway's MB/s per run, and its ratio to the HTTP one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    https: Option<HttpsReport>,
    /// With --sse: the encrypted bucket's MB/s per run, and its ratio to the plain one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    sse: Option<SseReport>,
    small: Vec<SmallOps>,
    memory_clients: usize,
    memory_size: usize,
    memory_seconds: f64,
    gateway_peak_rss_bytes: u64,
    cpu: String,
}

#[derive(Serialize)]
struct HttpsReport {
    put_mb_s: Spread,
    get_mb_s: Spread,
    /// HTTPS against HTTP, per run.
    put_ratio: Spread,
    get_ratio: Spread,
    /// Each gateway's CPU seconds per GB (1e9 bytes) moved, median of the runs: what TLS
    /// costs the server, whatever the client beside it on this host takes.
    http_put_cpu_s_per_gb: f64,
    https_put_cpu_s_per_gb: f64,
    http_get_cpu_s_per_gb: f64,
    https_get_cpu_s_per_gb: f64,
}

#[derive(Serialize)]
struct SseReport {
    put_mb_s: Spread,
    get_mb_s: Spread,
    /// SSE-S3 against unencrypted, per run (both through the same HTTP gateway).
    put_ratio: Spread,
    get_ratio: Spread,
    /// The gateway's CPU seconds per GB (1e9 bytes) moved, median of the runs.
    plain_put_cpu_s_per_gb: f64,
    sealed_put_cpu_s_per_gb: f64,
    plain_get_cpu_s_per_gb: f64,
    sealed_get_cpu_s_per_gb: f64,
}

/// Which way a large object goes.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Library,
    Http,
    Https,
    /// Through the HTTP gateway into the bucket sealed by default.
    Sealed,
}

/// The bucket `--sse` puts into, sealed by default with SSE-S3.
const SEALED_BUCKET: &str = "bench-sse";

/// Starts `kintsugi s3` on `addr` for the cluster at `coord` with `extra` flags, and waits
/// until it listens.
async fn start_gateway(
    addr: &str,
    coord: &str,
    a: &S3BenchArgs,
    creds: &std::path::Path,
    secret: &std::path::Path,
    extra: &[&std::ffi::OsStr],
) -> Result<GatewayProc> {
    let child = Command::new(std::env::current_exe()?)
        .args(["s3", "--listen", addr, "--coordinator", coord, "--code", &a.code.to_string()])
        .arg("--credentials")
        .arg(creds)
        .args(extra)
        .env("KINTSUGI_SECRET_FILE", secret)
        .stdout(Stdio::null())
        .spawn()
        .context("starting the gateway")?;
    let gateway = GatewayProc(child);
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(gateway);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the gateway did not start listening on {addr}")
}

/// The gateway process, killed if dropped (a failed bench leaves none).
struct GatewayProc(Child);

impl Drop for GatewayProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Fast deterministic bytes (xorshift), the same for a seed.
fn fill(buf: &mut [u8], seed: &mut u64) {
    for c in buf.chunks_mut(8) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let b = seed.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

/// A sink that checks what it is given (CRC-32C) and keeps nothing.
#[derive(Default)]
struct Crc(u32, u64);

impl ObjectSink for Crc {
    fn write(&mut self, data: &[u8]) -> Result<(), kintsugi_client::Error> {
        self.0 = kintsugi_proto::crc::crc32c_append(self.0, data);
        self.1 += data.len() as u64;
        Ok(())
    }
    fn restart(&mut self) -> Result<(), kintsugi_client::Error> {
        *self = Crc::default();
        Ok(())
    }
}

fn expect(h: &crate::s3_http::Head, want: u16, what: &str) -> Result<()> {
    if h.status != want {
        bail!("{what}: HTTP {} (expected {want})", h.status);
    }
    Ok(())
}

/// PUTs `size` bytes from `source` (called per piece) as /bench/KEY.
async fn s3_put(s3: &mut S3Http, key: &str, size: u64, source: impl FnMut(&mut [u8])) -> Result<()> {
    s3_put_into(s3, "bench", key, size, source).await
}

async fn s3_put_into(s3: &mut S3Http, bucket: &str, key: &str, size: u64, mut source: impl FnMut(&mut [u8])) -> Result<()> {
    s3.send("PUT", &format!("/{bucket}/{key}"), &[], size, None).await?;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        source(&mut buf[..n]);
        s3.write_body(&buf[..n]).await?;
        left -= n as u64;
    }
    let h = s3.read_head().await?;
    let body = s3.body(h.len).await?;
    expect(&h, 200, &format!("PUT {key} ({})", String::from_utf8_lossy(&body)))
}

/// GETs /bench/KEY; returns its CRC-32C and length.
async fn s3_get(s3: &mut S3Http, key: &str) -> Result<(u32, u64)> {
    s3_get_from(s3, "bench", key).await
}

async fn s3_get_from(s3: &mut S3Http, bucket: &str, key: &str) -> Result<(u32, u64)> {
    let h = s3.send("GET", &format!("/{bucket}/{key}"), &[], 0, Some(&[])).await?;
    expect(&h, 200, &format!("GET {key}"))?;
    let mut crc = Crc::default();
    s3.read_body(h.len, |b| {
        let _ = crc.write(b);
    })
    .await?;
    Ok((crc.0, crc.1))
}

pub fn run(a: S3BenchArgs) -> Result<()> {
    if a.runs == 0 || a.clients == 0 {
        bail!("--runs and --clients are at least 1");
    }
    crate::cluster_cmd::runtime()?.block_on(run_async(a))
}

async fn run_async(a: S3BenchArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = Embedded::start_tuned(dir.path(), a.nodes, None, None, |c| {
        c.gc_grace_ms = 1000;
        c.gc_interval_ms = 200;
    })
    .await?;
    let coord = cluster.coord.as_ref().expect("running").addr.to_string();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, kintsugi_proto::auth::secret().expect("the embedded cluster's").expose())?;
    let key = kintsugi_s3::credentials::generate();
    let creds = dir.path().join("credentials.toml");
    kintsugi_s3::credentials::write(&creds, &key).map_err(|e| anyhow!(e))?;
    let free = || -> Result<String> { Ok(format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())) };
    let addr = free()?;
    let key_file = dir.path().join("sse.key");
    if a.sse {
        kintsugi_s3::sse::MasterKeys::create(&key_file, "bench")?;
    }
    let sse_flags = [OsStr::new("--sse-key-file"), key_file.as_os_str()];
    let gateway = start_gateway(&addr, &coord, &a, &creds, &secret, if a.sse { &sse_flags } else { &[] }).await?;
    let pid = gateway.0.id();
    let mut s3 = S3Http::new(&addr, &key.access_key, &key.secret_key);
    // The HTTPS gateway, beside it on the same cluster.
    let mut https = None;
    if a.tls {
        let (files, _) = kintsugi_s3::tls::self_signed(&dir.path().join("tls"), &["127.0.0.1".to_string()])?;
        let tls_addr = free()?;
        let extra = [OsStr::new("--tls-cert"), files.cert.as_os_str(), OsStr::new("--tls-key"), files.key.as_os_str()];
        let proc = start_gateway(&tls_addr, &coord, &a, &creds, &secret, &extra).await?;
        https = Some((proc, S3Http::new(&tls_addr, &key.access_key, &key.secret_key).with_tls(&files.cert)?));
    }
    let h = s3.send("PUT", "/bench", &[], 0, Some(&[])).await?;
    let _ = s3.body(h.len).await?;
    expect(&h, 200, "creating the bucket")?;
    if a.versioned {
        let h = s3.send("PUT", "/bench-v", &[], 0, Some(&[])).await?;
        let _ = s3.body(h.len).await?;
        expect(&h, 200, "creating the versioned bucket")?;
        let xml = b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>";
        let h = s3.send("PUT", "/bench-v", &[("versioning", "")], xml.len() as u64, Some(xml)).await?;
        let _ = s3.body(h.len).await?;
        expect(&h, 200, "enabling versioning")?;
    }
    if a.sse {
        let h = s3.send("PUT", &format!("/{SEALED_BUCKET}"), &[], 0, Some(&[])).await?;
        let _ = s3.body(h.len).await?;
        expect(&h, 200, "creating the sealed bucket")?;
        let xml = b"<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>";
        let h = s3.send("PUT", &format!("/{SEALED_BUCKET}"), &[("encryption", "")], xml.len() as u64, Some(xml)).await?;
        let body = s3.body(h.len).await?;
        expect(&h, 200, &format!("sealing the bucket by default ({})", String::from_utf8_lossy(&body)))?;
    }
    let client = cluster.client.clone();

    // Large objects: the library and the gateway, alternately, each run.
    let size = a.size as u64;
    let mut data = vec![0u8; a.size];
    fill(&mut data, &mut 42);
    let want = kintsugi_proto::crc::crc32c(&data);
    let (mut lp, mut sp, mut lg, mut sg) = (vec![], vec![], vec![], vec![]);
    let (mut tp, mut tg, mut ep, mut eg) = (vec![], vec![], vec![], vec![]);
    // Gateway CPU seconds per GB: HTTP put, HTTPS put, HTTP get, HTTPS get, sealed put, sealed get.
    let mut cpu: [Vec<f64>; 6] = Default::default();
    let https_pid = https.as_ref().map(|(p, _)| p.0.id());
    let gb = size as f64 / 1e9;
    let mb = |secs: f64| size as f64 / secs / 1e6;
    // What the gateway's PUT adds to the library's: the MD5 S3 makes the ETag of, one core
    // hashing alone at this speed.
    let t = Instant::now();
    std::hint::black_box(md5::Digest::finalize(md5::Digest::chain_update(<md5::Md5 as md5::Digest>::new(), &data)));
    let md5_mb_s = mb(t.elapsed().as_secs_f64());
    for run in 0..a.runs {
        // Each run writes new names, so no collection of a replaced version runs under a
        // measured transfer; the library goes first in even runs and second in odd ones, so
        // neither always follows the other's writeback.
        let (lib_key, s3_key, tls_key) = (format!("lib/big{run}"), format!("big{run}"), format!("tls/big{run}"));
        let mut ways = vec![Way::Library, Way::Http];
        if https.is_some() {
            ways.push(Way::Https);
        }
        if a.sse {
            ways.push(Way::Sealed);
        }
        let turn = run % ways.len();
        ways.rotate_left(turn);
        for &way in &ways {
            let t = Instant::now();
            let cpu0 = (cpu_of(pid), https_pid.map_or(0.0, cpu_of));
            let mut at = 0usize;
            let source = |b: &mut [u8]| {
                b.copy_from_slice(&data[at..at + b.len()]);
                at += b.len();
            };
            match (way, &mut https) {
                (Way::Library, _) => {
                    let mut r: &[u8] = &data;
                    client.put_from(&lib_key, &mut r, size, a.code, 0, &|_| {}).await.map_err(|e| anyhow!(e))?;
                    lp.push(mb(t.elapsed().as_secs_f64()));
                }
                (Way::Http, _) => {
                    s3_put(&mut s3, &s3_key, size, source).await?;
                    sp.push(mb(t.elapsed().as_secs_f64()));
                    cpu[0].push((cpu_of(pid) - cpu0.0) / gb);
                }
                (Way::Https, Some((_, tls))) => {
                    s3_put(tls, &tls_key, size, source).await?;
                    tp.push(mb(t.elapsed().as_secs_f64()));
                    cpu[1].push((https_pid.map_or(0.0, cpu_of) - cpu0.1) / gb);
                }
                (Way::Sealed, _) => {
                    s3_put_into(&mut s3, SEALED_BUCKET, &s3_key, size, source).await?;
                    ep.push(mb(t.elapsed().as_secs_f64()));
                    cpu[4].push((cpu_of(pid) - cpu0.0) / gb);
                }
                (Way::Https, None) => unreachable!("HTTPS runs only with its gateway"),
            }
        }
        for &way in &ways {
            let t = Instant::now();
            let cpu0 = (cpu_of(pid), https_pid.map_or(0.0, cpu_of));
            let (got, what) = match (way, &mut https) {
                (Way::Library, _) => {
                    let mut crc = Crc::default();
                    client.get_into(&lib_key, &mut crc, Shape::Ecpipe, 32 << 10, &|_| {}).await.map_err(|e| anyhow!(e))?;
                    lg.push(mb(t.elapsed().as_secs_f64()));
                    ((crc.0, crc.1), "library")
                }
                (Way::Http, _) => {
                    let got = s3_get(&mut s3, &s3_key).await?;
                    sg.push(mb(t.elapsed().as_secs_f64()));
                    cpu[2].push((cpu_of(pid) - cpu0.0) / gb);
                    (got, "gateway")
                }
                (Way::Https, Some((_, tls))) => {
                    let got = s3_get(tls, &tls_key).await?;
                    tg.push(mb(t.elapsed().as_secs_f64()));
                    cpu[3].push((https_pid.map_or(0.0, cpu_of) - cpu0.1) / gb);
                    (got, "HTTPS gateway")
                }
                (Way::Sealed, _) => {
                    let got = s3_get_from(&mut s3, SEALED_BUCKET, &s3_key).await?;
                    eg.push(mb(t.elapsed().as_secs_f64()));
                    cpu[5].push((cpu_of(pid) - cpu0.0) / gb);
                    (got, "sealed bucket")
                }
                (Way::Https, None) => unreachable!("HTTPS runs only with its gateway"),
            };
            if got != (want, size) {
                bail!("the {what} read back other bytes");
            }
        }
        if !a.json {
            eprintln!(
                "run {}: put {:.0} / {:.0} MB/s, get {:.0} / {:.0} MB/s (library / gateway){}",
                run + 1,
                lp[run],
                sp[run],
                lg[run],
                sg[run],
                if https.is_some() { format!("; HTTPS put {:.0}, get {:.0} MB/s", tp[run], tg[run]) } else { String::new() }
                    + &if a.sse { format!("; SSE-S3 put {:.0}, get {:.0} MB/s", ep[run], eg[run]) } else { String::new() }
            );
        }
        // Both objects go, and their chunks are collected and written back before the next
        // run: every run starts from the same state.
        client.delete(&lib_key).await.map_err(|e| anyhow!(e))?;
        for k in [&s3_key, &tls_key] {
            let h = s3.send("DELETE", &format!("/bench/{k}"), &[], 0, Some(&[])).await?;
            let _ = s3.body(h.len).await?;
            expect(&h, 204, &format!("DELETE {k}"))?;
        }
        if a.sse {
            let h = s3.send("DELETE", &format!("/{SEALED_BUCKET}/{s3_key}"), &[], 0, Some(&[])).await?;
            let _ = s3.body(h.len).await?;
            expect(&h, 204, &format!("DELETE {SEALED_BUCKET}/{s3_key}"))?;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
    }
    drop(data);
    let put_ratio: Vec<f64> = sp.iter().zip(&lp).map(|(s, l)| s / l).collect();
    let get_ratio: Vec<f64> = sg.iter().zip(&lg).map(|(s, l)| s / l).collect();
    let https_report = https.take().map(|_| HttpsReport {
        put_ratio: spread(tp.iter().zip(&sp).map(|(t, s)| t / s).collect()),
        get_ratio: spread(tg.iter().zip(&sg).map(|(t, s)| t / s).collect()),
        put_mb_s: spread(tp),
        get_mb_s: spread(tg),
        http_put_cpu_s_per_gb: spread(cpu[0].clone()).median,
        https_put_cpu_s_per_gb: spread(cpu[1].clone()).median,
        http_get_cpu_s_per_gb: spread(cpu[2].clone()).median,
        https_get_cpu_s_per_gb: spread(cpu[3].clone()).median,
    });
    let sse_report = a.sse.then(|| SseReport {
        put_ratio: spread(ep.iter().zip(&sp).map(|(e, s)| e / s).collect()),
        get_ratio: spread(eg.iter().zip(&sg).map(|(e, s)| e / s).collect()),
        put_mb_s: spread(ep),
        get_mb_s: spread(eg),
        plain_put_cpu_s_per_gb: spread(cpu[0].clone()).median,
        sealed_put_cpu_s_per_gb: spread(cpu[4].clone()).median,
        plain_get_cpu_s_per_gb: spread(cpu[2].clone()).median,
        sealed_get_cpu_s_per_gb: spread(cpu[5].clone()).median,
    });

    // Small objects, many clients: the gateway, then the library.
    let mut small = Vec::new();
    for op in ["PUT", "GET", "LIST"] {
        small.push(small_phase(op, Some("bench"), "small", &a, &addr, &key, &client).await?);
        small.push(small_phase(op, None, "small", &a, &addr, &key, &client).await?);
    }
    if a.versioned {
        // Each bucket in turn, on keys of their own (`v` names): new keys, overwrites (which
        // keep a version in the versioned bucket), reads of the latest; who goes first
        // alternates.
        for (i, op) in ["PUT", "REPUT", "GET"].into_iter().enumerate() {
            let buckets = if i % 2 == 0 { ["bench-v", "bench"] } else { ["bench", "bench-v"] };
            for b in buckets {
                small.push(small_phase(op, Some(b), "vsmall", &a, &addr, &key, &client).await?);
            }
        }
    }

    // Huge objects from several clients at once, each generated and checked on the fly.
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..a.memory_clients {
        let (addr, key, size) = (addr.clone(), key.clone(), a.memory_size as u64);
        set.spawn(async move {
            let mut s3 = S3Http::new(&addr, &key.access_key, &key.secret_key);
            let (mut seed, mut crc) = (1000 + c as u64, 0u32);
            s3_put(&mut s3, &format!("huge/{c}"), size, |b| {
                fill(b, &mut seed);
                crc = kintsugi_proto::crc::crc32c_append(crc, b);
            })
            .await?;
            if s3_get(&mut s3, &format!("huge/{c}")).await? != (crc, size) {
                bail!("client {c} read back other bytes");
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let memory_seconds = t.elapsed().as_secs_f64();
    let report = S3Report {
        nodes: a.nodes,
        code: a.code.to_string(),
        size: a.size,
        lib_put_mb_s: spread(lp),
        s3_put_mb_s: spread(sp),
        lib_get_mb_s: spread(lg),
        s3_get_mb_s: spread(sg),
        md5_mb_s,
        put_ratio: spread(put_ratio),
        get_ratio: spread(get_ratio),
        https: https_report,
        sse: sse_report,
        small,
        memory_clients: a.memory_clients,
        memory_size: a.memory_size,
        memory_seconds,
        gateway_peak_rss_bytes: rss_of(pid).1,
        cpu: cpu_name(),
    };
    drop(gateway);
    cluster.stop().await;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mib = (a.size as f64) / (1 << 20) as f64;
    println!("{} nodes, {}, {mib:.0} MiB objects, {} runs, CPU {}", report.nodes, report.code, a.runs, report.cpu);
    println!("{:<6} {:>14} {:>14} {:>22}", "", "library MB/s", "gateway MB/s", "gateway/library (min-max)");
    for (what, l, s, r) in [
        ("PUT", &report.lib_put_mb_s, &report.s3_put_mb_s, &report.put_ratio),
        ("GET", &report.lib_get_mb_s, &report.s3_get_mb_s, &report.get_ratio),
    ] {
        println!("{what:<6} {:>14.0} {:>14.0} {:>10.2} ({:.2}-{:.2})", l.median, s.median, r.median, r.min, r.max);
    }
    if let Some(h) = &report.https {
        println!("{:<6} {:>14} {:>14} {:>22}", "", "", "HTTPS MB/s", "HTTPS/HTTP (min-max)");
        for (what, t, r) in [("PUT", &h.put_mb_s, &h.put_ratio), ("GET", &h.get_mb_s, &h.get_ratio)] {
            println!("{what:<6} {:>14} {:>14.0} {:>10.2} ({:.2}-{:.2})", "", t.median, r.median, r.min, r.max);
        }
        println!(
            "gateway CPU s per GB: PUT {:.2} HTTP, {:.2} HTTPS; GET {:.2} HTTP, {:.2} HTTPS",
            h.http_put_cpu_s_per_gb, h.https_put_cpu_s_per_gb, h.http_get_cpu_s_per_gb, h.https_get_cpu_s_per_gb
        );
    }
    if let Some(e) = &report.sse {
        println!("{:<6} {:>14} {:>14} {:>22}", "", "", "SSE-S3 MB/s", "SSE-S3/plain (min-max)");
        for (what, t, r) in [("PUT", &e.put_mb_s, &e.put_ratio), ("GET", &e.get_mb_s, &e.get_ratio)] {
            println!("{what:<6} {:>14} {:>14.0} {:>10.2} ({:.2}-{:.2})", "", t.median, r.median, r.min, r.max);
        }
        println!(
            "gateway CPU s per GB: PUT {:.2} plain, {:.2} SSE-S3; GET {:.2} plain, {:.2} SSE-S3",
            e.plain_put_cpu_s_per_gb, e.sealed_put_cpu_s_per_gb, e.plain_get_cpu_s_per_gb, e.sealed_get_cpu_s_per_gb
        );
    }
    println!("MD5 alone (every byte of a PUT through S3 is hashed for its ETag): {:.0} MB/s on one core", report.md5_mb_s);
    println!("\n{} B objects, {} clients", a.small_size, a.clients);
    println!("{:<6} {:<8} {:>8} {:>10} {:>9} {:>9}", "op", "path", "ops", "ops/s", "p50 ms", "p99 ms");
    for s in &report.small {
        println!("{:<6} {:<8} {:>8} {:>10.0} {:>9.2} {:>9.2}", s.op, s.path, s.ops, s.ops_per_s, s.p50_ms, s.p99_ms);
    }
    if a.memory_clients > 0 {
        println!(
            "\n{} clients each PUT and GET {:.0} MiB at once: {:.1} s",
            a.memory_clients,
            a.memory_size as f64 / (1 << 20) as f64,
            memory_seconds
        );
    }
    println!("gateway peak RSS: {:.0} MiB", report.gateway_peak_rss_bytes as f64 / (1 << 20) as f64);
    Ok(())
}

/// `op` on small objects by `a.clients` clients at once, through the gateway (`s3`) or
/// the library.
async fn small_phase(
    op: &'static str,
    bucket: Option<&'static str>,
    names: &'static str,
    a: &S3BenchArgs,
    addr: &str,
    key: &kintsugi_s3::credentials::Key,
    client: &Client,
) -> Result<SmallOps> {
    let s3 = bucket.is_some();
    let bucket = bucket.unwrap_or("bench");
    let per = a.small_ops.div_ceil(a.clients);
    let mut set = tokio::task::JoinSet::new();
    let started = Instant::now();
    for c in 0..a.clients {
        let (addr, key, client, size, code) = (addr.to_string(), key.clone(), client.clone(), a.small_size, a.code);
        set.spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
            let mut conn = S3Http::new(&addr, &key.access_key, &key.secret_key);
            let mut body = vec![0u8; size];
            for i in 0..per {
                let name = format!("{names}/{c:02}/{i:06}");
                let t = Instant::now();
                match (op, s3) {
                    ("PUT" | "REPUT", true) => {
                        fill(&mut body, &mut ((c * per + i) as u64 + 1 + (op == "REPUT") as u64 * 7_777_777));
                        let h = conn.send("PUT", &format!("/{bucket}/{name}"), &[], size as u64, Some(&body)).await?;
                        let _ = conn.body(h.len).await?;
                        expect(&h, 200, "PUT")?;
                    }
                    ("GET", true) => {
                        let (_, n) = s3_get_from(&mut conn, bucket, &name).await?;
                        if n != size as u64 {
                            bail!("GET {name}: {n} bytes");
                        }
                    }
                    ("LIST", true) => {
                        let prefix = format!("{names}/{c:02}/");
                        let q = [("list-type", "2"), ("prefix", prefix.as_str()), ("max-keys", "100")];
                        let h = conn.send("GET", "/bench", &q, 0, Some(&[])).await?;
                        let _ = conn.body(h.len).await?;
                        expect(&h, 200, "LIST")?;
                    }
                    ("PUT", false) => {
                        fill(&mut body, &mut ((c * per + i) as u64 + 1));
                        client.put(&format!("lib/{name}"), &body, code, 0).await.map_err(|e| anyhow!(e))?;
                    }
                    ("GET", false) => {
                        let (got, _) = client.get(&format!("lib/{name}"), Shape::Ecpipe, 32 << 10).await.map_err(|e| anyhow!(e))?;
                        // The bytes the library PUT phase wrote under this name.
                        fill(&mut body, &mut ((c * per + i) as u64 + 1));
                        if got != body {
                            bail!("get {name}: {} bytes, not the {size} put", got.len());
                        }
                    }
                    _ => {
                        client.list_page(&format!("lib/{names}/{c:02}/"), "", "", 100).await.map_err(|e| anyhow!(e))?;
                    }
                }
                h.record(t.elapsed().as_micros().max(1) as u64).expect("in bounds");
            }
            Ok::<_, anyhow::Error>(h)
        });
    }
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    while let Some(r) = set.join_next().await {
        all.add(r??).expect("same bounds");
    }
    let secs = started.elapsed().as_secs_f64();
    let ops = all.len() as usize;
    Ok(SmallOps {
        op: op.into(),
        path: match (s3, bucket) {
            (false, _) => "library",
            (true, "bench") => "gateway",
            (true, _) => "versioned",
        }
        .into(),
        ops,
        ops_per_s: ops as f64 / secs,
        p50_ms: all.value_at_quantile(0.5) as f64 / 1e3,
        p99_ms: all.value_at_quantile(0.99) as f64 / 1e3,
    })
}
