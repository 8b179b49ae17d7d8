//! A 3-member etcd cluster on loopback (Debian's `etcd-server`), for the tests of the etcd
//! metadata store and of several coordinators. Members can be killed and started again.

use super::procs::{free_port, Proc};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether an `etcd` binary is on the PATH (the tests that need one skip without it).
pub fn available() -> bool {
    Command::new("etcd").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

pub struct EtcdCluster {
    dir: PathBuf,
    /// (client port, peer port) per member.
    ports: Vec<(u16, u16)>,
    members: Vec<Option<Proc>>,
    token: String,
}

impl EtcdCluster {
    /// Starts three members under `dir` and waits until they serve.
    pub fn start(dir: &Path) -> Self {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let token = format!("kintsugi-test-{}", free_port());
        let mut c = EtcdCluster { dir: dir.to_path_buf(), ports, members: vec![None, None, None], token };
        for i in 0..3 {
            c.start_member(i);
        }
        c.wait_serving(Duration::from_secs(30));
        c
    }

    pub fn start_member(&mut self, i: usize) {
        let cluster: Vec<String> = self.ports.iter().enumerate().map(|(j, (_, p))| format!("m{j}=http://127.0.0.1:{p}")).collect();
        let (client, peer) = self.ports[i];
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("etcd{i}.log"))).unwrap();
        let child = Command::new("etcd")
            .args(["--name", &format!("m{i}"), "--data-dir"])
            .arg(self.dir.join(format!("etcd{i}")))
            .args(["--listen-client-urls", &format!("http://127.0.0.1:{client}")])
            .args(["--advertise-client-urls", &format!("http://127.0.0.1:{client}")])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args(["--initial-cluster", &cluster.join(","), "--initial-cluster-state", "new", "--initial-cluster-token", &self.token])
            // Placement counters make a transaction of a put touch many keys.
            .args(["--max-txn-ops", "100000", "--max-request-bytes", "33554432"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start etcd");
        self.members[i] = Some(Proc(child));
    }

    /// kill -9 of member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i] = None;
    }

    /// `HOST:PORT,...` of the members' client ports.
    pub fn endpoints(&self) -> String {
        self.ports.iter().map(|(c, _)| format!("127.0.0.1:{c}")).collect::<Vec<_>>().join(",")
    }

    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoints())
    }

    pub fn client(&self) -> kintsugi_coord::metadata::etcd_http::Etcd {
        let e: Vec<String> = self.endpoints().split(',').map(String::from).collect();
        kintsugi_coord::metadata::etcd_http::Etcd::new(&e, Duration::from_secs(2), Duration::from_secs(5)).unwrap()
    }

    fn wait_serving(&self, limit: Duration) {
        let start = Instant::now();
        let c = self.client();
        while c
            .txn(&[], &[kintsugi_coord::metadata::etcd_http::Op::Put { key: b"/probe".to_vec(), value: b"1".to_vec(), lease: 0 }], &[])
            .is_err()
        {
            assert!(start.elapsed() < limit, "etcd did not start serving in {limit:?}; see {}", self.dir.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
