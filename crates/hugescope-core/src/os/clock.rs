//! Virtual time. Each access advances the clock; OS work on the program's
//! critical path (faults, direct compaction, shootdowns) adds to it; daemons
//! registered by policies fire when their time is due.
//!
//! Two time bases, as the papers use both:
//! - `AccessRate(r)`: an access takes 1/r seconds (the PCC paper maps its 30 s
//!   interval onto 30 x the workload's measured accesses per second);
//! - `Cycles(hz)`: an access takes its cost-model cycles (base + translation)
//!   divided by the clock frequency.
//!
//! The hot-path check is one comparison of a running unit count against the
//! precomputed unit count of the next due timer.
//!
//! Timers are keyed per owner (the index of the policy on the kernel that
//! scheduled them): several policies share one kernel, and each picks its own
//! timer ids, so an id means something only together with its owner. The
//! kernel sets `owner` around each policy callback; `schedule_*` and `cancel`
//! act on the current owner's timers only.
//!
//! Concurrent processes (`sched.rs`) each have their own program time: their
//! units plus the OS time charged on *their* critical path. The clock holds
//! the running process's time in the fields the hot path reads (`units`,
//! `proc_sync_seconds`), and `switch_to` swaps it with a saved copy once per
//! scheduling quantum, so `tick` is as cheap as with one process. `now()` is
//! the running process's time: daemons (timers, shared by all processes) fire
//! when the running process's time passes their due time. `accesses` and the
//! OS-time totals (`os_sync_seconds`, ...) stay totals over all processes.
//! With one process nothing is ever swapped and `proc_sync_seconds` receives
//! exactly the additions `os_sync_seconds` does, so times are bit-identical
//! to a clock without processes.
//!
//! Order of due timers (deterministic): timers due at an access count first,
//! in the order they were scheduled; then timers due at a time, earliest
//! first, and at the same time in the order they were scheduled, whichever
//! policy scheduled them (so at equal times a policy earlier on the kernel
//! fires first only if it scheduled first, e.g. from `init`).

use serde::Serialize;

// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeBase {
    AccessRate { accesses_per_second: f64 },
    Cycles { hz: f64 },
}

/// A process context's own time while another one runs.
#[derive(Clone, Copy, Debug, Default)]
struct ProcessTime {
    units: f64,
    sync_seconds: f64,
}

#[derive(Clone, Debug)]
pub struct Clock {
    pub base: TimeBase,
    /// Accesses or cycles of the program so far (by the time base).
    units: f64,
    units_per_second: f64,
    pub accesses: u64,
    /// OS time on the program's critical path (total over processes).
    pub os_sync_seconds: f64,
    /// The part of it charged while the running process ran: with
    /// `units`, that process's own time.
    proc_sync_seconds: f64,
    /// The process context whose time `units` and `proc_sync_seconds` hold.
    running: usize,
    /// Saved time of every context that has run or been switched away from
    /// (empty until the first switch: single-process runs never touch it).
    saved: Vec<ProcessTime>,
    /// OS time on other cores (daemons), not on the program's path.
    pub os_async_seconds: f64,
    /// OS time during the program's untraced setup (populating its data).
    pub os_setup_seconds: f64,
    /// (due time, owner, id).
    timers: Vec<(f64, u32, u32)>,
    next_due_units: f64,
    /// Timers due at an access count (plans recorded in accesses): (count, owner, id).
    access_timers: Vec<(u64, u32, u32)>,
    next_due_accesses: u64,
    /// The policy whose callback is running: owner of timers scheduled now.
    owner: u32,
}

impl Clock {
    pub fn new(base: TimeBase) -> Clock {
        let units_per_second = match base {
            TimeBase::AccessRate { accesses_per_second } => accesses_per_second,
            TimeBase::Cycles { hz } => hz,
        };
        Clock {
            base,
            units: 0.0,
            units_per_second,
            accesses: 0,
            os_sync_seconds: 0.0,
            proc_sync_seconds: 0.0,
            running: 0,
            saved: Vec::new(),
            os_async_seconds: 0.0,
            os_setup_seconds: 0.0,
            timers: Vec::new(),
            next_due_units: f64::INFINITY,
            access_timers: Vec::new(),
            next_due_accesses: u64::MAX,
            owner: 0,
        }
    }

    /// Make `owner` the owner of timers scheduled or cancelled from now on;
    /// returns the previous owner (the kernel restores it after a callback).
    pub(crate) fn set_owner(&mut self, owner: u32) -> u32 {
        std::mem::replace(&mut self.owner, owner)
    }

    /// Seconds of virtual time since the start, of the running process.
    pub fn now(&self) -> f64 {
        self.units / self.units_per_second + self.proc_sync_seconds
    }

    /// Make process context `ctx` the running one: save the running one's
    /// time and restore `ctx`'s (zero if it never ran). Called by the
    /// scheduler once per quantum, never per access; due times of timers are
    /// recomputed against the new process's time.
    pub fn switch_to(&mut self, ctx: usize) {
        if ctx == self.running {
            return;
        }
        let need = ctx.max(self.running) + 1;
        if self.saved.len() < need {
            self.saved.resize(need, ProcessTime::default());
        }
        self.saved[self.running] = ProcessTime { units: self.units, sync_seconds: self.proc_sync_seconds };
        let t = self.saved[ctx];
        self.units = t.units;
        self.proc_sync_seconds = t.sync_seconds;
        self.running = ctx;
        self.recompute();
    }

    /// sched: process context `ctx` starts `seconds` after time 0 (a stream
    /// of processes started one after another, Navarro §6.5). Its time
    /// begins there; call before it first runs.
    pub fn start_context_at(&mut self, ctx: usize, seconds: f64) {
        if ctx == self.running {
            self.proc_sync_seconds += seconds;
            self.recompute();
            return;
        }
        if self.saved.len() <= ctx.max(self.running) {
            self.saved.resize(ctx.max(self.running) + 1, ProcessTime::default());
        }
        self.saved[ctx].sync_seconds += seconds;
    }

    /// The running process context (0 unless a scheduler switched).
    pub fn running(&self) -> usize {
        self.running
    }

    /// Seconds of virtual time of process context `ctx`, running or not.
    pub fn seconds_of(&self, ctx: usize) -> f64 {
        if ctx == self.running {
            return self.now();
        }
        self.saved.get(ctx).map_or(0.0, |t| t.units / self.units_per_second + t.sync_seconds)
    }

    /// Advance by one access costing `cycles` (ignored under an access rate).
    /// Returns true when a timer is due.
    #[inline(always)]
    pub fn tick(&mut self, cycles: f64) -> bool {
        self.accesses += 1;
        self.units += match self.base {
            TimeBase::AccessRate { .. } => 1.0,
            TimeBase::Cycles { .. } => cycles,
        };
        self.units >= self.next_due_units || self.accesses >= self.next_due_accesses
    }

    /// Fire `id` once `n` accesses have been made.
    pub fn schedule_after_accesses(&mut self, n: u64, id: u32) {
        self.access_timers.push((n, self.owner, id));
        self.next_due_accesses = self.access_timers.iter().map(|t| t.0).min().unwrap_or(u64::MAX);
    }

    pub fn charge_sync(&mut self, seconds: f64) {
        self.os_sync_seconds += seconds;
        self.proc_sync_seconds += seconds;
        self.recompute();
    }

    pub fn charge_async(&mut self, seconds: f64) {
        self.os_async_seconds += seconds;
    }

    pub fn schedule_at(&mut self, at: f64, id: u32) {
        self.timers.push((at, self.owner, id));
        self.recompute();
    }

    /// Cancel the current owner's time timers with this id.
    pub fn cancel(&mut self, id: u32) {
        let owner = self.owner;
        self.timers.retain(|&(_, o, i)| (o, i) != (owner, id));
        self.recompute();
    }

    /// Remove and return the earliest due timer as (time, owner, id), if any
    /// is due now (order: see the module comment).
    pub fn pop_due(&mut self) -> Option<(f64, u32, u32)> {
        if let Some(i) = self.access_timers.iter().position(|t| t.0 <= self.accesses) {
            let (_, owner, id) = self.access_timers.remove(i);
            self.next_due_accesses = self.access_timers.iter().map(|t| t.0).min().unwrap_or(u64::MAX);
            return Some((self.now(), owner, id));
        }
        let now = self.now();
        let (i, _) = self
            .timers
            .iter()
            .enumerate()
            .filter(|(_, t)| t.0 <= now + 1e-12)
            // Earliest first; ties by registration order (stable, deterministic).
            .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0).then(a.0.cmp(&b.0)))?;
        let t = self.timers.remove(i);
        self.recompute();
        Some(t)
    }

    /// Drop every pending timer (daemons stopped for good).
    pub fn clear_timers(&mut self) {
        self.timers.clear();
        self.access_timers.clear();
        self.next_due_accesses = u64::MAX;
        self.recompute();
    }

    fn recompute(&mut self) {
        let next = self.timers.iter().map(|t| t.0).fold(f64::INFINITY, f64::min);
        self.next_due_units = (next - self.proc_sync_seconds) * self.units_per_second;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_rate_timers() {
        let mut c = Clock::new(TimeBase::AccessRate { accesses_per_second: 100.0 });
        c.schedule_at(1.0, 7);
        let mut fired = None;
        for i in 1..=150 {
            if c.tick(0.0) {
                fired = Some(i);
                assert_eq!(c.pop_due(), Some((1.0, 0, 7)));
                break;
            }
        }
        assert_eq!(fired, Some(100));
        // OS time on the critical path brings the next timer closer.
        c.schedule_at(2.0, 8);
        c.charge_sync(0.5);
        let mut n = 0;
        while !c.tick(0.0) {
            n += 1;
        }
        assert_eq!(n, 49); // 100 + 50 accesses + 0.5 s = 2.0 s
        assert!((c.now() - 2.0).abs() < 1e-9);
    }

    #[test]
    fn timer_ids_are_per_owner() {
        let mut c = Clock::new(TimeBase::AccessRate { accesses_per_second: 10.0 });
        // Two owners pick the same id at the same time: both fire, in the
        // order scheduled; cancelling is the canceller's own timer only.
        c.set_owner(1);
        c.schedule_at(0.5, 3);
        c.schedule_at(0.9, 4);
        c.set_owner(0);
        c.schedule_at(0.5, 3);
        c.schedule_at(0.9, 4);
        c.cancel(4);
        for _ in 0..10 {
            c.tick(0.0);
        }
        assert_eq!(c.pop_due(), Some((0.5, 1, 3)));
        assert_eq!(c.pop_due(), Some((0.5, 0, 3)));
        assert_eq!(c.pop_due(), Some((0.9, 1, 4)));
        assert_eq!(c.pop_due(), None);
    }

    #[test]
    fn processes_keep_their_own_time() {
        let mut c = Clock::new(TimeBase::AccessRate { accesses_per_second: 10.0 });
        // Context 0 runs 5 accesses and is charged 1 s of OS time.
        for _ in 0..5 {
            c.tick(0.0);
        }
        c.charge_sync(1.0);
        assert!((c.now() - 1.5).abs() < 1e-12);
        // Context 1 starts at zero; a timer due at 0.3 s fires on its time.
        c.switch_to(1);
        assert_eq!(c.now(), 0.0);
        c.schedule_at(0.3, 9);
        let mut n = 0;
        while !c.tick(0.0) {
            n += 1;
        }
        assert_eq!(n, 2);
        assert_eq!(c.pop_due().map(|t| t.2), Some(9));
        c.charge_sync(0.25);
        // Totals are over both; each keeps its own time.
        assert_eq!(c.accesses, 8);
        assert!((c.os_sync_seconds - 1.25).abs() < 1e-12);
        assert!((c.seconds_of(0) - 1.5).abs() < 1e-12);
        assert!((c.seconds_of(1) - 0.55).abs() < 1e-12);
        c.switch_to(0);
        assert!((c.now() - 1.5).abs() < 1e-12);
        assert_eq!(c.running(), 0);
    }

    #[test]
    fn cycles_base() {
        let mut c = Clock::new(TimeBase::Cycles { hz: 1000.0 });
        c.schedule_at(0.1, 1);
        assert!(!c.tick(50.0));
        assert!(c.tick(50.0));
    }
}
