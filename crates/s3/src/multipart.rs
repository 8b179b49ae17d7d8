//! Multipart uploads. Each part is an object of its own (`names::part`), written in the
//! bucket's code with the Stripe layout; completing composes the parts into the object in
//! one metadata transaction (`ComposeObject`), so no byte is copied; aborting deletes them
//! and the collector reclaims their chunks.

use crate::errors::{from_cluster, is_missing};
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::{multipart_etag, now_ms, user_metadata, ObjectMeta};
use crate::objects::incoming;
use crate::settings::BucketSettings;
use kintsugi_proto::{Attrs, LayoutSpec};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// Every part but the last is at least this large (S3's rule).
pub const MIN_PART: u64 = 5 << 20;
/// Part numbers are 1 to this.
pub const MAX_PART_NUMBER: i32 = 10_000;

/// An upload in progress, from its record.
struct Upload {
    key: String,
    meta: ObjectMeta,
    initiated_ms: u64,
}

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
                Some(PartInfo { number: names::part_number(&o.name)?, size: o.size, etag: m.etag, mtime_ms: m.mtime_ms, name: o.name })
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
}

fn upload_of(a: &Attrs) -> Upload {
    Upload {
        key: a.get("key").cloned().unwrap_or_default(),
        meta: ObjectMeta::from_attrs(a),
        initiated_ms: a.get("initiated").and_then(|t| t.parse().ok()).unwrap_or(0),
    }
}

fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

pub async fn create(g: &Gateway, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let i = req.input;
    let settings = g.bucket(&i.bucket).await?;
    let id = names::new_upload_id();
    let headers = crate::object_meta::stored_headers!(i);
    let meta = ObjectMeta { content_type: i.content_type, headers, user: user_metadata(i.metadata)?, ..Default::default() };
    let mut attrs = meta.to_attrs();
    attrs.insert("key".into(), i.key.clone());
    attrs.insert("initiated".into(), now_ms().to_string());
    g.put_record(&names::upload_record(&i.bucket, &id), settings, attrs).await?;
    Ok(S3Response::new(CreateMultipartUploadOutput { bucket: Some(i.bucket), key: Some(i.key), upload_id: Some(id), ..Default::default() }))
}

pub async fn upload_part(g: &Gateway, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
    let i = req.input;
    if !(1..=MAX_PART_NUMBER).contains(&i.part_number) {
        return Err(s3_error!(InvalidArgument, "part numbers are 1 to {MAX_PART_NUMBER}"));
    }
    let settings = g.bucket(&i.bucket).await?;
    g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    let (size, md5, body) = incoming(i.content_length, i.content_md5, i.body)?;
    // Parts are composed into the object, which composes Stripe layouts only.
    let part_settings = BucketSettings { layout: LayoutSpec::Stripe, ..settings };
    let name = names::part(&i.upload_id, i.part_number);
    let etag = g.put_stream(&name, body, size, part_settings, md5.as_deref(), ObjectMeta::default(), false).await?;
    Ok(S3Response::new(UploadPartOutput { e_tag: Some(ETag::Strong(etag)), ..Default::default() }))
}

pub async fn complete(g: &Gateway, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let i = req.input;
    let upload = g.upload(&i.bucket, &i.key, &i.upload_id).await?;
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
    for (k, (p, n)) in given.iter().zip(&numbers).enumerate() {
        let Some(u) = uploaded.get(n) else {
            return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
        };
        let want = p.e_tag.as_ref().map(|e| e.value().trim_matches('"').to_string()).unwrap_or_default();
        if want != u.etag {
            return Err(s3_error!(InvalidPart, "part {n} has ETag \"{}\", not \"{want}\"", u.etag));
        }
        if u.size < g.min_part && k + 1 < given.len() {
            return Err(s3_error!(EntityTooSmall, "part {n} is {} bytes; every part but the last is at least {}", u.size, g.min_part));
        }
        let version = g.client.stat(&u.name).await.map_err(from_cluster)?.version;
        chosen.push((u.name.clone(), version));
        etags.push(u.etag.clone());
    }
    let etag = multipart_etag(&etags).map_err(|e| s3_error!(InternalError, "{e}"))?;
    let meta = ObjectMeta { etag: etag.clone(), mtime_ms: now_ms(), ..upload.meta };
    let name = names::object(&i.bucket, &i.key);
    g.client.compose(&name, chosen, meta.to_attrs()).await.map_err(|e| {
        if e.kind() == kintsugi_client::ErrorKind::InvalidPart {
            s3_error!(NoSuchUpload, "the upload changed while being completed: {e}")
        } else {
            from_cluster(e)
        }
    })?;
    // Parts not listed are discarded, then the upload's record.
    for (n, u) in &uploaded {
        if !numbers.contains(n) {
            let _ = g.client.delete(&u.name).await;
        }
    }
    g.client.delete(&names::upload_record(&i.bucket, &i.upload_id)).await.map_err(from_cluster)?;
    tracing::info!("multipart upload {} of '{}' completed: {} parts", i.upload_id, i.key, given.len());
    Ok(S3Response::new(CompleteMultipartUploadOutput {
        bucket: Some(i.bucket.clone()),
        key: Some(i.key.clone()),
        e_tag: Some(ETag::Strong(etag)),
        location: Some(format!("/{}/{}", i.bucket, i.key)),
        ..Default::default()
    }))
}

pub async fn abort(g: &Gateway, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let i = req.input;
    g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    // Parts first, then the record: an abort cut short leaves the record, so a retried
    // abort finds the upload and finishes the job.
    loop {
        let (page, more) = g.parts(&i.upload_id, 0, 1000).await?;
        for p in &page {
            g.client.delete(&p.name).await.map_err(from_cluster)?;
        }
        if !more {
            break;
        }
    }
    g.client.delete(&names::upload_record(&i.bucket, &i.upload_id)).await.map_err(from_cluster)?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

pub async fn list_parts(g: &Gateway, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
    let i = req.input;
    g.upload(&i.bucket, &i.key, &i.upload_id).await?;
    let max = i.max_parts.unwrap_or(1000).clamp(1, 1000);
    let marker = i.part_number_marker.unwrap_or(0);
    let (page, more) = g.parts(&i.upload_id, marker, max as u32).await?;
    let next = if more { page.last().map(|p| p.number) } else { None };
    let parts = page
        .into_iter()
        .map(|p| Part {
            part_number: Some(p.number),
            size: Some(p.size as i64),
            e_tag: Some(ETag::Strong(p.etag)),
            last_modified: Some(timestamp(p.mtime_ms)),
            ..Default::default()
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
    all.retain(|(k, id, _)| key_marker.is_empty() || k.as_str() > key_marker.as_str() || (*k == key_marker && *id > id_marker));
    let truncated = all.len() > max;
    all.truncate(max);
    let next = if truncated { all.last().map(|(k, id, _)| (k.clone(), id.clone())) } else { None };
    let uploads = all
        .into_iter()
        .map(|(key, id, t)| MultipartUpload { key: Some(key), upload_id: Some(id), initiated: Some(timestamp(t)), ..Default::default() })
        .collect();
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(i.bucket),
        prefix: i.prefix,
        key_marker: i.key_marker,
        upload_id_marker: i.upload_id_marker,
        max_uploads: Some(max as i32),
        is_truncated: Some(truncated),
        next_key_marker: next.as_ref().map(|n| n.0.clone()),
        next_upload_id_marker: next.map(|n| n.1),
        uploads: Some(uploads),
        ..Default::default()
    }))
}
