//! The coordinator's status page, served beside `/metrics`: `/` is a static page whose
//! script polls `/status.json` every two seconds and draws the nodes, the repair in progress
//! (progress, rate, ETA) and each node's foreground and repair bandwidth over the last
//! minutes. No front-end toolchain: one HTML file with its script, compiled in.

use crate::clock::now_ms;
use crate::coordinator::Coordinator;
use kintsugi_metrics::{Page, Pages};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

const PAGE: &str = include_str!("status_page.html");

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
