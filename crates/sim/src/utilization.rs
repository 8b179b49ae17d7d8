//! Link utilisation over time, from the engine's per-node rate logs: mean rate of each
//! node's uplink and downlink over fixed bins, as a fraction of its capacity.

use crate::engine::RateLog;
use crate::network::Network;
use serde::Serialize;

/// One bin of one node.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UtilRow {
    pub t_start: f64,
    pub t_end: f64,
    pub node: u32,
    pub up: f64,
    pub down: f64,
}

/// Bins [0, end) into `bins` equal bins per node.
pub fn bin(net: &Network, logs: &[RateLog], end: f64, bins: usize) -> Vec<UtilRow> {
    let mut rows = Vec::with_capacity(logs.len() * bins);
    if end <= 0.0 || bins == 0 {
        return rows;
    }
    let w = end / bins as f64;
    for (node, log) in logs.iter().enumerate() {
        let spec = &net.nodes[node];
        let mut up = vec![0.0; bins];
        let mut down = vec![0.0; bins];
        for (i, &(t, ru, rd)) in log.iter().enumerate() {
            let t_next = log.get(i + 1).map_or(end, |n| n.0).min(end);
            // Spread this constant-rate interval over the bins it overlaps.
            if t_next <= t {
                continue;
            }
            let first = ((t / w).floor() as usize).min(bins - 1);
            let last = ((t_next / w).ceil() as usize).clamp(first + 1, bins);
            for b in first..last {
                let lo = t.max(b as f64 * w);
                let hi = t_next.min((b + 1) as f64 * w);
                if hi > lo {
                    up[b] += ru * (hi - lo);
                    down[b] += rd * (hi - lo);
                }
            }
        }
        for b in 0..bins {
            rows.push(UtilRow {
                t_start: b as f64 * w,
                t_end: (b + 1) as f64 * w,
                node: node as u32,
                up: up[b] / w / spec.up,
                down: down[b] / w / spec.down,
            });
        }
    }
    rows
}

/// CSV text with a header.
pub fn to_csv(rows: &[UtilRow]) -> String {
    let mut s = String::from("t_start_s,t_end_s,node,up_utilization,down_utilization\n");
    for r in rows {
        s.push_str(&format!("{:.6},{:.6},{},{:.4},{:.4}\n", r.t_start, r.t_end, r.node, r.up, r.down));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_spread_intervals_exactly() {
        let net = Network::homogeneous(1, 10.0);
        // Full rate for 0.7 of the time, then idle, over bins that do not divide it evenly.
        let logs = vec![vec![(0.0, 10.0, 5.0), (0.7, 0.0, 0.0)]];
        let rows = bin(&net, &logs, 1.0, 7);
        let busy: f64 = rows.iter().map(|r| r.up * (r.t_end - r.t_start)).sum();
        assert!((busy - 0.7).abs() < 1e-9, "{busy}");
        assert!(rows[..4].iter().all(|r| (r.up - 1.0).abs() < 1e-9 && (r.down - 0.5).abs() < 1e-9));
        assert!(rows[5..].iter().all(|r| r.up == 0.0));
    }
}
