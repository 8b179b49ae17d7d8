//! Which repairs run at once ([`Admission`]): all at their release, or at most so many per
//! destination node, in job order. Jobs gated by timeslots are ordered by their slots.

use super::{Admission, Engine, Job, Timer};
use kintsugi_plan::NodeId;

/// Whether a job waits for timeslots: its slots order it, not a per-destination limit (as
/// on the cluster); held back, it would hold slots the admitted jobs wait for.
fn gated(j: &Job) -> bool {
    j.timeslots.iter().any(Option::is_some)
}

impl Engine<'_> {
    /// Releases every repair job at its release time, or queues it at its destination.
    pub(super) fn release_repairs(&mut self) {
        let limited = matches!(self.admission, Admission::PerDestination(_));
        let jobs = self.jobs;
        for (i, j) in jobs.iter().enumerate().filter(|(_, j)| j.request.is_none()) {
            if limited && !gated(j) {
                let dest = j.graph.vertex(j.graph.sink).node;
                self.queues.entry(dest).or_default().push_back(i as u32);
            } else {
                self.timer(j.release, Timer::Release(i as u32));
            }
        }
        let dests: Vec<NodeId> = self.queues.keys().copied().collect();
        for d in dests {
            self.admit(d);
        }
    }

    /// Starts queued jobs at `dest` while it runs fewer than the limit.
    fn admit(&mut self, dest: NodeId) {
        let Admission::PerDestination(max) = self.admission else { return };
        while self.active.get(&dest).copied().unwrap_or(0) < max {
            let Some(j) = self.queues.get_mut(&dest).and_then(|q| q.pop_front()) else { break };
            *self.active.entry(dest).or_default() += 1;
            let release = self.jobs[j as usize].release;
            if release > self.now {
                self.timer(release, Timer::Release(j));
            } else {
                self.start_job(j);
            }
        }
    }

    /// Repair job `j` has finished: its destination may start the next queued one.
    pub(super) fn leave_destination(&mut self, j: u32) {
        if !matches!(self.admission, Admission::PerDestination(_)) || gated(&self.jobs[j as usize]) {
            return;
        }
        let g = &self.jobs[j as usize].graph;
        let dest = g.vertex(g.sink).node;
        if let Some(a) = self.active.get_mut(&dest) {
            *a -= 1;
        }
        self.admit(dest);
    }
}
