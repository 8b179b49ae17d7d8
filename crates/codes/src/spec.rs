//! Parsing and naming codes: `rs:K,M`, `lrc:K,L,M` and `clay:K,M,D`.

use crate::error::{CodeError, Result};
use crate::{ClayCode, Code, LinearCode};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The largest number of shards a code over GF(2^8) supports here (ISA-L's limit for
/// Cauchy matrices: row and column labels must be distinct field elements).
pub const MAX_SHARDS: usize = 256;

/// Which code, with its parameters. Serialises as its string form, e.g. `"rs:10,4"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CodeSpec {
    /// Reed-Solomon: k data, m parity, any k of k+m recover all.
    Rs { k: usize, m: usize },
    /// Azure-style LRC: k data in l local groups with one XOR parity each, plus m global parities.
    Lrc { k: usize, l: usize, m: usize },
    /// Clay (MSR): k data, m parity, any k recover all, one lost chunk from d helpers
    /// reading d/(d-k+1) chunks' worth; Ceph's clay plugin layout (isa, cauchy).
    Clay { k: usize, m: usize, d: usize },
}

impl CodeSpec {
    /// Checks the parameters and builds the code.
    pub fn build(&self) -> Result<Arc<dyn Code>> {
        Ok(match *self {
            CodeSpec::Rs { k, m } => Arc::new(LinearCode::rs(k, m)?),
            CodeSpec::Lrc { k, l, m } => Arc::new(LinearCode::lrc(k, l, m)?),
            CodeSpec::Clay { k, m, d } => Arc::new(ClayCode::new(k, m, d)?),
        })
    }

    /// Data chunks of a stripe, without building the code (a Clay build computes its
    /// coupling matrices: too much to learn k for each of many stripes).
    pub fn k(&self) -> usize {
        match *self {
            CodeSpec::Rs { k, .. } | CodeSpec::Lrc { k, .. } | CodeSpec::Clay { k, .. } => k,
        }
    }

    /// Chunks of a stripe, data and parity, without building the code.
    pub fn n(&self) -> usize {
        match *self {
            CodeSpec::Rs { k, m } | CodeSpec::Clay { k, m, .. } => k + m,
            CodeSpec::Lrc { k, l, m } => k + l + m,
        }
    }
}

impl fmt::Display for CodeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodeSpec::Rs { k, m } => write!(f, "rs:{k},{m}"),
            CodeSpec::Lrc { k, l, m } => write!(f, "lrc:{k},{l},{m}"),
            CodeSpec::Clay { k, m, d } => write!(f, "clay:{k},{m},{d}"),
        }
    }
}

impl FromStr for CodeSpec {
    type Err = CodeError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = |reason: &str| CodeError::BadSpec { spec: s.to_string(), reason: reason.to_string() };
        let (family, params) = s.trim().split_once(':').ok_or_else(|| bad("missing ':'"))?;
        let nums = params
            .split(',')
            .map(|p| p.trim().parse::<usize>().map_err(|_| bad(&format!("'{p}' is not a number"))))
            .collect::<Result<Vec<_>>>()?;
        // Every parameter counts shards (or helpers): none can exceed GF(2^8)'s limit, and
        // bounding them here keeps later sums from overflowing.
        if let Some(n) = nums.iter().find(|&&n| n > MAX_SHARDS) {
            return Err(bad(&format!("{n} is more than the {MAX_SHARDS} shards GF(2^8) allows")));
        }
        let spec = match (family.to_ascii_lowercase().as_str(), nums.as_slice()) {
            ("rs", &[k, m]) => CodeSpec::Rs { k, m },
            ("lrc", &[k, l, m]) => CodeSpec::Lrc { k, l, m },
            ("clay", &[k, m, d]) => CodeSpec::Clay { k, m, d },
            ("clay", _) => return Err(bad("clay takes three numbers, k, m and d (e.g. clay:10,4,13)")),
            ("rs", _) => return Err(bad("rs takes two numbers, k and m")),
            ("lrc", _) => return Err(bad("lrc takes three numbers, k, l and m")),
            (other, _) => return Err(bad(&format!("unknown code family '{other}'"))),
        };
        Ok(spec)
    }
}

impl TryFrom<String> for CodeSpec {
    type Error = CodeError;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<CodeSpec> for String {
    fn from(c: CodeSpec) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// k and n without a build are the built code's.
    #[test]
    fn k_and_n_match_the_built_code() {
        for spec in ["rs:6,3", "rs:10,4", "lrc:12,2,2", "lrc:4,2,1", "clay:4,2,5", "clay:10,4,13"] {
            let c: CodeSpec = spec.parse().unwrap();
            let built = c.build().unwrap();
            assert_eq!((c.k(), c.n()), (built.k(), built.n()), "{spec}");
        }
    }

    /// Found by the fuzzer (tests/fuzz.rs): a huge k wrapped k + m around and the build
    /// tried to allocate for it.
    #[test]
    fn huge_parameters_are_refused_not_allocated() {
        for s in ["rs:18446744073709551615,2", "lrc:4,18446744073709551615,2", "clay:4,2,300", "rs:257,1"] {
            assert!(s.parse::<CodeSpec>().is_err(), "{s}");
        }
        assert!(CodeSpec::Rs { k: usize::MAX, m: 2 }.build().is_err());
        assert!(CodeSpec::Lrc { k: 4, l: usize::MAX, m: 2 }.build().is_err());
        assert!(CodeSpec::Clay { k: usize::MAX, m: 2, d: usize::MAX }.build().is_err());
    }

    #[test]
    fn parse_and_print() {
        assert_eq!("rs:10,4".parse::<CodeSpec>().unwrap(), CodeSpec::Rs { k: 10, m: 4 });
        assert_eq!("LRC:6, 2, 2".parse::<CodeSpec>().unwrap(), CodeSpec::Lrc { k: 6, l: 2, m: 2 });
        assert_eq!(CodeSpec::Lrc { k: 12, l: 2, m: 2 }.to_string(), "lrc:12,2,2");
        assert_eq!("clay:10,4,13".parse::<CodeSpec>().unwrap(), CodeSpec::Clay { k: 10, m: 4, d: 13 });
        assert_eq!(CodeSpec::Clay { k: 4, m: 2, d: 5 }.to_string(), "clay:4,2,5");
        for bad in ["rs", "rs:10", "rs:a,4", "xor:3,1", "lrc:6,2", "rs:-1,2", "", "clay:10,4"] {
            assert!(bad.parse::<CodeSpec>().is_err(), "{bad} should not parse");
        }
        let json = serde_json::to_string(&CodeSpec::Rs { k: 3, m: 2 }).unwrap();
        assert_eq!(json, "\"rs:3,2\"");
        assert!(serde_json::from_str::<CodeSpec>("\"rs:x\"").is_err());
    }

    #[test]
    fn invalid_parameters_are_errors() {
        for s in [
            "rs:0,4",
            "rs:4,0",
            "rs:250,7",
            "lrc:6,4,2",
            "lrc:6,0,2",
            "lrc:0,1,1",
            "lrc:250,5,2",
            "clay:10,4,9",
            "clay:10,4,14",
            "clay:4,0,4",
        ] {
            let spec: CodeSpec = s.parse().unwrap();
            let err = spec.build().err().unwrap_or_else(|| panic!("{s} should be rejected"));
            assert!(matches!(err, CodeError::InvalidParams(_)), "{s}: {err}");
        }
        assert!("rs:250,6".parse::<CodeSpec>().unwrap().build().is_ok());
    }
}
