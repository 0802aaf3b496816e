//! A process file descriptor (`pidfd_open(2)`, Linux 5.3): a handle on one
//! process that stays valid however its pid is reused, and becomes readable
//! when the process exits. The plan applier (`collapse`) and the launcher
//! (`launch`) use it to know the target is still the process they started.
//!
//! Through `rustix`: the calls are safe functions returning an `OwnedFd` or
//! an errno, instead of `libc::syscall` with raw descriptors.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid as RawPid, PidfdFlags};

use crate::smaps::Pid;

/// Open a pidfd on process `pid` (> 0); the error carries the errno
/// (`ESRCH`: no such process).
pub fn open(pid: Pid) -> io::Result<OwnedFd> {
    // `Pid::from_raw` asserts a nonnegative pid in debug builds: refuse a
    // negative one here, as an error, before it can panic.
    let p = (pid > 0).then(|| RawPid::from_raw(pid)).flatten().ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(pidfd_open(p, PidfdFlags::empty())?)
}

/// Wait up to `timeout` (zero: just look) for the process behind `fd` to
/// exit; true once it has. An interrupted wait (EINTR) reports false.
pub fn exited_within(fd: &OwnedFd, timeout: Duration) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let t = Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: timeout.subsec_nanos() as i64 };
    match poll(&mut fds, Some(&t)) {
        Ok(n) => n > 0 && fds[0].revents().intersects(PollFlags::IN | PollFlags::HUP),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_a_child_exit_and_refuses_bad_pids() {
        let mut child = std::process::Command::new("sleep").arg("0.2").spawn().expect("spawn sleep");
        let fd = open(child.id() as Pid).expect("pidfd of our child");
        assert!(!exited_within(&fd, Duration::ZERO), "running child reported exited");
        assert!(exited_within(&fd, Duration::from_secs(10)), "child exit not seen within 10 s");
        child.wait().unwrap();
        assert_eq!(open(0).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        assert_eq!(open(-5).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }
}
