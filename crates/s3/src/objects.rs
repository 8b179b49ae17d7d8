//! Objects: PUT streamed into the cluster through an MD5 (Content-MD5 checked before the
//! commit, so a bad digest leaves nothing), GET and HEAD with ranges and conditions, DELETE,
//! DeleteObjects and CopyObject (streamed from one object into another).

use crate::body::{object_body, HashedBody};
use crate::errors::{from_cluster, is_missing};
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::{now_ms, user_metadata, ObjectMeta};
use crate::settings::BucketSettings;
use kintsugi_client::ErrorKind;
use kintsugi_proto::{LayoutSpec, ObjectLayout};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The largest object a single PUT takes (S3's limit is 5 GiB; multipart beyond).
pub const MAX_PUT: u64 = 5 << 30;

impl Gateway {
    /// The committed version of `key` in `bucket` (NoSuchKey if none).
    pub async fn object(&self, bucket: &str, key: &str) -> S3Result<(ObjectLayout, ObjectMeta)> {
        match self.client.stat(&names::object(bucket, key)).await {
            Ok(l) if l.committed => {
                let m = ObjectMeta::from_attrs(&l.attrs);
                Ok((l, m))
            }
            Ok(_) => Err(s3_error!(NoSuchKey, "'{key}' is still being written")),
            Err(e) if is_missing(&e) => {
                // Tell a missing bucket from a missing key, as S3 does.
                self.bucket(bucket).await?;
                Err(s3_error!(NoSuchKey, "no key '{key}' in bucket '{bucket}'"))
            }
            Err(e) => Err(from_cluster(e)),
        }
    }

    /// Streams `size` bytes of `body` into object `name` with `settings`, hashing them;
    /// commits with `meta` (its ETag the body's MD5) only if the digest matches
    /// `content_md5` when given. Returns the ETag.
    #[allow(clippy::too_many_arguments)] // a put's parameters
    pub async fn put_stream(
        &self,
        name: &str,
        body: StreamingBlob,
        size: u64,
        settings: BucketSettings,
        content_md5: Option<&str>,
        mut meta: ObjectMeta,
        reserved: bool,
    ) -> S3Result<String> {
        let _memory = if reserved { None } else { Some(self.memory.reserve(put_memory(size, settings)?).await) };
        let hashed = HashedBody::new(size);
        let mut reader = hashed.reader(body);
        // An empty object is one record, whatever the bucket's layout.
        let layout = if size == 0 { LayoutSpec::Stripe } else { settings.layout };
        let mut digest_error = None;
        let mut attrs = || {
            if let Some(want) = content_md5 {
                let got = hashed.base64().map_err(kintsugi_client::Error::internal)?;
                if want != got {
                    digest_error = Some(format!("Content-MD5 {want} does not match the body's {got}"));
                    return Err(kintsugi_client::Error::bad_request("bad digest"));
                }
            }
            meta.etag = hashed.hex().map_err(kintsugi_client::Error::internal)?;
            meta.mtime_ms = now_ms();
            Ok(meta.to_attrs())
        };
        let r = self.client.put_with_attrs(name, &mut reader, size, settings.code, settings.chunk_size, layout, &|_| {}, &mut attrs).await;
        if let Some(e) = digest_error {
            return Err(s3_error!(BadDigest, "{e}"));
        }
        match r {
            Ok(l) => Ok(ObjectMeta::from_attrs(&l.attrs).etag),
            Err(e) if e.kind() == ErrorKind::Input => Err(s3_error!(IncompleteBody, "the body ended before its {size} bytes: {e}")),
            Err(e) => Err(from_cluster(e)),
        }
    }
}

/// The memory a put of `size` bytes into a bucket with `settings` holds (the coordinator's
/// 4 MiB chunks unless the bucket says).
pub fn put_memory(size: u64, settings: BucketSettings) -> S3Result<u64> {
    let c = settings.code.build().map_err(|e| s3_error!(InternalError, "{e}"))?;
    let chunk = if settings.chunk_size == 0 { 4 << 20 } else { settings.chunk_size };
    Ok(crate::memory_budget::put_bytes(size, c.k(), c.n(), chunk))
}

/// The body's length: S3 needs one (aws-chunked bodies give it decoded).
fn body_length(len: Option<i64>, max: u64) -> S3Result<u64> {
    let n = len.ok_or_else(|| s3_error!(MissingContentLength))?;
    let n = u64::try_from(n).map_err(|_| s3_error!(InvalidArgument, "negative Content-Length {n}"))?;
    if n > max {
        return Err(s3_error!(EntityTooLarge, "{n} bytes is over the {max} one request may carry"));
    }
    Ok(n)
}

/// Content-MD5 as sent, checked to be an MD5 in base64.
fn content_md5(v: Option<String>) -> S3Result<Option<String>> {
    use base64::Engine;
    match v {
        None => Ok(None),
        Some(m) => match base64::engine::general_purpose::STANDARD.decode(m.trim()) {
            Ok(b) if b.len() == 16 => Ok(Some(m.trim().to_string())),
            _ => Err(s3_error!(InvalidDigest, "Content-MD5 '{m}' is not a base64 MD5")),
        },
    }
}

pub async fn put(g: &Gateway, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
    let i = req.input;
    let settings = g.bucket(&i.bucket).await?;
    let (size, md5, body) = incoming(i.content_length, i.content_md5, i.body)?;
    let headers = crate::object_meta::stored_headers!(i);
    let meta = ObjectMeta { content_type: i.content_type, headers, user: user_metadata(i.metadata)?, ..Default::default() };
    let etag = g.put_stream(&names::object(&i.bucket, &i.key), body, size, settings, md5.as_deref(), meta, false).await?;
    Ok(S3Response::new(PutObjectOutput { e_tag: Some(ETag::Strong(etag)), ..Default::default() }))
}

/// A PUT's or an UploadPart's body: its length (at most [`MAX_PUT`]), its Content-MD5 if
/// given, and the body (empty when absent).
pub(crate) fn incoming(
    content_length: Option<i64>,
    md5: Option<String>,
    body: Option<StreamingBlob>,
) -> S3Result<(u64, Option<String>, StreamingBlob)> {
    let size = body_length(content_length, MAX_PUT)?;
    let md5 = content_md5(md5)?;
    let body = body.unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
    Ok((size, md5, body))
}

/// What the conditional headers decide.
fn check_conditions(
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
    if let Some(c) = if_none_match {
        if matches(c) {
            return Err(s3_error!(NotModified));
        }
    } else if let Some(t) = if_modified_since {
        if m.last_modified() <= *t {
            return Err(s3_error!(NotModified));
        }
    }
    Ok(())
}

/// The bytes a Range asks for of `size`: InvalidRange (416) past the end.
fn byte_range(range: Option<Range>, size: u64) -> S3Result<Option<std::ops::Range<u64>>> {
    match range {
        None => Ok(None),
        Some(r) => r.check(size).map(Some).map_err(|_| s3_error!(InvalidRange, "the range is not within the object's {size} bytes")),
    }
}

/// What a GET or a HEAD answers with: the object, its bytes [start, end), and the
/// Content-Range of a ranged request.
struct Selected {
    layout: ObjectLayout,
    meta: ObjectMeta,
    start: u64,
    end: u64,
    content_range: Option<String>,
}

/// The fields of a GET and a HEAD that choose what is answered.
trait ReadRequest {
    fn bucket(&self) -> &str;
    fn key(&self) -> &str;
    fn if_match(&self) -> Option<&IfMatch>;
    fn if_none_match(&self) -> Option<&IfNoneMatch>;
    fn if_modified_since(&self) -> Option<&Timestamp>;
    fn if_unmodified_since(&self) -> Option<&Timestamp>;
    fn range(&self) -> Option<Range>;
}

macro_rules! read_request {
    ($($t:ty),*) => {$(
        impl ReadRequest for $t {
            fn bucket(&self) -> &str { &self.bucket }
            fn key(&self) -> &str { &self.key }
            fn if_match(&self) -> Option<&IfMatch> { self.if_match.as_ref() }
            fn if_none_match(&self) -> Option<&IfNoneMatch> { self.if_none_match.as_ref() }
            fn if_modified_since(&self) -> Option<&Timestamp> { self.if_modified_since.as_ref() }
            fn if_unmodified_since(&self) -> Option<&Timestamp> { self.if_unmodified_since.as_ref() }
            fn range(&self) -> Option<Range> { self.range }
        }
    )*};
}
read_request!(GetObjectInput, HeadObjectInput);

/// The object a GET or a HEAD names, its conditions checked, and the bytes its Range asks for.
async fn select(g: &Gateway, i: &impl ReadRequest) -> S3Result<Selected> {
    let (layout, meta) = g.object(i.bucket(), i.key()).await?;
    check_conditions(&meta, i.if_match(), i.if_none_match(), i.if_modified_since(), i.if_unmodified_since())?;
    let range = byte_range(i.range(), layout.size)?;
    let (start, end) = range.as_ref().map_or((0, layout.size), |r| (r.start, r.end));
    let content_range = range.map(|r| format!("bytes {}-{}/{}", r.start, r.end - 1, layout.size));
    Ok(Selected { layout, meta, start, end, content_range })
}

/// The object's stored headers, with a GET's or HEAD's `response-*` overrides (as S3 lets a
/// signed request choose them, e.g. a download link's Content-Disposition).
macro_rules! answered_headers {
    ($m:expr, $i:expr) => {{
        let h = &$m.headers;
        (
            $i.response_content_type.clone().or_else(|| $m.content_type.clone()),
            $i.response_cache_control.clone().or_else(|| h.cache_control.clone()),
            $i.response_content_disposition.clone().or_else(|| h.content_disposition.clone()),
            $i.response_content_encoding.clone().or_else(|| h.content_encoding.clone()),
            $i.response_content_language.clone().or_else(|| h.content_language.clone()),
            $i.response_expires.clone().or_else(|| h.expires.clone()),
        )
    }};
}

pub async fn get(g: &Gateway, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
    let s = select(g, &req.input).await?;
    let m = s.meta;
    let (content_type, cache_control, content_disposition, content_encoding, content_language, expires) = answered_headers!(m, req.input);
    let body = object_body(g, s.layout, s.start, s.end, false).await.map_err(crate::errors::from_cluster)?;
    Ok(S3Response::new(GetObjectOutput {
        body: Some(StreamingBlob::wrap(body)),
        content_length: Some((s.end - s.start) as i64),
        content_range: s.content_range,
        accept_ranges: Some("bytes".into()),
        e_tag: Some(m.etag()),
        last_modified: Some(m.last_modified()),
        content_type,
        cache_control,
        content_disposition,
        content_encoding,
        content_language,
        expires,
        metadata: m.user_map(),
        ..Default::default()
    }))
}

pub async fn head(g: &Gateway, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
    let s = select(g, &req.input).await?;
    let m = s.meta;
    let (content_type, cache_control, content_disposition, content_encoding, content_language, expires) = answered_headers!(m, req.input);
    Ok(S3Response::new(HeadObjectOutput {
        content_length: Some((s.end - s.start) as i64),
        content_range: s.content_range,
        accept_ranges: Some("bytes".into()),
        e_tag: Some(m.etag()),
        last_modified: Some(m.last_modified()),
        content_type,
        cache_control,
        content_disposition,
        content_encoding,
        content_language,
        expires,
        metadata: m.user_map(),
        ..Default::default()
    }))
}

pub async fn delete(g: &Gateway, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
    let i = req.input;
    g.bucket(&i.bucket).await?;
    // Deleting a key that is not there succeeds, as in S3.
    g.client.delete(&names::object(&i.bucket, &i.key)).await.map_err(from_cluster)?;
    Ok(S3Response::new(DeleteObjectOutput::default()))
}

pub async fn delete_many(g: &Gateway, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
    let i = req.input;
    g.bucket(&i.bucket).await?;
    if i.delete.objects.len() > 1000 {
        return Err(s3_error!(MalformedXML, "at most 1000 keys a request"));
    }
    let quiet = i.delete.quiet.unwrap_or(false);
    let (mut deleted, mut errors) = (Vec::new(), Vec::new());
    for o in i.delete.objects {
        match g.client.delete(&names::object(&i.bucket, &o.key)).await {
            Ok(_) if quiet => {}
            Ok(_) => deleted.push(DeletedObject { key: Some(o.key), ..Default::default() }),
            Err(e) => {
                let s = from_cluster(e);
                errors.push(Error {
                    key: Some(o.key),
                    code: Some(s.code().as_str().to_string()),
                    message: s.message().map(str::to_string),
                    ..Default::default()
                })
            }
        }
    }
    Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
}

pub async fn copy(g: &Gateway, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
    let i = req.input;
    let CopySource::Bucket { bucket: src_bucket, key: src_key, .. } = &i.copy_source else {
        return Err(s3_error!(NotImplemented, "copies from access points"));
    };
    let settings = g.bucket(&i.bucket).await?;
    let (layout, src) = g.object(src_bucket, src_key).await?;
    check_conditions(
        &src,
        i.copy_source_if_match.as_ref(),
        i.copy_source_if_none_match.as_ref(),
        i.copy_source_if_modified_since.as_ref(),
        i.copy_source_if_unmodified_since.as_ref(),
    )
    .map_err(|e| if *e.code() == s3s::S3ErrorCode::NotModified { s3_error!(PreconditionFailed) } else { e })?;
    let replace = i.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
    let same = **src_bucket == *i.bucket && **src_key == *i.key;
    if same && !replace {
        return Err(s3_error!(InvalidRequest, "copying an object onto itself changes nothing: use the REPLACE metadata directive"));
    }
    let meta = if replace {
        let headers = crate::object_meta::stored_headers!(i);
        ObjectMeta { content_type: i.content_type, headers, user: user_metadata(i.metadata)?, ..Default::default() }
    } else {
        ObjectMeta { content_type: src.content_type.clone(), headers: src.headers.clone(), user: src.user.clone(), ..Default::default() }
    };
    let size = layout.size;
    let _memory = g.memory.reserve(crate::body::get_bytes(0, size) + put_memory(size, settings)?).await;
    let body = object_body(g, layout, 0, size, true).await.map_err(crate::errors::from_cluster)?;
    let etag = g.put_stream(&names::object(&i.bucket, &i.key), StreamingBlob::wrap(body), size, settings, None, meta, true).await?;
    let result = CopyObjectResult {
        e_tag: Some(ETag::Strong(etag)),
        last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
        ..Default::default()
    };
    Ok(S3Response::new(CopyObjectOutput { copy_object_result: Some(result), ..Default::default() }))
}
