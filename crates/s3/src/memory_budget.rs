//! The gateway's memory for bodies in flight, shared by all requests: a PUT holds what its
//! put's two stripes take, a GET its read-ahead windows, both reserved before they start,
//! so that however many clients send or fetch at once, the gateway's memory stays bounded
//! (requests beyond the budget wait their turn; TCP holds their clients back meanwhile).

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Budgets are counted in these units.
const UNIT: u64 = 1 << 20;

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
        assert_eq!(b.free(), 9 << 20);
        drop(small);
        assert_eq!(put_bytes(4096, 4, 6, 4 << 20), 6144);
        assert_eq!(put_bytes(1 << 30, 4, 6, 4 << 20), 48 << 20);
    }
}
