//! Tags: an object's (PutObjectTagging, GetObjectTagging, DeleteObjectTagging, and
//! `x-amz-tagging` on PUT, copy and multipart uploads) and a bucket's. They live in the
//! attributes of the object or of the bucket's record, replaced in one metadata transaction
//! that requires the version read (so a tagging never lands on an object replaced meanwhile),
//! without touching a byte of data. S3's limits hold: 10 tags an object (50 a bucket), keys
//! of 1 to 128 characters, values of up to 256, no key twice.

use crate::gateway::Gateway;
use crate::names;
use kintsugi_proto::Attrs;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use std::collections::BTreeMap;

/// Tags by key.
pub type Tags = BTreeMap<String, String>;

/// The attribute prefix of an object's or a bucket's tags.
const TAG: &str = "s3.tag.";
/// S3's limits.
pub const MAX_OBJECT_TAGS: usize = 10;
pub const MAX_BUCKET_TAGS: usize = 50;
const MAX_KEY: usize = 128;
const MAX_VALUE: usize = 256;

/// The tags among attributes.
pub fn of_attrs(a: &Attrs) -> Tags {
    a.iter().filter_map(|(k, v)| Some((k.strip_prefix(TAG)?.to_string(), v.clone()))).collect()
}

/// `a` with its tags replaced by `tags`.
pub fn with_tags(mut a: Attrs, tags: &Tags) -> Attrs {
    a.retain(|k, _| !k.starts_with(TAG));
    a.extend(tags.iter().map(|(k, v)| (format!("{TAG}{k}"), v.clone())));
    a
}

/// Tags checked against S3's limits (InvalidTag otherwise).
fn checked(pairs: Vec<(String, String)>, max: usize) -> S3Result<Tags> {
    if pairs.len() > max {
        return Err(s3_error!(InvalidTag, "Object tags cannot be greater than {max}"));
    }
    let mut tags = Tags::new();
    for (k, v) in pairs {
        if k.is_empty() || k.chars().count() > MAX_KEY {
            return Err(s3_error!(InvalidTag, "The TagKey you have provided is invalid: 1 to {MAX_KEY} characters"));
        }
        if v.chars().count() > MAX_VALUE {
            return Err(s3_error!(InvalidTag, "The TagValue you have provided is invalid: up to {MAX_VALUE} characters"));
        }
        if tags.insert(k.clone(), v).is_some() {
            return Err(s3_error!(InvalidTag, "Cannot provide multiple Tags with the same key: '{k}'"));
        }
    }
    Ok(tags)
}

/// The tags of a Tagging document.
fn of_document(t: Tagging, max: usize) -> S3Result<Tags> {
    checked(t.tag_set.into_iter().map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default())).collect(), max)
}

/// The tags of an `x-amz-tagging` header (URL query form: `k1=v1&k2=v2`).
pub fn of_header(h: Option<&str>) -> S3Result<Tags> {
    let Some(h) = h.filter(|h| !h.is_empty()) else { return Ok(Tags::new()) };
    let decode = |s: &str| percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8().map(|c| c.into_owned());
    let mut pairs = Vec::new();
    for kv in h.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let (k, v) = (decode(k), decode(v));
        let (Ok(k), Ok(v)) = (k, v) else {
            return Err(s3_error!(InvalidArgument, "x-amz-tagging is not URL-encoded UTF-8"));
        };
        pairs.push((k, v));
    }
    checked(pairs, MAX_OBJECT_TAGS)
}

/// A TagSet as S3 answers it.
fn tag_set(tags: &Tags) -> TagSet {
    tags.iter().map(|(k, v)| Tag { key: Some(k.clone()), value: Some(v.clone()) }).collect()
}

/// Replaces the tags of cluster object `name`; `missing` is the error for an object that
/// is not there.
async fn retag(g: &Gateway, name: &str, tags: &Tags, missing: impl Fn() -> s3s::S3Error + Sync) -> S3Result<()> {
    g.update_attrs(name, &|a| with_tags(a, tags), &missing).await
}

/// Replaces the tags of version `version_id` of `key` (its latest when None); answers the
/// version id tagged.
async fn retag_version(g: &Gateway, bucket: &str, key: &str, version_id: Option<&str>, tags: &Tags) -> S3Result<Option<String>> {
    let (l, _) = g.object_at(bucket, key, version_id).await?;
    let name = names::object(bucket, key);
    match g.client.set_attrs(&name, l.version, with_tags(l.attrs.clone(), tags)).await {
        Ok(()) => Ok(g.read_id(bucket, &l).await),
        // The latest was replaced meanwhile: tag what is latest now, as S3 would have.
        Err(e) if e.kind() == kintsugi_client::ErrorKind::PreconditionFailed && version_id.is_none() => {
            retag(g, &name, tags, || s3_error!(NoSuchKey, "no key '{key}'")).await?;
            Ok(None)
        }
        Err(e) if crate::errors::is_missing(&e) => Err(s3_error!(NoSuchVersion, "the version of '{key}' was deleted meanwhile")),
        Err(e) => Err(crate::errors::from_cluster(e)),
    }
}

pub async fn put_object(g: &Gateway, req: S3Request<PutObjectTaggingInput>) -> S3Result<S3Response<PutObjectTaggingOutput>> {
    let i = req.input;
    let tags = of_document(i.tagging, MAX_OBJECT_TAGS)?;
    let version_id = retag_version(g, &i.bucket, &i.key, i.version_id.as_deref(), &tags).await?;
    Ok(S3Response::new(PutObjectTaggingOutput { version_id }))
}

pub async fn get_object(g: &Gateway, req: S3Request<GetObjectTaggingInput>) -> S3Result<S3Response<GetObjectTaggingOutput>> {
    let i = req.input;
    let (l, _) = g.object_at(&i.bucket, &i.key, i.version_id.as_deref()).await?;
    let version_id = g.read_id(&i.bucket, &l).await;
    Ok(S3Response::new(GetObjectTaggingOutput { tag_set: tag_set(&of_attrs(&l.attrs)), version_id }))
}

pub async fn delete_object(g: &Gateway, req: S3Request<DeleteObjectTaggingInput>) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
    let i = req.input;
    let version_id = retag_version(g, &i.bucket, &i.key, i.version_id.as_deref(), &Tags::new()).await?;
    Ok(S3Response::new(DeleteObjectTaggingOutput { version_id }))
}

pub async fn put_bucket(g: &Gateway, req: S3Request<PutBucketTaggingInput>) -> S3Result<S3Response<PutBucketTaggingOutput>> {
    let i = req.input;
    let tags = of_document(i.tagging, MAX_BUCKET_TAGS)?;
    let b = i.bucket.clone();
    retag(g, &names::bucket_record(&i.bucket), &tags, || s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    Ok(S3Response::new(PutBucketTaggingOutput::default()))
}

pub async fn get_bucket(g: &Gateway, req: S3Request<GetBucketTaggingInput>) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    let tags = of_attrs(&g.bucket_attrs(&req.input.bucket).await?);
    if tags.is_empty() {
        return Err(s3_error!(NoSuchTagSet, "The TagSet does not exist"));
    }
    Ok(S3Response::new(GetBucketTaggingOutput { tag_set: tag_set(&tags) }))
}

pub async fn delete_bucket(g: &Gateway, req: S3Request<DeleteBucketTaggingInput>) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
    let b = req.input.bucket;
    retag(g, &names::bucket_record(&b), &Tags::new(), || s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_come_from_a_header_within_s3s_limits_and_round_trip_through_attributes() {
        let t = of_header(Some("project=blue%20sky&owner=a%2Bb&empty=")).unwrap();
        assert_eq!(t, Tags::from([("project".into(), "blue sky".into()), ("owner".into(), "a+b".into()), ("empty".into(), String::new())]));
        let mut a = Attrs::new();
        a.insert("s3.etag".into(), "x".into());
        a.insert("s3.tag.old".into(), "gone".into());
        let a = with_tags(a, &t);
        assert_eq!(of_attrs(&a), t);
        assert_eq!(a.get("s3.etag").unwrap(), "x", "other attributes stay");
        let eleven: String = (0..11).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join("&");
        assert_eq!(of_header(Some(&eleven)).unwrap_err().code().as_str(), "InvalidTag");
        assert!(of_header(Some("a=1&a=2")).is_err(), "a key twice");
        assert!(of_header(Some(&format!("{}=v", "k".repeat(129)))).is_err());
        assert!(of_header(Some(&format!("k={}", "v".repeat(257)))).is_err());
        assert_eq!(of_header(None).unwrap(), Tags::new());
    }
}
