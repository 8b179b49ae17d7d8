//! The engine's flows: adding them, bringing them up to now, sharing the links out again
//! after a change, and ending a cancelled job's flows where they are.

use super::*;
use crate::network::{res_users_down, res_users_up, Direction};

impl Engine<'_> {
    /// With elastic foreground, one users' flow on every link that has foreground series: it
    /// never ends, and its demand is their rate (`capacity_changes` sets it).
    pub(super) fn add_users_flows(&mut self) {
        if !self.net.elastic_foreground {
            return;
        }
        let mut links: Vec<(NodeId, bool)> = self
            .net
            .foreground
            .iter()
            .filter_map(|f| match f.direction {
                Direction::Up => Some((f.node, true)),
                Direction::Down => Some((f.node, false)),
                _ => None,
            })
            .collect();
        links.sort_unstable();
        links.dedup();
        for (n, up) in links {
            let res = if up { [res_up(n), res_users_up(n)] } else { [res_down(n), res_users_down(n)] };
            self.add_flow(FlowKind::Users, f64::INFINITY, FlowResources::new(&res), n, n);
            // Not a repair's transfer: the count stays the repairs'.
            self.transfers -= 1;
        }
    }

    pub(super) fn add_flow(&mut self, kind: FlowKind, bytes: f64, res: FlowResources, src: NodeId, dst: NodeId) {
        let id = self.sharing.add(res) as usize;
        if self.flows.len() <= id {
            self.flows.resize_with(id + 1, || None);
            self.versions.resize(id + 1, 0);
        }
        self.versions[id] = self.versions[id].wrapping_add(1);
        self.flows[id] = Some(Flow { kind, remaining: bytes, t0: self.now, rate: 0.0, src, dst });
        self.transfers += 1;
    }

    /// Brings a flow's remaining bytes up to now at its current rate, counting the bytes moved.
    pub(super) fn settle(&mut self, id: usize) {
        let now = self.now;
        let f = self.flows[id].as_mut().expect("live flow");
        let moved = if f.rate.is_infinite() { f.remaining } else { (f.rate * (now - f.t0)).min(f.remaining) };
        f.remaining -= moved;
        f.t0 = now;
        // A fluid flow's bytes are counted once, when it ends (its links' weights never
        // change), rather than over twenty links at every rate change.
        if let FlowKind::Net { part, .. } = f.kind {
            let (src, dst) = (f.src, f.dst);
            self.count_net_bytes(part, src, dst, moved);
        }
    }

    /// Counts bytes a network flow moved on the links it crosses.
    pub(super) fn count_net_bytes(&mut self, part: Part, src: NodeId, dst: NodeId, bytes: f64) {
        if part.up() {
            self.up_bytes[src as usize] += bytes;
        }
        if part.down() {
            self.down_bytes[dst as usize] += bytes;
        }
    }

    /// Adds `delta` (bytes/s of the flow) to the link rates of the nodes flow f crosses,
    /// noting them for the utilisation log.
    pub(super) fn shift_node_rates(&mut self, kind: FlowKind, src: NodeId, dst: NodeId, delta: f64, touched: &mut Vec<NodeId>) {
        // Node rates feed only the utilisation log.
        if self.rates_log.is_none() {
            return;
        }
        match kind {
            FlowKind::Net { part, .. } => {
                if part.up() {
                    self.node_up[src as usize] += delta;
                    touched.push(src);
                }
                if part.down() {
                    self.node_down[dst as usize] += delta;
                    touched.push(dst);
                }
            }
            FlowKind::Fluid { job } => {
                let fl = self.st[job as usize].fluid.as_ref().expect("fluid jobs carry their flow");
                for &(node, up, w) in &fl.links {
                    let rates = if up { &mut self.node_up } else { &mut self.node_down };
                    rates[node as usize] += delta * w;
                    touched.push(node);
                }
            }
            _ => {}
        }
    }

    /// Ends every flow of job j where it is (a cancelled job): the bytes it moved count,
    /// its links are shared out again at the next reshare.
    pub(super) fn remove_flows_of(&mut self, j: u32) {
        let mut touched = std::mem::take(&mut self.removed_nodes);
        for id in 0..self.flows.len() {
            let Some(kind) = self.flows[id].as_ref().map(|f| f.kind) else { continue };
            let job = match kind {
                FlowKind::Net { job, .. } | FlowKind::Read { job, .. } | FlowKind::Write { job } | FlowKind::Fluid { job } => job,
                FlowKind::Users => continue,
            };
            if job != j {
                continue;
            }
            self.settle(id);
            let f = self.flows[id].take().expect("live flow");
            if let FlowKind::Fluid { job } = f.kind {
                // A fluid flow's bytes are counted when it ends: the share it moved.
                let moved = (self.fluid_volume(job) - f.remaining).max(0.0);
                self.count_fluid_bytes(job, moved);
            }
            self.shift_node_rates(f.kind, f.src, f.dst, -f.rate, &mut touched);
            self.sharing.remove(id as u32);
            self.versions[id] = self.versions[id].wrapping_add(1);
        }
        self.removed_nodes = touched;
    }

    /// Applies the fair-share update: settles and re-times every flow whose rate changed.
    pub(super) fn reshare(&mut self) {
        let mut changed = std::mem::take(&mut self.changed);
        changed.clear();
        self.sharing.update(&mut changed);
        let mut touched_nodes = std::mem::take(&mut self.removed_nodes);
        // When most flows change rate (a full recompute among dense fluid repairs), rebuild
        // the completion heap in one pass rather than push an entry per flow and pop as many
        // stale ones later.
        let rebuild = changed.len() > 64 && changed.len() * 2 > self.completions.len();
        for &id in &changed {
            let id = id as usize;
            self.settle(id);
            let new_rate = self.sharing.rate(id as u32);
            let now = self.now;
            let f = self.flows[id].as_ref().expect("changed flows are live");
            let (kind, src, dst, old_rate) = (f.kind, f.src, f.dst, f.rate);
            self.shift_node_rates(kind, src, dst, new_rate - old_rate, &mut touched_nodes);
            let f = self.flows[id].as_mut().expect("changed flows are live");
            f.rate = new_rate;
            self.versions[id] = self.versions[id].wrapping_add(1);
            if new_rate > 0.0 && !rebuild {
                let t = if new_rate.is_infinite() { now } else { now + f.remaining / new_rate };
                self.completions.push(Reverse((T(t), id as u32, self.versions[id])));
            }
        }
        self.changed = changed;
        if rebuild {
            let mut entries = std::mem::take(&mut self.completions).into_vec();
            entries.clear();
            for (id, f) in self.flows.iter().enumerate() {
                let Some(f) = f else { continue };
                if f.rate > 0.0 {
                    // Flows that did not change were settled earlier: their remaining bytes
                    // count from their own t0.
                    let t = if f.rate.is_infinite() { f.t0 } else { f.t0 + f.remaining / f.rate };
                    entries.push(Reverse((T(t), id as u32, self.versions[id])));
                }
            }
            self.completions = BinaryHeap::from(entries);
        }
        // Rate changes leave stale completion entries behind; drop them when they dominate.
        if self.completions.len() > 64 + 4 * self.flows.len() {
            let flows = &self.flows;
            let versions = &self.versions;
            self.completions.retain(|Reverse((_, id, v))| flows[*id as usize].is_some() && versions[*id as usize] == *v);
        }
        if let Some(log) = self.rates_log.as_mut() {
            touched_nodes.sort_unstable();
            touched_nodes.dedup();
            for n in touched_nodes {
                let (u, d) = (self.node_up[n as usize].max(0.0), self.node_down[n as usize].max(0.0));
                let l = &mut log[n as usize];
                match l.last_mut() {
                    Some(last) if last.0 == self.now => *last = (self.now, u, d),
                    Some(&mut (_, lu, ld)) if lu == u && ld == d => {}
                    _ => l.push((self.now, u, d)),
                }
            }
        }
    }

    /// The next valid completion time, dropping stale heap entries.
    pub(super) fn next_completion(&mut self) -> f64 {
        while let Some(&Reverse((t, id, version))) = self.completions.peek() {
            match &self.flows[id as usize] {
                Some(_) if self.versions[id as usize] == version => return t.0,
                _ => {
                    self.completions.pop();
                }
            }
        }
        f64::INFINITY
    }
}
