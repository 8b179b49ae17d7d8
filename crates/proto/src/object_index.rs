//! The per-object index of Geo and Contiguous objects (Geometric Partitioning, section 5.1):
//! one compact record an object, kept by a few members of its placement group, so a reader
//! finds an object's chunks without asking the coordinator.
//!
//! A record names, for each run of the object's bytes in order, the chunk holding it (its
//! stripe, index, node and bucket slot), its length and its checksum; it carries no
//! address (the cluster map has those) and nothing a reader can derive. It is encoded
//! with postcard (varints): about 16 bytes per chunk plus 20 for the object, 141 bytes for
//! the paper's 73.5 MiB example of seven runs. The paper's records are about 40 bytes with
//! one checksum per object and chunk positions of 2 bytes; ours keep a checksum per chunk,
//! so each chunk is checked end to end as the coordinator's layouts are, and a chunk's
//! stripe id and node, so a record stays right when a repair moves one chunk.

use crate::layout::{ChunkLoc, Extent, LayoutSpec, ObjectLayout, StripeLayout};
use crate::wire_graph::NodeId;
use crate::{BucketSlot, ChunkId};
use kintsugi_codes::CodeSpec;
use serde::{Deserialize, Serialize};

/// Longest record a node keeps (an object of 256 chunks is well under it).
pub const MAX_RECORD: usize = 16 << 10;

/// One object's index record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRecord {
    pub version: u64,
    pub size: u64,
    pub code: CompactCode,
    pub layout: CompactLayout,
    /// The object's bytes, in order.
    pub runs: Vec<Run>,
}

/// A code in four bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompactCode {
    Rs(u8, u8),
    Lrc(u8, u8, u8),
    Clay(u8, u8, u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompactLayout {
    Geo { s0: u64, q: u64, cap: u64 },
    Contiguous { chunk: u64 },
}

/// A run of the object's bytes: a whole chunk of a size-class stripe, or a piece of a
/// small-size bucket slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub stripe: u64,
    pub index: u16,
    pub node: NodeId,
    /// The slot of the bucket (of the size class `len`, or of the small-size bucket).
    pub slot: u64,
    pub len: u64,
    /// The chunk's checksum, or the piece's.
    pub crc32c: [u8; 4],
    pub piece: Option<PieceRun>,
}

/// Where a piece sits in its small-size bucket slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieceRun {
    pub offset: u64,
    /// The small-size bucket's slot size (s0), and its stripe's chunk length once sealed.
    pub class: u64,
    pub chunk_len: u64,
    /// Sealed when the record was written: the piece is a range of the slot's chunk; else
    /// it is a chunk of its own on `node`.
    pub sealed: bool,
}

impl CompactCode {
    pub fn of(c: CodeSpec) -> Option<Self> {
        let b = |x: usize| u8::try_from(x).ok();
        Some(match c {
            CodeSpec::Rs { k, m } => CompactCode::Rs(b(k)?, b(m)?),
            CodeSpec::Lrc { k, l, m } => CompactCode::Lrc(b(k)?, b(l)?, b(m)?),
            CodeSpec::Clay { k, m, d } => CompactCode::Clay(b(k)?, b(m)?, b(d)?),
        })
    }
    pub fn spec(self) -> CodeSpec {
        match self {
            CompactCode::Rs(k, m) => CodeSpec::Rs { k: k as usize, m: m as usize },
            CompactCode::Lrc(k, l, m) => CodeSpec::Lrc { k: k as usize, l: l as usize, m: m as usize },
            CompactCode::Clay(k, m, d) => CodeSpec::Clay { k: k as usize, m: m as usize, d: d as usize },
        }
    }
}

impl IndexRecord {
    /// The record of a committed extent layout (Geo, Contiguous); None for other layouts.
    pub fn from_layout(l: &ObjectLayout) -> Option<Self> {
        let layout = match l.layout {
            LayoutSpec::Geo { s0, q, cap } => CompactLayout::Geo { s0, q, cap },
            LayoutSpec::Contiguous { chunk } => CompactLayout::Contiguous { chunk },
            _ => return None,
        };
        if !l.committed || l.extents.is_empty() {
            return None;
        }
        let mut runs = Vec::with_capacity(l.extents.len());
        for e in &l.extents {
            let s = l.stripes.get(e.stripe)?;
            let loc = s.chunks.get(e.index)?;
            let slot = loc.bucket?;
            let piece = s.small.then_some(PieceRun { offset: e.offset, class: slot.class, chunk_len: s.chunk_len, sealed: !s.open });
            let crc = if s.small { e.crc32c? } else { loc.crc32c? };
            runs.push(Run {
                stripe: s.id,
                index: u16::try_from(e.index).ok()?,
                node: loc.node,
                slot: slot.slot,
                len: e.len,
                crc32c: crc.to_le_bytes(),
                piece,
            });
        }
        Some(IndexRecord { version: l.version, size: l.size, code: CompactCode::of(l.code)?, layout, runs })
    }

    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("records serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_RECORD {
            return Err(format!("an index record of {} bytes (at most {MAX_RECORD})", bytes.len()));
        }
        let r: IndexRecord = postcard::from_bytes(bytes).map_err(|e| format!("unreadable index record: {e}"))?;
        if r.runs.iter().map(|x| x.len).try_fold(0u64, u64::checked_add) != Some(r.size) {
            return Err("an index record whose runs do not add up to its size".into());
        }
        Ok(r)
    }

    /// The layout a reader follows: one stripe per run, holding the run's chunk at its index
    /// (the stripe's other chunks are unknown here and marked lost; a reader that needs them,
    /// to rebuild a chunk, asks the coordinator). `addr` gives the nodes' addresses.
    pub fn to_layout(&self, name: &str, pg: u32, addr: &dyn Fn(NodeId) -> Option<String>) -> ObjectLayout {
        let code = self.code.spec();
        let mut stripes = Vec::with_capacity(self.runs.len());
        let mut extents = Vec::with_capacity(self.runs.len());
        for (i, r) in self.runs.iter().enumerate() {
            let index = r.index as usize;
            let crc = u32::from_le_bytes(r.crc32c);
            let (class, small, chunk_len) = match &r.piece {
                Some(p) => (p.class, true, p.chunk_len),
                None => (r.len, false, r.len),
            };
            let at = addr(r.node);
            let here = ChunkLoc {
                chunk: ChunkId::new(r.stripe, index),
                node: r.node,
                alive: at.is_some(),
                addr: at.unwrap_or_default(),
                crc32c: (!small).then_some(crc),
                lost: false,
                bucket: Some(BucketSlot { pg, class, slot: r.slot, small }),
            };
            let unknown = ChunkLoc {
                chunk: ChunkId::new(r.stripe, 0),
                node: 0,
                addr: String::new(),
                alive: false,
                crc32c: None,
                lost: true,
                bucket: None,
            };
            let mut chunks = vec![unknown; index + 1];
            chunks[index] = here;
            let rcode = match code {
                CodeSpec::Clay { k, m, .. } if small => Some(CodeSpec::Rs { k, m }),
                _ => None,
            };
            stripes.push(StripeLayout {
                id: r.stripe,
                data_len: r.len,
                chunk_len,
                chunks,
                open: r.piece.as_ref().is_some_and(|p| !p.sealed),
                replicas: vec![],
                code: rcode,
                small,
            });
            let offset = r.piece.as_ref().map_or(0, |p| p.offset);
            extents.push(Extent { stripe: i, index, offset, len: r.len, crc32c: small.then_some(crc) });
        }
        let layout = match self.layout {
            CompactLayout::Geo { s0, q, cap } => LayoutSpec::Geo { s0, q, cap },
            CompactLayout::Contiguous { chunk } => LayoutSpec::Contiguous { chunk },
        };
        // Attributes are not indexed: a reader that needs them asks the coordinator.
        ObjectLayout {
            name: name.to_string(),
            size: self.size,
            code,
            committed: true,
            version: self.version,
            stripes,
            layout,
            extents,
            attrs: Default::default(),
            versioned: false,
            delete_marker: false,
            inline: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(stripe: u64, index: usize, node: NodeId, crc: Option<u32>, class: u64, slot: u64, small: bool) -> ChunkLoc {
        ChunkLoc {
            chunk: ChunkId::new(stripe, index),
            node,
            addr: format!("10.0.0.{node}:7000"),
            alive: true,
            crc32c: crc,
            lost: false,
            bucket: Some(BucketSlot { pg: 7, class, slot, small }),
        }
    }

    /// The paper's example object, 73.5 MiB with s0 = 4 MiB and q = 2: a 1.5 MiB remainder
    /// piece, then chunks of 4, 4, 8, 8, 16 and 32 MiB, all on node 3.
    fn example() -> ObjectLayout {
        const M: u64 = 1 << 20;
        let sizes = [4 * M, 4 * M, 8 * M, 8 * M, 16 * M, 32 * M];
        let mut stripes = vec![StripeLayout {
            id: 90_001,
            data_len: 10 * 4 * M,
            chunk_len: 3 * M,
            chunks: (0..14).map(|i| loc(90_001, i, i as NodeId, None, 4 * M, 12, true)).collect(),
            open: false,
            replicas: vec![],
            code: Some(CodeSpec::Rs { k: 10, m: 4 }),
            small: true,
        }];
        let mut extents = vec![Extent { stripe: 0, index: 3, offset: 1_048_576, len: 3 * M / 2, crc32c: Some(0xdead_beef) }];
        for (i, &s) in sizes.iter().enumerate() {
            let id = 100_000 + i as u64;
            stripes.push(StripeLayout {
                id,
                data_len: 10 * s,
                chunk_len: s,
                chunks: (0..14).map(|j| loc(id, j, j as NodeId, Some(0x1234_5678 + j as u32), s, 300 + i as u64, false)).collect(),
                open: false,
                replicas: vec![],
                code: None,
                small: false,
            });
            extents.push(Extent { stripe: i + 1, index: 3, offset: 0, len: s, crc32c: None });
        }
        ObjectLayout {
            name: "photos/2021/cat.jpg".into(),
            size: 73 * M + M / 2,
            code: CodeSpec::Clay { k: 10, m: 4, d: 13 },
            committed: true,
            version: 48_213,
            stripes,
            layout: LayoutSpec::Geo { s0: 4 * M, q: 2, cap: 0 },
            extents,
            attrs: Default::default(),
            versioned: false,
            delete_marker: false,
            inline: None,
        }
    }

    #[test]
    fn a_record_is_compact_and_gives_back_where_every_byte_is() {
        let l = example();
        let r = IndexRecord::from_layout(&l).expect("a Geo layout has a record");
        let bytes = r.encode();
        // 7 runs (the remainder and six chunks) at about 16 bytes each, plus the object.
        assert!(bytes.len() <= 7 * 17 + 24, "{} bytes", bytes.len());
        let back = IndexRecord::decode(&bytes).expect("decodes");
        assert_eq!(back, r);
        let addr = |n: NodeId| Some(format!("10.0.0.{n}:7000"));
        let got = back.to_layout(&l.name, 7, &addr);
        assert_eq!((got.size, got.version, got.code, got.layout), (l.size, l.version, l.code, l.layout));
        // Each run reads the same chunk, range and checksum as the coordinator's layout says.
        assert_eq!(got.extents.len(), l.extents.len());
        for (g, e) in got.extents.iter().zip(&l.extents) {
            let (gs, es) = (&got.stripes[g.stripe], &l.stripes[e.stripe]);
            assert_eq!((gs.id, gs.small, gs.open, gs.chunk_len), (es.id, es.small, es.open, es.chunk_len));
            assert_eq!((g.index, g.offset, g.len, g.crc32c), (e.index, e.offset, e.len, e.crc32c));
            let (gl, el) = (&gs.chunks[g.index], &es.chunks[e.index]);
            assert_eq!((&gl.chunk, gl.node, &gl.addr, gl.bucket), (&el.chunk, el.node, &el.addr, el.bucket));
            assert_eq!(gl.crc32c, el.crc32c);
        }
        assert_eq!(got.stripes[0].code, Some(CodeSpec::Rs { k: 10, m: 4 }));
    }

    #[test]
    fn only_committed_extent_layouts_have_records() {
        let mut l = example();
        l.committed = false;
        assert!(IndexRecord::from_layout(&l).is_none());
        let mut l = example();
        l.layout = LayoutSpec::Stripe;
        assert!(IndexRecord::from_layout(&l).is_none());
        // A chunk whose checksum is not known yet cannot be indexed.
        let mut l = example();
        l.stripes[2].chunks[3].crc32c = None;
        assert!(IndexRecord::from_layout(&l).is_none());
    }

    #[test]
    fn bad_records_are_refused() {
        let r = IndexRecord::from_layout(&example()).unwrap();
        let bytes = r.encode();
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(IndexRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong = r.clone();
        wrong.size += 1;
        assert!(IndexRecord::decode(&wrong.encode()).unwrap_err().contains("add up"));
        assert!(IndexRecord::decode(&vec![0u8; MAX_RECORD + 1]).is_err());
    }
}
