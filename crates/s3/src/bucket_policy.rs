//! Bucket policies: the common part of S3's JSON policy language (Version, Statement with
//! Sid, Effect, Principal, Action, Resource, Condition), stored in the bucket's record
//! (Put/Get/DeleteBucketPolicy) and asked before every request to the bucket. A policy is
//! parsed in full when it is put: an element, condition operator or key this gateway does not
//! evaluate is refused (MalformedPolicy), never ignored, so a policy that reads as a denial
//! is never stored as a grant.
//!
//! Evaluation as S3's: a matching Deny wins; a matching Allow grants what the signer's key
//! does not hold, and is the only way an anonymous request is served.

use crate::names;
use kintsugi_client::Client;
use serde_json::Value;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bucket attribute holding the policy as put (its JSON text).
pub const POLICY_ATTR: &str = "s3.policy";
/// S3's limit on a bucket policy.
pub const MAX_POLICY_BYTES: usize = 20 << 10;
/// How long a bucket's policy is trusted before it is read again.
pub const CACHE_TTL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PolicyError {
    #[error("the policy is not JSON: {0}")]
    NotJson(String),
    #[error("{0}")]
    Malformed(String),
}

fn bad(msg: impl Into<String>) -> PolicyError {
    PolicyError::Malformed(msg.into())
}

/// A parsed policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    statements: Vec<Statement>,
}

#[derive(Clone, Debug, PartialEq)]
struct Statement {
    allow: bool,
    principal: Principal,
    actions: Vec<String>,
    resources: Vec<String>,
    conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
enum Principal {
    /// `"*"` or `{"AWS": "*"}`: anyone, anonymous requests included.
    Anyone,
    /// Access keys, by id or as the last part of an IAM user ARN.
    Keys(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    StringEquals,
    StringNotEquals,
    StringLike,
    StringNotLike,
    IpAddress,
    NotIpAddress,
    Bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Key {
    SourceIp,
    SecureTransport,
    Prefix,
    Delimiter,
    Referer,
    UserAgent,
}

#[derive(Clone, Debug, PartialEq)]
struct Condition {
    op: Op,
    key: Key,
    values: Vec<String>,
}

/// What a policy is asked about.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The signer's access key; None for an anonymous request.
    pub principal: Option<String>,
    /// `s3:GetObject`, ... ([`action_of`]).
    pub action: String,
    /// `arn:aws:s3:::BUCKET` or `arn:aws:s3:::BUCKET/KEY`.
    pub resource: String,
    pub source_ip: Option<IpAddr>,
    pub secure: bool,
    /// A listing's `prefix` and `delimiter`.
    pub prefix: Option<String>,
    pub delimiter: Option<String>,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decision {
    Allow,
    Deny,
    /// No statement matches.
    Neither,
}

/// A string or an array of strings.
fn strings(v: &Value, what: &str) -> Result<Vec<String>, PolicyError> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(|| bad(format!("{what} holds a value that is not a string"))))
            .collect(),
        _ => Err(bad(format!("{what} must be a string or a list of strings"))),
    }
}

impl Policy {
    /// Parses a policy for `bucket`: its resources must name the bucket or its objects.
    pub fn parse(text: &str, bucket: &str) -> Result<Policy, PolicyError> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(bad(format!("a policy is at most {MAX_POLICY_BYTES} bytes; this one is {}", text.len())));
        }
        let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::NotJson(e.to_string()))?;
        let o = v.as_object().ok_or_else(|| bad("a policy is a JSON object"))?;
        for k in o.keys() {
            if !["Version", "Id", "Statement"].contains(&k.as_str()) {
                return Err(bad(format!("unknown policy element '{k}'")));
            }
        }
        match o.get("Version").and_then(Value::as_str) {
            Some("2012-10-17") | Some("2008-10-17") => {}
            _ => return Err(bad("Version must be \"2012-10-17\"")),
        }
        let statements = match o.get("Statement") {
            Some(Value::Array(a)) if !a.is_empty() => a.iter().collect::<Vec<_>>(),
            Some(s @ Value::Object(_)) => vec![s],
            _ => return Err(bad("a policy needs a Statement")),
        };
        let statements = statements.into_iter().map(|s| Statement::parse(s, bucket)).collect::<Result<_, _>>()?;
        Ok(Policy { statements })
    }

    pub fn decide(&self, r: &Request) -> Decision {
        let matching = self.statements.iter().filter(|s| s.matches(r));
        let mut allowed = false;
        for s in matching {
            if !s.allow {
                return Decision::Deny;
            }
            allowed = true;
        }
        if allowed {
            Decision::Allow
        } else {
            Decision::Neither
        }
    }
}

impl Statement {
    fn parse(v: &Value, bucket: &str) -> Result<Statement, PolicyError> {
        let o = v.as_object().ok_or_else(|| bad("a Statement is a JSON object"))?;
        for k in o.keys() {
            match k.as_str() {
                "Sid" | "Effect" | "Principal" | "Action" | "Resource" | "Condition" => {}
                "NotPrincipal" | "NotAction" | "NotResource" => {
                    return Err(bad(format!("{k} is not supported: name what the statement applies to")))
                }
                other => return Err(bad(format!("unknown statement element '{other}'"))),
            }
        }
        let allow = match o.get("Effect").and_then(Value::as_str) {
            Some("Allow") => true,
            Some("Deny") => false,
            _ => return Err(bad("Effect must be Allow or Deny")),
        };
        let principal = match o.get("Principal") {
            Some(Value::String(s)) if s == "*" => Principal::Anyone,
            Some(Value::Object(p)) => {
                let mut keys = Vec::new();
                for (kind, v) in p {
                    if kind != "AWS" {
                        return Err(bad(format!("Principal '{kind}' is not supported: AWS (access keys) or \"*\"")));
                    }
                    keys.extend(strings(v, "Principal")?);
                }
                if keys.iter().any(|k| k == "*") {
                    Principal::Anyone
                } else {
                    Principal::Keys(keys.iter().map(|k| k.rsplit('/').next().unwrap_or(k).to_string()).collect())
                }
            }
            _ => return Err(bad("a Statement needs a Principal: \"*\" or {\"AWS\": [...]}")),
        };
        let actions = strings(o.get("Action").ok_or_else(|| bad("a Statement needs an Action"))?, "Action")?;
        for a in &actions {
            if a != "*" && !a.to_ascii_lowercase().starts_with("s3:") {
                return Err(bad(format!("Action '{a}' is not an s3: action")));
            }
        }
        let resources = strings(o.get("Resource").ok_or_else(|| bad("a Statement needs a Resource"))?, "Resource")?;
        let arn = format!("arn:aws:s3:::{bucket}");
        for r in &resources {
            if *r != arn && !r.starts_with(&format!("{arn}/")) {
                return Err(bad(format!("Policy has invalid resource '{r}': the bucket's ({arn}) or its objects' ({arn}/...)")));
            }
        }
        let mut conditions = Vec::new();
        if let Some(c) = o.get("Condition") {
            let c = c.as_object().ok_or_else(|| bad("Condition is a JSON object"))?;
            for (op_name, block) in c {
                let op = match op_name.as_str() {
                    "StringEquals" => Op::StringEquals,
                    "StringNotEquals" => Op::StringNotEquals,
                    "StringLike" => Op::StringLike,
                    "StringNotLike" => Op::StringNotLike,
                    "IpAddress" => Op::IpAddress,
                    "NotIpAddress" => Op::NotIpAddress,
                    "Bool" => Op::Bool,
                    other => return Err(bad(format!("condition operator '{other}' is not supported"))),
                };
                let block = block.as_object().ok_or_else(|| bad(format!("{op_name} holds an object of keys")))?;
                for (key_name, values) in block {
                    let key = match key_name.to_ascii_lowercase().as_str() {
                        "aws:sourceip" => Key::SourceIp,
                        "aws:securetransport" => Key::SecureTransport,
                        "s3:prefix" => Key::Prefix,
                        "s3:delimiter" => Key::Delimiter,
                        "aws:referer" => Key::Referer,
                        "aws:useragent" => Key::UserAgent,
                        other => return Err(bad(format!("condition key '{other}' is not supported"))),
                    };
                    let values = match values {
                        Value::Bool(b) => vec![b.to_string()],
                        v => strings(v, key_name)?,
                    };
                    let ip_op = matches!(op, Op::IpAddress | Op::NotIpAddress);
                    if ip_op != (key == Key::SourceIp) {
                        return Err(bad(format!("{op_name} does not apply to {key_name}")));
                    }
                    if ip_op {
                        for v in &values {
                            Cidr::parse(v).ok_or_else(|| bad(format!("'{v}' is not an IP address or CIDR block")))?;
                        }
                    }
                    if (op == Op::Bool) != (key == Key::SecureTransport) {
                        return Err(bad(format!("{op_name} does not apply to {key_name}")));
                    }
                    conditions.push(Condition { op, key, values });
                }
            }
        }
        Ok(Statement { allow, principal, actions, resources, conditions })
    }

    fn matches(&self, r: &Request) -> bool {
        let principal = match (&self.principal, &r.principal) {
            (Principal::Anyone, _) => true,
            (Principal::Keys(keys), Some(k)) => keys.iter().any(|x| x == k),
            (Principal::Keys(_), None) => false,
        };
        principal
            && self.actions.iter().any(|a| wildcard(&a.to_ascii_lowercase(), &r.action.to_ascii_lowercase()))
            && self.resources.iter().any(|p| wildcard(p, &r.resource))
            && self.conditions.iter().all(|c| c.holds(r))
    }
}

impl Condition {
    fn holds(&self, r: &Request) -> bool {
        let value = match self.key {
            Key::SourceIp => r.source_ip.map(|ip| ip.to_string()),
            Key::SecureTransport => Some(r.secure.to_string()),
            Key::Prefix => r.prefix.clone(),
            Key::Delimiter => r.delimiter.clone(),
            Key::Referer => r.referer.clone(),
            Key::UserAgent => r.user_agent.clone(),
        };
        // A key the request does not carry: positive operators fail, negated ones hold (S3's rule).
        let Some(value) = value else {
            return matches!(self.op, Op::StringNotEquals | Op::StringNotLike | Op::NotIpAddress);
        };
        let any = |f: &dyn Fn(&str) -> bool| self.values.iter().any(|v| f(v));
        match self.op {
            Op::StringEquals => any(&|v| v == value),
            Op::StringNotEquals => !any(&|v| v == value),
            Op::StringLike => any(&|v| wildcard(v, &value)),
            Op::StringNotLike => !any(&|v| wildcard(v, &value)),
            Op::Bool => any(&|v| v.eq_ignore_ascii_case(&value)),
            Op::IpAddress | Op::NotIpAddress => {
                let inside = r.source_ip.is_some_and(|ip| self.values.iter().filter_map(|v| Cidr::parse(v)).any(|c| c.contains(ip)));
                inside == (self.op == Op::IpAddress)
            }
        }
    }
}

/// `*` (any run of characters) and `?` (any one) in `pattern` against `s`.
pub fn wildcard(pattern: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// An address block: `10.0.0.0/8`, `2001:db8::/32`, or one address.
struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl Cidr {
    fn parse(s: &str) -> Option<Cidr> {
        let (a, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b.parse::<u8>().ok()?)),
            None => (s, None),
        };
        let net: IpAddr = a.parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        (bits <= max).then_some(Cidr { net, bits })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let mask = |bits: u8, width: u32| if bits == 0 { 0u128 } else { (!0u128) << (width - bits as u32) };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                let m = mask(self.bits, 32) as u32;
                u32::from(n) & m == u32::from(i) & m
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => {
                let m = mask(self.bits, 128);
                u128::from(n) & m == u128::from(i) & m
            }
            _ => false,
        }
    }
}

/// The policy action of S3 operation `op` (as s3s names it).
pub fn action_of(op: &str) -> String {
    let a = match op {
        "GetObject" | "HeadObject" => "GetObject",
        "PutObject"
        | "CopyObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload"
        | "PostObject" => "PutObject",
        "ListObjects" | "ListObjectsV2" | "HeadBucket" => "ListBucket",
        "ListObjectVersions" => "ListBucketVersions",
        "ListParts" => "ListMultipartUploadParts",
        "ListMultipartUploads" => "ListBucketMultipartUploads",
        "DeleteObjects" => "DeleteObject",
        "GetBucketCors" => "GetBucketCORS",
        "PutBucketCors" | "DeleteBucketCors" => "PutBucketCORS",
        "GetBucketLifecycleConfiguration" => "GetLifecycleConfiguration",
        "PutBucketLifecycleConfiguration" | "DeleteBucketLifecycle" => "PutLifecycleConfiguration",
        "GetBucketEncryption" => "GetEncryptionConfiguration",
        "PutBucketEncryption" | "DeleteBucketEncryption" => "PutEncryptionConfiguration",
        "GetObjectLockConfiguration" => "GetBucketObjectLockConfiguration",
        "PutObjectLockConfiguration" => "PutBucketObjectLockConfiguration",
        "DeleteBucketTagging" => "PutBucketTagging",
        "ListBuckets" => "ListAllMyBuckets",
        other => other,
    };
    format!("s3:{a}")
}

/// What the access check needs of a bucket's record: its policy, and its canned ACL when
/// its Object Ownership takes ACLs.
#[derive(Clone, Debug, Default)]
pub struct BucketAccess {
    pub policy: Option<Arc<Policy>>,
    pub acl: Option<crate::acl::Canned>,
}

/// A bucket's access as read, and when.
type Cached = (Instant, BucketAccess);

/// Buckets' policies (and ACLs) as last read, each for [`CACHE_TTL`].
pub struct Policies {
    client: Client,
    cache: Mutex<HashMap<String, Cached>>,
}

impl Policies {
    pub fn new(client: Client) -> Arc<Policies> {
        Arc::new(Policies { client, cache: Mutex::new(HashMap::new()) })
    }

    /// The policy and ACL of `bucket` (none: none set, or no bucket). A bucket record that
    /// cannot be read is an error: a Deny it may hold must not be skipped.
    pub async fn of(&self, bucket: &str) -> Result<BucketAccess, kintsugi_client::Error> {
        if let Some((at, p)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(bucket) {
            if at.elapsed() < CACHE_TTL {
                return Ok(p.clone());
            }
        }
        let p = match self.client.stat(&names::bucket_record(bucket)).await {
            Ok(l) => BucketAccess {
                policy: l.attrs.get(POLICY_ATTR).map(|text| match Policy::parse(text, bucket) {
                    Ok(p) => Arc::new(p),
                    Err(e) => {
                        // A stored policy that does not parse (one this gateway cannot evaluate) must not
                        // open or skip anything: it denies.
                        tracing::error!("bucket '{bucket}': its stored policy does not parse ({e}); requests are refused");
                        Arc::new(Policy { statements: vec![deny_all(bucket)] })
                    }
                }),
                acl: crate::acl::enabled(&l.attrs).then(|| crate::acl::Canned::of_attrs(&l.attrs)),
            },
            Err(e) if crate::errors::is_missing(&e) => BucketAccess::default(),
            Err(e) => return Err(e),
        };
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() > 10_000 {
            c.clear();
        }
        c.insert(bucket.to_string(), (Instant::now(), p.clone()));
        Ok(p)
    }

    /// The canned ACL of object `key` of `bucket` as it is now (private if it is not there).
    pub async fn object_acl(&self, bucket: &str, key: &str) -> Result<crate::acl::Canned, kintsugi_client::Error> {
        match self.client.stat(&names::object(bucket, key)).await {
            Ok(l) => Ok(crate::acl::Canned::of_attrs(&l.attrs)),
            Err(e) if crate::errors::is_missing(&e) => Ok(crate::acl::Canned::Private),
            Err(e) => Err(e),
        }
    }

    /// Drops what is cached of `bucket`'s policy (changed here).
    pub fn forget(&self, bucket: &str) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).remove(bucket);
    }
}

fn deny_all(bucket: &str) -> Statement {
    Statement {
        allow: false,
        principal: Principal::Anyone,
        actions: vec!["*".into()],
        resources: vec![format!("arn:aws:s3:::{bucket}"), format!("arn:aws:s3:::{bucket}/*")],
        conditions: vec![],
    }
}

pub async fn put(
    g: &crate::gateway::Gateway,
    req: s3s::S3Request<s3s::dto::PutBucketPolicyInput>,
) -> s3s::S3Result<s3s::S3Response<s3s::dto::PutBucketPolicyOutput>> {
    let i = req.input;
    Policy::parse(&i.policy, &i.bucket).map_err(|e| s3s::s3_error!(MalformedPolicy, "{e}"))?;
    let (b, text) = (i.bucket.clone(), i.policy.clone());
    let set = |mut a: kintsugi_proto::Attrs| {
        a.insert(POLICY_ATTR.into(), text.clone());
        a
    };
    g.update_attrs(&names::bucket_record(&i.bucket), &set, &|| s3s::s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    if let Some(p) = &g.policies {
        p.forget(&i.bucket);
    }
    tracing::info!("bucket '{}': policy set", i.bucket);
    Ok(s3s::S3Response::new(s3s::dto::PutBucketPolicyOutput::default()))
}

pub async fn get(
    g: &crate::gateway::Gateway,
    req: s3s::S3Request<s3s::dto::GetBucketPolicyInput>,
) -> s3s::S3Result<s3s::S3Response<s3s::dto::GetBucketPolicyOutput>> {
    let (_, attrs) = g.bucket_and_attrs(&req.input.bucket).await?;
    match attrs.get(POLICY_ATTR) {
        Some(p) => Ok(s3s::S3Response::new(s3s::dto::GetBucketPolicyOutput { policy: Some(p.clone()) })),
        None => Err(s3s::s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist")),
    }
}

pub async fn delete(
    g: &crate::gateway::Gateway,
    req: s3s::S3Request<s3s::dto::DeleteBucketPolicyInput>,
) -> s3s::S3Result<s3s::S3Response<s3s::dto::DeleteBucketPolicyOutput>> {
    let b = req.input.bucket.clone();
    let set = |mut a: kintsugi_proto::Attrs| {
        a.remove(POLICY_ATTR);
        a
    };
    g.update_attrs(&names::bucket_record(&b), &set, &|| s3s::s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    if let Some(p) = &g.policies {
        p.forget(&b);
    }
    Ok(s3s::S3Response::new(s3s::dto::DeleteBucketPolicyOutput::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(principal: Option<&str>, action: &str, resource: &str) -> Request {
        Request {
            principal: principal.map(str::to_string),
            action: action.into(),
            resource: resource.into(),
            source_ip: Some("10.1.2.3".parse().unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn a_public_prefix_policy_opens_only_its_prefix_to_anyone() {
        let p = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[{"Sid":"public","Effect":"Allow","Principal":"*",
                "Action":["s3:GetObject"],"Resource":["arn:aws:s3:::site/public/*"]}]}"#,
            "site",
        )
        .unwrap();
        assert_eq!(p.decide(&req(None, "s3:GetObject", "arn:aws:s3:::site/public/a.html")), Decision::Allow);
        assert_eq!(p.decide(&req(None, "s3:GetObject", "arn:aws:s3:::site/private/a")), Decision::Neither);
        assert_eq!(p.decide(&req(None, "s3:PutObject", "arn:aws:s3:::site/public/a.html")), Decision::Neither);
        assert_eq!(p.decide(&req(Some("KI1"), "s3:GetObject", "arn:aws:s3:::site/public/x")), Decision::Allow);
    }

    #[test]
    fn deny_wins_and_conditions_are_checked_as_s3_checks_them() {
        let p = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[
                {"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123:user/KIREADER"]},"Action":"s3:*","Resource":"arn:aws:s3:::b/*"},
                {"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],
                 "Condition":{"Bool":{"aws:SecureTransport":false}}},
                {"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",
                 "Condition":{"StringLike":{"s3:prefix":["docs/*"]},"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}"#,
            "b",
        )
        .unwrap();
        let mut r = req(Some("KIREADER"), "s3:GetObject", "arn:aws:s3:::b/k");
        assert_eq!(p.decide(&r), Decision::Deny, "plain HTTP is denied to everyone");
        r.secure = true;
        assert_eq!(p.decide(&r), Decision::Allow);
        r.principal = Some("KIOTHER".into());
        assert_eq!(p.decide(&r), Decision::Neither);
        let mut l = req(None, "s3:ListBucket", "arn:aws:s3:::b");
        l.secure = true;
        assert_eq!(p.decide(&l), Decision::Neither, "no prefix: StringLike fails");
        l.prefix = Some("docs/2024/".into());
        assert_eq!(p.decide(&l), Decision::Allow);
        l.source_ip = Some("192.168.1.1".parse().unwrap());
        assert_eq!(p.decide(&l), Decision::Neither, "outside 10/8");
        l.source_ip = Some("::ffff:10.9.9.9".parse().unwrap());
        assert_eq!(p.decide(&l), Decision::Allow, "a v4-mapped address is its v4 one");
    }

    #[test]
    fn what_is_not_evaluated_is_refused_not_ignored() {
        let with = |stmt: &str| Policy::parse(&format!(r#"{{"Version":"2012-10-17","Statement":[{stmt}]}}"#), "b");
        let base = r#""Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*""#;
        assert!(with(&format!("{{{base}}}")).is_ok());
        for (extra, why) in [
            (r#","NotAction":"s3:PutObject""#, "NotAction"),
            (r#","Condition":{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"}}"#, "DateGreaterThan"),
            (r#","Condition":{"StringEquals":{"aws:PrincipalOrgID":"o-1"}}"#, "aws:principalorgid"),
            (r#","Condition":{"IpAddress":{"aws:SourceIp":"not-an-ip"}}"#, "not-an-ip"),
            (r#","Extra":1"#, "Extra"),
        ] {
            let e = with(&format!("{{{base}{extra}}}")).unwrap_err().to_string();
            assert!(e.contains(why), "{extra}: {e}");
        }
        let e = with(r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}"#).unwrap_err();
        assert!(e.to_string().contains("invalid resource"), "{e}");
        assert!(matches!(Policy::parse("{", "b"), Err(PolicyError::NotJson(_))));
        assert!(with(r#"{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}"#).is_err());
    }

    #[test]
    fn wildcards_and_actions() {
        assert!(wildcard("s3:get*", "s3:getobject"));
        assert!(wildcard("a?c*", "abcdef"));
        assert!(!wildcard("a?c", "abcd"));
        assert!(wildcard("*", ""));
        assert!(wildcard("arn:aws:s3:::b/*/x", "arn:aws:s3:::b/1/2/x"));
        assert_eq!(action_of("HeadObject"), "s3:GetObject");
        assert_eq!(action_of("ListObjectsV2"), "s3:ListBucket");
        assert_eq!(action_of("UploadPart"), "s3:PutObject");
        assert_eq!(action_of("PutObjectTagging"), "s3:PutObjectTagging");
    }
}
