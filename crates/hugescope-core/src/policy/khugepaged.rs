//! khugepaged, the Linux collapse daemon (mm/khugepaged.c), as a reusable
//! scanner. One cursor walks one address space at a time, VMAs in address
//! order, over each 2MB-aligned range inside an eligible VMA. A pass has a
//! budget of `pages_to_scan`: each range costs 512 whatever its outcome and
//! each skipped VMA 1; so the default 4096 scans 8 ranges per pass, then the
//! thread sleeps `scan_sleep`; a failed huge allocation ends the pass and
//! sleeps `alloc_sleep` (see linux-thp-and-hawkeye.md A.3).

use crate::os::{kernel::Refusal, AllocMode, Kernel};
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
    pid: usize,
    vma: usize,
    region: usize,
}

impl Khugepaged {
    pub fn new(cfg: KhugepagedConfig) -> Self {
        Khugepaged { cfg, stats: KhugepagedStats::default(), pid: 0, vma: 0, region: 0 }
    }

    /// One scan pass. `eligible(advised)` says whether a VMA may be collapsed
    /// (THP `enabled`). Returns the seconds to sleep before the next pass.
    pub fn pass(&mut self, k: &mut Kernel, size: usize, eligible: impl Fn(bool) -> bool) -> f64 {
        self.stats.passes += 1;
        let mut budget = self.cfg.pages_to_scan as i64;
        let per_range = (k.region_bytes() >> k.shape().base_shift) as i64;
        let nspaces = k.spaces().len();
        if nspaces == 0 {
            return self.cfg.scan_sleep_s;
        }
        let mut steps = 0usize;
        let max_steps = 1 + k.spaces().iter().map(|s| s.vmas.iter().map(|v| v.regions() + 1).sum::<usize>() + 1).sum::<usize>();
        while budget > 0 && steps <= max_steps {
            steps += 1;
            let Some(sp) = k.spaces().get(self.pid) else {
                self.next_mm(nspaces);
                continue;
            };
            let Some(v) = sp.vmas.get(self.vma) else {
                self.next_mm(nspaces);
                continue;
            };
            if !eligible(v.advised) || self.region >= v.regions() {
                if self.region == 0 {
                    budget -= 1; // a skipped VMA costs one page
                }
                self.vma += 1;
                self.region = 0;
                continue;
            }
            let start = v.region_start(self.region, k.shape().region_shift);
            let pid = self.pid as u16;
            self.region += 1;
            let Some(st) = k.region_state(pid, start) else { continue };
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

    fn next_mm(&mut self, nspaces: usize) {
        self.pid += 1;
        self.vma = 0;
        self.region = 0;
        if self.pid >= nspaces {
            self.pid = 0;
            self.stats.full_scans += 1;
        }
    }
}
