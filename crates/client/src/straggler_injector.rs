//! A straggler injector, as in ChameleonEC's Exp#11: readers pulling chunks from one node
//! over and over, so its uplink is busy with foreground reads (which the node counts as
//! foreground, and which its link shaping charges like any other send); or writers pushing
//! scratch chunks to it, so its downlink is.

use crate::Client;
use kintsugi_node::Shaper;
use kintsugi_plan::NodeId;
use kintsugi_proto::WireError;
use kintsugi_proto::{ChunkId, ChunkLoc, NodeRequest};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Readers of one node's chunks, running until stopped.
pub struct Straggler {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// Bytes read so far.
    pub bytes: Arc<AtomicU64>,
}

impl Straggler {
    /// Starts `readers` loops, each reading every chunk `node` holds, in turn, forever.
    /// Fails when the node holds no committed chunk.
    pub async fn start(client: &Client, node: NodeId, readers: usize) -> Result<Straggler, WireError> {
        let mut chunks: Vec<(ChunkLoc, u64)> = Vec::new();
        for o in client.list().await? {
            let layout = client.stat(&o.name).await?;
            for s in layout.stripes {
                chunks.extend(s.chunks.into_iter().filter(|c| c.node == node && c.alive && c.crc32c.is_some()).map(|c| (c, s.chunk_len)));
            }
        }
        if chunks.is_empty() {
            return Err(WireError::bad_request(format!("node {node} holds no committed chunk to read")));
        }
        let (stop, rx) = watch::channel(false);
        let bytes = Arc::new(AtomicU64::new(0));
        let chunks = Arc::new(chunks);
        let mut tasks = JoinSet::new();
        for r in 0..readers.max(1) {
            let (chunks, bytes, mut rx, t) = (chunks.clone(), bytes.clone(), rx.clone(), client.io_timeout);
            tasks.spawn(async move {
                let unshaped = Shaper::new(None, None);
                let mut i = r;
                loop {
                    let (loc, len) = &chunks[i % chunks.len()];
                    tokio::select! {
                        _ = rx.changed() => return,
                        got = crate::client::get_chunk(loc, *len, t, &unshaped) => match got {
                            Ok(data) => { bytes.fetch_add(data.len() as u64, Ordering::Relaxed); }
                            // The node may be busy or gone: try again shortly.
                            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        },
                    }
                    i += 1;
                }
            });
        }
        Ok(Straggler { stop, tasks, bytes })
    }

    /// Starts `writers` loops, each writing a scratch chunk of `len` bytes to `node` again
    /// and again (ids no stripe uses; they are deleted when stopped, and a coordinator
    /// would collect them as orphans otherwise).
    pub async fn start_writes(client: &Client, node: NodeId, writers: usize, len: usize) -> Result<Straggler, WireError> {
        let addr = client.status().await?.nodes.into_iter().find(|n| n.id == node && n.alive).map(|n| n.addr);
        let addr = addr.ok_or_else(|| WireError::bad_request(format!("node {node} is not alive")))?;
        let (stop, rx) = watch::channel(false);
        let bytes = Arc::new(AtomicU64::new(0));
        let data: Arc<Vec<u8>> = Arc::new((0..len).map(|i| (i * 31 + 7) as u8).collect());
        let mut tasks = JoinSet::new();
        for w in 0..writers.max(1) {
            let loc = ChunkLoc {
                chunk: ChunkId::new(SCRATCH - w as u64, 0),
                node,
                addr: addr.clone(),
                alive: true,
                crc32c: None,
                lost: false,
                bucket: None,
            };
            let (data, bytes, mut rx, t) = (data.clone(), bytes.clone(), rx.clone(), client.io_timeout);
            tasks.spawn(async move {
                loop {
                    tokio::select! {
                        _ = rx.changed() => break,
                        put = crate::client::put_chunk(&loc, &data, 1, t) => match put {
                            Ok(()) => { bytes.fetch_add(data.len() as u64, Ordering::Relaxed); }
                            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        },
                    }
                }
                let _ = kintsugi_proto::rpc::request(&loc.addr, &NodeRequest::DeleteChunk { chunk: loc.chunk.clone() }, t).await;
            });
        }
        Ok(Straggler { stop, tasks, bytes })
    }

    /// Stops the readers or writers; returns the bytes they moved.
    pub async fn stop(mut self) -> u64 {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Stripe ids of scratch chunks count down from here (real stripe ids count up from 1).
const SCRATCH: u64 = u64::MAX >> 12;
