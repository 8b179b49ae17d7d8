//! Keeps the per-object index of Geo and Contiguous objects on its holders (Geometric
//! Partitioning, section 5.1: an index replicated on r + 1 disks of each placement group),
//! so clients find an object's chunks without asking the coordinator.
//!
//! The coordinator's metadata store stays the source of truth; the index is a replica of
//! what readers need from it. The holders of placement group `pg` are the first
//! `index_copies` nodes of the group's rendezvous order over every registered node, failed
//! or not (so a failure does not move them; a node joining or leaving does, and then every
//! record is published again).
//!
//! Consistency, in three rules:
//! - Every publication of a name takes a sequence number and reads the object in one
//!   metadata transaction, then sends the record (its layout as of then or later, or a
//!   tombstone) with that number; holders keep a record only over a lower number. Every
//!   change (commit, delete, a chunk moved by a repair or a sealing) is published after it
//!   happens, so the highest number a holder has carries every change before it.
//! - A commit or delete is acknowledged only once a majority of the holders keep its
//!   record, and a reader takes the highest-numbered record among a majority of them: the
//!   two majorities meet, so a reader never sees a version older than an acknowledged one.
//! - Records that did not reach every holder, and every record after a restart or a
//!   change of the registered nodes, are published again in the background (`sync`).
//!
//! A record names chunks where they were; a reader that finds one gone (a node down, a
//! repair not published yet) reads through the coordinator instead.

use kintsugi_plan::NodeId;
use std::collections::BTreeSet;
use std::sync::Mutex;

pub(crate) mod publish;

pub use kintsugi_proto::placement::{holders, majority};

/// What is left to publish: names whose records did not reach every holder, stripes whose
/// chunks moved (their objects' records name the old places), and whether everything is.
#[derive(Default)]
pub(crate) struct IndexSync {
    retry: Mutex<BTreeSet<String>>,
    moved: Mutex<BTreeSet<u64>>,
    /// The registered nodes the records were last published for all at once (None: not
    /// since this coordinator started).
    published_for: Mutex<Option<Vec<NodeId>>>,
    /// One pass at a time: a repair answered after its pass knows its moves are published.
    pass: tokio::sync::Mutex<()>,
}

impl IndexSync {
    /// Stripe `id`'s chunks moved (a repair, a sealing): its objects' records are stale.
    pub(crate) fn moved(&self, id: u64) {
        self.moved.lock().expect("index lock").insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::geo_layout::pg_members;

    #[test]
    fn holders_are_members_and_stay_put_when_others_come_and_go() {
        let nodes: Vec<NodeId> = (1..=16).collect();
        for pg in 0..64 {
            let h = holders(pg, &nodes, 3);
            assert_eq!(h.len(), 3);
            // The first of the group's members: the index sits with the group's chunks.
            assert_eq!(h, pg_members(pg, &nodes, 14)[..3]);
            // A node that is not a holder leaving moves no holder.
            let other = *nodes.iter().find(|n| !h.contains(n)).unwrap();
            let fewer: Vec<NodeId> = nodes.iter().copied().filter(|&n| n != other).collect();
            assert_eq!(holders(pg, &fewer, 3), h);
        }
        assert_eq!(holders(0, &[4, 5], 3).len(), 2);
        assert_eq!((majority(1), majority(2), majority(3), majority(5)), (1, 2, 2, 3));
    }
}
