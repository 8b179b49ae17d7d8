//! The fluid model of a timeslot-gated pipelined repair (RepairBoost over ECPipe or CR).
//! Its edges cannot move as one flow: each waits for its own slot at both ends, so a
//! chain's first hop may run while its second waits. Each edge is one transfer of its
//! whole lane, which starts once its gate opens and every input has started (a relay
//! forwards as data comes in), and is delivered no earlier than one slice's hop after the
//! last of its inputs (it cannot finish before the data it forwards has arrived).

use super::{Engine, JobMode, Timer};

impl Engine<'_> {
    /// Whether vertex v of an overlapped job may start sending: every input has started,
    /// and so has its own disk read.
    pub(super) fn overlap_ready(&self, j: u32, v: u32) -> bool {
        let s = &self.st[j as usize];
        let vx = &self.jobs[j as usize].graph.vertices[v as usize];
        if vx.local.is_some() && self.read_modeled(vx.node) && !s.reading[v as usize] && s.read_done[v as usize] == 0 {
            return false;
        }
        vx.inputs.iter().all(|i| s.started_v[i.index()])
    }

    /// Vertex v has begun sending (or, on the same node as its output, handing over): its
    /// output may start too. A handover has no transfer of its own to wait for.
    pub(super) fn overlap_started(&mut self, j: u32, v: u32, handover: bool) {
        let s = &mut self.st[j as usize];
        debug_assert_eq!(s.mode, JobMode::Overlap);
        s.started_v[v as usize] = true;
        if handover {
            s.flow_done[v as usize] = true;
            self.try_deliver(j, v);
        }
        let out = self.jobs[j as usize].graph.vertices[v as usize].output.expect("sending vertices have an output");
        self.try_vertex(j, out.0);
    }

    /// Delivers vertex v's lane once its own transfer, its inputs and its read are done, one
    /// slice's hop after its last input arrived.
    pub(super) fn try_deliver(&mut self, j: u32, v: u32) {
        let g = &self.jobs[j as usize].graph;
        let s = &self.st[j as usize];
        let vx = &g.vertices[v as usize];
        if !s.flow_done[v as usize] || s.delivered[v as usize] > 0 || !vx.inputs.iter().all(|i| s.delivered[i.index()] > 0) {
            return;
        }
        if vx.local.is_some() && self.read_modeled(vx.node) && s.read_done[v as usize] == 0 {
            return;
        }
        let Some(last_in) = vx.inputs.iter().map(|i| s.delivered_at[i.index()]).reduce(f64::max) else {
            return self.deliver(j, v);
        };
        let to = g.vertex(vx.output.expect("delivering vertices have an output")).node;
        let hop = if to == vx.node {
            0.0
        } else {
            // The last slice crosses the hop alone, at the slower end's link rate.
            let mut rate = self.base_caps[super::res_up(vx.node) as usize].min(self.base_caps[super::res_down(to) as usize]);
            if let Some(p) = self.pair_res(vx.node, to) {
                rate = rate.min(self.base_caps[p as usize]);
            }
            s.width[v as usize] * s.slice_window / rate
        };
        let at = last_in + hop;
        if at > self.now {
            // Delivered by the timer; no second one.
            self.st[j as usize].flow_done[v as usize] = false;
            self.timer(at, Timer::Deliver { job: j, vertex: v });
        } else {
            self.deliver(j, v);
        }
    }
}
