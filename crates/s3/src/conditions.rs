//! Conditional requests. Reads (GET, HEAD, a copy's source): If-Match, If-None-Match,
//! If-Modified-Since and If-Unmodified-Since, in RFC 9110's order. Writes (PUT,
//! CompleteMultipartUpload, a bucket's creation): `If-None-Match: *` and `If-Match`, checked
//! once before the body is read and again, as a compare-and-swap on the object's version, in
//! the commit's own metadata transaction, so two writers never both win.

use crate::errors::{from_cluster, is_missing};
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::ObjectMeta;
use kintsugi_proto::Precondition;
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Result};

/// What the conditional headers of a read decide about `m`: Ok to answer it, or 412
/// PreconditionFailed, or 304 NotModified (which carries the ETag, as RFC 9110 asks).
pub fn check_read(
    m: &ObjectMeta,
    if_match: Option<&IfMatch>,
    if_none_match: Option<&IfNoneMatch>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let matches = |c: &ETagCondition| match c {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value() == m.etag,
    };
    // RFC 9110 section 13.2.2: If-Match, else If-Unmodified-Since; then If-None-Match,
    // else If-Modified-Since.
    if let Some(c) = if_match {
        if !matches(c) {
            return Err(s3_error!(PreconditionFailed, "the ETag is \"{}\"", m.etag));
        }
    } else if let Some(t) = if_unmodified_since {
        if m.last_modified() > *t {
            return Err(s3_error!(PreconditionFailed, "modified since"));
        }
    }
    let not_modified = match (if_none_match, if_modified_since) {
        (Some(c), _) => matches(c),
        (None, Some(t)) => m.last_modified() <= *t,
        (None, None) => false,
    };
    if not_modified {
        return Err(not_modified_error(m));
    }
    Ok(())
}

fn not_modified_error(m: &ObjectMeta) -> S3Error {
    let mut e = s3_error!(NotModified);
    let mut h = http::HeaderMap::new();
    if let Ok(v) = http::HeaderValue::from_str(&format!("\"{}\"", m.etag)) {
        h.insert(http::header::ETAG, v);
    }
    let mut date = Vec::new();
    if m.last_modified().format(TimestampFormat::HttpDate, &mut date).is_ok() {
        if let Ok(v) = http::HeaderValue::from_bytes(&date) {
            h.insert(http::header::LAST_MODIFIED, v);
        }
    }
    e.set_headers(h);
    e
}

/// What a write's `If-None-Match` and `If-Match` require of `key`, checked against the
/// object now (412 at once if it fails) and returned for the commit to check again.
pub async fn write_precondition(
    g: &Gateway,
    bucket: &str,
    key: &str,
    if_match: Option<&IfMatch>,
    if_none_match: Option<&IfNoneMatch>,
) -> S3Result<Option<Precondition>> {
    if if_match.is_none() && if_none_match.is_none() {
        return Ok(None);
    }
    if let Some(ETagCondition::ETag(_)) = if_none_match {
        return Err(s3_error!(NotImplemented, "If-None-Match on a write takes only '*'"));
    }
    let current = match g.client.stat(&names::object(bucket, key)).await {
        Ok(l) if l.committed => Some((l.version, ObjectMeta::from_attrs(&l.attrs))),
        Ok(_) => None,
        Err(e) if is_missing(&e) => None,
        Err(e) => return Err(from_cluster(e)),
    };
    if let Some(c) = if_match {
        let Some((version, m)) = &current else {
            return Err(s3_error!(NoSuchKey, "If-Match: there is no '{key}' to match"));
        };
        if let ETagCondition::ETag(e) = c {
            if e.value() != m.etag {
                return Err(s3_error!(PreconditionFailed, "If-Match: the ETag of '{key}' is \"{}\"", m.etag));
            }
        }
        if if_none_match.is_some() {
            return Err(s3_error!(PreconditionFailed, "If-None-Match: '{key}' exists"));
        }
        return Ok(Some(Precondition::Version(*version)));
    }
    if current.is_some() {
        return Err(s3_error!(PreconditionFailed, "If-None-Match: '{key}' exists"));
    }
    Ok(Some(Precondition::Absent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_304_carries_the_etag() {
        let m = ObjectMeta { etag: "abc".into(), mtime_ms: 1_700_000_000_000, ..Default::default() };
        let e = check_read(&m, None, Some(&ETagCondition::Any), None, None).unwrap_err();
        assert_eq!(*e.code(), s3s::S3ErrorCode::NotModified);
        assert_eq!(e.headers().unwrap().get("etag").unwrap(), "\"abc\"");
        assert!(e.headers().unwrap().get("last-modified").is_some());
        let other = ETagCondition::ETag(ETag::Strong("zzz".into()));
        assert_eq!(*check_read(&m, Some(&other), None, None, None).unwrap_err().code(), s3s::S3ErrorCode::PreconditionFailed);
        assert!(check_read(&m, None, Some(&other), None, None).is_ok());
    }
}
