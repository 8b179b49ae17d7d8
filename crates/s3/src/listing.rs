//! ListObjectsV2 and V1: one page of the cluster's name-ordered listing under the bucket's
//! prefix (the coordinator reads only that page), keys shown without the bucket.

use crate::errors::from_cluster;
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::ObjectMeta;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// One page of keys.
struct KeyPage {
    contents: Vec<Object>,
    prefixes: Vec<CommonPrefix>,
    /// The key (or common prefix) to continue after, when truncated.
    next: Option<String>,
}

impl Gateway {
    /// Keys of `bucket` starting with `prefix`, after `after`, at most `max_keys` entries.
    async fn key_page(&self, bucket: &str, prefix: &str, delimiter: &str, after: &str, max_keys: i32) -> S3Result<KeyPage> {
        let b = names::bucket_prefix(bucket);
        if max_keys == 0 {
            self.bucket(bucket).await?;
            return Ok(KeyPage { contents: vec![], prefixes: vec![], next: None });
        }
        let limit = max_keys.clamp(1, 1000) as u32;
        let after = if after.is_empty() { String::new() } else { format!("{b}{after}") };
        let (objects, prefixes, next) =
            self.client.list_page(&format!("{b}{prefix}"), delimiter, &after, limit).await.map_err(from_cluster)?;
        // Keys under the bucket's name prove it is there (a bucket is deleted only empty):
        // only an empty page costs a second request, to tell NoSuchBucket from no keys.
        if objects.is_empty() && prefixes.is_empty() {
            self.bucket(bucket).await?;
        }
        let strip = |n: &str| n.strip_prefix(&b).unwrap_or(n).to_string();
        Ok(KeyPage {
            contents: objects
                .into_iter()
                .map(|o| {
                    let m = ObjectMeta::from_attrs(&o.attrs);
                    Object {
                        key: Some(strip(&o.name)),
                        size: Some(o.size as i64),
                        e_tag: Some(m.etag()),
                        last_modified: Some(m.last_modified()),
                        storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
                        ..Default::default()
                    }
                })
                .collect(),
            prefixes: prefixes.into_iter().map(|p| CommonPrefix { prefix: Some(strip(&p)) }).collect(),
            next: next.map(|n| strip(&n)),
        })
    }
}

/// Max-keys as asked: 1000 when absent, never negative.
fn max_keys(m: Option<i32>) -> S3Result<i32> {
    match m {
        None => Ok(1000),
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "max-keys {n} is negative")),
        Some(n) => Ok(n.min(1000)),
    }
}

pub async fn list_v2(g: &Gateway, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
    let i = req.input;
    let prefix = i.prefix.clone().unwrap_or_default();
    let delimiter = i.delimiter.clone().unwrap_or_default();
    let max = max_keys(i.max_keys)?;
    // The continuation token is the last key (or common prefix) of the previous page,
    // hex-encoded so that it is opaque and safe in a URL and XML.
    let after = match &i.continuation_token {
        Some(t) => String::from_utf8(hex::decode(t).map_err(|_| s3_error!(InvalidArgument, "bad continuation token"))?)
            .map_err(|_| s3_error!(InvalidArgument, "bad continuation token"))?,
        None => i.start_after.clone().unwrap_or_default(),
    };
    let page = g.key_page(&i.bucket, &prefix, &delimiter, &after, max).await?;
    let count = (page.contents.len() + page.prefixes.len()) as i32;
    Ok(S3Response::new(ListObjectsV2Output {
        name: Some(i.bucket),
        prefix: Some(prefix),
        delimiter: i.delimiter,
        max_keys: Some(max),
        key_count: Some(count),
        is_truncated: Some(page.next.is_some()),
        continuation_token: i.continuation_token,
        next_continuation_token: page.next.map(hex::encode),
        start_after: i.start_after,
        encoding_type: i.encoding_type,
        contents: Some(page.contents),
        common_prefixes: Some(page.prefixes),
        ..Default::default()
    }))
}

pub async fn list_v1(g: &Gateway, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
    let i = req.input;
    let prefix = i.prefix.clone().unwrap_or_default();
    let delimiter = i.delimiter.clone().unwrap_or_default();
    let max = max_keys(i.max_keys)?;
    let page = g.key_page(&i.bucket, &prefix, &delimiter, i.marker.as_deref().unwrap_or(""), max).await?;
    // V1 names the next marker only with a delimiter; without, the client continues from
    // the last key, which is the same.
    let next_marker = if delimiter.is_empty() { None } else { page.next.clone() };
    Ok(S3Response::new(ListObjectsOutput {
        name: Some(i.bucket),
        prefix: Some(prefix),
        delimiter: i.delimiter,
        marker: i.marker,
        max_keys: Some(max),
        is_truncated: Some(page.next.is_some()),
        next_marker,
        encoding_type: i.encoding_type,
        contents: Some(page.contents),
        common_prefixes: Some(page.prefixes),
        ..Default::default()
    }))
}
