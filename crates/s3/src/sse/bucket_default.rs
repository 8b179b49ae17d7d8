//! A bucket's default encryption (Put/Get/DeleteBucketEncryption): objects written without
//! an encryption header are sealed with SSE-S3.

use crate::gateway::Gateway;
use crate::names;
use kintsugi_proto::Attrs;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The bucket attribute that holds it ("AES256").
const DEFAULT_ATTR: &str = "s3.sse.default";

/// Whether a bucket with these attributes encrypts by default.
pub fn encrypts(bucket_attrs: &Attrs) -> bool {
    bucket_attrs.contains_key(DEFAULT_ATTR)
}

pub async fn put(g: &Gateway, req: S3Request<PutBucketEncryptionInput>) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
    let i = req.input;
    let rules = i.server_side_encryption_configuration.rules;
    let [rule] = &rules[..] else {
        return Err(s3_error!(MalformedXML, "an encryption configuration holds exactly one rule"));
    };
    let d = rule
        .apply_server_side_encryption_by_default
        .as_ref()
        .ok_or_else(|| s3_error!(MalformedXML, "the rule has no ApplyServerSideEncryptionByDefault"))?;
    if d.sse_algorithm.as_str() != ServerSideEncryption::AES256 || d.kms_master_key_id.is_some() {
        return Err(s3_error!(
            NotImplemented,
            "default encryption '{}': AES256 (SSE-S3) only; KMS keys are not supported",
            d.sse_algorithm.as_str()
        ));
    }
    if g.master_keys.is_none() {
        return Err(s3_error!(
            NotImplemented,
            "SSE-S3 needs the gateway's master key file (kintsugi s3 --sse-key-file); none is configured"
        ));
    }
    let b = i.bucket.clone();
    let set = |mut a: Attrs| {
        a.insert(DEFAULT_ATTR.into(), ServerSideEncryption::AES256.into());
        a
    };
    g.update_attrs(&names::bucket_record(&i.bucket), &set, &|| s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    tracing::info!("bucket '{}': new objects are encrypted (SSE-S3) by default", i.bucket);
    Ok(S3Response::new(PutBucketEncryptionOutput::default()))
}

pub async fn get(g: &Gateway, req: S3Request<GetBucketEncryptionInput>) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
    let (_, attrs) = g.bucket_and_attrs(&req.input.bucket).await?;
    if !encrypts(&attrs) {
        return Err(s3_error!(ServerSideEncryptionConfigurationNotFoundError, "The server side encryption configuration was not found"));
    }
    let rule = ServerSideEncryptionRule {
        apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
            sse_algorithm: ServerSideEncryption::from_static(ServerSideEncryption::AES256),
            kms_master_key_id: None,
        }),
        bucket_key_enabled: Some(false),
    };
    Ok(S3Response::new(GetBucketEncryptionOutput {
        server_side_encryption_configuration: Some(ServerSideEncryptionConfiguration { rules: vec![rule] }),
    }))
}

pub async fn delete(g: &Gateway, req: S3Request<DeleteBucketEncryptionInput>) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
    let b = req.input.bucket.clone();
    let set = |mut a: Attrs| {
        a.remove(DEFAULT_ATTR);
        a
    };
    g.update_attrs(&names::bucket_record(&b), &set, &|| s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    Ok(S3Response::new(DeleteBucketEncryptionOutput::default()))
}
