//! Page Skew Ratio (FHPM §3.1): PSR = 1 - Ns / 512, where Ns is the number of
//! 4KB regions of a 2MB page accessed during the stage-2 window (the
//! companion PTEs with A = 1, spec §11 "Ns definition"). PSR 0: every region
//! used (balanced); near 1: a few regions used (unbalanced, hot bloat).

/// PSR of a huge page of `pages` base pages of which `ns` were accessed.
pub fn psr(ns: u32, pages: u32) -> f64 {
    if pages == 0 {
        return 0.0;
    }
    1.0 - ns.min(pages) as f64 / pages as f64
}

/// Table 1's bins: [0,0.1), [0.1,0.2), ..., [0.9,1.0] (the last one closed:
/// a page with no accessed region has PSR exactly 1).
pub const PSR_BINS: usize = 10;

pub const PSR_BIN_LABELS: [&str; PSR_BINS] =
    ["[0,0.1)", "[0.1,0.2)", "[0.2,0.3)", "[0.3,0.4)", "[0.4,0.5)", "[0.5,0.6)", "[0.6,0.7)", "[0.7,0.8)", "[0.8,0.9)", "[0.9,1.0]"];

/// The Table 1 bin of a PSR. Computed from Ns exactly (no rounding of the
/// ratio): bin b holds 10 x (pages - ns) / pages in [b, b+1).
pub fn psr_bin(ns: u32, pages: u32) -> usize {
    let skew = pages.saturating_sub(ns) as u64 * 10;
    ((skew / pages.max(1) as u64) as usize).min(PSR_BINS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psr_and_its_bin_are_exact() {
        assert_eq!(psr(512, 512), 0.0);
        assert_eq!(psr(0, 512), 1.0);
        assert_eq!(psr(256, 512), 0.5);
        assert_eq!(psr_bin(256, 512), 5); // 0.5 opens [0.5,0.6)
        assert_eq!(psr_bin(257, 512), 4);
        assert_eq!(psr_bin(10, 512), 9); // the Fig 8 microbenchmark: PSR 0.98
        assert_eq!(psr_bin(0, 512), 9);
        assert_eq!(psr_bin(512, 512), 0);
        // 461 accessed: PSR = 51/512 = 0.0996 -> [0,0.1); 460: 0.1016 -> [0.1,0.2).
        assert_eq!(psr_bin(461, 512), 0);
        assert_eq!(psr_bin(460, 512), 1);
    }
}
