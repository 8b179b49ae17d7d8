//! Incremental max-min fair sharing. A full progressive filling after every event costs
//! O(active flows); at thousand-node scale most events touch a handful of links. This
//! recomputes only an *affected set* of flows: the flows on changed resources, grown until
//! every flow around it has a valid bottleneck again (a saturated resource where no other
//! flow gets more). At that fixpoint the allocation is the unique max-min fair one, so the
//! result equals a full recompute (checked by property tests against [`MaxMin`]).

use crate::maxmin::{FlowResources, MaxMin, RadixHeap};

/// Flows, resources and their current fair rates.
pub struct Sharing {
    caps: Vec<f64>,
    /// Flows on each resource, with their weight there.
    res_flows: Vec<Vec<(u32, f64)>>,
    /// Position of each flow in each of its resources' lists.
    flows: Vec<Option<FlowResources>>,
    rate: Vec<f64>,
    free: Vec<u32>,
    live: usize,
    /// Resource entries over live flows (what a full recompute visits).
    live_entries: usize,
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
    fresh: Vec<u32>,
    // Scratch for one update.
    in_set: Vec<u32>,
    set: Vec<u32>,
    before: Vec<(u32, f64)>,
    epoch: u32,
    /// The fill after which each flow's bottleneck was last checked.
    checked: Vec<u64>,
    /// Per resource (load, max rate) under the current rates, valid while `stat_ok[r]`:
    /// cleared whenever a flow on r is added, removed or changes rate.
    stat: Vec<(f64, f64)>,
    stat_ok: Vec<bool>,
    touched: Vec<u32>,
    /// Local index of each resource in the current fill, valid where `local_tag` = `fill_tag`.
    local_idx: Vec<u32>,
    local_tag: Vec<u64>,
    fill_tag: u64,
    /// Resources whose flows' rates changed in the last fill, or that carry a flow new to
    /// the affected set: only flows on these can have lost (or regained) a bottleneck.
    moved: Vec<u32>,
    is_moved: Vec<bool>,
    local_caps: Vec<f64>,
    /// The set's flows over local resource ids, flattened: flow i is
    /// `local_entries[local_starts[i]..local_starts[i + 1]]`.
    local_starts: Vec<u32>,
    local_entries: Vec<(u32, f64)>,
    local_rates: Vec<f64>,
    full: MaxMin,
    // Scratch for [`Sharing::fill_all`].
    all_rem: Vec<f64>,
    all_wsum: Vec<f64>,
    all_count: Vec<u32>,
    all_heap: RadixHeap,
    frozen: Vec<u64>,
    frozen_tag: u64,
    /// Recompute everything at every update (the reference, for tests).
    pub always_full: bool,
    /// Updates done by full recompute / incrementally (for tests and tuning).
    pub full_updates: u64,
    pub local_updates: u64,
    /// Sum of affected-set sizes over incremental updates.
    pub set_sizes: u64,
    /// Fills (growth rounds) over incremental updates.
    pub rounds: u64,
}

const REL_EPS: f64 = 1e-9;
/// Mean resources per flow above which a full recompute beats growing an affected set.
const DENSE_ENTRIES_PER_FLOW: usize = 4;

impl Sharing {
    pub fn new(caps: Vec<f64>) -> Self {
        let n = caps.len();
        Sharing {
            caps,
            res_flows: vec![Vec::new(); n],
            flows: Vec::new(),
            rate: Vec::new(),
            free: Vec::new(),
            live: 0,
            live_entries: 0,
            dirty: Vec::new(),
            is_dirty: vec![false; n],
            fresh: Vec::new(),
            in_set: Vec::new(),
            set: Vec::new(),
            before: Vec::new(),
            epoch: 0,
            checked: Vec::new(),
            stat: vec![(0.0, 0.0); n],
            stat_ok: vec![false; n],
            touched: Vec::new(),
            local_idx: vec![0; n],
            local_tag: vec![0; n],
            fill_tag: 0,
            moved: Vec::new(),
            is_moved: vec![false; n],
            local_caps: Vec::new(),
            local_starts: Vec::new(),
            local_entries: Vec::new(),
            local_rates: Vec::new(),
            full: MaxMin::default(),
            all_rem: Vec::new(),
            all_wsum: Vec::new(),
            all_count: Vec::new(),
            all_heap: RadixHeap::default(),
            frozen: Vec::new(),
            frozen_tag: 0,
            always_full: false,
            full_updates: 0,
            local_updates: 0,
            set_sizes: 0,
            rounds: 0,
        }
    }

    fn mark(&mut self, r: u32) {
        self.stat_ok[r as usize] = false;
        if !self.is_dirty[r as usize] {
            self.is_dirty[r as usize] = true;
            self.dirty.push(r);
        }
    }

    /// Adds a flow; its rate is set by the next [`Sharing::update`].
    pub fn add(&mut self, res: FlowResources) -> u32 {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.flows.push(None);
                self.rate.push(0.0);
                self.in_set.push(0);
                self.checked.push(0);
                (self.flows.len() - 1) as u32
            }
        };
        for &(r, w) in res.as_slice() {
            self.res_flows[r as usize].push((id, w));
            self.mark(r);
        }
        self.flows[id as usize] = Some(res);
        self.rate[id as usize] = 0.0;
        self.fresh.push(id);
        self.live += 1;
        self.live_entries += self.flow_len(id);
        id
    }

    /// Removes a flow.
    pub fn remove(&mut self, id: u32) {
        let res = self.flows[id as usize].take().expect("removing a live flow");
        self.live_entries -= res.len();
        for &(r, _) in res.as_slice() {
            let list = &mut self.res_flows[r as usize];
            let pos = list.iter().position(|&(f, _)| f == id).expect("flow is listed on its resource");
            list.swap_remove(pos);
            self.mark(r);
        }
        self.rate[id as usize] = 0.0;
        self.free.push(id);
        self.live -= 1;
    }

    /// Changes a resource's capacity.
    pub fn set_capacity(&mut self, r: u32, cap: f64) {
        if self.caps[r as usize] != cap {
            self.caps[r as usize] = cap;
            self.mark(r);
        }
    }

    /// Current rate of a flow.
    pub fn rate(&self, id: u32) -> f64 {
        self.rate[id as usize]
    }

    /// Recomputes rates after changes; appends to `changed` every flow whose rate changed
    /// (new flows included).
    pub fn update(&mut self, changed: &mut Vec<u32>) {
        if self.dirty.is_empty() && self.fresh.is_empty() {
            return;
        }
        let mut old = std::mem::take(&mut self.before);
        match self.affected_set(&mut old) {
            true => self.local_updates += 1,
            false => {
                self.full_updates += 1;
                old.clear();
                old.extend((0..self.flows.len() as u32).filter(|&f| self.flows[f as usize].is_some()).map(|f| (f, self.rate[f as usize])));
                self.fill_all();
                self.stat_ok.iter_mut().for_each(|ok| *ok = false);
            }
        }
        for &(f, r0) in &old {
            if self.rate[f as usize] != r0 || self.fresh.contains(&f) {
                changed.push(f);
            }
        }
        self.before = old;
        for &r in &self.dirty {
            self.is_dirty[r as usize] = false;
        }
        self.dirty.clear();
        self.fresh.clear();
    }

    /// Computes new rates for a growing affected set and leaves its flows with their rates
    /// from before in `before`; false (rates untouched) when the set grew past half of all
    /// flows and a full recompute is cheaper.
    fn affected_set(&mut self, before: &mut Vec<(u32, f64)>) -> bool {
        self.epoch += 1;
        let epoch = self.epoch;
        for &r in &self.moved {
            self.is_moved[r as usize] = false;
        }
        self.moved.clear();
        let mut set = std::mem::take(&mut self.set);
        set.clear();
        for i in 0..self.dirty.len() {
            let r = self.dirty[i] as usize;
            for j in 0..self.res_flows[r].len() {
                let f = self.res_flows[r][j].0;
                if self.in_set[f as usize] != epoch {
                    self.in_set[f as usize] = epoch;
                    set.push(f);
                }
            }
        }
        // Rates before: a flow joins the set before any fill touches it.
        before.clear();
        before.extend(set.iter().map(|&f| (f, self.rate[f as usize])));
        // Flows crossing many resources (fluid repairs: twenty links a flow, each shared by
        // about ten) make affected sets cascade through the whole cluster, and growing them
        // round by round costs twice a full recompute (ECPipe on 1,000 nodes: 29 s against
        // 12 s of CPU for 10,000 repairs). Slice transfers cross two or three.
        let dense = self.live_entries > DENSE_ENTRIES_PER_FLOW * self.live;
        let limit = if self.always_full || dense { 0 } else { (self.live / 2).max(64) };
        let mut new_from = 0;
        loop {
            if set.len() > limit {
                for &(f, r) in before.iter() {
                    self.set_rate(f, r);
                }
                self.set = set;
                return false;
            }
            for &f in &set[before.len()..] {
                before.push((f, self.rate[f as usize]));
            }
            self.fill(&set);
            self.rounds += 1;
            // Flows new to the set count as moved: their test below changes branch.
            for &f in &set[new_from..] {
                for i in 0..self.flow_len(f) {
                    let r = self.flow_res(f, i).0;
                    self.mark_moved(r);
                }
            }
            new_from = set.len();
            // Grow the set with every flow around it that lost its bottleneck.
            let moved = std::mem::take(&mut self.moved);
            for &r in &moved {
                self.is_moved[r as usize] = false;
                for j in 0..self.res_flows[r as usize].len() {
                    let g = self.res_flows[r as usize][j].0;
                    // A flow on two moved resources is checked once per round.
                    if self.checked[g as usize] == self.fill_tag {
                        continue;
                    }
                    self.checked[g as usize] = self.fill_tag;
                    if self.has_bottleneck(g) {
                        continue;
                    }
                    if self.in_set[g as usize] != epoch {
                        self.in_set[g as usize] = epoch;
                        set.push(g);
                    } else {
                        // An affected flow beaten by outside flows: bring those in.
                        for i in 0..self.flow_len(g) {
                            let r2 = self.flow_res(g, i).0;
                            for k in 0..self.res_flows[r2 as usize].len() {
                                let h = self.res_flows[r2 as usize][k].0;
                                if self.in_set[h as usize] != epoch && self.rate[h as usize] > self.rate[g as usize] * (1.0 + REL_EPS) {
                                    self.in_set[h as usize] = epoch;
                                    set.push(h);
                                }
                            }
                        }
                    }
                }
            }
            self.moved = moved;
            self.moved.clear();
            if set.len() == new_from {
                self.set_sizes += set.len() as u64;
                self.set = set;
                return true;
            }
        }
    }

    /// Progressive filling of every live flow, in place: the resources' own flow lists
    /// are the adjacency, so nothing is copied (a full recompute among a thousand fluid
    /// repairs visits twenty thousand entries; rebuilding them cost as much as filling).
    fn fill_all(&mut self) {
        let nr = self.caps.len();
        self.all_rem.clear();
        self.all_rem.extend_from_slice(&self.caps);
        self.all_wsum.clear();
        self.all_wsum.resize(nr, 0.0);
        self.all_count.clear();
        self.all_count.resize(nr, 0);
        let mut heap = std::mem::take(&mut self.all_heap);
        heap.clear();
        for (r, list) in self.res_flows.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let w: f64 = list.iter().map(|e| e.1).sum();
            self.all_wsum[r] = w;
            self.all_count[r] = list.len() as u32;
            heap.push(self.caps[r].max(0.0) / w, r as u32);
        }
        self.frozen_tag += 1;
        let tag = self.frozen_tag;
        if self.frozen.len() < self.flows.len() {
            self.frozen.resize(self.flows.len(), 0);
        }
        for (f, res) in self.flows.iter().enumerate() {
            if res.as_ref().is_some_and(|r| r.is_empty()) {
                self.rate[f] = f64::INFINITY;
            }
        }
        let share_of = |rem: &[f64], wsum: &[f64], r: usize| rem[r].max(0.0) / wsum[r].max(f64::MIN_POSITIVE) + 0.0;
        while let Some((key, res)) = heap.pop() {
            let r = res as usize;
            if self.all_count[r] == 0 {
                continue;
            }
            // Lazy keys, as in [`MaxMin`]: shares only rise as flows freeze elsewhere. A
            // share a rounding below its key fills now, at its own value.
            let share = share_of(&self.all_rem, &self.all_wsum, r);
            if share > key {
                heap.push(share, res);
                continue;
            }
            for m in 0..self.res_flows[r].len() {
                let f = self.res_flows[r][m].0 as usize;
                if self.frozen[f] == tag {
                    continue;
                }
                self.frozen[f] = tag;
                self.rate[f] = share;
                for &(r2, w) in self.flows[f].as_ref().expect("listed flows are live").as_slice() {
                    let r2 = r2 as usize;
                    self.all_rem[r2] -= w * share;
                    self.all_wsum[r2] -= w;
                    self.all_count[r2] -= 1;
                }
            }
        }
        self.all_heap = heap;
    }

    fn flow_len(&self, f: u32) -> usize {
        self.flows[f as usize].as_ref().map_or(0, |res| res.len())
    }

    /// Resource i of live flow f, and the flow's weight on it.
    fn flow_res(&self, f: u32, i: usize) -> (u32, f64) {
        self.flows[f as usize].as_ref().expect("live flow").as_slice()[i]
    }

    fn mark_moved(&mut self, r: u32) {
        if !self.is_moved[r as usize] {
            self.is_moved[r as usize] = true;
            self.moved.push(r);
        }
    }

    /// Sets a flow's rate, keeping the per-resource stats and the moved set right.
    /// A change below 1e-12 relative is rounding noise from refilling: ignoring it keeps
    /// the flows around (and their completion times) untouched.
    fn set_rate(&mut self, f: u32, rate: f64) {
        let old = self.rate[f as usize];
        if (old - rate).abs() > 1e-12 * old.abs().max(rate.abs()) || (old == 0.0) != (rate == 0.0) {
            self.rate[f as usize] = rate;
            for i in 0..self.flow_len(f) {
                let r = self.flow_res(f, i).0;
                self.stat_ok[r as usize] = false;
                self.mark_moved(r);
            }
        }
    }

    /// Progressive filling of `set` on the capacity left by flows outside it. Leaves the
    /// resources the set crosses in `self.touched`.
    fn fill(&mut self, set: &[u32]) {
        self.fill_tag += 1;
        let tag = self.fill_tag;
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        self.local_caps.clear();
        self.local_entries.clear();
        self.local_starts.clear();
        // Local resource ids in order of first use; capacity left by the flows outside the
        // set = load - the set's own share of it.
        for &f in set {
            self.local_starts.push(self.local_entries.len() as u32);
            for i in 0..self.flow_len(f) {
                let (r, w) = self.flow_res(f, i);
                if self.local_tag[r as usize] != tag {
                    self.local_tag[r as usize] = tag;
                    self.local_idx[r as usize] = touched.len() as u32;
                    touched.push(r);
                    let (load, _) = self.stat(r);
                    self.local_caps.push(self.caps[r as usize] - load);
                }
                let l = self.local_idx[r as usize];
                self.local_caps[l as usize] += w * self.rate[f as usize];
                self.local_entries.push((l, w));
            }
        }
        for c in &mut self.local_caps {
            *c = c.max(0.0);
        }
        self.local_starts.push(self.local_entries.len() as u32);
        let mut rates = std::mem::take(&mut self.local_rates);
        let (starts, entries) = (&self.local_starts, &self.local_entries);
        let res = |i: usize| &entries[starts[i] as usize..starts[i + 1] as usize];
        self.full.allocate_by(&self.local_caps, set.len(), res, &mut rates);
        for (&f, &r) in set.iter().zip(&rates) {
            self.set_rate(f, r);
        }
        self.local_rates = rates;
        self.touched = touched;
    }

    /// (load, max rate) of resource r under the current rates, cached until they change.
    fn stat(&mut self, r: u32) -> (f64, f64) {
        let r = r as usize;
        if !self.stat_ok[r] {
            let mut load = 0.0;
            let mut max: f64 = 0.0;
            for &(g, w) in &self.res_flows[r] {
                let x = self.rate[g as usize];
                load += w * x;
                max = max.max(x);
            }
            self.stat[r] = (load, max);
            self.stat_ok[r] = true;
        }
        self.stat[r]
    }

    /// Whether flow f has a saturated resource where no flow gets more than f.
    fn has_bottleneck(&mut self, f: u32) -> bool {
        let rf = self.rate[f as usize];
        if self.flows[f as usize].as_ref().is_none_or(|res| res.is_empty()) {
            return true;
        }
        (0..self.flow_len(f)).any(|i| {
            let r = self.flow_res(f, i).0;
            let (load, max) = self.stat(r);
            let cap = self.caps[r as usize];
            load >= cap * (1.0 - REL_EPS) - 1e-12 && max <= rf * (1.0 + REL_EPS) + 1e-12
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// After any sequence of adds, removals and capacity changes, the incremental rates equal
    /// a full progressive filling.
    #[test]
    fn incremental_equals_full_recompute() {
        for seed in 0..40u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let nres = rng.random_range(2..30);
            let caps: Vec<f64> = (0..nres).map(|_| rng.random_range(1.0..10.0)).collect();
            let mut s = Sharing::new(caps.clone());
            let mut caps = caps;
            let mut live: Vec<u32> = Vec::new();
            // What a user of `changed` believes each flow's rate is.
            let mut seen: std::collections::HashMap<u32, f64> = std::collections::HashMap::new();
            for _step in 0..300 {
                match rng.random_range(0..10) {
                    0..=4 => {
                        let flow = if rng.random_bool(0.7) {
                            let a = rng.random_range(0..nres) as u32;
                            let b = rng.random_range(0..nres) as u32;
                            if a == b {
                                FlowResources::new(&[a])
                            } else {
                                FlowResources::new(&[a, b])
                            }
                        } else {
                            // A fluid repair: several links with edge-count weights.
                            let n = rng.random_range(1..7);
                            FlowResources::weighted((0..n).map(|_| (rng.random_range(0..nres) as u32, rng.random_range(1..4) as f64)))
                        };
                        live.push(s.add(flow));
                    }
                    5..=8 if !live.is_empty() => {
                        let i = rng.random_range(0..live.len());
                        s.remove(live.swap_remove(i));
                    }
                    _ => {
                        let r = rng.random_range(0..nres);
                        caps[r] = rng.random_range(0.0..10.0);
                        s.set_capacity(r as u32, caps[r]);
                    }
                }
                let mut changed = Vec::new();
                s.update(&mut changed);
                for &f in &changed {
                    seen.insert(f, s.rate(f));
                }
                let res: Vec<FlowResources> = live.iter().map(|&f| s.flows[f as usize].clone().unwrap()).collect();
                let mut want = Vec::new();
                MaxMin::default().allocate(&caps, &res, &mut want);
                for (i, &f) in live.iter().enumerate() {
                    let (got, w) = (s.rate(f), want[i]);
                    assert!((got - w).abs() <= 1e-6 * w.max(1.0), "seed {seed}: flow {f} has {got}, full recompute {w}");
                    assert_eq!(seen.get(&f), Some(&got), "seed {seed}: flow {f}'s rate change was not reported");
                }
            }
            assert!(s.local_updates > 0, "the incremental path was exercised");
        }
    }
}
