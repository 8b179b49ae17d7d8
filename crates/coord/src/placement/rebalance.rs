//! Rebalancing: when a node joins (or on `kintsugi rebalance`), chunks move from the fullest
//! nodes to the emptiest until every node's fill (bytes of chunks it holds over its capacity)
//! is within `rebalance_spread` of the mean, as Ceph backfills onto a new OSD. Background
//! work, throttled to `rebalance_bytes_per_s`, a few moves at a time so repairs interleave,
//! with progress in `status`. A chunk only moves to a node holding no chunk of its stripe
//! (one chunk of a stripe per node); Geo stripes keep their placement group and stay.

use crate::coordinator::Coordinator;
use crate::metadata::StripeRecord;
use kintsugi_plan::NodeId;
use kintsugi_proto::RebalanceStatus;
use kintsugi_proto::WireError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Moves planned (and run) per round; the repair lock is released between rounds.
const ROUND: usize = 8;

/// A planned move of chunk `index` of stripe `stripe` from `from` to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    pub stripe: u64,
    pub index: usize,
    pub from: NodeId,
    pub to: NodeId,
    pub bytes: u64,
}

/// Each node's fill: bytes of chunks it holds over its capacity (equal capacities where
/// unknown).
fn fills(held: &BTreeMap<NodeId, u64>, capacity: &HashMap<NodeId, u64>) -> BTreeMap<NodeId, f64> {
    let known: Vec<u64> = held.keys().filter_map(|n| capacity.get(n).copied().filter(|&c| c > 0)).collect();
    let fallback = if known.is_empty() { 1 } else { known.iter().sum::<u64>() / known.len() as u64 };
    held.iter().map(|(&n, &b)| (n, b as f64 / capacity.get(&n).copied().filter(|&c| c > 0).unwrap_or(fallback) as f64)).collect()
}

/// How far apart the fullest and emptiest nodes are, relative to the mean fill.
pub(crate) fn spread(fill: &BTreeMap<NodeId, f64>) -> f64 {
    let (Some(max), Some(min)) = (fill.values().copied().reduce(f64::max), fill.values().copied().reduce(f64::min)) else { return 0.0 };
    let mean = fill.values().sum::<f64>() / fill.len() as f64;
    if mean <= 0.0 {
        0.0
    } else {
        (max - min) / mean
    }
}

/// Up to `limit` moves from the fullest nodes to the emptiest among `nodes`, each a chunk of
/// a plain stripe (committed, healthy, not Geo) whose stripe has nothing on the receiver,
/// while the spread stays above `target`.
/// `held` is each node's bytes of chunks; `stripes` the candidates to move (stripes with
/// chunks on the fullest nodes).
pub(crate) fn plan_moves(
    stripes: &[StripeRecord],
    mut held: BTreeMap<NodeId, u64>,
    capacity: &HashMap<NodeId, u64>,
    target: f64,
    limit: usize,
) -> Vec<Move> {
    let movable = |s: &StripeRecord| !s.open && s.slot.is_none() && s.owners.is_empty() && s.crcs.iter().all(|c| c.is_some());
    let mut moves = Vec::new();
    let mut taken: std::collections::HashSet<u64> = Default::default();
    while moves.len() < limit {
        let fill = fills(&held, capacity);
        if spread(&fill) <= target {
            break;
        }
        let by_fill = |a: &(&NodeId, &f64), b: &(&NodeId, &f64)| a.1.total_cmp(b.1).then(a.0.cmp(b.0));
        let (&to, _) = fill.iter().min_by(by_fill).expect("nodes");
        // From the fullest node that has a chunk the emptiest can take.
        let mut donors: Vec<(NodeId, f64)> = fill.iter().map(|(&n, &f)| (n, f)).filter(|&(n, _)| n != to).collect();
        donors.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut found = None;
        for (from, _) in donors {
            let cand = stripes.iter().filter(|s| movable(s) && !taken.contains(&s.id) && !s.nodes.contains(&to)).find_map(|s| {
                let i = s.nodes.iter().position(|&n| n == from)?;
                (!s.bad[i]).then_some((s, i))
            });
            if let Some((s, i)) = cand {
                // A move that would leave the donor emptier than the receiver only swaps them.
                let after = fills(&BTreeMap::from([(from, held[&from] - s.chunk_len), (to, held[&to] + s.chunk_len)]), capacity);
                if after[&from] + 1e-12 >= after[&to] {
                    found = Some(Move { stripe: s.id, index: i, from, to, bytes: s.chunk_len });
                }
                break;
            }
        }
        let Some(m) = found else { break };
        *held.get_mut(&m.from).expect("donor") -= m.bytes;
        *held.get_mut(&m.to).expect("receiver") += m.bytes;
        taken.insert(m.stripe);
        moves.push(m);
    }
    moves
}

impl Coordinator {
    /// Rebalances until the fill spread is within `rebalance_spread`, or no move helps.
    pub(crate) async fn rebalance(self: &Arc<Self>) -> Result<RebalanceStatus, WireError> {
        let Ok(_one) = self.rebalancing.try_lock() else { return Err(WireError::bad_request("a rebalance is already running")) };
        let started = Instant::now();
        let mut done = RebalanceStatus { running: true, ..Default::default() };
        let target = self.cfg.rebalance_spread;
        let rate = self.cfg.rebalance_bytes_per_s.max(1.0);
        loop {
            let round = {
                // Between repairs: a round of moves never runs beside a repair of the same stripes.
                let _repair = self.repairing.lock().await;
                let nodes: Vec<NodeId> = self.placeable()?.keys().copied().collect();
                let capacity: HashMap<NodeId, u64> = self.space.capacities();
                let all = self.meta.held_bytes()?;
                let held: BTreeMap<NodeId, u64> = nodes.iter().map(|n| (*n, all.get(n).copied().unwrap_or(0))).collect();
                let stripes = self.move_candidates(&held, &capacity)?;
                done.spread = spread(&fills(&held, &capacity));
                let moves = plan_moves(&stripes, held, &capacity, target, ROUND);
                *self.rebalance_status.lock().expect("rebalance lock") = Some(done.clone());
                if moves.is_empty() {
                    break;
                }
                let mut moved = 0;
                for m in moves {
                    let t = Instant::now();
                    match self.move_chunk(m.stripe, m.index, m.to, self.cfg.repair_slice).await {
                        Ok(()) => {
                            done.moved += 1;
                            done.bytes += m.bytes;
                            moved += 1;
                        }
                        Err(e) => {
                            done.failed += 1;
                            tracing::warn!("rebalance: chunk of stripe {} from node {} to node {}: {e}", m.stripe, m.from, m.to);
                        }
                    }
                    *self.rebalance_status.lock().expect("rebalance lock") = Some(done.clone());
                    // The throttle: this move's bytes at `rebalance_bytes_per_s`.
                    let due = Duration::from_secs_f64(m.bytes as f64 / rate);
                    if let Some(wait) = due.checked_sub(t.elapsed()) {
                        tokio::time::sleep(wait).await;
                    }
                }
                moved
            };
            if round == 0 {
                break;
            }
        }
        done.running = false;
        done.seconds = started.elapsed().as_secs_f64();
        tracing::info!("rebalance: {} chunk(s) moved ({} bytes), fill spread {:.1}%", done.moved, done.bytes, done.spread * 100.0);
        *self.rebalance_status.lock().expect("rebalance lock") = Some(done.clone());
        Ok(done)
    }

    /// Starts a rebalance in the background (a node joined), unless one is running.
    pub(crate) fn rebalance_soon(self: &Arc<Self>, why: String) {
        let me = self.clone();
        tokio::spawn(async move {
            // Let the node's first heartbeats and inventory arrive.
            tokio::time::sleep(Duration::from_millis(me.cfg.dead_after_ms.min(5_000))).await;
            tracing::info!("rebalance: {why}");
            if let Err(e) = me.rebalance().await {
                tracing::info!("rebalance: {e}");
            }
        });
    }
}

impl Coordinator {
    /// Stripes a round may move a chunk of: a few hundred movable ones with a chunk on each
    /// of the fuller half of the nodes (the donors), read from their chunk indexes.
    fn move_candidates(&self, held: &BTreeMap<NodeId, u64>, capacity: &HashMap<NodeId, u64>) -> Result<Vec<StripeRecord>, WireError> {
        let fill = fills(held, capacity);
        let mut donors: Vec<(NodeId, f64)> = fill.into_iter().collect();
        donors.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut ids = std::collections::BTreeSet::new();
        for (n, _) in donors.iter().take(donors.len().div_ceil(2)) {
            let chunks = self.meta.node_chunks_from(*n, None, CANDIDATES_PER_DONOR * 4)?;
            ids.extend(chunks.iter().filter(|c| c.whole && !c.bad && !c.filler).map(|c| c.stripe).take(CANDIDATES_PER_DONOR));
        }
        self.meta.stripes_of(&ids.into_iter().collect::<Vec<_>>())
    }
}

/// Chunks of each donor a round considers moving.
const CANDIDATES_PER_DONOR: usize = 256;

/// Bytes of chunks each of `nodes` holds.
#[cfg(test)]
fn held_bytes(stripes: &[StripeRecord], nodes: &[NodeId]) -> BTreeMap<NodeId, u64> {
    let mut held: BTreeMap<NodeId, u64> = nodes.iter().map(|&n| (n, 0)).collect();
    for s in stripes {
        for n in &s.nodes {
            if let Some(b) = held.get_mut(n) {
                *b += s.chunk_len;
            }
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripe(id: u64, nodes: Vec<NodeId>) -> StripeRecord {
        let n = nodes.len();
        StripeRecord { crcs: vec![Some(0); n], ..StripeRecord::new(id, "rs:2,1".parse().unwrap(), 0, 100, nodes) }
    }

    #[test]
    fn a_new_node_is_filled_to_the_mean_and_no_stripe_gets_two_chunks_on_it() {
        // Three nodes hold 30 stripes of three chunks; node 3 is new and empty.
        let stripes: Vec<StripeRecord> = (0..30).map(|i| stripe(i, vec![0, 1, 2])).collect();
        let nodes = [0, 1, 2, 3];
        let moves = plan_moves(&stripes, held_bytes(&stripes, &nodes), &HashMap::new(), 0.1, 1000);
        // 90 chunks over 4 nodes is 22.5 each: node 3 takes enough that the fullest and
        // emptiest are within 10% of the mean (21 leaves 23, 23, 23, 21: 8.9%).
        let mut held = [30usize, 30, 30, 0];
        for m in &moves {
            held[m.from as usize] -= 1;
            held[m.to as usize] += 1;
        }
        let (max, min) = (*held.iter().max().unwrap() as f64, *held.iter().min().unwrap() as f64);
        assert!((max - min) / 22.5 <= 0.1 && moves.len() >= 21, "{held:?}");
        let mut per_stripe = std::collections::HashSet::new();
        for m in &moves {
            assert_eq!(m.to, 3);
            assert!(per_stripe.insert(m.stripe), "stripe {} moved twice onto node 3", m.stripe);
        }
        // The donors give evenly.
        let from: Vec<usize> = (0..3).map(|n| moves.iter().filter(|m| m.from == n).count()).collect();
        assert!(from.iter().max().unwrap() - from.iter().min().unwrap() <= 1, "{from:?}");
    }

    #[test]
    fn nothing_moves_when_balanced_or_when_no_chunk_fits() {
        let stripes: Vec<StripeRecord> = (0..4).map(|i| stripe(i, vec![0, 1, 2])).collect();
        assert!(plan_moves(&stripes, held_bytes(&stripes, &[0, 1, 2]), &HashMap::new(), 0.1, 100).is_empty());
        // Every stripe already has a chunk on every node: none can go to node 2 twice.
        let stripes: Vec<StripeRecord> = (0..4).map(|i| stripe(i, vec![0, 1])).collect();
        let moves = plan_moves(&stripes, held_bytes(&stripes, &[0, 1, 2]), &HashMap::new(), 0.1, 100);
        assert!(moves.iter().all(|m| m.to == 2) && moves.len() <= 4);
    }
}
