//! Every connection's protection (node-node, client-node, client-coordinator,
//! coordinator-node): a versioned handshake, then every byte in sealed records.
//!
//! The handshake that opens a connection is in [`crate::handshake`].
//!
//! Records: `u32 length | body`, at most [`RECORD`] bytes of the stream each. A frame's
//! header and its large body are sealed as two records sent in one write, so the reader
//! opens the body in its own buffer (decrypting in place) instead of copying it out of the
//! record's. `encrypted`
//! seals the bytes with AES-256-GCM; `authenticated` leaves them in clear and appends a
//! 16-byte keyed BLAKE3 tag of the record's number and bytes (integrity only, for trusted
//! networks that want the CPU back: BLAKE3 runs in SIMD lanes at a fraction of AES-GCM's
//! cost where AES has no vector instructions, and GMAC alone through `ring` runs a block at a
//! time, slower than its fused AES-GCM). Nonces count
//! records per direction, so a flipped byte, or a replayed, reordered, dropped or injected
//! record, fails its tag: the reader gets an error and the connection is closed.
//!
//! We chose Noise (the `snow` crate) with a pre-shared key over TLS: no certificates to
//! issue and rotate, the cluster secret operators already handle is the only credential, and
//! one round trip. Records use `ring`'s AES-GCM (AES-NI and carry-less multiply in assembly)
//! and the `blake3` crate (SIMD assembly).

pub use crate::handshake::{accept, connect, HANDSHAKE_LIMIT};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The wire protocol's version. 1 was the HMAC challenge over JSON frames, nothing sealed;
/// 2 sealed JSON control messages carrying the planner's own graph type; 3 carries
/// MessagePack control messages and the wire's own graph type (`wire_graph`); 4 carries
/// errors typed (`wire_error`), not as words.
pub const PROTOCOL_VERSION: u16 = 4;
/// Bytes of the stream per record.
pub const RECORD: usize = 64 << 10;
const TAG: usize = 16;
/// Records of at least this many stream bytes are opened in the reader's buffer when it
/// has room for them (below it, the copy out of `rec` costs less than the bookkeeping).
const DIRECT: usize = 4096;
/// A write's first slice up to this long, before a slice of at least [`DIRECT`] bytes, is
/// a frame's header: sealed as a record of its own.
const SMALL_HEAD: usize = 16;

/// How a cluster protects its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protection {
    /// Every record sealed: confidentiality and integrity.
    Encrypted,
    /// Every record in clear with a tag: integrity only.
    Authenticated,
    /// No secret: nothing checked (loopback tests and clusters started with `--insecure`).
    #[default]
    Open,
}

impl Protection {
    pub(crate) fn code(self) -> u8 {
        match self {
            Protection::Open => 0,
            Protection::Authenticated => 1,
            Protection::Encrypted => 2,
        }
    }

    pub(crate) fn of(code: u8) -> Option<Self> {
        [Protection::Open, Protection::Authenticated, Protection::Encrypted].into_iter().find(|p| p.code() == code)
    }
}

impl std::fmt::Display for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protection::Encrypted => "encrypted",
            Protection::Authenticated => "authenticated",
            Protection::Open => "open",
        })
    }
}

impl std::str::FromStr for Protection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "encrypted" => Ok(Protection::Encrypted),
            "authenticated" => Ok(Protection::Authenticated),
            _ => Err(format!("unknown protection '{s}': encrypted or authenticated")),
        }
    }
}

/// One direction's keys and record counter.
struct Direction {
    key: LessSafeKey,
    /// The MAC key of `authenticated` records (BLAKE3, keyed).
    mac: [u8; 32],
    count: u64,
}

impl Direction {
    fn new(key: &[u8; 32]) -> Self {
        // The MAC key is derived from the direction's key, so each use has its own.
        let mac = blake3::derive_key("kintsugi 2 authenticated records", key);
        Direction { key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key")), mac, count: 0 }
    }

    /// The next record's number.
    fn next(&mut self) -> io::Result<u64> {
        let n = self.count;
        self.count = self.count.checked_add(1).ok_or_else(|| io::Error::other("record counter exhausted"))?;
        Ok(n)
    }

    fn nonce(n: u64) -> Nonce {
        let mut b = [0u8; 12];
        b[4..].copy_from_slice(&n.to_be_bytes());
        Nonce::assume_unique_for_key(b)
    }

    /// The tag of an `authenticated` record: keyed BLAKE3 of its number and bytes.
    fn mac(&self, n: u64, data: &[u8]) -> [u8; TAG] {
        let mut h = blake3::Hasher::new_keyed(&self.mac);
        h.update(&n.to_be_bytes());
        h.update(data);
        let mut tag = [0u8; TAG];
        tag.copy_from_slice(&h.finalize().as_bytes()[..TAG]);
        tag
    }
}

struct Sealing {
    mode: Protection,
    send: Direction,
    recv: Direction,
}

/// A connection: TCP under the cluster's protection. Reads and writes the stream's bytes;
/// records are made and checked underneath.
pub struct Conn {
    tcp: TcpStream,
    sealing: Option<Box<Sealing>>,
    /// The record being read (header, then body); allocated at the first record.
    rec: Vec<u8>,
    filled: usize,
    /// Bytes of `rec` wanted: 4 while reading a header, 0 between records.
    need: usize,
    /// The opened record's bytes not yet handed out: `rec[plain.0..plain.1]`.
    plain: (usize, usize),
    /// A sealed record not yet all written, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    /// A record failed: every later read fails too.
    broken: bool,
    /// Records opened straight into a reader's buffer ([`Conn::poll_direct`]).
    direct_opens: u64,
    /// A [`Conn::write_giving_up`] was cut short inside a record: no more writes.
    torn: bool,
    /// Bytes read past what a read asked for (`spill_read`): the next record header with
    /// the body before it when sealed, the next frame header with its body when open.
    spill: crate::spill_read::Spill,
    /// The serving process's connection slot, given back when the connection is dropped.
    _slot: Option<tokio::sync::SemaphorePermit<'static>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Conn({:?}, {})", self.tcp.peer_addr().ok(), self.protection())
    }
}

pub(crate) fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl Conn {
    /// A connection whose records are sealed with one key per direction (`mode` not Open).
    pub(crate) fn sealed(tcp: TcpStream, mode: Protection, send_key: &[u8; 32], recv_key: &[u8; 32]) -> Self {
        Self::new(tcp, Some(Box::new(Sealing { mode, send: Direction::new(send_key), recv: Direction::new(recv_key) })))
    }

    /// A connection with nothing sealed (Open).
    pub(crate) fn open(tcp: TcpStream) -> Self {
        Self::new(tcp, None)
    }

    fn new(tcp: TcpStream, sealing: Option<Box<Sealing>>) -> Self {
        Conn {
            tcp,
            sealing,
            rec: Vec::new(),
            filled: 0,
            need: 0,
            plain: (0, 0),
            out: Vec::new(),
            out_pos: 0,
            broken: false,
            direct_opens: 0,
            torn: false,
            spill: Default::default(),
            _slot: None,
        }
    }

    /// The connection holding `slot` for as long as it lives.
    pub(crate) fn holding(mut self, slot: tokio::sync::SemaphorePermit<'static>) -> Self {
        self._slot = Some(slot);
        self
    }

    /// How this connection is protected.
    pub fn protection(&self) -> Protection {
        self.sealing.as_ref().map_or(Protection::Open, |s| s.mode)
    }

    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.tcp.peer_addr()
    }

    /// Marks what this connection sends from now on with DSCP `dscp` ([`crate::tcp::set_dscp`]).
    pub fn set_dscp(&self, dscp: u8) -> io::Result<()> {
        crate::tcp::set_dscp(&self.tcp, dscp)
    }

    /// Waits, up to `limit`, until every byte written so far has left this connection for
    /// the network: sealed and handed to the kernel, and sent by it (not necessarily
    /// acknowledged yet). A sender whose link must carry one transfer at a time may start
    /// the next one then: its bytes queue behind this one's last, and the link never idles.
    pub async fn sent_out(&mut self, limit: std::time::Duration) -> io::Result<()> {
        let drained = async {
            self.flush().await?;
            while crate::tcp::unsent_bytes(&self.tcp)? > 0 {
                // The kernel says nothing when its queue empties: look again shortly.
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            Ok(())
        };
        tokio::time::timeout(limit, drained)
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, format!("bytes still unsent after {limit:?}"))))
    }

    /// Writes what is left of the sealed record.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.out_pos < self.out.len() {
            let n = ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.out[self.out_pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_pos += n;
        }
        self.out.clear();
        self.out_pos = 0;
        Poll::Ready(Ok(()))
    }

    /// Seals `out[start + 4..]` (the stream's bytes) into a record in place.
    fn seal_out(&mut self, start: usize) -> io::Result<()> {
        let s = self.sealing.as_mut().expect("sealing");
        let n = s.send.next()?;
        match s.mode {
            Protection::Encrypted => {
                let tag = s
                    .send
                    .key
                    .seal_in_place_separate_tag(Direction::nonce(n), Aad::empty(), &mut self.out[start + 4..])
                    .map_err(|_| io::Error::other("cannot seal a record"))?;
                self.out.extend_from_slice(tag.as_ref());
            }
            _ => {
                let tag = s.send.mac(n, &self.out[start + 4..]);
                self.out.extend_from_slice(&tag);
            }
        }
        let len = (self.out.len() - start - 4) as u32;
        self.out[start..start + 4].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }

    /// Opens the record in `rec[4..need]`; its bytes become `plain`.
    fn open_rec(&mut self) -> io::Result<()> {
        let s = self.sealing.as_mut().expect("sealing");
        let (body, tag) = self.rec[4..self.need].split_at_mut(self.need - 4 - TAG);
        let n = body.len();
        if !check(s, body, tag) {
            self.broken = true;
            return Err(record_failed());
        }
        self.plain = (4, 4 + n);
        self.need = 0;
        Ok(())
    }

    /// Reads the body of the record whose header is in `rec[..4]` straight into `buf` and
    /// opens it there, so its bytes are not copied out of `rec` (a frame's body, sealed as a
    /// record of its own by `poll_write_vectored` or [`Conn::write_giving_up`], lands where
    /// the caller wants it). Ready once the record is opened into `buf`. When the socket
    /// runs dry first, the bytes read so far go into `rec` and the record is finished there
    /// as any other: Pending.
    fn poll_direct(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let len = self.need - 4 - TAG;
        // SAFETY: only the kernel writes these bytes (through the ReadBuf below); `buf` is
        // told they are filled only once they are opened.
        let unfilled = unsafe { buf.unfilled_mut() };
        let mut body = ReadBuf::uninit(&mut unfilled[..len]);
        let mut tag = [0u8; TAG];
        let mut tag_got = 0;
        let dry = loop {
            let into_body = body.remaining() > 0;
            let got = if into_body {
                let before = body.filled().len();
                crate::spill_read::poll_read(&mut self.tcp, &mut self.spill, cx, &mut body).map_ok(|()| body.filled().len() - before)
            } else if tag_got < TAG {
                let mut rb = ReadBuf::new(&mut tag[tag_got..]);
                crate::spill_read::poll_read(&mut self.tcp, &mut self.spill, cx, &mut rb).map_ok(|()| rb.filled().len())
            } else {
                break false;
            };
            match got {
                Poll::Ready(Ok(0)) => {
                    self.broken = true;
                    return Poll::Ready(Err(bad("connection closed inside a record")));
                }
                Poll::Ready(Ok(n)) if !into_body => tag_got += n,
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break true,
            }
        };
        if dry {
            let got = body.filled().len();
            self.rec[4..4 + got].copy_from_slice(body.filled());
            self.rec[4 + got..4 + got + tag_got].copy_from_slice(&tag[..tag_got]);
            self.filled = 4 + got + tag_got;
            return Poll::Pending;
        }
        let s = self.sealing.as_mut().expect("sealing");
        if !check(s, body.filled_mut(), &tag) {
            self.broken = true;
            return Poll::Ready(Err(record_failed()));
        }
        self.need = 0;
        self.direct_opens += 1;
        // SAFETY: the kernel wrote all `len` bytes, now opened in place.
        unsafe { buf.assume_init(len) };
        buf.advance(len);
        Poll::Ready(Ok(()))
    }

    /// Writes `head`, then `body`, which the caller gives up: a large body is sealed where
    /// it lies (its bytes are the record's afterwards, not the caller's), so it is not copied
    /// into a record's buffer first. `head` goes as a record of its own, and both records in
    /// one system call. Returns false, having written nothing, where that does not apply (open
    /// connections, small or huge bodies): the caller then writes them as usual.
    /// A write cut short (the future dropped) leaves the connection unusable for writes.
    #[must_use = "false means nothing was written: the caller writes the frame itself"]
    pub async fn write_giving_up(&mut self, head: &[u8], body: &mut [u8]) -> io::Result<bool> {
        if self.torn {
            return Err(torn());
        }
        if self.sealing.is_none() || head.len() > SMALL_HEAD || !(DIRECT..=RECORD).contains(&body.len()) {
            return Ok(false);
        }
        std::future::poll_fn(|cx| self.poll_drain(cx)).await?;
        self.out.clear();
        if !head.is_empty() {
            self.out.extend_from_slice(&[0; 4]);
            self.out.extend_from_slice(head);
            self.seal_out(0)?;
        }
        let s = self.sealing.as_mut().expect("sealing");
        let n = s.send.next()?;
        let tag: [u8; TAG] = match s.mode {
            Protection::Encrypted => {
                let tag = s
                    .send
                    .key
                    .seal_in_place_separate_tag(Direction::nonce(n), Aad::empty(), body)
                    .map_err(|_| io::Error::other("cannot seal a record"))?;
                tag.as_ref().try_into().expect("a 16-byte tag")
            }
            _ => s.send.mac(n, body),
        };
        self.out.extend_from_slice(&((body.len() + TAG) as u32).to_be_bytes());
        // From here to the last byte, the stream holds part of a record (and `out` is
        // empty, so nothing else sends its bytes again).
        self.torn = true;
        let out = std::mem::take(&mut self.out);
        let mut parts = [&out[..], &body[..], &tag[..]];
        while parts.iter().any(|p| !p.is_empty()) {
            let slices = parts.map(io::IoSlice::new);
            let mut n = self.tcp.write_vectored(&slices).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            for p in parts.iter_mut() {
                let k = n.min(p.len());
                *p = &p[k..];
                n -= k;
            }
        }
        self.out = out;
        self.out.clear();
        self.torn = false;
        Ok(true)
    }

    /// Records opened straight into a reader's buffer so far.
    pub fn direct_opens(&self) -> u64 {
        self.direct_opens
    }
}

/// Checks the next record of `s`'s receiving direction, `data` with its `tag`, and opens
/// `data` in place when it is encrypted. False when it fails its check.
fn check(s: &mut Sealing, data: &mut [u8], tag: &[u8]) -> bool {
    let Ok(n) = s.recv.next() else { return false };
    match s.mode {
        Protection::Encrypted => {
            let Ok(tag) = ring::aead::Tag::try_from(tag) else { return false };
            s.recv.key.open_in_place_separate_tag(Direction::nonce(n), Aad::empty(), tag, data, 0..).is_ok()
        }
        // Constant time, as BLAKE3's own comparison of whole hashes is.
        _ => constant_time_eq::constant_time_eq(&s.recv.mac(n, data), tag),
    }
}

fn torn() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "a write was cut short inside a record: the connection cannot be written to")
}

fn record_failed() -> io::Error {
    bad("a record failed its check (tampered with, replayed, reordered or injected): connection closed")
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.sealing.is_none() {
            return crate::spill_read::poll_read(&mut me.tcp, &mut me.spill, cx, buf);
        }
        loop {
            if me.broken {
                return Poll::Ready(Err(bad("the connection failed a record check")));
            }
            if me.plain.0 < me.plain.1 {
                let n = (me.plain.1 - me.plain.0).min(buf.remaining());
                buf.put_slice(&me.rec[me.plain.0..me.plain.0 + n]);
                me.plain.0 += n;
                return Poll::Ready(Ok(()));
            }
            // A record sealed but not all written goes out first: its answer may be what
            // this read waits for.
            if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
                return Poll::Ready(Err(e));
            }
            if me.need == 0 {
                if me.rec.is_empty() {
                    me.rec = vec![0; 4 + RECORD + TAG];
                }
                me.need = 4;
                me.filled = 0;
            }
            while me.filled < me.need {
                // A large record with room for it in `buf`, none of its body read yet.
                if me.filled == 4 && me.need > 4 && me.need - 4 - TAG >= DIRECT && buf.remaining() >= me.need - 4 - TAG {
                    return me.poll_direct(cx, buf);
                }
                let mut rb = ReadBuf::new(&mut me.rec[me.filled..me.need]);
                ready!(crate::spill_read::poll_read(&mut me.tcp, &mut me.spill, cx, &mut rb))?;
                let n = rb.filled().len();
                if n == 0 {
                    if me.filled == 0 {
                        me.need = 0;
                        return Poll::Ready(Ok(())); // closed between records
                    }
                    // Not an end of stream: a frame reader would take one at a frame's
                    // boundary for a clean close, and a record cut short is a broken one.
                    me.broken = true;
                    return Poll::Ready(Err(bad("connection closed inside a record")));
                }
                me.filled += n;
                if me.need == 4 && me.filled == 4 {
                    let len = u32::from_be_bytes(me.rec[..4].try_into().expect("4 bytes")) as usize;
                    if !(TAG..=RECORD + TAG).contains(&len) {
                        me.broken = true;
                        return Poll::Ready(Err(bad("a record of impossible length: connection closed")));
                    }
                    me.need = 4 + len;
                }
            }
            me.open_rec()?;
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(data)])
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.sealing.is_none() {
            return Pin::new(&mut me.tcp).poll_write_vectored(cx, bufs);
        }
        if me.torn {
            return Poll::Ready(Err(torn()));
        }
        ready!(me.poll_drain(cx))?;
        me.out.clear();
        // A frame's small header and its large body: each its own record, so the reader
        // opens the body where it wants it (`poll_direct`). Both go out in one write.
        let mut bufs = bufs;
        let mut head = 0;
        if let [h, b, ..] = bufs {
            if !h.is_empty() && h.len() <= SMALL_HEAD && b.len() >= DIRECT {
                me.out.extend_from_slice(&[0; 4]);
                me.out.extend_from_slice(h);
                me.seal_out(0)?;
                head = h.len();
                bufs = &bufs[1..];
            }
        }
        // One record of what the slices hold, up to its size.
        let start = me.out.len();
        me.out.extend_from_slice(&[0; 4]);
        for b in bufs {
            let room = start + 4 + RECORD - me.out.len();
            me.out.extend_from_slice(&b[..b.len().min(room)]);
            if me.out.len() == start + 4 + RECORD {
                break;
            }
        }
        let n = me.out.len() - start - 4;
        if n == 0 {
            me.out.truncate(start);
        } else {
            me.seal_out(start)?;
        }
        let n = head + n;
        if n == 0 {
            return Poll::Ready(Ok(0));
        }
        // Sent now if the socket takes it; else by the next write, flush or read.
        if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
