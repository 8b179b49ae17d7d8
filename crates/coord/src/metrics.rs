//! The coordinator's Prometheus metrics: the cluster's state as `status` reports it, read at
//! each scrape (objects, stripes, lost chunks, nodes, capacity, repair queue), and counters
//! of the repairs this coordinator ran, by method and scheduler.

use crate::coordinator::Coordinator;
use kintsugi_metrics::encode::{counters, gauge, gauges};
use kintsugi_metrics::prometheus_client::collector::Collector;
use kintsugi_metrics::prometheus_client::encoding::DescriptorEncoder;
use kintsugi_metrics::prometheus_client::registry::{Registry, Unit};
use std::sync::{Arc, OnceLock, Weak};

use crate::repair::counters::SAR_ACTIONS;
pub use crate::repair::counters::{RepairCounters, Run, RunProgress};

/// What the metrics port reads: the coordinator, once it serves. A standby (several
/// coordinators on one etcd) serves its metrics port while it waits to lead, with none.
pub type Slot = Arc<OnceLock<Weak<Coordinator>>>;

/// The registry a coordinator serves; `counters` become the coordinator's.
pub fn registry(slot: &Slot, counters: &RepairCounters) -> Registry {
    // Known label values start at 0, so a first action shows as an increase.
    for action in SAR_ACTIONS {
        counters.sar.get_or_create(&vec![("action", action)]).inc_by(0);
    }
    for trigger in ["request", "auto"] {
        counters.runs.get_or_create(&vec![("trigger", trigger)]).inc_by(0);
    }
    let mut r = Registry::with_prefix("kintsugi");
    r.register("repair_chunks", "Lost chunks whose repair ended, by method, scheduler and outcome", counters.chunks.clone());
    r.register_with_unit("repair", "Bytes of chunks rebuilt, by method and scheduler", Unit::Bytes, counters.bytes.clone());
    r.register(
        "sar_actions",
        "What ChameleonEC's straggler-aware re-scheduling did: stragglers found, re-tuned, postponed, restarted",
        counters.sar.clone(),
    );
    r.register("repair_runs", "Repair runs begun, by trigger (request or auto)", counters.runs.clone());
    r.register_collector(Box::new(StatusCollector(slot.clone())));
    r
}

/// The cluster's state, read from `status` at each scrape.
#[derive(Debug)]
struct StatusCollector(Slot);

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Coordinator(cluster {:x})", self.cluster_id)
    }
}

/// One gauge, a sample per node.
fn per_node(e: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<&Unit>, samples: &[(u32, f64)]) -> std::fmt::Result {
    gauges(e, name, help, unit, samples.iter().map(|(node, v)| ([("node", node.to_string())], *v)))
}

impl Collector for StatusCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let leads = "1 when this coordinator serves the cluster, 0 while it stands by for another (several on one etcd)";
        let Some(coord) = self.0.get().and_then(Weak::upgrade) else { return gauge(&mut e, "leader", leads, None, 0.0) };
        gauge(&mut e, "leader", leads, None, 1.0)?;
        let s = match coord.status() {
            Ok(s) => s,
            Err(err) => {
                tracing::warn!("metrics: the cluster's status could not be read: {err}");
                return gauge(&mut e, "status_up", "Whether the cluster's status could be read for this scrape", None, 0.0);
            }
        };
        gauge(&mut e, "status_up", "Whether the cluster's status could be read for this scrape", None, 1.0)?;
        gauge(&mut e, "objects", "Objects stored", None, s.objects as f64)?;
        gauge(&mut e, "stripes", "Stripes stored", None, s.stripes as f64)?;
        gauge(&mut e, "lost_chunks", "Chunks to rebuild: bad ones and those on down nodes", None, s.lost_chunks as f64)?;
        gauge(&mut e, "bad_chunks", "Chunks found corrupt or missing on nodes that are up", None, s.bad_chunks as f64)?;
        gauge(&mut e, "chunks_on_down_nodes", "Chunks on nodes that are down or failed", None, s.chunks_on_down_nodes as f64)?;
        gauge(&mut e, "unrepairable_stripes", "Stripes with too few healthy chunks to rebuild", None, s.unrepairable.len() as f64)?;
        gauge(&mut e, "repairs_pending", "Repairs recorded and not finished", None, s.pending_repairs as f64)?;
        gauge(&mut e, "widest_code_chunks", "Chunks in the widest stripe stored", None, s.widest_code as f64)?;
        gauge(
            &mut e,
            "cannot_heal",
            "1 when the widest stripe spans every node that can take chunks: a lost node cannot be rebuilt until it returns or one is added",
            None,
            s.cannot_heal.is_some() as u8 as f64,
        )?;
        gauge(&mut e, "repair_running", "1 while a full-node or automatic repair runs", None, s.repairing as u8 as f64)?;
        let c = &s.compaction;
        gauge(&mut e, "compaction_running", "1 while a Geo compaction pass runs", None, c.running as u8 as f64)?;
        counters(&mut e, "compaction_passes", "Geo compaction passes finished", None, [(Vec::<(&str, &str)>::new(), c.passes)])?;
        counters(
            &mut e,
            "compaction_stripes",
            "Geo stripes compaction wrote (with live chunks of sparse ones) and released",
            None,
            [("written", c.total.written), ("released", c.total.freed), ("failed", c.total.failed)]
                .map(|(what, v)| ([("what", what)], v as u64)),
        )?;
        counters(
            &mut e,
            "compaction",
            "Bytes Geo compaction moved (live chunks rewritten) and freed (chunks of the stripes it released)",
            Some(&Unit::Bytes),
            [("moved", c.total.moved_bytes), ("freed", c.total.freed_bytes)].map(|(what, v)| ([("what", what)], v)),
        )?;
        gauge(
            &mut e,
            "compaction_dead",
            "Bytes of deleted objects still in sealed Geo stripes, as the last compaction pass found",
            Some(&Unit::Bytes),
            c.total.dead_bytes as f64,
        )?;
        if let Some(p) = coord.repair_counters.progress() {
            gauges(
                &mut e,
                "repair_run_chunks",
                "The running (or last) repair run's lost chunks: its total, and those repaired, failed and waiting for a node so far",
                None,
                [("total", p.run.total), ("repaired", p.repaired), ("failed", p.failed), ("waiting", p.waiting)]
                    .map(|(state, v)| ([("state", state)], v as f64)),
            )?;
            gauge(
                &mut e,
                "repair_run_started_timestamp_seconds",
                "When the running (or last) repair run began, in seconds since the epoch",
                None,
                p.run.started_ms as f64 / 1e3,
            )?;
        }
        let (used, capacity) = s.space_totals();
        gauge(&mut e, "stored", "Bytes of chunks on the nodes, as last reported", Some(&Unit::Bytes), used as f64)?;
        gauge(
            &mut e,
            "capacity",
            "Bytes the nodes may use, as last reported, each file system counted once",
            Some(&Unit::Bytes),
            capacity as f64,
        )?;
        let nodes = |f: &dyn Fn(&kintsugi_proto::NodeInfo) -> f64| -> Vec<(u32, f64)> { s.nodes.iter().map(|n| (n.id, f(n))).collect() };
        per_node(&mut e, "node_up", "1 while the node heartbeats", None, &nodes(&|n| n.alive as u8 as f64))?;
        per_node(&mut e, "node_reported_chunks", "Chunks the node holds, as it last reported", None, &nodes(&|n| n.chunks as f64))?;
        per_node(
            &mut e,
            "node_reported_used",
            "Bytes the node stores, as it last reported",
            Some(&Unit::Bytes),
            &nodes(&|n| n.used_bytes as f64),
        )?;
        per_node(&mut e, "node_capacity", "Bytes the node may use", Some(&Unit::Bytes), &nodes(&|n| n.capacity_bytes as f64))?;
        per_node(&mut e, "node_full", "1 when the node is past the full ratio", None, &nodes(&|n| n.full as u8 as f64))?;
        let residual = |up: bool| -> Vec<(u32, f64)> {
            s.nodes.iter().filter_map(|n| if up { n.residual_up } else { n.residual_down }.map(|r| (n.id, r))).collect()
        };
        per_node(
            &mut e,
            "node_residual_up_bytes_per_second",
            "Upload bandwidth left for repair, as the planners see it",
            None,
            &residual(true),
        )?;
        per_node(&mut e, "node_residual_down_bytes_per_second", "Download bandwidth left for repair", None, &residual(false))?;
        Ok(())
    }
}
