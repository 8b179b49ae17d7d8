//! Systematic linear codes given by a generator matrix: RS and LRC are both this, with
//! different generators. Shard i holds (row i of G) x data; rows 0..k are the identity.

use crate::equation::{HelperTerm, RepairEquation};
use crate::error::{CodeError, Result};
use crate::matrix::{independent_rows, solve_combination, Matrix};
use crate::spec::{CodeSpec, MAX_SHARDS};
use crate::{Code, Decoder};
use kintsugi_gf::{exp2, inv, pow, CoefMatrix};
use std::sync::OnceLock;

/// A systematic linear code over GF(2^8).
#[derive(Debug)]
pub struct LinearCode {
    spec: CodeSpec,
    k: usize,
    /// n x k generator; the top k rows are the identity.
    generator: Matrix,
    /// Local repair groups (shard indices, parity included), empty for RS.
    groups: Vec<Vec<usize>>,
    /// Parity rows as kernel tables, built once.
    encoder: CoefMatrix,
    /// Largest t such that every erasure set of size <= t is recoverable.
    tolerance: OnceLock<usize>,
}

impl LinearCode {
    /// RS(k, m) with ISA-L's `gf_gen_cauchy1_matrix` generator: parity row i (i >= k),
    /// data column j holds 1 / (i xor j). Parity bytes equal ISA-L's `ec_encode_data`.
    pub fn rs(k: usize, m: usize) -> Result<Self> {
        check_sizes(k, m, k.saturating_add(m))?;
        let n = k + m;
        let mut g = Matrix::zeros(n, k);
        for i in 0..n {
            for j in 0..k {
                let v = if i < k { (i == j) as u8 } else { inv((i ^ j) as u8).expect("i != j") };
                g.set(i, j, v);
            }
        }
        Ok(Self::new(CodeSpec::Rs { k, m }, k, g, Vec::new()))
    }

    /// Azure-style LRC(k, l, m): data 0..k in l groups of k/l consecutive shards; shard
    /// k+g is the XOR of group g; shards k+l..k+l+m are global parities whose row j holds
    /// a_i^(j+1) with a_i = 2^i, so that, with the all-ones local rows, a group's erased
    /// data is solved by a Vandermonde system.
    pub fn lrc(k: usize, l: usize, m: usize) -> Result<Self> {
        if l == 0 {
            return Err(CodeError::InvalidParams("lrc needs at least one local group (l >= 1)".into()));
        }
        check_sizes(k, m, k.saturating_add(l).saturating_add(m))?;
        if !k.is_multiple_of(l) {
            return Err(CodeError::InvalidParams(format!("l = {l} local groups must divide k = {k} data shards")));
        }
        let n = k + l + m;
        let gsize = k / l;
        let mut g = Matrix::zeros(n, k);
        let mut groups = Vec::new();
        for i in 0..k {
            g.set(i, i, 1);
        }
        for grp in 0..l {
            let members: Vec<usize> = (grp * gsize..(grp + 1) * gsize).collect();
            for &d in &members {
                g.set(k + grp, d, 1);
            }
            groups.push(members.into_iter().chain([k + grp]).collect());
        }
        for j in 0..m {
            for i in 0..k {
                g.set(k + l + j, i, pow(exp2(i), (j + 1) as u32));
            }
        }
        Ok(Self::new(CodeSpec::Lrc { k, l, m }, k, g, groups))
    }

    fn new(spec: CodeSpec, k: usize, generator: Matrix, groups: Vec<Vec<usize>>) -> Self {
        let n = generator.rows;
        let encoder = CoefMatrix::new(n - k, k, &generator.data[k * k..]);
        LinearCode { spec, k, generator, groups, encoder, tolerance: OnceLock::new() }
    }

    /// Row i of the generator.
    pub fn generator_row(&self, i: usize) -> &[u8] {
        self.generator.row(i)
    }

    /// The local group containing shard `i`, if any.
    pub fn group_of(&self, i: usize) -> Option<&[usize]> {
        self.groups.iter().find(|g| g.contains(&i)).map(|g| g.as_slice())
    }

    fn check_index(&self, i: usize) -> Result<()> {
        if i >= self.n() {
            return Err(CodeError::BadIndex { index: i, n: self.n() });
        }
        Ok(())
    }

    /// Solves G[target] = sum c_h G[h] over `helpers`; `None` when outside their span.
    fn combination(&self, target: usize, helpers: &[usize]) -> Option<Vec<u8>> {
        let rows: Vec<&[u8]> = helpers.iter().map(|&h| self.generator.row(h)).collect();
        solve_combination(&rows, self.generator.row(target))
    }

    fn compute_tolerance(&self) -> usize {
        let n = self.n();
        let parity = n - self.k;
        match self.spec {
            // MDS: exactly n - k.
            CodeSpec::Rs { .. } | CodeSpec::Clay { .. } => parity,
            // Check every erasure set of growing size until one fails (bounded work: LRC
            // tolerates at most m + 1 arbitrary erasures, and the sets are few for the
            // geometries used in practice; beyond the budget, report what was proven).
            CodeSpec::Lrc { m, .. } => {
                let mut t = 0;
                let mut budget: u64 = 200_000;
                for size in 1..=(m + 1).min(parity) {
                    let mut ok = true;
                    for_each_subset(n, size, &mut |erased| {
                        budget = budget.saturating_sub(1);
                        if budget == 0 {
                            ok = false;
                            return false;
                        }
                        let avail: Vec<usize> = (0..n).filter(|i| !erased.contains(i)).collect();
                        let rows: Vec<&[u8]> = avail.iter().map(|&i| self.generator.row(i)).collect();
                        if independent_rows(&rows).len() < self.k {
                            ok = false;
                        }
                        ok
                    });
                    if !ok {
                        break;
                    }
                    t = size;
                }
                t
            }
        }
    }
}

/// Calls f on every size-`size` subset of 0..n in lexicographic order until it returns false.
fn for_each_subset(n: usize, size: usize, f: &mut dyn FnMut(&[usize]) -> bool) {
    let mut idx: Vec<usize> = (0..size).collect();
    if size > n {
        return;
    }
    loop {
        if !f(&idx) {
            return;
        }
        // Advance to the next combination.
        let mut i = size;
        loop {
            if i == 0 {
                return;
            }
            i -= 1;
            if idx[i] < n - size + i {
                idx[i] += 1;
                for j in i + 1..size {
                    idx[j] = idx[j - 1] + 1;
                }
                break;
            }
        }
    }
}

fn check_sizes(k: usize, m: usize, n: usize) -> Result<()> {
    if k == 0 {
        return Err(CodeError::InvalidParams("k must be at least 1 data shard".into()));
    }
    if m == 0 {
        return Err(CodeError::InvalidParams("m must be at least 1 parity shard".into()));
    }
    if n > MAX_SHARDS {
        return Err(CodeError::InvalidParams(format!("{n} shards exceed GF(2^8)'s limit of {MAX_SHARDS}")));
    }
    Ok(())
}

fn check_lengths(mut lens: impl Iterator<Item = usize>) -> Result<usize> {
    let first = lens.next().unwrap_or(0);
    match lens.find(|&l| l != first) {
        Some(other) => Err(CodeError::UnequalLengths(first, other)),
        None => Ok(first),
    }
}

impl Code for LinearCode {
    fn spec(&self) -> CodeSpec {
        self.spec
    }
    fn k(&self) -> usize {
        self.k
    }
    fn n(&self) -> usize {
        self.generator.rows
    }
    fn tolerance(&self) -> usize {
        *self.tolerance.get_or_init(|| self.compute_tolerance())
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()> {
        if data.len() != self.k {
            return Err(CodeError::WrongCount { what: "data shards", expected: self.k, got: data.len() });
        }
        if parity.len() != self.n() - self.k {
            return Err(CodeError::WrongCount { what: "parity shards", expected: self.n() - self.k, got: parity.len() });
        }
        check_lengths(data.iter().map(|d| d.len()).chain(parity.iter().map(|p| p.len())))?;
        kintsugi_gf::apply(&self.encoder, data, parity);
        Ok(())
    }

    fn decoder(&self, erased: &[usize], available: &[usize]) -> Result<Decoder> {
        for &i in erased.iter().chain(available) {
            self.check_index(i)?;
        }
        let mut avail: Vec<usize> = available.iter().copied().filter(|i| !erased.contains(i)).collect();
        avail.sort_unstable();
        avail.dedup();
        let mut targets: Vec<usize> = erased.to_vec();
        targets.sort_unstable();
        targets.dedup();
        let unrecoverable = || CodeError::Unrecoverable { erased: targets.clone(), available: avail.len(), tolerance: self.tolerance() };
        // Solve each target over all available rows (free variables zero, so the earliest
        // rows are preferred: data rows make the common case a cheap identity-heavy system).
        let mut combos = Vec::with_capacity(targets.len());
        for &t in &targets {
            combos.push(self.combination(t, &avail).ok_or_else(unrecoverable)?);
        }
        let used: Vec<usize> = (0..avail.len()).filter(|&c| combos.iter().any(|row| row[c] != 0)).collect();
        let mut coefs = Vec::with_capacity(targets.len() * used.len());
        for row in &combos {
            coefs.extend(used.iter().map(|&c| row[c]));
        }
        let sources = used.iter().map(|&c| avail[c]).collect();
        Ok(Decoder::from_matrix(sources, targets.clone(), CoefMatrix::new(targets.len(), used.len(), &coefs)))
    }

    fn repair_equation(&self, lost: usize, helpers: &[usize]) -> Result<RepairEquation> {
        self.check_index(lost)?;
        for &h in helpers {
            self.check_index(h)?;
        }
        let mut hs = helpers.to_vec();
        hs.dedup();
        if hs.contains(&lost) || hs.len() != helpers.len() {
            return Err(CodeError::InvalidParams(format!("helpers {helpers:?} must be distinct and exclude the lost shard {lost}")));
        }
        let c = self.combination(lost, &hs).ok_or(CodeError::HelpersInsufficient { lost, helpers: hs.clone() })?;
        let terms = hs.iter().zip(c).filter(|(_, c)| *c != 0).map(|(&h, c)| HelperTerm::scalar(h, c)).collect();
        Ok(RepairEquation { lost, sub_chunks: 1, terms, structured: None })
    }

    fn choose_helpers(&self, lost: usize, available: &[usize]) -> Result<Vec<usize>> {
        self.check_index(lost)?;
        let avail: Vec<usize> = available.iter().copied().filter(|&i| i != lost && i < self.n()).collect();
        // Local repair first: the rest of the group, when all of it is there.
        if let Some(group) = self.group_of(lost) {
            let rest: Vec<usize> = group.iter().copied().filter(|&i| i != lost).collect();
            if rest.iter().all(|i| avail.contains(i)) {
                return Ok(rest);
            }
        }
        // Otherwise the first independent available shards, keeping only those needed.
        let rows: Vec<&[u8]> = avail.iter().map(|&i| self.generator.row(i)).collect();
        let basis: Vec<usize> = independent_rows(&rows).into_iter().map(|i| avail[i]).collect();
        let eq = self.repair_equation(lost, &basis).map_err(|_| CodeError::Unrecoverable {
            erased: vec![lost],
            available: avail.len(),
            tolerance: self.tolerance(),
        })?;
        Ok(eq.helpers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rs_generator_is_isal_cauchy() {
        let c = LinearCode::rs(2, 1).unwrap();
        assert_eq!(c.generator_row(2), &[0x8e, 0xf4]);
    }

    #[test]
    fn lrc_tolerates_m_plus_one() {
        for (k, l, m) in [(6, 2, 2), (12, 2, 2), (6, 3, 2), (4, 2, 1), (10, 2, 3)] {
            let c = LinearCode::lrc(k, l, m).unwrap();
            assert_eq!(c.tolerance(), m + 1, "lrc:{k},{l},{m}");
        }
        assert_eq!(LinearCode::rs(10, 4).unwrap().tolerance(), 4);
    }

    #[test]
    fn lrc_local_repair_uses_group() {
        let c = LinearCode::lrc(6, 2, 2).unwrap();
        let all: Vec<usize> = (0..10).collect();
        assert_eq!(c.choose_helpers(1, &all).unwrap(), vec![0, 2, 6]);
        assert_eq!(c.choose_helpers(7, &all).unwrap(), vec![3, 4, 5]);
        let eq = c.repair_equation(1, &[0, 2, 6]).unwrap();
        assert!(eq.terms.iter().all(|t| t.coefs == vec![1]), "local repair is XOR");
        // Group broken: falls back to a global repair with k helpers.
        let avail: Vec<usize> = (0..10).filter(|&i| i != 0).collect();
        let h = c.choose_helpers(1, &avail).unwrap();
        assert!(!h.contains(&0) && !h.contains(&1));
        assert!(c.repair_equation(1, &h).is_ok());
    }

    #[test]
    fn subsets_enumerate() {
        let mut seen = Vec::new();
        for_each_subset(4, 2, &mut |s| {
            seen.push(s.to_vec());
            true
        });
        assert_eq!(seen.len(), 6);
        assert_eq!(seen[5], vec![2, 3]);
    }
}
