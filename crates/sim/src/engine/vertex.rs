//! The slice-level execution of a graph: when a vertex may send its next unit (inputs
//! arrived, disk read done, room downstream, its slot and its gate), handing units over on
//! one node, disk reads, and the sink's writes.

use super::*;

impl Engine<'_> {
    /// Whether non-sink vertex v can send its lane-local unit u.
    pub(super) fn ready(&self, j: u32, v: u32, u: u32) -> bool {
        let g = &self.jobs[j as usize].graph;
        let s = &self.st[j as usize];
        let vx = &g.vertices[v as usize];
        if s.mode == JobMode::Overlap {
            return self.overlap_ready(j, v);
        }
        if vx.local.is_some() && self.read_modeled(vx.node) && s.read_done[v as usize] <= u {
            return false;
        }
        if self.window_full(j, v, u) {
            return false;
        }
        vx.inputs.iter().all(|i| s.delivered[i.index()] > u)
    }

    /// Back-pressure: a vertex holds at most RELAY_WINDOW units per input that it has not
    /// used yet (a sink uses unit u once every input has sent it). Not under a timeslot
    /// schedule, whose relays hold whole chunks between slots.
    fn window_full(&self, j: u32, v: u32, u: u32) -> bool {
        let g = &self.jobs[j as usize].graph;
        let s = &self.st[j as usize];
        let vx = &g.vertices[v as usize];
        let (Some(out), false) = (vx.output, s.gated) else { return false };
        let used = if out == g.sink { s.sink_next[vx.lane] } else { s.delivered[out.index()] };
        u >= used + RELAY_WINDOW && g.vertex(out).node != vx.node
    }

    /// How long a vertex held back by its output's window waits once the window opens:
    /// uniform in [0, its last send's duration), drawn from a hash of (job, vertex, unit).
    /// Without it, connections held back by the same slow hop all resume at the same
    /// instant, stay in phase for the whole repair and take every shared link they cross
    /// together; a real network's jitter breaks such phase locks (Floyd & Jacobson, "On
    /// traffic phase effects in packet-switched gateways", 1992, add a random processing
    /// time per packet for this reason). The held vertex is a full window ahead of its
    /// output, so the wait does not starve that output while it is the slower of the two.
    /// Not under a slot schedule (ECPipe cyclic), where a held vertex's slot holds up the
    /// node's other sends.
    fn resume_delay(&self, j: u32, v: u32, u: u32) -> f64 {
        let mut x = (j as u64) << 40 ^ (v as u64) << 20 ^ u as u64;
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        (x >> 11) as f64 / (1u64 << 53) as f64 * self.st[j as usize].last_send[v as usize]
    }

    pub(super) fn try_vertex(&mut self, j: u32, v: u32) {
        let jobs = self.jobs;
        let g = &jobs[j as usize].graph;
        if VertexId(v) == g.sink {
            return self.try_sink(j);
        }
        let vx = &g.vertices[v as usize];
        let lane = vx.lane;
        let n_units = self.st[j as usize].windows[lane].len() as u32;
        // Disk reads run ahead of sending, one I/O per unit.
        if vx.local.is_some() {
            let s = &self.st[j as usize];
            if self.read_modeled(vx.node) && !s.reading[v as usize] && s.read_done[v as usize] < n_units {
                self.st[j as usize].reading[v as usize] = true;
                let seek = self.net.nodes[vx.node as usize].seek;
                if seek > 0.0 {
                    self.timer(self.now + seek, Timer::StartRead { job: j, vertex: v });
                } else {
                    self.start_read(j, v);
                }
            }
        }
        let out = vx.output.expect("non-sink vertices have an output");
        loop {
            let s = &self.st[j as usize];
            let u = s.delivered[v as usize];
            let overlap = s.mode == JobMode::Overlap;
            if s.sending[v as usize] || u >= n_units || (overlap && s.started_v[v as usize]) || self.now < s.not_before[v as usize] {
                return;
            }
            if !self.ready(j, v, u) {
                if !overlap && self.slot_of(j, v, u).is_none() && self.window_full(j, v, u) {
                    self.st[j as usize].held[v as usize] = true;
                }
                return;
            }
            // A slot schedule lets a node send only its earliest outstanding slot.
            let slot = self.slot_of(j, v, u);
            if let Some(slot) = slot {
                if s.pending_slots.get(&vx.node).and_then(|p| p.first()) != Some(&slot) {
                    return;
                }
            }
            // Held back by its output's window: resume a little later (`resume_delay`).
            if std::mem::take(&mut self.st[j as usize].held[v as usize]) {
                let d = self.resume_delay(j, v, u);
                if d > 0.0 {
                    self.st[j as usize].not_before[v as usize] = self.now + d;
                    self.timer(self.now + d, Timer::Resume { job: j, vertex: v });
                    return;
                }
            }
            let to = g.vertex(out).node;
            if to == vx.node && overlap {
                self.overlap_started(j, v, true);
                return;
            }
            if to == vx.node {
                // Same node: handed over at once.
                self.st[j as usize].delivered[v as usize] += 1;
                self.slot_done(j, vx.node, slot);
                self.try_vertex(j, out.0);
                continue;
            }
            if let Some(&Some(ts)) = jobs[j as usize].timeslots.get(v as usize) {
                if !self.gates.admit(j, v, vx.node, to, ts) {
                    return;
                }
            }
            let bytes = self.st[j as usize].width[v as usize] * self.st[j as usize].windows[lane][u as usize] as f64;
            self.st[j as usize].sending[v as usize] = true;
            self.st[j as usize].sent_at[v as usize] = self.now;
            self.start_send(j, v, vx.node, to, bytes, slot.is_some());
            if overlap {
                self.overlap_started(j, v, false);
            }
            return;
        }
    }

    /// Starts vertex v's send of `bytes` from `from` to `to`: one flow at one rate over the
    /// sender's uplink and the receiver's downlink, as a connection moves. Except for a send
    /// in a slot schedule (ECPipe cyclic), where the node's next slot goes to another
    /// receiver: the executor frees the slot once the sender's uplink has taken the unit
    /// (`write_frame` returns when the socket has it), and the socket buffers it while a
    /// busy receiver's downlink takes it in. So the uplink and the downlink are two flows
    /// there, each at its own share. As one flow, a receiver's busy downlink held up every
    /// other lane of the sending node, which the executor's do not (REPRODUCTION.md, issue
    /// #13: on loopback the one-flow model overestimated cyclic by up to 4% exactly where
    /// it parted from the fluid model).
    fn start_send(&mut self, j: u32, v: u32, from: NodeId, to: NodeId, bytes: f64, slotted: bool) {
        let (cap_up, cap_down) = (self.repair_cap_up(j, from), self.repair_cap_down(j, to));
        let mut up: smallvec::SmallVec<[u32; 5]> = smallvec::smallvec![res_up(from)];
        up.extend(self.pair_res(from, to));
        up.extend(cap_up);
        let mut down: smallvec::SmallVec<[u32; 5]> = smallvec::smallvec![res_down(to)];
        down.extend(cap_down);
        if slotted {
            self.st[j as usize].parts_left[v as usize] = 2;
            self.add_flow(FlowKind::Net { job: j, vertex: v, part: Part::Up }, bytes, FlowResources::new(&up), from, to);
            self.add_flow(FlowKind::Net { job: j, vertex: v, part: Part::Down }, bytes, FlowResources::new(&down), from, to);
        } else {
            up.extend(down);
            self.add_flow(FlowKind::Net { job: j, vertex: v, part: Part::Both }, bytes, FlowResources::new(&up), from, to);
        }
    }

    /// One of the two flows of a slotted send has ended: the uplink's frees the sender's
    /// slot. Whether the send is complete (both have ended).
    pub(super) fn send_part_done(&mut self, j: u32, v: u32, part: Part) -> bool {
        let left = &mut self.st[j as usize].parts_left[v as usize];
        *left -= 1;
        let complete = *left == 0;
        if part == Part::Up {
            let node = self.jobs[j as usize].graph.vertices[v as usize].node;
            let u = self.st[j as usize].delivered[v as usize];
            let slot = self.slot_of(j, v, u);
            self.slot_done(j, node, slot);
        }
        complete
    }

    /// The pair-cap resource of traffic from `a` to `b`, if it is capped.
    pub(super) fn pair_res(&self, a: NodeId, b: NodeId) -> Option<u32> {
        if self.pair_ids.is_empty() {
            return None;
        }
        self.pair_ids.get(&(a, b)).copied()
    }

    /// The slot of vertex v's unit u under its graph's slot rule (slice model only).
    pub(super) fn slot_of(&self, j: u32, v: u32, u: u32) -> Option<u64> {
        if !self.st[j as usize].slot_rules {
            return None;
        }
        self.jobs[j as usize].graph.slots.get(v as usize).copied().flatten().map(|r| r.slot(u as u64))
    }

    /// Marks a scheduled send as done and wakes the node's other vertices, whose turn it may be.
    pub(super) fn slot_done(&mut self, j: u32, node: NodeId, slot: Option<u64>) {
        let Some(slot) = slot else { return };
        let s = &mut self.st[j as usize];
        if let Some(p) = s.pending_slots.get_mut(&node) {
            p.remove(&slot);
        }
        let others = s.node_vertices.get(&node).cloned().unwrap_or_default();
        for v in others {
            self.try_vertex(j, v);
        }
    }

    /// A scheduled transfer of slot `ts` from `from` to `to` has finished: later slots at
    /// those nodes may go once nothing earlier is left.
    pub(super) fn gate_passed(&mut self, from: NodeId, to: NodeId, ts: u32) {
        for (j, v) in self.gates.pass(from, to, ts) {
            self.try_vertex(j, v);
        }
    }

    pub(super) fn start_read(&mut self, j: u32, v: u32) {
        let g = &self.jobs[j as usize].graph;
        let vx = &g.vertices[v as usize];
        let s = &self.st[j as usize];
        let w = s.windows[vx.lane][s.read_done[v as usize] as usize] as f64;
        let reads = g.equation.terms[vx.local.expect("reading vertices have a term")].read_count() as f64;
        self.add_flow(FlowKind::Read { job: j, vertex: v }, reads * w, FlowResources::new(&[res_disk_read(vx.node)]), vx.node, vx.node);
    }

    pub(super) fn try_sink(&mut self, j: u32) {
        let g = &self.jobs[j as usize].graph;
        let dest = g.vertex(g.sink).node;
        let writes = self.net.nodes[dest as usize].disk_write.is_some();
        let s = &mut self.st[j as usize];
        // Overlapped: the sink writes as its inputs stream in, and is done once they are.
        let overlap = s.mode == JobMode::Overlap;
        let mut advanced = false;
        for lane in 0..s.windows.len() {
            while (s.sink_next[lane] as usize) < s.windows[lane].len() {
                let u = s.sink_next[lane];
                if !s.sink_inputs[lane].iter().all(|i| if overlap { s.started_v[i.index()] } else { s.delivered[i.index()] > u }) {
                    break;
                }
                s.sink_next[lane] += 1;
                advanced = true;
                let bytes = s.alpha * s.windows[lane][u as usize] as f64;
                if writes {
                    s.write_queue.push_back(bytes);
                } else {
                    s.units_done += 1;
                }
            }
        }
        if !s.writing {
            if let Some(bytes) = s.write_queue.pop_front() {
                s.writing = true;
                self.add_flow(FlowKind::Write { job: j }, bytes, FlowResources::new(&[res_disk_write(dest)]), dest, dest);
            }
        }
        let s = &self.st[j as usize];
        let arrived = || !overlap || s.sink_inputs.iter().flatten().all(|i| s.delivered[i.index()] > 0);
        if s.units_done == s.units_total && !s.writing && s.write_queue.is_empty() && arrived() {
            return self.finish_job(j);
        }
        // Room in the sink's window: its inputs may send again.
        if advanced && s.mode == JobMode::Slice && !s.gated {
            let g = &self.jobs[j as usize].graph;
            for &i in &g.vertex(g.sink).inputs {
                self.try_vertex(j, i.0);
            }
        }
    }

    /// Vertex v's next unit has reached its output vertex.
    pub(super) fn deliver(&mut self, job: u32, vertex: u32) {
        self.st[job as usize].delivered[vertex as usize] += 1;
        let g = &self.jobs[job as usize].graph;
        let vx = &g.vertices[vertex as usize];
        let out = vx.output.expect("delivering vertices have an output");
        // A slotted send freed its node's slot already, when its uplink part ended.
        let lane_units = self.st[job as usize].windows[vx.lane].len() as u32;
        if self.st[job as usize].delivered[vertex as usize] == lane_units {
            if let Some(&Some(ts)) = self.jobs[job as usize].timeslots.get(vertex as usize) {
                let to = g.vertex(out).node;
                if to != vx.node {
                    self.gate_passed(vx.node, to, ts);
                }
            }
        }
        self.try_vertex(job, vertex);
        self.try_vertex(job, out.0);
        // Room in this vertex's window: its inputs may send again.
        for &i in &g.vertices[vertex as usize].inputs {
            self.try_vertex(job, i.0);
        }
        if self.st[job as usize].mode == JobMode::Overlap {
            self.st[job as usize].delivered_at[vertex as usize] = self.now;
            if out != g.sink {
                self.try_deliver(job, out.0);
            }
        }
    }
}
