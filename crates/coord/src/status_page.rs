//! The coordinator's status page, served beside `/metrics`: `/` is a static page whose
//! script polls `/status.json` every two seconds and draws the nodes, the repair in progress
//! (progress, rate, ETA) and each node's foreground and repair bandwidth over the last
//! minutes. No front-end toolchain: one HTML file with its script, compiled in.

use crate::coordinator::Coordinator;
use kintsugi_metrics::{Page, Pages};
use kintsugi_plan::NodeId;
use kintsugi_proto::LinkReport;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

const PAGE: &str = include_str!("status_page.html");

/// Samples of each node's traffic the page charts: one every [`EVERY_MS`], the last
/// [`KEPT`] (five minutes).
const EVERY_MS: u64 = 2000;
const KEPT: usize = 150;

/// Each node's recent foreground and repair bandwidth (bytes/s, up + down), from its
/// traffic reports.
#[derive(Default)]
pub struct LinkHistory(Mutex<HashMap<NodeId, VecDeque<Sample>>>);

/// When (ms since the epoch), foreground and repair bytes/s.
type Sample = (u64, f64, f64);

impl LinkHistory {
    /// A node's traffic report arrived; kept if the node's last sample is old enough.
    pub(crate) fn record(&self, node: NodeId, l: &LinkReport) {
        let now = now_ms();
        let mut h = self.0.lock().expect("history lock");
        let q = h.entry(node).or_default();
        if q.back().is_some_and(|&(t, _, _)| now < t + EVERY_MS) {
            return;
        }
        q.push_back((now, l.fg_up + l.fg_down, l.repair_up + l.repair_down));
        while q.len() > KEPT {
            q.pop_front();
        }
    }

    /// A node that is gone.
    pub(crate) fn forget(&self, node: NodeId) {
        self.0.lock().expect("history lock").remove(&node);
    }

    fn json(&self) -> serde_json::Value {
        let h = self.0.lock().expect("history lock");
        h.iter()
            .map(|(n, q)| (n.to_string(), q.iter().map(|&(t, fg, rp)| serde_json::json!([t, fg, rp])).collect::<serde_json::Value>()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The pages a coordinator serves on its metrics port.
pub fn pages(slot: &crate::metrics::Slot) -> Pages {
    let slot = slot.clone();
    Arc::new(move |path: &str| match path {
        "/" | "/index.html" => Some(Page { content_type: "text/html; charset=utf-8", body: PAGE.to_string() }),
        "/status.json" => {
            let body = match slot.get().and_then(Weak::upgrade) {
                Some(c) => status_json(&c),
                // The page shows it where it shows errors.
                None => serde_json::json!({
                    "time_ms": now_ms(),
                    "status": { "error": "this coordinator stands by: another one leads the cluster" },
                })
                .to_string(),
            };
            Some(Page { content_type: "application/json", body })
        }
        _ => None,
    })
}

/// The cluster's status with the repair counters and the time, for the page's script.
fn status_json(c: &Coordinator) -> String {
    let r = &c.repair_counters;
    let status = match c.status() {
        Ok(s) => serde_json::to_value(s).unwrap_or_default(),
        Err(e) => serde_json::json!({ "error": e }),
    };
    serde_json::json!({
        "time_ms": now_ms(),
        "traffic": c.link_history.json(),
        "cluster_id": format!("{:016x}", c.cluster_id),
        "status": status,
        "repaired_chunks": r.repaired.load(Ordering::Relaxed),
        "failed_chunks": r.failed.load(Ordering::Relaxed),
        "repaired_bytes": r.repaired_bytes.load(Ordering::Relaxed),
        "run": r.progress(),
    })
    .to_string()
}
