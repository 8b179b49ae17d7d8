//! A packet capture on loopback (tcpdump) during a put, a degraded read and a repair: with
//! encryption on, none of the object's bytes cross the wire in clear (a 32-byte random marker
//! the object holds every 4 KiB appears nowhere in the capture). The same run with
//! `authenticated` (bytes in clear, each record tagged) finds the marker: the capture sees
//! the traffic. Needs root and tcpdump; skips otherwise, except under CI (which has both).
//! (Its own test binary: the secret and protection are process-wide.)

use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use kintsugi_proto::auth::{set_protection, set_secret, Secret};
use kintsugi_proto::secure::Protection;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const NODES: usize = 7;

/// tcpdump writing every loopback packet to `file`, stopped (and flushed) when dropped.
struct Capture(std::process::Child);

impl Capture {
    fn start(file: &Path, log: &Path) -> Capture {
        let child = Command::new("tcpdump")
            .args(["-i", "lo", "-s", "0", "-U", "-n", "-w"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("starting tcpdump");
        let start = Instant::now();
        while !std::fs::read_to_string(log).unwrap_or_default().contains("listening on") {
            assert!(start.elapsed() < Duration::from_secs(10), "tcpdump did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Capture(child)
    }

    fn stop(self) {}
}

impl Drop for Capture {
    /// SIGINT: tcpdump writes out what it holds and exits (also when the test panics).
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = self.0.wait();
    }
}

/// Bytes of `len` with `marker` at every 4 KiB and pseudo-random bytes between.
fn object(len: usize, marker: &[u8; 32]) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    for at in (0..len.saturating_sub(32)).step_by(4096) {
        v[at..at + 32].copy_from_slice(marker);
    }
    v
}

/// Puts an object, reads it with a node down (a degraded read), fails the node, repairs;
/// returns how often the marker appears in the capture of it all.
async fn run(dir: &Path, protection: Protection, marker: &[u8; 32]) -> usize {
    set_protection(protection);
    let file = dir.join(format!("{protection}.pcap"));
    let capture = Capture::start(&file, &dir.join(format!("{protection}.tcpdump.log")));
    let here = dir.join(protection.to_string());
    let conf = kintsugi_coord::CoordConfig { chunk_size: 64 << 10, ..common::cfg(&here, "127.0.0.1:0") };
    let mut c = common::cluster_nodes(conf, &here, NODES, |_, n| n).await;
    let data = object(1 << 20, marker);
    let client = c.client.clone();
    assert_eq!(client.status().await.unwrap().protection, protection);
    client.put("obj", &data, "rs:4,2".parse().unwrap(), 0).await.unwrap();
    let victim = client.stat("obj").await.unwrap().stripes[0].chunks[0].node as usize;
    c.kill(victim).await;
    assert_eq!(client.get("obj", Shape::Ppr, 16 << 10).await.unwrap().0, data, "degraded read");
    client.fail(victim as u32).await.unwrap();
    let r = client.repair(Shape::Ecpipe, 16 << 10, 4, Scheduler::Random).await.unwrap();
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}");
    assert_eq!(client.get("obj", Shape::Cr, 16 << 10).await.unwrap().0, data);
    c.stop().await;
    capture.stop();
    let pcap = std::fs::read(&file).unwrap();
    assert!(pcap.len() > 3 << 20, "the capture holds the traffic: {} bytes", pcap.len());
    pcap.windows(32).filter(|w| *w == marker).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_traffic_carries_none_of_the_objects_bytes() {
    // SAFETY: geteuid takes nothing and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let tcpdump = Command::new("tcpdump").arg("--version").output().is_ok();
    if !(root && tcpdump) {
        assert!(std::env::var("CI").is_err(), "CI runs as root with tcpdump (.ci/run installs it)");
        eprintln!("skipping: needs root and tcpdump");
        return;
    }
    set_secret(Some(Secret::random()));
    let marker: [u8; 32] = rand::random();
    let dir = tempfile::tempdir().unwrap();
    let clear = run(dir.path(), Protection::Authenticated, &marker).await;
    assert!(clear > 100, "authenticated traffic is in clear: the marker should be seen, {clear} times");
    let sealed = run(dir.path(), Protection::Encrypted, &marker).await;
    assert_eq!(sealed, 0, "the marker crossed loopback in clear with encryption on");
    eprintln!("capture: the marker seen {clear} times authenticated, {sealed} encrypted");
}
