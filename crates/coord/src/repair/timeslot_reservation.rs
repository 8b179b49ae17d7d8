//! Reserving a batch's timeslots on the nodes before its repairs are dispatched. Repairs
//! dispatched together reach a node in any order, and a node's gates only know the repairs
//! it has: one that got its slot-8 repair before its slot-0 one sent slot 8 first, and the
//! two shared its uplink (on the testbed, in a third of RepairBoost's PPR runs, 0.2-0.3 s
//! lost). So every node first learns all of its gated transfers in the batch; each repair
//! then claims its own (`Assignment::gate_batch`), and one that will not run them (skipped,
//! re-planned, or its slots no longer fit its graph) gives them back, so no node waits for
//! a transfer that will not come. A node releases what is unclaimed after a hold, should
//! the coordinator go away.

use crate::coordinator::Coordinator;
use crate::metadata::PendingRepair;
use crate::repair::full_node_plan::GraphSlots;
use crate::repair::recovery_budget::weight;
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::{NodeRequest, NodeResponse};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Per node: the slots of its sends and of its receives.
type NodeSlots = BTreeMap<NodeId, (Vec<u32>, Vec<u32>)>;

/// A batch's reservation: its id and the repairs whose transfers it holds.
pub(crate) struct Reservation {
    pub batch: u64,
    pub repairs: HashSet<(u64, usize)>,
    nodes: Vec<NodeId>,
}

fn per_node(transfers: &[(NodeId, NodeId, u32)], into: &mut NodeSlots) {
    for &(from, to, slot) in transfers {
        into.entry(from).or_default().0.push(slot);
        into.entry(to).or_default().1.push(slot);
    }
}

impl Coordinator {
    /// Reserves the gated transfers of `todo` on their nodes, when every one of them starts
    /// at once: within `parallel`, within each node's recovery budget, and one chunk per
    /// stripe (a stripe's later chunks wait for its first, so their slots would hold up the
    /// very repairs they wait for; they register when dispatched, as without a reservation).
    pub(crate) async fn reserve_timeslots(
        &self,
        todo: &[PendingRepair],
        timeslots: &HashMap<(u64, usize), GraphSlots>,
        parallel: usize,
    ) -> Option<Reservation> {
        if timeslots.is_empty() || parallel < todo.len() {
            return None;
        }
        let mut repairs = HashSet::new();
        let mut stripes = HashSet::new();
        let mut units: HashMap<NodeId, u64> = HashMap::new();
        let mut slots = NodeSlots::new();
        for p in todo {
            if !stripes.insert(p.stripe) {
                continue;
            }
            let Some(t) = timeslots.get(&(p.stripe, p.index)) else { continue };
            let len = self.meta.stripe(p.stripe).ok().flatten().map_or(0, |s| s.chunk_len);
            let mut nodes = t.nodes.clone();
            nodes.sort_unstable();
            nodes.dedup();
            for n in nodes {
                *units.entry(n).or_default() += weight(len);
            }
            per_node(&t.transfers, &mut slots);
            repairs.insert((p.stripe, p.index));
        }
        // A node over its budget runs some of these later: they cannot all start at once.
        if repairs.is_empty() || units.values().any(|&u| u > self.cfg.recovery_node_budget.max(1)) {
            return None;
        }
        let batch = self.batch_id().ok()?;
        // Held until claimed; the hold only frees nodes of a coordinator that went away.
        let hold_ms = (self.io_timeout() * 6).as_millis() as u64;
        let alive = self.alive();
        let mut set = tokio::task::JoinSet::new();
        for (node, (sends, receives)) in slots.iter() {
            let Some(addr) = alive.get(node).cloned() else { continue };
            let req = NodeRequest::ReserveTimeslots { batch, sends: sends.clone(), receives: receives.clone(), hold_ms };
            let t = self.io_timeout();
            let node = *node;
            set.spawn(async move { (node, request(&addr, &req, t).await) });
        }
        let mut nodes = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok((n, Ok(NodeResponse::Ok))) => nodes.push(n),
                // Not fatal: that node's repairs register when they arrive, as without.
                Ok((n, other)) => tracing::warn!("node {n} did not reserve its timeslots: {other:?}"),
                Err(e) => tracing::warn!("reserving timeslots: {e}"),
            }
        }
        tracing::debug!(batch, repairs = repairs.len(), nodes = nodes.len(), "timeslots reserved");
        Some(Reservation { batch, repairs, nodes })
    }

    /// Gives back reserved transfers: those of one repair that will not run them, or with
    /// `everything` whatever a batch has left, once it is over.
    pub(crate) async fn release_timeslots(&self, batch: u64, transfers: &[(NodeId, NodeId, u32)], nodes: &[NodeId], everything: bool) {
        let mut slots = NodeSlots::new();
        per_node(transfers, &mut slots);
        for &n in nodes {
            slots.entry(n).or_default();
        }
        let alive = self.alive();
        let mut set = tokio::task::JoinSet::new();
        for (node, (sends, receives)) in slots {
            let Some(addr) = alive.get(&node).cloned() else { continue };
            let req = NodeRequest::ReleaseTimeslots { batch, sends, receives, everything };
            let t = self.io_timeout();
            set.spawn(async move { request(&addr, &req, t).await });
        }
        while set.join_next().await.is_some() {}
    }

    /// Releases what is left of a batch's reservation on its nodes.
    pub(crate) async fn end_reservation(&self, r: &Reservation) {
        self.release_timeslots(r.batch, &[], &r.nodes, true).await;
    }
}

/// One repair's reserved transfers until it claims them: dropped unclaimed (the repair
/// returns without running its planned graph), it gives them back.
pub(crate) struct Claim {
    coord: Arc<Coordinator>,
    batch: u64,
    transfers: Vec<(NodeId, NodeId, u32)>,
    claimed: bool,
}

impl Claim {
    pub(crate) fn new(coord: Arc<Coordinator>, batch: u64, slots: &GraphSlots) -> Self {
        Claim { coord, batch, transfers: slots.transfers.clone(), claimed: false }
    }

    /// The repair runs its planned graph: its assignment claims the transfers.
    pub(crate) fn claim(&mut self) -> u64 {
        self.claimed = true;
        self.batch
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.claimed {
            return;
        }
        let (coord, batch, transfers) = (self.coord.clone(), self.batch, std::mem::take(&mut self.transfers));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                coord.release_timeslots(batch, &transfers, &[], false).await;
            });
        }
    }
}
