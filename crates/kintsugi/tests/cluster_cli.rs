//! Real processes: a `kintsugi coordinator` and `kintsugi node`s on loopback, driven by the
//! client commands; a node is killed with SIGKILL, another stopped with `fail`; every read
//! is compared byte for byte. And `demo --json` verifies every method.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::procs::{free_port, Proc, BIN};

fn spawn(args: &[&str]) -> Proc {
    Proc(Command::new(BIN).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap())
}

fn cli(coord: &str, args: &[&str]) -> Output {
    Command::new(BIN).args(args).args(["--coordinator", coord]).output().unwrap()
}

fn ok_json(coord: &str, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = cli(coord, &a);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn wait_alive(coord: &str, n: usize) {
    let start = Instant::now();
    let mut last = String::new();
    // Generous: a loaded CI machine starts processes slowly; this returns as soon as they are up.
    while start.elapsed() < Duration::from_secs(60) {
        let out = cli(coord, &["status", "--json"]);
        last = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["nodes"].as_array().unwrap().iter().filter(|n| n["alive"] == true).count() == n {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("never saw {n} live nodes; last status: {last}");
}

/// A coordinator and `n` node processes with data under `d`, all reported in.
fn processes(d: &Path, n: usize) -> (String, Proc, Vec<Option<Proc>>) {
    let coord = format!("127.0.0.1:{}", free_port());
    let c = spawn(&["coordinator", "--listen", &coord, "--data-dir", d.join("coord").to_str().unwrap()]);
    let nodes = (0..n)
        .map(|i| {
            Some(spawn(&["node", "--id", &i.to_string(), "--data-dir", d.join(format!("n{i}")).to_str().unwrap(), "--coordinator", &coord]))
        })
        .collect();
    wait_alive(&coord, n);
    (coord, c, nodes)
}

fn same(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

#[test]
fn processes_put_get_kill_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (coord, _c, mut nodes) = processes(d, 8);

    let file = d.join("in.bin");
    let bytes: Vec<u8> = (0..1_000_003u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(&file, &bytes).unwrap();
    let put = cli(&coord, &["put", "obj", file.to_str().unwrap(), "--code", "rs:4,2", "--chunk-size", "64KiB"]);
    assert!(put.status.success() && !String::from_utf8_lossy(&put.stderr).contains("warning"), "{put:?}");
    // A code as wide as the cluster: stored, and the put says that a lost node could not be
    // rebuilt.
    let wide = cli(&coord, &["put", "wide", file.to_str().unwrap(), "--code", "rs:6,2"]);
    let said = String::from_utf8_lossy(&wide.stderr);
    assert!(wide.status.success() && said.contains("warning: 'wide': 8 chunks per stripe on 8 live node(s)"), "{said}");
    assert!(cli(&coord, &["delete", "wide"]).status.success());
    let out1 = d.join("out1.bin");
    ok_json(&coord, &["get", "obj", "--out", out1.to_str().unwrap()]);
    assert!(same(&file, &out1));
    // Streamed to standard output (`--out -`), the report on standard error.
    let out = cli(&coord, &["get", "obj", "--out", "-", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == bytes, "get --out - wrote {} bytes", out.stdout.len());
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"bytes\":1000003"), "{}", String::from_utf8_lossy(&out.stderr));
    // A failed get leaves an existing output file alone.
    let missing = cli(&coord, &["get", "nothing", "--out", out1.to_str().unwrap()]);
    assert!(!missing.status.success() && same(&file, &out1));
    assert_eq!(ok_json(&coord, &["ls"])[0]["name"], "obj");
    let stat = ok_json(&coord, &["stat", "obj"]);
    let stripes = stat["stripes"].as_array().unwrap().len();
    assert_eq!(stripes, 4, "1 MB in stripes of 4 x 64 KiB");

    // SIGKILL a node holding a data chunk: reads degrade, repair restores.
    let victim = stat["stripes"][0]["chunks"][0]["node"].as_u64().unwrap() as usize;
    drop(nodes[victim].take());
    wait_alive(&coord, 7);
    let out2 = d.join("out2.bin");
    let got = ok_json(&coord, &["get", "obj", "--out", out2.to_str().unwrap(), "--method", "ppr", "--slice", "4KiB"]);
    assert!(same(&file, &out2));
    assert!(!got["degraded_reads"].as_array().unwrap().is_empty());
    let r = ok_json(&coord, &["repair", "--method", "ecpipe", "--slice", "8KiB", "--scheduler", "repairboost"]);
    assert!(r["repaired"].as_u64().unwrap() > 0 && r["failed"] == 0, "{r}");
    // The report accounts for every chunk it set out to rebuild, and status agrees.
    let counted = ["repaired", "skipped", "failed"].iter().map(|k| r[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(counted, r["lost"].as_u64().unwrap(), "{r}");
    assert_eq!(ok_json(&coord, &["status"])["lost_chunks"], 0);
    let out3 = d.join("out3.bin");
    let got = ok_json(&coord, &["get", "obj", "--out", out3.to_str().unwrap()]);
    assert!(same(&file, &out3) && got["degraded_reads"].as_array().unwrap().is_empty());

    // A hung node (SIGSTOP, still "alive" for the coordinator): the read routes around it.
    let stat = ok_json(&coord, &["stat", "obj"]);
    let hung = stat["stripes"][0]["chunks"][0]["node"].as_u64().unwrap() as usize;
    let pid = nodes[hung].as_ref().expect("a running node").0.id() as i32;
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let out5 = d.join("out5.bin");
    let got = ok_json(&coord, &["get", "obj", "--out", out5.to_str().unwrap()]);
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(same(&file, &out5), "read with a hung node");
    assert!(!got["degraded_reads"].as_array().unwrap().is_empty(), "the hung node's chunks came from degraded reads");

    // A short YCSB-A run: every operation succeeds, latencies are ordered, per-second rows.
    let csv = d.join("load.csv");
    let l = ok_json(
        &coord,
        &[
            "load",
            "--records",
            "6",
            "--value-size",
            "40KiB",
            "--clients",
            "2",
            "--seconds",
            "2",
            "--code",
            "rs:4,2",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    assert!(l["all"]["ops"].as_u64().unwrap() > 0 && l["errors"] == 0, "{l}");
    assert!(l["read"]["ops"].as_u64().unwrap() > 0 && l["update"]["ops"].as_u64().unwrap() > 0, "{l}");
    assert!(l["all"]["p50_ms"].as_f64().unwrap() <= l["all"]["p99_ms"].as_f64().unwrap(), "{l}");
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() >= 2, "a CSV header and per-second rows");
    for k in 0..6 {
        let out = d.join("rec.bin");
        ok_json(&coord, &["get", &format!("ycsb{k:08}"), "--out", out.to_str().unwrap()]);
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 40 << 10, "record {k} is one whole value");
    }

    // ChameleonEC's trace stand-ins in turn (its Exp#4): every second names the workload
    // that ran, both ran, and Twitter's records carry its 72-byte keys.
    let l = ok_json(
        &coord,
        &["load", "--workload", "etc,twitter", "--switch", "1", "--records", "4", "--clients", "2", "--seconds", "2.5", "--code", "rs:4,2"],
    );
    assert_eq!(l["errors"], 0, "{l}");
    let seen: Vec<&str> = l["per_second"].as_array().unwrap().iter().map(|s| s["workload"].as_str().unwrap()).collect();
    assert_eq!(&seen[..2], ["etc", "twitter"], "{l}");
    let ls = cli(&coord, &["ls"]);
    let names = String::from_utf8_lossy(&ls.stdout);
    assert!(names.split_whitespace().any(|w| w.starts_with("ycsb-tw-") && w.len() == 72), "{names}");
    let bad = cli(&coord, &["load", "--workload", "tpcc"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("unknown workload"));

    // `fail` stops a node process.
    let other = (0..8).find(|&i| i != victim).unwrap();
    let out = cli(&coord, &["fail", &other.to_string()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut p = nodes[other].take().unwrap();
    let start = Instant::now();
    while p.0.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "node process did not exit after fail");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Overwrite, then delete (twice: idempotent).
    std::fs::write(d.join("small.bin"), b"second version").unwrap();
    ok_json(&coord, &["put", "obj", d.join("small.bin").to_str().unwrap(), "--code", "rs:4,2"]);
    let out4 = d.join("out4.bin");
    ok_json(&coord, &["get", "obj", "--out", out4.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out4).unwrap(), b"second version");
    for (round, want) in [(0, "deleted obj"), (1, "no object named obj")] {
        let out = cli(&coord, &["delete", "obj"]);
        assert!(out.status.success(), "delete {round}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains(want), "delete {round}");
    }

    // Output into a pipe nobody reads ends quietly, never with a panic.
    for cmd in ["status", "ls", "stat obj"] {
        let sh = format!("'{BIN}' {cmd} --coordinator {coord} | true");
        let out = Command::new("sh").args(["-c", &sh]).output().unwrap();
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    }

    // A node without a secret does not serve an address beyond loopback unless told to.
    let out = Command::new(BIN)
        .args(["node", "--id", "9", "--listen", "0.0.0.0:0", "--data-dir", d.join("n9").to_str().unwrap(), "--coordinator", &coord])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--insecure"), "{}", String::from_utf8_lossy(&out.stderr));
    // Told so, it still cannot advertise an address nobody can reach.
    let out = Command::new(BIN)
        .args(["node", "--id", "9", "--listen", "0.0.0.0:0", "--data-dir", d.join("n9").to_str().unwrap(), "--coordinator", &coord])
        .arg("--insecure")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--advertise"), "{}", String::from_utf8_lossy(&out.stderr));

    // Clear errors.
    let out = cli(&coord, &["get", "missing", "--out", d.join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no object named 'missing'"));
    let out = cli("127.0.0.1:1", &["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("coordinator 127.0.0.1:1"));
    let out = Command::new(BIN).args(["node", "--link", "0gbit"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "id = \"seven\"\n").unwrap();
    let out = Command::new(BIN).args(["node", "--config", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid configuration"));
}

/// Geo layout through the CLI: put, whole and range gets, seal, a SIGKILLed home node.
#[test]
fn processes_geo_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (coord, _c, mut nodes) = processes(d, 8);
    let file = d.join("in.bin");
    let bytes: Vec<u8> = (0..1_000_003u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    std::fs::write(&file, &bytes).unwrap();
    let put = ["put", "obj", file.to_str().unwrap(), "--code", "clay:4,2,5", "--layout", "geo", "--s0", "64KiB", "--q", "2"];
    let l = ok_json(&coord, &put);
    // 1,000,003 B at s0 = 64 KiB: 15.26 s0 = remainder | 1,2,4,8 s0 (sizes ascending).
    let lens: Vec<u64> = l["extents"].as_array().unwrap().iter().map(|e| e["len"].as_u64().unwrap()).collect();
    assert_eq!(lens[lens.len() - 4..], [64 << 10, 128 << 10, 256 << 10, 512 << 10], "{lens:?}");
    let out = d.join("out.bin");
    ok_json(&coord, &["get", "obj", "--out", out.to_str().unwrap()]);
    assert!(same(&file, &out));
    for (off, len) in [(0usize, 10usize), (70_000, 300_000), (999_999, 100)] {
        let r = d.join("range.bin");
        ok_json(&coord, &["get", "obj", "--out", r.to_str().unwrap(), "--offset", &off.to_string(), "--length", &len.to_string()]);
        assert!(std::fs::read(&r).unwrap() == bytes[off..(off + len).min(bytes.len())], "range {off}+{len}");
    }
    assert!(ok_json(&coord, &["seal"])["sealed"].as_u64().unwrap() >= 4);
    let last = l["extents"].as_array().unwrap().last().unwrap().clone();
    let home = l["stripes"][last["stripe"].as_u64().unwrap() as usize]["chunks"][last["index"].as_u64().unwrap() as usize]["node"]
        .as_u64()
        .unwrap() as usize;
    drop(nodes[home].take());
    wait_alive(&coord, 7);
    let got = ok_json(&coord, &["get", "obj", "--out", out.to_str().unwrap(), "--method", "ppr"]);
    assert!(same(&file, &out));
    assert!(got["degraded_reads"].as_array().unwrap().len() >= 4, "{got}");
    // Clear errors for layouts that cannot be.
    let bad = cli(&coord, &["put", "x", file.to_str().unwrap(), "--code", "clay:4,2,5", "--layout", "geo", "--s0", "1001"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("multiple of"), "{}", String::from_utf8_lossy(&bad.stderr));
    let bad = cli(&coord, &["put", "x", file.to_str().unwrap(), "--layout", "geo", "--q", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    // Deleted, its sealed stripes come back with `compact` (a node down or not), as
    // `status` says.
    let out = cli(&coord, &["delete", "obj"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = ok_json(&coord, &["compact"]);
    assert!(r["freed"].as_u64().unwrap() >= 4 && r["freed_bytes"].as_u64().unwrap() >= bytes.len() as u64, "{r}");
    let s = cli(&coord, &["status"]);
    assert!(String::from_utf8_lossy(&s.stdout).contains("Geo compaction: 1 pass(es)"), "{}", String::from_utf8_lossy(&s.stdout));
}

/// `demo --load`: YCSB-A clients run through each method's repair; every row reports their
/// P99 before and during it and the interference degree, and every object still verifies.
#[test]
fn demo_with_load_reports_foreground_p99_and_interference() {
    let out = Command::new(BIN)
        .args(["demo", "--nodes", "10", "--objects", "3", "--size", "600KiB", "--chunk", "64KiB", "--slice", "8KiB"])
        .args(["--link", "400mbit", "--clay", "none", "--methods", "cr,chameleon", "--json"])
        .args(["--load", "--load-clients", "2", "--load-records", "6", "--load-value", "64KiB", "--load-baseline", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let methods = v["methods"].as_array().unwrap();
    let names: Vec<&str> = methods.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(names, ["cr", "chameleon"]);
    for m in methods {
        assert_eq!(m["verified"], true, "{m}");
        let f = &m["foreground"];
        // One second of baseline at tens of operations a second: the clients ran.
        assert!(f["baseline_ops_per_s"].as_f64().unwrap() > 5.0, "{m}");
        assert!(f["during_ops_per_s"].as_f64().unwrap() > 0.0, "{m}");
        assert_eq!(f["errors"], 0, "{m}");
        let (p50, p99) = (f["during_p50_ms"].as_f64().unwrap(), m["foreground_p99_ms"].as_f64().unwrap());
        assert!(p50 > 0.0 && p99 >= p50, "{m}");
        assert_eq!(m["foreground_baseline_p99_ms"], f["baseline_p99_ms"]);
        // T*/T - 1 from the two throughputs.
        let expect = f["baseline_ops_per_s"].as_f64().unwrap() / f["during_ops_per_s"].as_f64().unwrap() - 1.0;
        assert!((m["interference"].as_f64().unwrap() - expect).abs() < 1e-9, "{m}");
        // The delay a trace outlasting the repair sees: at most the repair's length (the
        // clients ran from its start to its end), less when they kept some throughput.
        let delay = f["delay_seconds"].as_f64().unwrap();
        assert!(delay <= m["repair_seconds"].as_f64().unwrap() * 1.5 + 0.05, "{m}");
    }
    let bad = Command::new(BIN).args(["demo", "--load", "--load-clients", "0"]).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--load-clients"));
}

#[test]
fn demo_json_verifies_every_method() {
    let out = Command::new(BIN)
        .args([
            "demo",
            "--nodes",
            "10",
            "--objects",
            "3",
            "--size",
            "300KiB",
            "--chunk",
            "64KiB",
            "--slice",
            "8KiB",
            "--link",
            "400mbit",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let methods = v["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 7, "four methods, ChameleonEC and auto with rs:6,3, then CR with clay:6,3,8");
    assert_eq!(methods[4]["method"], "chameleon");
    // auto names what it chose, one of its seven candidates.
    let chosen = methods[5]["method"].as_str().unwrap();
    let candidates = ["cr+random", "ppr+random", "ecpipe+random", "cr+repairboost", "ppr+repairboost", "ecpipe+repairboost", "chameleon"];
    assert!(chosen.strip_prefix("auto: ").is_some_and(|c| c.split(", then ").all(|c| candidates.contains(&c))), "{chosen}");
    for m in methods {
        assert_eq!(m["verified"], true, "{m}");
        assert!(m["repair_seconds"].as_f64().unwrap() > 0.0);
        assert!(m["lost_chunks"].as_u64().unwrap() > 0);
        assert!(m.get("foreground_p99_ms").is_none() && m.get("interference").is_none(), "no foreground without --load: {m}");
    }
    // CR sends every helper chunk to one destination per lost chunk; ECPipe spreads it.
    let down = |name: &str| methods.iter().find(|m| m["method"] == name).unwrap()["max_download_bytes"].as_u64().unwrap();
    assert!(down("cr") > down("ecpipe"), "CR's destinations download more than ECPipe's");
    // Clay's MSR repair: 8 helpers send 1/3 of a chunk each, against 6 whole chunks for RS,
    // as the nodes count it (per lost chunk, the chunk sizes being within 0.1%).
    let per_lost = |m: &serde_json::Value| m["mean_upload_bytes"].as_f64().unwrap() / m["lost_chunks"].as_f64().unwrap();
    let (rs, clay) = (&methods[0], &methods[6]);
    assert_eq!((rs["code"].as_str(), clay["code"].as_str()), (Some("rs:6,3"), Some("clay:6,3,8")));
    let ratio = per_lost(clay) / per_lost(rs);
    assert!((ratio - 8.0 / 18.0).abs() < 0.03, "clay/rs upload per lost chunk {ratio}, expected 8/18");
}
