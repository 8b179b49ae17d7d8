//! x86-64 SIMD region kernels. One generic body (`kernel_bodies!`) is instantiated per
//! instruction set; each instantiation only supplies how to load, store, xor and multiply a
//! vector by a coefficient (PSHUFB nibble lookups, or one GFNI affine instruction).
//!
//! Every function here processes the longest prefix that is a multiple of the vector
//! width (times the unroll) and returns its length; the caller finishes the tail in scalar.
//! Callers must only call a module's functions after detecting its CPU features.

/// Generic bodies, expanded inside a module that defines `V`, `P`, `W`, `load`, `store`,
/// `vxor`, `zero`, `prep` and `mulv`, all with the module's target features.
/// How far ahead of the current position each source is prefetched (`PF` kernels).
const PREFETCH: usize = 1024;
const MAD_PREFETCH: usize = 512;

macro_rules! kernel_bodies {
    ($feat:literal) => {
        /// dst (^)= c * src over the vector-aligned prefix; returns the bytes done.
        #[target_feature(enable = $feat)]
        pub unsafe fn mul_region<const XOR: bool>(t: &CoefTable, src: &[u8], dst: &mut [u8]) -> usize {
            let len = src.len().min(dst.len());
            let step = 2 * W;
            let done = len / step * step;
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            let mut i = 0;
            while i < done {
                if i + super::MAD_PREFETCH < done {
                    core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(s.add(i + super::MAD_PREFETCH) as *const i8);
                    if XOR {
                        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(d.add(i + super::MAD_PREFETCH) as *const i8);
                    }
                }
                let p0 = prep(load(s.add(i)));
                let p1 = prep(load(s.add(i + W)));
                let mut r0 = mulv(t, &p0);
                let mut r1 = mulv(t, &p1);
                if XOR {
                    r0 = vxor(r0, load(d.add(i)));
                    r1 = vxor(r1, load(d.add(i + W)));
                }
                store(d.add(i), r0);
                store(d.add(i + W), r1);
                i += step;
            }
            done
        }

        /// For N outputs at once: dsts[o] (^)= sum_i tabs[i*N + o] * srcs[i], reading each
        /// source once per position (ISA-L's multi-vector dot product). U vectors per
        /// position step keep enough independent work in flight when N is small.
        #[target_feature(enable = $feat)]
        pub unsafe fn dot_region<const N: usize, const U: usize, const XOR: bool, const PF: bool>(
            tabs: &[CoefTable],
            srcs: &[&[u8]],
            dsts: &mut [&mut [u8]],
            len: usize,
        ) -> usize {
            debug_assert_eq!(tabs.len(), srcs.len() * N);
            debug_assert_eq!(dsts.len(), N);
            let step = U * W;
            let done = len / step * step;
            let mut dptr = [core::ptr::null_mut::<u8>(); N];
            for (o, d) in dsts.iter_mut().enumerate() {
                dptr[o] = d.as_mut_ptr();
            }
            let mut pos = 0;
            while pos < done {
                let mut acc = [[zero(); U]; N];
                if XOR {
                    for o in 0..N {
                        for u in 0..U {
                            acc[o][u] = load(dptr[o].add(pos + u * W));
                        }
                    }
                }
                for (i, src) in srcs.iter().enumerate() {
                    let sp = src.as_ptr().add(pos);
                    if PF && pos + super::PREFETCH < len {
                        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(sp.add(super::PREFETCH) as *const i8);
                    }
                    let mut pv = [prep(zero()); U];
                    for u in 0..U {
                        pv[u] = prep(load(sp.add(u * W)));
                    }
                    let row = &tabs[i * N..i * N + N];
                    for o in 0..N {
                        for u in 0..U {
                            acc[o][u] = vxor(acc[o][u], mulv(&row[o], &pv[u]));
                        }
                    }
                }
                for o in 0..N {
                    for u in 0..U {
                        store(dptr[o].add(pos + u * W), acc[o][u]);
                    }
                }
                pos += step;
            }
            done
        }
    };
}

/// PSHUFB over 16-byte vectors.
pub mod ssse3 {
    use crate::coef::CoefTable;
    use core::arch::x86_64::*;
    type V = __m128i;
    type P = (V, V);
    const W: usize = 16;

    #[inline]
    #[target_feature(enable = "ssse3")]
    unsafe fn load(p: *const u8) -> V {
        _mm_loadu_si128(p as *const V)
    }
    #[inline]
    #[target_feature(enable = "ssse3")]
    unsafe fn store(p: *mut u8, v: V) {
        _mm_storeu_si128(p as *mut V, v)
    }
    #[inline]
    #[target_feature(enable = "ssse3")]
    fn vxor(a: V, b: V) -> V {
        _mm_xor_si128(a, b)
    }
    #[inline]
    #[target_feature(enable = "ssse3")]
    fn zero() -> V {
        _mm_setzero_si128()
    }
    #[inline]
    #[target_feature(enable = "ssse3")]
    fn prep(v: V) -> P {
        let m = _mm_set1_epi8(0x0f);
        (_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi64::<4>(v), m))
    }
    #[inline]
    #[target_feature(enable = "ssse3")]
    unsafe fn mulv(t: &CoefTable, p: &P) -> V {
        let lo = _mm_loadu_si128(t.nib.as_ptr() as *const V);
        let hi = _mm_loadu_si128(t.nib.as_ptr().add(16) as *const V);
        _mm_xor_si128(_mm_shuffle_epi8(lo, p.0), _mm_shuffle_epi8(hi, p.1))
    }
    kernel_bodies!("ssse3");
}

/// PSHUFB over 32-byte vectors: the nibble tables are broadcast to both 128-bit lanes.
pub mod avx2 {
    use crate::coef::CoefTable;
    use core::arch::x86_64::*;
    type V = __m256i;
    type P = (V, V);
    const W: usize = 32;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load(p: *const u8) -> V {
        _mm256_loadu_si256(p as *const V)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store(p: *mut u8, v: V) {
        _mm256_storeu_si256(p as *mut V, v)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn vxor(a: V, b: V) -> V {
        _mm256_xor_si256(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn zero() -> V {
        _mm256_setzero_si256()
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn prep(v: V) -> P {
        let m = _mm256_set1_epi8(0x0f);
        (_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi64::<4>(v), m))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mulv(t: &CoefTable, p: &P) -> V {
        let lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.nib.as_ptr() as *const __m128i));
        let hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.nib.as_ptr().add(16) as *const __m128i));
        _mm256_xor_si256(_mm256_shuffle_epi8(lo, p.0), _mm256_shuffle_epi8(hi, p.1))
    }
    kernel_bodies!("avx2");
}

/// PSHUFB over 64-byte vectors (AVX-512BW).
pub mod avx512 {
    use crate::coef::CoefTable;
    use core::arch::x86_64::*;
    type V = __m512i;
    type P = (V, V);
    const W: usize = 64;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn load(p: *const u8) -> V {
        _mm512_loadu_si512(p as *const V)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn store(p: *mut u8, v: V) {
        _mm512_storeu_si512(p as *mut V, v)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn vxor(a: V, b: V) -> V {
        _mm512_xor_si512(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn zero() -> V {
        _mm512_setzero_si512()
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn prep(v: V) -> P {
        let m = _mm512_set1_epi8(0x0f);
        (_mm512_and_si512(v, m), _mm512_and_si512(_mm512_srli_epi64::<4>(v), m))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn mulv(t: &CoefTable, p: &P) -> V {
        let lo = _mm512_broadcast_i32x4(_mm_loadu_si128(t.nib.as_ptr() as *const __m128i));
        let hi = _mm512_broadcast_i32x4(_mm_loadu_si128(t.nib.as_ptr().add(16) as *const __m128i));
        _mm512_xor_si512(_mm512_shuffle_epi8(lo, p.0), _mm512_shuffle_epi8(hi, p.1))
    }
    kernel_bodies!("avx512f,avx512bw");
}

/// GFNI affine transform over 32-byte vectors: one instruction per multiply, any polynomial.
pub mod gfni {
    use crate::coef::CoefTable;
    use core::arch::x86_64::*;
    type V = __m256i;
    type P = V;
    const W: usize = 32;

    #[inline]
    #[target_feature(enable = "gfni,avx2")]
    unsafe fn load(p: *const u8) -> V {
        _mm256_loadu_si256(p as *const V)
    }
    #[inline]
    #[target_feature(enable = "gfni,avx2")]
    unsafe fn store(p: *mut u8, v: V) {
        _mm256_storeu_si256(p as *mut V, v)
    }
    #[inline]
    #[target_feature(enable = "gfni,avx2")]
    fn vxor(a: V, b: V) -> V {
        _mm256_xor_si256(a, b)
    }
    #[inline]
    #[target_feature(enable = "gfni,avx2")]
    fn zero() -> V {
        _mm256_setzero_si256()
    }
    #[inline]
    #[target_feature(enable = "gfni,avx2")]
    fn prep(v: V) -> P {
        v
    }
    #[inline]
    #[target_feature(enable = "gfni,avx2")]
    fn mulv(t: &CoefTable, p: &P) -> V {
        _mm256_gf2p8affine_epi64_epi8::<0>(*p, _mm256_set1_epi64x(t.affine as i64))
    }
    kernel_bodies!("gfni,avx2");
}

/// GFNI affine transform over 64-byte vectors (AVX-512 with GFNI): one instruction per
/// multiply of 64 bytes, and twice the registers of the 32-byte kernels for accumulators.
pub mod gfni512 {
    use crate::coef::CoefTable;
    use core::arch::x86_64::*;
    type V = __m512i;
    type P = V;
    const W: usize = 64;

    #[inline]
    #[target_feature(enable = "gfni,avx512f,avx512bw")]
    unsafe fn load(p: *const u8) -> V {
        _mm512_loadu_si512(p as *const V)
    }
    #[inline]
    #[target_feature(enable = "gfni,avx512f,avx512bw")]
    unsafe fn store(p: *mut u8, v: V) {
        _mm512_storeu_si512(p as *mut V, v)
    }
    #[inline]
    #[target_feature(enable = "gfni,avx512f,avx512bw")]
    fn vxor(a: V, b: V) -> V {
        _mm512_xor_si512(a, b)
    }
    #[inline]
    #[target_feature(enable = "gfni,avx512f,avx512bw")]
    fn zero() -> V {
        _mm512_setzero_si512()
    }
    #[inline]
    #[target_feature(enable = "gfni,avx512f,avx512bw")]
    fn prep(v: V) -> P {
        v
    }
    #[inline]
    #[target_feature(enable = "gfni,avx512f,avx512bw")]
    fn mulv(t: &CoefTable, p: &P) -> V {
        _mm512_gf2p8affine_epi64_epi8::<0>(*p, _mm512_set1_epi64(t.affine as i64))
    }
    kernel_bodies!("gfni,avx512f,avx512bw");
}
