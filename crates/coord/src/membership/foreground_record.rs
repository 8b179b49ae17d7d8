//! The foreground each node's links carried over the last minutes, from its traffic
//! reports: what `auto` replays to predict a repair (issue 43). The planners see only the
//! latest report; a prediction needs the series, so a plan that goes stale when the
//! foreground moves costs in the prediction as it will in the run.

use kintsugi_plan::NodeId;
use kintsugi_proto::LinkReport;
use kintsugi_sim::auto::History;
use kintsugi_sim::network::{Direction, Foreground};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Reports older than this are dropped.
const KEPT_FOR: Duration = Duration::from_secs(600);
/// At most this many reports per node (a heartbeat every 500 ms fills ten minutes with
/// 1,200; a faster one is thinned by dropping the oldest): memory stays bounded.
const KEPT_PER_NODE: usize = 2048;

/// One report: when it came, the period it averaged over, foreground up and down (bytes/s).
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    period: Duration,
    up: f64,
    down: f64,
}

#[derive(Default)]
pub struct ForegroundRecord(Mutex<HashMap<NodeId, VecDeque<Sample>>>);

impl ForegroundRecord {
    pub(crate) fn record(&self, node: NodeId, l: &LinkReport) {
        self.record_at(node, l, Instant::now());
    }

    fn record_at(&self, node: NodeId, l: &LinkReport, at: Instant) {
        let sample = Sample { at, period: Duration::from_millis(l.period_ms), up: l.fg_up.max(0.0), down: l.fg_down.max(0.0) };
        let mut all = self.0.lock().expect("foreground record lock");
        let q = all.entry(node).or_default();
        q.push_back(sample);
        while q.len() > KEPT_PER_NODE || q.front().is_some_and(|s| at.duration_since(s.at) > KEPT_FOR) {
            q.pop_front();
        }
    }

    pub(crate) fn forget(&self, node: NodeId) {
        self.0.lock().expect("foreground record lock").remove(&node);
    }

    /// The last `period` before `now`, for the nodes `ids` maps to the simulator's ids: a
    /// series per node and direction, times from 0 (the period's start) to `period`. A
    /// report's rate holds over the period it averaged, so it starts that much before it
    /// came. Before a node's first report in the window, its first rate holds. Nodes with
    /// no report have no series (no foreground).
    pub(crate) fn history(&self, now: Instant, period: Duration, ids: &HashMap<NodeId, NodeId>) -> History {
        let all = self.0.lock().expect("foreground record lock");
        let from = now.checked_sub(period).unwrap_or(now);
        let secs = |t: Instant| t.saturating_duration_since(from).as_secs_f64();
        let mut series = Vec::new();
        for (node, q) in all.iter() {
            let Some(&sim) = ids.get(node) else { continue };
            // The reports that cover some of the window, oldest first.
            let inside: Vec<&Sample> = q.iter().filter(|s| s.at > from && s.at <= now).collect();
            if inside.is_empty() {
                continue;
            }
            for direction in [Direction::Up, Direction::Down] {
                let rate = |s: &Sample| if direction == Direction::Up { s.up } else { s.down };
                let mut points: Vec<(f64, f64)> = vec![(0.0, rate(inside[0]))];
                for s in &inside[1..] {
                    let start = secs(s.at.checked_sub(s.period).unwrap_or(s.at));
                    points.push((start.max(points.last().map_or(0.0, |p| p.0)), rate(s)));
                }
                // One point per time: a later report over the same instant wins.
                points.dedup_by(|b, a| {
                    let same = (a.0 - b.0).abs() < 1e-9;
                    if same {
                        a.1 = b.1;
                    }
                    same
                });
                series.push(Foreground { node: sim, direction, points });
            }
        }
        History { period: period.as_secs_f64(), series }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(up: f64, down: f64) -> LinkReport {
        LinkReport { period_ms: 1000, fg_up: up, fg_down: down, ..Default::default() }
    }

    #[test]
    fn history_is_each_report_over_its_period_in_the_window() {
        let r = ForegroundRecord::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        for (s, up) in [(1, 10.0), (2, 20.0), (3, 30.0), (4, 40.0)] {
            r.record_at(7, &report(up, up / 10.0), at(s));
        }
        r.record_at(8, &report(5.0, 5.0), at(1));
        let ids: HashMap<NodeId, NodeId> = [(7, 0), (9, 2)].into_iter().collect();
        // The window is seconds 1.5 to 4.5: the reports of 2, 3 and 4, each over the second
        // before it; the first holds from the window's start, the last to its end.
        let h = r.history(at(4) + Duration::from_millis(500), Duration::from_secs(3), &ids);
        assert_eq!(h.period, 3.0);
        assert_eq!(h.series.len(), 2, "node 7 up and down; node 8 is not asked for, node 9 has no report");
        let up = h.series.iter().find(|f| f.direction == Direction::Up).unwrap();
        assert_eq!(up.node, 0);
        let rounded: Vec<(f64, f64)> = up.points.iter().map(|&(t, v)| ((t * 1e3).round() / 1e3, v)).collect();
        assert_eq!(rounded, vec![(0.0, 20.0), (0.5, 30.0), (1.5, 40.0)]);
        assert_eq!(up.at(3.0), 40.0);
        let down = h.series.iter().find(|f| f.direction == Direction::Down).unwrap();
        assert_eq!(down.at(1.0), 3.0);
        assert_eq!(down.at(2.9), 4.0);
        r.forget(7);
        assert!(r.history(at(4), Duration::from_secs(3), &ids).series.is_empty());
    }

    #[test]
    fn memory_stays_bounded() {
        let r = ForegroundRecord::default();
        let t0 = Instant::now();
        for i in 0..(KEPT_PER_NODE as u64 + 100) {
            r.record_at(1, &report(1.0, 1.0), t0 + Duration::from_millis(i));
        }
        assert_eq!(r.0.lock().unwrap()[&1].len(), KEPT_PER_NODE);
        r.record_at(1, &report(1.0, 1.0), t0 + KEPT_FOR + Duration::from_secs(10));
        assert_eq!(r.0.lock().unwrap()[&1].len(), 1, "reports older than {KEPT_FOR:?} go");
    }
}
