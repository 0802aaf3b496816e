//! Zipf-distributed ranks: YCSB's ZipfianGenerator (Gray et al., "Quickly
//! generating billion-record synthetic databases", SIGMOD'94), shared by the
//! key-value store (YCSB keys), the B+-tree (zipfian lookups), the SVM's
//! feature ids (word frequencies of text datasets) and the web server's
//! popular rows.
//!
//! Gray's inversion is valid for a skew `theta` in [0, 1): theta 0 is uniform,
//! YCSB uses 0.99. The item count may grow (YCSB's "latest" distribution).

use crate::rng::Rng;

/// YCSB's default skew.
pub const YCSB_THETA: f64 = 0.99;
/// Largest skew Gray's method accepts here: at theta = 1 its exponent
/// 1 / (1 - theta) is infinite.
pub const MAX_THETA: f64 = 0.999;

/// sum_{i=a}^{b} i^-theta: exact up to 10M terms, Euler-Maclaurin beyond
/// (relative error far below what sampling can observe).
pub fn zeta_range(a: u64, b: u64, theta: f64) -> f64 {
    if a > b {
        return 0.0;
    }
    const EXACT: u64 = 10_000_000;
    if b - a < EXACT {
        return (a..=b).map(|i| (i as f64).powf(-theta)).sum();
    }
    let mid = a + EXACT;
    let head: f64 = (a..mid).map(|i| (i as f64).powf(-theta)).sum();
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let (x0, x1) = (mid as f64, b as f64);
    let integral = (x1.powf(1.0 - theta) - x0.powf(1.0 - theta)) / (1.0 - theta);
    head + integral + (f(x0) + f(x1)) / 2.0 + (df(x1) - df(x0)) / 12.0
}

pub struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    zeta2: f64,
    alpha: f64,
    eta: f64,
}

impl Zipf {
    /// YCSB's generator over `n` items (theta 0.99).
    pub fn new(n: u64) -> Self {
        Zipf::with_theta(n, YCSB_THETA)
    }
    /// A generator with skew `theta` in [0, MAX_THETA] (callers validate it).
    pub fn with_theta(n: u64, theta: f64) -> Self {
        let theta = theta.clamp(0.0, MAX_THETA);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let mut z = Zipf { n: 0, theta, zetan: 0.0, zeta2, alpha: 1.0 / (1.0 - theta), eta: 0.0 };
        z.grow(n.max(1));
        z
    }
    pub fn grow(&mut self, n: u64) {
        if n <= self.n {
            return;
        }
        self.zetan += zeta_range(self.n + 1, n, self.theta);
        self.n = n;
        self.eta = if n > 2 {
            (1.0 - (2.0 / n as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
        } else {
            0.0
        };
    }
    /// A rank in 0..n, rank 0 the most popular.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.zeta2 || self.n <= 2 {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_follows_theta() {
        let n = 200_000;
        let share_top10 = |theta: f64| {
            let z = Zipf::with_theta(100_000, theta);
            let mut rng = Rng::new(3);
            (0..n).filter(|_| z.next(&mut rng) < 10).count() as f64 / n as f64
        };
        // theta 0.99 over 1e5 items: the top 10 ranks get roughly a quarter;
        // theta 0 is uniform (1e-4 of draws).
        let hi = share_top10(0.99);
        assert!(hi > 0.2 && hi < 0.35, "{hi}");
        let mid = share_top10(0.5);
        assert!(mid > 0.005 && mid < hi / 2.0, "{mid}");
        assert!(share_top10(0.0) < 0.001);
    }

    #[test]
    fn euler_maclaurin_tail_matches_the_exact_sum() {
        for theta in [0.5, 0.99] {
            let exact: f64 = (10_000_001u64..=12_000_000).map(|i| (i as f64).powf(-theta)).sum();
            let approx = zeta_range(1, 12_000_000, theta) - zeta_range(1, 10_000_000, theta);
            assert!((exact - approx).abs() / exact < 1e-9, "{theta}");
        }
    }
}
