//! The fluid model of a pipelined repair. In steady state a slice-pipelined graph moves at
//! one rate on every edge (a relay forwards what it receives; the executors' bounded
//! buffers keep the upstream from running ahead), so the whole repair is one flow at one
//! rate per edge (per lane: ECPipe cyclic's lanes all move together): its weight on a
//! node's uplink is the number of its edges leaving that node (beta/alpha for a Clay
//! helper's raw reads), likewise on downlinks, pair caps and disks. Weighted max-min
//! sharing then splits links between repairs edge by edge, as TCP does per connection. The flow
//! moves exactly the graph's bytes; the pipeline's fill adds a latency after it: one
//! slice's crossing of every stage but the slowest, at the links' nominal rates (a chain of
//! k equal hops moving s slices takes s + k - 1 slice times). The fill is a delay, not
//! volume: while a pipeline fills or drains, its idle hops are free for other repairs.

use super::{Engine, FlowKind, JobMode, Timer};
use crate::maxmin::FlowResources;
use crate::network::{res_disk_read, res_disk_write, res_down, res_up};
use kintsugi_plan::NodeId;
use std::collections::HashMap;

/// A running fluid repair.
pub(super) struct FluidFlow {
    /// (node, uplink?, weight): bytes the node's link moves per byte of the flow.
    pub links: Vec<(NodeId, bool, f64)>,
    /// Seconds from the flow's end until the last slice reaches the sink.
    pub fill: f64,
    /// Units of the flow per byte of its longest lane (see `start_fluid`).
    pub scale: f64,
}

impl Engine<'_> {
    /// Starts job j as one flow.
    pub(super) fn start_fluid(&mut self, j: u32) {
        let job = &self.jobs[j as usize];
        let g = &job.graph;
        let s = &self.st[j as usize];
        debug_assert_eq!(s.mode, JobMode::Fluid);
        let lane_total: Vec<f64> = s.windows.iter().map(|w| w.iter().map(|&x| x as f64).sum()).collect();
        // The flow's unit is a byte of its longest lane: every connection (edge) of a slice
        // moves a byte of its window per unit, as TCP shares a link per connection; a
        // shorter lane's edges move proportionally less.
        let volume = lane_total.iter().copied().fold(0.0, f64::max);
        let payload: f64 = lane_total.iter().sum();
        let share = |lane: usize| lane_total[lane] / volume;
        let mut items: Vec<(u32, f64)> = Vec::new();
        let mut links: Vec<(NodeId, bool, f64)> = Vec::new();
        // Per vertex, one slice's time from the first read to its output (the longest path
        // in), and the slowest stage seen on it.
        let caps = &self.base_caps;
        let mut reach = vec![(0.0f64, 0.0f64); g.vertices.len()];
        for v in g.topological_order() {
            let vx = g.vertex(v);
            let mut at = vx.inputs.iter().map(|&i| reach[i.index()]).fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
            if let Some(t) = vx.local {
                if self.read_modeled(vx.node) {
                    let reads = g.equation.terms[t].read_count() as f64;
                    items.push((res_disk_read(vx.node), reads * share(vx.lane)));
                    let tau = reads * s.slice_window / caps[res_disk_read(vx.node) as usize];
                    at = if tau > at.0 { (tau, tau) } else { at };
                }
            }
            reach[v.index()] = at;
            let Some(out) = vx.output else { continue };
            let to = g.vertex(out).node;
            if to == vx.node {
                continue;
            }
            let mut rate = caps[res_up(vx.node) as usize].min(caps[res_down(to) as usize]);
            if let Some(p) = self.pair_res(vx.node, to) {
                rate = rate.min(caps[p as usize]);
            }
            let tau = s.width[v.index()] * s.slice_window / rate;
            reach[v.index()] = (at.0 + tau, at.1.max(tau));
            let w = s.width[v.index()] * share(vx.lane);
            items.extend([(res_up(vx.node), w), (res_down(to), w)]);
            if let Some(p) = self.pair_res(vx.node, to) {
                items.push((p, w));
            }
            items.extend(self.repair_caps(j, vx.node, to).map(|r| (r, w)));
            links.extend([(vx.node, true, w), (to, false, w)]);
        }
        let dest = g.vertex(g.sink).node;
        let (mut total, mut slowest) = reach[g.sink.index()];
        if self.net.nodes[dest as usize].disk_write.is_some() {
            items.push((res_disk_write(dest), s.alpha * payload / volume));
            let tau = s.alpha * s.slice_window / caps[res_disk_write(dest) as usize];
            total += tau;
            slowest = slowest.max(tau);
        }
        // A slot schedule (ECPipe cyclic) sends one unit at a time per node, in step order
        // across its lanes, as the executor does: on a shared link the repair holds one
        // connection's share, not one per lane. Scaling the flow's unit so that its busiest
        // uplink carries weight 1 gives it that share and moves the same bytes.
        let scale = if g.slots.iter().any(Option::is_some) {
            let mut up: HashMap<NodeId, f64> = HashMap::new();
            for &(node, _, w) in links.iter().filter(|l| l.1) {
                *up.entry(node).or_default() += w;
            }
            up.values().copied().fold(1.0, f64::max)
        } else {
            1.0
        };
        for item in &mut items {
            item.1 /= scale;
        }
        for link in &mut links {
            link.2 /= scale;
        }
        self.st[j as usize].fluid = Some(FluidFlow { links, fill: total - slowest, scale });
        self.add_flow(FlowKind::Fluid { job: j }, volume * scale, FlowResources::weighted(items), dest, dest);
    }

    /// Job j's flow has moved its bytes: the last slice still crosses the pipeline's other
    /// stages.
    pub(super) fn fluid_done(&mut self, j: u32) {
        self.count_fluid_bytes(j, self.fluid_volume(j));
        // At the links' nominal rates: a slice crossing a shared link would take longer, but
        // scaling the fill by the flow's slowdown overshoots far more (+10% against the
        // slice model at 64 slices per edge, where nominal rates stay within 3%).
        let delay = self.st[j as usize].fluid.as_ref().map_or(0.0, |f| f.fill);
        if delay > 0.0 {
            self.timer(self.now + delay, Timer::Finish(j));
        } else {
            self.finish_job(j);
        }
    }

    /// Job j's flow volume: a byte of its longest lane is one unit.
    pub(super) fn fluid_volume(&self, j: u32) -> f64 {
        let s = &self.st[j as usize];
        let scale = s.fluid.as_ref().map_or(1.0, |f| f.scale);
        scale * s.windows.iter().map(|w| w.iter().map(|&x| x as f64).sum::<f64>()).fold(0.0, f64::max)
    }

    /// Counts `moved` units of job j's flow on every link it crosses, at its weight there.
    pub(super) fn count_fluid_bytes(&mut self, j: u32, moved: f64) {
        if let Some(fl) = &self.st[j as usize].fluid {
            for &(node, up, w) in &fl.links {
                let bytes = if up { &mut self.up_bytes } else { &mut self.down_bytes };
                bytes[node as usize] += moved * w;
            }
        }
    }
}
