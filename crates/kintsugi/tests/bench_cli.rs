//! `kintsugi bench codec --json` keeps its contract: the fields scripts read, positive rates,
//! every available kernel selectable, an unknown kernel refused. (Speed itself is judged by
//! running the benchmark, never by a test.)

use std::process::Command;

fn bench(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "codec", "--json", "--seconds", "0.01", "--runs", "1", "--shard-size", "64KiB"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn json_has_required_fields_for_every_kernel() {
    for kernel in ["scalar", "ssse3", "avx2", "gfni", "avx512", "gfni512"] {
        let out = bench(&["--kernel", kernel]);
        let available = kintsugi_gf::Kernel::available().iter().any(|k| k.name() == kernel);
        if !available {
            assert!(!out.status.success(), "{kernel} is not on this CPU and must be refused");
            eprintln!("note: skipping bench with kernel {kernel}: not supported by this CPU");
            continue;
        }
        assert!(out.status.success(), "{kernel}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["kernel"], kernel);
        for f in ["mad_gbps", "encode_rs10_4_gbps", "decode_rs10_4_gbps", "repair_rs10_4_gbps"] {
            let x = v[f].as_f64().unwrap_or_else(|| panic!("{f} missing"));
            assert!(x > 0.0 && x.is_finite(), "{f} = {x}");
        }
    }
    let out = bench(&["--kernel", "neon"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The Clay benchmark times the structured repair and the dense terms on the same reads
/// (each checked against the lost chunk before its rate counts), and says how many
/// multiply-adds per rebuilt byte the terms take: Clay(4,2,5)'s terms have at least one
/// per helper sub-chunk read, d*beta/alpha = 5/2.
#[test]
fn clay_json_compares_structured_repair_with_terms() {
    let out = bench(&["--code", "clay:4,2,5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for f in ["encode_gbps", "decode_gbps", "repair_gbps", "repair_terms_gbps"] {
        let x = v[f].as_f64().unwrap_or_else(|| panic!("{f} missing"));
        assert!(x > 0.0 && x.is_finite(), "{f} = {x}");
    }
    let per_byte = v["terms_mul_adds_per_byte"].as_f64().unwrap();
    assert!(per_byte >= 2.5, "{per_byte} multiply-adds per byte");
    assert!(v["structured_over_terms"]["median"].as_f64().unwrap() > 0.0);
}

/// ISA-L (Debian's libisal2) loaded into the benchmark: before timing, its encode with its
/// own Cauchy matrix must give our parity, its products with our decoding matrices the lost
/// shards, and its multiply-add ours, for every kernel this CPU has: an independent oracle.
#[test]
fn isal_in_process_agrees_with_every_kernel() {
    let probe = bench(&["--isal", "libisal.so.2"]);
    if !probe.status.success() && String::from_utf8_lossy(&probe.stderr).contains("cannot load ISA-L") {
        eprintln!("note: skipping: ISA-L's library is not installed (apt-get install libisal2)");
        return;
    }
    for k in kintsugi_gf::Kernel::available() {
        for arch in ["auto", "avx2"] {
            let out = bench(&["--isal", "libisal.so.2", "--isal-arch", arch, "--kernel", k.name()]);
            assert!(out.status.success(), "kernel {k}, ISA-L {arch}: {}", String::from_utf8_lossy(&out.stderr));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["isal_arch"], arch);
            for f in ["mad_gbps", "encode_rs10_4_gbps", "decode_rs10_4_gbps", "repair_rs10_4_gbps"] {
                let r = v["ratio"][f]["median"].as_f64().unwrap_or_else(|| panic!("ratio of {f} missing"));
                assert!(r > 0.0 && r.is_finite(), "{f}: {r}");
            }
        }
    }
    let out = bench(&["--isal", "libisal.so.2", "--isal-arch", "neon"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no symbol ec_encode_data_neon"));
    let out = bench(&["--isal-arch", "avx2"]);
    assert!(!out.status.success(), "--isal-arch alone must be refused");
}

#[test]
fn planner_json_has_required_fields() {
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "planner", "--chunks", "60", "--nodes", "40", "--runs", "1", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["plan_seconds"]["median"].as_f64().unwrap() > 0.0);
    assert!(v["timeslots"].as_u64().unwrap() > 0, "RepairBoost plans carry timeslots");
    assert_eq!(v["weighted_path_k"], 10);
}

/// `bench relay` runs three real node processes and a plain forwarder and reports CPU per
/// byte for each role; every repair it times is checked against the parity it rebuilds.
#[test]
fn relay_json_reports_every_role() {
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "relay", "--chunk", "4MiB", "--bytes", "8MiB", "--runs", "2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bytes_per_run"], 8 << 20);
    let roles: Vec<&str> = v["roles"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["source", "relay", "sink"]);
    assert!(v["chain_gbps"]["median"].as_f64().unwrap() > 0.0);
    assert!(v["forwarder_gbps"]["median"].as_f64().unwrap() > 0.0);
    for r in v["roles"].as_array().unwrap() {
        assert!(r["equal_work_ns_per_byte"]["median"].as_f64().unwrap() > 0.0, "{r}");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_kintsugi")).args(["bench", "relay", "--chunk", "1MiB", "--slice", "2MiB"]).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--slice"));
}

/// Slices that straddle the equal-work forwarder's read windows and a short last slice,
/// under every protection, on nodes of one runtime thread: both chains rebuild the parity
/// (each checks its CRC-32C, so a slice put together wrongly fails the run).
#[test]
fn relay_equal_work_rebuilds_odd_slices_under_every_protection() {
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "relay", "--chunk", "4MiB", "--slice", "48KiB", "--bytes", "4MiB", "--runs", "1", "--worker-threads", "1"])
        .args(["--protections", "encrypted,authenticated,open", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["worker_threads"], 1);
    let protections = v["protections"].as_array().unwrap();
    assert_eq!(protections.len(), 3);
    for p in protections {
        // The nodes' CPU comes in clock ticks: a run this short may count none. The
        // equal-work threads' CPU is the scheduler's count now; when it came from getrusage,
        // one role of a run this short read as none in CI, so only their sum must be counted.
        let mut equal_work = 0.0;
        for r in p["roles"].as_array().unwrap() {
            let ns = r["equal_work_ns_per_byte"]["median"].as_f64().unwrap();
            assert!(ns >= 0.0 && ns.is_finite(), "{p}");
            equal_work += ns;
            // A ratio over a reading of zero is reported as none, never as a huge number.
            let over = &r["over_equal_work"];
            assert!(if ns > 0.0 { over["median"].as_f64().is_some_and(|x| x.is_finite()) } else { over.is_null() }, "{p}");
        }
        assert!(equal_work > 0.0, "{p}");
    }
}

/// `bench metrics` runs both sides (node processes and embedded clusters with metrics on
/// and off), scrapes the busy side and reports every ratio; a scrape that failed is counted.
#[test]
fn metrics_json_compares_on_and_off_and_times_scrapes() {
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "metrics", "--chunk", "4MiB", "--bytes", "8MiB", "--object", "1MiB", "--objects", "2", "--runs", "2"])
        .args(["--scrape-ms", "50", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let roles: Vec<&str> = v["relay"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["source", "relay", "sink"]);
    for k in ["put_on_over_off", "get_on_over_off"] {
        assert!(v[k]["median"].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    assert!(v["scrapes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["scrape_failures"], 0, "{v}");
    assert!(v["scrape_ms_max"].as_f64().unwrap() >= v["scrape_ms_p50"].as_f64().unwrap());
}

/// `bench full-node --json` on a small embedded cluster (8 nodes, RS(3,2), six 3 MiB objects
/// in 1 MiB chunks) with `extra` flags (separated by spaces); its report.
fn small_full_node(extra: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "full-node", "--nodes", "8", "--code", "rs:3,2", "--objects", "6", "--size", "3MiB", "--chunk", "1MiB"])
        .args(extra.split_whitespace())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Full-node repair on loopback beside the simulator's replay of the graphs that ran: the
/// replay's busiest link is the one the nodes counted (it is what ran), neither beats the
/// network's lower bound, and the simulated repair does not beat its busiest link.
#[test]
fn full_node_reports_the_simulator_on_the_same_chunks() {
    let v = small_full_node("--methods cr,ecpipe,ppr --link 400mbit --json");
    for m in v["methods"].as_array().unwrap() {
        // By default the nodes gate only store-and-forward graphs (PPR) by their timeslots;
        // the report carries those slots and the simulator replays the graphs under them.
        match m["method"].as_str().unwrap() {
            "ppr" => assert!(m["sim_replay_gated_seconds"].as_f64().unwrap() >= m["bound_seconds"].as_f64().unwrap() * 0.999, "{m}"),
            _ => assert!(m.get("sim_replay_gated_seconds").is_none(), "pipelined graphs ran ungated: {m}"),
        }
        assert_eq!(m["verified"], true);
        let bound = m["bound_seconds"].as_f64().unwrap();
        let sim = m["sim_seconds"].as_f64().unwrap();
        let busiest = m["sim_busiest_link_seconds"].as_f64().unwrap();
        assert!(busiest >= bound * 0.999, "{m}");
        assert!(sim >= busiest * 0.999, "{m}");
        // The fluid model's replay beside it: no faster than the busiest link either, and
        // the same replay, to rounding, for graphs it runs as the slice model does
        // (store-and-forward CR, and PPR under the slots the nodes gated it by).
        let fluid = m["sim_fluid_seconds"].as_f64().unwrap();
        assert!(fluid >= busiest * 0.999, "{m}");
        let same = match m["method"].as_str().unwrap() {
            "cr" => Some(sim),
            "ppr" => m["sim_replay_gated_seconds"].as_f64(),
            _ => None,
        };
        if let Some(same) = same {
            assert!((fluid / same - 1.0).abs() < 1e-9, "{m}");
        }
        assert_eq!(m["all_sim_fluid_seconds"].as_array().unwrap().len(), m["all_seconds"].as_array().unwrap().len(), "{m}");
        assert!(m["repair_seconds"].as_f64().unwrap() >= bound * 0.999, "{m}");
        // Loopback's token buckets count payload: the payload bound is the bound.
        assert_eq!(m["payload_bound_seconds"], m["bound_seconds"], "{m}");
        assert_eq!(m["payload_ratio"], m["ratio"], "{m}");
        assert!(m["sim_slotted_seconds"].as_f64().unwrap() >= bound * 0.999, "repairboost has timeslots: {m}");
        let counted = m["busiest_link_seconds"].as_f64().unwrap();
        assert!(
            (counted - busiest).abs() <= 0.02 * busiest,
            "nodes counted {counted} s on their busiest link, the replay {busiest} s: {m}"
        );
        // From the first chunk done to the last: no chunk is done before one chunk (1 MiB)
        // has crossed a 400 Mbit/s link, on the cluster or in the simulator.
        let one_chunk = (1u64 << 20) as f64 / 50e6;
        let spread = m["finish_spread_seconds"].as_f64().unwrap();
        assert!(spread >= 0.0 && m["repair_seconds"].as_f64().unwrap() - spread >= one_chunk * 0.99, "{m}");
        let sim_spread = m["sim_finish_spread_seconds"].as_f64().unwrap();
        let replay = m["sim_replay_gated_seconds"].as_f64().unwrap_or(sim);
        assert!(sim_spread >= 0.0 && replay - sim_spread >= one_chunk * 0.99, "{m}");
    }
}

/// Full-node repair under a YCSB-A foreground: the clients' operations before and during the
/// repair are counted, none fails, every object verifies; bad load flags are refused.
#[test]
fn full_node_under_foreground_load_reports_interference() {
    let v =
        small_full_node("--methods ecpipe --link 200mbit --load-clients 2 --load-records 8 --load-value 64KiB --load-baseline 1 --json");
    let m = &v["methods"][0];
    assert_eq!(m["verified"], true);
    let f = &m["foreground"];
    assert!(f["baseline_ops_per_s"].as_f64().unwrap() > 0.0, "{f}");
    assert!(f["during_ops_per_s"].as_f64().unwrap() > 0.0, "{f}");
    assert!(f["interference"].as_f64().unwrap().is_finite(), "{f}");
    assert_eq!(f["errors"], 0, "{f}");
    assert!(m.get("sim_seconds").is_none(), "the simulator has no foreground");
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args(["bench", "full-node", "--load-clients", "1", "--load-records", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--load-records"));
}

/// Full-node repair on chunk stores over emulated HDDs: every rebuilt chunk verified, and the
/// repair takes at least what the disks must do (each of k helper reads per lost chunk pays
/// a positioning and the chunk at the sequential rate, spread over the n-1 survivors).
#[test]
fn full_node_on_emulated_hdds_is_exact_and_pays_the_disks() {
    let v = small_full_node("--methods cr --link 1gbit --hdd-seek-ms 30 --hdd-bw 20MB/s --json");
    let m = &v["methods"][0];
    assert_eq!(m["verified"], true);
    let lost = m["lost_chunks"].as_f64().unwrap();
    assert!(lost >= 1.0);
    let disk_bound = lost * 3.0 * (0.030 + (1 << 20) as f64 / 20e6) / 7.0;
    let secs = m["repair_seconds"].as_f64().unwrap();
    assert!(secs >= disk_bound, "{secs} s < the disks' {disk_bound} s");
    assert_eq!(v["hdd"][0].as_f64(), Some(0.030));
    assert!(m.get("sim_seconds").is_none(), "the simulator does not model the disks");
    for bad in [&["--hdd-seek-ms", "-1"][..], &["--testbed", "--hdd-seek-ms", "8"], &["--hdd-bw", "0MB/s"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_kintsugi")).args(["bench", "full-node"]).args(bad).output().unwrap();
        assert!(!out.status.success(), "{bad:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}

/// `--queues` needs the testbed, names one of its values, and excludes `--repair-class`
/// (both are the links' qdisc); each is refused before anything starts.
#[test]
fn full_node_refuses_queues_it_cannot_make() {
    let cases: [(&[&str], &str); 3] = [
        (&["--queues", "peer"], "--queues applies to the testbed"),
        (&["--testbed", "--queues", "fair"], "invalid value 'fair'"),
        (&["--testbed", "--queues", "peer", "--repair-class", "0.1"], "cannot be used with"),
    ];
    for (bad, says) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_kintsugi")).args(["bench", "full-node"]).args(bad).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says) && !err.contains("panicked"), "{bad:?}: {err}");
    }
}

/// `bench geo --json` on a tiny scaled-down run: every scheme verified (every object read
/// back after recovery, every range read checked), recovery measured, and the fields scripts
/// read present; Geo's degraded reads rebuild chunks on node 0, which held some.
#[test]
fn geo_bench_verifies_every_scheme() {
    let out = Command::new(env!("CARGO_BIN_EXE_kintsugi"))
        .args([
            "bench",
            "geo",
            "--json",
            "--objects",
            "24",
            "--scale",
            "512",
            "--schemes",
            "geo,rs,con",
            "--reads",
            "2",
            "--ranges",
            "3",
            "--pgs",
            "1",
            "--hdd-bw",
            "400MB/s",
            "--client-link",
            "40mbit",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        // Every timed read went on through the 5 MB/s client link (less one burst).
        let sent = r["read_bytes"].as_f64().unwrap();
        assert!(sent > 0.0, "{r}");
        for t in ["normal_read_seconds", "degraded_read_seconds"] {
            assert!(r[t].as_f64().unwrap() >= (sent - 131_072.0 * r["objects_read"].as_f64().unwrap()) / 5e6, "{t}: {r}");
        }
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["lost_chunks"].as_u64().unwrap() > 0, "node 0 held chunks: {r}");
        assert!(r["recovery_mb_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["degraded_over_normal"].as_f64().unwrap() > 0.0, "{r}");
        // The helpers read from their emulated disks, which report the time they were busy.
        assert!(r["recovery_disk_read_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(r["recovery_disk_busiest_seconds"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(rows[1]["recovery_vs_rs"].as_f64(), Some(1.0));
    assert!(rows[0]["pipelining_gain"].is_number(), "extent layouts report the pipelining gain");
    let (gain, cut) = (rows[0]["pipelining_gain"].as_f64().unwrap(), rows[0]["pipelining_cut"].as_f64().unwrap());
    assert!((cut - gain / (1.0 + gain)).abs() < 1e-9, "the cut is 1 - pipelined / one chunk at a time: {cut} against a gain of {gain}");
    assert!(rows[1]["pipelining_gain"].is_null(), "the Stripe layout has no chunk pipeline");
    let bad = Command::new(env!("CARGO_BIN_EXE_kintsugi")).args(["bench", "geo", "--schemes", "raid5"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scheme"));
}
