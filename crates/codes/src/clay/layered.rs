//! The layered decoder every Clay operation runs on (encode, decode, repair).
//!
//! In each plane the *uncoupled* values U of all nodes form a codeword of the scalar MDS
//! code, RS(k+nu, m). So a plane is decoded by uncoupling the nodes whose coupled values C
//! are known (the pairwise transform), one MDS decode for the unknown U, and coupling back.
//! A node paired with an unknown node needs that node's C from the partner plane: planes
//! are therefore processed in rounds of increasing *score* (how many unknown nodes are
//! unpaired in the plane), and the partner plane always belongs to an earlier round
//! (Clay paper, section 3.3; Ceph's `decode_layered`).
//!
//! Everything is linear byte column by byte column, so the engine runs on a window of w
//! bytes of every plane at a time; callers pick the windows (whole sub-chunks, or pieces
//! that stay in cache).

use super::coupling::{positions, Coupling};
use super::geometry::Geometry;
use crate::linear::LinearCode;
use crate::{Code, Result};
use kintsugi_gf::CoefMatrix;

const NONE: usize = usize::MAX;

/// What one layered decode computes, fixed for a set of unknowns.
#[derive(Debug)]
pub struct LayeredPlan {
    /// Nodes whose U each plane's MDS decode produces (sorted).
    pub erased: Vec<usize>,
    /// Node -> position in `erased`, or NONE.
    erased_at: Vec<usize>,
    /// Nodes whose C the engine computes (a subset of `erased`).
    c_unknown: Vec<bool>,
    /// Unknown nodes whose C a later plane reads (a known node of their column is coupled
    /// with them), so it is kept in the scratch; the others go straight to the caller.
    c_kept: Vec<bool>,
    /// Planes to process, in rounds of equal score, lowest first; each round split into
    /// groups closed under the coupling of two erased nodes, so a group's U are coupled
    /// back while still in cache.
    rounds: Vec<Vec<Vec<usize>>>,
    /// MDS sources (grid nodes), in matrix column order.
    sources: Vec<usize>,
    /// Per plane, which variant of the decoding matrix it uses: a virtual source whose U is
    /// zero in a plane (unpaired, or paired with another virtual node) is left out.
    plane_variant: Vec<usize>,
    /// (source positions used, `erased x used` matrix) per variant.
    variants: Vec<(Vec<usize>, CoefMatrix)>,
}

impl LayeredPlan {
    /// A plan over `planes` with U unknown for `erased` and C unknown for `c_unknown`.
    pub fn new(geo: &Geometry, mds: &LinearCode, erased: &[usize], c_unknown: &[usize], planes: &[usize]) -> Result<Self> {
        let n = geo.nodes();
        let mut erased = erased.to_vec();
        erased.sort_unstable();
        erased.dedup();
        let mut erased_at = vec![NONE; n];
        for (i, &e) in erased.iter().enumerate() {
            erased_at[e] = i;
        }
        let mut unknown = vec![false; n];
        for &c in c_unknown {
            unknown[c] = true;
        }
        let available: Vec<usize> = (0..n).filter(|&i| erased_at[i] == NONE).collect();
        let c_kept = (0..n).map(|i| unknown[i] && available.iter().any(|&a| geo.y(a) == geo.y(i))).collect();
        let dec = mds.decoder(&erased, &available)?;
        debug_assert_eq!(dec.targets, erased);
        let matrix = dec.matrix().expect("RS decodes by one matrix").clone();
        let score = |z: usize| (0..n).filter(|&i| unknown[i] && geo.unpaired(i, z)).count();
        let mut rounds: Vec<Vec<usize>> = vec![Vec::new(); geo.t + 1];
        for &z in planes {
            rounds[score(z)].push(z);
        }
        rounds.retain(|r| !r.is_empty());
        let rounds = rounds.into_iter().map(|r| coupled_groups(geo, &erased_at, &unknown, r)).collect();
        let mut variants: Vec<(Vec<usize>, CoefMatrix)> = Vec::new();
        let mut plane_variant = vec![usize::MAX; geo.alpha];
        for &z in planes {
            let used: Vec<usize> = (0..dec.sources.len())
                .filter(|&si| {
                    let s = dec.sources[si];
                    let zero = geo.is_virtual(s) && geo.partner(s, z).is_none_or(|(p, _)| geo.is_virtual(p));
                    !zero
                })
                .collect();
            plane_variant[z] = match variants.iter().position(|(u, _)| *u == used) {
                Some(v) => v,
                None => {
                    let rows = matrix.rows();
                    let coefs: Vec<u8> =
                        (0..rows).flat_map(|r| used.iter().map(move |&si| (r, si))).map(|(r, si)| matrix.coef(r, si)).collect();
                    variants.push((used.clone(), CoefMatrix::new(rows, used.len(), &coefs)));
                    variants.len() - 1
                }
            };
        }
        Ok(LayeredPlan { erased, erased_at, c_unknown: unknown, c_kept, rounds, sources: dec.sources, plane_variant, variants })
    }

    /// Position of node i among the erased, if it is one.
    pub fn erased_index(&self, i: usize) -> Option<usize> {
        (self.erased_at[i] != NONE).then_some(self.erased_at[i])
    }
}

/// Splits one round's planes into groups: plane z and plane zs are in one group when an
/// unknown-C erased node in z is coupled with an erased node in zs (its coupling back reads
/// both U). The partner plane of such a pair has the same score, so it is in this round.
fn coupled_groups(geo: &Geometry, erased_at: &[usize], c_unknown: &[bool], planes: Vec<usize>) -> Vec<Vec<usize>> {
    let mut group_of = vec![NONE; geo.alpha];
    let mut in_round = vec![false; geo.alpha];
    for &z in &planes {
        in_round[z] = true;
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &z0 in &planes {
        if group_of[z0] != NONE {
            continue;
        }
        let g = groups.len();
        let mut members = vec![z0];
        group_of[z0] = g;
        let mut i = 0;
        while i < members.len() {
            let z = members[i];
            for e in (0..geo.nodes()).filter(|&e| erased_at[e] != NONE && c_unknown[e]) {
                if let Some((p, zs)) = geo.partner(e, z) {
                    if erased_at[p] != NONE && in_round[zs] && group_of[zs] == NONE {
                        group_of[zs] = g;
                        members.push(zs);
                    }
                }
            }
            i += 1;
        }
        members.sort_unstable();
        groups.push(members);
    }
    groups
}

/// Where the known coupled values are: `known[node]` holds plane z's window at
/// `slot[z] * stride + off`, `w` bytes long.
pub struct Known<'a> {
    pub known: Vec<Option<&'a [u8]>>,
    pub slot: &'a [usize],
    pub stride: usize,
    pub off: usize,
}

/// Skew between staged planes and nodes, in bytes: sub-chunks are usually a power of two
/// apart (4 KiB for a 1 MiB Clay(10,4,13) chunk), and a dozen sources that far apart fall
/// into the same L1 cache sets; copying the window into a skewed buffer first costs one
/// memcpy and saves far more in misses.
const SKEW: usize = 64;

/// A window of every plane of every known node, copied into one skewed buffer.
#[derive(Default)]
pub struct Staging {
    buf: Vec<u8>,
    at: Vec<Option<usize>>,
    node_len: usize,
    pub stride: usize,
}

impl Staging {
    /// Copies bytes [off, off+w) of slots 0..slots of each present node (slot s at
    /// `s * stride`).
    pub fn fill(&mut self, bufs: &[Option<&[u8]>], slots: usize, stride: usize, off: usize, w: usize) {
        self.stride = w + SKEW;
        self.node_len = slots * self.stride + SKEW;
        let present = bufs.iter().filter(|b| b.is_some()).count();
        self.buf.resize(present * self.node_len, 0);
        self.at.clear();
        let mut next = 0;
        for b in bufs {
            match b {
                Some(src) => {
                    let base = next * self.node_len;
                    for s in 0..slots {
                        let d = base + s * self.stride;
                        self.buf[d..d + w].copy_from_slice(&src[s * stride + off..s * stride + off + w]);
                    }
                    self.at.push(Some(base));
                    next += 1;
                }
                None => self.at.push(None),
            }
        }
    }

    /// Per node, the staged buffer (or `None`).
    pub fn nodes(&self) -> Vec<Option<&[u8]>> {
        self.at.iter().map(|a| a.map(|b| &self.buf[b..b + self.node_len])).collect()
    }
}

/// Bytes per erased node in the scratch: every plane's window. (Skewing these as the
/// staged inputs are measured slower: the outputs are written once per plane.)
fn node_span(alpha: usize, w: usize) -> usize {
    alpha * w
}

/// Scratch offset of erased node e's window of plane z.
fn scratch_at(e: usize, z: usize, alpha: usize, w: usize) -> usize {
    e * node_span(alpha, w) + z * w
}

/// Where the C of unknown nodes go: per erased index, a caller buffer holding plane z's
/// window at `z * stride + off` (or `None`: not wanted).
pub struct Outs<'a> {
    pub bufs: Vec<Option<&'a mut [u8]>>,
    pub stride: usize,
    pub off: usize,
}

/// Buffers of one run: U and C of the erased nodes for every plane (`alpha * w` each),
/// uncoupled values of the sources in the current plane, and a zero window.
#[derive(Default)]
pub struct Scratch {
    pub u: Vec<u8>,
    pub c: Vec<u8>,
    part: Vec<u8>,
    zero: Vec<u8>,
    w: usize,
}

impl Scratch {
    fn prepare(&mut self, erased: usize, sources: usize, alpha: usize, w: usize) {
        self.w = w;
        self.u.resize(erased * node_span(alpha, w), 0);
        self.c.resize(erased * node_span(alpha, w), 0);
        self.part.resize(sources * (w + SKEW), 0);
        self.zero.clear();
        self.zero.resize(w, 0);
    }

    /// U of erased node number e at plane z.
    pub fn u_at(&self, e: usize, z: usize, alpha: usize) -> &[u8] {
        let w = self.w;
        let at = scratch_at(e, z, alpha, w);
        &self.u[at..at + w]
    }

    /// C of erased node number e at plane z.
    pub fn c_at(&self, e: usize, z: usize, alpha: usize) -> &[u8] {
        let w = self.w;
        let at = scratch_at(e, z, alpha, w);
        &self.c[at..at + w]
    }
}

/// One thread's working buffers, kept between calls: a repair or decode of 1 MiB chunks
/// needs a few MiB, and allocating them per call let the allocator hand them back to the
/// kernel each time, so every call paid page faults and zeroing (measured: repair 3x
/// slower after an unrelated change to what ran before it).
#[derive(Default)]
pub struct Buffers {
    pub scratch: Scratch,
    pub staging: Staging,
    pub plain: Vec<u8>,
}

impl Buffers {
    fn bytes(&self) -> usize {
        let s = &self.scratch;
        s.u.capacity() + s.c.capacity() + s.part.capacity() + s.zero.capacity() + self.staging.buf.capacity() + self.plain.capacity()
    }
}

/// A thread keeps at most this much between calls; bigger buffers are freed after use, so
/// a pool of many threads stays bounded.
const KEEP_BYTES: usize = 32 << 20;

thread_local! {
    static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::default();
}

/// Runs `f` with this thread's buffers (fresh ones if a caller up the stack holds them).
pub fn with_buffers<R>(f: impl FnOnce(&mut Buffers) -> R) -> R {
    BUFFERS.with(|cell| {
        let mut taken = std::mem::take(&mut *cell.borrow_mut());
        let r = f(&mut taken);
        if taken.bytes() <= KEEP_BYTES {
            *cell.borrow_mut() = taken;
        }
        r
    })
}

/// C of node i at plane z: computed (unknown nodes), zero (virtual) or read (known).
#[allow(clippy::too_many_arguments)] // the engine's state, passed apart to keep borrows disjoint
fn coupled<'s>(
    geo: &Geometry,
    plan: &LayeredPlan,
    kn: &'s Known<'s>,
    c: &'s [u8],
    zero: &'s [u8],
    i: usize,
    z: usize,
    w: usize,
) -> &'s [u8] {
    if plan.c_unknown[i] {
        let e = plan.erased_at[i];
        let at = scratch_at(e, z, geo.alpha, w);
        return &c[at..at + w];
    }
    match kn.known[i] {
        Some(buf) => {
            let at = kn.slot[z] * kn.stride + kn.off;
            &buf[at..at + w]
        }
        None => zero,
    }
}

/// Runs `plan` on one window of `w` bytes per plane: U of the erased nodes stay in
/// `scratch`, C of the unknown nodes go to `outs` (and stay in `scratch` when read later).
pub fn run(geo: &Geometry, coupling: &Coupling, plan: &LayeredPlan, kn: &Known, w: usize, scratch: &mut Scratch, outs: &mut Outs) {
    let alpha = geo.alpha;
    scratch.prepare(plan.erased.len(), plan.sources.len(), alpha, w);
    let Scratch { u, c, part, zero, .. } = scratch;
    let (zero, c_ro) = (&zero[..], &mut c[..]);
    for round in plan.rounds.iter().flatten() {
        for &z in round {
            let (used, matrix) = &plan.variants[plan.plane_variant[z]];
            // Uncouple the MDS sources of this plane: paired ones into `part` (a virtual
            // partner holds zeros, so one multiplication does).
            for &si in used {
                let s = plan.sources[si];
                if let Some((p, zs)) = geo.partner(s, z) {
                    let dst = &mut part[si * (w + SKEW)..si * (w + SKEW) + w];
                    let (cs, us) = positions(geo.x(s), geo.x(p));
                    let (cp, _) = positions(geo.x(p), geo.x(s));
                    if geo.is_virtual(p) {
                        let [c1, _] = coupling.coefs((cs, cp), us);
                        kintsugi_gf::mul_slice(c1, coupled(geo, plan, kn, c_ro, zero, s, z, w), dst);
                    } else if geo.is_virtual(s) {
                        let [_, c2] = coupling.coefs((cs, cp), us);
                        kintsugi_gf::mul_slice(c2, coupled(geo, plan, kn, c_ro, zero, p, zs, w), dst);
                    } else {
                        let a = coupled(geo, plan, kn, c_ro, zero, s, z, w);
                        let b = coupled(geo, plan, kn, c_ro, zero, p, zs, w);
                        kintsugi_gf::apply(coupling.matrix((cs, cp), us), &[a, b], &mut [dst]);
                    }
                }
            }
            let srcs: Vec<&[u8]> = used
                .iter()
                .map(|&si| match geo.partner(plan.sources[si], z) {
                    Some(_) => &part[si * (w + SKEW)..si * (w + SKEW) + w],
                    None => coupled(geo, plan, kn, c_ro, zero, plan.sources[si], z, w),
                })
                .collect();
            let mut dsts: Vec<&mut [u8]> = u.chunks_mut(node_span(alpha, w)).map(|node| &mut node[z * w..(z + 1) * w]).collect();
            kintsugi_gf::apply(matrix, &srcs, &mut dsts);
        }
        // Couple back: C of the unknown nodes in this round's planes.
        for &z in round {
            for (ei, &e) in plan.erased.iter().enumerate() {
                if !plan.c_unknown[e] {
                    continue;
                }
                let kept = plan.c_kept[e];
                let at = scratch_at(ei, z, alpha, w);
                let oat = z * outs.stride + outs.off;
                let dst: &mut [u8] = match (kept, outs.bufs[ei].as_deref_mut()) {
                    (true, _) => &mut c_ro[at..at + w],
                    (false, Some(o)) => &mut o[oat..oat + w],
                    (false, None) => continue,
                };
                let ue = &u[at..at + w];
                match geo.partner(e, z) {
                    None => dst.copy_from_slice(ue),
                    Some((p, zs)) => {
                        let (ce, uce) = positions(geo.x(e), geo.x(p));
                        let (cp, up) = positions(geo.x(p), geo.x(e));
                        if let Some(pi) = plan.erased_index(p) {
                            let pat = scratch_at(pi, zs, alpha, w);
                            let m = coupling.matrix((uce, up), ce);
                            kintsugi_gf::apply(m, &[ue, &u[pat..pat + w]], &mut [dst]);
                        } else {
                            let m = coupling.matrix((uce, cp), ce);
                            // The partner's C is known or zero, never in `c`.
                            let b: &[u8] = match kn.known[p] {
                                Some(buf) => {
                                    let pat = kn.slot[zs] * kn.stride + kn.off;
                                    &buf[pat..pat + w]
                                }
                                None => zero,
                            };
                            kintsugi_gf::apply(m, &[ue, b], &mut [dst]);
                        }
                    }
                }
                if kept {
                    if let Some(o) = outs.bufs[ei].as_deref_mut() {
                        o[oat..oat + w].copy_from_slice(&c_ro[at..at + w]);
                    }
                }
            }
        }
    }
}
