//! Timeslot gates (RepairBoost's transmission schedule across repairs): a scheduled
//! transfer of slot t from node a to node b may start only when a has no send of an earlier
//! slot outstanding and b no receive of one. Blocked transfers wait at the gate that holds
//! them, indexed by slot, so a gate that opens wakes exactly the transfers it now lets
//! through (not every waiter at the node, which at 100,000 repairs is quadratic).

use kintsugi_plan::NodeId;
use std::collections::{BTreeMap, HashMap};

/// A transfer blocked at a gate: (job, vertex, wait generation).
type Waiter = (u32, u32, u64);

/// One direction of every node's gate.
#[derive(Default)]
struct Side {
    /// Per node: slot -> scheduled transfers of that slot not finished yet.
    pending: Vec<BTreeMap<u32, u32>>,
    /// Per node: slot -> transfers (job, vertex, wait generation) blocked here.
    waiting: Vec<BTreeMap<u32, Vec<Waiter>>>,
}

impl Side {
    fn new(nodes: usize) -> Self {
        Side { pending: vec![BTreeMap::new(); nodes], waiting: vec![BTreeMap::new(); nodes] }
    }

    fn blocks(&self, n: NodeId, ts: u32) -> bool {
        self.pending[n as usize].first_key_value().is_some_and(|(&k, _)| k < ts)
    }

    /// Counts a finished transfer and takes the waiters it lets through.
    fn pass(&mut self, n: NodeId, ts: u32, woken: &mut Vec<Waiter>) {
        let m = &mut self.pending[n as usize];
        if let Some(c) = m.get_mut(&ts) {
            *c -= 1;
            if *c == 0 {
                m.remove(&ts);
            }
        }
        // Through: every waiter whose slot is at most the earliest still pending.
        let first = m.first_key_value().map_or(u32::MAX, |(&k, _)| k);
        let w = &mut self.waiting[n as usize];
        let rest = if first == u32::MAX { BTreeMap::new() } else { w.split_off(&(first + 1)) };
        for (_, list) in std::mem::replace(w, rest) {
            woken.extend(list);
        }
    }
}

/// The gates of every node, both directions.
pub(super) struct Gates {
    up: Side,
    down: Side,
    /// The live wait generation of each blocked transfer; older entries are stale.
    waits: HashMap<(u32, u32), u64>,
    generation: u64,
}

impl Gates {
    pub fn new(nodes: usize) -> Self {
        Gates { up: Side::new(nodes), down: Side::new(nodes), waits: HashMap::new(), generation: 0 }
    }

    /// Registers a scheduled transfer of slot `ts` from `from` to `to`.
    pub fn schedule(&mut self, from: NodeId, to: NodeId, ts: u32) {
        *self.up.pending[from as usize].entry(ts).or_default() += 1;
        *self.down.pending[to as usize].entry(ts).or_default() += 1;
    }

    /// Registers every transfer of a job that its timeslots schedule (between two nodes).
    pub fn schedule_job(&mut self, j: &super::Job) {
        let g = &j.graph;
        for (v, slot) in j.timeslots.iter().enumerate() {
            let (Some(slot), Some(vx)) = (slot, g.vertices.get(v)) else { continue };
            let Some(out) = vx.output else { continue };
            let to = g.vertex(out).node;
            if to != vx.node {
                self.schedule(vx.node, to, *slot);
            }
        }
    }

    /// Whether the transfer may start now; if not, it waits where it is blocked.
    pub fn admit(&mut self, job: u32, vertex: u32, from: NodeId, to: NodeId, ts: u32) -> bool {
        let (up, down) = (self.up.blocks(from, ts), self.down.blocks(to, ts));
        if !up && !down {
            return true;
        }
        if !self.waits.contains_key(&(job, vertex)) {
            self.generation += 1;
            self.waits.insert((job, vertex), self.generation);
            let entry = (job, vertex, self.generation);
            if up {
                self.up.waiting[from as usize].entry(ts).or_default().push(entry);
            }
            if down {
                self.down.waiting[to as usize].entry(ts).or_default().push(entry);
            }
        }
        false
    }

    /// A transfer of slot `ts` has finished: the transfers it lets through, to be retried
    /// (each may still wait at its other end, and registers again).
    pub fn pass(&mut self, from: NodeId, to: NodeId, ts: u32) -> Vec<(u32, u32)> {
        let mut woken = Vec::new();
        self.up.pass(from, ts, &mut woken);
        self.down.pass(to, ts, &mut woken);
        woken
            .into_iter()
            .filter(|&(j, v, generation)| {
                // Woken already through its other end: a stale entry.
                let live = self.waits.get(&(j, v)) == Some(&generation);
                if live {
                    self.waits.remove(&(j, v));
                }
                live
            })
            .map(|(j, v, _)| (j, v))
            .collect()
    }
}
