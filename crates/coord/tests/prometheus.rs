//! A real Prometheus (Debian's `prometheus`) scrapes a loopback cluster's coordinator and
//! nodes while an object is written, a node is failed and its chunks are repaired; its HTTP
//! API then shows the repair's bytes, lost chunks back at 0, and foreground and repair bytes
//! per node. `promtool check metrics` passes on every endpoint's output. Where Prometheus is
//! not installed the test says so and skips, except under CI, where `.ci/run` installs it.

use kintsugi_coord::CoordConfig;
use kintsugi_node::NodeConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// RS(4,2) on one node more than a stripe is wide: a failed node's chunks have somewhere to go.
const NODES: usize = 7;

mod common;

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Prometheus, killed when dropped.
struct Prometheus(Child, String);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Prometheus {
    fn start(bin: &Path, dir: &Path, targets: &[SocketAddr]) -> Prometheus {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let cfg = dir.join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: kintsugi\n    static_configs:\n      - targets: [{}]\n",
                list.join(", ")
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prometheus");
        Prometheus(child, format!("http://127.0.0.1:{port}"))
    }

    /// An instant query's samples: (labels, value).
    fn query(&self, q: &str) -> Vec<(serde_json::Value, f64)> {
        let r: serde_json::Value = match ureq::get(&format!("{}/api/v1/query", self.1)).query("query", q).call() {
            Ok(r) => r.into_json().unwrap(),
            Err(_) => return vec![],
        };
        r["data"]["result"]
            .as_array()
            .map(|a| {
                a.iter().map(|s| (s["metric"].clone(), s["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN))).collect()
            })
            .unwrap_or_default()
    }

    /// Waits (up to a minute) until `q` has a sample for which `ok` holds; returns the samples.
    fn wait_for(&self, q: &str, ok: impl Fn(&[(serde_json::Value, f64)]) -> bool) -> Vec<(serde_json::Value, f64)> {
        let start = Instant::now();
        loop {
            let r = self.query(q);
            if ok(&r) {
                return r;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "Prometheus never answered '{q}' as expected; last: {r:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// `promtool check metrics` on what an endpoint serves.
fn promtool_check(promtool: &Path, addr: SocketAddr) {
    let text = ureq::get(&format!("http://{addr}/metrics")).call().unwrap().into_string().unwrap();
    let mut p = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics on {addr}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_sees_a_put_a_failed_node_and_its_repair() {
    let (Some(prom), Some(promtool)) = (on_path("prometheus"), on_path("promtool")) else {
        assert!(std::env::var("CI").is_err(), "CI must have prometheus and promtool (.ci/run installs Debian's prometheus)");
        eprintln!("skipping: prometheus or promtool is not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { chunk_size: 256 << 10, metrics_listen: Some("127.0.0.1:0".into()), ..common::cfg(dir.path(), "127.0.0.1:0") };
    let mut c = common::cluster_nodes(conf, dir.path(), NODES, |_, n| NodeConfig {
        metrics_listen: Some("127.0.0.1:0".into()),
        scrub_interval_ms: 1000,
        ..n
    })
    .await;
    let (client, nodes) = (c.client.clone(), &mut c.nodes);
    let mut targets = vec![c.coord.as_ref().unwrap().metrics_addr.unwrap()];
    targets.extend(nodes.iter().map(|n| n.as_ref().unwrap().metrics_addr.unwrap()));
    let p = Prometheus::start(&prom, dir.path(), &targets);
    let blocking = |f: Box<dyn FnOnce() + Send>| tokio::task::spawn_blocking(f);

    // Every endpoint passes promtool's checks, and Prometheus scrapes them all.
    let t = targets.clone();
    let pt = promtool.clone();
    blocking(Box::new(move || t.iter().for_each(|a| promtool_check(&pt, *a)))).await.unwrap();

    // An object written: the nodes received foreground bytes.
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    client.put("obj", &data, "rs:4,2".parse().unwrap(), 0).await.unwrap();
    let p = std::sync::Arc::new(p);
    let pc = p.clone();
    blocking(Box::new(move || {
        pc.wait_for("count(up{job=\"kintsugi\"} == 1)", |r| r.first().is_some_and(|s| s.1 == (NODES + 1) as f64));
        // 48 chunks over 7 nodes: every node, or all but one, holds some.
        let r = pc.wait_for("kintsugi_node_network_bytes_total{class=\"foreground\",direction=\"received\"} > 0", |r| r.len() >= NODES - 1);
        let total: f64 = r.iter().map(|s| s.1).sum();
        assert!(total >= (12 << 20) as f64, "the nodes received the object's 12 MiB of chunks: {total}");
        // 8 stripes of 6 chunks, each made durable once: the commit histograms count them.
        pc.wait_for("sum(kintsugi_node_chunk_commit_duration_seconds_count)", |r| r.first().is_some_and(|s| s.1 >= 48.0));
        // What each link carried over its last heartbeat, as the planners see it.
        pc.wait_for("kintsugi_node_link_bytes_per_second{class=\"foreground\",direction=\"down\"}", |r| r.len() == NODES);
        // The scrub reads the chunks back (every second here) and finishes passes.
        pc.wait_for("sum(kintsugi_node_chunk_read_bytes_total{class=\"scrub\"})", |r| r.first().is_some_and(|s| s.1 >= (12 << 20) as f64));
        pc.wait_for("min(kintsugi_node_scrub_passes_total)", |r| r.first().is_some_and(|s| s.1 >= 1.0));
        pc.wait_for("kintsugi_leader", |r| r.first().is_some_and(|s| s.1 == 1.0));
    }))
    .await
    .unwrap();

    // A node fails: its chunks are lost, as Prometheus sees.
    let victim = 2;
    nodes[victim].take().unwrap().stop().await;
    client.fail(victim as u32).await.unwrap();
    let pc = p.clone();
    blocking(Box::new(move || {
        pc.wait_for("kintsugi_lost_chunks", |r| r.first().is_some_and(|s| s.1 > 0.0));
        pc.wait_for(&format!("kintsugi_node_up{{node=\"{victim}\"}}"), |r| r.first().is_some_and(|s| s.1 == 0.0));
    }))
    .await
    .unwrap();

    // A read meets the lost chunks: degraded reads, counted in a class of their own.
    assert_eq!(client.get("obj", Shape::Ppr, 64 << 10).await.unwrap().0, data);
    let pc = p.clone();
    blocking(Box::new(move || {
        pc.wait_for("sum(kintsugi_node_network_bytes_total{class=\"degraded_read\",direction=\"sent\"})", |r| {
            r.first().is_some_and(|s| s.1 > 0.0)
        });
        pc.wait_for("sum(kintsugi_node_chunk_read_bytes_total{class=\"degraded_read\"})", |r| r.first().is_some_and(|s| s.1 > 0.0));
        pc.wait_for("sum(kintsugi_node_chunk_read_duration_seconds_count)", |r| r.first().is_some_and(|s| s.1 > 0.0));
    }))
    .await
    .unwrap();

    // The repair: its bytes by method and scheduler, lost chunks back to 0, and repair
    // bytes sent by the surviving nodes.
    let r = client.repair(Shape::Ppr, 64 << 10, 4, Scheduler::Random).await.unwrap();
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}");
    let pc = p.clone();
    let repaired_bytes = r.bytes as f64;
    let repaired = r.repaired;
    blocking(Box::new(move || {
        // Scrapes taken during the repair show part of it: each figure is waited for until
        // a scrape after the repair shows it whole.
        let b = pc.wait_for("kintsugi_repair_bytes_total", |r| r.first().is_some_and(|s| s.1 == repaired_bytes));
        assert_eq!((&b[0].0["method"], &b[0].0["scheduler"]), (&"ppr".into(), &"random".into()), "{b:?}");
        pc.wait_for("kintsugi_lost_chunks", |r| r.first().is_some_and(|s| s.1 == 0.0));
        pc.wait_for("kintsugi_repair_chunks_total{outcome=\"repaired\"}", |r| r.first().is_some_and(|s| s.1 > 0.0));
        // Helpers sent at least the rebuilt bytes; the destinations stored exactly them.
        pc.wait_for("sum(kintsugi_node_network_bytes_total{class=\"repair\",direction=\"sent\"})", |r| {
            r.first().is_some_and(|s| s.1 >= repaired_bytes)
        });
        pc.wait_for("sum(kintsugi_node_repair_written_bytes_total)", |r| r.first().is_some_and(|s| s.1 == repaired_bytes));
        // The run: begun on request, every chunk of it repaired.
        pc.wait_for("kintsugi_repair_runs_total{trigger=\"request\"}", |r| r.first().is_some_and(|s| s.1 >= 1.0));
        let done = repaired as f64;
        pc.wait_for("kintsugi_repair_run_chunks{state=\"repaired\"}", |r| r.first().is_some_and(|s| s.1 == done));
    }))
    .await
    .unwrap();
    // A flipped byte in a chunk file: the read that meets it counts a CRC failure on the
    // node that holds it (and the object still reads back whole, by a degraded read).
    let loc = client.stat("obj").await.unwrap().stripes[0].chunks[0].clone();
    let path = dir.path().join(format!("node{}", loc.node)).join(format!("{}.chunk", loc.chunk));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[777] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(client.get("obj", Shape::Cr, 64 << 10).await.unwrap().0, data);
    let pc = p.clone();
    blocking(Box::new(move || {
        let q = format!("kintsugi_node_crc_failures_total{{node=\"{}\"}}", loc.node);
        pc.wait_for(&q, |r| r.first().is_some_and(|s| s.1 >= 1.0));
        pc.wait_for("sum(kintsugi_node_connections)", |r| r.first().is_some_and(|s| s.1 >= 0.0));
    }))
    .await
    .unwrap();

    let t = targets.clone();
    let pt = promtool.clone();
    blocking(Box::new(move || t.iter().filter(|a| **a != t[victim + 1]).for_each(|a| promtool_check(&pt, *a)))).await.unwrap();

    // deploy/: the example scrape configuration is valid, and every query of the Grafana
    // dashboard parses in Prometheus and names metrics the cluster serves (the gateway's
    // are checked by the S3 test).
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let out = Command::new(&promtool).args(["check", "config"]).arg(deploy.join("prometheus.yml")).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let served: String = targets
        .iter()
        .filter(|a| **a != targets[victim + 1])
        .map(|a| ureq::get(&format!("http://{a}/metrics")).call().unwrap().into_string().unwrap())
        .collect();
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy.join("grafana/kintsugi.json")).unwrap()).unwrap();
    let pc = p.clone();
    blocking(Box::new(move || {
        for panel in dashboard["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().unwrap() {
                let expr = t["expr"].as_str().unwrap();
                let r: serde_json::Value =
                    ureq::get(&format!("{}/api/v1/query", pc.1)).query("query", expr).call().unwrap().into_json().unwrap();
                assert_eq!(r["status"], "success", "{expr}: {r}");
                for name in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("kintsugi_")) {
                    if !name.starts_with("kintsugi_s3_") {
                        // A sample, or its family (residual bandwidth has no sample without a link capacity).
                        let family = name.strip_suffix("_total").unwrap_or(name);
                        assert!(
                            served.contains(&format!("\n{name}")) || served.contains(&format!("# TYPE {family}")),
                            "the dashboard's {name} is not served"
                        );
                    }
                }
            }
        }
    }))
    .await
    .unwrap();
    drop(p);
    c.stop().await;
}
