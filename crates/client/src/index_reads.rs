//! The client's side of the per-object index (`object_index`): finding a Geo or
//! Contiguous object's chunks from the records its placement group's holders keep, so a
//! read needs the coordinator only to rebuild a chunk, or not at all.
//!
//! The client learns the cluster map (nodes, placement groups, index copies) from the
//! coordinator once and keeps it. A lookup asks every holder of the object's group and
//! takes the highest-numbered record among a majority of answers (see `object_index` for
//! why that is never older than an acknowledged change). A tombstone, no record, or no
//! majority sends the read to the coordinator, which knows every layout.

use crate::client::Client;
use kintsugi_plan::NodeId;
use kintsugi_proto::object_index::IndexRecord;
use kintsugi_proto::placement::placement_group;
use kintsugi_proto::placement::{holders, majority};
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{CoordRequest, CoordResponse, NodeRequest, NodeResponse, ObjectLayout};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::task::JoinSet;

/// What a client needs to find index holders: every registered node and its address.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterMap {
    pub placement_groups: u32,
    pub index_copies: usize,
    pub nodes: BTreeMap<NodeId, String>,
}

/// What the index says of a name.
#[derive(Debug)]
pub enum IndexAnswer {
    /// The object's layout as its record has it.
    Found(ObjectLayout),
    /// Deleted, or not a Geo or Contiguous object (a majority of holders agree).
    Absent,
    /// No majority of holders answered, or the client has no map.
    Unavailable(String),
}

impl Client {
    /// The cluster map, from the coordinator the first time (or with `refresh`).
    pub async fn cluster_map(&self, refresh: bool) -> Result<Arc<ClusterMap>, WireError> {
        if !refresh {
            if let Some(m) = self.map.lock().expect("map lock").clone() {
                return Ok(m);
            }
        }
        let s = match self.call(&CoordRequest::Status, self.io_timeout).await? {
            CoordResponse::Status(s) => s,
            other => return Err(WireError::internal(format!("unexpected answer {other:?}"))),
        };
        let m = Arc::new(ClusterMap {
            placement_groups: s.placement_groups,
            index_copies: s.index_copies,
            nodes: s.nodes.into_iter().map(|n| (n.id, n.addr)).collect(),
        });
        *self.map.lock().expect("map lock") = Some(m.clone());
        Ok(m)
    }

    /// Looks object `name` up in its placement group's index. Without a majority of the
    /// holders the map is learnt again once (nodes may have moved) if the coordinator answers.
    pub async fn index_lookup(&self, name: &str) -> IndexAnswer {
        let map = match self.cluster_map(false).await {
            Ok(m) => m,
            Err(e) => return IndexAnswer::Unavailable(format!("no cluster map: {e}")),
        };
        match self.ask_holders(name, &map).await {
            IndexAnswer::Unavailable(why) => match self.cluster_map(true).await {
                Ok(now) if now != map => self.ask_holders(name, &now).await,
                _ => IndexAnswer::Unavailable(why),
            },
            answer => answer,
        }
    }

    async fn ask_holders(&self, name: &str, map: &ClusterMap) -> IndexAnswer {
        if map.index_copies == 0 || map.placement_groups == 0 {
            return IndexAnswer::Unavailable("the cluster keeps no object index".into());
        }
        let ids: Vec<NodeId> = map.nodes.keys().copied().collect();
        let pg = placement_group(name, map.placement_groups);
        let who = holders(pg, &ids, map.index_copies);
        let mut asks = JoinSet::new();
        for h in &who {
            let addr = map.nodes[h].clone();
            let req = NodeRequest::IndexGet { pg, name: name.to_string() };
            let t = self.stall_timeout.max(std::time::Duration::from_millis(200));
            asks.spawn(async move {
                match request(&addr, &req, t).await {
                    Ok(NodeResponse::IndexEntry { seq, record }) => Some((seq, record)),
                    _ => None,
                }
            });
        }
        let need = majority(who.len());
        let mut answers = 0;
        // The highest-numbered entry so far: (seq, record; None a tombstone).
        let mut best: Option<(u64, Option<Vec<u8>>)> = None;
        // A majority is enough (it meets every majority a change reached); a hung holder
        // beyond it is not waited for.
        while let Some(r) = asks.join_next().await {
            let Some((seq, record)) = r.ok().flatten() else { continue };
            answers += 1;
            if best.as_ref().is_none_or(|b| seq > b.0) {
                best = Some((seq, record));
            }
            if answers >= need {
                // The rest finish on their own (an aborted exchange would leave its node a
                // half-made connection to warn about).
                asks.detach_all();
                break;
            }
        }
        if answers < need {
            return IndexAnswer::Unavailable(format!("{answers} of the {} index holders of placement group {pg} answered", who.len()));
        }
        let Some(bytes) = best.and_then(|b| b.1) else { return IndexAnswer::Absent };
        match IndexRecord::decode(&bytes) {
            Ok(r) => IndexAnswer::Found(r.to_layout(name, pg, &|n| map.nodes.get(&n).cloned())),
            Err(e) => IndexAnswer::Unavailable(e),
        }
    }

    /// Where object `name` is: from the index when it has the object (and the client reads
    /// through it), else from the coordinator. Says which.
    pub(crate) async fn locate(&self, name: &str) -> Result<(ObjectLayout, bool), WireError> {
        let mut absent = false;
        if self.index_reads {
            match self.index_lookup(name).await {
                IndexAnswer::Found(l) => return Ok((l, true)),
                IndexAnswer::Absent => absent = true,
                IndexAnswer::Unavailable(why) => tracing::debug!("index lookup of '{name}': {why}"),
            }
        }
        match self.layout(CoordRequest::Lookup { name: name.into() }).await {
            Ok(l) => Ok((l, false)),
            Err(e) if absent && e.no_coordinator() => Err(WireError::not_found(format!("no object named '{name}' in the index (and {e})"))),
            Err(e) => Err(e),
        }
    }
}

impl Client {
    /// After a read that followed `name`'s index record failed with `e` (the record named a
    /// chunk that is not there: a node down, a repair not published yet): the coordinator's
    /// layout, with what the sink got dropped.
    pub(crate) async fn relocate(
        &self,
        name: &str,
        e: WireError,
        sink: &mut dyn crate::object_io::ObjectSink,
    ) -> Result<ObjectLayout, WireError> {
        tracing::info!("reading '{name}' as its index record says: {e}; asking the coordinator");
        let now =
            self.layout(CoordRequest::Lookup { name: name.into() }).await.map_err(|c| c.and_then_said(format_args!("(after {e})")))?;
        sink.restart().map_err(|r| r.context(format_args!("reading '{name}' as its index record says failed ({e}), and")))?;
        Ok(now)
    }
}
