//! The scenarios `auto` is judged on (issue 43): five kinds of foreground, three codes and
//! three concurrencies, with the cluster's size and the lost chunks drawn from a seed. Each
//! scenario runs every fixed candidate and `auto`; `auto` should come within 5% of the best
//! fixed one everywhere and ahead of each on the geometric mean.
//!
//! Every scenario has 1 Gb/s links, 64 MiB chunks in 1 MiB slices and one failed node. Its
//! foreground runs from [`PERIOD`] seconds before the repair starts, so the monitor has a
//! record when `auto` decides; the repair sees only what comes after.

use crate::auto::{self, Candidate, Decision, History};
use crate::auto_follow::{self, Round};
use crate::chameleon_phases::PhaseOptions;
use crate::engine::SimOptions;
use crate::error::Result;
use crate::network::{Direction, Foreground, Network};
use crate::scenario::FullNode;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::{NodeId, Shape};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Every link's rate, bytes per second (1 Gb/s).
pub const LINK: f64 = 125e6;
pub const CHUNK: usize = 64 << 20;
pub const SLICE: usize = 1 << 20;
/// Seconds of foreground the monitor has recorded when the repair starts.
pub const PERIOD: f64 = 300.0;
/// Seconds of foreground drawn after the start; past it the last rates hold.
pub const HORIZON: f64 = 20_000.0;

/// How users load the links.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FgKind {
    /// No users.
    None,
    /// ChameleonEC's Exp#1 as `scripts/repro_chameleon_sim.py` draws it: every link, 15-s
    /// windows, steps of up to 22% of the link, kept under 50%.
    Exp1,
    /// The issue's: every link starts between 10% and 60%, moves up to 25% every 15 s,
    /// held within 0-90%.
    RandomWalk,
    /// On/off bursts: 80% of the link for about 20 s, idle for about 40 s (exponential),
    /// each link on its own.
    Bursty,
    /// A tenth of the nodes (at least 2) at 85% both ways throughout; the rest idle.
    HotNodes,
    /// Hot spots that move: a tenth of the nodes (at least 2) at 85% both ways, a new set
    /// drawn after an exponential time of mean 60 s.
    MovingHot,
}

pub const KINDS: [FgKind; 5] = [FgKind::None, FgKind::Exp1, FgKind::RandomWalk, FgKind::Bursty, FgKind::HotNodes];
/// The foreground kinds that change during a repair (issue 72's scenarios).
pub const CHANGING: [FgKind; 3] = [FgKind::RandomWalk, FgKind::Bursty, FgKind::MovingHot];

impl FgKind {
    pub fn name(self) -> &'static str {
        match self {
            FgKind::None => "none",
            FgKind::Exp1 => "exp1",
            FgKind::RandomWalk => "random-walk",
            FgKind::Bursty => "bursty",
            FgKind::HotNodes => "hot-nodes",
            FgKind::MovingHot => "moving-hot",
        }
    }
}

/// One scenario of the study.
#[derive(Clone, Debug, Serialize)]
pub struct StudyScenario {
    pub id: usize,
    pub kind: FgKind,
    #[serde(serialize_with = "as_string")]
    pub code: CodeSpec,
    pub nodes: usize,
    pub chunks: usize,
    /// Repairs at once per destination; `usize::MAX` is all.
    #[serde(serialize_with = "concurrency_name")]
    pub max_active: usize,
    pub seed: u64,
}

fn as_string<S: serde::Serializer>(c: &CodeSpec, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&c.to_string())
}

fn concurrency_name<S: serde::Serializer>(m: &usize, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&concurrency(*m))
}

/// "all" or the number.
pub fn concurrency(max_active: usize) -> String {
    if max_active == usize::MAX {
        "all".into()
    } else {
        max_active.to_string()
    }
}

/// The study's scenarios: every kind x code x concurrency (45), nodes from 16 to 100 and
/// lost chunks from 50 to 1,000 drawn from `seed`.
pub fn generate(seed: u64) -> Vec<StudyScenario> {
    let mut rng = StdRng::seed_from_u64(seed);
    let codes: [CodeSpec; 3] = ["rs:6,3", "rs:10,4", "clay:10,4,13"].map(|c| c.parse().expect("known code"));
    let mut out = Vec::new();
    for kind in KINDS {
        for code in codes {
            for max_active in [1, 3, usize::MAX] {
                // Chunks drawn log-uniform, so small and large repairs are alike common.
                let chunks = (50f64 * 20f64.powf(rng.random::<f64>())).round() as usize;
                out.push(StudyScenario {
                    id: out.len(),
                    kind,
                    code,
                    nodes: rng.random_range(16..=100),
                    chunks,
                    max_active,
                    seed: rng.random(),
                });
            }
        }
    }
    out
}

/// Issue 72's scenarios: `count` of them, each of a changing foreground kind, a code of
/// RS(6,3), RS(10,4), LRC(6,2,2) and Clay(10,4,13), and 1, 3 or all repairs at once per
/// destination, every combination in turn (36 make one of each); 10 to 60 nodes (at least
/// a stripe and a destination) and 20 to 500 lost chunks (log-uniform) drawn from `seed`.
pub fn generate_changing(seed: u64, count: usize) -> Vec<StudyScenario> {
    let mut rng = StdRng::seed_from_u64(seed);
    let codes: [CodeSpec; 4] = ["rs:6,3", "rs:10,4", "lrc:6,2,2", "clay:10,4,13"].map(|c| c.parse().expect("known code"));
    let concurrencies = [1, 3, usize::MAX];
    (0..count)
        .map(|id| {
            let code = codes[(id / CHANGING.len()) % codes.len()];
            let n = code.n();
            StudyScenario {
                id,
                kind: CHANGING[id % CHANGING.len()],
                code,
                max_active: concurrencies[(id / (CHANGING.len() * codes.len())) % concurrencies.len()],
                nodes: rng.random_range((n + 1).max(10)..=60),
                chunks: (20f64 * 25f64.powf(rng.random::<f64>())).round() as usize,
                seed: rng.random(),
            }
        })
        .collect()
}

impl StudyScenario {
    /// The repair, with a placeholder method and scheduler (each candidate sets its own).
    pub fn full_node(&self) -> FullNode {
        FullNode {
            nodes: self.nodes,
            chunks: self.chunks,
            code: self.code,
            method: Shape::Ecpipe,
            link: LINK,
            chunk: CHUNK,
            slice: SLICE,
            seed: self.seed,
            max_active: self.max_active,
            scheduler: Scheduler::Random,
            requestors: 0,
            failed: 1,
            given: None,
        }
    }

    /// The network from the repair's start, and the monitor's record of the period before.
    pub fn network(&self) -> (Network, History) {
        let mut rng = StdRng::seed_from_u64(self.seed ^ 0xf0e1);
        let mut whole = Vec::new();
        let hot: Vec<usize> = {
            let mut nodes: Vec<usize> = (1..self.nodes).collect();
            for i in 0..nodes.len() {
                let j = rng.random_range(i..nodes.len());
                nodes.swap(i, j);
            }
            nodes.truncate((self.nodes / 10).max(2));
            nodes
        };
        for n in 0..self.nodes {
            for direction in [Direction::Up, Direction::Down] {
                let points = match self.kind {
                    FgKind::None => continue,
                    FgKind::Exp1 => walk(&mut rng, 0.0..0.5, 0.22, 0.5),
                    FgKind::RandomWalk => walk(&mut rng, 0.1..0.6, 0.25, 0.9),
                    FgKind::Bursty => bursts(&mut rng),
                    FgKind::HotNodes if hot.contains(&n) => vec![(0.0, 0.85 * LINK)],
                    FgKind::HotNodes => continue,
                    FgKind::MovingHot => moving_hot(&mut StdRng::seed_from_u64(self.seed ^ 0x407), self.nodes, n),
                };
                whole.push(Foreground { node: n as NodeId, direction, points });
            }
        }
        let mut net = Network::homogeneous(self.nodes, LINK);
        net.foreground = whole;
        History::split(&net, PERIOD)
    }
}

/// A random walk over the whole span, one step per 15-s window: starting uniform in `start`
/// (shares of the link), moving uniformly by up to `step`, held within 0..`top`.
fn walk(rng: &mut StdRng, start: std::ops::Range<f64>, step: f64, top: f64) -> Vec<(f64, f64)> {
    let mut share = rng.random_range(start);
    let mut points = Vec::new();
    let mut t = 0.0;
    while t < PERIOD + HORIZON {
        points.push((t, share * LINK));
        share = (share + rng.random_range(-step..=step)).clamp(0.0, top);
        t += 15.0;
    }
    points
}

/// On at 80% for an exponential time of mean 20 s, off for one of mean 40 s.
fn bursts(rng: &mut StdRng) -> Vec<(f64, f64)> {
    let mut on = rng.random_bool(1.0 / 3.0);
    let mut points = Vec::new();
    let mut t = 0.0;
    while t < PERIOD + HORIZON {
        points.push((t, if on { 0.8 * LINK } else { 0.0 }));
        let mean = if on { 20.0 } else { 40.0 };
        t += -mean * (1.0 - rng.random::<f64>()).ln();
        on = !on;
    }
    points
}

/// Node `n`'s share of the moving hot spots: every set drawn from the same `rng` state for
/// every node (so the sets agree), 85% of the link while `n` is in the set.
fn moving_hot(rng: &mut StdRng, nodes: usize, n: usize) -> Vec<(f64, f64)> {
    let hot = (nodes / 10).max(2);
    let mut points = Vec::new();
    let mut t = 0.0;
    while t < PERIOD + HORIZON {
        let mut set: Vec<usize> = (1..nodes).collect();
        for i in 0..hot {
            let j = rng.random_range(i..set.len());
            set.swap(i, j);
        }
        let rate = if set[..hot].contains(&n) { 0.85 * LINK } else { 0.0 };
        if points.last().is_none_or(|p: &(f64, f64)| p.1 != rate) {
            points.push((t, rate));
        }
        t += -60.0 * (1.0 - rng.random::<f64>()).ln();
    }
    points
}

/// How `auto` runs in the study: deciding once at the start, or again at every round
/// ([`crate::auto_follow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutoMode {
    Once,
    Follow,
}

/// One scenario's outcome: every fixed candidate's time, and `auto`'s decision and time.
#[derive(Clone, Debug, Serialize)]
pub struct StudyRow {
    pub scenario: StudyScenario,
    /// (candidate, repair seconds) in [`auto::candidates`]' order.
    pub fixed: Vec<(String, f64)>,
    /// auto's first decision (its only one, deciding once).
    pub auto: Decision,
    pub auto_seconds: f64,
    /// Following: every round's pick; the decisions' wall time together.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
    pub decide_seconds: f64,
    pub best_fixed: String,
    /// auto's time over the best fixed candidate's.
    pub auto_over_best: f64,
}

impl StudyRow {
    /// What auto ran: its pick, or following, each round's pick in turn (repeats once).
    pub fn picks(&self) -> String {
        if self.rounds.is_empty() {
            return self.auto.chosen.clone();
        }
        let mut out: Vec<&str> = Vec::new();
        for r in &self.rounds {
            if out.last() != Some(&r.chosen.as_str()) {
                out.push(&r.chosen);
            }
        }
        out.join(">")
    }
}

/// Runs every candidate, and `auto`, on one scenario.
pub fn evaluate(sc: &StudyScenario, cands: &[Candidate], opts: &SimOptions, phases: PhaseOptions, mode: AutoMode) -> Result<StudyRow> {
    let s = sc.full_node();
    let (net, history) = sc.network();
    let mut fixed = Vec::new();
    for &c in cands {
        let r = auto::run_fixed(&auto::with(&s, c), &net, opts, phases)?;
        fixed.push((c.to_string(), r.makespan));
    }
    let (decision, auto_seconds, rounds, decide_seconds) = match mode {
        AutoMode::Once => {
            let d = auto::decide(&s, &net, &history, opts, phases, cands)?;
            // auto runs what it picked as that candidate runs, and the simulator is
            // deterministic: its time is the pick's fixed run (`sim full-node --scheduler
            // auto` runs it again, and `tests/sim_cli.rs` checks the two agree).
            let t = fixed.iter().find(|f| f.0 == d.chosen).map(|f| f.1).expect("the pick is a candidate");
            let spent = d.decide_seconds;
            (d, t, Vec::new(), spent)
        }
        AutoMode::Follow => {
            let f = auto_follow::follow(&s, &net, &history, opts, phases, cands, 0.0)?;
            (f.first, f.result.makespan, f.rounds, f.decide_seconds)
        }
    };
    let (best_fixed, best) = fixed.iter().min_by(|a, b| a.1.total_cmp(&b.1)).cloned().expect("at least one candidate");
    Ok(StudyRow {
        scenario: sc.clone(),
        fixed,
        auto_over_best: auto_seconds / best,
        auto: decision,
        auto_seconds,
        rounds,
        decide_seconds,
        best_fixed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Model;

    #[test]
    fn the_study_covers_the_issue_and_is_seeded() {
        let a = generate(1);
        assert!(a.len() >= 30);
        assert_eq!(format!("{:?}", a), format!("{:?}", generate(1)));
        assert_ne!(format!("{:?}", a), format!("{:?}", generate(2)));
        for kind in KINDS {
            assert!(a.iter().any(|s| s.kind == kind));
        }
        for m in [1, 3, usize::MAX] {
            assert!(a.iter().any(|s| s.max_active == m));
        }
        assert!(a.iter().all(|s| (16..=100).contains(&s.nodes) && (50..=1000).contains(&s.chunks)));
    }

    /// The record is the foreground before the start and the network the foreground after:
    /// together, one series.
    #[test]
    fn history_and_network_split_one_series() {
        let sc = StudyScenario {
            id: 0,
            kind: FgKind::RandomWalk,
            code: "rs:6,3".parse().unwrap(),
            nodes: 16,
            chunks: 50,
            max_active: 1,
            seed: 9,
        };
        let (net, h) = sc.network();
        assert_eq!(net.foreground.len(), 32);
        assert_eq!(h.series.len(), 32);
        for (f, past) in net.foreground.iter().zip(&h.series) {
            assert!(f.points.iter().all(|p| (0.0..=0.9 * LINK + 1.0).contains(&p.1)));
            // The walk moves by at most 25% of the link per window, across the start too.
            let last = past.at(PERIOD - 1e-9);
            assert!((f.at(0.0) - last).abs() <= 0.25 * LINK + 1.0);
        }
        let (none, h) = StudyScenario { kind: FgKind::None, ..sc.clone() }.network();
        assert!(none.foreground.is_empty() && h.series.is_empty());
        let (hot, _) = StudyScenario { kind: FgKind::HotNodes, ..sc }.network();
        assert_eq!(hot.foreground.len(), 4, "2 hot nodes of 16, both ways");
    }

    /// auto's time is its pick's, and within the study's bound of the best in a scenario
    /// where one method clearly wins: no foreground, RS(6,3), one repair per destination,
    /// where CR's 6 downloads per chunk lose to pipelining.
    #[test]
    fn auto_runs_its_pick_and_beats_cr_without_foreground() {
        let sc =
            StudyScenario { id: 0, kind: FgKind::None, code: "rs:6,3".parse().unwrap(), nodes: 16, chunks: 40, max_active: 1, seed: 4 };
        let opts = SimOptions { model: Model::Fluid, ..Default::default() };
        let cands = auto::candidates(auto::Pick::Auto, auto::Pick::Auto);
        let row = evaluate(&sc, &cands, &opts, PhaseOptions::default(), AutoMode::Once).unwrap();
        let pick = row.fixed.iter().find(|f| f.0 == row.auto.chosen).unwrap().1;
        assert_eq!(row.auto_seconds, pick);
        let cr = row.fixed.iter().find(|f| f.0 == "cr+random").unwrap().1;
        assert!(row.auto_seconds < cr * 0.8, "auto {} s, CR {} s", row.auto_seconds, cr);
        // With no foreground the prediction is the run itself.
        assert!((row.auto.predicted_seconds / row.auto_seconds - 1.0).abs() < 1e-9);
        assert!(row.auto_over_best <= 1.0 + 1e-9);
    }

    /// Issue 72's scenarios: every changing kind and code, in turn, within the bounds.
    #[test]
    fn changing_scenarios_cover_kinds_codes_and_concurrencies() {
        let a = generate_changing(7, 54);
        assert_eq!(a.len(), 54);
        for kind in CHANGING {
            assert_eq!(a.iter().filter(|s| s.kind == kind).count(), 18);
        }
        for code in ["rs:6,3", "rs:10,4", "lrc:6,2,2", "clay:10,4,13"] {
            assert!(a.iter().any(|s| s.code.to_string() == code));
        }
        for m in [1, 3, usize::MAX] {
            assert!(a.iter().any(|s| s.max_active == m));
        }
        assert!(a.iter().all(|s| (10..=60).contains(&s.nodes) && s.nodes > s.code.n() && (20..=500).contains(&s.chunks)));
        // Moving hot spots: a tenth of the nodes hot at any time, and the set moves.
        let sc = StudyScenario { kind: FgKind::MovingHot, nodes: 30, ..a[0].clone() };
        let (net, _) = sc.network();
        let hot_at = |t: f64| net.foreground.iter().filter(|f| f.at(t) > 0.0).map(|f| f.node).collect::<std::collections::BTreeSet<_>>();
        assert_eq!(hot_at(0.0).len(), 3);
        assert!((1..200).any(|i| hot_at(i as f64 * 10.0) != hot_at(0.0)), "the hot spots move");
    }

    /// Following the foreground beats every fixed candidate on the geometric mean over
    /// changing scenarios (the study's claim, on a dozen of them).
    #[test]
    fn following_beats_every_fixed_candidate_on_the_geometric_mean() {
        let opts = SimOptions { model: Model::Fluid, ..Default::default() };
        let cands = auto::candidates(auto::Pick::Auto, auto::Pick::Auto);
        let rows: Vec<StudyRow> = generate_changing(3, 12)
            .iter()
            .map(|sc| {
                evaluate(
                    &StudyScenario { chunks: sc.chunks.min(150), ..sc.clone() },
                    &cands,
                    &opts,
                    PhaseOptions::default(),
                    AutoMode::Follow,
                )
                .unwrap()
            })
            .collect();
        let geomean = |f: &dyn Fn(&StudyRow) -> f64| (rows.iter().map(|r| f(r).ln()).sum::<f64>() / rows.len() as f64).exp();
        let auto = geomean(&|r| r.auto_seconds);
        for (i, c) in cands.iter().enumerate() {
            let fixed = geomean(&|r| r.fixed[i].1);
            assert!(auto < fixed, "auto following {auto:.1} s, {c} {fixed:.1} s");
        }
    }
}
