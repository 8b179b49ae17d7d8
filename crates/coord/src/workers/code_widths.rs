//! The widest code (chunks per stripe) stored, learnt at start and from each put: what
//! `heal_margin` compares with the nodes that can take chunks.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The widest code (chunks per stripe) of the stripes stored.
#[derive(Default)]
pub(crate) struct CodeWidths {
    widest: AtomicUsize,
}

impl CodeWidths {
    pub(crate) fn observe(&self, width: usize) {
        self.widest.fetch_max(width, Ordering::Relaxed);
    }

    pub(crate) fn widest(&self) -> usize {
        self.widest.load(Ordering::Relaxed)
    }
}
