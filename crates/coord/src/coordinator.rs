//! The coordinator's shared state ([`Coordinator`]) and what every part of it uses: object
//! layouts, bad-chunk marks, fresh ids, the background workers' tick. `startup` opens its
//! store and serves it; `requests` routes each request to the part that answers it:
//! `membership` (heartbeats, identity, taking nodes out), `cluster_status`, `objects`
//! (versions, placement, garbage), `repair` (plans and orchestration), `auto_repair` and
//! `inventory` (what runs without being asked).

pub use crate::config::CoordConfig;
use crate::metadata::{Change, MetaStore, ObjectRecord};
use kintsugi_plan::NodeId;
use kintsugi_proto::{ChunkId, ChunkLoc, ObjectLayout, RepairReport, StripeLayout};
use kintsugi_proto::{ErrorKind, WireError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Shared state of a running coordinator.
pub struct Coordinator {
    pub cfg: CoordConfig,
    pub(crate) meta: Arc<dyn MetaStore>,
    /// Last heartbeat of each node.
    pub(crate) live: Mutex<HashMap<NodeId, (String, Instant)>>,
    /// One full-node repair at a time.
    pub(crate) repairing: tokio::sync::Mutex<()>,
    /// One sealing pass at a time.
    pub(crate) sealing: tokio::sync::Mutex<()>,
    /// Some Geo stripe may be open (set by Geo puts; cleared by a sealing pass that found
    /// none), so a cluster without Geo objects does not scan its stripes every second.
    pub(crate) maybe_open: std::sync::atomic::AtomicBool,
    /// One Geo compaction pass at a time, and what compaction has done.
    pub(crate) compaction: crate::workers::geo_compaction::Compaction,
    /// When this coordinator started: a node not heard from since is down since then.
    pub(crate) started: Instant,
    /// The widest code stored: whether a lost node can be rebuilt.
    pub(crate) code_widths: crate::workers::code_widths::CodeWidths,
    /// Each node's and file system's space, as last reported.
    pub(crate) space: crate::membership::space::Space,
    /// Each node's latest traffic report (bandwidth monitoring).
    pub(crate) links: Mutex<HashMap<NodeId, kintsugi_proto::LinkReport>>,
    /// Inventories being received and orphans seen.
    pub(crate) inventories: crate::membership::inventory::Inventories,
    /// When automatic repair last logged the chunks waiting for a node.
    pub(crate) waiting_said: crate::workers::said_at::SaidAt,
    /// What the last automatic repair did, for `status`.
    pub(crate) last_auto: Mutex<Option<RepairReport>>,
    /// The running ChameleonEC phase's straggler watch, if any.
    pub(crate) sar: Mutex<Option<Arc<crate::repair::straggler::PhaseWatch>>>,
    /// Repairs each destination node runs at once (`repair_max_active_per_destination`).
    pub(crate) destinations: crate::repair::destination_limit::DestinationLimit,
    /// Random per coordinator start, the high half of every repair id: ids never repeat
    /// across restarts or across clusters sharing hosts (and reused ports).
    pub(crate) epoch: u64,
    /// Repair ids (the low half under `epoch`), a block at a time from the metadata store.
    pub(crate) repair_ids: crate::metadata::id_blocks::IdBlocks,
    /// Timeslot batch ids, likewise.
    pub(crate) batch_ids: crate::metadata::id_blocks::IdBlocks,
    /// This cluster's id (made on the first start); nodes record it in their data
    /// directories and a node of another cluster is refused.
    pub cluster_id: u64,
    /// Index records left to publish (`object_index`).
    pub(crate) index: crate::object_index::IndexSync,
    /// Nodes being emptied by `node remove`: up and serving, but no new chunk goes there.
    pub(crate) draining: Mutex<BTreeSet<NodeId>>,
    /// Nodes removed (`node remove`) since this coordinator started, with their data
    /// directories' tokens: a heartbeat already on its way when the node was forgotten must
    /// not bring it back.
    pub(crate) removed: Mutex<BTreeMap<NodeId, String>>,
    /// One rebalance at a time, and what the running or last one did.
    pub(crate) rebalancing: tokio::sync::Mutex<()>,
    pub(crate) rebalance_status: Mutex<Option<kintsugi_proto::RebalanceStatus>>,
    /// Repairs' outcomes and bytes, for `/metrics`.
    pub(crate) repair_counters: crate::repair::counters::RepairCounters,
    /// Each node's recent traffic, for the status page's charts.
    pub(crate) link_history: crate::membership::link_history::LinkHistory,
    /// Each node's foreground over the last minutes, what `auto` replays.
    pub(crate) foreground_record: crate::membership::foreground_record::ForegroundRecord,
}

/// One period of a background task: sleeps `every_ms` (10 ms at least) and says whether to
/// go on, or returns false at once when the coordinator stops.
pub(crate) async fn tick(every_ms: u64, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = stop.changed() => false,
        _ = tokio::time::sleep(Duration::from_millis(every_ms.max(10))) => true,
    }
}
/// A request refused: what the client asked cannot be done as asked.
pub(crate) fn bad<T>(m: impl Into<String>) -> Result<T, WireError> {
    Err(WireError::bad_request(m))
}

/// The object `name` is not there (never put, or deleted).
pub(crate) fn no_object(name: &str) -> WireError {
    WireError::not_found(format!("no object named '{name}'"))
}

impl Coordinator {
    /// A fresh repair id: this start's epoch above, the persistent counter below.
    pub(crate) fn repair_id(&self) -> Result<u64, WireError> {
        Ok((self.epoch << 32) | (self.repair_ids.next(self.meta.as_ref())? & 0xffff_ffff))
    }

    /// A fresh timeslot batch id, likewise.
    pub(crate) fn batch_id(&self) -> Result<u64, WireError> {
        Ok((self.epoch << 32) | (self.batch_ids.next(self.meta.as_ref())? & 0xffff_ffff))
    }

    pub(crate) fn io_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.io_timeout_ms.max(1))
    }

    pub(crate) fn layout(&self, o: &ObjectRecord) -> Result<ObjectLayout, WireError> {
        // Read after the record: gone if the version was dropped in between.
        let inline = match o.inline {
            None => None,
            Some(crc32c) => match self.meta.inline(o.version)? {
                Some(data) => Some(kintsugi_proto::Inline { data, crc32c }),
                None => return Err(WireError::new(ErrorKind::Replaced, format!("object '{}' was replaced while being looked up", o.name))),
            },
        };
        let alive = self.alive();
        let failed = self.failed_nodes()?;
        let mut stripes = Vec::new();
        let mut extents = o.extents.clone();
        for (si, id) in o.stripes.iter().enumerate() {
            let s = self.meta.stripe(*id)?.ok_or_else(|| WireError::bad_request(format!("stripe {id} is missing from the metadata")))?;
            // A piece of a small-size bucket slot carries its own checksum.
            for e in extents.iter_mut().filter(|e| e.stripe == si && s.small) {
                e.crc32c = s.pieces.get(e.index).and_then(|p| p.iter().find(|p| p.version == o.version && p.offset == e.offset)?.crc);
            }
            let chunks = s
                .nodes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let up = alive.contains_key(&n) && !failed.contains(&n);
                    ChunkLoc {
                        chunk: ChunkId::new(*id, i),
                        node: n,
                        addr: self.addr_of(n),
                        alive: up,
                        crc32c: s.crcs[i],
                        lost: !up || s.bad[i],
                        bucket: s.bucket(),
                    }
                })
                .collect();
            let replicas = s
                .replicas
                .iter()
                .enumerate()
                .map(|(i, copies)| {
                    copies
                        .iter()
                        .enumerate()
                        .map(|(c, &n)| {
                            let up = alive.contains_key(&n) && !failed.contains(&n);
                            ChunkLoc {
                                chunk: ChunkId::replica(*id, i, c + 1),
                                node: n,
                                addr: self.addr_of(n),
                                alive: up,
                                crc32c: s.crcs[i],
                                lost: !up,
                                bucket: None,
                            }
                        })
                        .collect()
                })
                .collect();
            stripes.push(StripeLayout {
                id: *id,
                data_len: s.data_len,
                chunk_len: s.chunk_len,
                chunks,
                open: s.open,
                replicas: if s.open { replicas } else { vec![] },
                code: (s.code != o.code).then_some(s.code),
                small: s.small,
            });
        }
        Ok(ObjectLayout {
            name: o.name.clone(),
            size: o.size,
            code: o.code,
            committed: o.committed,
            version: o.version,
            stripes,
            layout: o.layout,
            extents,
            attrs: o.attrs.clone(),
            versioned: o.chain.versioned,
            delete_marker: o.chain.delete_marker,
            inline,
        })
    }

    /// Stripe `stripe` of object `name`, of `version` when it is not 0.
    pub(crate) fn stripe_of(&self, name: &str, version: u64, stripe: usize) -> Result<u64, WireError> {
        let o = self.meta.object(name)?.ok_or_else(|| no_object(name))?;
        if version != 0 && o.version != version {
            return Err(WireError::new(
                ErrorKind::Replaced,
                format!("object '{name}' was replaced (version {version} read, {} now)", o.version),
            ));
        }
        o.stripes.get(stripe).copied().ok_or_else(|| WireError::bad_request(format!("object '{name}' has {} stripes", o.stripes.len())))
    }

    pub(crate) fn mark_bad(&self, id: u64, index: usize, reason: &str) -> Result<(), WireError> {
        self.meta.update(&mut |t| {
            let mut s = t.stripe(id)?.ok_or_else(|| WireError::bad_request(format!("no stripe {id}")))?;
            if index >= s.bad.len() {
                return bad(format!("stripe {id} has {} chunks", s.bad.len()));
            }
            s.bad[index] = true;
            t.put(Change::PutStripe(s))
        })?;
        tracing::warn!("chunk {} marked bad: {reason}", ChunkId::new(id, index));
        Ok(())
    }
}
