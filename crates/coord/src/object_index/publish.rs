//! Publishing index records to their holders: one name's record at once after a commit or
//! delete, and in the background what did not reach every holder, what moved, and
//! everything after a restart or a change of the registered nodes (`sync`).

use super::*;
use crate::coordinator::Coordinator;
use kintsugi_plan::NodeId;
use kintsugi_proto::object_index::IndexRecord;
use kintsugi_proto::rpc::request;
use kintsugi_proto::WireError;
use kintsugi_proto::{NodeRequest, NodeResponse};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

impl Coordinator {
    /// Publishes object `name`'s current record (or tombstone) to its index holders;
    /// returns how many keep it and how many there are. Without an index, (0, 0).
    pub(crate) async fn publish_index(&self, name: &str) -> Result<(usize, usize), WireError> {
        let copies = self.cfg.index_copies;
        if copies == 0 {
            return Ok((0, 0));
        }
        let (mut seq, mut obj) = (0, None);
        self.meta.update(&mut |t| {
            seq = t.next_id("index_seq")?;
            obj = t.object(name)?;
            Ok(())
        })?;
        let record = match obj {
            Some(o) if o.committed && o.shares_stripes() => IndexRecord::from_layout(&self.layout(&o)?).map(|r| r.encode()),
            _ => None,
        };
        let nodes = self.meta.nodes()?;
        let ids: Vec<NodeId> = nodes.iter().map(|n| n.id).collect();
        let pg = crate::placement::geo_layout::placement_group(name, self.cfg.placement_groups);
        let who = holders(pg, &ids, copies);
        let mut sends = JoinSet::new();
        for h in &who {
            let Some(n) = nodes.iter().find(|n| n.id == *h && !n.failed) else { continue };
            let req = NodeRequest::IndexPut { pg, name: name.to_string(), seq, record: record.clone() };
            let (addr, t) = (n.addr.clone(), self.io_timeout());
            sends.spawn(async move { matches!(request(&addr, &req, t).await, Ok(NodeResponse::Ok)) });
        }
        let mut kept = 0;
        while let Some(r) = sends.join_next().await {
            kept += r.unwrap_or(false) as usize;
        }
        if kept < who.len() {
            self.index.retry.lock().expect("index lock").insert(name.to_string());
        }
        Ok((kept, who.len()))
    }

    /// After a commit or delete of `name`: its record must be kept by a majority of its
    /// holders before the change is acknowledged.
    pub(crate) async fn publish_acknowledged(&self, name: &str) -> Result<(), WireError> {
        let (kept, of) = self.publish_index(name).await?;
        if of > 0 && kept < majority(of) {
            return Err(WireError::bad_request(format!(
                "'{name}' changed, but only {kept} of its {of} index holders took the change (a majority must): \
                 it is readable through the coordinator, and its index is retried in the background"
            )));
        }
        Ok(())
    }

    /// Publishes the records of `names`; a failure leaves a name in the retry set.
    pub(crate) async fn publish_names(&self, names: BTreeSet<String>) {
        for name in names {
            if let Err(e) = self.publish_index(&name).await {
                tracing::debug!("index record of '{name}': {e}");
                self.index.retry.lock().expect("index lock").insert(name);
            }
        }
    }

    /// One pass of background publishing: retries, objects of moved stripes, and every
    /// record after a start or a change of the registered nodes. Returns records published.
    pub(crate) async fn sync_index(&self) -> Result<usize, WireError> {
        if self.cfg.index_copies == 0 {
            return Ok(0);
        }
        let _one = self.index.pass.lock().await;
        let ids: Vec<NodeId> = self.meta.nodes()?.iter().map(|n| n.id).collect();
        let everything = self.index.published_for.lock().expect("index lock").as_ref() != Some(&ids);
        let mut names: BTreeSet<String> = std::mem::take(&mut *self.index.retry.lock().expect("index lock"));
        let moved = std::mem::take(&mut *self.index.moved.lock().expect("index lock"));
        for id in &moved {
            for name in self.meta.stripe_objects(*id)? {
                if self.meta.object(&name)?.is_some_and(|o| o.shares_stripes()) {
                    names.insert(name);
                }
            }
        }
        let mut count = names.len();
        self.publish_names(names).await;
        if everything {
            // Every object, a page at a time in name order.
            let mut after = String::new();
            loop {
                let page = self.meta.objects_from(&after, false, 1024)?;
                let Some(last) = page.last() else { break };
                after = last.name.clone();
                let shared: BTreeSet<String> = page.into_iter().filter(|o| o.shares_stripes()).map(|o| o.name).collect();
                count += shared.len();
                self.publish_names(shared).await;
            }
        }
        if everything {
            tracing::info!("published the index records of {count} object(s) to their holders");
            *self.index.published_for.lock().expect("index lock") = Some(ids);
        }
        Ok(count)
    }
}

impl Coordinator {
    /// Publishes what a repair or a sealing moved before answering it, so reads through
    /// the index find the chunks where they are now (what fails is retried later).
    pub(crate) async fn sync_index_now(&self) {
        if let Err(e) = self.sync_index().await {
            tracing::warn!("publishing index records: {e}");
        }
    }
}

/// Publishes what is left to publish every `index_sync_ms`.
pub(crate) async fn sync(coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    while crate::coordinator::tick(coord.cfg.index_sync_ms, &mut stop).await {
        coord.sync_index_now().await;
    }
}
