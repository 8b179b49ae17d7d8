//! YCSB's scrambled zipfian key chooser (Gray et al., "Quickly generating billion-record
//! synthetic databases", SIGMOD'94, as YCSB's ZipfianGenerator implements it): rank r is
//! drawn with probability proportional to 1/(r+1)^theta, then hashed so the hot keys are
//! spread over the key space instead of being the first ones.

use rand::Rng;

pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    /// Over `n` >= 1 items with skew `theta` in (0, 1) (YCSB's default is 0.99).
    pub fn new(n: u64, theta: f64) -> Self {
        let n = n.max(1);
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let eta = if n > 1 { (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan) } else { 0.0 };
        Zipfian { n, theta, alpha: 1.0 / (1.0 - theta), zetan, eta }
    }

    /// A rank: 0 is the most popular.
    pub fn rank(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
    }

    /// A key index: the rank scrambled by FNV-1a, as YCSB's ScrambledZipfianGenerator.
    pub fn key(&self, rng: &mut impl Rng) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.rank(rng).to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h % self.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn ranks_follow_the_zipf_law() {
        // P(rank r) = 1 / ((r+1)^theta zeta(n)): check the head against the closed form.
        let (n, theta, draws) = (1000u64, 0.99, 400_000);
        let z = Zipfian::new(n, theta);
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[z.rank(&mut rng) as usize] += 1;
        }
        let zn = zeta(n, theta);
        for r in [0usize, 1, 4, 9] {
            let want = 1.0 / ((r + 1) as f64).powf(theta) / zn;
            let got = counts[r] as f64 / draws as f64;
            assert!((got - want).abs() / want < 0.08, "rank {r}: {got:.4} vs {want:.4}");
        }
        assert!(counts.iter().all(|&c| c < draws / 4), "no rank takes everything");
    }

    #[test]
    fn keys_stay_in_range_and_one_item_works() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let z = Zipfian::new(7, 0.99);
        assert!((0..10_000).all(|_| z.key(&mut rng) < 7));
        let one = Zipfian::new(1, 0.99);
        assert!((0..100).all(|_| one.key(&mut rng) == 0));
    }
}
