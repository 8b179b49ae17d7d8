//! A node told no link capacity finds it: the speed the kernel reports for the interface its
//! traffic to the coordinator leaves by. A node process in a network namespace of its own,
//! behind a veth pair (which reports 10,000 Mbit/s), and a coordinator process in this one;
//! `status` then shows the capacity and the interface it came from. Nodes behind an
//! interface that reports no speed (a VXLAN tunnel with no lower device reports -1) say so,
//! then measure their link from the traffic they carry. A node whose route is loopback (no
//! speed) runs without one and says so. Needs root and iproute2: skips itself otherwise (CI
//! runs as root).

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

/// Removes the namespace and this namespace's links however the test ends.
struct Net {
    ns: String,
    host: Vec<String>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for link in &self.host {
            let _ = Command::new("ip").args(["link", "del", link]).output();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

/// A namespace `ns` joined to this one by the veth pair `host`/`inner`, addressed
/// `{prefix}.1/30` here and `{prefix}.2/30` there, with its loopback up.
fn veth_namespace(ns: &str, host: &str, inner: &str, prefix: &str) -> Net {
    let net = Net { ns: ns.into(), host: vec![host.into()] };
    sh(&["ip", "netns", "add", ns]);
    sh(&["ip", "link", "add", host, "type", "veth", "peer", "name", inner]);
    sh(&["ip", "link", "set", inner, "netns", ns]);
    sh(&["ip", "addr", "add", &format!("{prefix}.1/30"), "dev", host]);
    sh(&["ip", "link", "set", host, "up"]);
    sh(&["ip", "netns", "exec", ns, "ip", "addr", "add", &format!("{prefix}.2/30"), "dev", inner]);
    sh(&["ip", "netns", "exec", ns, "ip", "link", "set", inner, "up"]);
    sh(&["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
    net
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
fn node(cmd: Command, secret: &Path, listen: &str, coord: &str, dir: &Path, log: &Path) -> Proc {
    node_id(cmd, 0, secret, listen, coord, dir, log)
}

/// Node `id` started by `cmd`, its data in `dir`/node`id`, logging at info into `log`.
fn node_id(mut cmd: Command, id: u32, secret: &Path, listen: &str, coord: &str, dir: &Path, log: &Path) -> Proc {
    let p = cmd
        .arg("--secret-file")
        .arg(secret)
        .args(["node", "--id", &id.to_string(), "--listen", listen, "--coordinator", coord, "--data-dir"])
        .arg(dir.join(format!("node{id}")))
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
    let (host_ip, node_ip) = (format!("10.253.{tag}.1"), format!("10.253.{tag}.2"));
    let net = veth_namespace(&ns, &host, &inner, &format!("10.253.{tag}"));

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

/// Three nodes in a namespace reach the coordinator through a VXLAN tunnel, which reports no
/// speed (-1). Each says so and measures its link instead: once a put has carried its chunk
/// (8 MB a node) in a second, `status` shows that rate, "measured". The object reads back.
#[test]
fn nodes_behind_an_interface_without_a_speed_measure_their_link() {
    if !root_with_iproute() {
        eprintln!("SKIPPED nodes_behind_an_interface_without_a_speed_measure_their_link: needs root and iproute2 (CI runs it as root)");
        return;
    }
    let tag = std::process::id() % 200;
    let (ns, host, inner) = (format!("kslv{tag}"), format!("kslvh{tag}"), format!("kslvn{tag}"));
    let mut net = veth_namespace(&ns, &host, &inner, &format!("10.251.{tag}"));
    // The tunnel: no lower device named, so it reports no speed (with one it reports the
    // lower device's).
    let (vx_host, vx_inner, vni) = (format!("kslxh{tag}"), format!("kslxn{tag}"), (4000 + tag).to_string());
    let (here, there) = (format!("10.251.{tag}.1"), format!("10.251.{tag}.2"));
    sh(&["ip", "link", "add", &vx_host, "type", "vxlan", "id", &vni, "local", &here, "remote", &there, "dstport", "4789"]);
    net.host.push(vx_host.clone());
    sh(&["ip", "addr", "add", &format!("10.250.{tag}.1/30"), "dev", &vx_host]);
    sh(&["ip", "link", "set", &vx_host, "up"]);
    let in_ns = ["ip", "netns", "exec", &ns, "ip"];
    sh(&[&in_ns[..], &["link", "add", &vx_inner, "type", "vxlan", "id", &vni, "local", &there, "remote", &here, "dstport", "4789"]]
        .concat());
    sh(&[&in_ns[..], &["addr", "add", &format!("10.250.{tag}.2/30"), "dev", &vx_inner]].concat());
    sh(&[&in_ns[..], &["link", "set", &vx_inner, "up"]].concat());

    let dir = tempfile::tempdir().unwrap();
    let coord = format!("10.250.{tag}.1:{}", common::procs::free_port());
    let (secret, _coordinator) = coordinator(dir.path(), &coord);
    let logs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("node{i}.log"))).collect();
    let _nodes: Vec<Proc> = (0..3u32)
        .map(|i| {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &ns, BIN]);
            let listen = format!("10.250.{tag}.2:{}", 7500 + i);
            node_id(cmd, i, &secret, &listen, &coord, dir.path(), &logs[i as usize])
        })
        .collect();
    let cli = |args: &[&str]| {
        let out = Command::new(BIN).arg("--secret-file").arg(&secret).args(args).args(["--coordinator", &coord]).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    // Every node registered, none with a capacity yet.
    let started = Instant::now();
    loop {
        let s = status(&coord, &secret);
        let links: Vec<&serde_json::Value> = (0..3).map(|i| &s["nodes"][i]["link"]).filter(|l| l.is_object()).collect();
        if links.len() == 3 {
            for l in links {
                // An empty origin is left out of the JSON.
                assert_eq!((l["capacity_up"].as_f64(), l["capacity_from"].as_str()), (Some(0.0), None), "nothing carried yet: {l}");
            }
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "not every node reported: {s}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // 16 MB in RS(2,1): an 8 MB chunk to each node.
    let object: Vec<u8> = (0..16_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let file = dir.path().join("object");
    std::fs::write(&file, &object).unwrap();
    cli(&["put", "obj", file.to_str().unwrap(), "--code", "rs:2,1", "--chunk-size", "8MiB"]);
    let started = Instant::now();
    let links = loop {
        let s = status(&coord, &secret);
        let links: Vec<serde_json::Value> = (0..3).map(|i| s["nodes"][i]["link"].clone()).collect();
        if links.iter().all(|l| l["capacity_from"] == "measured") {
            break links;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "not every node measured its link: {s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    for l in &links {
        // At least the 8 Mbit/s a measurement claims, at most the 8 MB chunk in 1 s.
        let up = l["capacity_up"].as_f64().unwrap();
        assert!((1e6..=8.5e6).contains(&up) && l["capacity_down"].as_f64() == Some(up), "{l}");
    }
    for log in &logs {
        let log = std::fs::read_to_string(log).unwrap();
        assert!(log.contains("link capacity unknown") && log.contains(&format!("{vx_inner} reports an unknown speed (-1")), "{log}");
        assert!(log.contains("link capacity measured at"), "{log}");
    }
    let back = dir.path().join("back");
    cli(&["get", "obj", "--out", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == object, "the object reads back byte for byte");
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
