//! When a service stops: at Ctrl-C (SIGINT) or at SIGTERM, the signal service managers and
//! `kill` send for a stop. Listening starts at [`listen`], before the service starts, so a
//! stop asked for while it starts (or while a standby waits to lead) is a clean stop, not
//! the signal's default, death.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// The stop signals, listened to from its making (inside the async runtime).
pub struct Shutdown {
    int: Option<Signal>,
    term: Option<Signal>,
}

/// Starts listening for SIGINT and SIGTERM.
pub fn listen() -> Shutdown {
    let watch = |kind, name| {
        signal(kind).map_err(|e| tracing::warn!("cannot watch for {name} ({e}): it stops this process without a clean stop")).ok()
    };
    Shutdown { int: watch(SignalKind::interrupt(), "SIGINT"), term: watch(SignalKind::terminate(), "SIGTERM") }
}

async fn recv(s: &mut Option<Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

impl Shutdown {
    /// Waits for a stop signal and names it.
    pub async fn requested(&mut self) -> &'static str {
        tokio::select! {
            _ = recv(&mut self.int) => "SIGINT",
            _ = recv(&mut self.term) => "SIGTERM",
        }
    }
}
