//! Single-node repair: d helpers, each reading the beta = alpha/q planes in which the lost
//! node is unpaired. The lost node's whole column (its q-1 companions) must be among the
//! helpers; the n-1-d nodes left out ("aloof") are decoded along the way.
//!
//! In each repair plane the unknown U are the lost node's column and the aloof nodes: m
//! in all, one MDS decode. The lost node's C in a repair plane is its U; in the other
//! planes it comes from a companion's C and U by the pairwise transform.
//!
//! The same routine, run on unit-vector inputs, yields the repair equation (which
//! coefficient each helper sub-chunk carries) that repair graphs evaluate.

use super::coupling::positions;
use super::layered::{self, Known, Outs};
use super::ClayCode;
use crate::equation::{HelperTerm, RepairEquation};
use crate::error::{CodeError, Result};
use crate::Code;

/// Grid nodes of the lost node's column other than itself (virtual ones included).
fn companions(code: &ClayCode, lost_node: usize) -> Vec<usize> {
    let g = code.geometry();
    let y = g.y(lost_node);
    (y * g.q..(y + 1) * g.q).filter(|&i| i != lost_node).collect()
}

/// The d helpers of an MSR repair drawn from `helpers` (all real companions first), or
/// `None` when they do not allow one.
fn msr_helpers(code: &ClayCode, lost: usize, helpers: &[usize]) -> Option<Vec<usize>> {
    let g = code.geometry();
    let mut chosen: Vec<usize> = companions(code, g.node_of(lost)).into_iter().filter_map(|i| g.shard_of(i)).collect();
    if !chosen.iter().all(|c| helpers.contains(c)) {
        return None;
    }
    for &h in helpers {
        if chosen.len() >= g.d {
            break;
        }
        if !chosen.contains(&h) {
            chosen.push(h);
        }
    }
    chosen.sort_unstable();
    (chosen.len() == g.d).then_some(chosen)
}

pub(super) fn choose_helpers(code: &ClayCode, lost: usize, available: &[usize]) -> Result<Vec<usize>> {
    if lost >= code.n() {
        return Err(CodeError::BadIndex { index: lost, n: code.n() });
    }
    let mut avail: Vec<usize> = available.iter().copied().filter(|&i| i != lost && i < code.n()).collect();
    avail.sort_unstable();
    avail.dedup();
    if let Some(h) = msr_helpers(code, lost, &avail) {
        return Ok(h);
    }
    if avail.len() >= code.k() {
        return Ok(avail[..code.k()].to_vec());
    }
    Err(CodeError::Unrecoverable { erased: vec![lost], available: avail.len(), tolerance: code.tolerance() })
}

impl ClayCode {
    /// Rebuilds chunk `lost` from `d` helpers (sorted shard indices, the lost node's
    /// column among them). `reads[i]` holds helper i's repair planes back to back (beta
    /// sub-chunks of `out.len() / alpha` bytes, in plane order); `out` gets the chunk.
    pub fn repair(&self, lost: usize, helpers: &[usize], reads: &[&[u8]], out: &mut [u8]) -> Result<()> {
        let core = &self.core;
        let g = &core.geo;
        let hs = msr_helpers(self, lost, helpers).filter(|h| h == helpers).ok_or_else(|| {
            CodeError::InvalidParams(format!("a clay repair of shard {lost} needs exactly d = {} sorted helpers including its column", g.d))
        })?;
        if reads.len() != hs.len() {
            return Err(CodeError::WrongCount { what: "helper reads", expected: hs.len(), got: reads.len() });
        }
        let sub = crate::sub_len(g.alpha, out.len())?;
        if let Some(r) = reads.iter().find(|r| r.len() != g.beta() * sub) {
            return Err(CodeError::UnequalLengths(g.beta() * sub, r.len()));
        }
        let ln = g.node_of(lost);
        let column = companions(self, ln);
        let aloof: Vec<usize> =
            (0..g.nodes()).filter(|&i| i != ln && !g.is_virtual(i) && !hs.contains(&g.shard_of(i).expect("real"))).collect();
        let erased: Vec<usize> = column.iter().copied().chain([ln]).chain(aloof.iter().copied()).collect();
        let c_unknown: Vec<usize> = [ln].into_iter().chain(aloof.iter().copied()).collect();
        let plan = core.plan(&erased, &c_unknown, ln)?;
        let planes = g.repair_planes(ln);
        let mut slot = vec![usize::MAX; g.alpha];
        for (r, &z) in planes.iter().enumerate() {
            slot[z] = r;
        }
        let mut known: Vec<Option<&[u8]>> = vec![None; g.nodes()];
        for (&h, &r) in hs.iter().zip(reads) {
            known[g.node_of(h)] = Some(r);
        }
        let le = plan.erased_index(ln).expect("the lost node is decoded");
        layered::with_buffers(|b| {
            let (scratch, staging) = (&mut b.scratch, &mut b.staging);
            let mut off = 0;
            while off < sub {
                let w = core.repair_window_for(sub).min(sub - off);
                staging.fill(&known, g.beta(), sub, off, w);
                let kn = Known { known: staging.nodes(), slot: &slot, stride: staging.stride, off: 0 };
                let mut bufs: Vec<Option<&mut [u8]>> = (0..plan.erased.len()).map(|_| None).collect();
                bufs[le] = Some(&mut out[..]);
                layered::run(g, &core.coupling, &plan, &kn, w, scratch, &mut Outs { bufs, stride: sub, off });
                // The other planes: the lost node is coupled with a companion there.
                let zero = vec![0u8; w];
                for &c in &column {
                    let ci = plan.erased_index(c).expect("companions are decoded");
                    let (cc, uc) = positions(g.x(c), g.x(ln));
                    let (cl, _) = positions(g.x(ln), g.x(c));
                    let m = core.coupling.matrix((cc, uc), cl);
                    for &z in &planes {
                        let (_, zl) = g.partner(c, z).expect("a companion is paired in the lost node's planes");
                        let cv: &[u8] = match kn.known[c] {
                            Some(buf) => &buf[slot[z] * kn.stride..slot[z] * kn.stride + w],
                            None => &zero,
                        };
                        let uv = scratch.u_at(ci, z, g.alpha);
                        kintsugi_gf::apply(m, &[cv, uv], &mut [&mut out[zl * sub + off..zl * sub + off + w]]);
                    }
                }
                off += w;
            }
        });
        Ok(())
    }
}

/// Unit-vector inputs: source i, sub-chunk r has a single 1 at column i*per + r of a
/// `count * per`-byte sub-chunk.
fn unit_inputs(count: usize, per: usize) -> Vec<Vec<u8>> {
    let width = count * per;
    (0..count)
        .map(|i| {
            let mut buf = vec![0u8; per * width];
            for r in 0..per {
                buf[r * width + i * per + r] = 1;
            }
            buf
        })
        .collect()
}

/// Turns the output of a run on unit inputs into one term per source.
fn terms_from(out: &[u8], sources: &[usize], reads: Vec<std::ops::Range<usize>>, alpha: usize, per: usize) -> Vec<HelperTerm> {
    let width = sources.len() * per;
    let mut terms = Vec::new();
    for (i, &h) in sources.iter().enumerate() {
        let mut coefs = Vec::with_capacity(alpha * per);
        for s in 0..alpha {
            coefs.extend_from_slice(&out[s * width + i * per..s * width + (i + 1) * per]);
        }
        if coefs.iter().any(|&c| c != 0) {
            terms.push(HelperTerm { helper: h, reads: reads.clone(), coefs });
        }
    }
    terms
}

pub(super) fn equation(code: &ClayCode, lost: usize, helpers: &[usize]) -> Result<RepairEquation> {
    let n = code.n();
    for &i in helpers.iter().chain([&lost]) {
        if i >= n {
            return Err(CodeError::BadIndex { index: i, n });
        }
    }
    let mut hs = helpers.to_vec();
    hs.sort_unstable();
    hs.dedup();
    if hs.contains(&lost) || hs.len() != helpers.len() {
        return Err(CodeError::InvalidParams(format!("helpers {helpers:?} must be distinct and exclude the lost shard {lost}")));
    }
    let key = (lost, hs);
    if let Some(e) = code.core.equations.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(e.clone());
    }
    let e = compute(code, lost, &key.1)?;
    code.core.equations.lock().unwrap_or_else(|p| p.into_inner()).insert(key, e.clone());
    Ok(e)
}

/// The equation for `lost` from the distinct, sorted `hs`.
fn compute(code: &ClayCode, lost: usize, hs: &[usize]) -> Result<RepairEquation> {
    let g = code.geometry();
    let alpha = g.alpha;
    if let Some(msr) = msr_helpers(code, lost, hs) {
        // MSR repair: beta planes from each of d helpers.
        let beta = g.beta();
        let inputs = unit_inputs(msr.len(), beta);
        let refs: Vec<&[u8]> = inputs.iter().map(|b| b.as_slice()).collect();
        let mut out = vec![0u8; alpha * msr.len() * beta];
        code.repair(lost, &msr, &refs, &mut out)?;
        let runs = g.repair_runs(g.node_of(lost));
        let terms = terms_from(&out, &msr, runs, alpha, beta);
        return Ok(RepairEquation { lost, sub_chunks: alpha, terms, structured: Some(code.spec()) });
    }
    if hs.len() < code.k() {
        return Err(CodeError::HelpersInsufficient { lost, helpers: hs.to_vec() });
    }
    // Too few helpers for an MSR repair: decode from whole chunks of k of them.
    let used = &hs[..code.k()];
    let inputs = unit_inputs(used.len(), alpha);
    let refs: Vec<&[u8]> = inputs.iter().map(|b| b.as_slice()).collect();
    let dec = code.decoder(&[lost], used)?;
    let mut out = vec![0u8; alpha * used.len() * alpha];
    dec.apply(&refs, &mut [&mut out])?;
    let whole = std::iter::once(0..alpha).collect();
    Ok(RepairEquation { lost, sub_chunks: alpha, terms: terms_from(&out, used, whole, alpha, alpha), structured: None })
}
