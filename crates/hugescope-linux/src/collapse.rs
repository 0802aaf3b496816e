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
//! Each entry's whole range is advised with one call: applying a plan should cost
//! little beyond the collapses themselves (issue #18 measured 30-90 ms of overhead
//! per 2 MiB region when every region was a call with its own smaps reads).
//! `MADV_COLLAPSE` reports only the errno of the *last* failing region, so when a
//! call fails the regions still not PMD-mapped (from `PAGEMAP_SCAN`) are asked one
//! by one to get each failure's errno (reference A.4). Pre-checks and the reads of
//! the result are batched per plan step (`Applier::apply_step`).

use crate::error::errno_name;
use crate::smaps::{self, Pid, Vma};
use crate::thp::ThpState;
use hugescope_core::plan::{PlanEntry, When};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

pub const MADV_COLLAPSE: libc::c_int = 25;
pub const PMD_SIZE: u64 = 2 << 20;
/// Entries per step when a whole plan is applied at once (`hugescope apply`):
/// one smaps read per 64 entries, and a signal is seen between steps.
pub const STEP_ENTRIES: usize = 64;

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
            match crate::pidfd::open(pid) {
                Ok(fd) => a.pidfd = Some(fd),
                Err(err) => {
                    let code = err.raw_os_error().unwrap_or(0);
                    if code == libc::ESRCH {
                        a.exited = true;
                    } else {
                        a.blanket = Some((Status::Failed, Some(errno_name(code).into()),
                            format!("pidfd_open({pid}) failed: {err}: {}", explain_errno(code))));
                    }
                }
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
            if crate::pidfd::exited_within(fd, Duration::ZERO) {
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
        self.apply_step(&[(index, e)], None).pop().expect("one outcome per entry")
    }

    /// Apply the entries that are due together (one plan step). What costs
    /// besides the collapses is paid once per step, not per entry: one smaps
    /// read for every entry's pre-check (or `vmas`, a read the caller already
    /// made this step), one collapse call per entry's whole range, and one
    /// smaps read plus one open pagemap for the result. Outcomes in the order
    /// of `items`.
    pub fn apply_step(&mut self, items: &[(usize, &PlanEntry)], vmas: Option<&[Vma]>) -> Vec<CollapseOutcome> {
        // Each item: a finished outcome, or one still to collapse with its
        // 2 MiB-clamped range.
        let mut work: Vec<(CollapseOutcome, Option<(u64, u64)>)> =
            items.iter().map(|(i, e)| self.screen(*i, e)).collect();
        if self.opts.precheck && work.iter().any(|(_, r)| r.is_some()) {
            let read;
            let vmas: std::result::Result<&[Vma], Option<String>> = match vmas {
                Some(v) => Ok(v),
                None => match self.read_vmas() {
                    None => Err(None),
                    Some(Err(msg)) => Err(Some(msg)),
                    Some(Ok(v)) => {
                        read = v;
                        Ok(&read)
                    }
                },
            };
            for (out, range) in work.iter_mut() {
                let Some((a, b)) = *range else { continue };
                let refused = match &vmas {
                    Err(None) => Some(out.clone().skip(Some("ESRCH"), "process exited")),
                    Err(Some(msg)) => {
                        let mut o = out.clone().skip(None, format!("cannot read the target's smaps: {msg}"));
                        o.status = Status::Failed;
                        Some(o)
                    }
                    Ok(v) => precheck(out.clone(), v, a, b - a),
                };
                if let Some(o) = refused {
                    *out = o;
                    *range = None;
                }
            }
        }
        // The pagemap is opened once, before the collapses, and only if some
        // entry is to be collapsed; it serves both a failed call's per-region
        // follow-up and the result below.
        let scanner = if work.iter().any(|(_, r)| r.is_some()) {
            crate::pagemap::Scanner::open(self.proc_pid()).ok()
        } else {
            None
        };
        for (out, range) in work.iter_mut() {
            if let Some((a, b)) = *range {
                self.collapse(out, a, b, scanner.as_ref());
            }
        }
        let attempted: Vec<usize> = (0..work.len()).filter(|&k| work[k].0.attempted).collect();
        if !self.exited && !attempted.is_empty() {
            let after = smaps::vmas(self.proc_pid()).ok();
            for &k in &attempted {
                let o = &mut work[k].0;
                o.bytes_huge_after = after.as_ref().map(|v| smaps::attribute_huge(v, o.start, o.length));
                o.bytes_huge_after_exact = scanner.as_ref().and_then(|s| s.pmd_mapped_bytes(o.start, o.length).ok());
            }
            // Only trust what was read if the process is still the one the pidfd names.
            if self.target_exited() {
                for &k in &attempted {
                    work[k].0.bytes_huge_after = None;
                    work[k].0.bytes_huge_after_exact = None;
                }
            }
        }
        work.into_iter().map(|(o, _)| o).collect()
    }

    /// The checks that need no read of the target: page size, a blanket
    /// refusal, an exited target, a range with no whole 2 MiB region.
    fn screen(&mut self, index: usize, e: &PlanEntry) -> (CollapseOutcome, Option<(u64, u64)>) {
        let out = CollapseOutcome::new(index, e);
        if e.page_size != PMD_SIZE {
            return (out.skip(None, format!(
                "page size {} bytes: only PMD-size (2 MiB) collapse is possible with MADV_COLLAPSE", e.page_size)), None);
        }
        if let Some((status, errno, reason)) = &self.blanket {
            let mut o = out.skip(errno.as_deref(), reason.clone());
            o.status = *status;
            return (o, None);
        }
        if self.target_exited() {
            return (out.skip(Some("ESRCH"), "process exited"), None);
        }
        // MADV_COLLAPSE clamps inward to 2 MiB; do the same so the report counts regions honestly.
        let a = e.start.div_ceil(PMD_SIZE) * PMD_SIZE;
        let b = e.start.saturating_add(e.length) / PMD_SIZE * PMD_SIZE;
        if b <= a {
            return (out.skip(Some("EINVAL"), format!(
                "range {:#x}+{:#x} contains no whole 2 MiB-aligned region", e.start, e.length)), None);
        }
        (out, Some((a, b)))
    }

    /// Collapse `[a, b)` with one call. `MADV_COLLAPSE` tries every region
    /// and reports one errno, the last failure's; `PAGEMAP_SCAN` then says
    /// which regions are PMD-mapped, and the others are counted under that
    /// errno. Each region is asked once, as when every region was a call of
    /// its own (a second ask would give a failed region a second chance at
    /// compaction and change the measurement), except after EAGAIN, which is
    /// transient and retried region by region as before. Without
    /// `PAGEMAP_SCAN` nothing could say which regions failed, so the regions
    /// are asked one by one from the start.
    fn collapse(&mut self, out: &mut CollapseOutcome, a: u64, b: u64, scanner: Option<&crate::pagemap::Scanner>) {
        out.regions = (b - a) / PMD_SIZE;
        out.attempted = true;
        let t0 = Instant::now();
        let mut last_err: Option<i32> = None;
        let mut fail = |out: &mut CollapseOutcome, code: i32, n: u64| {
            *out.errno_counts.entry(errno_name(code).to_string()).or_insert(0) += n;
            last_err = Some(code);
        };
        // Regions still to ask one by one.
        let mut one_by_one: Vec<u64> = Vec::new();
        match scanner {
            None => one_by_one = (a..b).step_by(PMD_SIZE as usize).collect(),
            Some(scan) => match self.collapse_range(a, b - a) {
                Ok(()) => out.regions_collapsed = out.regions,
                Err(libc::ESRCH) => {
                    self.exited = true;
                    fail(out, libc::ESRCH, 1);
                }
                Err(code) => match scan.pmd_mapped(a, b - a) {
                    Ok(runs) => {
                        let huge = |r: u64| runs.iter().any(|x| x.start <= r && r + PMD_SIZE <= x.end);
                        let left: Vec<u64> = (a..b).step_by(PMD_SIZE as usize).filter(|&r| !huge(r)).collect();
                        out.regions_collapsed = out.regions - left.len() as u64;
                        if code == libc::EAGAIN {
                            one_by_one = left;
                        } else if !left.is_empty() {
                            fail(out, code, left.len() as u64);
                        } else {
                            // Every region ended PMD-mapped although the call
                            // failed (a racing khugepaged): collapsed.
                        }
                    }
                    // The process went away between the call and the scan.
                    Err(_) if self.target_exited() => fail(out, libc::ESRCH, 1),
                    Err(_) => fail(out, code, out.regions),
                },
            },
        }
        for r in one_by_one {
            match self.collapse_region_retrying(r) {
                Ok(()) => out.regions_collapsed += 1,
                Err(code) => {
                    fail(out, code, 1);
                    if code == libc::ESRCH {
                        self.exited = true;
                        break;
                    }
                }
            }
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
    }

    fn collapse_region_retrying(&self, r: u64) -> std::result::Result<(), i32> {
        let mut tries = 0;
        loop {
            match self.collapse_range(r, PMD_SIZE) {
                Err(libc::EAGAIN) if tries < self.opts.eagain_retries => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => return other,
            }
        }
    }

    /// One `MADV_COLLAPSE` over `[addr, addr+len)`: `madvise` for this
    /// process, `process_madvise` with one iovec for another.
    fn collapse_range(&self, addr: u64, len: u64) -> std::result::Result<(), i32> {
        match self.target {
            Target::SelfProcess => {
                // SAFETY: MADV_COLLAPSE does not change the contents of the range, only
                // its backing; an unmapped address yields ENOMEM/EINVAL, not a fault.
                let r = unsafe { libc::madvise(addr as *mut libc::c_void, len as usize, MADV_COLLAPSE) };
                if r == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
                }
            }
            Target::Pid(_) => {
                let Some(fd) = &self.pidfd else { return Err(libc::ESRCH) };
                let iov = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len as usize };
                // SAFETY: the iovec describes the *target's* address space; the kernel
                // only reads the iovec array from ours.
                let r = unsafe { libc::syscall(libc::SYS_process_madvise, fd.as_raw_fd(), &iov as *const libc::iovec, 1usize, MADV_COLLAPSE, 0u32) };
                if r == len as i64 {
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
        if let Some((errno, why)) = vma_ineligible(v) {
            return Some(out.skip(errno, why));
        }
        if v.rss == 0 {
            return Some(out.skip(Some("EINVAL"), format!(
                "nothing resident: VMA {:#x}-{:#x} has no resident page; MADV_COLLAPSE needs at least one per region",
                v.start, v.end)));
        }
    }
    None
}

/// Why MADV_COLLAPSE can never succeed in VMA `v` (with the errno the kernel
/// would give, when it has one), or `None` when it may: the checks of
/// `precheck` that depend on the VMA alone, not on what is resident yet. The
/// launcher's region-by-region sweep (`sweep`) uses them to tell a region that
/// will never collapse from one not populated yet.
pub fn vma_ineligible(v: &Vma) -> Option<(Option<&'static str>, String)> {
    let at = format!("VMA {:#x}-{:#x}", v.start, v.end);
    if v.no_hugepage() {
        return Some((Some("EINVAL"), format!(
            "ineligible: {at} is marked VM_NOHUGEPAGE (MADV_NOHUGEPAGE); the kernel refuses MADV_COLLAPSE there with EINVAL")));
    }
    if !v.is_anonymous() {
        let what = if v.path.is_empty() { "shared memory".to_string() } else { v.path.clone() };
        return Some((None, format!("not anonymous: {at} maps {what}; hugescope collapses private anonymous memory only")));
    }
    if !v.writable() {
        return Some((Some("EINVAL"), format!("ineligible: {at} is not writable ({}); MADV_COLLAPSE needs a writable mapping", v.perms)));
    }
    for f in ["io", "pf", "ht", "dd"] {
        if v.has_flag(f) {
            return Some((Some("EINVAL"), format!("ineligible: {at} has VmFlag '{f}' (I/O, PFN-mapped, hugetlb or not-dumpable special mapping)")));
        }
    }
    // THPeligible is computed against the sysfs `enabled` mode, which MADV_COLLAPSE
    // ignores. Under `madvise`, an unadvised VMA shows 0 yet collapses fine, so a 0
    // is only a real refusal when neither the mode nor an `hg` mark explains it.
    if v.thp_eligible == Some(false) && v.hugepage() {
        return Some((Some("EINVAL"), format!(
            "ineligible: {at} has THPeligible 0 although it is marked MADV_HUGEPAGE (prctl THP disable or an unsupported VMA)")));
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
