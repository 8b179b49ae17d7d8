//! Send slots: a node whose graph carries a timestep schedule (ECPipe cyclic) starts its
//! units' sends in slot order across all its vertices, with a slack of one period.

use kintsugi_proto::WireError;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Per repair: this node's sends in slot order, each allowed to start once it is within
/// `slack` slots of the earliest unsent one. With no slack (the paper's strict timesteps)
/// every send on the node waited for one particular slice of one particular upstream, so
/// any process's late turn on the CPU stalled the next node's every lane, and the next
/// one's: on the 2-core testbed cyclic's 1 Gbit/s degraded read took 1.19x ECPipe's time
/// (median of four invocations) against 1.095x with a slack of one period, a slice per
/// lane (twelve; REPRODUCTION.md, session 45). The slack still keeps a node's lanes within
/// a period of each other, so they read each block while it is in the shared read windows.
///
/// If any of the node's vertices fails, the gate fails every waiter, so an error travels
/// on instead of leaving the others waiting for a slot that will never be sent. A finished
/// slot wakes only the waiters it lets in: with one sender per lane (ECPipe cyclic: k-1 of
/// them on a node) waking them all for every slice cost more CPU than the slices' bytes.
pub struct SlotGate {
    state: Mutex<GateState>,
    failed: std::sync::atomic::AtomicBool,
    /// The first failure, passed on to every waiter: a reader learns which helper failed
    /// the repair (a corrupt chunk), not only that something did.
    why: Mutex<Option<WireError>>,
}

struct GateState {
    pending: BTreeSet<u64>,
    waiters: BTreeMap<u64, Vec<Arc<Notify>>>,
    slack: u64,
}

impl SlotGate {
    pub(crate) fn new(pending: BTreeSet<u64>, slack: u64) -> Self {
        SlotGate {
            state: Mutex::new(GateState { pending, waiters: BTreeMap::new(), slack }),
            failed: Default::default(),
            why: Mutex::default(),
        }
    }

    /// Waits until `slot` is at most `slack` slots after the earliest unsent slot of this
    /// node.
    pub async fn turn(&self, slot: u64) -> Result<(), WireError> {
        loop {
            let wake = {
                let mut st = self.state.lock().expect("gate lock");
                if self.failed.load(Ordering::Acquire) {
                    let why = self.why.lock().expect("why lock").clone().unwrap_or_else(|| WireError::internal("cancelled"));
                    return Err(why.context("another part of this repair failed on this node"));
                }
                if st.pending.first().is_none_or(|&first| slot <= first.saturating_add(st.slack)) {
                    return Ok(());
                }
                let n = Arc::new(Notify::new());
                st.waiters.entry(slot).or_default().push(n.clone());
                n
            };
            // notify_one keeps a permit when it comes before this await: no lost wake-up.
            wake.notified().await;
        }
    }

    pub fn done(&self, slot: u64) {
        let mut st = self.state.lock().expect("gate lock");
        st.pending.remove(&slot);
        if let Some(next) = st.pending.first().copied() {
            // Wakes the waiters the new earliest slot lets in, and no other.
            let bound = next.saturating_add(st.slack).saturating_add(1);
            let later = st.waiters.split_off(&bound);
            for (_, ws) in std::mem::replace(&mut st.waiters, later) {
                for w in ws {
                    w.notify_one();
                }
            }
        }
    }

    /// Ends `slot`'s send as `sent` says: done, or the gate failed with its error (the
    /// later slots would wait for it in vain).
    pub fn end<T>(&self, slot: u64, sent: &Result<T, WireError>) {
        match sent {
            Ok(_) => self.done(slot),
            Err(e) => self.fail(e),
        }
    }

    pub fn fail(&self, why: &WireError) {
        self.why.lock().expect("why lock").get_or_insert_with(|| why.clone());
        self.failed.store(true, Ordering::Release);
        let mut st = self.state.lock().expect("gate lock");
        for (_, ws) in std::mem::take(&mut st.waiters) {
            for w in ws {
                w.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SlotGate;
    use kintsugi_proto::{ErrorKind, Fault, WireError};
    use std::time::Duration;

    fn gate(slots: std::ops::Range<u64>, slack: u64) -> std::sync::Arc<SlotGate> {
        std::sync::Arc::new(SlotGate::new(slots.collect(), slack))
    }

    async fn waits(g: &SlotGate, slot: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(50), g.turn(slot)).await.is_err()
    }

    /// Without slack only the earliest unsent slot may go; with slack 2 the two after it
    /// may too, and each finished slot lets in exactly one more, in any order of finishing.
    #[tokio::test]
    async fn sends_start_within_the_slack_of_the_earliest_unsent_slot() {
        let strict = gate(0..6, 0);
        assert!(!waits(&strict, 0).await);
        assert!(waits(&strict, 1).await);
        strict.done(0);
        assert!(!waits(&strict, 1).await);

        let g = gate(0..8, 2);
        for slot in 0..=2 {
            assert!(!waits(&g, slot).await, "slot {slot} is within the slack");
        }
        assert!(waits(&g, 3).await);
        // A later slot finishing first lets nothing new in: slot 0 is still unsent.
        g.done(2);
        assert!(waits(&g, 3).await);
        let later = {
            let g = g.clone();
            tokio::spawn(async move { g.turn(4).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        g.done(0);
        assert!(!waits(&g, 3).await, "earliest unsent is 1: 1..=3 may go");
        assert!(!later.is_finished(), "slot 4 still waits for slot 1");
        g.done(1);
        // Earliest unsent is now 3: 3, 4 and 5 may go; the waiter of 4 was woken.
        assert!(tokio::time::timeout(Duration::from_secs(5), later).await.expect("woken").expect("task").is_ok());
        assert!(waits(&g, 6).await);
    }

    /// A failure reaches every waiter, with the chunk it names.
    #[tokio::test]
    async fn a_failure_ends_every_wait_with_its_reason() {
        let g = gate(0..4, 1);
        let waiter = {
            let g = g.clone();
            tokio::spawn(async move { g.turn(3).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let chunk = kintsugi_proto::ChunkId::new(7, 4);
        g.fail(&WireError::new(ErrorKind::Corrupt, "helper 4's chunk is corrupt").with_fault(Fault::CorruptChunk { chunk: chunk.clone() }));
        let r = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").expect("task");
        let err = r.unwrap_err();
        assert_eq!((err.kind(), err.bad_chunks().collect::<Vec<_>>()), (ErrorKind::Corrupt, vec![&chunk]));
        assert!(g.turn(0).await.is_err(), "no slot goes after a failure");
    }

    /// `end` lets the next slot in after a write that went, and fails the gate with the
    /// write's error after one that did not.
    #[tokio::test]
    async fn end_closes_a_slot_as_its_write_went() {
        let g = gate(0..3, 0);
        assert!(waits(&g, 1).await);
        g.end(0, &Ok::<(), WireError>(()));
        let next = tokio::time::timeout(Duration::from_secs(5), g.turn(1)).await.expect("slot 1 let in");
        assert!(next.is_ok(), "slot 0's write went: slot 1 may go, and the gate has not failed");
        g.end(1, &Err::<(), _>(WireError::unreachable(3, "sending to the next hop: connection reset")));
        let err = g.turn(2).await.unwrap_err();
        assert_eq!(err.bad_nodes().collect::<Vec<_>>(), vec![3], "{err}");
    }
}
