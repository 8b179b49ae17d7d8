//! Child processes of the `kintsugi` binary, killed when dropped, and free loopback ports.

use std::process::Child;

pub const BIN: &str = env!("CARGO_BIN_EXE_kintsugi");

/// A child process, killed and reaped when dropped (a failing test leaves nothing behind).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `kintsugi` process with `args`, its log appended to `log` in `dir`.
pub fn spawn_logged(dir: &std::path::Path, args: &[&str], log: &str) -> Proc {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(log)).unwrap();
    Proc(std::process::Command::new(BIN).args(args).stdout(std::process::Stdio::null()).stderr(log).spawn().unwrap())
}

/// Starts `kintsugi coordinator --config DIR/coord.toml`, logging to DIR/coord.log.
pub fn coordinator(dir: &std::path::Path) -> Proc {
    let cfg = dir.join("coord.toml");
    spawn_logged(dir, &["coordinator", "--config", cfg.to_str().unwrap()], "coord.log")
}

/// A loopback port nobody listens on right now, and that no outgoing connection will take:
/// below Linux's ephemeral range (32768-60999), where the kernel never picks a client's
/// source port. (A port from `bind(0)` is ephemeral: while a node process started, a
/// connection elsewhere could take it as its source port, and the node could not listen.)
/// Never the same port twice in one test process.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    // Spread over the range by process and time, so parallel test processes rarely meet.
    let seed =
        std::process::id() as u64 ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut x = seed | 1;
    for _ in 0..10_000 {
        // xorshift: cheap, and no dependency for a test helper.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let port = 20_000 + (x % 12_000) as u16;
        if given.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    panic!("no free loopback port in 20000-31999");
}

/// A `kintsugi node` process (id 0, loopback, data in `dir`/node) with the cluster secret in
/// `secret_file`, and the address it says it listens on. Its log is drained on a thread.
pub fn node_with_secret(dir: &std::path::Path, secret_file: &std::path::Path) -> (Proc, String) {
    node_with_secret_env(dir, secret_file, &[])
}

/// [`node_with_secret`] with more environment variables.
pub fn node_with_secret_env(dir: &std::path::Path, secret_file: &std::path::Path, env: &[(&str, &str)]) -> (Proc, String) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(BIN)
        .envs(env.iter().copied())
        .args(["node", "--id", "0", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("node"))
        .arg("--secret-file")
        .arg(secret_file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("the node said where it listens").unwrap();
        if let Some((_, rest)) = line.split_once("listening on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (Proc(child), addr)
}
