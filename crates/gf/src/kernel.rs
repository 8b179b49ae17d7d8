//! Kernel selection: one ordered choice of instruction set, detected once, overridable
//! (for tests and benchmarks) by `KINTSUGI_GF_KERNEL` or by calling a `Kernel` directly.

use crate::coef::CoefTable;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// A region-kernel implementation, ordered by instruction set, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kernel {
    /// Table lookups, one byte at a time. Always available; the reference.
    Scalar,
    /// 16-byte PSHUFB nibble lookups.
    Ssse3,
    /// 32-byte PSHUFB nibble lookups.
    Avx2,
    /// 32-byte GFNI affine transforms.
    Gfni,
    /// 64-byte PSHUFB nibble lookups (AVX-512BW).
    Avx512,
    /// 64-byte GFNI affine transforms (AVX-512 with GFNI).
    Gfni512,
}

/// The two kinds of region operation, which may run fastest on different kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// dst (^)= c * src: one source, one destination (a relay's combine).
    Mul = 0,
    /// A matrix of coefficients times several sources (encode, decode, repair).
    Dot = 1,
}

/// Every kernel, oldest instruction set first.
pub const ALL_KERNELS: [Kernel; 6] = [Kernel::Scalar, Kernel::Ssse3, Kernel::Avx2, Kernel::Gfni, Kernel::Avx512, Kernel::Gfni512];

impl Kernel {
    /// The kernel's name, as accepted by `KINTSUGI_GF_KERNEL`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Ssse3 => "ssse3",
            Kernel::Avx2 => "avx2",
            Kernel::Gfni => "gfni",
            Kernel::Avx512 => "avx512",
            Kernel::Gfni512 => "gfni512",
        }
    }

    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Kernel::Scalar => true,
                Kernel::Ssse3 => is_x86_feature_detected!("ssse3"),
                Kernel::Avx2 => is_x86_feature_detected!("avx2"),
                Kernel::Gfni => is_x86_feature_detected!("gfni") && is_x86_feature_detected!("avx2"),
                Kernel::Avx512 => is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw"),
                Kernel::Gfni512 => {
                    is_x86_feature_detected!("gfni") && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Kernel::Scalar
        }
    }

    /// The kernels this CPU can run, slowest first.
    pub fn available() -> Vec<Kernel> {
        ALL_KERNELS.into_iter().filter(|k| k.is_available()).collect()
    }

    /// The fastest kernel this CPU can run for `op`, by measurement (`kintsugi bench codec
    /// --isal libisal.so.2 --kernel K`, REPRODUCTION.md): 64-byte GFNI for dot products, but
    /// 32-byte GFNI for a single multiply(-add), which is bound by loads and stores and where
    /// 64-byte accesses to buffers not aligned to cache lines split every line.
    pub fn fastest(op: Op) -> Kernel {
        let order: &[Kernel] = match op {
            Op::Dot => &[Kernel::Gfni512, Kernel::Gfni, Kernel::Avx512, Kernel::Avx2, Kernel::Ssse3],
            Op::Mul => &[Kernel::Gfni, Kernel::Avx2, Kernel::Gfni512, Kernel::Avx512, Kernel::Ssse3],
        };
        order.iter().copied().find(|k| k.is_available()).unwrap_or(Kernel::Scalar)
    }

    /// The kernel forced by `KINTSUGI_GF_KERNEL`, if it names one this CPU has (a bad value
    /// is reported once and ignored). Read once per process.
    pub fn forced() -> Option<Kernel> {
        static FORCED: OnceLock<Option<Kernel>> = OnceLock::new();
        *FORCED.get_or_init(|| match std::env::var("KINTSUGI_GF_KERNEL") {
            Ok(name) => match name.parse::<Kernel>() {
                Ok(k) if k.is_available() => Some(k),
                Ok(k) => {
                    eprintln!("kintsugi-gf: KINTSUGI_GF_KERNEL={k} is not supported by this CPU; using the fastest per operation");
                    None
                }
                Err(e) => {
                    eprintln!("kintsugi-gf: {e}; using the fastest per operation");
                    None
                }
            },
            Err(_) => None,
        })
    }

    /// The kernel the free functions of this crate use for `op`: the forced one, or the
    /// fastest for `op`.
    pub fn active_for(op: Op) -> Kernel {
        static CHOSEN: OnceLock<[Kernel; 2]> = OnceLock::new();
        let chosen = CHOSEN.get_or_init(|| match Kernel::forced() {
            Some(k) => [k, k],
            None => [Kernel::fastest(Op::Mul), Kernel::fastest(Op::Dot)],
        });
        chosen[op as usize]
    }

    /// The kernel of dot products (encode, decode, repair): what reports name as "the" kernel.
    pub fn active() -> Kernel {
        Kernel::active_for(Op::Dot)
    }

    /// dst = c * src (`XOR` = false) or dst ^= c * src (`XOR` = true).
    ///
    /// Panics if the kernel is not available or the slices differ in length: both are
    /// programming errors, not data errors.
    pub fn mul_region<const XOR: bool>(self, c: u8, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "region lengths differ");
        assert!(self.is_available(), "kernel {self} is not available on this CPU");
        match c {
            0 if XOR => return,
            0 => return dst.fill(0),
            1 if XOR => return xor_into(src, dst),
            1 => return dst.copy_from_slice(src),
            _ => {}
        }
        let t = CoefTable::new(c);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the kernel's CPU features were checked by is_available above.
        let done = unsafe {
            use crate::simd::*;
            match self {
                Kernel::Scalar => 0,
                Kernel::Ssse3 => ssse3::mul_region::<XOR>(&t, src, dst),
                Kernel::Avx2 => avx2::mul_region::<XOR>(&t, src, dst),
                Kernel::Gfni => gfni::mul_region::<XOR>(&t, src, dst),
                Kernel::Avx512 => avx512::mul_region::<XOR>(&t, src, dst),
                Kernel::Gfni512 => gfni512::mul_region::<XOR>(&t, src, dst),
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = 0;
        scalar_mul::<XOR>(&t, &src[done..], &mut dst[done..]);
    }

    /// dsts[r] (^)= sum_c coefs[r][c] * srcs[c] for a precomputed coefficient matrix.
    /// Each source is read once per group of up to four outputs.
    pub fn apply<const XOR: bool>(self, m: &CoefMatrix, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
        self.apply_with::<XOR, false>(m, srcs, dsts)
    }

    /// [`Kernel::apply`], prefetching each source ahead when `PF`: for many short source
    /// runs scattered in memory (a window of each of many sub-chunks), whose starts the
    /// hardware prefetchers are slow to pick up. Long sequential sources gain nothing.
    pub fn apply_with<const XOR: bool, const PF: bool>(self, m: &CoefMatrix, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) {
        assert!(self.is_available(), "kernel {self} is not available on this CPU");
        assert_eq!(srcs.len(), m.cols, "source count differs from matrix columns");
        assert_eq!(dsts.len(), m.rows, "destination count differs from matrix rows");
        let Some(len) = srcs.first().map(|s| s.len()).or(dsts.first().map(|d| d.len())) else {
            return;
        };
        assert!(srcs.iter().all(|s| s.len() == len) && dsts.iter().all(|d| d.len() == len), "region lengths differ");
        if m.cols == 0 {
            if !XOR {
                dsts.iter_mut().for_each(|d| d.fill(0));
            }
            return;
        }
        let mut row = 0;
        for group in &m.groups {
            let n = group.len() / m.cols;
            let out = &mut dsts[row..row + n];
            let done = self.dot_simd::<XOR, PF>(n, group, srcs, out, len);
            scalar_dot::<XOR>(n, group, srcs, out, done, len);
            row += n;
        }
    }

    #[allow(unused_variables)]
    fn dot_simd<const XOR: bool, const PF: bool>(
        self,
        n: usize,
        tabs: &[CoefTable],
        srcs: &[&[u8]],
        out: &mut [&mut [u8]],
        len: usize,
    ) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd::*;
            macro_rules! by_n {
                ($m:ident) => {
                    // SAFETY: features checked by the caller; n == out.len() and
                    // tabs.len() == srcs.len() * n by CoefMatrix's construction.
                    unsafe {
                        match n {
                            1 => $m::dot_region::<1, 4, XOR, PF>(tabs, srcs, out, len),
                            2 => $m::dot_region::<2, 2, XOR, PF>(tabs, srcs, out, len),
                            3 => $m::dot_region::<3, 2, XOR, PF>(tabs, srcs, out, len),
                            4 => $m::dot_region::<4, 2, XOR, PF>(tabs, srcs, out, len),
                            _ => unreachable!("groups hold 1 to 4 rows"),
                        }
                    }
                };
            }
            match self {
                Kernel::Scalar => 0,
                Kernel::Ssse3 => by_n!(ssse3),
                Kernel::Avx2 => by_n!(avx2),
                Kernel::Gfni => by_n!(gfni),
                Kernel::Avx512 => by_n!(avx512),
                Kernel::Gfni512 => by_n!(gfni512),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        0
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ALL_KERNELS
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown GF kernel '{s}' (expected one of scalar, ssse3, avx2, gfni, avx512, gfni512)"))
    }
}

/// A coefficient matrix with its per-entry tables precomputed, grouped in blocks of up to
/// four rows, each block laid out source-major as the SIMD dot product reads it.
#[derive(Clone, Debug)]
pub struct CoefMatrix {
    rows: usize,
    cols: usize,
    coefs: Vec<u8>,
    groups: Vec<Vec<CoefTable>>,
}

/// Rows computed in one pass over the sources (four accumulators fit AVX2's registers).
const ROWS_PER_PASS: usize = 4;

impl CoefMatrix {
    /// `coefs` is row-major, `rows * cols` entries. Panics if the length is wrong.
    pub fn new(rows: usize, cols: usize, coefs: &[u8]) -> Self {
        assert_eq!(coefs.len(), rows * cols, "coefficient count is not rows*cols");
        let mut groups = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let n = (rows - r0).min(ROWS_PER_PASS);
            let mut g = Vec::with_capacity(n * cols);
            for c in 0..cols {
                for r in r0..r0 + n {
                    g.push(CoefTable::new(coefs[r * cols + c]));
                }
            }
            groups.push(g);
            r0 += n;
        }
        CoefMatrix { rows, cols, coefs: coefs.to_vec(), groups }
    }
    /// Number of outputs.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of sources.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Entry (r, c).
    pub fn coef(&self, r: usize, c: usize) -> u8 {
        self.coefs[r * self.cols + c]
    }
}

fn xor_into(src: &[u8], dst: &mut [u8]) {
    // Written over u64 words so the compiler vectorises it for any target.
    let mut d8 = dst.chunks_exact_mut(8);
    let mut s8 = src.chunks_exact(8);
    for (d, s) in (&mut d8).zip(&mut s8) {
        let v = u64::from_ne_bytes(d.try_into().unwrap()) ^ u64::from_ne_bytes(s.try_into().unwrap());
        d.copy_from_slice(&v.to_ne_bytes());
    }
    for (d, s) in d8.into_remainder().iter_mut().zip(s8.remainder()) {
        *d ^= s;
    }
}

fn scalar_mul<const XOR: bool>(t: &CoefTable, src: &[u8], dst: &mut [u8]) {
    let row = t.row();
    for (d, &s) in dst.iter_mut().zip(src) {
        let p = row[s as usize];
        *d = if XOR { *d ^ p } else { p };
    }
}

/// Scalar dot product over bytes [from, len), tables in the group layout (source-major).
fn scalar_dot<const XOR: bool>(n: usize, tabs: &[CoefTable], srcs: &[&[u8]], out: &mut [&mut [u8]], from: usize, len: usize) {
    if from >= len {
        return;
    }
    for (o, dst) in out.iter_mut().enumerate() {
        let dst = &mut dst[from..len];
        if !XOR {
            dst.fill(0);
        }
        for (i, src) in srcs.iter().enumerate() {
            scalar_mul::<true>(&tabs[i * n + o], &src[from..len], dst);
        }
    }
}
