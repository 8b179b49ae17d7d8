//! The paper's workloads (Table 2), sampled from the Alibaba trace, and the figures that
//! follow from the trace and Algorithm 1 alone, with no I/O: the small-size bucket's share
//! of capacity (section 6.3), the average chunk size, and the average chunk size against q
//! (Figure 14).

use crate::partition::{partition, PartitionError};
use crate::trace::SizeCdf;
use rand::{rngs::StdRng, SeedableRng};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// 4 MiB - 4 GiB objects on HDDs; the paper's 170,000 objects average 102.8 MB.
    W1,
    /// 4 KiB - 4 MiB objects on SSDs; the paper's 500,000 objects average 101.3 KB.
    W2,
}

impl Workload {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "w1" => Ok(Workload::W1),
            "w2" => Ok(Workload::W2),
            _ => Err(format!("unknown workload '{s}' (w1 or w2)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::W1 => "w1",
            Workload::W2 => "w2",
        }
    }

    /// Object sizes allowed, in bytes, inclusive.
    pub fn range(self) -> (u64, u64) {
        match self {
            Workload::W1 => (4 << 20, 4 << 30),
            Workload::W2 => (4 << 10, 4 << 20),
        }
    }

    /// How many objects the paper stores.
    pub fn paper_objects(self) -> usize {
        match self {
            Workload::W1 => 170_000,
            Workload::W2 => 500_000,
        }
    }

    /// `n` object sizes, deterministic for a seed.
    pub fn sample(self, cdf: &SizeCdf, n: usize, seed: u64) -> Result<Vec<u64>, String> {
        let (lo, hi) = self.range();
        let r = cdf.range(lo, hi)?;
        let mut rng = StdRng::seed_from_u64(seed);
        Ok((0..n).map(|_| r.sample(&mut rng)).collect())
    }
}

/// What Algorithm 1 makes of a set of objects.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TraceFigures {
    pub objects: usize,
    pub s0: u64,
    pub q: u64,
    pub total_bytes: u64,
    pub avg_object_bytes: f64,
    /// Bytes in the RS-coded small-size bucket (front remainders and objects below s0) as a
    /// fraction of all bytes.
    pub small_bucket_share: f64,
    /// Mean size of the geometric chunks (the small-size bucket's pieces are not chunks).
    pub avg_chunk_bytes: f64,
    pub chunks: u64,
    pub chunks_per_object: f64,
    /// The largest chunk used.
    pub max_chunk_bytes: u64,
}

pub fn figures(sizes: &[u64], s0: u64, q: u64, cap: u64) -> Result<TraceFigures, PartitionError> {
    let (mut total, mut small, mut chunk_bytes, mut chunks, mut max_chunk) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for &s in sizes {
        let p = partition(s, s0, q, cap)?;
        total += s;
        small += p.remainder;
        chunk_bytes += s - p.remainder;
        chunks += p.chunks.len() as u64;
        max_chunk = max_chunk.max(p.chunks.last().copied().unwrap_or(0));
    }
    let n = sizes.len().max(1) as f64;
    Ok(TraceFigures {
        objects: sizes.len(),
        s0,
        q,
        total_bytes: total,
        avg_object_bytes: total as f64 / n,
        small_bucket_share: if total == 0 { 0.0 } else { small as f64 / total as f64 },
        avg_chunk_bytes: if chunks == 0 { 0.0 } else { chunk_bytes as f64 / chunks as f64 },
        chunks,
        chunks_per_object: chunks as f64 / n,
        max_chunk_bytes: max_chunk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::DEFAULT_MAX_CHUNK;

    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;

    fn within(got: f64, want: f64, rel: f64) -> bool {
        (got / want - 1.0).abs() <= rel
    }

    /// Section 6.3 of the paper: W1's chunks average 14.8/25.0/56.4 MB for s0 = 1/4/16 MiB.
    /// Our W1 averages about 98 MB against the paper's 102.8 MB (../shared/papers/README.md),
    /// so we allow 15%.
    #[test]
    fn w1_average_chunk_matches_the_paper() {
        let sizes = Workload::W1.sample(&SizeCdf::alibaba(), Workload::W1.paper_objects(), 1).unwrap();
        for (s0, avg_mb) in [(MIB, 14.8), (4 * MIB, 25.0), (16 * MIB, 56.4)] {
            let f = figures(&sizes, s0, 2, DEFAULT_MAX_CHUNK).unwrap();
            assert!(within(f.avg_chunk_bytes / 1e6, avg_mb, 0.15), "s0 {s0}: avg chunk {} MB vs {avg_mb}", f.avg_chunk_bytes / 1e6);
        }
    }

    /// The small-size bucket's share of capacity: 9.4% for W1 at s0 = 16 MiB, 26.7/35.4% for
    /// W2 at s0 = 128/256 KiB. The paper's 1.7% (s0 = 1 MiB) and 3.7% (4 MiB) for W1 cannot
    /// come from Algorithm 1's R = S mod s0 (< s0 per object, so below s0 / the average
    /// object: 1.0% and 4.1% for 102.8 MB objects) with the sizes clipped at 4 MiB; we check
    /// that bound instead and record the gap in REPRODUCTION.md.
    #[test]
    fn small_bucket_share_matches_the_paper_where_algorithm_1_can() {
        let cdf = SizeCdf::alibaba();
        let w1 = Workload::W1.sample(&cdf, Workload::W1.paper_objects(), 1).unwrap();
        let w2 = Workload::W2.sample(&cdf, Workload::W2.paper_objects(), 1).unwrap();
        for (sizes, s0, share) in [(&w1, 16 * MIB, 0.094), (&w2, 128 * KIB, 0.267), (&w2, 256 * KIB, 0.354)] {
            let f = figures(sizes, s0, 2, DEFAULT_MAX_CHUNK).unwrap();
            assert!(within(f.small_bucket_share, share, 0.15), "s0 {s0}: share {} vs {share}", f.small_bucket_share);
        }
        let mut last = 0.0;
        for s0 in [MIB, 4 * MIB, 16 * MIB] {
            let f = figures(&w1, s0, 2, DEFAULT_MAX_CHUNK).unwrap();
            assert!(f.small_bucket_share < s0 as f64 / f.avg_object_bytes, "s0 {s0}: {}", f.small_bucket_share);
            assert!(f.small_bucket_share > last, "the share grows with s0");
            last = f.small_bucket_share;
        }
    }

    /// Figure 14: the average chunk size against q peaks at q = 2 or 3. Ours peaks there or
    /// is flat within 2% of that peak, and falls off on both sides (q = 1 is fixed s0 chunks).
    #[test]
    fn average_chunk_size_peaks_at_q_2_or_3() {
        let cdf = SizeCdf::alibaba();
        for (w, s0) in [(Workload::W1, 4 * MIB), (Workload::W2, 128 * KIB)] {
            let sizes = w.sample(&cdf, 50_000, 3).unwrap();
            let avg: Vec<f64> = (1..=8).map(|q| figures(&sizes, s0, q, DEFAULT_MAX_CHUNK).unwrap().avg_chunk_bytes).collect();
            let peak = avg.iter().cloned().fold(0.0, f64::max);
            let at_2_3 = avg[1].max(avg[2]);
            assert!(at_2_3 >= 0.98 * peak, "{}: {avg:?}", w.name());
            assert!(avg[0] < 0.95 * at_2_3 && avg[7] < 0.95 * at_2_3, "{}: {avg:?}", w.name());
        }
    }
}
