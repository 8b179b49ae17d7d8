//! Per-repair state: which model a repair runs in, and the units each lane moves.

use super::*;

/// The mode a job runs in under `model`.
pub(super) fn job_mode(net: &Network, j: &Job, model: Model) -> JobMode {
    let g = &j.graph;
    // Clay's pipelines move sub-chunks of different widths per hop and lane, which one
    // fluid rate for the whole repair does not capture: on uneven links its ECPipe chains
    // came out up to 12% slower than slice by slice, and a scheduler-drawn tree 23%. They
    // run slice by slice. RS and LRC trees (ChameleonEC) agree with the slice model
    // (fluid_matches_slice covers them).
    let clay = g.equation.sub_chunks > 1;
    if model == Model::Slice || !g.pipelined || clay {
        return JobMode::Slice;
    }
    // A seek per slice read is a latency the fluid flow cannot carry: keep those slices.
    let seeks = g.vertices.iter().any(|v| {
        let n = &net.nodes[v.node as usize];
        v.local.is_some() && n.disk_read.is_some() && n.seek > 0.0
    });
    if seeks {
        JobMode::Slice
    } else if j.timeslots.iter().any(Option::is_some) {
        JobMode::Overlap
    } else {
        JobMode::Fluid
    }
}

impl JobState {
    pub(super) fn new(j: &Job, mode: JobMode) -> Result<Self> {
        let g = &j.graph;
        let lanes = g.lanes;
        let bad = |e: kintsugi_plan::PlanError| SimError::BadScenario(e.to_string());
        // Slice j of each sub-chunk travels in lane j mod lanes (RepairGraph::slices); only
        // lengths matter here, so count them rather than list 2048 ranges per repair.
        let sub = kintsugi_codes::sub_len(g.equation.sub_chunks, j.chunk_len).map_err(|e| SimError::BadScenario(e.to_string()))?;
        if j.slice_len == 0 {
            return Err(bad(kintsugi_plan::PlanError::Invalid("slice size must be at least 1 byte".into())));
        }
        let n_slices = sub.div_ceil(j.slice_len);
        let slice_window = j.slice_len.min(sub) as f64;
        let lane_total = |l: usize| -> u64 {
            if l >= n_slices {
                return 0;
            }
            let count = (n_slices - 1 - l) / lanes + 1;
            let short = if (n_slices - 1) % lanes == l { n_slices * j.slice_len - sub } else { 0 };
            (count * j.slice_len - short) as u64
        };
        // Bytes of each unit per lane: a slice, or the whole lane for store-and-forward graphs
        // (the very units the network executor moves). Fluid and overlapped jobs move each
        // lane as one unit too: only its total matters.
        let windows: Vec<Vec<u32>> = if mode == JobMode::Slice && g.pipelined {
            g.lane_units(j.chunk_len, j.slice_len)
                .map_err(bad)?
                .iter()
                .map(|lane| lane.iter().map(|ws| ws.iter().map(|w| w.len() as u32).sum()).collect())
                .collect()
        } else {
            (0..lanes).map(lane_total).map(|t| if t == 0 { Vec::new() } else { vec![t as u32] }).collect()
        };
        let nv = g.vertices.len();
        let mut sink_inputs = vec![Vec::new(); lanes];
        for &i in &g.vertex(g.sink).inputs {
            sink_inputs[g.vertex(i).lane].push(i);
        }
        let units_total = windows.iter().map(|w| w.len()).sum();
        let mut pending_slots: HashMap<NodeId, std::collections::BTreeSet<u64>> = HashMap::new();
        let mut node_vertices: HashMap<NodeId, Vec<u32>> = HashMap::new();
        // Slot rules order a node's slices across lanes (ECPipe cyclic); with whole-lane
        // units fair sharing stands in for that interleaving. A timeslot schedule across
        // repairs (RepairBoost) replaces them: obeying both can deadlock, a node's next
        // slice by rule waiting behind a gate that only a later slice can open.
        let gated = j.timeslots.iter().any(Option::is_some);
        let slot_rules = mode == JobMode::Slice && !gated;
        for (v, rule) in g.slots.iter().enumerate() {
            let Some(rule) = rule.filter(|_| slot_rules) else { continue };
            let vx = &g.vertices[v];
            node_vertices.entry(vx.node).or_default().push(v as u32);
            let set = pending_slots.entry(vx.node).or_default();
            for u in 0..windows[vx.lane].len() as u64 {
                set.insert(rule.slot(u));
            }
        }
        let overlap = mode == JobMode::Overlap;
        Ok(JobState {
            mode,
            slot_rules,
            gated,
            windows,
            slice_window,
            alpha: g.equation.sub_chunks as f64,
            width: (0..nv).map(|v| g.payload_width(VertexId(v as u32)) as f64).collect(),
            delivered: vec![0; nv],
            sending: vec![false; nv],
            parts_left: vec![0; nv],
            held: vec![false; nv],
            not_before: vec![0.0; nv],
            sent_at: vec![0.0; nv],
            last_send: vec![0.0; nv],
            read_done: vec![0; nv],
            reading: vec![false; nv],
            sink_next: vec![0; lanes],
            sink_inputs,
            write_queue: VecDeque::new(),
            writing: false,
            units_done: 0,
            units_total,
            started: false,
            finished: false,
            pending_slots,
            node_vertices,
            started_v: if overlap { vec![false; nv] } else { Vec::new() },
            flow_done: if overlap { vec![false; nv] } else { Vec::new() },
            delivered_at: if overlap { vec![0.0; nv] } else { Vec::new() },
            fluid: None,
        })
    }
}
