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

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
