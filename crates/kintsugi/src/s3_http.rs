//! A small S3 client for the benchmark: SigV4-signed requests (headers, UNSIGNED-PAYLOAD,
//! as the aws cli does for streamed bodies) over one kept-alive HTTP/1.1 connection, plain
//! or TLS, bodies streamed both ways. Not a general client: path-style, Content-Length
//! bodies only.

use anyhow::{anyhow, bail, Context, Result};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A connection's byte stream, plain or TLS.
trait Conn: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Conn for T {}

pub struct S3Http {
    addr: String,
    access: String,
    secret: String,
    conn: Option<BufReader<Box<dyn Conn>>>,
    /// HTTPS, trusting the certificates it was given.
    tls: Option<tokio_rustls::TlsConnector>,
}

/// A response: status, and the body length that follows on the connection.
pub struct Head {
    pub status: u16,
    pub len: u64,
}

impl S3Http {
    pub fn new(addr: &str, access: &str, secret: &str) -> Self {
        S3Http { addr: addr.into(), access: access.into(), secret: secret.into(), conn: None, tls: None }
    }

    /// The same client over HTTPS, trusting the certificates in the PEM file `ca`.
    pub fn with_tls(mut self, ca: &std::path::Path) -> Result<Self> {
        let pem = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in <rustls::pki_types::CertificateDer as rustls::pki_types::pem::PemObject>::pem_slice_iter(&pem) {
            roots.add(c.with_context(|| format!("{} is not PEM", ca.display()))?)?;
        }
        let provider = std::sync::Arc::new(kintsugi_s3::tls::provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        self.tls = Some(tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg)));
        Ok(self)
    }

    /// Sends a request whose body is `body_len` bytes produced by `body` (called with the
    /// connection until it has written them), and reads the response head.
    pub async fn send(&mut self, method: &str, path: &str, query: &[(&str, &str)], body_len: u64, body: Option<&[u8]>) -> Result<Head> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.addr).await.with_context(|| format!("connecting to {}", self.addr))?;
            s.set_nodelay(true)?;
            let s: Box<dyn Conn> = match &self.tls {
                None => Box::new(s),
                Some(tls) => {
                    let host = self.addr.rsplit_once(':').map_or(self.addr.as_str(), |(h, _)| h);
                    let name = rustls::pki_types::ServerName::try_from(host.to_string())?;
                    // Read-buffered under TLS, so that rustls takes records from memory, not
                    // from a syscall of a few KiB each.
                    let s = tokio::io::BufStream::with_capacity(256 << 10, 64 << 10, s);
                    Box::new(tls.connect(name, s).await.with_context(|| format!("TLS to {}", self.addr))?)
                }
            };
            self.conn = Some(BufReader::with_capacity(256 << 10, s));
        }
        let head = self.sign(method, path, query, body_len);
        let c = self.conn.as_mut().expect("connected");
        c.get_mut().write_all(head.as_bytes()).await?;
        if let Some(b) = body {
            c.get_mut().write_all(b).await?;
        }
        c.get_mut().flush().await?;
        if body.is_some() || body_len == 0 {
            return self.read_head().await;
        }
        Ok(Head { status: 0, len: 0 })
    }

    /// Writes more of a request body after `send` with `body: None`.
    pub async fn write_body(&mut self, piece: &[u8]) -> Result<()> {
        let c = self.conn.as_mut().ok_or(anyhow!("not connected"))?.get_mut();
        c.write_all(piece).await?;
        c.flush().await?;
        Ok(())
    }

    /// The response head of the request whose body was written.
    pub async fn read_head(&mut self) -> Result<Head> {
        let c = self.conn.as_mut().ok_or(anyhow!("not connected"))?;
        let mut line = String::new();
        c.read_line(&mut line).await?;
        let status: u16 = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(anyhow!("bad status line '{line}'"))?;
        let mut len = 0;
        loop {
            line.clear();
            if c.read_line(&mut line).await? == 0 {
                bail!("connection closed in the response head");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse()?;
                }
                if k.eq_ignore_ascii_case("transfer-encoding") {
                    bail!("chunked responses are not read by this client");
                }
            }
        }
        Ok(Head { status, len })
    }

    /// Reads a response body of `len` bytes into `sink` a piece at a time.
    pub async fn read_body(&mut self, len: u64, mut sink: impl FnMut(&[u8])) -> Result<()> {
        let c = self.conn.as_mut().ok_or(anyhow!("not connected"))?;
        let mut left = len;
        let mut buf = vec![0u8; 256 << 10];
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let n = c.read(&mut buf[..want]).await?;
            if n == 0 {
                bail!("connection closed with {left} body bytes to come");
            }
            sink(&buf[..n]);
            left -= n as u64;
        }
        Ok(())
    }

    /// A whole small response body.
    pub async fn body(&mut self, len: u64) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len as usize);
        self.read_body(len, |b| out.extend_from_slice(b)).await?;
        Ok(out)
    }

    /// The request head, signed (AWS Signature Version 4, us-east-1, service s3).
    fn sign(&self, method: &str, path: &str, query: &[(&str, &str)], body_len: u64) -> String {
        let (date, stamp) = amz_now();
        let host = &self.addr;
        let mut q: Vec<(String, String)> = query.iter().map(|(k, v)| (uri_encode(k, true), uri_encode(v, true))).collect();
        q.sort();
        let canonical_query = q.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let canonical_path = uri_encode(path, false);
        let payload = "UNSIGNED-PAYLOAD";
        let canonical = format!(
            "{method}\n{canonical_path}\n{canonical_query}\nhost:{host}\nx-amz-content-sha256:{payload}\nx-amz-date:{stamp}\n\nhost;x-amz-content-sha256;x-amz-date\n{payload}"
        );
        let scope = format!("{date}/us-east-1/s3/aws4_request");
        let to_sign = format!("AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}", hex::encode(Sha256::digest(canonical.as_bytes())));
        let mut key = format!("AWS4{}", self.secret).into_bytes();
        for part in [date.as_str(), "us-east-1", "s3", "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex::encode(hmac(&key, to_sign.as_bytes()));
        let target = if canonical_query.is_empty() { canonical_path } else { format!("{canonical_path}?{canonical_query}") };
        format!(
            "{method} {target} HTTP/1.1\r\nHost: {host}\r\nx-amz-date: {stamp}\r\nx-amz-content-sha256: {payload}\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={signature}\r\n\
             Content-Length: {body_len}\r\n\r\n",
            self.access
        )
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// S3's URI encoding: unreserved characters as they are, '/' kept in paths.
fn uri_encode(s: &str, encode_slash: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b'/' if !encode_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Now as (YYYYMMDD, YYYYMMDDTHHMMSSZ), UTC.
fn amz_now() -> (String, String) {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let date = format!("{y:04}{m:02}{d:02}");
    (date.clone(), format!("{date}T{:02}{:02}{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_encoding_and_dates_are_what_sigv4_wants() {
        assert_eq!(uri_encode("/b/a b+c/é", false), "/b/a%20b%2Bc/%C3%A9");
        assert_eq!(uri_encode("a/b", true), "a%2Fb");
        let (d, s) = amz_now();
        assert!(s.starts_with(&d) && s.len() == 16 && s.ends_with('Z'));
        // Compared with an independent clock: `date -u +%Y%m%d`.
        let out = std::process::Command::new("date").args(["-u", "+%Y%m%d"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), d);
    }
}
