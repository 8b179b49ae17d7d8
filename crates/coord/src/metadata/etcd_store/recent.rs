//! The records this leader wrote last, as etcd holds them: the leader is etcd's only writer
//! under its prefix, so what it wrote stays true until it writes again. A put's commit reads
//! back the upload and stripe records its create wrote moments before; served from here,
//! they cost no round trip.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Records kept, at most (about a megabyte a thousand).
const KEEP: usize = 8192;

#[derive(Default)]
struct Kept {
    values: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Keys in the order they were written; the oldest go first.
    order: VecDeque<Vec<u8>>,
}

#[derive(Default)]
pub(super) struct Recent(Mutex<Kept>);

impl Recent {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What etcd holds under `rel`, if it was written here lately (Some(None): deleted).
    pub(super) fn get(&self, rel: &[u8]) -> Option<Option<Vec<u8>>> {
        self.lock().values.get(rel).cloned()
    }

    /// Records writes etcd took.
    pub(super) fn took<'a>(&self, writes: impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)>) {
        let mut k = self.lock();
        for (key, value) in writes {
            if k.values.insert(key.clone(), value.clone()).is_none() {
                k.order.push_back(key.clone());
            }
        }
        while k.order.len() > KEEP {
            if let Some(old) = k.order.pop_front() {
                k.values.remove(&old);
            }
        }
    }

    /// Forgets everything: a write's outcome is unknown.
    pub(super) fn clear(&self) {
        let mut k = self.lock();
        k.values.clear();
        k.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_value_of_the_latest_keys() {
        let r = Recent::default();
        let w = |k: usize, v: Option<&str>| (format!("k{k}").into_bytes(), v.map(|v| v.as_bytes().to_vec()));
        let first: Vec<_> = (0..KEEP).map(|k| w(k, Some("a"))).collect();
        r.took(first.iter().map(|(k, v)| (k, v)));
        let again = [w(5, None), w(KEEP, Some("b"))];
        r.took(again.iter().map(|(k, v)| (k, v)));
        assert_eq!(r.get(b"k5"), Some(None), "a delete is remembered");
        assert_eq!(r.get(format!("k{KEEP}").as_bytes()), Some(Some(b"b".to_vec())));
        assert_eq!(r.get(b"k0"), None, "the oldest key went to make room");
        assert_eq!(r.lock().values.len(), KEEP);
        assert_eq!(r.get(b"k1"), Some(Some(b"a".to_vec())));
        r.clear();
        assert_eq!(r.get(b"k1"), None);
    }
}
