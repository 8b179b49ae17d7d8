//! ChameleonEC's phases on the cluster (Zhou et al., §3.2): the repair is planned one phase at
//! a time. A phase holds the chunks whose tasks fit T_phase on every node's residual
//! bandwidth; it runs to its end, then what is left is planned again from the nodes' fresh
//! traffic reports, so a node that foreground load took since is given less in the next
//! phase. (Planning everything once, as the simulator does, leaves the monitoring lag at the
//! whole repair.)

use crate::coordinator::Coordinator;
use crate::meta::PendingRepair;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_proto::RepairReport;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

impl Coordinator {
    /// Repairs `todo` phase by phase, `parallel` chunks at a time within a phase.
    pub(crate) async fn repair_in_phases(
        self: &Arc<Self>,
        mut todo: Vec<PendingRepair>,
        label: &str,
        parallel: usize,
    ) -> Result<RepairReport, String> {
        let started = Instant::now();
        let mut total = RepairReport { method: label.to_string(), lost: todo.len(), ..Default::default() };
        while !todo.is_empty() {
            let (now, choices) = match self.schedule(&mut todo, Scheduler::Chameleon) {
                Ok(plan) => {
                    let first = todo.iter().filter_map(|p| plan.phase.get(&(p.stripe, p.index))).min().copied().unwrap_or(0);
                    let (now, later): (Vec<_>, Vec<_>) =
                        todo.drain(..).partition(|p| plan.phase.get(&(p.stripe, p.index)).is_none_or(|&ph| ph == first));
                    todo = later;
                    (now, plan.choices)
                }
                Err(e) => {
                    // As in one-shot repair: each chunk then plans on its own.
                    tracing::warn!("scheduler chameleon could not plan: {e}");
                    (std::mem::take(&mut todo), HashMap::new())
                }
            };
            tracing::info!(phase = total.phases, chunks = now.len(), left = todo.len(), "ChameleonEC phase");
            let r = self.run_repairs(now, label, parallel, choices, HashMap::new()).await?;
            total.phases += 1;
            crate::repair::absorb(&mut total, r);
        }
        total.seconds = started.elapsed().as_secs_f64();
        Ok(total)
    }
}
