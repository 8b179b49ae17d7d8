//! RepairBoost's load-balancing degree (Table 1): the most chunks any node uploads or
//! downloads, over the total repair traffic spread evenly on the surviving nodes. 1 is
//! perfect balance.

use crate::graph::{NodeId, RepairGraph};
use std::collections::HashMap;

/// Upload and download of each node over all `graphs`, in chunks.
pub fn node_traffic<'a>(graphs: impl IntoIterator<Item = &'a RepairGraph>) -> HashMap<NodeId, (f64, f64)> {
    let mut per: HashMap<NodeId, (f64, f64)> = HashMap::new();
    for g in graphs {
        let t = g.traffic();
        for (n, u) in t.upload {
            per.entry(n).or_default().0 += u;
        }
        for (n, d) in t.download {
            per.entry(n).or_default().1 += d;
        }
    }
    per
}

/// L_max / L_balanced for `graphs` over `surviving` nodes.
pub fn lb_degree<'a>(graphs: impl IntoIterator<Item = &'a RepairGraph>, surviving: usize) -> f64 {
    let per = node_traffic(graphs);
    let total: f64 = per.values().map(|x| x.0).sum();
    let max = per.values().map(|x| x.0.max(x.1)).fold(0.0, f64::max);
    if total == 0.0 || surviving == 0 {
        return 1.0;
    }
    max / (total / surviving as f64)
}
