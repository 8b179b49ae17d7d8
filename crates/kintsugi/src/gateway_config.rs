//! `kintsugi s3`'s configuration: a TOML file (`--config`) with flags on top, as the
//! coordinator's and the nodes' are, checked by `kintsugi config check --role s3` exactly
//! as the gateway checks it at start.

use anyhow::{anyhow, bail, Context, Result};
use kintsugi_codes::CodeSpec;
use kintsugi_plan::Shape;
use kintsugi_s3::settings::{parse_layout, BucketSettings};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The gateway's settings, every one with its default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Address to serve S3 on.
    pub listen: String,
    /// Coordinator address (host:port), or several comma-separated.
    pub coordinator: String,
    /// TOML file of access keys: [[keys]] tables of access_key and secret_key (required).
    pub credentials: Option<PathBuf>,
    /// Code of buckets created without an x-kintsugi-code header.
    pub code: CodeSpec,
    /// Layout of such buckets: stripe, stripe-max, geo, geo:S0,Q[,CAP] or contiguous:CHUNK.
    pub layout: String,
    /// Chunk size of their Stripe layouts (e.g. "4MiB"; none: the coordinator's).
    pub chunk_size: Option<String>,
    /// Degraded-read method for unavailable chunks: cr, ppr, ecpipe or ecpipe-cyclic.
    pub method: Shape,
    pub slice: String,
    /// Smallest part of a multipart upload but the last (S3's rule is 5 MiB).
    pub min_part_size: String,
    /// Memory for request and response bodies in flight at once.
    pub memory_budget: String,
    /// Where Prometheus metrics are served (none: not served).
    pub metrics_listen: Option<String>,
    /// The region the gateway answers for; requests signed for another are redirected to it.
    pub region: String,
    /// Base domains for virtual-hosted-style requests (bucket.DOMAIN/key).
    pub domains: Vec<String>,
    /// Seconds in a lifecycle rule's "day" (86400; shorter only to test rules).
    pub lifecycle_day_seconds: u64,
    /// Seconds between lifecycle passes over the buckets.
    pub lifecycle_interval_seconds: u64,
    /// Lifecycle deletions per second at most.
    pub lifecycle_rate: u32,
    /// Seconds a client has to send a request's head (from connecting, or from the end of
    /// its last request).
    pub header_timeout_seconds: u64,
    /// Seconds a request body may send nothing, or a response go unread, before the
    /// connection is closed.
    pub idle_timeout_seconds: u64,
    /// Connections open at once from one client address.
    pub connections_per_address: usize,
    /// HTTPS: the certificate chain (PEM), with `tls_key`; reread at SIGHUP. None: plain HTTP.
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub tls_key: Option<PathBuf>,
    /// SSE-S3's master keys (`ID BASE64-KEY` a line, the first current, mode 0600). None:
    /// SSE-S3 and bucket default encryption are refused; SSE-C works without.
    pub sse_key_file: Option<PathBuf>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: "127.0.0.1:9000".into(),
            coordinator: "127.0.0.1:7400".into(),
            credentials: None,
            code: "rs:6,3".parse().expect("a valid code"),
            layout: "stripe".into(),
            chunk_size: None,
            method: Shape::Ecpipe,
            slice: "32KiB".into(),
            min_part_size: "5MiB".into(),
            memory_budget: "96MiB".into(),
            metrics_listen: None,
            region: kintsugi_s3::DEFAULT_REGION.into(),
            domains: vec![],
            lifecycle_day_seconds: 86_400,
            lifecycle_interval_seconds: 3600,
            lifecycle_rate: 100,
            header_timeout_seconds: 20,
            idle_timeout_seconds: 30,
            connections_per_address: 256,
            tls_cert: None,
            tls_key: None,
            sse_key_file: None,
        }
    }
}

impl GatewayConfig {
    /// Reads a TOML file of these settings (the defaults for those it leaves out).
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow!("{} is not a valid S3 gateway configuration: {e}", path.display()))
    }

    /// What the gateway runs with, or why it would refuse to start: every value parsed, the
    /// credentials file read (at least one key), the addresses and domains well-formed.
    pub fn resolve(&self) -> Result<kintsugi_s3::S3Config> {
        let size = |what: &str, v: &str| -> Result<u64> {
            crate::units::parse_nonzero_size(v).map(|n| n as u64).map_err(|e| anyhow!("{what} '{v}': {e}"))
        };
        let Some(creds) = &self.credentials else {
            bail!("the gateway needs a credentials file (credentials = \"...\" or --credentials)");
        };
        let keys = kintsugi_s3::credentials::load(creds).map_err(|e| anyhow!(e))?;
        if keys.is_empty() {
            bail!("{} holds no access key", creds.display());
        }
        self.listen.parse::<std::net::SocketAddr>().map_err(|e| anyhow!("listen '{}': {e} (HOST:PORT)", self.listen))?;
        if self.coordinator.split(',').any(|c| c.trim().is_empty()) {
            bail!("coordinator '{}': one address or several, comma-separated", self.coordinator);
        }
        if let Some(m) = &self.metrics_listen {
            m.parse::<std::net::SocketAddr>().map_err(|e| anyhow!("metrics_listen '{m}': {e} (HOST:PORT)"))?;
        }
        if self.region.is_empty() || !self.region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            bail!("region '{}': lower-case letters, digits and '-' (e.g. us-east-1)", self.region);
        }
        self.code.build().map_err(|e| anyhow!("code {}: {e}", self.code))?;
        let layout = parse_layout(&self.layout).map_err(|e| anyhow!("layout '{}': {e}", self.layout))?;
        let chunk_size = match &self.chunk_size {
            Some(c) => size("chunk_size", c)?,
            None => 0,
        };
        if self.header_timeout_seconds == 0 || self.idle_timeout_seconds == 0 || self.connections_per_address == 0 {
            bail!("header_timeout_seconds, idle_timeout_seconds and connections_per_address are at least 1");
        }
        if self.lifecycle_day_seconds == 0 || self.lifecycle_interval_seconds == 0 || self.lifecycle_rate == 0 {
            bail!("lifecycle_day_seconds, lifecycle_interval_seconds and lifecycle_rate are at least 1");
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                let files = kintsugi_s3::tls::TlsFiles { cert: cert.clone(), key: key.clone() };
                kintsugi_s3::tls::load(&files)?;
                Some(files)
            }
            _ => bail!("tls_cert and tls_key go together: give both, or neither for plain HTTP"),
        };
        let master_keys = match &self.sse_key_file {
            Some(f) => Some(std::sync::Arc::new(kintsugi_s3::sse::MasterKeys::load(f)?)),
            None => None,
        };
        Ok(kintsugi_s3::S3Config {
            listen: self.listen.clone(),
            coordinator: self.coordinator.clone(),
            keys,
            defaults: BucketSettings { code: self.code, layout, chunk_size, versioning: Default::default() },
            method: self.method,
            slice: size("slice", &self.slice)?,
            min_part: size("min_part_size", &self.min_part_size)?,
            memory_budget: size("memory_budget", &self.memory_budget)?,
            metrics_listen: self.metrics_listen.clone(),
            region: self.region.clone(),
            domains: self.domains.clone(),
            lifecycle: kintsugi_s3::lifecycle_worker::LifecyclePace {
                day: std::time::Duration::from_secs(self.lifecycle_day_seconds),
                interval: std::time::Duration::from_secs(self.lifecycle_interval_seconds),
                rate: self.lifecycle_rate,
                ..Default::default()
            },
            limits: kintsugi_s3::client_limits::ClientLimits {
                header_timeout: std::time::Duration::from_secs(self.header_timeout_seconds),
                idle_timeout: std::time::Duration::from_secs(self.idle_timeout_seconds),
                connections_per_address: self.connections_per_address,
            },
            tls,
            master_keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_overrides_the_defaults_and_bad_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("creds.toml");
        kintsugi_s3::credentials::write(&creds, &kintsugi_s3::credentials::generate()).unwrap();
        let text = format!(
            "listen = \"127.0.0.1:9100\"\ncredentials = {:?}\ncode = \"rs:4,2\"\nmethod = \"ppr\"\nregion = \"eu-west-1\"\ndomains = [\"s3.example.com\"]\nmemory_budget = \"1GiB\"\n",
            creds.display().to_string()
        );
        let cfg: GatewayConfig = toml::from_str(&text).unwrap();
        let r = cfg.resolve().unwrap();
        assert_eq!((r.listen.as_str(), r.region.as_str(), r.memory_budget), ("127.0.0.1:9100", "eu-west-1", 1 << 30));
        assert_eq!((r.defaults.code.to_string(), r.method, r.domains.len()), ("rs:4,2".to_string(), Shape::Ppr, 1));
        assert_eq!(r.min_part, 5 << 20, "a default kept");
        assert!(toml::from_str::<GatewayConfig>("listn = \"x\"").is_err(), "a misspelt key is refused");
        for bad in ["listen = \"nowhere\"", "region = \"US West\"", "slice = \"0\"", "layout = \"spiral\"", "code = \"rs:0,0\""] {
            let r = toml::from_str::<GatewayConfig>(&format!("{bad}\ncredentials = {:?}", creds.display().to_string()))
                .map_err(anyhow::Error::from)
                .and_then(|c| c.resolve());
            assert!(r.is_err(), "{bad} accepted");
        }
        assert!(GatewayConfig::default().resolve().is_err(), "no credentials");
    }

    #[test]
    fn tls_needs_a_certificate_and_its_key_that_load() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("creds.toml");
        kintsugi_s3::credentials::write(&creds, &kintsugi_s3::credentials::generate()).unwrap();
        let (files, _) = kintsugi_s3::tls::self_signed(&dir.path().join("tls"), &["localhost".into()]).unwrap();
        let with = |cert: Option<&std::path::Path>, key: Option<&std::path::Path>| {
            let c = GatewayConfig {
                credentials: Some(creds.clone()),
                tls_cert: cert.map(Into::into),
                tls_key: key.map(Into::into),
                ..Default::default()
            };
            c.resolve()
        };
        assert_eq!(with(Some(&files.cert), Some(&files.key)).unwrap().tls, Some(files.clone()));
        assert!(with(None, None).unwrap().tls.is_none(), "plain HTTP");
        let half = with(Some(&files.cert), None).err().unwrap().to_string();
        assert!(half.contains("go together"), "{half}");
        let swapped = with(Some(&files.key), Some(&files.cert)).err().unwrap().to_string();
        assert!(swapped.contains("no PEM certificate"), "{swapped}");
    }
}
