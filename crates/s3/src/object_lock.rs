//! S3 Object Lock: buckets created with lock enabled (their versioning Enabled for good), a
//! bucket's default retention, and each version's retention (GOVERNANCE or COMPLIANCE until
//! a date) and legal hold, set by a write's `x-amz-object-lock-*` headers, by the default,
//! or by PutObjectRetention and PutObjectLegalHold.
//!
//! The gateway only writes the lock into the version's attributes
//! ([`kintsugi_proto::retention`]); the coordinator enforces it in the transaction of every
//! delete and overwrite, so lifecycle, DeleteObjects and the CLI are held as DELETE is, and
//! it survives restarts and failover with the rest of the metadata.

use crate::errors::from_cluster;
use crate::gateway::Gateway;
use crate::names;
use kintsugi_proto::retention::{self, Mode, Retention};
use kintsugi_proto::Attrs;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

/// The bucket record's attribute saying lock is enabled.
pub const ENABLED_ATTR: &str = "s3.object-lock";
/// The bucket record's default retention: `MODE N d` or `MODE N y`.
pub const DEFAULT_ATTR: &str = "s3.object-lock-default";

const DAY_MS: u64 = 86_400_000;

/// Whether the bucket whose record has `attrs` has object lock enabled.
pub fn enabled(attrs: &Attrs) -> bool {
    attrs.get(ENABLED_ATTR).is_some_and(|v| v == "Enabled")
}

/// A bucket's default retention: a mode, and days or years.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultRetention {
    pub mode: Mode,
    pub days: Option<u32>,
    pub years: Option<u32>,
}

impl DefaultRetention {
    fn of_attrs(a: &Attrs) -> Option<Self> {
        let mut w = a.get(DEFAULT_ATTR)?.split(' ');
        let mode = Mode::parse(w.next()?)?;
        let n: u32 = w.next()?.parse().ok()?;
        match w.next()? {
            "d" => Some(DefaultRetention { mode, days: Some(n), years: None }),
            "y" => Some(DefaultRetention { mode, days: None, years: Some(n) }),
            _ => None,
        }
    }

    fn to_attr(self) -> String {
        match (self.days, self.years) {
            (Some(d), _) => format!("{} {d} d", self.mode.as_str()),
            (None, y) => format!("{} {} y", self.mode.as_str(), y.unwrap_or(0)),
        }
    }

    /// The retention of a version written at `now_ms` (a year is 365 days, as S3 counts).
    fn from(self, now_ms: u64) -> Retention {
        let days = self.days.unwrap_or(0) as u64 + self.years.unwrap_or(0) as u64 * 365;
        Retention { mode: self.mode, until_ms: now_ms + days * DAY_MS }
    }
}

/// A version's lock as written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lock {
    pub retention: Option<Retention>,
    pub legal_hold: bool,
}

impl Lock {
    pub fn of_attrs(a: &Attrs) -> Lock {
        Lock { retention: retention::retention(a), legal_hold: retention::legal_hold(a) }
    }

    pub fn write(self, a: &mut Attrs) {
        retention::set_retention(a, self.retention);
        retention::set_legal_hold(a, self.legal_hold);
    }

    /// The lock a multipart upload asked for, kept in its record under a name of its own
    /// (a record carrying the lock's own attributes would be locked itself): `MODE UNTIL
    /// HOLD`, `-` for no retention.
    pub fn encode(&self) -> String {
        match self.retention {
            Some(r) => format!("{} {} {}", r.mode.as_str(), r.until_ms, self.legal_hold as u8),
            None => format!("- 0 {}", self.legal_hold as u8),
        }
    }

    pub fn decode(s: &str) -> Lock {
        let mut w = s.split(' ');
        let (mode, until, hold) = (w.next(), w.next().and_then(|u| u.parse().ok()), w.next() == Some("1"));
        let retention = mode.and_then(Mode::parse).map(|mode| Retention { mode, until_ms: until.unwrap_or(u64::MAX) });
        Lock { retention, legal_hold: hold }
    }

    /// HEAD's and GET's `x-amz-object-lock-*` answers: mode, date, legal hold.
    pub fn answer(&self) -> (Option<ObjectLockMode>, Option<Timestamp>, Option<ObjectLockLegalHoldStatus>) {
        let mode = self.retention.map(|r| ObjectLockMode::from(r.mode.as_str().to_string()));
        let until = self.retention.map(|r| timestamp(r.until_ms));
        (mode, until, self.legal_hold.then(|| ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON)))
    }
}

fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

fn missing_configuration() -> s3s::S3Error {
    s3_error!(InvalidRequest, "Bucket is missing Object Lock Configuration")
}

fn mode_of(m: &str) -> S3Result<Mode> {
    Mode::parse(m).ok_or_else(|| s3_error!(InvalidArgument, "Unknown wormMode directive: '{m}' (GOVERNANCE or COMPLIANCE)"))
}

fn hold_of(s: &str) -> S3Result<bool> {
    match s {
        ObjectLockLegalHoldStatus::ON => Ok(true),
        ObjectLockLegalHoldStatus::OFF => Ok(false),
        other => Err(s3_error!(InvalidArgument, "legal hold status '{other}': ON or OFF")),
    }
}

/// A retention to set from a mode and a date, which must come together and be ahead.
fn retention_of(mode: Option<&str>, until: Option<&Timestamp>, now_ms: u64) -> S3Result<Option<Retention>> {
    match (mode, until) {
        (None, None) => Ok(None),
        (Some(m), Some(u)) => {
            let until_ms = crate::lifecycle::ms_of(u)?;
            if until_ms <= now_ms {
                return Err(s3_error!(InvalidArgument, "The retain until date must be in the future!"));
            }
            Ok(Some(Retention { mode: mode_of(m)?, until_ms }))
        }
        _ => Err(s3_error!(InvalidArgument, "x-amz-object-lock-mode and x-amz-object-lock-retain-until-date must both be supplied")),
    }
}

/// [`for_write`] of a PutObject's or CopyObject's input (the same field names in each).
macro_rules! write_lock {
    ($bucket_attrs:expr, $i:expr) => {
        $crate::object_lock::for_write(
            $bucket_attrs,
            $i.object_lock_mode.as_ref(),
            $i.object_lock_retain_until_date.as_ref(),
            $i.object_lock_legal_hold_status.as_ref(),
            $crate::object_meta::now_ms(),
        )
    };
}
pub(crate) use write_lock;

/// The lock a write (PutObject, CopyObject, CreateMultipartUpload) asks for with its
/// headers, or else the bucket's default retention; refused in a bucket without lock.
pub fn for_write(
    bucket_attrs: &Attrs,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
    now_ms: u64,
) -> S3Result<Lock> {
    Ok(with_default(asked(bucket_attrs, mode, until, hold, now_ms)?, bucket_attrs, now_ms))
}

/// The lock a write's headers ask for, checked, without the bucket's default.
pub fn asked(
    bucket_attrs: &Attrs,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
    now_ms: u64,
) -> S3Result<Lock> {
    let any = mode.is_some() || until.is_some() || hold.is_some();
    if !enabled(bucket_attrs) {
        return if any { Err(missing_configuration()) } else { Ok(Lock::default()) };
    }
    let legal_hold = hold.map(|h| hold_of(h.as_str())).transpose()?.unwrap_or(false);
    Ok(Lock { retention: retention_of(mode.map(|m| m.as_str()), until, now_ms)?, legal_hold })
}

/// `lock`, with the bucket's default retention if it asks for none: counted from `now_ms`,
/// when the version is made (a multipart upload's completion).
pub fn with_default(lock: Lock, bucket_attrs: &Attrs, now_ms: u64) -> Lock {
    if lock.retention.is_some() || !enabled(bucket_attrs) {
        return lock;
    }
    Lock { retention: DefaultRetention::of_attrs(bucket_attrs).map(|d| d.from(now_ms)), ..lock }
}

/// The attributes a bucket created with lock enabled starts with (versioning Enabled).
pub fn created_enabled(a: &mut Attrs) {
    a.insert(ENABLED_ATTR.into(), "Enabled".into());
    a.insert(crate::versioning::STATE_ATTR.into(), "Enabled".into());
}

pub async fn put_configuration(
    g: &Gateway,
    req: S3Request<PutObjectLockConfigurationInput>,
) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
    let i = req.input;
    let c = i.object_lock_configuration.ok_or_else(|| s3_error!(MalformedXML, "no ObjectLockConfiguration"))?;
    if c.object_lock_enabled.as_ref().map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED) {
        return Err(s3_error!(MalformedXML, "ObjectLockEnabled must be Enabled"));
    }
    let default = match c.rule.and_then(|r| r.default_retention) {
        None => None,
        Some(d) => {
            let mode = mode_of(d.mode.as_ref().ok_or_else(|| s3_error!(MalformedXML, "a DefaultRetention needs a Mode"))?.as_str())?;
            let positive = |n: i32, what: &str| {
                u32::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| s3_error!(InvalidArgument, "Default retention period must be a positive integer value ({what})"))
            };
            match (d.days, d.years) {
                (Some(n), None) => Some(DefaultRetention { mode, days: Some(positive(n, "Days")?), years: None }),
                (None, Some(n)) => Some(DefaultRetention { mode, days: None, years: Some(positive(n, "Years")?) }),
                _ => return Err(s3_error!(MalformedXML, "a DefaultRetention holds exactly one of Days and Years")),
            }
        }
    };
    let settings = g.bucket(&i.bucket).await?;
    if settings.versioning != kintsugi_proto::Versioning::Enabled {
        return Err(s3_error!(InvalidBucketState, "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"));
    }
    let set = |mut a: Attrs| {
        a.insert(ENABLED_ATTR.into(), "Enabled".into());
        match default {
            Some(d) => a.insert(DEFAULT_ATTR.into(), d.to_attr()),
            None => a.remove(DEFAULT_ATTR),
        };
        a
    };
    let b = i.bucket.clone();
    g.update_attrs(&names::bucket_record(&i.bucket), &set, &|| s3_error!(NoSuchBucket, "no bucket named '{b}'")).await?;
    tracing::info!("bucket '{}': object lock enabled, default retention {default:?}", i.bucket);
    Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
}

pub async fn get_configuration(
    g: &Gateway,
    req: S3Request<GetObjectLockConfigurationInput>,
) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
    let a = g.bucket_attrs(&req.input.bucket).await?;
    if !enabled(&a) {
        return Err(s3_error!(ObjectLockConfigurationNotFoundError, "Object Lock configuration does not exist for this bucket"));
    }
    let rule = DefaultRetention::of_attrs(&a).map(|d| ObjectLockRule {
        default_retention: Some(DefaultRetention_ {
            mode: Some(ObjectLockRetentionMode::from(d.mode.as_str().to_string())),
            days: d.days.map(|n| n as i32),
            years: d.years.map(|n| n as i32),
        }),
    });
    Ok(S3Response::new(GetObjectLockConfigurationOutput {
        object_lock_configuration: Some(ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
            rule,
        }),
    }))
}

/// s3s's name for a bucket's default retention (ours is [`DefaultRetention`]).
type DefaultRetention_ = s3s::dto::DefaultRetention;

/// Changes the lock of version `version_id` of `key` (its latest when None) by `change`;
/// the coordinator refuses what would weaken a retention in force. Answers nothing: S3's
/// outputs here carry no version id.
async fn relock(
    g: &Gateway,
    bucket: &str,
    key: &str,
    version_id: Option<&str>,
    bypass_governance: bool,
    change: impl Fn(&mut Lock),
) -> S3Result<()> {
    if !enabled(&g.bucket_attrs(bucket).await?) {
        return Err(missing_configuration());
    }
    let (l, _) = g.object_at(bucket, key, version_id).await?;
    let mut attrs = l.attrs.clone();
    let mut lock = Lock::of_attrs(&attrs);
    change(&mut lock);
    lock.write(&mut attrs);
    g.client.set_attrs_as(&names::object(bucket, key), l.version, attrs, bypass_governance).await.map_err(from_cluster)
}

pub async fn put_retention(g: &Gateway, req: S3Request<PutObjectRetentionInput>) -> S3Result<S3Response<PutObjectRetentionOutput>> {
    let i = req.input;
    let r = i.retention.unwrap_or_default();
    let now = crate::object_meta::now_ms();
    let retention = retention_of(r.mode.as_ref().map(|m| m.as_str()), r.retain_until_date.as_ref(), now)?;
    let bypass = i.bypass_governance_retention.unwrap_or(false);
    relock(g, &i.bucket, &i.key, i.version_id.as_deref(), bypass, |l| l.retention = retention).await?;
    Ok(S3Response::new(PutObjectRetentionOutput::default()))
}

/// The lock of a version of `key`, in a bucket with object lock (else S3's error for one without).
async fn lock_of(g: &Gateway, bucket: &str, key: &str, version_id: Option<&str>) -> S3Result<Lock> {
    if !enabled(&g.bucket_attrs(bucket).await?) {
        return Err(missing_configuration());
    }
    let (l, _) = g.object_at(bucket, key, version_id).await?;
    Ok(Lock::of_attrs(&l.attrs))
}

pub async fn get_retention(g: &Gateway, req: S3Request<GetObjectRetentionInput>) -> S3Result<S3Response<GetObjectRetentionOutput>> {
    let i = req.input;
    let Some(r) = lock_of(g, &i.bucket, &i.key, i.version_id.as_deref()).await?.retention else {
        return Err(s3_error!(NoSuchObjectLockConfiguration, "The specified object does not have a ObjectLock configuration"));
    };
    Ok(S3Response::new(GetObjectRetentionOutput {
        retention: Some(ObjectLockRetention {
            mode: Some(ObjectLockRetentionMode::from(r.mode.as_str().to_string())),
            retain_until_date: Some(timestamp(r.until_ms)),
        }),
    }))
}

pub async fn put_legal_hold(g: &Gateway, req: S3Request<PutObjectLegalHoldInput>) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
    let i = req.input;
    let status = i.legal_hold.and_then(|h| h.status).ok_or_else(|| s3_error!(MalformedXML, "a LegalHold needs a Status"))?;
    let on = hold_of(status.as_str())?;
    relock(g, &i.bucket, &i.key, i.version_id.as_deref(), false, |l| l.legal_hold = on).await?;
    Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
}

pub async fn get_legal_hold(g: &Gateway, req: S3Request<GetObjectLegalHoldInput>) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
    let i = req.input;
    let on = lock_of(g, &i.bucket, &i.key, i.version_id.as_deref()).await?.legal_hold;
    let status = ObjectLockLegalHoldStatus::from_static(if on { ObjectLockLegalHoldStatus::ON } else { ObjectLockLegalHoldStatus::OFF });
    Ok(S3Response::new(GetObjectLegalHoldOutput { legal_hold: Some(ObjectLockLegalHold { status: Some(status) }) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(default: Option<&str>) -> Attrs {
        let mut a = Attrs::new();
        created_enabled(&mut a);
        if let Some(d) = default {
            a.insert(DEFAULT_ATTR.into(), d.into());
        }
        a
    }

    #[test]
    fn a_write_takes_its_headers_or_the_bucket_default() {
        let now = 1_000_000;
        let mode = ObjectLockMode::from_static(ObjectLockMode::COMPLIANCE);
        let until = timestamp(now + 5000);
        let l = for_write(&bucket(Some("GOVERNANCE 2 d")), Some(&mode), Some(&until), None, now).unwrap();
        assert_eq!(l.retention, Some(Retention { mode: Mode::Compliance, until_ms: now + 5000 }));
        let l = for_write(&bucket(Some("GOVERNANCE 2 d")), None, None, None, now).unwrap();
        assert_eq!(l.retention, Some(Retention { mode: Mode::Governance, until_ms: now + 2 * DAY_MS }));
        let l = for_write(&bucket(Some("COMPLIANCE 1 y")), None, None, None, now).unwrap();
        assert_eq!(l.retention.unwrap().until_ms, now + 365 * DAY_MS);
        let hold = ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON);
        assert_eq!(for_write(&bucket(None), None, None, Some(&hold), now).unwrap(), Lock { retention: None, legal_hold: true });
        let code = |r: S3Result<Lock>| r.unwrap_err().code().as_str().to_string();
        assert_eq!(code(for_write(&Attrs::new(), None, None, Some(&hold), now)), "InvalidRequest", "no lock on the bucket");
        assert_eq!(for_write(&Attrs::new(), None, None, None, now).unwrap(), Lock::default());
        assert_eq!(code(for_write(&bucket(None), Some(&mode), None, None, now)), "InvalidArgument", "a mode without a date");
        assert_eq!(code(for_write(&bucket(None), Some(&mode), Some(&timestamp(now - 1)), None, now)), "InvalidArgument", "a date past");
    }

    #[test]
    fn a_lock_round_trips_through_attributes() {
        let l = Lock { retention: Some(Retention { mode: Mode::Governance, until_ms: 123_000 }), legal_hold: true };
        let mut a = Attrs::new();
        l.write(&mut a);
        assert_eq!(Lock::of_attrs(&a), l);
        Lock::default().write(&mut a);
        assert!(a.is_empty());
        assert_eq!(Lock::decode(&l.encode()), l);
        assert_eq!(Lock::decode(&Lock::default().encode()), Lock::default());
        let d = DefaultRetention { mode: Mode::Compliance, days: None, years: Some(3) };
        let mut b = Attrs::new();
        b.insert(DEFAULT_ATTR.into(), d.to_attr());
        assert_eq!(DefaultRetention::of_attrs(&b), Some(d));
    }
}
