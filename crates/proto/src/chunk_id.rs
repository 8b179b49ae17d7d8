//! What a chunk is called on a node ([`ChunkId`]: a stripe's chunk, a staging copy, a
//! small-size bucket piece) and where a Geo chunk sits there ([`BucketSlot`]).

use serde::{Deserialize, Serialize};

/// A chunk's name on a node: `<stripe>.<index>`, letters, digits, '.', '-' and '_' only,
/// so it is always a safe file name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ChunkId(String);

impl ChunkId {
    /// The chunk of `stripe` at `index`.
    pub fn new(stripe: u64, index: usize) -> Self {
        ChunkId(format!("s{stripe:08}.{index:03}"))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Staging copy `copy` (1, 2, ...) of the chunk of `stripe` at `index`: a Geo object's
    /// chunk is replicated until its stripe is sealed (its parity computed).
    pub fn replica(stripe: u64, index: usize, copy: usize) -> Self {
        ChunkId(format!("s{stripe:08}.{index:03}.r{copy}"))
    }
    /// A piece staged for slot `index` of small-size-bucket stripe `stripe`, at `offset` in
    /// the slot; `copy` 0 is the home's, 1, 2, ... its staging copies. The pieces of a slot
    /// are assembled into its chunk when the stripe is sealed.
    pub fn piece(stripe: u64, index: usize, offset: u64, copy: usize) -> Self {
        match copy {
            0 => ChunkId(format!("s{stripe:08}.{index:03}.o{offset}")),
            c => ChunkId(format!("s{stripe:08}.{index:03}.o{offset}.r{c}")),
        }
    }
    /// (stripe, index, offset, copy) of a piece named by [`ChunkId::piece`].
    pub fn piece_parts(&self) -> Option<(u64, usize, u64, usize)> {
        let (s, rest) = self.0.strip_prefix('s')?.split_once('.')?;
        let (i, rest) = rest.split_once(".o")?;
        let (off, copy) = match rest.split_once(".r") {
            Some((o, c)) => (o, c.parse().ok().filter(|&c| c > 0)?),
            None => (rest, 0),
        };
        Some((s.parse().ok()?, i.parse().ok()?, off.parse().ok()?, copy))
    }
    /// (stripe, index, copy) of a staging copy named by [`ChunkId::replica`].
    pub fn replica_parts(&self) -> Option<(u64, usize, usize)> {
        let (s, rest) = self.0.strip_prefix('s')?.split_once('.')?;
        let (i, c) = rest.split_once(".r")?;
        Some((s.parse().ok()?, i.parse().ok()?, c.parse().ok()?))
    }
    /// (stripe, index) of a chunk named by [`ChunkId::new`].
    pub fn parts(&self) -> Option<(u64, usize)> {
        let (s, i) = self.0.strip_prefix('s')?.split_once('.')?;
        Some((s.parse().ok()?, i.parse().ok()?))
    }
}

impl TryFrom<String> for ChunkId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 128
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
            && !s.starts_with('.');
        if ok {
            Ok(ChunkId(s))
        } else {
            Err(format!("invalid chunk id '{}'", s.chars().take(64).collect::<String>()))
        }
    }
}

impl From<ChunkId> for String {
    fn from(c: ChunkId) -> String {
        c.0
    }
}

impl std::fmt::Display for ChunkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a Geo (or Contiguous) stripe's chunk lives on a node: slot `slot` of the node's
/// bucket file for size class `class` of placement group `pg`, at byte `slot * class`
/// (Geometric Partitioning, section 4.2: a stripe is the same slot of its members'
/// same-size buckets, so every chunk of it sits at the same offset on each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BucketSlot {
    pub pg: u32,
    pub class: u64,
    pub slot: u64,
    /// The placement group's small-size bucket (RS stripes packing remainders and small
    /// objects) rather than a size class's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub small: bool,
}

impl BucketSlot {
    /// Largest size class a bucket takes (the partitioner caps chunks at 256 MiB; the
    /// coordinator accepts caps up to 1 GiB).
    pub const MAX_CLASS: u64 = 1 << 30;
    /// Bucket files stay under 2^50 bytes (1 PiB): a slot past that is a bad request.
    pub const MAX_END: u64 = 1 << 50;

    /// The slot's first byte in its bucket file, if the slot is a sane one.
    pub fn offset(&self) -> Result<u64, String> {
        if self.class == 0 || self.class > Self::MAX_CLASS {
            return Err(format!("bucket size class {} is outside 1..={}", self.class, Self::MAX_CLASS));
        }
        match self.slot.checked_mul(self.class) {
            Some(off) if off + self.class <= Self::MAX_END => Ok(off),
            _ => Err(format!("bucket slot {} of class {} is past the largest bucket file", self.slot, self.class)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staging copy's name is never taken for a stripe's chunk (its holder would count
    /// it as the chunk), and round-trips.
    #[test]
    fn staging_copies_have_their_own_names() {
        let r = ChunkId::replica(12, 3, 2);
        assert_eq!(r.as_str(), "s00000012.003.r2");
        assert_eq!(r.parts(), None);
        assert_eq!(r.replica_parts(), Some((12, 3, 2)));
        assert_eq!(ChunkId::new(12, 3).replica_parts(), None);
        assert!(ChunkId::try_from(r.as_str().to_string()).is_ok());
    }

    /// Pieces of small-size bucket slots neither look like a stripe's chunk nor like a
    /// staging copy, and round-trip.
    #[test]
    fn pieces_have_their_own_names() {
        for copy in [0, 1, 2] {
            let p = ChunkId::piece(12, 3, 4096, copy);
            assert_eq!(p.parts(), None);
            assert_eq!(p.replica_parts(), None);
            assert_eq!(p.piece_parts(), Some((12, 3, 4096, copy)));
            assert!(ChunkId::try_from(p.as_str().to_string()).is_ok());
        }
        assert_eq!(ChunkId::piece(1, 0, 7, 0).as_str(), "s00000001.000.o7");
        assert_eq!(ChunkId::new(12, 3).piece_parts(), None);
        assert_eq!(ChunkId::replica(12, 3, 1).piece_parts(), None);
        assert_eq!(ChunkId::try_from("s00000001.000.o7.r0".to_string()).unwrap().piece_parts(), None);
    }
}
