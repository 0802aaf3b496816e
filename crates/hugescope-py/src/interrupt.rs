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
//!
//! `cancellable_progress` adds a progress callback: the core reports
//! `(done, total)` accesses through a `ProgressHook` on the worker (one
//! atomic store, about every 2^22 accesses), and the waiting thread, which
//! holds the GIL between two waits anyway, hands the latest figures to the
//! Python callback at each poll and once more at the end. The worker never
//! takes the GIL for it; an exception in the callback stops the work like a
//! signal does.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use hugescope_core::cancel;
use hugescope_core::progress::ProgressHook;
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
    cancellable_polling(py, |_| Ok(()), work)
}

/// `cancellable` for work that reports progress: `work` gets the hook to pass
/// to the core, and `callback(done, total)` (Python; total 0 when unknown)
/// is called from this thread with the latest figures at each poll where
/// they changed and once at the end (see the module documentation).
pub(crate) fn cancellable_progress<T, F>(py: Python<'_>, callback: Option<Py<PyAny>>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(ProgressHook) -> PyResult<T> + Send,
{
    let Some(callback) = callback else {
        return cancellable(py, || work(ProgressHook::default()));
    };
    // (done, total); done = u64::MAX until the first report.
    let latest = Arc::new((AtomicU64::new(u64::MAX), AtomicU64::new(0)));
    let store = latest.clone();
    let hook = ProgressHook::new(move |done, total| {
        store.1.store(total, Ordering::Relaxed);
        store.0.store(done, Ordering::Release);
    });
    let mut shown = u64::MAX;
    let on_poll = |py: Python<'_>| -> PyResult<()> {
        let done = latest.0.load(Ordering::Acquire);
        if done != shown {
            shown = done;
            callback.call1(py, (done, latest.1.load(Ordering::Relaxed)))?;
        }
        Ok(())
    };
    let end = latest.clone();
    cancellable_polling(py, on_poll, move || {
        let r = work(hook);
        // A finished run is all done, also where the core's last report
        // fell short of the total (a concurrent run reports per chunk read).
        let total = end.1.load(Ordering::Relaxed);
        if r.is_ok() && total > 0 {
            end.0.store(total, Ordering::Release);
        }
        r
    })
}

/// `cancellable`, calling `on_poll` with the GIL at every poll while the work
/// runs and once after it succeeded; an error from it stops the work and is
/// returned, as a signal handler's exception is.
fn cancellable_polling<T, F, P>(py: Python<'_>, mut on_poll: P, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> PyResult<T> + Send,
    P: FnMut(Python<'_>) -> PyResult<()>,
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
                if let Err(e) = py.check_signals().and_then(|_| on_poll(py)) {
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
            // The final figures (a run shorter than one poll shows them too).
            Ok(Ok(r)) => r.and_then(|v| on_poll(py).map(|_| v)),
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
