//! Parity must equal ISA-L's byte for byte for every known-answer vector in ../shared/vectors.

use kintsugi_codes::{Code, LinearCode};
use std::path::PathBuf;

#[derive(serde::Deserialize)]
struct Vector {
    k: usize,
    m: usize,
    len: usize,
    matrix: Vec<String>,
    data: Vec<String>,
    parity: Vec<String>,
}

fn vectors_path() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vectors/rs_cauchy_isal.jsonl");
    p.exists().then_some(p)
}

#[test]
fn rs_parity_equals_isal_for_every_vector() {
    let Some(path) = vectors_path() else {
        panic!("ISA-L vectors not found: ../shared must sit beside the repository (as in CI)");
    };
    let text = std::fs::read_to_string(path).unwrap();
    let mut count = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Vector = serde_json::from_str(line).unwrap();
        let code = LinearCode::rs(v.k, v.m).unwrap();
        for (i, row) in v.matrix.iter().enumerate() {
            assert_eq!(code.generator_row(v.k + i), hex::decode(row).unwrap(), "k={} m={} row {i}", v.k, v.m);
        }
        let data: Vec<Vec<u8>> = v.data.iter().map(|d| hex::decode(d).unwrap()).collect();
        assert!(data.iter().all(|d| d.len() == v.len));
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let mut parity = vec![vec![0u8; v.len]; v.m];
        let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
        code.encode(&refs, &mut prefs).unwrap();
        for (i, p) in v.parity.iter().enumerate() {
            assert_eq!(parity[i], hex::decode(p).unwrap(), "k={} m={} len={} parity {i}", v.k, v.m, v.len);
        }
        count += 1;
    }
    assert_eq!(count, 30, "every vector in the file was checked");
}
