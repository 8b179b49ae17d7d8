//! RepairBoost's gated transfers under a per-destination limit
//! (`repair_max_active_per_destination`). A batch's timeslots are reserved on every node
//! before any repair starts, and a node holds a later slot's transfer until the earlier
//! slots are done. A repair that waits for its destination's turn must then not hold the
//! slots the running repairs wait for: the repair would stall until the reservation's hold
//! (six I/O timeouts) passed. Gated repairs are ordered by their slots, as the simulator
//! orders them (`--max-active` does not apply to schedulers with timeslots).

use kintsugi_coord::{CoordConfig, TimeslotGating};
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use std::time::Instant;

mod common;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_repairs_do_not_wait_for_a_destinations_turn_behind_their_own_slots() {
    for (method, gating) in [(Shape::Ppr, TimeslotGating::StoreAndForward), (Shape::Ecpipe, TimeslotGating::All)] {
        let dir = tempfile::tempdir().unwrap();
        // A 10 s I/O timeout: a stalled batch would wait out a 60 s hold.
        let conf = CoordConfig {
            repair_max_active_per_destination: 1,
            gate_timeslots: gating,
            io_timeout_ms: 10_000,
            ..cfg(dir.path(), "127.0.0.1:0")
        };
        let mut c = cluster_with(conf, dir.path(), 9, Some(40e6)).await;
        let objects: Vec<(String, usize)> = (0..4).map(|i| (format!("o{i}"), 1_500_007 + i * 13)).collect();
        for (name, len) in &objects {
            c.client.put(name, &data(*len, *len as u64), "rs:4,2".parse().unwrap(), 65_536).await.unwrap();
        }
        c.kill(0).await;
        c.wait_alive(8).await;
        let lost = c.client.status().await.unwrap().lost_chunks;
        assert!(lost > 8, "more lost chunks than destinations: {lost}");
        let started = Instant::now();
        let r = c.client.repair_limited(method, 16_384, 32, Scheduler::Repairboost, None).await.unwrap();
        let took = started.elapsed().as_secs_f64();
        assert_eq!((r.repaired, r.failed, r.lost), (lost, 0, lost), "{method}: {r:?}");
        // About 40 MB/s links and a few MB to move: well under a second; a stall is a minute.
        assert!(took < 20.0, "{method}: {lost} repairs took {took:.1} s: a gated repair waited out a reservation's hold");
        let reserved: u64 = c.nodes.iter().flatten().map(|n| n.stat().timeslot_reservations).sum();
        assert_eq!(reserved, 0, "{method}: reservations left on the nodes after the repair");
        for (name, len) in &objects {
            let (got, rep) = c.client.get(name, Shape::Cr, 4096).await.unwrap();
            assert_eq!(got, data(*len, *len as u64), "{name} after {method}");
            assert!(rep.degraded.is_empty(), "{name} reads directly after repair");
        }
        c.coord.take().unwrap().stop().await;
        for i in 0..c.nodes.len() {
            c.kill(i).await;
        }
    }
}
