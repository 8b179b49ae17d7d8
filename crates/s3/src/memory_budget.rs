//! The gateway's memory for bodies in flight, shared by all requests: a PUT holds what its
//! put's two stripes take, charged as its body arrives ([`Charged`]), so a client that
//! stalls holds only what it sent; a GET holds its read-ahead windows, reserved before it
//! starts. However many clients send or fetch at once, the gateway's memory stays bounded
//! (requests beyond the budget wait their turn; TCP holds their clients back meanwhile).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Budgets are counted in these units: a stalled upload holds one. Small enough that the
/// most connections a gateway serves at once ([`crate::server::MAX_CONNECTIONS`]), each a
/// stalled upload, hold less than the default budget (see the test below).
const UNIT: u64 = 64 << 10;

/// The default budget: a large PUT (two stripes of RS(6,3) with 4 MiB chunks, 72 MiB) and a
/// GET's read-ahead at once. With the allocator's slack and the gateway's own few tens of
/// MiB, the gateway stays under 256 MiB whatever its clients do.
pub const DEFAULT_BUDGET: u64 = 96 << 20;

pub struct MemoryBudget {
    permits: Arc<Semaphore>,
    units: u32,
}

impl MemoryBudget {
    pub fn new(bytes: u64) -> Self {
        let units = (bytes / UNIT).clamp(1, u32::MAX as u64 >> 4) as u32;
        MemoryBudget { permits: Arc::new(Semaphore::new(units as usize)), units }
    }

    /// Waits until `bytes` (at least one unit, at most the whole budget: a request larger
    /// than the budget runs alone) are free, and holds them until the reservation drops.
    pub async fn reserve(&self, bytes: u64) -> OwnedSemaphorePermit {
        let want = (bytes.div_ceil(UNIT).max(1)).min(self.units as u64) as u32;
        self.permits.clone().acquire_many_owned(want).await.expect("the semaphore is never closed")
    }

    /// What is free now, in bytes.
    pub fn free(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }

    /// [`MemoryBudget::reserve`] as a future that owns what it needs, for `units` units.
    fn reserve_units(&self, units: u32) -> impl Future<Output = OwnedSemaphorePermit> + Send + 'static {
        let permits = self.permits.clone();
        async move { permits.acquire_many_owned(units).await.expect("the semaphore is never closed") }
    }
}

/// How long a PUT that holds part of its memory waits for more before it is refused
/// (503 SlowDown): puts each holding part and all waiting for more would otherwise wait on
/// each other for ever.
pub const MORE_WAIT: Duration = Duration::from_secs(30);

type Reserving = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, tokio::time::error::Elapsed>> + Send>>;

/// A PUT's body, read only as far as the memory charged for it, a unit at a time, up to the
/// put's whole need, after which it reads freely (a put holds at most two stripes, whatever
/// its size).
pub struct Charged<R> {
    inner: R,
    budget: Arc<MemoryBudget>,
    need: u64,
    held: Option<OwnedSemaphorePermit>,
    held_bytes: u64,
    received: u64,
    reserving: Option<Reserving>,
    /// Set when the budget could not be had within [`MORE_WAIT`].
    pub starved: Arc<AtomicBool>,
}

impl<R> Charged<R> {
    /// `inner`, charging up to `need` bytes to `budget` as it is read.
    pub fn new(inner: R, budget: Arc<MemoryBudget>, need: u64) -> Self {
        Charged { inner, budget, need, held: None, held_bytes: 0, received: 0, reserving: None, starved: Arc::default() }
    }

    /// Bytes of the budget it holds.
    pub fn held(&self) -> u64 {
        self.held_bytes
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Charged<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        let whole = me.need.min(me.budget.units as u64 * UNIT);
        // Room for at least the next byte: a unit more whenever all that is held was read.
        while me.held_bytes < whole && me.held_bytes <= me.received {
            let want = 1;
            let budget = me.budget.clone();
            let r = me.reserving.get_or_insert_with(|| Box::pin(tokio::time::timeout(MORE_WAIT, budget.reserve_units(want))));
            match r.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => {
                    me.reserving = None;
                    me.starved.store(true, Ordering::Relaxed);
                    return Poll::Ready(Err(std::io::Error::other(format!("no memory for the body within {MORE_WAIT:?}"))));
                }
                Poll::Ready(Ok(p)) => {
                    me.reserving = None;
                    me.held_bytes += p.num_permits() as u64 * UNIT;
                    match &mut me.held {
                        Some(h) => h.merge(p),
                        None => me.held = Some(p),
                    }
                }
            }
        }
        if me.held_bytes >= whole {
            let before = buf.filled().len();
            let r = Pin::new(&mut me.inner).poll_read(cx, buf);
            me.received += (buf.filled().len() - before) as u64;
            return r;
        }
        // Only as far as what is held.
        let allowed = ((me.held_bytes - me.received) as usize).min(buf.remaining());
        let mut part = buf.take(allowed);
        let r = Pin::new(&mut me.inner).poll_read(cx, &mut part);
        let n = part.filled().len();
        // SAFETY: `part` is the start of `buf`'s unfilled memory, and its reader filled `n` bytes of it.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        me.received += n as u64;
        r
    }
}

/// What a put of `size` bytes holds: two stripes of the code (`n` chunks of `chunk`), or
/// the object's encoded size if smaller.
pub fn put_bytes(size: u64, k: usize, n: usize, chunk: u64) -> u64 {
    let encoded = size.div_ceil(k.max(1) as u64).saturating_mul(n as u64);
    encoded.min(2 * n as u64 * chunk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_body_is_charged_as_it_arrives_and_holds_only_what_it_sent() {
        let budget = Arc::new(MemoryBudget::new(8 << 20));
        // A client that sent 1,000 bytes of a large body and stalls.
        let (mut tx, rx) = tokio::io::duplex(64 << 10);
        tokio::io::AsyncWriteExt::write_all(&mut tx, &[7u8; 1000]).await.unwrap();
        let mut stalled = Charged::new(rx, budget.clone(), 6 << 20);
        let mut buf = vec![0u8; 4096];
        assert_eq!(stalled.read(&mut buf).await.unwrap(), 1000);
        let more = tokio::time::timeout(Duration::from_millis(50), stalled.read(&mut buf)).await;
        assert!(more.is_err(), "nothing more was sent");
        assert_eq!((stalled.held(), budget.free()), (UNIT, (8 << 20) - UNIT), "it holds one unit, not its whole need");
        // Another body reads its whole 5 MiB beside it.
        let body = vec![1u8; 5 << 20];
        let mut other = Charged::new(&body[..], budget.clone(), 6 << 20);
        let mut out = Vec::new();
        other.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, body);
        assert_eq!(other.held(), (5 << 20) + UNIT, "what it read (its end read with a unit more), not its need");
        drop(other);
        drop(stalled);
        assert_eq!(budget.free(), 8 << 20, "all of it back");
    }

    #[tokio::test]
    async fn reservations_wait_for_room_and_a_huge_one_runs_alone() {
        let b = MemoryBudget::new(10 << 20);
        let a = b.reserve(6 << 20).await;
        assert_eq!(b.free(), 4 << 20);
        // Does not fit until `a` is gone.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), b.reserve(5 << 20)).await;
        assert!(waiting.is_err());
        drop(a);
        let c = b.reserve(5 << 20).await;
        drop(c);
        let whole = b.reserve(1 << 40).await;
        assert_eq!(b.free(), 0);
        drop(whole);
        assert_eq!(b.free(), 10 << 20);
        let small = b.reserve(1).await;
        assert_eq!(b.free(), (10 << 20) - UNIT);
        drop(small);
        assert_eq!(put_bytes(4096, 4, 6, 4 << 20), 6144);
        assert_eq!(put_bytes(1 << 30, 4, 6, 4 << 20), 48 << 20);
    }

    #[test]
    fn every_connection_a_stalled_upload_leaves_room_in_the_default_budget() {
        let held = crate::server::MAX_CONNECTIONS as u64 * UNIT;
        assert!(held < DEFAULT_BUDGET, "{held} bytes held by stalled uploads on every connection");
    }
}
