//! Operating kintsugi: `config check` accepts what the services start with and refuses,
//! saying why, what they would not; `--log-format json` writes one JSON object per log line;
//! a coordinator process serves `/metrics` and its status page where it is told; the systemd units in
//! `deploy/systemd` pass `systemd-analyze verify`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::procs::{free_port, Proc, BIN};

fn config_check(file: &Path, extra: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(["config", "check"]).arg(file).args(extra).env_remove("KINTSUGI_SECRET_FILE").output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn config_check_prints_the_effective_configuration_and_refuses_what_a_service_would() {
    let dir = tempfile::tempdir().unwrap();
    let f = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // A coordinator's: defaults filled in.
    let (ok, out, err) =
        config_check(&f("c.toml", "listen = \"0.0.0.0:7400\"\nmetrics_listen = \"127.0.0.1:9464\"\nauto_repair = true\n"), &[]);
    assert!(ok, "{err}");
    assert!(err.contains("a valid coordinator configuration"), "{err}");
    assert!(out.contains("full_ratio = 0.95") && out.contains("metrics_listen = \"127.0.0.1:9464\""), "{out}");
    // Beyond loopback without a secret the service would refuse to start (closed by
    // default): said, though a secret may still come from the command line.
    assert!(err.contains("refuses to start unless"), "{err}");
    // Automatic repair may leave the method and scheduler to `auto`.
    let (ok, out, err) =
        config_check(&f("auto.toml", "repair_method = \"auto\"\nrepair_scheduler = \"AUTO\"\n"), &["--role", "coordinator"]);
    assert!(ok, "{err}");
    assert!(out.contains("repair_method = \"auto\"") && out.contains("repair_scheduler = \"auto\""), "{out}");
    for text in ["listen = \"0.0.0.0:7400\"\ninsecure = true\n", "listen = \"127.0.0.1:7400\"\n"] {
        let (ok, _, err) = config_check(&f("c2.toml", text), &["--role", "coordinator"]);
        assert!(ok && !err.contains("refuses to start"), "{text}: {err}");
    }
    // A node's, as JSON.
    let (ok, out, err) = config_check(&f("n.toml", "id = 4\ncoordinator = \"10.0.0.1:7400\"\n"), &["--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["id"].as_u64(), v["heartbeat_ms"].as_u64()), (Some(4), Some(500)), "{v}");
    // Refused, each saying why.
    for (name, text, role, why) in [
        ("ratios.toml", "full_ratio = 0.8\n", "coordinator", "fill ratios"),
        ("typo.toml", "id = 1\nheartbeat = 5\n", "node", "unknown field `heartbeat`"),
        ("link.toml", "id = 1\nuplink = -5.0\n", "node", "uplink must be a positive"),
        ("dscp.toml", "id = 1\nrepair_dscp = 64\n", "node", "repair_dscp must be 0 to 63"),
        ("addr.toml", "listen = \"nowhere\"\n", "coordinator", "listen must be HOST:PORT"),
        ("meta.toml", "meta = \"zookeeper://x\"\n", "coordinator", "meta:"),
        ("method.toml", "repair_method = \"fastest\"\n", "coordinator", "'fastest'"),
        ("secret.toml", "secret_file = \"/nonexistent/secret\"\n", "coordinator", "secret_file"),
    ] {
        let (ok, _, err) = config_check(&f(name, text), &["--role", role]);
        assert!(!ok && err.contains(why), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    // Nothing says whose an empty file is.
    let (ok, _, err) = config_check(&f("empty.toml", ""), &[]);
    assert!(!ok && err.contains("--role"), "{err}");
}

/// `GET path` on a local port, the whole answer as text.
fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_coordinator_logs_json_lines_and_serves_its_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (listen, metrics) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "coordinator", "--listen", &listen, "--metrics-listen", &metrics, "--data-dir"])
        .arg(dir.path().join("c"))
        .env("KINTSUGI_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _proc = Proc(child);
    // Log lines are JSON objects with a level and the message; the service's own lines for
    // people (where it listens) are plain text beside them.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let start = Instant::now();
    let mut json_lines = 0;
    while json_lines == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "no JSON log line from the coordinator");
        let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) else { continue };
        if line.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert!(v["level"].is_string() && v["fields"]["message"].is_string(), "{line}");
            json_lines += 1;
        }
    }
    let mut answer = String::new();
    // (The port answers from the start; the cluster's figures once the store is open.)
    for _ in 0..100 {
        if std::net::TcpStream::connect(&metrics).is_ok() {
            answer = http_get(&metrics, "/metrics");
            if answer.contains("kintsugi_status_up 1") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("kintsugi_objects 0") && answer.contains("kintsugi_status_up 1"), "{answer}");
    // Beside the metrics, the coordinator's port serves its status page, and nothing else.
    let page = http_get(&metrics, "/");
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("<title>kintsugi status</title>"), "{page}");
    assert!(http_get(&metrics, "/status.json").contains("\"status\":{"), "the page's data");
    assert!(http_get(&metrics, "/etc/passwd").starts_with("HTTP/1.1 404"), "other paths are 404");
}

#[test]
fn the_systemd_units_pass_systemd_analyze_verify() {
    let Ok(v) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipping: systemd-analyze is not installed");
        return;
    };
    assert!(v.status.success());
    let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for e in std::fs::read_dir(&units).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        // The units name the installed binary; verify checks that it exists, so this build's.
        let text = std::fs::read_to_string(&p).unwrap().replace("/usr/local/bin/kintsugi", BIN);
        // A template is verified as one of its instances.
        let name = name.replace("@.service", "@0.service");
        std::fs::write(dir.path().join(&name), text).unwrap();
        names.push(name);
    }
    assert_eq!(names.len(), 3, "coordinator, node and gateway units: {names:?}");
    let out = Command::new("systemd-analyze").arg("verify").args(&names).current_dir(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // A bad setting is only a warning to verify: any line about our units fails the test.
    assert!(out.status.success() && !err.contains("kintsugi"), "systemd-analyze verify: {err}");
}
