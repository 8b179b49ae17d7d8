//! Bandwidth monitoring: what a node's link carried over the last heartbeat period, split
//! into foreground and repair traffic (ChameleonEC §3: the coordinator plans repair from
//! each node's residual bandwidth). Rates come from the traffic counters' deltas. With an
//! emulated disk, also what users' I/O took of it: its busy time less what repair reads and
//! writes cost at its sequential rate (ChameleonEC-IO plans with the rest). Where nobody
//! configured the link's capacity and the kernel reports none, the most it carried in a
//! second stands for it (`peak`).

use crate::disk_emulation::DiskEmulation;
use crate::exec::Counters;
use kintsugi_proto::LinkReport;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The window a measured capacity averages over, whatever the heartbeat period: shorter ones
/// see a burst into socket buffers, not the link's rate.
const MEASURE_WINDOW: f64 = 1.0;
/// The least a measured capacity claims (8 Mbit/s): below it the link has not carried enough
/// to say anything, and a tiny capacity would tell planners the node has no bandwidth.
pub const MEASURED_MIN: f64 = 1e6;

/// Counter readings at the start of the current period.
pub struct Monitor {
    capacity: (f64, f64),
    /// Where the capacity came from ("configured", an interface's name, "measured", or empty).
    capacity_from: String,
    /// Where nothing configured or reported a capacity: the most the link carried in a
    /// measuring window, users' and repair traffic together, either way (a link's speed is the same
    /// both ways, as full-duplex Ethernet's is). A lower bound, which reaches the link's
    /// speed once anything has filled it: a repair, or users.
    peak: Option<f64>,
    /// Counter readings where the current measuring window began.
    window: ([u64; 4], Instant),
    last: [u64; 4],
    at: Instant,
    /// The disk's busy seconds, and repair bytes read plus written, at the period's start.
    last_disk: (f64, u64),
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
    /// With (0, 0), the capacity is measured (see `peak`).
    pub fn new(capacity: (f64, f64)) -> Self {
        let peak = (capacity == (0.0, 0.0)).then_some(0.0);
        let now = Instant::now();
        Monitor { capacity, capacity_from: String::new(), peak, window: ([0; 4], now), last: [0; 4], at: now, last_disk: (0.0, 0) }
    }

    /// Learns from the counters, once a measuring window is full, where the capacity is
    /// measured; says so when the measurement first claims a capacity or grows by a tenth.
    fn measure(&mut self, now: &[u64; 4]) {
        let Some(peak) = self.peak.as_mut() else { return };
        let secs = self.window.1.elapsed().as_secs_f64();
        if secs < MEASURE_WINDOW {
            return;
        }
        let moved = |i: usize| now[i].saturating_sub(self.window.0[i]) as f64;
        let seen = ((moved(0) + moved(2)).max(moved(1) + moved(3))) / secs;
        self.window = (*now, Instant::now());
        if seen < MEASURED_MIN || seen <= *peak {
            return;
        }
        if seen > 1.1 * *peak {
            tracing::info!(
                "link capacity measured at {:.0} Mbit/s at least: the most the link carried in a second (link_capacity overrides it)",
                seen * 8.0 / 1e6
            );
        }
        *peak = seen;
        self.capacity = (seen, seen);
        self.capacity_from = "measured".into();
    }

    /// Measures an unknown capacity (the default) or not (a node on loopback: see
    /// `server::measures_link`).
    pub fn measuring(mut self, on: bool) -> Self {
        if !on {
            self.peak = None;
        }
        self
    }

    /// Says where the capacity came from, in every report.
    pub fn capacity_from(mut self, from: String) -> Self {
        self.capacity_from = from;
        self
    }

    /// The rates since the previous report (or since the start), and a new period.
    pub fn report(&mut self, c: &Counters, disk: Option<&DiskEmulation>) -> LinkReport {
        let now = read(c);
        self.measure(&now);
        let secs = self.at.elapsed().as_secs_f64().max(1e-3);
        let last = self.last;
        let rate = |i: usize| now[i].saturating_sub(last[i]) as f64 / secs;
        let repair_io = c.read.load(Ordering::Relaxed) + c.written.load(Ordering::Relaxed);
        let (disk_capacity, disk_fg) = match disk {
            Some(d) => {
                let bw = d.model().bandwidth;
                let busy = d.busy_seconds() - self.last_disk.0;
                let repair = repair_io.saturating_sub(self.last_disk.1) as f64 / bw;
                self.last_disk = (d.busy_seconds(), repair_io);
                (bw, ((busy - repair).max(0.0) / secs).min(1.0) * bw)
            }
            None => (0.0, 0.0),
        };
        let r = LinkReport {
            period_ms: (secs * 1e3) as u64,
            fg_up: rate(0),
            fg_down: rate(1),
            repair_up: rate(2),
            repair_down: rate(3),
            capacity_up: self.capacity.0,
            capacity_down: self.capacity.1,
            capacity_from: self.capacity_from.clone(),
            disk_capacity,
            disk_fg,
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
        let r = m.report(&c, None);
        let secs = r.period_ms as f64 / 1e3;
        assert!((0.1..5.0).contains(&secs), "{secs}");
        assert!((r.fg_up * secs - 500.0).abs() < 5.0 && (r.fg_down * secs - 1000.0).abs() < 10.0, "{r:?}");
        assert!((r.repair_up * secs - 300.0).abs() < 3.0 && r.repair_down == 0.0, "{r:?}");
        assert_eq!((r.capacity_up, r.capacity_down), (1e6, 2e6));
        assert_eq!((r.disk_capacity, r.disk_fg), (0.0, 0.0), "no emulated disk, no storage figures");
        // The next period starts from the last readings.
        let r = m.report(&c, None);
        assert_eq!((r.fg_up, r.fg_down, r.repair_up), (0.0, 0.0, 0.0));
    }

    /// With no capacity given, the most the link carried in a second (a window over several
    /// reports), up or down, users' and repair traffic together, is the capacity both ways,
    /// marked measured; a slower window later keeps it, and too little traffic claims none.
    #[test]
    fn an_unknown_capacity_is_the_most_the_link_carried() {
        let c = Counters::default();
        let mut m = Monitor::new((0.0, 0.0));
        let sleep = |ms| std::thread::sleep(std::time::Duration::from_millis(ms));
        sleep(300);
        c.fg_sent.store(1000, Ordering::Relaxed);
        let r = m.report(&c, None);
        assert_eq!((r.capacity_up, r.capacity_from.as_str()), (0.0, ""), "the window is not full yet: {r:?}");
        sleep(800);
        let r = m.report(&c, None);
        assert_eq!((r.capacity_up, r.capacity_down, r.capacity_from.as_str()), (0.0, 0.0, ""), "1 kB/s says nothing: {r:?}");
        let start = Instant::now();
        c.fg_received.store(1_000_000, Ordering::Relaxed);
        sleep(300);
        c.received.store(2_000_000, Ordering::Relaxed);
        assert_eq!(m.report(&c, None).capacity_up, 0.0, "a third of a window: 3 MB in 0.3 s is not taken as a rate");
        sleep(800);
        let r = m.report(&c, None);
        let secs = start.elapsed().as_secs_f64();
        let want = 3_000_000.0 / secs;
        assert!((r.capacity_up / want - 1.0).abs() < 0.05, "3 MB down in {secs} s, over two reports: {r:?}");
        assert_eq!((r.capacity_down, r.capacity_from.as_str()), (r.capacity_up, "measured"), "{r:?}");
        let first = r.capacity_up;
        sleep(1050);
        c.sent.store(100_000, Ordering::Relaxed);
        let r = m.report(&c, None);
        assert_eq!((r.capacity_up, r.capacity_from.as_str()), (first, "measured"), "a quieter window keeps the peak: {r:?}");
        // Not measuring (a node on loopback): nothing is claimed, whatever it carried.
        let mut m = Monitor::new((0.0, 0.0)).measuring(false);
        sleep(1050);
        c.sent.store(500_000_000, Ordering::Relaxed);
        let r = m.report(&c, None);
        assert_eq!((r.capacity_up, r.capacity_from.as_str()), (0.0, ""), "{r:?}");
        // A configured capacity is never replaced by a measurement.
        let mut m = Monitor::new((1e6, 1e6));
        sleep(1050);
        c.sent.store(100_000_000, Ordering::Relaxed);
        assert_eq!(m.report(&c, None).capacity_up, 1e6);
    }

    /// Disk time not spent on repair's reads and writes is users' I/O: 0.3 s of I/O in a
    /// period of which repair read 10 MB at 100 MB/s (0.1 s) leaves 0.2 s of users' I/O.
    #[test]
    fn users_disk_io_is_busy_time_less_repairs() {
        let c = Counters::default();
        let d = DiskEmulation::new(kintsugi_hdd::HddModel::new(0.0, 100e6).unwrap());
        let mut m = Monitor::new((0.0, 0.0));
        m.report(&c, Some(&d));
        let t = Instant::now();
        d.io(1, 0, 30_000_000);
        c.read.store(10_000_000, Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let r = m.report(&c, Some(&d));
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(r.disk_capacity, 100e6);
        let users = r.disk_fg * r.period_ms as f64 / 1e3;
        assert!((users - 20e6).abs() < 0.1 * 20e6, "{users} bytes of users' I/O in {secs} s: {r:?}");
        // Repair alone: nothing is users'.
        c.written.store(5_000_000, Ordering::Relaxed);
        d.io(1, 30_000_000, 5_000_000);
        assert_eq!(m.report(&c, Some(&d)).disk_fg, 0.0);
    }
}
