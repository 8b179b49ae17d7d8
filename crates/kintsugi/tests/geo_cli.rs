//! `kintsugi geo`: the partitioner's JSON contract on the paper's examples, the workload
//! figures, the layout simulation's orderings, and clear errors for bad input.

use std::process::Command;

fn kintsugi(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kintsugi")).args(args).output().unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = kintsugi(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn partition_json_gives_the_papers_examples() {
    const MIB: u64 = 1 << 20;
    let v = json(&["geo", "partition", "73.5MiB", "--s0", "4MiB", "--q", "2", "--json"]);
    assert_eq!(v["remainder"].as_u64(), Some(3 * MIB / 2));
    let chunks: Vec<u64> = v["chunks"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() / MIB).collect();
    assert_eq!(chunks, vec![4, 4, 8, 8, 16, 32]);
    let v = json(&["geo", "partition", "20MiB", "--json"]);
    assert_eq!(v["chunks"].as_array().unwrap().len(), 3);
    let v = json(&["geo", "partition", "4GiB", "--json"]);
    assert_eq!(v["chunks"].as_array().unwrap().iter().filter(|c| c.as_u64() == Some(256 * MIB)).count(), 15);
}

#[test]
fn workload_json_reports_the_trace_figures() {
    let v = json(&["geo", "workload", "--workload", "w1", "--s0", "16MiB", "--objects", "50000", "--sweep-q", "--json"]);
    let share = v["small_bucket_share"].as_f64().unwrap();
    assert!((share / 0.094 - 1.0).abs() < 0.15, "{share}");
    assert!(v["avg_chunk_bytes"].as_f64().unwrap() > 40e6);
    assert_eq!(v["q_sweep"].as_array().unwrap().len(), 8);
}

/// The simulation at a tenth of the paper's disk: Geo-4M recovers faster than RS, LRC and
/// Stripe-Max, and its degraded read stays within 5% of a normal read while Con-256M's
/// does not.
#[test]
fn sim_orders_the_layouts_as_the_paper_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (csv, svg) = (tmp.path().join("geo.csv"), tmp.path().join("geo.svg"));
    let v = json(&[
        "geo",
        "sim",
        "--disk-bytes",
        "25GB",
        "--schemes",
        "geo-4m,rs,lrc,stripe-max,con-256m",
        "--reads",
        "300",
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--json",
    ]);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 6, "{csv}");
    assert!(csv.lines().nth(1).unwrap().starts_with("geo-4m,"));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("stripe-max"));
    let rows = v["rows"].as_array().unwrap();
    let get = |n: &str| rows.iter().find(|r| r["scheme"] == n).unwrap();
    let tp = |n: &str| get(n)["throughput"].as_f64().unwrap();
    assert!(tp("geo-4m") > 1.3 * tp("rs"), "{} vs {}", tp("geo-4m"), tp("rs"));
    assert!(tp("geo-4m") > tp("lrc") && tp("geo-4m") > tp("stripe-max"));
    assert!(get("geo-4m")["degraded_over_normal"].as_f64().unwrap() < 1.05);
    assert!(get("con-256m")["degraded_over_normal"].as_f64().unwrap() > 1.2);
    assert!((get("rs")["read_traffic"].as_f64().unwrap() - 10.0).abs() < 1e-9);
    assert_eq!(v["pipelining_gain"].as_array().unwrap().len(), 3);
}

/// Figure 4's trend from the command: recovery bandwidth and degraded read time both grow
/// with the chunk, from 4 MiB to 256 MiB.
#[test]
fn chunk_size_json_shows_figure_4s_tension() {
    let v = json(&["geo", "chunk-size", "--json"]);
    let pts = v.as_array().unwrap();
    assert_eq!(pts.len(), 7);
    let first = &pts[0];
    let last = &pts[6];
    assert_eq!(first["chunk_bytes"].as_u64(), Some(4 << 20));
    assert!(last["recovery_read_bw"].as_f64().unwrap() > 2.5 * first["recovery_read_bw"].as_f64().unwrap());
    assert!(last["degraded_read_s"].as_f64().unwrap() > 1.5 * first["degraded_read_s"].as_f64().unwrap());
}

#[test]
fn bad_input_is_a_clear_error() {
    for args in [
        &["geo", "partition", "1MiB", "--s0", "0"][..],
        &["geo", "partition", "1MiB", "--q", "0"],
        &["geo", "partition", "1MiB", "--s0", "1GiB"],
        &["geo", "partition", "lots"],
        &["geo", "workload", "--workload", "w3"],
        &["geo", "workload", "--objects", "0"],
        &["geo", "workload", "--trace", "/nonexistent/cdf.csv"],
        &["geo", "sim", "--schemes", "geo-4"],
        &["geo", "sim", "--nodes", "8"],
        &["geo", "sim", "--seek-ms", "-1"],
        &["geo", "sim", "--reads", "0"],
        &["geo", "chunk-size", "--seek-ms", "-3"],
        &["geo", "chunk-size", "--disk-bw", "0MB/s"],
    ] {
        let out = kintsugi(args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.trim().is_empty(), "{args:?}: no message");
    }
}
