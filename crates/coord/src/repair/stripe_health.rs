//! Which chunks of a stripe can still be read, and why the others cannot: what a degraded
//! read says when too few remain, what `status` counts (bad chunks apart from chunks on
//! down or failed nodes) and lists (stripes that no longer hold enough to be rebuilt).

use crate::coordinator::Coordinator;
use crate::metadata::StripeRecord;
use kintsugi_plan::NodeId;
use kintsugi_proto::{ChunkId, UnrepairableStripe};
use kintsugi_proto::{Scarce, WireError};
use std::collections::{BTreeMap, BTreeSet};

/// One chunk of a stripe, as a planner may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkHealth {
    Healthy,
    /// Reported corrupt or missing on a node that is up, not repaired yet.
    Bad,
    /// On a node that has stopped sending heartbeats.
    NodeDown(NodeId),
    /// On a node an operator failed (`fail`, `node remove`).
    NodeFailed(NodeId),
    /// On a node the reader asked to avoid (it did not answer the reader).
    Avoided(NodeId),
}

impl ChunkHealth {
    fn describe(self, chunk: &ChunkId) -> String {
        match self {
            ChunkHealth::Healthy => format!("{chunk} healthy"),
            ChunkHealth::Bad => format!("{chunk} reported corrupt or missing"),
            ChunkHealth::NodeDown(n) => format!("{chunk} on node {n}, which is down"),
            ChunkHealth::NodeFailed(n) => format!("{chunk} on node {n}, which has failed"),
            ChunkHealth::Avoided(n) => format!("{chunk} on node {n}, which does not answer the reader"),
        }
    }
}

/// A stripe's chunks, each with its health (a filler, zeros that are always there, is healthy).
pub(crate) fn chunk_health(
    s: &StripeRecord,
    alive: &BTreeMap<NodeId, String>,
    failed: &BTreeSet<NodeId>,
    avoid: &BTreeSet<NodeId>,
) -> Vec<ChunkHealth> {
    (0..s.nodes.len())
        .map(|j| {
            let n = s.nodes[j];
            if s.is_filler(j) {
                ChunkHealth::Healthy
            } else if failed.contains(&n) {
                ChunkHealth::NodeFailed(n)
            } else if !alive.contains_key(&n) {
                ChunkHealth::NodeDown(n)
            } else if s.bad[j] {
                ChunkHealth::Bad
            } else if avoid.contains(&n) {
                ChunkHealth::Avoided(n)
            } else {
                ChunkHealth::Healthy
            }
        })
        .collect()
}

/// Whether the code can rebuild every unhealthy chunk of the stripe from its healthy ones.
pub(crate) fn recoverable(s: &StripeRecord, health: &[ChunkHealth]) -> bool {
    let Ok(code) = s.code.build() else { return false };
    let healthy: Vec<usize> = (0..health.len()).filter(|&j| health[j] == ChunkHealth::Healthy).collect();
    (0..health.len()).filter(|&j| health[j] != ChunkHealth::Healthy).all(|j| code.choose_helpers(j, &healthy).is_ok())
}

/// Words for every chunk of `s` that cannot be used, with the count of those that can.
pub(crate) fn unhealthy_words(s: &StripeRecord, health: &[ChunkHealth]) -> (usize, String) {
    let healthy = health.iter().filter(|h| **h == ChunkHealth::Healthy).count();
    let words: Vec<String> =
        health.iter().enumerate().filter(|(_, h)| **h != ChunkHealth::Healthy).map(|(j, h)| h.describe(&ChunkId::new(s.id, j))).collect();
    (healthy, words.join("; "))
}

/// Why a stripe cannot be rebuilt, in words: its healthy count against the code's k, then
/// each chunk that cannot be used.
fn shortfall(s: &StripeRecord, health: &[ChunkHealth]) -> String {
    let (healthy, words) = unhealthy_words(s, health);
    let k = s.code.build().map(|c| c.k()).unwrap_or(0);
    format!("{healthy} healthy chunk(s), {} needs {k}: {words}", s.code)
}

impl Coordinator {
    /// Why chunk `index` of stripe ordinal `stripe` of object `name` cannot be read: the
    /// error a degraded read ends with once fewer than k healthy chunks remain.
    pub(crate) fn unreadable(&self, name: &str, stripe: usize, s: &StripeRecord, index: usize, avoid: &BTreeSet<NodeId>) -> WireError {
        let failed = self.failed_nodes().unwrap_or_default();
        let health = chunk_health(s, &self.alive(), &failed, avoid);
        let (mut healthy, mut words) = unhealthy_words(s, &health);
        if health.get(index) == Some(&ChunkHealth::Healthy) {
            // The chunk being rebuilt is no helper of its own, whatever its record says.
            healthy -= 1;
            words = format!("{} not served to the reader; {words}", ChunkId::new(s.id, index));
        }
        let k = s.code.build().map(|c| c.k()).unwrap_or(0);
        let message = format!(
            "object '{name}' is unreadable: stripe {stripe} (id {}) has {healthy} healthy chunk(s), and {} needs {k} to rebuild \
             chunk {}: {words}",
            s.id,
            s.code,
            ChunkId::new(s.id, index)
        );
        WireError::shortfall(Scarce::Chunks, k as u64, healthy as u64, message)
    }

    /// Why a chunk of stripe `s` cannot be rebuilt: fewer healthy chunks than the code needs.
    pub(crate) fn unrepairable(&self, s: &StripeRecord, avoid: &BTreeSet<NodeId>) -> WireError {
        let failed = self.failed_nodes().unwrap_or_default();
        let health = chunk_health(s, &self.alive(), &failed, avoid);
        let healthy = health.iter().filter(|h| **h == ChunkHealth::Healthy).count();
        let k = s.code.build().map(|c| c.k()).unwrap_or(0);
        let message = format!("stripe {} is unrepairable: {}", s.id, shortfall(s, &health));
        WireError::shortfall(Scarce::Chunks, k as u64, healthy as u64, message)
    }
}

/// What `status` says of the chunks to rebuild.
pub(crate) struct HealthSummary {
    pub bad: usize,
    pub on_down_nodes: usize,
    pub unrepairable: Vec<UnrepairableStripe>,
    pub waiting: Vec<String>,
}

impl Coordinator {
    /// Bad chunks, chunks on down or failed nodes, and the stripes that cannot be rebuilt,
    /// over committed stripes (as [`Coordinator::lost_chunks`] counts them). Reads the lost
    /// chunks' index entries, and the records of only the stripes that lost two or more
    /// chunks (one lost chunk is always rebuildable) and of a few others, to tell which wait
    /// for a node to rebuild on.
    pub(crate) fn health_summary(&self) -> Result<HealthSummary, WireError> {
        let (alive, failed, none) = (self.alive(), self.failed_nodes()?, BTreeSet::new());
        let lost = self.lost_with_holders(&|_, _| true)?;
        let mut sum = HealthSummary { bad: 0, on_down_nodes: 0, unrepairable: Vec::new(), waiting: Vec::new() };
        let mut per_stripe: BTreeMap<u64, usize> = BTreeMap::new();
        for (&(sid, _), n) in &lost {
            if failed.contains(n) || !alive.contains_key(n) {
                sum.on_down_nodes += 1;
            } else {
                sum.bad += 1;
            }
            *per_stripe.entry(sid).or_default() += 1;
        }
        let mut singles = 0;
        let look: Vec<u64> = per_stripe
            .iter()
            .filter(|&(_, &c)| {
                singles += (c == 1) as usize;
                c > 1 || singles <= WAITING_LOOKS
            })
            .map(|(&id, _)| id)
            .collect();
        let stripes = self.meta.stripes_of(&look)?;
        let up: Vec<NodeId> = alive.keys().copied().filter(|n| !failed.contains(n)).collect();
        let mut doomed = Vec::new();
        for s in stripes.iter().filter(|s| s.crcs.iter().all(|c| c.is_some())) {
            let health = chunk_health(s, &alive, &failed, &none);
            if health.iter().all(|h| *h == ChunkHealth::Healthy) {
                continue;
            }
            if !recoverable(s, &health) {
                doomed.push((s, shortfall(s, &health)));
                continue;
            }
            // A chunk on a down node goes to a node outside the stripe: is there one?
            let down: Vec<NodeId> = health
                .iter()
                .filter_map(|h| match h {
                    ChunkHealth::NodeDown(n) | ChunkHealth::NodeFailed(n) => Some(*n),
                    _ => None,
                })
                .collect();
            if !down.is_empty() && up.iter().all(|n| s.nodes.contains(n)) && sum.waiting.len() < 100 {
                let who: Vec<String> = down.iter().map(|n| format!("node {n}")).collect();
                sum.waiting.push(format!("stripe {}: no eligible node; waiting for {} or a replacement", s.id, who.join(" and ")));
            }
        }
        if !doomed.is_empty() {
            // The objects with bytes in them, by name.
            for (s, why) in doomed {
                sum.unrepairable.push(UnrepairableStripe { stripe: s.id, objects: self.meta.stripe_objects(s.id)?, why });
            }
        }
        Ok(sum)
    }
}

/// Stripes with one lost chunk whose records `status` reads to list those waiting for a
/// node (the list shows 100).
const WAITING_LOOKS: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_codes::CodeSpec;

    fn stripe(code: &str, n: usize) -> StripeRecord {
        let s = StripeRecord::new(7, code.parse::<CodeSpec>().unwrap(), 0, 4096, (0..n as NodeId).collect());
        StripeRecord { crcs: vec![Some(0); n], ..s }
    }

    #[test]
    fn any_m_unhealthy_chunks_of_rs_are_recoverable_and_m_plus_one_are_not() {
        let mut s = stripe("rs:6,3", 9);
        let alive: BTreeMap<NodeId, String> = (0..9).filter(|&n| n != 4).map(|n| (n, String::new())).collect();
        let failed = BTreeSet::from([8]);
        s.bad[1] = true;
        let h = chunk_health(&s, &alive, &failed, &BTreeSet::new());
        assert_eq!(h[1], ChunkHealth::Bad);
        assert_eq!(h[4], ChunkHealth::NodeDown(4));
        assert_eq!(h[8], ChunkHealth::NodeFailed(8));
        assert!(recoverable(&s, &h));
        let h = chunk_health(&s, &alive, &failed, &BTreeSet::from([2]));
        assert_eq!(h[2], ChunkHealth::Avoided(2));
        assert!(!recoverable(&s, &h));
        let (healthy, words) = unhealthy_words(&s, &h);
        assert_eq!(healthy, 5);
        assert!(words.contains("s00000007.001 reported corrupt or missing"), "{words}");
        assert!(words.contains("s00000007.004 on node 4, which is down"), "{words}");
    }
}
