//! RepairBoost's timeslots across repairs (§3.3), enforced on the node as the simulator
//! does: a transfer of slot t may start sending only when this node has no send of an
//! earlier slot outstanding, and may start receiving only when this node has no receive of
//! an earlier slot outstanding. Each end checks its own side, so together a transfer waits
//! for both.
//!
//! A node only knows the repairs it has been given, so a slot not dispatched yet holds
//! nothing up: the gates order, they never wait for what may not come. A repair's slots are
//! released when its vertices finish, fail or time out, so a broken repair cannot hold a
//! node's later slots beyond its own time limit.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Which end of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Send,
    Receive,
}

/// One side's outstanding transfers: slot -> how many.
#[derive(Default)]
struct Pending {
    slots: Mutex<BTreeMap<u32, u32>>,
    changed: Notify,
}

impl Pending {
    fn earliest(&self) -> Option<u32> {
        self.slots.lock().expect("gate lock").first_key_value().map(|(&k, _)| k)
    }

    fn add(&self, slot: u32) {
        *self.slots.lock().expect("gate lock").entry(slot).or_default() += 1;
    }

    fn remove(&self, slot: u32) {
        let mut m = self.slots.lock().expect("gate lock");
        if let Some(c) = m.get_mut(&slot) {
            *c -= 1;
            if *c == 0 {
                m.remove(&slot);
                drop(m);
                self.changed.notify_waiters();
            }
        }
    }
}

/// Both sides of a node's gate, shared by all its repairs.
#[derive(Default)]
pub struct TimeslotGates {
    send: Pending,
    receive: Pending,
    /// Transfers that had to wait at a gate (a node counter, for tests and `stat`).
    pub waited: AtomicU64,
}

impl TimeslotGates {
    fn side(&self, side: Side) -> &Pending {
        match side {
            Side::Send => &self.send,
            Side::Receive => &self.receive,
        }
    }

    /// Registers one repair's transfers on this node: the slots of its sends and receives.
    pub fn register(self: &Arc<Self>, sends: Vec<u32>, receives: Vec<u32>) -> Arc<Ticket> {
        for &s in &sends {
            self.send.add(s);
        }
        for &r in &receives {
            self.receive.add(r);
        }
        Arc::new(Ticket { gates: self.clone(), left: Mutex::new((sends, receives)) })
    }

    /// The earliest outstanding slot on one side (None: nothing outstanding).
    pub fn earliest(&self, side: Side) -> Option<u32> {
        self.side(side).earliest()
    }
}

/// One repair's outstanding transfers on a node. Dropping it (or [`Ticket::release`])
/// gives back whatever has not finished.
pub struct Ticket {
    gates: Arc<TimeslotGates>,
    left: Mutex<(Vec<u32>, Vec<u32>)>,
}

impl Ticket {
    /// Waits until no transfer of an earlier slot is outstanding on `side`. Returns whether
    /// it had to wait.
    pub async fn turn(&self, side: Side, slot: u32) -> bool {
        let p = self.gates.side(side);
        let mut waited = false;
        loop {
            let changed = p.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if p.earliest().is_none_or(|e| e >= slot) {
                if waited {
                    self.gates.waited.fetch_add(1, Ordering::Relaxed);
                }
                return waited;
            }
            waited = true;
            changed.await;
        }
    }

    /// A transfer of `slot` on `side` has finished.
    pub fn done(&self, side: Side, slot: u32) {
        let mut left = self.left.lock().expect("ticket lock");
        let list = match side {
            Side::Send => &mut left.0,
            Side::Receive => &mut left.1,
        };
        if let Some(i) = list.iter().position(|&s| s == slot) {
            list.swap_remove(i);
            drop(left);
            self.gates.side(side).remove(slot);
        }
    }

    /// Gives back every transfer not finished yet (the repair ended, or failed).
    pub fn release(&self) {
        let (sends, receives) = std::mem::take(&mut *self.left.lock().expect("ticket lock"));
        for s in sends {
            self.gates.send.remove(s);
        }
        for r in receives {
            self.gates.receive.remove(r);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn blocked(t: &Ticket, side: Side, slot: u32) -> bool {
        tokio::time::timeout(Duration::from_millis(50), t.turn(side, slot)).await.is_err()
    }

    #[tokio::test]
    async fn a_slot_waits_for_every_earlier_transfer_on_its_side() {
        let g = Arc::new(TimeslotGates::default());
        let a = g.register(vec![0, 2], vec![1]);
        let b = g.register(vec![1], vec![]);
        // Slot 0 goes at once; slot 1 waits for slot 0's send, but not for receives.
        assert!(!blocked(&a, Side::Send, 0).await);
        assert!(blocked(&b, Side::Send, 1).await);
        assert!(!blocked(&a, Side::Receive, 1).await);
        a.done(Side::Send, 0);
        assert!(!blocked(&b, Side::Send, 1).await);
        // Slot 2 waits for slot 1, which another repair holds.
        assert!(blocked(&a, Side::Send, 2).await);
        let waiter = {
            let a = a.clone();
            tokio::spawn(async move { a.turn(Side::Send, 2).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        b.done(Side::Send, 1);
        assert!(tokio::time::timeout(Duration::from_secs(1), waiter).await.expect("woken").expect("task"));
        assert_eq!(g.waited.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_finished_or_failed_repair_gives_its_slots_back() {
        let g = Arc::new(TimeslotGates::default());
        let early = g.register(vec![0, 0, 3], vec![2]);
        let late = g.register(vec![5], vec![4]);
        assert!(blocked(&late, Side::Send, 5).await);
        let other = g.register(vec![0], vec![]);
        early.done(Side::Send, 0);
        early.done(Side::Send, 0);
        // A ticket finishes only its own transfers: a third 0 leaves the other's alone.
        early.done(Side::Send, 0);
        assert_eq!(g.earliest(Side::Send), Some(0));
        other.done(Side::Send, 0);
        assert_eq!(g.earliest(Side::Send), Some(3));
        drop(early);
        assert_eq!(g.earliest(Side::Send), Some(5));
        assert_eq!(g.earliest(Side::Receive), Some(4));
        assert!(!blocked(&late, Side::Send, 5).await);
        late.release();
        assert_eq!(g.earliest(Side::Send), None);
        assert_eq!(g.earliest(Side::Receive), None);
    }
}
