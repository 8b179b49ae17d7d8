//! Clay: parity equal to Ceph's clay plugin (isa, cauchy) for every known-answer vector,
//! and every decode and repair byte-exact against the original chunks.

use kintsugi_codes::{ClayCode, Code, CodeError, CodeSpec, LinearCode};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

#[derive(serde::Deserialize)]
struct Vector {
    k: usize,
    m: usize,
    d: usize,
    len: usize,
    sub_chunks: usize,
    data: Vec<String>,
    parity: Vec<String>,
}

fn vectors() -> Vec<Vector> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vectors/clay_ceph_isa.jsonl");
    let text = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("Ceph clay vectors at {}: {e} (../shared must sit beside the repository)", p.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn encode(code: &dyn Code, data: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let len = data[0].len();
    let mut parity = vec![vec![0u8; len]; code.n() - code.k()];
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
    code.encode(&refs, &mut prefs).unwrap();
    data.iter().cloned().chain(parity).collect()
}

#[test]
fn parity_equals_ceph_for_every_vector() {
    let vs = vectors();
    assert!(vs.len() >= 10, "expected the shipped vectors");
    for v in &vs {
        let spec = CodeSpec::Clay { k: v.k, m: v.m, d: v.d };
        let code = spec.build().unwrap();
        assert_eq!(code.sub_chunks(), v.sub_chunks, "{spec}");
        let data: Vec<Vec<u8>> = v.data.iter().map(|h| hex::decode(h).unwrap()).collect();
        assert!(data.iter().all(|d| d.len() == v.len));
        let all = encode(code.as_ref(), &data);
        for (i, want) in v.parity.iter().enumerate() {
            assert_eq!(hex::encode(&all[v.k + i]), *want, "{spec} len {}: parity {i} differs from Ceph's", v.len);
        }
    }
}

#[test]
fn d_equal_k_is_our_rs() {
    let clay = ClayCode::new(6, 3, 6).unwrap();
    let rs = LinearCode::rs(6, 3).unwrap();
    let data: Vec<Vec<u8>> = (0..6).map(|i| (0..100).map(|j| (i * 37 + j * 11) as u8).collect()).collect();
    assert_eq!(encode(&clay, &data), encode(&rs, &data));
}

fn random_stripe(code: &dyn Code, len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let data: Vec<Vec<u8>> = (0..code.k()).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
    encode(code, &data)
}

/// Every single loss, repaired from d helpers (random choice around the required column)
/// through the structured path and through the repair equation.
fn check_repairs(code: &ClayCode, all: &[Vec<u8>], seed: u64) {
    let n = code.n();
    let alpha = code.sub_chunks();
    let sub = all[0].len() / alpha;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for lost in 0..n {
        let mut avail: Vec<usize> = (0..n).filter(|&i| i != lost).collect();
        // Drop random non-required nodes down to d (the column stays).
        let helpers0 = code.choose_helpers(lost, &avail).unwrap();
        assert_eq!(helpers0.len(), code.d());
        while avail.len() > code.d() {
            let i = rng.random_range(0..avail.len());
            let cand = avail[i];
            avail.remove(i);
            if code.choose_helpers(lost, &avail).map(|h| h.len()) != Ok(code.d()) {
                avail.insert(i, cand);
            }
        }
        let helpers = code.choose_helpers(lost, &avail).unwrap();
        let eq = code.repair_equation(lost, &helpers).unwrap();
        assert_eq!(eq.helpers(), helpers, "every helper contributes");
        // Traffic: d * beta sub-chunks.
        assert_eq!(eq.read_bytes(all[0].len()).unwrap(), code.d() * code.beta() * sub);
        let chunks: Vec<&[u8]> = helpers.iter().map(|&h| all[h].as_slice()).collect();
        assert_eq!(eq.rebuild(&chunks).unwrap(), all[lost], "equation, lost {lost}, helpers {helpers:?}");
        // Structured path on exactly the bytes the equation reads.
        let reads: Vec<Vec<u8>> = eq
            .terms
            .iter()
            .map(|t| t.byte_ranges(alpha, all[0].len()).unwrap().into_iter().flat_map(|r| all[t.helper][r].to_vec()).collect())
            .collect();
        let refs: Vec<&[u8]> = reads.iter().map(|r| r.as_slice()).collect();
        let mut out = vec![0u8; all[0].len()];
        code.repair(lost, &helpers, &refs, &mut out).unwrap();
        assert_eq!(out, all[lost], "structured repair, lost {lost}, helpers {helpers:?}");
    }
}

/// Random erasure patterns up to m, decoded.
fn check_decodes(code: &dyn Code, all: &[Vec<u8>], seed: u64, patterns: usize) {
    let n = code.n();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for _ in 0..patterns {
        let e = rng.random_range(1..=code.tolerance());
        let mut s: Vec<Option<Vec<u8>>> = all.iter().cloned().map(Some).collect();
        let mut erased = Vec::new();
        while erased.len() < e {
            let i = rng.random_range(0..n);
            if !erased.contains(&i) {
                erased.push(i);
                s[i] = None;
            }
        }
        code.decode(&mut s).unwrap();
        for i in 0..n {
            assert_eq!(s[i].as_deref(), Some(all[i].as_slice()), "decode of {erased:?}: shard {i}");
        }
    }
}

const GEOMETRIES: [(usize, usize, usize); 6] = [(4, 2, 5), (6, 3, 8), (5, 3, 6), (8, 4, 11), (10, 4, 13), (3, 2, 4)];

#[test]
fn every_geometry_repairs_and_decodes() {
    for (gi, &(k, m, d)) in GEOMETRIES.iter().enumerate() {
        let code = ClayCode::new(k, m, d).unwrap();
        for mult in [1usize, 3, 7] {
            let len = code.sub_chunks() * mult;
            let all = random_stripe(&code, len, (gi * 10 + mult) as u64);
            check_repairs(&code, &all, mult as u64);
            check_decodes(&code, &all, mult as u64, 40);
        }
    }
}

/// Encode reads its sources in place once sub-chunks reach 16 KiB and stages them below
/// (two code paths): both must give the parity the decoder (always staged, and checked
/// against Ceph above) rebuilds from the data.
#[test]
fn encode_in_place_and_staged_agree_with_decode() {
    for (k, m, d) in [(4, 2, 5), (5, 3, 6)] {
        let code = ClayCode::new(k, m, d).unwrap();
        for sub in [(16 << 10) - 8, 16 << 10, (16 << 10) + 24] {
            let all = random_stripe(&code, code.sub_chunks() * sub, sub as u64);
            let mut s: Vec<Option<Vec<u8>>> = all.iter().cloned().enumerate().map(|(i, c)| (i < k).then_some(c)).collect();
            code.decode(&mut s).unwrap();
            for i in k..k + m {
                assert_eq!(s[i].as_deref(), Some(all[i].as_slice()), "clay:{k},{m},{d} sub-chunk {sub}: parity {i}");
            }
        }
    }
}

#[test]
fn every_erasure_pattern_of_small_codes_decodes() {
    for (k, m, d) in [(4, 2, 5), (3, 2, 4), (5, 3, 6)] {
        let code = ClayCode::new(k, m, d).unwrap();
        let n = code.n();
        let all = random_stripe(&code, code.sub_chunks() * 5, 7);
        for mask in 1u32..(1 << n) {
            if mask.count_ones() as usize > m {
                continue;
            }
            let mut s: Vec<Option<Vec<u8>>> = all.iter().cloned().map(Some).collect();
            (0..n).filter(|i| mask & (1 << i) != 0).for_each(|i| s[i] = None);
            code.decode(&mut s).unwrap();
            assert!((0..n).all(|i| s[i].as_deref() == Some(all[i].as_slice())), "clay:{k},{m},{d} mask {mask:b}");
        }
    }
}

#[test]
fn too_few_helpers_fall_back_to_a_full_decode() {
    let code = ClayCode::new(4, 2, 5).unwrap();
    let all = random_stripe(&code, code.sub_chunks() * 4, 3);
    // Shard 0's column companion (shard 1) is gone: no MSR repair, k whole chunks instead.
    let helpers = code.choose_helpers(0, &[2, 3, 4, 5]).unwrap();
    assert_eq!(helpers.len(), 4);
    let eq = code.repair_equation(0, &helpers).unwrap();
    assert_eq!(eq.read_bytes(all[0].len()).unwrap(), 4 * all[0].len());
    let chunks: Vec<&[u8]> = eq.helpers().iter().map(|&h| all[h].as_slice()).collect();
    assert_eq!(eq.rebuild(&chunks).unwrap(), all[0]);
}

#[test]
fn bad_input_is_a_clear_error() {
    let code = ClayCode::new(4, 2, 5).unwrap();
    let a = vec![0u8; 12];
    let mut p = [vec![0u8; 12], vec![0u8; 12]];
    let mut pr: Vec<&mut [u8]> = p.iter_mut().map(|x| x.as_mut_slice()).collect();
    let err = code.encode(&[&a, &a, &a, &a], &mut pr).unwrap_err();
    assert!(matches!(err, CodeError::BadChunkLength { len: 12, sub_chunks: 8 }), "{err}");
    assert!(err.to_string().contains("multiple"));
    let mut s: Vec<Option<Vec<u8>>> = (0..6).map(|i| (i > 2).then(|| vec![0u8; 16])).collect();
    assert!(matches!(code.decode(&mut s), Err(CodeError::Unrecoverable { .. })));
    assert!(matches!(code.repair_equation(0, &[1, 2]), Err(CodeError::HelpersInsufficient { .. })));
    assert!("clay:4,2,9".parse::<CodeSpec>().unwrap().build().unwrap_err().to_string().contains("d (helpers per repair)"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Repair graphs stream windows of each sub-chunk: any slice size, dividing a
    /// sub-chunk or not, gives the same bytes (through the repair equation's windows).
    #[test]
    fn windows_that_do_not_divide_a_sub_chunk(geo in 0usize..6, mult in 1usize..9, window in 1usize..40, seed: u64) {
        let (k, m, d) = GEOMETRIES[geo];
        let code = ClayCode::new(k, m, d).unwrap().with_window(window);
        let all = random_stripe(&code, code.sub_chunks() * mult, seed);
        let lost = (seed % code.n() as u64) as usize;
        let avail: Vec<usize> = (0..code.n()).filter(|&i| i != lost).collect();
        let helpers = code.choose_helpers(lost, &avail).unwrap();
        let eq = code.repair_equation(lost, &helpers).unwrap();
        let chunks: Vec<&[u8]> = helpers.iter().map(|&h| all[h].as_slice()).collect();
        prop_assert_eq!(eq.rebuild(&chunks).unwrap(), all[lost].clone());
        check_decodes(&code, &all, seed, 3);
    }
}

/// More geometries than the shipped vectors, against Ceph's own tool when it is installed
/// (Debian: ceph-base, ceph-osd); skipped with a message otherwise.
#[test]
fn parity_equals_ceph_tool_for_more_geometries() {
    let tool = "ceph-erasure-code-tool";
    if std::process::Command::new(tool).arg("--help").output().is_err() {
        eprintln!("note: {tool} is not installed (apt-get install ceph-base ceph-osd): extra Ceph geometries skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (k, m, d) in [(7, 3, 9), (9, 3, 11), (12, 4, 15), (5, 4, 7), (6, 2, 7), (10, 4, 11)] {
        let profile = format!("plugin=clay,k={k},m={m},d={d},scalar_mds=isa,technique=cauchy");
        let run = |args: &[&str]| {
            let out = std::process::Command::new(tool).args(args).env("CEPH_CONF", "/dev/null").output().unwrap();
            assert!(out.status.success(), "{tool} {args:?} failed");
            String::from_utf8(out.stdout).unwrap()
        };
        let len: usize = run(&["calc-chunk-size", &profile, "1"]).trim().parse().unwrap();
        let data: Vec<u8> = (0..k * len).map(|i| (i * 131 + k * 7 + i / 251) as u8).collect();
        let file = dir.path().join(format!("obj{k}{m}{d}"));
        std::fs::write(&file, &data).unwrap();
        let shards: Vec<String> = (0..k + m).map(|i| i.to_string()).collect();
        run(&["encode", &profile, &len.to_string(), &shards.join(","), file.to_str().unwrap()]);
        let code = ClayCode::new(k, m, d).unwrap();
        let ours = encode(&code, &data.chunks(len).map(|c| c.to_vec()).collect::<Vec<_>>());
        for (i, want) in ours.iter().enumerate() {
            let theirs = std::fs::read(format!("{}.{i}", file.display())).unwrap();
            assert!(theirs == *want, "clay:{k},{m},{d} chunk {i} of {len} bytes differs from Ceph's");
        }
    }
}
