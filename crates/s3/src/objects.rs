//! Objects: PUT streamed into the cluster through an MD5 (Content-MD5 checked before the
//! commit, so a bad digest leaves nothing), GET and HEAD with ranges and conditions, DELETE,
//! DeleteObjects and CopyObject (streamed from one object into another).

use crate::body::HashedBody;
use crate::checksums::{self, Stored, Wanted};
use crate::conditions::{check_read, write_precondition};
use crate::errors::from_cluster;
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::{now_ms, user_metadata, ObjectMeta};
use crate::settings::BucketSettings;
use crate::sse;
use crate::versioning::{parse_id, written_id};
use kintsugi_client::{CommitTerms, ErrorKind};
use kintsugi_proto::{LayoutSpec, ObjectLayout, Precondition, VersionRef, Versioning};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// Whether a write's input sends any `x-amz-grant-*` (same field names in each).
macro_rules! grants {
    ($i:expr) => {
        $i.grant_full_control.is_some() || $i.grant_read.is_some() || $i.grant_read_acp.is_some() || $i.grant_write_acp.is_some()
    };
}
pub(crate) use grants;

/// The largest object a single PUT takes (S3's limit is 5 GiB; multipart beyond).
pub const MAX_PUT: u64 = 5 << 30;

impl Gateway {
    /// The committed version of `key` in `bucket` (NoSuchKey if none).
    pub async fn object(&self, bucket: &str, key: &str) -> S3Result<(ObjectLayout, ObjectMeta)> {
        self.object_at(bucket, key, None).await
    }

    /// Streams `size` bytes of `body` into object `name` with `settings`, hashing them;
    /// commits with `terms.meta` (its ETag the body's MD5, its checksum the one asked for)
    /// only if the body matches the Content-MD5 and checksum sent and the object meets the
    /// precondition.
    pub async fn put_stream(
        &self,
        name: &str,
        body: StreamingBlob,
        size: u64,
        settings: BucketSettings,
        terms: PutTerms,
        reserved: bool,
    ) -> S3Result<Written> {
        // Memory is charged as the body arrives (none here when the caller holds it).
        let need = if reserved { 0 } else { put_memory(size, settings)? };
        let PutTerms { mut meta, content_md5, checksum, trailers, precondition, encryption, part } = terms;
        let hashed = HashedBody::new(size, checksum.as_ref().map(|c| c.algorithm));
        let mut reader = crate::memory_budget::Charged::new(hashed.reader(body), self.memory.clone(), need);
        let starved = reader.starved.clone();
        if size == 0 {
            // Nothing for the put to read: read the body's end (and its trailer) here.
            let _ = tokio::io::AsyncReadExt::read(&mut reader, &mut [0u8; 1]).await;
        }
        // Encrypted, the cluster's object holds the plaintext's packages.
        let (mut reader, stored): (Box<dyn tokio::io::AsyncRead + Unpin + Send>, u64) = match &encryption {
            Some(e) => {
                (Box::new(crate::sse::packages::Encrypting::new(reader, &e.key, e.part, size)), crate::sse::packages::stored_len(size))
            }
            None => (Box::new(reader), size),
        };
        meta.sse = encryption.as_ref().map(|e| crate::sse::Sealed { size, ..e.sealed.clone() });
        // An SSE-C object's ETag is not its plaintext's MD5, which would let anyone who may
        // list the bucket test a guess of its bytes (S3's is not either).
        let etag_key = encryption.as_ref().filter(|e| e.customer_md5.is_some()).map(|e| e.key.clone());
        // An empty object is one record, whatever the bucket's layout.
        let layout = if size == 0 { LayoutSpec::Stripe } else { settings.layout };
        let mut refused: Option<s3s::S3Error> = None;
        let mut commit_terms = || {
            let refuse = |e: s3s::S3Error, refused: &mut Option<s3s::S3Error>| {
                *refused = Some(e);
                Err(kintsugi_client::Error::bad_request("the body does not match its digest"))
            };
            if let Some(want) = &content_md5 {
                let got = hashed.base64().map_err(kintsugi_client::Error::internal)?;
                if *want != got {
                    return refuse(s3_error!(BadDigest, "Content-MD5 {want} does not match the body's {got}"), &mut refused);
                }
            }
            if let Some(w) = &checksum {
                let got = hashed.checksum().map_err(kintsugi_client::Error::internal)?.unwrap_or_default();
                let checked = checksums::expected(w, trailers.as_ref()).and_then(|e| checksums::verify(w.algorithm, e.as_deref(), &got));
                if let Err(e) = checked {
                    return refuse(e, &mut refused);
                }
                meta.checksum = Some(Stored { algorithm: w.algorithm, value: got, composite: false });
            }
            meta.etag = hashed.hex().map_err(kintsugi_client::Error::internal)?;
            if let Some(k) = &etag_key {
                use md5::Digest;
                meta.etag = hex::encode(md5::Md5::new().chain_update(k.0).chain_update(meta.etag.as_bytes()).finalize());
            }
            meta.mtime_ms = now_ms();
            Ok(CommitTerms { attrs: meta.to_attrs(), precondition, versioning: settings.versioning, striped: part })
        };
        let r = self
            .client
            .put_with_attrs(name, &mut reader, stored, settings.code, settings.chunk_size, layout, &|_| {}, &mut commit_terms)
            .await;
        if let Some(e) = refused {
            return Err(e);
        }
        match r {
            Ok(l) => {
                let m = ObjectMeta::from_attrs(&l.attrs);
                let id = if l.versioned { VersionRef::Id(l.version) } else { VersionRef::Null };
                Ok(Written { etag: m.etag, checksum: m.checksum, version_id: written_id(settings.versioning, id) })
            }
            Err(_) if starved.load(std::sync::atomic::Ordering::Relaxed) => {
                Err(s3_error!(SlowDown, "the gateway's memory for bodies stayed taken; try again"))
            }
            Err(e) if e.kind() == ErrorKind::Input => Err(s3_error!(IncompleteBody, "the body is not its {size} bytes: {e}")),
            Err(e) => Err(from_cluster(e)),
        }
    }
}

/// What a put writes besides its bytes, and what it checks before committing them.
#[derive(Default)]
pub struct PutTerms {
    pub meta: ObjectMeta,
    /// Content-MD5 as sent (base64).
    pub content_md5: Option<String>,
    /// The additional checksum asked for.
    pub checksum: Option<Wanted>,
    /// Where an aws-chunked body's trailer (with the checksum) arrives.
    pub trailers: Option<s3s::TrailingHeaders>,
    /// What the object must be at the commit (a conditional write).
    pub precondition: Option<Precondition>,
    /// Encrypt its bytes with this.
    pub encryption: Option<crate::sse::Encryption>,
    /// A multipart upload's part: stored in stripes whatever its size, to be composed.
    pub part: bool,
}

/// What a put committed: its ETag, additional checksum and version id (in a bucket with
/// versioning).
pub struct Written {
    pub etag: String,
    pub checksum: Option<Stored>,
    pub version_id: Option<String>,
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
    let (settings, bucket_attrs) = g.bucket_and_attrs(&i.bucket).await?;
    let lock = crate::object_lock::write_lock!(&bucket_attrs, i)?;
    let given = checksums::checksum_of!(i);
    let checksum = checksums::wanted(&given, i.checksum_algorithm.as_ref(), &req.headers)?;
    let precondition = write_precondition(g, &i.bucket, &i.key, i.if_match.as_ref(), i.if_none_match.as_ref()).await?;
    let (size, content_md5, body) = incoming(i.content_length, &req.headers, i.content_md5, i.body)?;
    let headers = crate::object_meta::stored_headers!(i);
    let tags = crate::tagging::of_header(i.tagging.as_deref())?;
    let customer = crate::sse::customer_key_of!(i)?;
    let asked = sse::asked(i.server_side_encryption.as_ref(), customer)?;
    let encryption = g.encryption(&asked, sse::bucket_default::encrypts(&bucket_attrs))?;
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        encryption.as_ref().map(sse::Encryption::answer).unwrap_or_default();
    let acl = crate::acl::for_write(&bucket_attrs, i.acl.as_ref().map(|a| a.as_str()), grants!(i))?;
    let meta =
        ObjectMeta { content_type: i.content_type, headers, user: user_metadata(i.metadata)?, tags, lock, acl, ..Default::default() };
    let terms = PutTerms { meta, content_md5, checksum, trailers: req.trailing_headers, precondition, encryption, part: false };
    let w = g.put_stream(&names::object(&i.bucket, &i.key), body, size, settings, terms, false).await?;
    let (c, t) = w.checksum.as_ref().map(Stored::answer).unzip();
    let c = c.unwrap_or_default();
    Ok(S3Response::new(crate::checksums::with_checksum!(
        c,
        PutObjectOutput {
            e_tag: Some(ETag::Strong(w.etag)),
            checksum_type: t,
            version_id: w.version_id,
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        }
    )))
}

/// A PUT's or an UploadPart's body: its length (at most [`MAX_PUT`]), its Content-MD5 if
/// given, and the body (empty when absent).
pub(crate) fn incoming(
    content_length: Option<i64>,
    headers: &http::HeaderMap,
    md5: Option<String>,
    body: Option<StreamingBlob>,
) -> S3Result<(u64, Option<String>, StreamingBlob)> {
    // An aws-chunked body sent with Transfer-Encoding: chunked (boto3 over HTTPS, with its
    // trailing checksum) has no Content-Length: its decoded length is the object's.
    let decoded = || {
        let v = headers.get("x-amz-decoded-content-length")?;
        v.to_str().ok()?.trim().parse::<i64>().ok()
    };
    let size = body_length(content_length.or_else(decoded), MAX_PUT)?;
    let md5 = content_md5(md5)?;
    let body = body.unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
    Ok((size, md5, body))
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
    /// A multipart object's number of parts, when read by part number.
    parts_count: Option<i32>,
    /// The checksum to answer with: asked for (`x-amz-checksum-mode`), and of what is sent.
    checksum: Option<Stored>,
    /// The data key of an encrypted object, and the SSE-C key it was opened with.
    key: Option<sse::DataKey>,
    customer: Option<sse::CustomerKey>,
}

impl Selected {
    /// The checksum fields and type of the answer.
    fn checksum(&self) -> (Checksum, Option<ChecksumType>) {
        let (c, t) = self.checksum.as_ref().map(Stored::answer).unzip();
        (c.unwrap_or_default(), t)
    }
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
    fn part_number(&self) -> Option<i32>;
    fn checksum_mode(&self) -> bool;
    fn version_id(&self) -> Option<&str>;
    /// The SSE-C key sent with it.
    fn customer_key(&self) -> S3Result<Option<sse::CustomerKey>>;
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
            fn part_number(&self) -> Option<i32> { self.part_number }
            fn version_id(&self) -> Option<&str> { self.version_id.as_deref() }
            fn customer_key(&self) -> S3Result<Option<sse::CustomerKey>> {
                crate::sse::customer_key_of!(self)
            }
            fn checksum_mode(&self) -> bool {
                self.checksum_mode.as_ref().is_some_and(|m| m.as_str().eq_ignore_ascii_case(ChecksumMode::ENABLED))
            }
        }
    )*};
}
read_request!(GetObjectInput, HeadObjectInput);

/// The object a GET or a HEAD names, its conditions checked, and the bytes its Range or
/// part number asks for.
async fn select(g: &Gateway, i: &impl ReadRequest) -> S3Result<Selected> {
    let (layout, meta) = g.object_at(i.bucket(), i.key(), i.version_id()).await?;
    let customer = i.customer_key()?;
    let key = g.key_of(meta.sse.as_ref(), customer.as_ref())?;
    check_read(&meta, i.if_match(), i.if_none_match(), i.if_modified_since(), i.if_unmodified_since())?;
    let size = meta.size(layout.size);
    let (range, parts_count) = match i.part_number() {
        Some(_) if i.range().is_some() => {
            return Err(s3_error!(InvalidRequest, "Cannot specify both Range header and partNumber query parameter"))
        }
        Some(n) => {
            let (r, count) = part_range(&meta, size, n)?;
            (Some(r), count)
        }
        None => (byte_range(i.range(), size)?, None),
    };
    let (start, end) = range.as_ref().map_or((0, size), |r| (r.start, r.end));
    let content_range = range.filter(|r| r.end > r.start).map(|r| format!("bytes {}-{}/{}", r.start, r.end - 1, size));
    // A checksum covers the whole object: a range or one part of it goes without.
    let whole = start == 0 && end == size && parts_count.is_none();
    let checksum = meta.checksum.clone().filter(|_| i.checksum_mode() && whole);
    Ok(Selected { layout, meta, start, end, content_range, parts_count, checksum, key, customer })
}

/// S3's answer to a part number past the object's parts (416, a code s3s does not name).
fn invalid_part_number(msg: String) -> s3s::S3Error {
    let mut e = s3s::S3Error::with_message(s3s::S3ErrorCode::Custom("InvalidPartNumber".into()), msg);
    e.set_status_code(http::StatusCode::RANGE_NOT_SATISFIABLE);
    e
}

/// The bytes of part `n` of an object, and its number of parts (none for an object put
/// whole, which is its own part 1, as S3 answers).
fn part_range(m: &ObjectMeta, size: u64, n: i32) -> S3Result<(std::ops::Range<u64>, Option<i32>)> {
    if !(1..=crate::multipart::MAX_PART_NUMBER).contains(&n) {
        return Err(s3_error!(InvalidArgument, "Part number must be an integer between 1 and 10000, inclusive"));
    }
    let Some(parts) = &m.parts else {
        if m.upload.is_some() {
            return Err(s3_error!(NotImplemented, "this object's part boundaries were not kept (too many sizes of parts)"));
        }
        if n == 1 {
            return Ok((0..size, None));
        }
        return Err(invalid_part_number(format!("the object has one part; {n} was asked for")));
    };
    let k = n as usize;
    if k > parts.len() {
        return Err(invalid_part_number(format!("the object has {} parts; {n} was asked for", parts.len())));
    }
    let start: u64 = parts[..k - 1].iter().sum();
    Ok((start..start + parts[k - 1], Some(parts.len() as i32)))
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
    let m = s.meta.clone();
    let (content_type, cache_control, content_disposition, content_encoding, content_language, expires) = answered_headers!(m, req.input);
    let (c, checksum_type) = s.checksum();
    let version_id = g.read_id(&req.input.bucket, &s.layout).await;
    let (object_lock_mode, object_lock_retain_until_date, object_lock_legal_hold_status) = m.lock.answer();
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        m.sse.as_ref().map(|x| x.answer(s.customer.as_ref())).unwrap_or_default();
    let body = crate::body::plain_body(g, s.layout, s.key.as_ref(), &m.sealed_parts(), s.start, s.end, false)
        .await
        .map_err(crate::errors::from_cluster)?;
    Ok(S3Response::new(crate::checksums::with_checksum!(
        c,
        GetObjectOutput {
            tag_count: (!m.tags.is_empty()).then_some(m.tags.len() as i32),
            parts_count: s.parts_count,
            checksum_type,
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
            version_id,
            object_lock_mode,
            object_lock_retain_until_date,
            object_lock_legal_hold_status,
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        }
    )))
}

pub async fn head(g: &Gateway, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
    let s = select(g, &req.input).await?;
    let m = s.meta.clone();
    let (content_type, cache_control, content_disposition, content_encoding, content_language, expires) = answered_headers!(m, req.input);
    let (c, checksum_type) = s.checksum();
    let (object_lock_mode, object_lock_retain_until_date, object_lock_legal_hold_status) = m.lock.answer();
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        m.sse.as_ref().map(|x| x.answer(s.customer.as_ref())).unwrap_or_default();
    Ok(S3Response::new(crate::checksums::with_checksum!(
        c,
        HeadObjectOutput {
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            object_lock_mode,
            object_lock_retain_until_date,
            object_lock_legal_hold_status,
            version_id: g.read_id(&req.input.bucket, &s.layout).await,
            parts_count: s.parts_count,
            checksum_type,
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
        }
    )))
}

pub async fn delete(g: &Gateway, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
    let i = req.input;
    let settings = g.bucket(&i.bucket).await?;
    let want = parse_id(i.version_id.as_deref())?;
    let bypass = i.bypass_governance_retention.unwrap_or(false);
    let d = delete_key(g, &i.bucket, &i.key, want, settings.versioning, bypass).await.map_err(from_cluster)?;
    Ok(S3Response::new(DeleteObjectOutput {
        delete_marker: d.delete_marker.then_some(true),
        version_id: d.version_id,
        ..Default::default()
    }))
}

/// What a delete did: the version it deleted or the delete marker it wrote.
struct KeyDeleted {
    delete_marker: bool,
    version_id: Option<String>,
}

/// Deletes `key`: exactly version `want` if given, else as the bucket's versioning says (a
/// delete marker with versioning). Deleting what is not there succeeds, as in S3. A version
/// under object lock is refused by the coordinator (`Locked`); GOVERNANCE yields to
/// `bypass_governance` (x-amz-bypass-governance-retention).
async fn delete_key(
    g: &Gateway,
    bucket: &str,
    key: &str,
    want: Option<VersionRef>,
    versioning: Versioning,
    bypass_governance: bool,
) -> Result<KeyDeleted, kintsugi_client::Error> {
    let name = names::object(bucket, key);
    match want {
        Some(v) => {
            let gone = g.client.delete_version_as(&name, v, bypass_governance).await?;
            Ok(KeyDeleted { delete_marker: gone.is_some_and(|d| d.delete_marker), version_id: Some(v.to_string()) })
        }
        None if versioning.is_unversioned() => {
            g.client.delete(&name).await?;
            Ok(KeyDeleted { delete_marker: false, version_id: None })
        }
        None => {
            let m = g.client.delete_versioned(&name, versioning).await?;
            Ok(KeyDeleted { delete_marker: true, version_id: m.map(|m| m.id().to_string()) })
        }
    }
}

pub async fn delete_many(g: &Gateway, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
    let i = req.input;
    let settings = g.bucket(&i.bucket).await?;
    if i.delete.objects.len() > 1000 {
        return Err(s3_error!(MalformedXML, "at most 1000 keys a request"));
    }
    let quiet = i.delete.quiet.unwrap_or(false);
    let (mut deleted, mut errors) = (Vec::new(), Vec::new());
    for o in i.delete.objects {
        let want = match parse_id(o.version_id.as_deref()) {
            Ok(w) => w,
            Err(e) => {
                errors.push(Error {
                    key: Some(o.key),
                    code: Some("InvalidArgument".into()),
                    message: e.message().map(str::to_string),
                    ..Default::default()
                });
                continue;
            }
        };
        let bypass = i.bypass_governance_retention.unwrap_or(false);
        match delete_key(g, &i.bucket, &o.key, want, settings.versioning, bypass).await {
            Ok(_) if quiet => {}
            Ok(d) => deleted.push(DeletedObject {
                key: Some(o.key),
                delete_marker: d.delete_marker.then_some(true),
                // A marker written answers its id as the marker's; a version deleted, as its own.
                delete_marker_version_id: d.version_id.clone().filter(|_| d.delete_marker && want.is_none()),
                version_id: d.version_id.filter(|_| want.is_some()),
            }),
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

/// The object a copy reads (CopyObject, UploadPartCopy), its `x-amz-copy-source-if-*`
/// conditions checked (a copy answers 412 where a GET would answer 304).
pub(crate) async fn copy_source(
    g: &Gateway,
    source: &CopySource,
    conditions: (Option<&IfMatch>, Option<&IfNoneMatch>, Option<&Timestamp>, Option<&Timestamp>),
) -> S3Result<(ObjectLayout, ObjectMeta)> {
    let CopySource::Bucket { bucket, key, version_id } = source else {
        return Err(s3_error!(NotImplemented, "copies from access points"));
    };
    let (layout, src) = g.object_at(bucket, key, version_id.as_deref()).await.map_err(|e| {
        // A delete marker cannot be copied: S3 answers 400 where a GET answers 405.
        if *e.code() == s3s::S3ErrorCode::MethodNotAllowed {
            s3_error!(InvalidRequest, "The source of a copy request may not specifically refer to a delete marker by version id.")
        } else {
            e
        }
    })?;
    let (m, nm, ms, us) = conditions;
    check_read(&src, m, nm, ms, us)
        .map_err(|e| if *e.code() == s3s::S3ErrorCode::NotModified { s3_error!(PreconditionFailed) } else { e })?;
    Ok((layout, src))
}

pub async fn copy(g: &Gateway, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
    let i = req.input;
    let (settings, bucket_attrs) = g.bucket_and_attrs(&i.bucket).await?;
    // A copy's lock is its own request's (or the bucket's default), never the source's.
    let lock = crate::object_lock::write_lock!(&bucket_attrs, i)?;
    let conditions = (
        i.copy_source_if_match.as_ref(),
        i.copy_source_if_none_match.as_ref(),
        i.copy_source_if_modified_since.as_ref(),
        i.copy_source_if_unmodified_since.as_ref(),
    );
    let (layout, src) = copy_source(g, &i.copy_source, conditions).await?;
    // The source is opened with its key, the copy sealed as asked (or by the bucket's default).
    let source_customer = crate::sse::source_customer_key_of!(i)?;
    let source_key = g.key_of(src.sse.as_ref(), source_customer.as_ref())?;
    let customer = crate::sse::customer_key_of!(i)?;
    let asked = sse::asked(i.server_side_encryption.as_ref(), customer)?;
    let changes_encryption = !matches!(asked, sse::Asked::Nothing);
    let encryption = g.encryption(&asked, sse::bucket_default::encrypts(&bucket_attrs))?;
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        encryption.as_ref().map(sse::Encryption::answer).unwrap_or_default();
    let replace = i.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
    // A copy of an older version onto its own key restores it: not the same object.
    let same = matches!(&i.copy_source, CopySource::Bucket { bucket, key, version_id }
        if **bucket == *i.bucket && **key == *i.key && version_id.is_none());
    // The copy's checksum: the one asked for, else the source's algorithm, computed anew
    // over the whole body.
    let algorithm = match &i.checksum_algorithm {
        Some(a) => Some(a.as_str().parse::<checksums::Algorithm>()?),
        None => src.checksum.as_ref().map(|c| c.algorithm),
    };
    if same && !replace && i.checksum_algorithm.is_none() && !changes_encryption {
        return Err(s3_error!(InvalidRequest, "copying an object onto itself changes nothing: use the REPLACE metadata directive"));
    }
    // Tags: the source's unless the copy replaces them (S3's x-amz-tagging-directive).
    let tags = match i.tagging_directive.as_ref().map(|d| d.as_str()) {
        Some(TaggingDirective::REPLACE) => crate::tagging::of_header(i.tagging.as_deref())?,
        _ => src.tags.clone(),
    };
    // A copy's ACL is its request's, as S3's (private unless asked).
    let acl = crate::acl::for_write(&bucket_attrs, i.acl.as_ref().map(|a| a.as_str()), grants!(i))?;
    let meta = if replace {
        let headers = crate::object_meta::stored_headers!(i);
        ObjectMeta { content_type: i.content_type, headers, user: user_metadata(i.metadata)?, tags, lock, acl, ..Default::default() }
    } else {
        let (content_type, headers, user) = (src.content_type.clone(), src.headers.clone(), src.user.clone());
        ObjectMeta { content_type, headers, user, tags, lock, acl, ..Default::default() }
    };
    let source_version = match &i.copy_source {
        CopySource::Bucket { bucket, .. } => g.read_id(bucket, &layout).await,
        _ => None,
    };
    let size = src.size(layout.size);
    if size > MAX_PUT {
        return Err(s3_error!(InvalidRequest, "an object over 5 GiB is copied part by part (UploadPartCopy)"));
    }
    let _memory = g.memory.reserve(crate::body::get_bytes(0, size) + put_memory(size, settings)?).await;
    let body = crate::body::plain_body(g, layout, source_key.as_ref(), &src.sealed_parts(), 0, size, true)
        .await
        .map_err(crate::errors::from_cluster)?;
    let checksum = algorithm.map(|algorithm| Wanted { algorithm, value: None, trailer: false });
    let terms = PutTerms { meta, checksum, encryption, ..Default::default() };
    let w = g.put_stream(&names::object(&i.bucket, &i.key), StreamingBlob::wrap(body), size, settings, terms, true).await?;
    let (c, checksum_type) = w.checksum.as_ref().map(Stored::answer).unzip();
    let c = c.unwrap_or_default();
    let result = crate::checksums::with_checksum!(
        c,
        CopyObjectResult {
            e_tag: Some(ETag::Strong(w.etag)),
            last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
            checksum_type,
        }
    );
    Ok(S3Response::new(CopyObjectOutput {
        copy_object_result: Some(result),
        copy_source_version_id: source_version,
        version_id: w.version_id,
        server_side_encryption,
        sse_customer_algorithm,
        sse_customer_key_md5,
        ..Default::default()
    }))
}
