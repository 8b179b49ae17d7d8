//! Counters of the repairs a coordinator ran, kept as they finish: by method, scheduler and
//! outcome, SAR's actions, and the running (or last) run's progress. `/metrics` and the
//! status page read them.

use crate::clock::now_ms;
use kintsugi_metrics::prometheus_client::metrics::counter::Counter;
use kintsugi_metrics::prometheus_client::metrics::family::Family;
use std::sync::atomic::{AtomicU64, Ordering};

/// What SAR does, as `kintsugi_sar_actions_total` labels them.
pub(crate) const SAR_ACTIONS: [&str; 4] = ["straggler", "retuned", "postponed", "restarted"];

/// A repair's labels: its method and scheduler.
type RepairLabels = Vec<(&'static str, String)>;

/// Counters of repairs, kept as they finish.
#[derive(Default)]
pub struct RepairCounters {
    pub(crate) chunks: Family<Vec<(&'static str, String)>, Counter>,
    pub(crate) bytes: Family<RepairLabels, Counter>,
    /// ChameleonEC's straggler-aware re-scheduling: what it did, by action.
    pub(crate) sar: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Repair runs begun, by what began them (a request or automatic repair).
    pub(crate) runs: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// The same, summed over methods (the status page's progress and rate).
    pub(crate) repaired: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Lost chunks with no node to be rebuilt on (see `RepairReport::waiting`).
    pub(crate) waiting: AtomicU64,
    pub(crate) repaired_bytes: AtomicU64,
    /// The running (or last) repair run, for the status page.
    run: std::sync::Mutex<Option<Run>>,
}

/// A repair run as the status page shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub method: String,
    /// Lost chunks it set out to rebuild.
    pub total: u64,
    pub started_ms: u64,
    pub finished_ms: Option<u64>,
    #[serde(skip)]
    base: (u64, u64, u64, u64),
}

/// A run's progress: what it is, and what it has done so far.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunProgress {
    #[serde(flatten)]
    pub run: Run,
    pub repaired: u64,
    pub failed: u64,
    pub waiting: u64,
    pub bytes: u64,
}

impl RepairCounters {
    /// One ChameleonEC phase's straggler watch ended, having acted so.
    pub(crate) fn record_sar(&self, c: &crate::repair::straggler::Counts) {
        for (action, n) in SAR_ACTIONS.into_iter().zip([c.stragglers, c.retuned, c.postponed, c.restarted]) {
            self.sar.get_or_create(&vec![("action", action)]).inc_by(n as u64);
        }
    }

    /// A repair run of `total` lost chunks begins; `trigger` says who began it.
    pub(crate) fn start_run(&self, method: &str, total: usize, trigger: &'static str) {
        self.runs.get_or_create(&vec![("trigger", trigger)]).inc();
        let base = (
            self.repaired.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.repaired_bytes.load(Ordering::Relaxed),
            self.waiting.load(Ordering::Relaxed),
        );
        let run = Run { method: method.to_string(), total: total as u64, started_ms: now_ms(), finished_ms: None, base };
        *self.run.lock().expect("run lock") = Some(run);
    }

    /// The run begun last has ended.
    pub(crate) fn finish_run(&self) {
        if let Some(r) = self.run.lock().expect("run lock").as_mut() {
            r.finished_ms = Some(now_ms());
        }
    }

    /// The running or last run, with what it has done.
    pub fn progress(&self) -> Option<RunProgress> {
        let run = self.run.lock().expect("run lock").clone()?;
        let (r, f, b, w) = run.base;
        Some(RunProgress {
            repaired: self.repaired.load(Ordering::Relaxed) - r,
            failed: self.failed.load(Ordering::Relaxed) - f,
            waiting: self.waiting.load(Ordering::Relaxed) - w,
            bytes: self.repaired_bytes.load(Ordering::Relaxed) - b,
            run,
        })
    }

    /// One lost chunk's repair ended: `outcome` is repaired, failed, waiting or skipped; `bytes` is
    /// the rebuilt chunk's length. `method` is a report's "method (scheduler)".
    pub(crate) fn record(&self, method: &str, outcome: &'static str, bytes: u64) {
        let mut labels = labels_of(method);
        match outcome {
            "repaired" => {
                self.repaired.fetch_add(1, Ordering::Relaxed);
                self.repaired_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            "failed" => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
            "waiting" => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if bytes > 0 {
            self.bytes.get_or_create(&labels).inc_by(bytes);
        }
        labels.push(("outcome", outcome.to_string()));
        self.chunks.get_or_create(&labels).inc();
    }
}

/// "ecpipe (chameleon)" as method and scheduler labels; a report without a scheduler
/// ("resumed") has "none".
fn labels_of(method: &str) -> RepairLabels {
    let (m, s) = match method.split_once(" (") {
        Some((m, s)) => (m, s.trim_end_matches(')')),
        None => (method, "none"),
    };
    vec![("method", m.to_string()), ("scheduler", s.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reports_method_names_its_method_and_scheduler() {
        assert_eq!(labels_of("ecpipe (chameleon)"), vec![("method", "ecpipe".into()), ("scheduler", "chameleon".into())]);
        assert_eq!(labels_of("resumed"), vec![("method", "resumed".into()), ("scheduler", "none".into())]);
    }
}
