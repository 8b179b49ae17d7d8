//! Frames on a TCP stream: `u32 length (big-endian) | u8 kind | body`. A control frame's body
//! is one message in MessagePack with named fields (see [`encode_control`]); a data frame's
//! body is raw bytes (one slice of a stream). Lengths are
//! checked before anything is allocated, so a hostile or broken peer cannot make a node
//! allocate more than [`MAX_FRAME`] or hang it past its read timeout.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest frame body accepted: one 64 MiB slice plus headroom.
pub const MAX_FRAME: u32 = (64 << 20) + 4096;
/// Largest control frame: repair plans for wide codes fit easily.
pub const MAX_CONTROL: u32 = 8 << 20;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Control = 1,
    Data = 2,
}

/// A frame read from the wire.
#[derive(Debug)]
pub enum Frame {
    Control(Vec<u8>),
    Data(Vec<u8>),
}

/// Why a frame could not be read or written.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("truncated frame: {0}")]
    Truncated(String),
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: u32, max: u32 },
    #[error("empty frame")]
    Empty,
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("bad control message: {0}")]
    BadMessage(String),
    #[error("expected a {expected} frame")]
    Unexpected { expected: &'static str },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads a frame's header: its kind and body length, checked against the limits. The
/// caller reads the body (into a buffer of its choosing: no copy for data frames).
pub async fn read_head<R: AsyncRead + Unpin>(r: &mut R) -> Result<(Kind, usize), FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    r.read_exact(&mut len[1..]).await.map_err(|e| truncated(e, "length"))?;
    let len = u32::from_be_bytes(len);
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge { len, max: MAX_FRAME });
    }
    let mut kind = [0u8; 1];
    r.read_exact(&mut kind).await.map_err(|e| truncated(e, "kind"))?;
    let body_len = len - 1;
    let kind = match kind[0] {
        1 => Kind::Control,
        2 => Kind::Data,
        k => return Err(FrameError::UnknownKind(k)),
    };
    if kind == Kind::Control && body_len > MAX_CONTROL {
        return Err(FrameError::TooLarge { len: body_len, max: MAX_CONTROL });
    }
    Ok((kind, body_len as usize))
}

/// Reads `len` body bytes onto the end of `buf`, into its spare room (nothing is zeroed
/// first, nothing copied twice).
pub async fn read_body<R: AsyncRead + Unpin>(r: &mut R, len: usize, buf: &mut Vec<u8>) -> Result<(), FrameError> {
    use bytes::BufMut;
    buf.reserve(len);
    let mut limited = buf.limit(len);
    while limited.has_remaining_mut() {
        if r.read_buf(&mut limited).await? == 0 {
            return Err(FrameError::Truncated("stream ended inside the body".into()));
        }
    }
    Ok(())
}

/// Reads one frame. `Closed` when the peer closed cleanly between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Frame, FrameError> {
    let (kind, body_len) = read_head(r).await?;
    let mut body = vec![0u8; body_len];
    r.read_exact(&mut body).await.map_err(|e| truncated(e, "body"))?;
    Ok(match kind {
        Kind::Control => Frame::Control(body),
        Kind::Data => Frame::Data(body),
    })
}

fn truncated(e: std::io::Error, what: &str) -> FrameError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        FrameError::Truncated(format!("stream ended inside the {what}"))
    } else {
        FrameError::Io(e)
    }
}

/// Like [`read_frame`], failing after `limit`.
pub async fn read_frame_timeout<R: AsyncRead + Unpin>(r: &mut R, limit: Duration) -> Result<Frame, FrameError> {
    tokio::time::timeout(limit, read_frame(r)).await.map_err(|_| FrameError::Timeout(limit))?
}

/// A frame's 5-byte header: its length (kind byte and body) and its kind.
fn head(kind: Kind, body_len: usize) -> Result<[u8; 5], FrameError> {
    let len = body_len as u64 + 1;
    if len > MAX_FRAME as u64 {
        return Err(FrameError::TooLarge { len: len.min(u32::MAX as u64) as u32, max: MAX_FRAME });
    }
    let mut head = [0u8; 5];
    head[..4].copy_from_slice(&(len as u32).to_be_bytes());
    head[4] = kind as u8;
    Ok(head)
}

/// Writes a data frame whose body the caller gives up: on a sealed connection a large
/// body is sealed where it lies ([`crate::secure::Conn::write_giving_up`]), so afterwards
/// `body` holds the record's bytes, not the data. Saves a copy per frame.
pub async fn write_data_giving_up(w: &mut crate::secure::Conn, body: &mut [u8]) -> Result<(), FrameError> {
    let head = head(Kind::Data, body.len())?;
    if !w.write_giving_up(&head, body).await? {
        write_head_and_body(w, &head, body).await?;
    }
    Ok(())
}

/// Writes a frame of `kind` with `body`.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, kind: Kind, body: &[u8]) -> Result<(), FrameError> {
    write_head_and_body(w, &head(kind, body.len())?, body).await
}

/// Header and body in one vectored write: one system call per frame, not two.
async fn write_head_and_body<W: AsyncWrite + Unpin>(w: &mut W, head: &[u8], body: &[u8]) -> Result<(), FrameError> {
    let (mut h, mut b) = (head, body);
    while !h.is_empty() {
        let n = w.write_vectored(&[std::io::IoSlice::new(h), std::io::IoSlice::new(b)]).await?;
        if n == 0 {
            return Err(FrameError::Io(std::io::ErrorKind::WriteZero.into()));
        }
        let from_head = n.min(h.len());
        h = &h[from_head..];
        b = &b[n - from_head..];
    }
    if !b.is_empty() {
        w.write_all(b).await?;
    }
    Ok(())
}

/// A control message's bytes: MessagePack, fields by name. Binary and smaller than JSON, yet
/// self-describing: a field added later with a default is ignored by an older peer, and
/// defaulted by a newer one reading an older peer's message, so messages grow without a
/// version bump. (postcard, more compact, encodes fields by position and cannot carry the
/// tagged enums and optional fields the messages use.) A change that is not compatible so
/// bumps [`crate::secure::PROTOCOL_VERSION`].
pub fn encode_control<T: Serialize + ?Sized>(msg: &T) -> Result<Vec<u8>, FrameError> {
    rmp_serde::to_vec_named(msg).map_err(|e| FrameError::BadMessage(e.to_string()))
}

/// A control message from its bytes (see [`encode_control`]).
pub fn decode_control<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    rmp_serde::from_slice(body).map_err(|e| FrameError::BadMessage(e.to_string()))
}

/// Writes a control message.
pub async fn send<W: AsyncWrite + Unpin, T: Serialize>(w: &mut W, msg: &T) -> Result<(), FrameError> {
    let body = encode_control(msg)?;
    write_frame(w, Kind::Control, &body).await?;
    w.flush().await?;
    Ok(())
}

/// Reads a control message of type T.
pub async fn recv<R: AsyncRead + Unpin, T: DeserializeOwned>(r: &mut R) -> Result<T, FrameError> {
    match read_frame(r).await? {
        Frame::Control(body) => decode_control(&body),
        Frame::Data(_) => Err(FrameError::Unexpected { expected: "control" }),
    }
}

/// Reads one data frame.
pub async fn recv_data<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>, FrameError> {
    match read_frame(r).await? {
        Frame::Data(b) => Ok(b),
        Frame::Control(body) => {
            // A control frame in a data stream is the sender reporting an error.
            let text = decode_control::<serde_json::Value>(&body).map_or_else(|e| e.to_string(), |v| v.to_string());
            Err(FrameError::BadMessage(format!("peer sent a control message instead of data: {text}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_rejections() {
        let mut buf = Vec::new();
        send(&mut buf, &serde_json::json!({"op": "ping"})).await.unwrap();
        write_frame(&mut buf, Kind::Data, b"slice").await.unwrap();
        let mut r = &buf[..];
        let v: serde_json::Value = recv(&mut r).await.unwrap();
        assert_eq!(v["op"], "ping");
        assert_eq!(recv_data(&mut r).await.unwrap(), b"slice");
        assert!(matches!(read_frame(&mut r).await, Err(FrameError::Closed)));

        let mut big = Vec::from((MAX_FRAME + 1).to_be_bytes());
        big.push(2);
        assert!(matches!(read_frame(&mut &big[..]).await, Err(FrameError::TooLarge { .. })));
        let unknown = [0, 0, 0, 2, 9, 0];
        assert!(matches!(read_frame(&mut &unknown[..]).await, Err(FrameError::UnknownKind(9))));
        let short = [0, 0, 0, 10, 2, 1, 2];
        assert!(matches!(read_frame(&mut &short[..]).await, Err(FrameError::Truncated(_))));
        let half_len = [0, 0];
        assert!(matches!(read_frame(&mut &half_len[..]).await, Err(FrameError::Truncated(_))));
        let zero = [0, 0, 0, 0];
        assert!(matches!(read_frame(&mut &zero[..]).await, Err(FrameError::Empty)));
        // Header and body read apart append the body to what the buffer holds.
        let mut two = Vec::new();
        write_frame(&mut two, Kind::Data, b"abc").await.unwrap();
        let mut r = &two[..];
        let (kind, len) = read_head(&mut r).await.unwrap();
        assert_eq!((kind, len), (Kind::Data, 3));
        let mut buf = b"xy".to_vec();
        read_body(&mut r, len, &mut buf).await.unwrap();
        assert_eq!(buf, b"xyabc");
        let mut r = &two[..6];
        let (_, len) = read_head(&mut r).await.unwrap();
        assert!(matches!(read_body(&mut r, len, &mut Vec::new()).await, Err(FrameError::Truncated(_))));
        // A body cut short (an array announcing two items, holding one), a reserved byte.
        for body in [&[0x92u8, 0x01][..], &[0xc1]] {
            let mut bad = Vec::new();
            write_frame(&mut bad, Kind::Control, body).await.unwrap();
            assert!(matches!(recv::<_, serde_json::Value>(&mut &bad[..]).await, Err(FrameError::BadMessage(_))));
        }
    }

    #[test]
    fn control_messages_leave_room_for_new_fields() {
        use crate::messages::{CoordRequest, NodeRequest};
        #[derive(serde::Serialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        enum Newer {
            Lookup { name: String, consistency: u8 },
        }
        // A later build's extra field is ignored; a field it leaves out takes its default.
        let body = encode_control(&Newer::Lookup { name: "a".into(), consistency: 2 }).unwrap();
        assert_eq!(decode_control::<CoordRequest>(&body).unwrap(), CoordRequest::Lookup { name: "a".into() });
        let body = encode_control(&serde_json::json!({"op": "list", "limit": 5})).unwrap();
        let want = CoordRequest::List { prefix: String::new(), delimiter: String::new(), after: String::new(), limit: 5 };
        assert_eq!(decode_control::<CoordRequest>(&body).unwrap(), want);
        // A JSON body (protocol 2) is not a message.
        assert!(decode_control::<NodeRequest>(br#"{"op":"ping"}"#).is_err());
        // Smaller than JSON.
        let req = CoordRequest::Heartbeat {
            node: 7,
            addr: "10.0.0.7:7000".into(),
            chunks: 12345,
            boot: u64::MAX,
            used_bytes: 1 << 40,
            capacity_bytes: 1 << 42,
            cluster: 99,
            token: "t".repeat(32),
            link: None,
            fs: Some(crate::FsReport { id: "m:2049".into(), used: 1 << 40, size: 1 << 42 }),
        };
        assert!(encode_control(&req).unwrap().len() * 10 < serde_json::to_vec(&req).unwrap().len() * 8);
        assert_eq!(decode_control::<CoordRequest>(&encode_control(&req).unwrap()).unwrap(), req);
    }
}
