//! `bench full-node`'s simulator side: the benchmark's own lost chunks and the graphs the
//! coordinator ran, through the simulator's reference model, for the `sim s` columns.

use crate::bench_fullnode::FullNodeArgs;
use anyhow::{anyhow, Result};
use kintsugi_client::Client;
use kintsugi_plan::Shape;

/// The cluster's own lost chunks (each stripe's placement, node 0 failed), planned by the
/// same scheduler and run through the simulator's reference (slice) model on uniform links
/// of the benchmark's rate: the prediction the measurement is held against (issue #13).
pub(crate) async fn lost_chunks(client: &Client, a: &FullNodeArgs) -> Result<Vec<kintsugi_plan::schedule::LostChunk>> {
    let mut lost = Vec::new();
    for i in 0..a.objects {
        let layout = client.stat(&format!("object-{i:04}")).await.map_err(|e| anyhow!(e))?;
        for st in &layout.stripes {
            let mut nodes = vec![0u32; st.chunks.len()];
            for c in &st.chunks {
                let (_, index) = c.chunk.parts().ok_or_else(|| anyhow!("unexpected chunk name {}", c.chunk.as_str()))?;
                *nodes.get_mut(index).ok_or_else(|| anyhow!("chunk index {index} out of range"))? = c.node;
            }
            if let Some(index) = nodes.iter().position(|&n| n == 0) {
                let placement = nodes.iter().map(|&n| (n != 0).then_some(n)).collect();
                lost.push(kintsugi_plan::schedule::LostChunk { placement, lost: index, avoid: nodes.clone(), size: 0 });
            }
        }
    }
    Ok(lost)
}

/// The simulator (reference slice model, uniform links of the benchmark's rate) on what
/// the cluster ran: the coordinator's own graphs, every transfer as soon as its inputs
/// allow, as the nodes run them. Where the nodes gated some of them by timeslots
/// (`ran_slots`, one per graph), also those graphs gated by those slots. With a scheduler
/// that has timeslots, also the same lost chunks (`lost`, read before the repair) planned
/// afresh and gated by their slots.
pub(crate) fn simulate_same(
    a: &FullNodeArgs,
    method: Shape,
    scheduler: kintsugi_plan::schedule::Scheduler,
    lost: &[kintsugi_plan::schedule::LostChunk],
    ran: &[kintsugi_plan::RepairGraph],
    ran_slots: &[Vec<Option<u32>>],
) -> Result<SimSame> {
    use kintsugi_plan::schedule::{self, Cluster};
    let job = |graph: kintsugi_plan::RepairGraph, timeslots: Vec<Option<u32>>| kintsugi_sim::Job {
        graph,
        chunk_len: a.chunk,
        slice_len: a.slice,
        release: 0.0,
        timeslots,
        cancel_at: None,
        request: None,
    };
    let net = kintsugi_sim::Network::homogeneous(a.nodes, sim_link_rate(a));
    // The coordinator's repairs per destination hold in the replay too (the graphs come in
    // completion order, which is close to the order they started in).
    let admission = match a.max_active {
        0 => kintsugi_sim::Admission::All,
        n => kintsugi_sim::Admission::PerDestination(n),
    };
    let opts = kintsugi_sim::SimOptions { admission, ..Default::default() };
    let replay: Vec<kintsugi_sim::Job> = ran.iter().cloned().map(|g| job(g, Vec::new())).collect();
    let free = kintsugi_sim::run(&net, &replay, &opts).map_err(|e| anyhow!("{e}"))?;
    let busiest = free.upload_bytes.iter().chain(&free.download_bytes).fold(0.0f64, |m, &b| m.max(b)) / a.link;
    let gated = ran_slots.len() == ran.len() && ran_slots.iter().flatten().any(Option::is_some);
    let first = |r: &kintsugi_sim::SimResult| r.jobs.iter().map(|j| j.end).fold(f64::INFINITY, f64::min);
    let mut first_done = first(&free);
    // What ran, gated by the timeslots the nodes gated it by, if they gated any.
    let ran_gated: Option<Vec<kintsugi_sim::Job>> =
        gated.then(|| ran.iter().cloned().zip(ran_slots.iter().cloned()).map(|(g, t)| job(g, t)).collect());
    let replay_gated = match &ran_gated {
        Some(jobs) => {
            let r = kintsugi_sim::run(&net, jobs, &opts).map_err(|e| anyhow!("{e}"))?;
            first_done = first(&r);
            Some(r.makespan)
        }
        None => None,
    };
    let slotted = match scheduler.timeslots() {
        true => {
            let code = a.code.build()?;
            let mut cluster = Cluster::homogeneous((1..a.nodes as u32).collect());
            cluster.default_bandwidth = a.link;
            cluster.chunk_bytes = a.chunk as f64;
            let plan = schedule::plan(code.as_ref(), method, scheduler, lost, &cluster, 0x5eed).map_err(|e| anyhow!("{e}"))?;
            let jobs: Vec<kintsugi_sim::Job> = plan.repairs.into_iter().map(|r| job(r.graph, r.slots)).collect();
            Some(kintsugi_sim::run(&net, &jobs, &opts).map_err(|e| anyhow!("{e}"))?.makespan)
        }
        false => None,
    };
    // The fluid model (`sim full-node`'s default) on the same replay: one flow per
    // pipelined repair, beside the slice model it approximates.
    let fluid_opts = kintsugi_sim::SimOptions { model: kintsugi_sim::Model::Fluid, ..opts.clone() };
    let fluid = kintsugi_sim::run(&net, ran_gated.as_deref().unwrap_or(&replay), &fluid_opts).map_err(|e| anyhow!("{e}"))?.makespan;
    Ok(SimSame { seconds: free.makespan, replay_gated, slotted, busiest, first_done, fluid })
}

/// The rate the simulator gives every link: what TCP payload gets of it on the testbed,
/// whose tc shaping counts frames; all of it on loopback, whose token buckets count payload.
pub(crate) fn sim_link_rate(a: &FullNodeArgs) -> f64 {
    if a.testbed {
        a.link * crate::testbed::tcp_payload_share(a.mtu)
    } else {
        a.link
    }
}

/// The simulator's view of the benchmark's own lost chunks.
#[derive(Clone, Copy)]
pub(crate) struct SimSame {
    /// The coordinator's graphs replayed: every transfer as soon as its inputs allow.
    pub seconds: f64,
    /// The same graphs gated by the timeslots the nodes gated them by; `None` when none were.
    pub replay_gated: Option<f64>,
    /// The scheduler's plan gated by its timeslots (RepairBoost), as `sim full-node` runs
    /// it; `None` for schedulers without slots.
    pub slotted: Option<f64>,
    /// The busiest link of the replayed graphs, seconds at the link rate.
    pub busiest: f64,
    /// When the first chunk was done in the replay of what ran (gated where the nodes
    /// gated), seconds.
    pub first_done: f64,
    /// The replay of what ran (gated where the nodes gated) in the fluid model, seconds.
    pub fluid: f64,
}

impl SimSame {
    /// The replay of what ran: gated by its timeslots where the nodes gated it.
    pub fn replay(&self) -> f64 {
        self.replay_gated.unwrap_or(self.seconds)
    }
}
