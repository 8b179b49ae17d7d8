//! Request/response exchanges with nodes over reused connections. A node serves request
//! after request on one connection, so a short exchange (a repair plan, a reservation, a
//! wait for a chunk to be durable) need not pay a TCP setup and the secret's challenge each
//! time: the coordinator dispatched a batch of 25 repairs over 175 fresh connections. (The
//! nodes still register such a batch 18-105 ms after the first plan is sent: the setups were
//! not what delayed them.) Connections come back only after an exchange that leaves nothing
//! unread (no data frames follow, no error closed it).

use crate::secure::Conn;
use crate::{recv, send, FrameError, NodeRequest, NodeResponse, WireError};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Idle connections kept per node, and how long one stays idle at most (nodes close theirs
/// after 600 s).
const IDLE_PER_NODE: usize = 16;
const IDLE_FOR: Duration = Duration::from_secs(30);
/// Addresses with idle connections, at most (the pool starts over beyond).
const IDLE_NODES: usize = 4096;

/// Per runtime and node address: idle connections, and since when each is idle. A socket
/// works only in the runtime it was made in (a benchmark builds and drops several).
type Idle = HashMap<(tokio::runtime::Id, String), Vec<(Conn, Instant)>>;

fn key(addr: &str) -> (tokio::runtime::Id, String) {
    (tokio::runtime::Handle::current().id(), addr.to_string())
}

static IDLE: Mutex<Option<Idle>> = Mutex::new(None);
/// When idle connections were last swept for age (those of runtimes that are gone too).
static SWEPT: Mutex<Option<Instant>> = Mutex::new(None);

/// An idle connection to `addr` that has not been idle too long.
pub fn take(addr: &str) -> Option<Conn> {
    let mut idle = IDLE.lock().expect("idle connections lock");
    let list = idle.as_mut()?.get_mut(&key(addr))?;
    list.retain(|(_, since)| since.elapsed() < IDLE_FOR);
    list.pop().map(|(s, _)| s)
}

/// Keeps `s`, left clean by its last exchange, for the next exchange with `addr`.
pub fn give_back(addr: &str, s: Conn) {
    let mut idle = IDLE.lock().expect("idle connections lock");
    let map = idle.get_or_insert_with(HashMap::new);
    {
        let mut swept = SWEPT.lock().expect("sweep lock");
        if swept.is_none_or(|t| t.elapsed() > IDLE_FOR) {
            map.retain(|_, list| {
                list.retain(|(_, since)| since.elapsed() < IDLE_FOR);
                !list.is_empty()
            });
            *swept = Some(Instant::now());
        }
    }
    let k = key(addr);
    if map.len() >= IDLE_NODES && !map.contains_key(&k) {
        map.clear();
    }
    let list = map.entry(k).or_default();
    if list.len() < IDLE_PER_NODE {
        list.push((s, Instant::now()));
    }
}

/// Whether the connection is left clean after this exchange: a control answer to a
/// control request (not a chunk's data, not a stream, not a node stopping), and no error
/// (after which a node closes the connection).
fn reusable(req: &NodeRequest, resp: &NodeResponse) -> bool {
    let plain = matches!(
        req,
        NodeRequest::Ping
            | NodeRequest::Stat
            | NodeRequest::DeleteChunk { .. }
            | NodeRequest::RunRepair { .. }
            | NodeRequest::WaitRepair { .. }
            | NodeRequest::Progress { .. }
            | NodeRequest::CancelRepair { .. }
            | NodeRequest::ReserveTimeslots { .. }
            | NodeRequest::ReleaseTimeslots { .. }
            | NodeRequest::IndexPut { .. }
            | NodeRequest::IndexGet { .. }
    );
    plain && !matches!(resp, NodeResponse::Error { .. })
}

/// Why an exchange got no answer, said for people.
pub enum Failure {
    /// The request did not get through, or the connection was closed before its answer
    /// started: on an idle connection, one the server had closed (it never saw the request).
    Closed(String),
    Other(String),
}

/// Whether `e` says the peer had closed the connection (an idle one: it never saw what was
/// sent on it after).
pub fn closed(e: &FrameError) -> bool {
    match e {
        FrameError::Closed => true,
        FrameError::Io(e) => {
            matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted)
        }
        _ => false,
    }
}

async fn exchange<Req: Serialize, Resp: DeserializeOwned>(
    s: &mut Conn,
    addr: &str,
    req: &Req,
    answer_within: Duration,
) -> Result<Resp, Failure> {
    // A request that could not be sent was not served: the caller may try a new connection.
    if let Err(e) = send(s, req).await {
        return Err(Failure::Closed(format!("{addr}: {e}")));
    }
    match tokio::time::timeout(answer_within, recv(s)).await {
        Err(_) => Err(Failure::Other(format!("{addr}: no answer within {answer_within:?}"))),
        Ok(Err(e)) if closed(&e) => Err(Failure::Closed(format!("{addr}: {e}"))),
        Ok(Err(e)) => Err(Failure::Other(format!("{addr}: {e}"))),
        Ok(Ok(r)) => Ok(r),
    }
}

/// Sends `req` to `addr` and reads its one-frame answer, on an idle connection to it if
/// there is one (else one from `connect`), which goes back for the next exchange when
/// `reusable` says the answer leaves it clean. An idle connection found closed is replaced
/// by a new one once: the server never had the request.
pub async fn pooled_exchange<Req, Resp, C>(
    addr: &str,
    req: &Req,
    answer_within: Duration,
    connect: impl FnOnce() -> C,
    reusable: impl Fn(&Resp) -> bool,
) -> Result<Resp, PooledError>
where
    Req: Serialize,
    Resp: DeserializeOwned,
    C: std::future::Future<Output = Result<Conn, WireError>>,
{
    if let Some(mut s) = take(addr) {
        match exchange(&mut s, addr, req, answer_within).await {
            Ok(r) => {
                if reusable(&r) {
                    give_back(addr, s);
                }
                return Ok(r);
            }
            Err(Failure::Closed(e)) => tracing::debug!("idle connection to {addr} was closed ({e}); connecting anew"),
            Err(Failure::Other(e)) => return Err(PooledError::NoAnswer(e)),
        }
    }
    let mut s = connect().await.map_err(PooledError::Connect)?;
    match exchange(&mut s, addr, req, answer_within).await {
        Ok(r) => {
            if reusable(&r) {
                give_back(addr, s);
            }
            Ok(r)
        }
        Err(Failure::Closed(e) | Failure::Other(e)) => Err(PooledError::NoAnswer(e)),
    }
}

/// A pooled exchange that got no answer.
#[derive(Debug)]
pub enum PooledError {
    /// No connection could be made (the connector's own error).
    Connect(WireError),
    /// The request went out (or may have) and no answer came: said for people.
    NoAnswer(String),
}

/// Sends `req` to the node at `addr` and reads its answer, on an idle connection to it if
/// there is one (else a new one, authenticated), which goes back for the next exchange when
/// the answer leaves it clean. Every failure to get an answer is `Unavailable`; the caller,
/// who knows which node it asked, names it as a fault where that matters.
pub async fn request(addr: &str, req: &NodeRequest, io_timeout: Duration) -> Result<NodeResponse, WireError> {
    let connect = || async { crate::auth::connect(addr, io_timeout).await.map_err(WireError::from) };
    pooled_exchange(addr, req, io_timeout, connect, |r| reusable(req, r)).await.map_err(|e| match e {
        PooledError::Connect(e) => e,
        PooledError::NoAnswer(m) => WireError::unavailable(m),
    })
}

/// Idle connections kept to `addr` now (tests).
pub fn idle_to(addr: &str) -> usize {
    IDLE.lock().expect("idle connections lock").as_ref().and_then(|m| m.get(&key(addr))).map_or(0, Vec::len)
}
