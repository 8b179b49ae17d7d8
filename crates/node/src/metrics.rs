//! A node's Prometheus metrics, read from its counters at each scrape: bytes it sent and
//! received for clients (foreground), repairs and degraded reads, and what its link carried
//! over the last heartbeat period; helper bytes read from its chunks, rebuilt bytes stored,
//! the scrub's bytes and progress, repairs running, timeslot waits, what it stores; and
//! (histograms) how long chunk reads and durable commits take.

use crate::exec::Executor;
use kintsugi_metrics::encode::{counter, counters, gauge, gauges};
use kintsugi_metrics::prometheus_client::collector::Collector;
use kintsugi_metrics::prometheus_client::encoding::DescriptorEncoder;
use kintsugi_metrics::prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// The registry a node serves; every sample carries the node's id.
pub fn registry(exec: &Arc<Executor>) -> Registry {
    let mut r = Registry::with_prefix_and_labels("kintsugi_node", [("node".into(), exec.node.to_string().into())].into_iter());
    r.register_collector(Box::new(Counters(Arc::downgrade(exec))));
    let io = exec.store.io.enable_latency();
    r.register_with_unit("chunk_read_duration", "Verified chunk reads: the read and the checksum pass", Unit::Seconds, io.read.clone());
    r.register_with_unit(
        "chunk_commit_duration",
        "Making a written chunk durable and visible: footer, fsync, rename",
        Unit::Seconds,
        io.commit.clone(),
    );
    r
}

struct Counters(Weak<Executor>);

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("node counters")
    }
}

impl Collector for Counters {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(x) = self.0.upgrade() else { return Ok(()) };
        let c = &x.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        // Degraded reads are counted in `sent`/`received` too (the monitor reports them as
        // repair traffic): here each byte is in one class.
        let (dsent, drecv) = (load(&c.degraded_sent), load(&c.degraded_received));
        let cd = |class, direction| [("class", class), ("direction", direction)];
        counters(
            &mut e,
            "network",
            "Bytes this node sent and received: foreground (clients' chunk writes and reads), repair (repair graphs), degraded reads",
            Some(&Unit::Bytes),
            [
                (cd("foreground", "sent"), load(&c.fg_sent)),
                (cd("foreground", "received"), load(&c.fg_received)),
                (cd("repair", "sent"), load(&c.sent).saturating_sub(dsent)),
                (cd("repair", "received"), load(&c.received).saturating_sub(drecv)),
                (cd("degraded_read", "sent"), dsent),
                (cd("degraded_read", "received"), drecv),
            ],
        )?;
        let dread = load(&c.degraded_read);
        counters(
            &mut e,
            "chunk_read",
            "Bytes read from this node's chunks, by class (clients' reads, repair and degraded-read helpers, the scrub)",
            Some(&Unit::Bytes),
            [
                ([("class", "foreground")], load(&c.fg_sent)),
                ([("class", "repair")], load(&c.read).saturating_sub(dread)),
                ([("class", "degraded_read")], dread),
                ([("class", "scrub")], load(&c.scrub_read)),
            ],
        )?;
        counter(
            &mut e,
            "repair_read",
            "Helper bytes repairs and degraded reads took from this node's chunks",
            Some(&Unit::Bytes),
            load(&c.read),
        )?;
        counter(
            &mut e,
            "repair_file_read",
            "Bytes repairs' and degraded reads' helpers read from this node's chunk files (whole checksum blocks, read-ahead)",
            Some(&Unit::Bytes),
            load(&c.file_read),
        )?;
        counter(
            &mut e,
            "repair_structured",
            "Rebuilt bytes this node's sinks computed by the code's structured repair (Clay: coupling and one decode per plane) rather than by adding each helper's terms",
            Some(&Unit::Bytes),
            load(&c.structured),
        )?;
        counter(&mut e, "scrub_passes", "Scrub passes over every chunk finished", None, load(&c.scrub_passes))?;
        gauge(&mut e, "scrub_pass_chunks", "Chunks the current scrub pass checks", None, load(&c.scrub_chunks) as f64)?;
        gauge(&mut e, "scrub_pass_checked_chunks", "Chunks the current scrub pass has checked", None, load(&c.scrub_checked) as f64)?;
        if let Some(l) = x.last_link.lock().expect("link lock").clone() {
            gauges(
                &mut e,
                "link_bytes_per_second",
                "What the link carried over the last heartbeat period, by class and direction (what the coordinator's planners see)",
                None,
                [
                    (cd("foreground", "up"), l.fg_up),
                    (cd("foreground", "down"), l.fg_down),
                    (cd("repair", "up"), l.repair_up),
                    (cd("repair", "down"), l.repair_down),
                ],
            )?;
            gauges(
                &mut e,
                "link_capacity_bytes_per_second",
                "The link's configured capacity by direction (0: unknown)",
                None,
                [([("direction", "up")], l.capacity_up), ([("direction", "down")], l.capacity_down)],
            )?;
        }
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
        counter(&mut e, "crc_failures", "Chunk blocks whose CRC-32C did not match on a read", None, x.store.io.crc_failures())?;
        let (chunks, bytes) = x.store.usage();
        gauge(&mut e, "chunks", "Chunks this node stores", None, chunks as f64)?;
        gauge(&mut e, "stored", "Bytes of chunks this node stores", Some(&Unit::Bytes), bytes as f64)?;
        if let Some(d) = x.store.disk() {
            counter(&mut e, "disk_busy_seconds", "Seconds of I/O the emulated disk has served or queued", None, d.busy_seconds() as u64)?;
        }
        Ok(())
    }
}
