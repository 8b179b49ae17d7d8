//! How the codec walks a shard: the same byte window of every sub-chunk at a time,
//! gathered back to back, so that each step is a valid (smaller) chunk for the code. For
//! scalar codes (one sub-chunk) this is plain block-by-block streaming; for Clay a step
//! touches alpha pieces per shard, and a repair reads only the helper's planes.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;

use super::read_block;

pub struct Walk {
    /// Sub-chunks per shard.
    pub alpha: usize,
    /// Bytes per sub-chunk.
    pub sub: u64,
    /// Bytes of each sub-chunk per step.
    pub step: usize,
}

impl Walk {
    pub fn new(alpha: usize, shard_len: u64, block: usize) -> Self {
        let sub = shard_len / alpha as u64;
        Walk { alpha, sub, step: (block / alpha).max(1).min(sub.max(1) as usize) }
    }

    /// Gathered bytes per step.
    pub fn gathered(&self) -> usize {
        self.alpha * self.step
    }

    /// (offset in each sub-chunk, window length) of every step.
    pub fn windows(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        (0..self.sub.div_ceil(self.step as u64)).map(|i| {
            let off = i * self.step as u64;
            (off, (self.sub - off).min(self.step as u64) as usize)
        })
    }

    /// Reads window [off, off+w) of the sub-chunks in `planes` of the shard at `base` in
    /// `f` into `buf` (sub-chunk s at s*w; others left as they are). Returns bytes read.
    pub fn read(&self, f: &File, base: u64, off: u64, w: usize, buf: &mut [u8], planes: &[Range<usize>]) -> io::Result<u64> {
        let mut n = 0;
        for s in planes.iter().flat_map(|r| r.clone()) {
            read_block(f, base + s as u64 * self.sub + off, &mut buf[s * w..(s + 1) * w])?;
            n += w as u64;
        }
        Ok(n)
    }

    /// Writes a gathered window to the shard at `base` in `f`, keeping only bytes below
    /// `limit` (the end of the original file when writing it back).
    pub fn write(&self, f: &File, base: u64, off: u64, w: usize, buf: &[u8], limit: u64) -> io::Result<()> {
        for s in 0..self.alpha {
            let start = base + s as u64 * self.sub + off;
            if start >= limit {
                break;
            }
            let keep = (limit - start).min(w as u64) as usize;
            f.write_all_at(&buf[s * w..s * w + keep], start)?;
        }
        Ok(())
    }

    /// Every sub-chunk.
    pub fn all(&self) -> Vec<Range<usize>> {
        std::iter::once(0..self.alpha).collect()
    }
}

/// CRC-32C of a shard written window by window: one running CRC per sub-chunk, combined
/// in order at the end.
pub struct ShardCrc {
    parts: Vec<u32>,
    sub: u64,
}

impl ShardCrc {
    pub fn new(walk: &Walk) -> Self {
        ShardCrc { parts: vec![0; walk.alpha], sub: walk.sub }
    }

    pub fn add(&mut self, gathered: &[u8], w: usize) {
        for (s, p) in self.parts.iter_mut().enumerate() {
            *p = kintsugi_proto::crc::crc32c_append(*p, &gathered[s * w..(s + 1) * w]);
        }
    }

    pub fn finish(&self) -> u32 {
        self.parts.iter().skip(1).fold(self.parts[0], |acc, &p| kintsugi_proto::crc::crc32c_combine(acc, p, self.sub))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_crc_equals_the_whole_shard_crc() {
        let shard: Vec<u8> = (0..8 * 100).map(|i| (i * 7 + 3) as u8).collect();
        let walk = Walk::new(8, shard.len() as u64, 8 * 30);
        let mut crc = ShardCrc::new(&walk);
        for (off, w) in walk.windows() {
            let mut g = vec![0u8; 8 * w];
            for s in 0..8 {
                let at = s * 100 + off as usize;
                g[s * w..(s + 1) * w].copy_from_slice(&shard[at..at + w]);
            }
            crc.add(&g, w);
        }
        assert_eq!(crc.finish(), kintsugi_proto::crc::crc32c(&shard));
    }
}
