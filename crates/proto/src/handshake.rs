//! The versioned handshake that opens every connection, before [`crate::secure`]'s records.
//!
//! Handshake, on the bare TCP stream:
//! 1. The connecting side sends a preamble in clear (`KSGN`, the protocol version as u16, its
//!    protection as u8) and, unless the cluster is open, the first message of a Noise
//!    `NNpsk0` handshake (`u16 length | message`): its ephemeral X25519 key and a tag under
//!    the pre-shared key, a hash of the cluster secret.
//! 2. The serving side refuses, with a reason in clear (`1 | u16 length | text`), a version or
//!    a protection it does not run, or a message that fails under its secret; otherwise it
//!    answers `0 | u16 length | message 2` (its ephemeral key, a tag).
//! 3. Both sides mixed the preamble into the handshake (its prologue): a preamble changed on
//!    the way fails it. The handshake's split gives one key per direction, from both
//!    ephemeral keys and the secret: forward secrecy, and only holders of the secret finish.
//!

use crate::auth::Secret;
use crate::secure::{bad, Conn, Protection, PROTOCOL_VERSION};
use sha2::{Digest, Sha256};
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MAGIC: &[u8; 4] = b"KSGN";
const PATTERN: &str = "Noise_NNpsk0_25519_AESGCM_SHA256";
/// The largest handshake message or refusal accepted: a stranger gets no bigger buffer.
const HANDSHAKE_MAX: usize = 1024;

/// Why a handshake did not make a connection.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("handshake: {0}")]
    Io(#[from] io::Error),
    #[error("handshake: {0}")]
    Noise(#[from] snow::Error),
    #[error(
        "the peer closed the connection during the handshake: it may run kintsugi protocol 1 (this side runs {PROTOCOL_VERSION}), or not be a kintsugi service"
    )]
    ClosedEarly,
    #[error("the peer does not know the cluster secret (or the handshake was tampered with)")]
    WrongSecret,
    /// The peer refused this side, saying why.
    #[error("refused: {0}")]
    RefusedBy(String),
    #[error("not a kintsugi protocol {PROTOCOL_VERSION} answer (status byte {0})")]
    NotKintsugi(u8),
    /// This side refused the peer (of protocol 1, another version or protection, or one
    /// without the secret), and told it why.
    #[error("{0}")]
    RefusedPeer(String),
}

fn psk(secret: &Secret) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"kintsugi cluster secret, noise psk");
    h.update(secret.expose());
    h.finalize().into()
}

fn preamble(p: Protection) -> [u8; 7] {
    let mut b = [0u8; 7];
    b[..4].copy_from_slice(MAGIC);
    b[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    b[6] = p.code();
    b
}

fn noise<'a>(prologue: &'a [u8], psk: &'a [u8; 32]) -> snow::Builder<'a> {
    let params: snow::params::NoiseParams = PATTERN.parse().expect("a valid Noise pattern");
    snow::Builder::new(params).prologue(prologue).expect("a prologue").psk(0, psk).expect("a psk")
}

async fn read_u16_block(tcp: &mut TcpStream) -> io::Result<Vec<u8>> {
    let len = tcp.read_u16().await? as usize;
    if len > HANDSHAKE_MAX {
        return Err(bad("handshake message too long"));
    }
    let mut m = vec![0u8; len];
    tcp.read_exact(&mut m).await?;
    Ok(m)
}

fn block(status: Option<u8>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 3);
    out.extend(status);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The connecting side's handshake: `protection` as this process runs (Open without a
/// secret).
pub async fn connect(mut tcp: TcpStream, secret: Option<&Secret>, protection: Protection) -> Result<Conn, HandshakeError> {
    let mode = if secret.is_some() { protection } else { Protection::Open };
    let pre = preamble(mode);
    let mut hello = pre.to_vec();
    let mut hs = None;
    if let Some(key) = secret.filter(|_| mode != Protection::Open) {
        let k = psk(key);
        let mut h = noise(&pre, &k).build_initiator()?;
        let mut m = [0u8; 256];
        let n = h.write_message(&[], &mut m)?;
        hello.extend(block(None, &m[..n]));
        hs = Some(h);
    }
    tcp.write_all(&hello).await?;
    let closed = |e: io::Error| match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => HandshakeError::ClosedEarly,
        _ => HandshakeError::Io(e),
    };
    let status = tcp.read_u8().await.map_err(closed)?;
    let body = read_u16_block(&mut tcp).await.map_err(closed)?;
    match (status, hs) {
        (0, None) => Ok(Conn::open(tcp)),
        (0, Some(mut h)) => {
            let mut payload = [0u8; 256];
            h.read_message(&body, &mut payload).map_err(|_| HandshakeError::WrongSecret)?;
            let (i2r, r2i) = h.dangerously_get_raw_split();
            Ok(Conn::sealed(tcp, mode, &i2r, &r2i))
        }
        (1, _) => Err(HandshakeError::RefusedBy(String::from_utf8_lossy(&body).into_owned())),
        (s, _) => Err(HandshakeError::NotKintsugi(s)),
    }
}

/// The serving side's handshake. Refuses, saying why to the peer and in the error, a peer
/// of another protocol version or protection, or one that does not know the secret.
pub async fn accept(mut tcp: TcpStream, secret: Option<&Secret>, protection: Protection) -> Result<Conn, HandshakeError> {
    let mine = if secret.is_some() { protection } else { Protection::Open };
    let mut pre = [0u8; 7];
    tcp.read_exact(&mut pre[..4]).await?;
    if &pre[..4] != MAGIC {
        // Protocol 1 began with a JSON frame: its refusal, in its own terms.
        let reason = format!("this service runs kintsugi protocol {PROTOCOL_VERSION}; the peer runs protocol 1: upgrade it");
        let msg = serde_json::json!({ "auth": "refused", "reason": reason });
        let _ = crate::frame::write_frame(&mut tcp, crate::frame::Kind::Control, msg.to_string().as_bytes()).await;
        return Err(HandshakeError::RefusedPeer(format!("refused a peer of kintsugi protocol 1 (this service runs {PROTOCOL_VERSION})")));
    }
    tcp.read_exact(&mut pre[4..]).await?;
    let version = u16::from_be_bytes([pre[4], pre[5]]);
    let theirs = Protection::of(pre[6]);
    if version != PROTOCOL_VERSION {
        return refuse(&mut tcp, format!("this service runs kintsugi protocol {PROTOCOL_VERSION}, the peer protocol {version}")).await;
    }
    match theirs {
        Some(t) if t == mine => {}
        Some(t) => return refuse(&mut tcp, format!("this service's connections are {mine}, the peer's {t}: configure both alike")).await,
        None => return refuse(&mut tcp, format!("unknown protection code {}", pre[6])).await,
    }
    let Some(key) = secret.filter(|_| mine != Protection::Open) else {
        tcp.write_all(&block(Some(0), &[])).await?;
        return Ok(Conn::open(tcp));
    };
    let m1 = read_u16_block(&mut tcp).await?;
    let k = psk(key);
    let mut h = noise(&pre, &k).build_responder()?;
    let mut payload = [0u8; 256];
    if h.read_message(&m1, &mut payload).is_err() {
        return refuse(&mut tcp, "the peer does not know the cluster secret".into()).await;
    }
    let mut m2 = [0u8; 256];
    let n = h.write_message(&[], &mut m2)?;
    tcp.write_all(&block(Some(0), &m2[..n])).await?;
    let (i2r, r2i) = h.dangerously_get_raw_split();
    Ok(Conn::sealed(tcp, mine, &r2i, &i2r))
}

/// Tells the peer why it is refused; the same reason is the error.
async fn refuse(tcp: &mut TcpStream, why: String) -> Result<Conn, HandshakeError> {
    let _ = tcp.write_all(&block(Some(1), why.as_bytes())).await;
    // Close gently: a FIN after the reason, and what the peer sent already (its handshake
    // message) read away for a moment, lest closing with unread bytes reset the connection
    // and the reason never reach the peer.
    let _ = tcp.shutdown().await;
    let mut rest = [0u8; 512];
    let _ = tokio::time::timeout(Duration::from_millis(200), async { while matches!(tcp.read(&mut rest).await, Ok(n) if n > 0) {} }).await;
    Err(HandshakeError::RefusedPeer(why))
}

/// How long a peer has to finish its handshake.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(5);
