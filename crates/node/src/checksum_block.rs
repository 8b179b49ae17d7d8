//! How big a chunk's checksum blocks are. A verified read reads whole blocks, so the block
//! is the least a reader can read: 64 KiB for most chunks, a sub-chunk for Clay's.

use crate::store::Footer;

/// Checksum granularity: the largest block, and every chunk's unless it is sub-packetized.
pub const BLOCK: usize = 64 * 1024;
/// The smallest block: a page, what a disk reads anyway.
pub const MIN_BLOCK: usize = 4096;

/// The checksum block for a chunk of `len` bytes in `sub_chunks` sub-chunks. A Clay helper
/// reads a quarter of each chunk in runs of sub-chunks (1, 4, 16 or 64 runs for
/// Clay(10,4,13)); with 64 KiB blocks over 4 KiB sub-chunks, verifying a run means reading
/// every block it touches, the whole chunk. So a sub-packetized chunk's blocks tile its
/// sub-chunks: the sub-chunk itself, an even part of it when it is over 64 KiB, or a few
/// whole sub-chunks when one is under a page. Anything else keeps 64 KiB blocks.
pub fn block_for(len: u64, sub_chunks: u32) -> usize {
    let sub_chunks = sub_chunks as u64;
    if sub_chunks <= 1 || len == 0 || !len.is_multiple_of(sub_chunks) {
        return BLOCK;
    }
    let sub = len / sub_chunks;
    if sub < MIN_BLOCK as u64 {
        return (sub * (MIN_BLOCK as u64).div_ceil(sub)).min(BLOCK as u64) as usize;
    }
    let parts = sub.div_ceil(BLOCK as u64);
    if sub.is_multiple_of(parts) {
        (sub / parts) as usize
    } else {
        BLOCK
    }
}

/// A footer's block size and count agree with its length.
pub(crate) fn footer_fits(f: &Footer) -> bool {
    (MIN_BLOCK..=BLOCK).contains(&f.block) && f.blocks.len() as u64 == f.len.div_ceil(f.block as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ChunkStore, ReadCache};
    use kintsugi_proto::ChunkId;

    #[test]
    fn blocks_tile_sub_chunks() {
        // Clay(10,4,13), alpha 256: 1 MiB chunks in 4 KiB sub-chunks, 4 MiB in 16 KiB.
        assert_eq!(block_for(1 << 20, 256), 4096);
        assert_eq!(block_for(4 << 20, 256), 16 << 10);
        // Over 64 KiB: an even part; under a page: whole sub-chunks up to a page or more.
        assert_eq!(block_for(64 << 20, 256), 64 << 10);
        assert_eq!(block_for(256 * 96 * 1024, 256), 48 << 10);
        assert_eq!(block_for(256 * 3000, 256), 6000);
        // No sub-chunks, or a length they do not divide: 64 KiB.
        for (len, sub) in [(1 << 20, 1), (1 << 20, 0), (1_000_001, 256), (0, 256)] {
            assert_eq!(block_for(len, sub), BLOCK, "{len} {sub}");
        }
        for (len, sub) in [(1u64 << 20, 256u32), (4 << 20, 64), (7 * 4096, 7), (100, 3), (256 * 65537, 256)] {
            let b = block_for(len, sub);
            assert!((MIN_BLOCK..=BLOCK).contains(&b), "{len} {sub}: {b}");
        }
    }

    /// A chunk checksummed per 4 KiB: reads verify at that grain, a run's read-ahead
    /// stops where asked, and a flipped byte is caught in its own block only.
    #[test]
    fn small_blocks_read_only_what_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path()).unwrap();
        let id = ChunkId::try_from("s1".to_string()).unwrap();
        let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 13 + 1) as u8).collect();
        let mut w = store.writer(&id).unwrap().with_block(block_for(data.len() as u64, 256));
        for part in data.chunks(5000) {
            w.write(part).unwrap();
        }
        w.finish(Some(kintsugi_proto::crc::crc32c(&data))).unwrap();
        let r = store.reader(&id).unwrap();
        assert_eq!(r.block(), 4096);
        assert_eq!(r.read(0, data.len() as u64).unwrap(), data);
        // Sub-chunks 5 and 9 wanted, 512 KiB of read-ahead allowed: each read stops at its
        // sub-chunk's end.
        let mut c = ReadCache::new(store.reader(&id).unwrap(), 3, 512 << 10);
        c.fetch_until(5 * 4096 + 100, 1000, 6 * 4096).unwrap();
        c.fetch_until(9 * 4096, 4096, 10 * 4096).unwrap();
        assert_eq!(c.peek(5 * 4096 + 100, 1000), &data[5 * 4096 + 100..5 * 4096 + 1100]);
        assert_eq!(c.peek(9 * 4096, 4096), &data[9 * 4096..10 * 4096]);
        assert_eq!(c.file_bytes(), 2 * 4096);
        // The rest of sub-chunk 5 is already there: nothing more read.
        c.fetch_until(5 * 4096 + 1100, 2000, 6 * 4096).unwrap();
        assert_eq!(c.file_bytes(), 2 * 4096);
        // Unbounded, a window reads ahead as before.
        c.fetch(20 * 4096, 10).unwrap();
        assert_eq!(c.file_bytes(), 2 * 4096 + (512 << 10));

        let path = dir.path().join("s1.chunk");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[7 * 4096 + 3] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let r = store.reader(&id).unwrap();
        assert!(r.read(6 * 4096, 4096).is_ok(), "the block before is intact");
        assert!(r.read(8 * 4096, 4096).is_ok(), "the block after too");
        let err = r.read(7 * 4096, 1).unwrap_err();
        assert!(err.to_string().contains("block 7"), "{err}");
    }

    /// A footer whose block size is out of range, or whose checksum count does not match
    /// its blocks, is a corrupt chunk, not a panic or a misread.
    #[test]
    fn footers_with_odd_blocks_are_refused() {
        for (block, blocks) in [(512usize, 2048usize), (1 << 20, 1), (4096, 3)] {
            let f = Footer { len: 1 << 20, block, crc32c: 0, blocks: vec![0; blocks] };
            assert!(!footer_fits(&f), "{block} x {blocks}");
        }
        assert!(footer_fits(&Footer { len: 1 << 20, block: 4096, crc32c: 0, blocks: vec![0; 256] }));
        assert!(footer_fits(&Footer { len: 1 << 20, block: BLOCK, crc32c: 0, blocks: vec![0; 16] }));
    }
}
