//! Applying a promotion plan to a running process with `MADV_COLLAPSE`.
//!
//! For this process we call `madvise`; for another process `process_madvise` on a
//! pidfd. Why process_madvise and not ptrace-injecting an madvise into the target:
//! it needs no stop, no signal and no write to the target's registers or memory, so
//! the program being measured runs undisturbed apart from the collapse itself (the
//! kernel copies its pages into a huge page, as khugepaged would). The pidfd also
//! pins the identity of the process: once it exits, calls fail with ESRCH instead of
//! landing on an unrelated process that reused the pid.
//!
//! Each 2 MiB region is advised on its own: `MADV_COLLAPSE` reports only the errno of
//! the *last* failing region and process_madvise stops at the first failing iovec, so
//! one call per region is the only way to get per-region results (reference A.4).

use crate::error::errno_name;
use crate::smaps::{self, Pid, Vma};
use crate::thp::ThpState;
use hugescope_core::plan::{PlanEntry, When};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

pub const MADV_COLLAPSE: libc::c_int = 25;
pub const PMD_SIZE: u64 = 2 << 20;

/// Whose memory a plan is applied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// This process (plain `madvise`).
    SelfProcess,
    /// Another process (`pidfd_open` + `process_madvise`; needs CAP_SYS_NICE and
    /// ptrace-read access, i.e. root or the same user with a permissive Yama).
    Pid(Pid),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every 2 MiB region of the entry is PMD-mapped afterwards.
    Collapsed,
    /// Some regions collapsed, some failed.
    PartiallyCollapsed,
    /// The kernel was asked and no region collapsed.
    Failed,
    /// Not attempted (the reason says why).
    Skipped,
}

/// What happened to one plan entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollapseOutcome {
    /// Index of the entry in the list given to `apply`.
    pub index: usize,
    pub start: u64,
    pub length: u64,
    pub page_size: u64,
    pub when: When,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub status: Status,
    /// True if the kernel was asked for at least one region.
    pub attempted: bool,
    /// Symbolic errno of the last failure (the kernel's own convention), or the errno
    /// the kernel would return for a range refused by the pre-check.
    pub errno: Option<String>,
    /// A human explanation.
    pub reason: String,
    /// 2 MiB regions in the entry and how many collapsed.
    pub regions: u64,
    pub regions_collapsed: u64,
    /// Failures per errno name over all regions.
    pub errno_counts: BTreeMap<String, u64>,
    pub bytes_requested: u64,
    /// `AnonHugePages` of the range afterwards, attributed from smaps (see
    /// `smaps::attribute_huge`; an upper bound when the VMA is larger than the range).
    pub bytes_huge_after: Option<u64>,
    /// PMD-mapped bytes of the range afterwards, exact, from `PAGEMAP_SCAN`.
    pub bytes_huge_after_exact: Option<u64>,
    /// Wall time spent in the collapse calls, microseconds.
    pub collapse_us: u64,
}

impl CollapseOutcome {
    fn new(index: usize, e: &PlanEntry) -> Self {
        CollapseOutcome {
            index,
            start: e.start,
            length: e.length,
            page_size: e.page_size,
            when: e.when.clone(),
            note: e.note.clone(),
            status: Status::Skipped,
            attempted: false,
            errno: None,
            reason: String::new(),
            regions: 0,
            regions_collapsed: 0,
            errno_counts: BTreeMap::new(),
            bytes_requested: e.length,
            bytes_huge_after: None,
            bytes_huge_after_exact: None,
            collapse_us: 0,
        }
    }
    /// An outcome for an entry that was not applied, with the reason.
    pub fn not_applied(index: usize, e: &PlanEntry, reason: impl Into<String>) -> Self {
        Self::new(index, e).skip(None, reason)
    }

    fn skip(mut self, errno: Option<&str>, reason: impl Into<String>) -> Self {
        self.status = Status::Skipped;
        self.errno = errno.map(str::to_string);
        self.reason = reason.into();
        self
    }
}

/// The reason the kernel gives, in words, for an MADV_COLLAPSE errno.
pub fn explain_errno(e: i32) -> &'static str {
    match e {
        libc::EAGAIN => "transient: a page was locked, pinned, off the LRU or under migration; retrying may succeed",
        libc::EINVAL => "the VMA is unsuitable: VM_NOHUGEPAGE, no resident page or page table in the region, read-only pages, or a bad range",
        libc::ENOMEM => "no free huge page and compaction could not make one",
        libc::EBUSY => "the memory cgroup could not be charged for the huge page",
        libc::ESRCH => "process exited",
        libc::EPERM => "not permitted: process_madvise needs CAP_SYS_NICE and ptrace-read access to the target",
        libc::EFAULT | libc::ENOENT => "the range is not (or no longer) mapped",
        libc::ENOSYS => "the kernel has no process_madvise (Linux 5.10+) or pidfd_open (5.3+)",
        _ => "unexpected error from the kernel",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApplyOptions {
    /// Check THP mode and VMA eligibility from smaps before asking the kernel.
    /// With `false` every 2 MiB-size entry is sent, which shows the kernel's own errno.
    pub precheck: bool,
    /// How often a region failing with EAGAIN is retried (with a 10 ms pause).
    pub eagain_retries: u32,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions { precheck: true, eagain_retries: 3 }
    }
}

/// Apply `entries` to `target` with default options. Never fails as a whole: every
/// problem is reported in the entry's outcome.
pub fn apply(target: Target, entries: &[PlanEntry]) -> Vec<CollapseOutcome> {
    apply_with(target, entries, &ApplyOptions::default())
}

pub fn apply_with(target: Target, entries: &[PlanEntry], opts: &ApplyOptions) -> Vec<CollapseOutcome> {
    let mut a = Applier::new(target, opts.clone());
    entries.iter().enumerate().map(|(i, e)| a.apply_entry(i, e)).collect()
}

/// A plan applier bound to one process, for callers that apply entries over time
/// (the launcher applies `TimeS` entries as their time comes).
pub struct Applier {
    target: Target,
    opts: ApplyOptions,
    pidfd: Option<OwnedFd>,
    exited: bool,
    /// A problem that makes every entry fail the same way (THP `never`, no pidfd).
    blanket: Option<(Status, Option<String>, String)>,
}

impl Applier {
    pub fn new(target: Target, opts: ApplyOptions) -> Applier {
        let mut a = Applier { target, opts, pidfd: None, exited: false, blanket: None };
        match ThpState::read() {
            Ok(s) if s.is_never() => {
                a.blanket = Some((Status::Skipped, None,
                    "THP is disabled system-wide (transparent_hugepage/enabled = never); hugescope does not promote memory the administrator asked to keep in base pages".into()));
                return a;
            }
            Ok(s) if s.hpage_pmd_size != PMD_SIZE => {
                a.blanket = Some((Status::Skipped, None, format!(
                    "this kernel's PMD huge page is {} bytes, hugescope plans use 2 MiB", s.hpage_pmd_size)));
                return a;
            }
            Ok(_) => {}
            Err(e) => {
                a.blanket = Some((Status::Skipped, None, format!("transparent huge pages are not available: {e}")));
                return a;
            }
        }
        if let Target::Pid(pid) = target {
            // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            if fd < 0 {
                let err = std::io::Error::last_os_error();
                let code = err.raw_os_error().unwrap_or(0);
                if code == libc::ESRCH {
                    a.exited = true;
                } else {
                    a.blanket = Some((Status::Failed, Some(errno_name(code).into()),
                        format!("pidfd_open({pid}) failed: {err}: {}", explain_errno(code))));
                }
            } else {
                // SAFETY: fd is a fresh descriptor this Applier now owns.
                a.pidfd = Some(unsafe { OwnedFd::from_raw_fd(fd as i32) });
            }
        }
        a
    }

    /// The pid for /proc paths (0 = self).
    fn proc_pid(&self) -> Pid {
        match self.target {
            Target::SelfProcess => 0,
            Target::Pid(p) => p,
        }
    }

    /// True once the target has exited (pidfd becomes readable on exit).
    pub fn target_exited(&mut self) -> bool {
        if self.exited {
            return true;
        }
        if let Some(fd) = &self.pidfd {
            let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, zero timeout.
            let n = unsafe { libc::poll(&mut pfd, 1, 0) };
            if n > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP) != 0 {
                self.exited = true;
            }
        }
        self.exited
    }

    /// Read the target's VMAs; `None` if the target has exited meanwhile.
    fn read_vmas(&mut self) -> Option<std::result::Result<Vec<Vma>, String>> {
        let r = smaps::vmas(self.proc_pid());
        // Only trust what was read if the process is still the one the pidfd names.
        if self.target_exited() {
            return None;
        }
        Some(r.map_err(|e| e.to_string()))
    }

    /// Apply one entry now.
    pub fn apply_entry(&mut self, index: usize, e: &PlanEntry) -> CollapseOutcome {
        let out = CollapseOutcome::new(index, e);
        if e.page_size != PMD_SIZE {
            return out.skip(None, format!(
                "page size {} bytes: only PMD-size (2 MiB) collapse is possible with MADV_COLLAPSE", e.page_size));
        }
        if let Some((status, errno, reason)) = &self.blanket {
            let mut o = out.skip(errno.as_deref(), reason.clone());
            o.status = *status;
            return o;
        }
        if self.target_exited() {
            return out.skip(Some("ESRCH"), "process exited");
        }
        // MADV_COLLAPSE clamps inward to 2 MiB; do the same so the report counts regions honestly.
        let a = e.start.div_ceil(PMD_SIZE) * PMD_SIZE;
        let b = e.start.saturating_add(e.length) / PMD_SIZE * PMD_SIZE;
        if b <= a {
            return out.skip(Some("EINVAL"), format!(
                "range {:#x}+{:#x} contains no whole 2 MiB-aligned region", e.start, e.length));
        }
        if self.opts.precheck {
            let vmas = match self.read_vmas() {
                None => return out.skip(Some("ESRCH"), "process exited"),
                Some(Err(msg)) => {
                    let mut o = out.skip(None, format!("cannot read the target's smaps: {msg}"));
                    o.status = Status::Failed;
                    return o;
                }
                Some(Ok(v)) => v,
            };
            if let Some(o) = precheck(out.clone(), &vmas, a, b - a) {
                return o;
            }
        }
        let mut out = out;
        out.regions = (b - a) / PMD_SIZE;
        out.attempted = true;
        let t0 = Instant::now();
        let mut last_err: Option<i32> = None;
        let mut r = a;
        while r < b {
            let mut tries = 0;
            let res = loop {
                let res = self.collapse_region(r);
                match res {
                    Err(libc::EAGAIN) if tries < self.opts.eagain_retries => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    other => break other,
                }
            };
            match res {
                Ok(()) => out.regions_collapsed += 1,
                Err(code) => {
                    *out.errno_counts.entry(errno_name(code).to_string()).or_insert(0) += 1;
                    last_err = Some(code);
                    if code == libc::ESRCH {
                        self.exited = true;
                        break;
                    }
                }
            }
            r += PMD_SIZE;
        }
        out.collapse_us = t0.elapsed().as_micros() as u64;
        out.status = if out.regions_collapsed == out.regions {
            Status::Collapsed
        } else if out.regions_collapsed > 0 {
            Status::PartiallyCollapsed
        } else {
            Status::Failed
        };
        out.errno = last_err.map(|c| errno_name(c).to_string());
        out.reason = match (last_err, self.exited) {
            (_, true) => format!("process exited after {} of {} regions", out.regions_collapsed, out.regions),
            (None, _) => "collapsed".into(),
            (Some(c), _) => explain_errno(c).to_string(),
        };
        if !self.exited {
            let pid = self.proc_pid();
            out.bytes_huge_after = smaps::huge_bytes_in(pid, e.start, e.length).ok();
            out.bytes_huge_after_exact = crate::pagemap::pmd_mapped_bytes(pid, e.start, e.length).ok();
            if self.target_exited() {
                out.bytes_huge_after = None;
                out.bytes_huge_after_exact = None;
            }
        }
        out
    }

    fn collapse_region(&self, addr: u64) -> std::result::Result<(), i32> {
        match self.target {
            Target::SelfProcess => {
                // SAFETY: MADV_COLLAPSE does not change the contents of the range, only
                // its backing; an unmapped address yields ENOMEM/EINVAL, not a fault.
                let r = unsafe { libc::madvise(addr as *mut libc::c_void, PMD_SIZE as usize, MADV_COLLAPSE) };
                if r == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
                }
            }
            Target::Pid(_) => {
                let Some(fd) = &self.pidfd else { return Err(libc::ESRCH) };
                let iov = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: PMD_SIZE as usize };
                // SAFETY: the iovec describes the *target's* address space; the kernel
                // only reads the iovec array from ours.
                let r = unsafe { libc::syscall(libc::SYS_process_madvise, fd.as_raw_fd(), &iov as *const libc::iovec, 1usize, MADV_COLLAPSE, 0u32) };
                if r == PMD_SIZE as i64 {
                    Ok(())
                } else if r < 0 {
                    Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
                } else {
                    Err(libc::EAGAIN)
                }
            }
        }
    }
}

/// Check `[a, a+len)` against the VMAs; `Some(outcome)` if it must not be attempted.
fn precheck(out: CollapseOutcome, vmas: &[Vma], a: u64, len: u64) -> Option<CollapseOutcome> {
    let mapped = smaps::mapped_bytes(vmas, a, len);
    if mapped == 0 {
        return Some(out.skip(None, format!("not mapped: no VMA covers {a:#x}..{:#x}", a + len)));
    }
    if mapped < len {
        return Some(out.skip(None, format!(
            "partially mapped: VMAs cover {mapped} of the {len} bytes of {a:#x}..{:#x}", a + len)));
    }
    for v in smaps::overlapping(vmas, a, len) {
        let at = format!("VMA {:#x}-{:#x}", v.start, v.end);
        if v.no_hugepage() {
            return Some(out.skip(Some("EINVAL"), format!(
                "ineligible: {at} is marked VM_NOHUGEPAGE (MADV_NOHUGEPAGE); the kernel refuses MADV_COLLAPSE there with EINVAL")));
        }
        if !v.is_anonymous() {
            let what = if v.path.is_empty() { "shared memory".to_string() } else { v.path.clone() };
            return Some(out.skip(None, format!("not anonymous: {at} maps {what}; hugescope collapses private anonymous memory only")));
        }
        if !v.writable() {
            return Some(out.skip(Some("EINVAL"), format!("ineligible: {at} is not writable ({}); MADV_COLLAPSE needs a writable mapping", v.perms)));
        }
        for f in ["io", "pf", "ht", "dd"] {
            if v.has_flag(f) {
                return Some(out.skip(Some("EINVAL"), format!("ineligible: {at} has VmFlag '{f}' (I/O, PFN-mapped, hugetlb or not-dumpable special mapping)")));
            }
        }
        // THPeligible is computed against the sysfs `enabled` mode, which MADV_COLLAPSE
        // ignores. Under `madvise`, an unadvised VMA shows 0 yet collapses fine, so a 0
        // is only a real refusal when neither the mode nor an `hg` mark explains it.
        if v.thp_eligible == Some(false) && v.hugepage() {
            return Some(out.skip(Some("EINVAL"), format!(
                "ineligible: {at} has THPeligible 0 although it is marked MADV_HUGEPAGE (prctl THP disable or an unsupported VMA)")));
        }
        if v.rss == 0 {
            return Some(out.skip(Some("EINVAL"), format!(
                "nothing resident: {at} has no resident page; MADV_COLLAPSE needs at least one per region")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(start: u64, length: u64, page_size: u64) -> PlanEntry {
        PlanEntry { start, length, page_size, when: When::Start, pid: 0, note: None }
    }

    #[test]
    fn gigantic_pages_are_skipped_with_reason() {
        let o = apply(Target::SelfProcess, &[entry(1 << 30, 1 << 30, 1 << 30)]);
        assert_eq!(o[0].status, Status::Skipped);
        assert!(!o[0].attempted);
        assert!(o[0].reason.contains("only PMD-size (2 MiB)") || o[0].reason.contains("THP"), "{}", o[0].reason);
    }

    #[test]
    fn unaligned_range_has_no_region() {
        let o = apply(Target::SelfProcess, &[entry(0x1000, 0x2000, PMD_SIZE)]);
        assert_eq!(o[0].status, Status::Skipped);
        assert!(!o[0].attempted);
    }

    #[test]
    fn outcome_serializes() {
        let o = CollapseOutcome::new(0, &entry(0, PMD_SIZE, PMD_SIZE)).skip(Some("EINVAL"), "x");
        let j = serde_json::to_string(&o).unwrap();
        assert!(j.contains("\"status\":\"skipped\""), "{j}");
        let back: CollapseOutcome = serde_json::from_str(&j).unwrap();
        assert_eq!(back, o);
    }
}
