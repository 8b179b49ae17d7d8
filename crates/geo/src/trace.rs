//! An object-size distribution given as a CDF table (size, share of objects <= size), and
//! inverse-CDF sampling from it restricted to a size range.
//!
//! Between two rows the CDF is interpolated linearly in log(size), so a sample falls
//! log-uniformly inside a step (../shared/papers/README.md). The mass at or below the
//! first row's size is an atom at that size: the table says nothing finer.

use rand::Rng;

/// The Alibaba OSS `cdf_count` table (see data/README.md).
pub const ALIBABA_CDF_COUNT: &str = include_str!("../data/ali_cdf_count.csv");

#[derive(Clone, Debug)]
pub struct SizeCdf {
    /// (size in bytes, share of objects <= size); sizes and shares strictly ascending.
    rows: Vec<(f64, f64)>,
}

impl SizeCdf {
    /// The Alibaba OSS object-count CDF compiled into the binary.
    pub fn alibaba() -> Self {
        Self::parse(ALIBABA_CDF_COUNT).expect("the embedded trace parses")
    }

    /// Parses `size,cdf` rows; a first row that is not numeric is a header.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rows: Vec<(f64, f64)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut cols = line.split(',');
            let (Some(a), Some(b)) = (cols.next(), cols.next()) else {
                return Err(format!("line {}: expected 'size,cdf', got '{line}'", n + 1));
            };
            let (size, cdf) = match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
                (Ok(s), Ok(c)) => (s, c),
                _ if rows.is_empty() && n == 0 => continue, // header
                _ => return Err(format!("line {}: '{line}' is not two numbers", n + 1)),
            };
            if !(size >= 1.0 && size.is_finite() && (0.0..=1.0).contains(&cdf)) {
                return Err(format!("line {}: size must be >= 1 and the cdf within [0, 1], got '{line}'", n + 1));
            }
            if let Some(&(ps, pc)) = rows.last() {
                if size <= ps || cdf < pc {
                    return Err(format!("line {}: sizes must ascend and the cdf must not fall", n + 1));
                }
            }
            rows.push((size, cdf));
        }
        if rows.len() < 2 {
            return Err("a size CDF needs at least two rows".into());
        }
        Ok(SizeCdf { rows })
    }

    /// Share of objects strictly smaller than `size` (the atom at the first row counts as
    /// that row's size).
    pub fn below(&self, size: f64) -> f64 {
        let first = self.rows[0];
        if size <= first.0 {
            return 0.0;
        }
        let last = *self.rows.last().unwrap();
        if size > last.0 {
            return last.1;
        }
        let j = self.rows.partition_point(|&(s, _)| s < size);
        let (s0, c0) = self.rows[j - 1];
        let (s1, c1) = self.rows[j];
        c0 + (c1 - c0) * (size.ln() - s0.ln()) / (s1.ln() - s0.ln())
    }

    /// The size at cumulative share `u` (the inverse of [`below`](Self::below)).
    pub fn quantile(&self, u: f64) -> f64 {
        let first = self.rows[0];
        if u <= first.1 {
            return first.0;
        }
        let last = *self.rows.last().unwrap();
        if u >= last.1 {
            return last.0;
        }
        let j = self.rows.partition_point(|&(_, c)| c < u);
        let (s0, c0) = self.rows[j - 1];
        let (s1, c1) = self.rows[j];
        if c1 <= c0 {
            return s1;
        }
        (s0.ln() + (u - c0) / (c1 - c0) * (s1.ln() - s0.ln())).exp()
    }

    /// A sampler of object sizes within [lo, hi] bytes: the distribution conditioned on the
    /// range.
    pub fn range(&self, lo: u64, hi: u64) -> Result<RangeSampler<'_>, String> {
        if lo == 0 || lo > hi {
            return Err(format!("size range [{lo}, {hi}] is empty"));
        }
        let (ulo, uhi) = (self.below(lo as f64), self.below(hi as f64 + 1.0));
        if uhi <= ulo {
            return Err(format!("the trace has no objects between {lo} and {hi} bytes"));
        }
        Ok(RangeSampler { cdf: self, ulo, uhi, lo, hi })
    }
}

pub struct RangeSampler<'a> {
    cdf: &'a SizeCdf,
    ulo: f64,
    uhi: f64,
    lo: u64,
    hi: u64,
}

impl RangeSampler<'_> {
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        let u = self.ulo + rng.random::<f64>() * (self.uhi - self.ulo);
        (self.cdf.quantile(u).round() as u64).clamp(self.lo, self.hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    #[test]
    fn quantile_inverts_below() {
        let c = SizeCdf::alibaba();
        for s in [5000.0, 70_000.0, 4.5e6, 1e8, 3e9] {
            let u = c.below(s);
            assert!((c.quantile(u) / s - 1.0).abs() < 1e-9, "{s}");
        }
        assert_eq!(c.below(1.0), 0.0);
        assert_eq!(c.quantile(0.1), 4096.0, "mass below the first row is an atom there");
    }

    #[test]
    fn samples_stay_in_range_and_follow_the_cdf() {
        let c = SizeCdf::alibaba();
        let r = c.range(4 << 20, 4 << 30).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let xs: Vec<u64> = (0..20_000).map(|_| r.sample(&mut rng)).collect();
        assert!(xs.iter().all(|&x| (4 << 20..=4 << 30).contains(&x)));
        // The conditional median from the table, against the samples' median.
        let want = c.quantile((c.below((4u64 << 20) as f64) + c.below((4u64 << 30) as f64)) / 2.0);
        let mut s = xs.clone();
        s.sort();
        let got = s[s.len() / 2] as f64;
        assert!((got / want - 1.0).abs() < 0.05, "median {got} vs {want}");
    }

    #[test]
    fn bad_tables_are_rejected() {
        assert!(SizeCdf::parse("size,cdf\n10,0.5\n").is_err());
        assert!(SizeCdf::parse("10,0.5\n5,0.6\n").is_err());
        assert!(SizeCdf::parse("10,0.5\n20,0.4\n").is_err());
        assert!(SizeCdf::parse("10,0.5\n20,x\n").is_err());
        assert!(SizeCdf::parse("10,1.5\n20,2\n").is_err());
        assert!(SizeCdf::parse("size,cdf\n10,0.5\n20,1\n").is_ok());
        assert!(SizeCdf::alibaba().range(10, 5).is_err());
    }
}
