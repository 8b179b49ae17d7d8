//! Weighted max-min fair sharing by progressive filling: raise every flow's rate together;
//! flow f uses `w * rate` of each resource it crosses with weight w (a slice transfer
//! crosses its uplink and downlink with weight 1; a pipelined repair moving as one fluid
//! flow crosses a node's uplink once per graph edge leaving it). When a resource fills,
//! freeze the flows crossing it at the current rate and continue with the rest. The result
//! is the allocation where every flow has a saturated resource on which no flow is faster.

use smallvec::SmallVec;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The resources one flow crosses, each with its weight (bytes of the resource per byte of
/// the flow). Up to three are stored inline: a slice transfer never allocates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowResources {
    list: SmallVec<[(u32, f64); 3]>,
}

impl FlowResources {
    /// Resources crossed with weight 1 each.
    pub fn new(list: &[u32]) -> Self {
        FlowResources { list: list.iter().map(|&r| (r, 1.0)).collect() }
    }

    /// Resources with weights; repeated resources add up, non-positive weights are dropped.
    pub fn weighted(items: impl IntoIterator<Item = (u32, f64)>) -> Self {
        let mut list: SmallVec<[(u32, f64); 3]> = SmallVec::new();
        for (r, w) in items {
            if w.is_nan() || w <= 0.0 {
                continue;
            }
            match list.iter_mut().find(|e| e.0 == r) {
                Some(e) => e.1 += w,
                None => list.push((r, w)),
            }
        }
        FlowResources { list }
    }

    pub fn as_slice(&self) -> &[(u32, f64)] {
        &self.list
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Appends a resource known not to be listed yet.
    pub fn push(&mut self, r: u32, w: f64) {
        self.list.push((r, w));
    }
}

/// A resource in the filling order: the rate its unfrozen flows would get if it filled now.
#[derive(PartialEq)]
pub(crate) struct Entry {
    pub share: f64,
    pub res: u32,
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

/// A monotone priority queue (a radix heap) over non-negative f64 keys: every key pushed
/// is at least the last one popped, as progressive filling's shares are. Keys compare by
/// their bit patterns, which order non-negative floats; an item lives in the bucket of the
/// highest bit where it differs from the last key popped, so a pop moves each item down a
/// few times at most instead of sifting through a binary heap.
pub(crate) struct RadixHeap {
    last: u64,
    len: usize,
    buckets: Vec<Vec<(u64, u32)>>,
}

impl Default for RadixHeap {
    fn default() -> Self {
        RadixHeap { last: 0, len: 0, buckets: vec![Vec::new(); 65] }
    }
}

impl RadixHeap {
    pub fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.last = 0;
        self.len = 0;
    }

    fn bucket(&self, key: u64) -> usize {
        if key == self.last {
            0
        } else {
            64 - (key ^ self.last).leading_zeros() as usize
        }
    }

    /// Adds an item; `key` must not be below the last key popped.
    pub fn push(&mut self, key: f64, item: u32) {
        let bits = (key + 0.0).to_bits();
        debug_assert!(bits >= self.last, "radix heap keys must not decrease");
        let b = self.bucket(bits.max(self.last));
        self.buckets[b].push((bits.max(self.last), item));
        self.len += 1;
    }

    /// Removes an item with the smallest key.
    pub fn pop(&mut self) -> Option<(f64, u32)> {
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = (1..65).find(|&i| !self.buckets[i].is_empty()).expect("a non-empty bucket");
            let items = std::mem::take(&mut self.buckets[i]);
            self.last = items.iter().map(|e| e.0).min().expect("non-empty");
            for &(k, v) in &items {
                let b = self.bucket(k);
                self.buckets[b].push((k, v));
            }
            // Keep the emptied bucket's allocation for next time.
            let mut items = items;
            items.clear();
            self.buckets[i] = items;
        }
        self.len -= 1;
        self.buckets[0].pop().map(|(k, v)| (f64::from_bits(k), v))
    }
}

/// Reusable buffers so that repeated allocations do not reallocate.
#[derive(Default)]
pub struct MaxMin {
    count: Vec<u32>,
    /// Sum of the weights of the unfrozen flows on each resource.
    wsum: Vec<f64>,
    rem: Vec<f64>,
    offsets: Vec<u32>,
    members: Vec<u32>,
    frozen: Vec<bool>,
    fill: Vec<u32>,
    heap: BinaryHeap<Entry>,
}

impl MaxMin {
    /// The rate every unfrozen flow on resource r would get if r filled now. Weights of
    /// one resource's flows are within a few orders of magnitude, so the running sum stays
    /// accurate; the `+ 0.0` turns -0.0 into 0.0 for the heap's bit-pattern order.
    fn share(&self, r: usize) -> f64 {
        self.rem[r].max(0.0) / self.wsum[r].max(f64::MIN_POSITIVE) + 0.0
    }

    /// Sets `rates[f]` to flow f's max-min fair rate given resource capacities `caps`.
    /// A flow crossing no resource gets `f64::INFINITY`.
    pub fn allocate(&mut self, caps: &[f64], flows: &[FlowResources], rates: &mut Vec<f64>) {
        self.allocate_by(caps, flows.len(), |f| flows[f].as_slice(), rates)
    }

    /// Like [`MaxMin::allocate`], for `n` flows whose resources `flow(i)` gives (no copies).
    pub fn allocate_by<'f>(&mut self, caps: &[f64], n: usize, flow: impl Fn(usize) -> &'f [(u32, f64)], rates: &mut Vec<f64>) {
        let nr = caps.len();
        rates.clear();
        rates.resize(n, f64::INFINITY);
        self.count.clear();
        self.count.resize(nr, 0);
        self.wsum.clear();
        self.wsum.resize(nr, 0.0);
        for f in 0..n {
            for &(r, w) in flow(f) {
                self.count[r as usize] += 1;
                self.wsum[r as usize] += w;
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
        for i in 0..n {
            for &(r, _) in flow(i) {
                self.members[self.fill[r as usize] as usize] = i as u32;
                self.fill[r as usize] += 1;
            }
        }
        self.rem.clear();
        self.rem.extend_from_slice(caps);
        self.frozen.clear();
        self.frozen.resize(n, false);
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        entries.clear();
        entries.extend((0..nr).filter(|&r| self.count[r] > 0).map(|r| Entry { share: self.share(r), res: r as u32 }));
        self.heap = BinaryHeap::from(entries);
        while let Some(Entry { share, res }) = self.heap.pop() {
            let r = res as usize;
            if self.count[r] == 0 {
                continue;
            }
            // Each resource has one entry, pushed lazily: freezing a flow at the lowest share
            // never lowers another resource's share (it takes at most that resource's
            // average), so a key only falls behind upwards. Refresh it and look again.
            let current = self.share(r);
            if current != share {
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
                for &(r2, w) in flow(f) {
                    let r2 = r2 as usize;
                    self.rem[r2] -= w * share;
                    self.count[r2] -= 1;
                    self.wsum[r2] -= w;
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
            // Slice-like flows (two resources, weight 1) mixed with fluid-like ones (up to
            // eight resources with weights from 0.1 to 10).
            let flows: Vec<FlowResources> = (0..rng.random_range(1..80))
                .map(|_| {
                    if rng.random_bool(0.5) {
                        let a = rng.random_range(0..nr) as u32;
                        let b = rng.random_range(0..nr) as u32;
                        if a == b {
                            FlowResources::new(&[a])
                        } else {
                            FlowResources::new(&[a, b])
                        }
                    } else {
                        FlowResources::weighted(
                            (0..rng.random_range(1..8)).map(|_| (rng.random_range(0..nr) as u32, rng.random_range(0.1..10.0))),
                        )
                    }
                })
                .collect();
            let mut rates = Vec::new();
            MaxMin::default().allocate(&caps, &flows, &mut rates);
            let mut load = vec![0.0; nr];
            let mut max = vec![0.0f64; nr];
            for (f, &x) in flows.iter().zip(&rates) {
                for &(r, w) in f.as_slice() {
                    load[r as usize] += w * x;
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
                    .any(|&(r, _)| load[r as usize] >= caps[r as usize] * (1.0 - 1e-9) && max[r as usize] <= x * (1.0 + 1e-9));
                assert!(ok, "a flow at {x} has no bottleneck");
            }
        }
    }

    /// A chain of three edges moving as one flow (weight 1 on each node's link it crosses)
    /// beside a star of two edges into one downlink (weight 2 there): the star is limited to
    /// half the shared downlink, the chain takes the rest of it.
    #[test]
    fn weighted_flows_share_by_rate() {
        // Resources: 0 = downlink shared by both (cap 9), 1 = the chain's other links (cap 10).
        let chain = FlowResources::weighted([(0, 1.0), (1, 1.0), (1, 1.0)]);
        let star = FlowResources::weighted([(0, 2.0)]);
        assert_eq!(chain.as_slice(), &[(0, 1.0), (1, 2.0)], "repeated resources add up");
        let mut rates = Vec::new();
        MaxMin::default().allocate(&[9.0, 10.0], &[chain, star], &mut rates);
        // Filling together: r0 fills at 3 (1x + 2x = 9) before r1 (2x = 10 at 5).
        assert_eq!(rates, vec![3.0, 3.0]);
        let chain = FlowResources::weighted([(0, 1.0), (1, 2.0)]);
        let mut rates = Vec::new();
        MaxMin::default().allocate(&[9.0, 4.0], &[chain, FlowResources::weighted([(0, 2.0)])], &mut rates);
        // Now r1 fills first at 2; the star takes the rest of r0: (9 - 2) / 2.
        assert_eq!(rates, vec![2.0, 3.5]);
    }

    /// The radix heap pops in key order while keys only rise, as a sorted list would.
    #[test]
    fn radix_heap_pops_in_order() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut h = RadixHeap::default();
        let mut reference: Vec<f64> = Vec::new();
        let mut last = 0.0;
        for _ in 0..5000 {
            if rng.random_bool(0.6) || reference.is_empty() {
                let k = last + rng.random_range(0.0..10.0) * rng.random_range(0.0..1.0f64).powi(3);
                h.push(k, 0);
                reference.push(k);
            } else {
                reference.sort_by(|a, b| b.total_cmp(a));
                let want = reference.pop().unwrap();
                let (got, _) = h.pop().unwrap();
                assert_eq!(got, want);
                last = got;
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
