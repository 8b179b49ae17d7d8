//! The modelled cluster: per-node uplink and downlink (full duplex, set separately),
//! optional per-pair caps (heterogeneous or geo links), optional disk bandwidth with a
//! per-I/O seek cost, and foreground traffic as per-node, per-direction time series.

use crate::error::{Result, SimError};
use kintsugi_plan::NodeId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One node's capacities, in bytes per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Uplink (sending) capacity.
    pub up: f64,
    /// Downlink (receiving) capacity.
    pub down: f64,
    /// Disk read bandwidth; `None` means reads are free (not modelled).
    pub disk_read: Option<f64>,
    /// Disk write bandwidth; `None` means writes are free.
    pub disk_write: Option<f64>,
    /// Seconds of positioning before every disk I/O (one I/O per slice).
    pub seek: f64,
}

impl NodeSpec {
    /// A node with a symmetric link and no disk model.
    pub fn link(rate: f64) -> Self {
        NodeSpec { up: rate, down: rate, disk_read: None, disk_write: None, seek: 0.0 }
    }
}

/// Which of a node's resources foreground traffic uses: its link's two directions, or its
/// disk's reads and writes (users' I/O, which ChameleonEC-IO plans around).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Read,
    Write,
}

/// Foreground traffic on one node's link or disk: piecewise-constant rate from each time on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Foreground {
    pub node: NodeId,
    pub direction: Direction,
    /// (time in seconds, bytes per second from then on), sorted by time.
    pub points: Vec<(f64, f64)>,
}

impl Foreground {
    /// The rate at time `t` (0 before the first point).
    pub fn at(&self, t: f64) -> f64 {
        self.points.iter().take_while(|p| p.0 <= t).last().map_or(0.0, |p| p.1)
    }

    /// The mean rate over [a, b]; the rate at `a` when the window is empty.
    pub fn mean(&self, a: f64, b: f64) -> f64 {
        if b <= a {
            return self.at(a);
        }
        let mut sum = 0.0;
        // Each piece [t_i, t_{i+1}) at rate r_i, clipped to the window; 0 before the first.
        for (i, &(t, r)) in self.points.iter().enumerate() {
            let end = self.points.get(i + 1).map_or(f64::INFINITY, |p| p.0);
            let (lo, hi) = (t.max(a), end.min(b));
            if hi > lo {
                sum += r * (hi - lo);
            }
        }
        sum / (b - a)
    }
}

/// The whole modelled network.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Network {
    pub nodes: Vec<NodeSpec>,
    /// Extra cap on traffic from one node to another (bytes per second).
    pub pair_caps: HashMap<(NodeId, NodeId), f64>,
    pub foreground: Vec<Foreground>,
    /// Caps on what repair may take of a node's uplink or downlink, from each time on
    /// (series of bytes per second; ChameleonEC yielding to users: each phase's repair
    /// paced at the residual bandwidth it was planned with). Users' requests and
    /// foreground series are not held by them. None before a series' first point.
    #[serde(default)]
    pub repair_caps: Vec<Foreground>,
    /// Foreground on links yields as users' TCP traffic does: on each node's uplink and on
    /// its downlink, the foreground series there are one flow sharing the link with repair
    /// (max-min, like any flow) whose demand is the series' rate, rather than a rate taken
    /// off the link first. For traffic from closed-loop clients (YCSB), which slow down
    /// when repair fills the links; disk series are taken first either way.
    #[serde(default)]
    pub elastic_foreground: bool,
}

/// Resource ids: eight per node, then one per pair cap.
pub(crate) const RES_PER_NODE: u32 = 8;
pub(crate) fn res_up(n: NodeId) -> u32 {
    n * RES_PER_NODE
}
pub(crate) fn res_down(n: NodeId) -> u32 {
    n * RES_PER_NODE + 1
}
pub(crate) fn res_disk_read(n: NodeId) -> u32 {
    n * RES_PER_NODE + 2
}
pub(crate) fn res_disk_write(n: NodeId) -> u32 {
    n * RES_PER_NODE + 3
}
/// What repair may take of a node's uplink and downlink (`Network::repair_caps`).
pub(crate) fn res_repair_up(n: NodeId) -> u32 {
    n * RES_PER_NODE + 4
}
pub(crate) fn res_repair_down(n: NodeId) -> u32 {
    n * RES_PER_NODE + 5
}
/// The demand of an elastic foreground flow on a node's uplink and downlink
/// (`Network::elastic_foreground`): its series' rate.
pub(crate) fn res_users_up(n: NodeId) -> u32 {
    n * RES_PER_NODE + 6
}
pub(crate) fn res_users_down(n: NodeId) -> u32 {
    n * RES_PER_NODE + 7
}

impl Network {
    /// `n` nodes with the same symmetric link rate.
    pub fn homogeneous(n: usize, rate: f64) -> Self {
        Network { nodes: vec![NodeSpec::link(rate); n], ..Default::default() }
    }

    /// Rejects capacities a simulation cannot run with.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(SimError::BadScenario(m));
        if self.nodes.is_empty() {
            return bad("the network has no nodes".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for (what, v) in [("uplink", Some(n.up)), ("downlink", Some(n.down)), ("disk read", n.disk_read), ("disk write", n.disk_write)]
            {
                if let Some(v) = v {
                    if !(v > 0.0 && v.is_finite()) {
                        return bad(format!("node {i} has {what} bandwidth {v}; it must be positive and finite"));
                    }
                }
            }
            if !(n.seek >= 0.0 && n.seek.is_finite()) {
                return bad(format!("node {i} has seek time {}", n.seek));
            }
        }
        for (&(a, b), &c) in &self.pair_caps {
            if a as usize >= self.nodes.len() || b as usize >= self.nodes.len() {
                return bad(format!("pair cap {a}->{b} names a node outside 0..{}", self.nodes.len()));
            }
            if !(c > 0.0 && c.is_finite()) {
                return bad(format!("pair cap {a}->{b} is {c}; it must be positive and finite"));
            }
        }
        for f in &self.foreground {
            if f.node as usize >= self.nodes.len() {
                return bad(format!("foreground traffic names node {} outside 0..{}", f.node, self.nodes.len()));
            }
            let spec = &self.nodes[f.node as usize];
            let disk = match f.direction {
                Direction::Read => Some(("read", spec.disk_read)),
                Direction::Write => Some(("write", spec.disk_write)),
                _ => None,
            };
            if let Some((what, None)) = disk {
                return bad(format!("foreground disk {what}s on node {} whose disk is not modelled (give its disk_{what})", f.node));
            }
            if f.points.windows(2).any(|w| w[1].0 < w[0].0) || f.points.iter().any(|p| p.0 < 0.0 || p.1 < 0.0 || !p.1.is_finite()) {
                return bad(format!("foreground series of node {} must have sorted, non-negative times and rates", f.node));
            }
        }
        for c in &self.repair_caps {
            if c.node as usize >= self.nodes.len() || !matches!(c.direction, Direction::Up | Direction::Down) {
                return bad(format!("a repair cap must name a node in 0..{} and its up or down link", self.nodes.len()));
            }
            if c.points.windows(2).any(|w| w[1].0 < w[0].0) || c.points.iter().any(|p| p.0 < 0.0 || !(p.1 > 0.0 && p.1.is_finite())) {
                return bad(format!("repair caps of node {} must have sorted times and positive rates", c.node));
            }
        }
        Ok(())
    }

    /// The foreground rate series put on node `n`'s link or disk in direction `d`, their
    /// mean over [a, b] (their rate at `a` when the window is empty).
    pub fn foreground_mean(&self, n: NodeId, d: Direction, a: f64, b: f64) -> f64 {
        self.foreground.iter().filter(|f| f.node == n && f.direction == d).map(|f| f.mean(a, b)).sum()
    }

    /// Base capacities of all resources, and the pair-cap resource ids.
    pub(crate) fn resources(&self) -> (Vec<f64>, HashMap<(NodeId, NodeId), u32>) {
        let mut caps = Vec::with_capacity(self.nodes.len() * RES_PER_NODE as usize + self.pair_caps.len());
        for n in &self.nodes {
            caps.extend([
                n.up,
                n.down,
                n.disk_read.unwrap_or(f64::INFINITY),
                n.disk_write.unwrap_or(f64::INFINITY),
                n.up,
                n.down,
                0.0,
                0.0,
            ]);
        }
        let mut pairs: Vec<_> = self.pair_caps.iter().collect();
        pairs.sort_by_key(|(k, _)| **k);
        let mut ids = HashMap::new();
        for (&k, &c) in pairs {
            ids.insert(k, caps.len() as u32);
            caps.push(c);
        }
        (caps, ids)
    }
}
