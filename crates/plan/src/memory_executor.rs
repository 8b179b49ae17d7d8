//! Runs a repair graph over in-memory byte buffers, slice by slice, exactly as the network
//! executor does over sockets: for slice j (in lane j mod lanes) every vertex of that lane,
//! inputs first, adds the slice j of its inputs to its own scaled helper range and passes
//! the sum on; the sink places it. The reference that every other executor must match.

use crate::error::{PlanError, Result};
use crate::graph::{RepairGraph, VertexId};
use kintsugi_codes::apply_term_window;
use kintsugi_codes::TermMatrix;
use kintsugi_gf::mul_add;

/// Rebuilds the lost chunk from whole helper chunks (one per equation term, in term order),
/// moving `slice_len`-byte windows of each sub-chunk through the graph.
pub fn execute(graph: &RepairGraph, helper_chunks: &[&[u8]], slice_len: usize) -> Result<Vec<u8>> {
    let eq = &graph.equation;
    if helper_chunks.len() != eq.terms.len() {
        return Err(PlanError::Invalid(format!("{} helper chunks for {} terms", helper_chunks.len(), eq.terms.len())));
    }
    let chunk_len = helper_chunks.first().map_or(0, |c| c.len());
    for (term, c) in helper_chunks.iter().enumerate() {
        if c.len() != chunk_len {
            return Err(PlanError::ChunkLength { term, expected: chunk_len, got: c.len() });
        }
    }
    let alpha = eq.sub_chunks;
    let sub = kintsugi_codes::sub_len(alpha, chunk_len)?;
    let slices = graph.slices(chunk_len, slice_len)?;
    let matrices: Vec<TermMatrix> = eq.terms.iter().map(|t| t.matrix(alpha)).collect();
    let order: Vec<VertexId> = graph.topological_order();
    let sink = graph.sink;
    // One slice buffer per vertex: alpha windows of up to slice_len bytes.
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); graph.vertices.len()];
    let mut out = vec![0u8; chunk_len];
    let mut window_out = vec![0u8; alpha * slice_len.min(sub.max(1))];

    for (j, win) in slices.iter().enumerate() {
        let lane = j % graph.lanes;
        let w = win.len();
        for &v in &order {
            let vx = graph.vertex(v);
            let is_sink = v == sink;
            if !is_sink && vx.lane != lane {
                continue;
            }
            let mut acc = std::mem::take(if is_sink { &mut window_out } else { &mut bufs[v.index()] });
            acc.clear();
            acc.resize(alpha * w, 0);
            for inp in &vx.inputs {
                if graph.vertex(*inp).lane == lane {
                    let t = graph.vertex(*inp).local.filter(|_| graph.sends_raw(*inp));
                    match t {
                        // Raw reads: this vertex applies the sender's coefficients.
                        Some(t) => {
                            let reads = eq.terms[t].read_count();
                            let srcs: Vec<&[u8]> = bufs[inp.index()][..reads * w].chunks(w.max(1)).collect();
                            let mut dsts: Vec<&mut [u8]> = acc.chunks_mut(w.max(1)).collect();
                            if w > 0 {
                                matrices[t].apply_add(&srcs, &mut dsts);
                            }
                        }
                        None => mul_add(1, &bufs[inp.index()][..alpha * w], &mut acc),
                    }
                }
            }
            if !is_sink && graph.sends_raw(v) {
                // A pure source sending raw: its reads, unmultiplied.
                let t = &eq.terms[vx.local.expect("raw senders read")];
                acc.clear();
                for r in t.reads.iter().flat_map(|r| r.clone()) {
                    acc.extend_from_slice(&helper_chunks[vx.local.unwrap()][r * sub + win.start..r * sub + win.end]);
                }
                bufs[v.index()] = acc;
                continue;
            }
            if let Some(t) = vx.local {
                apply_term_window(&eq.terms[t], &matrices[t], helper_chunks[t], sub, win.clone(), &mut acc, w);
            }
            if is_sink {
                for s in 0..alpha {
                    out[s * sub + win.start..s * sub + win.end].copy_from_slice(&acc[s * w..(s + 1) * w]);
                }
                window_out = acc;
            } else {
                bufs[v.index()] = acc;
            }
        }
    }
    Ok(out)
}
