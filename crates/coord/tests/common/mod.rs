//! The test cluster: a real coordinator and real nodes on loopback, in one process.
#![allow(dead_code)]

use kintsugi_client::Client;
use kintsugi_coord::{start, CoordConfig, CoordHandle};
use kintsugi_node::{NodeConfig, NodeHandle};
use std::path::Path;
use std::time::Duration;

pub struct Cluster {
    pub coord: Option<CoordHandle>,
    pub coord_addr: String,
    pub nodes: Vec<Option<NodeHandle>>,
    pub client: Client,
}

pub fn cfg(dir: &Path, listen: &str) -> CoordConfig {
    CoordConfig {
        listen: listen.into(),
        data_dir: dir.join("coord"),
        dead_after_ms: 800,
        io_timeout_ms: 3000,
        chunk_size: 64 << 10,
        repair_attempts: 4,
        // These tests start each repair themselves and count what it did.
        auto_repair: false,
        ..Default::default()
    }
}

pub async fn cluster(dir: &Path, n: usize, link: Option<f64>) -> Cluster {
    cluster_with(cfg(dir, "127.0.0.1:0"), dir, n, link).await
}

pub async fn cluster_with(conf: CoordConfig, dir: &Path, n: usize, link: Option<f64>) -> Cluster {
    cluster_nodes(conf, dir, n, |_, c| NodeConfig { uplink: link, downlink: link, ..c }).await
}

/// Node i's default configuration in a test cluster.
pub fn node_cfg(dir: &Path, i: usize, coord_addr: &str) -> NodeConfig {
    NodeConfig {
        id: i as u32,
        data_dir: dir.join(format!("node{i}")),
        coordinator: Some(coord_addr.to_string()),
        heartbeat_ms: 100,
        io_timeout_ms: 3000,
        ..Default::default()
    }
}

/// A cluster whose node i is configured by `node(i, defaults)`.
pub async fn cluster_nodes(conf: CoordConfig, dir: &Path, n: usize, node: impl Fn(usize, NodeConfig) -> NodeConfig) -> Cluster {
    let coord = start(conf).await.unwrap();
    let coord_addr = coord.addr.to_string();
    let mut nodes = Vec::new();
    for i in 0..n {
        nodes.push(Some(kintsugi_node::start(node(i, node_cfg(dir, i, &coord_addr))).await.unwrap()));
    }
    let mut client = Client::new(&coord_addr);
    client.io_timeout = Duration::from_secs(10);
    let c = Cluster { coord: Some(coord), coord_addr, nodes, client };
    c.wait_alive(n).await;
    c
}

impl Cluster {
    pub async fn wait_alive(&self, n: usize) {
        for _ in 0..200 {
            if let Ok(s) = self.client.status().await {
                if s.nodes.iter().filter(|x| x.alive).count() == n {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{n} nodes never became alive");
    }

    /// Chunk files on all running nodes.
    pub fn chunk_files(&self) -> u64 {
        self.nodes.iter().flatten().map(|n| n.stat().chunks).sum()
    }

    /// Waits until the nodes hold exactly `want` chunk files (a collector running every
    /// 100 ms); returns what they hold at the end.
    pub async fn settle_to(&self, want: u64) -> u64 {
        for _ in 0..100 {
            if self.chunk_files() == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.chunk_files()
    }

    pub async fn kill(&mut self, i: usize) {
        if let Some(n) = self.nodes[i].take() {
            n.stop().await;
        }
    }

    /// Starts node i again on its data directory (default configuration).
    pub async fn restart(&mut self, dir: &Path, i: usize) {
        self.nodes[i] = Some(kintsugi_node::start(node_cfg(dir, i, &self.coord_addr)).await.unwrap());
    }

    /// Stops the coordinator and every node.
    pub async fn stop(mut self) {
        if let Some(c) = self.coord.take() {
            c.stop().await;
        }
        for n in self.nodes.iter_mut() {
            if let Some(n) = n.take() {
                n.stop().await;
            }
        }
    }
}

pub fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
