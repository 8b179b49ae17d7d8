//! The sealed-package format of an encrypted object (after MinIO's DARE): its bytes cut into
//! 64 KiB packages, each stored as `nonce (12) | AES-256-GCM ciphertext | tag (16)`. The
//! tag covers the package's part, its place in the part and whether it ends the part, so a
//! package that is tampered with, moved, dropped or cut short fails to open; a range read
//! opens only the packages it touches.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// Plaintext bytes in a package (the last of a part may hold fewer).
pub const PACKAGE: u64 = 64 << 10;
/// What a package adds to its plaintext: its nonce and tag.
pub const OVERHEAD: u64 = (NONCE_LEN + 16) as u64;

/// An object's data key: random, one per object, never stored in clear.
#[derive(Clone)]
pub struct DataKey(pub [u8; 32]);

impl DataKey {
    pub fn random() -> DataKey {
        let mut k = [0u8; 32];
        SystemRandom::new().fill(&mut k).expect("the system's random numbers");
        DataKey(k)
    }

    fn aead(&self) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.0).expect("a 32-byte key"))
    }
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(..)")
    }
}

/// What a package's tag covers besides its bytes.
fn aad(part: u32, seq: u64, last: bool) -> [u8; 29] {
    let mut a = [0u8; 29];
    a[..16].copy_from_slice(b"kintsugi-sse-v1\0");
    a[16..20].copy_from_slice(&part.to_be_bytes());
    a[20..28].copy_from_slice(&seq.to_be_bytes());
    a[28] = last as u8;
    a
}

/// Stored bytes of a part of `plain` bytes.
pub fn stored_len(plain: u64) -> u64 {
    plain + plain.div_ceil(PACKAGE) * OVERHEAD
}

/// One package of an object: where it is stored and what it holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Package {
    /// The part it belongs to (1 for an object put whole) and its place in it.
    pub part: u32,
    pub seq: u64,
    /// Whether it ends its part.
    pub last: bool,
    /// Where its plaintext starts in the object, and how long it is.
    pub plain_start: u64,
    pub plain_len: u64,
    /// Where it is stored in the object's stored bytes.
    pub stored_start: u64,
}

impl Package {
    pub fn stored_len(&self) -> u64 {
        self.plain_len + OVERHEAD
    }
}

/// The packages of an object of parts of `parts` plaintext bytes that hold any byte of
/// [start, end) of its plaintext, in order.
pub fn packages(parts: &[u64], start: u64, end: u64) -> Vec<Package> {
    let mut out = Vec::new();
    let (mut plain, mut stored) = (0u64, 0u64);
    for (i, &len) in parts.iter().enumerate() {
        if plain >= end {
            break;
        }
        if plain + len <= start {
            plain += len;
            stored += stored_len(len);
            continue;
        }
        let count = len.div_ceil(PACKAGE);
        let first = start.saturating_sub(plain) / PACKAGE;
        for seq in first..count {
            let p_start = plain + seq * PACKAGE;
            if p_start >= end {
                break;
            }
            let p_len = PACKAGE.min(len - seq * PACKAGE);
            out.push(Package {
                part: i as u32 + 1,
                seq,
                last: seq + 1 == count,
                plain_start: p_start,
                plain_len: p_len,
                stored_start: stored + seq * (PACKAGE + OVERHEAD),
            });
        }
        plain += len;
        stored += stored_len(len);
    }
    out
}

/// Seals the plaintext in `buf[NONCE_LEN..NONCE_LEN + len]` in place as package (`part`,
/// `seq`, `last`), its nonce written before and its tag after: `buf` ends up the package.
fn seal(key: &LessSafeKey, buf: &mut Vec<u8>, part: u32, seq: u64, last: bool) {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new().fill(&mut nonce).expect("the system's random numbers");
    buf[..NONCE_LEN].copy_from_slice(&nonce);
    let tag = key
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad(part, seq, last)), &mut buf[NONCE_LEN..])
        .expect("a package is far below AES-GCM's limit");
    buf.extend_from_slice(tag.as_ref());
}

/// Why a package does not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("package {seq} of part {part} does not authenticate: the stored bytes were changed, or the key is not this object's")]
    Tampered { part: u32, seq: u64 },
    #[error("the stored bytes end inside package {seq} of part {part}")]
    CutShort { part: u32, seq: u64 },
    #[error("reading the stored bytes: {0}")]
    Read(#[source] std::io::Error),
}

/// Encrypts a part of `plain` bytes read from `inner` into its packages, as an
/// [`AsyncRead`] of [`stored_len`]`(plain)` bytes. A body that ends early ends the
/// stream early (the put then fails on its length).
pub struct Encrypting<R> {
    inner: R,
    key: LessSafeKey,
    part: u32,
    seq: u64,
    left: u64,
    /// The package being filled (`NONCE_LEN + filled` bytes) or sent (from `sent`).
    buf: Vec<u8>,
    filled: usize,
    sent: Option<usize>,
}

impl<R: AsyncRead + Unpin> Encrypting<R> {
    pub fn new(inner: R, key: &DataKey, part: u32, plain: u64) -> Self {
        let buf = Vec::with_capacity(PACKAGE as usize + OVERHEAD as usize);
        Encrypting { inner, key: key.aead(), part, seq: 0, left: plain, buf, filled: 0, sent: None }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Encrypting<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        loop {
            if let Some(at) = me.sent {
                if at < me.buf.len() {
                    let n = (me.buf.len() - at).min(out.remaining());
                    out.put_slice(&me.buf[at..at + n]);
                    me.sent = Some(at + n);
                    return Poll::Ready(Ok(()));
                }
                me.sent = None;
                me.filled = 0;
            }
            if me.left == 0 {
                return Poll::Ready(Ok(()));
            }
            let want = PACKAGE.min(me.left) as usize;
            me.buf.resize(NONCE_LEN + want, 0);
            while me.filled < want {
                let mut rb = ReadBuf::new(&mut me.buf[NONCE_LEN + me.filled..NONCE_LEN + want]);
                match Pin::new(&mut me.inner).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(Ok(())),
                    Poll::Ready(Ok(())) => me.filled += rb.filled().len(),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            me.left -= want as u64;
            seal(&me.key, &mut me.buf, me.part, me.seq, me.left == 0);
            me.seq += 1;
            me.sent = Some(0);
        }
    }
}

/// Stored bytes as they arrive, in pieces, read from the front.
#[derive(Default)]
struct Pieces {
    queue: std::collections::VecDeque<Bytes>,
    len: usize,
}

impl Pieces {
    fn push(&mut self, b: Bytes) {
        self.len += b.len();
        self.queue.push_back(b);
    }

    /// Moves the first `dst.len()` bytes into `dst` (there must be as many).
    fn take_into(&mut self, dst: &mut [u8]) {
        let mut at = 0;
        while at < dst.len() {
            let front = self.queue.front_mut().expect("enough bytes queued");
            let n = front.len().min(dst.len() - at);
            dst[at..at + n].copy_from_slice(&front[..n]);
            bytes::Buf::advance(front, n);
            if front.is_empty() {
                self.queue.pop_front();
            }
            at += n;
        }
        self.len -= dst.len();
    }
}

/// Plaintext handed on at a time (whole packages): large enough that a GET's stream moves
/// few pieces, small enough to keep a range's memory low.
const OPENED_AT_ONCE: u64 = 16 * PACKAGE;

/// The plaintext [start, end) of an object of parts `parts` from `stored`, its stored
/// bytes from the first package of the range on ([`packages`]`(..)[0].stored_start`). Each
/// package's ciphertext is copied once, into the buffer where it is opened.
pub fn decrypting<S>(stored: S, key: &DataKey, parts: &[u64], start: u64, end: u64) -> impl Stream<Item = Result<Bytes, OpenError>> + Send
where
    S: Stream<Item = std::io::Result<Bytes>> + Send + Unpin,
{
    let todo: std::collections::VecDeque<Package> = packages(parts, start, end).into();
    let state = (stored, key.aead(), todo, Pieces::default());
    futures::stream::try_unfold(state, move |(mut stored, key, mut todo, mut pieces)| async move {
        if todo.is_empty() {
            return Ok(None);
        }
        // The packages of this piece of plaintext.
        let mut batch = Vec::new();
        let mut plain = 0u64;
        while let Some(p) = todo.front() {
            if !batch.is_empty() && plain + p.plain_len > OPENED_AT_ONCE {
                break;
            }
            plain += p.plain_len;
            batch.push(todo.pop_front().expect("a package"));
        }
        let mut out = vec![0u8; plain as usize];
        let mut at = 0usize;
        for p in &batch {
            while pieces.len < p.stored_len() as usize {
                match stored.next().await {
                    Some(Ok(b)) => pieces.push(b),
                    Some(Err(e)) => return Err(OpenError::Read(e)),
                    None => return Err(OpenError::CutShort { part: p.part, seq: p.seq }),
                }
            }
            let (mut nonce, mut tag) = ([0u8; NONCE_LEN], [0u8; 16]);
            pieces.take_into(&mut nonce);
            let len = p.plain_len as usize;
            pieces.take_into(&mut out[at..at + len]);
            pieces.take_into(&mut tag);
            let tag = ring::aead::Tag::try_from(&tag[..]).expect("16 bytes");
            key.open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(p.part, p.seq, p.last)),
                tag,
                &mut out[at..at + len],
                0..,
            )
            .map_err(|_| OpenError::Tampered { part: p.part, seq: p.seq })?;
            at += len;
        }
        // Only the asked-for bytes of the first and last packages.
        let (first, last) = (batch[0], batch[batch.len() - 1]);
        let from = start.saturating_sub(first.plain_start) as usize;
        let to = (end.min(last.plain_start + last.plain_len) - first.plain_start) as usize;
        Ok(Some((Bytes::from(out).slice(from..to), (stored, key, todo, pieces))))
    })
}

/// Seals a small value (a data key) under `key` with `label` as what its tag also covers:
/// `nonce | ciphertext | tag`.
pub fn wrap(key: &[u8; 32], label: &[u8], value: &[u8]) -> Vec<u8> {
    let k = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key"));
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new().fill(&mut nonce).expect("the system's random numbers");
    let mut out = nonce.to_vec();
    out.extend_from_slice(value);
    let tag =
        k.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(label), &mut out[NONCE_LEN..]).expect("a small value");
    out.extend_from_slice(tag.as_ref());
    out
}

/// Opens what [`wrap`] sealed; None with another key or label, or changed bytes.
pub fn unwrap(key: &[u8; 32], label: &[u8], wrapped: &[u8]) -> Option<Vec<u8>> {
    if wrapped.len() < OVERHEAD as usize {
        return None;
    }
    let k = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key"));
    let nonce: [u8; NONCE_LEN] = wrapped[..NONCE_LEN].try_into().ok()?;
    let mut body = wrapped[NONCE_LEN..].to_vec();
    let n = k.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(label), &mut body).ok()?.len();
    body.truncate(n);
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn encrypt(key: &DataKey, part: u32, plain: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Encrypting::new(plain, key, part, plain.len() as u64).read_to_end(&mut out).await.unwrap();
        out
    }

    /// The plaintext [start, end) of an object whose parts were stored as `stored`, read
    /// from stored bytes handed over in pieces of `piece`.
    async fn read(key: &DataKey, parts: &[u64], stored: &[u8], start: u64, end: u64, piece: usize) -> Result<Vec<u8>, OpenError> {
        let from = packages(parts, start, end).first().map_or(stored.len(), |p| p.stored_start as usize);
        let pieces: Vec<std::io::Result<Bytes>> = stored[from..].chunks(piece).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let mut s = std::pin::pin!(decrypting(futures::stream::iter(pieces), key, parts, start, end));
        let mut out = Vec::new();
        while let Some(b) = s.next().await {
            out.extend_from_slice(&b?);
        }
        Ok(out)
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u32).wrapping_mul(2654435761).to_be_bytes()[0] ^ seed).collect()
    }

    #[tokio::test]
    async fn every_range_of_parts_of_odd_sizes_decrypts_to_its_bytes() {
        let key = DataKey::random();
        let sizes = [3 * PACKAGE as usize + 17, 1, PACKAGE as usize, 5];
        let parts: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| bytes(n, i as u8)).collect();
        let plain: Vec<u8> = parts.concat();
        let mut stored = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let s = encrypt(&key, i as u32 + 1, p).await;
            assert_eq!(s.len() as u64, stored_len(p.len() as u64));
            stored.extend(s);
        }
        let lens: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
        let n = plain.len() as u64;
        let mut rng = 7u64;
        let mut cases = vec![(0, n), (0, 1), (n - 1, n), (PACKAGE - 1, PACKAGE + 1), (3 * PACKAGE, 3 * PACKAGE + 18)];
        for _ in 0..60 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let a = (rng >> 11) % n;
            let b = a + 1 + (rng >> 40) % (n - a);
            cases.push((a, b));
        }
        for (i, (a, b)) in cases.into_iter().enumerate() {
            let got = read(&key, &lens, &stored, a, b, [1, 1000, 70_000, 1 << 20][i % 4]).await.unwrap();
            assert!(got == plain[a as usize..b as usize], "range {a}..{b}");
        }
        // The plaintext's bytes appear nowhere in what is stored.
        assert!(!stored.windows(32).any(|w| w == &plain[1000..1032]));
    }

    #[tokio::test]
    async fn a_changed_moved_or_cut_package_and_a_wrong_key_fail_to_open() {
        let key = DataKey::random();
        let plain = bytes(2 * PACKAGE as usize + 100, 9);
        let n = plain.len() as u64;
        let stored = encrypt(&key, 1, &plain).await;
        for at in [0, 5, 20, PACKAGE as usize + 30, stored.len() - 1] {
            let mut bad = stored.clone();
            bad[at] ^= 1;
            assert!(matches!(read(&key, &[n], &bad, 0, n, 4096).await, Err(OpenError::Tampered { .. })), "byte {at}");
        }
        // The second package in the first's place.
        let l = (PACKAGE + OVERHEAD) as usize;
        let mut swapped = stored.clone();
        swapped[..l].copy_from_slice(&stored[l..2 * l]);
        assert!(matches!(read(&key, &[n], &swapped, 0, 10, 4096).await, Err(OpenError::Tampered { part: 1, seq: 0 })));
        // Cut after a whole package: the last one (not marked last) does not pass as the end.
        let cut = &stored[..2 * l];
        assert!(read(&key, &[2 * PACKAGE], cut, 0, 2 * PACKAGE, 4096).await.is_err());
        assert!(matches!(read(&key, &[n], &stored[..stored.len() - 1], 0, n, 4096).await, Err(OpenError::CutShort { .. })));
        // The same bytes as another part.
        let other_part = encrypt(&key, 2, &plain).await;
        assert!(read(&key, &[n], &other_part, 0, n, 4096).await.is_err());
        assert!(read(&DataKey::random(), &[n], &stored, 0, n, 4096).await.is_err());
    }

    #[test]
    fn a_wrapped_key_opens_with_its_key_and_label_only() {
        let (k, other) = ([1u8; 32], [2u8; 32]);
        let w = wrap(&k, b"label", b"the data key");
        assert_eq!(unwrap(&k, b"label", &w).as_deref(), Some(&b"the data key"[..]));
        assert_eq!(unwrap(&other, b"label", &w), None);
        assert_eq!(unwrap(&k, b"other", &w), None);
        assert_eq!(unwrap(&k, b"label", &w[..10]), None);
    }

    #[test]
    fn packages_map_plaintext_to_stored_bytes() {
        let p = packages(&[PACKAGE + 1, 10], 0, PACKAGE + 11);
        assert_eq!(p.len(), 3);
        assert_eq!((p[1].part, p[1].seq, p[1].last, p[1].plain_len, p[1].stored_start), (1, 1, true, 1, PACKAGE + OVERHEAD));
        assert_eq!((p[2].part, p[2].seq, p[2].plain_start, p[2].stored_start), (2, 0, PACKAGE + 1, stored_len(PACKAGE + 1)));
        assert!(packages(&[100], 100, 100).is_empty());
    }
}
