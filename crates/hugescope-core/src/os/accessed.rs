//! Accessed bits and access coverage, the OS side of reference tracking
//! (Linux: mm/rmap.c folio_referenced / ptep_clear_young, mm/page_idle.c).
//! Clearing the bits shoots the range down so the next access walks and sets
//! them again; coverage tracking is HawkEye's per-base-page access record.

use super::aspace::ACCESSED;
use super::kernel::Kernel;

impl Kernel {
    /// Turn per-base-page coverage tracking on or off (HawkEye's "access
    /// coverage" with every access counted, as the PCC artifact models it:
    /// linux-thp-and-hawkeye.md B.6). Turning it on allocates a bitset per VMA
    /// if needed and clears every bit (a new window starts); turning it off
    /// keeps the bits for `take_coverage`. While off, nothing is paid per access.
    pub fn track_coverage(&mut self, on: bool) {
        if on {
            for sp in self.spaces.iter_mut() {
                for v in sp.vmas.iter_mut() {
                    let words = v.flags.len().div_ceil(64);
                    v.cov.clear();
                    v.cov.resize(words, 0);
                }
            }
        }
        self.coverage_on = on;
    }

    pub fn coverage_tracking(&self) -> bool {
        self.coverage_on
    }

    /// Base pages of the PMD-level region at `start` accessed since tracking
    /// was turned on (or since the last take of this region); clears them.
    /// Only the part of the region inside the VMA holding `start` counts.
    pub fn take_coverage(&mut self, pid: u16, start: u64) -> u32 {
        let (bs, len) = (self.shape.base_shift, self.region_bytes());
        let start = start & !(len - 1);
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return 0 };
        let Some(vi) = sp.find(start).or_else(|| sp.find(start + len - 1)) else { return 0 };
        let v = &mut sp.vmas[vi];
        let (lo, hi) = (start.max(v.start), (start + len).min(v.end));
        if lo >= hi {
            return 0;
        }
        let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
        v.take_cov(a, b)
    }

    /// Clear the accessed bits of the base pages (and PMD bits if `pmd`) in a
    /// range, with the TLB invalidation that makes later accesses set them again.
    pub fn clear_accessed(&mut self, pid: u16, start: u64, len: u64, pmd: bool) {
        let (bs, rs) = (self.shape.base_shift, self.shape.region_shift);
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return };
        let mut touched = false;
        for v in sp.vmas.iter_mut() {
            let lo = start.max(v.start);
            let hi = (start + len).min(v.end);
            if lo >= hi {
                continue;
            }
            let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
            for f in &mut v.flags[a..b] {
                *f &= !ACCESSED;
            }
            if pmd {
                let (r0, r1) = (v.region_index(lo, rs), v.region_index(hi - 1, rs));
                for r in r0..=r1 {
                    v.pmd_a[r] = false;
                }
            }
            touched = true;
        }
        if touched {
            self.stats.accessed_bit_clears += 1;
            self.charge_us(((len >> bs) as f64) * self.costs.scan_pte_us);
            self.shootdown(pid, start, start + len);
        }
    }
}
