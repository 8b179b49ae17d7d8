//! The versions of a name (S3 versioning) in the metadata store.
//!
//! The latest version, a delete marker included, is the record under the name itself, so a
//! read of the latest is one lookup. Older versions that are kept live under *kept names*:
//! `"\x7f" + name + "\0" + 16 hex digits of !version`. No object name holds a control
//! character, so no name collides with them and no listing of names meets them; and they
//! sort in S3's order (names in order, each one's versions newest first), so a version
//! listing is a range read. Each version links to its neighbours by number (`older`,
//! `newer`) and the latest to the kept null version, so every change of a name's versions
//! is a few reads by key inside one transaction, whatever the number of versions.
//!
//! A kept version is an object like any other (its stripes are repaired, scrubbed and
//! rebalanced under its kept name) until it is deleted by its id, when its stripes go to
//! garbage.

use crate::metadata::records::{Change, MetaStore, ObjectRecord, Txn, VersionLinks};
use kintsugi_proto::{LayoutSpec, VersionRef, Versioning, WireError};

pub use crate::metadata::version_names::{is_kept, kept_name, kept_prefix, parse_kept, KEPT, PAST_KEPT};

/// The number of the version `want` names, given the name's latest record: its own, the
/// kept null version's, or the id's (None: there is no null version).
fn number_of(latest: &ObjectRecord, want: VersionRef) -> Option<u64> {
    match want {
        _ if is_ref(latest, want) => Some(latest.version),
        VersionRef::Null => (latest.chain.kept_null != 0).then_some(latest.chain.kept_null),
        VersionRef::Id(v) => Some(v),
    }
}

/// Whether the record is the version `want` names.
fn is_ref(o: &ObjectRecord, want: VersionRef) -> bool {
    match want {
        VersionRef::Null => !o.chain.versioned,
        VersionRef::Id(v) => o.chain.versioned && o.version == v,
    }
}

/// A kept version's record (NotFound-free: None when it is not there).
fn kept(t: &dyn Txn, name: &str, version: u64) -> Result<Option<ObjectRecord>, WireError> {
    t.object(&kept_name(name, version))
}

/// Makes `new` the latest version of `name`, in place of the latest it has: that one is
/// kept (linked below `new`), unless both are the null version (`versioning` says whether
/// `new` has an id of its own). A null version replaces the null version the name has,
/// latest or kept.
pub(crate) fn supersede(t: &mut dyn Txn, name: &str, mut new: ObjectRecord, versioning: Versioning, now_ms: u64) -> Result<(), WireError> {
    new.name = name.to_string();
    new.chain = VersionLinks { versioned: versioning == Versioning::Enabled, delete_marker: new.chain.delete_marker, ..Default::default() };
    let Some(mut old) = t.object(name)? else {
        return t.put(Change::PutObject(new));
    };
    if !new.chain.versioned && old.chain.kept_null != 0 {
        let null = old.chain.kept_null;
        remove_kept(t, name, &mut old, null, now_ms, false)?;
    }
    new.chain.older = old.chain.older;
    new.chain.kept_null = old.chain.kept_null;
    // Only a null version replaces a null version; one with an id is never dropped by a
    // write (even one that does not know the name is versioned).
    let keep = old.chain.versioned || new.chain.versioned;
    if keep {
        if old.shares_stripes() {
            return Err(WireError::bad_request(format!("'{name}' has a {} layout: its versions cannot be kept", old.layout)));
        }
        let mut k = old.clone();
        k.name = kept_name(name, old.version);
        k.chain.newer = new.version;
        k.chain.kept_null = 0;
        if !old.chain.versioned {
            new.chain.kept_null = old.version;
        }
        new.chain.older = old.version;
        t.put(Change::DeleteObject(name.to_string()))?;
        t.put(Change::PutObject(k))?;
    } else {
        t.discard_version(&old, now_ms, false)?;
        if let Some(mut below) = (old.chain.older != 0).then(|| kept(t, name, old.chain.older)).transpose()?.flatten() {
            below.chain.newer = new.version;
            t.put(Change::PutObject(below))?;
        }
    }
    t.put(Change::PutObject(new))
}

/// Drops kept version `version` of `name` (its stripes to garbage), linking its neighbours;
/// `latest` is the name's latest record, changed here where it links to it (the caller
/// stores it). Returns the record dropped.
fn remove_kept(
    t: &mut dyn Txn,
    name: &str,
    latest: &mut ObjectRecord,
    version: u64,
    now_ms: u64,
    bypass_governance: bool,
) -> Result<Option<ObjectRecord>, WireError> {
    let Some(k) = kept(t, name, version)? else { return Ok(None) };
    if let Some(mut o) = (k.chain.older != 0).then(|| kept(t, name, k.chain.older)).transpose()?.flatten() {
        o.chain.newer = k.chain.newer;
        t.put(Change::PutObject(o))?;
    }
    if k.chain.newer == latest.version || k.chain.newer == 0 {
        latest.chain.older = k.chain.older;
    } else if let Some(mut n) = kept(t, name, k.chain.newer)? {
        n.chain.older = k.chain.older;
        t.put(Change::PutObject(n))?;
    }
    if latest.chain.kept_null == version {
        latest.chain.kept_null = 0;
    }
    t.discard_version(&k, now_ms, bypass_governance)?;
    t.put(Change::DeleteObject(k.name.clone()))?;
    Ok(Some(k))
}

/// A delete marker, the latest version of a deleted name.
pub(crate) fn marker(t: &mut dyn Txn, name: &str, now_ms: u64) -> Result<ObjectRecord, WireError> {
    Ok(ObjectRecord {
        name: name.to_string(),
        size: 0,
        code: kintsugi_codes::CodeSpec::Rs { k: 1, m: 1 },
        committed: true,
        stripes: vec![],
        version: t.next_id("version")?,
        created_ms: now_ms,
        layout: LayoutSpec::Stripe,
        extents: vec![],
        attrs: Default::default(),
        chain: VersionLinks { delete_marker: true, ..Default::default() },
        inline: None,
    })
}

/// Deletes exactly version `want` of `name`: its stripes go to garbage; if it was the
/// latest, the next older version becomes the latest. Returns the record deleted (with its
/// place as it was), or None if there is no such version.
pub(crate) fn delete_version(
    t: &mut dyn Txn,
    name: &str,
    want: VersionRef,
    now_ms: u64,
    bypass_governance: bool,
) -> Result<Option<ObjectRecord>, WireError> {
    let Some(mut latest) = t.object(name)? else { return Ok(None) };
    if is_ref(&latest, want) {
        t.discard_version(&latest, now_ms, bypass_governance)?;
        t.put(Change::DeleteObject(name.to_string()))?;
        if let Some(mut up) = (latest.chain.older != 0).then(|| kept(t, name, latest.chain.older)).transpose()?.flatten() {
            t.put(Change::DeleteObject(up.name.clone()))?;
            up.name = name.to_string();
            up.chain.newer = 0;
            up.chain.kept_null = if latest.chain.kept_null == up.version { 0 } else { latest.chain.kept_null };
            t.put(Change::PutObject(up))?;
        }
        return Ok(Some(latest));
    }
    let Some(version) = number_of(&latest, want) else { return Ok(None) };
    match kept(t, name, version)? {
        Some(k) if is_ref(&k, want) => {}
        _ => return Ok(None),
    }
    let gone = remove_kept(t, name, &mut latest, version, now_ms, bypass_governance)?;
    t.put(Change::PutObject(latest))?;
    Ok(gone)
}

/// Version `want` of `name` (its latest when None), as stored now; the record's name is
/// where it is stored.
pub(crate) fn find(meta: &dyn MetaStore, name: &str, want: Option<VersionRef>) -> Result<Option<ObjectRecord>, WireError> {
    // Twice: a version that stopped being the latest between the two reads is kept by then.
    for _ in 0..2 {
        let Some(latest) = meta.object(name)? else { return Ok(None) };
        let Some(want) = want else { return Ok(Some(latest)) };
        if is_ref(&latest, want) {
            return Ok(Some(latest));
        }
        let Some(version) = number_of(&latest, want) else { return Ok(None) };
        if let Some(k) = meta.object(&kept_name(name, version))?.filter(|k| is_ref(k, want)) {
            return Ok(Some(k));
        }
        if meta.object(name)?.is_none_or(|now| now.version == latest.version) {
            return Ok(None);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::version_listing::list_versions;
    use crate::metadata::{RedbMeta, StripeRecord};
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, BTreeSet};

    /// One version in the model: (number, has its own id, is a delete marker, its stripe).
    type Model = BTreeMap<String, Vec<(u64, bool, bool, u64)>>;

    fn write(m: &RedbMeta, name: &str, versioning: Versioning, marker: bool) -> (u64, u64) {
        let mut made = (0, 0);
        m.update(&mut |t| {
            let mut o = super::marker(t, name, 1)?;
            if !marker {
                let id = t.next_id("stripe")?;
                t.put(Change::PutStripe(StripeRecord::new(id, o.code, 1, 4096, vec![0, 1])))?;
                o.chain.delete_marker = false;
                o.stripes = vec![id];
                o.size = 1;
            }
            made = (o.version, o.stripes.first().copied().unwrap_or(0));
            supersede(t, name, o, versioning, 1)
        })
        .unwrap();
        made
    }

    /// Object lock holds wherever a version would go: a delete by id, an overwrite of an
    /// unversioned name, the deletion of the latest; GOVERNANCE yields to a bypass, and a
    /// version past its date goes.
    #[test]
    fn a_retained_version_survives_every_way_of_deleting_it() {
        use kintsugi_proto::retention::{set_legal_hold, set_retention, Mode, Retention};
        use kintsugi_proto::wire_error::ErrorKind;
        let dir = tempfile::tempdir().unwrap();
        let m = RedbMeta::open(&dir.path().join("meta.redb")).unwrap();
        let lock = |name: &str, r: Option<Retention>, hold: bool| {
            m.update(&mut |t| {
                let mut o = t.object(name)?.unwrap();
                set_retention(&mut o.attrs, r);
                set_legal_hold(&mut o.attrs, hold);
                t.put(Change::PutObject(o))
            })
            .unwrap()
        };
        let del = |name: &str, v: u64, now: u64, bypass: bool| {
            let mut r = Ok(None);
            let _ = m.update(&mut |t| {
                r = delete_version(t, name, VersionRef::Id(v), now, bypass);
                r.clone().map(|_| ())
            });
            r.map(|g| g.is_some()).map_err(|e| e.kind())
        };
        let (old, _) = write(&m, "c", Versioning::Enabled, false);
        lock("c", Some(Retention { mode: Mode::Compliance, until_ms: 1000 }), false);
        let (new, _) = write(&m, "c", Versioning::Enabled, false);
        assert_eq!(del("c", old, 999, true), Err(ErrorKind::Locked), "a kept COMPLIANCE version, even with a bypass");
        assert_eq!(del("c", new, 999, false), Ok(true), "the unlocked latest goes");
        assert_eq!(del("c", old, 1000, false), Ok(true), "at its date it goes");

        let (g, _) = write(&m, "g", Versioning::Enabled, false);
        lock("g", Some(Retention { mode: Mode::Governance, until_ms: 1000 }), false);
        assert_eq!(del("g", g, 5, false), Err(ErrorKind::Locked), "the latest, GOVERNANCE");
        assert_eq!(del("g", g, 5, true), Ok(true), "GOVERNANCE yields to a bypass");

        // An overwrite of an unversioned name would discard it; a held one stays.
        write(&m, "u", Versioning::Unversioned, false);
        lock("u", None, true);
        let r = m.update(&mut |t| {
            let mut o = super::marker(t, "u", 1)?;
            o.chain.delete_marker = false;
            supersede(t, "u", o, Versioning::Unversioned, 1)
        });
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::Locked), "an overwrite of a held version");
        assert!(!m.object("u").unwrap().unwrap().attrs.is_empty(), "the held version is still there");
    }

    /// Random writes, delete markers and deletes by id on a few names, in the real store,
    /// against a model of S3's rules: every version reads back by its id, the latest is the
    /// model's, version listings page in S3's order, name listings hide marked names, and
    /// exactly the stripes of versions deleted (or null versions replaced) are garbage.
    #[test]
    fn versions_follow_s3s_rules_under_random_changes() {
        let dir = tempfile::tempdir().unwrap();
        let m = RedbMeta::open(&dir.path().join("meta.redb")).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let names = ["a", "a/x", "ab", "b/c/d", "é"];
        let (mut model, mut dropped) = (Model::new(), BTreeSet::new());
        for round in 0..600 {
            let name = names[rng.random_range(0..names.len())];
            let vs = model.entry(name.to_string()).or_default();
            match rng.random_range(0..10) {
                0..=5 => {
                    let versioning = [Versioning::Enabled, Versioning::Suspended, Versioning::Unversioned][rng.random_range(0..3)];
                    let marker = rng.random_range(0..4) == 0 && versioning != Versioning::Unversioned;
                    let (v, stripe) = write(&m, name, versioning, marker);
                    let own = versioning == Versioning::Enabled;
                    if !own {
                        // A null version replaces the null version.
                        vs.retain(|x| {
                            let keep = x.1;
                            if !keep && x.3 != 0 {
                                dropped.insert(x.3);
                            }
                            keep
                        });
                    }
                    vs.insert(0, (v, own, marker, stripe));
                }
                _ if vs.is_empty() => {}
                _ => {
                    let i = rng.random_range(0..vs.len());
                    let (v, own, ..) = vs[i];
                    let want = if own { VersionRef::Id(v) } else { VersionRef::Null };
                    let mut gone = None;
                    m.update(&mut |t| {
                        gone = delete_version(t, name, want, 1, false)?;
                        Ok(())
                    })
                    .unwrap();
                    assert_eq!(gone.map(|g| g.version), Some(v), "round {round}: delete {want} of {name}");
                    let x = vs.remove(i);
                    if x.3 != 0 {
                        dropped.insert(x.3);
                    }
                }
            }
            // Deleting a version that is not there changes nothing.
            m.update(&mut |t| {
                assert!(delete_version(t, name, VersionRef::Id(1 << 60), 1, false)?.is_none());
                Ok(())
            })
            .unwrap();
        }
        for (name, vs) in &model {
            let latest = find(&m, name, None).unwrap();
            assert_eq!(latest.as_ref().map(|o| o.version), vs.first().map(|x| x.0), "{name}");
            for &(v, own, marker, _) in vs {
                let want = if own { VersionRef::Id(v) } else { VersionRef::Null };
                let o = find(&m, name, Some(want)).unwrap().unwrap_or_else(|| panic!("{name} {want}"));
                assert_eq!((o.version, o.chain.delete_marker), (v, marker));
            }
            assert!(vs.iter().filter(|x| !x.1).count() <= 1, "one null version at most");
        }
        // Version listings, paged small, give the model in S3's order.
        let expected: Vec<(String, u64, bool)> =
            model.iter().flat_map(|(n, vs)| vs.iter().enumerate().map(|(i, x)| (n.clone(), x.0, i == 0))).collect();
        for limit in [1, 3, 1000] {
            let (mut got, mut marker) = (Vec::new(), (String::new(), None));
            loop {
                let p = list_versions(&m, "", "", &marker.0, marker.1, limit).unwrap();
                got.extend(p.versions.iter().map(|v| (v.name.clone(), v.version, v.latest)));
                match p.next {
                    Some((k, v)) => marker = (k, v),
                    None => break,
                }
            }
            assert_eq!(got, expected, "pages of {limit}");
        }
        // With a delimiter: "a/" and "b/" roll up, once each.
        let p = list_versions(&m, "", "/", "", None, 1000).unwrap();
        let rolled: BTreeSet<&str> = p.prefixes.iter().map(String::as_str).collect();
        let want: BTreeSet<&str> =
            ["a/", "b/"].into_iter().filter(|p| model.iter().any(|(n, vs)| n.starts_with(p) && !vs.is_empty())).collect();
        assert_eq!(rolled, want);
        // Name listings show the names whose latest is not a marker, never a kept name.
        let listed: Vec<String> =
            crate::metadata::listing::list_page(&m, "", "", "", 1000).unwrap().objects.into_iter().map(|o| o.name).collect();
        let live: Vec<String> = model.iter().filter(|(_, vs)| vs.first().is_some_and(|x| !x.2)).map(|(n, _)| n.clone()).collect();
        assert_eq!(listed, live);
        // Garbage: exactly the stripes of versions gone.
        let garbage: BTreeSet<u64> = m.garbage_from(0, usize::MAX).unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(garbage, dropped);
    }

    #[test]
    fn kept_names_sort_as_s3_lists_versions_and_read_back() {
        let names = ["a", "a/b", "a b", "ab", "b", "é"];
        let mut stored = Vec::new();
        for n in names {
            for v in [1u64, 7, 300, u64::MAX - 1] {
                stored.push((kept_name(n, v), n, v));
            }
        }
        let mut sorted = stored.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected = stored.clone();
        expected.sort_by(|a, b| a.1.cmp(b.1).then(b.2.cmp(&a.2)));
        assert_eq!(sorted, expected, "names in order, each one's versions newest first");
        for (s, n, v) in &stored {
            assert_eq!(parse_kept(s), Some((*n, *v)));
            let first: String = n.chars().take(1).collect();
            assert!(is_kept(s) && s.starts_with(&kept_prefix(&first)));
        }
        assert_eq!(parse_kept("a"), None);
    }
}
