//! Clay codes (Vajha et al., FAST'18): MSR codes whose single-node repair reads
//! d/(d-k+1) chunks' worth instead of k, laid out byte for byte as Ceph's clay plugin with
//! `scalar_mds=isa, technique=cauchy` (so `clay:K,M,K` is our `rs:K,M`).
//!
//! - [`geometry`]: the node grid, planes and pairs;
//! - [`coupling`]: the pairwise transform between coupled and uncoupled sub-chunks;
//! - [`layered`]: the plane-by-plane decoder that decode and repair run on;
//! - `fused`: one pass per plane when the unknowns fill whole columns (encode when m is a
//!   multiple of q, and decode of lost whole columns);
//! - [`repair`]: single-node repair from d helpers, and its repair equation.

pub mod coupling;
mod fused;
pub mod geometry;
pub mod layered;
mod repair;

use crate::error::{CodeError, Result};
use crate::linear::LinearCode;
use crate::spec::CodeSpec;
use crate::{Code, Decoder, RepairEquation};
use coupling::Coupling;
use fused::FusedColumns;
use geometry::Geometry;
use layered::{Known, LayeredPlan, Outs};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bytes of each plane processed at once: small enough that a window of every plane of
/// every node stays in the caches, large enough that kernel calls amortise.
pub const DEFAULT_WINDOW: usize = 1024;

/// Most bytes of each plane per pass of the fused encode.
pub const FUSED_WINDOW: usize = 16 << 10;

/// A Clay code. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct ClayCode {
    core: Arc<Core>,
}

/// A layered plan's identity: U-unknown nodes, C-unknown nodes, planes tag.
type PlanKey = (Vec<usize>, Vec<usize>, usize);

/// What every operation of one code shares.
#[derive(Debug)]
pub(crate) struct Core {
    pub geo: Geometry,
    /// The scalar MDS code of each plane, over grid nodes (virtual nodes are data).
    pub mds: LinearCode,
    pub coupling: Coupling,
    /// Plane z sits at slot z of a whole chunk.
    pub identity: Vec<usize>,
    /// Layered plans by (U-unknown nodes, C-unknown nodes, planes tag).
    plans: Mutex<HashMap<PlanKey, Arc<LayeredPlan>>>,
    /// Repair equations by (lost shard, sorted helpers): a planner asks for the same few
    /// for every stripe, and each one is a decode of unit vectors.
    pub(crate) equations: Mutex<HashMap<(usize, Vec<usize>), crate::RepairEquation>>,
    /// Fixed window (benchmarks), or 0: chosen from the sub-chunk size.
    window: usize,
    /// The one-pass encoder, when the parities fill whole columns.
    fused: Option<FusedColumns>,
}

impl Core {
    /// Bytes of each plane per pass for sub-chunks of `sub` bytes: 1 KiB up to 16 KiB
    /// sub-chunks, growing to 4 KiB for 64 KiB ones (measured: small windows keep every
    /// plane in cache, larger ones amortise kernel calls when sub-chunks are long).
    pub fn window_for(&self, sub: usize) -> usize {
        if self.window > 0 {
            return self.window;
        }
        (sub / 16).clamp(DEFAULT_WINDOW, 4 * DEFAULT_WINDOW)
    }

    /// Bytes of each plane per pass of a single-chunk repair: whole sub-chunks up to 4 KiB.
    /// A repair's scratch holds only its column's planes, so longer windows stay in cache
    /// where a decode's would not (measured with `bench codec --code clay:10,4,13` on the
    /// GFNI Xeon: 1 KiB windows ran 0.93x and 1.07x the dense terms at 1 and 4 MiB chunks,
    /// 4 KiB ones 1.08x and 1.12x; 16 KiB ones outgrow the buffers a thread keeps).
    pub fn repair_window_for(&self, sub: usize) -> usize {
        if self.window > 0 {
            return self.window;
        }
        sub.clamp(1, 4 * DEFAULT_WINDOW)
    }

    /// Bytes of each plane per pass of the fused encode: whole sub-chunks up to 16 KiB
    /// (measured best at 1, 4 and 16 MiB chunks: longer runs per input stream let the
    /// prefetchers keep up; the partner reads still find the bytes in the last-level cache).
    pub fn fused_window_for(&self, sub: usize) -> usize {
        if self.window > 0 {
            return self.window;
        }
        sub.clamp(1, FUSED_WINDOW)
    }

    /// The layered plan for these unknowns over all planes (tag usize::MAX) or over the
    /// repair planes of node `tag`.
    pub fn plan(&self, erased: &[usize], c_unknown: &[usize], tag: usize) -> Result<Arc<LayeredPlan>> {
        let key = (erased.to_vec(), c_unknown.to_vec(), tag);
        if let Some(p) = self.plans.lock().expect("plan cache").get(&key) {
            return Ok(p.clone());
        }
        let planes: Vec<usize> = if tag == usize::MAX { (0..self.geo.alpha).collect() } else { self.geo.repair_planes(tag) };
        let plan = Arc::new(LayeredPlan::new(&self.geo, &self.mds, erased, c_unknown, &planes)?);
        let mut cache = self.plans.lock().expect("plan cache");
        if cache.len() > 4096 {
            cache.clear();
        }
        cache.insert(key, plan.clone());
        Ok(plan)
    }
}

impl ClayCode {
    /// Clay(k, m, d): k data, m parity, single-node repair from any d helpers.
    pub fn new(k: usize, m: usize, d: usize) -> Result<Self> {
        let geo = Geometry::new(k, m, d).map_err(CodeError::InvalidParams)?;
        let mds = LinearCode::rs(k + geo.nu, m)?;
        let identity = (0..geo.alpha).collect();
        let coupling = Coupling::new();
        let fused = Self::fused_encoder(&geo, &mds, &coupling)?;
        let core = Core { geo, mds, coupling, identity, plans: Mutex::new(HashMap::new()), equations: Mutex::default(), window: 0, fused };
        Ok(ClayCode { core: Arc::new(core) })
    }

    /// The same code processing `window` bytes of each plane at a time (for benchmarks).
    pub fn with_window(&self, window: usize) -> Self {
        let c = &self.core;
        let mds = LinearCode::rs(c.geo.k + c.geo.nu, c.geo.m).expect("valid before");
        let coupling = Coupling::new();
        let fused = Self::fused_encoder(&c.geo, &mds, &coupling).expect("valid before");
        let core = Core {
            geo: c.geo.clone(),
            mds,
            coupling,
            identity: c.identity.clone(),
            plans: Mutex::new(HashMap::new()),
            equations: Mutex::default(),
            window: window.max(1),
            fused,
        };
        ClayCode { core: Arc::new(core) }
    }

    /// The fused encode: parities from data shards, when the parities fill whole columns.
    fn fused_encoder(geo: &Geometry, mds: &LinearCode, coupling: &Coupling) -> Result<Option<FusedColumns>> {
        let parities: Vec<usize> = (geo.k..geo.k + geo.m).map(|s| geo.node_of(s)).collect();
        FusedColumns::new(geo, mds, coupling, &parities, &(0..geo.k).collect::<Vec<_>>())
    }

    /// Grid, planes and pairs.
    pub fn geometry(&self) -> &Geometry {
        &self.core.geo
    }

    /// Helpers per single-node repair.
    pub fn d(&self) -> usize {
        self.core.geo.d
    }

    /// Sub-chunks each helper reads for a single-node repair (alpha / q).
    pub fn beta(&self) -> usize {
        self.core.geo.beta()
    }

    fn check_index(&self, i: usize) -> Result<()> {
        if i >= self.n() {
            return Err(CodeError::BadIndex { index: i, n: self.n() });
        }
        Ok(())
    }

    /// Runs a layered decode over whole chunks: `srcs` are the known shards (by shard
    /// index), `outs` receive the C of `targets` (shard indices, each among the unknowns).
    ///
    /// Sources are staged (copied into a skewed buffer, see [`Staging`]) unless `stage` is
    /// false: encode reads them in place once sub-chunks reach 16 KiB, where staging costs
    /// more than the cache conflicts it avoids (measured against Ceph at 4 and 16 MiB).
    fn layered(&self, plan: &LayeredPlan, srcs: &[(usize, &[u8])], targets: &[usize], outs: &mut [&mut [u8]], stage: bool) -> Result<()> {
        let geo = &self.core.geo;
        let len = srcs.first().map(|s| s.1.len()).or(outs.first().map(|o| o.len())).unwrap_or(0);
        if let Some(l) = srcs.iter().map(|s| s.1.len()).chain(outs.iter().map(|o| o.len())).find(|&l| l != len) {
            return Err(CodeError::UnequalLengths(len, l));
        }
        let sub = crate::sub_len(geo.alpha, len)?;
        let mut known: Vec<Option<&[u8]>> = vec![None; geo.nodes()];
        for &(s, buf) in srcs {
            known[geo.node_of(s)] = Some(buf);
        }
        let slots: Vec<usize> = targets.iter().map(|&t| plan.erased_index(geo.node_of(t)).expect("targets are unknown")).collect();
        layered::with_buffers(|b| {
            let (scratch, staging) = (&mut b.scratch, &mut b.staging);
            let mut off = 0;
            while off < sub {
                let w = self.core.window_for(sub).min(sub - off);
                let kn = if !stage {
                    Known { known: known.clone(), slot: &self.core.identity, stride: sub, off }
                } else {
                    staging.fill(&known, geo.alpha, sub, off, w);
                    Known { known: staging.nodes(), slot: &self.core.identity, stride: staging.stride, off: 0 }
                };
                let mut bufs: Vec<Option<&mut [u8]>> = (0..plan.erased.len()).map(|_| None).collect();
                for (out, &e) in outs.iter_mut().zip(&slots) {
                    bufs[e] = Some(&mut out[..]);
                }
                layered::run(geo, &self.core.coupling, plan, &kn, w, scratch, &mut Outs { bufs, stride: sub, off });
                off += w;
            }
        });
        Ok(())
    }
}

impl ClayCode {
    /// Encode by the layered decoder (parities as the unknowns): codes whose parities
    /// share a column with data nodes, and the reference the fused encode is tested against.
    fn encode_layered(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()> {
        let (k, m) = (self.k(), self.core.geo.m);
        let targets: Vec<usize> = (k..k + m).collect();
        let nodes: Vec<usize> = targets.iter().map(|&s| self.core.geo.node_of(s)).collect();
        let plan = self.core.plan(&nodes, &nodes, usize::MAX)?;
        let srcs: Vec<(usize, &[u8])> = data.iter().copied().enumerate().collect();
        let stage = data.first().is_none_or(|d| d.len() / self.core.geo.alpha < 16 << 10);
        self.layered(&plan, &srcs, &targets, parity, stage)
    }
}

/// A Clay decoder: the layered plan for one erasure pattern.
#[derive(Debug)]
pub struct ClayDecoder {
    code: ClayCode,
    plan: Arc<LayeredPlan>,
    /// The one-pass decode, when the unknown nodes fill whole columns and are all targets.
    fused: Option<FusedColumns>,
    sources: Vec<usize>,
    targets: Vec<usize>,
}

impl ClayDecoder {
    /// targets from sources, over whole chunks (or gathered windows: alpha equal pieces).
    pub fn apply(&self, srcs: &[&[u8]], dsts: &mut [&mut [u8]]) -> Result<()> {
        if let Some(fused) = &self.fused {
            let len = srcs.first().map(|s| s.len()).unwrap_or(0);
            if let Some(l) = srcs.iter().map(|s| s.len()).chain(dsts.iter().map(|d| d.len())).find(|&l| l != len) {
                return Err(CodeError::UnequalLengths(len, l));
            }
            if srcs.len() != self.sources.len() || dsts.len() != self.targets.len() {
                return Err(CodeError::WrongCount {
                    what: "decoder regions",
                    expected: self.sources.len() + self.targets.len(),
                    got: srcs.len() + dsts.len(),
                });
            }
            let sub = crate::sub_len(self.code.core.geo.alpha, len)?;
            fused.run(srcs, dsts, sub, self.code.core.fused_window_for(sub));
            return Ok(());
        }
        let pairs: Vec<(usize, &[u8])> = self.sources.iter().copied().zip(srcs.iter().copied()).collect();
        self.code.layered(&self.plan, &pairs, &self.targets, dsts, true)
    }

    /// Sub-chunks per chunk.
    pub fn sub_chunks(&self) -> usize {
        self.code.core.geo.alpha
    }
}

impl Code for ClayCode {
    fn spec(&self) -> CodeSpec {
        let g = &self.core.geo;
        CodeSpec::Clay { k: g.k, m: g.m, d: g.d }
    }
    fn k(&self) -> usize {
        self.core.geo.k
    }
    fn n(&self) -> usize {
        self.core.geo.k + self.core.geo.m
    }
    fn sub_chunks(&self) -> usize {
        self.core.geo.alpha
    }
    fn tolerance(&self) -> usize {
        self.core.geo.m
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()> {
        let (k, m) = (self.k(), self.core.geo.m);
        if data.len() != k {
            return Err(CodeError::WrongCount { what: "data shards", expected: k, got: data.len() });
        }
        if parity.len() != m {
            return Err(CodeError::WrongCount { what: "parity shards", expected: m, got: parity.len() });
        }
        if let Some(fused) = &self.core.fused {
            let len = data.first().map(|d| d.len()).unwrap_or(0);
            if let Some(l) = data.iter().map(|d| d.len()).chain(parity.iter().map(|p| p.len())).find(|&l| l != len) {
                return Err(CodeError::UnequalLengths(len, l));
            }
            let sub = crate::sub_len(self.core.geo.alpha, len)?;
            fused.run(data, parity, sub, self.core.fused_window_for(sub));
            return Ok(());
        }
        self.encode_layered(data, parity)
    }

    fn decoder(&self, erased: &[usize], available: &[usize]) -> Result<Decoder> {
        for &i in erased.iter().chain(available) {
            self.check_index(i)?;
        }
        let mut targets = erased.to_vec();
        targets.sort_unstable();
        targets.dedup();
        let mut sources: Vec<usize> = available.iter().copied().filter(|i| !targets.contains(i)).collect();
        sources.sort_unstable();
        sources.dedup();
        let unknown: Vec<usize> = (0..self.n()).filter(|i| !sources.contains(i)).collect();
        if unknown.len() > self.core.geo.m {
            return Err(CodeError::Unrecoverable { erased: targets, available: sources.len(), tolerance: self.core.geo.m });
        }
        let nodes: Vec<usize> = unknown.iter().map(|&s| self.core.geo.node_of(s)).collect();
        let plan = self.core.plan(&nodes, &nodes, usize::MAX)?;
        let geo = &self.core.geo;
        let fused = if unknown.len() == targets.len() {
            let source_nodes: Vec<usize> = sources.iter().map(|&s| geo.node_of(s)).collect();
            FusedColumns::new(geo, &self.core.mds, &self.core.coupling, &nodes, &source_nodes)?
        } else {
            None
        };
        let dec = ClayDecoder { code: self.clone(), plan, fused, sources: sources.clone(), targets: targets.clone() };
        Ok(Decoder::layered(sources, targets, Arc::new(dec)))
    }

    fn repair_equation(&self, lost: usize, helpers: &[usize]) -> Result<RepairEquation> {
        repair::equation(self, lost, helpers)
    }

    fn choose_helpers(&self, lost: usize, available: &[usize]) -> Result<Vec<usize>> {
        repair::choose_helpers(self, lost, available)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(len: usize, seed: u64) -> Vec<u8> {
        use rand::{Rng, SeedableRng};
        let mut v = vec![0u8; len];
        rand::rngs::StdRng::seed_from_u64(seed).fill(&mut v[..]);
        v
    }

    /// The fused encode against the layered decoder, two independent derivations of the
    /// same parity, for every code whose parities fill whole columns, at several sub-chunk
    /// lengths (odd ones included) and windows that do not divide them.
    #[test]
    fn fused_encode_equals_the_layered_one() {
        for (k, m, d) in [(10, 4, 13), (4, 2, 5), (6, 3, 8), (8, 4, 11), (3, 2, 4), (6, 4, 7), (8, 4, 9)] {
            let code = ClayCode::new(k, m, d).unwrap();
            assert!(code.core.fused.is_some(), "clay:{k},{m},{d} has whole parity columns");
            let alpha = code.sub_chunks();
            for (sub, window) in [(1, 0), (7, 0), (33, 5), (100, 64)] {
                let code = if window > 0 { code.with_window(window) } else { code.clone() };
                let data: Vec<Vec<u8>> = (0..k).map(|i| random(sub * alpha, (i * 31 + sub) as u64)).collect();
                let dr: Vec<&[u8]> = data.iter().map(|x| x.as_slice()).collect();
                let mut fused = vec![vec![0u8; sub * alpha]; m];
                let mut layered = vec![vec![0u8; sub * alpha]; m];
                code.encode(&dr, &mut fused.iter_mut().map(|x| x.as_mut_slice()).collect::<Vec<_>>()).unwrap();
                code.encode_layered(&dr, &mut layered.iter_mut().map(|x| x.as_mut_slice()).collect::<Vec<_>>()).unwrap();
                assert!(fused == layered, "clay:{k},{m},{d} sub {sub} window {window}");
            }
        }
        assert!(ClayCode::new(5, 3, 6).unwrap().core.fused.is_none(), "parity shares column 2 with data node 4");
    }

    /// Losing whole columns (of data, parity or both) decodes in one pass: against the
    /// original bytes and against the layered decoder, which a decoder falls back to
    /// otherwise.
    #[test]
    fn whole_columns_decode_fused_and_layered_alike() {
        for (k, m, d) in [(10, 4, 13), (6, 3, 8), (6, 4, 7), (8, 4, 9), (4, 2, 5)] {
            let code = ClayCode::new(k, m, d).unwrap();
            let geo = code.geometry().clone();
            let (n, alpha, sub) = (code.n(), geo.alpha, 9);
            let data: Vec<Vec<u8>> = (0..k).map(|i| random(sub * alpha, (i * 7 + 3) as u64)).collect();
            let mut all = data.clone();
            all.extend((0..m).map(|_| vec![0u8; sub * alpha]));
            let (dp, pp) = all.split_at_mut(k);
            let dr: Vec<&[u8]> = dp.iter().map(|x| x.as_slice()).collect();
            code.encode(&dr, &mut pp.iter_mut().map(|x| x.as_mut_slice()).collect::<Vec<_>>()).unwrap();
            // Every set of whole real columns with at most m nodes.
            let real_cols: Vec<usize> = (0..geo.t).filter(|&y| (0..geo.q).all(|x| geo.shard_of(y * geo.q + x).is_some())).collect();
            for mask in 1u32..(1 << real_cols.len()) {
                let cols: Vec<usize> = real_cols.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, &y)| y).collect();
                if cols.len() * geo.q > m {
                    continue;
                }
                let lost: Vec<usize> =
                    cols.iter().flat_map(|&y| (0..geo.q).map(move |x| y * geo.q + x)).filter_map(|i| geo.shard_of(i)).collect();
                let avail: Vec<usize> = (0..n).filter(|i| !lost.contains(i)).collect();
                let dec = code.decoder(&lost, &avail).unwrap();
                let crate::DecoderKind::Layered(clay) = &dec.kind else { panic!("clay decodes in layers") };
                assert!(clay.fused.is_some(), "clay:{k},{m},{d} lost columns {cols:?}");
                let srcs: Vec<&[u8]> = avail.iter().map(|&i| all[i].as_slice()).collect();
                let mut fused = vec![vec![0u8; sub * alpha]; lost.len()];
                clay.apply(&srcs, &mut fused.iter_mut().map(|x| x.as_mut_slice()).collect::<Vec<_>>()).unwrap();
                let layered_only = ClayDecoder {
                    fused: None,
                    plan: clay.plan.clone(),
                    code: code.clone(),
                    sources: clay.sources.clone(),
                    targets: clay.targets.clone(),
                };
                let mut layered = vec![vec![0u8; sub * alpha]; lost.len()];
                layered_only.apply(&srcs, &mut layered.iter_mut().map(|x| x.as_mut_slice()).collect::<Vec<_>>()).unwrap();
                for (j, &i) in lost.iter().enumerate() {
                    assert!(fused[j] == all[i], "clay:{k},{m},{d} lost {lost:?}: fused shard {i}");
                    assert!(layered[j] == all[i], "clay:{k},{m},{d} lost {lost:?}: layered shard {i}");
                }
            }
        }
    }
}
