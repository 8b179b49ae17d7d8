//! The object layouts the paper compares (section 6), each with its code, and what one lost
//! disk's share of them costs to rebuild: repair units, each a set of helper reads (byte
//! runs per request) plus the write of the rebuilt bytes.
//!
//! - Geo (Clay): an object's chunks s0, s0 q, ... all on one disk, in size-class buckets;
//!   the front remainder in an RS-coded small-size bucket.
//! - Stripe (Clay, RS or LRC): each object striped across k disks in `strip`-byte rows, each
//!   row a codeword; recovery reads are batched into 4 MiB (the paper's baseline tuning).
//! - Stripe-Max (Clay): one row, chunk = object size / k.
//! - Contiguous (Clay): objects packed into fixed `chunk`-byte chunks (f4-style).
//!
//! The paper's k = 10, r = 4 family: Clay(10,4,13) (alpha 256, beta 64), RS(10,4) and
//! LRC(10,2,2) (12 of 14 chunks repaired from their 5-chunk local group, 2 global parities
//! from 10).

use crate::partition::{partition, DEFAULT_MAX_CHUNK};
use kintsugi_codes::clay::geometry::Geometry;
use rand::Rng;
use std::ops::Range;

/// Stripe width and parity count of every scheme here.
pub const K: usize = 10;
pub const R: usize = 4;
pub const N: usize = K + R;
/// Recovery I/O batch of the Stripe baselines, and the unit of recovery weights.
pub const BATCH: u64 = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Clay,
    Rs,
    Lrc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Geo { s0: u64, q: u64 },
    Stripe { strip: u64 },
    StripeMax,
    Contiguous { chunk: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheme {
    pub name: String,
    pub layout: Layout,
    pub code: Code,
}

impl Scheme {
    /// Parses the paper's scheme names: `geo-4m` (any s0: geo-128k, geo-1m, ...; q = 2),
    /// `con-16m`, `stripe` (Clay, 256 KiB strips), `stripe-32k`, `stripe-max`, `rs`, `lrc`
    /// (the Stripe layout with 256 KiB strips), `rs-32k`, `lrc-32k`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let l = s.to_ascii_lowercase();
        let size = |t: &str| -> Result<u64, String> {
            let (num, mult) = if let Some(n) = t.strip_suffix('k') {
                (n, 1u64 << 10)
            } else if let Some(n) = t.strip_suffix('m') {
                (n, 1 << 20)
            } else {
                return Err(format!("'{t}' in scheme '{s}' needs a k or m suffix (geo-4m, con-128k)"));
            };
            num.parse::<u64>().ok().filter(|&v| v > 0).map(|v| v * mult).ok_or_else(|| format!("'{t}' in scheme '{s}' is not a size"))
        };
        let (layout, code) = match l.as_str() {
            "rs" => (Layout::Stripe { strip: 256 << 10 }, Code::Rs),
            "lrc" => (Layout::Stripe { strip: 256 << 10 }, Code::Lrc),
            "stripe" => (Layout::Stripe { strip: 256 << 10 }, Code::Clay),
            "stripe-max" => (Layout::StripeMax, Code::Clay),
            _ => {
                if let Some(t) = l.strip_prefix("rs-") {
                    (Layout::Stripe { strip: size(t)? }, Code::Rs)
                } else if let Some(t) = l.strip_prefix("lrc-") {
                    (Layout::Stripe { strip: size(t)? }, Code::Lrc)
                } else if let Some(t) = l.strip_prefix("geo-") {
                    let s0 = size(t)?;
                    if s0 > DEFAULT_MAX_CHUNK {
                        return Err(format!("scheme '{s}': s0 above the 256 MiB chunk cap"));
                    }
                    (Layout::Geo { s0, q: 2 }, Code::Clay)
                } else if let Some(t) = l.strip_prefix("con-") {
                    (Layout::Contiguous { chunk: size(t)? }, Code::Clay)
                } else if let Some(t) = l.strip_prefix("stripe-") {
                    (Layout::Stripe { strip: size(t)? }, Code::Clay)
                } else {
                    return Err(format!(
                        "unknown scheme '{s}' (geo-4m, con-16m, stripe, stripe-32k, stripe-max, rs, rs-32k, lrc, lrc-32k)"
                    ));
                }
            }
        };
        Ok(Scheme { name: l, layout, code })
    }
}

/// One repair: every helper issues `requests` (each a list of byte runs, served as one
/// request) to its disk; then `lost` bytes are written at the destination.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    pub lost: u64,
    pub helpers: usize,
    pub requests: Vec<Vec<Range<u64>>>,
    /// Bytes each helper needs (what it sends), for the read-traffic figure.
    pub useful_per_helper: u64,
}

impl Unit {
    /// Recovery weight: 4 MiB = 1, at least 1.
    pub fn weight(&self) -> u64 {
        self.lost.div_ceil(BATCH).max(1)
    }
}

/// The runs a Clay(10,4,13) helper reads, inside a chunk of `chunk` bytes at `base`, to
/// repair the shard at `position` (0..14; Ceph's numbering, virtual nodes before the
/// parities).
pub fn clay_runs(geo: &Geometry, chunk: u64, position: usize, base: u64) -> Vec<Range<u64>> {
    let sub = chunk / geo.alpha as u64;
    geo.repair_runs(geo.node_of(position)).into_iter().map(|r| base + r.start as u64 * sub..base + r.end as u64 * sub).collect()
}

/// Splits `bytes` into batches of at most `BATCH`.
fn batches(bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..bytes.div_ceil(BATCH)).map(move |i| (i * BATCH, BATCH.min(bytes - i * BATCH)))
}

/// The repair units for the lost disk's share of `objects` (object sizes in bytes) under
/// `scheme`: objects (or columns of them) are taken in order until the disk holds
/// `disk_bytes`; each piece's position in its codeword is random (parity rotates).
pub fn lost_units<Rn: Rng>(scheme: &Scheme, objects: &mut dyn Iterator<Item = u64>, disk_bytes: u64, rng: &mut Rn) -> Vec<Unit> {
    let geo = Geometry::new(K, R, 13).expect("Clay(10,4,13)");
    let clay = |c: u64, rng: &mut Rn| {
        let runs = clay_runs(&geo, c, rng.random_range(0..N), 0);
        Unit { lost: c, helpers: 13, useful_per_helper: runs.iter().map(|r| r.end - r.start).sum(), requests: vec![runs] }
    };
    let rs_small = |bytes: u64, out: &mut Vec<Unit>| {
        for (_, len) in batches(bytes) {
            out.push(Unit { lost: len, helpers: K, requests: vec![vec![0..len]], useful_per_helper: len });
        }
    };
    let mut out = Vec::new();
    let mut held = 0u64;
    match scheme.layout {
        Layout::Geo { s0, q } => {
            let mut small = 0u64;
            while held < disk_bytes {
                let Some(s) = objects.next() else { break };
                let p = partition(s, s0, q, DEFAULT_MAX_CHUNK).expect("valid scheme");
                small += p.remainder;
                for c in p.chunks {
                    out.push(clay(c, rng));
                }
                held += s;
            }
            // The small-size bucket: packed pieces, RS-coded, repaired like a Stripe column.
            rs_small(small, &mut out);
        }
        Layout::Contiguous { chunk } => {
            while held < disk_bytes {
                out.push(clay(chunk, rng));
                held += chunk;
            }
        }
        Layout::StripeMax => {
            while held < disk_bytes {
                let Some(s) = objects.next() else { break };
                let c = (s.div_ceil(K as u64)).div_ceil(256) * 256;
                out.push(clay(c, rng));
                held += c;
            }
        }
        Layout::Stripe { strip } => {
            while held < disk_bytes {
                let Some(s) = objects.next() else { break };
                let column = s.div_ceil(K as u64 * strip) * strip;
                held += column;
                let position = rng.random_range(0..N);
                for (off, len) in batches(column) {
                    out.push(match scheme.code {
                        Code::Clay => {
                            // Rows of `strip` bytes, each its own codeword: the runs of every
                            // row in the batch, one request.
                            let runs: Vec<Range<u64>> =
                                (0..len / strip).flat_map(|row| clay_runs(&geo, strip, position, off + row * strip)).collect();
                            let useful = runs.iter().map(|r| r.end - r.start).sum();
                            Unit { lost: len, helpers: 13, requests: vec![runs], useful_per_helper: useful }
                        }
                        Code::Rs => Unit { lost: len, helpers: K, requests: vec![vec![off..off + len]], useful_per_helper: len },
                        Code::Lrc => {
                            // Positions 0..12 are in a local group of 6 (5 helpers); the two
                            // global parities need 10.
                            let h = if position < 12 { 5 } else { K };
                            Unit { lost: len, helpers: h, requests: vec![vec![off..off + len]], useful_per_helper: len }
                        }
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    #[test]
    fn scheme_names_parse() {
        assert_eq!(Scheme::parse("geo-4m").unwrap().layout, Layout::Geo { s0: 4 << 20, q: 2 });
        assert_eq!(Scheme::parse("Geo-128K").unwrap().layout, Layout::Geo { s0: 128 << 10, q: 2 });
        assert_eq!(Scheme::parse("con-16m").unwrap().layout, Layout::Contiguous { chunk: 16 << 20 });
        assert_eq!(Scheme::parse("rs").unwrap().code, Code::Rs);
        assert_eq!(Scheme::parse("stripe-32k").unwrap().layout, Layout::Stripe { strip: 32 << 10 });
        for bad in ["geo", "geo-4", "geo-0m", "con-x", "hh", "geo-512m"] {
            assert!(Scheme::parse(bad).is_err(), "{bad}");
        }
    }

    /// Geometric Partitioning Figure 2: a helper reads a quarter of the chunk in 1, 4, 16 or
    /// 64 runs depending on the lost node.
    #[test]
    fn clay_runs_are_a_quarter_in_figure_2s_patterns() {
        let geo = Geometry::new(K, R, 13).unwrap();
        let c = 64u64 << 20;
        let mut counts: Vec<usize> = (0..N).map(|p| clay_runs(&geo, c, p, 0).len()).collect();
        for p in 0..N {
            assert_eq!(clay_runs(&geo, c, p, 0).iter().map(|r| r.end - r.start).sum::<u64>(), c / 4);
        }
        counts.sort();
        counts.dedup();
        assert_eq!(counts, vec![1, 4, 16, 64]);
    }

    /// Read traffic per lost byte: Clay 3.25x (the paper's Table 1), RS 10x, LRC about
    /// (5 x 12 + 10 x 2) / 14 = 5.71x.
    #[test]
    fn read_traffic_matches_table_1() {
        let mut rng = StdRng::seed_from_u64(5);
        let traffic = |name: &str, rng: &mut StdRng| {
            let s = Scheme::parse(name).unwrap();
            let mut objs = std::iter::repeat((100u64 << 20) + (3 << 19));
            let units = lost_units(&s, &mut objs, 20 << 30, rng);
            let lost: u64 = units.iter().map(|u| u.lost).sum();
            let read: u64 = units.iter().map(|u| u.helpers as u64 * u.useful_per_helper).sum();
            read as f64 / lost as f64
        };
        assert!((traffic("con-16m", &mut rng) - 3.25).abs() < 1e-9);
        assert!((traffic("rs", &mut rng) - 10.0).abs() < 1e-9);
        assert!((traffic("lrc", &mut rng) - 5.71).abs() < 0.3);
        // Geo: Clay for chunks, RS for the small-size bucket.
        let g = traffic("geo-4m", &mut rng);
        assert!(g > 3.25 && g < 3.6, "{g}");
    }
}
