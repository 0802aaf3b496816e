//! A userspace huge-page daemon for live processes (issue #14, section 3).
//!
//! The kernel runs with THP in `madvise` mode, so it promotes nothing in the watched
//! processes on its own; the daemon samples them (`signals`), lets a policy rank the
//! candidate 2 MiB regions (`policy`) and collapses the best ones with
//! `process_madvise(MADV_COLLAPSE)` (`collapse::Applier`), within a budget of
//! huge-page bytes and a rate limit. It never writes to, signals or stops a target:
//! it reads `/proc/PID/{smaps,pagemap}`, clears accessed bits through
//! `/proc/PID/clear_refs`, and asks the kernel to collapse. The clears cost the
//! target most, so the access-driven policies clear only when a decision needs fresh
//! bits, and less often while decisions change nothing (`epochs`).
//!
//! The daemon is driven one `step` at a time by its caller (the CLI sleeps between
//! steps, so a signal stops it between two decisions, never inside a collapse).
//!
//! **Demotion.** The kernel offers no way to split another process's huge page
//! without discarding its data (`MADV_DONTNEED`) or writing to it, and
//! `process_madvise` accepts only COLD, PAGEOUT, WILLNEED and COLLAPSE. So demotion
//! here is bookkeeping: a region the daemon collapsed that the policy now finds cold
//! is reported as `would_demote` and stays charged to the budget until the kernel
//! splits it (partial unmap, reclaim, `mprotect` of part of it); a split region is
//! uncharged at the next sample.

pub mod epochs;
pub mod policy;
pub mod signals;

use crate::collapse::{Applier, ApplyOptions, Status, Target, PMD_SIZE};
use crate::smaps::Pid;
use crate::thp::ThpState;
use crate::{settings, Error, Result};
use hugescope_core::plan::{PlanEntry, When};
use epochs::Epochs;
use policy::{Candidate, PolicyKind, PolicyParams};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

/// THP `enabled` sysfs file: the one setting the daemon may change.
pub const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Weight of the newest access epoch in PCC's frequency estimate (an exponentially
/// weighted moving average: half the weight on the last epoch, so a region
/// referenced in the last two epochs outranks one referenced long ago).
const FREQ_DECAY: f64 = 0.5;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DaemonConfig {
    pub policy: PolicyKind,
    /// Processes to watch.
    #[serde(default)]
    pub pids: Vec<Pid>,
    /// A cgroup v2 directory whose `cgroup.procs` is re-read every step.
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// Huge bytes the daemon may have made, over all processes.
    #[serde(default)]
    pub budget_total: Option<u64>,
    /// Huge bytes the daemon may have made in each process.
    #[serde(default)]
    pub budget_per_process: Option<u64>,
    /// Collapses per second at most (a token bucket refilled by elapsed time).
    pub rate: f64,
    /// Ingens's utilization threshold (share of 512 pages).
    #[serde(default = "default_utilization")]
    pub utilization: f64,
    /// With THP `always`, switch it to `madvise` while the daemon runs (recorded in
    /// the state file, restored at exit or by the next hugescope after a kill).
    #[serde(default)]
    pub set_madvise: bool,
}

fn default_utilization() -> f64 {
    0.9
}

/// A process being watched and what the daemon did to it.
struct Watched {
    pid: Pid,
    applier: Applier,
    /// "running", "exited", or "refused: REASON" (EPERM/EACCES: not watched further).
    state: String,
    /// Regions the daemon collapsed that are still PMD-mapped (charged to the budget).
    charged: BTreeSet<u64>,
    /// PCC frequency per region start (updated at each access snapshot).
    freq: BTreeMap<u64, f64>,
    /// When this process's accessed bits are cleared (`epochs.rs`).
    epochs: Epochs,
    /// The access snapshot: referenced share per VMA start over the one interval
    /// after the last clear. None before the first snapshot (nothing to rank by).
    access: Option<BTreeMap<u64, f64>>,
    rss: u64,
    anon_huge: u64,
    collapsed: u64,
    errors: BTreeMap<String, u64>,
    would_demote: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessStatus {
    pub pid: Pid,
    pub state: String,
    pub rss: u64,
    /// All PMD-mapped anonymous bytes of the process (smaps AnonHugePages).
    pub anon_huge: u64,
    /// Bytes the daemon collapsed that are still huge (what the budget counts).
    pub daemon_huge: u64,
    pub collapsed: u64,
    pub errors: BTreeMap<String, u64>,
    pub would_demote: u64,
    pub charged_regions: Vec<u64>,
    /// `/proc/PID/clear_refs` writes so far (the access-driven policies only).
    pub clear_refs: u64,
    /// Steps between two clears now (1 while snapshots pay off, up to `epochs::MAX_GAP`).
    pub clear_gap_steps: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    pub step: u64,
    pub t_s: f64,
    pub pid: Pid,
    pub start: u64,
    pub outcome: String,
    pub errno: Option<String>,
    pub why: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepStatus {
    pub step: u64,
    pub t_s: f64,
    pub policy: String,
    pub processes: Vec<ProcessStatus>,
    pub daemon_huge_total: u64,
    pub collapsed_total: u64,
    /// `clear_refs` writes so far, over all processes.
    pub clear_refs_total: u64,
    pub candidates: usize,
    /// Decisions taken in this step.
    pub decisions: Vec<Decision>,
    /// Why nothing (more) was collapsed this step, when it stopped early.
    pub held_back: Option<String>,
    /// CPU seconds (user + system) the daemon's process has used so far.
    pub cpu_s: f64,
    /// True when every watched process has exited or refused (and no cgroup is watched).
    pub done: bool,
}

pub struct Daemon {
    cfg: DaemonConfig,
    params: PolicyParams,
    procs: Vec<Watched>,
    step: u64,
    started: Instant,
    last_step: Option<Instant>,
    tokens: f64,
    changed_thp: bool,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The errno behind an error from /proc or a system call, if it has one.
fn errno(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } | Error::Sys { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// True when an error means the process is gone (its /proc files vanished).
fn is_gone(e: &Error) -> bool {
    matches!(errno(e), Some(libc::ENOENT | libc::ESRCH))
}

/// True when an error means the daemon may not look at the process.
fn is_refused(e: &Error) -> bool {
    matches!(errno(e), Some(libc::EPERM | libc::EACCES))
}

impl Daemon {
    /// Check the configuration and the machine, and start watching. Bad values are
    /// `Error::Input` naming the field; a missing pid is one too.
    pub fn new(cfg: DaemonConfig) -> Result<Daemon> {
        if cfg.pids.is_empty() && cfg.cgroup.is_none() {
            return Err(Error::input("daemon: give at least one --pid or a --cgroup"));
        }
        if !(cfg.rate.is_finite() && cfg.rate > 0.0 && cfg.rate <= 1e6) {
            return Err(Error::input(format!("--rate: {} must be a number of collapses per second in (0, 1e6]", cfg.rate)));
        }
        if !(cfg.utilization.is_finite() && cfg.utilization > 0.0 && cfg.utilization <= 1.0) {
            return Err(Error::input(format!("--utilization: {} must be in (0, 1]", cfg.utilization)));
        }
        for (name, b) in [("--budget", cfg.budget_total), ("--budget-per-process", cfg.budget_per_process)] {
            if b.is_some_and(|b| b < PMD_SIZE) {
                return Err(Error::input(format!("{name}: {} bytes is less than one 2 MiB huge page", b.unwrap_or(0))));
            }
        }
        if let Some(c) = &cfg.cgroup {
            if !c.join("cgroup.procs").is_file() {
                return Err(Error::input(format!("--cgroup: {} has no cgroup.procs (not a cgroup v2 directory)", c.display())));
            }
        }
        for &pid in &cfg.pids {
            if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(Error::input(format!("--pid: no process {pid}")));
            }
        }
        let thp = ThpState::read()?;
        let max_ptes_none = thp.khugepaged.get("max_ptes_none").copied().unwrap_or(511).min(511) as u32;
        let params = PolicyParams { max_ptes_none, utilization: cfg.utilization };
        let mut d = Daemon { cfg, params, procs: Vec::new(), step: 0, started: Instant::now(), last_step: None, tokens: 0.0, changed_thp: false };
        match thp.enabled.selected.as_str() {
            "never" => return Err(Error::refused(
                "THP is disabled system-wide (transparent_hugepage/enabled = never): the daemon does not promote memory the administrator asked to keep in base pages")),
            "always" if d.cfg.set_madvise => {
                settings::change(THP_ENABLED, "madvise")?;
                d.changed_thp = true;
            }
            "always" => return Err(Error::refused(
                "THP is in 'always' mode: the kernel already promotes every region and the daemon's decisions would not be its own; use --set-madvise (restored on exit) or set madvise mode")),
            _ => {}
        }
        for pid in d.cfg.pids.clone() {
            d.watch(pid);
        }
        Ok(d)
    }

    fn watch(&mut self, pid: Pid) {
        let opts = ApplyOptions { precheck: false, eagain_retries: 0 };
        self.procs.push(Watched {
            pid,
            applier: Applier::new(Target::Pid(pid), opts),
            state: "running".into(),
            charged: BTreeSet::new(),
            freq: BTreeMap::new(),
            epochs: Epochs::default(),
            access: None,
            rss: 0,
            anon_huge: 0,
            collapsed: 0,
            errors: BTreeMap::new(),
            would_demote: 0,
        });
    }

    fn refresh_cgroup(&mut self) {
        let Some(c) = &self.cfg.cgroup else { return };
        let Ok(text) = std::fs::read_to_string(c.join("cgroup.procs")) else { return };
        let me = std::process::id() as Pid;
        for pid in text.lines().filter_map(|l| l.trim().parse::<Pid>().ok()) {
            if pid != me && !self.procs.iter().any(|w| w.pid == pid) {
                self.watch(pid);
            }
        }
    }

    fn budget_allows(&self, proc: usize) -> Option<&'static str> {
        let total: u64 = self.procs.iter().map(|w| w.charged.len() as u64 * PMD_SIZE).sum();
        if self.cfg.budget_total.is_some_and(|b| total + PMD_SIZE > b) {
            return Some("total budget reached");
        }
        let mine = self.procs[proc].charged.len() as u64 * PMD_SIZE;
        if self.cfg.budget_per_process.is_some_and(|b| mine + PMD_SIZE > b) {
            return Some("per-process budget reached");
        }
        None
    }

    /// Sample every process, decide, collapse; return what happened.
    pub fn step(&mut self) -> StepStatus {
        let now = Instant::now();
        let t_s = now.duration_since(self.started).as_secs_f64();
        // Token bucket: refill by elapsed time, at most one second's worth (and at
        // least one collapse) banked, so a long pause does not release a burst.
        let elapsed = self.last_step.map(|l| now.duration_since(l).as_secs_f64()).unwrap_or(0.0);
        self.last_step = Some(now);
        self.tokens = (self.tokens + elapsed * self.cfg.rate).min(self.cfg.rate.max(1.0));
        self.refresh_cgroup();
        let kind = self.cfg.policy;
        let step = self.step;
        let mut cands: Vec<Candidate> = Vec::new();
        // Per process: a region that could become a candidate (present, not huge).
        let mut could_promote = vec![false; self.procs.len()];
        for (i, w) in self.procs.iter_mut().enumerate() {
            if w.state != "running" {
                continue;
            }
            if w.applier.target_exited() {
                w.state = "exited".into();
                continue;
            }
            let mut s = match signals::sample(w.pid) {
                Ok(s) => s,
                Err(e) if is_gone(&e) || w.applier.target_exited() => {
                    w.state = "exited".into();
                    continue;
                }
                Err(e) if is_refused(&e) => {
                    w.state = format!("refused: {e}");
                    continue;
                }
                Err(e) => {
                    *w.errors.entry("sample".into()).or_default() += 1;
                    w.state = format!("failed: {e}");
                    continue;
                }
            };
            w.rss = s.rss;
            w.anon_huge = s.anon_huge;
            let huge_now: BTreeSet<u64> = s.regions.iter().filter(|r| r.huge).map(|r| r.start).collect();
            // A charged region the kernel has split (or unmapped) is no longer huge.
            w.charged.retain(|r| huge_now.contains(r));
            could_promote[i] = s.regions.iter().any(|r| !r.huge && r.present > 0);
            if kind.uses_access() {
                use_snapshot(w, &mut s.regions, step);
            }
            // Demotion candidates: regions the daemon made huge that are cold now (in
            // the snapshot, for the access-driven policies; none before the first).
            w.would_demote = if kind.uses_access() && w.access.is_none() {
                0
            } else {
                s.regions.iter().filter(|r| w.charged.contains(&r.start) && r.referenced == 0.0).count() as u64
            };
            for r in s.regions {
                let frequency = w.freq.get(&r.start).copied().unwrap_or(0.0);
                cands.push(Candidate { proc: i, region: r, frequency });
            }
        }
        // A process's first sample only establishes the access baseline (every page
        // counts as referenced before the first clear_refs): with no snapshot its
        // regions carry no access, so they are no candidates yet.
        let warmup = kind.uses_access() && self.procs.iter().any(|w| w.state == "running" && w.access.is_none());
        cands.retain(|c| policy::eligible(kind, &self.params, c));
        let n_cands = cands.len();
        policy::order(kind, &mut cands);
        let mut decisions = Vec::new();
        let mut held_back = None;
        if warmup {
            held_back = Some("first interval: establishing the access baseline".to_string());
        }
        let mut taken = vec![false; cands.len()];
        let mut collapsed_now = vec![false; self.procs.len()];
        loop {
            if cands.iter().zip(&taken).all(|(_, t)| *t) {
                break;
            }
            if self.tokens < 1.0 {
                held_back = Some("rate limit".into());
                break;
            }
            // The next candidate: the first untaken in policy order whose process is
            // still running and within its budget; Ingens first picks the process.
            let fair_proc = if kind == PolicyKind::Ingens {
                let shares: Vec<(usize, f64)> = self.procs.iter().enumerate()
                    .filter(|(i, w)| w.state == "running" && self.budget_allows(*i).is_none()
                        && cands.iter().zip(&taken).any(|(c, t)| !*t && c.proc == *i))
                    .map(|(i, w)| (i, (w.charged.len() as u64 * PMD_SIZE) as f64 / w.rss.max(1) as f64))
                    .collect();
                policy::pick_fair(&shares)
            } else {
                None
            };
            let mut pick = None;
            let mut refusal = None;
            for (j, c) in cands.iter().enumerate() {
                if taken[j] || self.procs[c.proc].state != "running" || fair_proc.is_some_and(|p| p != c.proc) {
                    continue;
                }
                match self.budget_allows(c.proc) {
                    Some(why) => {
                        refusal = Some(why);
                        taken[j] = true;
                    }
                    None => {
                        pick = Some(j);
                        break;
                    }
                }
            }
            let Some(j) = pick else {
                held_back = refusal.map(str::to_string).or(held_back);
                break;
            };
            taken[j] = true;
            let c = &cands[j];
            let w = &mut self.procs[c.proc];
            let entry = PlanEntry { start: c.region.start, length: PMD_SIZE, page_size: PMD_SIZE, when: When::Start, pid: 0,
                                    note: Some(format!("daemon {}", kind.name())) };
            self.tokens -= 1.0;
            let o = w.applier.apply_entry(0, &entry);
            let why = match kind {
                PolicyKind::Khugepaged => format!("{} of 512 pages present", c.region.present),
                PolicyKind::Ingens => format!("utilization {}/512", c.region.present),
                PolicyKind::Hawkeye => format!("coverage bucket {}", policy::hawkeye_bucket(&c.region)),
                PolicyKind::Pcc => format!("frequency {:.2} x {} pages", c.frequency, c.region.present),
            };
            let errno = o.errno.clone();
            let outcome = match o.status {
                Status::Collapsed => {
                    w.charged.insert(c.region.start);
                    w.collapsed += 1;
                    collapsed_now[c.proc] = true;
                    "collapsed".to_string()
                }
                _ => {
                    let e = errno.clone().unwrap_or_else(|| "failed".into());
                    *w.errors.entry(e.clone()).or_default() += 1;
                    match e.as_str() {
                        "ESRCH" => w.state = "exited".into(),
                        "EPERM" | "EACCES" => w.state = format!("refused: {}", o.reason),
                        _ => {}
                    }
                    format!("{:?}: {}", o.status, o.reason).to_lowercase()
                }
            };
            let enomem = errno.as_deref() == Some("ENOMEM");
            decisions.push(Decision { step: self.step, t_s, pid: w.pid, start: c.region.start, outcome, errno, why });
            if enomem {
                // No free 2 MiB block: asking again now would only run compaction again.
                held_back = Some("ENOMEM: no free huge page, backing off until the next step".into());
                break;
            }
        }
        if kind.uses_access() {
            // A candidate left untaken waits only for the rate limit (or ENOMEM): the
            // snapshot still ranks it, so the next step needs no fresh bits for it.
            let mut waiting = vec![false; self.procs.len()];
            for (c, t) in cands.iter().zip(&taken) {
                waiting[c.proc] |= !*t;
            }
            for i in 0..self.procs.len() {
                if self.procs[i].state != "running" {
                    continue;
                }
                let wants = could_promote[i] && !waiting[i] && self.budget_allows(i).is_none();
                let w = &mut self.procs[i];
                if w.epochs.after_step(step, collapsed_now[i], wants) {
                    if let Err(e) = signals::clear_refs(w.pid) {
                        if is_gone(&e) || w.applier.target_exited() {
                            w.state = "exited".into();
                        } else if is_refused(&e) {
                            w.state = format!("refused: {e}");
                        } else {
                            *w.errors.entry("clear_refs".into()).or_default() += 1;
                        }
                    }
                }
            }
        }
        self.step += 1;
        self.status(t_s, n_cands, decisions, held_back)
    }

    fn status(&self, t_s: f64, candidates: usize, decisions: Vec<Decision>, held_back: Option<String>) -> StepStatus {
        let processes: Vec<ProcessStatus> = self.procs.iter().map(|w| ProcessStatus {
            pid: w.pid,
            state: w.state.clone(),
            rss: w.rss,
            anon_huge: w.anon_huge,
            daemon_huge: w.charged.len() as u64 * PMD_SIZE,
            collapsed: w.collapsed,
            errors: w.errors.clone(),
            would_demote: w.would_demote,
            charged_regions: w.charged.iter().copied().collect(),
            clear_refs: w.epochs.clears(),
            clear_gap_steps: w.epochs.gap(),
        }).collect();
        StepStatus {
            step: self.step,
            t_s,
            policy: self.cfg.policy.name().into(),
            daemon_huge_total: processes.iter().map(|p| p.daemon_huge).sum(),
            collapsed_total: processes.iter().map(|p| p.collapsed).sum(),
            clear_refs_total: processes.iter().map(|p| p.clear_refs).sum(),
            done: self.cfg.cgroup.is_none() && self.procs.iter().all(|w| w.state != "running"),
            processes,
            candidates,
            decisions,
            held_back,
            cpu_s: cpu_seconds(),
        }
    }

    /// Restore what the daemon changed (THP mode, if it did). Also done on drop;
    /// calling it first reports a failure to restore.
    pub fn close(&mut self) -> Result<()> {
        if self.changed_thp {
            self.changed_thp = false;
            settings::release(THP_ENABLED)?;
        }
        Ok(())
    }
}

/// Give the access-driven policies' regions the access of the snapshot, taking one
/// when the sample at `step` is the first after a clear (its bits cover one interval).
/// Between snapshots the live bits cover every interval since the clear, so a VMA
/// touched once would look as hot as one touched throughout: the snapshot's values
/// are used instead, and a region of a VMA the snapshot does not know counts as not
/// referenced until the next one (`epochs.rs`: it does not bring that one forward).
fn use_snapshot(w: &mut Watched, regions: &mut [signals::RegionSample], step: u64) {
    if w.epochs.fresh(step) {
        w.access = Some(regions.iter().map(|r| (r.vma_start, r.referenced)).collect());
        // PCC's frequency counts epochs (snapshots), not steps.
        let mut freq = BTreeMap::new();
        for r in regions.iter() {
            let old = w.freq.get(&r.start).copied().unwrap_or(0.0);
            let hit = if r.referenced > 0.0 { 1.0 } else { 0.0 };
            freq.insert(r.start, old * (1.0 - FREQ_DECAY) + hit * FREQ_DECAY);
        }
        w.freq = freq;
    } else {
        let live: BTreeSet<u64> = regions.iter().map(|r| r.start).collect();
        w.freq.retain(|k, _| live.contains(k));
    }
    let snap = w.access.as_ref();
    for r in regions.iter_mut() {
        r.referenced = snap.and_then(|a| a.get(&r.vma_start)).copied().unwrap_or(0.0);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
