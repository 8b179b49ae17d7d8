//! What keeps a slow or idle client from holding the gateway: a deadline for a request's
//! head, an idle limit on request bodies (the client sends nothing) and on responses (the
//! client reads nothing), and a cap on connections from one address. A stalled upload
//! then ends, and so does what it holds (its share of the memory budget, its connection).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Context;
use std::time::Duration;
use tokio::time::Sleep;

/// The limits, each with a default that holds for clients across the internet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientLimits {
    /// From a connection's start, or the end of its last request, to a request's whole head.
    pub header_timeout: Duration,
    /// How long a request body may send nothing, or a response go unread.
    pub idle_timeout: Duration,
    /// Connections open at once from one address.
    pub connections_per_address: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits { header_timeout: Duration::from_secs(20), idle_timeout: Duration::from_secs(30), connections_per_address: 256 }
    }
}

/// A timer that runs only while an operation waits on the client, restarted by each step
/// it makes.
pub struct StallTimer {
    limit: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl StallTimer {
    pub fn new(limit: Duration) -> Self {
        StallTimer { limit, sleep: None }
    }

    /// After an operation was polled: whether it has now waited on the client for longer
    /// than the limit (`pending`: it is waiting; otherwise it moved and the timer stops).
    pub fn stalled(&mut self, cx: &mut Context<'_>, pending: bool) -> bool {
        if !pending {
            self.sleep = None;
            return false;
        }
        let limit = self.limit;
        let s = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        s.as_mut().poll(cx).is_ready()
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }
}

/// Connections open per client address, capped.
pub struct Addresses {
    open: Mutex<HashMap<IpAddr, usize>>,
    cap: usize,
}

/// One admitted connection; its address's count drops with it.
pub struct AddressSlot {
    addresses: Arc<Addresses>,
    ip: IpAddr,
}

impl Addresses {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Addresses { open: Mutex::default(), cap: cap.max(1) })
    }

    /// A slot for a connection from `ip`, or None if it has `cap` open already.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().expect("addresses lock");
        let n = open.entry(ip).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(AddressSlot { addresses: self.clone(), ip })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.addresses.open.lock().expect("addresses lock");
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// S3's answer to a body that stopped arriving (400 RequestTimeout), closing the connection.
pub fn request_timeout(idle: Duration) -> http::Response<s3s::Body> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>RequestTimeout</Code><Message>Your socket connection to the server was \
         not read from or written to within the timeout period ({} s).</Message></Error>",
        idle.as_secs()
    );
    let mut r = http::Response::new(s3s::Body::from(body));
    *r.status_mut() = http::StatusCode::BAD_REQUEST;
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
    r.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_cap_of_connections_and_a_slot_back_when_one_closes() {
        let a = Addresses::new(2);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = a.admit(ip).unwrap();
        let _s2 = a.admit(ip).unwrap();
        assert!(a.admit(ip).is_none(), "a third from one address");
        assert!(a.admit(other).is_some(), "another address is not held back");
        drop(s1);
        assert!(a.admit(ip).is_some());
    }

    #[tokio::test]
    async fn the_timer_runs_only_while_waiting_and_restarts_on_progress() {
        let mut t = StallTimer::new(Duration::from_millis(100));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(!t.stalled(&mut cx, true));
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!t.stalled(&mut cx, false), "progress stops it");
        assert!(!t.stalled(&mut cx, true), "and the next wait starts a new one");
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(t.stalled(&mut cx, true));
    }
}
