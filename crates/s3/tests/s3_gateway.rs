//! The S3 gateway with real clients: boto3 and the aws cli (`s3_clients.py`) against a
//! loopback cluster and gateway in this process. Where Python's boto3 or the aws cli is not
//! installed the tests say so and skip, except under CI, where `.ci/run` installs them.

use kintsugi_client::Client;
use kintsugi_coord::{CoordConfig, CoordHandle};
use kintsugi_node::{NodeConfig, NodeHandle};
use kintsugi_plan::Shape;
use kintsugi_s3::credentials::{generate, Key};
use kintsugi_s3::lifecycle_worker::LifecyclePace;
use kintsugi_s3::settings::BucketSettings;
use kintsugi_s3::{S3Config, S3Handle};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The slow-client test compares latencies with and without its load, so no other test of
/// this binary runs beside it: it holds this lock to write, every other test to read.
static QUIET: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

struct Store {
    coord: CoordHandle,
    nodes: Vec<Option<NodeHandle>>,
    s3: S3Handle,
    key: Key,
    client: Client,
}

fn gateway_config(coordinator: &str, key: &Key, code: &str, min_part: u64, lifecycle: LifecyclePace) -> S3Config {
    S3Config {
        listen: "127.0.0.1:0".into(),
        coordinator: coordinator.into(),
        keys: vec![key.clone()],
        defaults: BucketSettings { code: code.parse().unwrap(), layout: Default::default(), chunk_size: 0, versioning: Default::default() },
        method: Shape::Ppr,
        slice: 32 << 10,
        min_part,
        memory_budget: kintsugi_s3::memory_budget::DEFAULT_BUDGET,
        metrics_listen: Some("127.0.0.1:0".into()),
        region: kintsugi_s3::DEFAULT_REGION.into(),
        domains: vec!["s3.localhost".into()],
        lifecycle,
        limits: Default::default(),
        tls: None,
        master_keys: None,
    }
}

impl Store {
    async fn start(dir: &Path, nodes: usize, code: &str, min_part: u64) -> Store {
        Store::start_paced(dir, nodes, code, min_part, Default::default()).await
    }

    /// A store whose gateway applies lifecycle rules at `lifecycle`'s pace, and whose
    /// coordinator stripes even the smallest object, so that every expired version's bytes
    /// are chunk files seen collected.
    async fn start_paced(dir: &Path, nodes: usize, code: &str, min_part: u64, lifecycle: LifecyclePace) -> Store {
        Store::start_tuned(dir, nodes, code, min_part, &|c| c.lifecycle = lifecycle, Some(false)).await
    }

    /// A store whose gateway's configuration `tune` changes.
    async fn start_with(dir: &Path, nodes: usize, code: &str, min_part: u64, tune: &dyn Fn(&mut S3Config)) -> Store {
        Store::start_tuned(dir, nodes, code, min_part, tune, None).await
    }

    /// ... and whose coordinator keeps small objects inline as `inline_objects` says.
    async fn start_tuned(
        dir: &Path,
        nodes: usize,
        code: &str,
        min_part: u64,
        tune: &dyn Fn(&mut S3Config),
        inline_objects: Option<bool>,
    ) -> Store {
        if kintsugi_proto::auth::secret().is_none() {
            kintsugi_proto::auth::set_secret(Some(kintsugi_proto::auth::Secret::random()));
        }
        let coord = kintsugi_coord::start(CoordConfig {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.join("coord"),
            dead_after_ms: 1000,
            chunk_size: 1 << 20,
            gc_grace_ms: 0,
            gc_interval_ms: 300,
            inline_objects,
            ..Default::default()
        })
        .await
        .unwrap();
        let addr = coord.addr.to_string();
        let mut handles = Vec::new();
        for i in 0..nodes {
            let cfg = NodeConfig {
                id: i as u32,
                data_dir: dir.join(format!("node{i}")),
                coordinator: Some(addr.clone()),
                heartbeat_ms: 100,
                ..Default::default()
            };
            handles.push(Some(kintsugi_node::start(cfg).await.unwrap()));
        }
        let client = Client::new(&addr);
        for _ in 0..100 {
            if client.status().await.map(|s| s.nodes.iter().filter(|n| n.alive).count()).unwrap_or(0) == nodes {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let key = generate();
        let mut cfg = gateway_config(&addr, &key, code, min_part, Default::default());
        tune(&mut cfg);
        let s3 = kintsugi_s3::start(cfg).await.unwrap();
        Store { coord, nodes: handles, s3, key, client }
    }

    /// Stops the gateway (its lifecycle worker too, wherever its pass is) and starts a new
    /// one on the same cluster and key.
    async fn restart_gateway(&mut self, code: &str, lifecycle: LifecyclePace) {
        let cfg = gateway_config(&self.coord.addr.to_string(), &self.key, code, 1, lifecycle);
        let old = std::mem::replace(&mut self.s3, kintsugi_s3::start(cfg).await.unwrap());
        old.stop().await;
    }

    /// Runs `s3_clients.py ARGS` against the gateway; panics with its output if it fails.
    fn python(&self, args: &[&str], env: &[(&str, &str)]) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_clients.py");
        let mut cmd = Command::new("python3");
        cmd.arg(&script)
            .args(args)
            .env("S3_ENDPOINT", format!("http://{}", self.s3.addr))
            .env("AWS_ACCESS_KEY_ID", &self.key.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &self.key.secret_key)
            .env_remove("AWS_PROFILE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("python3 runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "s3_clients.py {args:?} failed:\n{text}");
        println!("{text}");
    }

    async fn stop(self) {
        self.s3.stop().await;
        self.coord.stop().await;
        for n in self.nodes.into_iter().flatten() {
            n.stop().await;
        }
    }
}

/// Whether boto3, the aws cli, rclone and s3cmd are here; under CI they must be.
fn clients_installed() -> bool {
    let runs = |cmd: &str, args: &[&str]| Command::new(cmd).args(args).output().is_ok_and(|o| o.status.success());
    let missing: Vec<&str> = [
        ("boto3", runs("python3", &["-c", "import boto3"])),
        ("the aws cli", runs("aws", &["--version"])),
        ("rclone", runs("rclone", &["version"])),
        ("s3cmd", runs("s3cmd", &["--version"])),
    ]
    .into_iter()
    .filter(|(_, here)| !here)
    .map(|(name, _)| name)
    .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI must have {missing:?} (.ci/run installs them)");
    eprintln!("skipped: {missing:?} not installed (pip install boto3 awscli s3cmd; apt-get install rclone)");
    false
}

/// Chunk files in the nodes' directories.
fn chunk_files(dir: &Path) -> usize {
    let mut n = 0;
    for d in std::fs::read_dir(dir).unwrap().flatten().filter(|d| d.file_name().to_string_lossy().starts_with("node")) {
        n += std::fs::read_dir(d.path()).unwrap().flatten().filter(|f| f.file_name().to_string_lossy().ends_with(".chunk")).count();
    }
    n
}

/// Names under `prefix` in the cluster.
async fn names_under(c: &Client, prefix: &str) -> Vec<String> {
    c.list_prefix(prefix).await.unwrap().into_iter().map(|o| o.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn boto3_and_the_aws_cli_round_trip_list_multipart_and_get_s3_errors() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Store::start(dir.path(), 6, "rs:4,2", 8192).await;
    // The suite runs in a thread of its own: the cluster serves from this runtime meanwhile.
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["suite"], &[("S3_MIN_PART", "8192")]);
        s
    })
    .await
    .unwrap();
    // Completed, aborted and failed uploads leave no parts, no upload records, and no
    // object for the body cut short or the bad digest.
    assert_eq!(names_under(&s.client, kintsugi_s3::names::PARTS).await, Vec::<String>::new());
    assert_eq!(names_under(&s.client, kintsugi_s3::names::UPLOADS).await, Vec::<String>::new());
    assert!(s.client.stat("suite/cut").await.is_err() && s.client.stat("suite/digest").await.is_err());
    // The bytes of replaced, deleted and abandoned objects go too: once the collector has
    // run, the nodes hold exactly the chunks of the object versions that exist (the latest
    // of every name, and the versions a versioned bucket keeps).
    let mut referenced = 0;
    let mut marker = (String::new(), None);
    loop {
        let page = kintsugi_client::VersionsPage { key_marker: &marker.0, version_marker: marker.1, ..Default::default() };
        let l = s.client.list_versions(page).await.unwrap();
        for v in &l.versions {
            let layout = s.client.stat_version(&v.name, Some(v.id())).await.unwrap();
            referenced += layout.stripes.iter().map(|st| st.chunks.len()).sum::<usize>();
        }
        match l.next {
            Some((k, v)) => marker = (k, v),
            None => break,
        }
    }
    let mut on_disk = 0;
    for _ in 0..100 {
        on_disk = chunk_files(dir.path());
        if on_disk == referenced {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(on_disk, referenced, "chunk files on the nodes against chunks of live objects");
    // The gateway counted what the suite did: PUTs and GETs that succeeded, the 403s of
    // wrong signatures, the 404s of missing keys; each with its latency.
    let m = s.s3.metrics_addr.expect("metrics served");
    let text = tokio::task::spawn_blocking(move || ureq::get(&format!("http://{m}/metrics")).call().unwrap().into_string().unwrap())
        .await
        .unwrap();
    let count = |labels: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(&format!("kintsugi_s3_requests_total{{{labels}}} ")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    for (labels, at_least) in [
        ("method=\"PUT\",code=\"200\"", 20.0),
        ("method=\"GET\",code=\"200\"", 20.0),
        ("method=\"GET\",code=\"403\"", 1.0),
        ("method=\"GET\",code=\"404\"", 1.0),
    ] {
        assert!(count(labels) >= at_least, "{labels}: {} (want {at_least} at least)\n{text}", count(labels));
    }
    assert!(text.contains("kintsugi_s3_request_duration_seconds_bucket{"), "{text}");
    // The Grafana dashboard in deploy/ charts what the gateway serves.
    let dashboard = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/kintsugi.json")).unwrap();
    let names: Vec<&str> =
        dashboard.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("kintsugi_s3_")).collect();
    assert!(!names.is_empty());
    for name in names {
        assert!(text.contains(&format!("\n{name}")), "the dashboard's {name} is not served");
    }
    // A bucket whose code is wider than the cluster: the request's fault (400, not retried),
    // never a 503 that clients would retry forever; and nothing is created.
    let wide =
        BucketSettings { code: "rs:6,3".parse().unwrap(), layout: Default::default(), chunk_size: 0, versioning: Default::default() };
    let g = kintsugi_s3::Gateway::new(s.client.clone(), wide, Shape::Cr, 32 << 10);
    let e = g.create_bucket_with("too-wide", wide).await.unwrap_err();
    assert_eq!(e.code(), &s3s::S3ErrorCode::InvalidRequest, "{e:?}");
    assert!(e.message().is_some_and(|m| m.contains("rs:6,3 needs 9 nodes; the cluster has 6")), "{e:?}");
    assert!(g.bucket("too-wide").await.is_err());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gets_through_s3_are_degraded_reads_with_one_node_down_in_rs_and_two_in_clay() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::start(dir.path(), 9, "rs:6,3", 5 << 20).await;
    let defaults =
        BucketSettings { code: "rs:6,3".parse().unwrap(), layout: Default::default(), chunk_size: 0, versioning: Default::default() };
    let g = kintsugi_s3::Gateway::new(s.client.clone(), defaults, Shape::Cr, 32 << 10);
    let rs = BucketSettings { code: "rs:6,3".parse().unwrap(), layout: Default::default(), chunk_size: 0, versioning: Default::default() };
    let clay =
        BucketSettings { code: "clay:6,3,8".parse().unwrap(), layout: Default::default(), chunk_size: 0, versioning: Default::default() };
    g.create_bucket_with("rs-bucket", rs).await.unwrap();
    g.create_bucket_with("clay-bucket", clay).await.unwrap();
    let s2 = tokio::task::spawn_blocking(move || {
        s.python(&["degraded-put", "rs-bucket"], &[]);
        s.python(&["degraded-put", "clay-bucket"], &[]);
        s
    })
    .await
    .unwrap();
    s = s2;
    s.nodes[2].take().unwrap().stop().await;
    let s2 = tokio::task::spawn_blocking(move || {
        s.python(&["degraded-check", "rs-bucket"], &[]);
        s
    })
    .await
    .unwrap();
    s = s2;
    // The gateway timed the chunks its GETs rebuilt.
    let m = s.s3.metrics_addr.expect("metrics served");
    let text = tokio::task::spawn_blocking(move || ureq::get(&format!("http://{m}/metrics")).call().unwrap().into_string().unwrap())
        .await
        .unwrap();
    let degraded = text
        .lines()
        .find_map(|l| l.strip_prefix("kintsugi_s3_degraded_read_duration_seconds_count "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(degraded.is_some_and(|n| n > 0.0), "no degraded reads counted:\n{text}");
    s.nodes[5].take().unwrap().stop().await;
    let mut s = tokio::task::spawn_blocking(move || {
        s.python(&["degraded-check", "clay-bucket"], &[]);
        s
    })
    .await
    .unwrap();
    // Four of nine down: nothing of rs:6,3 can be read, and the client is told so before
    // any byte, with a status it retries.
    s.nodes[0].take().unwrap().stop().await;
    s.nodes[1].take().unwrap().stop().await;
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["unreadable-check", "rs-bucket"], &[]);
        s
    })
    .await
    .unwrap();
    s.stop().await;
}

/// Runs `conformance.py` against `endpoint` with `--json`; its parsed report.
fn conformance(endpoint: &str, access: &str, secret: &str) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(["--endpoint", endpoint, "--access-key", access, "--secret-key", secret, "--json"])
        .env_remove("AWS_PROFILE")
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("conformance.py said no JSON ({e}):\n{text}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// The failed tests of a conformance report.
fn failed(report: &serde_json::Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| (r["test"].as_str().unwrap().to_string(), r["error"].as_str().unwrap_or_default().to_string()))
        .collect()
}

/// The conformance module (one test per operation and documented error, from the S3 API
/// reference) passes in full against the gateway, with S3's own 5 MiB part minimum.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_conformance_module_passes_against_the_gateway() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Store::start(dir.path(), 6, "rs:3,2", kintsugi_s3::multipart::MIN_PART).await;
    let endpoint = format!("http://{}", s.s3.addr);
    let (access, secret) = (s.key.access_key.clone(), s.key.secret_key.clone());
    let report = tokio::task::spawn_blocking(move || conformance(&endpoint, &access, &secret)).await.unwrap();
    println!("conformance: {} of {} passed against the gateway", report["passed"], report["total"]);
    assert_eq!(failed(&report), vec![], "every conformance test passes against the gateway");
    assert!(report["total"].as_u64().unwrap() >= 33);
    s.stop().await;
}

/// What moto (an independent S3 implementation, in its server mode) is known to do
/// otherwise than the S3 API reference says, each checked against the reference: a test
/// that fails against moto and is not here is a test to look at again.
const MOTO_DEPARTURES: &[(&str, &str)] = &[
    ("create_bucket_invalid_name", "moto creates a bucket named with capitals and '_'"),
    ("list_buckets_paged", "moto ignores MaxBuckets and the continuation token"),
    ("put_object_bad_content_md5", "moto does not check Content-MD5"),
    ("delete_object_and_objects", "moto names deleted keys in a Quiet DeleteObjects"),
    ("copy_object", "moto ignores x-amz-copy-source-if-match"),
    ("multipart_errors", "moto completes with a part's wrong ETag or parts out of order"),
    ("upload_part_copy_ranges", "moto answers 500 to UploadPartCopy of an unknown upload"),
    ("get_by_part_number", "moto does not answer PartsCount"),
    ("checksums_on_put_and_get", "moto does not answer a CRC32 sent in a header"),
    ("checksum_mismatch_is_bad_digest", "moto stores a body whose CRC32 does not match"),
    ("multipart_composite_checksum", "moto answers no multipart checksum"),
    ("multipart_full_object_crc", "moto answers no multipart checksum"),
    ("bad_signature_is_refused", "moto's server mode does not check signatures"),
    ("bucket_cors", "moto's server answers 403 to a path-style preflight whatever the bucket's rules"),
    ("list_multipart_uploads_paged", "moto's ListMultipartUploads ignores the delimiter"),
    ("versioning_delete_marker_answers", "moto's 404 for a deleted key does not name its marker; moto answers 404, not 405, to a GET of a marker does not say a marker deleted by id was one, and answers 404 to a malformed version id"),
    ("versioning_suspended_writes_the_null_version", "moto drops the versions with ids when a suspended bucket's put replaces the null one"),
    ("versioning_null_version_id_on_reads", "moto answers no x-amz-version-id for the null version of a versioned bucket"),
    ("bucket_lifecycle_configuration", "moto drops ObjectSizeGreaterThan from an And filter"),
    ("bucket_lifecycle_transitions_are_refused", "moto, like AWS, has storage classes to move objects to; kintsugi has one and refuses"),
];

/// The conformance module against moto's server mode, as a check of the tests themselves:
/// everything moto fails is a known departure of moto's from the reference.
#[test]
fn the_conformance_module_checked_against_moto() {
    let _shared = QUIET.blocking_read();
    let Some(moto) = ["moto_server"].into_iter().find(|m| Command::new(m).arg("--help").output().is_ok_and(|o| o.status.success())) else {
        assert!(std::env::var_os("CI").is_none(), "CI must have moto's server (.ci/run installs moto[server])");
        eprintln!("skipped: moto_server is not installed (pip install 'moto[server]')");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Command::new(moto)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "moto_server did not listen on {port}");
    let report = conformance(&format!("http://127.0.0.1:{port}"), "testing", "testing");
    let _ = server.kill();
    let _ = server.wait();
    println!("conformance: {} of {} passed against moto", report["passed"], report["total"]);
    let unexplained: Vec<_> = failed(&report).into_iter().filter(|(t, _)| !MOTO_DEPARTURES.iter().any(|(d, _)| d == t)).collect();
    assert_eq!(unexplained, vec![], "tests failing against moto for no known departure of moto's");
    assert!(report["passed"].as_u64().unwrap() >= 10, "moto passes the portable tests: {report}");
}

/// A GET whose body fails after its head (more than m nodes stop while it streams): the
/// connection is reset, so the client sees an error and never a clean end of a short body,
/// and the gateway counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_that_fails_after_its_head_resets_the_connection() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::start(dir.path(), 6, "rs:4,2", kintsugi_s3::multipart::MIN_PART).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_clients.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args(["cut-read", "cut"])
        .env("S3_ENDPOINT", format!("http://{}", s.s3.addr))
        .env("AWS_ACCESS_KEY_ID", &s.key.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &s.key.secret_key)
        .env_remove("AWS_PROFILE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let reading = tokio::task::spawn_blocking(move || {
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 || line.starts_with("READING") {
                return (line.starts_with("READING"), seen, out);
            }
            seen += &line;
        }
    });
    let (began, seen, mut out) = reading.await.unwrap();
    assert!(began, "the GET never began streaming:\n{seen}");
    // Three of six down on rs:4,2: what the gateway has not read yet cannot be read.
    for i in [0, 1, 2] {
        s.nodes[i].take().unwrap().stop().await;
    }
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let status = tokio::task::spawn_blocking(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        (child.wait().unwrap(), rest)
    });
    let (status, rest) = status.await.unwrap();
    assert!(status.success(), "the body did not end in a reset:\n{seen}{rest}");
    let m = s.s3.metrics_addr.expect("metrics served");
    let text = tokio::task::spawn_blocking(move || ureq::get(&format!("http://{m}/metrics")).call().unwrap().into_string().unwrap())
        .await
        .unwrap();
    let cut = text.lines().find_map(|l| l.strip_prefix("kintsugi_s3_bodies_cut_total ")).and_then(|v| v.trim().parse::<f64>().ok());
    assert_eq!(cut, Some(1.0), "one body cut, counted:\n{text}");
    s.stop().await;
}

/// A PUT answered before its body was sent (botocore sends `Expect: 100-continue` and then
/// no body when the answer is final) ends its connection, so the bytes of the client's next
/// request are never read as that body. Before, a `PUT` after an early 412 arrived as `UT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_the_body_closes_the_connection() {
    let _shared = QUIET.read().await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let s = Store::start(dir.path(), 3, "rs:2,1", kintsugi_s3::multipart::MIN_PART).await;
    let mut c = tokio::net::TcpStream::connect(s.s3.addr).await.unwrap();
    // Unsigned: refused (403) before its body is read, as a failed If-Match is.
    let put = format!("PUT /some-bucket/k HTTP/1.1\r\nHost: {}\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", s.s3.addr);
    c.write_all(put.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut byte).await.unwrap(), 1, "the connection ended before an answer: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 403"), "{head}");
    assert!(head.contains("connection: close"), "the answer keeps the connection open:\n{head}");
    // The next request on it is not served as anything: the server closes once the answer
    // (its body included) is sent.
    let _ = c.write_all(format!("GET /some-bucket/k HTTP/1.1\r\nHost: {}\r\n\r\n", s.s3.addr).as_bytes()).await;
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), c.read_to_end(&mut rest)).await.expect("the connection closes");
    let rest = String::from_utf8_lossy(&rest);
    assert_eq!(rest.matches("HTTP/1.1").count(), 0, "a second answer on the connection:\n{rest}");
    s.stop().await;
}

/// Slowloris: 200 connections trickle a request's head a byte a second and 50 uploads
/// declare 4 GiB (each one's whole need half the budget), send 1,000 bytes and go idle,
/// holding a 64 KiB unit each; meanwhile a 6-byte PUT and a 10 MiB GET take at most twice
/// their time alone. The heads are closed at their deadline, the uploads by the idle limit
/// (answered RequestTimeout); a client that stops reading a GET is disconnected. (The
/// gateway's resident memory under the same clients is checked on its own process in
/// `kintsugi`'s ops_cli tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_uploads_and_slow_heads_are_cut_off_and_others_are_served() {
    let _alone = QUIET.write().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Store::start_with(dir.path(), 3, "rs:2,1", 1, &|c| {
        // A 4 GiB put of rs:2,1 needs 24 MiB, two of them the whole budget.
        c.memory_budget = 48 << 20;
        c.limits.idle_timeout = Duration::from_secs(8);
        c.limits.header_timeout = Duration::from_secs(3);
    })
    .await;
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["slow-clients", "slow-bucket"], &[]);
        s
    })
    .await
    .unwrap();
    s.stop().await;
}

/// A completion whose object was made but whose upload record outlived it (the gateway or
/// the coordinator stopped between the two) is retried: the retry answers as the first
/// attempt would have, and removes the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completion_retried_after_its_object_was_made_succeeds() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("upload.json");
    let st = state.to_str().unwrap().to_string();
    let s = Store::start(dir.path(), 3, "rs:2,1", 1 << 20).await;
    let (s, st) = tokio::task::spawn_blocking(move || {
        s.python(&["mpu-begin", "retried-bucket", &st], &[]);
        (s, st)
    })
    .await
    .unwrap();
    let upload: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let record = kintsugi_s3::names::upload_record("retried-bucket", upload["upload"].as_str().unwrap());
    let attrs = s.client.stat(&record).await.unwrap().attrs;
    let (s, st) = tokio::task::spawn_blocking(move || {
        s.python(&["mpu-complete", "retried-bucket", &st], &[]);
        (s, st)
    })
    .await
    .unwrap();
    assert!(s.client.stat(&record).await.is_err(), "a completion removes its upload record");
    // The record back, as a completion cut short after the object's commit leaves it.
    let mut empty: &[u8] = &[];
    let mut terms = Some(kintsugi_client::CommitTerms { attrs, ..Default::default() });
    s.client
        .put_with_attrs(&record, &mut empty, 0, "rs:2,1".parse().unwrap(), 0, Default::default(), &|_| {}, &mut || {
            Ok(terms.take().unwrap_or_default())
        })
        .await
        .unwrap();
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["mpu-complete", "retried-bucket", &st], &[]);
        s
    })
    .await
    .unwrap();
    assert!(s.client.stat(&record).await.is_err(), "the retry removes the record left behind");
    s.stop().await;
}

/// Object lock through boto3 (`s3_clients.py object-lock`), then the same versions through
/// the client library as the CLI deletes, and again through S3 after the coordinator
/// restarts: a locked version is kept on every path.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn object_lock_keeps_versions_on_every_delete_path_and_across_a_restart() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("lock.json");
    let env = [("LOCK_STATE".to_string(), state.to_str().unwrap().to_string())];
    let mut s = Store::start(dir.path(), 3, "rs:2,1", 1).await;
    let (s2, env) = tokio::task::spawn_blocking(move || {
        let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        s.python(&["object-lock", "locked"], &e);
        (s, env)
    })
    .await
    .unwrap();
    s = s2;
    let ids: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let vc: kintsugi_proto::VersionRef = ids["c"].as_str().unwrap().parse().unwrap();
    let name = kintsugi_s3::names::object("locked", "c");
    let e = s.client.delete_version(&name, vc).await.unwrap_err();
    assert_eq!(e.kind(), kintsugi_client::ErrorKind::Locked, "the library's delete by id: {e}");
    let e = s.client.delete_version_as(&name, vc, true).await.unwrap_err();
    assert_eq!(e.kind(), kintsugi_client::ErrorKind::Locked, "COMPLIANCE with a bypass: {e}");
    // `kintsugi rm` deletes a name's latest version: m's is locked.
    let e = s.client.delete(&kintsugi_s3::names::object("locked", "m")).await.unwrap_err();
    assert_eq!(e.kind(), kintsugi_client::ErrorKind::Locked, "the CLI's delete: {e}");

    // The coordinator restarts on its address; the lock is in its metadata.
    let addr = s.coord.addr;
    let cfg = CoordConfig {
        listen: addr.to_string(),
        data_dir: dir.path().join("coord"),
        dead_after_ms: 1000,
        chunk_size: 1 << 20,
        gc_grace_ms: 0,
        gc_interval_ms: 300,
        ..Default::default()
    };
    // (A stand-in holds the Store's place while the address is free; nothing talks to it.)
    let spare = CoordConfig { listen: "127.0.0.1:0".into(), data_dir: dir.path().join("spare"), ..Default::default() };
    let old = std::mem::replace(&mut s.coord, kintsugi_coord::start(spare).await.unwrap());
    old.stop().await;
    let spare = std::mem::replace(&mut s.coord, kintsugi_coord::start(cfg).await.unwrap());
    spare.stop().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while s.client.status().await.map(|st| st.nodes.iter().filter(|n| n.alive).count()).unwrap_or(0) < 3 {
        assert!(std::time::Instant::now() < deadline, "the nodes did not rejoin the restarted coordinator");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = tokio::task::spawn_blocking(move || {
        let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        s.python(&["object-lock-check", "locked"], &e);
        s
    })
    .await
    .unwrap();
    s.stop().await;
}

/// Files under the nodes' directories that hold `needle`, of those scanned.
fn files_holding(dir: &Path, needle: &[u8]) -> (usize, usize) {
    fn walk(d: &Path, needle: &[u8], counts: &mut (usize, usize)) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, needle, counts);
            } else if let Ok(bytes) = std::fs::read(&p) {
                counts.0 += 1;
                counts.1 += bytes.windows(needle.len()).any(|w| w == needle) as usize;
            }
        }
    }
    let mut counts = (0, 0);
    for d in std::fs::read_dir(dir).unwrap().flatten().filter(|d| d.file_name().to_string_lossy().starts_with("node")) {
        walk(&d.path(), needle, &mut counts);
    }
    counts
}

/// Every file under the nodes' directories with a hash of its bytes.
fn node_files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, u64> {
    use std::hash::{Hash, Hasher};
    let mut out = std::collections::BTreeMap::new();
    for d in std::fs::read_dir(dir).unwrap().flatten().filter(|d| d.file_name().to_string_lossy().starts_with("node")) {
        for f in std::fs::read_dir(d.path()).unwrap().flatten().filter(|f| f.file_name().to_string_lossy().ends_with(".chunk")) {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::fs::read(f.path()).unwrap().hash(&mut h);
            out.insert(f.path(), h.finish());
        }
    }
    out
}

/// Starts a new gateway on the store's cluster with these SSE-S3 master keys.
async fn regateway(s: &mut Store, keys: std::sync::Arc<kintsugi_s3::sse::MasterKeys>) {
    let mut cfg = gateway_config(&s.coord.addr.to_string(), &s.key, "rs:4,2", 1, Default::default());
    cfg.master_keys = Some(keys);
    let old = std::mem::replace(&mut s.s3, kintsugi_s3::start(cfg).await.unwrap());
    old.stop().await;
}

/// Objects sealed with SSE-S3, SSE-C and a bucket's default (put whole, in parts, copied
/// across encryptions): no file on any node holds the 32 bytes each object repeats every
/// 4 KiB (an unencrypted object's marker is found, so the scan can see one); they read back
/// byte-exact in odd ranges after the master key is rotated and every data key re-wrapped
/// (no chunk file changes; the old key is then not needed), after a chunk's byte is flipped (rebuilt from parity by a
/// repair), with two of eight nodes down, and after those nodes' chunks are rebuilt
/// elsewhere and two more go down. Keys: 400 without, 403 with a wrong one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_objects_leave_no_plaintext_on_disk_and_survive_corruption_failures_and_repair() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("sse.key");
    assert!(kintsugi_s3::sse::MasterKeys::create(&key_file, "test-1").unwrap());
    let keys = std::sync::Arc::new(kintsugi_s3::sse::MasterKeys::load(&key_file).unwrap());
    let s = Store::start_with(dir.path(), 8, "rs:4,2", 1, &move |c| c.master_keys = Some(keys.clone())).await;
    let python = |s: Store, args: &'static [&'static str]| async move {
        tokio::task::spawn_blocking(move || {
            s.python(args, &[]);
            s
        })
        .await
        .unwrap()
    };
    let s = python(s, &["sse-put"]).await;
    let (scanned, sealed) = files_holding(dir.path(), b"kintsugi: this must not be seen!");
    let (_, plain) = files_holding(dir.path(), b"kintsugi: stored as it was sent.");
    assert!(scanned > 50 && plain > 0, "the scan finds the unencrypted object's marker ({plain} of {scanned} files)");
    assert_eq!(sealed, 0, "{sealed} of {scanned} files on the nodes hold an encrypted object's plaintext");

    // A rotation: a new master key first, every SSE-S3 data key re-wrapped with it; then a
    // gateway with only the new key reads everything. No chunk is rewritten.
    let files = node_files(dir.path());
    kintsugi_s3::sse::MasterKeys::rotate(&key_file, "test-2").unwrap();
    let both = std::sync::Arc::new(kintsugi_s3::sse::MasterKeys::load(&key_file).unwrap());
    let mut s = s;
    regateway(&mut s, both.clone()).await;
    let r = kintsugi_s3::sse::rotation::rewrap(&s.client, &both, &|_| {}).await.unwrap();
    // SSE-S3 or default-sealed: s3, empty, d, mp (and its parts gone), upc, c-to-s3.
    assert!(r.rewrapped >= 6 && r.current == 0 && r.unopenable.is_empty(), "{r:?}");
    let again = kintsugi_s3::sse::rotation::rewrap(&s.client, &both, &|_| {}).await.unwrap();
    assert_eq!((again.rewrapped, again.current), (0, r.rewrapped), "a second pass finds every key current");
    let only_new: String = std::fs::read_to_string(&key_file).unwrap().lines().filter(|l| l.starts_with("test-2 ")).collect();
    let new_file = dir.path().join("new.key");
    std::fs::write(&new_file, format!("{only_new}\n")).unwrap();
    std::fs::set_permissions(&new_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    regateway(&mut s, std::sync::Arc::new(kintsugi_s3::sse::MasterKeys::load(&new_file).unwrap())).await;
    let s = python(s, &["sse-check"]).await;
    assert!(node_files(dir.path()) == files, "the rotation rewrote no chunk file");

    // One flipped byte in a chunk of an SSE-S3 object: read around, then rebuilt in place.
    let loc = s.client.stat(&kintsugi_s3::names::object("enc", "s3")).await.unwrap().stripes[0].chunks[1].clone();
    let path = dir.path().join(format!("node{}", loc.node)).join(format!("{}.chunk", loc.chunk));
    let mut raw = std::fs::read(&path).unwrap();
    let middle = raw.len() / 2;
    raw[middle] ^= 0x20;
    std::fs::write(&path, &raw).unwrap();
    let s = python(s, &["sse-check"]).await;
    assert!(s.client.status().await.unwrap().bad_chunks >= 1, "the flipped chunk was found bad");
    let r = s.client.repair(Shape::Ppr, 32 << 10, 4, kintsugi_plan::schedule::Scheduler::Repairboost).await.unwrap();
    assert!(r.repaired >= 1 && r.failed == 0, "{r:?}");
    assert_eq!(s.client.status().await.unwrap().bad_chunks, 0);

    // Two nodes down (m of rs:4,2): degraded reads; then their chunks rebuilt elsewhere and
    // two more down, so reads need the rebuilt chunks.
    let mut s = s;
    for i in [0, 1] {
        s.nodes[i].take().unwrap().stop().await;
    }
    let s = python(s, &["sse-check"]).await;
    for i in [0, 1] {
        s.client.fail(i as u32).await.unwrap();
    }
    let r = s.client.repair(Shape::Ppr, 32 << 10, 4, kintsugi_plan::schedule::Scheduler::Repairboost).await.unwrap();
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}");
    let mut s = s;
    for i in [2, 3] {
        s.nodes[i].take().unwrap().stop().await;
    }
    let s = python(s, &["sse-check"]).await;
    let (_, sealed) = files_holding(dir.path(), b"kintsugi: this must not be seen!");
    assert_eq!(sealed, 0, "rebuilt chunks hold only ciphertext");
    s.stop().await;
}

/// Keys made in the cluster (as `kintsugi key` makes them) with read, write or owner
/// permission per bucket: each is allowed exactly what its grants say, through boto3,
/// presigned URLs and copies; bucket policies open a public prefix to anonymous clients and
/// their Deny overrules a key's grant; canned ACLs open objects and buckets where Object
/// Ownership takes them; a revoked key is refused within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scoped_keys_do_what_their_grants_allow_and_a_revocation_takes_within_a_second() {
    let _shared = QUIET.read().await;
    use kintsugi_s3::access_keys::{self, Permission};
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Store::start(dir.path(), 3, "rs:2,1", 1).await;
    let c = &s.client;
    let ro = access_keys::create(c, "reader", false).await.unwrap();
    access_keys::grant(c, &ro.access_key, "shared", Some(Permission::Read)).await.unwrap();
    let rw = access_keys::create(c, "writer", false).await.unwrap();
    access_keys::grant(c, &rw.access_key, "shared", Some(Permission::Write)).await.unwrap();
    let none = access_keys::create(c, "nothing", false).await.unwrap();
    let maker = access_keys::create(c, "maker", true).await.unwrap();
    let listed: Vec<String> = access_keys::list(c).await.unwrap().into_iter().map(|k| k.name).collect();
    assert_eq!(listed.len(), 4, "{listed:?}");
    let keys = [("ro", &ro), ("rw", &rw), ("none", &none), ("maker", &maker)]
        .iter()
        .map(|(n, k)| format!("{n}={}:{}", k.access_key, k.secret_key))
        .collect::<Vec<_>>()
        .join(",");
    let (s, keys) = tokio::task::spawn_blocking(move || {
        s.python(&["scoped-keys"], &[("KEYS", &keys)]);
        s.python(&["policies"], &[("KEYS", &keys)]);
        s.python(&["acls"], &[("KEYS", &keys)]);
        (s, keys)
    })
    .await
    .unwrap();
    let made = access_keys::get(&s.client, &maker.access_key).await.unwrap().unwrap();
    assert_eq!(made.permission("made"), Some(Permission::Owner), "the creator owns its bucket");
    // Served once (so cached), then revoked.
    access_keys::revoke(&s.client, &ro.access_key).await.unwrap();
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["scoped-revoked"], &[("KEYS", &keys), ("REVOKED_AT", &format!("{at}"))]);
        s
    })
    .await
    .unwrap();
    s.stop().await;
}

/// Versions and delete markers under `prefix`: (versions, markers).
async fn versions_under(c: &Client, prefix: &str) -> (usize, usize) {
    let (mut versions, mut markers) = (0, 0);
    let (mut key, mut version) = (String::new(), None);
    loop {
        let page = kintsugi_client::client::VersionsPage { prefix, delimiter: "", key_marker: &key, version_marker: version, limit: 0 };
        let l = c.list_versions(page).await.unwrap();
        for v in &l.versions {
            if v.delete_marker {
                markers += 1;
            } else {
                versions += 1;
            }
        }
        match l.next {
            Some((k, v)) => (key, version) = (k, v),
            None => return (versions, markers),
        }
    }
}

/// Lifecycle with a day of two seconds: objects matching an enabled rule's prefix, tag or
/// size expire and the others stay; noncurrent versions beyond the newest kept go; a lone
/// delete marker goes; an incomplete upload is aborted and its parts' chunk files leave the
/// nodes. The gateway is stopped in the middle of a pass over 300 keys and a new one takes
/// the pass over once the lease runs out: every key ends with exactly one delete marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lifecycle_expires_what_its_rules_match_and_a_pass_resumes_after_a_restart() {
    let _shared = QUIET.read().await;
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pace = LifecyclePace { day: Duration::from_secs(2), interval: Duration::from_millis(200), rate: 40, lease: Duration::from_secs(3) };
    let mut s = Store::start_paced(dir.path(), 3, "rs:2,1", 1, pace).await;
    let setup = tokio::task::spawn_blocking({
        let (addr, key) = (s.s3.addr, s.key.clone());
        move || {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_clients.py");
            let out = Command::new("python3")
                .arg(&script)
                .arg("lifecycle-setup")
                .env("S3_ENDPOINT", format!("http://{addr}"))
                .env("AWS_ACCESS_KEY_ID", &key.access_key)
                .env("AWS_SECRET_ACCESS_KEY", &key.secret_key)
                .env_remove("AWS_PROFILE")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        }
    });
    setup.await.unwrap();
    // The pass over lc-bulk (40 deletions a second) is under way, and has checkpointed
    // inside it (every third of its 3 s lease): stop its gateway there.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (_, markers) = versions_under(&s.client, "lc-bulk/bulk/").await;
        let state = s.client.stat(kintsugi_s3::lifecycle_worker::STATE).await.map(|l| l.attrs).unwrap_or_default();
        let checkpointed = state.get("bucket").map(String::as_str) == Some("lc-bulk") && state.contains_key("key");
        if markers >= 40 && checkpointed {
            assert!(markers < 300, "the pass ended before the gateway could be stopped in it");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "lc-bulk expired nothing in 120 s ({markers} markers)");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.restart_gateway("rs:2,1", pace).await;
    let stopped_at = versions_under(&s.client, "lc-bulk/bulk/").await.1;
    println!("gateway restarted with {stopped_at} of 300 bulk keys expired");
    // Where the stopped pass got to is kept for the next worker: inside lc-bulk.
    let cursor = s.client.stat(kintsugi_s3::lifecycle_worker::STATE).await.unwrap().attrs;
    assert_eq!(cursor.get("bucket").map(String::as_str), Some("lc-bulk"), "{cursor:?}");
    assert!(cursor.get("key").is_some_and(|k| k.starts_with("bulk/")), "the pass's place within the bucket: {cursor:?}");
    // Everything the rules match is done: each part of the final state, polled.
    let done = || async {
        let plain = names_under(&s.client, "lc-plain/").await.len() == 5;
        let uploads = names_under(&s.client, ".uploads/lc-plain/").await.is_empty();
        let k = versions_under(&s.client, "lc-versions/k").await == (2, 0);
        let gone = versions_under(&s.client, "lc-versions/gone").await == (0, 0);
        let bulk = versions_under(&s.client, "lc-bulk/bulk/").await == (300, 300);
        plain && uploads && k && gone && bulk
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "lifecycle did not finish in 180 s after the restart");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Exactly what the rules say, judged by boto3 against the bytes it wrote.
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["lifecycle-check"], &[]);
        s
    })
    .await
    .unwrap();
    // Objects with bytes left: lc-plain 5, lc-versions 2, lc-bulk 300 under markers and
    // stay/0; one stripe of rs:2,1 each. The aborted upload's parts and every expired
    // version's chunks are collected.
    let want = 3 * (5 + 2 + 301);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while chunk_files(dir.path()) != want {
        assert!(std::time::Instant::now() < deadline, "{} chunk files on the nodes, {want} expected", chunk_files(dir.path()));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let m = s.s3.metrics_addr.expect("metrics served");
    let text = tokio::task::spawn_blocking(move || ureq::get(&format!("http://{m}/metrics")).call().unwrap().into_string().unwrap())
        .await
        .unwrap();
    assert!(text.contains("kintsugi_s3_lifecycle_actions_total{action=\"current\"}"), "lifecycle counted in the metrics:\n{text}");
    s.stop().await;
}

/// Headless Chromium, if installed (CI installs it).
fn browser() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium-headless-shell", "chromium", "chromium-browser"]
        .iter()
        .find_map(|b| std::env::split_paths(&path).map(|d| d.join(b)).find(|p| p.is_file()))
}

/// Serves `page` as text/html to every request on a loopback port, from a thread; the port.
fn serve_page(page: String) -> u16 {
    serve_page_on(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), page)
}

/// [`serve_page`] on a listener already bound.
fn serve_page_on(l: std::net::TcpListener, page: String) -> u16 {
    use std::io::{Read, Write};
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", page.len());
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(page.as_bytes());
        }
    });
    port
}

/// The page's DOM once its script has run, as headless Chromium dumps it.
fn dump_dom(browser: &Path, url: &str) -> String {
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--virtual-time-budget=5000", "--dump-dom", url])
        .output()
        .expect("running the browser");
    format!("{}\n(browser said: {})", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr).trim())
}

/// A page that GETs, then PUTs (a method that needs a preflight), the gateway's presigned
/// URLs from another origin, and writes what happened into `#out`.
fn cors_page(get: &str, put: &str) -> String {
    format!(
        r#"<html><body><div id="out">pending</div><script>
const out = document.getElementById("out");
fetch("{get}").then(r => r.text()).then(t => {{
  out.textContent = "got:" + t;
  return fetch("{put}", {{ method: "PUT", body: "written by the browser" }});
}}).then(r => {{ out.textContent += " put:" + r.status; }}).catch(e => {{ out.textContent += " error:" + e; }});
</script></body></html>"#
    )
}

/// CORS from a real browser: a page on another origin that a bucket's rules allow fetches an
/// object and PUTs one (through a preflight); the same page from an origin the rules do not
/// name is refused by the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_browser_on_an_allowed_origin_reads_and_writes_across_origins() {
    let _shared = QUIET.read().await;
    let Some(browser) = browser() else {
        assert!(std::env::var_os("CI").is_none(), "CI must have headless Chromium (.ci/run installs chromium-headless-shell)");
        eprintln!("skipped: no headless Chromium installed");
        return;
    };
    if !clients_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Store::start(dir.path(), 6, "rs:4,2", kintsugi_s3::multipart::MIN_PART).await;
    // The allowed page's port is known before the rules are written: bound first, served
    // once the URLs are known.
    let page_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let allowed = page_listener.local_addr().unwrap().port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_clients.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(["cors-setup", "web", &format!("http://127.0.0.1:{allowed}")])
        .env("S3_ENDPOINT", format!("http://{}", s.s3.addr))
        .env("AWS_ACCESS_KEY_ID", &s.key.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &s.key.secret_key)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let url = |m: &str| text.lines().find_map(|l| l.strip_prefix(m)).unwrap().trim().to_string();
    let page = cors_page(&url("GET "), &url("PUT "));
    serve_page_on(page_listener, page.clone());
    let other_port = serve_page(page);
    let b = browser.clone();
    let dom = tokio::task::spawn_blocking(move || dump_dom(&b, &format!("http://127.0.0.1:{allowed}/"))).await.unwrap();
    assert!(dom.contains("got:cross-origin bytes put:200"), "the allowed origin's fetches:\n{dom}");
    let b = browser.clone();
    let dom = tokio::task::spawn_blocking(move || dump_dom(&b, &format!("http://127.0.0.1:{other_port}/"))).await.unwrap();
    // The div's text, not the script's: nothing fetched, the error Chromium gives a request
    // the response's CORS headers do not allow.
    assert!(dom.contains(">pending error:TypeError"), "another origin is refused by the browser:\n{dom}");
    let s = tokio::task::spawn_blocking(move || {
        s.python(&["cors-check", "web"], &[]);
        s
    })
    .await
    .unwrap();
    s.stop().await;
}
