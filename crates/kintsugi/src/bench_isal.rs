//! ISA-L loaded into the benchmark's own process (`bench codec --isal libisal.so.2`), so
//! ours and ISA-L run on the same buffers, interleaved in short bursts: on a shared, noisy
//! machine, what slows one slows the other alike. Loaded at run time with dlopen, so the
//! build still needs only cargo and a C compiler.
//!
//! ISA-L exports its per-ISA entry points beside the dispatching ones, so `--isal-arch avx2`
//! measures what an AVX2-only machine would run (Debian's 2.30 has no GFNI entry points).

use anyhow::{bail, Result};
use std::ffi::{c_int, c_void, CString};
use std::path::Path;

type InitTables = unsafe extern "C" fn(c_int, c_int, *const u8, *mut u8);
type Encode = unsafe extern "C" fn(c_int, c_int, c_int, *const u8, *const *const u8, *const *mut u8);
type Mad = unsafe extern "C" fn(c_int, c_int, c_int, *const u8, *const u8, *mut u8);
type Cauchy = unsafe extern "C" fn(*mut u8, c_int, c_int);

/// The ISA-L functions the codec benchmark calls, for one instruction set.
pub struct Isal {
    init_tables: InitTables,
    encode: Encode,
    mad: Mad,
    cauchy: Cauchy,
    /// Which entry points: "auto" (ISA-L's own dispatch), or an instruction set's ("avx2", ...).
    pub arch: String,
    _lib: *mut c_void,
}

/// ISA-L's expanded tables for a rows x k coefficient matrix (32 bytes per coefficient).
pub struct Tables {
    k: usize,
    rows: usize,
    tbl: Vec<u8>,
}

impl Isal {
    /// Opens `path` (a path or a library name such as `libisal.so.2`) and resolves the
    /// entry points for `arch` ("auto", or a suffix ISA-L exports: sse, avx, avx2, avx512).
    pub fn open(path: &Path, arch: &str) -> Result<Isal> {
        if arch.is_empty() || !arch.chars().all(|c| c.is_ascii_alphanumeric()) {
            bail!("--isal-arch must be auto or an instruction set's name such as avx2, not '{arch}'");
        }
        let name = CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the process.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            bail!("cannot load ISA-L from {} (Debian: apt-get install libisal2)", path.display());
        }
        let suffix = if arch == "auto" { String::new() } else { format!("_{arch}") };
        let sym = |s: &str| -> Result<*mut c_void> {
            let c = CString::new(s)?;
            // SAFETY: a valid handle and a NUL-terminated symbol name.
            let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
            if p.is_null() {
                bail!("{} has no symbol {s} (--isal-arch {arch} is not built into it)", path.display());
            }
            Ok(p)
        };
        // SAFETY: the symbols are ISA-L's public functions with these C signatures
        // (isa-l/erasure_code.h).
        unsafe {
            Ok(Isal {
                init_tables: std::mem::transmute::<*mut c_void, InitTables>(sym("ec_init_tables")?),
                encode: std::mem::transmute::<*mut c_void, Encode>(sym(&format!("ec_encode_data{suffix}"))?),
                mad: std::mem::transmute::<*mut c_void, Mad>(sym(&format!("gf_vect_mad{suffix}"))?),
                cauchy: std::mem::transmute::<*mut c_void, Cauchy>(sym("gf_gen_cauchy1_matrix")?),
                arch: arch.to_string(),
                _lib: lib,
            })
        }
    }

    /// ISA-L's Cauchy generator matrix ((k+m) x k, identity on top), as our RS uses.
    pub fn cauchy(&self, k: usize, m: usize) -> Vec<u8> {
        let mut a = vec![0u8; (k + m) * k];
        // SAFETY: a holds (k+m)*k bytes, as the function writes.
        unsafe { (self.cauchy)(a.as_mut_ptr(), (k + m) as c_int, k as c_int) };
        a
    }

    /// Tables for `coefs`, row-major rows x k.
    pub fn tables(&self, k: usize, rows: usize, coefs: &[u8]) -> Tables {
        assert_eq!(coefs.len(), k * rows);
        let mut tbl = vec![0u8; 32 * k * rows];
        // SAFETY: coefs has k*rows entries and tbl 32 bytes for each, as ec_init_tables needs.
        unsafe { (self.init_tables)(k as c_int, rows as c_int, coefs.as_ptr(), tbl.as_mut_ptr()) };
        Tables { k, rows, tbl }
    }

    /// outs[r] = sum_c t[r][c] * srcs[c] (ec_encode_data).
    pub fn encode(&self, t: &Tables, srcs: &[&[u8]], outs: &mut [&mut [u8]]) {
        assert!(srcs.len() == t.k && outs.len() == t.rows);
        let len = srcs[0].len();
        assert!(srcs.iter().all(|s| s.len() == len) && outs.iter().all(|o| o.len() == len) && len <= c_int::MAX as usize);
        let sp: Vec<*const u8> = srcs.iter().map(|s| s.as_ptr()).collect();
        let op: Vec<*mut u8> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        // SAFETY: k sources and rows outputs of len bytes each, tables for k x rows.
        unsafe { (self.encode)(len as c_int, t.k as c_int, t.rows as c_int, t.tbl.as_ptr(), sp.as_ptr(), op.as_ptr()) };
    }

    /// dst ^= c * src, with `t` the tables of the 1 x 1 matrix [c] (gf_vect_mad).
    pub fn mad(&self, t: &Tables, src: &[u8], dst: &mut [u8]) {
        assert!(t.k == 1 && t.rows == 1 && src.len() == dst.len() && src.len() <= c_int::MAX as usize);
        // SAFETY: one source and one destination of len bytes, tables of one coefficient.
        unsafe { (self.mad)(src.len() as c_int, 1, 0, t.tbl.as_ptr(), src.as_ptr(), dst.as_mut_ptr()) };
    }
}
