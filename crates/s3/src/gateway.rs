//! The S3 trait over a kintsugi cluster: each operation is a function of its module
//! (`buckets`, `objects`, `listing`, `multipart`); what is not here answers NotImplemented.

use crate::settings::BucketSettings;
use crate::{buckets, cors, lifecycle, listing, multipart, object_lock, objects, tagging, unsupported, versioning};
use kintsugi_client::Client;
use kintsugi_plan::Shape;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

/// The gateway's state: how to reach the cluster and what to do by default. Nothing else:
/// every gateway of a cluster sees the same buckets and objects.
#[derive(Clone)]
pub struct Gateway {
    pub client: Client,
    /// Settings of buckets created without `x-kintsugi-*` headers.
    pub defaults: BucketSettings,
    /// How degraded reads rebuild an unavailable chunk.
    pub method: Shape,
    pub slice: u64,
    /// Every part of a multipart upload but the last is at least this large (S3: 5 MiB).
    pub min_part: u64,
    /// Memory for bodies in flight, shared by every request.
    pub memory: std::sync::Arc<crate::memory_budget::MemoryBudget>,
    /// The region it answers for.
    pub region: String,
    /// Buckets' CORS rules as last read.
    pub cors: crate::cors::RulesCache,
    /// Buckets' versioning states as last read.
    pub versioning_states: crate::versioning::StateCache,
    /// The keys requests are signed with and what each may do (none: the gateway is used
    /// in-process, as by the CLI, where nothing is signed).
    pub keys: Option<std::sync::Arc<crate::access::Keys>>,
    /// SSE-S3's master keys (none: SSE-S3 is refused; SSE-C needs none).
    pub master_keys: Option<std::sync::Arc<crate::sse::MasterKeys>>,
    /// Buckets' policies as the access check last read them (none in-process).
    pub policies: Option<std::sync::Arc<crate::bucket_policy::Policies>>,
}

impl Gateway {
    /// A gateway with S3's part size and the default memory budget.
    pub fn new(client: Client, defaults: BucketSettings, method: Shape, slice: u64) -> Self {
        Gateway {
            client,
            defaults,
            method,
            slice,
            min_part: crate::multipart::MIN_PART,
            memory: std::sync::Arc::new(crate::memory_budget::MemoryBudget::new(crate::memory_budget::DEFAULT_BUDGET)),
            region: crate::server::DEFAULT_REGION.into(),
            cors: Default::default(),
            versioning_states: Default::default(),
            keys: None,
            master_keys: None,
            policies: None,
        }
    }

    /// The scoped key that signed `req`, if one did (None for a bootstrap key).
    pub async fn scoped_signer(&self, credentials: Option<&s3s::auth::Credentials>) -> S3Result<Option<crate::access_keys::ScopedKey>> {
        let (Some(keys), Some(c)) = (&self.keys, credentials) else { return Ok(None) };
        Ok(match keys.principal(&c.access_key).await? {
            Some(crate::access::Principal::Scoped(k)) => Some(k),
            _ => None,
        })
    }
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        buckets::create(self, req).await
    }
    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        buckets::head(self, req).await
    }
    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        buckets::delete(self, req).await
    }
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        buckets::list(self, req).await
    }
    async fn get_bucket_location(&self, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
        buckets::location(self, req).await
    }
    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        unsupported::put(&req.input)?;
        // A POST form (s3s's PostObject comes here): its file's name is not handed over,
        // so a key naming it is refused rather than stored under the literal variable.
        if req.method == http::Method::POST && req.input.key.contains("${filename}") {
            return Err(s3s::s3_error!(
                NotImplemented,
                "the ${{filename}} variable in a form's key is not supported: give the key in full"
            ));
        }
        objects::put(self, req).await
    }
    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        objects::get(self, req).await
    }
    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        objects::head(self, req).await
    }
    async fn put_bucket_acl(&self, req: S3Request<PutBucketAclInput>) -> S3Result<S3Response<PutBucketAclOutput>> {
        crate::acl::put_bucket(self, req).await
    }
    async fn get_bucket_acl(&self, req: S3Request<GetBucketAclInput>) -> S3Result<S3Response<GetBucketAclOutput>> {
        crate::acl::get_bucket(self, req).await
    }
    async fn put_object_acl(&self, req: S3Request<PutObjectAclInput>) -> S3Result<S3Response<PutObjectAclOutput>> {
        crate::acl::put_object(self, req).await
    }
    async fn get_object_acl(&self, req: S3Request<GetObjectAclInput>) -> S3Result<S3Response<GetObjectAclOutput>> {
        crate::acl::get_object(self, req).await
    }
    async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        crate::acl::put_ownership(self, req).await
    }
    async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        crate::acl::get_ownership(self, req).await
    }
    async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        crate::acl::delete_ownership(self, req).await
    }
    async fn put_bucket_policy(&self, req: S3Request<PutBucketPolicyInput>) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        crate::bucket_policy::put(self, req).await
    }
    async fn get_bucket_policy(&self, req: S3Request<GetBucketPolicyInput>) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        crate::bucket_policy::get(self, req).await
    }
    async fn delete_bucket_policy(&self, req: S3Request<DeleteBucketPolicyInput>) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        crate::bucket_policy::delete(self, req).await
    }
    async fn put_bucket_encryption(&self, req: S3Request<PutBucketEncryptionInput>) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
        crate::sse::bucket_default::put(self, req).await
    }
    async fn get_bucket_encryption(&self, req: S3Request<GetBucketEncryptionInput>) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        crate::sse::bucket_default::get(self, req).await
    }
    async fn delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
        crate::sse::bucket_default::delete(self, req).await
    }
    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        objects::delete(self, req).await
    }
    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        objects::delete_many(self, req).await
    }
    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        unsupported::copy(&req.input)?;
        objects::copy(self, req).await
    }
    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        listing::list_v2(self, req).await
    }
    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        listing::list_v1(self, req).await
    }
    async fn put_object_tagging(&self, req: S3Request<PutObjectTaggingInput>) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        tagging::put_object(self, req).await
    }
    async fn get_object_tagging(&self, req: S3Request<GetObjectTaggingInput>) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        tagging::get_object(self, req).await
    }
    async fn delete_object_tagging(&self, req: S3Request<DeleteObjectTaggingInput>) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        tagging::delete_object(self, req).await
    }
    async fn put_bucket_tagging(&self, req: S3Request<PutBucketTaggingInput>) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        tagging::put_bucket(self, req).await
    }
    async fn get_bucket_tagging(&self, req: S3Request<GetBucketTaggingInput>) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        tagging::get_bucket(self, req).await
    }
    async fn delete_bucket_tagging(&self, req: S3Request<DeleteBucketTaggingInput>) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        tagging::delete_bucket(self, req).await
    }
    async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        lifecycle::put(self, req).await
    }
    async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        lifecycle::get(self, req).await
    }
    async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        lifecycle::delete(self, req).await
    }
    async fn put_bucket_cors(&self, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
        cors::put(self, req).await
    }
    async fn get_bucket_cors(&self, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
        cors::get(self, req).await
    }
    async fn delete_bucket_cors(&self, req: S3Request<DeleteBucketCorsInput>) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        cors::delete(self, req).await
    }
    async fn put_bucket_versioning(&self, req: S3Request<PutBucketVersioningInput>) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        versioning::put(self, req).await
    }
    async fn get_bucket_versioning(&self, req: S3Request<GetBucketVersioningInput>) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        versioning::get(self, req).await
    }
    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        object_lock::put_configuration(self, req).await
    }
    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        object_lock::get_configuration(self, req).await
    }
    async fn put_object_retention(&self, req: S3Request<PutObjectRetentionInput>) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        object_lock::put_retention(self, req).await
    }
    async fn get_object_retention(&self, req: S3Request<GetObjectRetentionInput>) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        object_lock::get_retention(self, req).await
    }
    async fn put_object_legal_hold(&self, req: S3Request<PutObjectLegalHoldInput>) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        object_lock::put_legal_hold(self, req).await
    }
    async fn get_object_legal_hold(&self, req: S3Request<GetObjectLegalHoldInput>) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        object_lock::get_legal_hold(self, req).await
    }
    async fn list_object_versions(&self, req: S3Request<ListObjectVersionsInput>) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        listing::list_versions(self, req).await
    }
    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        unsupported::create_multipart(&req.input)?;
        multipart::create(self, req).await
    }
    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        multipart::upload_part(self, req).await
    }
    async fn upload_part_copy(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        multipart::upload_part_copy(self, req).await
    }
    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        multipart::complete(self, req).await
    }
    async fn abort_multipart_upload(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        multipart::abort(self, req).await
    }
    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        multipart::list_parts(self, req).await
    }
    async fn list_multipart_uploads(&self, req: S3Request<ListMultipartUploadsInput>) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        multipart::list_uploads(self, req).await
    }
}
