//! What the coordinator does about a phase's stragglers: asks each late repair's sink how
//! far it got, re-tunes or postpones it while the phase runs, and at the phase's end
//! cancels the postponed ones not yet half written, to be planned again.

use super::{delayed, retune, task_counts, Key, PhaseWatch, Running, Verdict, REDO_BELOW, STRAGGLER_FACTOR};
use crate::coordinator::Coordinator;
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::{NodeRequest, NodeResponse};
use std::collections::HashMap;

impl Coordinator {
    /// The fraction of `r`'s chunk its sink has written (0 when unknown).
    async fn progress(&self, r: &Running) -> f64 {
        let sink = r.graph.vertex(r.graph.sink).node;
        let Some(addr) = r.peers.get(&sink) else { return 0.0 };
        match request(addr, &NodeRequest::Progress { repair: r.repair }, self.io_timeout()).await {
            Ok(NodeResponse::Progress { bytes, .. }) => bytes as f64 / r.chunk_len.max(1) as f64,
            _ => 0.0,
        }
    }

    /// Stops `r` on every node of its graph (best effort: a node that does not answer has
    /// its part time out).
    async fn cancel(&self, r: &Running) {
        let mut set = tokio::task::JoinSet::new();
        for addr in r.peers.values() {
            let (addr, t, repair) = (addr.clone(), self.io_timeout(), r.repair);
            set.spawn(async move { request(&addr, &NodeRequest::CancelRepair { repair }, t).await });
        }
        while set.join_next().await.is_some() {}
    }

    /// One look at the phase's running repairs: stragglers re-tuned or postponed.
    pub(crate) async fn judge_stragglers(&self, w: &PhaseWatch) {
        let running: Vec<(Key, Running)> = w.running.lock().expect("sar lock").iter().map(|(&k, r)| (k, r.clone())).collect();
        let tasks = task_counts(running.iter().map(|(_, r)| &r.graph));
        let residual: HashMap<NodeId, (f64, f64)> = self
            .links
            .lock()
            .expect("links lock")
            .iter()
            .filter_map(|(&n, r)| crate::membership::bandwidth::residual_of(r).map(|res| (n, res)))
            .collect();
        let period = w.period.as_secs_f64();
        for (key, r) in running {
            let Some(&expected) = w.expected.get(&key) else { continue };
            let late = r.started.elapsed().as_secs_f64();
            if late <= STRAGGLER_FACTOR * expected || late < expected + period {
                continue;
            }
            let before = w.verdict(key);
            if matches!(before, Some(Verdict::Postponed | Verdict::Restart | Verdict::Retune(_))) {
                continue;
            }
            let done = self.progress(&r).await;
            let blamed = delayed(&r.graph, &residual, &tasks);
            let tuned = match (blamed, &r.choice, &before) {
                (Some((e, true)), Some(c), None) if e.to_relay && done < REDO_BELOW => retune(c, &r.graph, e.vertex).map(|c| (e, c)),
                _ => None,
            };
            w.counts.lock().expect("sar lock").stragglers += usize::from(before.is_none());
            match tuned {
                Some((e, c)) => {
                    tracing::info!(
                        chunk = ?key, late, expected, done, "straggler: node {}'s download from node {} re-tuned to go to the destination",
                        e.to, e.from
                    );
                    w.verdicts.lock().expect("sar lock").insert(key, Verdict::Retune(c));
                    w.counts.lock().expect("sar lock").retuned += 1;
                    self.cancel(&r).await;
                }
                None => {
                    tracing::info!(chunk = ?key, late, expected, done, blamed = ?blamed, "straggler postponed: the phase goes on without it");
                    if let Some((e, download)) = blamed {
                        w.blamed.lock().expect("sar lock").insert(key, if download { e.to } else { e.from });
                    }
                    w.verdicts.lock().expect("sar lock").insert(key, Verdict::Postponed);
                    w.counts.lock().expect("sar lock").postponed += 1;
                    w.changed.notify_waiters();
                }
            }
        }
    }

    /// At the phase's end (only postponed repairs left): those not yet half written are
    /// cancelled to be planned again. Returns how many.
    pub(crate) async fn restart_postponed(&self, w: &PhaseWatch) -> usize {
        let mut n = 0;
        for (key, r) in w.postponed_running() {
            let done = self.progress(&r).await;
            if done >= REDO_BELOW || w.restarted_before.contains(&key) {
                continue;
            }
            tracing::info!(chunk = ?key, done, "phase over: postponed straggler cancelled, to be planned again");
            w.verdicts.lock().expect("sar lock").insert(key, Verdict::Restart);
            w.counts.lock().expect("sar lock").restarted += 1;
            self.cancel(&r).await;
            n += 1;
        }
        n
    }
}
