//! Helpers shared by integration tests (each test file uses some of them).
#![allow(dead_code)]

pub mod etcd;
pub mod history;
pub mod procs;
pub mod untrusted;

use std::time::{Duration, Instant};

/// Waits until the coordinator `c` talks to sees `n` live nodes (60 s at most).
pub async fn wait_alive(c: &kintsugi_client::Client, n: usize) {
    let start = Instant::now();
    loop {
        if let Ok(s) = c.status().await {
            if s.nodes.iter().filter(|x| x.alive).count() == n {
                return;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never saw {n} live nodes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
