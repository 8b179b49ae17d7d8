//! The chunk-size tension of regenerating codes (the paper's Figure 4): with Clay(10,4,13)
//! on HDDs, larger chunks make each helper's recovery reads longer runs (disk bandwidth up),
//! while a degraded read must rebuild whole chunks before sending them (latency up). The
//! paper measured 40 MB/s and 700 ms at 4 MB chunks rising to 170 MB/s and 1,300 ms at
//! 256 MB, reading a 64 MB object over 1 Gbit/s.

use crate::degraded::{pipeline, ReadModel};
use crate::layout::{clay_runs, K, R};
use kintsugi_codes::clay::geometry::Geometry;
use serde::Serialize;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Point {
    pub chunk_bytes: u64,
    /// A recovery helper's useful read rate, harmonic mean over the four read patterns
    /// (1, 4, 16 and 64 runs), bytes per second.
    pub recovery_read_bw: f64,
    /// Time to last byte of a degraded read of the object, stored from the start of
    /// chunks of this size, mean over the data positions, seconds.
    pub degraded_read_s: f64,
}

/// One point of Figure 4.
pub fn point(m: &ReadModel, object: u64, chunk: u64) -> Point {
    let geo = Geometry::new(K, R, 13).expect("Clay(10,4,13)");
    // One lost node from each column: the four read patterns.
    let columns: Vec<usize> = (0..N_COLUMNS).map(|c| geo.shard_of(c * geo.q).expect("a real node starts every column")).collect();
    let time: f64 = columns.iter().map(|&p| m.disk.request_time(&clay_runs(&geo, chunk, p, 0))).sum();
    let recovery_read_bw = columns.len() as f64 * (chunk / 4) as f64 / time;
    let degraded: f64 = (0..K)
        .map(|pos| {
            let t = m.disk.request_time(&clay_runs(&geo, chunk, pos, 0)) + chunk as f64 / m.repair_rate;
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < object {
                pieces.push((t, chunk.min(object - at)));
                at += chunk;
            }
            pipeline(&pieces, m.client, true)
        })
        .sum::<f64>()
        / K as f64;
    Point { chunk_bytes: chunk, recovery_read_bw, degraded_read_s: degraded }
}

/// Columns of Clay(10,4,13)'s grid: t = 4.
const N_COLUMNS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// The trend of Figure 4 with the paper's setting (8 ms, 180 MB/s disks, 1 Gbit/s
    /// client, 64 MiB object): disk bandwidth from about 40 MB/s at 4 MiB to over three
    /// times that at 256 MiB; degraded read from about the transfer time to well above it.
    #[test]
    fn figure_4_trend() {
        let m = ReadModel::paper(125e6);
        let pts: Vec<Point> = [4, 16, 64, 256].iter().map(|&c| point(&m, 64 * MIB, c * MIB)).collect();
        let transfer = (64 * MIB) as f64 / 125e6;
        assert!((35e6..50e6).contains(&pts[0].recovery_read_bw), "{:?}", pts[0]);
        assert!(pts[3].recovery_read_bw > 3.0 * pts[0].recovery_read_bw, "{pts:?}");
        assert!(pts.windows(2).all(|w| w[1].recovery_read_bw > w[0].recovery_read_bw), "{pts:?}");
        assert!(pts[0].degraded_read_s < 1.2 * transfer, "{:?} vs {transfer}", pts[0]);
        assert!(pts[3].degraded_read_s > 1.5 * transfer, "{:?}", pts[3]);
        assert!(pts.windows(2).all(|w| w[1].degraded_read_s >= w[0].degraded_read_s), "{pts:?}");
    }
}
