//! Multipart uploads. Each part is an object of its own (`names::part`), written in the
//! bucket's code with the Stripe layout; completing composes the parts into the object in
//! one metadata transaction (`ComposeObject`), so no byte is copied; aborting deletes them
//! and the collector reclaims their chunks.

use crate::checksums::{self, Algorithm, Stored, Wanted};
use crate::errors::{from_cluster, is_missing};
use crate::gateway::Gateway;
use crate::names;
use crate::object_lock::Lock;
use crate::object_meta::{multipart_etag, now_ms, user_metadata, ObjectMeta};
use crate::objects::{incoming, PutTerms};
use crate::settings::BucketSettings;
use kintsugi_proto::{Attrs, LayoutSpec, Versioning};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// Every part but the last is at least this large (S3's rule).
pub const MIN_PART: u64 = 5 << 20;
/// Part numbers are 1 to this.
pub const MAX_PART_NUMBER: i32 = 10_000;

/// An upload in progress, from its record.
pub(crate) struct Upload {
    pub(crate) key: String,
    meta: ObjectMeta,
    pub(crate) initiated_ms: u64,
    /// The checksum its parts carry, and whether the object's is COMPOSITE (else FULL_OBJECT).
    checksum: Option<(Algorithm, bool)>,
}

/// The upload record's attribute naming its checksum (`CRC32 COMPOSITE`).
const UPLOAD_CHECKSUM: &str = "s3.mpu.checksum";
/// The upload record's attribute holding the object lock it asked for ([`Lock::encode`]).
const UPLOAD_LOCK: &str = "s3.mpu.lock";

impl Gateway {
    /// The upload `id` of `key` in `bucket`, or NoSuchUpload.
    async fn upload(&self, bucket: &str, key: &str, id: &str) -> S3Result<Upload> {
        if !names::is_upload_id(id) {
            return Err(s3_error!(NoSuchUpload, "'{id}' is not an upload id"));
        }
        match self.client.stat(&names::upload_record(bucket, id)).await {
            Ok(l) => {
                let u = upload_of(&l.attrs);
                if u.key != key {
                    return Err(s3_error!(NoSuchUpload, "upload {id} is of another key"));
                }
                Ok(u)
            }
            Err(e) if is_missing(&e) => {
                self.bucket(bucket).await?;
                Err(s3_error!(NoSuchUpload, "no upload {id} (completed, aborted, or never begun)"))
            }
            Err(e) => Err(from_cluster(e)),
        }
    }

    /// The parts of upload `id` in number order, from part `after` on: (number, object
    /// name, size, ETag, version, mtime).
    async fn parts(&self, id: &str, after: i32, limit: u32) -> S3Result<(Vec<PartInfo>, bool)> {
        let prefix = names::parts_prefix(id);
        let after = if after > 0 { names::part(id, after) } else { String::new() };
        let (objects, _, next) = self.client.list_page(&prefix, "", &after, limit).await.map_err(from_cluster)?;
        let parts = objects
            .into_iter()
            .filter_map(|o| {
                let m = ObjectMeta::from_attrs(&o.attrs);
                Some(PartInfo {
                    number: names::part_number(&o.name)?,
                    size: m.size(o.size),
                    etag: m.etag,
                    mtime_ms: m.mtime_ms,
                    checksum: m.checksum,
                    name: o.name,
                })
            })
            .collect();
        Ok((parts, next.is_some()))
    }
}

struct PartInfo {
    number: i32,
    name: String,
    size: u64,
    etag: String,
    mtime_ms: u64,
    checksum: Option<Stored>,
}

pub(crate) fn upload_of(a: &Attrs) -> Upload {
    let checksum = a.get(UPLOAD_CHECKSUM).and_then(|c| {
        let (alg, t) = c.split_once(' ')?;
        Some((alg.parse().ok()?, t == ChecksumType::COMPOSITE))
    });
    Upload {
        key: a.get("key").cloned().unwrap_or_default(),
        meta: ObjectMeta { lock: a.get(UPLOAD_LOCK).map(|l| Lock::decode(l)).unwrap_or_default(), ..ObjectMeta::from_attrs(a) },
        initiated_ms: a.get("initiated").and_then(|t| t.parse().ok()).unwrap_or(0),
        checksum,
    }
}

/// A part's checksum fields as S3 answers them.
fn part_checksum(c: Option<&Stored>) -> Checksum {
    c.map(|c| c.answer().0).unwrap_or_default()
}

fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

pub async fn create(g: &Gateway, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let i = req.input;
    let (settings, bucket_attrs) = g.bucket_and_attrs(&i.bucket).await?;
    let lock = crate::object_lock::asked(
        &bucket_attrs,
        i.object_lock_mode.as_ref(),
        i.object_lock_retain_until_date.as_ref(),
        i.object_lock_legal_hold_status.as_ref(),
        now_ms(),
    )?;
    let id = names::new_upload_id();
    let headers = crate::object_meta::stored_headers!(i);
    let tags = crate::tagging::of_header(i.tagging.as_deref())?;
    // An encrypted upload's data key is made now; each part is sealed with it.
    let customer = crate::sse::customer_key_of!(i)?;
    let asked = crate::sse::asked(i.server_side_encryption.as_ref(), customer)?;
    let encryption = g.encryption(&asked, crate::sse::bucket_default::encrypts(&bucket_attrs))?;
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        encryption.as_ref().map(crate::sse::Encryption::answer).unwrap_or_default();
    let sse = encryption.map(|e| e.sealed);
    let acl = crate::acl::for_write(&bucket_attrs, i.acl.as_ref().map(|a| a.as_str()), crate::objects::grants!(i))?;
    let meta = ObjectMeta { content_type: i.content_type, headers, user: user_metadata(i.metadata)?, tags, sse, acl, ..Default::default() };
    let mut attrs = meta.to_attrs();
    attrs.insert("key".into(), i.key.clone());
    attrs.insert("initiated".into(), now_ms().to_string());
    if lock != Lock::default() {
        attrs.insert(UPLOAD_LOCK.into(), lock.encode());
    }
    let algorithm = i.checksum_algorithm.as_ref().map(|a| a.as_str().parse::<Algorithm>()).transpose()?;
    let composite = match i.checksum_type.as_ref().map(|t| t.as_str()) {
        None | Some(ChecksumType::COMPOSITE) => algorithm != Some(Algorithm::Crc64Nvme),
        Some(ChecksumType::FULL_OBJECT) => false,
        Some(t) => return Err(s3_error!(InvalidRequest, "checksum type '{t}' is neither COMPOSITE nor FULL_OBJECT")),
    };
    let algorithm = match (algorithm, i.checksum_type.is_some()) {
        (Some(a), _) => Some(a),
        (None, true) => return Err(s3_error!(InvalidRequest, "a checksum type needs a checksum algorithm")),
        (None, false) => None,
    };
    if let Some(a) = algorithm {
        if !composite && !a.combines() {
            return Err(s3_error!(InvalidRequest, "The FULL_OBJECT checksum type cannot be used with the {a} checksum algorithm."));
        }
        if composite && a == Algorithm::Crc64Nvme {
            return Err(s3_error!(InvalidRequest, "The COMPOSITE checksum type cannot be used with the CRC64NVME checksum algorithm."));
        }
        let t = if composite { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT };
        attrs.insert(UPLOAD_CHECKSUM.into(), format!("{a} {t}"));
    }
    g.put_record(&names::upload_record(&i.bucket, &id), settings, attrs).await?;
    let checksum_type =
        algorithm.map(|_| ChecksumType::from(if composite { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT }.to_string()));
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(id),
        checksum_algorithm: algorithm.map(|a| ChecksumAlgorithm::from(a.name().to_string())),
        checksum_type,
        server_side_encryption,
        sse_customer_algorithm,
        sse_customer_key_md5,
        ..Default::default()
    }))
}

pub async fn upload_part(g: &Gateway, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
    let i = req.input;
    if !(1..=MAX_PART_NUMBER).contains(&i.part_number) {
        return Err(s3_error!(InvalidArgument, "part numbers are 1 to {MAX_PART_NUMBER}"));
    }
    let settings = g.bucket(&i.bucket).await?;
    let upload = g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    let given = checksums::checksum_of!(i);
    let checksum = part_checksum_wanted(&upload, checksums::wanted(&given, i.checksum_algorithm.as_ref(), &req.headers)?)?;
    let (size, content_md5, body) = incoming(i.content_length, &req.headers, i.content_md5, i.body)?;
    // Parts are composed into the object, which composes Stripe layouts only.
    let part_settings = BucketSettings { layout: LayoutSpec::Stripe, versioning: Versioning::Unversioned, ..settings };
    let name = names::part(&i.upload_id, i.part_number);
    let customer = crate::sse::customer_key_of!(i)?;
    let encryption = g.part_encryption(upload.meta.sse.as_ref(), customer, i.part_number as u32)?;
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        encryption.as_ref().map(crate::sse::Encryption::answer).unwrap_or_default();
    let terms = PutTerms { content_md5, checksum, trailers: req.trailing_headers, encryption, part: true, ..Default::default() };
    let w = g.put_stream(&name, body, size, part_settings, terms, false).await?;
    let c = part_checksum(w.checksum.as_ref());
    Ok(S3Response::new(crate::checksums::with_checksum!(
        c,
        UploadPartOutput {
            e_tag: Some(ETag::Strong(w.etag)),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        }
    )))
}

/// The checksum a part is written with: the upload's algorithm, checked against the value
/// the part carries; a part of an upload without one keeps what it carries.
fn part_checksum_wanted(upload: &Upload, sent: Option<Wanted>) -> S3Result<Option<Wanted>> {
    match (upload.checksum, sent) {
        (None, sent) => Ok(sent),
        (Some((a, _)), None) => Ok(Some(Wanted { algorithm: a, value: None, trailer: false })),
        (Some((a, _)), Some(w)) if w.algorithm == a => Ok(Some(w)),
        (Some((a, _)), Some(w)) => Err(s3_error!(
            InvalidRequest,
            "Checksum Type mismatch occurred, expected checksum Type: {}, actual checksum Type: {}",
            a.name().to_ascii_lowercase(),
            w.algorithm.name().to_ascii_lowercase()
        )),
    }
}

pub async fn upload_part_copy(g: &Gateway, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
    let i = req.input;
    if !(1..=MAX_PART_NUMBER).contains(&i.part_number) {
        return Err(s3_error!(InvalidArgument, "part numbers are 1 to {MAX_PART_NUMBER}"));
    }
    let settings = g.bucket(&i.bucket).await?;
    let upload = g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    let conditions = (
        i.copy_source_if_match.as_ref(),
        i.copy_source_if_none_match.as_ref(),
        i.copy_source_if_modified_since.as_ref(),
        i.copy_source_if_unmodified_since.as_ref(),
    );
    let (layout, src) = crate::objects::copy_source(g, &i.copy_source, conditions).await?;
    let source_customer = crate::sse::source_customer_key_of!(i)?;
    let source_key = g.key_of(src.sse.as_ref(), source_customer.as_ref())?;
    let customer = crate::sse::customer_key_of!(i)?;
    let encryption = g.part_encryption(upload.meta.sse.as_ref(), customer, i.part_number as u32)?;
    let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
        encryption.as_ref().map(crate::sse::Encryption::answer).unwrap_or_default();
    let source_size = src.size(layout.size);
    let (start, end) = match &i.copy_source_range {
        None => (0, source_size),
        Some(r) => copy_range(r, source_size)?,
    };
    let size = end - start;
    if size > crate::objects::MAX_PUT {
        return Err(s3_error!(InvalidRequest, "a part is at most 5 GiB; copy a larger source in ranges"));
    }
    let part_settings = BucketSettings { layout: LayoutSpec::Stripe, versioning: Versioning::Unversioned, ..settings };
    let _memory = g.memory.reserve(crate::body::get_bytes(start, end) + crate::objects::put_memory(size, part_settings)?).await;
    let body =
        crate::body::plain_body(g, layout, source_key.as_ref(), &src.sealed_parts(), start, end, true).await.map_err(from_cluster)?;
    let checksum = part_checksum_wanted(&upload, None)?;
    let terms = PutTerms { checksum, encryption, part: true, ..Default::default() };
    let name = names::part(&i.upload_id, i.part_number);
    let w = g.put_stream(&name, StreamingBlob::wrap(body), size, part_settings, terms, true).await?;
    let c = part_checksum(w.checksum.as_ref());
    let result = crate::checksums::with_checksum!(
        c,
        CopyPartResult { e_tag: Some(ETag::Strong(w.etag)), last_modified: Some(Timestamp::from(std::time::SystemTime::now())) }
    );
    Ok(S3Response::new(UploadPartCopyOutput {
        copy_part_result: Some(result),
        server_side_encryption,
        sse_customer_algorithm,
        sse_customer_key_md5,
        ..Default::default()
    }))
}

/// `x-amz-copy-source-range: bytes=first-last`, within the source's `size` bytes.
fn copy_range(r: &CopySourceRange, size: u64) -> S3Result<(u64, u64)> {
    let bad = || {
        s3_error!(InvalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
    };
    let v = r.strip_prefix("bytes=").ok_or_else(bad)?;
    let (a, b) = v.split_once('-').ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    if b >= size {
        return Err(s3_error!(InvalidRange, "Range specified is not valid for source object of size: {size}"));
    }
    Ok((a, b + 1))
}

pub async fn complete(g: &Gateway, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let i = req.input;
    let name = names::object(&i.bucket, &i.key);
    let upload = match g.upload(&i.bucket, &i.key, &i.upload_id).await {
        Ok(u) => u,
        Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchUpload => {
            // Completed already (a retry whose answer was lost): S3 answers success again.
            if let Ok((_, m)) = g.object(&i.bucket, &i.key).await {
                if m.upload.as_deref() == Some(i.upload_id.as_str()) {
                    return Ok(completed(&i.bucket, &i.key, &m));
                }
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let given = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
    if given.is_empty() {
        return Err(s3_error!(MalformedXML, "no parts to complete the upload with"));
    }
    let mut numbers = Vec::with_capacity(given.len());
    for p in &given {
        let n = p.part_number.ok_or_else(|| s3_error!(MalformedXML, "a part without its number"))?;
        if numbers.last().is_some_and(|&last| n <= last) {
            return Err(s3_error!(InvalidPartOrder, "parts must be listed in ascending order"));
        }
        numbers.push(n);
    }
    let precondition = crate::conditions::write_precondition(g, &i.bucket, &i.key, i.if_match.as_ref(), i.if_none_match.as_ref()).await?;
    // Every part uploaded, a page at a time, to check the list against.
    let mut uploaded = std::collections::BTreeMap::new();
    let mut after = 0;
    loop {
        let (page, more) = g.parts(&i.upload_id, after, 1000).await?;
        after = page.last().map_or(after, |p| p.number);
        uploaded.extend(page.into_iter().map(|p| (p.number, p)));
        if !more {
            break;
        }
    }
    let mut chosen = Vec::with_capacity(given.len());
    let mut etags = Vec::with_capacity(given.len());
    let mut sizes = Vec::with_capacity(given.len());
    let mut part_sums = Vec::with_capacity(given.len());
    for (k, (p, n)) in given.iter().zip(&numbers).enumerate() {
        let Some(u) = uploaded.get(n) else {
            // A retry after the object was composed but before the record went: the parts
            // are the object's now. Finish the job and answer as the first attempt would have.
            if let Ok((_, m)) = g.object(&i.bucket, &i.key).await {
                if m.upload.as_deref() == Some(i.upload_id.as_str()) {
                    g.client.delete(&names::upload_record(&i.bucket, &i.upload_id)).await.map_err(from_cluster)?;
                    return Ok(completed(&i.bucket, &i.key, &m));
                }
            }
            return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
        };
        let want = p.e_tag.as_ref().map(|e| e.value().trim_matches('"').to_string()).unwrap_or_default();
        if want != u.etag {
            return Err(s3_error!(InvalidPart, "part {n} has ETag \"{}\", not \"{want}\"", u.etag));
        }
        if u.size < g.min_part && k + 1 < given.len() {
            return Err(s3_error!(EntityTooSmall, "part {n} is {} bytes; every part but the last is at least {}", u.size, g.min_part));
        }
        if let Some((a, _)) = upload.checksum {
            let stored = u.checksum.as_ref().filter(|c| c.algorithm == a).map(|c| c.value.clone());
            let Some(stored) = stored else {
                return Err(s3_error!(InvalidPart, "part {n} was uploaded without the upload's {a} checksum"));
            };
            let sent = checksums::checksum_of!(p);
            if let Some(v) = a.get(&sent).filter(|v| v.trim() != stored) {
                return Err(s3_error!(InvalidPart, "part {n} has {a} checksum {stored}, not {v}"));
            }
            part_sums.push((stored, u.size));
        }
        let version = g.client.stat(&u.name).await.map_err(from_cluster)?.version;
        chosen.push((u.name.clone(), version));
        etags.push(u.etag.clone());
        sizes.push(u.size);
    }
    let checksum = match upload.checksum {
        None => None,
        Some((a, composite)) => {
            let value = if composite {
                checksums::composite(a, &part_sums.iter().map(|p| p.0.clone()).collect::<Vec<_>>())?
            } else {
                checksums::full_object(a, &part_sums)?
            };
            // A whole-object checksum sent with the completion must be the one computed.
            let sent = checksums::checksum_of!(i);
            if let Some(v) = a.get(&sent) {
                checksums::verify(a, Some(v), &value)?;
            }
            Some(Stored { algorithm: a, value, composite })
        }
    };
    if let Some(want) = i.mpu_object_size {
        let total: u64 = sizes.iter().sum();
        if u64::try_from(want).ok() != Some(total) {
            return Err(s3_error!(InvalidRequest, "x-amz-mp-object-size is {want}, the parts hold {total} bytes"));
        }
    }
    let etag = multipart_etag(&etags).map_err(|e| s3_error!(InternalError, "{e}"))?;
    let (settings, bucket_attrs) = g.bucket_and_attrs(&i.bucket).await?;
    let now = now_ms();
    let lock = crate::object_lock::with_default(upload.meta.lock, &bucket_attrs, now);
    let total: u64 = sizes.iter().sum();
    let sse = upload.meta.sse.clone().map(|s| crate::sse::Sealed { size: total, ..s });
    let meta =
        ObjectMeta { etag, mtime_ms: now, checksum, parts: Some(sizes), upload: Some(i.upload_id.clone()), lock, sse, ..upload.meta };
    // An encrypted object is read through its parts' boundaries, which must be kept.
    if meta.sse.is_some() && ObjectMeta::from_attrs(&meta.to_attrs()).parts != meta.parts {
        return Err(s3_error!(
            NotImplemented,
            "an encrypted upload of this many different part sizes cannot be completed: upload parts of one size (the last may be smaller)"
        ));
    }
    let terms = kintsugi_client::CommitTerms { attrs: meta.to_attrs(), precondition, versioning: settings.versioning, striped: false };
    let version = g.client.compose(&name, chosen, terms).await.map_err(|e| match e.kind() {
        kintsugi_client::ErrorKind::InvalidPart => s3_error!(NoSuchUpload, "the upload changed while being completed: {e}"),
        _ => from_cluster(e),
    })?;
    // Parts not listed are discarded, then the upload's record.
    for (n, u) in &uploaded {
        if !numbers.contains(n) {
            let _ = g.client.delete(&u.name).await;
        }
    }
    g.client.delete(&names::upload_record(&i.bucket, &i.upload_id)).await.map_err(from_cluster)?;
    tracing::info!("multipart upload {} of '{}' completed: {} parts", i.upload_id, i.key, given.len());
    let mut done = completed(&i.bucket, &i.key, &meta);
    done.output.version_id = crate::versioning::written_id(settings.versioning, version);
    Ok(done)
}

/// The answer to a completion (or to its retry, from the object it made).
fn completed(bucket: &str, key: &str, m: &ObjectMeta) -> S3Response<CompleteMultipartUploadOutput> {
    let (c, checksum_type) = m.checksum.as_ref().map(Stored::answer).unzip();
    let c = c.unwrap_or_default();
    let (server_side_encryption, _, _) = m.sse.as_ref().map(|s| s.answer(None)).unwrap_or_default();
    S3Response::new(crate::checksums::with_checksum!(
        c,
        CompleteMultipartUploadOutput {
            server_side_encryption,
            bucket: Some(bucket.to_string()),
            key: Some(key.to_string()),
            e_tag: Some(m.etag()),
            location: Some(format!("/{bucket}/{key}")),
            checksum_type,
            ..Default::default()
        }
    ))
}

pub async fn abort(g: &Gateway, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let i = req.input;
    g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    g.abort_upload(&i.bucket, &i.upload_id).await?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

impl Gateway {
    /// Deletes upload `id` of `bucket`: its parts, then its record. An abort cut short
    /// leaves the record, so a retried abort finds the upload and finishes the job.
    pub async fn abort_upload(&self, bucket: &str, id: &str) -> S3Result<()> {
        loop {
            let (page, more) = self.parts(id, 0, 1000).await?;
            for p in &page {
                self.client.delete(&p.name).await.map_err(from_cluster)?;
            }
            if !more {
                break;
            }
        }
        self.client.delete(&names::upload_record(bucket, id)).await.map_err(from_cluster)?;
        Ok(())
    }
}

pub async fn list_parts(g: &Gateway, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
    let i = req.input;
    let upload = g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    let max = i.max_parts.unwrap_or(1000).clamp(1, 1000);
    let marker = i.part_number_marker.unwrap_or(0);
    let (page, more) = g.parts(&i.upload_id, marker, max as u32).await?;
    let next = if more { page.last().map(|p| p.number) } else { None };
    let parts = page
        .into_iter()
        .map(|p| {
            let c = part_checksum(p.checksum.as_ref());
            crate::checksums::with_checksum!(
                c,
                Part {
                    part_number: Some(p.number),
                    size: Some(p.size as i64),
                    e_tag: Some(ETag::Strong(p.etag)),
                    last_modified: Some(timestamp(p.mtime_ms)),
                }
            )
        })
        .collect();
    Ok(S3Response::new(ListPartsOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(i.upload_id),
        max_parts: Some(max),
        part_number_marker: Some(marker),
        next_part_number_marker: next,
        is_truncated: Some(more),
        parts: Some(parts),
        checksum_algorithm: upload.checksum.map(|(a, _)| ChecksumAlgorithm::from(a.name().to_string())),
        checksum_type: upload.checksum.map(|(_, composite)| {
            ChecksumType::from(if composite { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT }.to_string())
        }),
        ..Default::default()
    }))
}

pub async fn list_uploads(g: &Gateway, req: S3Request<ListMultipartUploadsInput>) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let i = req.input;
    g.bucket(&i.bucket).await?;
    let prefix = i.prefix.clone().unwrap_or_default();
    let max = i.max_uploads.unwrap_or(1000).clamp(1, 1000) as usize;
    // Uploads are few and short-lived: read the bucket's, then order them by key.
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let (objects, _, next) = g.client.list_page(&names::uploads_prefix(&i.bucket), "", &after, 0).await.map_err(from_cluster)?;
        for o in objects {
            let u = upload_of(&o.attrs);
            if u.key.starts_with(&prefix) {
                all.push((u.key, o.name.rsplit('/').next().unwrap_or_default().to_string(), u.initiated_ms));
            }
        }
        match next {
            Some(n) => after = n,
            None => break,
        }
    }
    all.sort();
    let key_marker = i.key_marker.clone().unwrap_or_default();
    let id_marker = i.upload_id_marker.clone().unwrap_or_default();
    // With a delimiter, keys that hold it past the prefix roll up into common prefixes
    // (each counted once against max-uploads), as in ListObjects; a marker that is such a
    // prefix continues after every key under it.
    let delimiter = i.delimiter.clone().unwrap_or_default();
    let after_prefix = !delimiter.is_empty() && key_marker.ends_with(delimiter.as_str());
    all.retain(|(k, id, _)| {
        key_marker.is_empty()
            || (k.as_str() > key_marker.as_str() && !(after_prefix && k.starts_with(key_marker.as_str())))
            || (*k == key_marker && *id > id_marker)
    });
    let (mut uploads, mut prefixes) = (Vec::new(), Vec::<String>::new());
    // The last entry listed (a key and its upload id, or a common prefix and no id).
    let mut last: Option<(String, String)> = None;
    let mut next = None;
    for (key, id, t) in all {
        let rolled = (!delimiter.is_empty())
            .then(|| key[prefix.len()..].find(delimiter.as_str()).map(|at| key[..prefix.len() + at + delimiter.len()].to_string()))
            .flatten();
        if rolled.is_some() && rolled == prefixes.last().cloned() {
            continue;
        }
        if uploads.len() + prefixes.len() == max {
            next = last;
            break;
        }
        match rolled {
            Some(p) => {
                last = Some((p.clone(), String::new()));
                prefixes.push(p);
            }
            None => {
                last = Some((key.clone(), id.clone()));
                uploads.push((key, id, t));
            }
        }
    }
    let truncated = next.is_some();
    let names = crate::listing::Names::of(i.encoding_type.as_ref())?;
    let uploads = uploads
        .into_iter()
        .map(|(key, id, t)| MultipartUpload {
            key: Some(names.show(key)),
            upload_id: Some(id),
            initiated: Some(timestamp(t)),
            owner: Some(crate::buckets::owner()),
            initiator: Some(Initiator { id: crate::buckets::owner().id, display_name: crate::buckets::owner().display_name }),
            ..Default::default()
        })
        .collect();
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(i.bucket),
        prefix: Some(names.show(prefix)),
        delimiter: i.delimiter.map(|d| names.show(d)),
        key_marker: i.key_marker.map(|k| names.show(k)),
        upload_id_marker: i.upload_id_marker,
        max_uploads: Some(max as i32),
        is_truncated: Some(truncated),
        next_key_marker: next.as_ref().map(|n| names.show(n.0.clone())),
        next_upload_id_marker: next.map(|n| n.1),
        encoding_type: i.encoding_type,
        uploads: Some(uploads),
        common_prefixes: Some(prefixes.into_iter().map(|p| CommonPrefix { prefix: Some(names.show(p)) }).collect()),
        ..Default::default()
    }))
}
