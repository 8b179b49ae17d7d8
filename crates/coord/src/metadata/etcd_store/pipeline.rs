//! Group commit for etcd: updates run one at a time as before, but none waits for etcd's
//! answer (a raft round, an fsync on a majority) before the next runs. Each one's writes
//! join the *filling* batch; one batch at a time goes to etcd as one transaction (still
//! fenced by the leader key), and every update in it is answered when etcd took it. An
//! update reads what the updates before it wrote, from the filling batch and the one being
//! sent, as it would read etcd once they land.
//!
//! Nothing that may not land is acted on: an update returns only once its batch is in
//! etcd; reads outside updates go to etcd itself. When a batch fails, the batch filled on
//! top of it fails too, and so does an update that was running meanwhile (it may have read
//! through the failed one): each is told to try again, and the caller's retry reads etcd.

use kintsugi_proto::WireError;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Relative keys to new values (None: deleted).
pub(super) type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Failed batches' errors are kept for this many batches (their waiters read them).
const KEEP_FAILED: u64 = 4096;

struct State {
    filling: Writes,
    /// The filling batch's number; batches go to etcd one at a time, in order.
    filling_no: u64,
    /// The batch on its way to etcd.
    sending: Option<Arc<Writes>>,
    /// Every batch up to this one has its outcome.
    done_no: u64,
    /// Recent batches that failed, and why.
    failed: BTreeMap<u64, WireError>,
    /// Bumped by every failure: an update begun before it may have read a failed batch.
    epoch: u64,
    /// A batch is being sent.
    sender: bool,
}

pub(super) struct Pipeline {
    state: Mutex<State>,
    landed: Condvar,
}

impl Default for Pipeline {
    fn default() -> Self {
        let state =
            State { filling: Writes::new(), filling_no: 1, sending: None, done_no: 0, failed: BTreeMap::new(), epoch: 0, sender: false };
        Pipeline { state: Mutex::new(state), landed: Condvar::new() }
    }
}

impl Pipeline {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the batches not yet in etcd hold for `rel`: None if neither has it, Some(None)
    /// if one deletes it.
    pub(super) fn lookup(&self, rel: &[u8]) -> Option<Option<Vec<u8>>> {
        let s = self.lock();
        s.filling.get(rel).or_else(|| s.sending.as_ref()?.get(rel)).cloned()
    }

    /// The epoch an update begins in (see [`Pipeline::add`]).
    pub(super) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Adds the writes of an update begun in epoch `began` (under the writer's turn) to the
    /// filling batch; returns the batch to wait for: its own, or for an update that wrote
    /// nothing, the last one whose writes it could have read.
    pub(super) fn add(&self, began: u64, writes: Writes) -> Result<u64, WireError> {
        let mut s = self.lock();
        if s.epoch != began {
            return Err(WireError::unavailable("metadata: an update this one may have read did not reach etcd; try again"));
        }
        if writes.is_empty() {
            return Ok(match (s.filling.is_empty(), s.sending.is_some()) {
                (false, _) => s.filling_no,
                (true, true) => s.filling_no - 1,
                (true, false) => s.done_no,
            });
        }
        s.filling.extend(writes);
        Ok(s.filling_no)
    }

    /// Waits until batch `no` is in etcd (or failed), sending batches itself while no one
    /// else does; `send` takes one batch to etcd and applies it to whatever is kept in memory.
    pub(super) fn wait(&self, no: u64, send: impl Fn(&Writes) -> Result<(), WireError>) -> Result<(), WireError> {
        let mut s = self.lock();
        loop {
            if s.done_no >= no {
                return s.failed.get(&no).map_or(Ok(()), |e| Err(e.clone()));
            }
            if s.sender {
                s = self.landed.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            s.sender = true;
            let batch = Arc::new(std::mem::take(&mut s.filling));
            let batch_no = s.filling_no;
            s.filling_no += 1;
            s.sending = Some(batch.clone());
            drop(s);
            let r = if batch.is_empty() { Ok(()) } else { send(&batch) };
            s = self.lock();
            s.sending = None;
            s.sender = false;
            s.done_no = batch_no;
            if let Err(e) = r {
                s.epoch += 1;
                s.failed.insert(batch_no, e.clone());
                // Filled on top of the failed batch: it fails with it.
                if !s.filling.is_empty() {
                    let n = s.filling_no;
                    s.failed.insert(n, e);
                    s.filling.clear();
                    s.filling_no += 1;
                    s.done_no = n;
                }
            }
            let keep_from = s.done_no.saturating_sub(KEEP_FAILED);
            s.failed.retain(|&n, _| n >= keep_from);
            self.landed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn w(k: &str, v: &str) -> Writes {
        [(k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))].into()
    }

    /// Eight writers of 100 updates each: every update lands before it is answered, later writes of a key win,
    /// and batches are far fewer than updates.
    #[test]
    fn concurrent_updates_land_in_order_and_share_batches() {
        let p = Arc::new(Pipeline::default());
        let writer = Arc::new(Mutex::new(()));
        let store = Arc::new(Mutex::new(Writes::new()));
        let sends = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (p, writer, store, sends) = (p.clone(), writer.clone(), store.clone(), sends.clone());
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let no = {
                            let _turn = writer.lock().unwrap();
                            // Reads its own last write through the batches or the store.
                            let key = format!("k{t}");
                            let seen =
                                p.lookup(key.as_bytes()).unwrap_or_else(|| store.lock().unwrap().get(key.as_bytes()).cloned().flatten());
                            if i > 0 {
                                assert_eq!(seen, Some(format!("{}", i - 1).into_bytes()));
                            }
                            p.add(p.epoch(), w(&key, &i.to_string())).unwrap()
                        };
                        p.wait(no, |b| {
                            sends.fetch_add(1, Ordering::SeqCst);
                            // As long as etcd's commit takes: the others update meanwhile.
                            std::thread::sleep(std::time::Duration::from_millis(2));
                            store.lock().unwrap().extend(b.clone());
                            Ok(())
                        })
                        .unwrap();
                        assert_eq!(store.lock().unwrap().get(format!("k{t}").as_bytes()), Some(&Some(i.to_string().into_bytes())));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let sends = sends.load(Ordering::SeqCst);
        assert!(sends < 400, "{sends} batches for 800 updates");
    }

    #[test]
    fn a_failed_batch_fails_what_was_filled_on_it_and_what_read_through_it() {
        let p = Pipeline::default();
        let first = p.add(p.epoch(), w("a", "1")).unwrap();
        // Sending the first batch fails; meanwhile a second update filled on top of it and a
        // third was running.
        let second = std::cell::Cell::new(0);
        let third_began = std::cell::Cell::new(0);
        let e = p.wait(first, |_| {
            assert_eq!(p.lookup(b"a"), Some(Some(b"1".to_vec())), "the batch being sent is read through");
            second.set(p.add(p.epoch(), w("b", "2")).unwrap());
            third_began.set(p.epoch());
            Err(WireError::unavailable("etcd did not answer"))
        });
        assert!(e.is_err());
        assert!(p.wait(second.get(), |_| panic!("a batch filled on a failed one is not sent")).is_err());
        assert!(p.add(third_began.get(), w("c", "3")).is_err(), "an update that may have read the failed batch fails");
        assert_eq!(p.lookup(b"a"), None);
        assert_eq!(p.lookup(b"b"), None);
        // Afterwards updates go through again.
        let next = p.add(p.epoch(), w("d", "4")).unwrap();
        p.wait(next, |b| {
            assert_eq!(b, &w("d", "4"));
            Ok(())
        })
        .unwrap();
    }
}
