//! Object versions and their clean-up.
//!
//! A put is an *upload*: its own version id and its own stripes, invisible to readers. Its
//! commit, one metadata transaction, checks the checksums against exactly that upload and
//! makes it the name's version; the version it replaces goes to garbage (the later commit
//! wins, as in S3), so two writers of one name never mix. `delete` moves the version to
//! garbage too. The collector removes garbage chunks from the nodes once a grace period has
//! passed (reads already under way finish), retrying nodes that are down until they come
//! back, and reclaims uploads never committed.

use crate::clock::now_ms;
use crate::coordinator::{bad, Coordinator};
use crate::metadata::{Change, ObjectRecord, StripeRecord, Txn};
use crate::placement::stripes::StripeSpread;
use kintsugi_codes::CodeSpec;
use kintsugi_plan::NodeId;
use kintsugi_proto::rpc::request;
use kintsugi_proto::{Attrs, ChunkId, LayoutSpec, NodeRequest, NodeResponse, ObjectLayout, Precondition, MAX_ATTRS_BYTES};
use kintsugi_proto::{ErrorKind, Scarce, VersionRef, Versioning, WireError};

/// What a commit made: its version number, and whether its S3 id is its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Committed {
    pub version: u64,
    pub versioned: bool,
}
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The smallest chunk size a put may ask for (one checksum block of the chunk store).
const MIN_CHUNK: u64 = 4096;

/// A chunk slot of a garbage stripe whose chunk is already deleted.
const GONE: NodeId = NodeId::MAX;

/// The longest object name, in bytes of UTF-8: an S3 key (1,024 bytes) under its bucket's
/// name (up to 63) and a slash, with room to spare.
pub const MAX_NAME: usize = 1100;

/// Object names are what S3 allows, less control characters; sizes up to 1 PiB.
pub(crate) fn check_name_and_size(name: &str, size: u64) -> Result<(), WireError> {
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(|c| c.is_control()) {
        return Err(WireError::new(
            ErrorKind::InvalidName,
            format!("object names are 1 to {MAX_NAME} bytes of UTF-8 without control characters ({} bytes given)", name.len()),
        ));
    }
    if size > 1 << 50 {
        return Err(WireError::new(ErrorKind::TooLarge, format!("object size {size} is too large")));
    }
    Ok(())
}

/// The most parts an object is composed of (S3's multipart limit).
pub const MAX_PARTS: usize = 10_000;

/// Attributes are small: names and values fit in [`MAX_ATTRS_BYTES`].
fn check_attrs(attrs: &Attrs) -> Result<(), WireError> {
    let bytes: usize = attrs.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_ATTRS_BYTES {
        return bad(format!("object attributes take {bytes} bytes, over the {MAX_ATTRS_BYTES} allowed"));
    }
    Ok(())
}

/// Refuses a commit whose precondition the object `name` does not meet now (in the commit's
/// transaction, so no other commit comes between the check and the write).
fn check_precondition(t: &mut dyn Txn, name: &str, precondition: Option<Precondition>) -> Result<(), WireError> {
    let Some(p) = precondition else { return Ok(()) };
    // A delete marker is no object: a name whose latest version is one is absent.
    let current = t.object(name)?.filter(|o| !o.chain.delete_marker).map(|o| o.version);
    if p.holds(current) {
        return Ok(());
    }
    let now = current.map_or("there is none".to_string(), |v| format!("it is at version {v}"));
    Err(WireError::new(ErrorKind::PreconditionFailed, format!("'{name}' is not as the write requires ({p:?}): {now}")))
}

/// A committed Stripe-layout version of `name` made now (composed, or kept inline).
fn committed_stripe(name: &str, size: u64, code: CodeSpec, stripes: Vec<u64>, version: u64, attrs: &Attrs) -> ObjectRecord {
    ObjectRecord {
        name: name.to_string(),
        size,
        code,
        committed: true,
        stripes,
        version,
        created_ms: now_ms(),
        layout: LayoutSpec::Stripe,
        extents: vec![],
        attrs: attrs.clone(),
        chain: Default::default(),
        inline: None,
    }
}

/// Too few nodes alive, or with room, for a put's code: unavailable until nodes return or
/// room is freed, with the counts.
pub(crate) fn too_few_nodes(needed: usize, available: usize, why: String) -> WireError {
    WireError::shortfall(Scarce::Nodes, needed as u64, available as u64, format!("too few nodes: {why}"))
}

/// The put's refusal when fewer than `needed` nodes can take it: a code wider than every
/// member of the cluster (down ones included) is the request's fault and stays so until a
/// node is added; fewer nodes up than members is a condition that passes.
pub(crate) fn too_few_for(c: &Coordinator, code: &CodeSpec, needed: usize, up: usize) -> WireError {
    let members = match c.meta.nodes() {
        Ok(n) => n.iter().filter(|n| !n.failed).count(),
        Err(e) => return e,
    };
    if members < needed {
        let e = too_few_nodes(
            needed,
            members,
            format!("{code} needs {needed} nodes; the cluster has {members}: use a narrower code or add nodes"),
        );
        return WireError { kind: ErrorKind::BadRequest, ..e };
    }
    too_few_nodes(needed, up, format!("{code} needs {needed} live nodes, {up} are alive"))
}

/// Stripes of a new object counted against the room until the nodes report (see
/// `Coordinator::create`).
const BURST_STRIPES: usize = 4;

/// The put's refusal when too few nodes have room for it below the full ratio.
pub(crate) fn full(needed: usize, roomy: usize, why: String) -> WireError {
    WireError::shortfall(Scarce::Space, needed as u64, roomy as u64, format!("the cluster is full: {why}"))
}

impl Coordinator {
    /// Starts a put: places the stripes of a new version of `name`.
    pub(crate) fn create(
        &self,
        name: String,
        size: u64,
        code: CodeSpec,
        chunk_size: u64,
        layout: LayoutSpec,
    ) -> Result<ObjectLayout, WireError> {
        check_name_and_size(&name, size)?;
        if matches!(layout, LayoutSpec::Geo { .. } | LayoutSpec::Contiguous { .. }) {
            return self.create_geo(name, size, code, layout);
        }
        let chunk_size_was_max = layout == LayoutSpec::StripeMax;
        let chunk_size = match layout {
            // One row of k chunks (rows of 1 GiB chunks past 1 GiB a chunk).
            LayoutSpec::StripeMax => size.div_ceil(code.build().map_err(WireError::from)?.k() as u64).clamp(1, 1 << 30),
            _ if chunk_size == 0 => self.cfg.chunk_size,
            _ => chunk_size,
        };
        if chunk_size > 1 << 30 {
            return bad("chunk size is at most 1 GiB");
        }
        if chunk_size < MIN_CHUNK && layout == LayoutSpec::Stripe {
            return bad(format!("chunk size {chunk_size} is below the smallest, {MIN_CHUNK} bytes (a block of the chunk store)"));
        }
        let c = code.build().map_err(WireError::from)?;
        // Refused before any metadata is written: one put never holds the metadata writer
        // for long, whatever it asks.
        let stripes = size.div_ceil((c.k() as u64 * chunk_size).max(1));
        if stripes > self.cfg.max_stripes_per_object {
            return Err(WireError::new(
                ErrorKind::TooLarge,
                format!(
                    "'{name}' is too large for its chunk size: it would take {stripes} stripes of {} chunks of {chunk_size} bytes, \
                 over the {} a put may create (max_stripes_per_object): use a larger --chunk-size",
                    c.k(),
                    self.cfg.max_stripes_per_object
                ),
            ));
        }
        let alive: Vec<NodeId> = self.placeable()?.keys().copied().collect();
        if alive.len() < c.n() {
            return Err(too_few_for(self, &code, c.n(), alive.len()));
        }
        let full_ratio = self.cfg.full_ratio;
        // Placement load is a heuristic: read outside the transaction, from the counters
        // the store keeps with the stripes.
        let spread = StripeSpread::from_counts(self.meta.spread()?);
        // Sub-packetized codes (Clay) need whole sub-chunks: round the chunk up, as Ceph does.
        let alpha = c.sub_chunks() as u64;
        let chunk_size = chunk_size.next_multiple_of(alpha);
        let stripe_bytes = c.k() as u64 * chunk_size;
        // Space: no node is filled past the full ratio, counting what this put adds; a put
        // that does not fit fails here, before anything is written.
        let room = self.space.room(&alive, full_ratio);
        let mut obj = None;
        let mut placed = Vec::new();
        self.meta.update(&mut |t| {
            let version = t.next_id("version")?;
            let mut stripes = Vec::new();
            let mut spread = spread.clone();
            let mut room = room.clone();
            placed.clear();
            let mut left = size;
            while left > 0 {
                let data_len = left.min(stripe_bytes);
                left -= data_len;
                let id = t.next_id("stripe")?;
                let chunk_len = data_len.div_ceil(c.k() as u64).next_multiple_of(alpha);
                let fits: Vec<NodeId> = alive.iter().copied().filter(|n| room.fits(*n, chunk_len)).collect();
                let Some(nodes) = spread.choose(&fits, c.n(), id) else {
                    return Err(full(
                        c.n(),
                        fits.len(),
                        format!(
                            "{code} needs {} nodes with room for {chunk_len}-byte chunks below the full ratio {full_ratio}; {} have it",
                            c.n(),
                            fits.len()
                        ),
                    ));
                };
                spread.add(&nodes);
                for n in &nodes {
                    room.take(*n, chunk_len);
                    placed.push((*n, chunk_len));
                }
                t.put(Change::PutStripe(StripeRecord { changed_ms: now_ms(), ..StripeRecord::new(id, code, data_len, chunk_len, nodes) }))?;
                stripes.push(id);
            }
            let o = ObjectRecord {
                name: name.clone(),
                size,
                code,
                committed: false,
                stripes,
                version,
                created_ms: now_ms(),
                layout: if chunk_size_was_max { LayoutSpec::StripeMax } else { LayoutSpec::Stripe },
                extents: vec![],
                attrs: Default::default(),
                chain: Default::default(),
                inline: None,
            };
            t.put(Change::PutUpload(o.clone()))?;
            obj = Some(o);
            Ok(())
        })?;
        self.code_widths.observe(c.n());
        // Counted until the nodes' next reports: puts in a burst see each other's chunks.
        // Only the first stripes, which a put writes before the next report can: a body
        // that never comes (a client declaring 4 GiB and stalling) must not take the
        // room of every other put. The whole put was checked against the room above.
        for (n, bytes) in placed.into_iter().take(BURST_STRIPES * c.n()) {
            self.space.add(n, bytes);
        }
        self.layout(&obj.expect("set by the transaction"))
    }

    /// Commits upload `version` of `name` with its chunks' checksums; the version it
    /// replaces is kept or goes to garbage, as `versioning` says. Says what was committed,
    /// and whether the new version or the one it replaces is in the per-object index (Geo,
    /// Contiguous), so the index must hear of it.
    pub(crate) fn commit(
        &self,
        name: &str,
        version: u64,
        crcs: Vec<Vec<u32>>,
        terms: (Attrs, Option<Precondition>, Versioning),
    ) -> Result<(Committed, bool), WireError> {
        let (attrs, precondition, versioning) = terms;
        check_attrs(&attrs)?;
        let timeout_s = self.cfg.upload_timeout_ms / 1000;
        let mut indexed = false;
        let mut committed = Committed { version, versioned: false };
        self.meta.update(&mut |t| {
            // Gone: committed by an earlier try whose answer was lost, or reclaimed after the
            // upload timeout. Either way the put is to be made again (a put repeated writes
            // the same object), so the kind is the retryable one, not the caller's fault.
            let mut o = t.upload(version)?.ok_or_else(|| {
                WireError::unavailable(format!(
                    "no upload {version} of '{name}' to commit: it was committed already, or abandoned for over {timeout_s} s; put it again"
                ))
            })?;
            if o.name != name {
                return bad(format!("upload {version} is of '{}', not '{name}'", o.name));
            }
            check_precondition(t, name, precondition)?;
            if crcs.len() != o.stripes.len() {
                return bad(format!("{} checksum lists for {} stripes", crcs.len(), o.stripes.len()));
            }
            for (si, (id, c)) in o.stripes.iter().zip(&crcs).enumerate() {
                let mut s = t.stripe(*id)?.ok_or_else(|| WireError::bad_request(format!("stripe {id} of upload {version} vanished")))?;
                if s.small {
                    // A small-size bucket piece: its own checksum.
                    let e = o.extents.iter().find(|e| e.stripe == si);
                    let piece =
                        e.and_then(|e| s.pieces.get_mut(e.index)?.iter_mut().find(|p| p.version == version && p.offset == e.offset));
                    let Some(piece) = piece else {
                        return bad(format!("upload {version} holds no piece of stripe {id}"));
                    };
                    if c.len() != 1 {
                        return bad(format!("stripe {id}: {} checksums for the object's one piece in it", c.len()));
                    }
                    piece.crc = Some(c[0]);
                    s.changed_ms = now_ms();
                    t.put(Change::PutStripe(s))?;
                    continue;
                }
                if !s.owners.is_empty() {
                    // A shared Geo stripe: the one checksum of this object's chunk in it.
                    let slot = o.extents.iter().find(|e| e.stripe == si).map(|e| e.index);
                    let Some(slot) = slot.filter(|&i| s.owners.get(i) == Some(&version)) else {
                        return bad(format!("upload {version} holds no slot of stripe {id}"));
                    };
                    if c.len() != 1 {
                        return bad(format!("stripe {id}: {} checksums for the object's one chunk in it", c.len()));
                    }
                    s.crcs[slot] = Some(c[0]);
                    s.changed_ms = now_ms();
                    t.put(Change::PutStripe(s))?;
                    continue;
                }
                if c.len() != s.nodes.len() {
                    return bad(format!("stripe {id}: {} checksums for {} chunks", c.len(), s.nodes.len()));
                }
                s.crcs = c.iter().copied().map(Some).collect();
                s.changed_ms = now_ms();
                t.put(Change::PutStripe(s))?;
            }
            indexed = o.shares_stripes();
            let chained = t.object(name)?.is_some_and(|old| !old.chain.is_plain());
            if versioning != Versioning::Unversioned || chained {
                if indexed {
                    return bad(format!("'{name}' has a {} layout: its versions cannot be kept", o.layout));
                }
                // Version numbers order a name's versions: a kept one is numbered at its
                // commit, not at its put's start.
                o.version = t.next_id("version")?;
            }
            indexed |= t.object(name)?.is_some_and(|old| old.shares_stripes());
            o.committed = true;
            o.attrs = attrs.clone();
            t.put(Change::DeleteUpload(version))?;
            committed = Committed { version: o.version, versioned: versioning == Versioning::Enabled };
            crate::metadata::versions::supersede(t, name, o, versioning, now_ms())
        })?;
        Ok((committed, indexed))
    }

    /// Stores `data` as the new version of `name`, kept in the metadata (see
    /// `CoordRequest::PutInline`), in one transaction on the terms of a commit. Says what was
    /// committed, and whether the version it replaces was in the per-object index.
    pub(crate) fn put_inline(
        &self,
        name: &str,
        data: kintsugi_proto::Inline,
        code: CodeSpec,
        terms: (Attrs, Option<Precondition>, Versioning),
    ) -> Result<(Committed, bool), WireError> {
        let (attrs, precondition, versioning) = terms;
        let size = data.data.len() as u64;
        check_name_and_size(name, size)?;
        check_attrs(&attrs)?;
        if size > kintsugi_proto::INLINE_MAX {
            return bad(format!("{size} bytes are more than an object kept in the metadata may hold"));
        }
        if !data.intact() {
            return Err(WireError::new(ErrorKind::Corrupt, format!("the bytes of '{name}' do not match the checksum they came with")));
        }
        let c = code.build().map_err(WireError::from)?;
        // The bytes need no node, but a code wider than the cluster is refused as for any
        // put: the bucket or caller asking for it is misconfigured whatever the size.
        let members = self.meta.nodes()?.iter().filter(|n| !n.failed).count();
        if members < c.n() {
            return Err(too_few_for(self, &code, c.n(), members));
        }
        let mut indexed = false;
        let mut committed = Committed { version: 0, versioned: false };
        self.meta.update(&mut |t| {
            check_precondition(t, name, precondition)?;
            let version = t.next_id("version")?;
            let old = t.object(name)?;
            if versioning != Versioning::Unversioned && old.as_ref().is_some_and(|o| o.shares_stripes()) {
                let layout = old.as_ref().map(|o| o.layout).unwrap_or_default();
                return bad(format!("'{name}' has a {layout} layout: its versions cannot be kept"));
            }
            indexed = old.is_some_and(|o| o.shares_stripes());
            committed = Committed { version, versioned: versioning == Versioning::Enabled };
            t.put(Change::PutInline { version, data: data.data.clone() })?;
            let o = ObjectRecord { inline: Some(data.crc32c), ..committed_stripe(name, size, code, vec![], version, &attrs) };
            crate::metadata::versions::supersede(t, name, o, versioning, now_ms())
        })?;
        Ok((committed, indexed))
    }

    /// Makes `name` the concatenation of the committed objects `parts` (name, version), in
    /// one transaction: their stripes become a new version of `name`, the parts' names go,
    /// and the version `name` had goes to garbage. No byte moves, so completing a multipart
    /// upload costs metadata only. Says whether the per-object index must hear of it.
    pub(crate) fn compose(
        &self,
        name: &str,
        parts: &[(String, u64)],
        terms: (Attrs, Option<Precondition>, Versioning),
    ) -> Result<(Committed, bool), WireError> {
        let (attrs, precondition, versioning) = terms;
        check_name_and_size(name, 0)?;
        check_attrs(&attrs)?;
        if parts.is_empty() || parts.len() > MAX_PARTS {
            return bad(format!("an object is composed of 1 to {MAX_PARTS} parts ({} given)", parts.len()));
        }
        let mut indexed = false;
        let mut committed = Committed { version: 0, versioned: false };
        self.meta.update(&mut |t| {
            check_precondition(t, name, precondition)?;
            let (mut stripes, mut size, mut code) = (Vec::new(), 0u64, None);
            let mut seen = BTreeSet::new();
            for (p, v) in parts {
                if p == name || !seen.insert(p) {
                    return bad(format!("part '{p}' is named twice, or is the object itself"));
                }
                let Some(o) = t.object(p)?.filter(|o| o.version == *v) else {
                    return Err(WireError::new(
                        ErrorKind::InvalidPart,
                        format!("no part '{p}' at version {v}: it was replaced or deleted"),
                    ));
                };
                if o.shares_stripes() {
                    return bad(format!("part '{p}' has a {} layout; only Stripe layouts are composed", o.layout));
                }
                if o.inline.is_some() {
                    return bad(format!("part '{p}' is kept in the metadata; only striped parts are composed"));
                }
                if *code.get_or_insert(o.code) != o.code {
                    return bad(format!("part '{p}' is coded {}, the first part {}", o.code, code.expect("set")));
                }
                size += o.size;
                stripes.extend(o.stripes);
                t.put(Change::DeleteObject(p.clone()))?;
            }
            let version = t.next_id("version")?;
            indexed = t.object(name)?.is_some_and(|old| old.shares_stripes());
            committed = Committed { version, versioned: versioning == Versioning::Enabled };
            let o = committed_stripe(name, size, code.expect("at least one part"), stripes, version, &attrs);
            crate::metadata::versions::supersede(t, name, o, versioning, now_ms())
        })?;
        Ok((committed, indexed))
    }

    /// Replaces the attributes of committed `name` at exactly `version`, in one transaction;
    /// says whether the per-object index must hear of it (a Geo or Contiguous object).
    pub(crate) fn set_attrs(&self, name: &str, version: u64, attrs: Attrs, bypass_governance: bool) -> Result<bool, WireError> {
        check_attrs(&attrs)?;
        let mut indexed = false;
        self.meta.update(&mut |t| {
            let Some(mut o) = t.object(name)? else {
                return Err(WireError::not_found(format!("no object '{name}'")));
            };
            // A kept version (S3's tagging by version id).
            if o.version != version {
                if let Some(k) = t.object(&crate::metadata::versions::kept_name(name, version))? {
                    o = k;
                }
            }
            if o.chain.delete_marker {
                return Err(WireError::not_found(format!("version {version} of '{name}' is a delete marker")));
            }
            if o.version != version {
                return Err(WireError::new(
                    ErrorKind::PreconditionFailed,
                    format!("'{name}' is at version {}, not {version}: it was replaced meanwhile", o.version),
                ));
            }
            indexed = o.shares_stripes();
            kintsugi_proto::retention::may_change(name, &o.attrs, &attrs, now_ms(), bypass_governance)?;
            o.attrs = attrs.clone();
            t.put(Change::PutObject(o))
        })?;
        Ok(indexed)
    }

    /// Deletes `name` (idempotent); says whether it existed, and whether the per-object
    /// index must hear of it: it was a Geo or Contiguous object, or it is gone already (a
    /// retried delete whose tombstone may not have reached the index).
    pub(crate) fn delete(&self, name: &str, precondition: Option<Precondition>) -> Result<(bool, bool), WireError> {
        if crate::metadata::versions::is_kept(name) {
            return bad("a kept version is deleted by its version id");
        }
        let (mut existed, mut indexed) = (false, true);
        self.meta.update(&mut |t| {
            (existed, indexed) = (false, true);
            check_precondition(t, name, precondition)?;
            if let Some(o) = t.object(name)? {
                if !o.chain.is_plain() {
                    // A name with versions loses only its latest.
                    existed = !o.chain.delete_marker;
                    indexed = false;
                    let want = if o.chain.versioned { VersionRef::Id(o.version) } else { VersionRef::Null };
                    crate::metadata::versions::delete_version(t, name, want, now_ms(), false)?;
                    return Ok(());
                }
                existed = true;
                indexed = o.shares_stripes();
                t.discard_version(&o, now_ms(), false)?;
                t.put(Change::DeleteObject(name.to_string()))?;
            }
            Ok(())
        })?;
        Ok((existed, indexed))
    }

    /// Deletes `name` as a versioned bucket does: a delete marker becomes its latest
    /// version (answered), the one it replaces kept or, when both are the null version,
    /// discarded.
    pub(crate) fn delete_marking(
        &self,
        name: &str,
        versioning: Versioning,
        precondition: Option<Precondition>,
    ) -> Result<ObjectRecord, WireError> {
        check_name_and_size(name, 0)?;
        let mut made = None;
        self.meta.update(&mut |t| {
            check_precondition(t, name, precondition)?;
            let now = now_ms();
            let mut m = crate::metadata::versions::marker(t, name, now)?;
            m.chain.versioned = versioning == Versioning::Enabled;
            crate::metadata::versions::supersede(t, name, m.clone(), versioning, now)?;
            made = Some(m);
            Ok(())
        })?;
        Ok(made.expect("set by the transaction"))
    }

    /// Deletes version `want` of `name` (see `CoordRequest::DeleteVersion`); says what it
    /// deleted, if anything.
    pub(crate) fn delete_version(&self, name: &str, want: VersionRef, bypass_governance: bool) -> Result<Option<ObjectRecord>, WireError> {
        let mut gone = None;
        self.meta.update(&mut |t| {
            gone = crate::metadata::versions::delete_version(t, name, want, now_ms(), bypass_governance)?;
            Ok(())
        })?;
        Ok(gone)
    }

    /// Abandons upload `version` of `name` (see `CoordRequest::AbortUpload`).
    pub(crate) fn abort_upload(&self, name: &str, version: u64) -> Result<(), WireError> {
        self.meta.update(&mut |t| {
            match t.upload(version)? {
                Some(u) if u.name == name => {
                    t.discard_version(&u, now_ms(), false)?;
                    t.put(Change::DeleteUpload(version))
                }
                // Committed, reclaimed or another object's: nothing to abandon.
                _ => Ok(()),
            }
        })
    }

    /// Moves uploads older than the timeout to garbage.
    fn reclaim_uploads(&self) -> Result<usize, WireError> {
        let cutoff = now_ms().saturating_sub(self.cfg.upload_timeout_ms);
        let stale: Vec<ObjectRecord> = self.meta.uploads()?.into_iter().filter(|u| u.created_ms < cutoff).collect();
        for u in &stale {
            tracing::info!("reclaiming upload {} of '{}', not committed for {} ms", u.version, u.name, self.cfg.upload_timeout_ms);
            self.meta.update(&mut |t| {
                // Committed meanwhile? Then it is no upload any more.
                if t.upload(u.version)?.is_some() {
                    t.discard_version(u, now_ms(), false)?;
                    t.put(Change::DeleteUpload(u.version))?;
                }
                Ok(())
            })?;
        }
        Ok(stale.len())
    }

    /// Deletes the chunks of garbage stripes past their grace period from every live node
    /// holding one; returns the chunks deleted.
    pub(crate) async fn collect_garbage(&self) -> Result<usize, WireError> {
        self.reclaim_uploads()?;
        let cutoff = now_ms().saturating_sub(self.cfg.gc_grace_ms);
        let alive = self.alive();
        let members: BTreeSet<NodeId> = self.meta.nodes()?.iter().map(|n| n.id).collect();
        let mut deleted = 0;
        // A page at a time: garbage after mass deletes can be large.
        let mut after = 0;
        loop {
            let page = self.meta.garbage_from(after, GARBAGE_PAGE)?;
            let Some(last) = page.last() else { break };
            after = last.id;
            deleted += self.collect_page(page.into_iter().filter(|g| g.discarded_ms <= cutoff), &alive, &members).await?;
        }
        Ok(deleted)
    }

    /// Deletes the chunks of `page`'s garbage stripes; returns how many.
    async fn collect_page(
        &self,
        page: impl Iterator<Item = StripeRecord>,
        alive: &BTreeMap<NodeId, String>,
        members: &BTreeSet<NodeId>,
    ) -> Result<usize, WireError> {
        let mut deleted = 0;
        for g in page {
            let mut done = Vec::new();
            for (i, &node) in g.nodes.iter().enumerate() {
                if node != GONE && !members.contains(&node) {
                    // A removed node: nothing to delete there any more.
                    done.push(i);
                    continue;
                }
                let Some(addr) = alive.get(&node).filter(|_| node != GONE) else { continue };
                let chunk = ChunkId::new(g.id, i);
                match request(addr, &NodeRequest::DeleteChunk { chunk: chunk.clone() }, Duration::from_secs(5)).await {
                    Ok(NodeResponse::Ok) => done.push(i),
                    Ok(other) => tracing::warn!("deleting {chunk} on node {node}: {other:?}"),
                    Err(e) => tracing::warn!("deleting {chunk} on node {node}: {e}"),
                }
            }
            deleted += done.len();
            if done.is_empty() {
                continue;
            }
            self.meta.update(&mut |t| {
                let Some(mut s) = t.garbage(g.id)? else { return Ok(()) };
                for &i in &done {
                    // A chunk repaired onto another node meanwhile is still to be deleted there.
                    if s.nodes[i] == g.nodes[i] {
                        s.nodes[i] = GONE;
                    }
                }
                if s.nodes.iter().all(|&n| n == GONE) {
                    t.put(Change::DeleteGarbage(s.id))
                } else {
                    t.put(Change::PutGarbage(s))
                }
            })?;
        }
        Ok(deleted)
    }
}

/// Garbage stripes read at a time.
const GARBAGE_PAGE: usize = 1024;

/// Runs the collector every `gc_interval_ms` until the coordinator stops.
pub(crate) async fn collector(coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    while crate::coordinator::tick(coord.cfg.gc_interval_ms, &mut stop).await {
        match coord.collect_garbage().await {
            Ok(0) => {}
            Ok(n) => tracing::info!("garbage collection deleted {n} chunks of replaced, deleted or abandoned versions"),
            Err(e) => tracing::warn!("garbage collection: {e}"),
        }
    }
}
