//! Bodies streamed between HTTP and the cluster with bounded memory: a GET reads the object
//! a window at a time (whole chunks where it can) into a channel of a few windows, which
//! the response drains; a PUT reads the request body through an MD5 as the put encodes it.

use crate::checksums::{Algorithm, Hasher};
use crate::gateway::Gateway;
use bytes::Bytes;
use futures::Stream;
use kintsugi_client::client::ObjectSink;
use kintsugi_client::geo_io::extents_of;
use kintsugi_proto::ObjectLayout;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Bytes a GET reads at a time: whole chunks up to this much (a larger chunk is read in
/// pieces of it).
pub const WINDOW: u64 = 8 << 20;
/// Windows read ahead of the client.
const AHEAD: usize = 2;

/// The windows covering bytes [start, end) of an object: chunk-aligned where chunks allow.
pub fn windows(layout: &ObjectLayout, start: u64, end: u64) -> Vec<(u64, u64)> {
    let mut cuts = vec![start];
    let mut at = 0u64;
    for e in extents_of(layout) {
        at += e.len;
        if at > start && at < end {
            cuts.push(at);
        }
    }
    cuts.push(end);
    let mut out = Vec::new();
    let (mut from, mut i) = (start, 1);
    while from < end {
        // As many whole extents as fit in a window, at least one; a long extent in pieces.
        let mut to = cuts[i];
        while to - from > WINDOW && from + WINDOW < to {
            out.push((from, from + WINDOW));
            from += WINDOW;
        }
        while i + 1 < cuts.len() && cuts[i + 1] - from <= WINDOW {
            i += 1;
            to = cuts[i];
        }
        out.push((from, to));
        from = to;
        i += 1;
    }
    out
}

/// A response body: bytes [start, end) of exactly the version `layout` describes, read by a
/// task that stays [`AHEAD`] windows ahead of the client. The first window is read before
/// this returns: a read that cannot be served at all fails here, before the response's
/// head, with a status the client acts on (503: retry). One that fails later ends the body
/// with an error (the client sees a short body, never wrong bytes).
/// `reserved`: the caller holds the memory already (a copy reserves its GET and PUT at
/// once: two reservations taken one after the other could wait on each other forever).
pub async fn object_body(
    g: &Gateway,
    layout: ObjectLayout,
    start: u64,
    end: u64,
    reserved: bool,
) -> Result<ChunkStream, kintsugi_client::Error> {
    let (client, method, slice) = (g.client.clone(), g.method, g.slice);
    let memory = if reserved { None } else { Some(g.memory.reserve(get_bytes(start, end)).await) };
    // AHEAD windows read at once (each fetches its chunks one ahead), one waiting in the
    // channel, one being sent: the AHEAD + 2 windows `get_bytes` reserves.
    let (tx, rx) = mpsc::channel(1);
    let layout = Arc::new(layout);
    tokio::spawn(async move {
        use futures::StreamExt;
        let _memory = memory;
        let mut reads = futures::stream::iter(windows(&layout, start, end))
            .map(|(a, b)| {
                let (client, layout) = (client.clone(), layout.clone());
                async move {
                    let len = (b - a) as usize;
                    let mut window = Window::default();
                    let r = client.read_layout(&layout, a, b - a, &mut window, method, slice).await;
                    match r {
                        Ok(_) if window.len == len => Ok(window.pieces),
                        Ok(_) => Err(kintsugi_client::Error::internal(format!(
                            "read {} bytes of '{}' at {a}, expected {len}",
                            window.len, layout.name
                        ))),
                        Err(e) => {
                            tracing::warn!("GET of '{}' failed at byte {a}: {e}", layout.name);
                            Err(e)
                        }
                    }
                }
            })
            .buffered(AHEAD);
        while let Some(item) = reads.next().await {
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                // The client went away, or the read failed: stop reading.
                return;
            }
        }
    });
    let mut rx = rx;
    let pieces = match rx.recv().await {
        Some(Ok(first)) => first.into(),
        Some(Err(e)) => return Err(e),
        None => VecDeque::new(),
    };
    Ok(ChunkStream { rx, pieces })
}

/// A body as S3 answers it.
pub type PlainBody = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send + Sync>>;

/// Bytes [start, end) of an object's plaintext: [`object_body`] of the packages that hold
/// them, opened with `key`, for an encrypted object (of parts `parts`); else its bytes.
pub async fn plain_body(
    g: &Gateway,
    layout: ObjectLayout,
    key: Option<&crate::sse::DataKey>,
    parts: &[u64],
    start: u64,
    end: u64,
    reserved: bool,
) -> Result<PlainBody, kintsugi_client::Error> {
    let Some(key) = key else {
        return Ok(Box::pin(object_body(g, layout, start, end, reserved).await?));
    };
    let packages = crate::sse::packages::packages(parts, start, end);
    let (Some(first), Some(last)) = (packages.first(), packages.last()) else {
        return Ok(Box::pin(futures::stream::empty()));
    };
    let (from, to) = (first.stored_start, last.stored_start + last.stored_len());
    if to > layout.size {
        return Err(kintsugi_client::Error::internal(format!(
            "'{}' holds {} bytes, short of its packages' {to}",
            layout.name, layout.size
        )));
    }
    let stored = object_body(g, layout, from, to, reserved).await?;
    use futures::TryStreamExt;
    Ok(Box::pin(crate::sse::packages::decrypting(stored, key, parts, start, end).map_err(|e| {
        tracing::warn!("GET of an encrypted object failed: {e}");
        std::io::Error::other(e)
    })))
}

/// A window being read: the client's chunk buffers, kept as they come (a whole-chunk read
/// hands over its buffer, so the window costs no copy).
#[derive(Default)]
struct Window {
    pieces: Vec<Bytes>,
    len: usize,
}

impl ObjectSink for Window {
    fn write(&mut self, data: &[u8]) -> Result<(), kintsugi_client::Error> {
        self.write_owned(data.to_vec())
    }
    fn write_owned(&mut self, data: Vec<u8>) -> Result<(), kintsugi_client::Error> {
        self.len += data.len();
        if !data.is_empty() {
            self.pieces.push(Bytes::from(data));
        }
        Ok(())
    }
    fn restart(&mut self) -> Result<(), kintsugi_client::Error> {
        *self = Window::default();
        Ok(())
    }
}

/// What a GET of bytes [start, end) holds: the windows in the channel, the one being read
/// and the one being sent.
pub fn get_bytes(start: u64, end: u64) -> u64 {
    (end - start).min((AHEAD as u64 + 2) * WINDOW)
}

tokio::task_local! {
    /// Set by a response body that fails after the response's head was sent: the
    /// connection serving it is then reset, not closed as if the body were whole
    /// (see `server::ResetOnFailure`).
    pub static BODY_FAILED: Arc<std::sync::atomic::AtomicBool>;
}

/// Byte pieces from a reading task, a window's worth at a time.
pub struct ChunkStream {
    rx: mpsc::Receiver<Result<Vec<Bytes>, kintsugi_client::Error>>,
    pieces: VecDeque<Bytes>,
}

impl Stream for ChunkStream {
    type Item = std::io::Result<Bytes>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(b) = self.pieces.pop_front() {
                return Poll::Ready(Some(Ok(b)));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Ok(window))) => self.pieces.extend(window),
                Poll::Ready(Some(Err(e))) => {
                    let _ = BODY_FAILED.try_with(|f| f.store(true, std::sync::atomic::Ordering::Relaxed));
                    return Poll::Ready(Some(Err(std::io::Error::other(e))));
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Bodies at least this large are hashed on a thread of their own, beside the encoding.
const HASH_THREAD_FROM: u64 = 1 << 20;

/// What the hashing thread is given.
enum Piece {
    Bytes(Bytes),
    End,
}

/// The digests of a whole body: its MD5, and the checksum asked for (base64).
type Digests = ([u8; 16], Option<String>);

/// The hashing thread's input, and where its digests come back.
type HashThread = (std::sync::mpsc::SyncSender<Piece>, Mutex<std::sync::mpsc::Receiver<Digests>>);

/// The hashes of a body as it is read.
struct Hashes {
    md5: md5::Md5,
    checksum: Option<Hasher>,
}

impl Hashes {
    fn new(checksum: Option<Algorithm>) -> Self {
        Hashes { md5: md5::Digest::new(), checksum: checksum.map(Hasher::new) }
    }
    fn update(&mut self, b: &[u8]) {
        md5::Digest::update(&mut self.md5, b);
        if let Some(c) = &mut self.checksum {
            c.update(b);
        }
    }
    fn finish(self) -> Digests {
        (md5::Digest::finalize(self.md5).into(), self.checksum.map(Hasher::finish))
    }
}

/// A request body as a reader, hashed as it is read (its MD5, and the additional checksum
/// the request asked for): inline for small bodies; for large ones on a thread of their
/// own, so that hashing runs beside the put's encoding instead of before it (MD5 is some
/// 1.5 ns a byte, as much as the rest of the path).
pub struct HashedBody {
    inline: Option<Arc<Mutex<Option<Hashes>>>>,
    thread: Option<HashThread>,
    digests: Mutex<Option<Digests>>,
    size: u64,
}

impl HashedBody {
    /// Hashes for a body of `size` bytes, with the additional checksum `checksum`.
    pub fn new(size: u64, checksum: Option<Algorithm>) -> Self {
        if size < HASH_THREAD_FROM {
            let inline = Some(Arc::new(Mutex::new(Some(Hashes::new(checksum)))));
            return HashedBody { inline, thread: None, digests: Mutex::new(None), size };
        }
        // A few MiB in flight at most: the reader waits for the hash beyond that.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Piece>(64);
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut h = Hashes::new(checksum);
            for p in rx {
                match p {
                    Piece::Bytes(b) => h.update(&b),
                    Piece::End => {
                        let _ = done_tx.send(h.finish());
                        return;
                    }
                }
            }
        });
        HashedBody { inline: None, thread: Some((tx, Mutex::new(done))), digests: Mutex::new(None), size }
    }

    /// A reader of `body` that feeds these hashes. The put reads exactly `size` bytes and
    /// stops; before the last of them is handed over, the body is read to its end, so that
    /// an aws-chunked body's trailer (which may carry the checksum) has arrived by the
    /// commit, and a body longer than announced is refused.
    pub fn reader(&self, body: s3s::dto::StreamingBlob) -> impl tokio::io::AsyncRead + Unpin + Send {
        use futures::{StreamExt, TryStreamExt};
        let inline = self.inline.clone();
        let mut tx = self.thread.as_ref().map(|t| t.0.clone());
        let (size, mut seen) = (self.size, 0u64);
        let s = body.map_err(|e| std::io::Error::other(format!("reading the request body: {e}"))).inspect_ok(move |b: &Bytes| {
            if let Some(h) = &inline {
                if let Some(h) = h.lock().expect("hash lock").as_mut() {
                    h.update(b);
                }
            }
            if let Some(t) = &tx {
                // Blocks only while the hash is 64 pieces behind.
                let _ = t.send(Piece::Bytes(b.clone()));
                seen += b.len() as u64;
                if seen >= size {
                    let _ = t.send(Piece::End);
                    tx = None;
                }
            }
        });
        let s = ReadToEnd { inner: s.boxed(), size, seen: 0, held: None };
        tokio_util::io::StreamReader::new(s)
    }

    /// The digests of the whole body (call once all of it has been read).
    fn digests(&self) -> Result<Digests, String> {
        let mut d = self.digests.lock().expect("digest lock");
        if let Some(d) = &*d {
            return Ok(d.clone());
        }
        let v: Digests = match (&self.inline, &self.thread) {
            (Some(h), _) => h.lock().expect("hash lock").take().ok_or("hashed twice")?.finish(),
            // The thread is a few pieces behind the reader at most.
            (None, Some((_, done))) => done
                .lock()
                .expect("done lock")
                .recv_timeout(std::time::Duration::from_secs(60))
                .map_err(|e| format!("the body's digests are not known: {e}"))?,
            (None, None) => unreachable!("one of the two"),
        };
        *d = Some(v.clone());
        Ok(v)
    }

    /// The hex MD5 of everything read.
    pub fn hex(&self) -> Result<String, String> {
        self.digests().map(|d| hex::encode(d.0))
    }

    /// The MD5 in Content-MD5's form (base64).
    pub fn base64(&self) -> Result<String, String> {
        use base64::Engine;
        self.digests().map(|d| base64::engine::general_purpose::STANDARD.encode(d.0))
    }

    /// The additional checksum asked for, in base64.
    pub fn checksum(&self) -> Result<Option<String>, String> {
        self.digests().map(|d| d.1)
    }
}

/// A body stream that, before handing over the piece that completes its `size` bytes,
/// reads the rest of the body: nothing more may come (a longer body is an error), and the
/// end of an aws-chunked body is where its trailer is read.
struct ReadToEnd {
    inner: futures::stream::BoxStream<'static, std::io::Result<Bytes>>,
    size: u64,
    seen: u64,
    held: Option<Bytes>,
}

impl Stream for ReadToEnd {
    type Item = std::io::Result<Bytes>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(b))) => {
                    if b.is_empty() {
                        continue;
                    }
                    if self.held.is_some() || self.seen >= self.size {
                        return Poll::Ready(Some(Err(std::io::Error::other(format!(
                            "the request body is longer than its {} bytes",
                            self.size
                        )))));
                    }
                    self.seen += b.len() as u64;
                    if self.seen < self.size {
                        return Poll::Ready(Some(Ok(b)));
                    }
                    // The last piece: kept until the body has ended.
                    self.held = Some(b);
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(self.held.take().map(Ok)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_proto::StripeLayout;

    fn layout(stripes: &[(u64, u64)]) -> ObjectLayout {
        let stripes: Vec<StripeLayout> = stripes
            .iter()
            .enumerate()
            .map(|(i, &(data_len, chunk_len))| StripeLayout {
                id: i as u64,
                data_len,
                chunk_len,
                chunks: vec![
                    kintsugi_proto::ChunkLoc {
                        chunk: kintsugi_proto::ChunkId::new(i as u64, 0),
                        node: 0,
                        addr: String::new(),
                        alive: true,
                        crc32c: None,
                        lost: false,
                        bucket: None,
                    };
                    3
                ],
                open: false,
                replicas: vec![],
                code: None,
                small: false,
            })
            .collect();
        ObjectLayout {
            name: "o".into(),
            size: stripes.iter().map(|s| s.data_len).sum(),
            code: "rs:2,1".parse().unwrap(),
            committed: true,
            version: 1,
            stripes,
            layout: Default::default(),
            extents: vec![],
            attrs: Default::default(),
            versioned: false,
            delete_marker: false,
            inline: None,
        }
    }

    /// Windows tile the range exactly, none over WINDOW, and cut at chunk edges where a
    /// chunk fits in one.
    #[test]
    fn windows_tile_the_range_at_chunk_edges() {
        const M: u64 = 1 << 20;
        let l = layout(&[(8 * M, 4 * M), (8 * M, 4 * M), (3 * M + 5, 2 * M)]);
        for (start, end) in [(0, l.size), (1, l.size - 1), (5 * M, 6 * M), (0, 1), (l.size - 1, l.size)] {
            let w = windows(&l, start, end);
            assert_eq!(w.first().unwrap().0, start);
            assert_eq!(w.last().unwrap().1, end);
            assert!(w.windows(2).all(|p| p[0].1 == p[1].0));
            assert!(w.iter().all(|&(a, b)| a < b && b - a <= WINDOW));
        }
        assert_eq!(windows(&l, 0, l.size)[..2], [(0, 8 * M), (8 * M, 16 * M)]);
        let big = layout(&[(40 * M, 20 * M)]);
        assert_eq!(windows(&big, 0, 20 * M), vec![(0, 8 * M), (8 * M, 16 * M), (16 * M, 20 * M)]);
        assert!(windows(&l, 3, 3).is_empty());
    }
}
