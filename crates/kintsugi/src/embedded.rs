//! An embedded cluster for `demo` and benchmarks: a coordinator and N nodes in this process,
//! each on its own loopback port and data directory, links shaped by token buckets.

use anyhow::{anyhow, bail, Result};
use kintsugi_client::Client;
use kintsugi_coord::{CoordConfig, CoordHandle};
use kintsugi_node::{NodeConfig, NodeHandle, Shaper};
use kintsugi_proto::NodeStat;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub struct Embedded {
    pub coord: Option<CoordHandle>,
    pub nodes: Vec<Option<NodeHandle>>,
    pub client: Client,
}

impl Embedded {
    /// Starts the cluster under `dir` and waits until every node has reported in.
    pub async fn start(dir: &Path, nodes: usize, link: Option<f64>) -> Result<Embedded> {
        Self::start_with(dir, nodes, link, None, 0).await
    }

    /// Like [`start`](Self::start), with every node's chunk store on an emulated HDD
    /// (positioning milliseconds, bytes per second) when `hdd` is given, and ChameleonEC's
    /// phase length `phase_ms` (0: the default).
    pub async fn start_with(dir: &Path, nodes: usize, link: Option<f64>, hdd: Option<(f64, f64)>, phase_ms: u64) -> Result<Embedded> {
        Self::start_tuned(dir, nodes, link, hdd, |c| c.repair_phase_ms = phase_ms).await
    }

    /// Like [`start_with`](Self::start_with), with `tune` adjusting the coordinator's
    /// configuration.
    pub async fn start_tuned(
        dir: &Path,
        nodes: usize,
        link: Option<f64>,
        hdd: Option<(f64, f64)>,
        tune: impl FnOnce(&mut CoordConfig),
    ) -> Result<Embedded> {
        Self::start_custom(dir, nodes, link, hdd, tune, |_, _| {}).await
    }

    /// Like [`start_tuned`](Self::start_tuned), with `tune_node(i, config)` adjusting node
    /// i's configuration too.
    pub async fn start_custom(
        dir: &Path,
        nodes: usize,
        link: Option<f64>,
        hdd: Option<(f64, f64)>,
        tune: impl FnOnce(&mut CoordConfig),
        tune_node: impl Fn(usize, &mut NodeConfig),
    ) -> Result<Embedded> {
        // The embedded cluster makes its own secret, so it runs authenticated like a real one.
        if kintsugi_proto::auth::secret().is_none() {
            kintsugi_proto::auth::set_secret(Some(kintsugi_proto::auth::Secret::random()));
        }
        let mut cfg = CoordConfig {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.join("coordinator"),
            // Failures are injected with `fail` (immediate); liveness only has to survive this
            // process encoding hundreds of MiB on two cores without a heartbeat for a while.
            dead_after_ms: 5000,
            io_timeout_ms: 30_000,
            // The demo and benchmarks time the repairs they start themselves.
            auto_repair: false,
            ..Default::default()
        };
        tune(&mut cfg);
        let coord = kintsugi_coord::start(cfg).await.map_err(|e| anyhow!(e))?;
        let addr = coord.addr.to_string();
        let mut handles = Vec::new();
        for i in 0..nodes {
            let mut c = NodeConfig {
                id: i as u32,
                data_dir: dir.join(format!("node{i:02}")),
                coordinator: Some(addr.clone()),
                uplink: link,
                downlink: link,
                heartbeat_ms: 200,
                io_timeout_ms: 30_000,
                hdd_seek_ms: hdd.map(|h| h.0),
                hdd_bandwidth: hdd.map(|h| h.1),
                ..Default::default()
            };
            tune_node(i, &mut c);
            handles.push(Some(kintsugi_node::start(c).await.map_err(|e| anyhow!(e))?));
        }
        let mut client = Client::new(&addr);
        client.io_timeout = Duration::from_secs(60);
        // The reader has a link like any node.
        client.shaper = Arc::new(Shaper::new(link, link));
        let e = Embedded { coord: Some(coord), nodes: handles, client };
        for _ in 0..200 {
            if let Ok(s) = e.client.status().await {
                if s.nodes.iter().filter(|n| n.alive).count() == nodes {
                    return Ok(e);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the embedded nodes did not all report to the coordinator")
    }

    /// Waits until the coordinator sees `n` live nodes.
    pub async fn wait_alive(&self, n: usize) -> Result<()> {
        for _ in 0..400 {
            if self.client.status().await.map_err(|e| anyhow!(e))?.nodes.iter().filter(|x| x.alive).count() == n {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the cluster never reached {n} live nodes")
    }

    pub fn stats(&self) -> Vec<Option<NodeStat>> {
        self.nodes.iter().map(|n| n.as_ref().map(|h| h.stat())).collect()
    }

    /// Stops everything.
    pub async fn stop(mut self) {
        if let Some(c) = self.coord.take() {
            c.stop().await;
        }
        for n in self.nodes.iter_mut() {
            if let Some(h) = n.take() {
                h.stop().await;
            }
        }
    }
}

/// Deterministic test data.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
