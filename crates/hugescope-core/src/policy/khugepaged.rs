//! khugepaged, the Linux collapse daemon (mm/khugepaged.c), as a reusable
//! scanner. One cursor walks one address space at a time, VMAs in address
//! order, over each 2MB-aligned range inside an eligible VMA. A pass has a
//! budget of `pages_to_scan`: each range costs 512 whatever its outcome and
//! each skipped VMA 1; so the default 4096 scans 8 ranges per pass, then the
//! thread sleeps `scan_sleep`; a failed huge allocation ends the pass and
//! sleeps `alloc_sleep` (see linux-thp-and-hawkeye.md A.3).

use crate::os::{AllocMode, Refusal};
use crate::policy::Ctx;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct KhugepagedConfig {
    pub pages_to_scan: u64,
    pub scan_sleep_s: f64,
    pub alloc_sleep_s: f64,
    pub max_ptes_none: u32,
    /// At least one young (accessed) base page is required.
    pub require_referenced: bool,
    /// khugepaged/defrag: collapse allocations may compact.
    pub defrag: bool,
    /// Cap on base pages migrated by one direct compaction.
    pub compact_pages: u64,
}

impl Default for KhugepagedConfig {
    fn default() -> Self {
        KhugepagedConfig {
            pages_to_scan: 4096,
            scan_sleep_s: 10.0,
            alloc_sleep_s: 60.0,
            max_ptes_none: 511,
            require_referenced: true,
            defrag: true,
            compact_pages: 1 << 14,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct KhugepagedStats {
    pub passes: u64,
    pub full_scans: u64,
    pub ranges_scanned: u64,
    pub collapsed: u64,
    pub failed_alloc: u64,
    pub exceed_none: u64,
    pub not_referenced: u64,
}

pub struct Khugepaged {
    pub cfg: KhugepagedConfig,
    pub stats: KhugepagedStats,
    /// The process being scanned (Linux: khugepaged_scan.mm_slot). Where in
    /// it the scan is, is the kernel's shared scan cursor of that process
    /// (`MmView::scan_cursor`, Linux: khugepaged_scan.address).
    pid: usize,
    /// The last region of a VMA was scanned: moving on to the next VMA takes
    /// one step of the pass (the step bound below counts it).
    leaving_vma: bool,
}

impl Khugepaged {
    pub fn new(cfg: KhugepagedConfig) -> Self {
        Khugepaged { cfg, stats: KhugepagedStats::default(), pid: 0, leaving_vma: false }
    }

    /// One scan pass. `eligible(advised)` says whether a VMA may be collapsed
    /// (THP `enabled`). Returns the seconds to sleep before the next pass.
    pub fn pass(&mut self, k: &mut Ctx<'_>, size: usize, eligible: impl Fn(bool) -> bool) -> f64 {
        self.stats.passes += 1;
        let mut budget = self.cfg.pages_to_scan as i64;
        let per_range = (k.region_bytes() >> k.shape().base_shift) as i64;
        let nspaces = k.view().processes();
        if nspaces == 0 {
            return self.cfg.scan_sleep_s;
        }
        let mut steps = 0usize;
        // A pass never goes round everything more than about once, even when
        // no range costs anything (none lies wholly inside its VMA).
        let max_steps = 1 + (0..nspaces).map(|p| k.view().vmas(p as u16).map(|v| v.regions() + 1).sum::<usize>() + 1).sum::<usize>();
        while budget > 0 && steps <= max_steps {
            steps += 1;
            let pid = self.pid as u16;
            if self.leaving_vma {
                self.leaving_vma = false;
                continue;
            }
            let view = k.view();
            let cursor = view.scan_cursor(pid);
            let Some(v) = view.vma_from(pid, cursor).and_then(|i| view.vma(pid, i)) else {
                self.next_mm(k, nspaces);
                continue;
            };
            // The cursor is a region start of this VMA, or at or before its start.
            let region = if cursor <= v.start() { 0 } else { ((cursor - v.region_start(0)) >> k.shape().region_shift) as usize };
            if !eligible(v.advised()) || region >= v.regions() {
                if region == 0 {
                    budget -= 1; // a skipped VMA costs one page
                }
                k.set_scan_cursor(pid, v.end());
                continue;
            }
            let start = v.region_start(region);
            if region + 1 < v.regions() {
                k.set_scan_cursor(pid, v.region_start(region + 1));
            } else {
                k.set_scan_cursor(pid, v.end());
                self.leaving_vma = true;
            }
            let Some(st) = k.view().region(pid, start) else { continue };
            if !st.inside_vma {
                continue; // only 2MB-aligned ranges wholly inside the VMA are scanned
            }
            budget -= per_range;
            self.stats.ranges_scanned += 1;
            k.charge_policy_us(per_range as f64 * 0.005);
            if st.leaf_size >= size || st.present == 0 {
                continue;
            }
            if per_range as u32 - st.present > self.cfg.max_ptes_none {
                self.stats.exceed_none += 1;
                continue;
            }
            // The leaves' accessed bits (one per leaf: MmView), as
            // khugepaged's referenced check reads the PTEs' young bits.
            if self.cfg.require_referenced && st.accessed == 0 {
                self.stats.not_referenced += 1;
                continue;
            }
            let mode = if self.cfg.defrag { AllocMode::Compact { max_pages: self.cfg.compact_pages } } else { AllocMode::FreeOnly };
            match k.promote(pid, start, size, mode) {
                Ok(()) => self.stats.collapsed += 1,
                Err(Refusal::NoMemory) => {
                    self.stats.failed_alloc += 1;
                    return self.cfg.alloc_sleep_s;
                }
                Err(_) => {}
            }
        }
        self.cfg.scan_sleep_s
    }

    /// The process is done: its cursor goes back to its start for the next
    /// visit, and the scan moves to the next process (wrapping: a full scan).
    fn next_mm(&mut self, k: &mut Ctx<'_>, nspaces: usize) {
        k.set_scan_cursor(self.pid as u16, 0);
        self.pid += 1;
        self.leaving_vma = false;
        if self.pid >= nspaces {
            self.pid = 0;
            self.stats.full_scans += 1;
        }
    }
}
