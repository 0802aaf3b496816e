//! Long core calls stay interruptible: Ctrl-C and SIGTERM (or whatever a
//! Python signal handler raises) stop them within a second, and the caller
//! gets that same Python exception.
//!
//! Python runs signal handlers only in the main thread, and only between
//! bytecodes: while a core call holds the thread, a handler waits for the call
//! to end. So `cancellable` runs the work on a worker thread without the GIL
//! and has the calling thread poll `check_signals` every 50 ms. When a handler
//! raises, it requests cancellation (`hugescope_core::cancel`), which every
//! long loop polls per trace chunk, waits for the worker to stop, withdraws
//! the request and returns the handler's exception unchanged.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use hugescope_core::cancel;
use pyo3::prelude::*;

use crate::err;

/// How often the waiting thread looks for Python signals (the brief allows
/// 100 ms; half of it leaves room for the GIL hand-over).
const POLL: Duration = Duration::from_millis(50);

/// Run `work` on a worker thread, polling Python signals meanwhile (see the
/// module documentation). A panic in the worker becomes a `HugescopeError`
/// naming it, never an abort of the interpreter.
pub(crate) fn cancellable<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> PyResult<T> + Send,
{
    // "The worker has finished", with a condition variable so the waiting
    // thread wakes at once when it does, and every POLL otherwise.
    let done = (Mutex::new(false), Condvar::new());
    let finished = || {
        let (lock, cv) = &done;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cv.wait_timeout_while(guard, POLL, |d| !*d).unwrap_or_else(|p| p.into_inner());
        *guard
    };
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let r = catch_unwind(AssertUnwindSafe(work));
            let (lock, cv) = &done;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
            r
        });
        let mut raised: Option<PyErr> = None;
        loop {
            if py.detach(finished) {
                break;
            }
            if raised.is_none() {
                if let Err(e) = py.check_signals() {
                    cancel::request();
                    raised = Some(e);
                }
            }
        }
        let outcome = py.detach(|| worker.join());
        if raised.is_some() {
            cancel::clear();
        }
        if let Some(e) = raised {
            // The worker's own result (usually Error::Cancelled) is dropped:
            // the caller asked to stop and gets the exception its handler raised.
            return Err(e);
        }
        match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) | Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown cause".into());
                Err(err(format!("internal error: the simulation panicked ({msg}); please report this")))
            }
        }
    })
}
