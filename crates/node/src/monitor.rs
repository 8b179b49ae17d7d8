//! Bandwidth monitoring: what a node's link carried over the last heartbeat period, split
//! into foreground and repair traffic (ChameleonEC §3: the coordinator plans repair from
//! each node's residual bandwidth). Rates come from the traffic counters' deltas.

use crate::exec::Counters;
use kintsugi_proto::LinkReport;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Counter readings at the start of the current period.
pub struct Monitor {
    capacity: (f64, f64),
    last: [u64; 4],
    at: Instant,
}

fn read(c: &Counters) -> [u64; 4] {
    [
        c.fg_sent.load(Ordering::Relaxed),
        c.fg_received.load(Ordering::Relaxed),
        c.sent.load(Ordering::Relaxed),
        c.received.load(Ordering::Relaxed),
    ]
}

impl Monitor {
    /// `capacity`: the link's (up, down) bytes per second, 0 when unknown.
    pub fn new(capacity: (f64, f64)) -> Self {
        Monitor { capacity, last: [0; 4], at: Instant::now() }
    }

    /// The rates since the previous report (or since the start), and a new period.
    pub fn report(&mut self, c: &Counters) -> LinkReport {
        let now = read(c);
        let secs = self.at.elapsed().as_secs_f64().max(1e-3);
        let rate = |i: usize| now[i].saturating_sub(self.last[i]) as f64 / secs;
        let r = LinkReport {
            period_ms: (secs * 1e3) as u64,
            fg_up: rate(0),
            fg_down: rate(1),
            repair_up: rate(2),
            repair_down: rate(3),
            capacity_up: self.capacity.0,
            capacity_down: self.capacity.1,
        };
        self.last = now;
        self.at = Instant::now();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_the_deltas_over_the_period() {
        let c = Counters::default();
        let mut m = Monitor::new((1e6, 2e6));
        c.fg_sent.store(500, Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(100));
        c.fg_received.store(1000, Ordering::Relaxed);
        c.sent.store(300, Ordering::Relaxed);
        let r = m.report(&c);
        let secs = r.period_ms as f64 / 1e3;
        assert!((0.1..5.0).contains(&secs), "{secs}");
        assert!((r.fg_up * secs - 500.0).abs() < 5.0 && (r.fg_down * secs - 1000.0).abs() < 10.0, "{r:?}");
        assert!((r.repair_up * secs - 300.0).abs() < 3.0 && r.repair_down == 0.0, "{r:?}");
        assert_eq!((r.capacity_up, r.capacity_down), (1e6, 2e6));
        // The next period starts from the last readings.
        let r = m.report(&c);
        assert_eq!((r.fg_up, r.fg_down, r.repair_up), (0.0, 0.0, 0.0));
    }
}
