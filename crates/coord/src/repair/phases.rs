//! ChameleonEC's phases on the cluster (Zhou et al., §3.2): the repair is planned one phase at
//! a time. A phase holds the chunks whose tasks fit T_phase on every node's residual
//! bandwidth; it runs to its end, then what is left is planned again from the nodes' fresh
//! traffic reports, so a node that foreground load took since is given less in the next
//! phase. (Planning everything once, as the simulator does, leaves the monitoring lag at the
//! whole repair.)

use crate::coordinator::Coordinator;
use crate::metadata::PendingRepair;
use crate::repair::batch::Repairs;
use crate::repair::options::RepairAsk;
use crate::repair::straggler::{expectations, Key, PhaseWatch};
use crate::repair::subprocess::NodeSpeed;
use kintsugi_plan::schedule::{Choice, Cluster, Scheduler};
use kintsugi_plan::{shapes, NodeId, RepairGraph, RepairTask};
use kintsugi_proto::WireError;
use kintsugi_proto::{AutoChoice, RepairReport};
use kintsugi_sim::auto::Candidate;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `auto` chose instead of ChameleonEC before a phase, and the chunks left for it.
pub(crate) type HandOver = ((Candidate, AutoChoice), Vec<PendingRepair>);

impl Coordinator {
    /// Repairs `todo` phase by phase, `parallel` chunks at a time within a phase. Chosen
    /// by `auto` (`ask`), it asks again before each phase after the first; when another
    /// candidate is predicted faster for what is left, it stops there and returns that
    /// choice with the chunks left.
    pub(crate) async fn repair_in_phases(
        self: &Arc<Self>,
        mut todo: Vec<PendingRepair>,
        label: &str,
        parallel: usize,
        scheduler: Scheduler,
        ask: Option<RepairAsk>,
    ) -> Result<(RepairReport, Option<HandOver>), WireError> {
        let started = Instant::now();
        let mut total = RepairReport { method: label.to_string(), lost: todo.len(), ..Default::default() };
        // Postponed stragglers still running when their phase ended.
        let mut background: Vec<Repairs> = Vec::new();
        let mut restarted: HashSet<Key> = HashSet::new();
        // A restarted straggler's chunk is planned without the node it waited for.
        let mut shun: HashMap<Key, NodeId> = HashMap::new();
        let mut handover = None;
        while !todo.is_empty() {
            if let Some(ask) = ask.filter(|_| total.phases > 0) {
                match self.decide_auto_off_runtime(&todo, ask, total.phases).await {
                    Ok((pick, choice)) if !pick.scheduler.chameleon() => {
                        tracing::info!(left = todo.len(), "auto: {pick} takes over from ChameleonEC after {} phase(s)", total.phases);
                        handover = Some(((pick, choice), std::mem::take(&mut todo)));
                        break;
                    }
                    Ok((_, choice)) => total.auto.push(choice),
                    // Postponed stragglers still run: ChameleonEC goes on rather than leave them.
                    Err(e) => tracing::warn!("{e}; ChameleonEC goes on"),
                }
            }
            let (now, choices, watch) = match self.schedule_scaled(&mut todo, scheduler, &NodeSpeed::default(), &shun) {
                Ok(plan) => {
                    let first = todo.iter().filter_map(|p| plan.phase.get(&(p.stripe, p.index))).min().copied().unwrap_or(0);
                    let (now, later): (Vec<_>, Vec<_>) =
                        todo.drain(..).partition(|p| plan.phase.get(&(p.stripe, p.index)).is_none_or(|&ph| ph == first));
                    todo = later;
                    // Expectations from what the plan was made with (ChameleonEC-IO: disks too).
                    let seen = match scheduler {
                        Scheduler::ChameleonIo => plan.cluster.storage_bound(),
                        _ => plan.cluster.clone(),
                    };
                    let watch = self.phase_watch(&now, &plan.choices, &seen, &restarted);
                    (now, plan.choices, watch)
                }
                Err(e) => {
                    // As in one-shot repair: each chunk then plans on its own.
                    tracing::warn!("scheduler {scheduler} could not plan: {e}");
                    (std::mem::take(&mut todo), HashMap::new(), None)
                }
            };
            tracing::info!(phase = total.phases, chunks = now.len(), left = todo.len(), sar = watch.is_some(), "ChameleonEC phase");
            *self.sar.lock().expect("sar lock") = watch.clone();
            let run = self.run_repairs_watched(now.clone(), label, parallel, choices, HashMap::new(), None, watch.as_deref()).await;
            *self.sar.lock().expect("sar lock") = None;
            let (r, left) = run?;
            if let Some(w) = &watch {
                let again: HashMap<Key, Option<NodeId>> = w.restarts().into_iter().collect();
                todo.extend(now.iter().filter(|p| again.contains_key(&(p.stripe, p.index))).cloned());
                for (k, node) in again {
                    restarted.insert(k);
                    if let Some(n) = node {
                        shun.insert(k, n);
                    }
                }
                let c = w.counts();
                self.repair_counters.record_sar(&c);
                total.stragglers += c.stragglers;
                total.retuned += c.retuned;
                total.postponed += c.postponed;
                total.restarted += c.restarted;
            }
            background.push(left);
            total.phases += 1;
            crate::repair::batch::absorb(&mut total, r);
        }
        for mut set in background {
            let mut r = RepairReport::default();
            self.collect(&mut set, &mut r, None, None).await?;
            crate::repair::batch::absorb(&mut total, r);
        }
        total.seconds = started.elapsed().as_secs_f64();
        Ok((total, handover))
    }

    /// The straggler watch of a phase (ChameleonEC's SAR), when it is on and the nodes
    /// report their link capacities (without them there is no expected time to be late by).
    fn phase_watch(
        &self,
        now: &[PendingRepair],
        choices: &HashMap<Key, Choice>,
        cluster: &Cluster,
        restarted: &HashSet<Key>,
    ) -> Option<Arc<PhaseWatch>> {
        if !self.cfg.repair_straggler_aware || cluster.bandwidth.is_empty() {
            return None;
        }
        let graphs: HashMap<Key, RepairGraph> = now
            .iter()
            .filter_map(|p| {
                let key = (p.stripe, p.index);
                Some((key, self.planned_graph(p, choices.get(&key)?)?))
            })
            .collect();
        let expected = expectations(&graphs, cluster, cluster.chunk_bytes);
        let period = Duration::from_millis(self.cfg.repair_progress_ms.max(10));
        Some(Arc::new(PhaseWatch::new(expected, period, restarted.clone())))
    }

    /// The graph a scheduler's choice makes for `p` (as `plan` builds it, without
    /// allocating a repair).
    fn planned_graph(&self, p: &PendingRepair, c: &Choice) -> Option<RepairGraph> {
        let s = self.meta.stripe(p.stripe).ok()??;
        let code = s.code.build().ok()?;
        let mut equation = code.repair_equation(p.index, &c.helpers).ok()?;
        equation.terms.retain(|t| !s.is_filler(t.helper));
        let helper_nodes = equation.helpers().iter().map(|&h| s.nodes[h]).collect();
        let task = RepairTask { equation, helper_nodes, destination: c.destination };
        match &c.tree {
            Some(parents) => shapes::tree::from_parents(&task, parents).ok(),
            None => shapes::build(p.method, &task).ok(),
        }
    }
}
