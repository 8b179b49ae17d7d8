//! The equal-work forwarder of `kintsugi bench relay`: the plain forwarder's three threads,
//! doing the work a repair chain cannot skip and nothing else. The source reads its chunk
//! from a file in the store's read-ahead windows, checks each 64 KiB block's CRC-32C,
//! multiplies each slice by its coefficient and sends it; the relay does the same with its
//! own chunk and adds what it receives; the sink writes what it receives to a file in
//! 256 KiB pieces with each block's CRC, then fsyncs and renames it. Records are sealed
//! and opened as the protection asks (AES-256-GCM, or a keyed BLAKE3 tag), one per slice.
//!
//! The node processes do the same work inside the system's framework (tasks, frames, read
//! caches, the plan). So node / equal-work is what the framework costs, while node / plain
//! forwarder also counts reading, multiplying and writing the chunks, which no relay of a
//! repair can drop.

use anyhow::{anyhow, ensure, Context, Result};
use kintsugi_proto::secure::Protection;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The store's checksum block.
const BLOCK: usize = 64 * 1024;
/// What the sink's writer takes at once (the node's sink hands its writer 256 KiB batches).
const WRITE_BATCH: usize = 256 * 1024;
/// Bytes of a record's tag.
const TAG: usize = 16;

/// Two helper chunks in plain files, their blocks' CRCs, and the repair's coefficients.
pub(crate) struct EqualWork {
    dir: PathBuf,
    files: [PathBuf; 2],
    crcs: [Vec<u32>; 2],
    coefs: [u8; 2],
    /// The rebuilt chunk's CRC-32C: every run's sink checks it.
    want: u32,
    chunk: usize,
    read_ahead: usize,
}

impl EqualWork {
    /// Writes the helper chunks `data` under `dir`; the rebuilt chunk is
    /// `coefs[0] * data[0] + coefs[1] * data[1]`, with CRC-32C `want`.
    pub(crate) fn new(dir: &Path, data: [&[u8]; 2], coefs: [u8; 2], want: u32, read_ahead: usize) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let files = [dir.join("helper0"), dir.join("helper1")];
        for (f, d) in files.iter().zip(data) {
            std::fs::write(f, d).with_context(|| format!("cannot write {}", f.display()))?;
        }
        let crcs = data.map(|d| d.chunks(BLOCK).map(kintsugi_proto::crc::crc32c).collect());
        let chunk = data[0].len();
        Ok(EqualWork { dir: dir.to_path_buf(), files, crcs, coefs, want, chunk, read_ahead: read_ahead.next_multiple_of(BLOCK) })
    }

    /// Runs `repairs` chains of the chunk in `slice`-byte slices under `protection`.
    /// Returns each thread's CPU seconds (source, relay, sink) and the wall time. The
    /// rebuilt files are removed after their CPU is counted.
    pub(crate) fn run(&self, repairs: usize, slice: usize, protection: Protection) -> Result<([f64; 3], f64)> {
        let l1 = std::net::TcpListener::bind("127.0.0.1:0")?;
        let l2 = std::net::TcpListener::bind("127.0.0.1:0")?;
        let (a1, a2) = (l1.local_addr()?, l2.local_addr()?);
        let key = [7u8; 32];
        let start = Instant::now();
        let (chunk, want, dir) = (self.chunk, self.want, self.dir.clone());
        let outputs = std::thread::scope(|s| -> Result<[f64; 3]> {
            let sink = s.spawn(move || -> Result<(f64, Vec<PathBuf>)> {
                let (mut up, _) = l2.accept()?;
                let mut rec = Records::new(protection, &key);
                let c0 = crate::bench_relay::thread_cpu();
                let mut buf = vec![0u8; slice + TAG];
                let mut batch = Vec::with_capacity(WRITE_BATCH);
                let mut done = Vec::new();
                for r in 0..repairs {
                    let tmp = dir.join(format!("rebuilt{r}.tmp"));
                    let mut file = std::fs::File::create(&tmp)?;
                    let (mut crc, mut blocks) = (0u32, Vec::with_capacity(chunk.div_ceil(BLOCK)));
                    for off in (0..chunk).step_by(slice) {
                        let n = slice.min(chunk - off);
                        let body = rec.receive(&mut up, &mut buf, n)?;
                        batch.extend_from_slice(body);
                        if batch.len() >= WRITE_BATCH || off + n == chunk {
                            blocks.extend(batch.chunks(BLOCK).map(kintsugi_proto::crc::crc32c));
                            crc = kintsugi_proto::crc::crc32c_append(crc, &batch);
                            file.write_all(&batch)?;
                            batch.clear();
                        }
                    }
                    file.sync_all()?;
                    ensure!(crc == want, "the equal-work sink rebuilt the wrong bytes: crc32c {crc:08x}, expected {want:08x}");
                    let path = dir.join(format!("rebuilt{r}"));
                    std::fs::rename(&tmp, &path)?;
                    done.push(path);
                }
                Ok((crate::bench_relay::thread_cpu() - c0, done))
            });
            let relay = s.spawn(move || -> Result<f64> {
                let (mut up, _) = l1.accept()?;
                let mut down = std::net::TcpStream::connect(a2)?;
                let (mut rx, mut tx) = (Records::new(protection, &key), Records::new(protection, &key));
                let c0 = crate::bench_relay::thread_cpu();
                let mut window = Vec::new();
                let mut buf = vec![0u8; slice + TAG];
                for _ in 0..repairs {
                    self.each_slice(1, slice, &mut window, |local| {
                        let n = local.len();
                        rx.receive(&mut up, &mut buf, n)?;
                        kintsugi_gf::mul_add(self.coefs[1], local, &mut buf[..n]);
                        tx.send(&mut down, &mut buf, n)
                    })?;
                }
                Ok(crate::bench_relay::thread_cpu() - c0)
            });
            let source = s.spawn(move || -> Result<f64> {
                let mut down = std::net::TcpStream::connect(a1)?;
                let mut tx = Records::new(protection, &key);
                let c0 = crate::bench_relay::thread_cpu();
                let mut window = Vec::new();
                let mut buf = vec![0u8; slice + TAG];
                for _ in 0..repairs {
                    self.each_slice(0, slice, &mut window, |local| {
                        let n = local.len();
                        kintsugi_gf::mul_slice(self.coefs[0], local, &mut buf[..n]);
                        tx.send(&mut down, &mut buf, n)
                    })?;
                }
                Ok(crate::bench_relay::thread_cpu() - c0)
            });
            let join =
                |h: std::thread::ScopedJoinHandle<'_, Result<f64>>| h.join().map_err(|_| anyhow!("an equal-work thread panicked"))?;
            let (src, rel) = (join(source)?, join(relay)?);
            let (snk, done) = sink.join().map_err(|_| anyhow!("an equal-work thread panicked"))??;
            for p in done {
                std::fs::remove_file(p)?;
            }
            Ok([src, rel, snk])
        })?;
        Ok((outputs, start.elapsed().as_secs_f64()))
    }

    /// Reads helper `h`'s chunk window by window, checking every block, and calls `f` with
    /// each slice of it in order (a slice across two windows is put together in `carry`).
    fn each_slice(&self, h: usize, slice: usize, window: &mut Vec<u8>, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let file = std::fs::File::open(&self.files[h])?;
        let (mut next, mut carry) = (0, Vec::new());
        for start in (0..self.chunk).step_by(self.read_ahead) {
            let len = self.read_ahead.min(self.chunk - start);
            window.resize(len, 0);
            file.read_exact_at(window, start as u64)?;
            for (i, b) in window.chunks(BLOCK).enumerate() {
                let want = self.crcs[h][start / BLOCK + i];
                ensure!(kintsugi_proto::crc::crc32c(b) == want, "helper {h}'s block {} changed on disk", start / BLOCK + i);
            }
            let mut p = 0;
            while p < len {
                let want = slice.min(self.chunk - next);
                let take = (want - carry.len()).min(len - p);
                if carry.is_empty() && take == want {
                    f(&window[p..p + want])?;
                } else {
                    carry.extend_from_slice(&window[p..p + take]);
                    if carry.len() < want {
                        break;
                    }
                    f(&carry)?;
                    carry.clear();
                }
                p += take;
                next += want;
            }
        }
        Ok(())
    }
}

/// One direction's records: sealed with AES-256-GCM, tagged with keyed BLAKE3, or open.
struct Records {
    protection: Protection,
    aes: ring::aead::LessSafeKey,
    mac: [u8; 32],
    count: u64,
}

impl Records {
    fn new(protection: Protection, key: &[u8; 32]) -> Self {
        let aes = ring::aead::LessSafeKey::new(ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, key).expect("a 32-byte key"));
        Records { protection, aes, mac: blake3::derive_key("kintsugi bench equal-work records", key), count: 0 }
    }

    fn nonce(&mut self) -> ring::aead::Nonce {
        let mut b = [0u8; 12];
        b[4..].copy_from_slice(&self.count.to_be_bytes());
        self.count += 1;
        ring::aead::Nonce::assume_unique_for_key(b)
    }

    fn tag_len(&self) -> usize {
        if self.protection == Protection::Open {
            0
        } else {
            TAG
        }
    }

    fn mac(&mut self, data: &[u8]) -> [u8; TAG] {
        let mut h = blake3::Hasher::new_keyed(&self.mac);
        h.update(&self.count.to_be_bytes());
        self.count += 1;
        h.update(data);
        h.finalize().as_bytes()[..TAG].try_into().expect("16 bytes")
    }

    /// Seals `buf[..n]` and sends it with its tag.
    fn send(&mut self, to: &mut std::net::TcpStream, buf: &mut [u8], n: usize) -> Result<()> {
        let (body, tag) = buf.split_at_mut(n);
        match self.protection {
            Protection::Open => {}
            Protection::Encrypted => {
                let nonce = self.nonce();
                let t = self.aes.seal_in_place_separate_tag(nonce, ring::aead::Aad::empty(), body).map_err(|_| anyhow!("seal failed"))?;
                tag[..TAG].copy_from_slice(t.as_ref());
            }
            Protection::Authenticated => tag[..TAG].copy_from_slice(&self.mac(body)),
        }
        to.write_all(&buf[..n + self.tag_len()])?;
        Ok(())
    }

    /// Receives an `n`-byte record into `buf` and opens it; returns its bytes.
    fn receive<'b>(&mut self, from: &mut std::net::TcpStream, buf: &'b mut [u8], n: usize) -> Result<&'b [u8]> {
        let t = self.tag_len();
        from.read_exact(&mut buf[..n + t])?;
        let (body, tag) = buf.split_at_mut(n);
        let ok = match self.protection {
            Protection::Open => true,
            Protection::Encrypted => {
                let nonce = self.nonce();
                let tag = ring::aead::Tag::try_from(&tag[..TAG]).map_err(|_| anyhow!("a bad tag"))?;
                self.aes.open_in_place_separate_tag(nonce, ring::aead::Aad::empty(), tag, body, 0..).is_ok()
            }
            Protection::Authenticated => self.mac(body) == tag[..TAG],
        };
        ensure!(ok, "an equal-work record failed its check");
        Ok(&buf[..n])
    }
}
