//! Encode in one pass per plane, for codes whose parities fill whole columns of the grid
//! (m a multiple of q: every code with Ceph's default d = k+m-1, and Clay(10,4,13)).
//!
//! Then a data node is only ever coupled with data (or virtual) nodes, so the uncoupled
//! values U of every data node in plane z are known combinations of data C, and the
//! parities' U in plane z, an MDS encode of those, is one linear map of data C: the
//! node's own sub-chunk in plane z and its partners' sub-chunks in their planes. One dot
//! product over about k + k(q-1)/q inputs replaces the layered decoder's uncoupling pass,
//! its intermediate buffers and its second reads of every input; the parities then couple
//! back among themselves, two at a time, inside a group of planes that differ only in the
//! parity columns' digits.

use super::coupling::{positions, Coupling};
use super::geometry::Geometry;
use crate::linear::LinearCode;
use crate::{Code, Result};
use kintsugi_gf::CoefMatrix;

/// The fused map of one pattern of data digits.
#[derive(Debug)]
struct PlaneMap {
    /// Inputs as (data shard, plane offset from z): the offset is the same for every plane
    /// sharing this pattern, since partner planes differ from z in one data digit only.
    inputs: Vec<(usize, isize)>,
    /// m x inputs: the parities' U in this plane.
    matrix: CoefMatrix,
}

/// Everything the fused encode of one code needs, built once.
#[derive(Debug)]
pub struct FusedEncoder {
    /// Per pattern of the data columns' digits (z / group), the map of its planes.
    maps: Vec<PlaneMap>,
    /// Planes per group: q^(parity columns). Consecutive planes, since the parity columns
    /// are the last ones and their digits the least significant.
    group: usize,
    /// Per plane offset inside a group, per parity (by position), its partner as
    /// (parity position, plane offset inside the group), or `None` when unpaired.
    pairs: Vec<Vec<Option<(usize, usize)>>>,
    /// [C of the lower-x parity, C of the higher-x one] from [U lower, U higher].
    couple_back: CoefMatrix,
    m: usize,
}

impl FusedEncoder {
    /// The fused encoder, or `None` when the parities do not fill whole columns.
    pub fn new(geo: &Geometry, mds: &LinearCode, coupling: &Coupling) -> Result<Option<Self>> {
        let (q, k, m) = (geo.q, geo.k, geo.m);
        if !m.is_multiple_of(q) {
            return Ok(None);
        }
        let parity_cols = m / q;
        let group = q.pow(parity_cols as u32);
        let data_nodes: Vec<usize> = (0..k + geo.nu).collect();
        let parity_nodes: Vec<usize> = (k + geo.nu..geo.nodes()).collect();
        let dec = mds.decoder(&parity_nodes, &data_nodes)?;
        let enc = dec.matrix().expect("RS decodes by one matrix");
        // Column of grid node s in the encoding matrix.
        let col = |s: usize| dec.sources.iter().position(|&x| x == s).expect("every data node is a source");
        let mut maps = Vec::with_capacity(geo.alpha / group);
        for pattern in 0..geo.alpha / group {
            let z = pattern * group;
            // (data shard, plane) -> coefficient per parity row.
            let mut terms: Vec<((usize, usize), Vec<u8>)> = Vec::new();
            let add = |node: usize, plane: usize, coef: u8, row: usize, terms: &mut Vec<((usize, usize), Vec<u8>)>| {
                if geo.is_virtual(node) || coef == 0 {
                    return;
                }
                let key = (node, plane);
                let at = match terms.iter().position(|(t, _)| *t == key) {
                    Some(i) => i,
                    None => {
                        terms.push((key, vec![0; m]));
                        terms.len() - 1
                    }
                };
                terms[at].1[row] ^= coef;
            };
            for &s in &data_nodes {
                for row in 0..m {
                    let g = enc.coef(row, col(s));
                    match geo.partner(s, z) {
                        None => add(s, z, g, row, &mut terms),
                        Some((p, zs)) => {
                            let (cs, us) = positions(geo.x(s), geo.x(p));
                            let (cp, _) = positions(geo.x(p), geo.x(s));
                            let [c1, c2] = coupling.coefs((cs, cp), us);
                            add(s, z, kintsugi_gf::mul(g, c1), row, &mut terms);
                            add(p, zs, kintsugi_gf::mul(g, c2), row, &mut terms);
                        }
                    }
                }
            }
            terms.sort_by_key(|t| t.0);
            let inputs = terms.iter().map(|((s, plane), _)| (*s, *plane as isize - z as isize)).collect();
            let coefs: Vec<u8> = (0..m).flat_map(|r| terms.iter().map(move |t| t.1[r])).collect();
            maps.push(PlaneMap { inputs, matrix: CoefMatrix::new(m, terms.len(), &coefs) });
        }
        let pairs = (0..group)
            .map(|g| {
                parity_nodes
                    .iter()
                    .map(|&e| {
                        geo.partner(e, g).map(|(p, zs)| {
                            debug_assert!(zs < group, "parities pair inside their group");
                            (p - parity_nodes[0], zs)
                        })
                    })
                    .collect()
            })
            .collect();
        // A pair (lo, hi) by row x: [C_lo, C_hi] from [U_lo, U_hi].
        let (clo, ulo) = positions(0, 1);
        let (chi, uhi) = positions(1, 0);
        let a = coupling.coefs((ulo, uhi), clo);
        let b = coupling.coefs((ulo, uhi), chi);
        let couple_back = CoefMatrix::new(2, 2, &[a[0], a[1], b[0], b[1]]);
        Ok(Some(FusedEncoder { maps, group, pairs, couple_back, m }))
    }

    /// Parity from data, whole chunks of `sub * alpha` bytes, in windows of `w` bytes of
    /// every plane.
    pub fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]], sub: usize, w: usize) {
        let (m, group) = (self.m, self.group);
        // U of the paired parities of one group's planes: (plane offset, parity) -> window.
        let mut scratch = vec![0u8; group * m * w];
        let mut off = 0;
        while off < sub {
            let w = w.min(sub - off);
            for (pattern, map) in self.maps.iter().enumerate() {
                let z0 = pattern * group;
                for g in 0..group {
                    let z = z0 + g;
                    let srcs: Vec<&[u8]> = map
                        .inputs
                        .iter()
                        .map(|&(s, dz)| {
                            let at = (z as isize + dz) as usize * sub + off;
                            &data[s][at..at + w]
                        })
                        .collect();
                    // Unpaired parities are their own C: straight to the output.
                    let mut dsts: Vec<&mut [u8]> = Vec::with_capacity(m);
                    let (mut rest_s, mut rest_p): (&mut [u8], Vec<Option<&mut [u8]>>) =
                        (&mut scratch[g * m * w..(g + 1) * m * w], parity.iter_mut().map(|p| Some(&mut p[..])).collect());
                    for (e, pair) in self.pairs[g].iter().enumerate() {
                        let (head, tail) = std::mem::take(&mut rest_s).split_at_mut(w);
                        rest_s = tail;
                        match pair {
                            Some(_) => dsts.push(head),
                            None => {
                                let out = rest_p[e].take().expect("each parity once");
                                dsts.push(&mut out[z * sub + off..z * sub + off + w]);
                            }
                        }
                    }
                    kintsugi_gf::apply_gathered(&map.matrix, &srcs, &mut dsts);
                }
                // Couple back the paired parities, each pair once, from the lower-x member.
                for g in 0..group {
                    for (e, pair) in self.pairs[g].iter().enumerate() {
                        let Some((p, gs)) = *pair else { continue };
                        if e > p {
                            continue; // parities of one column: position order is row order
                        }
                        let ue = &scratch[(g * m + e) * w..(g * m + e + 1) * w];
                        let up = &scratch[(gs * m + p) * w..(gs * m + p + 1) * w];
                        let (ze, zp) = ((z0 + g) * sub + off, (z0 + gs) * sub + off);
                        let (lo, hi) = parity.split_at_mut(p);
                        let mut dsts = [&mut lo[e][ze..ze + w], &mut hi[0][zp..zp + w]];
                        kintsugi_gf::apply(&self.couple_back, &[ue, up], &mut dsts);
                    }
                }
            }
            off += w;
        }
    }
}
