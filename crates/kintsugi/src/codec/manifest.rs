//! The codec manifest: `DIR/FILE.manifest.json`, naming the code, sizes and each shard's
//! file and CRC-32C. Shard i holds bytes [i*L, (i+1)*L) of the file (zero-padded) for
//! i < k, parity after; L = ceil(size / k).

use anyhow::{bail, Context, Result};
use kintsugi_codes::{Code, CodeSpec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Current manifest format.
pub const FORMAT: u32 = 1;

/// One shard's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// Position in the stripe.
    pub index: usize,
    /// File name, relative to the manifest's directory.
    pub file: String,
    /// CRC-32C (Castagnoli) of the shard's bytes.
    pub crc32c: u32,
}

/// The whole manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub format: u32,
    /// The code, e.g. `rs:10,4`.
    pub code: CodeSpec,
    /// Data shards.
    pub k: usize,
    /// Parity shards (n - k; for LRC the local plus global parities).
    pub m: usize,
    /// Size of the original file in bytes.
    pub size: u64,
    /// Length of every shard, L = ceil(size / k).
    pub shard_len: u64,
    /// Name of the original file.
    pub file: String,
    /// One entry per shard, in index order.
    pub shards: Vec<ShardEntry>,
}

impl Manifest {
    /// Path of the manifest for `file_name` in `dir`.
    pub fn path_for(dir: &Path, file_name: &str) -> PathBuf {
        dir.join(format!("{file_name}.manifest.json"))
    }

    /// Shard file name: FILE.00, FILE.01, ... (wider when n > 100).
    pub fn shard_name(file_name: &str, index: usize, n: usize) -> String {
        let width = (n.saturating_sub(1)).to_string().len().max(2);
        format!("{file_name}.{index:0width$}")
    }

    /// Reads and checks a manifest, returning it with its code.
    pub fn load(path: &Path) -> Result<(Manifest, Arc<dyn Code>)> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read manifest {}", path.display()))?;
        let m: Manifest = serde_json::from_str(&text).with_context(|| format!("{} is not a valid kintsugi manifest", path.display()))?;
        let code = m.check().with_context(|| format!("manifest {} is inconsistent", path.display()))?;
        Ok((m, code))
    }

    /// Checks internal consistency; returns the built code.
    pub fn check(&self) -> Result<Arc<dyn Code>> {
        if self.format != FORMAT {
            bail!("manifest format {} is not supported (this kintsugi reads format {FORMAT})", self.format);
        }
        let code = self.code.build()?;
        if code.k() != self.k || code.n() - code.k() != self.m {
            bail!("k = {} and m = {} do not match code {}", self.k, self.m, self.code);
        }
        if self.shard_len != shard_len(self.size, self.k, code.sub_chunks()) {
            bail!("shard length {} does not match size {} over k = {}", self.shard_len, self.size, self.k);
        }
        if self.shards.len() != code.n() {
            bail!("{} shard entries for a code with {} shards", self.shards.len(), code.n());
        }
        for (i, s) in self.shards.iter().enumerate() {
            if s.index != i {
                bail!("shard entry {i} has index {}", s.index);
            }
            if s.file.is_empty() || s.file.contains('/') || s.file.contains('\\') || s.file == "." || s.file == ".." {
                bail!("shard file name '{}' must be a plain name in the manifest's directory", s.file);
            }
        }
        Ok(code)
    }
}

/// Shard length of a file of `size` bytes: ceil(size / k), rounded up to whole sub-chunks
/// for sub-packetized codes (Clay).
pub fn shard_len(size: u64, k: usize, sub_chunks: usize) -> u64 {
    size.div_ceil(k as u64).next_multiple_of(sub_chunks as u64)
}
