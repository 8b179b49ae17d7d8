//! Group commit: many updates, one fsync. Each update commits without syncing
//! (`Durability::None`) and waits until a durable commit covers it; the first waiter makes
//! that commit (empty, `Durability::Immediate`, which persists every commit before it),
//! and whoever committed while it synced is covered by the next one. So under N concurrent
//! writers an update costs about 1/N of an fsync, and alone it costs one, as before.
//!
//! Nothing that may still be lost is acted on: an update returns only once it is durable,
//! and a read waits until every commit it can see is (see [`GroupCommit::reading`]), so no
//! reader (a GET, the garbage collector deciding which chunks to delete) ever sees a state
//! that a crash could take back.

use std::cell::Cell;
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    /// Commits made, durable or not (a sequence number each).
    committed: u64,
    /// The last commit known durable.
    durable: u64,
    /// A durable commit is under way.
    syncing: bool,
}

#[derive(Default)]
pub(super) struct GroupCommit {
    state: Mutex<State>,
    synced: Condvar,
    /// Updates waiting for the writer's turn: a sync lets them commit first, so that it
    /// covers them (the sync needs the turn too, and would otherwise often win it).
    queued: std::sync::atomic::AtomicUsize,
}

/// How many times a sync lets queued updates go first, at most.
const LET_IN: usize = 64;

thread_local! {
    /// This thread is inside an update (it holds the writer's turn): its reads must not
    /// wait for a sync, which needs that turn.
    static UPDATING: Cell<bool> = const { Cell::new(false) };
    /// This thread reads to show or to hear, not to act on what it reads (`status`, a
    /// heartbeat): its reads do not wait for a sync, which a long update ahead of it (a
    /// put of 100,000 stripes) can hold back for seconds.
    static PEEKING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with reads that do not wait for durability (see `PEEKING`).
pub(crate) fn peeking<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            PEEKING.with(|p| p.set(self.0));
        }
    }
    let _reset = Reset(PEEKING.with(|p| p.replace(true)));
    f()
}

/// Marks the thread as updating while it lives.
pub(super) struct Updating(());

impl Updating {
    pub(super) fn start() -> Self {
        UPDATING.with(|u| u.set(true));
        Updating(())
    }
}

impl Drop for Updating {
    fn drop(&mut self) {
        UPDATING.with(|u| u.set(false));
    }
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `commit` (a non-durable commit) and numbers it; readers that begin after it see
    /// it, and wait for its number to be durable.
    pub(super) fn committed<E>(&self, commit: impl FnOnce() -> Result<(), E>) -> Result<u64, E> {
        let mut s = self.lock();
        commit()?;
        s.committed += 1;
        Ok(s.committed)
    }

    /// Begins a read (`begin`); returns it with the number of the last commit it may see,
    /// which the reader waits for (see [`GroupCommit::wait_durable`]) before acting on it.
    pub(super) fn begin<T, E>(&self, begin: impl FnOnce() -> Result<T, E>) -> Result<(T, u64), E> {
        let s = self.lock();
        Ok((begin()?, s.committed))
    }

    /// Whether commit `seq` is durable, or need not be waited for: inside an update (which
    /// waits before it returns, and nothing acts on what it read before then), where
    /// waiting would need the writer's turn that this thread holds.
    pub(super) fn settled(&self, seq: u64) -> bool {
        UPDATING.with(Cell::get) || PEEKING.with(Cell::get) || self.lock().durable >= seq
    }

    /// Waits until commit `seq` is durable. `sync` makes a durable commit and returns the
    /// last commit number it covers (read while it holds the writer's turn).
    pub(super) fn wait_durable<E>(&self, seq: u64, sync: impl Fn() -> Result<u64, E>) -> Result<(), E> {
        let mut s = self.lock();
        loop {
            if s.durable >= seq {
                return Ok(());
            }
            if s.syncing {
                s = self.synced.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            s.syncing = true;
            drop(s);
            for _ in 0..LET_IN {
                if self.queued.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    break;
                }
                std::thread::yield_now();
            }
            let r = sync();
            s = self.lock();
            s.syncing = false;
            self.synced.notify_all();
            let covered = r?;
            s.durable = s.durable.max(covered);
        }
    }

    /// Takes the writer's turn (`take`) for an update, counted as queued while it waits.
    pub(super) fn turn<T>(&self, take: impl FnOnce() -> T) -> T {
        use std::sync::atomic::Ordering;
        self.queued.fetch_add(1, Ordering::SeqCst);
        let t = take();
        self.queued.fetch_sub(1, Ordering::SeqCst);
        t
    }

    /// The number of the last commit made (read under the writer's turn by `sync`).
    pub(super) fn last(&self) -> u64 {
        self.lock().committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Eight writers, each committing 100 times and waiting for durability: every one's
    /// commit is covered by a sync made after it, and the syncs are far fewer than commits.
    #[test]
    fn concurrent_writers_share_syncs_and_none_returns_before_its_commit_is_durable() {
        let g = Arc::new(GroupCommit::default());
        let writer = Arc::new(Mutex::new(()));
        let syncs = Arc::new(AtomicU64::new(0));
        let sync = {
            let (g, writer, syncs) = (g.clone(), writer.clone(), syncs.clone());
            move || -> Result<u64, ()> {
                let _turn = writer.lock().unwrap();
                let covered = g.last();
                // As long as a real fsync takes: the others commit meanwhile.
                std::thread::sleep(std::time::Duration::from_millis(2));
                syncs.fetch_add(1, Ordering::SeqCst);
                Ok(covered)
            }
        };
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (g, writer, sync) = (g.clone(), writer.clone(), sync.clone());
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        let seq = {
                            let _turn = g.turn(|| writer.lock().unwrap());
                            g.committed(|| Ok::<_, ()>(())).unwrap()
                        };
                        g.wait_durable(seq, &sync).unwrap();
                        assert!(g.lock().durable >= seq, "returned before commit {seq} was durable");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let syncs_made = syncs;
        let (commits, syncs) = (g.last(), syncs_made.load(Ordering::SeqCst));
        assert_eq!(commits, 800);
        assert!(syncs < commits / 2, "{syncs} syncs for {commits} commits");
        // A read after everything sees it all durable without syncing again.
        let ((), seen) = g.begin(|| Ok::<_, ()>(())).unwrap();
        assert!(g.settled(seen));
        assert_eq!(syncs_made.load(Ordering::SeqCst), syncs);
    }

    #[test]
    fn a_failed_sync_fails_its_waiters_and_the_next_one_tries_again() {
        let g = GroupCommit::default();
        let seq = g.committed(|| Ok::<_, &str>(())).unwrap();
        let ((), seen) = g.begin(|| Ok::<_, ()>(())).unwrap();
        assert!(!g.settled(seen), "a read sees a commit not yet durable");
        {
            let _u = Updating::start();
            assert!(g.settled(seen), "inside an update a read does not wait");
        }
        assert!(peeking(|| g.settled(seen)), "a read to show does not wait");
        assert!(!g.settled(seen), "nor is the thread left peeking");
        assert_eq!(g.wait_durable(seq, || Err::<u64, _>("disk")), Err("disk"));
        assert_eq!(g.lock().durable, 0);
        g.wait_durable(seq, || Ok::<_, &str>(seq)).unwrap();
        assert_eq!(g.lock().durable, seq);
    }
}
