//! The cluster secret, and connecting and accepting under it: every connection runs the
//! handshake of [`crate::secure`] (a versioned preamble, then Noise with the secret as its
//! pre-shared key) and carries its bytes in sealed records after it. Without a secret a
//! process runs open: the preamble still names the protocol version, nothing is checked.
//!
//! The secret is process-wide (`set_secret`, set once at start-up from `--secret-file`,
//! `KINTSUGI_SECRET_FILE` or `secret_file` in TOML); it is never printed. So is the
//! protection (`set_protection`: encrypted by default, or authenticated).
//!
//! Before its handshake is done a peer gets almost nothing: handshake messages of at most
//! 1 KiB, [`secure::HANDSHAKE_LIMIT`] to finish, and one of [`PRE_AUTH_SLOTS`] handshakes
//! at a time per process (more are closed at once), so strangers can neither make a
//! service allocate nor hold its sockets. Nor can peers that did authenticate exhaust it:
//! a process serves at most [`max_connections`] connections at once (handshakes included);
//! one more is closed at once.

use crate::secure::{self, Conn, Protection};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;

/// The cluster secret. Its Debug output hides it.
#[derive(Clone)]
pub struct Secret(Arc<Vec<u8>>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<hidden>)")
    }
}

impl Secret {
    /// At least 16 bytes.
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() < 16 {
            return Err(format!("a cluster secret needs at least 16 bytes, this one has {}", bytes.len()));
        }
        Ok(Secret(Arc::new(bytes)))
    }

    /// A random secret (32 bytes, hex), for demos and testbeds that make their own.
    pub fn random() -> Self {
        Secret(Arc::new(hex::encode(rand::random::<[u8; 32]>()).into_bytes()))
    }

    /// The secret in a file (surrounding white space ignored).
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read secret file {}: {e}", path.display()))?;
        let trimmed = String::from_utf8_lossy(&bytes).trim().as_bytes().to_vec();
        Secret::new(trimmed).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The bytes to write to a secret file.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

static SECRET: RwLock<Option<Secret>> = RwLock::new(None);

/// Why no connection was made to an address.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFailure {
    #[error("{0}")]
    Tcp(std::io::Error),
    #[error("{0}")]
    Handshake(#[from] crate::handshake::HandshakeError),
    #[error("connect timed out")]
    TimedOut,
}

/// Why none of the addresses tried took a connection: each with its failure.
#[derive(Debug, thiserror::Error)]
pub struct ConnectError(pub Vec<(String, ConnectFailure)>);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (addr, why)) in self.0.iter().enumerate() {
            write!(f, "{}{addr}: {why}", if i > 0 { "; " } else { "" })?;
        }
        Ok(())
    }
}

/// A connection refused before a handshake, or one whose handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// Too many connections or handshakes already (the words say which limit).
    #[error("{0}: connection closed")]
    Busy(String),
    #[error("no handshake within {0:?}: connection closed")]
    TimedOut(Duration),
    #[error("{0}")]
    Handshake(#[from] crate::handshake::HandshakeError),
}

/// Sets this process's cluster secret (None: an open cluster, no handshake).
pub fn set_secret(s: Option<Secret>) {
    *SECRET.write().expect("secret lock") = s;
}

/// This process's cluster secret.
pub fn secret() -> Option<Secret> {
    SECRET.read().expect("secret lock").clone()
}

static PROTECTION: RwLock<Protection> = RwLock::new(Protection::Encrypted);

/// How this process protects its connections when it has a secret (encrypted by default).
pub fn set_protection(p: Protection) {
    *PROTECTION.write().expect("protection lock") = p;
}

/// What this process's connections run: open without a secret, else its protection.
pub fn protection() -> Protection {
    if secret().is_none() {
        Protection::Open
    } else {
        *PROTECTION.read().expect("protection lock")
    }
}

/// Handshakes a process serves at once; a connection beyond them is closed unanswered.
/// Each holds a socket, a task and at most a 1 KiB message for at most
/// [`secure::HANDSHAKE_LIMIT`]: a few MiB in all, and room for thousands of idle strangers
/// beside the members.
pub const PRE_AUTH_SLOTS: usize = 4096;
static PRE_AUTH: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(PRE_AUTH_SLOTS);

/// Connects to `addr` and, when this process has a cluster secret, authenticates; both
/// within `t` (a hung peer accepts connections in its kernel but never answers).
/// Connects to `addr`, or to the first of a comma-separated list that accepts (coordinators
/// of which one leads: the standbys do not listen), starting with the one that accepted last.
pub async fn connect(addr: &str, t: Duration) -> Result<Conn, ConnectError> {
    if !addr.contains(',') {
        return connect_one(addr, t).await;
    }
    static LAST: std::sync::Mutex<Option<std::collections::HashMap<String, usize>>> = std::sync::Mutex::new(None);
    let all: Vec<&str> = addr.split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
    let first = LAST.lock().expect("last lock").as_ref().and_then(|m| m.get(addr).copied()).unwrap_or(0);
    let mut errors = Vec::new();
    for k in 0..all.len() {
        let i = (first + k) % all.len();
        match connect_one(all[i], t).await {
            Ok(s) => {
                LAST.lock().expect("last lock").get_or_insert_with(Default::default).insert(addr.to_string(), i);
                return Ok(s);
            }
            Err(e) => errors.extend(e.0),
        }
    }
    Err(ConnectError(errors))
}

async fn connect_one(addr: &str, t: Duration) -> Result<Conn, ConnectError> {
    let attempt = async {
        let s = TcpStream::connect(addr).await.map_err(ConnectFailure::Tcp)?;
        crate::tcp::tune(&s);
        let key = secret();
        Ok(secure::connect(s, key.as_ref(), protection()).await?)
    };
    match tokio::time::timeout(t, attempt).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(ConnectError(vec![(addr.to_string(), e)])),
        Err(_) => Err(ConnectError(vec![(addr.to_string(), ConnectFailure::TimedOut)])),
    }
}

/// Connections a process serves at once by default.
pub const MAX_CONNECTIONS: usize = 8192;

/// Connections this process serves at once: `KINTSUGI_MAX_CONNECTIONS`, else
/// [`MAX_CONNECTIONS`]. Each holds a socket and up to two 64 KiB record buffers.
pub fn max_connections() -> usize {
    connection_slots().1
}

fn connection_slots() -> &'static (tokio::sync::Semaphore, usize) {
    static SLOTS: std::sync::OnceLock<(tokio::sync::Semaphore, usize)> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let n = match std::env::var("KINTSUGI_MAX_CONNECTIONS").map(|v| v.parse::<usize>()) {
            Ok(Ok(n)) if n > 0 => n,
            Ok(_) => {
                tracing::warn!("KINTSUGI_MAX_CONNECTIONS is not a positive number; serving at most {MAX_CONNECTIONS} connections");
                MAX_CONNECTIONS
            }
            Err(_) => MAX_CONNECTIONS,
        };
        (tokio::sync::Semaphore::new(n), n)
    })
}

/// Runs a new connection's handshake under this process's secret and protection, within
/// [`secure::HANDSHAKE_LIMIT`], a free pre-authentication slot and a free connection slot
/// (held by the connection until it is dropped).
pub async fn accept(s: TcpStream) -> Result<Conn, AcceptError> {
    let (slots, max) = connection_slots();
    let Ok(conn_slot) = slots.try_acquire() else {
        return Err(AcceptError::Busy(format!("{max} connections already open (KINTSUGI_MAX_CONNECTIONS)")));
    };
    let Ok(_slot) = PRE_AUTH.try_acquire() else {
        return Err(AcceptError::Busy(format!("{PRE_AUTH_SLOTS} handshakes already under way")));
    };
    let key = secret();
    match tokio::time::timeout(secure::HANDSHAKE_LIMIT, secure::accept(s, key.as_ref(), protection())).await {
        Ok(r) => Ok(r?.holding(conn_slot)),
        Err(_) => Err(AcceptError::TimedOut(secure::HANDSHAKE_LIMIT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_and_not_too_short() {
        assert_eq!(format!("{:?}", Secret::random()), "Secret(<hidden>)");
        assert!(Secret::new(b"short".to_vec()).is_err());
    }
}
