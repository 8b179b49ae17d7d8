//! A code's structured repair where every helper's raw sub-chunks meet: the sink of a
//! conventional (star) repair or of a degraded read of a Clay stripe. There the node runs
//! Clay's own repair, pairwise coupling and one MDS decode per repair plane
//! ([`ClayCode::repair`]), rather than adding each helper's dense term matrix. For
//! Clay(10,4,13) the terms take 18.25 multiply-adds per rebuilt byte and the structured
//! repair about 17, and one pass over the output per plane rather than one per helper:
//! `bench codec --code clay:10,4,13` times both (even to 1.3x faster). Shapes that add
//! partial sums on the way (PPR, ECPipe) still carry each helper's term: a partial sum is
//! by definition a sum of terms.
//!
//! The equation names the code ([`RepairEquation::structured`]); the node does not take
//! that on trust: it rebuilds the code's equation for the same lost chunk and helpers and
//! uses the structured repair only when the terms it was sent are exactly those. Both
//! evaluate the same linear map, so the bytes are the same either way.

use kintsugi_codes::clay::geometry::Geometry;
use kintsugi_codes::{ClayCode, Code, CodeSpec, RepairEquation};
use kintsugi_proto::WireError;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

/// Equations computed to check the ones received, by code, lost chunk and helpers; a few
/// hundred KB each for Clay(10,4,13), so only this many are kept.
const CHECKED: usize = 64;

#[derive(Default)]
struct Built {
    codes: HashMap<(usize, usize, usize), ClayCode>,
    equations: HashMap<(CodeSpec, usize, Vec<usize>), Arc<RepairEquation>>,
}

fn built() -> &'static Mutex<Built> {
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    BUILT.get_or_init(Mutex::default)
}

/// How to run one equation's structured repair.
pub struct StructuredRepair {
    code: ClayCode,
    lost: usize,
    /// The d helpers, sorted: the equation's terms, in its order.
    helpers: Vec<usize>,
    beta: usize,
    alpha: usize,
}

impl StructuredRepair {
    /// The structured repair of `eq`, when it names one (Clay's MSR repair), the code's
    /// geometry matches, and the terms are exactly that code's for the same lost chunk and
    /// helpers. `None` leaves the terms to be evaluated as they are.
    pub fn of(eq: &RepairEquation) -> Option<Self> {
        let spec = eq.structured?;
        let CodeSpec::Clay { k, m, d } = spec else { return None };
        // Checked before building anything: a peer cannot make this node build a code
        // larger than the equation it already holds.
        let geo = Geometry::new(k, m, d).ok()?;
        if geo.alpha != eq.sub_chunks || eq.terms.len() != d {
            return None;
        }
        let helpers = eq.helpers();
        let key = (spec, eq.lost, helpers.clone());
        let (code, cached) = {
            let mut b = built().lock().expect("structured repair cache");
            let code = match b.codes.get(&(k, m, d)) {
                Some(c) => c.clone(),
                None => {
                    let c = ClayCode::new(k, m, d).ok()?;
                    b.codes.insert((k, m, d), c.clone());
                    c
                }
            };
            let cached = b.equations.get(&key).cloned();
            (code, cached)
        };
        // Computed outside the lock: other sinks need not wait on it.
        let expected = match cached {
            Some(e) => e,
            None => {
                let e = Arc::new(code.repair_equation(eq.lost, &helpers).ok()?);
                let mut b = built().lock().expect("structured repair cache");
                if b.equations.len() >= CHECKED {
                    b.equations.clear();
                }
                b.equations.insert(key, e.clone());
                e
            }
        };
        if expected.terms != eq.terms || expected.structured != eq.structured {
            tracing::warn!(lost = eq.lost, code = %spec, "a repair names a structured repair its terms are not: running its terms as sent");
            return None;
        }
        Some(StructuredRepair { code, lost: eq.lost, helpers, beta: geo.beta(), alpha: geo.alpha })
    }

    /// Rebuilds a unit's windows into `out` (for each window, that window of every
    /// sub-chunk in order: the payload layout of `RepairGraph::lane_units`). `raw[t]` is
    /// term t's raw reads for the unit: for each window, its beta sub-chunks' windows.
    pub fn rebuild(&self, windows: &[Range<usize>], raw: &[&[u8]], out: &mut [u8]) -> Result<(), WireError> {
        if raw.len() != self.helpers.len() {
            return Err(WireError::internal(format!("a structured repair needs {} helpers' reads, got {}", self.helpers.len(), raw.len())));
        }
        let (mut pos_in, mut pos_out) = (0, 0);
        for w in windows {
            let n = w.len();
            let reads: Vec<&[u8]> = raw
                .iter()
                .map(|r| {
                    r.get(pos_in..pos_in + self.beta * n).ok_or_else(|| WireError::internal("a helper's unit is shorter than its windows"))
                })
                .collect::<Result<_, _>>()?;
            let dst = out
                .get_mut(pos_out..pos_out + self.alpha * n)
                .ok_or_else(|| WireError::internal("the rebuilt unit is shorter than its windows"))?;
            if n > 0 {
                self.code.repair(self.lost, &self.helpers, &reads, dst).map_err(|e| WireError::internal(e.to_string()))?;
            }
            pos_in += self.beta * n;
            pos_out += self.alpha * n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stripe of random data and its parity (the code's own decode fills the parity in).
    fn chunks(code: &ClayCode, len: usize) -> Vec<Vec<u8>> {
        let mut x = 7u32;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        };
        let mut all: Vec<Option<Vec<u8>>> = (0..code.k()).map(|_| Some((0..len).map(|_| next()).collect())).collect();
        all.resize(code.n(), None);
        code.decode(&mut all).unwrap();
        all.into_iter().map(Option::unwrap).collect()
    }

    /// Each term's raw reads for windows `ws` of sub-chunk length `sub`.
    fn raw_for(eq: &RepairEquation, all: &[Vec<u8>], ws: &[Range<usize>], sub: usize) -> Vec<Vec<u8>> {
        eq.terms
            .iter()
            .map(|t| {
                let mut v = Vec::new();
                for w in ws {
                    for r in t.reads.iter().flat_map(|r| r.clone()) {
                        v.extend_from_slice(&all[t.helper][r * sub + w.start..r * sub + w.end]);
                    }
                }
                v
            })
            .collect()
    }

    #[test]
    fn rebuilds_every_lost_chunk_in_windows() {
        let code = ClayCode::new(4, 2, 5).unwrap();
        let alpha = code.geometry().alpha;
        let sub = 37;
        let all = chunks(&code, alpha * sub);
        for lost in 0..code.n() {
            let helpers: Vec<usize> = (0..code.n()).filter(|&h| h != lost).collect();
            let eq = code.repair_equation(lost, &helpers).unwrap();
            let s = StructuredRepair::of(&eq).expect("a clay MSR equation is structured");
            // Two windows of odd sizes, as a sink's unit may hold.
            let ws = [0..10, 10..sub];
            let raw = raw_for(&eq, &all, &ws, sub);
            let refs: Vec<&[u8]> = raw.iter().map(|r| r.as_slice()).collect();
            let mut out = vec![0u8; alpha * sub];
            s.rebuild(&ws, &refs, &mut out).unwrap();
            let mut pos = 0;
            for w in &ws {
                for s in 0..alpha {
                    assert_eq!(&out[pos..pos + w.len()], &all[lost][s * sub + w.start..s * sub + w.end], "lost {lost}");
                    pos += w.len();
                }
            }
        }
    }

    #[test]
    fn terms_that_are_not_the_codes_are_run_as_sent() {
        let code = ClayCode::new(4, 2, 5).unwrap();
        let helpers: Vec<usize> = (1..code.n()).collect();
        let eq = code.repair_equation(0, &helpers).unwrap();
        assert!(StructuredRepair::of(&eq).is_some());
        let mut bad = eq.clone();
        let c = bad.terms[2].coefs.iter_mut().find(|c| **c != 0).unwrap();
        *c ^= 1;
        assert!(StructuredRepair::of(&bad).is_none(), "a changed coefficient");
        let mut other = eq.clone();
        other.structured = Some(CodeSpec::Clay { k: 4, m: 2, d: 4 });
        assert!(StructuredRepair::of(&other).is_none(), "another code");
        let mut none = eq.clone();
        none.structured = None;
        assert!(StructuredRepair::of(&none).is_none());
        let mut huge = eq;
        huge.structured = Some(CodeSpec::Clay { k: 200, m: 50, d: 240 });
        assert!(StructuredRepair::of(&huge).is_none(), "a code too large to build");
        // Fewer helpers than an MSR repair: a plain decode, no structure.
        let rs_like = code.repair_equation(0, &[1, 2, 3, 4]).unwrap();
        assert!(rs_like.structured.is_none());
    }
}
