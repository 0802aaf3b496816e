//! Compaction deferral (Linux mm/compaction.c: `defer_compaction`,
//! `compaction_deferred`, `compaction_defer_reset`; the call sites in
//! `try_to_compact_pages` and `__alloc_pages_direct_compact`, Linux 3.x to
//! 4.x, so the Ingens paper's Linux 4.3).
//!
//! Why it exists: a compaction that crossed the whole zone without freeing a
//! block will most likely fail again soon, and each attempt costs a full scan.
//! So after such a failure the zone skips the next attempts at that order and
//! beyond, backing off exponentially: after the k-th failure in a row,
//! `1 << k` attempts are considered (capped at `1 << COMPACT_MAX_DEFER_SHIFT`
//! = 64), of which all but the last are skipped. A success resets the back-off.
//!
//! Which compactions defer. Linux defers only after a *synchronous*
//! compaction failed ("as async compaction considers a subset of pageblocks,
//! only defer if the failure was a sync compaction failure";
//! `mode != MIGRATE_ASYNC && status == COMPACT_COMPLETE`). In 4.3 a THP page
//! fault of a user process compacts asynchronously only
//! (`__alloc_pages_slowpath`: "use asynchronous memory compaction for THP
//! unless it is khugepaged trying to collapse"); khugepaged, a kernel thread,
//! compacts in `MIGRATE_SYNC_LIGHT`. Every direct compaction *checks* the
//! deferral (a deferred THP allocation gives up: "goto nopage") and every
//! allocation that succeeded after compaction resets it. Here the fault path
//! is the asynchronous caller and work done from a daemon's timer (khugepaged,
//! a promotion thread) the synchronous one: the kernel knows which it is
//! running (`Kernel::in_daemon`).
//!
//! The model has one zone (one `PhysMem`), so the state is one per kernel,
//! as Linux's is one per zone. Off unless a policy turns it on
//! (`linux:defer_compaction=true`): runs without it are unchanged.

use super::kernel::Kernel;
use super::AllocMode;

/// Linux's cap on the back-off shift (`COMPACT_MAX_DEFER_SHIFT`,
/// include/linux/compaction.h): at most 64 attempts considered.
pub const COMPACT_MAX_DEFER_SHIFT: u32 = 6;

/// A zone's deferral state: the fields of `struct zone` that mm/compaction.c
/// keeps for it. The default is a fresh zone: no back-off (`order_failed`
/// starts at 0 as the zone's zeroed fields do; with shift 0 nothing is
/// deferred anyway).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactDefer {
    /// Attempts considered since the last deferral (`compact_considered`).
    pub considered: u32,
    /// The back-off: `1 << shift` attempts per compaction (`compact_defer_shift`).
    pub shift: u32,
    /// Orders below this are never deferred (`compact_order_failed`).
    pub order_failed: u32,
}

impl CompactDefer {
    /// `compaction_deferred`: whether a compaction at `order` is skipped now.
    /// Counts the attempt, as Linux does.
    pub fn deferred(&mut self, order: u32) -> bool {
        if order < self.order_failed {
            return false;
        }
        let limit = 1u32 << self.shift;
        // Saturating at the limit, as Linux avoids overflow.
        self.considered = (self.considered + 1).min(limit);
        self.considered < limit
    }

    /// `defer_compaction`: a synchronous compaction at `order` failed.
    pub fn defer(&mut self, order: u32) {
        self.considered = 0;
        self.shift = (self.shift + 1).min(COMPACT_MAX_DEFER_SHIFT);
        self.order_failed = self.order_failed.min(order);
    }

    /// `compaction_defer_reset`: compaction at `order` produced a block;
    /// `alloc_success` if the allocation then took it (the back-off ends).
    pub fn reset(&mut self, order: u32, alloc_success: bool) {
        if alloc_success {
            self.considered = 0;
            self.shift = 0;
        }
        if order >= self.order_failed {
            self.order_failed = order + 1;
        }
    }
}

impl Kernel {
    /// Turn the zone's compaction deferral on (a policy's `init`).
    pub fn enable_compaction_deferral(&mut self) {
        self.compact_defer.get_or_insert_with(CompactDefer::default);
    }

    /// Allocate a block of `order` with direct compaction as Linux does when
    /// deferral is on: a deferred compaction is skipped (the allocation fails
    /// without compacting, counted in `compactions_deferred`), a synchronous
    /// one (from a daemon) that fails defers the next ones, any success that
    /// feeds the allocation resets the back-off. The caller has already
    /// tried the free lists.
    pub(super) fn alloc_block_deferring(&mut self, order: u32, mode: AllocMode, owner: u64) -> Option<u64> {
        let AllocMode::Compact { max_pages } = mode else { return None };
        let sync = self.in_daemon;
        let d = self.compact_defer.as_mut()?;
        if d.deferred(order) {
            self.stats.compactions_deferred += 1;
            return None;
        }
        let freed = self.compact(order, max_pages);
        let got = self.phys.alloc(order, super::phys::Mobility::Movable, owner);
        let d = self.compact_defer.as_mut().expect("deferral stays on once enabled");
        if got.is_some() {
            d.reset(order, true);
        } else if freed {
            // The block compaction freed went elsewhere: Linux's watermark
            // check passed (reset without ending the back-off).
            d.reset(order, false);
        } else if sync {
            d.defer(order);
        }
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-counted back-off: after the k-th failure in a row, the next
    /// 2^k - 1 attempts are skipped and the 2^k-th compacts (1, 3, 7, 15, 31,
    /// 63, then 63 again at the cap); a success resets it.
    #[test]
    fn back_off_doubles_to_64_and_resets_on_success() {
        let mut d = CompactDefer::default();
        // Nothing failed yet: every attempt compacts.
        assert!((0..5).all(|_| !d.deferred(9)));
        let mut skipped_per_failure = Vec::new();
        for _ in 0..8 {
            d.defer(9); // this compaction failed
            let mut skipped = 0;
            while d.deferred(9) {
                skipped += 1;
            }
            skipped_per_failure.push(skipped);
        }
        assert_eq!(skipped_per_failure, vec![1, 3, 7, 15, 31, 63, 63, 63]);
        // Attempts considered per compaction that runs (the skipped ones and
        // it): 1 before any failure, then 2, 4, ... up to the cap of 64.
        let considered: Vec<u32> = skipped_per_failure.iter().map(|s| s + 1).collect();
        assert_eq!(considered, vec![2, 4, 8, 16, 32, 64, 64, 64]);
        assert_eq!(d.shift, COMPACT_MAX_DEFER_SHIFT);
        // Lower orders than the failed one are never deferred.
        assert!(!d.deferred(3));
        // A success resets: the next attempt compacts, one failure skips one.
        d.reset(9, true);
        assert!(!d.deferred(9));
        d.defer(9);
        assert!(d.deferred(9));
        assert!(!d.deferred(9));
    }

    /// A block freed for someone else (reset without success) keeps the
    /// back-off but lifts the failed order above it.
    #[test]
    fn watermark_reset_keeps_the_back_off() {
        let mut d = CompactDefer::default();
        d.defer(9);
        d.defer(9);
        d.reset(9, false);
        assert_eq!((d.shift, d.order_failed), (2, 10));
        assert!(!d.deferred(9)); // order 9 is below order_failed now
        assert!(d.deferred(10)); // order 10 still backs off: 1 of 4 considered
    }
}
