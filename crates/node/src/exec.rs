//! The network executor: runs this node's vertices of a repair graph over TCP.
//!
//! Edges are *pulled*: a vertex connects to the node of each of its inputs and asks for that
//! vertex's output stream (`Pull`), so a reader behind a firewall can be a sink. A vertex
//! produces unit u (a slice, or its whole lane for store-and-forward graphs) as soon as unit
//! u has arrived from every input: read the helper range from disk (checksums verified),
//! multiply, add the inputs, hand it to whoever pulls. Bounded channels give backpressure
//! from the slowest link back to the disks. When a graph carries send slots (ECPipe cyclic),
//! this node sends its units strictly in slot order.

use crate::shaper::Shaper;
use crate::store::{ChunkStore, ReadCache};
use kintsugi_codes::TermMatrix;
use kintsugi_gf::mul_add;
use kintsugi_plan::{NodeId, RepairGraph, VertexId};
use kintsugi_proto::{recv, send, Assignment, NodeRequest, NodeResponse, READER};
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};

/// Largest chunk a repair may rebuild (the coordinator allows 1 GiB chunks).
pub const MAX_CHUNK: u64 = 1 << 30;
/// Units (slices) a single repair may have at most: bounds memory for hostile plans.
pub const MAX_UNITS: usize = 1 << 22;
/// Units buffered between a vertex and whoever pulls its output.
const CHANNEL_DEPTH: usize = 8;
/// Largest data frame on the wire. A unit (a slice, or a whole lane for store-and-forward
/// graphs) larger than this travels as several frames, so the sender's and the receiver's
/// links are busy at the same time instead of one after the other.
pub const WIRE_PIECE: usize = 64 * 1024;

/// Traffic counters of a node.
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    /// Helper bytes read from the local store.
    pub read: AtomicU64,
    pub active: AtomicU64,
}

/// One unit of a vertex's output and its send slot, if the graph has a schedule.
pub struct Unit {
    pub bytes: Vec<u8>,
    pub slot: Option<u64>,
}

type UnitResult = Result<Unit, String>;
pub use crate::input::{open_input, InputStream};

/// Per repair: this node's sends in slot order. If any of the node's vertices fails, the
/// gate fails every waiter, so an error travels on instead of leaving the others waiting
/// for a slot that will never be sent. A finished slot wakes only the waiter of the next
/// one: with one sender per lane (ECPipe cyclic: k-1 of them on a node) waking them all
/// for every slice cost more CPU than the slices' bytes.
pub struct SlotGate {
    state: Mutex<GateState>,
    failed: std::sync::atomic::AtomicBool,
}

struct GateState {
    pending: BTreeSet<u64>,
    waiters: HashMap<u64, Vec<Arc<Notify>>>,
}

impl SlotGate {
    fn new(pending: BTreeSet<u64>) -> Self {
        SlotGate { state: Mutex::new(GateState { pending, waiters: HashMap::new() }), failed: Default::default() }
    }

    /// Waits until `slot` is the earliest unsent slot of this node.
    pub async fn turn(&self, slot: u64) -> Result<(), String> {
        loop {
            let wake = {
                let mut st = self.state.lock().expect("gate lock");
                if self.failed.load(Ordering::Acquire) {
                    return Err("another part of this repair failed on this node".into());
                }
                if st.pending.first() == Some(&slot) {
                    return Ok(());
                }
                let n = Arc::new(Notify::new());
                st.waiters.entry(slot).or_default().push(n.clone());
                n
            };
            // notify_one keeps a permit when it comes before this await: no lost wake-up.
            wake.notified().await;
        }
    }

    pub fn done(&self, slot: u64) {
        let mut st = self.state.lock().expect("gate lock");
        st.pending.remove(&slot);
        if let Some(next) = st.pending.first().copied() {
            for w in st.waiters.remove(&next).unwrap_or_default() {
                w.notify_one();
            }
        }
    }

    pub fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        let mut st = self.state.lock().expect("gate lock");
        for (_, ws) in st.waiters.drain() {
            for w in ws {
                w.notify_one();
            }
        }
    }
}

/// A repair registered on this node.
pub struct Run {
    pub assignment: Assignment,
    units: Vec<Vec<Vec<Range<usize>>>>,
    outputs: Mutex<HashMap<u32, mpsc::Receiver<UnitResult>>>,
    pub gate: Option<SlotGate>,
    /// The sink's result. Set with `send_replace`: a plain `send` is dropped while nobody
    /// waits yet, and a sink that finished before `WaitRepair` arrived would be waited for
    /// until the time limit.
    done: watch::Sender<Option<Result<u32, String>>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Read caches of the helper chunks this node reads, by term.
    caches: Mutex<HashMap<usize, Arc<Mutex<ReadCache>>>>,
}

/// The repairs a node is running.
pub struct Executor {
    pub node: NodeId,
    pub store: Arc<ChunkStore>,
    /// Space the node may fill (None: its file system's).
    pub capacity_bytes: Option<u64>,
    pub shaper: Arc<Shaper>,
    pub counters: Arc<Counters>,
    pub io_timeout: Duration,
    runs: Mutex<HashMap<u64, Arc<Run>>>,
    registered: Notify,
}

impl Executor {
    pub fn new(node: NodeId, store: Arc<ChunkStore>, shaper: Arc<Shaper>, io_timeout: Duration) -> Self {
        Executor {
            node,
            store,
            capacity_bytes: None,
            shaper,
            counters: Arc::new(Counters::default()),
            io_timeout,
            runs: Mutex::new(HashMap::new()),
            registered: Notify::new(),
        }
    }

    /// The space this node may fill: its configured capacity, or what its file system
    /// holds (`used` plus what is still free there).
    pub fn capacity(&self, used: u64) -> u64 {
        let fs = self.store.fs_free().map_or(u64::MAX, |free| used.saturating_add(free));
        self.capacity_bytes.map_or(fs, |c| c.min(fs))
    }

    /// Refuses a new chunk of `len` bytes that would not fit.
    pub fn check_space(&self, len: u64) -> Result<(), String> {
        let used = self.store.usage().1;
        let cap = self.capacity(used);
        if used.saturating_add(len) > cap {
            return Err(format!("node {} is full: {used} of {cap} bytes used, a chunk of {len} does not fit", self.node));
        }
        Ok(())
    }

    /// Registers a repair and starts this node's vertices.
    pub fn start(self: &Arc<Self>, a: Assignment) -> Result<(), String> {
        let units = check_assignment(&a)?;
        let g = &a.graph;
        if !g.vertices.iter().any(|v| v.node == self.node) {
            return Err(format!("node {} holds no vertex of repair {}", self.node, a.repair));
        }
        let mut pending = BTreeSet::new();
        for (v, rule) in g.slots.iter().enumerate() {
            if let Some(rule) = rule {
                if g.vertices[v].node == self.node {
                    for u in 0..units[g.vertices[v].lane].len() as u64 {
                        pending.insert(rule.slot(u));
                    }
                }
            }
        }
        let gate = (!pending.is_empty()).then(|| SlotGate::new(pending));
        let (done, _) = watch::channel(None);
        let run = Arc::new(Run {
            assignment: a,
            units,
            outputs: Mutex::new(HashMap::new()),
            gate,
            done,
            tasks: Mutex::new(Vec::new()),
            caches: Mutex::default(),
        });
        // Every output queue exists before the run is visible to `Pull`s.
        let mut senders = HashMap::new();
        for (i, vx) in run.assignment.graph.vertices.iter().enumerate() {
            if vx.node == self.node && VertexId(i as u32) != run.assignment.graph.sink {
                let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
                run.outputs.lock().expect("outputs lock").insert(i as u32, rx);
                senders.insert(i as u32, tx);
            }
        }
        {
            let mut runs = self.runs.lock().expect("runs lock");
            if runs.contains_key(&run.assignment.repair) {
                return Err(format!("repair {} is already running here", run.assignment.repair));
            }
            runs.insert(run.assignment.repair, run.clone());
        }
        self.registered.notify_waiters();
        tracing::debug!(node = self.node, repair = run.assignment.repair, "repair registered");
        self.counters.active.fetch_add(1, Ordering::Relaxed);
        let g = &run.assignment.graph;
        let mut handles = Vec::new();
        for (i, vx) in g.vertices.iter().enumerate() {
            if vx.node != self.node {
                continue;
            }
            let v = VertexId(i as u32);
            let (exec, run2) = (self.clone(), run.clone());
            if v == g.sink {
                handles.push(tokio::spawn(async move {
                    let result = exec.store_sink(&run2).await;
                    tracing::debug!(node = exec.node, repair = run2.assignment.repair, ?result, "sink finished");
                    run2.done.send_replace(Some(result));
                }));
            } else {
                let tx = senders.remove(&(i as u32)).expect("a queue per vertex");
                handles.push(tokio::spawn(async move {
                    let r = exec.vertex(&run2, v, &tx).await;
                    tracing::debug!(node = exec.node, repair = run2.assignment.repair, vertex = v.0, ?r, "vertex finished");
                    if let Err(e) = r {
                        if let Some(gate) = &run2.gate {
                            gate.fail();
                        }
                        let _ = tx.send(Err(e)).await;
                    }
                }));
            }
        }
        // Forget the repair once its tasks are done, or abort it when it outlives its time.
        let limit = self.repair_time_limit(&run.assignment);
        let (exec, run2) = (self.clone(), run.clone());
        let aborts: Vec<_> = handles.iter().map(|h| h.abort_handle()).collect();
        run.tasks.lock().expect("tasks lock").extend(aborts);
        tokio::spawn(async move {
            let all = futures_join(handles);
            if tokio::time::timeout(limit, all).await.is_err() {
                for h in run2.tasks.lock().expect("tasks lock").iter() {
                    h.abort();
                }
                run2.done.send_replace(Some(Err(format!("repair {} timed out after {limit:?}", run2.assignment.repair))));
            }
            // Outputs may still be pulled for a while after the vertices finish producing.
            tokio::time::sleep(exec.io_timeout).await;
            exec.runs.lock().expect("runs lock").remove(&run2.assignment.repair);
            exec.counters.active.fetch_sub(1, Ordering::Relaxed);
        });
        Ok(())
    }

    /// Generous: ten times the time the whole chunk needs at 1 MB/s, at least a minute.
    fn repair_time_limit(&self, a: &Assignment) -> Duration {
        Duration::from_secs_f64((a.chunk_len as f64 / 1e6 * 10.0).max(60.0))
    }

    /// The output of a vertex, once (waits for the repair to be registered).
    pub async fn take_output(&self, repair: u64, vertex: u32) -> Result<(Arc<Run>, mpsc::Receiver<UnitResult>), String> {
        let deadline = tokio::time::Instant::now() + self.io_timeout;
        loop {
            let notified = self.registered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(run) = self.runs.lock().expect("runs lock").get(&repair).cloned() {
                let rx = run.outputs.lock().expect("outputs lock").remove(&vertex);
                return match rx {
                    Some(rx) => Ok((run, rx)),
                    None => Err(format!("vertex {vertex} of repair {repair} is not on node {} or was already pulled", self.node)),
                };
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(format!("repair {repair} is not registered on node {}", self.node));
            }
        }
    }

    /// Waits for this node's sink of `repair` to store the chunk.
    pub async fn wait(&self, repair: u64, limit: Duration) -> Result<u32, String> {
        let run = self
            .runs
            .lock()
            .expect("runs lock")
            .get(&repair)
            .cloned()
            .ok_or(format!("repair {repair} is not known on node {}", self.node))?;
        let mut rx = run.done.subscribe();
        let r = tokio::time::timeout(limit, rx.wait_for(|d| d.is_some())).await;
        match r {
            Ok(Ok(v)) => v.clone().expect("waited for some"),
            Ok(Err(_)) => Err("repair ended without a result".into()),
            Err(_) => Err(format!("repair {repair} did not finish within {limit:?}")),
        }
    }

    /// Aborts every running repair (the node is stopping).
    pub fn abort_all(&self) {
        for run in self.runs.lock().expect("runs lock").values() {
            for h in run.tasks.lock().expect("tasks lock").iter() {
                h.abort();
            }
        }
    }

    async fn vertex(&self, run: &Run, v: VertexId, tx: &mpsc::Sender<UnitResult>) -> Result<(), String> {
        let a = &run.assignment;
        let g = &a.graph;
        let vx = g.vertex(v);
        let units = &run.units[vx.lane];
        let alpha = g.equation.sub_chunks;
        let sizes: Vec<usize> = units.iter().map(|ws| alpha * ws.iter().map(|w| w.len()).sum::<usize>()).collect();
        let mut inputs: Vec<(InputStream, Option<RawInput>)> = vx
            .inputs
            .iter()
            .map(|&i| {
                let raw = RawInput::of(g, i);
                let sizes = unit_sizes(units, g.payload_width(i));
                (open_input(a, i, sizes, self.shaper.clone(), self.counters.clone(), self.io_timeout), raw)
            })
            .collect();
        let local = match vx.local {
            Some(t) => Some(LocalTerm::open(&self.store, a, t, self.counters.clone(), &run.caches, self.node)?),
            None => None,
        };
        let raw_out = g.sends_raw(v);
        let rule = g.slots.get(v.index()).copied().flatten();
        if !g.pipelined && rule.is_none() {
            let widths: Vec<usize> = vx.inputs.iter().map(|&i| g.payload_width(i)).collect();
            return store_and_forward(units, alpha, &mut inputs, &widths, local.as_ref(), raw_out, tx).await;
        }
        let mut held = Vec::new();
        for (u, windows) in units.iter().enumerate() {
            let mut acc = match local.as_ref() {
                Some(l) if raw_out => Some(l.raw(windows)?),
                _ => None,
            };
            for (rx, raw) in inputs.iter_mut() {
                let data = rx.recv().await.ok_or("an input stream ended early")??;
                match (&mut acc, raw) {
                    // The first summed input's buffer becomes the sum: no zeroing, no pass.
                    (None, None) => acc = Some(data),
                    (acc, raw) => {
                        let acc = acc.get_or_insert_with(|| crate::pool::zeroed(sizes[u]));
                        add_input(raw.as_ref(), windows, alpha, &data, acc)?;
                        crate::pool::give(data);
                    }
                }
            }
            let mut acc = acc.unwrap_or_else(|| crate::pool::zeroed(sizes[u]));
            if let Some(l) = local.as_ref().filter(|_| !raw_out) {
                l.add(windows, alpha, &mut acc)?;
            }
            let unit = Unit { bytes: acc, slot: rule.map(|r| r.slot(u as u64)) };
            if g.pipelined {
                tx.send(Ok(unit)).await.map_err(|_| "nobody pulled the output".to_string())?;
            } else {
                held.push(unit);
            }
        }
        for unit in held {
            tx.send(Ok(unit)).await.map_err(|_| "nobody pulled the output".to_string())?;
        }
        Ok(())
    }

    async fn store_sink(&self, run: &Run) -> Result<u32, String> {
        let a = &run.assignment;
        let spec = a.store.as_ref().ok_or("the sink is on this node but the plan says nothing about storing")?;
        self.check_space(a.chunk_len)?;
        let local = match a.graph.vertex(a.graph.sink).local {
            Some(t) => Some(LocalTerm::open(&self.store, a, t, self.counters.clone(), &run.caches, self.node)?),
            None => None,
        };
        let (store, chunk, crc) = (self.store.clone(), spec.chunk.clone(), spec.crc32c);
        if !streams_in_order(&run.units, a.graph.equation.sub_chunks) {
            let data = run_sink(a, &run.units, local.as_ref(), self.shaper.clone(), self.counters.clone(), self.io_timeout).await?;
            // Writing, fsync and rename block: off the async runtime. The chunk counts as
            // repaired only once it is durable (the caller waits for this).
            return tokio::task::spawn_blocking(move || {
                let mut w = store.writer(&chunk)?;
                w.write(&data)?;
                w.finish(Some(crc))
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string());
        }
        // Units come in chunk order: a writer thread appends each as it is rebuilt, so the
        // file is written while the rest still arrives and no chunk-sized buffer is held.
        // The chunk is renamed into place, durable, only once every byte is in and its
        // checksum matches; an early end leaves nothing (the temporary file is removed).
        let len = a.chunk_len;
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(CHANNEL_DEPTH);
        let writer = tokio::task::spawn_blocking(move || -> Result<u32, String> {
            let mut w = store.writer(&chunk).map_err(|e| e.to_string())?;
            while let Some(buf) = rx.blocking_recv() {
                w.write(&buf).map_err(|e| e.to_string())?;
                crate::pool::give(buf);
            }
            if w.len() != len {
                return Err(format!("the rebuilt chunk ended after {} of {len} bytes", w.len()));
            }
            w.finish(Some(crc)).map_err(|e| e.to_string())
        });
        let out = SinkOutput::Stream(&tx);
        let r = sink_units(a, &run.units, local.as_ref(), self.shaper.clone(), self.counters.clone(), self.io_timeout, out).await;
        drop(tx);
        let written = writer.await.map_err(|e| e.to_string())?;
        match r {
            // The writer's own error says why it stopped taking units.
            Err(_) if written.is_err() && tx_closed_early(&written) => written,
            Err(e) => Err(e),
            Ok(()) => written,
        }
    }
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        let _ = h.await;
    }
}

/// Checks a plan from the network before anything is allocated for it.
pub fn check_assignment(a: &Assignment) -> Result<Vec<Vec<Vec<Range<usize>>>>, String> {
    let g: &RepairGraph = &a.graph;
    g.validate().map_err(|e| e.to_string())?;
    if a.term_chunks.len() != g.equation.terms.len() {
        return Err(format!("{} chunk names for {} equation terms", a.term_chunks.len(), g.equation.terms.len()));
    }
    if a.chunk_len == 0 || a.slice_len == 0 || a.chunk_len > MAX_CHUNK {
        return Err(format!(
            "chunk length {} and slice length {} must be positive (and the chunk at most {MAX_CHUNK} bytes)",
            a.chunk_len, a.slice_len
        ));
    }
    for v in &g.vertices {
        if v.node != READER && !a.peers.contains_key(&v.node) {
            return Err(format!("the plan has no address for node {}", v.node));
        }
    }
    let sub = kintsugi_codes::sub_len(g.equation.sub_chunks, a.chunk_len as usize).map_err(|e| e.to_string())?;
    let units = sub.div_ceil(a.slice_len as usize);
    if units > MAX_UNITS {
        return Err(format!("{units} slices per chunk exceed the limit of {MAX_UNITS}; use larger slices"));
    }
    g.lane_units(a.chunk_len as usize, a.slice_len as usize).map_err(|e| e.to_string())
}

/// Bytes of each unit when every window carries `width` sub-chunk windows.
fn unit_sizes(units: &[Vec<Range<usize>>], width: usize) -> Vec<usize> {
    units.iter().map(|ws| width * ws.iter().map(|w| w.len()).sum::<usize>()).collect()
}

/// An input that sends raw reads (a Clay helper): its coefficients, applied here.
pub struct RawInput {
    matrix: TermMatrix,
    reads: usize,
}

impl RawInput {
    fn of(g: &RepairGraph, v: VertexId) -> Option<Self> {
        let t = g.vertex(v).local.filter(|_| g.sends_raw(v))?;
        let term = &g.equation.terms[t];
        Some(RawInput { matrix: term.matrix(g.equation.sub_chunks), reads: term.read_count() })
    }
}

/// Adds one input's unit into `acc` (alpha windows per unit window): summed as it is, or
/// multiplied by the sender's coefficients when it carries raw reads.
fn add_input(raw: Option<&RawInput>, windows: &[Range<usize>], alpha: usize, data: &[u8], acc: &mut [u8]) -> Result<(), String> {
    let Some(raw) = raw else {
        mul_add(1, data, acc);
        return Ok(());
    };
    let (mut pos_in, mut pos_out) = (0, 0);
    for w in windows {
        let n = w.len();
        if n > 0 {
            let srcs: Vec<&[u8]> = data[pos_in..pos_in + raw.reads * n].chunks(n).collect();
            let mut dsts: Vec<&mut [u8]> = acc[pos_out..pos_out + alpha * n].chunks_mut(n).collect();
            raw.matrix.apply_add(&srcs, &mut dsts);
        }
        pos_in += raw.reads * n;
        pos_out += alpha * n;
    }
    Ok(())
}

/// Bytes of verified read-ahead a helper keeps per term, shared among its sub-chunk reads.
const READ_AHEAD: usize = 512 * 1024;

/// A helper chunk on this node and its term of the equation.
pub struct LocalTerm {
    term: kintsugi_codes::HelperTerm,
    matrix: TermMatrix,
    sub: usize,
    counters: Arc<Counters>,
    /// Verified read windows, shared by every vertex of this node reading the same term.
    cache: Arc<Mutex<ReadCache>>,
}

impl LocalTerm {
    /// Opens term `t` for one vertex; `shared` holds the caches of the run's terms on this
    /// node, so lanes reading the same chunk read and verify each block once.
    pub fn open(
        store: &ChunkStore,
        a: &Assignment,
        t: usize,
        counters: Arc<Counters>,
        shared: &Mutex<HashMap<usize, Arc<Mutex<ReadCache>>>>,
        node: NodeId,
    ) -> Result<Self, String> {
        let term = a.graph.equation.terms[t].clone();
        let alpha = a.graph.equation.sub_chunks;
        let reads = term.read_count().max(1);
        let cache = match shared.lock().expect("cache lock").entry(t) {
            std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let reader = store.reader(&a.term_chunks[t]).map_err(|e| e.to_string())?;
                if reader.len() != a.chunk_len {
                    return Err(format!("chunk {} is {} bytes, the plan says {}", a.term_chunks[t], reader.len(), a.chunk_len));
                }
                // A window per read stream per lane here, one spare; READ_AHEAD in all.
                let lanes = a.graph.vertices.iter().filter(|v| v.node == node && v.local == Some(t)).count().max(1);
                let count = (reads * lanes).min(64) + 1;
                let c = Arc::new(Mutex::new(ReadCache::new(reader, count, READ_AHEAD / (reads * lanes))));
                e.insert(c.clone());
                c
            }
        };
        Ok(LocalTerm { matrix: term.matrix(alpha), term, sub: a.chunk_len as usize / alpha, counters, cache })
    }

    /// Offsets of this term's sub-chunk reads for window `w`.
    fn offsets(&self, w: &Range<usize>) -> Vec<u64> {
        self.term.reads.iter().flat_map(|r| r.clone()).map(|r| (r * self.sub + w.start) as u64).collect()
    }

    /// The unit's windows of the sub-chunks this term reads, unmultiplied, window by
    /// window (what a raw sender sends).
    fn raw(&self, windows: &[Range<usize>]) -> Result<Vec<u8>, String> {
        let mut out = crate::pool::take(self.term.read_count() * windows.iter().map(|w| w.len()).sum::<usize>());
        let mut cache = self.cache.lock().expect("cache lock");
        for w in windows {
            for off in self.offsets(w) {
                cache.fetch(off, w.len()).map_err(|e| e.to_string())?;
                out.extend_from_slice(cache.peek(off, w.len()));
            }
        }
        self.counters.read.fetch_add(out.len() as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// Adds this term's contribution for the unit's windows into `acc` (payload layout of
    /// `RepairGraph::lane_units`), multiplying straight out of the verified read windows.
    fn add(&self, windows: &[Range<usize>], alpha: usize, acc: &mut [u8]) -> Result<(), String> {
        let mut pos = 0;
        let mut cache = self.cache.lock().expect("cache lock");
        for w in windows {
            let n = w.len();
            if n > 0 {
                let offsets = self.offsets(w);
                // Fetch every range first (the cache has a window more than there are
                // reads), then borrow them all at once for the kernel.
                for &off in &offsets {
                    cache.fetch(off, n).map_err(|e| e.to_string())?;
                }
                let srcs: Vec<&[u8]> = offsets.iter().map(|&off| cache.peek(off, n)).collect();
                let mut dsts: Vec<&mut [u8]> = acc[pos..pos + alpha * n].chunks_mut(n).take(alpha).collect();
                self.matrix.apply_add(&srcs, &mut dsts);
                self.counters.read.fetch_add((n * offsets.len()) as u64, Ordering::Relaxed);
            }
            pos += alpha * n;
        }
        Ok(())
    }
}

/// Output bytes a store-and-forward vertex computes and sends at a time.
const FORWARD_GROUP: usize = 1 << 20;

/// A store-and-forward vertex (PPR): each unit (its whole lane) from every input first, as
/// the published method's timesteps require; then the output computed a group of windows
/// at a time and each group sent as soon as it is ready, so sending starts after the
/// first megabyte is computed instead of after the whole lane.
async fn store_and_forward(
    units: &[Vec<Range<usize>>],
    alpha: usize,
    inputs: &mut [(InputStream, Option<RawInput>)],
    widths: &[usize],
    local: Option<&LocalTerm>,
    raw_out: bool,
    tx: &mpsc::Sender<UnitResult>,
) -> Result<(), String> {
    for windows in units {
        let mut datas = Vec::with_capacity(inputs.len());
        for (rx, _) in inputs.iter_mut() {
            datas.push(rx.recv().await.ok_or("an input stream ended early")??);
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
                _ => {
                    let mut acc = crate::pool::zeroed(alpha * span);
                    for (j, ((_, raw), data)) in inputs.iter().zip(&datas).enumerate() {
                        let n = widths[j] * span;
                        let part = data.get(offs[j]..offs[j] + n).ok_or("an input unit is shorter than its windows")?;
                        add_input(raw.as_ref(), group, alpha, part, &mut acc)?;
                        offs[j] += n;
                    }
                    if let Some(l) = local {
                        l.add(group, alpha, &mut acc)?;
                    }
                    acc
                }
            };
            tx.send(Ok(Unit { bytes: acc, slot: None })).await.map_err(|_| "nobody pulled the output".to_string())?;
            start = end;
        }
    }
    Ok(())
}

/// A writer error other than the one an early end of the units causes.
fn tx_closed_early(written: &Result<u32, String>) -> bool {
    written.as_ref().is_err_and(|e| !e.starts_with("the rebuilt chunk ended after"))
}

/// Where a sink's rebuilt units go.
enum SinkOutput<'a> {
    /// Placed into the whole chunk in memory (a degraded read returns it).
    Buffer(&'a mut Vec<u8>),
    /// Passed on in chunk order (a full-node repair writing as it goes).
    Stream(&'a mpsc::Sender<Vec<u8>>),
}

/// The sink's units in the order it rebuilds them: by where their first window lies.
fn sink_order(units: &[Vec<Vec<Range<usize>>>]) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = (0..units.len()).flat_map(|l| (0..units[l].len()).map(move |u| (l, u))).collect();
    order.sort_by_key(|&(l, u)| units[l][u].first().map_or(0, |w| w.start));
    order
}

/// True when the sink's units, in its order, are the chunk's bytes in order: one sub-chunk
/// (a scalar code) and windows that follow each other.
fn streams_in_order(units: &[Vec<Vec<Range<usize>>>], alpha: usize) -> bool {
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

/// Runs a sink: pulls every input, adds each unit per lane, places the windows, and returns
/// the rebuilt chunk. Used by a node (full-node repair) and by a reader (degraded read).
pub async fn run_sink(
    a: &Assignment,
    units: &[Vec<Vec<Range<usize>>>],
    local: Option<&LocalTerm>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; a.chunk_len as usize];
    sink_units(a, units, local, shaper, counters, io_timeout, SinkOutput::Buffer(&mut out)).await?;
    Ok(out)
}

async fn sink_units(
    a: &Assignment,
    units: &[Vec<Vec<Range<usize>>>],
    local: Option<&LocalTerm>,
    shaper: Arc<Shaper>,
    counters: Arc<Counters>,
    io_timeout: Duration,
    mut out: SinkOutput<'_>,
) -> Result<(), String> {
    let g = &a.graph;
    let sink = g.vertex(g.sink);
    let alpha = g.equation.sub_chunks;
    let sub = a.chunk_len as usize / alpha;
    let sizes: Vec<Vec<usize>> = units.iter().map(|lane| unit_sizes(lane, alpha)).collect();
    let mut by_lane: Vec<Vec<(InputStream, Option<RawInput>)>> = (0..g.lanes).map(|_| Vec::new()).collect();
    for &i in &sink.inputs {
        let lane = g.vertex(i).lane;
        let stream = open_input(a, i, unit_sizes(&units[lane], g.payload_width(i)), shaper.clone(), counters.clone(), io_timeout);
        by_lane[lane].push((stream, RawInput::of(g, i)));
    }
    for (lane, u) in sink_order(units) {
        let windows = &units[lane][u];
        let mut acc: Option<Vec<u8>> = None;
        for (rx, raw) in by_lane[lane].iter_mut() {
            let data = rx.recv().await.ok_or("an input stream ended early")??;
            match (&mut acc, raw) {
                (None, None) => acc = Some(data),
                (acc, raw) => {
                    let acc = acc.get_or_insert_with(|| crate::pool::zeroed(sizes[lane][u]));
                    add_input(raw.as_ref(), windows, alpha, &data, acc)?;
                    crate::pool::give(data);
                }
            }
        }
        let mut acc = acc.unwrap_or_else(|| crate::pool::zeroed(sizes[lane][u]));
        if let Some(l) = local {
            l.add(windows, alpha, &mut acc)?;
        }
        match &mut out {
            SinkOutput::Stream(tx) => tx.send(acc).await.map_err(|_| "the chunk writer stopped".to_string())?,
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
    Ok(())
}

/// Reads a node's response to a request on an open connection.
pub async fn request(addr: &str, req: &NodeRequest, io_timeout: Duration) -> Result<NodeResponse, String> {
    let mut s = kintsugi_proto::auth::connect(addr, io_timeout).await?;
    send(&mut s, req).await.map_err(|e| format!("{addr}: {e}"))?;
    tokio::time::timeout(io_timeout, recv(&mut s))
        .await
        .map_err(|_| format!("{addr}: no answer within {io_timeout:?}"))?
        .map_err(|e| format!("{addr}: {e}"))
}
