//! Requests for guarantees kintsugi does not give, refused with S3's error before anything
//! changes: a store must never acknowledge what it does not do. KMS encryption, storage
//! classes other than STANDARD and website redirects are refused on PutObject, CopyObject and
//! CreateMultipartUpload (ACLs are [`crate::acl`]'s).
//! Operations the gateway does not serve at all answer NotImplemented from s3s. When a later
//! change implements one, it moves from here to its own module.

use s3s::dto::*;
use s3s::{s3_error, S3Result};

/// What a write asks for beyond storing bytes, gathered from any of the writing operations.
#[derive(Default)]
pub struct WriteAsks<'a> {
    pub storage_class: Option<&'a str>,
    pub kms: bool,
    pub website: bool,
    pub append: bool,
}

/// The asks of a PutObject, CopyObject or CreateMultipartUpload input (same field names).
macro_rules! write_asks {
    ($i:expr) => {
        WriteAsks {
            storage_class: $i.storage_class.as_ref().map(|c| c.as_str()),
            kms: $i.ssekms_key_id.is_some() || $i.ssekms_encryption_context.is_some() || $i.bucket_key_enabled == Some(true),
            website: $i.website_redirect_location.is_some(),
            ..Default::default()
        }
    };
}
/// Refuses a write that asks for what the store does not do.
pub fn check_write(a: &WriteAsks) -> S3Result<()> {
    if let Some(c) = a.storage_class.filter(|c| *c != "STANDARD") {
        return Err(s3_error!(InvalidStorageClass, "storage class {c}: only STANDARD (every object is stored erasure-coded alike)"));
    }
    if a.kms {
        return Err(s3_error!(NotImplemented, "KMS keys are not supported: SSE-S3 (AES256) and SSE-C are"));
    }
    if a.website {
        return Err(s3_error!(NotImplemented, "website redirects are not supported"));
    }
    if a.append {
        return Err(s3_error!(NotImplemented, "appends (x-amz-write-offset-bytes) are not supported"));
    }
    Ok(())
}

pub fn put(i: &PutObjectInput) -> S3Result<()> {
    check_write(&WriteAsks { append: i.write_offset_bytes.is_some(), ..write_asks!(i) })
}

pub fn copy(i: &CopyObjectInput) -> S3Result<()> {
    check_write(&write_asks!(i))
}

pub fn create_multipart(i: &CreateMultipartUploadInput) -> S3Result<()> {
    check_write(&write_asks!(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unsupported_ask_is_refused_with_its_code() {
        let code = |a: WriteAsks| check_write(&a).unwrap_err().code().as_str().to_string();
        assert!(check_write(&WriteAsks::default()).is_ok());
        assert!(check_write(&WriteAsks { storage_class: Some("STANDARD"), ..Default::default() }).is_ok());
        assert_eq!(code(WriteAsks { storage_class: Some("GLACIER"), ..Default::default() }), "InvalidStorageClass");
        assert_eq!(code(WriteAsks { kms: true, ..Default::default() }), "NotImplemented");
        assert_eq!(code(WriteAsks { website: true, ..Default::default() }), "NotImplemented");
        assert_eq!(code(WriteAsks { append: true, ..Default::default() }), "NotImplemented");
    }
}
