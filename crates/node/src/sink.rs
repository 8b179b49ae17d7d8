//! Sinks: the vertex that rebuilds the chunk. A node's sink (full-node repair) stores it
//! (`Executor::store_sink`); a reader's sink (degraded read) returns it. Also the
//! store-and-forward vertex, which like a sink waits for whole lanes.

use crate::exec::{unit_sizes, Counters, Executor, InputStream, Opening, Run, Unit};
use crate::output::Output;
use crate::shaper::Shaper;
use crate::structured_repair::StructuredRepair;
use crate::terms::{add_input, sum_inputs, LocalTerm, RawInput};
use crate::wire::Job;
use kintsugi_plan::{RepairGraph, VertexId};
use kintsugi_proto::WireError;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Output bytes a store-and-forward vertex computes and sends at a time.
const FORWARD_GROUP: usize = 1 << 20;

/// A store-and-forward vertex (PPR): each unit (its whole lane) from every input first, as
/// the published method's timesteps require; then the output computed a group of windows
/// at a time and each group sent as soon as it is ready, so sending starts after the
/// first megabyte is computed instead of after the whole lane.
pub(crate) async fn store_and_forward(
    units: &[Vec<Range<usize>>],
    alpha: usize,
    inputs: &mut [(InputStream, Option<RawInput>)],
    widths: &[usize],
    local: Option<&LocalTerm>,
    raw_out: bool,
    out: &mut Output,
) -> Result<(), WireError> {
    for windows in units {
        let mut datas = Vec::with_capacity(inputs.len());
        for (rx, _) in inputs.iter_mut() {
            datas.push(rx.next_unit().await?);
        }
        let mut offs = vec![0usize; inputs.len()];
        let mut start = 0;
        while start < windows.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < windows.len() && (end == start || bytes < FORWARD_GROUP) {
                bytes += alpha * windows[end].len();
                end += 1;
            }
            let group = &windows[start..end];
            let span: usize = group.iter().map(|w| w.len()).sum();
            let acc = match local {
                Some(l) if raw_out => l.raw(group)?,
                // A source: its term is the whole unit, written over a recycled buffer.
                Some(l) if inputs.is_empty() => {
                    let mut acc = crate::pool::overwritable(alpha * span);
                    l.put(group, alpha, &mut acc)?;
                    acc
                }
                _ => {
                    let mut acc = crate::pool::zeroed(alpha * span);
                    for (j, ((_, raw), data)) in inputs.iter().zip(&datas).enumerate() {
                        let n = widths[j] * span;
                        let part = data
                            .get(offs[j]..offs[j] + n)
                            .ok_or_else(|| WireError::internal("an input unit is shorter than its windows"))?;
                        add_input(raw.as_ref(), group, alpha, part, &mut acc)?;
                        offs[j] += n;
                    }
                    if let Some(l) = local {
                        l.add(group, alpha, &mut acc)?;
                    }
                    acc
                }
            };
            crate::disk_emulation::settle().await;
            out.send(Unit { bytes: acc, slot: None }).await?;
            start = end;
        }
    }
    out.finish().await
}

/// Why the chunk writer stopped short of a durable chunk.
enum WriterError {
    /// The units stopped coming: the sink's own error says why.
    EndedEarly(WireError),
    /// The writer itself failed (a full disk, an I/O error, a checksum that does not match).
    Failed(WireError),
}

/// Where a sink's rebuilt units go.
pub(crate) enum SinkOutput<'a> {
    /// Placed into the whole chunk in memory (a degraded read returns it).
    Buffer(&'a mut Vec<u8>),
    /// Passed on in chunk order (a full-node repair writing as it goes), units gathered
    /// into batches of about [`WRITE_BATCH`] bytes.
    Stream(&'a mpsc::Sender<Vec<Vec<u8>>>),
}

/// Bytes of rebuilt units handed to the chunk writer's thread at a time: one wake-up of it
/// per unit (32 KiB slices) cost the sink more CPU in thread switches than in its CRC
/// passes; a few hundred KiB per hand-over keeps the memory per repair small.
pub(crate) const WRITE_BATCH: usize = 256 << 10;

/// The sink's units in the order it rebuilds them: by where their first window lies.
fn sink_order(units: &[Vec<Vec<Range<usize>>>]) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = (0..units.len()).flat_map(|l| (0..units[l].len()).map(move |u| (l, u))).collect();
    order.sort_by_key(|&(l, u)| units[l][u].first().map_or(0, |w| w.start));
    order
}

/// True when the sink's units, in its order, are the chunk's bytes in order: one sub-chunk
/// (a scalar code) and windows that follow each other.
pub(crate) fn streams_in_order(units: &[Vec<Vec<Range<usize>>>], alpha: usize) -> bool {
    let mut next = 0;
    alpha == 1
        && sink_order(units).iter().all(|&(l, u)| {
            units[l][u].iter().all(|w| {
                let ok = w.start == next;
                next = w.end;
                ok
            })
        })
}

/// Where a structured repair takes each term's raw reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TermSource {
    /// The lane's input of this position.
    Input(usize),
    /// The sink's own helper chunk.
    Local,
}

/// Per term, which of `inputs` (or the sink's own chunk, term `local`) brings its raw
/// reads, when each term comes raw exactly once; `None` when any input is a partial sum.
fn raw_sources(g: &RepairGraph, inputs: &[VertexId], local: Option<usize>) -> Option<Vec<TermSource>> {
    let mut src = vec![None; g.equation.terms.len()];
    for (j, &i) in inputs.iter().enumerate() {
        let t = g.vertex(i).local.filter(|_| g.sends_raw(i))?;
        if src.get_mut(t)?.replace(TermSource::Input(j)).is_some() {
            return None;
        }
    }
    if let Some(t) = local {
        if src.get_mut(t)?.replace(TermSource::Local).is_some() {
            return None;
        }
    }
    src.into_iter().collect()
}

/// One unit rebuilt by the structured repair: every input's unit, and the sink's own
/// chunk's raw reads when it is a helper.
async fn structured_unit(
    s: &StructuredRepair,
    sources: &[TermSource],
    inputs: &mut [(InputStream, Option<RawInput>)],
    local: Option<&LocalTerm>,
    windows: &[Range<usize>],
    size: usize,
) -> Result<Vec<u8>, WireError> {
    let mut datas = Vec::with_capacity(inputs.len());
    for (rx, _) in inputs.iter_mut() {
        datas.push(rx.next_unit().await?);
    }
    let own = match local {
        Some(l) if sources.contains(&TermSource::Local) => {
            let r = l.raw(windows)?;
            crate::disk_emulation::settle().await;
            Some(r)
        }
        _ => None,
    };
    let raw: Vec<&[u8]> = sources
        .iter()
        .map(|s| match *s {
            TermSource::Input(j) => datas[j].as_slice(),
            TermSource::Local => own.as_deref().unwrap_or_default(),
        })
        .collect();
    let mut acc = crate::pool::zeroed(size);
    s.rebuild(windows, &raw, &mut acc)?;
    for d in datas.into_iter().chain(own) {
        crate::pool::give(d);
    }
    Ok(acc)
}

/// Runs a sink: pulls every input, adds each unit per lane, places the windows, and returns
/// the rebuilt chunk. Used by a node (full-node repair) and by a reader (degraded read).
pub async fn run_sink(
    a: &Job,
    units: &[Vec<Vec<Range<usize>>>],
    local: Option<&LocalTerm>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
) -> Result<Vec<u8>, WireError> {
    let mut out = vec![0u8; a.chunk_len as usize];
    sink_units(a, units, &|_| Opening::Task(None), local, shaper, counters, io_timeout, SinkOutput::Buffer(&mut out)).await?;
    Ok(out)
}

/// The sink's work; `opening` says how each input is read (at which timeslot gate it waits, if any).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn sink_units(
    a: &Job,
    units: &[Vec<Vec<Range<usize>>>],
    opening: &(dyn Fn(VertexId) -> Opening + Sync),
    local: Option<&LocalTerm>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
    mut out: SinkOutput<'_>,
) -> Result<(), WireError> {
    let g = &a.graph;
    let sink = g.vertex(g.sink);
    let alpha = g.equation.sub_chunks;
    let sub = a.chunk_len as usize / alpha;
    let sizes: Vec<Vec<usize>> = units.iter().map(|lane| unit_sizes(lane, alpha)).collect();
    let mut by_lane: Vec<Vec<(InputStream, Option<RawInput>)>> = (0..g.lanes).map(|_| Vec::new()).collect();
    let mut lane_inputs: Vec<Vec<VertexId>> = vec![Vec::new(); g.lanes];
    for &i in &sink.inputs {
        let lane = g.vertex(i).lane;
        let sizes = unit_sizes(&units[lane], g.payload_width(i));
        let stream = crate::input::open(a, i, sizes, shaper.clone(), counters.clone(), io_timeout, opening(i));
        by_lane[lane].push((stream, RawInput::of(g, i)));
        lane_inputs[lane].push(i);
    }
    // Where every term arrives raw (a Clay star), the code's structured repair.
    let structured = StructuredRepair::of(&g.equation);
    let sources: Vec<Option<Vec<TermSource>>> =
        lane_inputs.iter().map(|ids| structured.as_ref().and_then(|_| raw_sources(g, ids, local.and(sink.local)))).collect();
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut batched = 0;
    for (lane, u) in sink_order(units) {
        let windows = &units[lane][u];
        let mut acc = match (&structured, &sources[lane]) {
            (Some(s), Some(src)) => {
                let acc = structured_unit(s, src, &mut by_lane[lane], local, windows, sizes[lane][u]).await?;
                counters.structured.fetch_add(acc.len() as u64, std::sync::atomic::Ordering::Relaxed);
                acc
            }
            _ => sum_inputs(&mut by_lane[lane], windows, alpha, sizes[lane][u], None).await?,
        };
        let used_local = sources[lane].as_ref().is_some_and(|s| s.contains(&TermSource::Local));
        if let Some(l) = local.filter(|_| !used_local) {
            l.add(windows, alpha, &mut acc)?;
            crate::disk_emulation::settle().await;
        }
        match &mut out {
            SinkOutput::Stream(tx) => {
                batched += acc.len();
                batch.push(acc);
                if batched >= WRITE_BATCH {
                    tx.send(std::mem::take(&mut batch)).await.map_err(|_| WireError::internal("the chunk writer stopped"))?;
                    batched = 0;
                }
            }
            SinkOutput::Buffer(out) => {
                let mut pos = 0;
                for w in windows {
                    let n = w.len();
                    for s in 0..alpha {
                        out[s * sub + w.start..s * sub + w.end].copy_from_slice(&acc[pos..pos + n]);
                        pos += n;
                    }
                }
                crate::pool::give(acc);
            }
        }
    }
    if let (SinkOutput::Stream(tx), false) = (&out, batch.is_empty()) {
        tx.send(batch).await.map_err(|_| WireError::internal("the chunk writer stopped"))?;
    }
    Ok(())
}

impl Executor {
    /// Rebuilds the chunk this node stores (a full-node repair's sink) and makes it durable.
    pub(crate) async fn store_sink(&self, run: &Run) -> Result<u32, WireError> {
        let a = &run.assignment;
        let spec =
            a.store.as_ref().ok_or_else(|| WireError::bad_request("the sink is on this node but the plan says nothing about storing"))?;
        self.check_space(a.chunk_len)?;
        let local = match a.graph.vertex(a.graph.sink).local {
            Some(t) => Some(LocalTerm::open(&self.store, a, t, self.counters.clone(), &run.caches, &self.shared_reads, self.node)?),
            None => None,
        };
        crate::disk_emulation::settle().await;
        let (store, chunk, crc, bucket) = (self.store.clone(), spec.chunk.clone(), (!spec.new_parity).then_some(spec.crc32c), spec.bucket);
        // A rebuilt Clay chunk is checksummed per sub-chunk, as its first copy was.
        let block = crate::store::block_for(a.chunk_len, a.graph.equation.sub_chunks as u32);
        if !streams_in_order(&run.units, a.graph.equation.sub_chunks) {
            let opening = |i| Self::input_opening(run, self.node, i);
            let mut data = vec![0u8; a.chunk_len as usize];
            let out = SinkOutput::Buffer(&mut data);
            sink_units(a, &run.units, &opening, local.as_ref(), self.shaper.clone(), self.counters.clone(), self.io_timeout, out).await?;
            // Writing, fsync and rename block: off the async runtime. The chunk counts as
            // repaired only once it is durable (the caller waits for this).
            let counters = self.counters.clone();
            return tokio::task::spawn_blocking(move || {
                let mut w = store.writer_in(&chunk, bucket)?.with_block(block);
                w.write(&data)?;
                let crc = w.finish(crc)?;
                counters.written.fetch_add(data.len() as u64, Ordering::Relaxed);
                Ok::<u32, crate::store::StoreError>(crc)
            })
            .await
            .map_err(|e| WireError::internal(e.to_string()))?
            .map_err(WireError::from);
        }
        // Units come in chunk order: a writer thread appends each as it is rebuilt, so the
        // file is written while the rest still arrives and no chunk-sized buffer is held.
        // The chunk is renamed into place, durable, only once every byte is in and its
        // checksum matches; an early end leaves nothing (the temporary file is removed).
        let len = a.chunk_len;
        let (tx, mut rx) = mpsc::channel::<Vec<Vec<u8>>>(2);
        let written = run.written.clone();
        let counters = self.counters.clone();
        let writer = tokio::task::spawn_blocking(move || -> Result<u32, WriterError> {
            let chunk_name = chunk.clone();
            let failed = |e: crate::store::StoreError| WriterError::Failed(e.into());
            let mut w = store.writer_in(&chunk, bucket).map_err(failed)?.with_block(block);
            while let Some(batch) = rx.blocking_recv() {
                for buf in batch {
                    w.write(&buf).map_err(failed)?;
                    written.fetch_add(buf.len() as u64, Ordering::Relaxed);
                    crate::pool::give(buf);
                }
            }
            if w.len() != len {
                return Err(WriterError::EndedEarly(WireError::internal(format!(
                    "the rebuilt chunk ended after {} of {len} bytes",
                    w.len()
                ))));
            }
            let t = std::time::Instant::now();
            let crc = w.finish(crc).map_err(failed)?;
            tracing::debug!(chunk = %chunk_name, ms = t.elapsed().as_secs_f64() * 1e3, "rebuilt chunk synced and renamed");
            counters.written.fetch_add(len, Ordering::Relaxed);
            Ok(crc)
        });
        let out = SinkOutput::Stream(&tx);
        let opening = |i| Self::input_opening(run, self.node, i);
        let r = sink_units(a, &run.units, &opening, local.as_ref(), self.shaper.clone(), self.counters.clone(), self.io_timeout, out).await;
        tracing::debug!(node = self.node, repair = a.repair, "sink has every unit");
        drop(tx);
        let written = writer.await.map_err(|e| WireError::internal(e.to_string()))?;
        match (r, written) {
            // The writer's own error says why it stopped taking units.
            (_, Err(WriterError::Failed(e))) => Err(e),
            (Err(e), _) => Err(e),
            (Ok(()), Err(WriterError::EndedEarly(e))) => Err(e),
            (Ok(()), Ok(crc)) => Ok(crc),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kintsugi_codes::Code;
    use kintsugi_plan::{shapes, RepairTask, Shape};

    /// Which input brings each term raw: every term exactly once, the sink's own chunk
    /// included; none when a term comes twice or an input is a partial sum.
    #[test]
    fn raw_sources_cover_every_term_once() {
        let code = kintsugi_codes::ClayCode::new(4, 2, 5).unwrap();
        let eq = code.repair_equation(0, &[1, 2, 3, 4, 5]).unwrap();
        let task = RepairTask { equation: eq, helper_nodes: vec![1, 2, 3, 4, 5], destination: 9 };
        let star = shapes::build(Shape::Cr, &task).unwrap();
        let ids = star.vertex(star.sink).inputs.clone();
        let all = raw_sources(&star, &ids, None).expect("a star brings every term raw");
        assert_eq!(all.len(), 5);
        assert!(all.iter().all(|s| matches!(s, TermSource::Input(_))));
        // The sink holding the first input's term itself.
        let t = star.vertex(ids[0]).local.unwrap();
        let with_local = raw_sources(&star, &ids[1..], Some(t)).unwrap();
        assert_eq!(with_local[t], TermSource::Local);
        assert!(raw_sources(&star, &ids, Some(t)).is_none(), "a term twice");
        assert!(raw_sources(&star, &ids[1..], None).is_none(), "a term missing");
        // A chain's sink receives a partial sum.
        let chain = shapes::build(Shape::Ecpipe, &task).unwrap();
        assert!(raw_sources(&chain, &chain.vertex(chain.sink).inputs.clone(), None).is_none());
    }
}
