//! Utilization-based demotion (Ingens §4.3; ingens.md 2.6). A free inside a
//! huge page clears the freed pages' util bits but keeps the huge mapping
//! (the kernel leaves it whole: `Policy::keeps_huge_on_free`), so in-use huge
//! pages are not split by every `free` as Linux splits them. When a huge
//! region's utilization falls below the demotion threshold it is split and
//! the base pages whose bits are clear go back to the allocator: bloat stays
//! under the threshold's bound (10% at 90%).
//!
//! `demote=free` (default, the paper) demotes at the free; `demote=pressure`
//! defers it until free memory falls below `pressure_free` of the total,
//! then demotes the least utilized first, keeping huge pages while memory is
//! plentiful.

use super::{DemoteOn, Ingens};
use crate::policy::Ctx;

impl Ingens {
    /// The program freed [start, start + len): clear util bits, demote the
    /// huge regions that fell below the threshold.
    pub(super) fn freed(&mut self, k: &mut Ctx<'_>, pid: u16, start: u64, len: u64) {
        let (rb, bs) = (self.region_bytes, self.base_shift);
        let end = start + len;
        let mut r = start & !(rb - 1);
        while r < end {
            let a = ((start.max(r) - r) >> bs) as usize;
            let b = ((end.min(r + rb) - r) >> bs) as usize;
            let u = self.util.clear(pid, r, a, b);
            let huge = k.view().region(pid, r).is_some_and(|s| s.leaf_size >= self.size);
            if huge && u < self.keep_need {
                match self.cfg.demote {
                    DemoteOn::Free => self.demote_region(k, pid, r),
                    DemoteOn::Pressure => {
                        self.deferred.insert((pid, r));
                    }
                }
            } else if !huge {
                self.util.forget_if_empty(pid, r);
            }
            r += rb;
        }
    }

    /// Split the huge region and free its pages whose util bits are clear.
    fn demote_region(&mut self, k: &mut Ctx<'_>, pid: u16, r: u64) {
        let util = &self.util;
        if let Some(freed) = k.split_and_reclaim(pid, r, &|j| util.is_set(pid, r, j)) {
            self.stats.demotions += 1;
            self.stats.reclaimed_pages += freed;
        }
        self.util.forget_if_empty(pid, r);
    }

    /// `demote=pressure`: while free memory is below the watermark, demote
    /// deferred regions, least utilized first (ties: pid, address).
    pub(super) fn relieve_pressure(&mut self, k: &mut Ctx<'_>) {
        if self.deferred.is_empty() {
            return;
        }
        let low = |k: &Ctx<'_>, w: f64| (k.view().free_frames() as f64) < w * k.view().total_frames() as f64;
        if !low(k, self.cfg.pressure_free) {
            return;
        }
        let mut order: Vec<(u32, u16, u64)> = self.deferred.iter().map(|&(p, r)| (self.util.count(p, r), p, r)).collect();
        order.sort_unstable();
        for (u, pid, r) in order {
            if !low(k, self.cfg.pressure_free) {
                break;
            }
            self.deferred.remove(&(pid, r));
            let still_huge = k.view().region(pid, r).is_some_and(|s| s.leaf_size >= self.size);
            if still_huge && u < self.keep_need {
                self.demote_region(k, pid, r);
            }
        }
    }
}
