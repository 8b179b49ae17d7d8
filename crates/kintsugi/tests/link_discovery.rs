//! A node told no link capacity finds it: the speed the kernel reports for the interface its
//! traffic to the coordinator leaves by. A node process in a network namespace of its own,
//! behind a veth pair (which reports 10,000 Mbit/s), and a coordinator process in this one;
//! `status` then shows the capacity and the interface it came from. A node whose route is
//! loopback (no speed) runs without one and says so. Needs root and iproute2: skips itself
//! otherwise (CI runs as root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::procs::{Proc, BIN};

fn root_with_iproute() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success())
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Removes the namespace and the veth pair however the test ends.
struct Net {
    ns: String,
    host: String,
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.host]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

fn status(coord: &str, secret: &Path) -> serde_json::Value {
    let out = Command::new(BIN).arg("--secret-file").arg(secret).args(["status", "--json", "--coordinator", coord]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// A new cluster secret in `dir`, and a coordinator process listening on `listen` under it.
fn coordinator(dir: &Path, listen: &str) -> (PathBuf, Proc) {
    let secret = dir.join("secret");
    assert!(Command::new(BIN).arg("secret").arg(&secret).status().unwrap().success());
    let p = Command::new(BIN)
        .arg("--secret-file")
        .arg(&secret)
        .args(["coordinator", "--listen", listen, "--data-dir"])
        .arg(dir.join("coord"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (secret, Proc(p))
}

/// Node 0 started by `cmd` (the binary, or a command that runs it), logging at info into `log`.
fn node(mut cmd: Command, secret: &Path, listen: &str, coord: &str, dir: &Path, log: &Path) -> Proc {
    let p = cmd
        .arg("--secret-file")
        .arg(secret)
        .args(["node", "--id", "0", "--listen", listen, "--coordinator", coord, "--data-dir"])
        .arg(dir.join("node"))
        .env("KINTSUGI_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Proc(p)
}

/// Node 0's first link report, as `status --json` shows it.
fn first_link_report(coord: &str, secret: &Path) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let s = status(coord, secret);
        if s["nodes"][0]["link"].is_object() {
            return s["nodes"][0]["link"].clone();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no node reported to the coordinator: {s}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_node_finds_its_link_speed_from_its_interface() {
    if !root_with_iproute() {
        eprintln!("SKIPPED a_node_finds_its_link_speed_from_its_interface: needs root and iproute2 (CI runs it as root)");
        return;
    }
    let tag = std::process::id() % 200;
    let (ns, host, inner) = (format!("ksld{tag}"), format!("ksldh{tag}"), format!("ksldn{tag}"));
    let net = Net { ns: ns.clone(), host: host.clone() };
    let (host_ip, node_ip) = (format!("10.253.{tag}.1"), format!("10.253.{tag}.2"));
    sh(&["ip", "netns", "add", &ns]);
    sh(&["ip", "link", "add", &host, "type", "veth", "peer", "name", &inner]);
    sh(&["ip", "link", "set", &inner, "netns", &ns]);
    sh(&["ip", "addr", "add", &format!("{host_ip}/30"), "dev", &host]);
    sh(&["ip", "link", "set", &host, "up"]);
    sh(&["ip", "netns", "exec", &ns, "ip", "addr", "add", &format!("{node_ip}/30"), "dev", &inner]);
    sh(&["ip", "netns", "exec", &ns, "ip", "link", "set", &inner, "up"]);
    sh(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);

    let dir = tempfile::tempdir().unwrap();
    let coord = format!("{host_ip}:{}", common::procs::free_port());
    let (secret, _coordinator) = coordinator(dir.path(), &coord);
    let node_log = dir.path().join("node.log");
    let mut ip = Command::new("ip");
    ip.args(["netns", "exec", &ns, BIN]);
    let _node = node(ip, &secret, &format!("{node_ip}:7500"), &coord, dir.path(), &node_log);
    let link = first_link_report(&coord, &secret);
    // A veth reports 10,000 Mbit/s.
    assert_eq!(link["capacity_up"].as_f64(), Some(10_000e6 / 8.0), "{link}");
    assert_eq!(link["capacity_down"].as_f64(), Some(10_000e6 / 8.0), "{link}");
    assert_eq!(link["capacity_from"], inner.as_str(), "{link}");
    let log = std::fs::read_to_string(&node_log).unwrap();
    assert!(log.contains("link capacity 10000 Mbit/s") && log.contains(&inner), "{log}");
    // The table says so too.
    let out = Command::new(BIN).arg("--secret-file").arg(&secret).args(["status", "--coordinator", &coord]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(&format!("1250.0 ({inner})")), "{table}");
    drop(net);
}

#[test]
fn a_node_without_a_speed_to_find_runs_without_and_says_so() {
    // Loopback reports no speed: the node warns and reports none.
    let dir = tempfile::tempdir().unwrap();
    let coord = format!("127.0.0.1:{}", common::procs::free_port());
    let (secret, _coordinator) = coordinator(dir.path(), &coord);
    let node_log = dir.path().join("node.log");
    let _node = node(Command::new(BIN), &secret, "127.0.0.1:0", &coord, dir.path(), &node_log);
    let link = first_link_report(&coord, &secret);
    assert_eq!((link["capacity_up"].as_f64(), link["capacity_down"].as_f64()), (Some(0.0), Some(0.0)), "{link}");
    let log = std::fs::read_to_string(&node_log).unwrap();
    assert!(log.contains("link capacity unknown") && log.contains("lo reports no speed") && log.contains("--link-capacity"), "{log}");
}
