//! Virtual-hosted-style addressing: `bucket.DOMAIN/key` for each configured base domain,
//! path style (`HOST/bucket/key`) for any other host, so that turning it on breaks no
//! client that addresses the gateway by IP or another name. The port is not part of the
//! name (s3s's own host parsers keep it, and take an unknown host for a bucket).

use s3s::host::{S3Host, VirtualHost};
use s3s::S3Result;

/// The base domains of virtual-hosted-style requests.
pub struct VirtualDomains(pub Vec<String>);

impl S3Host for VirtualDomains {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> S3Result<VirtualHost<'a>> {
        let name = match host.rsplit_once(':') {
            Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => host,
        };
        for d in &self.0 {
            if name.eq_ignore_ascii_case(d) {
                return Ok(VirtualHost::new(d.as_str()));
            }
            if let Some(bucket) = name.len().checked_sub(d.len() + 1).and_then(|cut| {
                let (b, rest) = name.split_at(cut);
                (rest.len() == d.len() + 1 && rest[1..].eq_ignore_ascii_case(d) && rest.starts_with('.')).then_some(b)
            }) {
                return Ok(VirtualHost::new(d.as_str()).with_bucket(bucket));
            }
        }
        Ok(VirtualHost::new(name))
    }
}

/// The bucket a request names: from its host under a configured domain, else the first
/// segment of its path.
pub fn bucket_of(domains: &VirtualDomains, headers: &http::HeaderMap, uri: &http::Uri) -> Option<String> {
    let host = headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    if let Some(b) = domains.parse_host_header(host).ok().and_then(|v| v.bucket().map(str::to_string)) {
        return Some(b);
    }
    let first = uri.path().trim_start_matches('/').split('/').next().unwrap_or_default();
    (!first.is_empty()).then(|| first.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_comes_from_the_host_only_under_a_configured_domain() {
        let v = VirtualDomains(vec!["s3.example.com".into()]);
        let bucket = |h: &str| v.parse_host_header(h).unwrap().bucket().map(str::to_string);
        assert_eq!(bucket("photos.s3.example.com").as_deref(), Some("photos"));
        assert_eq!(bucket("photos.s3.example.com:9000").as_deref(), Some("photos"));
        assert_eq!(bucket("my.dotted.bucket.S3.Example.com").as_deref(), Some("my.dotted.bucket"));
        assert_eq!(bucket("s3.example.com:9000"), None, "the domain itself: path style");
        assert_eq!(bucket("localhost:9000"), None, "another host: path style");
        assert_eq!(bucket("evils3.example.com"), None, "not under the domain");
        let mut h = http::HeaderMap::new();
        h.insert(http::header::HOST, "photos.s3.example.com:9000".parse().unwrap());
        assert_eq!(bucket_of(&v, &h, &"/a/b".parse().unwrap()).as_deref(), Some("photos"));
        h.insert(http::header::HOST, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(bucket_of(&v, &h, &"/logs/a/b".parse().unwrap()).as_deref(), Some("logs"));
        assert_eq!(bucket_of(&v, &h, &"/".parse().unwrap()), None);
    }
}
