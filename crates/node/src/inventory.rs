//! What is on this node's disk, told to the coordinator: the chunk list at start and every
//! `inventory_ms` (so the coordinator learns of chunks lost with a disk and of orphans),
//! and a throttled scrub that re-reads every chunk against its checksums and reports the
//! corrupt ones (Ceph's deep scrub), so corruption is found before a read needs the chunk.

use crate::config::NodeConfig;
use crate::exec::Executor;
use kintsugi_proto::{recv, send, CoordRequest, CoordResponse};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Chunk ids per inventory message (well under the control-frame limit).
const PAGE: usize = 100_000;

async fn call(coord: &str, req: &CoordRequest) -> Result<CoordResponse, kintsugi_proto::WireError> {
    let t = Duration::from_secs(10);
    let mut s = kintsugi_proto::auth::connect(coord, t).await?;
    send(&mut s, req).await?;
    Ok(tokio::time::timeout(t, recv(&mut s)).await.map_err(|_| kintsugi_proto::WireError::unavailable("no answer"))??)
}

/// Sleeps `d`, or returns true when the node is stopping.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = stop.changed() => true,
        _ = tokio::time::sleep(d) => false,
    }
}

/// Sends the chunk list at start, every `inventory_ms`, and when `now` is notified.
pub async fn report(
    coord: String,
    exec: Arc<Executor>,
    cfg: NodeConfig,
    token: String,
    (now, mut stop): (Arc<tokio::sync::Notify>, watch::Receiver<bool>),
) {
    let boot = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(exec.node as u64);
        h.finish()
    };
    // Let the first heartbeat register the node.
    if pause(&mut stop, Duration::from_millis(cfg.heartbeat_ms.max(10) * 2)).await {
        return;
    }
    loop {
        let store = exec.store.clone();
        match tokio::task::spawn_blocking(move || store.list()).await {
            Ok(Ok(ids)) => {
                let pages: Vec<&[kintsugi_proto::ChunkId]> = if ids.is_empty() { vec![&[][..]] } else { ids.chunks(PAGE).collect() };
                for (i, page) in pages.iter().enumerate() {
                    let req = CoordRequest::Inventory {
                        node: exec.node,
                        boot,
                        chunks: page.to_vec(),
                        last: i + 1 == pages.len(),
                        token: token.clone(),
                    };
                    match call(&coord, &req).await {
                        Ok(CoordResponse::Ok) => {}
                        Ok(other) => tracing::warn!("inventory of node {}: coordinator answered {other:?}", exec.node),
                        Err(e) => tracing::debug!("inventory of node {}: {e}", exec.node),
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!("node {} cannot list its chunks: {e}", exec.node),
            Err(e) => tracing::warn!("node {} inventory task: {e}", exec.node),
        }
        tokio::select! {
            stopping = pause(&mut stop, Duration::from_millis(cfg.inventory_ms.max(10))) => if stopping { return },
            _ = now.notified() => tracing::info!("node {}: accepted by the coordinator again; sending its inventory now", exec.node),
        }
    }
}

/// Re-reads every chunk once per `scrub_interval_ms`, at most `scrub_bytes_per_s`, and
/// reports the ones that fail their checksums.
pub async fn scrub(coord: String, exec: Arc<Executor>, cfg: NodeConfig, mut stop: watch::Receiver<bool>) {
    let rate = cfg.scrub_bytes_per_s.max(1.0);
    loop {
        let pass = Instant::now();
        let store = exec.store.clone();
        let ids = tokio::task::spawn_blocking(move || store.list()).await.ok().and_then(|r| r.ok()).unwrap_or_default();
        let c = &exec.counters;
        c.scrub_chunks.store(ids.len() as u64, Ordering::Relaxed);
        c.scrub_checked.store(0, Ordering::Relaxed);
        for id in ids {
            let store = exec.store.clone();
            let chunk = id.clone();
            // Disk reads run off the async runtime, so heartbeats are never starved.
            let checked = tokio::task::spawn_blocking(move || -> Result<u64, crate::store::StoreError> {
                let r = match store.reader(&chunk) {
                    Ok(r) => r,
                    Err(crate::store::StoreError::NotFound(_)) => return Ok(0), // deleted meanwhile
                    Err(e) => return Err(e),
                };
                let step = 1 << 20;
                let mut off = 0;
                while off < r.len() {
                    let n = step.min(r.len() - off);
                    r.read(off, n)?;
                    crate::disk_emulation::settle_blocking();
                    off += n;
                }
                Ok(r.len())
            })
            .await;
            let bytes = match checked {
                Ok(Ok(b)) => b,
                Ok(Err(e)) => {
                    let reason = e.to_string();
                    tracing::warn!("scrub on node {}: {reason}", exec.node);
                    let req = CoordRequest::ReportChunk { node: exec.node, chunk: id, reason };
                    if let Err(e) = call(&coord, &req).await {
                        tracing::warn!("scrub on node {}: cannot report: {e}", exec.node);
                    }
                    0
                }
                Err(_) => 0,
            };
            c.scrub_read.fetch_add(bytes, Ordering::Relaxed);
            c.scrub_checked.fetch_add(1, Ordering::Relaxed);
            if pause(&mut stop, Duration::from_secs_f64(bytes as f64 / rate)).await {
                return;
            }
        }
        c.scrub_passes.fetch_add(1, Ordering::Relaxed);
        let rest = Duration::from_millis(cfg.scrub_interval_ms).saturating_sub(pass.elapsed());
        if pause(&mut stop, rest.max(Duration::from_millis(10))).await {
            return;
        }
    }
}
