//! Full-node repair: finding every lost chunk, then rebuilding them all in one run, with a
//! fixed method and scheduler (planned at once by `full_node_plan`, rebuilt many at a time
//! by `batch`, or phase by phase for ChameleonEC), or with what `auto` predicts
//! fastest (`repair::auto`), deciding again before each ChameleonEC phase.

use crate::coordinator::Coordinator;
use crate::metadata::{Change, PendingRepair, StripeRecord};
use crate::repair::full_node_plan::prioritise;
use crate::repair::options::RepairAsk;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{NodeId, Shape};
use kintsugi_proto::RepairReport;
use kintsugi_proto::WireError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

impl Coordinator {
    /// Every chunk of a committed object that is on a dead node or reported bad.
    pub(crate) fn lost_chunks(&self) -> Result<Vec<(u64, usize)>, WireError> {
        self.lost_chunks_where(&|_, _| true)
    }

    /// Lost chunks for which `due(node, bad)` holds (`node` the chunk's holder, `bad` whether
    /// it was reported bad).
    pub(crate) fn lost_chunks_where(&self, due: &dyn Fn(NodeId, bool) -> bool) -> Result<Vec<(u64, usize)>, WireError> {
        Ok(self.lost_with_holders(due)?.into_keys().collect())
    }

    /// Lost chunks with their holders, read from the indexes: the bad chunks, and the chunks
    /// of the nodes that are down; chunks of stripes a put is still writing are not lost yet.
    pub(crate) fn lost_with_holders(&self, due: &dyn Fn(NodeId, bool) -> bool) -> Result<BTreeMap<(u64, usize), NodeId>, WireError> {
        let alive = self.alive();
        let failed = self.failed_nodes()?;
        let mut lost = BTreeMap::new();
        for n in self.meta.nodes()?.into_iter().map(|n| n.id).filter(|n| failed.contains(n) || !alive.contains_key(n)) {
            for c in self.meta.node_chunks(n)? {
                if c.whole && !c.filler && due(n, c.bad) {
                    lost.insert((c.stripe, c.index), n);
                }
            }
        }
        let bad = self.meta.bad_chunks()?;
        let mut ids: Vec<u64> = bad.iter().map(|&(s, _)| s).collect();
        ids.dedup();
        let stripes: HashMap<u64, StripeRecord> = self.meta.stripes_of(&ids)?.into_iter().map(|s| (s.id, s)).collect();
        for (sid, i) in bad {
            let Some(s) = stripes.get(&sid) else { continue };
            if s.crcs.iter().all(|c| c.is_some()) && !s.is_filler(i) && due(s.nodes[i], true) {
                lost.insert((sid, i), s.nodes[i]);
            }
        }
        Ok(lost)
    }

    /// Full-node repair of everything lost, `parallel` chunks at a time.
    pub async fn repair(
        self: &Arc<Self>,
        ask: RepairAsk,
        slice: u64,
        parallel: usize,
        per_destination: Option<usize>,
    ) -> Result<RepairReport, WireError> {
        let _one = self.repairing.lock().await;
        // This run's repairs per destination, if the request asks (automatic repair, which
        // waits for `repairing`, gets the configured limit back).
        let _limit = self.destinations.limit_run(per_destination);
        let lost = self.lost_chunks()?;
        let mut tried: BTreeSet<(u64, usize)> = lost.iter().copied().collect();
        let files_before = self.helper_file_reads().await;
        let mut report = self.repair_locked(lost, ask, slice, parallel, "request").await?;
        // Helpers found corrupt or missing along the way are lost chunks too: rebuilt in
        // further rounds (a few; each round finds only what its graphs touched).
        for _ in 0..3 {
            let more: Vec<(u64, usize)> = self.lost_chunks()?.into_iter().filter(|c| !tried.contains(c)).collect();
            if more.is_empty() {
                break;
            }
            tracing::info!("{} chunk(s) found bad during the repair; rebuilding them too", more.len());
            tried.extend(more.iter().copied());
            let r = self.repair_locked(more, ask, slice, parallel, "request").await?;
            report.lost += r.lost;
            report.seconds += r.seconds;
            crate::repair::batch::absorb(&mut report, r);
        }
        let files_after = self.helper_file_reads().await;
        report.helper_file_read = files_after.iter().map(|(n, b)| b.saturating_sub(files_before.get(n).copied().unwrap_or(*b))).sum();
        Ok(report)
    }

    /// What each live node's repair helpers have read from its chunk files so far (nodes
    /// that do not answer within a second are left out).
    async fn helper_file_reads(&self) -> BTreeMap<NodeId, u64> {
        let mut set = tokio::task::JoinSet::new();
        for (n, addr) in self.alive() {
            set.spawn(async move {
                let r = kintsugi_proto::rpc::request(&addr, &kintsugi_proto::NodeRequest::Stat, std::time::Duration::from_secs(1)).await;
                match r {
                    Ok(kintsugi_proto::NodeResponse::Stat(s)) => Some((n, s.repair_file_read)),
                    _ => None,
                }
            });
        }
        let mut out = BTreeMap::new();
        while let Some(r) = set.join_next().await {
            if let Ok(Some((n, b))) = r {
                out.insert(n, b);
            }
        }
        out
    }

    /// Repairs `lost` (and what an earlier run left pending); the caller holds `repairing`.
    pub(crate) async fn repair_locked(
        self: &Arc<Self>,
        lost: Vec<(u64, usize)>,
        ask: RepairAsk,
        slice: u64,
        parallel: usize,
        trigger: &'static str,
    ) -> Result<RepairReport, WireError> {
        let pending = self.meta.pending()?.len();
        self.destinations.reset_peak();
        self.repair_counters.start_run(&ask.to_string(), lost.len().max(pending), trigger);
        let r = self.repair_run(lost, ask, slice, parallel).await;
        self.repair_counters.finish_run();
        r
    }

    async fn repair_run(
        self: &Arc<Self>,
        lost: Vec<(u64, usize)>,
        ask: RepairAsk,
        slice: u64,
        parallel: usize,
    ) -> Result<RepairReport, WireError> {
        let method = ask.method_or_ecpipe();
        let mut todo: Vec<PendingRepair> = lost.into_iter().map(|(stripe, index)| PendingRepair { stripe, index, method, slice }).collect();
        // Chunks left pending by an earlier run are included with their own method.
        for p in self.meta.pending()? {
            if !todo.iter().any(|t| t.stripe == p.stripe && t.index == p.index) {
                todo.push(p);
            }
        }
        self.meta.apply(todo.iter().cloned().map(Change::PutPending).collect())?;
        // In this order also when planning fails below.
        prioritise(&mut todo, &HashMap::new());
        match (ask.method.fixed(), ask.scheduler.fixed()) {
            (Some(method), Some(scheduler)) => self.repair_fixed(todo, method, scheduler, parallel).await,
            _ => self.repair_auto(todo, ask, parallel).await,
        }
    }

    /// Repairs `todo` with one method and scheduler.
    async fn repair_fixed(
        self: &Arc<Self>,
        mut todo: Vec<PendingRepair>,
        method: Shape,
        scheduler: Scheduler,
        parallel: usize,
    ) -> Result<RepairReport, WireError> {
        let label = format!("{method} ({scheduler})");
        if scheduler.chameleon() {
            return Ok(self.repair_in_phases(todo, &label, parallel, scheduler, None).await?.0);
        }
        let round = self.cfg.repair_subprocess_chunks;
        if round > 0 && round < todo.len() {
            return self.repair_in_subprocesses(todo, &label, parallel, scheduler, round).await;
        }
        let (choices, timeslots) = match self.schedule(&mut todo, scheduler) {
            Ok(c) => (c.choices, c.timeslots),
            Err(e) => {
                // Planning can fail where a chunk has too few survivors; each chunk then
                // plans on its own and reports its own error.
                tracing::warn!("scheduler {scheduler} could not plan: {e}");
                (HashMap::new(), HashMap::new())
            }
        };
        if !timeslots.is_empty() {
            tracing::info!(repairs = timeslots.len(), "nodes gate transfers by RepairBoost's timeslots");
        }
        self.run_repairs(todo, &label, parallel, choices, timeslots).await
    }

    /// Repairs `todo` with what `auto` predicts fastest; a ChameleonEC run decides again
    /// before each of its phases, and hands what is left to another candidate when one
    /// is predicted faster for it.
    async fn repair_auto(
        self: &Arc<Self>,
        mut todo: Vec<PendingRepair>,
        ask: RepairAsk,
        parallel: usize,
    ) -> Result<RepairReport, WireError> {
        let started = Instant::now();
        let mut total = RepairReport { lost: todo.len(), ..Default::default() };
        let mut chosen: Vec<String> = Vec::new();
        let mut next = None;
        while !todo.is_empty() {
            let (pick, choice) = match next.take() {
                Some(decided) => decided,
                None => self.decide_auto_off_runtime(&todo, ask, total.phases).await?,
            };
            chosen.push(choice.chosen.clone());
            total.auto.push(choice);
            for p in &mut todo {
                p.method = pick.method;
            }
            let todo_now = std::mem::take(&mut todo);
            let r = if pick.scheduler.chameleon() {
                let (r, rest) = self
                    .repair_in_phases(todo_now, &format!("{} ({})", pick.method, pick.scheduler), parallel, pick.scheduler, Some(ask))
                    .await?;
                if let Some((decided, left)) = rest {
                    (next, todo) = (Some(decided), left);
                }
                r
            } else {
                self.repair_fixed(todo_now, pick.method, pick.scheduler, parallel).await?
            };
            total.phases += r.phases;
            total.subprocesses += r.subprocesses;
            crate::repair::batch::absorb(&mut total, r);
        }
        chosen.dedup();
        total.method = format!("auto: {}", chosen.join(", then "));
        total.seconds = started.elapsed().as_secs_f64();
        Ok(total)
    }

    pub(crate) async fn resume(self: &Arc<Self>) -> Result<RepairReport, WireError> {
        let _one = self.repairing.lock().await;
        let todo = self.meta.pending()?;
        self.run_repairs(todo, "resumed", 4, HashMap::new(), HashMap::new()).await
    }
}
