//! ChameleonEC's straggler-aware re-scheduling (SAR, Zhou et al. §3.5) on the cluster.
//!
//! Each repair of a phase gets an expectation when the phase is planned: the time its
//! busiest link needs for all the phase's tasks on it (tasks x chunk / residual
//! bandwidth). A repair still running 1.5x past that, and at least one progress period
//! late, is a straggler (../shared/papers/README.md). Which of its transfers is delayed
//! comes from the nodes' latest traffic reports: the edge whose sender's uplink or
//! receiver's downlink now leaves it the least bandwidth. Then:
//! - re-tune, when that edge is a download at a relay and the sink has written less than
//!   half the chunk: the input goes to the destination instead (the relay uploads its
//!   partial sum without it; the destination adds one more input, so the sum is the
//!   same). The repair is cancelled on its nodes and rerun so, from byte 0: a pipelined
//!   repair has no point where the tree can change shape without both ends agreeing on a
//!   slice, so the bytes already moved are redone, and only an early straggler is re-tuned;
//! - otherwise re-order: the repair is postponed. Its transfers keep going (at the
//!   straggler's pace, so they take little from its other nodes), but the phase no longer
//!   waits for it: once everything else in the phase is done, the next phase is planned.
//!   A postponed repair not yet half written then is cancelled and planned again with the
//!   rest (the paper's "restarts in later phases"); one further along finishes where it is.

use kintsugi_plan::schedule::{Choice, Cluster};
use kintsugi_plan::{NodeId, RepairGraph};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

mod judge;

pub(crate) type Key = (u64, usize);

/// A straggler is a repair past this multiple of its expected time ...
pub(crate) const STRAGGLER_FACTOR: f64 = 1.5;
/// ... and re-tuning or restarting it redoes its bytes, so only one less than this far.
const REDO_BELOW: f64 = 0.5;

/// A repair the watch may act on: the attempt that runs now.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub repair: u64,
    pub peers: BTreeMap<NodeId, String>,
    pub graph: RepairGraph,
    pub chunk_len: u64,
    pub started: Instant,
    pub choice: Option<Choice>,
}

/// What SAR decided for a chunk.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Re-tuned; the rerun takes this tree.
    Retune(Choice),
    /// Re-tuned and rerunning: it may still be postponed, not re-tuned again.
    Retuned,
    Postponed,
    /// Cancelled to be planned again in a later phase.
    Restart,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub stragglers: usize,
    pub retuned: usize,
    pub postponed: usize,
    pub restarted: usize,
}

/// One phase's straggler watch.
pub(crate) struct PhaseWatch {
    expected: HashMap<Key, f64>,
    running: Mutex<HashMap<Key, Running>>,
    verdicts: Mutex<HashMap<Key, Verdict>>,
    counts: Mutex<Counts>,
    /// The node each postponed repair was found waiting for, when the reports said.
    blamed: Mutex<HashMap<Key, NodeId>>,
    /// Chunks restarted in an earlier phase: postponed again, not restarted again.
    restarted_before: HashSet<Key>,
    /// Wakes the phase's collector when a repair is postponed.
    pub changed: Notify,
    pub period: Duration,
}

/// One transfer of a graph that crosses the network: sender vertex, sender node, receiver
/// node, and whether the receiver is a relay (not the sink).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Edge {
    pub vertex: usize,
    pub from: NodeId,
    pub to: NodeId,
    pub to_relay: bool,
}

pub(crate) fn edges(g: &RepairGraph) -> Vec<Edge> {
    g.vertices
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let o = v.output?;
            let to = g.vertex(o).node;
            (to != v.node).then_some(Edge { vertex: i, from: v.node, to, to_relay: o != g.sink })
        })
        .collect()
}

/// Upload and download tasks per node over `graphs`.
pub(crate) fn task_counts<'a>(graphs: impl IntoIterator<Item = &'a RepairGraph>) -> HashMap<NodeId, (u32, u32)> {
    let mut tasks: HashMap<NodeId, (u32, u32)> = HashMap::new();
    for g in graphs {
        for e in edges(g) {
            tasks.entry(e.from).or_default().0 += 1;
            tasks.entry(e.to).or_default().1 += 1;
        }
    }
    tasks
}

/// Each graph's expected time (seconds): its busiest link's tasks in the phase, each a
/// chunk of `chunk_bytes`, at the residual bandwidth the phase was planned with.
pub(crate) fn expectations(graphs: &HashMap<Key, RepairGraph>, cluster: &Cluster, chunk_bytes: f64) -> HashMap<Key, f64> {
    let tasks = task_counts(graphs.values());
    let bw = |n: NodeId| cluster.bandwidth.get(&n).copied().unwrap_or((cluster.default_bandwidth, cluster.default_bandwidth));
    graphs
        .iter()
        .map(|(&k, g)| {
            let t = edges(g)
                .iter()
                .map(|e| {
                    let up = tasks[&e.from].0 as f64 * chunk_bytes / bw(e.from).0;
                    let down = tasks[&e.to].1 as f64 * chunk_bytes / bw(e.to).1;
                    up.max(down)
                })
                .fold(0.0, f64::max);
            (k, t)
        })
        .collect()
}

/// The transfer of `g` that is delayed now: the one its sender's uplink or its receiver's
/// downlink leaves the least bandwidth, each link's residual (`residual`, from the latest
/// reports) shared by the tasks on it (`tasks`). Returns it and whether the download side
/// is the tighter one; None when the reports single out no transfer (the least share is
/// not clearly below the graph's median edge): the cause is something the monitoring does
/// not see, and re-tuning on a guess would only redo bytes.
pub(crate) fn delayed(
    g: &RepairGraph,
    residual: &HashMap<NodeId, (f64, f64)>,
    tasks: &HashMap<NodeId, (u32, u32)>,
) -> Option<(Edge, bool)> {
    let share = |n: NodeId, up: bool| {
        let r = residual.get(&n).map_or(f64::INFINITY, |&(u, d)| if up { u } else { d });
        let t = tasks.get(&n).map_or(1, |&(u, d)| if up { u } else { d }).max(1);
        r / t as f64
    };
    let mut rated: Vec<(Edge, f64, bool)> = edges(g)
        .into_iter()
        .map(|e| {
            let (up, down) = (share(e.from, true), share(e.to, false));
            (e, up.min(down), down < up)
        })
        .filter(|(_, rate, _)| rate.is_finite())
        .collect();
    rated.sort_by(|a, b| a.1.total_cmp(&b.1));
    let median = rated.get(rated.len() / 2)?.1;
    let (e, least, download) = rated[0];
    (least < SINGLED_OUT * median).then_some((e, download))
}

/// A transfer is singled out when its share of bandwidth is below this much of the median
/// transfer's in its graph.
const SINGLED_OUT: f64 = 0.75;

/// `choice` with the term sent by vertex `vertex` of `g` going to the destination.
pub(crate) fn retune(choice: &Choice, g: &RepairGraph, vertex: usize) -> Option<Choice> {
    let term = g.vertices[vertex].local?;
    let mut tree = choice.tree.clone()?;
    (tree.get(term)?.is_some()).then_some(())?;
    tree[term] = None;
    Some(Choice { tree: Some(tree), ..choice.clone() })
}

impl PhaseWatch {
    pub(crate) fn new(expected: HashMap<Key, f64>, period: Duration, restarted_before: HashSet<Key>) -> Self {
        PhaseWatch {
            expected,
            restarted_before,
            running: Mutex::default(),
            verdicts: Mutex::default(),
            counts: Mutex::default(),
            blamed: Mutex::default(),
            changed: Notify::new(),
            period,
        }
    }

    pub(crate) fn covers(&self, key: Key) -> bool {
        self.expected.contains_key(&key)
    }

    pub(crate) fn register(&self, key: Key, r: Running) {
        self.running.lock().expect("sar lock").insert(key, r);
    }

    pub(crate) fn finished(&self, key: Key) {
        self.running.lock().expect("sar lock").remove(&key);
        self.changed.notify_waiters();
    }

    /// The repair of `key` stored its chunk. A re-tune or restart decided while it was
    /// finishing came too late to cancel it: it is void, or the chunk would be planned
    /// (and counted) again.
    pub(crate) fn succeeded(&self, key: Key) {
        let mut v = self.verdicts.lock().expect("sar lock");
        let mut counts = self.counts.lock().expect("sar lock");
        match v.get(&key) {
            Some(Verdict::Restart) => counts.restarted -= 1,
            Some(Verdict::Retune(_)) => counts.retuned -= 1,
            _ => return,
        }
        v.remove(&key);
    }

    pub(crate) fn verdict(&self, key: Key) -> Option<Verdict> {
        self.verdicts.lock().expect("sar lock").get(&key).cloned()
    }

    /// The re-tuned tree for the next attempt, once.
    pub(crate) fn take_retune(&self, key: Key) -> Option<Choice> {
        let mut v = self.verdicts.lock().expect("sar lock");
        match v.get(&key) {
            Some(Verdict::Retune(c)) => {
                let c = c.clone();
                v.insert(key, Verdict::Retuned);
                Some(c)
            }
            _ => None,
        }
    }

    pub(crate) fn counts(&self) -> Counts {
        *self.counts.lock().expect("sar lock")
    }

    /// Chunks to plan again, each with the node it waited for, if known.
    pub(crate) fn restarts(&self) -> Vec<(Key, Option<NodeId>)> {
        let blamed = self.blamed.lock().expect("sar lock");
        let verdicts = self.verdicts.lock().expect("sar lock");
        verdicts.iter().filter(|(_, v)| **v == Verdict::Restart).map(|(&k, _)| (k, blamed.get(&k).copied())).collect()
    }

    /// Postponed repairs still running.
    fn postponed_running(&self) -> Vec<(Key, Running)> {
        let verdicts = self.verdicts.lock().expect("sar lock");
        let running = self.running.lock().expect("sar lock");
        running.iter().filter(|(k, _)| verdicts.get(k) == Some(&Verdict::Postponed)).map(|(&k, r)| (k, r.clone())).collect()
    }

    /// Whether every one of the phase's `left` unfinished repairs is postponed.
    pub(crate) fn only_postponed_left(&self, left: usize) -> bool {
        left > 0 && self.postponed_running().len() >= left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_plan::shapes;
    use kintsugi_plan::RepairTask;

    fn tree(parents: &[Option<usize>], helper_nodes: Vec<NodeId>, destination: NodeId) -> RepairGraph {
        let code = "rs:4,2".parse::<kintsugi_codes::CodeSpec>().unwrap().build().unwrap();
        let eq = code.repair_equation(0, &[1, 2, 3, 4]).unwrap();
        shapes::tree::from_parents(&RepairTask { equation: eq, helper_nodes, destination }, parents).unwrap()
    }

    /// The paper's Fig. 10b: N2 -> N4 -> Nd with N4's downlink constrained: that download
    /// is the delayed task, at a relay; re-tuned, N2's term goes to the destination and
    /// the rest of the tree stays.
    #[test]
    fn a_relay_with_a_constrained_downlink_is_retuned_to_the_destination() {
        // Terms 0..3 on nodes 1, 2, 3, 4; term 1 (node 2) -> term 3 (node 4) -> dest 9.
        let parents = [None, Some(3), None, None];
        let g = tree(&parents, vec![1, 2, 3, 4], 9);
        let tasks = task_counts([&g]);
        assert_eq!(tasks[&4], (1, 1));
        assert_eq!(tasks[&9], (0, 3));
        let mut residual: HashMap<NodeId, (f64, f64)> = (1..=9).map(|n| (n, (100.0, 100.0))).collect();
        residual.insert(9, (100.0, 300.0)); // three downloads at 100 each: not the bottleneck
        residual.insert(4, (100.0, 20.0));
        let (e, download) = delayed(&g, &residual, &tasks).unwrap();
        assert!(download && e.to_relay && e.from == 2 && e.to == 4, "{e:?}");
        let choice = Choice { helpers: vec![1, 2, 3, 4], destination: 9, tree: Some(parents.to_vec()) };
        let tuned = retune(&choice, &g, e.vertex).unwrap();
        assert_eq!(tuned.tree, Some(vec![None, None, None, None]));
        // A constrained uplink is not re-tuned: the delayed task is an upload.
        residual.insert(4, (100.0, 100.0));
        residual.insert(3, (10.0, 100.0));
        let (e, download) = delayed(&g, &residual, &tasks).unwrap();
        assert!(!download && e.from == 3 && !e.to_relay, "{e:?}");
        assert!(retune(&choice, &g, e.vertex).is_none(), "a term already sent to the destination has nothing to re-tune");
        // Reports that single out nothing blame nothing.
        let even: HashMap<NodeId, (f64, f64)> = (1..=9).map(|n| (n, (100.0, 300.0))).collect();
        assert_eq!(delayed(&g, &even, &tasks), None);
    }

    /// Expectations: a link's tasks share it, so a graph expects its busiest link's time.
    #[test]
    fn a_repair_expects_its_busiest_link() {
        let star = tree(&[None; 4], vec![1, 2, 3, 4], 9);
        let other = tree(&[None; 4], vec![1, 5, 6, 7], 8);
        let mut cluster = Cluster::homogeneous((1..=9).collect());
        cluster.bandwidth = (1..=9).map(|n| (n, (10.0, 10.0))).collect();
        cluster.bandwidth.insert(9, (10.0, 20.0));
        let graphs: HashMap<Key, RepairGraph> = [((1, 0), star), ((2, 0), other)].into_iter().collect();
        let e = expectations(&graphs, &cluster, 100.0);
        // Star: node 9 downloads 4 chunks at 20 (20 s), node 1 uploads 2 at 10 (20 s).
        assert_eq!(e[&(1, 0)], 20.0);
        // Other: node 8 downloads 4 at 10: 40 s.
        assert_eq!(e[&(2, 0)], 40.0);
    }
}
