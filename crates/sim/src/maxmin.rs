//! Max-min fair sharing by progressive filling: raise every flow's rate together; when a
//! resource fills, freeze the flows crossing it at its fair share and continue with the
//! rest. Each flow crosses a few resources (uplink, downlink, optional pair cap or disk).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// At most this many resources per flow (uplink, downlink, pair cap; or one disk).
pub const MAX_RES: usize = 3;

/// The resources one flow crosses.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowResources {
    pub res: [u32; MAX_RES],
    pub len: u8,
}

impl FlowResources {
    pub fn new(list: &[u32]) -> Self {
        assert!(list.len() <= MAX_RES);
        let mut res = [0; MAX_RES];
        res[..list.len()].copy_from_slice(list);
        FlowResources { res, len: list.len() as u8 }
    }
    pub fn as_slice(&self) -> &[u32] {
        &self.res[..self.len as usize]
    }
}

#[derive(PartialEq)]
struct Entry {
    share: f64,
    res: u32,
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Min-heap on share; ties by resource id for determinism. Shares are non-negative, so
    // their bit patterns order like the numbers: one integer compare instead of total_cmp.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.share.to_bits(), o.res).cmp(&(self.share.to_bits(), self.res))
    }
}

/// Reusable buffers so that repeated allocations do not reallocate.
#[derive(Default)]
pub struct MaxMin {
    count: Vec<u32>,
    rem: Vec<f64>,
    offsets: Vec<u32>,
    members: Vec<u32>,
    frozen: Vec<bool>,
    fill: Vec<u32>,
    heap: BinaryHeap<Entry>,
}

impl MaxMin {
    /// Sets `rates[f]` to flow f's max-min fair rate given resource capacities `caps`.
    /// A flow crossing no resource gets `f64::INFINITY`.
    pub fn allocate(&mut self, caps: &[f64], flows: &[FlowResources], rates: &mut Vec<f64>) {
        let nr = caps.len();
        rates.clear();
        rates.resize(flows.len(), f64::INFINITY);
        self.count.clear();
        self.count.resize(nr, 0);
        for f in flows {
            for &r in f.as_slice() {
                self.count[r as usize] += 1;
            }
        }
        // Compressed adjacency resource -> flows.
        self.offsets.clear();
        self.offsets.reserve(nr + 1);
        let mut acc = 0u32;
        for &c in &self.count {
            self.offsets.push(acc);
            acc += c;
        }
        self.offsets.push(acc);
        self.members.clear();
        self.members.resize(acc as usize, 0);
        self.fill.clear();
        self.fill.extend_from_slice(&self.offsets[..nr]);
        for (i, f) in flows.iter().enumerate() {
            for &r in f.as_slice() {
                self.members[self.fill[r as usize] as usize] = i as u32;
                self.fill[r as usize] += 1;
            }
        }
        self.rem.clear();
        self.rem.extend_from_slice(caps);
        self.frozen.clear();
        self.frozen.resize(flows.len(), false);
        self.heap.clear();
        for r in 0..nr {
            if self.count[r] > 0 {
                self.heap.push(Entry { share: self.rem[r].max(0.0) / self.count[r] as f64 + 0.0, res: r as u32 });
            }
        }
        while let Some(Entry { share, res }) = self.heap.pop() {
            let r = res as usize;
            if self.count[r] == 0 {
                continue;
            }
            let current = self.rem[r].max(0.0) / self.count[r] as f64 + 0.0;
            if current != share {
                // Stale entry: the resource lost flows or capacity since it was pushed.
                self.heap.push(Entry { share: current, res });
                continue;
            }
            for m in self.offsets[r]..self.offsets[r + 1] {
                let f = self.members[m as usize] as usize;
                if self.frozen[f] {
                    continue;
                }
                self.frozen[f] = true;
                rates[f] = share;
                for &r2 in flows[f].as_slice() {
                    let r2 = r2 as usize;
                    self.rem[r2] -= share;
                    self.count[r2] -= 1;
                    if r2 != r && self.count[r2] > 0 {
                        self.heap.push(Entry { share: self.rem[r2].max(0.0) / self.count[r2] as f64 + 0.0, res: r2 as u32 });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_example() {
        // Three flows: A over r0, B over r0 and r1, C over r1. r0 = 10, r1 = 4.
        // B and C split r1 (2 each); A gets the rest of r0 (8).
        let flows = [FlowResources::new(&[0]), FlowResources::new(&[0, 1]), FlowResources::new(&[1])];
        let mut rates = Vec::new();
        MaxMin::default().allocate(&[10.0, 4.0], &flows, &mut rates);
        assert_eq!(rates, vec![8.0, 2.0, 2.0]);
    }

    #[test]
    fn star_into_one_downlink() {
        // k = 4 senders with their own uplinks into one downlink: each gets 1/4.
        let flows: Vec<FlowResources> = (0..4).map(|i| FlowResources::new(&[i, 10])).collect();
        let mut caps = vec![1.0; 11];
        caps[10] = 1.0;
        let mut rates = Vec::new();
        MaxMin::default().allocate(&caps, &flows, &mut rates);
        assert!(rates.iter().all(|&r| (r - 0.25).abs() < 1e-12));
    }

    /// Random instances: the allocation is feasible and every flow has a bottleneck (a
    /// saturated resource on which no flow gets more), which defines max-min fairness.
    #[test]
    fn every_flow_has_a_bottleneck() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        for _ in 0..500 {
            let nr = rng.random_range(1..40);
            let caps: Vec<f64> = (0..nr).map(|_| rng.random_range(0.5..10.0)).collect();
            let flows: Vec<FlowResources> = (0..rng.random_range(1..80))
                .map(|_| {
                    let a = rng.random_range(0..nr) as u32;
                    let b = rng.random_range(0..nr) as u32;
                    if a == b {
                        FlowResources::new(&[a])
                    } else {
                        FlowResources::new(&[a, b])
                    }
                })
                .collect();
            let mut rates = Vec::new();
            MaxMin::default().allocate(&caps, &flows, &mut rates);
            let mut load = vec![0.0; nr];
            let mut max = vec![0.0f64; nr];
            for (f, &x) in flows.iter().zip(&rates) {
                for &r in f.as_slice() {
                    load[r as usize] += x;
                    max[r as usize] = max[r as usize].max(x);
                }
            }
            for r in 0..nr {
                assert!(load[r] <= caps[r] * (1.0 + 1e-9), "resource {r} over capacity");
            }
            for (f, &x) in flows.iter().zip(&rates) {
                let ok = f
                    .as_slice()
                    .iter()
                    .any(|&r| load[r as usize] >= caps[r as usize] * (1.0 - 1e-9) && max[r as usize] <= x * (1.0 + 1e-9));
                assert!(ok, "a flow at {x} has no bottleneck");
            }
        }
    }

    #[test]
    fn zero_capacity_and_no_resources() {
        let flows = [FlowResources::new(&[0]), FlowResources::new(&[])];
        let mut rates = Vec::new();
        MaxMin::default().allocate(&[0.0], &flows, &mut rates);
        assert_eq!(rates[0], 0.0);
        assert_eq!(rates[1], f64::INFINITY);
    }
}
