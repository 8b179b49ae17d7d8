//! Lifecycle: a bucket's rules (Put/Get/DeleteBucketLifecycleConfiguration), kept in its
//! record's attributes, and what they decide for one version of one key. The worker that
//! walks the buckets and acts on the decisions is `lifecycle_worker`.
//!
//! Supported, as S3 defines them: Expiration (Days, Date, ExpiredObjectDeleteMarker),
//! NoncurrentVersionExpiration (NoncurrentDays, NewerNoncurrentVersions) and
//! AbortIncompleteMultipartUpload, filtered by prefix, tags and object size. Transitions
//! move objects between storage classes, which this store does not have: refused with
//! NotImplemented, never accepted and ignored.

use crate::gateway::Gateway;
use crate::names;
use crate::tagging::Tags;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use serde::{Deserialize, Serialize};

/// The bucket record's attribute holding its rules (JSON).
pub const LIFECYCLE: &str = "s3.lifecycle";
/// S3's limit on rules.
const MAX_RULES: usize = 1000;
/// The most bytes of rules a bucket's record holds (its attributes are small, and shared
/// with CORS and tags).
pub const MAX_RULES_BYTES: usize = 4096;
/// S3's limit on NewerNoncurrentVersions.
const MAX_NEWER_NONCURRENT: u32 = 100;

/// One rule, as stored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub enabled: bool,
    /// The filter: every part must match.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_gt: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_lt: Option<u64>,
    /// Whether the rule came with a `<Filter>` (answered back as it came, not as `<Prefix>`).
    #[serde(default)]
    pub filtered: bool,
    /// The current version expires this many days after it was written...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    /// ... or on this date (ms since the epoch, a midnight UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_ms: Option<u64>,
    /// A delete marker that is a key's only version is removed.
    #[serde(default)]
    pub expired_marker: bool,
    /// A version this many days after it stopped being current is removed...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncurrent_days: Option<u32>,
    /// ... beyond this many newer noncurrent versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer_noncurrent: Option<u32>,
    /// An incomplete multipart upload is aborted this many days after it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_days: Option<u32>,
}

fn positive(what: &str, v: i32) -> S3Result<u32> {
    if v <= 0 {
        return Err(s3_error!(InvalidArgument, "'{what}' in a lifecycle rule must be a positive integer"));
    }
    Ok(v as u32)
}

fn size(what: &str, v: Option<i64>) -> S3Result<Option<u64>> {
    match v {
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "'{what}' must be zero or more")),
        n => Ok(n.map(|n| n as u64)),
    }
}

fn tag_of(t: Tag) -> S3Result<(String, String)> {
    match (t.key, t.value) {
        (Some(k), v) if !k.is_empty() => Ok((k, v.unwrap_or_default())),
        _ => Err(s3_error!(MalformedXML, "a lifecycle filter's Tag needs a Key")),
    }
}

/// Milliseconds since the epoch of `t`.
pub fn ms_of(t: &Timestamp) -> S3Result<u64> {
    let mut s = Vec::new();
    t.format(TimestampFormat::EpochSeconds, &mut s).map_err(|e| s3_error!(InvalidArgument, "a lifecycle date: {e}"))?;
    let secs: f64 = String::from_utf8_lossy(&s).parse().map_err(|_| s3_error!(InvalidArgument, "a lifecycle date is out of range"))?;
    if secs < 0.0 {
        return Err(s3_error!(InvalidArgument, "a lifecycle date is before 1970"));
    }
    Ok((secs * 1000.0) as u64)
}

const DAY_MS: u64 = 86_400_000;

impl Rule {
    /// The stored rule of an S3 one, or S3's error for what S3 refuses.
    pub fn of(r: LifecycleRule) -> S3Result<Rule> {
        let enabled = match r.status.as_str() {
            ExpirationStatus::ENABLED => true,
            ExpirationStatus::DISABLED => false,
            other => return Err(s3_error!(MalformedXML, "lifecycle rule status '{other}': Enabled or Disabled")),
        };
        if r.id.as_ref().is_some_and(|id| id.len() > 255) {
            return Err(s3_error!(InvalidArgument, "ID length should not exceed allowed limit of 255"));
        }
        if r.transitions.as_ref().is_some_and(|t| !t.is_empty()) || r.noncurrent_version_transitions.as_ref().is_some_and(|t| !t.is_empty())
        {
            return Err(s3_error!(NotImplemented, "lifecycle transitions: this store has one storage class"));
        }
        let mut rule = Rule { id: r.id, enabled, ..Default::default() };
        match (r.prefix, r.filter) {
            (Some(_), Some(_)) => return Err(s3_error!(MalformedXML, "a lifecycle rule has a Filter or a Prefix, not both")),
            (Some(p), None) => rule.prefix = p,
            (None, f) => {
                rule.filtered = true;
                let f = f.unwrap_or_default();
                let given = [f.prefix.is_some(), f.tag.is_some(), f.and.is_some()].iter().filter(|b| **b).count()
                    + usize::from(f.object_size_greater_than.is_some() || f.object_size_less_than.is_some());
                if given > 1 {
                    return Err(s3_error!(MalformedXML, "a lifecycle Filter holds one of Prefix, Tag, ObjectSize* or And"));
                }
                rule.prefix = f.prefix.unwrap_or_default();
                if let Some(t) = f.tag {
                    rule.tags.extend([tag_of(t)?]);
                }
                rule.size_gt = size("ObjectSizeGreaterThan", f.object_size_greater_than)?;
                rule.size_lt = size("ObjectSizeLessThan", f.object_size_less_than)?;
                if let Some(a) = f.and {
                    rule.prefix = a.prefix.unwrap_or_default();
                    for t in a.tags.unwrap_or_default() {
                        let (k, v) = tag_of(t)?;
                        if rule.tags.insert(k.clone(), v).is_some() {
                            return Err(s3_error!(InvalidRequest, "duplicate tag key '{k}' in a lifecycle filter"));
                        }
                    }
                    rule.size_gt = size("ObjectSizeGreaterThan", a.object_size_greater_than)?;
                    rule.size_lt = size("ObjectSizeLessThan", a.object_size_less_than)?;
                }
            }
        }
        if let (Some(gt), Some(lt)) = (rule.size_gt, rule.size_lt) {
            if gt >= lt {
                return Err(s3_error!(InvalidArgument, "ObjectSizeGreaterThan must be less than ObjectSizeLessThan"));
            }
        }
        if let Some(e) = r.expiration {
            let set = [e.days.is_some(), e.date.is_some(), e.expired_object_delete_marker.is_some()].iter().filter(|b| **b).count();
            if set != 1 {
                return Err(s3_error!(MalformedXML, "an Expiration holds exactly one of Days, Date and ExpiredObjectDeleteMarker"));
            }
            rule.days = e.days.map(|d| positive("Days", d)).transpose()?;
            if let Some(d) = &e.date {
                let ms = ms_of(d)?;
                if ms % DAY_MS != 0 {
                    return Err(s3_error!(InvalidArgument, "'Date' must be at midnight GMT"));
                }
                rule.date_ms = Some(ms);
            }
            rule.expired_marker = e.expired_object_delete_marker == Some(true);
            if rule.expired_marker && !rule.tags.is_empty() {
                return Err(s3_error!(InvalidRequest, "ExpiredObjectDeleteMarker cannot be specified with object tags"));
            }
        }
        if let Some(n) = r.noncurrent_version_expiration {
            let Some(days) = n.noncurrent_days else {
                return Err(s3_error!(MalformedXML, "a NoncurrentVersionExpiration needs NoncurrentDays"));
            };
            rule.noncurrent_days = Some(positive("NoncurrentDays", days)?);
            if let Some(k) = n.newer_noncurrent_versions {
                let k = positive("NewerNoncurrentVersions", k)?;
                if k > MAX_NEWER_NONCURRENT {
                    return Err(s3_error!(InvalidArgument, "NewerNoncurrentVersions is at most {MAX_NEWER_NONCURRENT}"));
                }
                rule.newer_noncurrent = Some(k);
            }
        }
        if let Some(a) = r.abort_incomplete_multipart_upload {
            let Some(d) = a.days_after_initiation else {
                return Err(s3_error!(MalformedXML, "an AbortIncompleteMultipartUpload needs DaysAfterInitiation"));
            };
            if !rule.tags.is_empty() || rule.size_gt.is_some() || rule.size_lt.is_some() {
                return Err(s3_error!(
                    InvalidRequest,
                    "AbortIncompleteMultipartUpload cannot be specified with object tags or sizes in the filter"
                ));
            }
            rule.abort_days = Some(positive("DaysAfterInitiation", d)?);
        }
        if rule.days.is_none()
            && rule.date_ms.is_none()
            && !rule.expired_marker
            && rule.noncurrent_days.is_none()
            && rule.abort_days.is_none()
        {
            return Err(s3_error!(InvalidRequest, "At least one action needs to be specified in a rule"));
        }
        Ok(rule)
    }

    /// The rule as S3 answers it.
    pub fn dto(&self) -> LifecycleRule {
        let tag = |(k, v): (&String, &String)| Tag { key: Some(k.clone()), value: Some(v.clone()) };
        let sizes = self.size_gt.is_some() || self.size_lt.is_some();
        let filter = self.filtered.then(|| {
            let parts = usize::from(!self.prefix.is_empty()) + self.tags.len() + usize::from(sizes);
            if parts > 1 {
                LifecycleRuleFilter {
                    and: Some(LifecycleRuleAndOperator {
                        prefix: (!self.prefix.is_empty()).then(|| self.prefix.clone()),
                        tags: (!self.tags.is_empty()).then(|| self.tags.iter().map(tag).collect()),
                        object_size_greater_than: self.size_gt.map(|n| n as i64),
                        object_size_less_than: self.size_lt.map(|n| n as i64),
                    }),
                    ..Default::default()
                }
            } else {
                LifecycleRuleFilter {
                    prefix: (!self.prefix.is_empty() || parts == 0).then(|| self.prefix.clone()),
                    tag: self.tags.iter().next().map(tag),
                    object_size_greater_than: self.size_gt.map(|n| n as i64),
                    object_size_less_than: self.size_lt.map(|n| n as i64),
                    ..Default::default()
                }
            }
        });
        let expiration = (self.days.is_some() || self.date_ms.is_some() || self.expired_marker).then(|| LifecycleExpiration {
            days: self.days.map(|d| d as i32),
            date: self.date_ms.map(|ms| Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))),
            expired_object_delete_marker: self.expired_marker.then_some(true),
        });
        LifecycleRule {
            id: self.id.clone(),
            status: ExpirationStatus::from_static(if self.enabled { ExpirationStatus::ENABLED } else { ExpirationStatus::DISABLED }),
            prefix: (!self.filtered).then(|| self.prefix.clone()),
            filter,
            expiration,
            noncurrent_version_expiration: self.noncurrent_days.map(|d| NoncurrentVersionExpiration {
                noncurrent_days: Some(d as i32),
                newer_noncurrent_versions: self.newer_noncurrent.map(|n| n as i32),
            }),
            abort_incomplete_multipart_upload: self
                .abort_days
                .map(|d| AbortIncompleteMultipartUpload { days_after_initiation: Some(d as i32) }),
            transitions: None,
            noncurrent_version_transitions: None,
        }
    }

    /// Whether it applies to a version of `key` of `size` bytes with `tags` (None: a delete
    /// marker, which has neither size nor tags, so only a rule filtering on neither applies).
    pub fn matches(&self, key: &str, version: Option<(u64, &Tags)>) -> bool {
        if !self.enabled || !key.starts_with(&self.prefix) {
            return false;
        }
        let Some((size, tags)) = version else {
            return self.tags.is_empty() && self.size_gt.is_none() && self.size_lt.is_none();
        };
        self.tags.iter().all(|(k, v)| tags.get(k) == Some(v))
            && self.size_gt.is_none_or(|g| size > g)
            && self.size_lt.is_none_or(|l| size < l)
    }
}

/// A bucket's rules, if it has any.
pub fn rules_of(attrs: &kintsugi_proto::Attrs) -> Option<Vec<Rule>> {
    serde_json::from_str(attrs.get(LIFECYCLE)?).ok()
}

/// When something `days` days after `since_ms` is due: rounded up to the next day boundary
/// since the epoch (midnight UTC for real days, as S3 rounds), with a day of `day_ms`.
pub fn due_ms(since_ms: u64, days: u32, day_ms: u64) -> u64 {
    let t = since_ms.saturating_add(u64::from(days).saturating_mul(day_ms));
    t.div_ceil(day_ms).saturating_mul(day_ms)
}

/// One version of a key as the worker meets it, newest first per key.
#[derive(Clone, Debug)]
pub struct Seen<'a> {
    pub key: &'a str,
    /// Size and tags; None for a delete marker.
    pub object: Option<(u64, &'a Tags)>,
    pub latest: bool,
    pub created_ms: u64,
    /// For a noncurrent version: when it stopped being current (the next newer version's
    /// creation) and how many noncurrent versions of its key are newer.
    pub noncurrent: Option<(u64, u32)>,
    /// For a latest delete marker: whether it is its key's only version.
    pub alone: bool,
}

/// What the rules decide for a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Keep,
    /// The current version expires (deleted, or a delete marker written, as the bucket's
    /// versioning says).
    ExpireCurrent,
    /// This version (noncurrent, or a lone delete marker) is removed by its id.
    RemoveVersion,
}

/// What `rules` decide for `v` at `now_ms`, with a day of `day_ms`.
pub fn decide(rules: &[Rule], v: &Seen, now_ms: u64, day_ms: u64) -> Decision {
    for r in rules.iter().filter(|r| r.matches(v.key, v.object)) {
        if v.latest {
            if v.object.is_none() {
                if v.alone && r.expired_marker {
                    return Decision::RemoveVersion;
                }
                continue;
            }
            let by_days = r.days.is_some_and(|d| now_ms >= due_ms(v.created_ms, d, day_ms));
            let by_date = r.date_ms.is_some_and(|d| now_ms >= d);
            if by_days || by_date {
                return Decision::ExpireCurrent;
            }
        } else if let (Some(days), Some((since, newer))) = (r.noncurrent_days, v.noncurrent) {
            if now_ms >= due_ms(since, days, day_ms) && newer >= r.newer_noncurrent.unwrap_or(0) {
                return Decision::RemoveVersion;
            }
        }
    }
    Decision::Keep
}

/// Whether an upload begun at `initiated_ms` of `key` is to be aborted.
pub fn abort_due(rules: &[Rule], key: &str, initiated_ms: u64, now_ms: u64, day_ms: u64) -> bool {
    rules.iter().any(|r| r.enabled && key.starts_with(&r.prefix) && r.abort_days.is_some_and(|d| now_ms >= due_ms(initiated_ms, d, day_ms)))
}

pub async fn put(
    g: &Gateway,
    req: S3Request<PutBucketLifecycleConfigurationInput>,
) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
    let i = req.input;
    let Some(c) = i.lifecycle_configuration else {
        return Err(s3_error!(MalformedXML, "a lifecycle configuration is needed"));
    };
    if c.rules.is_empty() || c.rules.len() > MAX_RULES {
        return Err(s3_error!(MalformedXML, "a lifecycle configuration has 1 to {MAX_RULES} rules"));
    }
    let rules = c.rules.into_iter().map(Rule::of).collect::<S3Result<Vec<_>>>()?;
    let mut ids = std::collections::BTreeSet::new();
    if let Some(id) = rules.iter().filter_map(|r| r.id.as_ref()).find(|id| !ids.insert(*id)) {
        return Err(s3_error!(InvalidArgument, "Rule ID must be unique. Found same ID for more than one rule: {id}"));
    }
    let json = serde_json::to_string(&rules).map_err(|e| s3_error!(InternalError, "{e}"))?;
    if json.len() > MAX_RULES_BYTES {
        return Err(s3_error!(InvalidRequest, "the lifecycle rules take {} bytes; a bucket keeps at most {MAX_RULES_BYTES}", json.len()));
    }
    let b = i.bucket.clone();
    g.update_attrs(
        &names::bucket_record(&i.bucket),
        &|mut a| {
            a.insert(LIFECYCLE.into(), json.clone());
            a
        },
        &|| s3_error!(NoSuchBucket, "no bucket named '{b}'"),
    )
    .await?;
    Ok(S3Response::new(PutBucketLifecycleConfigurationOutput::default()))
}

pub async fn get(
    g: &Gateway,
    req: S3Request<GetBucketLifecycleConfigurationInput>,
) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
    let Some(rules) = rules_of(&g.bucket_attrs(&req.input.bucket).await?) else {
        return Err(s3_error!(NoSuchLifecycleConfiguration, "The lifecycle configuration does not exist"));
    };
    Ok(S3Response::new(GetBucketLifecycleConfigurationOutput { rules: Some(rules.iter().map(Rule::dto).collect()), ..Default::default() }))
}

pub async fn delete(g: &Gateway, req: S3Request<DeleteBucketLifecycleInput>) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
    let b = req.input.bucket;
    g.update_attrs(
        &names::bucket_record(&b),
        &|mut a| {
            a.remove(LIFECYCLE);
            a
        },
        &|| s3_error!(NoSuchBucket, "no bucket named '{b}'"),
    )
    .await?;
    Ok(S3Response::new(DeleteBucketLifecycleOutput::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 1000;

    fn rule(f: impl FnOnce(&mut Rule)) -> Rule {
        let mut r = Rule { enabled: true, ..Default::default() };
        f(&mut r);
        r
    }

    fn current<'a>(key: &'a str, size: u64, tags: &'a Tags, created_ms: u64) -> Seen<'a> {
        Seen { key, object: Some((size, tags)), latest: true, created_ms, noncurrent: None, alone: false }
    }

    #[test]
    fn a_current_version_expires_on_its_rounded_day_and_only_if_the_filter_matches() {
        let none = Tags::new();
        let r = [rule(|r| {
            r.prefix = "logs/".into();
            r.days = Some(2);
        })];
        // Written at 1.5 days: due at 3.5, rounded up to day 4 (S3 rounds to midnight).
        let v = current("logs/a", 10, &none, 1500);
        assert_eq!(decide(&r, &v, 3999, DAY), Decision::Keep);
        assert_eq!(decide(&r, &v, 4000, DAY), Decision::ExpireCurrent);
        assert_eq!(decide(&r, &current("keep/a", 10, &none, 0), 1_000_000, DAY), Decision::Keep);
        let off = [rule(|r| {
            r.days = Some(1);
            r.enabled = false;
        })];
        assert_eq!(decide(&off, &v, 1_000_000, DAY), Decision::Keep, "a disabled rule does nothing");
    }

    #[test]
    fn tags_and_sizes_filter_and_a_delete_marker_meets_only_rules_without_them() {
        let tagged: Tags = [("class".to_string(), "tmp".to_string()), ("x".to_string(), "1".to_string())].into();
        let r = [rule(|r| {
            r.tags = [("class".to_string(), "tmp".to_string())].into();
            r.size_gt = Some(100);
            r.size_lt = Some(1000);
            r.days = Some(1);
        })];
        let now = 10 * DAY;
        assert_eq!(decide(&r, &current("k", 500, &tagged, 0), now, DAY), Decision::ExpireCurrent);
        assert_eq!(decide(&r, &current("k", 100, &tagged, 0), now, DAY), Decision::Keep, "greater than, not equal");
        assert_eq!(decide(&r, &current("k", 1000, &tagged, 0), now, DAY), Decision::Keep);
        assert_eq!(decide(&r, &current("k", 500, &Tags::new(), 0), now, DAY), Decision::Keep);
        let marker = Seen { key: "k", object: None, latest: true, created_ms: 0, noncurrent: None, alone: true };
        let markers = [rule(|r| r.expired_marker = true)];
        assert_eq!(decide(&r, &marker, now, DAY), Decision::Keep);
        assert_eq!(decide(&markers, &marker, now, DAY), Decision::RemoveVersion);
        assert_eq!(decide(&markers, &Seen { alone: false, ..marker.clone() }, now, DAY), Decision::Keep, "a marker over versions stays");
    }

    #[test]
    fn noncurrent_versions_go_after_their_days_beyond_the_newest_kept() {
        let none = Tags::new();
        let r = [rule(|r| {
            r.noncurrent_days = Some(1);
            r.newer_noncurrent = Some(2);
        })];
        let old = |newer: u32, since: u64| Seen {
            key: "k",
            object: Some((1, &none)),
            latest: false,
            created_ms: 0,
            noncurrent: Some((since, newer)),
            alone: false,
        };
        assert_eq!(decide(&r, &old(2, 0), DAY, DAY), Decision::RemoveVersion);
        assert_eq!(decide(&r, &old(1, 0), 100 * DAY, DAY), Decision::Keep, "one of the two newest noncurrent");
        assert_eq!(decide(&r, &old(5, 500), 1999, DAY), Decision::Keep, "noncurrent for under a day (rounded)");
        assert_eq!(decide(&r, &old(5, 500), 2000, DAY), Decision::RemoveVersion);
        assert_eq!(decide(&r, &current("k", 1, &none, 0), 100 * DAY, DAY), Decision::Keep, "the current version is not noncurrent");
    }

    #[test]
    fn rules_are_checked_as_s3_checks_them() {
        let base = || LifecycleRule {
            status: ExpirationStatus::from_static(ExpirationStatus::ENABLED),
            abort_incomplete_multipart_upload: None,
            expiration: None,
            filter: None,
            id: None,
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            prefix: None,
            transitions: None,
        };
        let code = |r: LifecycleRule| Rule::of(r).unwrap_err().code().clone();
        assert_eq!(code(base()), s3s::S3ErrorCode::InvalidRequest, "no action");
        let exp = |days: Option<i32>, marker: Option<bool>| LifecycleExpiration {
            days,
            expired_object_delete_marker: marker,
            ..Default::default()
        };
        assert_eq!(code(LifecycleRule { expiration: Some(exp(Some(0), None)), ..base() }), s3s::S3ErrorCode::InvalidArgument);
        assert_eq!(code(LifecycleRule { expiration: Some(exp(Some(1), Some(true))), ..base() }), s3s::S3ErrorCode::MalformedXML);
        let t = LifecycleRule { transitions: Some(vec![Transition::default()]), expiration: Some(exp(Some(1), None)), ..base() };
        assert_eq!(code(t), s3s::S3ErrorCode::NotImplemented);
        let two =
            LifecycleRuleFilter { prefix: Some("a".into()), tag: Some(Tag { key: Some("k".into()), value: None }), ..Default::default() };
        assert_eq!(
            code(LifecycleRule { filter: Some(two), expiration: Some(exp(Some(1), None)), ..base() }),
            s3s::S3ErrorCode::MalformedXML
        );
        let sized = LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                object_size_greater_than: Some(10),
                object_size_less_than: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            code(LifecycleRule { filter: Some(sized), expiration: Some(exp(Some(1), None)), ..base() }),
            s3s::S3ErrorCode::InvalidArgument
        );
        // A rule answers back as it came.
        let f = LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                prefix: Some("p/".into()),
                tags: Some(vec![Tag { key: Some("k".into()), value: Some("v".into()) }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = LifecycleRule {
            id: Some("r1".into()),
            filter: Some(f),
            expiration: Some(exp(Some(3), None)),
            noncurrent_version_expiration: Some(NoncurrentVersionExpiration {
                noncurrent_days: Some(2),
                newer_noncurrent_versions: Some(1),
            }),
            ..base()
        };
        let stored = Rule::of(r.clone()).unwrap();
        assert_eq!(Rule::of(stored.dto()).unwrap(), stored);
        assert_eq!(stored.dto().filter, r.filter);
    }
}
