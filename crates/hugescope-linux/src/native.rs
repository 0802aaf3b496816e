//! Running a built-in workload natively, in this process, with a promotion plan
//! applied at the workload's own progress points, and measuring it.
//!
//! Why in-process and synchronous: a built-in workload announces where it is
//! ("level:3", "iter:2") through a hook that runs on its own thread, so a plan entry
//! tied to a progress point can be applied exactly there with a plain
//! `madvise(MADV_COLLAPSE)` on our own memory (`collapse::Applier` with
//! `Target::SelfProcess`), the way a simulated policy acting at that point would.
//! The price is that the collapse runs on the workload's thread; we therefore time
//! every hook call (wall clock and the thread's CPU time) and report the algorithm
//! time *without* it, and the collapse time separately.
//!
//! When entries are applied:
//! * `when: start` and `plan = all` entries: when the workload's setup ends (its data
//!   is populated then; the algorithm phase starts only after the collapses, so they
//!   count neither as setup nor as algorithm time). An entry whose range is not yet
//!   mapped or populated there (MADV_COLLAPSE needs a resident page in each 2 MiB
//!   region) is retried at the following progress points, up to `start_retries` times.
//! * `when: progress LABEL`: the first time the workload reports exactly that label.
//! * `when: after_marker {label, accesses}` (what `simulate --emit-plan` records for a
//!   promotion made between two progress points): with `accesses` 0 as `progress`;
//!   otherwise at the first hook after the workload first reports `label` (the next
//!   progress point or the end of setup), the nearest point at or after the one
//!   recorded: a native run counts no accesses, so it cannot act between points.
//! * `when: time_s T`: at the first hook (end of setup or a progress point) at least
//!   T seconds after the workload started; the granularity is the distance between
//!   progress points.
//! * `when: accesses N`: never (a native run counts no accesses); reported as such.
//!
//! Coverage is sampled over time by a helper thread from `smaps_rollup` (it only
//! reads /proc, so it does not disturb the workload beyond sharing the machine), and
//! per workload region, exactly, from `PAGEMAP_SCAN` after setup and at the end of
//! the algorithm phase (before the regions are unmapped).
//!
//! One native run at a time per process: the regions live at fixed addresses.

use crate::collapse::{Applier, ApplyOptions, CollapseOutcome, Status, Target, PMD_SIZE};
use crate::launch::CoverageSample;
use crate::smaps;
use crate::thp::ThpState;
use crate::{Error, Result};
use hugescope_core::plan::{PlanEntry, When};
use hugescope_core::trace::Region;
use hugescope_workloads::{NativeEvent, NativeOptions, Params};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Which plan a native run applies.
#[derive(Clone, Debug, PartialEq)]
pub enum NativePlan {
    /// No plan: memory stays as the kernel's THP mode makes it (base pages under `madvise`).
    None,
    /// Every region of the workload, as soon as it is populated: the all-huge reference.
    All,
    /// These entries.
    Entries(Vec<PlanEntry>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativeRunOptions {
    /// Coverage sampling period of the helper thread in ms (0 = no sampling).
    pub sample_ms: u64,
    /// How often a start entry whose range was not yet populated is retried at later
    /// progress points.
    pub start_retries: u32,
    pub apply: ApplyOptions,
}

impl Default for NativeRunOptions {
    fn default() -> Self {
        NativeRunOptions { sample_ms: 100, start_retries: 16, apply: ApplyOptions::default() }
    }
}

/// One plan entry and where in the run it was applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativeApplied {
    /// Seconds since the workload started when it was (last) tried.
    pub t_s: f64,
    /// `setup_done`, `progress:LABEL`, or `not_applied`.
    pub point: String,
    pub attempts: u32,
    pub outcome: CollapseOutcome,
}

/// Huge-page coverage of one workload region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionCoverage {
    pub name: String,
    pub base: u64,
    pub len: u64,
    /// PMD-mapped bytes of the region, exact (`PAGEMAP_SCAN`); `None` if unreadable.
    pub huge_bytes: Option<u64>,
    /// `AnonHugePages` attributed to the region from smaps (an upper bound when the
    /// kernel merged the region's VMA with a neighbour).
    pub huge_bytes_smaps: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressMark {
    pub label: String,
    pub t_s: f64,
}

/// Everything one native run measured. Every time is a measurement; `how` says how
/// each one was taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativeRunRecord {
    pub workload: String,
    /// Parameters with defaults filled in.
    pub params: Params,
    /// `none`, `all` or `plan`.
    pub plan: String,
    pub pid: u32,
    pub footprint_bytes: u64,
    /// The workload's own result (checksums: identical with and without a plan).
    pub result: serde_json::Value,
    /// Wall time of the whole call (setup, collapses, algorithm, coverage reads).
    pub wall_s: f64,
    /// Wall time of data construction.
    pub setup_s: f64,
    /// Wall time of the algorithm phase minus time spent in hugescope's hooks.
    pub run_s: f64,
    /// Wall time of the algorithm phase as the workload measured it (hooks included).
    pub run_s_with_hooks: f64,
    /// Thread CPU time of the algorithm phase minus the hooks' share: the
    /// rusage split (tick-sampled, see `thread_cpu`) and the exact total.
    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_s: f64,
    /// Wall time spent in MADV_COLLAPSE after setup (outside every phase) and in
    /// progress hooks during the algorithm phase.
    pub collapse_setup_s: f64,
    pub collapse_run_s: f64,
    /// All time spent in hooks during the algorithm phase (collapse and bookkeeping).
    pub hooks_run_s: f64,
    /// `ru_maxrss` of this process at the end, bytes (the whole process: in a fresh
    /// process per run that is the workload plus the interpreter).
    pub peak_rss_bytes: u64,
    /// PMD-mapped bytes summed over the workload's regions, after setup (and the
    /// start collapses) and at the end of the algorithm phase.
    pub huge_bytes_after_setup: Option<u64>,
    pub huge_bytes_end: Option<u64>,
    pub regions_after_setup: Vec<RegionCoverage>,
    pub regions_end: Vec<RegionCoverage>,
    /// Coverage of the whole process over time (`smaps_rollup`), t from the start.
    pub samples: Vec<CoverageSample>,
    pub peak_anon_huge_bytes: u64,
    pub applied: Vec<NativeApplied>,
    /// Progress points reported by the workload (at most `MAX_MARKS` kept).
    pub progress: Vec<ProgressMark>,
    pub progress_points: u64,
    pub thp: Option<ThpState>,
    pub warnings: Vec<String>,
    /// How each measurement was taken.
    pub how: BTreeMap<String, String>,
}

const MAX_MARKS: usize = 10_000;

/// CPU time of the calling thread: `getrusage(RUSAGE_THREAD)`'s user and
/// system split, and the scheduler's exact total.
///
/// Why both: on this kernel the rusage split is sampled at the timer tick
/// (4 ms at HZ=250) and scaled, so over a 50 ms phase it is off by up to a
/// tick, 8% (measured: a 2.1 ms spin read as 4.0 ms, a 3.0 ms one as 0.03 ms).
/// `CLOCK_THREAD_CPUTIME_ID` reads the scheduler's runtime of the thread
/// (`sum_exec_runtime`, nanoseconds), which has no such step; it has no
/// user/system split, so the split stays the rusage one, for information.
#[derive(Clone, Copy, Debug, Default)]
struct CpuTimes {
    user: f64,
    sys: f64,
    exact: f64,
}

impl CpuTimes {
    fn minus(self, o: CpuTimes) -> CpuTimes {
        CpuTimes { user: self.user - o.user, sys: self.sys - o.sys, exact: self.exact - o.exact }
    }

    fn plus(self, o: CpuTimes) -> CpuTimes {
        CpuTimes { user: self.user + o.user, sys: self.sys + o.sys, exact: self.exact + o.exact }
    }
}

fn thread_cpu() -> CpuTimes {
    // SAFETY: zeroed rusage and timespec are valid out-parameters; RUSAGE_THREAD
    // and CLOCK_THREAD_CPUTIME_ID count the calling thread only (not the sampler).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    CpuTimes { user: tv(ru.ru_utime), sys: tv(ru.ru_stime), exact: ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9 }
}

/// Moves the calling thread (the sampler) off the workload's CPU when the
/// run is pinned to one CPU and the machine has others.
///
/// Why: a `smaps_rollup` read walks every page-table entry of the process,
/// about 10 ms for 1 GiB of 4KB pages and almost nothing for the same memory
/// in 2MB pages. On the pinned CPU the sampler's reads were time the workload
/// thread spent off its CPU: measured on GUPS over 1 GiB (median of 3, nice
/// -20), the algorithm phase took 0.222 s of wall time on base pages with the
/// sampler and 0.200 s without it (its CPU time 0.200 s either way), and
/// 0.182 / 0.180 s all huge: a wall-clock gain of 1.22x where the workload's
/// own is 1.11x. Returns whether the thread moved.
fn sampler_off_the_workload_cpu() -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; pid 0 names the calling
    // thread, so only the sampler's affinity changes.
    unsafe {
        let mut now: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut now) != 0
            || libc::CPU_COUNT(&now) != 1
        {
            return false;
        }
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_CONF).clamp(1, libc::CPU_SETSIZE as libc::c_long) as usize;
        let mut others: libc::cpu_set_t = std::mem::zeroed();
        for c in (0..cpus).filter(|&c| !libc::CPU_ISSET(c, &now)) {
            libc::CPU_SET(c, &mut others);
        }
        // No other CPU (or a cpuset that allows none of them): the sampler stays.
        libc::CPU_COUNT(&others) > 0
            && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &others) == 0
    }
}

fn process_maxrss() -> u64 {
    // SAFETY: as above, for the whole process.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss.max(0) as u64 * 1024
}

/// Region coverage of this process, read while the regions are mapped.
fn region_coverage(regions: &[Region]) -> Vec<RegionCoverage> {
    let vmas = smaps::vmas(0).ok();
    regions
        .iter()
        .map(|r| RegionCoverage {
            name: r.name.clone(),
            base: r.base,
            len: r.len,
            huge_bytes: crate::pagemap::pmd_mapped_bytes(0, r.base, r.len).ok(),
            huge_bytes_smaps: vmas.as_ref().map(|v| smaps::attribute_huge(v, r.base, r.len)),
        })
        .collect()
}

fn total(c: &[RegionCoverage]) -> Option<u64> {
    c.iter().map(|r| r.huge_bytes).sum()
}

/// Should a start entry that did not collapse be tried again later? Only when the
/// reason is that its memory was not there yet (not mapped, nothing resident, the
/// kernel's EINVAL for an empty region, or a transient EAGAIN): retrying an ENOMEM
/// would run compaction again and again on the workload's thread.
fn not_populated_yet(o: &CollapseOutcome) -> bool {
    if o.status == Status::Collapsed {
        return false;
    }
    if !o.attempted {
        return o.reason.starts_with("not mapped") || o.reason.starts_with("partially mapped") || o.reason.starts_with("nothing resident");
    }
    !o.errno_counts.is_empty() && o.errno_counts.keys().all(|k| k == "EINVAL" || k == "EAGAIN")
}

struct StartEntry {
    index: usize,
    entry: PlanEntry,
    attempts: u32,
    last: Option<NativeApplied>,
    done: bool,
}

/// The state the workload's hook works on.
struct Driver {
    t0: Instant,
    applier: Applier,
    opts: NativeRunOptions,
    regions: Vec<Region>,
    starts: Vec<StartEntry>,
    by_label: HashMap<String, Vec<(usize, PlanEntry)>>,
    /// `after_marker` entries waiting for their label; once it is reported they
    /// move to `next_point`, applied at the following hook.
    after_label: HashMap<String, Vec<(usize, PlanEntry)>>,
    next_point: Vec<(usize, PlanEntry)>,
    /// (index, entry, due seconds), sorted by due time.
    timed: Vec<(usize, PlanEntry, f64)>,
    applied: Vec<NativeApplied>,
    setup_done: bool,
    run_done: bool,
    collapse_setup_s: f64,
    collapse_run_s: f64,
    hooks_run_s: f64,
    hook_cpu_run: CpuTimes,
    cpu_run_start: CpuTimes,
    cpu_run_end: CpuTimes,
    regions_after_setup: Vec<RegionCoverage>,
    regions_end: Vec<RegionCoverage>,
    marks: Vec<ProgressMark>,
    points: u64,
}

impl Driver {
    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Apply one entry, returning the wall seconds spent.
    fn apply(&mut self, index: usize, e: &PlanEntry, point: &str, attempts: u32) -> (NativeApplied, f64) {
        let t = Instant::now();
        let outcome = self.applier.apply_entry(index, e);
        let spent = t.elapsed().as_secs_f64();
        (NativeApplied { t_s: self.now(), point: point.to_string(), attempts, outcome }, spent)
    }

    /// Start entries still waiting for their memory, and time entries that came due.
    fn apply_due(&mut self, point: &str) -> f64 {
        let mut spent = 0.0;
        let mut starts = std::mem::take(&mut self.starts);
        for s in starts.iter_mut().filter(|s| !s.done) {
            if s.attempts > self.opts.start_retries {
                s.done = true;
                continue;
            }
            s.attempts += 1;
            let (a, dt) = self.apply(s.index, &s.entry, point, s.attempts);
            spent += dt;
            s.done = !not_populated_yet(&a.outcome);
            s.last = Some(a);
        }
        self.starts = starts;
        let now = self.now();
        while self.timed.first().is_some_and(|(_, _, due)| *due <= now) {
            let (i, e, _) = self.timed.remove(0);
            let (a, dt) = self.apply(i, &e, point, 1);
            spent += dt;
            self.applied.push(a);
        }
        spent
    }

    /// Entries whose recorded point lies after the previous progress point:
    /// this hook is the nearest one at or after it.
    fn apply_next_point(&mut self, point: &str) -> f64 {
        let mut spent = 0.0;
        for (i, e) in std::mem::take(&mut self.next_point) {
            let (a, dt) = self.apply(i, &e, point, 1);
            spent += dt;
            self.applied.push(a);
        }
        spent
    }

    fn on_event(&mut self, ev: NativeEvent<'_>) {
        match ev {
            NativeEvent::SetupDone => {
                self.setup_done = true;
                self.collapse_setup_s += self.apply_next_point("setup_done");
                self.collapse_setup_s += self.apply_due("setup_done");
                self.regions_after_setup = region_coverage(&self.regions);
                // Taken last, so the algorithm's CPU time excludes this hook.
                self.cpu_run_start = thread_cpu();
            }
            NativeEvent::Progress(label) => {
                let t = Instant::now();
                let during_run = self.setup_done && !self.run_done;
                let cpu0 = if during_run { thread_cpu() } else { CpuTimes::default() };
                self.points += 1;
                if self.marks.len() < MAX_MARKS {
                    self.marks.push(ProgressMark { label: label.to_string(), t_s: self.now() });
                }
                let point = format!("progress:{label}");
                let mut spent = self.apply_next_point(&point);
                if let Some(list) = self.by_label.remove(label) {
                    for (i, e) in list {
                        let (a, dt) = self.apply(i, &e, &point, 1);
                        spent += dt;
                        self.applied.push(a);
                    }
                }
                if let Some(list) = self.after_label.remove(label) {
                    self.next_point.extend(list);
                }
                // Retries of start entries and time entries only once setup is over:
                // before it, the data is still being built.
                if self.setup_done && (self.starts.iter().any(|s| !s.done) || !self.timed.is_empty()) {
                    spent += self.apply_due(&point);
                }
                if during_run {
                    self.collapse_run_s += spent;
                    self.hook_cpu_run = self.hook_cpu_run.plus(thread_cpu().minus(cpu0));
                    self.hooks_run_s += t.elapsed().as_secs_f64();
                } else {
                    self.collapse_setup_s += spent;
                }
            }
            NativeEvent::RunDone => {
                // First, so the coverage read below is not charged to the algorithm.
                self.cpu_run_end = thread_cpu();
                self.run_done = true;
                self.regions_end = region_coverage(&self.regions);
            }
        }
    }

    /// Outcomes of every entry, in plan order.
    fn finish(&mut self) -> Vec<NativeApplied> {
        let end = self.now();
        for s in std::mem::take(&mut self.starts) {
            match s.last {
                Some(a) => self.applied.push(a),
                None => self.applied.push(NativeApplied {
                    t_s: end,
                    point: "not_applied".into(),
                    attempts: 0,
                    outcome: CollapseOutcome::not_applied(s.index, &s.entry, "the workload never reported the end of its setup"),
                }),
            }
        }
        for (i, e) in std::mem::take(&mut self.next_point) {
            let label = marker_label(&e.when);
            self.applied.push(NativeApplied {
                t_s: end,
                point: "not_applied".into(),
                attempts: 0,
                outcome: CollapseOutcome::not_applied(i, &e, format!(
                    "recorded after progress point '{label}', and the workload reported no progress point after it")),
            });
        }
        let waiting = std::mem::take(&mut self.by_label).into_iter().chain(std::mem::take(&mut self.after_label));
        for (_, list) in waiting {
            for (i, e) in list {
                let label = marker_label(&e.when);
                let seen: Vec<&str> = first_distinct(&self.marks, 6);
                let hint = if seen.is_empty() {
                    "it reported no progress point".to_string()
                } else {
                    format!("labels it reported include: {}", seen.join(", "))
                };
                self.applied.push(NativeApplied {
                    t_s: end,
                    point: "not_applied".into(),
                    attempts: 0,
                    outcome: CollapseOutcome::not_applied(i, &e, format!("progress point '{label}' never reached; {hint}")),
                });
            }
        }
        for (i, e, due) in std::mem::take(&mut self.timed) {
            self.applied.push(NativeApplied {
                t_s: end,
                point: "not_applied".into(),
                attempts: 0,
                outcome: CollapseOutcome::not_applied(i, &e, format!(
                    "time {due} s not reached at a hook (end of setup or progress point) before the algorithm phase ended at {end:.3} s")),
            });
        }
        let mut applied = std::mem::take(&mut self.applied);
        applied.sort_by_key(|a| a.outcome.index);
        applied
    }
}

/// Distinct labels in order of first appearance, at most `n`.
/// The progress label an entry waits for ("" for entries that wait for none).
fn marker_label(w: &When) -> String {
    match w {
        When::Progress(l) | When::AfterMarker { label: l, .. } => l.clone(),
        _ => String::new(),
    }
}

fn first_distinct(marks: &[ProgressMark], n: usize) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for m in marks {
        if out.len() >= n {
            break;
        }
        // Collapse "level:1", "level:2" to one example per prefix.
        let prefix = m.label.split(':').next().unwrap_or("");
        if !out.iter().any(|l| l.split(':').next().unwrap_or("") == prefix) {
            out.push(&m.label);
        }
    }
    out
}

/// One entry per workload region, for `NativePlan::All`: the region's whole 2 MiB
/// regions (a tail shorter than 2 MiB cannot be PMD-mapped: the mapping ends there).
pub fn all_entries(regions: &[Region]) -> Vec<PlanEntry> {
    regions
        .iter()
        .map(|r| PlanEntry {
            start: r.base,
            length: r.len,
            page_size: PMD_SIZE,
            when: When::Start,
            pid: 0,
            note: Some(format!("all: region {}", r.name)),
        })
        .collect()
}

/// Run workload `name` natively in this process under `plan` and measure it.
pub fn run_native(name: &str, params: &Params, plan: &NativePlan, opts: &NativeRunOptions) -> Result<NativeRunRecord> {
    let layout = hugescope_workloads::plan(name, params).map_err(|e| Error::input(e.to_string()))?;
    let thp = ThpState::read().ok();
    let entries: Vec<PlanEntry> = match plan {
        NativePlan::None => Vec::new(),
        NativePlan::All => all_entries(&layout.regions),
        NativePlan::Entries(v) => v.clone(),
    };
    let t0 = Instant::now();
    let mut driver = Driver {
        t0,
        applier: Applier::new(Target::SelfProcess, opts.apply.clone()),
        opts: opts.clone(),
        regions: layout.regions.clone(),
        starts: Vec::new(),
        by_label: HashMap::new(),
        after_label: HashMap::new(),
        next_point: Vec::new(),
        timed: Vec::new(),
        applied: Vec::new(),
        setup_done: false,
        run_done: false,
        collapse_setup_s: 0.0,
        collapse_run_s: 0.0,
        hooks_run_s: 0.0,
        hook_cpu_run: CpuTimes::default(),
        cpu_run_start: CpuTimes::default(),
        cpu_run_end: CpuTimes::default(),
        regions_after_setup: Vec::new(),
        regions_end: Vec::new(),
        marks: Vec::new(),
        points: 0,
    };
    for (i, e) in entries.iter().enumerate() {
        if e.pid != 0 {
            driver.applied.push(NativeApplied {
                t_s: 0.0,
                point: "not_applied".into(),
                attempts: 0,
                outcome: CollapseOutcome::not_applied(i, e, format!(
                    "entry is for process {} of the plan; a built-in workload's regions are process 0", e.pid)),
            });
            continue;
        }
        match &e.when {
            When::Start => driver.starts.push(StartEntry { index: i, entry: e.clone(), attempts: 0, last: None, done: false }),
            When::Progress(l) | When::AfterMarker { label: l, accesses: 0 } => {
                driver.by_label.entry(l.clone()).or_default().push((i, e.clone()))
            }
            When::AfterMarker { label, .. } => driver.after_label.entry(label.clone()).or_default().push((i, e.clone())),
            When::TimeS(t) => driver.timed.push((i, e.clone(), *t)),
            When::Accesses(n) => driver.applied.push(NativeApplied {
                t_s: 0.0,
                point: "not_applied".into(),
                attempts: 0,
                outcome: CollapseOutcome::not_applied(i, e, format!(
                    "when = accesses {n}: a native run counts no accesses; use a progress label or time_s")),
            }),
        }
    }
    driver.timed.sort_by(|a, b| a.2.total_cmp(&b.2));

    // The sampler: a helper thread reading smaps_rollup every sample_ms.
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let sample_ms = opts.sample_ms;
    let sampler = std::thread::Builder::new()
        .name("hugescope-sampler".into())
        .spawn(move || {
            let mut samples = Vec::new();
            if sample_ms == 0 {
                return (samples, false);
            }
            let moved = sampler_off_the_workload_cpu();
            loop {
                if let (Ok(h), Ok(rss)) = (smaps::anon_huge_total(0), smaps::rss_total(0)) {
                    samples.push(CoverageSample { t_s: t0.elapsed().as_secs_f64(), anon_huge_bytes: h, rss_bytes: rss });
                }
                match stop_rx.recv_timeout(Duration::from_millis(sample_ms)) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
            (samples, moved)
        })
        .map_err(|e| Error::input(format!("cannot start the coverage sampler thread: {e}")))?;

    let report = hugescope_workloads::native_events(name, params, &NativeOptions { thp: false }, &mut |ev| driver.on_event(ev));
    let wall_s = t0.elapsed().as_secs_f64();
    let _ = stop_tx.send(());
    let (samples, sampler_moved) = sampler.join().unwrap_or_default();
    let report = report.map_err(|e| Error::input(e.to_string()))?;
    let peak_rss_bytes = process_maxrss();

    let (cs, cr, hr, hc) = (driver.collapse_setup_s, driver.collapse_run_s, driver.hooks_run_s, driver.hook_cpu_run);
    let cpu = driver.cpu_run_end.minus(driver.cpu_run_start).minus(hc);
    // finish() first: its "never reached" reasons quote the progress labels seen.
    let applied = driver.finish();
    let regions_after_setup = std::mem::take(&mut driver.regions_after_setup);
    let regions_end = std::mem::take(&mut driver.regions_end);
    let marks = std::mem::take(&mut driver.marks);
    let points = driver.points;
    let peak_anon_huge_bytes = samples.iter().map(|s| s.anon_huge_bytes).max().unwrap_or(0);
    let mut how = BTreeMap::new();
    for (k, v) in [
        ("wall_s", "wall clock, std::time::Instant around the whole native run (setup, collapses, algorithm, coverage reads)"),
        ("setup_s", "wall clock, std::time::Instant from the start of the run to the end of data construction"),
        ("run_s", "wall clock, std::time::Instant around the algorithm phase (begin_run..end_run), minus the wall time spent in hugescope's progress hooks"),
        ("run_s_with_hooks", "wall clock, std::time::Instant around the algorithm phase, hooks included"),
        ("user_s", "getrusage(RUSAGE_THREAD) of the workload thread over the algorithm phase, minus the hooks' share"),
        ("sys_s", "getrusage(RUSAGE_THREAD) of the workload thread over the algorithm phase, minus the hooks' share"),
        ("cpu_s", "clock_gettime(CLOCK_THREAD_CPUTIME_ID) of the workload thread over the algorithm phase, minus the hooks' share: the scheduler's exact runtime (user_s and sys_s are sampled at the timer tick)"),
        ("collapse_setup_s", "wall clock, std::time::Instant around the MADV_COLLAPSE calls made after setup (before the algorithm phase starts)"),
        ("collapse_run_s", "wall clock, std::time::Instant around the MADV_COLLAPSE calls made in progress hooks during the algorithm phase"),
        ("peak_rss_bytes", "getrusage(RUSAGE_SELF).ru_maxrss of the process running the workload"),
        ("huge_bytes_end", "PAGEMAP_SCAN (PAGE_IS_HUGE) over each workload region when the algorithm phase ends: exact PMD-mapped bytes"),
        ("samples", "AnonHugePages and Rss from /proc/self/smaps_rollup, read by a helper thread every sample_ms"),
    ] {
        how.insert(k.to_string(), v.to_string());
    }
    if sampler_moved {
        how.insert(
            "samples".to_string(),
            "AnonHugePages and Rss from /proc/self/smaps_rollup, read by a helper thread every sample_ms on the \
             CPUs other than the workload's (its reads walk the page tables and would take the workload's CPU)"
                .to_string(),
        );
    }
    Ok(NativeRunRecord {
        workload: name.to_string(),
        params: layout.params,
        plan: match plan {
            NativePlan::None => "none",
            NativePlan::All => "all",
            NativePlan::Entries(_) => "plan",
        }
        .to_string(),
        pid: std::process::id(),
        footprint_bytes: layout.footprint,
        result: report.result,
        wall_s,
        setup_s: report.setup_seconds,
        run_s: (report.run_seconds - hr).max(0.0),
        run_s_with_hooks: report.run_seconds,
        user_s: cpu.user.max(0.0),
        sys_s: cpu.sys.max(0.0),
        cpu_s: cpu.exact.max(0.0),
        collapse_setup_s: cs,
        collapse_run_s: cr,
        hooks_run_s: hr,
        peak_rss_bytes,
        huge_bytes_after_setup: total(&regions_after_setup),
        huge_bytes_end: total(&regions_end),
        regions_after_setup,
        regions_end,
        samples,
        peak_anon_huge_bytes,
        applied,
        progress: marks,
        progress_points: points,
        thp,
        warnings: report.warnings,
        how,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: Status, attempted: bool, reason: &str, errnos: &[(&str, u64)]) -> CollapseOutcome {
        let e = PlanEntry { start: 0, length: PMD_SIZE, page_size: PMD_SIZE, when: When::Start, pid: 0, note: None };
        let mut o = CollapseOutcome::not_applied(0, &e, reason);
        o.status = status;
        o.attempted = attempted;
        o.errno_counts = errnos.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        o
    }

    #[test]
    fn retries_only_for_memory_not_there_yet() {
        assert!(not_populated_yet(&outcome(Status::Skipped, false, "not mapped: no VMA covers", &[])));
        assert!(not_populated_yet(&outcome(Status::Skipped, false, "nothing resident: VMA", &[])));
        assert!(not_populated_yet(&outcome(Status::Failed, true, "x", &[("EINVAL", 3)])));
        assert!(not_populated_yet(&outcome(Status::PartiallyCollapsed, true, "x", &[("EAGAIN", 1)])));
        assert!(!not_populated_yet(&outcome(Status::Failed, true, "x", &[("ENOMEM", 1), ("EINVAL", 1)])));
        assert!(!not_populated_yet(&outcome(Status::Collapsed, true, "collapsed", &[])));
        assert!(!not_populated_yet(&outcome(Status::Skipped, false, "ineligible: VM_NOHUGEPAGE", &[])));
    }

    #[test]
    fn all_entries_cover_every_region() {
        let r = |name: &str, base: u64, len: u64| Region::new(name, base, len);
        let e = all_entries(&[r("a", 1 << 44, 4 * PMD_SIZE), r("b", (1 << 44) + 4 * PMD_SIZE, 4096)]);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].length, 4 * PMD_SIZE);
        assert_eq!(e[1].note.as_deref(), Some("all: region b"));
    }

    #[test]
    fn distinct_labels_one_per_prefix() {
        let m = |l: &str| ProgressMark { label: l.into(), t_s: 0.0 };
        let marks = [m("level:1"), m("level:2"), m("iter:1"), m("level:3")];
        assert_eq!(first_distinct(&marks, 5), vec!["level:1", "iter:1"]);
    }
}
