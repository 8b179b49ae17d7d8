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
    match take_filled(cap) {
        Some(mut v) => {
            v.clear();
            v
        }
        None => Vec::with_capacity(cap),
    }
}

/// A buffer of `len` zero bytes.
pub fn zeroed(len: usize) -> Vec<u8> {
    let mut v = take(len);
    v.resize(len, 0);
    v
}

/// A buffer of `len` bytes whose contents are whatever it held before, for a caller that
/// overwrites every byte: a recycled buffer keeps its length, so only bytes it never held
/// are zeroed (none, once buffers of the slice's size are about).
pub fn overwritable(len: usize) -> Vec<u8> {
    let mut v = take_filled(len).unwrap_or_default();
    if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, 0);
    }
    v
}

/// A pooled buffer of at least `len` bytes' capacity, contents kept. Buffers are nearly
/// all one size (the slice): the last few are enough to look at.
fn take_filled(len: usize) -> Option<Vec<u8>> {
    if len > MAX_BUFFER {
        return None;
    }
    let mut p = POOL.lock().expect("pool lock");
    let n = p.0.len();
    let i = (n.saturating_sub(4)..n).rev().find(|&i| p.0[i].capacity() >= len)?;
    let v = p.0.swap_remove(i);
    p.1 -= v.capacity();
    Some(v)
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
        // Other tests share the pool: only the length is certain.
        for len in [1000, 10, 2000, MAX_BUFFER + 1] {
            let o = overwritable(len);
            assert_eq!(o.len(), len);
            give(o);
        }
        give(vec![0u8; MAX_BUFFER + 1]);
        assert!(take(MAX_BUFFER + 1).capacity() > MAX_BUFFER);
    }
}
