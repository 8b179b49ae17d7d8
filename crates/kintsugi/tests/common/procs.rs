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
