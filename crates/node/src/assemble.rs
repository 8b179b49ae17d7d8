//! Sealing a small-size bucket slot (Geometric Partitioning, section 4.2): the pieces that
//! objects' remainders and small objects left in one slot while its stripe was open, each
//! stored as a chunk of its own, become the slot's chunk, zeros between and after them, so
//! the stripe's parity can be computed over it like over any chunk.

use crate::store::ChunkStore;
use kintsugi_proto::WireError;
use kintsugi_proto::{BucketSlot, ChunkId};

/// The pieces of a slot: each (piece, offset in the slot), and the range of each to take
/// (offset, length; none: every piece whole).
pub type Pieces<'a> = (&'a [(ChunkId, u64)], &'a [(u64, u64)]);

/// Bytes copied at a time (memory stays at one of these whatever the pieces' sizes).
const COPY: u64 = 1 << 20;

/// Writes `chunk` of `len` bytes in `sub_chunks` (its code's) from `pieces` (piece,
/// offset), each read verified, of each piece the bytes `ranges` says (offset, length; all
/// of it when `ranges` is empty); the result must have checksum `crc` or nothing is stored.
/// Runs on a blocking thread.
pub fn assemble(
    store: &ChunkStore,
    chunk: &ChunkId,
    (len, sub_chunks): (u64, u32),
    (pieces, ranges): Pieces<'_>,
    crc: u32,
    bucket: Option<BucketSlot>,
) -> Result<u32, WireError> {
    if !ranges.is_empty() && ranges.len() != pieces.len() {
        return Err(WireError::bad_request(format!("{} ranges for {} pieces", ranges.len(), pieces.len())));
    }
    let block = crate::store::block_for(len, sub_chunks);
    let mut w = store.writer_in(chunk, bucket).map_err(WireError::from)?.with_block(block);
    let zeros = vec![0u8; COPY as usize];
    let pad = |w: &mut crate::store::ChunkWriter, to: u64| -> Result<(), WireError> {
        while w.len() < to {
            let n = (to - w.len()).min(COPY);
            w.write(&zeros[..n as usize]).map_err(WireError::from)?;
        }
        Ok(())
    };
    for (i, (piece, offset)) in pieces.iter().enumerate() {
        if *offset < w.len() {
            return Err(WireError::internal(format!("piece {piece} at {offset} overlaps the one before (which ends at {})", w.len())));
        }
        let r = store.reader(piece).map_err(WireError::from)?;
        let (from, take) = ranges.get(i).copied().unwrap_or((0, r.len()));
        if from.checked_add(take).is_none_or(|end| end > r.len()) {
            return Err(WireError::bad_request(format!("bytes {from}+{take} of piece {piece} are past its {} bytes", r.len())));
        }
        if offset.checked_add(take).is_none_or(|end| end > len) {
            return Err(WireError::internal(format!("piece {piece} ({take} bytes at {offset}) does not fit a chunk of {len} bytes")));
        }
        pad(&mut w, *offset)?;
        let mut at = 0;
        while at < take {
            let n = (take - at).min(COPY);
            w.write(&r.read(from + at, n).map_err(WireError::from)?).map_err(WireError::from)?;
            at += n;
        }
    }
    pad(&mut w, len)?;
    w.finish(Some(crc)).map_err(WireError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces land at their offsets with zeros around them; a wrong checksum, overlapping or
    /// overlong pieces, or a missing one store nothing.
    #[test]
    fn pieces_become_one_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        let a: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
        let b: Vec<u8> = (0..(1 << 20) + 77u32).map(|i| (i % 13) as u8 + 1).collect();
        let (pa, pb) = (ChunkId::piece(5, 1, 0, 0), ChunkId::piece(5, 1, 5000, 0));
        store.put(&pa, &a).unwrap();
        store.put(&pb, &b).unwrap();
        let len = 5000 + b.len() as u64 + 999;
        let mut want = vec![0u8; len as usize];
        want[..a.len()].copy_from_slice(&a);
        want[5000..5000 + b.len()].copy_from_slice(&b);
        let crc = kintsugi_proto::crc::crc32c(&want);
        let out = ChunkId::new(5, 1);
        let slot = Some(BucketSlot { pg: 2, class: len, slot: 3, small: true });
        let pieces = vec![(pa.clone(), 0), (pb.clone(), 5000)];
        assert!(assemble(&store, &out, (len, 1), (&pieces, &[]), crc ^ 1, slot).is_err());
        assert!(store.reader(&out).is_err(), "a wrong checksum stores nothing");
        assert!(assemble(&store, &out, (len, 1), (&[(pa.clone(), 0), (pb.clone(), 2000)], &[]), crc, slot)
            .unwrap_err()
            .message()
            .contains("overlaps"));
        assert!(assemble(&store, &out, (len - 1000, 1), (&pieces, &[]), crc, slot).unwrap_err().message().contains("does not fit"));
        let missing = vec![(pa.clone(), 0), (ChunkId::piece(5, 1, 9, 0), 5000)];
        assert!(assemble(&store, &out, (len, 1), (&missing, &[]), crc, slot).is_err());
        assert!(store.reader(&out).is_err());
        assert_eq!(assemble(&store, &out, (len, 1), (&pieces, &[]), crc, slot).unwrap(), crc);
        assert_eq!(store.reader(&out).unwrap().read(0, len).unwrap(), want);
        // Ranges of pieces (compaction moving pieces out of a sealed slot): b's middle,
        // then a's tail, packed from 0.
        let moved = ChunkId::new(6, 0);
        let (b_from, b_take, a_from, a_take) = (100_000u64, 300_000u64, 2_000u64, 1_000u64);
        let mut packed = b[b_from as usize..(b_from + b_take) as usize].to_vec();
        packed.extend_from_slice(&a[a_from as usize..]);
        let ranges = [(b_from, b_take), (a_from, a_take)];
        let crc = kintsugi_proto::crc::crc32c(&packed);
        let two = [(pb.clone(), 0), (pa.clone(), b_take)];
        assert!(assemble(&store, &moved, (packed.len() as u64, 1), (&two, &ranges[..1]), crc, None).is_err(), "a range per piece");
        let past = [(b_from, b_take), (a_from, a_take + 1)];
        assert!(assemble(&store, &moved, (packed.len() as u64, 1), (&two, &past), crc, None).is_err(), "past the piece's end");
        assert_eq!(assemble(&store, &moved, (packed.len() as u64, 1), (&two, &ranges), crc, None).unwrap(), crc);
        assert_eq!(store.reader(&moved).unwrap().read(0, packed.len() as u64).unwrap(), packed);
    }
}
