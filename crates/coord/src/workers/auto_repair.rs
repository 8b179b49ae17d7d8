//! Repair without anyone asking: every `auto_repair_interval_ms`, chunks that are lost and
//! due are rebuilt with the configured method and scheduler, `repair_max_active` at a time.
//! A chunk is due when it was found corrupt or missing, when its node was stopped by
//! `fail`, or when its node has been silent for `down_out_ms` (a node that merely missed a
//! few heartbeats is given that long to come back, as Ceph's down/out interval does).

use crate::coordinator::Coordinator;
use kintsugi_plan::NodeId;
use kintsugi_proto::RepairReport;
use kintsugi_proto::WireError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

impl Coordinator {
    /// How long node `n` has been silent (since this coordinator started, if never heard).
    pub(crate) fn silent_for(&self, n: NodeId) -> Duration {
        let live = self.live.lock().expect("live lock");
        live.get(&n).map_or(self.started.elapsed(), |(_, t)| t.elapsed())
    }

    /// One pass: repairs the due lost chunks, if any and no repair is running.
    pub(crate) async fn auto_repair_once(self: &Arc<Self>) -> Result<Option<kintsugi_proto::RepairReport>, WireError> {
        let Ok(_one) = self.repairing.try_lock() else { return Ok(None) };
        let failed = self.failed_nodes()?;
        let down_out = Duration::from_millis(self.cfg.down_out_ms);
        let due = |n: NodeId, bad: bool| bad || failed.contains(&n) || self.silent_for(n) >= down_out;
        let lost = self.lost_chunks_where(&due)?;
        if lost.is_empty() && self.meta.pending()?.is_empty() {
            return Ok(None);
        }
        let c = &self.cfg;
        tracing::debug!("automatic repair of {} lost chunks ({} with {})", lost.len(), c.repair_method, c.repair_scheduler);
        let r = self.repair_locked(lost, c.repair_ask(), c.repair_slice, c.repair_max_active.max(1), "auto").await?;
        if r.repaired + r.failed > 0 {
            tracing::info!(
                "automatic repair: {} repaired, {} skipped, {} failed, {} waiting in {:.1} s",
                r.repaired,
                r.skipped,
                r.failed,
                r.waiting,
                r.seconds
            );
        }
        if r.waiting > 0 && self.waiting_said.due(WAITING_SAID_EVERY) {
            tracing::warn!(
                "automatic repair: {} lost chunk(s) have no node to be rebuilt on ({}); they wait for their node to return or a node \
                 to be added (said again in {} s at most)",
                r.waiting,
                r.errors.first().map_or("", String::as_str),
                WAITING_SAID_EVERY.as_secs()
            );
        }
        self.sync_index_now().await;
        // `status` shows the counts, not the graphs.
        *self.last_auto.lock().expect("last auto lock") =
            Some(RepairReport { graphs: Vec::new(), graph_timeslots: Vec::new(), ..r.clone() });
        Ok(Some(r))
    }
}

/// How often the chunks waiting for a node are logged (a count and an example), however
/// often automatic repair looks at them.
const WAITING_SAID_EVERY: Duration = Duration::from_secs(60);

/// Runs automatic repair until the coordinator stops.
pub(crate) async fn run(coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    while crate::coordinator::tick(coord.cfg.auto_repair_interval_ms, &mut stop).await {
        if let Err(e) = coord.auto_repair_once().await {
            tracing::warn!("automatic repair: {e}");
        }
    }
}
