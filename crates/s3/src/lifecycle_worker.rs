//! The lifecycle worker: a background task of the gateway that walks every bucket with
//! lifecycle rules, a page of versions at a time, and does what the rules decide
//! (`lifecycle::decide`), at a bounded pace.
//!
//! One worker acts at a time however many gateways serve the cluster: it holds a lease, a
//! record in the cluster's metadata (`.lifecycle/state`) replaced by compare-and-swap on its
//! version, renewed as the pass goes. The same record keeps where the pass is (bucket and
//! last key done), so a pass cut short by a restart, or taken over after a lease runs out,
//! goes on from there. Nothing is done twice or wrongly: a current version is expired only
//! at the version judged (a conditional delete), noncurrent versions and markers by their
//! ids, and uploads by their ids.

use crate::errors::from_cluster;
use crate::gateway::Gateway;
use crate::lifecycle::{abort_due, decide, rules_of, Decision, Rule, Seen};
use crate::metrics::RequestMetrics;
use crate::names;
use kintsugi_client::client::VersionsPage;
use kintsugi_client::{CommitTerms, ErrorKind};
use kintsugi_proto::{Attrs, LayoutSpec, Precondition, VersionInfo, Versioning};
use s3s::{s3_error, S3Result};
use std::time::Duration;
use tokio::sync::watch;

/// The lease and cursor record.
pub const STATE: &str = ".lifecycle/state";

/// How fast lifecycle works, and how long its day is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LifecyclePace {
    /// A "day" of the rules (86,400 s; shorter for tests, as Ceph's `rgw_lc_debug_interval`).
    pub day: Duration,
    /// Time between the end of one pass and the start of the next.
    pub interval: Duration,
    /// Deletions per second at most.
    pub rate: u32,
    /// How long a worker's lease lasts unless renewed (it renews it every third of that):
    /// how long a worker that died holds up the next.
    pub lease: Duration,
}

impl Default for LifecyclePace {
    fn default() -> Self {
        LifecyclePace { day: Duration::from_secs(86_400), interval: Duration::from_secs(3600), rate: 100, lease: Duration::from_secs(60) }
    }
}

/// What a pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    pub current: u64,
    pub noncurrent: u64,
    pub markers: u64,
    pub uploads: u64,
}

/// The lease record as read: its version, and its attributes.
struct Lease {
    version: Option<u64>,
    attrs: Attrs,
}

fn now_ms() -> u64 {
    crate::object_meta::now_ms()
}

/// The worker: one pass after another, while `stop` is false.
pub async fn run(g: Gateway, pace: LifecyclePace, metrics: RequestMetrics, mut stop: watch::Receiver<bool>) {
    let me = format!("{:016x}", rand::random::<u64>());
    tracing::info!("lifecycle: a pass every {:?}, at most {} deletions/s, a day of {:?} (worker {me})", pace.interval, pace.rate, pace.day);
    loop {
        let mut w = Worker {
            g: &g,
            me: &me,
            pace,
            metrics: &metrics,
            lease: None,
            renewed: std::time::Instant::now(),
            cursor: Attrs::new(),
            stop: stop.clone(),
        };
        match w.pass().await {
            Ok(Some(r)) => {
                metrics.lifecycle_pass();
                if r != PassReport::default() {
                    tracing::info!(
                        "lifecycle pass: {} current version(s) expired, {} noncurrent removed, {} delete marker(s) removed, {} upload(s) aborted",
                        r.current,
                        r.noncurrent,
                        r.markers,
                        r.uploads
                    );
                }
            }
            Ok(None) => tracing::debug!("lifecycle: another gateway holds the lease"),
            Err(e) => tracing::warn!("lifecycle pass stopped: {}", e.message().unwrap_or("(no message)")),
        }
        tokio::select! {
            _ = tokio::time::sleep(pace.interval) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// A bucket with lifecycle rules, as its record says: its name, rules and versioning state.
type RuledBucket = (String, Vec<Rule>, Versioning);

/// Every bucket with lifecycle rules, in name order: one listing of the bucket records (a
/// record per bucket, so few).
async fn ruled_buckets(g: &Gateway) -> S3Result<Vec<RuledBucket>> {
    let mut out = Vec::new();
    let mut after = String::new();
    loop {
        let (page, _, next) = g.client.list_page(names::BUCKETS, "", &after, 0).await.map_err(from_cluster)?;
        for o in page {
            if let Some(rules) = rules_of(&o.attrs) {
                out.push((o.name[names::BUCKETS.len()..].to_string(), rules, crate::versioning::state(&o.attrs)));
            }
        }
        match next {
            Some(n) => after = n,
            None => return Ok(out),
        }
    }
}

struct Worker<'a> {
    g: &'a Gateway,
    me: &'a str,
    pace: LifecyclePace,
    metrics: &'a RequestMetrics,
    /// The lease record's version while this worker holds it, and when it was written.
    lease: Option<u64>,
    renewed: std::time::Instant,
    /// Where the pass is: its bucket, and the last key of it done (absent: all of them).
    cursor: Attrs,
    stop: watch::Receiver<bool>,
}

impl Worker<'_> {
    async fn read_lease(&self) -> S3Result<Lease> {
        match self.g.client.stat(STATE).await {
            Ok(l) if l.committed => Ok(Lease { version: Some(l.version), attrs: l.attrs }),
            Ok(_) => Ok(Lease { version: None, attrs: Attrs::new() }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Lease { version: None, attrs: Attrs::new() }),
            Err(e) => Err(from_cluster(e)),
        }
    }

    /// Writes the lease record (held by this worker, with `cursor`) if it is still at the
    /// version last seen: false if another worker replaced it meanwhile.
    async fn write_lease(&mut self, seen: Option<u64>, cursor: &Attrs) -> S3Result<bool> {
        let mut attrs = cursor.clone();
        attrs.insert("holder".into(), self.me.to_string());
        attrs.insert("until_ms".into(), (now_ms() + self.pace.lease.as_millis() as u64).to_string());
        let precondition = Some(seen.map_or(Precondition::Absent, Precondition::Version));
        let mut terms = Some(CommitTerms { attrs, precondition, versioning: Versioning::Unversioned, striped: false });
        let mut empty: &[u8] = &[];
        let code = self.g.defaults.code;
        let r = self
            .g
            .client
            .put_with_attrs(STATE, &mut empty, 0, code, 0, LayoutSpec::Stripe, &|_| {}, &mut || Ok(terms.take().unwrap_or_default()))
            .await;
        match r {
            Ok(l) => {
                self.lease = Some(l.version);
                self.renewed = std::time::Instant::now();
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => {
                self.lease = None;
                Ok(false)
            }
            Err(e) => Err(from_cluster(e)),
        }
    }

    /// Takes the lease if it is free, run out or this worker's: the cursor it holds.
    async fn claim(&mut self) -> S3Result<Option<Attrs>> {
        let l = self.read_lease().await?;
        let holder = l.attrs.get("holder").map(String::as_str);
        let until: u64 = l.attrs.get("until_ms").and_then(|t| t.parse().ok()).unwrap_or(0);
        if holder.is_some_and(|h| h != self.me) && until > now_ms() {
            return Ok(None);
        }
        let cursor: Attrs = l.attrs.into_iter().filter(|(k, _)| k == "bucket" || k == "key").collect();
        Ok(self.write_lease(l.version, &cursor).await?.then_some(cursor))
    }

    /// Notes that the pass has done every key of `bucket` up to `key` (all of them when
    /// None).
    fn done_up_to(&mut self, bucket: &str, key: Option<&str>) {
        self.cursor = [("bucket".to_string(), bucket.to_string())].into();
        if let Some(k) = key {
            self.cursor.insert("key".into(), k.to_string());
        }
    }

    /// Records where the pass is, renewing the lease; an error if another worker took it.
    async fn checkpoint(&mut self) -> S3Result<()> {
        let cursor = self.cursor.clone();
        if !self.write_lease(self.lease, &cursor).await? {
            return Err(s3_error!(InternalError, "the lifecycle lease was taken over"));
        }
        Ok(())
    }

    fn stopping(&self) -> S3Result<()> {
        if *self.stop.borrow() {
            return Err(s3_error!(InternalError, "the gateway is stopping"));
        }
        Ok(())
    }

    /// Paces deletions at `rate` per second, renewing the lease every third of its term.
    async fn paced(&mut self) -> S3Result<()> {
        tokio::time::sleep(Duration::from_secs_f64(1.0 / f64::from(self.pace.rate.max(1)))).await;
        if self.renewed.elapsed() > self.pace.lease / 3 {
            self.checkpoint().await?;
        }
        Ok(())
    }

    /// One pass over every bucket with rules from where the last one stopped; None if
    /// another worker holds the lease. A cluster whose buckets have no rules is left
    /// untouched (no lease record is written).
    async fn pass(&mut self) -> S3Result<Option<PassReport>> {
        let buckets = ruled_buckets(self.g).await?;
        if buckets.is_empty() {
            return Ok(Some(PassReport::default()));
        }
        let Some(cursor) = self.claim().await? else { return Ok(None) };
        let mut report = PassReport::default();
        // Where the last pass stopped: inside a bucket (after a key), or after a whole one.
        let (from_bucket, from_key) = (cursor.get("bucket").filter(|b| !b.is_empty()), cursor.get("key"));
        if let Some(b) = from_bucket {
            tracing::info!("lifecycle: resuming a pass at bucket '{b}' after key '{}'", from_key.map_or("(all)", String::as_str));
        }
        for (bucket, rules, versioning) in &buckets {
            self.stopping()?;
            let from = match from_bucket {
                Some(b) if bucket.as_str() < b.as_str() => continue,
                Some(b) if bucket == b => match from_key {
                    Some(k) => k.as_str(),
                    None => continue,
                },
                _ => "",
            };
            self.bucket(bucket, rules, *versioning, from, &mut report).await?;
        }
        // The pass is over: the next one starts from the first bucket.
        self.write_lease(self.lease, &Attrs::new()).await?;
        Ok(Some(report))
    }

    /// Applies `rules` to `bucket`, after `from_key`.
    async fn bucket(
        &mut self,
        bucket: &str,
        rules: &[Rule],
        versioning: Versioning,
        from_key: &str,
        report: &mut PassReport,
    ) -> S3Result<()> {
        let day_ms = self.pace.day.as_millis().max(1) as u64;
        let prefix = names::bucket_prefix(bucket);
        self.done_up_to(bucket, Some(from_key));
        let mut walk = KeyWalk::default();
        let mut key_marker = if from_key.is_empty() { String::new() } else { names::object(bucket, from_key) };
        let mut version_marker = None;
        loop {
            self.stopping()?;
            let page = VersionsPage { prefix: &prefix, delimiter: "", key_marker: &key_marker, version_marker, limit: 1000 };
            let listing = self.g.client.list_versions(page).await.map_err(from_cluster)?;
            for v in &listing.versions {
                self.stopping()?;
                let key = &v.name[prefix.len()..];
                if let Some(m) = walk.enter(key) {
                    self.lone_marker(rules, m, day_ms, report).await?;
                }
                if let Some(done) = walk.done.clone() {
                    self.done_up_to(bucket, Some(&done));
                }
                self.version(rules, v, key, versioning, &mut walk, day_ms, report).await?;
            }
            match listing.next {
                Some((k, vm)) => {
                    self.checkpoint().await?;
                    (key_marker, version_marker) = (k, vm);
                }
                None => break,
            }
        }
        if let Some(m) = walk.pending.take() {
            self.lone_marker(rules, m, day_ms, report).await?;
        }
        if rules.iter().any(|r| r.abort_days.is_some()) {
            self.uploads(bucket, rules, day_ms, report).await?;
        }
        self.done_up_to(bucket, None);
        self.checkpoint().await
    }

    /// Acts on one version met in the listing.
    #[allow(clippy::too_many_arguments)]
    async fn version(
        &mut self,
        rules: &[Rule],
        v: &VersionInfo,
        key: &str,
        versioning: Versioning,
        walk: &mut KeyWalk,
        day_ms: u64,
        report: &mut PassReport,
    ) -> S3Result<()> {
        let now = now_ms();
        let tags = crate::tagging::of_attrs(&v.attrs);
        let newer = walk.newer_created.replace(v.created_ms);
        if v.latest && v.delete_marker {
            walk.pending = Some(v.clone());
            return Ok(());
        }
        walk.pending = None;
        let seen = Seen {
            key,
            object: (!v.delete_marker).then_some((v.size, &tags)),
            latest: v.latest,
            created_ms: v.created_ms,
            noncurrent: if v.latest { None } else { newer.map(|n| (n, walk.noncurrent)) },
            alone: false,
        };
        if !v.latest {
            walk.noncurrent += 1;
            if newer.is_none() {
                // Its successor was not seen (the walk began inside this key): judged next pass.
                return Ok(());
            }
        }
        match decide(rules, &seen, now, day_ms) {
            Decision::Keep => {}
            Decision::ExpireCurrent => {
                match self.g.client.delete_if(&v.name, versioning, Some(Precondition::Version(v.version))).await {
                    Ok(_) => {
                        report.current += 1;
                        self.metrics.lifecycle_done("current");
                        tracing::debug!("lifecycle: expired '{}' (version {})", v.name, v.version);
                    }
                    // Written again, or deleted, since it was listed: not what was judged.
                    Err(e) if matches!(e.kind(), ErrorKind::PreconditionFailed | ErrorKind::NotFound) => {}
                    Err(e) => return Err(from_cluster(e)),
                }
                self.paced().await?;
            }
            Decision::RemoveVersion => {
                match self.g.client.delete_version(&v.name, v.id()).await {
                    Ok(Some(_)) => {
                        report.noncurrent += 1;
                        self.metrics.lifecycle_done("noncurrent");
                        tracing::debug!("lifecycle: removed noncurrent version {} of '{}'", v.id(), v.name);
                    }
                    Ok(None) => {}
                    // Object lock keeps it (S3's lifecycle passes such versions by too).
                    Err(e) if e.kind() == ErrorKind::Locked => {
                        self.metrics.lifecycle_done("kept_locked");
                        tracing::debug!("lifecycle: version {} of '{}' is locked: kept", v.id(), v.name);
                    }
                    Err(e) => return Err(from_cluster(e)),
                }
                self.paced().await?;
            }
        }
        Ok(())
    }

    /// A latest delete marker that turned out to be its key's only version.
    async fn lone_marker(&mut self, rules: &[Rule], m: VersionInfo, day_ms: u64, report: &mut PassReport) -> S3Result<()> {
        let key = m.name.split_once('/').map_or("", |(_, k)| k);
        let seen = Seen { key, object: None, latest: true, created_ms: m.created_ms, noncurrent: None, alone: true };
        if decide(rules, &seen, now_ms(), day_ms) == Decision::RemoveVersion {
            if self.g.client.delete_version(&m.name, m.id()).await.map_err(from_cluster)?.is_some() {
                report.markers += 1;
                self.metrics.lifecycle_done("marker");
                tracing::debug!("lifecycle: removed the lone delete marker of '{}'", m.name);
            }
            self.paced().await?;
        }
        Ok(())
    }

    /// Aborts the bucket's uploads that the rules say are too old.
    async fn uploads(&mut self, bucket: &str, rules: &[Rule], day_ms: u64, report: &mut PassReport) -> S3Result<()> {
        let mut after = String::new();
        loop {
            self.stopping()?;
            let (objects, _, next) = self.g.client.list_page(&names::uploads_prefix(bucket), "", &after, 0).await.map_err(from_cluster)?;
            for o in objects {
                let u = crate::multipart::upload_of(&o.attrs);
                if abort_due(rules, &u.key, u.initiated_ms, now_ms(), day_ms) {
                    let id = o.name.rsplit('/').next().unwrap_or_default();
                    self.g.abort_upload(bucket, id).await?;
                    report.uploads += 1;
                    self.metrics.lifecycle_done("upload");
                    tracing::debug!("lifecycle: aborted upload {id} of '{bucket}/{}'", u.key);
                    self.paced().await?;
                }
            }
            match next {
                Some(n) => after = n,
                None => return Ok(()),
            }
        }
    }
}

/// Where the walk is among one key's versions (newest first).
#[derive(Default)]
struct KeyWalk {
    key: Option<String>,
    /// The last key whose versions were all seen.
    done: Option<String>,
    /// The previous version's creation: when the one after it stopped being current.
    newer_created: Option<u64>,
    /// Noncurrent versions of this key seen so far.
    noncurrent: u32,
    /// The key's latest version, a delete marker, until it is known whether others follow.
    pending: Option<VersionInfo>,
}

impl KeyWalk {
    /// Moves to `key`; a delete marker left pending by the previous key is answered (it
    /// was that key's only version).
    fn enter(&mut self, key: &str) -> Option<VersionInfo> {
        if self.key.as_deref() == Some(key) {
            return None;
        }
        self.done = self.key.replace(key.to_string());
        self.newer_created = None;
        self.noncurrent = 0;
        self.pending.take()
    }
}
