//! Process lifetime: stopping long calls on a signal, and children that never
//! outlive hugescope.
//!
//! Long calls (a measured run, the fragmenter's hold) take a `Stop` check and poll
//! it at least every 100 ms; it returns the signal that asked for the stop. The
//! Python bindings implement it by running Python's signal handlers (so the CLI's
//! handler decides); the helper binaries by `install_stop_handlers`, whose handler
//! only records the signal (all real work, such as restoring settings, then
//! happens in ordinary code, not in the handler).
//!
//! Every child the Linux side starts asks the kernel to be signalled when its
//! parent dies (`PR_SET_PDEATHSIG`) and then checks that the parent it expects is
//! still its parent, closing the window in which the parent died before the
//! request was made.

use crate::smaps::Pid;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Asked regularly by long calls: `Some(signal)` means stop now because of it.
pub type Stop<'a> = &'a mut dyn FnMut() -> Option<i32>;

/// The two stop signals, for crates that do not link libc themselves.
pub const SIGINT: i32 = libc::SIGINT;
pub const SIGTERM: i32 = libc::SIGTERM;

/// How long a child gets to exit after the forwarded signal before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// A `Stop` that never asks to stop (callers without signal handling).
pub fn never() -> impl FnMut() -> Option<i32> {
    || None
}

static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn record_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

/// For programs without Python: SIGINT, SIGTERM and SIGHUP only record the signal;
/// `stop_signal()` is then the `Stop` check.
pub fn install_stop_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = record_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal recorded by `install_stop_handlers`' handler, if one arrived.
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Ask for `sig` when the parent dies, then check the parent is still `expected`
/// (if it died in between, this process has already been re-parented and the
/// request would never fire: exit instead). Async-signal-safe: usable between
/// fork and exec. Returns false when the parent is gone.
pub fn die_with_parent(sig: i32, expected: Pid) -> bool {
    // SAFETY: prctl and getppid are plain system calls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0);
        expected <= 0 || libc::getppid() == expected
    }
}

/// `die_with_parent` for a helper binary started by hugescope: the parent PID
/// comes from `HUGESCOPE_PARENT_PID` when the starter set it, else the current
/// parent (which is right unless it already died). Exits with status 1 if the
/// parent is gone.
pub fn die_with_parent_from_env(sig: i32) {
    // 0 when the parent is outside our pid namespace.
    let current = rustix::process::Pid::as_raw(rustix::process::getppid());
    let expected = std::env::var(PARENT_PID_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(current);
    if !die_with_parent(sig, expected) {
        std::process::exit(1);
    }
}

/// Set by hugescope for the children it starts, so they can check their parent.
pub const PARENT_PID_ENV: &str = "HUGESCOPE_PARENT_PID";

/// Send `sig` to `pid`'s process group when it leads one, else to `pid`.
pub fn signal_child(pid: Pid, sig: i32) {
    // SAFETY: getpgid/kill on our own unreaped child (it cannot be a reused PID).
    unsafe {
        if libc::getpgid(pid) == pid {
            libc::kill(-pid, sig);
        } else {
            libc::kill(pid, sig);
        }
    }
}

/// True once our child `pid` has exited; it is left unreaped (a zombie keeps its
/// PID and process group from being reused while we still signal them).
pub fn has_exited(pid: Pid) -> bool {
    // SAFETY: zeroed siginfo is a valid out-parameter; WNOWAIT leaves the child waitable.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        r != 0 || info.si_pid() == pid
    }
}

/// Stop our child `pid`: forward `sig`, wait up to `grace` for it to exit, then
/// SIGKILL it, end whatever is left of its process group, and reap it. Returns
/// the wait status and rusage.
pub fn stop_child(pid: Pid, sig: i32, grace: Duration) -> (libc::c_int, libc::rusage) {
    signal_child(pid, sig);
    let t0 = Instant::now();
    while !has_exited(pid) && t0.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Also when it exited by itself: its own children (a shell's job) must not linger.
    signal_child(pid, libc::SIGKILL);
    reap(pid)
}

/// Wait for our child `pid` (blocking) and return its status and rusage.
pub fn reap(pid: Pid) -> (libc::c_int, libc::rusage) {
    let mut status: libc::c_int = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait on our own child; retried when a signal interrupts it.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    (status, ru)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    // The children are reaped by stop_child (with wait4), which is what is tested.
    #[allow(clippy::zombie_processes)]
    fn stop_child_forwards_then_kills_and_reaps() {
        // A child that ignores SIGTERM: it is killed after the grace period.
        let mut c = std::process::Command::new("sh");
        c.args(["-c", "trap '' TERM; sleep 30"]).process_group(0);
        let child = c.spawn().unwrap();
        let pid = child.id() as Pid;
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        let (status, _) = stop_child(pid, libc::SIGTERM, Duration::from_millis(300));
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL, "{status:#x}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        // Reaped: no such child any more.
        assert_eq!(unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) }, -1);
        // A child that honours SIGTERM ends with it.
        let child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let (status, _) = stop_child(child.id() as Pid, libc::SIGTERM, STOP_GRACE);
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM, "{status:#x}");
    }
}
