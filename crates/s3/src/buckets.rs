//! Buckets: records in the cluster (see `names`), created with their storage settings,
//! deleted only when empty.

use crate::errors::{from_cluster, is_missing};
use crate::gateway::Gateway;
use crate::names;
use crate::settings::{self, BucketSettings};
use kintsugi_client::CommitTerms;
use kintsugi_proto::{Attrs, LayoutSpec, Precondition};
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

impl Gateway {
    /// The settings of `bucket`, or NoSuchBucket.
    pub async fn bucket(&self, bucket: &str) -> S3Result<BucketSettings> {
        self.bucket_and_attrs(bucket).await.map(|(s, _)| s)
    }

    /// `bucket`'s settings and its record's attributes (object lock, CORS, tags), in one read.
    pub async fn bucket_and_attrs(&self, bucket: &str) -> S3Result<(BucketSettings, Attrs)> {
        let attrs = self.bucket_attrs(bucket).await?;
        let s = BucketSettings::from_attrs(&attrs).map_err(|e| s3_error!(InternalError, "bucket '{bucket}': {e}"))?;
        Ok((s, attrs))
    }

    /// The attributes of `bucket`'s record (its settings, tags, CORS rules), or NoSuchBucket.
    pub async fn bucket_attrs(&self, bucket: &str) -> S3Result<Attrs> {
        match self.client.stat(&names::bucket_record(bucket)).await {
            Ok(l) => Ok(l.attrs),
            Err(e) if is_missing(&e) => Err(s3_error!(NoSuchBucket, "no bucket named '{bucket}'")),
            Err(e) => Err(from_cluster(e)),
        }
    }

    /// Creates `bucket` with `settings`; BucketAlreadyOwnedByYou if it exists (one tenant).
    pub async fn create_bucket_with(&self, bucket: &str, settings: BucketSettings) -> S3Result<()> {
        self.create_bucket_locked(bucket, settings, false).await
    }

    /// Creates `bucket` as [`Gateway::create_bucket_with`], with object lock (and so
    /// versioning) enabled from the start when `lock`.
    pub async fn create_bucket_locked(&self, bucket: &str, settings: BucketSettings, lock: bool) -> S3Result<()> {
        if !s3s::path::check_bucket_name(bucket) {
            return Err(s3_error!(InvalidBucketName, "'{bucket}': 3 to 63 lower-case letters, digits, dots and hyphens"));
        }
        let exists = || s3_error!(BucketAlreadyOwnedByYou, "bucket '{bucket}' exists");
        if self.bucket(bucket).await.is_ok() {
            return Err(exists());
        }
        let mut attrs = settings.to_attrs(crate::object_meta::now_ms());
        if lock {
            if !matches!(settings.layout, LayoutSpec::Stripe | LayoutSpec::StripeMax) {
                return Err(s3_error!(
                    InvalidBucketState,
                    "object lock keeps versions, which the {} layout does not: use a stripe layout",
                    settings::layout_name(settings.layout)
                ));
            }
            crate::object_lock::created_enabled(&mut attrs);
        }
        // Created only if still absent at the commit: of two creations at once, one wins.
        let terms = CommitTerms { attrs, precondition: Some(Precondition::Absent), ..Default::default() };
        match self.put_record(&names::bucket_record(bucket), settings, terms).await {
            Err(e) if *e.code() == s3s::S3ErrorCode::PreconditionFailed => Err(exists()),
            r => r,
        }
    }

    /// Changes the attributes of committed object `name` by `change`, at the version read
    /// (read again and retried if it is replaced meanwhile); `missing` is the error for an
    /// object that is not there.
    pub async fn update_attrs(
        &self,
        name: &str,
        change: &(dyn Fn(Attrs) -> Attrs + Sync),
        missing: &(dyn Fn() -> s3s::S3Error + Sync),
    ) -> S3Result<()> {
        for _ in 0..5 {
            let l = match self.client.stat(name).await {
                Ok(l) if l.committed => l,
                Ok(_) => return Err(missing()),
                Err(e) if is_missing(&e) => return Err(missing()),
                Err(e) => return Err(from_cluster(e)),
            };
            match self.client.set_attrs(name, l.version, change(l.attrs)).await {
                Ok(()) => return Ok(()),
                // Replaced meanwhile: change what is there now.
                Err(e) if e.kind() == kintsugi_client::ErrorKind::PreconditionFailed => continue,
                Err(e) if is_missing(&e) => return Err(missing()),
                Err(e) => return Err(from_cluster(e)),
            }
        }
        Err(s3_error!(SlowDown, "'{name}' kept changing while its attributes were set"))
    }

    /// A zero-byte record object committed on `terms`.
    pub async fn put_record(&self, name: &str, settings: BucketSettings, terms: impl Into<CommitTerms>) -> S3Result<()> {
        let mut empty: &[u8] = &[];
        let mut terms = Some(terms.into());
        self.client
            .put_with_attrs(name, &mut empty, 0, settings.code, 0, LayoutSpec::Stripe, &|_| {}, &mut || {
                Ok(terms.take().unwrap_or_default())
            })
            .await
            .map_err(from_cluster)?;
        Ok(())
    }
}

pub async fn create(g: &Gateway, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
    check_location(&g.region, &req.input)?;
    let settings = BucketSettings::from_headers(&req.headers, g.defaults).map_err(|e| s3_error!(InvalidArgument, "{e}"))?;
    let lock = req.input.object_lock_enabled_for_bucket == Some(true);
    let acls = crate::acl::at_creation(&req.input)?;
    let creator = g.scoped_signer(req.credentials.as_ref()).await?;
    let bucket = req.input.bucket;
    g.create_bucket_locked(&bucket, settings, lock).await?;
    if let Some((ownership, acl)) = acls {
        crate::acl::set_at_creation(g, &bucket, ownership, acl).await?;
    }
    // A scoped key owns the buckets it creates.
    if let Some(k) = creator {
        crate::access_keys::grant(&g.client, &k.access_key, &bucket, Some(crate::access_keys::Permission::Owner))
            .await
            .map_err(|e| s3_error!(InternalError, "bucket '{bucket}' created, but its owner key was not granted it: {e}"))?;
        if let Some(keys) = &g.keys {
            keys.forget(&k.access_key);
        }
    }
    tracing::info!("bucket '{bucket}' created: {} in {}", settings.code, settings::layout_name(settings.layout));
    let mut resp = S3Response::new(CreateBucketOutput { location: Some(format!("/{bucket}")) });
    // Said where the creator sees it (a response header) and in the log: a code as wide as
    // the cluster leaves no node to rebuild a lost one's chunks on.
    let width = settings.code.build().map(|c| c.n()).unwrap_or(0);
    if let Ok(Some(why)) = g.client.cannot_heal(width).await {
        tracing::warn!("bucket '{bucket}': {why}");
        if let Ok(v) = http::HeaderValue::from_str(&why) {
            resp.headers.insert(WARNING_HEADER, v);
        }
    }
    Ok(resp)
}

pub async fn head(g: &Gateway, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
    g.bucket(&req.input.bucket).await?;
    Ok(S3Response::new(HeadBucketOutput::default()))
}

pub async fn delete(g: &Gateway, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
    let bucket = req.input.bucket;
    g.bucket(&bucket).await?;
    let (objects, prefixes, _) = g.client.list_page(&names::bucket_prefix(&bucket), "", "", 1).await.map_err(from_cluster)?;
    let (uploads, _, _) = g.client.list_page(&names::uploads_prefix(&bucket), "", "", 1).await.map_err(from_cluster)?;
    if !objects.is_empty() || !prefixes.is_empty() || !uploads.is_empty() {
        return Err(s3_error!(BucketNotEmpty, "bucket '{bucket}' holds objects or multipart uploads"));
    }
    // Versions and delete markers count too: they are deleted by their ids first.
    let page = kintsugi_client::VersionsPage { prefix: &names::bucket_prefix(&bucket), limit: 1, ..Default::default() };
    if !g.client.list_versions(page).await.map_err(from_cluster)?.versions.is_empty() {
        return Err(s3_error!(BucketNotEmpty, "bucket '{bucket}' holds object versions or delete markers"));
    }
    g.client.delete(&names::bucket_record(&bucket)).await.map_err(from_cluster)?;
    Ok(S3Response::new(DeleteBucketOutput {}))
}

/// A response header with what the store warns of (a bucket whose code cannot heal).
pub const WARNING_HEADER: &str = "x-kintsugi-warning";

/// A bucket as its record describes it.
pub struct BucketEntry {
    pub name: String,
    pub settings: BucketSettings,
    pub created: std::time::SystemTime,
}

impl Gateway {
    /// Every bucket, in name order, a page of records at a time.
    pub async fn buckets(&self) -> S3Result<Vec<BucketEntry>> {
        let mut buckets = Vec::new();
        let mut after = String::new();
        loop {
            let (objects, _, next) = self.client.list_page(names::BUCKETS, "", &after, 0).await.map_err(from_cluster)?;
            for o in objects {
                let name = o.name[names::BUCKETS.len()..].to_string();
                let settings = BucketSettings::from_attrs(&o.attrs).map_err(|e| s3_error!(InternalError, "bucket '{name}': {e}"))?;
                let created = std::time::UNIX_EPOCH + std::time::Duration::from_millis(settings::created_ms(&o.attrs));
                buckets.push(BucketEntry { name, settings, created });
            }
            match next {
                Some(n) => after = n,
                None => return Ok(buckets),
            }
        }
    }
}

/// The one owner of every bucket and object: a store's buckets all belong to its operator
/// (its access keys are that owner's).
pub fn owner() -> Owner {
    Owner { id: Some(OWNER_ID.into()), display_name: Some("kintsugi".into()) }
}

/// The owner's canonical id, in S3's form (64 hex digits): SHA-256 of "kintsugi".
const OWNER_ID: &str = "eb777bd61e47f0f6606020bcafa6f6840b50cb338876e8baf678854880b1eb5b";

/// ListBuckets, paged when asked (`max-buckets`, `continuation-token`) and by prefix.
pub async fn list(g: &Gateway, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
    let i = &req.input;
    let max = match i.max_buckets {
        None => usize::MAX,
        Some(n) if (1..=10_000).contains(&n) => n as usize,
        Some(n) => return Err(s3_error!(InvalidArgument, "max-buckets {n} is not between 1 and 10000")),
    };
    let after = match &i.continuation_token {
        Some(t) => String::from_utf8(hex::decode(t).map_err(|_| s3_error!(InvalidArgument, "bad continuation token"))?)
            .map_err(|_| s3_error!(InvalidArgument, "bad continuation token"))?,
        None => String::new(),
    };
    let prefix = i.prefix.clone().unwrap_or_default();
    // A scoped key sees the buckets it holds a permission in.
    let scoped = g.scoped_signer(req.credentials.as_ref()).await?;
    let visible = |b: &str| scoped.as_ref().is_none_or(|k| k.permission(b).is_some());
    let mut all: Vec<BucketEntry> =
        g.buckets().await?.into_iter().filter(|b| b.name.starts_with(&prefix) && b.name > after && visible(&b.name)).collect();
    let next = (all.len() > max).then(|| hex::encode(&all[max - 1].name));
    all.truncate(max);
    let buckets = all
        .into_iter()
        .map(|b| Bucket { name: Some(b.name), creation_date: Some(Timestamp::from(b.created)), ..Default::default() })
        .collect();
    Ok(S3Response::new(ListBucketsOutput {
        buckets: Some(buckets),
        owner: Some(owner()),
        continuation_token: next,
        prefix: i.prefix.clone(),
    }))
}

/// GetBucketLocation: the gateway's region (none for us-east-1, as S3 answers).
pub async fn location(g: &Gateway, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
    g.bucket(&req.input.bucket).await?;
    let location_constraint = (g.region != crate::server::DEFAULT_REGION).then(|| BucketLocationConstraint::from(g.region.clone()));
    Ok(S3Response::new(GetBucketLocationOutput { location_constraint }))
}

/// A CreateBucket's LocationConstraint must name the gateway's region; "US" (s3cmd's
/// default) and none are us-east-1's legacy names.
pub fn check_location(region: &str, i: &CreateBucketInput) -> S3Result<()> {
    let asked = i.create_bucket_configuration.as_ref().and_then(|c| c.location_constraint.as_ref()).map(|l| l.as_str().to_string());
    let asked = match asked.as_deref() {
        None | Some("") | Some("US") => crate::server::DEFAULT_REGION,
        Some(r) => r,
    };
    if asked != region {
        return Err(s3_error!(
            IllegalLocationConstraintException,
            "The {asked} location constraint is incompatible for the region specific endpoint this request was sent to ({region})."
        ));
    }
    Ok(())
}
