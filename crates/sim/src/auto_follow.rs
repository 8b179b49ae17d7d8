//! `auto` that follows the foreground (issue 72): the pick is made again as the repair
//! runs, since the foreground it was made on does not stay.
//!
//! The repair runs in rounds. At a round's start every candidate is predicted for the chunks
//! still to repair, as [`auto::decide`] does at the start, on the record the monitor has by
//! then (its last `history.period` seconds; with no record before the repair, all it saw
//! since the start). The pick plans every chunk left, with the foreground the monitor reads
//! then, and its repairs are released. At the next round, those that have not started yet
//! go back to be decided on again: nothing of them has run, so what ran stays as it ran.
//! Repairs held by per-destination admission can go back, and so can ChameleonEC's later
//! phases (a ChameleonEC round is one of its phases, a round long). Repairs that start at
//! once cannot (every repair at once, or RepairBoost's timeslots, whose schedule the later
//! rounds' timeslots continue).
//!
//! A round keeps the last round's candidate unless another is predicted [`SWITCH`] faster:
//! a forecast is a guess, and a switch to a schedule that starts everything cannot be undone.

use crate::auto::{self, Candidate, Decision, History};
use crate::chameleon_phases::PhaseOptions;
use crate::engine::{self, Admission, Job, SimOptions, SimResult};
use crate::error::{Result, SimError};
use crate::network::{Foreground, Network};
use crate::scenario::{FullNode, Given};
use kintsugi_plan::schedule;
use serde::Serialize;
use std::sync::Arc;

/// The shortest round, seconds: shorter ones cost more planning than they can save.
pub const MIN_ROUND: f64 = 5.0;
/// The least predicted gain that makes a round switch from the last round's candidate.
pub const SWITCH: f64 = 0.1;
/// Rounds a repair is cut into at most, by default (its first prediction over this).
pub const ROUNDS: f64 = 4.0;

/// One round as it ran.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// When it was decided and its repairs released, seconds from the repair's start.
    pub start: f64,
    #[serde(skip)]
    pub pick: Candidate,
    pub chosen: String,
    /// Its repairs that started before the next round (the rest went back), and the chunks
    /// still to repair after it.
    pub chunks: usize,
    pub left: usize,
    /// The pick's predicted time for every chunk still to repair at the round's start.
    pub predicted_seconds: f64,
    pub decide_seconds: f64,
}

/// A followed repair: every repair job in the order they were released (the engine runs
/// them with `admission` to the same result), its result, and the rounds.
#[derive(Clone, Debug)]
pub struct Followed {
    pub jobs: Vec<Job>,
    /// The lost chunk (its index in the scenario's) each job rebuilds.
    pub chunks: Vec<usize>,
    pub admission: Admission,
    pub result: SimResult,
    pub rounds: Vec<Round>,
    /// The first round's decision: every candidate's prediction at the start.
    pub first: Decision,
    /// Wall seconds of every round's decision together.
    pub decide_seconds: f64,
}

/// Runs `s` on `net`, `auto` choosing among `cands` at every round. `round_seconds` of 0 is
/// the first prediction over [`ROUNDS`], at least [`MIN_ROUND`].
pub fn follow(
    s: &FullNode,
    net: &Network,
    history: &History,
    opts: &SimOptions,
    phases: PhaseOptions,
    cands: &[Candidate],
    round_seconds: f64,
) -> Result<Followed> {
    if !(round_seconds >= 0.0 && round_seconds.is_finite()) {
        return Err(SimError::BadScenario(format!("a round must be a non-negative number of seconds, got {round_seconds}")));
    }
    net.validate()?;
    let (_, lost, cluster) = s.plan_input(Some(net), &|_, _| 0.0)?;
    let live = cluster.nodes.clone();
    let gates = s.given.as_ref().and_then(|g| g.gates);
    let of = |chunks: &[usize]| FullNode {
        given: Some(Arc::new(Given { lost: chunks.iter().map(|&i| lost[i].clone()).collect(), live: live.clone(), gates })),
        ..s.clone()
    };
    let admission = if s.max_active == usize::MAX { Admission::All } else { Admission::PerDestination(s.max_active) };
    let run_opts = SimOptions { admission, ..opts.clone() };

    let mut todo: Vec<usize> = (0..lost.len()).collect();
    // Every repair released, with its chunk, in the order released.
    let mut released: Vec<(usize, Job)> = Vec::new();
    let mut rounds = Vec::new();
    let mut first = None;
    let mut decide_seconds = 0.0;
    let mut round = round_seconds;
    let mut slot_base = 0u32;
    let mut t = 0.0;
    while !todo.is_empty() {
        let mut d = auto::decide(&of(&todo), net, &observed(history, net, t), opts, phases, cands)?;
        decide_seconds += d.decide_seconds;
        // Predictions are in the candidates' order.
        if let Some(current) = rounds.last().map(|r: &Round| r.pick) {
            let now = cands.iter().position(|&c| c == current).and_then(|i| d.predictions.get(i)).and_then(|p| p.seconds);
            if let Some(now) = now.filter(|&now| d.predicted_seconds > (1.0 - SWITCH) * now) {
                d.pick = current;
                d.chosen = current.to_string();
                d.predicted_seconds = now;
            }
        }
        if round <= 0.0 {
            round = (d.predicted_seconds / ROUNDS).max(MIN_ROUND);
        }
        // Planned by the pick on what the monitor reads now, every chunk still to repair.
        let b = auto::with(&of(&todo), d.pick);
        let seen = |node, dir| net.foreground_mean(node, dir, t, t);
        let (code, chunks, mut seen_cluster) = b.plan_input(Some(net), &seen)?;
        seen_cluster.phase_seconds = round;
        let seed = s.seed ^ 0x5eed ^ (rounds.len() as u64) << 32;
        let plan = schedule::plan(code.as_ref(), b.method, b.scheduler, &chunks, &seen_cluster, seed)?;
        let from = released.len();
        let mut back = Vec::new();
        let mut next_base = slot_base;
        for (r, i) in plan.repairs.into_iter().zip(std::mem::take(&mut todo)) {
            if r.phase > 0 {
                back.push(i);
                continue;
            }
            let timeslots = if gates.is_none_or(|f| f(&r.graph)) {
                r.slots
                    .iter()
                    .map(|slot| {
                        slot.map(|x| {
                            next_base = next_base.max(slot_base + x + 1);
                            slot_base + x
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            };
            released.push((
                i,
                Job { graph: r.graph, chunk_len: s.chunk, slice_len: s.slice, release: t, timeslots, cancel_at: None, request: None },
            ));
        }
        slot_base = next_base;
        if released.len() == from {
            return Err(SimError::BadScenario(format!("{} planned an empty first phase", d.pick)));
        }
        todo = back;
        let jobs: Vec<Job> = released.iter().map(|(_, j)| j.clone()).collect();
        let r = engine::run(net, &jobs, &run_opts)?;
        // The next decision: a round from now, or once three quarters of ChameleonEC's phase
        // have finished, if that is sooner.
        let mut ends: Vec<f64> = r.jobs[from..].iter().map(|j| j.end).collect();
        ends.sort_by(f64::total_cmp);
        let next = if d.pick.scheduler.chameleon() { ends[(ends.len() * 3).div_ceil(4) - 1].min(t + round) } else { t + round };
        let next = next.max(t + 1e-6);
        // Repairs this round released that have not started by then go back, to be decided
        // on again: nothing of them has run, so what ran before stays as it was. Repairs
        // that start with their release (every one at once, or held by timeslots) have.
        let mut kept = from;
        let mut withdrawn = Vec::new();
        for (x, (i, job)) in std::mem::take(&mut released).into_iter().enumerate() {
            if x >= from && r.jobs[x].start >= next {
                withdrawn.push(i);
            } else {
                released.push((i, job));
                kept += (x >= from) as usize;
            }
        }
        rounds.push(Round {
            start: t,
            pick: d.pick,
            chosen: d.chosen.clone(),
            chunks: kept - from,
            left: todo.len() + withdrawn.len(),
            predicted_seconds: d.predicted_seconds,
            decide_seconds: d.decide_seconds,
        });
        first.get_or_insert(d);
        todo.splice(0..0, withdrawn);
        t = next;
    }
    let (chunks, jobs): (Vec<usize>, Vec<Job>) = released.into_iter().unzip();
    let result = engine::run(net, &jobs, &run_opts)?;
    let first = first.ok_or_else(|| SimError::BadScenario("no chunk to repair".into()))?;
    Ok(Followed { jobs, chunks, admission, result, rounds, first, decide_seconds })
}

/// What the monitor has recorded by `t` seconds into the repair: the last `h.period`
/// seconds of the record before the repair and of the foreground since; with no record
/// before, everything since the start (nothing at the start: the live reading, held).
fn observed(h: &History, net: &Network, t: f64) -> History {
    if t <= 0.0 {
        return h.clone();
    }
    let before = if h.series.is_empty() { 0.0 } else { h.period };
    let period = if before > 0.0 { before } else { t };
    let series: Vec<Foreground> = net
        .foreground
        .iter()
        .map(|f| {
            let past = h.series.iter().find(|p| p.node == f.node && p.direction == f.direction);
            let mut points: Vec<(f64, f64)> = match past {
                Some(p) => p.points.clone(),
                None if before > 0.0 => vec![(0.0, 0.0)],
                None => Vec::new(),
            };
            points.extend(f.points.iter().filter(|p| p.0 < t).map(|&(x, r)| (x + before, r)));
            Foreground { node: f.node, direction: f.direction, points }
        })
        .collect();
    History::record(&series, before + t, period)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auto::Pick;
    use crate::engine::Model;
    use crate::network::Direction;

    fn walk_net(nodes: usize, link: f64, seed: u64) -> Network {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut net = Network::homogeneous(nodes, link);
        for n in 0..nodes as u32 {
            for direction in [Direction::Up, Direction::Down] {
                let mut share: f64 = rng.random_range(0.1..0.6);
                let points = (0..200)
                    .map(|i| {
                        share = (share + rng.random_range(-0.25..=0.25)).clamp(0.0, 0.9);
                        (i as f64 * 5.0, share * link)
                    })
                    .collect();
                net.foreground.push(Foreground { node: n, direction, points });
            }
        }
        net
    }

    /// The record at `t` is the period before `t`, across the repair's start.
    #[test]
    fn the_record_moves_with_the_repair() {
        let h =
            History { period: 10.0, series: vec![Foreground { node: 1, direction: Direction::Up, points: vec![(0.0, 1.0), (6.0, 2.0)] }] };
        let mut net = Network::homogeneous(3, 100.0);
        net.foreground.push(Foreground { node: 1, direction: Direction::Up, points: vec![(0.0, 3.0), (4.0, 4.0), (20.0, 5.0)] });
        let at = observed(&h, &net, 7.0);
        // [-3, 7] from the repair's start: 2 until 0, 3 until 4, 4 until 7.
        assert_eq!(at.period, 10.0);
        assert_eq!(at.series[0].points, vec![(0.0, 2.0), (3.0, 3.0), (7.0, 4.0)]);
        // No record before: everything since the start.
        let since = observed(&History::default(), &net, 7.0);
        assert_eq!(since.period, 7.0);
        assert_eq!(since.series[0].points, vec![(0.0, 3.0), (4.0, 4.0)]);
        assert_eq!(observed(&h, &net, 0.0).series, h.series);
    }

    /// Every chunk is repaired once, the jobs replay to the same result, the rounds cover
    /// the repair in order, and repairs that went back are repaired in a later round.
    #[test]
    fn rounds_repair_every_chunk_once_and_replay_alike() {
        let (net, history) = History::split(&walk_net(20, 125e6, 3), 100.0);
        for max_active in [1, 3, usize::MAX] {
            let s = FullNode {
                nodes: 20,
                chunks: 60,
                code: "rs:6,3".parse().unwrap(),
                method: kintsugi_plan::Shape::Ecpipe,
                link: 125e6,
                chunk: 64 << 20,
                slice: 1 << 20,
                seed: 5,
                max_active,
                scheduler: schedule::Scheduler::Random,
                requestors: 0,
                failed: 1,
                given: None,
            };
            let opts = SimOptions { model: Model::Fluid, ..Default::default() };
            let cands = auto::candidates(Pick::Auto, Pick::Auto);
            let f = follow(&s, &net, &history, &opts, PhaseOptions::default(), &cands, 0.0).unwrap();
            assert_eq!(f.jobs.len(), 60, "{max_active}");
            let mut chunks = f.chunks.clone();
            chunks.sort();
            assert_eq!(chunks, (0..60).collect::<Vec<_>>(), "every chunk once");
            assert_eq!(f.rounds.iter().map(|r| r.chunks).sum::<usize>(), 60);
            assert!(f.rounds.len() >= 2, "a repair of about a minute is decided again: {:?}", f.rounds);
            assert_eq!(f.rounds.last().unwrap().left, 0);
            for w in f.rounds.windows(2) {
                assert!(w[1].start > w[0].start);
                assert_eq!(w[1].left + w[1].chunks, w[0].left);
            }
            let again = engine::run(&net, &f.jobs, &SimOptions { admission: f.admission, ..opts.clone() }).unwrap();
            assert_eq!(again.makespan, f.result.makespan);
            assert!(f.decide_seconds >= f.first.decide_seconds);
        }
    }
}
