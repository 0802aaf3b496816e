//! Fair distribution of contiguity (Ingens §4.6, §4.7; ingens.md 2.8).
//!
//! Each process has a share `S` (default 10,000) and is charged for the
//! huge-page memory it holds, idle memory more than active:
//! `M = S / (H x (f + tau x (1 - f)))`, with `H` its huge-backed bytes
//! (at least one huge page, so M stays finite: ingens.md 2.8 Rec.), `f` the
//! share of its huge pages that are idle (not frequent) and `0 < tau <= 1`
//! (0.25: an idle page costs 4x an active one, ingens.md §3 item 7). A
//! larger `M` is a stronger claim: Promote-kth serves the largest `M` first,
//! which greedily minimises `O = sum (M_i - mean M)^2`.

use serde::Serialize;

/// The promotion metric of one process.
pub fn metric(share: f64, huge_bytes: u64, idle_fraction: f64, tau: f64, huge_page: u64) -> f64 {
    let h = huge_bytes.max(huge_page) as f64;
    share / (h * (idle_fraction + tau * (1.0 - idle_fraction)))
}

/// Index of the process to serve first among `candidates` (pid, metric):
/// largest metric, ties to the lowest pid (ingens.md 7.4).
pub fn first(candidates: &[(u16, f64)]) -> Option<u16> {
    candidates.iter().copied().reduce(|best, c| if c.1 > best.1 || (c.1 == best.1 && c.0 < best.0) { c } else { best }).map(|c| c.0)
}

/// One process's standing, for the result.
#[derive(Clone, Debug, Serialize)]
pub struct Standing {
    pub pid: u16,
    pub share: f64,
    pub huge_bytes: u64,
    pub idle_fraction: f64,
    pub metric: f64,
}

/// The objective `O` and its coefficient of variation `sqrt(O / n) / mean`.
pub fn objective(metrics: &[f64]) -> (f64, f64) {
    if metrics.is_empty() {
        return (0.0, 0.0);
    }
    let n = metrics.len() as f64;
    let mean = metrics.iter().sum::<f64>() / n;
    let o: f64 = metrics.iter().map(|m| (m - mean).powi(2)).sum();
    (o, if mean > 0.0 { (o / n).sqrt() / mean } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB2: u64 = 2 << 20;

    /// Worked by hand: three processes with equal shares.
    /// A: 10 huge pages (20 MiB), all active: M = 10000 / (20971520 x 0.25) = 1.9073e-3.
    /// B: 4 huge pages, half idle: M = 10000 / (8388608 x (0.5 + 0.125)) = 1.9073e-3.
    /// C: none (counted as one page), M = 10000 / (2097152 x 0.25) = 1.9073e-2.
    /// Order: C first; A and B tie (equal M) and the lower pid wins.
    #[test]
    fn hand_worked_order() {
        let a = metric(10_000.0, 10 * MB2, 0.0, 0.25, MB2);
        let b = metric(10_000.0, 4 * MB2, 0.5, 0.25, MB2);
        let c = metric(10_000.0, 0, 0.0, 0.25, MB2);
        assert!((a - 1.9073486328125e-3).abs() < 1e-12);
        assert!((b - 1.9073486328125e-3).abs() < 1e-12);
        assert!((c - 1.9073486328125e-2).abs() < 1e-12);
        assert_eq!(first(&[(0, a), (1, b), (2, c)]), Some(2));
        assert_eq!(first(&[(0, a), (1, b)]), Some(0));
        // Idle memory costs more: with tau = 1 idleness is ignored.
        let b1 = metric(10_000.0, 4 * MB2, 0.5, 1.0, MB2);
        assert!((b1 - 10_000.0 / (4.0 * MB2 as f64)).abs() < 1e-15);
        // A larger share is a stronger claim.
        assert!(metric(20_000.0, 10 * MB2, 0.0, 0.25, MB2) > a);
        let (o, cv) = objective(&[1.0, 1.0, 4.0]);
        assert!((o - 6.0).abs() < 1e-12 && (cv - (2.0f64).sqrt() / 2.0).abs() < 1e-12);
    }
}
