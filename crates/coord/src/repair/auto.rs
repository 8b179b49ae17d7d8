//! `--method auto` / `--scheduler auto` on the cluster (issue 43): before a full-node repair,
//! and again before each ChameleonEC phase, every candidate (CR, PPR, ECPipe with random
//! sources and with RepairBoost, and ChameleonEC) is planned on the cluster's own lost
//! chunks and run in the simulator on the foreground its nodes reported over the last
//! minute, replayed from now (`kintsugi_sim::auto`); the fastest runs for real.
//!
//! The prediction sees what the planners see: each node's link capacity as it reports it
//! (configured or read from its interface), the foreground series of its reports, the
//! stripes' placements, which nodes are up, and the repairs a destination runs at once.
//! The foreground is users' traffic, which shares each link with repair flow by flow
//! (`Network::elastic_foreground`) rather than taking its rate first.

use crate::coordinator::Coordinator;
use crate::metadata::PendingRepair;
use crate::repair::options::{RepairAsk, TimeslotGating};
use kintsugi_plan::schedule::{LostChunk, Scheduler};
use kintsugi_plan::{NodeId, RepairGraph, Shape};
use kintsugi_proto::WireError;
use kintsugi_proto::{AutoChoice, AutoPrediction};
use kintsugi_sim::auto::{self, Candidate};
use kintsugi_sim::chameleon_phases::PhaseOptions;
use kintsugi_sim::scenario::{FullNode, Given};
use kintsugi_sim::{Direction, Foreground, Model, Network, SimOptions};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far back the foreground record `auto` replays reaches.
const HISTORY: Duration = Duration::from_secs(60);
/// The link speed predictions assume where no node reports one (1 Gb/s). With no capacity
/// known, every node is alike and no foreground is subtracted, so only the methods'
/// shapes and the chunks' placement tell candidates apart, whatever the speed.
const NOMINAL_LINK: f64 = 125e6;

impl Coordinator {
    /// Predicts every candidate `ask` allows for `todo` and picks the fastest; `phase` is
    /// the ChameleonEC phase it is made before (0: the start). CPU-bound: call it off the
    /// async runtime.
    pub(crate) fn decide_auto(&self, todo: &[PendingRepair], ask: RepairAsk, phase: usize) -> Result<(Candidate, AutoChoice), WireError> {
        let (scenario, net, history) = self.prediction_input(todo)?;
        let cands = auto::candidates(ask.method, ask.scheduler);
        // The fluid model: one flow per pipelined repair, fast enough to run every
        // candidate on a thousand chunks in a small share of a phase.
        let opts = SimOptions { model: Model::Fluid, ..Default::default() };
        let d = auto::decide(&scenario, &net, &history, &opts, self.phase_options(), &cands)
            .map_err(|e| WireError::bad_request(format!("auto: {e}")))?;
        let choice = AutoChoice {
            phase,
            chunks: todo.len(),
            chosen: d.chosen.clone(),
            predicted_seconds: d.predicted_seconds,
            decide_seconds: d.decide_seconds,
            predictions: d
                .predictions
                .iter()
                .map(|p| AutoPrediction { candidate: p.candidate.clone(), seconds: p.seconds, error: p.error.clone() })
                .collect(),
        };
        let table: Vec<String> = choice
            .predictions
            .iter()
            .map(|p| match p.seconds {
                Some(s) => format!("{} {s:.1} s", p.candidate),
                None => format!("{} cannot run", p.candidate),
            })
            .collect();
        tracing::info!(
            phase,
            chunks = todo.len(),
            decide_ms = (d.decide_seconds * 1e3).round(),
            "auto chose {} (predicted {:.1} s; {})",
            d.chosen,
            d.predicted_seconds,
            table.join(", ")
        );
        Ok((d.pick, choice))
    }

    /// [`decide_auto`](Self::decide_auto) on a blocking thread.
    pub(crate) async fn decide_auto_off_runtime(
        self: &Arc<Self>,
        todo: &[PendingRepair],
        ask: RepairAsk,
        phase: usize,
    ) -> Result<(Candidate, AutoChoice), WireError> {
        let (me, todo) = (self.clone(), todo.to_vec());
        tokio::task::spawn_blocking(move || me.decide_auto(&todo, ask, phase))
            .await
            .map_err(|e| WireError::bad_request(format!("auto: the prediction failed: {e}")))?
    }

    /// The simulator's view of this repair: the lost chunks of `todo` (of its most common
    /// code, where stripes of several codes lost chunks: one prediction per run), the live
    /// nodes, each node's links as reported, and its foreground now and over the last minute.
    fn prediction_input(&self, todo: &[PendingRepair]) -> Result<(FullNode, Network, auto::History), WireError> {
        let failed = self.failed_nodes()?;
        let live: BTreeSet<NodeId> = self.alive().into_keys().filter(|n| !failed.contains(n)).collect();
        let mut by_code: BTreeMap<String, Vec<(PendingRepair, crate::metadata::StripeRecord)>> = BTreeMap::new();
        for p in todo {
            if let Some(s) = self.meta.stripe(p.stripe)? {
                by_code.entry(s.code.to_string()).or_default().push((p.clone(), s));
            }
        }
        let Some((code, chunks)) = by_code.into_iter().max_by_key(|(_, v)| v.len()) else {
            return Err(WireError::bad_request("auto: no lost chunk to predict a repair for"));
        };
        // The simulator's nodes are 0..N: every live node and every node a stripe names.
        let mut all: BTreeSet<NodeId> = live.clone();
        for (_, s) in &chunks {
            all.extend(s.nodes.iter().copied());
        }
        let ids: HashMap<NodeId, NodeId> = all.iter().enumerate().map(|(i, &n)| (n, i as NodeId)).collect();
        let lost: Vec<LostChunk> = chunks
            .iter()
            .map(|(p, s)| {
                let usable = |j: usize| j != p.index && !s.bad[j] && live.contains(&s.nodes[j]);
                LostChunk {
                    placement: (0..s.nodes.len()).map(|j| usable(j).then(|| ids[&s.nodes[j]])).collect(),
                    lost: p.index,
                    avoid: s.nodes.iter().map(|n| ids[n]).collect(),
                    size: s.chunk_len,
                }
            })
            .collect();
        let chunk = chunks.iter().map(|(_, s)| s.chunk_len).max().unwrap_or(0).max(1) as usize;
        let slice = chunks.iter().map(|(p, _)| p.slice).max().unwrap_or(1).clamp(1, chunk as u64) as usize;

        let links = self.links.lock().expect("links lock").clone();
        let known: Vec<f64> = links.values().flat_map(|r| [r.capacity_up, r.capacity_down]).filter(|&c| c > 0.0).collect();
        let link = if known.is_empty() { NOMINAL_LINK } else { known.iter().sum::<f64>() / known.len() as f64 };
        let mut net = Network::homogeneous(all.len(), link);
        // A node's foreground is users' TCP traffic, which yields to repair as repair yields
        // to it: a flow on each link, not a rate taken first. Taken first, it starved every
        // prediction on the testbed under YCSB (44-64 s predicted, 15-20 s measured).
        net.elastic_foreground = true;
        for (node, &i) in &ids {
            let Some(r) = links.get(node) else { continue };
            let spec = &mut net.nodes[i as usize];
            if r.capacity_up > 0.0 {
                spec.up = r.capacity_up;
            }
            if r.capacity_down > 0.0 {
                spec.down = r.capacity_down;
            }
            // The latest report: where the forecast starts when there is no record yet.
            for (direction, rate) in [(Direction::Up, r.fg_up), (Direction::Down, r.fg_down)] {
                if rate > 0.0 {
                    net.foreground.push(Foreground { node: i, direction, points: vec![(0.0, rate)] });
                }
            }
        }
        let history = self.foreground_record.history(Instant::now(), HISTORY, &ids);
        let limit = self.destinations.current();
        let scenario = FullNode {
            nodes: all.len(),
            chunks: lost.len(),
            code: code.parse().map_err(|e| WireError::bad_request(format!("auto: code {code}: {e}")))?,
            method: Shape::Ecpipe,
            link,
            chunk,
            slice,
            seed: self.epoch,
            max_active: if limit == 0 { usize::MAX } else { limit },
            scheduler: Scheduler::Random,
            requestors: 0,
            failed: 1,
            given: Some(Arc::new(Given { lost, live: live.iter().map(|n| ids[n]).collect(), gates: gating(self.cfg.gate_timeslots) })),
        };
        Ok((scenario, net, history))
    }

    /// ChameleonEC's phases as the coordinator runs them.
    fn phase_options(&self) -> PhaseOptions {
        PhaseOptions {
            phase_seconds: self.cfg.repair_phase_ms as f64 / 1e3,
            sar: self.cfg.repair_straggler_aware,
            progress_period: self.cfg.repair_progress_ms as f64 / 1e3,
            ..Default::default()
        }
    }
}

/// The graphs the nodes hold to RepairBoost's timeslots, as the simulator takes it: a
/// pipelined graph the nodes do not gate runs as soon as its inputs allow, in the
/// prediction as on the cluster.
fn gating(g: TimeslotGating) -> Option<fn(&RepairGraph) -> bool> {
    match g {
        TimeslotGating::All => None,
        TimeslotGating::StoreAndForward => Some(|g| !g.pipelined),
        TimeslotGating::None => Some(|_| false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_plan::Pick;

    #[test]
    fn an_ask_prints_and_tells_auto_apart() {
        let fixed = RepairAsk::fixed(Shape::Ppr, Scheduler::Repairboost);
        assert!(!fixed.is_auto());
        assert_eq!(fixed.to_string(), "ppr (repairboost)");
        assert_eq!(fixed.method_or_ecpipe(), Shape::Ppr);
        let auto = RepairAsk { method: Pick::Auto, scheduler: Pick::Fixed(Scheduler::Random) };
        assert!(auto.is_auto());
        assert_eq!(auto.to_string(), "auto (random)");
        assert_eq!(auto.method_or_ecpipe(), Shape::Ecpipe);
    }
}
