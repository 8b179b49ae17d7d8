//! Live bandwidth: the nodes' traffic reports (with their heartbeats) turned into what the
//! planners take. A node's residual bandwidth per direction is what foreground traffic
//! leaves of its link, never counted below 30% of the link: ChameleonEC's rule
//! (max(0.3 x capacity, capacity - foreground)), so repair always gets a share and a busy
//! node is not planned out entirely.

use kintsugi_plan::schedule::Cluster;
use kintsugi_plan::NodeId;
use kintsugi_proto::LinkReport;
use std::collections::HashMap;

pub use kintsugi_plan::schedule::{residual, RESIDUAL_FLOOR};

/// A node's residual (up, down), when its report gives its link's capacity.
pub fn residual_of(r: &LinkReport) -> Option<(f64, f64)> {
    (r.capacity_up > 0.0 && r.capacity_down > 0.0).then(|| (residual(r.capacity_up, r.fg_up), residual(r.capacity_down, r.fg_down)))
}

/// Fills the planners' inputs from the latest reports: per-node residual bandwidth (nodes
/// without a known capacity get the mean of the others'), and each node's foreground
/// traffic over its last period in MB (m-PPR's user load), and each emulated disk's residual
/// bandwidth (ChameleonEC-IO). Without any capacity known the cluster stays homogeneous.
pub fn fill(cluster: &mut Cluster, reports: &HashMap<NodeId, LinkReport>) {
    let mut known = Vec::new();
    for &n in &cluster.nodes {
        let Some(r) = reports.get(&n) else { continue };
        let period = r.period_ms as f64 / 1e3;
        cluster.user_load_mb.insert(n, (r.fg_up + r.fg_down) * period / 1e6);
        if let Some(res) = residual_of(r) {
            cluster.bandwidth.insert(n, res);
            known.push(res);
        }
        // A disk of known rate: what users' I/O leaves of it, for reads and writes alike
        // (one head serves both), by the same rule (ChameleonEC-IO).
        if r.disk_capacity > 0.0 {
            let left = residual(r.disk_capacity, r.disk_fg);
            cluster.storage.insert(n, (left, left));
        }
    }
    if !known.is_empty() {
        let mean = known.iter().map(|(u, d)| (u + d) / 2.0).sum::<f64>() / known.len() as f64;
        cluster.default_bandwidth = mean;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(cap: f64, fg_up: f64, fg_down: f64) -> LinkReport {
        LinkReport { period_ms: 1000, fg_up, fg_down, capacity_up: cap, capacity_down: cap, ..Default::default() }
    }

    #[test]
    fn residual_is_what_foreground_leaves_but_at_least_thirty_percent() {
        // The authors' rule on a 10 Gb/s (1.25 GB/s) link.
        assert_eq!(residual(1.25e9, 0.25e9), 1.0e9);
        assert_eq!(residual(1.25e9, 1.2e9), 0.3 * 1.25e9);
        assert_eq!(residual(1.25e9, 0.0), 1.25e9);
        assert_eq!(residual_of(&report(0.0, 5.0, 5.0)), None, "no capacity, no residual");
    }

    #[test]
    fn fill_gives_planners_residuals_and_user_load() {
        let mut c = Cluster::homogeneous(vec![1, 2, 3]);
        let reports: HashMap<NodeId, LinkReport> = [
            (1, report(100e6, 60e6, 10e6)),
            (2, report(100e6, 0.0, 90e6)),
            (3, LinkReport { fg_up: 2e6, period_ms: 500, disk_capacity: 180e6, disk_fg: 150e6, ..Default::default() }),
        ]
        .into_iter()
        .collect();
        fill(&mut c, &reports);
        assert_eq!(c.bandwidth[&1], (40e6, 90e6));
        assert_eq!(c.bandwidth[&2], (100e6, 30e6));
        assert!(!c.bandwidth.contains_key(&3), "node 3 reported no capacity");
        assert_eq!(c.default_bandwidth, (65e6 + 65e6) / 2.0);
        assert_eq!(c.user_load_mb[&1], 70.0);
        assert_eq!(c.user_load_mb[&3], 1.0);
        // Node 3's emulated disk: users took 150 of 180 MB/s, so the 30% floor (54 MB/s).
        assert_eq!(c.storage[&3], (54e6, 54e6));
        assert!(!c.storage.contains_key(&1), "no disk figures, no storage limit");
        let mut h = Cluster::homogeneous(vec![1]);
        fill(&mut h, &HashMap::new());
        assert!(h.bandwidth.is_empty() && h.default_bandwidth == 1.0, "nothing reported: homogeneous");
    }
}
