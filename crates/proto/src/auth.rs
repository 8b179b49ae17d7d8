//! Every connection proves knowledge of the cluster secret before a request is served:
//! a mutual HMAC-SHA256 challenge-response over the ordinary control frames.
//!
//! 1. the connecting side sends `Hello { nonce_c }`;
//! 2. the serving side answers `Challenge { nonce_s, proof_s = HMAC(K, "server" nonce_c nonce_s) }`;
//! 3. the connecting side checks proof_s (so it never talks to an impostor) and sends
//!    `Proof { proof_c = HMAC(K, "client" nonce_s nonce_c) }`;
//! 4. the serving side checks proof_c and answers `Welcome`, or refuses and closes.
//!
//! Fresh random nonces on both sides make every proof single-use. We chose this over mutual
//! TLS: it needs no certificates to issue and rotate (a secret file is what operators of
//! Ceph's cephx or HDFS's shared keys already handle), adds one round trip per connection,
//! and the data path keeps its zero-copy frames. It authenticates peers; it does not
//! encrypt traffic (run on a trusted network, or under IPsec/WireGuard).
//!
//! The secret is process-wide (`set_secret`, set once at start-up from `--secret-file`,
//! `KINTSUGI_SECRET_FILE` or `secret_file` in TOML); it is never printed.

use crate::frame::{recv, send};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
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

    fn proof(&self, label: &str, a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(label.as_bytes());
        mac.update(a);
        mac.update(b);
        mac.finalize().into_bytes().to_vec()
    }

    fn verify(&self, label: &str, a: &[u8], b: &[u8], proof: &[u8]) -> bool {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(label.as_bytes());
        mac.update(a);
        mac.update(b);
        mac.verify_slice(proof).is_ok() // constant time
    }
}

static SECRET: RwLock<Option<Secret>> = RwLock::new(None);

/// Sets this process's cluster secret (None: an open cluster, no handshake).
pub fn set_secret(s: Option<Secret>) {
    *SECRET.write().expect("secret lock") = s;
}

/// This process's cluster secret.
pub fn secret() -> Option<Secret> {
    SECRET.read().expect("secret lock").clone()
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "auth", rename_all = "snake_case")]
enum AuthMsg {
    Hello { nonce: String },
    Challenge { nonce: String, proof: String },
    Proof { proof: String },
    Welcome,
    Refused { reason: String },
}

const LIMIT: Duration = Duration::from_secs(10);

async fn recv_auth<S: AsyncRead + Unpin>(s: &mut S) -> Result<AuthMsg, String> {
    match tokio::time::timeout(LIMIT, recv::<_, AuthMsg>(s)).await {
        Err(_) => Err("no answer during the authentication handshake".into()),
        Ok(Err(e)) => Err(format!("authentication handshake: {e}")),
        Ok(Ok(m)) => Ok(m),
    }
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    hex::decode(s).map_err(|_| "malformed authentication message".to_string())
}

/// The connecting side of the handshake.
pub async fn client_handshake<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, key: &Secret) -> Result<(), String> {
    let nonce_c = rand::random::<[u8; 32]>();
    send(s, &AuthMsg::Hello { nonce: hex::encode(nonce_c) }).await.map_err(|e| e.to_string())?;
    let (nonce_s, proof_s) = match recv_auth(s).await? {
        AuthMsg::Challenge { nonce, proof } => (unhex(&nonce)?, unhex(&proof)?),
        AuthMsg::Refused { reason } => return Err(format!("refused: {reason}")),
        _ => return Err("the peer does not authenticate (is it running without the cluster secret?)".into()),
    };
    if !key.verify("server", &nonce_c, &nonce_s, &proof_s) {
        let _ = send(s, &AuthMsg::Refused { reason: "wrong cluster secret".into() }).await;
        return Err("the peer does not know the cluster secret".into());
    }
    send(s, &AuthMsg::Proof { proof: hex::encode(key.proof("client", &nonce_s, &nonce_c)) }).await.map_err(|e| e.to_string())?;
    match recv_auth(s).await? {
        AuthMsg::Welcome => Ok(()),
        AuthMsg::Refused { reason } => Err(format!("refused: {reason}")),
        _ => Err("unexpected answer during the authentication handshake".into()),
    }
}

/// The serving side of the handshake: Ok once the peer proved it knows the secret.
pub async fn server_handshake<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, key: &Secret) -> Result<(), String> {
    let nonce_c = match recv_auth(s).await {
        Ok(AuthMsg::Hello { nonce }) => unhex(&nonce)?,
        Ok(_) | Err(_) => {
            // The peer skipped the handshake: answer in the shape every response has, so a
            // client without the secret gets a message it can act on.
            let refusal = serde_json::json!({
                "status": "error",
                "message": "authenticate first: this cluster needs the cluster secret (--secret-file or KINTSUGI_SECRET_FILE)",
            });
            let _ = send(s, &refusal).await;
            return Err("a peer sent a request without authenticating".into());
        }
    };
    let nonce_s = rand::random::<[u8; 32]>();
    let proof = hex::encode(key.proof("server", &nonce_c, &nonce_s));
    send(s, &AuthMsg::Challenge { nonce: hex::encode(nonce_s), proof }).await.map_err(|e| e.to_string())?;
    match recv_auth(s).await? {
        AuthMsg::Proof { proof } if key.verify("client", &nonce_s, &nonce_c, &unhex(&proof)?) => {
            send(s, &AuthMsg::Welcome).await.map_err(|e| e.to_string())
        }
        _ => {
            let _ = send(s, &AuthMsg::Refused { reason: "wrong cluster secret".into() }).await;
            Err("a peer failed to prove it knows the cluster secret".into())
        }
    }
}

/// Connects to `addr` and, when this process has a cluster secret, authenticates; both
/// within `t` (a hung peer accepts connections in its kernel but never answers).
/// Connects to `addr`, or to the first of a comma-separated list that accepts (coordinators
/// of which one leads: the standbys do not listen), starting with the one that accepted last.
pub async fn connect(addr: &str, t: Duration) -> Result<TcpStream, String> {
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
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

async fn connect_one(addr: &str, t: Duration) -> Result<TcpStream, String> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
        crate::tcp::tune(&s);
        if let Some(key) = secret() {
            client_handshake(&mut s, &key).await.map_err(|e| format!("{addr}: {e}"))?;
        }
        Ok(s)
    };
    tokio::time::timeout(t, attempt).await.map_err(|_| format!("{addr}: connect timed out"))?
}

/// Accepts a connection's handshake when this process has a cluster secret.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<(), String> {
    match secret() {
        Some(key) => server_handshake(s, &key).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn right_and_wrong_keys() {
        let (a, b) = (Secret::random(), Secret::random());
        assert_eq!(format!("{a:?}"), "Secret(<hidden>)");
        for (client_key, server_key, ok) in [(a.clone(), a.clone(), true), (a.clone(), b.clone(), false)] {
            let (mut c, mut s) = tokio::io::duplex(4096);
            let server = tokio::spawn(async move { server_handshake(&mut s, &server_key).await });
            let client = client_handshake(&mut c, &client_key).await;
            assert_eq!(client.is_ok(), ok, "{client:?}");
            assert_eq!(server.await.unwrap().is_ok(), ok);
        }
        assert!(Secret::new(b"short".to_vec()).is_err());
    }
}
