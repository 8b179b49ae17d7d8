//! ListObjectsV2 and V1: one page of the cluster's name-ordered listing under the bucket's
//! prefix (the coordinator reads only that page), keys shown without the bucket. With
//! `encoding-type=url` every key, prefix, delimiter and marker in the answer is URL-encoded, as
//! S3 does: SDKs (boto3, the aws cli) always ask for it and decode what comes back, so a key
//! with `+` or `%` sent as is would come back to them as another key.

use crate::errors::from_cluster;
use crate::gateway::Gateway;
use crate::names;
use crate::object_meta::ObjectMeta;
use kintsugi_client::VersionsPage;
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
                        size: Some(m.size(o.size) as i64),
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

/// What `encoding-type=url` escapes: everything but unreserved characters and `/` (so `+`
/// and spaces too, which decoders that take `+` for a space would otherwise mistake).
const KEY_ESCAPES: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');

/// How names appear in a listing's answer: as they are, or URL-encoded when asked.
pub(crate) struct Names(bool);

impl Names {
    pub(crate) fn of(encoding_type: Option<&EncodingType>) -> S3Result<Names> {
        match encoding_type.map(|e| e.as_str()) {
            None => Ok(Names(false)),
            Some("url") => Ok(Names(true)),
            Some(other) => Err(s3_error!(InvalidArgument, "Invalid Encoding Method specified in Request: '{other}' (only url)")),
        }
    }

    pub(crate) fn show(&self, name: String) -> String {
        if self.0 {
            percent_encoding::utf8_percent_encode(&name, KEY_ESCAPES).to_string()
        } else {
            name
        }
    }

    fn page(&self, mut page: KeyPage) -> KeyPage {
        for o in &mut page.contents {
            o.key = o.key.take().map(|k| self.show(k));
        }
        for p in &mut page.prefixes {
            p.prefix = p.prefix.take().map(|k| self.show(k));
        }
        page
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
    let names = Names::of(i.encoding_type.as_ref())?;
    let page = g.key_page(&i.bucket, &prefix, &delimiter, &after, max).await?;
    let count = (page.contents.len() + page.prefixes.len()) as i32;
    // The token stays opaque (hex of the raw key): it is not a name.
    let next_token = page.next.as_ref().map(hex::encode);
    let mut page = names.page(page);
    if i.fetch_owner == Some(true) {
        page.contents.iter_mut().for_each(|o| o.owner = Some(crate::buckets::owner()));
    }
    Ok(S3Response::new(ListObjectsV2Output {
        name: Some(i.bucket),
        prefix: Some(names.show(prefix)),
        delimiter: i.delimiter.map(|d| names.show(d)),
        max_keys: Some(max),
        key_count: Some(count),
        is_truncated: Some(page.next.is_some()),
        continuation_token: i.continuation_token,
        next_continuation_token: next_token,
        start_after: i.start_after.map(|s| names.show(s)),
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
    let names = Names::of(i.encoding_type.as_ref())?;
    let page = g.key_page(&i.bucket, &prefix, &delimiter, i.marker.as_deref().unwrap_or(""), max).await?;
    // V1 names the next marker only with a delimiter; without, the client continues from
    // the last key, which is the same.
    let next_marker = if delimiter.is_empty() { None } else { page.next.clone().map(|m| names.show(m)) };
    let mut page = names.page(page);
    // V1 names every object's owner.
    page.contents.iter_mut().for_each(|o| o.owner = Some(crate::buckets::owner()));
    Ok(S3Response::new(ListObjectsOutput {
        name: Some(i.bucket),
        prefix: Some(names.show(prefix)),
        delimiter: i.delimiter.map(|d| names.show(d)),
        marker: i.marker.map(|m| names.show(m)),
        max_keys: Some(max),
        is_truncated: Some(page.next.is_some()),
        next_marker,
        encoding_type: i.encoding_type,
        contents: Some(page.contents),
        common_prefixes: Some(page.prefixes),
        ..Default::default()
    }))
}

/// ListObjectVersions: one page of the cluster's version listing under the bucket's prefix
/// (keys in order, each one's versions newest first; the coordinator reads only that page).
/// In a bucket never versioned each object is its one version, "null" and latest.
pub async fn list_versions(g: &Gateway, req: S3Request<ListObjectVersionsInput>) -> S3Result<S3Response<ListObjectVersionsOutput>> {
    let i = req.input;
    let prefix = i.prefix.clone().unwrap_or_default();
    let delimiter = i.delimiter.clone().unwrap_or_default();
    let max = max_keys(i.max_keys)?;
    let names = Names::of(i.encoding_type.as_ref())?;
    let key_marker = i.key_marker.clone().unwrap_or_default();
    let version_marker = i.version_id_marker.as_deref().filter(|v| !v.is_empty());
    if version_marker.is_some() && key_marker.is_empty() {
        return Err(s3_error!(InvalidArgument, "A version-id marker cannot be specified without a key marker."));
    }
    let version_marker = crate::versioning::parse_id(version_marker)?;
    let b = names::bucket_prefix(&i.bucket);
    let listing = if max == 0 {
        g.bucket(&i.bucket).await?;
        kintsugi_client::VersionListing::default()
    } else {
        let marker = if key_marker.is_empty() { String::new() } else { format!("{b}{key_marker}") };
        let page =
            VersionsPage { prefix: &format!("{b}{prefix}"), delimiter: &delimiter, key_marker: &marker, version_marker, limit: max as u32 };
        let l = g.client.list_versions(page).await.map_err(from_cluster)?;
        if l.versions.is_empty() && l.prefixes.is_empty() {
            g.bucket(&i.bucket).await?;
        }
        l
    };
    let strip = |n: &str| names.show(n.strip_prefix(&b).unwrap_or(n).to_string());
    let (mut versions, mut markers) = (Vec::new(), Vec::new());
    for v in listing.versions {
        let key = Some(strip(&v.name));
        let version_id = Some(v.id().to_string());
        if v.delete_marker {
            markers.push(DeleteMarkerEntry {
                key,
                version_id,
                is_latest: Some(v.latest),
                last_modified: Some(ObjectMeta { mtime_ms: v.created_ms, ..Default::default() }.last_modified()),
                owner: Some(crate::buckets::owner()),
            });
            continue;
        }
        let m = ObjectMeta::from_attrs(&v.attrs);
        versions.push(ObjectVersion {
            key,
            version_id,
            is_latest: Some(v.latest),
            size: Some(m.size(v.size) as i64),
            e_tag: Some(m.etag()),
            last_modified: Some(m.last_modified()),
            owner: Some(crate::buckets::owner()),
            storage_class: Some(ObjectVersionStorageClass::from_static(ObjectVersionStorageClass::STANDARD)),
            ..Default::default()
        });
    }
    let (next_key, next_version) = match listing.next {
        Some((k, v)) => (Some(strip(&k)), v.map(|v| v.to_string())),
        None => (None, None),
    };
    Ok(S3Response::new(ListObjectVersionsOutput {
        name: Some(i.bucket),
        prefix: Some(names.show(prefix)),
        delimiter: i.delimiter.map(|d| names.show(d)),
        key_marker: Some(names.show(key_marker)),
        version_id_marker: i.version_id_marker,
        max_keys: Some(max),
        is_truncated: Some(next_key.is_some()),
        next_version_id_marker: next_version,
        next_key_marker: next_key,
        encoding_type: i.encoding_type,
        versions: Some(versions),
        delete_markers: Some(markers),
        common_prefixes: Some(listing.prefixes.iter().map(|p| CommonPrefix { prefix: Some(strip(p)) }).collect()),
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_encoded_names_escape_what_decoders_would_misread() {
        let url = Names(true);
        assert_eq!(url.show("a+b c%/ü~x.y_z-1".into()), "a%2Bb%20c%25/%C3%BC~x.y_z-1");
        assert_eq!(url.show("q?#&=;,'".into()), "q%3F%23%26%3D%3B%2C%27");
        assert_eq!(Names(false).show("a+b c".into()), "a+b c");
        assert!(Names::of(Some(&EncodingType::from_static("base64"))).is_err());
    }
}
