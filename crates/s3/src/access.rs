//! Who may do what: the signature's key is looked up among the credentials file's keys
//! (which may do everything) and the cluster's scoped keys ([`crate::access_keys`]), and
//! each operation is allowed by the permission its key holds in the bucket it touches.
//!
//! Scoped keys are read through a cache of one second, so a revocation or a changed grant
//! takes effect on every gateway within a second. Anonymous requests are refused: no bucket
//! policy or ACL can open one yet.

use crate::access_keys::{Permission, ScopedKey};
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

/// The policy s3s asks before each operation.
pub struct KeyAccess(pub Arc<Keys>);

fn denied(ak: &str, what: &str) -> s3s::S3Error {
    s3_error!(AccessDenied, "access key {ak} may not {what}")
}

impl KeyAccess {
    async fn require(&self, ak: &str, bucket: &str, want: Permission, what: &str) -> S3Result<()> {
        match self.0.permission(ak, bucket).await? {
            Some(p) if p >= want => Ok(()),
            _ => Err(denied(ak, &format!("{what} in bucket '{bucket}' (it needs {} permission there)", want.as_str()))),
        }
    }

    /// A copy reads its source: the key must hold read where it comes from.
    async fn source(&self, ak: Option<&str>, source: &CopySource) -> S3Result<()> {
        let (Some(ak), CopySource::Bucket { bucket, .. }) = (ak, source) else { return Ok(()) };
        self.require(ak, bucket, Permission::Read, "copy from").await
    }
}

#[async_trait::async_trait]
impl S3Access for KeyAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let Some(creds) = cx.credentials() else {
            return Err(s3_error!(AccessDenied, "anonymous requests are not served: sign with an access key"));
        };
        let ak = creds.access_key.clone();
        let op = cx.s3_op().name();
        let bypass = cx
            .headers()
            .get("x-amz-bypass-governance-retention")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        match cx.s3_path() {
            S3Path::Root => Ok(()),
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => {
                let bucket = bucket.to_string();
                if op == "CreateBucket" {
                    return match self.0.principal(&ak).await? {
                        Some(Principal::Bootstrap) => Ok(()),
                        Some(Principal::Scoped(k)) if k.create_bucket => Ok(()),
                        _ => Err(denied(&ak, "create buckets")),
                    };
                }
                let want = needed(op, bypass);
                self.require(&ak, &bucket, want, op).await
            }
        }
    }

    async fn copy_object(&self, req: &mut S3Request<s3s::dto::CopyObjectInput>) -> S3Result<()> {
        let ak = req.credentials.as_ref().map(|c| c.access_key.clone());
        self.source(ak.as_deref(), &req.input.copy_source).await
    }

    async fn upload_part_copy(&self, req: &mut S3Request<s3s::dto::UploadPartCopyInput>) -> S3Result<()> {
        let ak = req.credentials.as_ref().map(|c| c.access_key.clone());
        self.source(ak.as_deref(), &req.input.copy_source).await
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
