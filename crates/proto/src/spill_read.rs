//! Reading an open connection straight into the caller's buffer, with a small spill for
//! what comes after it.
//!
//! A frame reader asks for a 5-byte header, then a body of tens of KiB. Read through a
//! large buffer (tokio's `BufReader`), every body byte is copied once more, out of that
//! buffer; read without one, a header and its body take two system calls. Here each read
//! is one `readv` into two places: the caller's buffer, then a spill of a few hundred bytes
//! that catches the next frame's header (and the start of its body). So a relay's units
//! land where they are used, one system call each, and only the spill's bytes are copied.
//! Sealed connections read their records the same way: a record's body and the next
//! record's header in one system call, not two.

use std::io;
use std::os::fd::AsRawFd;
use std::task::{ready, Context, Poll};
use tokio::io::{Interest, ReadBuf};
use tokio::net::TcpStream;

/// Bytes read past what the caller asked for: the next header, and a little more.
const SPILL: usize = 512;

/// Bytes read from the socket and not yet handed out; allocated at the first read.
#[derive(Default)]
pub(crate) struct Spill {
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

/// Reads into `buf` from the spill, or else from `tcp` with one `readv` that fills `buf`
/// first and the spill with whatever follows. Ends with nothing read only at the end of
/// the stream (or when `buf` has no room), as `AsyncRead` says.
pub(crate) fn poll_read(tcp: &mut TcpStream, spill: &mut Spill, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
    if spill.pos < spill.end {
        let n = (spill.end - spill.pos).min(buf.remaining());
        buf.put_slice(&spill.buf[spill.pos..spill.pos + n]);
        spill.pos += n;
        return Poll::Ready(Ok(()));
    }
    if buf.remaining() == 0 {
        return Poll::Ready(Ok(()));
    }
    if spill.buf.is_empty() {
        spill.buf = vec![0; SPILL];
    }
    let direct = buf.remaining();
    loop {
        ready!(tcp.poll_read_ready(cx))?;
        // Raw pointers, not slices: the caller's room may be uninitialized, which the
        // kernel may write but Rust may not reference as bytes.
        // SAFETY: nothing here reads the uninitialized bytes; the kernel only writes them,
        // and only what it reports written is marked filled.
        let unfilled = unsafe { buf.unfilled_mut() };
        let iov = [
            libc::iovec { iov_base: unfilled.as_mut_ptr().cast(), iov_len: direct },
            libc::iovec { iov_base: spill.buf.as_mut_ptr().cast(), iov_len: SPILL },
        ];
        let fd = tcp.as_raw_fd();
        let read = tcp.try_io(Interest::READABLE, || {
            // SAFETY: both iovecs point at `direct` and SPILL writable bytes owned by the
            // caller's buffer and the spill, alive for the call.
            let n = unsafe { libc::readv(fd, iov.as_ptr(), 2) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match read {
            Ok(n) => {
                let into_buf = n.min(direct);
                // SAFETY: the kernel wrote the first `into_buf` bytes of the unfilled room.
                unsafe { buf.assume_init(into_buf) };
                buf.advance(into_buf);
                spill.pos = 0;
                spill.end = n - into_buf;
                return Poll::Ready(Ok(()));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

/// A TCP stream read this way (for tests; [`crate::secure::Conn`] reads its socket so).
#[cfg(test)]
struct SpillStream(TcpStream, Spill);

#[cfg(test)]
impl tokio::io::AsyncRead for SpillStream {
    fn poll_read(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        poll_read(&mut me.0, &mut me.1, cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{read_body, read_head, write_frame, Kind};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair() -> (TcpStream, SpillStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (a, SpillStream(b, Spill::default()))
    }

    /// Frames of every size around the spill's (headers split from bodies, bodies that fit
    /// in the spill, bodies larger than many spills) arrive whole and in order, whether the
    /// sender writes them in one go or byte by byte.
    #[tokio::test]
    async fn frames_of_any_size_arrive_whole_and_in_order() {
        let sizes: Vec<usize> = vec![0, 1, 5, 6, 506, 507, 508, 511, 512, 513, 1000, 4096, 32768, 65536 + 7, 3, 200_000];
        for trickle in [false, true] {
            let (mut a, mut b) = pair().await;
            let frames: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7) as u8).collect()).collect();
            let sent = frames.clone();
            let writer = tokio::spawn(async move {
                if trickle {
                    let mut wire = Vec::new();
                    for f in &sent {
                        write_frame(&mut wire, Kind::Data, f).await.unwrap();
                    }
                    // Small pieces: the reader sees headers and bodies cut anywhere.
                    for piece in wire.chunks(977) {
                        a.write_all(piece).await.unwrap();
                        tokio::task::yield_now().await;
                    }
                } else {
                    for f in &sent {
                        write_frame(&mut a, Kind::Data, f).await.unwrap();
                    }
                }
                a.shutdown().await.unwrap();
            });
            for f in &frames {
                let (kind, len) = read_head(&mut b).await.unwrap();
                assert_eq!((kind, len), (Kind::Data, f.len()));
                let mut got = Vec::new();
                read_body(&mut b, len, &mut got).await.unwrap();
                assert!(got == *f, "a frame of {} bytes came back different (trickle {trickle})", f.len());
            }
            // The end of the stream reads as nothing, not as spilled bytes.
            let mut rest = Vec::new();
            b.read_to_end(&mut rest).await.unwrap();
            assert!(rest.is_empty());
            writer.await.unwrap();
        }
    }
}
