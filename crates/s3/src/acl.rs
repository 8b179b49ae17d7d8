//! Canned ACLs on buckets and objects, for the tools that still send them, under S3's Object
//! Ownership. A bucket is BucketOwnerEnforced unless created or set otherwise, and then
//! refuses every ACL but the private ones (AccessControlListNotSupported), as S3's buckets do
//! since 2023. With ACLs enabled (ObjectWriter or BucketOwnerPreferred), a bucket's or an
//! object's canned ACL opens it: `public-read` to anyone, `public-read-write` also lets anyone
//! write into the bucket, `authenticated-read` lets any signed request read. An ACL given as
//! grants is taken when it equals one of these, and refused otherwise (NotImplemented).

use crate::gateway::Gateway;
use crate::names;
use kintsugi_proto::Attrs;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// Whether an input sends any `x-amz-grant-*` (the same field names in each that has them all).
macro_rules! any_grant {
    ($i:expr) => {
        $i.grant_full_control.is_some()
            || $i.grant_read.is_some()
            || $i.grant_read_acp.is_some()
            || $i.grant_write.is_some()
            || $i.grant_write_acp.is_some()
    };
}

/// A bucket's or an object's attribute holding its canned ACL (absent: private).
pub const ACL_ATTR: &str = "s3.acl";
/// A bucket's attribute holding its Object Ownership (absent: BucketOwnerEnforced).
pub const OWNERSHIP_ATTR: &str = "s3.ownership";

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Canned {
    #[default]
    Private,
    PublicRead,
    PublicReadWrite,
    AuthenticatedRead,
}

impl Canned {
    pub fn parse(s: &str) -> S3Result<Canned> {
        match s {
            // The store has one owner: these grant nothing beyond it.
            "private" | "bucket-owner-full-control" | "bucket-owner-read" => Ok(Canned::Private),
            "public-read" => Ok(Canned::PublicRead),
            "public-read-write" => Ok(Canned::PublicReadWrite),
            "authenticated-read" => Ok(Canned::AuthenticatedRead),
            "aws-exec-read" | "log-delivery-write" => Err(s3_error!(NotImplemented, "the canned ACL '{s}' names AWS services")),
            other => Err(s3_error!(InvalidArgument, "'{other}' is not a canned ACL")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Canned::Private => "private",
            Canned::PublicRead => "public-read",
            Canned::PublicReadWrite => "public-read-write",
            Canned::AuthenticatedRead => "authenticated-read",
        }
    }

    pub fn of_attrs(a: &Attrs) -> Canned {
        a.get(ACL_ATTR).and_then(|v| Canned::parse(v).ok()).unwrap_or_default()
    }

    /// Writes it into `a` (private: no attribute).
    pub fn write(self, a: &mut Attrs) {
        match self {
            Canned::Private => a.remove(ACL_ATTR),
            c => a.insert(ACL_ATTR.into(), c.as_str().into()),
        };
    }

    /// Whether it lets a request read, signed or anonymous.
    pub fn reads(self, signed: bool) -> bool {
        match self {
            Canned::PublicRead | Canned::PublicReadWrite => true,
            Canned::AuthenticatedRead => signed,
            Canned::Private => false,
        }
    }

    /// Whether it lets anyone write into the bucket.
    pub fn writes(self) -> bool {
        self == Canned::PublicReadWrite
    }

    /// Its grants, as GetBucketAcl and GetObjectAcl answer them.
    fn grants(self) -> Vec<Grant> {
        let owner = crate::buckets::owner();
        let grant = |grantee: Grantee, p: &'static str| Grant { grantee: Some(grantee), permission: Some(Permission::from_static(p)) };
        let group = |uri: &str| Grantee {
            type_: Type::from_static(Type::GROUP),
            uri: Some(uri.into()),
            display_name: None,
            email_address: None,
            id: None,
        };
        let mut g = vec![grant(
            Grantee {
                type_: Type::from_static(Type::CANONICAL_USER),
                id: owner.id,
                display_name: owner.display_name,
                email_address: None,
                uri: None,
            },
            Permission::FULL_CONTROL,
        )];
        match self {
            Canned::Private => {}
            Canned::PublicRead => g.push(grant(group(ALL_USERS), Permission::READ)),
            Canned::PublicReadWrite => {
                g.push(grant(group(ALL_USERS), Permission::READ));
                g.push(grant(group(ALL_USERS), Permission::WRITE));
            }
            Canned::AuthenticatedRead => g.push(grant(group(AUTHENTICATED_USERS), Permission::READ)),
        }
        g
    }

    /// The canned ACL a list of grants amounts to, if any: the owner's FULL_CONTROL plus
    /// READ (and WRITE) for all users, or READ for authenticated users.
    fn of_grants(grants: &[Grant]) -> Option<Canned> {
        let mut others: Vec<(String, String)> = Vec::new();
        for g in grants {
            let grantee = g.grantee.as_ref()?;
            let p = g.permission.as_ref()?.as_str().to_string();
            match (grantee.type_.as_str(), grantee.uri.as_deref()) {
                (Type::CANONICAL_USER, _) if p == Permission::FULL_CONTROL => {}
                (Type::GROUP, Some(uri)) => others.push((uri.to_string(), p)),
                _ => return None,
            }
        }
        others.sort();
        let r = (ALL_USERS.to_string(), Permission::READ.to_string());
        let w = (ALL_USERS.to_string(), Permission::WRITE.to_string());
        let a = (AUTHENTICATED_USERS.to_string(), Permission::READ.to_string());
        match &others[..] {
            [] => Some(Canned::Private),
            [x] if *x == r => Some(Canned::PublicRead),
            [x, y] if *x == r && *y == w => Some(Canned::PublicReadWrite),
            [x] if *x == a => Some(Canned::AuthenticatedRead),
            _ => None,
        }
    }
}

/// Whether the bucket with these attributes takes ACLs (its Object Ownership is not
/// BucketOwnerEnforced).
pub fn enabled(bucket_attrs: &Attrs) -> bool {
    bucket_attrs.get(OWNERSHIP_ATTR).is_some_and(|o| o != ObjectOwnership::BUCKET_OWNER_ENFORCED)
}

fn not_supported() -> s3s::S3Error {
    s3_error!(
        AccessControlListNotSupported,
        "The bucket does not allow ACLs: its Object Ownership is BucketOwnerEnforced (set ObjectWriter or BucketOwnerPreferred to use them)"
    )
}

/// The ACL a write asks for (`x-amz-acl`, any `x-amz-grant-*`) into a bucket with these
/// attributes.
pub fn for_write(bucket_attrs: &Attrs, acl: Option<&str>, grants: bool) -> S3Result<Canned> {
    let c = acl.map(Canned::parse).transpose()?.unwrap_or_default();
    if grants || (c != Canned::Private && !enabled(bucket_attrs)) {
        if !enabled(bucket_attrs) {
            return Err(not_supported());
        }
        return Err(s3_error!(NotImplemented, "explicit grants (x-amz-grant-*) are not supported: use a canned ACL"));
    }
    Ok(c)
}

/// A PutBucketAcl's or PutObjectAcl's ACL: the canned header, or a body of grants equal to one.
fn asked(bucket_attrs: &Attrs, acl: Option<&str>, policy: Option<&AccessControlPolicy>, grants: bool) -> S3Result<Canned> {
    match policy {
        None => for_write(bucket_attrs, acl, grants),
        Some(_) if acl.is_some() || grants => Err(s3_error!(InvalidRequest, "an ACL is given either as a header or as a body, not both")),
        Some(p) => {
            let c = Canned::of_grants(p.grants.as_deref().unwrap_or_default())
                .ok_or_else(|| s3_error!(NotImplemented, "only grants equal to a canned ACL are supported"))?;
            for_write(bucket_attrs, Some(c.as_str()), false)
        }
    }
}

/// Object Ownership as put: the bucket takes ACLs, or not.
fn ownership_of(o: &ObjectOwnership) -> S3Result<&'static str> {
    match o.as_str() {
        ObjectOwnership::BUCKET_OWNER_ENFORCED => Ok(ObjectOwnership::BUCKET_OWNER_ENFORCED),
        ObjectOwnership::BUCKET_OWNER_PREFERRED => Ok(ObjectOwnership::BUCKET_OWNER_PREFERRED),
        ObjectOwnership::OBJECT_WRITER => Ok(ObjectOwnership::OBJECT_WRITER),
        other => Err(s3_error!(MalformedXML, "ObjectOwnership '{other}'")),
    }
}

/// What a new bucket's creation asks of ACLs: its Object Ownership and canned ACL, written
/// into its record once it is made.
pub fn at_creation(i: &CreateBucketInput) -> S3Result<Option<(&'static str, Canned)>> {
    let grants = any_grant!(i);
    let ownership = i.object_ownership.as_ref().map(ownership_of).transpose()?;
    let mut a = Attrs::new();
    if let Some(o) = ownership {
        a.insert(OWNERSHIP_ATTR.into(), o.into());
    }
    let c = for_write(&a, i.acl.as_ref().map(|x| x.as_str()), grants)?;
    Ok(ownership.map(|o| (o, c)))
}

fn bucket_missing(b: &str) -> impl Fn() -> s3s::S3Error + Sync + '_ {
    move || s3_error!(NoSuchBucket, "no bucket named '{b}'")
}

/// Writes a new bucket's Object Ownership and ACL.
pub async fn set_at_creation(g: &Gateway, bucket: &str, ownership: &str, acl: Canned) -> S3Result<()> {
    let set = |mut a: Attrs| {
        a.insert(OWNERSHIP_ATTR.into(), ownership.into());
        acl.write(&mut a);
        a
    };
    g.update_attrs(&names::bucket_record(bucket), &set, &bucket_missing(bucket)).await?;
    forget(g, bucket);
    Ok(())
}

fn forget(g: &Gateway, bucket: &str) {
    if let Some(p) = &g.policies {
        p.forget(bucket);
    }
}

pub async fn put_bucket(g: &Gateway, req: S3Request<PutBucketAclInput>) -> S3Result<S3Response<PutBucketAclOutput>> {
    let i = req.input;
    let (_, attrs) = g.bucket_and_attrs(&i.bucket).await?;
    let grants = any_grant!(i);
    let c = asked(&attrs, i.acl.as_ref().map(|a| a.as_str()), i.access_control_policy.as_ref(), grants)?;
    let set = |mut a: Attrs| {
        c.write(&mut a);
        a
    };
    g.update_attrs(&names::bucket_record(&i.bucket), &set, &bucket_missing(&i.bucket)).await?;
    forget(g, &i.bucket);
    tracing::info!("bucket '{}': ACL {}", i.bucket, c.as_str());
    Ok(S3Response::new(PutBucketAclOutput::default()))
}

pub async fn get_bucket(g: &Gateway, req: S3Request<GetBucketAclInput>) -> S3Result<S3Response<GetBucketAclOutput>> {
    let (_, attrs) = g.bucket_and_attrs(&req.input.bucket).await?;
    let c = Canned::of_attrs(&attrs);
    Ok(S3Response::new(GetBucketAclOutput { grants: Some(c.grants()), owner: Some(crate::buckets::owner()) }))
}

pub async fn put_object(g: &Gateway, req: S3Request<PutObjectAclInput>) -> S3Result<S3Response<PutObjectAclOutput>> {
    let i = req.input;
    let (_, bucket_attrs) = g.bucket_and_attrs(&i.bucket).await?;
    let grants = any_grant!(i);
    let c = asked(&bucket_attrs, i.acl.as_ref().map(|a| a.as_str()), i.access_control_policy.as_ref(), grants)?;
    let (l, _) = g.object_at(&i.bucket, &i.key, i.version_id.as_deref()).await?;
    let mut attrs = l.attrs.clone();
    c.write(&mut attrs);
    g.client.set_attrs(&names::object(&i.bucket, &i.key), l.version, attrs).await.map_err(|e| match e.kind() {
        kintsugi_client::ErrorKind::PreconditionFailed => {
            s3_error!(OperationAborted, "the object changed while its ACL was set; try again")
        }
        _ => crate::errors::from_cluster(e),
    })?;
    Ok(S3Response::new(PutObjectAclOutput::default()))
}

pub async fn get_object(g: &Gateway, req: S3Request<GetObjectAclInput>) -> S3Result<S3Response<GetObjectAclOutput>> {
    let i = req.input;
    let (l, _) = g.object_at(&i.bucket, &i.key, i.version_id.as_deref()).await?;
    let c = Canned::of_attrs(&l.attrs);
    Ok(S3Response::new(GetObjectAclOutput { grants: Some(c.grants()), owner: Some(crate::buckets::owner()), ..Default::default() }))
}

pub async fn put_ownership(
    g: &Gateway,
    req: S3Request<PutBucketOwnershipControlsInput>,
) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
    let i = req.input;
    let [rule] = &i.ownership_controls.rules[..] else {
        return Err(s3_error!(MalformedXML, "OwnershipControls holds exactly one rule"));
    };
    let o = ownership_of(&rule.object_ownership)?;
    let (_, attrs) = g.bucket_and_attrs(&i.bucket).await?;
    if o == ObjectOwnership::BUCKET_OWNER_ENFORCED && Canned::of_attrs(&attrs) != Canned::Private {
        return Err(s3_error!(
            InvalidBucketAclWithObjectOwnership,
            "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting: make its ACL private first"
        ));
    }
    let set = |mut a: Attrs| {
        a.insert(OWNERSHIP_ATTR.into(), o.into());
        a
    };
    g.update_attrs(&names::bucket_record(&i.bucket), &set, &bucket_missing(&i.bucket)).await?;
    forget(g, &i.bucket);
    Ok(S3Response::new(PutBucketOwnershipControlsOutput::default()))
}

pub async fn get_ownership(
    g: &Gateway,
    req: S3Request<GetBucketOwnershipControlsInput>,
) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
    let (_, attrs) = g.bucket_and_attrs(&req.input.bucket).await?;
    let o = attrs.get(OWNERSHIP_ATTR).cloned().unwrap_or_else(|| ObjectOwnership::BUCKET_OWNER_ENFORCED.into());
    let rule = OwnershipControlsRule { object_ownership: ObjectOwnership::from(o) };
    Ok(S3Response::new(GetBucketOwnershipControlsOutput { ownership_controls: Some(OwnershipControls { rules: vec![rule] }) }))
}

pub async fn delete_ownership(
    g: &Gateway,
    req: S3Request<DeleteBucketOwnershipControlsInput>,
) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
    let b = req.input.bucket;
    let (_, attrs) = g.bucket_and_attrs(&b).await?;
    if Canned::of_attrs(&attrs) != Canned::Private {
        return Err(s3_error!(InvalidBucketAclWithObjectOwnership, "the bucket's ACL is not private: make it private first"));
    }
    let set = |mut a: Attrs| {
        a.remove(OWNERSHIP_ATTR);
        a
    };
    g.update_attrs(&names::bucket_record(&b), &set, &bucket_missing(&b)).await?;
    forget(g, &b);
    Ok(S3Response::new(DeleteBucketOwnershipControlsOutput::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_acls_open_what_s3_says_and_grants_map_back() {
        assert!(Canned::PublicRead.reads(false) && !Canned::PublicRead.writes());
        assert!(Canned::PublicReadWrite.reads(false) && Canned::PublicReadWrite.writes());
        assert!(!Canned::AuthenticatedRead.reads(false) && Canned::AuthenticatedRead.reads(true));
        assert!(!Canned::Private.reads(true));
        for c in [Canned::Private, Canned::PublicRead, Canned::PublicReadWrite, Canned::AuthenticatedRead] {
            assert_eq!(Canned::of_grants(&c.grants()), Some(c), "{c:?}");
            let mut a = Attrs::new();
            c.write(&mut a);
            assert_eq!(Canned::of_attrs(&a), c);
        }
        assert_eq!(Canned::parse("bucket-owner-full-control").unwrap(), Canned::Private);
        assert!(Canned::parse("everyone").is_err());
    }

    #[test]
    fn a_bucket_takes_acls_only_when_its_ownership_allows() {
        let enforced = Attrs::new();
        let mut writer = Attrs::new();
        writer.insert(OWNERSHIP_ATTR.into(), ObjectOwnership::OBJECT_WRITER.into());
        assert_eq!(for_write(&enforced, Some("private"), false).unwrap(), Canned::Private);
        assert_eq!(for_write(&enforced, Some("public-read"), false).unwrap_err().code().as_str(), "AccessControlListNotSupported");
        assert_eq!(for_write(&writer, Some("public-read"), false).unwrap(), Canned::PublicRead);
        assert_eq!(for_write(&writer, None, true).unwrap_err().code().as_str(), "NotImplemented");
        assert_eq!(for_write(&enforced, None, true).unwrap_err().code().as_str(), "AccessControlListNotSupported");
    }
}
