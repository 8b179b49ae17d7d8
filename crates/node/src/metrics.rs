//! A node's Prometheus metrics, read from its counters at each scrape: bytes it sent and
//! received for clients (foreground) and for repairs and degraded reads, helper bytes read
//! from its chunks, rebuilt bytes stored, repairs running, timeslot waits, what it stores.

use crate::exec::Executor;
use kintsugi_metrics::prometheus_client::collector::Collector;
use kintsugi_metrics::prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use kintsugi_metrics::prometheus_client::metrics::counter::ConstCounter;
use kintsugi_metrics::prometheus_client::metrics::gauge::ConstGauge;
use kintsugi_metrics::prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// The registry a node serves; every sample carries the node's id.
pub fn registry(exec: &Arc<Executor>) -> Registry {
    let mut r = Registry::with_prefix_and_labels("kintsugi_node", [("node".into(), exec.node.to_string().into())].into_iter());
    r.register_collector(Box::new(Counters(Arc::downgrade(exec))));
    r
}

struct Counters(Weak<Executor>);

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("node counters")
    }
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<&Unit>, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, unit, c.metric_type())?)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<&Unit>, v: f64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, unit, g.metric_type())?)
}

impl Collector for Counters {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(x) = self.0.upgrade() else { return Ok(()) };
        let c = &x.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        // One family: bytes on the network by class and direction.
        let mut m = e.encode_descriptor(
            "network",
            "Bytes this node sent and received: foreground (clients' chunk writes and reads) and repair (repair graphs and degraded reads)",
            Some(&Unit::Bytes),
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (class, direction, v) in [
            ("foreground", "sent", load(&c.fg_sent)),
            ("foreground", "received", load(&c.fg_received)),
            ("repair", "sent", load(&c.sent)),
            ("repair", "received", load(&c.received)),
        ] {
            let labels = [("class", class), ("direction", direction)];
            ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
        }
        counter(
            &mut e,
            "repair_read",
            "Helper bytes repairs and degraded reads took from this node's chunks",
            Some(&Unit::Bytes),
            load(&c.read),
        )?;
        counter(&mut e, "repair_written", "Rebuilt chunk bytes this node stored", Some(&Unit::Bytes), load(&c.written))?;
        counter(
            &mut e,
            "timeslot_waits",
            "Transfers that waited at this node's timeslot gates (RepairBoost)",
            None,
            x.timeslots.waited.load(Ordering::Relaxed),
        )?;
        gauge(&mut e, "active_repairs", "Repair graphs running on this node", None, load(&c.active) as f64)?;
        gauge(&mut e, "connections", "Connections open to this node", None, load(&c.connections) as f64)?;
        counter(
            &mut e,
            "crc_failures",
            "Chunk blocks whose CRC-32C did not match on a read",
            None,
            x.store.crc_failures.load(Ordering::Relaxed),
        )?;
        let (chunks, bytes) = x.store.usage();
        gauge(&mut e, "chunks", "Chunks this node stores", None, chunks as f64)?;
        gauge(&mut e, "stored", "Bytes of chunks this node stores", Some(&Unit::Bytes), bytes as f64)?;
        if let Some(d) = x.store.disk() {
            counter(&mut e, "disk_busy_seconds", "Seconds of I/O the emulated disk has served or queued", None, d.busy_seconds() as u64)?;
        }
        Ok(())
    }
}
