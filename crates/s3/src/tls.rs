//! HTTPS on the S3 port: a certificate chain and key read from PEM files, swapped in place
//! when they are reloaded (SIGHUP) so that connections open at that time keep theirs, and a
//! self-signed pair made for a first start.
//!
//! A client that speaks plain HTTP to the TLS port is told so in a plain-HTTP 400 (as Go's
//! and nginx's servers do) instead of seeing a handshake fail on bytes it did not send.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio::io::AsyncWriteExt;

/// Where the certificate chain and its private key are (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} is not a PEM certificate chain: {reason}")]
    BadCertificate { path: PathBuf, reason: String },
    #[error("{path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {reason}")]
    BadKey { path: PathBuf, reason: String },
    #[error("the key in {key} does not go with the certificate in {cert}: {reason}")]
    Mismatch { cert: PathBuf, key: PathBuf, reason: String },
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The server configuration read from `files`: HTTP/1.1 over TLS 1.2 or 1.3.
pub fn load(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let read = |p: &Path| std::fs::read(p).map_err(|source| TlsError::Read { path: p.into(), source });
    let cert_pem = read(&files.cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCertificate { path: files.cert.clone(), reason: e.to_string() })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: files.cert.clone() });
    }
    let key = PrivateKeyDer::from_pem_slice(&read(&files.key)?)
        .map_err(|e| TlsError::BadKey { path: files.key.clone(), reason: e.to_string() })?;
    let mismatch = |e: rustls::Error| TlsError::Mismatch { cert: files.cert.clone(), key: files.key.clone(), reason: e.to_string() };
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .map_err(mismatch)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(mismatch)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // The server's order of suites, AES-128-GCM first: it is what bulk transfers cost.
    cfg.ignore_client_order = true;
    Ok(Arc::new(cfg))
}

/// The TLS algorithms of the gateway (and of the benchmark's client): ring's, with
/// AES-128-GCM ahead of AES-256-GCM, as Go orders them; both are sound, and the first takes
/// about a third less CPU per byte on AES-NI.
///
/// ring, which the cluster's Noise links use already, rather than aws-lc-rs: one C crypto
/// build, not two. Its provider lacks post-quantum key exchange, hence rustls's deprecation.
pub fn provider() -> rustls::crypto::CryptoProvider {
    #[allow(deprecated)]
    let mut p = rustls::crypto::ring::default_provider();
    let aes128 = |s: &rustls::SupportedCipherSuite| {
        matches!(
            s.suite(),
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    };
    // Stable: the AES-128 suites move ahead, each protocol version's order otherwise kept.
    p.cipher_suites.sort_by_key(|s| (s.version() != &rustls::version::TLS13, !aes128(s)));
    p
}

/// The certificate in use, replaced whole by [`Certificates::reload`].
pub struct Certificates {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl Certificates {
    /// Reads `files`; fails if they cannot serve.
    pub fn new(files: TlsFiles) -> Result<Certificates, TlsError> {
        let current = RwLock::new(load(&files)?);
        Ok(Certificates { files, current })
    }

    /// Reads the files again. On failure the certificate in use stays, and the error says why.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = load(&self.files)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    fn current(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The first byte of a TLS handshake record.
const HANDSHAKE: u8 = 0x16;

/// The answer to plain HTTP on the TLS port.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 48\r\n\r\nThis port speaks HTTPS: use https:// to reach it";

/// What became of a connection's first bytes.
pub enum Accepted<S> {
    Tls(Box<tokio_rustls::server::TlsStream<S>>),
    /// Plain HTTP, answered with a 400 and closed; or a handshake that failed.
    Refused(String),
}

/// Runs the TLS handshake on `stream`, whose first byte `first` was peeked (not read).
pub async fn accept<S>(certs: &Certificates, first: u8, mut stream: S) -> Accepted<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if first != HANDSHAKE {
        let _ = stream.write_all(PLAIN_HTTP_ANSWER).await;
        let _ = stream.shutdown().await;
        return Accepted::Refused("plain HTTP on the TLS port".into());
    }
    match tokio_rustls::TlsAcceptor::from(certs.current()).accept(stream).await {
        Ok(s) => Accepted::Tls(Box::new(s)),
        Err(e) => Accepted::Refused(format!("TLS handshake: {e}")),
    }
}

/// Makes a self-signed certificate for `names` (DNS names or IP addresses) and its key in
/// `dir` (`cert.pem`, `key.pem` readable by the owner only), unless both are there already.
/// Returns the files, and whether they were made now.
pub fn self_signed(dir: &Path, names: &[String]) -> Result<(TlsFiles, bool), TlsError> {
    let files = TlsFiles { cert: dir.join("cert.pem"), key: dir.join("key.pem") };
    if files.cert.exists() && files.key.exists() {
        return Ok((files, false));
    }
    let bad = |e: rcgen::Error| TlsError::SelfSigned(e.to_string());
    let key = rcgen::KeyPair::generate().map_err(bad)?;
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(bad)?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "kintsugi (self-signed)");
    // Valid for ten years from a day ago (clocks differ).
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(86_400)).into();
    params.not_after = (now + std::time::Duration::from_secs(10 * 365 * 86_400)).into();
    let cert = params.self_signed(&key).map_err(bad)?;
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write { path: dir.into(), source })?;
    write_private(&files.key, key.serialize_pem().as_bytes())?;
    write_private(&files.cert, cert.pem().as_bytes())?;
    Ok((files, true))
}

/// Writes `bytes` to `path` (temp, fsync, rename), readable by the owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    use std::io::Write;
    let err = |source| TlsError::Write { path: path.into(), source };
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(&tmp).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_pair_loads_and_is_made_once() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let (files, made) = self_signed(dir.path(), &names).unwrap();
        assert!(made);
        let certs = Certificates::new(files.clone()).unwrap();
        let first = std::fs::read(&files.cert).unwrap();
        let (again, made) = self_signed(dir.path(), &names).unwrap();
        assert!(!made && again == files && std::fs::read(&files.cert).unwrap() == first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&files.key).unwrap().permissions().mode() & 0o777, 0o600);
        }
        certs.reload().unwrap();
    }

    #[test]
    fn aes_128_gcm_goes_first_in_each_version() {
        let names: Vec<String> = provider().cipher_suites.iter().map(|s| format!("{:?}", s.suite())).collect();
        assert_eq!(names[0], "TLS13_AES_128_GCM_SHA256", "{names:?}");
        let first12 = names.iter().position(|n| !n.starts_with("TLS13")).unwrap();
        assert!(names[first12].contains("AES_128_GCM"), "{names:?}");
        assert!(names[..first12].iter().all(|n| n.starts_with("TLS13")), "{names:?}");
    }

    #[test]
    fn bad_files_are_refused_and_a_failed_reload_keeps_the_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let (files, _) = self_signed(dir.path(), &["localhost".to_string()]).unwrap();
        let certs = Certificates::new(files.clone()).unwrap();
        let before = certs.current();
        // A key of another pair.
        let other = tempfile::tempdir().unwrap();
        let (o, _) = self_signed(other.path(), &["localhost".to_string()]).unwrap();
        std::fs::copy(&o.key, &files.key).unwrap();
        assert!(matches!(certs.reload(), Err(TlsError::Mismatch { .. })));
        assert!(Arc::ptr_eq(&before, &certs.current()), "the certificate in use stays");
        std::fs::write(&files.cert, b"not a certificate").unwrap();
        assert!(matches!(load(&files), Err(TlsError::NoCertificate { .. })));
        std::fs::write(&files.key, b"").unwrap();
        std::fs::copy(&o.cert, &files.cert).unwrap();
        assert!(matches!(load(&files), Err(TlsError::BadKey { .. })));
        let missing = TlsFiles { cert: dir.path().join("nope.pem"), key: files.key.clone() };
        assert!(matches!(load(&missing), Err(TlsError::Read { .. })));
        // The pair put back serves again.
        std::fs::copy(&o.key, &files.key).unwrap();
        certs.reload().unwrap();
        assert!(!Arc::ptr_eq(&before, &certs.current()));
    }
}
