//! In-process link emulation: a token bucket per direction of each node. Senders take
//! tokens before writing a data frame, receivers after reading one, so a shaped downlink
//! also slows its senders through TCP backpressure. Debt is allowed (tokens go negative and
//! the caller sleeps it off), which keeps concurrent users roughly fair and the long-run
//! rate exact.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bytes per second with a small burst.
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A bucket of `rate` bytes per second (must be positive).
    pub fn new(rate: f64) -> Self {
        assert!(rate > 0.0 && rate.is_finite(), "rate must be positive");
        let burst = (rate * 0.002).max(128.0 * 1024.0);
        TokenBucket { rate, burst, state: Mutex::new((burst, Instant::now())) }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Waits until `n` bytes may pass.
    pub async fn acquire(&self, n: usize) {
        let wait = {
            let mut s = self.state.lock().expect("bucket lock");
            let now = Instant::now();
            let refill = now.duration_since(s.1).as_secs_f64() * self.rate;
            s.0 = (s.0 + refill).min(self.burst) - n as f64;
            s.1 = now;
            if s.0 < 0.0 {
                Duration::from_secs_f64(-s.0 / self.rate)
            } else {
                Duration::ZERO
            }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// A node's two directions; `None` is unshaped.
#[derive(Debug, Default)]
pub struct Shaper {
    pub up: Option<TokenBucket>,
    pub down: Option<TokenBucket>,
}

impl Shaper {
    pub fn new(up: Option<f64>, down: Option<f64>) -> Self {
        Shaper { up: up.map(TokenBucket::new), down: down.map(TokenBucket::new) }
    }
    pub async fn send(&self, n: usize) {
        if let Some(b) = &self.up {
            b.acquire(n).await;
        }
    }
    pub async fn recv(&self, n: usize) {
        if let Some(b) = &self.down {
            b.acquire(n).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_run_rate_is_the_configured_one() {
        let b = TokenBucket::new(20e6);
        let start = Instant::now();
        for _ in 0..100 {
            b.acquire(64 * 1024).await;
        }
        // 6.5 MB at 20 MB/s is ~0.33 s minus the initial burst; sleeping can only make it longer.
        let t = start.elapsed().as_secs_f64();
        assert!(t >= (100.0 * 65536.0 - b.burst) / 20e6 * 0.95, "{t}");
    }
}
