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
//!
//! Repairs dispatched together arrive in any order, and a node that got slot 8 before
//! slot 0 would send slot 8 first (seen on the testbed: two chunks sharing one uplink
//! from the start, 0.2-0.3 s lost in a third of the runs). So the coordinator first
//! *reserves* a batch's transfers on every node: reserved transfers count as outstanding
//! until a repair of the batch claims them, the coordinator releases them (a repair that
//! will not run them), or the reservation's hold passes.

use std::collections::{BTreeMap, HashMap};
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

/// A batch's reserved transfers no repair has claimed yet: slot -> how many, per side.
#[derive(Default)]
struct Reserved {
    send: BTreeMap<u32, u32>,
    receive: BTreeMap<u32, u32>,
}

impl Reserved {
    fn side(&mut self, side: Side) -> &mut BTreeMap<u32, u32> {
        match side {
            Side::Send => &mut self.send,
            Side::Receive => &mut self.receive,
        }
    }

    /// Takes one reserved transfer of `slot`, if there is one.
    fn take(&mut self, side: Side, slot: u32) -> bool {
        let m = self.side(side);
        match m.get_mut(&slot) {
            Some(c) => {
                *c -= 1;
                if *c == 0 {
                    m.remove(&slot);
                }
                true
            }
            None => false,
        }
    }
}

/// Both sides of a node's gate, shared by all its repairs.
#[derive(Default)]
pub struct TimeslotGates {
    send: Pending,
    receive: Pending,
    /// Reservations by batch.
    reserved: Mutex<HashMap<u64, Reserved>>,
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
        self.register_in(None, sends, receives)
    }

    /// [`register`](Self::register) for a repair of `batch`: transfers the batch reserved
    /// are claimed (they are outstanding already), the rest added.
    pub fn register_in(self: &Arc<Self>, batch: Option<u64>, sends: Vec<u32>, receives: Vec<u32>) -> Arc<Ticket> {
        let mut reserved = self.reserved.lock().expect("gate lock");
        let mut r = batch.and_then(|b| reserved.get_mut(&b));
        for (side, list) in [(Side::Send, &sends), (Side::Receive, &receives)] {
            for &slot in list {
                if !r.as_mut().is_some_and(|r| r.take(side, slot)) {
                    self.side(side).add(slot);
                }
            }
        }
        if let Some(b) = batch {
            if reserved.get(&b).is_some_and(|r| r.send.is_empty() && r.receive.is_empty()) {
                reserved.remove(&b);
            }
        }
        drop(reserved);
        Arc::new(Ticket { gates: self.clone(), left: Mutex::new((sends, receives)) })
    }

    /// Reserves a batch's transfers on this node before any of its repairs arrives: until
    /// claimed or released they hold later slots back like registered ones.
    pub fn reserve(&self, batch: u64, sends: &[u32], receives: &[u32]) {
        let mut reserved = self.reserved.lock().expect("gate lock");
        let r = reserved.entry(batch).or_default();
        for (side, list) in [(Side::Send, sends), (Side::Receive, receives)] {
            for &slot in list {
                *r.side(side).entry(slot).or_default() += 1;
                self.side(side).add(slot);
            }
        }
    }

    /// Gives back reserved transfers of `batch` that no repair will claim: those listed, or
    /// with `everything` all that are left. Transfers already claimed are not touched.
    pub fn release(&self, batch: u64, sends: &[u32], receives: &[u32], everything: bool) {
        let mut reserved = self.reserved.lock().expect("gate lock");
        let Some(r) = reserved.get_mut(&batch) else { return };
        let mut freed: Vec<(Side, u32)> = Vec::new();
        if everything {
            for side in [Side::Send, Side::Receive] {
                for (slot, n) in std::mem::take(r.side(side)) {
                    freed.extend(std::iter::repeat_n((side, slot), n as usize));
                }
            }
        } else {
            for (side, list) in [(Side::Send, sends), (Side::Receive, receives)] {
                freed.extend(list.iter().filter(|&&slot| r.take(side, slot)).map(|&slot| (side, slot)));
            }
        }
        if r.send.is_empty() && r.receive.is_empty() {
            reserved.remove(&batch);
        }
        drop(reserved);
        for (side, slot) in freed {
            self.side(side).remove(slot);
        }
    }

    /// Batches with reserved transfers not yet claimed.
    pub fn reserved_batches(&self) -> usize {
        self.reserved.lock().expect("gate lock").len()
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

    /// Reserved transfers hold later slots back until claimed and done, released, or
    /// released with the rest of their batch; a claim takes a reservation, never adds to it.
    #[tokio::test]
    async fn reserved_transfers_hold_later_slots_until_claimed_or_released() {
        let g = Arc::new(TimeslotGates::default());
        g.reserve(7, &[0, 1, 8], &[2]);
        // The repair of slot 8 arrives first: it waits for slots 0 and 1, not yet here.
        let late = g.register_in(Some(7), vec![8], vec![]);
        assert!(blocked(&late, Side::Send, 8).await);
        let first = g.register_in(Some(7), vec![0], vec![2]);
        assert!(!blocked(&first, Side::Send, 0).await);
        first.done(Side::Send, 0);
        // Slot 1's repair will not come: the coordinator releases it.
        assert!(blocked(&late, Side::Send, 8).await);
        g.release(7, &[1], &[], false);
        assert!(!blocked(&late, Side::Send, 8).await);
        // A release of what was claimed already changes nothing.
        g.release(7, &[8], &[2], false);
        assert_eq!(g.earliest(Side::Send), Some(8));
        assert_eq!(g.earliest(Side::Receive), Some(2));
        assert_eq!(g.reserved_batches(), 0, "everything was claimed or released");
        drop(first);
        drop(late);
        assert_eq!((g.earliest(Side::Send), g.earliest(Side::Receive)), (None, None));
        // Releasing a whole batch frees what is left of it, and only of it.
        g.reserve(8, &[3, 3], &[]);
        g.reserve(9, &[4], &[]);
        let other = g.register_in(Some(8), vec![3], vec![]);
        g.release(8, &[], &[], true);
        assert_eq!(g.earliest(Side::Send), Some(3), "the claimed one is the repair's");
        drop(other);
        assert_eq!(g.earliest(Side::Send), Some(4));
        g.release(9, &[], &[], true);
        assert_eq!(g.earliest(Side::Send), None);
        // A repair of an unknown batch registers as any other.
        let plain = g.register_in(Some(99), vec![1], vec![]);
        assert_eq!(g.earliest(Side::Send), Some(1));
        drop(plain);
        assert_eq!(g.earliest(Side::Send), None);
    }
}
