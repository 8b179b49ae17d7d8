//! What S3 says about an object beyond its bytes (ETag, Last-Modified, Content-Type, the
//! standard headers S3 stores with it, user metadata), kept in the cluster object's
//! attributes, which its commit sets with its bytes.

use crate::checksums::Stored;
use kintsugi_proto::Attrs;
use s3s::dto::{ETag, Timestamp};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ETAG: &str = "s3.etag";
const MTIME: &str = "s3.mtime";
const TYPE: &str = "s3.type";
const USER: &str = "s3.meta.";
const CACHE_CONTROL: &str = "s3.h.cache-control";
const DISPOSITION: &str = "s3.h.content-disposition";
const ENCODING: &str = "s3.h.content-encoding";
const LANGUAGE: &str = "s3.h.content-language";
const EXPIRES: &str = "s3.h.expires";
const CHECKSUM: &str = "s3.checksum";
const PARTS: &str = "s3.parts";
const UPLOAD: &str = "s3.upload";

/// An object's S3 attributes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectMeta {
    /// Hex MD5 of the body, or for a multipart object the MD5 of its parts' MD5s and `-N`.
    pub etag: String,
    /// When it was written, ms since the epoch.
    pub mtime_ms: u64,
    pub content_type: Option<String>,
    /// Cache-Control, Content-Disposition, Content-Encoding, Content-Language and Expires as
    /// written: S3 stores them and returns them on GET and HEAD.
    pub headers: StoredHeaders,
    /// `x-amz-meta-*`, names in lower case.
    pub user: BTreeMap<String, String>,
    /// The additional checksum written with it, if one was asked for.
    pub checksum: Option<Stored>,
    /// A multipart object's part sizes, in order (for GET and HEAD by part number).
    pub parts: Option<Vec<u64>>,
    /// The multipart upload that made it (a repeated completion answers success again).
    pub upload: Option<String>,
    /// Its tags.
    pub tags: crate::tagging::Tags,
    /// Its object lock: retention and legal hold (enforced by the coordinator).
    pub lock: crate::object_lock::Lock,
    /// Its encryption at rest, if it is encrypted.
    pub sse: Option<crate::sse::Sealed>,
    /// Its canned ACL (taken only in a bucket whose Object Ownership allows ACLs).
    pub acl: crate::acl::Canned,
}

/// The standard headers S3 keeps with an object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredHeaders {
    pub cache_control: Option<String>,
    pub content_disposition: Option<String>,
    pub content_encoding: Option<String>,
    pub content_language: Option<String>,
    pub expires: Option<s3s::dto::Timestamp>,
}

/// The stored headers of a PutObject, CopyObject or CreateMultipartUpload input (the same
/// field names in each).
macro_rules! stored_headers {
    ($i:expr) => {
        $crate::object_meta::StoredHeaders {
            cache_control: $i.cache_control.clone(),
            content_disposition: $i.content_disposition.clone(),
            content_encoding: $i.content_encoding.clone(),
            content_language: $i.content_language.clone(),
            expires: $i.expires.clone(),
        }
    };
}
pub(crate) use stored_headers;

fn http_date(t: &Timestamp) -> Option<String> {
    let mut out = Vec::new();
    t.format(s3s::dto::TimestampFormat::HttpDate, &mut out).ok()?;
    String::from_utf8(out).ok()
}

impl ObjectMeta {
    pub fn to_attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        a.insert(ETAG.into(), self.etag.clone());
        a.insert(MTIME.into(), self.mtime_ms.to_string());
        if let Some(t) = &self.content_type {
            a.insert(TYPE.into(), t.clone());
        }
        let h = &self.headers;
        for (k, v) in [
            (CACHE_CONTROL, h.cache_control.clone()),
            (DISPOSITION, h.content_disposition.clone()),
            (ENCODING, h.content_encoding.clone()),
            (LANGUAGE, h.content_language.clone()),
            (EXPIRES, h.expires.as_ref().and_then(http_date)),
        ] {
            if let Some(v) = v {
                a.insert(k.into(), v);
            }
        }
        for (k, v) in &self.user {
            a.insert(format!("{USER}{k}"), v.clone());
        }
        if let Some(c) = &self.checksum {
            let t = if c.composite { "COMPOSITE" } else { "FULL_OBJECT" };
            a.insert(CHECKSUM.into(), format!("{} {t} {}", c.algorithm, c.value));
        }
        if let Some(p) = self.parts.as_deref().and_then(part_runs) {
            a.insert(PARTS.into(), p);
        }
        if let Some(u) = &self.upload {
            a.insert(UPLOAD.into(), u.clone());
        }
        self.lock.write(&mut a);
        if let Some(s) = &self.sse {
            s.write(&mut a);
        }
        self.acl.write(&mut a);
        crate::tagging::with_tags(a, &self.tags)
    }

    /// The attributes of an object written through S3 (an object written otherwise has
    /// none: an empty ETag, and its mtime unknown).
    pub fn from_attrs(a: &Attrs) -> Self {
        ObjectMeta {
            etag: a.get(ETAG).cloned().unwrap_or_default(),
            mtime_ms: a.get(MTIME).and_then(|m| m.parse().ok()).unwrap_or(0),
            content_type: a.get(TYPE).cloned(),
            headers: StoredHeaders {
                cache_control: a.get(CACHE_CONTROL).cloned(),
                content_disposition: a.get(DISPOSITION).cloned(),
                content_encoding: a.get(ENCODING).cloned(),
                content_language: a.get(LANGUAGE).cloned(),
                expires: a.get(EXPIRES).and_then(|e| Timestamp::parse(s3s::dto::TimestampFormat::HttpDate, e).ok()),
            },
            user: a.iter().filter_map(|(k, v)| Some((k.strip_prefix(USER)?.to_string(), v.clone()))).collect(),
            checksum: a.get(CHECKSUM).and_then(|c| {
                let mut w = c.split(' ');
                let (algorithm, t, value) = (w.next()?.parse().ok()?, w.next()?, w.next()?);
                Some(Stored { algorithm, value: value.to_string(), composite: t == "COMPOSITE" })
            }),
            parts: a.get(PARTS).and_then(|p| parts_of_runs(p)),
            upload: a.get(UPLOAD).cloned(),
            tags: crate::tagging::of_attrs(a),
            lock: crate::object_lock::Lock::of_attrs(a),
            sse: crate::sse::Sealed::of_attrs(a),
            acl: crate::acl::Canned::of_attrs(a),
        }
    }

    /// The object's length as S3 answers it: the plaintext's, of an object whose cluster
    /// object of `stored` bytes holds it encrypted.
    pub fn size(&self, stored: u64) -> u64 {
        self.sse.as_ref().map_or(stored, |s| s.size)
    }

    /// The plaintext sizes of the parts an encrypted object's packages were sealed in: a
    /// multipart object's parts, else one.
    pub fn sealed_parts(&self) -> Vec<u64> {
        match (&self.sse, &self.upload, &self.parts) {
            (Some(_), Some(_), Some(parts)) => parts.clone(),
            (s, _, _) => vec![s.as_ref().map_or(0, |s| s.size)],
        }
    }

    pub fn etag(&self) -> ETag {
        ETag::Strong(self.etag.clone())
    }

    /// Last-Modified: HTTP dates have whole seconds, so the time is cut to them (else an
    /// If-Modified-Since of the very Last-Modified sent would find the object newer).
    pub fn last_modified(&self) -> Timestamp {
        Timestamp::from(UNIX_EPOCH + Duration::from_secs(self.mtime_ms / 1000))
    }

    /// User metadata as s3s hands it over.
    pub fn user_map(&self) -> Option<s3s::dto::Metadata> {
        (!self.user.is_empty()).then(|| self.user.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
}

/// Part sizes as runs (`size*count,...`): uploads of equal parts, the common case, take a
/// few bytes whatever their number. None when the runs would crowd the object's attributes
/// (then the object cannot be read by part number).
fn part_runs(sizes: &[u64]) -> Option<String> {
    let mut runs: Vec<(u64, usize)> = Vec::new();
    for &s in sizes {
        match runs.last_mut() {
            Some((size, n)) if *size == s => *n += 1,
            _ => runs.push((s, 1)),
        }
    }
    let out = runs.iter().map(|(s, n)| format!("{s}*{n}")).collect::<Vec<_>>().join(",");
    (out.len() <= MAX_PART_RUNS_BYTES).then_some(out)
}

/// The most bytes part sizes may take in an object's attributes.
const MAX_PART_RUNS_BYTES: usize = 4096;

fn parts_of_runs(r: &str) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    for run in r.split(',') {
        let (s, n) = run.split_once('*')?;
        let (s, n): (u64, usize) = (s.parse().ok()?, n.parse().ok()?);
        out.extend(std::iter::repeat_n(s, n.min(crate::multipart::MAX_PART_NUMBER as usize)));
    }
    Some(out)
}

/// Now, in ms since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// User metadata from a request, names in lower case; S3 allows 2 KiB of it.
pub fn user_metadata(m: Option<s3s::dto::Metadata>) -> Result<BTreeMap<String, String>, s3s::S3Error> {
    let user: BTreeMap<String, String> = m.unwrap_or_default().into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
    let bytes: usize = user.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > 2048 {
        return Err(s3s::s3_error!(MetadataTooLarge, "user metadata takes {bytes} bytes, over S3's 2 KiB"));
    }
    Ok(user)
}

/// The ETag of a multipart object: the MD5 of its parts' binary MD5s, then `-` and the
/// number of parts (what S3 and every S3 tool compute).
pub fn multipart_etag(part_etags: &[String]) -> Result<String, String> {
    use md5::Digest;
    let mut h = md5::Md5::new();
    for e in part_etags {
        h.update(hex::decode(e).map_err(|_| format!("part ETag '{e}' is not an MD5"))?);
    }
    Ok(format!("{}-{}", hex::encode(h.finalize()), part_etags.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_and_other_attributes_are_ignored() {
        let m = ObjectMeta {
            etag: "d41d8cd98f00b204e9800998ecf8427e".into(),
            mtime_ms: 1_700_000_000_123,
            content_type: Some("text/plain".into()),
            headers: StoredHeaders {
                cache_control: Some("max-age=60".into()),
                content_disposition: Some("attachment; filename=\"a b.txt\"".into()),
                content_encoding: Some("gzip".into()),
                content_language: Some("de-CH".into()),
                expires: Some(Timestamp::from(UNIX_EPOCH + Duration::from_secs(1_800_000_000))),
            },
            user: [("colour".to_string(), "blue".to_string())].into(),
            checksum: Some(Stored { algorithm: crate::checksums::Algorithm::Crc32c, value: "yZRlqg==".into(), composite: true }),
            parts: Some(vec![5 << 20, 5 << 20, 5 << 20, 17, 5 << 20, 1]),
            upload: Some("u1".into()),
            sse: Some(crate::sse::Sealed { by: crate::sse::SealedBy::Master("k1".into()), wrapped: vec![9; 60], size: 5 }),
            acl: crate::acl::Canned::PublicRead,
            tags: [("project".to_string(), "x y".to_string())].into(),
            lock: crate::object_lock::Lock {
                retention: Some(kintsugi_proto::retention::Retention {
                    mode: kintsugi_proto::retention::Mode::Governance,
                    until_ms: 1_900_000_000_000,
                }),
                legal_hold: true,
            },
        };
        let mut a = m.to_attrs();
        a.insert("other".into(), "x".into());
        assert_eq!(ObjectMeta::from_attrs(&a), m);
        assert_eq!(m.last_modified(), Timestamp::from(UNIX_EPOCH + Duration::from_secs(1_700_000_000)));
        assert_eq!(a.get(PARTS).unwrap(), "5242880*3,17*1,5242880*1,1*1");
        // Part sizes that would crowd the attributes are not kept.
        let many: Vec<u64> = (1..2000).collect();
        assert!(part_runs(&many).is_none());
        assert_eq!(parts_of_runs(&part_runs(&[7; 10_000]).unwrap()).unwrap(), vec![7; 10_000]);
    }

    #[test]
    fn a_multipart_etag_is_the_md5_of_the_parts_md5s() {
        // Known answer, computed independently: python3 -c "import hashlib;
        // print(hashlib.md5(bytes.fromhex('900150983cd24fb0d6963f7d28e17f72') +
        // bytes.fromhex('5d41402abc4b2a76b9719d911017c592')).hexdigest())"
        let e = multipart_etag(&["900150983cd24fb0d6963f7d28e17f72".into(), "5d41402abc4b2a76b9719d911017c592".into()]).unwrap();
        assert_eq!(e, "2605b9d5bde78fd2f9d7f0f75973da26-2");
        assert!(multipart_etag(&["zz".into()]).is_err());
    }
}
