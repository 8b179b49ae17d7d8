//! Degraded reads of one object on an idle cluster, per layout: the object's pieces are
//! repaired (or decoded) in order and streamed to a client over its link, repair of piece
//! i+1 overlapping the transfer of piece i where the layout allows it (section 5.1):
//! rep_i = rep_{i-1} + t_rep(i); sent_i = max(rep_i, sent_{i-1}) + bytes_i / client.
//!
//! A normal read is the same pipeline with disk reads for repairs: every layout's normal
//! read is about the same (the paper measured 1190 +- 20 ms for W1), so the Geo pipeline
//! (one disk, a seek per chunk) is the baseline. Decode and repair run at fixed rates
//! (the paper's codec: 18.5 GB/s decode, 5.0 GB/s regenerate, 12 cores).

use crate::layout::{clay_runs, Layout, Scheme, BATCH, K};
use crate::partition::{partition, DEFAULT_MAX_CHUNK};
use kintsugi_codes::clay::geometry::Geometry;
use kintsugi_hdd::HddModel;
use rand::Rng;

#[derive(Clone, Copy, Debug)]
pub struct ReadModel {
    pub disk: HddModel,
    /// Client link, bytes per second.
    pub client: f64,
    /// Single-chunk regeneration (Clay repair), bytes of output per second.
    pub repair_rate: f64,
    /// Decode of an erased chunk from k others (RS, or Clay's full decode), bytes per second.
    pub decode_rate: f64,
}

impl ReadModel {
    pub fn paper(client: f64) -> Self {
        ReadModel { disk: HddModel::default(), client, repair_rate: 5.0e9, decode_rate: 18.5e9 }
    }
}

/// One piece of a read: seconds to get it ready (repair or disk read), bytes to send.
type Piece = (f64, u64);

/// Time to last byte of a pipeline of pieces; with `pipelined` false each piece's transfer
/// waits for every repair (the sum of repair and transfer times).
pub fn pipeline(pieces: &[Piece], client: f64, pipelined: bool) -> f64 {
    if !pipelined {
        return pieces.iter().map(|&(r, b)| r + b as f64 / client).sum();
    }
    let (mut rep, mut sent) = (0.0f64, 0.0f64);
    for &(r, b) in pieces {
        rep += r;
        sent = sent.max(rep) + b as f64 / client;
    }
    sent
}

/// A byte range [start, end) of an object of `size` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    pub fn whole(size: u64) -> Self {
        Range { start: 0, end: size }
    }

    /// A random range: uniform length in [1, size], uniform start (mean half the object).
    pub fn random<R: Rng>(size: u64, rng: &mut R) -> Self {
        let len = rng.random_range(1..=size.max(1));
        let start = rng.random_range(0..=size - len.min(size));
        Range { start, end: start + len }
    }

    fn overlap(&self, a: u64, b: u64) -> u64 {
        self.end.min(b).saturating_sub(self.start.max(a))
    }
}

/// The pieces of a degraded read of `range` of an object of `size` bytes, whose disk (or
/// one of whose disks) is down.
pub fn degraded_pieces<R: Rng>(s: &Scheme, size: u64, range: Range, m: &ReadModel, rng: &mut R) -> Vec<Piece> {
    let geo = Geometry::new(K, crate::layout::R, 13).expect("Clay(10,4,13)");
    // The lost chunk holds data: positions 0..k in its codeword.
    let clay_repair = |c: u64, rng: &mut R| m.disk.request_time(&clay_runs(&geo, c, rng.random_range(0..K), 0)) + c as f64 / m.repair_rate;
    let mut out = Vec::new();
    match s.layout {
        Layout::Geo { s0, q } => {
            let p = partition(size, s0, q, DEFAULT_MAX_CHUNK).expect("valid scheme");
            let mut at = 0;
            if p.remainder > 0 {
                // The small-size bucket is RS-coded: k helpers read the piece's range.
                let b = range.overlap(0, p.remainder);
                if b > 0 {
                    out.push((m.disk.sequential(p.remainder) + p.remainder as f64 / m.decode_rate, b));
                }
                at = p.remainder;
            }
            for c in p.chunks {
                let b = range.overlap(at, at + c);
                if b > 0 {
                    out.push((clay_repair(c, rng), b));
                }
                at += c;
            }
        }
        Layout::Contiguous { chunk } => {
            // The object sits at a random offset of the packed chunks.
            let off = rng.random_range(0..chunk);
            let (lo, hi) = (off + range.start, off + range.end);
            let mut c0 = lo / chunk * chunk;
            while c0 < hi {
                let b = hi.min(c0 + chunk) - lo.max(c0);
                out.push((clay_repair(chunk, rng), b));
                c0 += chunk;
            }
        }
        Layout::StripeMax => {
            // One codeword: decode the lost S/k chunk from k whole chunks, then send.
            let c = size.div_ceil(K as u64);
            out.push((m.disk.sequential(c) + c as f64 / m.decode_rate, range.end - range.start));
        }
        Layout::Stripe { strip } => {
            // Rows decode independently (RS-style pipelining), read in 4 MiB batches per
            // helper: a batch covers k x 4 MiB of the object.
            let row_bytes = K as u64 * BATCH.max(strip);
            let mut a = range.start / row_bytes * row_bytes;
            while a < range.end {
                let b = range.overlap(a, a + row_bytes);
                let per_disk = b.div_ceil(K as u64);
                out.push((m.disk.sequential(per_disk) + per_disk as f64 / m.decode_rate, b));
                a += row_bytes;
            }
        }
    }
    out
}

/// The pieces of a normal read of `range`: the object's chunks read from its disk in order
/// (a seek each), pipelined with the transfer.
pub fn normal_pieces(range: Range, m: &ReadModel) -> Vec<Piece> {
    // Normal reads stream in the paper's 4 MiB-class pieces from one disk at a time.
    let mut out = Vec::new();
    let mut a = range.start;
    while a < range.end {
        let b = BATCH.min(range.end - a);
        out.push((m.disk.sequential(b), b));
        a += b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    #[test]
    fn pipeline_overlaps_repair_with_transfer() {
        // Repairs of 1 s each, transfers of 2 s each: the transfer is the bottleneck.
        let p = [(1.0, 2), (1.0, 2), (1.0, 2)];
        assert_eq!(pipeline(&p, 1.0, true), 7.0);
        assert_eq!(pipeline(&p, 1.0, false), 9.0);
        // Repairs dominate: time is the repairs plus the last transfer.
        let p = [(3.0, 1), (3.0, 1)];
        assert_eq!(pipeline(&p, 1.0, true), 7.0);
    }

    /// Geo's degraded read streams: with a 1 Gbit/s client its time is within a few percent
    /// of the normal read for large objects (the paper: 1.02x on average), while a large
    /// Contiguous chunk must be rebuilt whole before the first byte goes out.
    #[test]
    fn geo_degraded_reads_stream_like_normal_reads() {
        let m = ReadModel::paper(125e6);
        let mut rng = StdRng::seed_from_u64(2);
        let size = 200u64 << 20;
        let geo = pipeline(&degraded_pieces(&Scheme::parse("geo-4m").unwrap(), size, Range::whole(size), &m, &mut rng), m.client, true);
        let normal = pipeline(&normal_pieces(Range::whole(size), &m), m.client, true);
        assert!(geo / normal < 1.05, "geo {geo} vs normal {normal}");
        let con = pipeline(&degraded_pieces(&Scheme::parse("con-256m").unwrap(), size, Range::whole(size), &m, &mut rng), m.client, true);
        assert!(con > geo * 1.1, "con-256m {con} vs geo {geo}");
    }

    #[test]
    fn pieces_cover_exactly_the_range() {
        let m = ReadModel::paper(125e6);
        let mut rng = StdRng::seed_from_u64(3);
        for name in ["geo-4m", "geo-1m", "con-16m", "stripe-max", "stripe", "rs", "lrc"] {
            let s = Scheme::parse(name).unwrap();
            for _ in 0..50 {
                let size = rng.random_range(1u64..(600 << 20));
                let r = Range::random(size, &mut rng);
                assert!(r.end <= size && r.start < r.end);
                let sent: u64 = degraded_pieces(&s, size, r, &m, &mut rng).iter().map(|p| p.1).sum();
                assert_eq!(sent, r.end - r.start, "{name} {size} {r:?}");
            }
        }
    }
}
