//! Send slots: a node whose graph carries a timestep schedule (ECPipe cyclic) sends its
//! units in slot order across all its vertices.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Per repair: this node's sends in slot order. If any of the node's vertices fails, the
/// gate fails every waiter, so an error travels on instead of leaving the others waiting
/// for a slot that will never be sent. A finished slot wakes only the waiter of the next
/// one: with one sender per lane (ECPipe cyclic: k-1 of them on a node) waking them all
/// for every slice cost more CPU than the slices' bytes.
pub struct SlotGate {
    state: Mutex<GateState>,
    failed: std::sync::atomic::AtomicBool,
    /// The first failure's words, passed on to every waiter: a reader learns which helper
    /// failed the repair (a corrupt chunk), not only that something did.
    why: Mutex<Option<String>>,
}

struct GateState {
    pending: BTreeSet<u64>,
    waiters: HashMap<u64, Vec<Arc<Notify>>>,
}

impl SlotGate {
    pub(crate) fn new(pending: BTreeSet<u64>) -> Self {
        SlotGate { state: Mutex::new(GateState { pending, waiters: HashMap::new() }), failed: Default::default(), why: Mutex::default() }
    }

    /// Waits until `slot` is the earliest unsent slot of this node.
    pub async fn turn(&self, slot: u64) -> Result<(), String> {
        loop {
            let wake = {
                let mut st = self.state.lock().expect("gate lock");
                if self.failed.load(Ordering::Acquire) {
                    let why = self.why.lock().expect("why lock").clone().unwrap_or_else(|| "cancelled".into());
                    return Err(format!("another part of this repair failed on this node: {why}"));
                }
                if st.pending.first() == Some(&slot) {
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
            for w in st.waiters.remove(&next).unwrap_or_default() {
                w.notify_one();
            }
        }
    }

    pub fn fail(&self, why: &str) {
        self.why.lock().expect("why lock").get_or_insert_with(|| why.to_string());
        self.failed.store(true, Ordering::Release);
        let mut st = self.state.lock().expect("gate lock");
        for (_, ws) in st.waiters.drain() {
            for w in ws {
                w.notify_one();
            }
        }
    }
}
