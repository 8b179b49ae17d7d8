//! Listing objects a page at a time, in name order, as S3's ListObjectsV2 does: a prefix, a
//! delimiter that rolls names up into common prefixes, and a continuation point. A page
//! reads only its own entries (and seeks past each common prefix), never the whole store.
//! Names whose latest version is a delete marker are not listed, nor kept versions.

use crate::metadata::index::after_prefix;
use crate::metadata::records::{MetaStore, ObjectRecord};
use kintsugi_proto::WireError;

/// The most entries (objects and common prefixes) a page holds, as S3's max-keys.
pub const MAX_PAGE: usize = 1000;

/// One page of a listing.
#[derive(Debug, Default)]
pub struct Page {
    pub objects: Vec<ObjectRecord>,
    pub prefixes: Vec<String>,
    /// The continuation point of the next page (the last entry), if there is more.
    pub next: Option<String>,
}

/// The page of names starting with `prefix` after `after`, at most `limit` entries.
pub fn list_page(meta: &dyn MetaStore, prefix: &str, delimiter: &str, after: &str, limit: usize) -> Result<Page, WireError> {
    let limit = limit.clamp(1, MAX_PAGE);
    let mut page = Page::default();
    // Where to read from: the prefix itself, or past the previous page's last entry (past
    // everything under it when it was a common prefix).
    let (mut from, mut inclusive) = if after.as_bytes() < prefix.as_bytes() {
        (prefix.to_string(), true)
    } else if !delimiter.is_empty() && after.starts_with(prefix) && after.ends_with(delimiter) && after.len() > prefix.len() {
        match after_prefix(after) {
            Some(p) => (p, true),
            None => return Ok(page),
        }
    } else {
        (after.to_string(), false)
    };
    let (mut count, mut last) = (0, String::new());
    'pages: loop {
        let batch = meta.objects_from(&from, inclusive, (limit - count + 1).min(256))?;
        let full = batch.len() == (limit - count + 1).min(256);
        for o in batch {
            if !o.name.starts_with(prefix) {
                break 'pages;
            }
            if crate::metadata::versions::is_kept(&o.name) && !prefix.starts_with(crate::metadata::versions::KEPT) {
                // Kept versions are listed by version listings only: past all of them.
                (from, inclusive) = (crate::metadata::versions::PAST_KEPT.to_string(), true);
                continue 'pages;
            }
            if o.chain.delete_marker {
                // A name whose latest version is a delete marker is not listed (nor is a
                // common prefix only such names share).
                (from, inclusive) = (o.name.clone(), false);
                continue;
            }
            if count == limit {
                // There is more: the next page starts past this one's last entry.
                page.next = Some(last);
                break 'pages;
            }
            let rest = &o.name[prefix.len()..];
            if let Some(at) = (!delimiter.is_empty()).then(|| rest.find(delimiter)).flatten() {
                let common = o.name[..prefix.len() + at + delimiter.len()].to_string();
                count += 1;
                let skip = after_prefix(&common);
                last = common.clone();
                page.prefixes.push(common);
                match skip {
                    // Seek past every name under it.
                    Some(p) => {
                        (from, inclusive) = (p, true);
                        continue 'pages;
                    }
                    None => break 'pages,
                }
            }
            count += 1;
            (from, inclusive) = (o.name.clone(), false);
            last = o.name.clone();
            page.objects.push(o);
        }
        if !full {
            break;
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{Change, RedbMeta};
    use kintsugi_proto::LayoutSpec;

    fn store(names: &[&str]) -> (tempfile::TempDir, RedbMeta) {
        let dir = tempfile::tempdir().unwrap();
        let m = RedbMeta::open(&dir.path().join("meta.redb")).unwrap();
        let code = "rs:2,1".parse().unwrap();
        let records = names
            .iter()
            .map(|n| {
                Change::PutObject(ObjectRecord {
                    name: n.to_string(),
                    size: 1,
                    code,
                    committed: true,
                    stripes: vec![],
                    version: 1,
                    created_ms: 0,
                    layout: LayoutSpec::Stripe,
                    extents: vec![],
                    attrs: Default::default(),
                    chain: Default::default(),
                    inline: None,
                })
            })
            .collect();
        m.apply(records).unwrap();
        (dir, m)
    }

    fn names(p: &Page) -> Vec<&str> {
        p.objects.iter().map(|o| o.name.as_str()).collect()
    }

    /// Every page in turn, as a client pages: (objects, prefixes).
    fn all_pages(m: &RedbMeta, prefix: &str, delimiter: &str, limit: usize) -> (Vec<String>, Vec<String>) {
        let (mut objects, mut prefixes, mut after) = (Vec::new(), Vec::new(), String::new());
        loop {
            let p = list_page(m, prefix, delimiter, &after, limit).unwrap();
            assert!(p.objects.len() + p.prefixes.len() <= limit);
            objects.extend(p.objects.iter().map(|o| o.name.clone()));
            prefixes.extend(p.prefixes.iter().cloned());
            match p.next {
                Some(n) => after = n,
                None => return (objects, prefixes),
            }
        }
    }

    const TREE: &[&str] = &["a", "b/1", "b/2", "b/c/3", "b0", "c/1", "c/2", "d", "é/x", "\u{10FFFF}/y"];

    #[test]
    fn prefix_and_delimiter_roll_names_up_as_s3_does() {
        let (_d, m) = store(TREE);
        let p = list_page(&m, "", "/", "", 1000).unwrap();
        assert_eq!(names(&p), vec!["a", "b0", "d"]);
        assert_eq!(p.prefixes, vec!["b/", "c/", "é/", "\u{10FFFF}/"]);
        assert_eq!(p.next, None);
        let p = list_page(&m, "b/", "/", "", 1000).unwrap();
        assert_eq!(names(&p), vec!["b/1", "b/2"]);
        assert_eq!(p.prefixes, vec!["b/c/"]);
        let p = list_page(&m, "b", "", "", 1000).unwrap();
        assert_eq!(names(&p), vec!["b/1", "b/2", "b/c/3", "b0"]);
        let p = list_page(&m, "zz", "/", "", 1000).unwrap();
        assert!(p.objects.is_empty() && p.prefixes.is_empty());
    }

    #[test]
    fn pages_of_every_size_join_into_the_whole_listing() {
        let (_d, m) = store(TREE);
        let whole = all_pages(&m, "", "/", 1000);
        let flat = all_pages(&m, "", "", 1000);
        assert_eq!(flat.0, TREE.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        for limit in 1..=5 {
            assert_eq!(all_pages(&m, "", "/", limit), whole, "limit {limit}");
            assert_eq!(all_pages(&m, "", "", limit), flat, "limit {limit}");
            assert_eq!(all_pages(&m, "b/", "/", limit), (vec!["b/1".into(), "b/2".into()], vec!["b/c/".into()]));
        }
        // Starting after a name (S3's start-after).
        let p = list_page(&m, "", "", "b0", 2).unwrap();
        assert_eq!(names(&p), vec!["c/1", "c/2"]);
        assert_eq!(p.next.as_deref(), Some("c/2"));
    }
}
