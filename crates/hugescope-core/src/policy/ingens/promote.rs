//! Promote-kth (Ingens §4.2, §4.7, §5.1; ingens.md 2.5): the background
//! promoter that replaces khugepaged.
//!
//! It wakes on a fault handler's signal (a region crossed the utilization
//! threshold) and on a timer (`promote_sleep_s`, 10 s). Each wake first
//! drains the **high** queue, then (timer wakes) scans `scan_regions` regions
//! (8 = 16MB, Linux's khugepaged default: the 1.6 MB/s of Table 4) of one
//! process's address space for regions at the threshold. Both lists are
//! served in fairness order: the process with the largest promotion metric
//! first (§4.7; the paper orders the normal list by it, and we order the
//! high queue the same way so contended contiguity is shared whichever list
//! asked: docs/assumptions.md). A process whose full pass promoted nothing
//! leaves the normal list for `exclude_s` (120 s), so an adversarial process
//! cannot monopolise the scanner.
//!
//! Promote-kth is one kernel thread: its work takes the daemon time it costs
//! (copying, compaction). After a promotion that cost time, the thread is
//! busy until that time has passed, so the next high-queue request is served
//! by a wake scheduled then, not in the same instant; meanwhile other
//! processes' requests arrive and the fairness order applies to them too.
//! (With zero OS costs everything is served at once.)
//!
//! A promotion collapses in place when the base pages' frames already form
//! an aligned 2MB extent (no copy), else allocates a fresh block (compacting
//! up to `compact_mb` for it) and copies. A refusal for lack of memory or
//! budget leaves the request queued for the next wake (ingens.md 2.5 Rec.).

use super::{fairness, Ingens};
use crate::os::Refusal;
use crate::os::AllocMode;
use crate::policy::Ctx;

impl Ingens {
    /// A region still worth promoting: inside one VMA, not huge yet, and at
    /// the utilization threshold.
    fn promotable(&self, k: &Ctx<'_>, pid: u16, start: u64) -> bool {
        k.view().region(pid, start).is_some_and(|s| s.inside_vma && s.leaf_size < self.size) && self.util.count(pid, start) >= self.need
    }

    fn promote_region(&mut self, k: &mut Ctx<'_>, pid: u16, start: u64) -> Result<(), Refusal> {
        let r = if k.can_collapse_in_place(pid, start, self.size) {
            k.collapse_in_place(pid, start, self.size).inspect(|_| self.stats.promotions_in_place += 1)
        } else {
            k.promote(pid, start, self.size, AllocMode::Compact { max_pages: self.compact_pages() })
        };
        match r {
            Ok(()) => {
                self.util.fill(pid, start);
                self.tracker.merge(pid, start, self.pages);
                self.pass_promotions[pid as usize] += 1;
            }
            Err(_) => self.stats.promotion_failures += 1,
        }
        r
    }

    /// Promote the high queue's requests, fairest claim first, until it is
    /// empty, memory (or the budget) runs out, or a promotion took time (the
    /// thread is then busy: the rest waits for a wake once that time has
    /// passed).
    pub(super) fn drain_high(&mut self, k: &mut Ctx<'_>) {
        loop {
            if self.wake_pending {
                return; // busy: a wake is already scheduled for the rest
            }
            let waiting: Vec<(u16, f64)> =
                (0..self.high.len() as u16).filter(|&p| !self.high[p as usize].is_empty()).map(|p| (p, self.metric(k, p))).collect();
            let Some(pid) = fairness::first(&waiting) else { return };
            let start = self.high[pid as usize].pop_front().expect("a waiting process has a request");
            if !self.promotable(k, pid, start) {
                self.queued.remove(&(pid, start));
                continue;
            }
            let before = k.daemon_seconds();
            match self.promote_region(k, pid, start) {
                Ok(()) => {
                    self.stats.promotions_high += 1;
                    self.queued.remove(&(pid, start));
                    let busy = k.daemon_seconds() - before;
                    if busy > 0.0 && self.high.iter().any(|q| !q.is_empty()) {
                        self.wake_pending = true;
                        k.schedule_in(busy, super::WAKE);
                    }
                }
                Err(Refusal::NoMemory | Refusal::Budget) => {
                    self.high[pid as usize].push_front(start);
                    return;
                }
                Err(_) => {
                    self.queued.remove(&(pid, start));
                }
            }
        }
    }

    /// The normal list: scan `scan_regions` regions of the process with the
    /// largest metric among those not excluded, from its scan cursor.
    pub(super) fn scan(&mut self, k: &mut Ctx<'_>) {
        let now = k.now();
        let n = k.view().processes() as u16;
        if n == 0 {
            return;
        }
        self.ensure(n - 1);
        let open: Vec<(u16, f64)> = (0..n)
            .filter(|&p| self.excluded_until[p as usize] <= now && k.view().vmas(p).next().is_some())
            .map(|p| (p, self.metric(k, p)))
            .collect();
        let Some(pid) = fairness::first(&open) else { return };
        // The cost of reading a region's PTEs (khugepaged's per-PTE scan cost).
        let scan_us = self.pages as f64 * 0.005;
        let mut examined = 0;
        while examined < self.cfg.scan_regions {
            let cursor = k.view().scan_cursor(pid);
            let next = k.view().regions(pid).find(|&(v, ri, s)| s >= cursor && v.region_inside(ri)).map(|(_, _, s)| s);
            let Some(start) = next else {
                // A full pass: excluded for a while if it promoted nothing.
                if self.pass_promotions[pid as usize] == 0 {
                    self.excluded_until[pid as usize] = now + self.cfg.exclude_s;
                    self.stats.exclusions += 1;
                }
                self.pass_promotions[pid as usize] = 0;
                k.set_scan_cursor(pid, 0);
                return;
            };
            examined += 1;
            self.stats.regions_scanned += 1;
            k.set_scan_cursor(pid, start + self.region_bytes);
            k.charge_policy_us(scan_us);
            if self.promotable(k, pid, start) {
                match self.promote_region(k, pid, start) {
                    Ok(()) => self.stats.promotions_scan += 1,
                    Err(Refusal::NoMemory | Refusal::Budget) => return,
                    Err(_) => {}
                }
            }
        }
    }
}
