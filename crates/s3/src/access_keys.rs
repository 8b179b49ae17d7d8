//! Access keys kept in the cluster's metadata, each with its own permissions per bucket
//! (read, write or owner, as Garage grants them) and whether it may create buckets:
//! created, listed, changed and revoked with `kintsugi key ...` while every gateway serves.
//! The credentials file's keys stay as the bootstrap: they may do everything.
//!
//! A key is a zero-byte record `.keys/ACCESS_KEY` whose attributes hold its secret, its
//! name, its flag and one `grant.BUCKET` per bucket it may use.

use kintsugi_client::{Client, CommitTerms};
use kintsugi_codes::CodeSpec;
use kintsugi_proto::{Attrs, LayoutSpec, Precondition};
use std::collections::BTreeMap;

/// Where key records live (no bucket name starts with '.').
pub const KEYS: &str = ".keys/";

const SECRET: &str = "secret";
const NAME: &str = "name";
const CREATED: &str = "created";
const CREATE_BUCKET: &str = "create-bucket";
const GRANT: &str = "grant.";

/// What a key may do in one bucket; each level includes those below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// GET, HEAD and list objects; read the bucket's settings.
    Read,
    /// Also PUT, copy into, delete and tag objects, and multipart uploads.
    Write,
    /// Also change the bucket's settings (versioning, lifecycle, CORS, object lock, tags),
    /// bypass GOVERNANCE retention, and delete the bucket.
    Owner,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Owner => "owner",
        }
    }
}

impl std::str::FromStr for Permission {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Permission::Read),
            "write" => Ok(Permission::Write),
            "owner" => Ok(Permission::Owner),
            _ => Err(format!("permission '{s}': read, write or owner")),
        }
    }
}

/// A key as its record holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopedKey {
    pub access_key: String,
    pub secret_key: String,
    pub name: String,
    pub created_ms: u64,
    pub create_bucket: bool,
    pub grants: BTreeMap<String, Permission>,
}

impl ScopedKey {
    fn of_attrs(access_key: &str, a: &Attrs) -> Option<ScopedKey> {
        Some(ScopedKey {
            access_key: access_key.to_string(),
            secret_key: a.get(SECRET)?.clone(),
            name: a.get(NAME).cloned().unwrap_or_default(),
            created_ms: a.get(CREATED).and_then(|c| c.parse().ok()).unwrap_or(0),
            create_bucket: a.get(CREATE_BUCKET).is_some_and(|v| v == "1"),
            grants: a.iter().filter_map(|(k, v)| Some((k.strip_prefix(GRANT)?.to_string(), v.parse().ok()?))).collect(),
        })
    }

    fn to_attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        a.insert(SECRET.into(), self.secret_key.clone());
        a.insert(NAME.into(), self.name.clone());
        a.insert(CREATED.into(), self.created_ms.to_string());
        a.insert(CREATE_BUCKET.into(), if self.create_bucket { "1" } else { "0" }.into());
        for (b, p) in &self.grants {
            a.insert(format!("{GRANT}{b}"), p.as_str().into());
        }
        a
    }

    /// What this key may do in `bucket`.
    pub fn permission(&self, bucket: &str) -> Option<Permission> {
        self.grants.get(bucket).copied()
    }
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no access key '{0}'")]
    NoSuchKey(String),
    #[error("'{0}' is not a bucket name")]
    BadBucket(String),
    #[error("access key '{0}' changed while being changed; try again")]
    Busy(String),
    #[error(transparent)]
    Cluster(#[from] kintsugi_client::Error),
}

fn record(access_key: &str) -> String {
    format!("{KEYS}{access_key}")
}

/// Key records are metadata only: the narrowest code, no bytes.
const RECORD_CODE: CodeSpec = CodeSpec::Rs { k: 1, m: 1 };

async fn put_record(c: &Client, name: &str, terms: CommitTerms) -> Result<(), kintsugi_client::Error> {
    let mut empty: &[u8] = &[];
    let mut terms = Some(terms);
    c.put_with_attrs(name, &mut empty, 0, RECORD_CODE, 0, LayoutSpec::Stripe, &|_| {}, &mut || Ok(terms.take().unwrap_or_default()))
        .await?;
    Ok(())
}

/// Makes a new key named `name` (a fresh access key and secret), with no bucket yet.
pub async fn create(c: &Client, name: &str, create_bucket: bool) -> Result<ScopedKey, KeyError> {
    let fresh = crate::credentials::generate();
    let key = ScopedKey {
        access_key: fresh.access_key,
        secret_key: fresh.secret_key,
        name: name.to_string(),
        created_ms: crate::object_meta::now_ms(),
        create_bucket,
        grants: BTreeMap::new(),
    };
    let terms = CommitTerms { attrs: key.to_attrs(), precondition: Some(Precondition::Absent), ..Default::default() };
    put_record(c, &record(&key.access_key), terms).await?;
    Ok(key)
}

/// Key `access_key`, if there is one.
pub async fn get(c: &Client, access_key: &str) -> Result<Option<ScopedKey>, KeyError> {
    match c.stat(&record(access_key)).await {
        Ok(l) => Ok(ScopedKey::of_attrs(access_key, &l.attrs)),
        Err(e) if crate::errors::is_missing(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Every key, in access-key order.
pub async fn list(c: &Client) -> Result<Vec<ScopedKey>, KeyError> {
    let mut out = Vec::new();
    for o in c.list_prefix(KEYS).await? {
        let ak = o.name.strip_prefix(KEYS).unwrap_or(&o.name).to_string();
        if let Some(k) = get(c, &ak).await? {
            out.push(k);
        }
    }
    Ok(out)
}

/// Revokes `access_key`: its record goes; gateways refuse it within their cache's second.
pub async fn revoke(c: &Client, access_key: &str) -> Result<(), KeyError> {
    if !c.delete(&record(access_key)).await? {
        return Err(KeyError::NoSuchKey(access_key.into()));
    }
    Ok(())
}

/// Changes key `access_key` by `change`, at the version read (again if it changed meanwhile).
pub async fn update(c: &Client, access_key: &str, change: impl Fn(&mut ScopedKey)) -> Result<ScopedKey, KeyError> {
    for _ in 0..5 {
        let l = match c.stat(&record(access_key)).await {
            Ok(l) => l,
            Err(e) if crate::errors::is_missing(&e) => return Err(KeyError::NoSuchKey(access_key.into())),
            Err(e) => return Err(e.into()),
        };
        let mut k = ScopedKey::of_attrs(access_key, &l.attrs).ok_or_else(|| KeyError::NoSuchKey(access_key.into()))?;
        change(&mut k);
        match c.set_attrs(&record(access_key), l.version, k.to_attrs()).await {
            Ok(()) => return Ok(k),
            Err(e) if e.kind() == kintsugi_client::ErrorKind::PreconditionFailed => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(KeyError::Busy(access_key.into()))
}

/// Grants `access_key` `permission` in `bucket` (None: takes every permission there away).
pub async fn grant(c: &Client, access_key: &str, bucket: &str, permission: Option<Permission>) -> Result<ScopedKey, KeyError> {
    if !s3s::path::check_bucket_name(bucket) {
        return Err(KeyError::BadBucket(bucket.into()));
    }
    update(c, access_key, |k| match permission {
        Some(p) => {
            k.grants.insert(bucket.to_string(), p);
        }
        None => {
            k.grants.remove(bucket);
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_its_record() {
        let k = ScopedKey {
            access_key: "KIAAAA".into(),
            secret_key: "s3cr3t-s3cr3t".into(),
            name: "backup app".into(),
            created_ms: 17,
            create_bucket: true,
            grants: [("photos".to_string(), Permission::Read), ("logs".to_string(), Permission::Owner)].into(),
        };
        assert_eq!(ScopedKey::of_attrs("KIAAAA", &k.to_attrs()), Some(k.clone()));
        assert_eq!(k.permission("photos"), Some(Permission::Read));
        assert_eq!(k.permission("other"), None);
        assert!(Permission::Owner > Permission::Write && Permission::Write > Permission::Read);
        assert_eq!("write".parse::<Permission>(), Ok(Permission::Write));
        assert!("admin".parse::<Permission>().is_err());
    }
}
