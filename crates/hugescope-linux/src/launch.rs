//! Running a command under a plan and measuring it.
//!
//! The child runs with address-space randomisation disabled for that process only
//! (`personality(ADDR_NO_RANDOMIZE)` between fork and exec, inherited across exec),
//! so the addresses in a plan computed from a trace of an earlier run are the
//! addresses of this run; the machine-wide `randomize_va_space` the PCC paper set is
//! left alone. The parent applies time-based plan entries with `process_madvise`
//! (see `collapse`), samples huge-page coverage from `smaps_rollup`, and reaps the
//! child with `wait4` to get its user/system time and peak RSS.
//!
//! The child leads a process group of its own and is SIGKILLed by the kernel if
//! the thread that started it dies (`PR_SET_PDEATHSIG`), so it never outlives a
//! killed hugescope. A stop request (SIGINT/SIGTERM, see `lifetime`) is forwarded
//! to its group; after `lifetime::STOP_GRACE` the group is SIGKILLed and reaped.
//! `--timeout` SIGKILLs the group. When the program exits, anything it left running
//! in its group is killed too: it would go on using the machine unmeasured.

use crate::collapse::{Applier, ApplyOptions, CollapseOutcome, Status, Target};
use crate::lifetime::{self, Stop};
use crate::smaps::{self, Pid};
use crate::sweep::RegionSweep;
use crate::thp::ThpState;
use crate::{Error, Result};
use hugescope_core::plan::{PlanEntry, SiteEntry, When};
use crate::site_watch::{self, SiteWatch};
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// `ADDR_NO_RANDOMIZE` from <sys/personality.h>.
pub const ADDR_NO_RANDOMIZE: u32 = 0x0040000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchOptions {
    /// Coverage sampling period in milliseconds (0 = no sampling).
    pub sample_ms: u64,
    /// How long an entry may wait, after it comes due, for its range to be mapped and populated.
    pub start_timeout_s: f64,
    /// Kill the child (SIGKILL) after this many seconds; `None` = wait for ever.
    pub timeout_s: Option<f64>,
    /// Apply only entries with this plan `pid`; `None` = all entries.
    pub plan_pid: Option<u16>,
    /// Disable ASLR for the child.
    pub disable_aslr: bool,
    /// The plan header's access rate: `{"accesses": N}` entries come due at N / rate s.
    pub accesses_per_second: Option<f64>,
    /// `--plan all`: besides the entries, every private anonymous mapping of
    /// the program is collapsed region by region as it is populated, for as
    /// long as the program runs (one more outcome, after the entries').
    #[serde(default)]
    pub plan_all: bool,
    /// The plan's entries by allocation site: the program (built with
    /// `hugescope cc`) reports its allocations, and each one of a listed site
    /// becomes a range entry (`site_watch`). Outcome indices follow the range
    /// entries': site entry j is `entries.len() + j`.
    #[serde(default)]
    pub sites: Vec<SiteEntry>,
    pub apply: ApplyOptions,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions { sample_ms: 100, start_timeout_s: 10.0, timeout_s: None, plan_pid: None, disable_aslr: true, accesses_per_second: None, plan_all: false, sites: Vec::new(), apply: ApplyOptions::default() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoverageSample {
    /// Seconds since the child was started.
    pub t_s: f64,
    /// Total `AnonHugePages` of the child.
    pub anon_huge_bytes: u64,
    pub rss_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppliedEntry {
    /// Seconds since start when the entry was (last) applied.
    pub t_s: f64,
    /// Seconds since start when that plan step returned: the pages are huge
    /// from here on, not from `t_s` (a collapse of a few MiB takes tens of
    /// milliseconds, longer on a loaded machine).
    #[serde(default)]
    pub done_s: f64,
    /// How many times it was tried (a `Start` entry is retried until populated).
    pub attempts: u32,
    pub outcome: CollapseOutcome,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub command: Vec<String>,
    pub pid: Pid,
    /// `/proc/PID/personality` read right after exec.
    pub personality: Option<u32>,
    pub aslr_disabled: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// "ok" (exit 0), "failed" (non-zero exit), "killed" (by a signal) or "timeout".
    /// Only "ok" runs are summarised.
    pub status: String,
    /// The status in words: "exit 1", "signal 9 (SIGKILL)", "killed after the 2 s timeout".
    pub status_detail: String,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// The program's peak resident set, bytes (see `program_peak_rss`).
    pub peak_rss_bytes: u64,
    /// How `peak_rss_bytes` was measured: "wait4" (the child's `ru_maxrss`,
    /// exact), "vmhwm" (the largest `VmHWM` sampled while it ran) or
    /// "wait4-bound" (`ru_maxrss`, which may count the launcher's inherited
    /// pages: the program ended before any sample).
    #[serde(default)]
    pub peak_rss_source: String,
    pub samples: Vec<CoverageSample>,
    /// Largest sampled `AnonHugePages`.
    pub peak_anon_huge_bytes: u64,
    pub applied: Vec<AppliedEntry>,
    /// Problems with the plan, counted: entries not fully applied.
    #[serde(default)]
    pub warnings: Vec<String>,
    pub thp: Option<ThpState>,
}

/// The status of a finished run, as `RunRecord::status` and `status_detail`.
pub fn run_status(exit_code: Option<i32>, signal: Option<i32>, timeout_s: Option<f64>) -> (String, String) {
    match (exit_code, signal, timeout_s) {
        (_, _, Some(t)) => ("timeout".into(), format!("killed after the {t} s timeout")),
        (Some(0), _, _) => ("ok".into(), "exit 0".into()),
        (Some(c), _, _) => ("failed".into(), format!("exit {c}")),
        (None, Some(g), _) => ("killed".into(), format!("signal {g} ({})", signal_name(g))),
        (None, None, _) => ("failed".into(), "no exit status".into()),
    }
}

/// The conventional name of a signal, for status lines people read and grep.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP", libc::SIGINT => "SIGINT", libc::SIGQUIT => "SIGQUIT", libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP", libc::SIGABRT => "SIGABRT", libc::SIGBUS => "SIGBUS", libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL", libc::SIGUSR1 => "SIGUSR1", libc::SIGSEGV => "SIGSEGV", libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE", libc::SIGALRM => "SIGALRM", libc::SIGTERM => "SIGTERM", libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ", libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// Read `/proc/PID/personality` (hex).
pub fn personality_of(pid: Pid) -> Result<u32> {
    let p = format!("/proc/{pid}/personality");
    let t = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    u32::from_str_radix(t.trim(), 16).map_err(|_| Error::parse(&p, 1, format!("'{}' is not hex", t.trim())))
}

/// Shortest and longest pause between two sweeps of one entry: short while
/// the program populates its memory, doubling while nothing changes (a sweep
/// reads the program's smaps).
const SWEEP_MIN_S: f64 = 0.005;
const SWEEP_MAX_S: f64 = 0.1;

/// How often the reports of a program run under a plan by site are read.
const SITE_POLL_S: f64 = 0.005;

/// An entry being applied to the launched program.
struct Pending {
    sweep: RegionSweep,
    due_s: f64,
    next_s: f64,
    period_s: f64,
    /// When the last sweep that made a region huge returned.
    done_s: Option<f64>,
}

impl Pending {
    fn new(sweep: RegionSweep, due_s: f64) -> Pending {
        Pending { sweep, due_s, next_s: due_s, period_s: SWEEP_MIN_S, done_s: None }
    }

    fn finish(&self, end: &str) -> AppliedEntry {
        let t_s = self.sweep.first_s.unwrap_or(self.due_s);
        AppliedEntry { t_s, done_s: self.done_s.unwrap_or(t_s), attempts: self.sweep.attempts, outcome: self.sweep.outcome(end) }
    }
}

/// Run `cmd`, apply the time-based entries of `entries`, and measure.
pub fn launch(cmd: Command, entries: &[PlanEntry], opts: &LaunchOptions) -> Result<RunRecord> {
    launch_with_stop(cmd, entries, opts, &mut lifetime::never())
}

/// `launch`, asking `stop` about every 100 ms whether to stop: then the signal it
/// returns is forwarded to the child's group, the child is reaped, and the result
/// is `Error::Interrupted(signal)`.
pub fn launch_with_stop(mut cmd: Command, entries: &[PlanEntry], opts: &LaunchOptions, stop: Stop) -> Result<RunRecord> {
    let mut command = vec![cmd.get_program().to_string_lossy().to_string()];
    command.extend(cmd.get_args().map(|a| a.to_string_lossy().to_string()));
    // Its own group: a stop or a timeout reaches everything the program started.
    cmd.process_group(0);
    let parent = std::process::id() as Pid;
    cmd.env(lifetime::PARENT_PID_ENV, parent.to_string());
    let disable_aslr = opts.disable_aslr;
    // A plan by allocation site: the program's runtime reports its
    // allocations into a file of ours, from the smallest page size named on
    // (smaller allocations hold no page to promote).
    let mut watch = if opts.sites.is_empty() { None } else { Some(SiteWatch::create()?) };
    if let Some(w) = &watch {
        cmd.env(site_watch::SITES_ENV, &w.path);
        let min = opts.sites.iter().map(|s| s.page_size).min().unwrap_or(2 << 20);
        cmd.env(site_watch::SITE_MIN_ENV, min.to_string());
    }
    let mut site_seen = vec![0u32; opts.sites.len()];
    // SAFETY: only async-signal-safe system calls run in the forked child.
    unsafe {
        cmd.pre_exec(move || {
            if !lifetime::die_with_parent(libc::SIGKILL, parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            if disable_aslr {
                let cur = libc::personality(0xffff_ffff);
                if cur == -1 || libc::personality((cur as u32 | ADDR_NO_RANDOMIZE) as libc::c_ulong) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let thp = ThpState::read().ok();
    // The forked child starts with a copy of this process's page tables, and
    // the kernel carries that copy's peak into the child's ru_maxrss across
    // exec: a 2 MB program launched from a 17 MB Python process reported
    // 17 MB (issue #38). What it can have inherited is at most our RSS now.
    let inherited_rss = smaps::vm_rss(0).unwrap_or(u64::MAX);
    let t0 = Instant::now();
    let child = cmd.spawn().map_err(|e| Error::io(&command[0], e))?;
    // spawn returns after a successful exec, so the personality is the program's.
    let pid = child.id() as Pid;
    let personality = personality_of(pid).ok();
    // Our own unreaped child: its pid cannot be reused before we wait for it.
    let pidfd = crate::pidfd::open(pid).ok();

    let mut pending: Vec<Pending> = Vec::new();
    let mut applied: Vec<AppliedEntry> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if opts.plan_pid.is_some_and(|p| p != e.pid) {
            continue;
        }
        let due_s = match wall_clock_time(&e.when, opts.accesses_per_second) {
            Ok(t) => t,
            Err(why) => {
                applied.push(AppliedEntry { t_s: 0.0, done_s: 0.0, attempts: 0, outcome: CollapseOutcome::not_applied(i, e, why) });
                continue;
            }
        };
        pending.push(Pending::new(RegionSweep::new(i, e.clone()), due_s));
    }
    if opts.plan_all {
        pending.push(Pending::new(RegionSweep::all(entries.len()), 0.0));
    }
    pending.sort_by(|a, b| a.due_s.total_cmp(&b.due_s));
    let mut applier = Applier::new(Target::Pid(pid), opts.apply.clone());
    // One open pagemap for every sweep: which regions are present and which
    // PMD-mapped (PAGEMAP_SCAN), without an open per step.
    let scanner = crate::pagemap::Scanner::open(pid).ok();
    // Coverage is sampled on a thread of its own, so that it goes on while a
    // long plan step collapses (issue #18: sampled only between steps, a run
    // whose whole life was one step showed 0% huge).
    let hwm = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = (opts.sample_ms > 0).then(|| Sampler::start(pid, t0, Duration::from_millis(opts.sample_ms), hwm.clone()));

    let mut timed_out = false;
    let status: libc::c_int;
    let ru: libc::rusage;
    let wall_s;
    loop {
        if lifetime::has_exited(pid) {
            wall_s = t0.elapsed().as_secs_f64();
            // Reap it, and end whatever it left running in its group.
            (status, ru) = lifetime::stop_child(pid, libc::SIGKILL, Duration::ZERO);
            break;
        }
        note_hwm(pid, &hwm);
        if let Some(sig) = stop() {
            lifetime::stop_child(pid, sig, lifetime::STOP_GRACE);
            drop(sampler.map(Sampler::finish));
            return Err(Error::Interrupted(sig));
        }
        let now = t0.elapsed().as_secs_f64();
        if let Some(w) = watch.as_mut() {
            site_entries(w.poll(pid), entries.len(), opts, now, &mut site_seen, &mut pending, &mut applied);
        }
        if let Some(limit) = opts.timeout_s {
            if now > limit && !timed_out {
                // Our own child's group, past the caller's limit.
                lifetime::signal_child(pid, libc::SIGKILL);
                timed_out = true;
            }
        }
        // The entries due now form one plan step: one smaps read serves every
        // entry's sweep. Each sweep collapses the regions of its range that
        // are populated by now; an entry waits for the rest (a time converted
        // from the trace's accesses can fall a little before the program
        // touches its range, and MADV_COLLAPSE needs a resident page per
        // region) up to start_timeout_s after it came due; --plan all for as
        // long as the program runs.
        let due: Vec<usize> = (0..pending.len()).filter(|&k| pending[k].due_s <= now && pending[k].next_s <= now).collect();
        if !due.is_empty() {
            if let Ok(vmas) = smaps::vmas(pid) {
                let mut done = Vec::new();
                let mut collapsed = false;
                for k in due {
                    let p = &mut pending[k];
                    let r = p.sweep.sweep(now, &mut applier, &vmas, scanner.as_ref());
                    let after = t0.elapsed().as_secs_f64();
                    if r.collapsed || p.done_s.is_none() {
                        p.done_s = Some(after);
                    }
                    collapsed |= r.collapsed;
                    // Sweep again soon while the program populates memory,
                    // less often while nothing changes.
                    p.period_s = if r.changed { SWEEP_MIN_S } else { (p.period_s * 2.0).min(SWEEP_MAX_S) };
                    p.next_s = after + p.period_s;
                    let expired = !p.sweep.is_all() && now > p.due_s + opts.start_timeout_s;
                    if p.sweep.finished() || expired {
                        let end = if expired && !p.sweep.finished() {
                            format!("--start-timeout {} s after it came due", opts.start_timeout_s)
                        } else {
                            String::new()
                        };
                        applied.push(p.finish(&end));
                        done.push(k);
                    }
                }
                // A sample right after a step: a short run could end before the
                // next period and its coverage show none of the pages just made.
                if collapsed {
                    if let Some(s) = &sampler {
                        s.nudge();
                    }
                }
                for k in done.into_iter().rev() {
                    pending.remove(k);
                }
            }
        }
        // Sleep until the next event, but wake at once if the child exits (pidfd).
        let now = t0.elapsed().as_secs_f64();
        let mut next = now + 0.1;
        if let Some(p) = pending.iter().map(|p| p.due_s.max(p.next_s)).reduce(f64::min) {
            next = next.min(p);
        }
        if let Some(l) = opts.timeout_s {
            if !timed_out {
                next = next.min(l);
            }
        }
        // A plan by site: read the program's reports often, so an allocation
        // is swept soon after it is made (one read of a small file).
        if watch.is_some() {
            next = next.min(now + SITE_POLL_S);
        }
        let ms = ((next - now) * 1000.0).clamp(1.0, 100.0) as i32;
        match &pidfd {
            Some(fd) => {
                crate::pidfd::exited_within(fd, Duration::from_millis(ms as u64));
            }
            None => std::thread::sleep(Duration::from_millis(ms as u64)),
        }
    }
    let samples = sampler.map(Sampler::finish).unwrap_or_default();
    // Allocations reported in the program's last moments: counted as not applied.
    if let Some(w) = watch.as_mut() {
        site_entries(w.poll(pid), entries.len(), opts, wall_s, &mut site_seen, &mut pending, &mut applied);
    }
    for (j, s) in opts.sites.iter().enumerate() {
        if site_seen[j] == 0 {
            let e = s.entry_over(0, 0);
            let why = format!("no allocation of site '{}' was reported in this run (is the program built with 'hugescope cc', \
                               and is this the program the plan was made for?)", s.site);
            applied.push(AppliedEntry { t_s: wall_s, done_s: wall_s, attempts: 0, outcome: CollapseOutcome::not_applied(entries.len() + j, &e, why) });
        }
    }
    drop(watch);
    // Entries still going when the program ended: counted as they stand.
    for p in pending {
        if p.sweep.first_s.is_none() {
            let o = CollapseOutcome::not_applied(p.sweep.index, &p.sweep.entry, format!(
                "due at {:.3} s, but the program exited at {wall_s:.3} s", p.due_s));
            applied.push(AppliedEntry { t_s: wall_s, done_s: wall_s, attempts: 0, outcome: o });
        } else {
            applied.push(p.finish(&format!("the program exited at {wall_s:.3} s")));
        }
    }
    applied.sort_by_key(|a| a.outcome.index);
    let warnings = unapplied_warning(&applied).into_iter().collect();
    drop(child);
    let exit_code = if libc::WIFEXITED(status) { Some(libc::WEXITSTATUS(status)) } else { None };
    let signal = if libc::WIFSIGNALED(status) { Some(libc::WTERMSIG(status)) } else { None };
    let (run_status, status_detail) = run_status(exit_code, signal, if timed_out { opts.timeout_s } else { None });
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let peak_anon_huge_bytes = samples.iter().map(|s: &CoverageSample| s.anon_huge_bytes).max().unwrap_or(0);
    let (peak_rss_bytes, peak_rss_source) = program_peak_rss(ru.ru_maxrss.max(0) as u64 * 1024, inherited_rss,
                                                             hwm.load(std::sync::atomic::Ordering::Relaxed));
    Ok(RunRecord {
        command,
        pid,
        personality,
        aslr_disabled: personality.is_some_and(|p| p & ADDR_NO_RANDOMIZE != 0),
        exit_code,
        signal,
        timed_out,
        status: run_status,
        status_detail,
        wall_s,
        user_s: tv(ru.ru_utime),
        sys_s: tv(ru.ru_stime),
        peak_rss_bytes,
        peak_rss_source: peak_rss_source.into(),
        samples,
        peak_anon_huge_bytes,
        applied,
        warnings,
        thp,
    })
}

/// Turn reported allocations of the plan's sites into pending range entries
/// (due when the site entry's `when` says), or into outcomes "not applied"
/// when an allocation holds no whole page of the entry's size.
fn site_entries(allocs: Vec<site_watch::Allocation>, first_index: usize, opts: &LaunchOptions, now: f64, seen: &mut [u32],
                pending: &mut Vec<Pending>, applied: &mut Vec<AppliedEntry>) {
    if allocs.is_empty() {
        return; // the usual poll: nothing new, the pending order stands
    }
    for a in allocs {
        for (j, s) in opts.sites.iter().enumerate() {
            if s.site != a.key || opts.plan_pid.is_some_and(|p| p != s.pid) {
                continue;
            }
            seen[j] += 1;
            let index = first_index + j;
            let due_s = match wall_clock_time(&s.when, opts.accesses_per_second) {
                Ok(t) => t.max(now),
                Err(why) => {
                    let e = s.entry_over(a.start, a.end - a.start);
                    applied.push(AppliedEntry { t_s: now, done_s: now, attempts: 0, outcome: CollapseOutcome::not_applied(index, &e, why) });
                    continue;
                }
            };
            match s.range_entry(a.start, a.end) {
                Some(e) => pending.push(Pending::new(RegionSweep::new(index, e), due_s)),
                None => {
                    let e = s.entry_over(a.start, a.end - a.start);
                    let why = format!("the allocation of {} bytes at {:#x} holds no whole page of {} bytes", a.end - a.start, a.start, s.page_size);
                    applied.push(AppliedEntry { t_s: now, done_s: now, attempts: 0, outcome: CollapseOutcome::not_applied(index, &e, why) });
                }
            }
        }
    }
    pending.sort_by(|a, b| a.due_s.total_cmp(&b.due_s));
}

/// One counted warning when some entry was not fully applied, so that a run
/// whose plan did not take never passes in silence (issue #38: 2 of 87
/// regions collapsed, exit status 0). `--plan all` counts the populated
/// regions of eligible VMAs that stayed small.
pub fn unapplied_warning(applied: &[AppliedEntry]) -> Option<String> {
    let bad: Vec<&CollapseOutcome> = applied.iter().map(|a| &a.outcome).filter(|o| o.status != Status::Collapsed).collect();
    if bad.is_empty() {
        return None;
    }
    let regions: u64 = bad.iter().map(|o| o.regions).sum();
    let huge: u64 = bad.iter().map(|o| o.regions_collapsed).sum();
    Some(format!(
        "{} of {} plan entries not fully applied: {} of their {} 2 MiB regions stayed in base pages (each entry's reason says why)",
        bad.len(), applied.len(), regions - huge.min(regions), regions))
}

/// The program's own peak RSS and how it was measured. `ru_maxrss` from
/// wait4 is the larger of the program's peak and the peak of the forked
/// copy of the launcher it replaced at exec (at most `inherited`, our RSS at
/// fork). Above that it is the program's, exactly; at or below it the
/// program's own `VmHWM` (sampled while it ran, `hwm`) is used; with no
/// sample, `ru_maxrss` stands as an upper bound.
pub fn program_peak_rss(maxrss: u64, inherited: u64, hwm: u64) -> (u64, &'static str) {
    if maxrss > inherited {
        (maxrss, "wait4")
    } else if hwm > 0 {
        (hwm, "vmhwm")
    } else {
        (maxrss, "wait4-bound")
    }
}

/// Raise `hwm` to the program's `VmHWM` now (nothing once it has exited).
fn note_hwm(pid: Pid, hwm: &std::sync::atomic::AtomicU64) {
    if let Ok(h) = smaps::vm_hwm(pid) {
        hwm.fetch_max(h, std::sync::atomic::Ordering::Relaxed);
    }
}

/// When a launched program's entry comes due, in seconds after launch (0 for
/// `start`), or why it cannot be placed on the clock. An access count
/// is converted at `rate` (the plan header's, from `--emit-plan --timing
/// seconds`) when there is one; a progress label has no clock at all.
fn wall_clock_time(w: &When, rate: Option<f64>) -> std::result::Result<f64, String> {
    match (w, rate) {
        (When::Start, _) => Ok(0.0),
        (When::TimeS(t), _) => Ok(*t),
        (When::Accesses(n), Some(r)) if r > 0.0 => Ok(*n as f64 / r),
        (When::Accesses(n), _) => Err(format!(
            "when={{accesses: {n}}} has no wall-clock time and the plan states no access rate; emit the plan with \
             --timing seconds or --timing start for a program")),
        (other, _) => Err(format!(
            "when={} is a workload progress point, which a program does not report; emit the plan with \
             --timing seconds or --timing start for a program",
            serde_json::to_string(other).unwrap_or_default())),
    }
}

/// The coverage sampler: a thread that reads the child's `smaps_rollup`
/// (the figures `hugescope coverage PID` totals) and its `VmHWM` every
/// period and when nudged, until `finish`.
struct Sampler {
    tx: std::sync::mpsc::Sender<()>,
    handle: std::thread::JoinHandle<Vec<CoverageSample>>,
}

impl Sampler {
    fn start(pid: Pid, t0: Instant, period: Duration, hwm: std::sync::Arc<std::sync::atomic::AtomicU64>) -> Sampler {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            loop {
                note_hwm(pid, &hwm);
                if let (Ok(h), Ok(rss)) = (smaps::anon_huge_total(pid), smaps::rss_total(pid)) {
                    samples.push(CoverageSample { t_s: t0.elapsed().as_secs_f64(), anon_huge_bytes: h, rss_bytes: rss });
                }
                match rx.recv_timeout(period) {
                    Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return samples,
                }
            }
        });
        Sampler { tx, handle }
    }

    fn nudge(&self) {
        let _ = self.tx.send(());
    }

    fn finish(self) -> Vec<CoverageSample> {
        drop(self.tx);
        self.handle.join().unwrap_or_default()
    }
}

/// Median, minimum and maximum of one measurement over the repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(xs: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1] })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatSummary {
    pub warmup: usize,
    pub runs: Vec<RunRecord>,
    pub wall_s: Option<Spread>,
    pub user_s: Option<Spread>,
    pub sys_s: Option<Spread>,
    pub peak_rss_bytes: Option<Spread>,
}

/// Run `f` `warmup` times (discarded) and then `n` times, and summarise.
/// `f` gets the run number (0-based, warm-up runs included).
pub fn repeat<F>(n: usize, warmup: usize, mut f: F) -> Result<RepeatSummary>
where
    F: FnMut(usize) -> Result<RunRecord>,
{
    if n == 0 {
        return Err(Error::input("repeat needs at least one measured run"));
    }
    for i in 0..warmup {
        f(i)?;
    }
    let mut runs = Vec::with_capacity(n);
    for i in 0..n {
        runs.push(f(warmup + i)?);
    }
    // A failed, killed or timed-out run measured something else: never summarised.
    let pick = |g: fn(&RunRecord) -> f64| Spread::of(&runs.iter().filter(|r| r.status == "ok").map(g).collect::<Vec<_>>());
    Ok(RepeatSummary {
        warmup,
        wall_s: pick(|r| r.wall_s),
        user_s: pick(|r| r.user_s),
        sys_s: pick(|r| r.sys_s),
        peak_rss_bytes: pick(|r| r.peak_rss_bytes as f64),
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_is_the_programs_not_the_inherited_launcher_copy() {
        // ru_maxrss above what the child inherited: the program's, exact.
        assert_eq!(program_peak_rss(300 << 20, 17 << 20, 290 << 20), (300 << 20, "wait4"));
        // At or below it: the program's own VmHWM.
        assert_eq!(program_peak_rss(17 << 20, 17 << 20, 2 << 20), (2 << 20, "vmhwm"));
        assert_eq!(program_peak_rss(16 << 20, 17 << 20, 2 << 20), (2 << 20, "vmhwm"));
        // No sample: an upper bound, said so.
        assert_eq!(program_peak_rss(16 << 20, 17 << 20, 0), (16 << 20, "wait4-bound"));
    }

    #[test]
    fn spread_median() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[1.0, 4.0]).unwrap().median, 2.5);
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn launch_true_and_repeat() {
        let s = repeat(3, 1, |_| launch(Command::new("true"), &[], &LaunchOptions::default())).unwrap();
        assert_eq!(s.runs.len(), 3);
        assert!(s.runs.iter().all(|r| r.exit_code == Some(0)));
        assert!(s.runs.iter().all(|r| r.aslr_disabled), "{:?}", s.runs[0].personality);
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("wall_s"));
        assert!(repeat(0, 0, |_| launch(Command::new("true"), &[], &LaunchOptions::default())).is_err());
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn failed_killed_and_timed_out_runs_are_marked_and_not_summarised() {
        let opts = LaunchOptions { sample_ms: 0, ..LaunchOptions::default() };
        let r = launch(sh("exit 3"), &[], &opts).unwrap();
        assert_eq!((r.status.as_str(), r.status_detail.as_str()), ("failed", "exit 3"));
        let r = launch(sh("kill -9 $$"), &[], &opts).unwrap();
        assert_eq!((r.status.as_str(), r.status_detail.as_str()), ("killed", "signal 9 (SIGKILL)"));
        let t = LaunchOptions { timeout_s: Some(0.2), ..opts.clone() };
        let r = launch(sh("sleep 30"), &[], &t).unwrap();
        assert_eq!(r.status, "timeout");
        assert!(r.timed_out && r.wall_s < 5.0, "{}", r.wall_s);
        // Only the ok run is summarised; none ok: no summary at all.
        let s = repeat(2, 0, |i| launch(sh(if i == 0 { "exit 1" } else { "true" }), &[], &opts)).unwrap();
        assert_eq!(s.runs.len(), 2);
        assert_eq!(s.wall_s.as_ref().unwrap().min, s.runs[1].wall_s);
        let s = repeat(2, 0, |_| launch(sh("exit 1"), &[], &opts)).unwrap();
        assert!(s.wall_s.is_none() && s.user_s.is_none());
    }

    #[test]
    fn a_stop_request_ends_the_child_and_its_group() {
        let opts = LaunchOptions { sample_ms: 0, ..LaunchOptions::default() };
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("bg");
        // The program leaves a background job in its group: it must end too.
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let mut calls = 0;
        let mut stop = || {
            calls += 1;
            (calls > 3 && pidfile.exists()).then_some(libc::SIGTERM)
        };
        let t0 = Instant::now();
        let e = launch_with_stop(sh(&script), &[], &opts, &mut stop).unwrap_err();
        assert!(matches!(e, Error::Interrupted(libc::SIGTERM)), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        let bg: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        // The background sleep is gone (a zombie at most until init reaps it).
        let gone = (0..100).any(|_| {
            let st = std::fs::read_to_string(format!("/proc/{bg}/stat")).unwrap_or_default();
            let alive = st.rfind(')').is_some_and(|i| !matches!(st[i + 1..].split_whitespace().next(), Some("Z") | None));
            if alive {
                std::thread::sleep(Duration::from_millis(20));
            }
            !alive
        });
        assert!(gone, "background job {bg} survived");
    }

    #[test]
    fn missing_program_is_named() {
        let e = launch(Command::new("/nonexistent/hugescope-x"), &[], &LaunchOptions::default()).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/hugescope-x"), "{e}");
    }
}
