//! The HDD model shared by the node store's emulation and the simulator: a disk serves one
//! request at a time; a request is a list of byte runs in one file, read in order.
//!
//! Time = positioning + bytes / sequential bandwidth. The first run of a request pays a
//! full positioning (seek + rotation, default 8 ms); a later run of the same request pays
//! min(positioning, gap / bandwidth), because a drive reads through a short gap faster than
//! it seeks over it (its track buffer and read-ahead do exactly that). Without that rule a
//! Clay helper reading 64 runs of 16 KiB from a 4 MiB chunk would take 0.5 s, where the
//! paper measures 40 MB/s (Figure 4); with it the model gives about 42 MB/s.

use serde::Serialize;
use std::ops::Range;

/// A model that cannot be: what was wrong with it.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum BadModel {
    #[error("disk positioning time must be >= 0 seconds, got {0}")]
    Seek(f64),
    #[error("disk bandwidth must be > 0 bytes/s, got {0}")]
    Bandwidth(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HddModel {
    /// Seconds of positioning before a request (and at most that for a gap inside one).
    pub seek: f64,
    /// Sequential transfer rate, bytes per second.
    pub bandwidth: f64,
}

impl Default for HddModel {
    /// 8 ms and 180 MB/s: a 7200 rpm SAS drive like the paper's.
    fn default() -> Self {
        HddModel { seek: 0.008, bandwidth: 180e6 }
    }
}

impl HddModel {
    pub fn new(seek: f64, bandwidth: f64) -> Result<Self, BadModel> {
        if !(seek >= 0.0 && seek.is_finite()) {
            return Err(BadModel::Seek(seek));
        }
        if !(bandwidth > 0.0 && bandwidth.is_finite()) {
            return Err(BadModel::Bandwidth(bandwidth));
        }
        Ok(HddModel { seek, bandwidth })
    }

    /// Seconds of positioning before an I/O at `start` when the head was left at `end` of
    /// the same file (`None`: elsewhere): a full positioning, or less for a short forward gap.
    pub fn positioning(&self, end: Option<u64>, start: u64) -> f64 {
        match end {
            Some(e) if start >= e => self.seek.min((start - e) as f64 / self.bandwidth),
            _ => self.seek,
        }
    }

    /// Seconds to serve one request: `runs` are byte ranges of one file, ascending.
    pub fn request_time(&self, runs: &[Range<u64>]) -> f64 {
        let mut t = 0.0;
        let mut end: Option<u64> = None;
        for r in runs {
            t += self.positioning(end, r.start) + (r.end - r.start) as f64 / self.bandwidth;
            end = Some(r.end);
        }
        t
    }

    /// Seconds to read or write `bytes` contiguous bytes as one request.
    pub fn sequential(&self, bytes: u64) -> f64 {
        self.seek + bytes as f64 / self.bandwidth
    }

    /// Seconds to move `bytes` contiguous bytes in requests of at most `io` bytes that other
    /// requests interleave with (each pays a positioning): how batched recovery reads behave
    /// on a busy disk.
    pub fn batched(&self, bytes: u64, io: u64) -> f64 {
        let ios = bytes.div_ceil(io.max(1)).max(1);
        ios as f64 * self.seek + bytes as f64 / self.bandwidth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// The runs a Clay(10,4,13) helper reads for a lost node whose column is `col`: a quarter
    /// of the chunk, in 4^col runs.
    fn clay_runs(chunk: u64, col: u32) -> Vec<Range<u64>> {
        let runs = 4u64.pow(col);
        let block = chunk / runs;
        (0..runs).map(|b| b * block..b * block + block / 4).collect()
    }

    #[test]
    fn contiguous_reads_pay_one_seek() {
        let d = HddModel::default();
        assert!((d.request_time(std::slice::from_ref(&(0..180_000_000))) - 1.008).abs() < 1e-9);
        assert!((d.request_time(&[0..10, 10..20]) - (0.008 + 20.0 / 180e6)).abs() < 1e-12);
        assert!((d.batched(8 * MIB, 4 * MIB) - (0.016 + (8 * MIB) as f64 / 180e6)).abs() < 1e-12);
    }

    #[test]
    fn long_gaps_seek_short_gaps_read_through() {
        let d = HddModel::default();
        // Two runs 100 MB apart: two seeks.
        let t = d.request_time(&[0..1000, 100_000_000..100_001_000]);
        assert!((t - (0.016 + 2000.0 / 180e6)).abs() < 1e-12);
        // Two runs 1000 bytes apart: the gap costs its read time.
        let t = d.request_time(&[0..1000, 2000..3000]);
        assert!((t - (0.008 + 3000.0 / 180e6)).abs() < 1e-12);
        // A run behind the head repositions.
        assert!((d.request_time(&[5000..6000, 0..1000]) - (0.016 + 2000.0 / 180e6)).abs() < 1e-12);
    }

    /// Figure 4 of the paper: Clay(10,4) recovery reads reach about 40 MB/s with 4 MB chunks
    /// and approach the disk's sequential rate with 256 MB chunks (harmonic mean over the
    /// four read patterns). The model's rule for gaps is what makes the 4 MB end right.
    #[test]
    fn clay_read_patterns_follow_figure_4() {
        let d = HddModel::default();
        let hm = |chunk: u64| {
            let t: f64 = (0..4).map(|c| d.request_time(&clay_runs(chunk, c))).sum();
            4.0 * (chunk / 4) as f64 / t / 1e6
        };
        let small = hm(4 * MIB);
        let large = hm(256 * MIB);
        assert!((35.0..50.0).contains(&small), "4 MiB chunks: {small} MB/s");
        assert!(large > 3.0 * small && large < 180.0, "256 MiB chunks: {large} MB/s");
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(HddModel::new(-1.0, 1.0).is_err());
        assert!(HddModel::new(0.0, 0.0).is_err());
        assert!(HddModel::new(0.008, f64::NAN).is_err());
        assert!(HddModel::new(0.0, 1.0).is_ok());
    }
}
