//! Encode and decode in one pass per plane, when the unknown nodes fill whole columns of
//! the grid: the parities when m is a multiple of q (every code with Ceph's default
//! d = k+m-1, and Clay(10,4,13)), or a lost column of data nodes.
//!
//! Then every known node is coupled only with known (or virtual) nodes, so its uncoupled
//! value U in plane z is a known combination of coupled values C, and the unknown nodes'
//! U in plane z, an MDS decode of those, is one linear map of known C: each node's own
//! sub-chunk in plane z and its partners' sub-chunks in their planes. One dot product over
//! about k + k(q-1)/q inputs replaces the layered decoder's uncoupling pass, its
//! intermediate buffers and its second reads of every input. The unknown nodes then
//! couple back among themselves, two at a time, inside a group of planes that differ only
//! in the unknown columns' digits.

use super::coupling::{positions, Coupling};
use super::geometry::Geometry;
use crate::linear::LinearCode;
use crate::{Code, Result};
use kintsugi_gf::CoefMatrix;

/// The fused map of the planes sharing one pattern of known columns' digits.
#[derive(Debug)]
struct PlaneMap {
    /// First plane of the group: the unknown columns' digits are zero.
    base: usize,
    /// Inputs as (position in the caller's sources, plane offset from z): the same for
    /// every plane of the group, as partner planes differ from z in a known digit only.
    inputs: Vec<(usize, isize)>,
    /// unknown x inputs: the unknown nodes' U in each plane of the group.
    matrix: CoefMatrix,
}

/// A fused decode of one set of unknown nodes from all the others.
#[derive(Debug)]
pub struct FusedColumns {
    maps: Vec<PlaneMap>,
    /// Plane offsets of a group from its base, every combination of the unknown columns'
    /// digits (the first is 0).
    offsets: Vec<usize>,
    /// Per plane of a group, per unknown node (by position), its partner as (unknown
    /// position, plane index in the group), or `None` when unpaired.
    pairs: Vec<Vec<Option<(usize, usize)>>>,
    /// Row x of each unknown node (pairs are coupled back from the lower-x member).
    xs: Vec<usize>,
    /// [C of the lower-x node, C of the higher-x one] from [U lower, U higher].
    couple_back: CoefMatrix,
}

impl FusedColumns {
    /// The fused decode of `unknown` (grid nodes, sorted) from `sources` (the caller's
    /// source order, grid nodes: every real node not unknown), or `None` when the unknown
    /// nodes do not fill whole columns free of virtual nodes.
    pub fn new(geo: &Geometry, mds: &LinearCode, coupling: &Coupling, unknown: &[usize], sources: &[usize]) -> Result<Option<Self>> {
        let q = geo.q;
        let is_unknown = |i: usize| unknown.contains(&i);
        let whole = unknown.iter().all(|&e| (0..q).all(|x| is_unknown(geo.y(e) * q + x)));
        let rest_known = (0..geo.nodes()).all(|i| is_unknown(i) || geo.is_virtual(i) || sources.contains(&i));
        if unknown.is_empty() || !whole || !rest_known {
            return Ok(None);
        }
        let mut cols: Vec<usize> = unknown.iter().map(|&e| geo.y(e)).collect();
        cols.dedup();
        // Every combination of the unknown columns' digits, as plane offsets.
        let mut offsets = vec![0usize];
        for &y in &cols {
            let w = geo.weight(y);
            offsets = offsets.iter().flat_map(|&o| (0..q).map(move |x| o + x * w)).collect();
        }
        offsets.sort_unstable();
        let available: Vec<usize> = (0..geo.nodes()).filter(|&i| !is_unknown(i)).collect();
        let dec = mds.decoder(unknown, &available)?;
        let dm = dec.matrix().expect("RS decodes by one matrix");
        let source_at = |node: usize| sources.iter().position(|&s| s == node).expect("known real nodes are sources");
        let rows = unknown.len();
        let mut maps = Vec::new();
        for base in (0..geo.alpha).filter(|&z| cols.iter().all(|&y| geo.digit(z, y) == 0)) {
            // (node, plane) -> coefficient per unknown row.
            let mut terms: Vec<((usize, usize), Vec<u8>)> = Vec::new();
            let mut add = |node: usize, plane: usize, coef: u8, row: usize| {
                if geo.is_virtual(node) || coef == 0 {
                    return;
                }
                let at = match terms.iter().position(|(t, _)| *t == (node, plane)) {
                    Some(i) => i,
                    None => {
                        terms.push(((node, plane), vec![0; rows]));
                        terms.len() - 1
                    }
                };
                terms[at].1[row] ^= coef;
            };
            for (si, &s) in dec.sources.iter().enumerate() {
                for row in 0..rows {
                    let g = dm.coef(row, si);
                    match geo.partner(s, base) {
                        None => add(s, base, g, row),
                        Some((p, zs)) => {
                            let (cs, us) = positions(geo.x(s), geo.x(p));
                            let (cp, _) = positions(geo.x(p), geo.x(s));
                            let [c1, c2] = coupling.coefs((cs, cp), us);
                            add(s, base, kintsugi_gf::mul(g, c1), row);
                            add(p, zs, kintsugi_gf::mul(g, c2), row);
                        }
                    }
                }
            }
            terms.sort_by_key(|t| t.0);
            let inputs = terms.iter().map(|((s, plane), _)| (source_at(*s), *plane as isize - base as isize)).collect();
            let coefs: Vec<u8> = (0..rows).flat_map(|r| terms.iter().map(move |t| t.1[r])).collect();
            maps.push(PlaneMap { base, inputs, matrix: CoefMatrix::new(rows, terms.len(), &coefs) });
        }
        let pairs = offsets
            .iter()
            .map(|&z| {
                unknown
                    .iter()
                    .map(|&e| {
                        geo.partner(e, z).map(|(p, zs)| {
                            let pi = unknown.iter().position(|&u| u == p).expect("unknown columns are whole");
                            let gi = offsets.iter().position(|&o| o == zs).expect("partners differ in an unknown digit");
                            (pi, gi)
                        })
                    })
                    .collect()
            })
            .collect();
        let (clo, ulo) = positions(0, 1);
        let (chi, uhi) = positions(1, 0);
        let a = coupling.coefs((ulo, uhi), clo);
        let b = coupling.coefs((ulo, uhi), chi);
        let couple_back = CoefMatrix::new(2, 2, &[a[0], a[1], b[0], b[1]]);
        let xs = unknown.iter().map(|&e| geo.x(e)).collect();
        Ok(Some(FusedColumns { maps, offsets, pairs, xs, couple_back }))
    }

    /// The unknown nodes' C (`outs`, in unknown order) from the sources' (`srcs`, in the
    /// constructor's order), chunks of `sub * alpha` bytes, in windows of `w` bytes of
    /// every plane.
    pub fn run(&self, srcs: &[&[u8]], outs: &mut [&mut [u8]], sub: usize, w: usize) {
        // `scratch`: U of the paired unknowns in one group's planes, (plane, unknown) -> window.
        super::layered::with_buffers(|b| self.run_in(srcs, outs, sub, w, &mut b.plain));
    }

    fn run_in(&self, srcs: &[&[u8]], outs: &mut [&mut [u8]], sub: usize, w: usize, scratch: &mut Vec<u8>) {
        let (rows, group) = (self.xs.len(), self.offsets.len());
        scratch.resize(group * rows * w.min(sub), 0);
        let mut off = 0;
        while off < sub {
            let w = w.min(sub - off);
            for map in &self.maps {
                for (g, &dz) in self.offsets.iter().enumerate() {
                    let z = map.base + dz;
                    let ins: Vec<&[u8]> = map
                        .inputs
                        .iter()
                        .map(|&(s, dp)| {
                            let at = (z as isize + dp) as usize * sub + off;
                            &srcs[s][at..at + w]
                        })
                        .collect();
                    // Unpaired unknowns are their own C: straight to the output.
                    let mut rest = &mut scratch[g * rows * w..(g + 1) * rows * w];
                    let mut slots: Vec<Option<&mut [u8]>> = outs.iter_mut().map(|o| Some(&mut o[..])).collect();
                    let mut dsts: Vec<&mut [u8]> = Vec::with_capacity(rows);
                    for (e, pair) in self.pairs[g].iter().enumerate() {
                        let (head, tail) = std::mem::take(&mut rest).split_at_mut(w);
                        rest = tail;
                        match pair {
                            Some(_) => dsts.push(head),
                            None => {
                                let out = slots[e].take().expect("each unknown once");
                                dsts.push(&mut out[z * sub + off..z * sub + off + w]);
                            }
                        }
                    }
                    kintsugi_gf::apply_gathered(&map.matrix, &ins, &mut dsts);
                }
                // Couple back the paired unknowns, each pair once, from its lower-x member.
                for g in 0..group {
                    for (e, pair) in self.pairs[g].iter().enumerate() {
                        let Some((p, gs)) = *pair else { continue };
                        if self.xs[e] > self.xs[p] {
                            continue;
                        }
                        let ue = &scratch[(g * rows + e) * w..(g * rows + e + 1) * w];
                        let up = &scratch[(gs * rows + p) * w..(gs * rows + p + 1) * w];
                        let ze = (map.base + self.offsets[g]) * sub + off;
                        let zp = (map.base + self.offsets[gs]) * sub + off;
                        // e < p: one column, numbered by row.
                        let (lo, hi) = outs.split_at_mut(p);
                        let mut dsts = [&mut lo[e][ze..ze + w], &mut hi[0][zp..zp + w]];
                        kintsugi_gf::apply(&self.couple_back, &[ue, up], &mut dsts);
                    }
                }
            }
            off += w;
        }
    }
}
