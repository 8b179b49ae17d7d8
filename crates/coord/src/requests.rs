//! Each request a client or node sends, routed to the part of the coordinator that answers it.

use crate::coordinator::{bad, no_object, Coordinator};
use crate::metadata::ObjectRecord;
use kintsugi_node::wire::{job_to_wire, method_from_wire, pick_method_from_wire, scheduler_from_wire};
use kintsugi_proto::{CoordRequest, CoordResponse, ObjectInfo, ObjectLayout};
use kintsugi_proto::{VersionInfo, VersionRef, Versioning, WireError};
use std::sync::Arc;

/// Runs metadata work that reads many records on a blocking thread: however long it takes,
/// the runtime's workers stay free for heartbeats, so a busy coordinator never takes live
/// nodes for dead ones.
async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> Result<T, WireError> + Send + 'static) -> Result<T, WireError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| WireError::bad_request(format!("metadata task failed: {e}")))?
}
/// A version as listings and deletes answer it (`name` is the object's, wherever the record
/// is stored).
fn version_info(name: &str, o: ObjectRecord, latest: bool) -> VersionInfo {
    VersionInfo {
        name: name.to_string(),
        version: o.version,
        versioned: o.chain.versioned,
        delete_marker: o.chain.delete_marker,
        latest,
        size: o.size,
        created_ms: o.created_ms,
        attrs: o.attrs,
    }
}

impl Coordinator {
    /// Serves one request.
    pub async fn handle(self: &Arc<Self>, req: CoordRequest) -> Result<CoordResponse, WireError> {
        match req {
            CoordRequest::Heartbeat { node, addr, chunks: _, boot, used_bytes, capacity_bytes, cluster, link, token, fs } => {
                if cluster != 0 && cluster != self.cluster_id {
                    return bad(format!(
                        "node {node}'s data directory belongs to cluster {cluster:016x}; this is cluster {:016x}",
                        self.cluster_id
                    ));
                }
                // A node joining a cluster that holds data, or returning to it after its
                // chunks were rebuilt elsewhere, gets its share (a new cluster's nodes join
                // before there is any).
                // Heard at once even while a long update holds the metadata's writer.
                if let Some(why) = crate::metadata::peeking(|| self.heartbeat(node, addr, boot, &token))? {
                    if self.cfg.rebalance_on_join && self.meta.counts()?.objects > 0 {
                        self.rebalance_soon(why);
                    }
                }
                self.space.record(node, used_bytes, capacity_bytes, fs);
                if let Some(l) = link {
                    self.link_history.record(node, &l);
                    self.foreground_record.record(node, &l);
                    self.links.lock().expect("links lock").insert(node, l);
                }
                Ok(CoordResponse::Welcome { cluster: self.cluster_id })
            }
            CoordRequest::CreateObject { name, size, code, chunk_size, layout } => {
                let me = self.clone();
                Ok(CoordResponse::Layout(off_runtime(move || me.create(name, size, code, chunk_size, layout)).await?))
            }
            CoordRequest::Rebalance => Ok(CoordResponse::Rebalanced(self.rebalance().await?)),
            CoordRequest::Seal => {
                let stripes = self.seal_due(true).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Sealed { stripes })
            }
            CoordRequest::MoveGeoChunk { name, version, extent, avoid } => {
                let me = self.clone();
                let avoid = avoid.into_iter().collect();
                Ok(CoordResponse::Layout(off_runtime(move || me.move_geo_chunk(&name, version, extent, &avoid)).await?))
            }
            CoordRequest::Compact => Ok(CoordResponse::Compacted(self.compact().await?)),
            CoordRequest::MoveUploadChunk { name, version, stripe, index, avoid } => {
                Ok(CoordResponse::Moved(self.move_upload_chunk(&name, version, stripe, index, &avoid.into_iter().collect())?))
            }
            CoordRequest::CommitObject { name, version, crcs, attrs, precondition, versioning } => {
                let (c, indexed) = self.commit(&name, version, crcs, (attrs, precondition, versioning))?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Committed { version: c.version, versioned: c.versioned })
            }
            CoordRequest::PutInline { .. } if !self.cfg.keeps_inline() => Ok(CoordResponse::InlineRefused),
            CoordRequest::PutInline { name, data, code, attrs, precondition, versioning } => {
                let me = self.clone();
                let n = name.clone();
                let (c, indexed) = off_runtime(move || me.put_inline(&n, data, code, (attrs, precondition, versioning))).await?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Committed { version: c.version, versioned: c.versioned })
            }
            CoordRequest::AbortUpload { name, version } => {
                self.abort_upload(&name, version)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::ComposeObject { name, parts, attrs, precondition, versioning } => {
                let me = self.clone();
                let n = name.clone();
                // Never indexed itself (a Stripe layout), but it may replace an object that was.
                let (c, indexed) = off_runtime(move || me.compose(&n, &parts, (attrs, precondition, versioning))).await?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Committed { version: c.version, versioned: c.versioned })
            }
            CoordRequest::SetAttrs { name, version, attrs, bypass_governance } => {
                if self.set_attrs(&name, version, attrs, bypass_governance)? {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Ok)
            }
            CoordRequest::DeleteObject { name, versioning: Versioning::Unversioned, precondition } => {
                let (existed, indexed) = self.delete(&name, precondition)?;
                if indexed {
                    self.publish_acknowledged(&name).await?;
                }
                Ok(CoordResponse::Deleted { existed, version: None })
            }
            CoordRequest::DeleteObject { name, versioning, precondition } => {
                let m = self.delete_marking(&name, versioning, precondition)?;
                Ok(CoordResponse::Deleted { existed: true, version: Some(Box::new(version_info(&name, m, true))) })
            }
            CoordRequest::DeleteVersion { name, version, bypass_governance } => {
                let gone = self.delete_version(&name, version, bypass_governance)?;
                if gone.as_ref().is_some_and(|o| o.shares_stripes()) {
                    self.publish_acknowledged(&name).await?;
                }
                let latest = gone.as_ref().is_some_and(|o| !crate::metadata::versions::is_kept(&o.name));
                Ok(CoordResponse::Deleted { existed: gone.is_some(), version: gone.map(|o| Box::new(version_info(&name, o, latest))) })
            }
            CoordRequest::LookupVersion { name, version } => Ok(CoordResponse::Layout(self.lookup_version(&name, version)?)),
            CoordRequest::ListVersions { prefix, delimiter, key_marker, version_marker, limit } => {
                let me = self.clone();
                let limit = if limit == 0 { crate::metadata::listing::MAX_PAGE } else { limit as usize };
                let page = off_runtime(move || {
                    crate::metadata::version_listing::list_versions(
                        me.meta.as_ref(),
                        &prefix,
                        &delimiter,
                        &key_marker,
                        version_marker,
                        limit,
                    )
                })
                .await?;
                Ok(CoordResponse::Versions { versions: page.versions, prefixes: page.prefixes, next: page.next })
            }
            CoordRequest::Inventory { node, boot, chunks, last, token } => {
                self.check_identity(node, &token)?;
                let me = self.clone();
                off_runtime(move || me.inventory(node, boot, chunks, last)).await?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::ReportChunk { node, chunk, reason } => {
                self.report_chunk(node, &chunk, &reason)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::Lookup { name } => Ok(CoordResponse::Layout(self.lookup(&name)?)),
            CoordRequest::List { prefix, delimiter, after, limit } => {
                let me = self.clone();
                let limit = if limit == 0 { crate::metadata::listing::MAX_PAGE } else { limit as usize };
                let page =
                    off_runtime(move || crate::metadata::listing::list_page(me.meta.as_ref(), &prefix, &delimiter, &after, limit)).await?;
                let objects = page
                    .objects
                    .into_iter()
                    .map(|o| ObjectInfo {
                        stripes: o.stripes.len(),
                        name: o.name,
                        size: o.size,
                        code: o.code,
                        committed: o.committed,
                        attrs: o.attrs,
                    })
                    .collect();
                Ok(CoordResponse::Objects { objects, prefixes: page.prefixes, next: page.next })
            }
            CoordRequest::DegradedRead { name, stripe, index, method, slice, version, avoid, range } => {
                let method = method_from_wire(&method)?;
                let a = self.degraded_plan(&name, version, stripe, index, method, slice, avoid, range).await?;
                Ok(CoordResponse::Plan { assignment: Box::new(job_to_wire(&a)) })
            }
            CoordRequest::ReportBad { name, stripe, index, reason, version } => {
                self.report_bad(&name, version, stripe, index, &reason)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::FailNode { node } => {
                self.fail_node(node).await?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::Repair { method, slice, parallel, scheduler, max_active_per_destination } => {
                // Either may be `auto` (`repair::auto`).
                let ask = crate::RepairAsk { method: pick_method_from_wire(&method)?, scheduler: scheduler_from_wire(&scheduler)? };
                let report = self.repair(ask, slice, parallel, max_active_per_destination).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Repaired(report))
            }
            CoordRequest::Status => {
                let me = self.clone();
                Ok(CoordResponse::Status(Box::new(off_runtime(move || me.status()).await?)))
            }
            CoordRequest::ReplaceNode { node } => {
                self.replace_node(node)?;
                Ok(CoordResponse::Ok)
            }
            CoordRequest::RemoveNode { node } => {
                let report = self.remove_node(node).await?;
                self.sync_index_now().await;
                Ok(CoordResponse::Repaired(report))
            }
        }
    }

    /// The layout of `name`'s current version. The object record and its stripes are read
    /// in separate transactions, so an overwrite committing in between (whose garbage
    /// collection may already have dropped the old stripes) makes us look again.
    fn lookup(&self, name: &str) -> Result<ObjectLayout, WireError> {
        let mut tries = 0;
        loop {
            let o = self.meta.object(name)?.filter(|o| !o.chain.delete_marker).ok_or_else(|| no_object(name))?;
            match self.layout(&o) {
                Err(e) if tries < 5 && self.meta.object(name)?.is_none_or(|now| now.version != o.version) => {
                    tracing::debug!("'{name}' was replaced while its layout was read ({e}); reading again");
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    /// Version `want` of `name` (its latest, a delete marker included, when None).
    fn lookup_version(&self, name: &str, want: Option<VersionRef>) -> Result<ObjectLayout, WireError> {
        let mut tries = 0;
        loop {
            let o = crate::metadata::versions::find(self.meta.as_ref(), name, want)?.ok_or_else(|| match want {
                Some(v) => WireError::not_found(format!("no version {v} of '{name}'")),
                None => no_object(name),
            })?;
            match self.layout(&o) {
                Err(e) if tries < 5 && self.meta.object(&o.name)?.is_none_or(|now| now.version != o.version) => {
                    tracing::debug!("'{name}' changed while its layout was read ({e}); reading again");
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    fn report_bad(&self, name: &str, version: u64, stripe: usize, index: usize, reason: &str) -> Result<(), WireError> {
        let id = self.stripe_of(name, version, stripe)?;
        self.mark_bad(id, index, reason)
    }
}
