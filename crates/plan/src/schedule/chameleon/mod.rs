//! ChameleonEC (Zhou et al., 2024): repair planned in phases from each node's residual
//! bandwidth. Within a phase, every lost chunk's 2k transfer tasks (k uploads, k downloads)
//! go to the least-loaded nodes (`dispatch`), a chunk that would not finish within the
//! phase waits for the next one (its tentative tasks rolled back; the phase goes on with
//! the other chunks), and the tasks of each chunk are paired into a repair tree of any
//! shape (`paths`, the paper's Algorithm 1), which runs slice-pipelined.

pub mod dispatch;
pub mod paths;

use super::{Cluster, LostChunk};
use crate::error::Result;
use crate::graph::NodeId;
use dispatch::Counters;

/// What the planner needs besides the cluster.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Length of a phase, seconds (the paper's default: 20 s on 10 Gb/s links).
    pub phase_seconds: f64,
    /// Bytes of a chunk (one task moves one chunk).
    pub chunk_bytes: f64,
}

/// One chunk's plan: its sources (shards, in the order their tree lists them), where each
/// sends (the index of another source, or None for the destination), the destination,
/// and the phase it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreePlan {
    pub helpers: Vec<usize>,
    pub parents: Vec<Option<usize>>,
    pub destination: NodeId,
    pub phase: u32,
}

/// Plans every chunk of `lost`, phase after phase. `pools[c]` holds chunk c's candidate
/// helper shards and how many it needs (k, or an LRC group's size). A chunk that does
/// not fit a phase that already holds others is deferred; a phase always takes at least
/// one chunk, so planning ends.
pub fn plan(lost: &[LostChunk], pools: &[(Vec<usize>, usize)], cluster: &Cluster, cfg: Config) -> Result<Vec<TreePlan>> {
    let mut out: Vec<Option<TreePlan>> = vec![None; lost.len()];
    let mut todo: Vec<usize> = (0..lost.len()).collect();
    let mut phase = 0u32;
    while !todo.is_empty() {
        let mut counters = Counters::default();
        let mut deferred = Vec::new();
        let mut taken = 0usize;
        for &c in &todo {
            let mut trial = counters.clone();
            let d = dispatch::dispatch(&lost[c], &pools[c], cluster, cfg.chunk_bytes, &mut trial)?;
            let time = trial.finish_time(&d.involved(), cluster, cfg.chunk_bytes);
            if time > cfg.phase_seconds && taken > 0 {
                deferred.push(c);
                continue;
            }
            counters = trial;
            taken += 1;
            let (helpers, parents) = paths::pair(&d, &lost[c]);
            out[c] = Some(TreePlan { helpers, parents, destination: d.destination, phase });
        }
        todo = deferred;
        phase += 1;
    }
    Ok(out.into_iter().map(|p| p.expect("every chunk planned in some phase")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::random_lost_chunks;

    /// Phases hold what their links can move in T_phase: replaying each phase's tasks, no
    /// node needs longer than the phase unless the phase has a single chunk; every chunk is
    /// planned once; a short phase spreads the chunks over more phases.
    #[test]
    fn phases_fit_their_length_and_take_every_chunk() {
        let lost = random_lost_chunks(20, 60, 9, 5);
        let pools: Vec<(Vec<usize>, usize)> = lost.iter().map(|c| (c.available(), 6)).collect();
        let cluster = Cluster::homogeneous((1..20).collect());
        let mut phases_seen = Vec::new();
        for phase_seconds in [1e9, 4.0, 2.0] {
            let plans = plan(&lost, &pools, &cluster, Config { phase_seconds, chunk_bytes: 1.0 }).unwrap();
            assert_eq!(plans.len(), lost.len());
            let phases = plans.iter().map(|p| p.phase).max().unwrap() + 1;
            for ph in 0..phases {
                // Replay the phase: every helper uploads once, every node downloads what
                // its children send (the destination: the helpers without a parent).
                let (mut up, mut down) = (std::collections::HashMap::new(), std::collections::HashMap::new());
                let mut n = 0;
                for (c, p) in plans.iter().enumerate().filter(|(_, p)| p.phase == ph) {
                    n += 1;
                    assert_eq!(p.helpers.len(), 6);
                    let node = |i: usize| lost[c].placement[p.helpers[i]].expect("a helper is available");
                    for (i, par) in p.parents.iter().enumerate() {
                        *up.entry(node(i)).or_insert(0.0) += 1.0;
                        *down.entry(par.map_or(p.destination, node)).or_insert(0.0) += 1.0;
                    }
                }
                assert!(n > 0, "phase {ph} is empty");
                let busiest = up.values().chain(down.values()).fold(0.0f64, |a, &b| a.max(b));
                assert!(n == 1 || busiest <= phase_seconds, "phase {ph}: {n} chunks, a node busy {busiest} > {phase_seconds}");
            }
            phases_seen.push(phases);
        }
        assert_eq!(phases_seen[0], 1, "an endless phase takes everything");
        assert!(phases_seen[1] > 1 && phases_seen[2] > phases_seen[1], "shorter phases, more of them: {phases_seen:?}");
    }
}
