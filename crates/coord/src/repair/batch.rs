//! Many repairs at once: a full-node repair's chunks rebuilt `parallel` at a time, each
//! stripe's chunks one after another, within the per-node recovery budget; their results
//! collected into one report, under a ChameleonEC phase's straggler watch when there is one.

use crate::coordinator::Coordinator;
use crate::metadata::PendingRepair;
use crate::repair::full_node_plan::GraphSlots;
use crate::repair::recovery_budget::{weight, NodeBudget};
use crate::repair::straggler::{PhaseWatch, Verdict};
use crate::repair::timeslot_reservation::Claim;
use crate::repair::Ran;
use kintsugi_plan::schedule::Choice;
use kintsugi_plan::{NodeId, RepairGraph};
use kintsugi_proto::RepairReport;
use kintsugi_proto::{Scarce, WireError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

impl Coordinator {
    pub(crate) async fn run_repairs(
        self: &Arc<Self>,
        todo: Vec<PendingRepair>,
        method: &str,
        parallel: usize,
        choices: HashMap<(u64, usize), Choice>,
        timeslots: HashMap<(u64, usize), GraphSlots>,
    ) -> Result<RepairReport, WireError> {
        self.run_repairs_recorded(todo, method, parallel, choices, timeslots, None).await
    }

    /// [`run_repairs`](Self::run_repairs), also recording when each repair finished
    /// (seconds from the start) and its graph.
    pub(crate) async fn run_repairs_recorded(
        self: &Arc<Self>,
        todo: Vec<PendingRepair>,
        method: &str,
        parallel: usize,
        choices: HashMap<(u64, usize), Choice>,
        timeslots: HashMap<(u64, usize), GraphSlots>,
        record: Option<&mut Vec<(f64, RepairGraph)>>,
    ) -> Result<RepairReport, WireError> {
        Ok(self.run_repairs_watched(todo, method, parallel, choices, timeslots, record, None).await?.0)
    }

    /// [`run_repairs_recorded`](Self::run_repairs_recorded) under a ChameleonEC phase's
    /// straggler watch: returns once every repair is done or postponed, with the
    /// postponed ones still running.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_repairs_watched(
        self: &Arc<Self>,
        todo: Vec<PendingRepair>,
        method: &str,
        parallel: usize,
        mut choices: HashMap<(u64, usize), Choice>,
        mut timeslots: HashMap<(u64, usize), GraphSlots>,
        record: Option<&mut Vec<(f64, RepairGraph)>>,
        watch: Option<&PhaseWatch>,
    ) -> Result<(RepairReport, Repairs), WireError> {
        let started = Instant::now();
        let lost = todo.len();
        let sem = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
        let mut set = JoinSet::new();
        // Chunks of one stripe are rebuilt one after another: each plans with its siblings'
        // new homes known, so no two land on the same node.
        let mut stripe_locks: HashMap<u64, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
        // Geometric Partitioning's per-node budget of repair weight (chunk size in 4 MiB
        // units), on the nodes a repair will read from and write to.
        let budget = NodeBudget::new(self.cfg.recovery_node_budget);
        // Every node learns its gated transfers before the first repair reaches it.
        let reservation = self.reserve_timeslots(&todo, &timeslots, parallel).await;
        for p in todo {
            let (c, sem) = (self.clone(), sem.clone());
            let choice = choices.remove(&(p.stripe, p.index));
            let slots = timeslots.remove(&(p.stripe, p.index));
            let claim = match (&reservation, &slots) {
                (Some(r), Some(t)) if r.repairs.contains(&(p.stripe, p.index)) => Some(Claim::new(self.clone(), r.batch, t)),
                _ => None,
            };
            let lock = stripe_locks.entry(p.stripe).or_default().clone();
            // Permits are taken in this order, so repairs start in schedule order.
            let permit = sem.acquire_owned().await.expect("semaphore open");
            let (nodes, units) = match self.meta.stripe(p.stripe)? {
                Some(s) => {
                    let mut nodes: Vec<NodeId> = match &choice {
                        Some(ch) => ch.helpers.iter().map(|&h| s.nodes[h]).chain([ch.destination]).collect(),
                        // Helpers not chosen yet: any survivor may be one.
                        None => s.nodes.iter().enumerate().filter(|&(i, _)| i != p.index).map(|(_, &n)| n).collect(),
                    };
                    nodes.sort_unstable();
                    nodes.dedup();
                    (nodes, weight(s.chunk_len))
                }
                None => (vec![], 1),
            };
            let held = budget.acquire(&nodes, units).await;
            // A repair whose transfers are gated by timeslots is ordered by them (a node
            // receives one slot at a time), as the simulator orders it, not by its
            // destination's turn: its slots are reserved on every node, and waiting for a
            // turn behind repairs that wait for those slots held them all until the
            // reservation's hold passed (63 s in `timeslots_and_destination_limits`).
            let destination = choice.as_ref().map(|c| c.destination).filter(|_| slots.is_none());
            set.spawn(async move {
                let _permit = permit;
                let _held = held;
                // A destination's slot before the stripe's lock, always in this order.
                let _running = match destination {
                    Some(d) => Some(c.destinations.enter(d).await),
                    None => None,
                };
                let _stripe = lock.lock().await;
                let len = c.meta.stripe(p.stripe).ok().flatten().map_or(0, |s| s.chunk_len);
                let r = c.repair_one(&p, choice, slots, claim).await;
                ((p.stripe, p.index), r, len, started.elapsed().as_secs_f64())
            });
        }
        let mut report = RepairReport { method: method.to_string(), lost, ..Default::default() };
        self.collect(&mut set, &mut report, record, watch).await?;
        report.seconds = started.elapsed().as_secs_f64();
        report.most_at_once_per_destination = self.destinations.peak();
        if let Some(r) = &reservation {
            self.end_reservation(r).await;
        }
        Ok((report, set))
    }

    /// Takes repairs' results as they finish, into `report`. Under a straggler watch, also
    /// judges stragglers every progress period, and returns once only postponed repairs
    /// are left (after cancelling those to be planned again).
    pub(crate) async fn collect(
        &self,
        set: &mut Repairs,
        report: &mut RepairReport,
        mut record: Option<&mut Vec<(f64, RepairGraph)>>,
        watch: Option<&PhaseWatch>,
    ) -> Result<(), WireError> {
        let mut graph_bytes = 0usize;
        let mut tick = tokio::time::interval(watch.map_or(Duration::from_secs(1), |w| w.period));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = match watch {
                Some(w) => {
                    if w.only_postponed_left(set.len()) && self.restart_postponed(w).await == 0 {
                        break;
                    }
                    let changed = w.changed.notified();
                    tokio::select! {
                        r = set.join_next() => r,
                        _ = changed => continue,
                        _ = tick.tick() => {
                            self.judge_stragglers(w).await;
                            continue;
                        }
                    }
                }
                None => set.join_next().await,
            };
            let Some(r) = next else { break };
            match r.map_err(WireError::from)? {
                // Cancelled to be planned in a later phase: counted there.
                (key, Ok((0, _)), _, _) if watch.and_then(|w| w.verdict(key)) == Some(Verdict::Restart) => report.lost -= 1,
                (_, Ok((0, _)), _, _) => {
                    report.skipped += 1;
                    self.repair_counters.record(&report.method, "skipped", 0);
                }
                (_, Ok((attempts, ran)), len, finished) => {
                    self.repair_counters.record(&report.method, "repaired", len);
                    if let (Some(rec), Some(r)) = (record.as_deref_mut(), &ran) {
                        rec.push((finished, r.graph.clone()));
                    }
                    report.repaired += 1;
                    report.first_done = Some(report.first_done.map_or(finished, |f| f.min(finished)));
                    report.retries += attempts - 1;
                    report.bytes += len;
                    // Up to a count and a size: a Clay graph's coefficients run to hundreds
                    // of KiB, and the report must fit one frame.
                    if let Some(r) = ran.filter(|_| report.graphs.len() < REPORTED_GRAPHS && graph_bytes < REPORTED_GRAPH_BYTES) {
                        let wire = kintsugi_node::wire::graph_to_wire(&r.graph);
                        graph_bytes += wire.terms.iter().map(|t| t.coefs.len()).sum::<usize>() + 64 * wire.vertices.len();
                        report.graphs.push(wire);
                        report.graph_timeslots.push(r.timeslots);
                    }
                }
                // No node to rebuild on: not a failure of the repair, a state of the cluster,
                // said once per run by its caller, not once per chunk.
                (_, Err(e), _, _) if e.is_short_of(Scarce::Nodes) => {
                    tracing::debug!("repair waits: {e}");
                    self.repair_counters.record(&report.method, "waiting", 0);
                    if report.waiting == 0 {
                        report.errors.push(e.to_string());
                    }
                    report.waiting += 1;
                }
                (_, Err(e), _, _) => {
                    tracing::warn!("repair failed: {e}");
                    self.repair_counters.record(&report.method, "failed", 0);
                    report.failed += 1;
                    report.errors.push(e.to_string());
                }
            }
        }
        Ok(())
    }
}

/// Repairs under way: each yields its chunk, its result, the chunk's length and when it
/// finished (seconds from the start).
pub(crate) type Repairs = JoinSet<((u64, usize), Result<(usize, Option<Ran>), WireError>, u64, f64)>;

/// Adds one round's report (a ChameleonEC phase, a RepairBoost sub-process) to the total.
pub(crate) fn absorb(total: &mut RepairReport, r: RepairReport) {
    total.repaired += r.repaired;
    total.skipped += r.skipped;
    total.failed += r.failed;
    total.waiting += r.waiting;
    total.retries += r.retries;
    total.bytes += r.bytes;
    total.stragglers += r.stragglers;
    total.retuned += r.retuned;
    total.postponed += r.postponed;
    total.restarted += r.restarted;
    total.errors.extend(r.errors);
    total.first_done = total.first_done.or(r.first_done);
    total.most_at_once_per_destination = total.most_at_once_per_destination.max(r.most_at_once_per_destination);
    total.auto.extend(r.auto);
    let room = REPORTED_GRAPHS.saturating_sub(total.graphs.len());
    total.graphs.extend(r.graphs.into_iter().take(room));
    total.graph_timeslots.extend(r.graph_timeslots.into_iter().take(room));
}

/// Graphs a repair report carries at most (what ran, for replaying it in the simulator).
pub(crate) const REPORTED_GRAPHS: usize = 1024;
/// ... and their serialized bytes at most (a frame is 8 MiB).
const REPORTED_GRAPH_BYTES: usize = 4 << 20;
