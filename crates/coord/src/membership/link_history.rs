//! Each node's recent traffic, from its reports, for the status page's charts.

use crate::clock::now_ms;
use kintsugi_plan::NodeId;
use kintsugi_proto::LinkReport;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

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

    pub(crate) fn json(&self) -> serde_json::Value {
        let h = self.0.lock().expect("history lock");
        h.iter()
            .map(|(n, q)| (n.to_string(), q.iter().map(|&(t, fg, rp)| serde_json::json!([t, fg, rp])).collect::<serde_json::Value>()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}
