//! Process-wide cancellation: a request (Ctrl-C, SIGTERM, seen by the Python
//! bindings while the work runs on another thread) that every long loop of
//! the core polls and answers with `Error::Cancelled`.
//!
//! Polled where work is naturally chunked: every trace chunk a reader decodes
//! (`HstReader::next_chunk`, so every pass over a trace: simulate, profile,
//! static, reuse, merge, verify, bench) and every 65536 accesses a workload
//! generator emits. One atomic load per chunk costs nothing measurable.
//!
//! The request is process-wide: the bindings set it when a signal handler
//! raised in the thread that waits for the work, and clear it once the work
//! has stopped. Two core calls running at once from different Python threads
//! would both stop; signals are delivered to the main thread only, so in
//! practice it is the one call the user is waiting for.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Error, Result};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Ask every long loop to stop at its next check.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Withdraw the request (after the cancelled work has returned).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}

#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// `Err(Error::Cancelled)` if cancellation was requested.
#[inline]
pub fn check() -> Result<()> {
    if requested() {
        Err(Error::Cancelled)
    } else {
        Ok(())
    }
}

/// Payload of the unwind a generator uses to leave deep recursion when
/// cancelled (generators write to an `AccessSink`, which cannot return an
/// error). Raised with `std::panic::resume_unwind`, which skips the panic
/// hook (nothing is printed), and caught by `catch_cancel`.
pub struct CancelUnwind;

/// Unwind out of a generator if cancellation was requested.
#[inline]
pub fn unwind_if_requested() {
    if requested() {
        std::panic::resume_unwind(Box::new(CancelUnwind));
    }
}

/// Run `f`, turning a `CancelUnwind` into `Error::Cancelled`; any other panic
/// continues unwinding.
pub fn catch_cancel<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) if p.is::<CancelUnwind>() => Err(Error::Cancelled),
        Err(p) => std::panic::resume_unwind(p),
    }
}
