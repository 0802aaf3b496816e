//! When the access-driven policies clear a target's accessed bits (issue #36, item 4).
//!
//! Every `clear_refs` write costs the *target*, not the daemon: each page it touches
//! afterwards has its accessed bit set again by the page walker, on top of the TLB
//! flush. On the development VM (a KVM guest) that was about 0.15 s of the target's
//! CPU per clear for a target updating random words of 1 GiB, against about 1-2%
//! for reading its smaps and pagemap every second (docs/daemon.md, *What the daemon
//! costs its target*). The kernel cannot clear a range (`clear_refs` takes the whole
//! process) and has no idle page tracking, so the lever is how often. The rules:
//!
//! * **Clear only for a decision.** A clear opens an *access epoch*: the sample one
//!   interval later is the epoch's snapshot (the pages referenced in that interval,
//!   the window HawkEye and PCC decide from), and every decision until the next
//!   snapshot uses it. The daemon asks for a clear only when a decision would follow
//!   (`wants_fresh` in `mod.rs`): the process is within its budget, has a region that
//!   could become a candidate (present, not huge), and has used up the current
//!   snapshot's ranking (no candidate left waiting only for the rate limit).
//! * **Back off when decisions stop changing.** A snapshot step at which the process
//!   got no collapse doubles the number of steps between clears, up to `MAX_GAP`; a
//!   step with a collapse (at the snapshot, or later from its ranking once the rate
//!   limit allows) sets it back to 1: clear every step, as before, while every epoch
//!   pays off, which is bounded by the regions there are to collapse. A mapping new
//!   since the snapshot waits for the next scheduled clear (at most `MAX_GAP` steps):
//!   bringing it forward would let a process that keeps mapping memory hold the
//!   daemon at one clear per step, the cost this schedule exists to bound.
//!
//! So a run of L steps with no collapse clears at its steps 0, 2, 6, 14, ... (2^k - 2):
//! at most floor(log2(L + 1)) times until the gap reaches `MAX_GAP`, then once per
//! `MAX_GAP` steps; a run with collapses at C steps, at most (C + 1) times that. The
//! schedule is a pure function of (step, collapsed this step, whether a decision
//! wants fresh bits), so the bound is tested here without a process.

/// The longest gap between two clears of one process, in steps: at the default
/// interval of 1 s one clear a minute, about 0.25% of a 1 GiB random-update target's
/// CPU at the cost measured per clear (docs/daemon.md).
pub const MAX_GAP: u64 = 64;

#[derive(Clone, Debug)]
pub struct Epochs {
    /// Step of the last clear (None: never cleared, no snapshot possible yet).
    last_clear: Option<u64>,
    /// Steps from one clear to the next at least.
    gap: u64,
    /// `clear_refs` writes so far.
    clears: u64,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs { last_clear: None, gap: 1, clears: 0 }
    }
}

impl Epochs {
    /// True when the sample taken at `step` is the first after a clear: its accessed
    /// bits cover exactly the one interval since, and it becomes the snapshot.
    pub fn fresh(&self, step: u64) -> bool {
        self.last_clear.is_some_and(|c| c + 1 == step)
    }

    /// After the decisions of `step`: note whether they collapsed anything in the
    /// process, and say whether to clear now. `wants_fresh`: a decision at a later
    /// step needs fresher bits than the process has.
    pub fn after_step(&mut self, step: u64, collapsed: bool, wants_fresh: bool) -> bool {
        if collapsed {
            self.gap = 1;
        } else if self.fresh(step) {
            self.gap = (self.gap * 2).min(MAX_GAP);
        }
        let due = self.last_clear.is_none_or(|c| step >= c + self.gap);
        let clear = wants_fresh && due;
        if clear {
            self.last_clear = Some(step);
            self.clears += 1;
        }
        clear
    }

    pub fn clears(&self) -> u64 {
        self.clears
    }

    /// Steps between clears now (reported in the status).
    pub fn gap(&self) -> u64 {
        self.gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(steps: u64, collapsed: impl Fn(u64) -> bool, wants: impl Fn(u64) -> bool) -> Vec<u64> {
        let mut e = Epochs::default();
        (0..steps).filter(|&s| e.after_step(s, collapsed(s), wants(s))).collect()
    }

    #[test]
    fn snapshots_that_change_nothing_back_off_to_one_clear_per_max_gap() {
        // Clear at 0; the snapshot at 1 paid nothing, gap 2: clear at 2; snapshot at 3,
        // gap 4: clear at 6; then 14, 30, 62 (gap 32), 126 (gap 64), 190.
        let s = schedule(200, |_| false, |_| true);
        assert_eq!(s, vec![0, 2, 6, 14, 30, 62, 126, 190]);
        // 8 writes in 200 steps; the daemon used to write one per step (200).
        let mut e = Epochs::default();
        for step in 0..200 {
            e.after_step(step, false, true);
        }
        assert_eq!((e.clears(), e.gap()), (8, MAX_GAP));
    }

    #[test]
    fn at_most_one_clear_per_step_and_none_without_a_decision_to_feed() {
        // Every snapshot pays off: the old schedule, one clear per step, never more.
        assert_eq!(schedule(10, |_| true, |_| true), (0..10).collect::<Vec<_>>());
        // Budget spent or nothing left to collapse: no clear at all.
        assert!(schedule(100, |_| true, |_| false).is_empty());
        // Only the baseline, then the decision at step 1 spends the budget.
        assert_eq!(schedule(100, |_| true, |s| s == 0), vec![0]);
    }

    #[test]
    fn a_collapse_brings_the_clears_back() {
        // Backed off to gap 8 (clears 0, 2, 6, 14); the snapshot at 15 pays off: gap 1,
        // clear at 15 again, and the snapshot at 16 pays nothing: gap 2, clear at 17.
        let s = schedule(20, |s| s == 15, |_| true);
        assert_eq!(s, vec![0, 2, 6, 14, 15, 17]);
        // A collapse between snapshots (the rate limit held the candidate at the
        // snapshot at 1, so its gap went to 2) brings the next clear forward too.
        assert_eq!(schedule(5, |s| s == 2, |_| true), vec![0, 2, 4]);
        let mut e = Epochs::default();
        for step in 0..8 {
            e.after_step(step, false, true);
        }
        assert_eq!(e.gap(), 8, "clears at 0, 2, 6; the snapshot at 7 doubled the gap to 8");
        assert!(!e.after_step(8, false, true) && e.after_step(14, false, true), "due at 6 + 8");
    }

    #[test]
    fn clears_are_bounded_by_the_collapse_steps() {
        // The module's bound, for runs shorter than 2 * MAX_GAP (where the gap cannot
        // reach its cap): at most (C + 1) * floor(log2(L + 1)) clears in L steps with
        // collapses at C of them, whatever the pattern. 100 steps: 6 per segment.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pattern = x;
            let collapsed = |s: u64| s < 64 && pattern >> s & 1 == 1 && pattern >> (s / 8 + 56) & 1 == 1;
            let c = (0..100).filter(|&s| collapsed(s)).count() as u64;
            let n = schedule(100, collapsed, |_| true).len() as u64;
            assert!(n <= (c + 1) * 6, "{n} clears with {c} collapse steps");
        }
        assert_eq!(schedule(100, |_| false, |_| true).len(), 6, "0, 2, 6, 14, 30, 62");
    }
}
