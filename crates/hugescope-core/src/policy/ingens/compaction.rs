//! Proactive batched compaction (Ingens §4.4; ingens.md 2.7): every
//! `compact_period_s` (5 s), if the free memory fragmentation index at the
//! huge-page order exceeds `compact_fmfi` (0.8), one round migrates at most
//! `compact_mb` (100 MB) of base pages, stopping once FMFI is back at the
//! threshold, and never moves a frequently accessed page (Scan-kth's
//! frequency). Its CPU time is Promote-kth's (daemon time); each move costs a
//! copy and a TLB invalidation on the program's cpus.

use super::Ingens;
use crate::policy::Ctx;

impl Ingens {
    pub(super) fn compact_round(&mut self, k: &mut Ctx<'_>) {
        let order = k.shape().region_shift - self.base_shift;
        if k.view().fmfi(order) <= self.cfg.compact_fmfi {
            return;
        }
        let tracker = &self.tracker;
        let cap = self.compact_pages();
        let r = k.compact_proactive(order, cap, self.cfg.compact_fmfi, &mut |pid, va, o| !tracker.any_frequent(pid, va, 1u64 << o));
        self.stats.compaction_rounds += 1;
        self.stats.compaction_migrated_pages += r.migrated_pages;
        self.stats.compaction_successes += r.success as u64;
    }
}
