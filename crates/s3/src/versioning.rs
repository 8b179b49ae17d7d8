//! Versioning: PutBucketVersioning and GetBucketVersioning, version ids on reads, and the
//! S3 answers for delete markers. A bucket's state lives in its record; every write and
//! delete tells the cluster what to keep ([`Versioning`]), and the cluster keeps the
//! versions and delete markers (`kintsugi_coord::metadata::versions`). A version id is the cluster's
//! version number in 16 hex digits, or "null" for the version written without versioning.

use crate::errors::{from_cluster, is_missing};
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::ObjectMeta;
use kintsugi_proto::{Attrs, LayoutSpec, ObjectLayout, VersionRef, Versioning};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bucket record's attribute holding its versioning state (absent: never versioned).
pub const STATE_ATTR: &str = "s3.versioning";

/// A bucket's versioning state, from its record.
pub fn state(attrs: &Attrs) -> Versioning {
    match attrs.get(STATE_ATTR).map(String::as_str) {
        Some("Enabled") => Versioning::Enabled,
        Some("Suspended") => Versioning::Suspended,
        _ => Versioning::Unversioned,
    }
}

/// A request's version id: InvalidArgument if it is none this store gives out (so that it
/// never reads as another version).
pub fn parse_id(id: Option<&str>) -> S3Result<Option<VersionRef>> {
    match id {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|e| s3_error!(InvalidArgument, "Invalid version id specified: {e}")),
    }
}

/// The id a written version is answered with: none in a bucket never versioned.
pub fn written_id(bucket: Versioning, version: VersionRef) -> Option<String> {
    (!bucket.is_unversioned()).then(|| version.to_string())
}

/// How long a gateway answers from a bucket's versioning state as it read it (a change made
/// through another gateway shows in a read's `x-amz-version-id: null` within this).
pub const STATE_TTL: Duration = Duration::from_secs(2);

/// Buckets' versioning states as last read.
#[derive(Clone, Default)]
pub struct StateCache(Arc<Mutex<HashMap<String, (Instant, Versioning)>>>);

impl StateCache {
    fn forget(&self, bucket: &str) {
        self.0.lock().expect("versioning cache").remove(bucket);
    }
}

/// The error for a read that met a delete marker: NoSuchKey (404) for the latest, or
/// MethodNotAllowed (405) for a marker asked for by its id, with `x-amz-delete-marker` and
/// the marker's version id, as S3 answers.
fn marker_error(l: &ObjectLayout, by_id: bool, key: &str) -> s3s::S3Error {
    let mut e = if by_id {
        let mut e =
            s3s::S3Error::with_message(s3s::S3ErrorCode::MethodNotAllowed, "The specified method is not allowed against this resource.");
        e.set_status_code(http::StatusCode::METHOD_NOT_ALLOWED);
        e
    } else {
        s3_error!(NoSuchKey, "'{key}' is deleted (its latest version is a delete marker)")
    };
    let mut h = http::HeaderMap::new();
    h.insert("x-amz-delete-marker", http::HeaderValue::from_static("true"));
    let id = if l.versioned { VersionRef::Id(l.version) } else { VersionRef::Null };
    if let Ok(v) = http::HeaderValue::from_str(&id.to_string()) {
        h.insert("x-amz-version-id", v);
    }
    e.set_headers(h);
    e
}

impl Gateway {
    /// The version id a read of `l` in `bucket` answers with, as S3 does: the version's own
    /// id; "null" for the null version in a bucket whose versioning was ever set; none in a
    /// bucket never versioned.
    pub async fn read_id(&self, bucket: &str, l: &ObjectLayout) -> Option<String> {
        if l.versioned {
            return Some(VersionRef::Id(l.version).to_string());
        }
        (!self.versioning_of(bucket).await.is_unversioned()).then(|| VersionRef::Null.to_string())
    }

    /// `bucket`'s versioning state, read at most every [`STATE_TTL`].
    async fn versioning_of(&self, bucket: &str) -> Versioning {
        if let Some((at, v)) = self.versioning_states.0.lock().expect("versioning cache").get(bucket) {
            if at.elapsed() < STATE_TTL {
                return *v;
            }
        }
        let v = self.client.stat(&names::bucket_record(bucket)).await.map_or(Versioning::Unversioned, |l| state(&l.attrs));
        let mut c = self.versioning_states.0.lock().expect("versioning cache");
        if c.len() > 10_000 {
            c.clear();
        }
        c.insert(bucket.to_string(), (Instant::now(), v));
        v
    }

    /// Version `version_id` of `key` in `bucket` (its latest when None): NoSuchKey if there
    /// is none or its latest is a delete marker, NoSuchVersion if no such version,
    /// MethodNotAllowed if the version is a delete marker.
    pub async fn object_at(&self, bucket: &str, key: &str, version_id: Option<&str>) -> S3Result<(ObjectLayout, ObjectMeta)> {
        let want = parse_id(version_id)?;
        match self.client.stat_version(&names::object(bucket, key), want).await {
            Ok(l) if l.delete_marker => Err(marker_error(&l, want.is_some(), key)),
            Ok(l) if l.committed => {
                let m = ObjectMeta::from_attrs(&l.attrs);
                Ok((l, m))
            }
            Ok(_) => Err(s3_error!(NoSuchKey, "'{key}' is still being written")),
            Err(e) if is_missing(&e) => {
                // Tell a missing bucket from a missing key, as S3 does.
                self.bucket(bucket).await?;
                match want {
                    Some(v) => Err(s3_error!(NoSuchVersion, "no version {v} of '{key}' in bucket '{bucket}'")),
                    None => Err(s3_error!(NoSuchKey, "no key '{key}' in bucket '{bucket}'")),
                }
            }
            Err(e) => Err(from_cluster(e)),
        }
    }
}

pub async fn put(g: &Gateway, req: S3Request<PutBucketVersioningInput>) -> S3Result<S3Response<PutBucketVersioningOutput>> {
    let i = req.input;
    let c = i.versioning_configuration;
    if c.mfa_delete.as_ref().is_some_and(|m| m.as_str() == MFADelete::ENABLED) || i.mfa.is_some() {
        return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
    }
    let status = match c.status.as_ref().map(|s| s.as_str()) {
        Some(BucketVersioningStatus::ENABLED) => "Enabled",
        Some(BucketVersioningStatus::SUSPENDED) => "Suspended",
        Some(other) => return Err(s3_error!(MalformedXML, "versioning status '{other}': Enabled or Suspended")),
        None => return Err(s3_error!(MalformedXML, "a versioning configuration needs a Status")),
    };
    let (settings, attrs) = g.bucket_and_attrs(&i.bucket).await?;
    if status == "Suspended" && crate::object_lock::enabled(&attrs) {
        return Err(s3_error!(
            InvalidBucketState,
            "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed."
        ));
    }
    if !matches!(settings.layout, LayoutSpec::Stripe | LayoutSpec::StripeMax) {
        return Err(s3_error!(
            NotImplemented,
            "bucket '{}' keeps its objects in the {} layout, whose versions are not kept: versioning needs a stripe layout",
            i.bucket,
            crate::settings::layout_name(settings.layout)
        ));
    }
    let b = i.bucket.clone();
    let set = |mut a: Attrs| {
        a.insert(STATE_ATTR.into(), status.into());
        a
    };
    g.update_attrs(&names::bucket_record(&i.bucket), &set, &|| s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    g.versioning_states.forget(&i.bucket);
    tracing::info!("bucket '{}': versioning {status}", i.bucket);
    Ok(S3Response::new(PutBucketVersioningOutput::default()))
}

pub async fn get(g: &Gateway, req: S3Request<GetBucketVersioningInput>) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    let status = match g.bucket(&req.input.bucket).await?.versioning {
        Versioning::Unversioned => None,
        Versioning::Enabled => Some(BucketVersioningStatus::from_static(BucketVersioningStatus::ENABLED)),
        Versioning::Suspended => Some(BucketVersioningStatus::from_static(BucketVersioningStatus::SUSPENDED)),
    };
    Ok(S3Response::new(GetBucketVersioningOutput { status, mfa_delete: None }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_are_checked_and_states_read_from_the_record() {
        assert_eq!(parse_id(None).unwrap(), None);
        assert_eq!(parse_id(Some("null")).unwrap(), Some(VersionRef::Null));
        assert_eq!(parse_id(Some("000000000000002a")).unwrap(), Some(VersionRef::Id(42)));
        assert!(parse_id(Some("42")).is_err() && parse_id(Some("../x")).is_err());
        let mut a = Attrs::new();
        assert_eq!(state(&a), Versioning::Unversioned);
        a.insert(STATE_ATTR.into(), "Enabled".into());
        assert_eq!(state(&a), Versioning::Enabled);
        a.insert(STATE_ATTR.into(), "Suspended".into());
        assert_eq!(state(&a), Versioning::Suspended);
        assert_eq!(written_id(Versioning::Unversioned, VersionRef::Null), None);
        assert_eq!(written_id(Versioning::Suspended, VersionRef::Null).as_deref(), Some("null"));
    }
}
