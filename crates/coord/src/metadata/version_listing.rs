//! Listing versions a page at a time, as S3's ListObjectVersions does: names in order, each
//! one's versions newest first, under a prefix, rolled up by a delimiter, from a (name,
//! version) marker. A page merges two range reads in the same order, the latest versions
//! (under the names) and the kept ones (under kept names, see [`crate::metadata::versions`]), and
//! reads only its own entries (seeking past each common prefix), never the whole store.

use crate::metadata::index::after_prefix;
use crate::metadata::listing::MAX_PAGE;
use crate::metadata::records::{MetaStore, ObjectRecord};
use crate::metadata::versions::{self, kept_prefix, parse_kept, KEPT};
use kintsugi_proto::{VersionInfo, VersionRef, WireError};
use std::collections::VecDeque;

/// One page of a version listing.
#[derive(Debug, Default)]
pub struct VersionPage {
    pub versions: Vec<VersionInfo>,
    pub prefixes: Vec<String>,
    /// Where the next page starts (the last entry: a name and its version, or a common
    /// prefix), if there is more.
    pub next: Option<(String, Option<VersionRef>)>,
}

/// Records read in order from `from`, while they start with `prefix`.
struct Cursor {
    prefix: String,
    from: String,
    inclusive: bool,
    buf: VecDeque<ObjectRecord>,
    done: bool,
    /// The latest versions' cursor steps over the kept names (an empty prefix covers both).
    skip_kept: bool,
}

const BATCH: usize = 128;

impl Cursor {
    fn new(prefix: String, from: String, inclusive: bool, skip_kept: bool) -> Self {
        Cursor { prefix, from, inclusive, buf: VecDeque::new(), done: false, skip_kept }
    }

    fn peek(&mut self, meta: &dyn MetaStore) -> Result<Option<&ObjectRecord>, WireError> {
        while self.buf.is_empty() && !self.done {
            let batch = meta.objects_from(&self.from, self.inclusive, BATCH)?;
            self.done = batch.len() < BATCH;
            if let Some(last) = batch.last() {
                (self.from, self.inclusive) = (last.name.clone(), false);
            }
            for o in batch {
                if !o.name.starts_with(&self.prefix) {
                    self.done = true;
                    break;
                }
                if self.skip_kept && versions::is_kept(&o.name) {
                    // On past every kept name (they all start with KEPT), after what is read.
                    (self.from, self.inclusive, self.done) = (versions::PAST_KEPT.to_string(), true, false);
                    break;
                }
                self.buf.push_back(o);
            }
        }
        Ok(self.buf.front())
    }

    fn seek(&mut self, to: String) {
        self.buf.clear();
        (self.from, self.inclusive, self.done) = (to, true, false);
    }
}

/// The page of versions of names starting with `prefix` after version `version_marker` of
/// `key_marker` (after all its versions when None), at most `limit` entries.
pub fn list_versions(
    meta: &dyn MetaStore,
    prefix: &str,
    delimiter: &str,
    key_marker: &str,
    version_marker: Option<VersionRef>,
    limit: usize,
) -> Result<VersionPage, WireError> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut page = VersionPage::default();
    let skip_kept = !prefix.starts_with(KEPT);
    let (live_from, live_incl, kept_from, kept_incl) = if key_marker.is_empty() || key_marker.as_bytes() < prefix.as_bytes() {
        (prefix.to_string(), true, kept_prefix(prefix), true)
    } else if !delimiter.is_empty() && key_marker.starts_with(prefix) && key_marker.ends_with(delimiter) && key_marker.len() > prefix.len()
    {
        // A common prefix ended the last page: past everything under it.
        let Some(p) = after_prefix(key_marker) else { return Ok(page) };
        (p.clone(), true, kept_prefix(&p), true)
    } else {
        let version = match version_marker {
            Some(VersionRef::Id(v)) => Some(v),
            Some(VersionRef::Null) => versions::find(meta, key_marker, Some(VersionRef::Null))?.map(|o| o.version),
            None => None,
        };
        match version {
            // After that version: past the name's latest, and its kept ones down to it.
            Some(v) => (key_marker.to_string(), false, versions::kept_name(key_marker, v), false),
            // After all its versions: "\x01" is above the "\0" that ends the kept name.
            None => (key_marker.to_string(), false, format!("{KEPT}{key_marker}\u{1}"), true),
        }
    };
    let mut live = Cursor::new(prefix.to_string(), live_from, live_incl, skip_kept);
    let mut kept = Cursor::new(kept_prefix(prefix), kept_from, kept_incl, false);
    let mut last: Option<(String, Option<VersionRef>)> = None;
    let mut count = 0;
    loop {
        let a = live.peek(meta)?.map(|o| (o.name.clone(), o.version));
        let b = kept.peek(meta)?.and_then(|o| parse_kept(&o.name)).map(|(n, v)| (n.to_string(), v));
        // The smaller by (name, newest first).
        let from_live = match (&a, &b) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((na, va)), Some((nb, vb))) => (na.as_str(), std::cmp::Reverse(*va)) <= (nb.as_str(), std::cmp::Reverse(*vb)),
        };
        let (name, _) = if from_live { a.expect("some") } else { b.expect("some") };
        if count == limit {
            page.next = last;
            break;
        }
        let rest = &name[prefix.len()..];
        if let Some(at) = (!delimiter.is_empty()).then(|| rest.find(delimiter)).flatten() {
            let common = name[..prefix.len() + at + delimiter.len()].to_string();
            count += 1;
            last = Some((common.clone(), None));
            let skip = after_prefix(&common);
            page.prefixes.push(common);
            match skip {
                Some(p) => {
                    kept.seek(kept_prefix(&p));
                    live.seek(p);
                    continue;
                }
                None => break,
            }
        }
        let o = if from_live { live.buf.pop_front() } else { kept.buf.pop_front() }.expect("peeked");
        let info = VersionInfo {
            version: o.version,
            versioned: o.chain.versioned,
            delete_marker: o.chain.delete_marker,
            latest: from_live,
            size: o.size,
            created_ms: o.created_ms,
            attrs: o.attrs,
            name,
        };
        count += 1;
        last = Some((info.name.clone(), Some(info.id())));
        page.versions.push(info);
    }
    Ok(page)
}
