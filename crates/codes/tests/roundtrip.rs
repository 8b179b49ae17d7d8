//! Byte-exact decode and repair for RS and LRC: every single failure, random multi-failures
//! up to the tolerance, odd lengths; and clear errors beyond it.

use kintsugi_codes::{Code, CodeError, CodeSpec};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const SPECS: &[&str] = &[
    "rs:2,1",
    "rs:3,2",
    "rs:4,2",
    "rs:6,3",
    "rs:10,4",
    "rs:12,4",
    "rs:28,4",
    "rs:20,5",
    "lrc:6,2,2",
    "lrc:12,2,2",
    "lrc:4,2,1",
    "lrc:10,2,3",
];

fn stripe(code: &dyn Code, len: usize, rng: &mut impl Rng) -> Vec<Vec<u8>> {
    let data: Vec<Vec<u8>> = (0..code.k()).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut parity = vec![vec![0u8; len]; code.n() - code.k()];
    let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
    code.encode(&refs, &mut prefs).unwrap();
    data.into_iter().chain(parity).collect()
}

#[test]
fn every_single_failure_repairs_and_decodes() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for spec in SPECS {
        let code = spec.parse::<CodeSpec>().unwrap().build().unwrap();
        let shards = stripe(code.as_ref(), 1031, &mut rng);
        let all: Vec<usize> = (0..code.n()).collect();
        for lost in 0..code.n() {
            let helpers = code.choose_helpers(lost, &all).unwrap();
            let eq = code.repair_equation(lost, &helpers).unwrap();
            let hd: Vec<&[u8]> = eq.helpers().iter().map(|&h| shards[h].as_slice()).collect();
            assert_eq!(eq.rebuild(&hd).unwrap(), shards[lost], "{spec} repair of {lost}");
            let mut s: Vec<Option<Vec<u8>>> = shards.iter().cloned().map(Some).collect();
            s[lost] = None;
            code.decode(&mut s).unwrap();
            assert_eq!(s[lost].as_ref().unwrap(), &shards[lost], "{spec} decode of {lost}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_erasures_up_to_tolerance(spec_i in 0..SPECS.len(), len in 0usize..300, seed: u64) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let code = SPECS[spec_i].parse::<CodeSpec>().unwrap().build().unwrap();
        let shards = stripe(code.as_ref(), len, &mut rng);
        let mut idx: Vec<usize> = (0..code.n()).collect();
        idx.shuffle(&mut rng);
        let count = rng.random_range(1..=code.tolerance());
        let erased = &idx[..count];
        let mut s: Vec<Option<Vec<u8>>> = shards.iter().cloned().map(Some).collect();
        for &e in erased { s[e] = None; }
        code.decode(&mut s).unwrap();
        for i in 0..code.n() {
            prop_assert_eq!(s[i].as_ref().unwrap(), &shards[i], "{} erased {:?}", SPECS[spec_i], erased);
        }
        // Repair of the first erased shard from random survivors (any k that span it).
        let lost = erased[0];
        let avail: Vec<usize> = idx[count..].to_vec();
        let helpers = code.choose_helpers(lost, &avail).unwrap();
        prop_assert!(helpers.iter().all(|h| avail.contains(h)));
        let eq = code.repair_equation(lost, &helpers).unwrap();
        let hd: Vec<&[u8]> = eq.helpers().iter().map(|&h| shards[h].as_slice()).collect();
        prop_assert_eq!(eq.rebuild(&hd).unwrap(), shards[lost].clone());
    }
}

#[test]
fn too_many_erasures_is_an_error() {
    let code = "rs:4,2".parse::<CodeSpec>().unwrap().build().unwrap();
    let mut s: Vec<Option<Vec<u8>>> = vec![None, None, None, Some(vec![1; 4]), Some(vec![2; 4]), Some(vec![3; 4])];
    let err = code.decode(&mut s).unwrap_err();
    assert!(matches!(err, CodeError::Unrecoverable { .. }), "{err}");
    assert!(err.to_string().contains("tolerates 2"), "{err}");
    // LRC: beyond the guarantee some patterns still decode, others are refused.
    let lrc = "lrc:6,2,2".parse::<CodeSpec>().unwrap().build().unwrap();
    assert!(lrc.decoder(&[0, 1, 2, 6], &[3, 4, 5, 7, 8, 9]).is_err(), "a whole group plus its parity is 4 unknowns, 2 equations");
    assert!(lrc.decoder(&[0, 3, 8, 9], &[1, 2, 4, 5, 6, 7]).is_ok(), "one loss per group is fixed locally");
}

#[test]
fn bad_arguments_are_errors() {
    let code = "rs:3,2".parse::<CodeSpec>().unwrap().build().unwrap();
    let mut s: Vec<Option<Vec<u8>>> = vec![Some(vec![1; 4]), Some(vec![1; 5]), None, Some(vec![1; 4]), Some(vec![1; 4])];
    assert!(matches!(code.decode(&mut s), Err(CodeError::UnequalLengths(4, 5))));
    assert!(matches!(code.decode(&mut s[..3]), Err(CodeError::WrongCount { .. })));
    let (a, b, c) = (vec![0u8; 4], vec![0u8; 4], vec![0u8; 3]);
    let mut p = vec![vec![0u8; 4]; 2];
    let mut pr: Vec<&mut [u8]> = p.iter_mut().map(|x| x.as_mut_slice()).collect();
    assert!(matches!(code.encode(&[&a, &b, &c], &mut pr), Err(CodeError::UnequalLengths(..))));
    assert!(matches!(code.encode(&[&a, &b], &mut pr), Err(CodeError::WrongCount { .. })));
    assert!(matches!(code.repair_equation(9, &[0, 1, 2]), Err(CodeError::BadIndex { .. })));
    assert!(code.repair_equation(0, &[0, 1, 2]).is_err(), "lost among helpers");
    assert!(matches!(code.repair_equation(0, &[1, 2]), Err(CodeError::HelpersInsufficient { .. })));
}
