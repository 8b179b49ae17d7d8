//! The `kintsugi codec` commands on real files: round trips for every code and odd sizes,
//! repair through every graph shape, corruption detection, and clear errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kintsugi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kintsugi")).args(args).output().expect("run kintsugi")
}

fn ok(args: &[&str]) -> String {
    let out = kintsugi(args);
    assert!(out.status.success(), "kintsugi {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command that must fail with exit code 1 and a message containing `want`.
fn fails(args: &[&str], want: &str) {
    let out = kintsugi(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "kintsugi {args:?} should fail; stderr: {err}");
    assert!(err.contains(want), "kintsugi {args:?}: expected '{want}' in: {err}");
    assert!(!err.contains("panicked"), "kintsugi {args:?} panicked: {err}");
}

fn random_file(dir: &Path, name: &str, size: usize, seed: u64) -> PathBuf {
    let mut x = seed | 1;
    let bytes: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn round_trip_every_code_and_odd_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    for code in ["rs:10,4", "rs:3,2", "lrc:6,2,2", "rs:2,1", "clay:4,2,5", "clay:5,3,6"] {
        for size in [0usize, 1, 7, 4095, 100_003] {
            let f = random_file(tmp.path(), &format!("in{size}"), size, size as u64 + 3);
            let out = tmp.path().join(format!("sh-{}-{size}", code.replace([':', ','], "_")));
            ok(&["codec", "encode", s(&f), "--code", code, "--out", s(&out), "--block", "1000"]);
            let manifest = out.join(format!("in{size}.manifest.json"));
            let back = tmp.path().join("back");
            ok(&["codec", "decode", s(&manifest), "--out", s(&back), "--block", "777"]);
            assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&f).unwrap(), "{code} size {size}");
        }
    }
}

#[test]
fn decode_survives_lost_and_corrupted_shards_up_to_tolerance() {
    let tmp = tempfile::tempdir().unwrap();
    let f = random_file(tmp.path(), "obj", 250_001, 11);
    let out = tmp.path().join("sh");
    ok(&["codec", "encode", s(&f), "--code", "rs:6,3", "--out", s(&out)]);
    let manifest = out.join("obj.manifest.json");
    std::fs::remove_file(out.join("obj.01")).unwrap();
    // Flip one byte in the middle of shard 4: the CRC must catch it.
    let p4 = out.join("obj.04");
    let mut b = std::fs::read(&p4).unwrap();
    b[1234] ^= 0x40;
    std::fs::write(&p4, b).unwrap();
    // Truncate shard 7: shards of unequal length are not used.
    let p7 = out.join("obj.07");
    let b = std::fs::read(&p7).unwrap();
    std::fs::write(&p7, &b[..b.len() - 1]).unwrap();
    let back = tmp.path().join("back");
    let res = kintsugi(&["codec", "decode", s(&manifest), "--out", s(&back)]);
    assert!(res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("shard 1 (obj.01): missing"), "{err}");
    assert!(err.contains("shard 4 (obj.04): checksum mismatch"), "{err}");
    assert!(err.contains("shard 7 (obj.07): wrong length"), "{err}");
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&f).unwrap());
    // A fourth loss is beyond RS(6,3): clear error, and no output file is left behind.
    std::fs::remove_file(out.join("obj.00")).unwrap();
    let back2 = tmp.path().join("back2");
    fails(&["codec", "decode", s(&manifest), "--out", s(&back2)], "tolerates 3");
    assert!(!back2.exists());
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn repair_with_every_method_restores_exact_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let f = random_file(tmp.path(), "obj", 123_457, 5);
    for code in ["rs:10,4", "lrc:6,2,2"] {
        let out = tmp.path().join(code.replace([':', ','], "_"));
        ok(&["codec", "encode", s(&f), "--code", code, "--out", s(&out)]);
        let manifest = out.join("obj.manifest.json");
        let originals: Vec<Vec<u8>> = (0..14).map_while(|i| std::fs::read(out.join(format!("obj.{i:02}"))).ok()).collect();
        for (method, slice) in [("cr", "32KiB"), ("ppr", "1"), ("ecpipe", "1000"), ("ecpipe-cyclic", "4097")] {
            for lost in [0usize, 3, originals.len() - 1] {
                let p = out.join(format!("obj.{lost:02}"));
                std::fs::remove_file(&p).unwrap();
                let report = ok(&["codec", "repair", s(&manifest), "--method", method, "--slice", slice, "--block", "10000", "--json"]);
                let v: serde_json::Value = serde_json::from_str(&report).unwrap();
                assert_eq!(v[0]["index"], lost);
                assert_eq!(v[0]["verified"], true);
                assert_eq!(std::fs::read(&p).unwrap(), originals[lost], "{code} {method} shard {lost}");
            }
        }
        // Several lost shards in one stripe: each repaired one helps the next.
        for i in 0..3 {
            std::fs::remove_file(out.join(format!("obj.{i:02}"))).unwrap();
        }
        ok(&["codec", "repair", s(&manifest)]);
        for (i, original) in originals.iter().enumerate().take(3) {
            assert_eq!(&std::fs::read(out.join(format!("obj.{i:02}"))).unwrap(), original);
        }
        assert!(ok(&["codec", "repair", s(&manifest)]).contains("nothing to repair"));
    }
}

#[test]
fn bad_input_gets_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let f = random_file(tmp.path(), "obj", 5000, 9);
    let out = tmp.path().join("sh");
    fails(&["codec", "encode", s(&f), "--code", "rs:0,4", "--out", s(&out)], "k must be at least 1");
    fails(&["codec", "encode", s(&f), "--code", "rs:250,10", "--out", s(&out)], "exceed GF(2^8)'s limit");
    fails(&["codec", "encode", s(&f), "--code", "lrc:10,3,2", "--out", s(&out)], "must divide k");
    fails(&["codec", "encode", s(&tmp.path().join("nope")), "--out", s(&out)], "cannot open");
    fails(&["codec", "encode", s(tmp.path()), "--out", s(&out)], "not a regular file");
    // clap's own usage errors exit with 2; the message must still be clear.
    let bad_code = kintsugi(&["codec", "encode", s(&f), "--code", "rs:ten,4", "--out", s(&out)]);
    assert_eq!(bad_code.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_code.stderr).contains("'ten' is not a number"));

    ok(&["codec", "encode", s(&f), "--code", "rs:4,2", "--out", s(&out)]);
    let manifest = out.join("obj.manifest.json");
    fails(&["codec", "repair", s(&manifest), "--lost", "6"], "out of range");
    fails(&["codec", "decode", s(&tmp.path().join("missing.json")), "--out", s(&tmp.path().join("x"))], "cannot read manifest");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let garbage = tmp.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    fails(&["codec", "decode", s(&garbage), "--out", s(&tmp.path().join("x"))], "not a valid kintsugi manifest");
    for (from, to, want) in [
        ("\"obj.03\"", "\"../obj.03\"", "plain name"),
        ("\"rs:4,2\"", "\"rs:4,3\"", "do not match"),
        ("\"format\": 1", "\"format\": 9", "format 9 is not supported"),
    ] {
        let bad = out.join("bad.manifest.json");
        assert!(text.contains(from), "{from}");
        std::fs::write(&bad, text.replace(from, to)).unwrap();
        fails(&["codec", "decode", s(&bad), "--out", s(&tmp.path().join("x"))], want);
    }
    // Corrupted beyond repair: three of six shards gone.
    for i in 0..3 {
        std::fs::remove_file(out.join(format!("obj.{i:02}"))).unwrap();
    }
    fails(&["codec", "repair", s(&manifest)], "cannot repair shard");
}

#[test]
fn clay_repairs_read_d_over_q_chunks_and_decode_byte_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let f = random_file(tmp.path(), "obj", 1_000_003, 11);
    let out = tmp.path().join("sh");
    ok(&["codec", "encode", s(&f), "--code", "clay:10,4,13", "--out", s(&out), "--block", "20000"]);
    let manifest = out.join("obj.manifest.json");
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let shard_len = m["shard_len"].as_u64().unwrap();
    assert_eq!(shard_len % 256, 0, "shards are whole sub-chunks");
    for (lost, method) in [(0usize, "cr"), (7, "ppr"), (12, "ecpipe"), (13, "cr")] {
        let shard = out.join(format!("obj.{lost:02}"));
        let before = std::fs::read(&shard).unwrap();
        std::fs::remove_file(&shard).unwrap();
        let json = ok(&["codec", "repair", s(&manifest), "--method", method, "--slice", "100", "--block", "30000", "--json"]);
        let r: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(r[0]["index"], lost);
        // 13 helpers x 64 of 256 sub-chunks: 13/4 of a shard, measured by what was read.
        assert_eq!(r[0]["helper_bytes_read"].as_u64().unwrap(), 13 * shard_len / 4, "shard {lost} with {method}");
        assert_eq!(std::fs::read(&shard).unwrap(), before, "shard {lost} with {method}");
    }
    for lost in [1, 5, 10, 13] {
        std::fs::remove_file(out.join(format!("obj.{lost:02}"))).unwrap();
    }
    let back = tmp.path().join("back");
    ok(&["codec", "decode", s(&manifest), "--out", s(&back)]);
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&f).unwrap());
    fails(&["codec", "encode", s(&f), "--code", "clay:10,4,15", "--out", s(&out)], "d (helpers per repair)");
}
