//! CORS: a bucket's rules (Put/Get/DeleteBucketCors), kept in its record's attributes;
//! browsers' preflight `OPTIONS` requests answered from them, and the `Access-Control-*`
//! headers added to actual requests whose Origin a rule allows, as S3 does. Rules are read
//! through a short cache, so a change reaches every gateway within [`CACHE_TTL`].

use crate::gateway::Gateway;
use crate::names;
use kintsugi_client::Client;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bucket record's attribute holding its rules (JSON).
const CORS: &str = "s3.cors";
/// How long a gateway answers from the rules it read.
pub const CACHE_TTL: Duration = Duration::from_secs(2);
/// S3's limit on rules.
const MAX_RULES: usize = 100;
/// The most bytes of rules a bucket's record holds (the record's attributes are small).
const MAX_RULES_BYTES: usize = 6144;

/// One rule, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub origins: Vec<String>,
    pub methods: Vec<String>,
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub expose: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<i32>,
}

/// A pattern with at most one `*`, matched case-insensitively or not.
fn matches(pattern: &str, s: &str, fold: bool) -> bool {
    let (p, s) = if fold { (pattern.to_ascii_lowercase(), s.to_ascii_lowercase()) } else { (pattern.to_string(), s.to_string()) };
    match p.split_once('*') {
        None => p == s,
        Some((a, b)) => s.len() >= a.len() + b.len() && s.starts_with(a) && s.ends_with(b),
    }
}

impl Rule {
    fn of(r: CORSRule) -> S3Result<Rule> {
        const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];
        if let Some(m) = r.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
            return Err(s3_error!(InvalidRequest, "Found unsupported HTTP method in CORS config. Unsupported method is {m}"));
        }
        if let Some(o) = r.allowed_origins.iter().find(|o| o.matches('*').count() > 1) {
            return Err(s3_error!(InvalidRequest, "AllowedOrigin \"{o}\" can not have more than one wildcard."));
        }
        if r.allowed_origins.is_empty() || r.allowed_methods.is_empty() {
            return Err(s3_error!(MalformedXML, "a CORS rule names at least one AllowedOrigin and one AllowedMethod"));
        }
        Ok(Rule {
            id: r.id,
            origins: r.allowed_origins,
            methods: r.allowed_methods,
            headers: r.allowed_headers.unwrap_or_default(),
            expose: r.expose_headers.unwrap_or_default(),
            max_age: r.max_age_seconds,
        })
    }

    fn dto(&self) -> CORSRule {
        CORSRule {
            id: self.id.clone(),
            allowed_origins: self.origins.clone(),
            allowed_methods: self.methods.clone(),
            allowed_headers: (!self.headers.is_empty()).then(|| self.headers.clone()),
            expose_headers: (!self.expose.is_empty()).then(|| self.expose.clone()),
            max_age_seconds: self.max_age,
        }
    }

    /// Whether it allows `origin` to send `method` with `headers`.
    fn allows(&self, origin: &str, method: &str, headers: &[String]) -> bool {
        self.origins.iter().any(|o| matches(o, origin, false))
            && self.methods.iter().any(|m| m == method)
            && headers.iter().all(|h| self.headers.iter().any(|p| matches(p, h, true)))
    }

    /// The response headers of a request it allows.
    fn answer(&self, origin: &str, requested_headers: &[String], h: &mut http::HeaderMap) {
        let any = self.origins.iter().any(|o| o == "*");
        let mut set = |k: &'static str, v: String| {
            if let Ok(v) = http::HeaderValue::from_str(&v) {
                h.insert(k, v);
            }
        };
        set("access-control-allow-origin", if any { "*".into() } else { origin.into() });
        set("access-control-allow-methods", self.methods.join(", "));
        if !requested_headers.is_empty() {
            set("access-control-allow-headers", requested_headers.join(", "));
        }
        if !self.expose.is_empty() {
            set("access-control-expose-headers", self.expose.join(", "));
        }
        if let Some(a) = self.max_age {
            set("access-control-max-age", a.to_string());
        }
        if !any {
            set("access-control-allow-credentials", "true".into());
        }
        set("vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method".into());
    }
}

fn rules_of(attrs: &kintsugi_proto::Attrs) -> Option<Vec<Rule>> {
    serde_json::from_str(attrs.get(CORS)?).ok()
}

pub async fn put(g: &Gateway, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
    let i = req.input;
    let rules = i.cors_configuration.cors_rules.into_iter().map(Rule::of).collect::<S3Result<Vec<_>>>()?;
    if rules.is_empty() || rules.len() > MAX_RULES {
        return Err(s3_error!(MalformedXML, "a CORS configuration has 1 to {MAX_RULES} rules"));
    }
    let json = serde_json::to_string(&rules).map_err(|e| s3_error!(InternalError, "{e}"))?;
    if json.len() > MAX_RULES_BYTES {
        return Err(s3_error!(InvalidRequest, "the CORS rules take {} bytes; a bucket keeps at most {MAX_RULES_BYTES}", json.len()));
    }
    let b = i.bucket.clone();
    g.update_attrs(
        &names::bucket_record(&i.bucket),
        &|mut a| {
            a.insert(CORS.into(), json.clone());
            a
        },
        &|| s3_error!(NoSuchBucket, "no bucket named '{b}'"),
    )
    .await?;
    g.cors.forget(&i.bucket);
    Ok(S3Response::new(PutBucketCorsOutput::default()))
}

pub async fn get(g: &Gateway, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
    let Some(rules) = rules_of(&g.bucket_attrs(&req.input.bucket).await?) else {
        return Err(s3_error!(NoSuchCORSConfiguration, "The CORS configuration does not exist"));
    };
    Ok(S3Response::new(GetBucketCorsOutput { cors_rules: Some(rules.iter().map(Rule::dto).collect()) }))
}

pub async fn delete(g: &Gateway, req: S3Request<DeleteBucketCorsInput>) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
    let b = req.input.bucket;
    g.update_attrs(
        &names::bucket_record(&b),
        &|mut a| {
            a.remove(CORS);
            a
        },
        &|| s3_error!(NoSuchBucket, "no bucket named '{b}'"),
    )
    .await?;
    g.cors.forget(&b);
    Ok(S3Response::new(DeleteBucketCorsOutput::default()))
}

/// A bucket's rules as read at an instant (none: no configuration, or no bucket).
type Cached = (Instant, Option<Arc<Vec<Rule>>>);

/// The buckets' rules as this gateway last read them.
#[derive(Clone, Default)]
pub struct RulesCache(Arc<Mutex<HashMap<String, Cached>>>);

impl RulesCache {
    fn forget(&self, bucket: &str) {
        self.0.lock().expect("cors cache").remove(bucket);
    }

    /// The rules of `bucket` (none: no configuration, or no bucket).
    async fn rules(&self, client: &Client, bucket: &str) -> Option<Arc<Vec<Rule>>> {
        if let Some((at, r)) = self.0.lock().expect("cors cache").get(bucket) {
            if at.elapsed() < CACHE_TTL {
                return r.clone();
            }
        }
        let r = client.stat(&names::bucket_record(bucket)).await.ok().and_then(|l| rules_of(&l.attrs)).map(Arc::new);
        let mut c = self.0.lock().expect("cors cache");
        if c.len() > 10_000 {
            c.clear();
        }
        c.insert(bucket.to_string(), (Instant::now(), r.clone()));
        r
    }
}

/// What CORS needs of a request: its bucket and the browser's headers.
pub struct Asked {
    pub bucket: String,
    pub origin: String,
    pub method: String,
    pub headers: Vec<String>,
}

impl Asked {
    /// The CORS side of a request to `bucket` (None without an Origin).
    pub fn of(req_headers: &http::HeaderMap, method: &http::Method, bucket: Option<String>) -> Option<Asked> {
        let get = |k: &str| req_headers.get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
        let origin = get("origin")?;
        let preflight = *method == http::Method::OPTIONS;
        let method = if preflight { get("access-control-request-method").unwrap_or_default() } else { method.as_str().to_string() };
        let headers = if preflight {
            get("access-control-request-headers")
                .map(|h| h.split(',').map(|x| x.trim().to_ascii_lowercase()).filter(|x| !x.is_empty()).collect())
                .unwrap_or_default()
        } else {
            vec![]
        };
        Some(Asked { bucket: bucket.unwrap_or_default(), origin, method, headers })
    }
}

/// The answer to a preflight request (`OPTIONS` with Origin and
/// Access-Control-Request-Method): 200 with the matching rule's headers, or 403.
pub async fn preflight(cache: &RulesCache, client: &Client, a: Option<Asked>) -> http::Response<s3s::Body> {
    let forbidden = |why: &str| {
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessForbidden</Code><Message>CORSResponse: {why}</Message></Error>"
        );
        let mut r = http::Response::new(s3s::Body::from(xml));
        *r.status_mut() = http::StatusCode::FORBIDDEN;
        r
    };
    let Some(a) = a.filter(|a| !a.method.is_empty() && !a.bucket.is_empty()) else {
        let mut r = forbidden("Insufficient information. Origin request header needed.");
        *r.status_mut() = http::StatusCode::BAD_REQUEST;
        return r;
    };
    let Some(rules) = cache.rules(client, &a.bucket).await else {
        return forbidden("CORS is not enabled for this bucket.");
    };
    match rules.iter().find(|r| r.allows(&a.origin, &a.method, &a.headers)) {
        Some(rule) => {
            let mut r = http::Response::new(s3s::Body::empty());
            rule.answer(&a.origin, &a.headers, r.headers_mut());
            r
        }
        None => forbidden("This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."),
    }
}

/// Adds the matching rule's headers to the response of an actual request from an Origin.
pub async fn decorate(cache: &RulesCache, client: &Client, a: &Asked, h: &mut http::HeaderMap) {
    if a.bucket.is_empty() {
        return;
    }
    if let Some(rules) = cache.rules(client, &a.bucket).await {
        if let Some(rule) = rules.iter().find(|r| r.allows(&a.origin, &a.method, &[])) {
            rule.answer(&a.origin, &[], h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_origins_methods_and_headers_with_one_wildcard() {
        let r = Rule {
            id: None,
            origins: vec!["https://*.example.com".into()],
            methods: vec!["GET".into(), "PUT".into()],
            headers: vec!["x-amz-*".into(), "Content-Type".into()],
            expose: vec!["ETag".into()],
            max_age: Some(600),
        };
        assert!(r.allows("https://app.example.com", "PUT", &["content-type".into(), "x-amz-date".into()]));
        assert!(!r.allows("https://app.example.org", "PUT", &[]), "another origin");
        assert!(!r.allows("https://app.example.com", "DELETE", &[]), "another method");
        assert!(!r.allows("https://app.example.com", "GET", &["authorization".into()]), "a header not allowed");
        let mut h = http::HeaderMap::new();
        r.answer("https://app.example.com", &["content-type".into()], &mut h);
        assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
        assert_eq!(h["access-control-allow-methods"], "GET, PUT");
        assert_eq!(h["access-control-max-age"], "600");
        assert_eq!(h["access-control-expose-headers"], "ETag");
        let bad = CORSRule { allowed_methods: vec!["PATCH".into()], allowed_origins: vec!["*".into()], ..Default::default() };
        assert!(Rule::of(bad).is_err());
        let two = CORSRule { allowed_methods: vec!["GET".into()], allowed_origins: vec!["*.*".into()], ..Default::default() };
        assert!(Rule::of(two).is_err());
    }
}
