//! `auto`: pick the repair method and scheduler for a full-node repair by predicting each
//! candidate's time with this simulator, on what the bandwidth monitor saw (issue 43).
//!
//! No fixed method wins everywhere: which one is fastest depends on the foreground, the code,
//! the number of lost chunks and the repairs each destination runs at once. So before the
//! repair starts, every candidate (CR, PPR, ECPipe with random sources and with RepairBoost,
//! and ChameleonEC) is planned and run here on a forecast of the network, and the fastest
//! runs for real.
//!
//! The forecast is the monitor's recent record replayed: the foreground each node's links
//! carried over the last period, played back from now (see [`mirrored`]). A frozen snapshot
//! would favour ChameleonEC, whose plan then always matches the traffic; a replay keeps the
//! foreground's moves, so a plan that goes stale costs in the prediction as in the run.

use crate::chameleon_phases::{self, PhaseOptions};
use crate::engine::{self, SimOptions, SimResult};
use crate::error::{Result, SimError};
use crate::network::{Foreground, Network};
use crate::scenario::FullNode;
use kintsugi_plan::schedule::Scheduler;
pub use kintsugi_plan::Pick;
use kintsugi_plan::Shape;
use serde::Serialize;
use std::fmt;
use std::time::Instant;

/// One way to run a full-node repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub method: Shape,
    pub scheduler: Scheduler,
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scheduler.chameleon() {
            // ChameleonEC draws its own trees: the method is not its choice to make.
            write!(f, "{}", self.scheduler)
        } else {
            write!(f, "{}+{}", self.method, self.scheduler)
        }
    }
}

/// The methods and schedulers `auto` chooses among.
pub const METHODS: [Shape; 3] = [Shape::Cr, Shape::Ppr, Shape::Ecpipe];
pub const SCHEDULERS: [Scheduler; 3] = [Scheduler::Random, Scheduler::Repairboost, Scheduler::Chameleon];

/// The candidates for `--method M --scheduler S`, either of them `auto`: every method with
/// every scheduler, ChameleonEC once (it draws its own trees).
pub fn candidates(method: Pick<Shape>, scheduler: Pick<Scheduler>) -> Vec<Candidate> {
    let methods = method.fixed().map_or(METHODS.to_vec(), |m| vec![m]);
    let schedulers = scheduler.fixed().map_or(SCHEDULERS.to_vec(), |s| vec![s]);
    let mut out = Vec::new();
    for &scheduler in &schedulers {
        for &method in &methods {
            if scheduler.chameleon() && out.iter().any(|c: &Candidate| c.scheduler == scheduler) {
                continue;
            }
            out.push(Candidate { method, scheduler });
        }
    }
    out
}

/// `s` with the candidate's method and scheduler.
pub fn with(s: &FullNode, c: Candidate) -> FullNode {
    FullNode { method: c.method, scheduler: c.scheduler, ..s.clone() }
}

/// Runs `s` as its scheduler does: ChameleonEC phase by phase, the others planned once at
/// the start (with the foreground then) and run with their admission.
pub fn run_fixed(s: &FullNode, net: &Network, opts: &SimOptions, phases: PhaseOptions) -> Result<SimResult> {
    if s.scheduler.chameleon() {
        return Ok(chameleon_phases::run(s, net, opts, phases, None)?.result);
    }
    let (_, jobs, admission) = s.build_on(Some(net))?;
    engine::run(net, &jobs, &SimOptions { admission, ..opts.clone() })
}

/// What the bandwidth monitor recorded before the repair: each series over the last
/// `period` seconds, its times from 0 (the period's start) to `period`.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub period: f64,
    pub series: Vec<Foreground>,
}

impl History {
    /// The record of `past`, a network's foreground whose times run up to `now`: its last
    /// `period` seconds, shifted to start at 0.
    pub fn record(past: &[Foreground], now: f64, period: f64) -> History {
        let from = now - period;
        let series = past
            .iter()
            .map(|f| {
                let mut points = vec![(0.0, f.at(from))];
                points.extend(f.points.iter().filter(|p| p.0 > from && p.0 < now).map(|&(t, r)| (t - from, r)));
                Foreground { node: f.node, direction: f.direction, points }
            })
            .collect();
        History { period, series }
    }

    /// Cuts a network whose foreground starts `period` seconds before the repair: the
    /// network from the repair's start (times shifted to start at 0), and the record of the
    /// period before. A period of 0 keeps the network whole, with no record.
    pub fn split(net: &Network, period: f64) -> (Network, History) {
        if period <= 0.0 {
            return (net.clone(), History::default());
        }
        let history = History::record(&net.foreground, period, period);
        let mut after = net.clone();
        after.foreground = net.foreground.iter().map(|f| from_start(f, period)).collect();
        (after, history)
    }
}

/// The series from `start` on, its times shifted so the start is 0.
fn from_start(f: &Foreground, start: f64) -> Foreground {
    let mut points = vec![(0.0, f.at(start))];
    points.extend(f.points.iter().filter(|p| p.0 > start).map(|&(t, r)| (t - start, r)));
    Foreground { node: f.node, direction: f.direction, points }
}

/// `net` with its foreground replaced by the history mirrored (see [`mirrored`]) up to
/// `horizon`; with an empty history, the foreground frozen at its rates at time 0 (a
/// monitor's one reading).
pub fn forecast(net: &Network, h: &History, horizon: f64) -> Network {
    let mut out = net.clone();
    out.foreground = if h.period <= 0.0 || h.series.is_empty() {
        net.foreground.iter().map(|f| Foreground { node: f.node, direction: f.direction, points: vec![(0.0, f.at(0.0))] }).collect()
    } else {
        h.series.iter().map(|f| Foreground { node: f.node, direction: f.direction, points: mirrored(f, h.period, horizon) }).collect()
    };
    out
}

/// The record played backwards from its end, then forwards, and so on to `horizon`: a path
/// that starts from the monitor's last reading, where the foreground is now (what the
/// planners see at the start, in the run as in the prediction), never jumps, and moves
/// as it moved: steps, bursts and their lengths as recorded. Replaying the record forwards
/// instead would jump at the start from the live reading to the period's first, which a
/// plan made on the live reading (ChameleonEC's first phase, RepairBoost's one) pays for
/// in the prediction but not in the run: over the study's two seeds that version missed
/// the best fixed candidate by more than 5% in 12 scenarios, this one in 6.
fn mirrored(f: &Foreground, p: f64, horizon: f64) -> Vec<(f64, f64)> {
    let pieces: Vec<(f64, f64, f64)> = f
        .points
        .iter()
        .enumerate()
        .filter(|(_, q)| q.0 < p)
        .map(|(i, &(a, r))| (a, f.points.get(i + 1).map_or(p, |q| q.0.min(p)), r))
        .collect();
    let mut out = Vec::new();
    let mut base = 0.0;
    while base < horizon.max(p) {
        out.extend(pieces.iter().rev().map(|&(_, b, r)| (base + p - b, r)));
        out.extend(pieces.iter().map(|&(a, _, r)| (base + p + a, r)));
        base += 2.0 * p;
    }
    out
}

/// A candidate's predicted repair time, or why it cannot run here.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub candidate: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall seconds its plan and prediction took.
    pub predict_seconds: f64,
}

/// What `auto` chose and what it cost.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    #[serde(skip)]
    pub pick: Candidate,
    pub chosen: String,
    pub predictions: Vec<Prediction>,
    /// Wall seconds spent planning and predicting every candidate.
    pub decide_seconds: f64,
    /// The chosen candidate's predicted repair time, to put the cost beside.
    pub predicted_seconds: f64,
}

/// Predicts every candidate's time on `net` replayed from `history` and picks the least.
pub fn decide(
    s: &FullNode,
    net: &Network,
    history: &History,
    opts: &SimOptions,
    phases: PhaseOptions,
    cands: &[Candidate],
) -> Result<Decision> {
    let t0 = Instant::now();
    if cands.is_empty() {
        return Err(SimError::BadScenario("auto has no candidate to choose from".into()));
    }
    let opts = SimOptions { track_utilization: false, ..opts.clone() };
    // The candidates are predicted side by side, one per core: each run is independent and
    // deterministic, so the outcome is the same in any order.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, cands.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, Prediction)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&c) = cands.get(i) else { break out };
                        let t1 = Instant::now();
                        let (seconds, error) = match predict_one(&with(s, c), net, history, &opts, phases) {
                            Ok(t) => (Some(t), None),
                            Err(SimError::BadScenario(m)) => (None, Some(m)),
                            Err(e) => (None, Some(e.to_string())),
                        };
                        out.push((i, Prediction { candidate: c.to_string(), seconds, error, predict_seconds: t1.elapsed().as_secs_f64() }));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a prediction does not panic")).collect()
    });
    done.sort_by_key(|d| d.0);
    let mut best: Option<(f64, Candidate)> = None;
    for (i, p) in &done {
        if let Some(t) = p.seconds {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, cands[*i]));
            }
        }
    }
    let predictions: Vec<Prediction> = done.into_iter().map(|d| d.1).collect();
    let Some((predicted_seconds, pick)) = best else {
        // Candidates mostly fail for one reason (too few nodes for the code): say it once.
        let mut why: Vec<String> = Vec::new();
        for p in &predictions {
            let e = p.error.clone().unwrap_or_default();
            if !why.contains(&e) {
                why.push(e);
            }
        }
        return Err(SimError::BadScenario(format!("auto found no candidate that can run here: {}", why.join("; "))));
    };
    Ok(Decision { pick, chosen: pick.to_string(), predictions, decide_seconds: t0.elapsed().as_secs_f64(), predicted_seconds })
}

/// One candidate's time on one replay, the replay lengthened until the repair fits in it.
fn predict_one(s: &FullNode, net: &Network, h: &History, opts: &SimOptions, phases: PhaseOptions) -> Result<f64> {
    let mut horizon = h.period.max(1.0) * 8.0;
    loop {
        let r = run_fixed(s, &forecast(net, h, horizon), opts, phases)?;
        // Past the horizon the last rate holds; a repair that ends before it saw only replay.
        if r.makespan <= horizon || h.period <= 0.0 || h.series.is_empty() {
            return Ok(r.makespan);
        }
        horizon = r.makespan * 1.5;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Direction;

    fn series(points: &[(f64, f64)]) -> Foreground {
        Foreground { node: 1, direction: Direction::Up, points: points.to_vec() }
    }

    #[test]
    fn candidates_cover_every_pair_and_chameleon_once() {
        let all = candidates(Pick::Auto, Pick::Auto);
        assert_eq!(all.len(), 7);
        assert_eq!(all.iter().filter(|c| c.scheduler.chameleon()).count(), 1);
        assert_eq!(all.iter().map(|c| c.to_string()).collect::<Vec<_>>()[..3], ["cr+random", "ppr+random", "ecpipe+random"]);
        let methods = candidates(Pick::Auto, Pick::Fixed(Scheduler::Repairboost));
        assert_eq!(methods.len(), 3);
        let schedulers = candidates(Pick::Fixed(Shape::Ppr), Pick::Auto);
        assert_eq!(schedulers.iter().map(|c| c.to_string()).collect::<Vec<_>>(), ["ppr+random", "ppr+repairboost", "chameleon"]);
    }

    #[test]
    fn history_is_the_last_period_shifted_to_zero() {
        let past = series(&[(0.0, 1.0), (50.0, 2.0), (80.0, 3.0), (120.0, 4.0)]);
        let h = History::record(&[past], 100.0, 40.0);
        assert_eq!(h.series[0].points, vec![(0.0, 2.0), (20.0, 3.0)]);
    }

    /// The forecast starts at the record's last rate and plays it backwards, then
    /// forwards: continuous, and each lap's mean is the record's.
    #[test]
    fn forecast_mirrors_the_record_from_now() {
        let h = History { period: 10.0, series: vec![series(&[(0.0, 1.0), (4.0, 5.0), (9.0, 2.0)])] };
        let net = Network::homogeneous(2, 100.0);
        let f = forecast(&net, &h, 25.0);
        let fg = &f.foreground[0];
        // Backwards: 2 for 1 s, 5 for 5 s, 1 for 4 s; then forwards: 1, 5, 2; then back.
        let at: Vec<f64> = [0.5, 1.5, 5.5, 6.5, 9.5, 10.5, 14.5, 19.5, 20.5, 21.5].iter().map(|&t| fg.at(t)).collect();
        assert_eq!(at, [2.0, 5.0, 5.0, 1.0, 1.0, 1.0, 5.0, 2.0, 2.0, 5.0]);
        for lap in 0..3 {
            let a = lap as f64 * 10.0;
            assert!((fg.mean(a, a + 10.0) - 3.1).abs() < 1e-9, "lap {lap}: {}", fg.mean(a, a + 10.0));
        }
        assert!(fg.points.last().unwrap().0 >= 25.0 - 10.0, "covers the horizon");
        // No record: the foreground as it is at time 0, held.
        let mut live = net.clone();
        live.foreground.push(series(&[(0.0, 7.0), (3.0, 70.0)]));
        let frozen = forecast(&live, &History::default(), 100.0);
        assert_eq!(frozen.foreground[0].points, vec![(0.0, 7.0)]);
    }
}
