//! Recycled unit buffers. A repair moves a chunk slice by slice through several tasks;
//! allocating a buffer per slice and freeing it after the send made the allocator return
//! memory to the kernel and fault it in again, which cost more system time than the
//! bytes' own copies. Buffers come back here once sent and are handed out again.

use std::sync::Mutex;

/// Bytes the pool keeps at most; beyond it returned buffers are freed.
const MAX_POOLED: usize = 64 << 20;
/// Buffers larger than this are never pooled (whole store-and-forward lanes).
const MAX_BUFFER: usize = 4 << 20;

static POOL: Mutex<(Vec<Vec<u8>>, usize)> = Mutex::new((Vec::new(), 0));

/// An empty buffer with room for at least `cap` bytes (fill it with `extend`, `read_buf`).
pub fn take(cap: usize) -> Vec<u8> {
    if cap <= MAX_BUFFER {
        let mut p = POOL.lock().expect("pool lock");
        // Buffers are nearly all one size (the slice): the last few are enough to look at.
        let n = p.0.len();
        if let Some(i) = (n.saturating_sub(4)..n).rev().find(|&i| p.0[i].capacity() >= cap) {
            let mut v = p.0.swap_remove(i);
            p.1 -= v.capacity();
            v.clear();
            return v;
        }
    }
    Vec::with_capacity(cap)
}

/// A buffer of `len` zero bytes.
pub fn zeroed(len: usize) -> Vec<u8> {
    let mut v = take(len);
    v.resize(len, 0);
    v
}

/// Gives a buffer back for reuse.
pub fn give(v: Vec<u8>) {
    let cap = v.capacity();
    if cap == 0 || cap > MAX_BUFFER {
        return;
    }
    let mut p = POOL.lock().expect("pool lock");
    if p.1 + cap <= MAX_POOLED {
        p.1 += cap;
        p.0.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_and_large_enough() {
        let mut v = zeroed(1000);
        v[0] = 7;
        give(v);
        let w = take(1000);
        assert!(w.is_empty() && w.capacity() >= 1000);
        let z = zeroed(900);
        assert!(z.iter().all(|&b| b == 0), "zeroed means zeroed, whatever was there before");
        give(vec![0u8; MAX_BUFFER + 1]);
        assert!(take(MAX_BUFFER + 1).capacity() > MAX_BUFFER);
    }
}
