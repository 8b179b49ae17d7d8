//! Who may do what: the signature's key is looked up among the credentials file's keys
//! (which may do everything) and the cluster's scoped keys ([`crate::access_keys`]); an
//! operation is allowed by the permission its key holds in the bucket it touches, or by the
//! bucket's policy ([`crate::bucket_policy`]), whose Deny overrules both. An anonymous
//! request is served only where a policy allows it.
//!
//! Scoped keys and policies are read through caches of one second, so a revocation, a
//! changed grant or a new policy takes effect on every gateway within a second.

use crate::access_keys::{Permission, ScopedKey};
use crate::bucket_policy::{Decision, Policies, Request as PolicyRequest};
use kintsugi_client::Client;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::dto::CopySource;
use s3s::path::S3Path;
use s3s::{s3_error, S3Request, S3Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a scoped key's record is trusted before it is read again.
pub const KEY_CACHE: Duration = Duration::from_secs(1);

/// The keys a gateway knows: the bootstrap ones, and the cluster's through the cache.
pub struct Keys {
    bootstrap: HashMap<String, String>,
    client: Client,
    cache: Mutex<HashMap<String, (Instant, Option<ScopedKey>)>>,
}

/// Who signed a request.
#[derive(Clone, Debug)]
pub enum Principal {
    /// A credentials-file key: everything.
    Bootstrap,
    Scoped(ScopedKey),
}

impl Keys {
    pub fn new(bootstrap: &[crate::credentials::Key], client: Client) -> Arc<Keys> {
        let bootstrap = bootstrap.iter().map(|k| (k.access_key.clone(), k.secret_key.clone())).collect();
        Arc::new(Keys { bootstrap, client, cache: Mutex::new(HashMap::new()) })
    }

    /// Who `access_key` is, if anyone.
    pub async fn principal(&self, access_key: &str) -> S3Result<Option<Principal>> {
        if self.bootstrap.contains_key(access_key) {
            return Ok(Some(Principal::Bootstrap));
        }
        if let Some((at, k)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(access_key) {
            if at.elapsed() < KEY_CACHE {
                return Ok(k.clone().map(Principal::Scoped));
            }
        }
        let k = crate::access_keys::get(&self.client, access_key).await.map_err(|e| match e {
            crate::access_keys::KeyError::Cluster(e) => crate::errors::from_cluster(e),
            other => s3_error!(InternalError, "{other}"),
        })?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() > 10_000 {
            // Many unknown keys tried: start over rather than grow.
            cache.clear();
        }
        cache.insert(access_key.to_string(), (Instant::now(), k.clone()));
        Ok(k.map(Principal::Scoped))
    }

    /// Drops what is cached of `access_key` (its grants changed here).
    pub fn forget(&self, access_key: &str) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).remove(access_key);
    }

    /// What the key of `access_key` may do in `bucket` (Owner for a bootstrap key).
    pub async fn permission(&self, access_key: &str, bucket: &str) -> S3Result<Option<Permission>> {
        Ok(match self.principal(access_key).await? {
            Some(Principal::Bootstrap) => Some(Permission::Owner),
            Some(Principal::Scoped(k)) => k.permission(bucket),
            None => None,
        })
    }
}

/// The signature checker s3s calls: a secret for an access key.
pub struct KeyAuth(pub Arc<Keys>);

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if let Some(s) = self.0.bootstrap.get(access_key) {
            return Ok(s.as_str().into());
        }
        match self.0.principal(access_key).await? {
            Some(Principal::Scoped(k)) => Ok(k.secret_key.as_str().into()),
            _ => Err(s3_error!(InvalidAccessKeyId, "The AWS Access Key Id you provided does not exist in our records.")),
        }
    }
}

/// The permission operation `op` needs in its bucket.
pub fn needed(op: &str, bypass_governance: bool) -> Permission {
    if bypass_governance {
        return Permission::Owner;
    }
    let read = op.starts_with("Get") || op.starts_with("Head") || op.starts_with("List") || op == "SelectObjectContent";
    let bucket_setting = (op.starts_with("PutBucket") || op.starts_with("DeleteBucket")) || op == "PutObjectLockConfiguration";
    if read {
        Permission::Read
    } else if bucket_setting {
        Permission::Owner
    } else {
        Permission::Write
    }
}

/// Where a request came from, put in its extensions by the server for policies' conditions.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    pub ip: std::net::IpAddr,
    /// Over TLS.
    pub secure: bool,
}

/// The policy s3s asks before each operation.
pub struct KeyAccess {
    pub keys: Arc<Keys>,
    pub policies: Arc<Policies>,
}

fn denied(who: Option<&str>, what: &str) -> s3s::S3Error {
    match who {
        Some(ak) => s3_error!(AccessDenied, "access key {ak} may not {what}"),
        None => s3_error!(AccessDenied, "an anonymous request may not {what}: no bucket policy allows it"),
    }
}

/// Operations on a bucket's policy itself: a bootstrap key is never locked out of them.
const POLICY_OPS: [&str; 3] = ["GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"];

/// A request as a policy sees it, from its parts.
fn policy_request(
    ak: Option<&str>,
    op: &str,
    path: &S3Path,
    uri: &http::Uri,
    headers: &http::HeaderMap,
    origin: Option<Origin>,
) -> PolicyRequest {
    let resource = match path {
        S3Path::Root => "arn:aws:s3:::".to_string(),
        S3Path::Bucket { bucket } => format!("arn:aws:s3:::{bucket}"),
        S3Path::Object { bucket, key } => format!("arn:aws:s3:::{bucket}/{key}"),
    };
    let query = |name: &str| {
        uri.query()?.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == name).then(|| percent_encoding::percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned())
        })
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    PolicyRequest {
        principal: ak.map(str::to_string),
        action: crate::bucket_policy::action_of(op),
        resource,
        source_ip: origin.map(|o| o.ip),
        secure: origin.is_some_and(|o| o.secure),
        prefix: query("prefix"),
        delimiter: query("delimiter"),
        referer: header("referer"),
        user_agent: header("user-agent"),
    }
}

impl KeyAccess {
    pub fn new(keys: Arc<Keys>, policies: Arc<Policies>) -> Self {
        KeyAccess { keys, policies }
    }

    /// Whether `r` on `bucket` is allowed: by the key's permission `want`, or its policy,
    /// or (where its Object Ownership takes them) its or the object's canned ACL.
    async fn decide(&self, bucket: &str, r: &PolicyRequest, want: Permission, op: &str) -> S3Result<()> {
        let access = self.policies.of(bucket).await.map_err(crate::errors::from_cluster)?;
        let mut decision = access.policy.as_ref().map_or(Decision::Neither, |p| p.decide(r));
        if decision == Decision::Neither && self.acl_allows(&access, bucket, r).await? {
            decision = Decision::Allow;
        }
        let ak = r.principal.as_deref();
        let principal = match ak {
            Some(ak) => self.keys.principal(ak).await?,
            None => None,
        };
        let what = format!("{op} in bucket '{bucket}'");
        match (principal, decision) {
            (Some(Principal::Bootstrap), _) if POLICY_OPS.contains(&op) => Ok(()),
            (_, Decision::Deny) => Err(s3_error!(AccessDenied, "the policy of bucket '{bucket}' denies {op} to this request")),
            (Some(Principal::Bootstrap), _) => Ok(()),
            (Some(Principal::Scoped(k)), d) => match k.permission(bucket) {
                Some(p) if p >= want => Ok(()),
                _ if d == Decision::Allow => Ok(()),
                _ => Err(denied(ak, &format!("{what} (it needs {} permission there)", want.as_str()))),
            },
            (None, Decision::Allow) if ak.is_none() => Ok(()),
            (None, _) => Err(denied(ak, &what)),
        }
    }

    /// Whether a canned ACL lets `r` through: the bucket's for listing and writing into it,
    /// the object's for reading it (S3's split).
    async fn acl_allows(&self, access: &crate::bucket_policy::BucketAccess, bucket: &str, r: &PolicyRequest) -> S3Result<bool> {
        let Some(bucket_acl) = access.acl else { return Ok(false) };
        let signed = r.principal.is_some();
        Ok(match r.action.as_str() {
            "s3:ListBucket" | "s3:ListBucketVersions" => bucket_acl.reads(signed),
            "s3:PutObject" | "s3:DeleteObject" => bucket_acl.writes(),
            "s3:GetObject" => {
                let key = r.resource.strip_prefix(&format!("arn:aws:s3:::{bucket}/")).unwrap_or_default();
                self.policies.object_acl(bucket, key).await.map_err(crate::errors::from_cluster)?.reads(signed)
            }
            _ => false,
        })
    }

    /// A copy reads its source: read permission or the policy's GetObject where it comes from.
    async fn source(&self, ak: Option<&str>, source: &CopySource, origin: Option<Origin>, headers: &http::HeaderMap) -> S3Result<()> {
        let CopySource::Bucket { bucket, key, .. } = source else { return Ok(()) };
        let path = S3Path::Object { bucket: bucket.clone(), key: key.clone() };
        let r = policy_request(ak, "GetObject", &path, &http::Uri::from_static("/"), headers, origin);
        self.decide(bucket, &r, Permission::Read, "copy from").await
    }
}

#[async_trait::async_trait]
impl S3Access for KeyAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let origin = cx.extensions_mut().get::<Origin>().copied();
        if crate::sse::customer_key_in_clear(cx.headers(), origin) {
            return Err(s3_error!(
                InvalidRequest,
                "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection."
            ));
        }
        let ak = cx.credentials().map(|c| c.access_key.clone());
        let op = cx.s3_op().name();
        let bypass = cx
            .headers()
            .get("x-amz-bypass-governance-retention")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        match cx.s3_path() {
            S3Path::Root if ak.is_some() => Ok(()),
            S3Path::Root => Err(denied(None, "list buckets")),
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => {
                let bucket = bucket.to_string();
                if op == "CreateBucket" {
                    let Some(ak) = &ak else { return Err(denied(None, "create buckets")) };
                    return match self.keys.principal(ak).await? {
                        Some(Principal::Bootstrap) => Ok(()),
                        Some(Principal::Scoped(k)) if k.create_bucket => Ok(()),
                        _ => Err(denied(Some(ak), "create buckets")),
                    };
                }
                let r = policy_request(ak.as_deref(), op, cx.s3_path(), cx.uri(), cx.headers(), origin);
                self.decide(&bucket, &r, needed(op, bypass), op).await
            }
        }
    }

    async fn copy_object(&self, req: &mut S3Request<s3s::dto::CopyObjectInput>) -> S3Result<()> {
        let ak = req.credentials.as_ref().map(|c| c.access_key.clone());
        let origin = req.extensions.get::<Origin>().copied();
        self.source(ak.as_deref(), &req.input.copy_source, origin, &req.headers).await
    }

    async fn upload_part_copy(&self, req: &mut S3Request<s3s::dto::UploadPartCopyInput>) -> S3Result<()> {
        let ak = req.credentials.as_ref().map(|c| c.access_key.clone());
        let origin = req.extensions.get::<Origin>().copied();
        self.source(ak.as_deref(), &req.input.copy_source, origin, &req.headers).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_need_the_permission_their_effect_takes() {
        for (op, want) in [
            ("GetObject", Permission::Read),
            ("HeadObject", Permission::Read),
            ("ListObjectsV2", Permission::Read),
            ("ListObjectVersions", Permission::Read),
            ("GetBucketVersioning", Permission::Read),
            ("PutObject", Permission::Write),
            ("DeleteObject", Permission::Write),
            ("DeleteObjects", Permission::Write),
            ("CompleteMultipartUpload", Permission::Write),
            ("PutObjectTagging", Permission::Write),
            ("PutObjectRetention", Permission::Write),
            ("PutBucketVersioning", Permission::Owner),
            ("PutBucketLifecycleConfiguration", Permission::Owner),
            ("DeleteBucket", Permission::Owner),
            ("PutObjectLockConfiguration", Permission::Owner),
        ] {
            assert_eq!(needed(op, false), want, "{op}");
        }
        assert_eq!(needed("DeleteObject", true), Permission::Owner, "bypassing GOVERNANCE takes the owner");
    }
}
