//! How far a long pass over a trace has come: an optional callback taking
//! `(done, total)` accesses, for a percentage bar in the front end.
//!
//! Called where work is naturally chunked (a trace chunk decoded, a chunk of
//! a concurrent input read), and then only when the count crosses a multiple
//! of `every` accesses (2^22 by default, a few times a second at the
//! simulator's speed) or reaches the total: one branch per chunk, nothing on
//! the per-access path. The callback runs on the thread doing the work; the
//! Python bindings give it one atomic store and read it from the waiting
//! thread (`hugescope-py/src/interrupt.rs`).

use std::fmt;
use std::sync::Arc;

/// Default reporting step: every 2^22 accesses.
pub const DEFAULT_EVERY_SHIFT: u32 = 22;

type Callback = dyn Fn(u64, u64) + Send + Sync;

/// An optional `(done, total)` callback (`Default`: none, which costs one
/// branch per chunk). `total` is 0 when the pass does not know it.
#[derive(Clone, Default)]
pub struct ProgressHook {
    callback: Option<Arc<Callback>>,
    every_shift: u32,
}

impl ProgressHook {
    /// Call `f(done, total)` about every 2^22 accesses and at the end.
    pub fn new(f: impl Fn(u64, u64) + Send + Sync + 'static) -> ProgressHook {
        ProgressHook::every(DEFAULT_EVERY_SHIFT, f)
    }

    /// Call `f` whenever the count crosses a multiple of 2^`shift` accesses.
    pub fn every(shift: u32, f: impl Fn(u64, u64) + Send + Sync + 'static) -> ProgressHook {
        ProgressHook { callback: Some(Arc::new(f)), every_shift: shift.min(63) }
    }

    pub fn is_set(&self) -> bool {
        self.callback.is_some()
    }

    /// The count went from `from` to `to` of `total` accesses: report `to`
    /// when that crossed a reporting step or reached the total.
    #[inline]
    pub fn advanced(&self, from: u64, to: u64, total: u64) {
        if let Some(f) = &self.callback {
            if from >> self.every_shift != to >> self.every_shift || (total > 0 && to >= total) {
                f(to, total);
            }
        }
    }
}

impl fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.callback {
            Some(_) => write!(f, "ProgressHook(every 2^{} accesses)", self.every_shift),
            None => f.write_str("ProgressHook(none)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn recorder(shift: u32) -> (ProgressHook, Arc<Mutex<Vec<(u64, u64)>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (ProgressHook::every(shift, move |d, t| s.lock().unwrap().push((d, t))), seen)
    }

    #[test]
    fn reports_only_at_step_crossings_and_the_end() {
        let (h, seen) = recorder(4); // every 16 accesses
        // Chunks of 10 accesses up to 45: crossings of 16 and 32, then the total.
        let mut n = 0;
        for len in [10, 10, 10, 10, 5] {
            h.advanced(n, n + len, 45);
            n += len;
        }
        assert_eq!(*seen.lock().unwrap(), vec![(20, 45), (40, 45), (45, 45)]);
    }

    #[test]
    fn unknown_total_reports_crossings_only() {
        let (h, seen) = recorder(4);
        h.advanced(0, 15, 0);
        h.advanced(15, 17, 0);
        assert_eq!(*seen.lock().unwrap(), vec![(17, 0)]);
    }

    #[test]
    fn none_does_nothing() {
        let h = ProgressHook::default();
        assert!(!h.is_set());
        h.advanced(0, u64::MAX, 1);
        assert_eq!(format!("{h:?}"), "ProgressHook(none)");
    }
}
