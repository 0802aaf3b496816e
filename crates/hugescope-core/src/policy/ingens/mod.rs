//! `ingens`: Ingens (Kwon et al., OSDI'16), utilization-based, asynchronous,
//! fair huge-page management, as cooperating daemons and a fault-time policy
//! on the OS model (reference: ingens.md; one file per mechanism here):
//!
//! - `util.rs`: the util bitvector per 2MB region (§4.1, §4.3);
//! - the fault path (this file): base pages only, marking utilization; a
//!   region reaching the threshold (90%) is queued for Promote-kth; in the
//!   adaptive mode, Linux-like huge pages at fault while memory is not
//!   fragmented (FMFI < 0.5, §6.2);
//! - `promote.rs`: Promote-kth, the high-priority queue and the rate-limited
//!   scan (16MB per 10 s), in fairness order, in place when possible (§5.1);
//! - `tracking.rs`: Scan-kth, sampled accessed-bit tracking with the EMA
//!   (§4.1, §5.2);
//! - `demote.rs`: utilization-based demotion (§4.3), on free (the paper) or
//!   deferred to memory pressure;
//! - `compaction.rs`: proactive batched compaction (§4.4);
//! - `fairness.rs`: the promotion metric and its objective (§4.6, §4.7).
//!
//! Every knob is named as the paper names it, with its default; the choices
//! the paper leaves open are in docs/assumptions.md (Ingens).

mod compaction;
mod demote;
pub mod fairness;
mod promote;
pub mod rng;
pub mod tracking;
pub mod util;

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::AllocMode;
use crate::{Error, Result};
use serde::Serialize;
use std::collections::{BTreeSet, HashSet, VecDeque};
use tracking::{TrackConfig, Tracker};
use util::UtilMap;

const TRACK: u32 = 1;
const PROMOTE: u32 = 2;
const WAKE: u32 = 3;
const COMPACT: u32 = 4;

/// Where utilization-based demotion happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DemoteOn {
    /// As soon as a free takes the region below the threshold (§4.3).
    Free,
    /// Deferred: below-threshold huge pages are split only when free memory
    /// falls under `pressure_free` of the total (checked every tracking
    /// period), least utilized first.
    Pressure,
}

#[derive(Clone, Debug, Serialize)]
struct Settings {
    threshold: f64,
    demote_threshold: f64,
    demote: DemoteOn,
    pressure_free: f64,
    adaptive: bool,
    adaptive_fmfi: f64,
    promote_sleep_s: f64,
    scan_regions: u64,
    exclude_s: f64,
    tau: f64,
    /// Per-pid shares; pids past the list get `default_share`.
    shares: Vec<f64>,
    default_share: f64,
    compaction: bool,
    compact_fmfi: f64,
    compact_period_s: f64,
    compact_mb: f64,
    seed: u64,
    tracking: TrackConfig,
}

#[derive(Clone, Debug, Default, Serialize)]
struct Stats {
    promotions_high: u64,
    promotions_scan: u64,
    promotions_in_place: u64,
    promotion_failures: u64,
    huge_faults_adaptive: u64,
    demotions: u64,
    reclaimed_pages: u64,
    exclusions: u64,
    wakes: u64,
    regions_scanned: u64,
    compaction_rounds: u64,
    compaction_migrated_pages: u64,
    compaction_successes: u64,
    tracking_passes: u64,
    abit_clears: u64,
    tracking_seconds: f64,
    promote_seconds: f64,
    compaction_seconds: f64,
}

pub struct Ingens {
    cfg: Settings,
    stats: Stats,
    util: UtilMap,
    tracker: Tracker,
    /// High-priority promotion requests from the fault handler, per pid
    /// (regions in arrival order), and the set of queued regions.
    high: Vec<VecDeque<u64>>,
    queued: HashSet<(u16, u64)>,
    wake_pending: bool,
    /// Promote-kth's normal list: exclusion deadline and promotions in the
    /// current pass, per pid (§5.1).
    excluded_until: Vec<f64>,
    pass_promotions: Vec<u64>,
    /// Huge regions below the demotion threshold awaiting memory pressure.
    deferred: BTreeSet<(u16, u64)>,
    /// A huge fault asked for in the adaptive mode, whose outcome the next
    /// callback reads (the fault may have fallen back to a base page).
    adaptive_pending: Option<(u16, u64)>,
    /// Derived at init from the machine: PMD size index, region bytes, pages
    /// per region, pages needed to promote and to stay huge.
    size: usize,
    region_bytes: u64,
    base_shift: u32,
    pages: usize,
    need: u32,
    keep_need: u32,
    standings: Vec<fairness::Standing>,
    fairness: (f64, f64),
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    use super::params::{MAX_PERIOD_S, MIN_PERIOD_S};
    let threshold = p.f64_in("threshold", 0.9, 0.0, 1.0)?;
    let demote_threshold = p.f64_in("demote_threshold", threshold, 0.0, 1.0)?;
    let demote = match p.choice("demote", "free", &["free", "pressure"])?.as_str() {
        "pressure" => DemoteOn::Pressure,
        _ => DemoteOn::Free,
    };
    let shares_text = p.str("shares", "");
    let default_share = p.f64_in("share", 10_000.0, 1.0, 1e12)?;
    let mut shares = Vec::new();
    for s in shares_text.split('/').filter(|s| !s.trim().is_empty()) {
        let v: f64 = s.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v >= 1.0 && *v <= 1e12).ok_or_else(|| {
            Error::input(format!("policy ingens: shares={shares_text}: '{s}' is not a share between 1 and 1e12 (shares are written a/b/c, one per pid)"))
        })?;
        shares.push(v);
    }
    let cfg = Settings {
        threshold,
        demote_threshold,
        demote,
        pressure_free: p.f64_in("pressure_free", 0.05, 0.0, 1.0)?,
        adaptive: p.bool("adaptive", false)?,
        adaptive_fmfi: p.f64_in("adaptive_fmfi", 0.5, 0.0, 1.0)?,
        promote_sleep_s: p.f64_in("promote_sleep_s", 10.0, MIN_PERIOD_S, MAX_PERIOD_S)?,
        scan_regions: p.u64_in("scan_regions", 8, 1, 1 << 30)?,
        exclude_s: p.f64_in("exclude_s", 120.0, 0.0, MAX_PERIOD_S)?,
        tau: p.f64_in("tau", 0.25, 1e-6, 1.0)?,
        shares,
        default_share,
        compaction: p.bool("compaction", true)?,
        compact_fmfi: p.f64_in("compact_fmfi", 0.8, 0.0, 1.0)?,
        compact_period_s: p.f64_in("compact_period_s", 5.0, MIN_PERIOD_S, MAX_PERIOD_S)?,
        compact_mb: p.f64_in("compact_mb", 100.0, 0.0, 1e9)?,
        seed: p.u64("seed", 1)?,
        tracking: TrackConfig::from_params(p)?,
    };
    let tracker = Tracker::new(cfg.tracking.clone(), cfg.seed, 12);
    Ok(Box::new(Ingens {
        cfg,
        stats: Stats::default(),
        util: UtilMap::new(512),
        tracker,
        high: Vec::new(),
        queued: HashSet::new(),
        wake_pending: false,
        excluded_until: Vec::new(),
        pass_promotions: Vec::new(),
        deferred: BTreeSet::new(),
        adaptive_pending: None,
        size: 1,
        region_bytes: 2 << 20,
        base_shift: 12,
        pages: 512,
        need: 461,
        keep_need: 461,
        standings: Vec::new(),
        fairness: (0.0, 0.0),
    }))
}

impl Ingens {
    fn share(&self, pid: u16) -> f64 {
        self.cfg.shares.get(pid as usize).copied().unwrap_or(self.cfg.default_share)
    }

    fn metric(&self, k: &Ctx<'_>, pid: u16) -> f64 {
        let h = k.view().huge_bytes(pid);
        fairness::metric(self.share(pid), h, self.tracker.idle_fraction(pid), self.cfg.tau, self.region_bytes)
    }

    /// Base pages a direct or on-demand compaction may migrate (100 MB).
    fn compact_pages(&self) -> u64 {
        (self.cfg.compact_mb * (1u64 << 20) as f64 / (1u64 << self.base_shift) as f64) as u64
    }

    /// Grow the per-pid tables to hold `pid`.
    fn ensure(&mut self, pid: u16) {
        let n = pid as usize + 1;
        if self.high.len() < n {
            self.high.resize_with(n, VecDeque::new);
            self.excluded_until.resize(n, 0.0);
            self.pass_promotions.resize(n, 0);
        }
    }

    /// The outcome of an adaptive huge fault: if it got its huge page, the
    /// region is wholly in use as far as the kernel can tell (7.2).
    fn settle_adaptive(&mut self, k: &Ctx<'_>) {
        if let Some((pid, r)) = self.adaptive_pending.take() {
            if k.view().region(pid, r).is_some_and(|s| s.leaf_size >= self.size) {
                self.util.fill(pid, r);
                self.stats.huge_faults_adaptive += 1;
            }
        }
    }

    /// Seconds of daemon time `f` charged (the per-thread CPU time of Table 8).
    fn timed(k: &mut Ctx<'_>, f: impl FnOnce(&mut Ctx<'_>)) -> f64 {
        let before = k.daemon_seconds();
        f(k);
        k.daemon_seconds() - before
    }

    fn snapshot(&mut self, k: &Ctx<'_>) {
        let n = k.view().processes() as u16;
        self.standings = (0..n)
            .map(|pid| fairness::Standing {
                pid,
                share: self.share(pid),
                huge_bytes: k.view().huge_bytes(pid),
                idle_fraction: self.tracker.idle_fraction(pid),
                metric: self.metric(k, pid),
            })
            .collect();
        let m: Vec<f64> = self.standings.iter().map(|s| s.metric).collect();
        self.fairness = fairness::objective(&m);
    }
}

impl Policy for Ingens {
    fn name(&self) -> &'static str {
        "ingens"
    }

    fn describe(&self) -> serde_json::Value {
        let mut stats = self.stats.clone();
        stats.tracking_passes = self.tracker.stats.passes;
        stats.abit_clears = self.tracker.stats.abit_clears;
        serde_json::json!({
            "params": self.cfg,
            "derived": {"promote_at_pages": self.need, "demote_below_pages": self.keep_need, "compact_pages": self.compact_pages()},
            "stats": stats,
            "tracking": self.tracker.stats,
            "processes": self.standings,
            "fairness": {"objective": self.fairness.0, "cv": self.fairness.1},
        })
    }

    fn keeps_huge_on_free(&self) -> bool {
        true
    }

    fn init(&mut self, k: &mut Ctx<'_>) {
        self.size = k.pmd_size();
        self.region_bytes = k.region_bytes();
        self.base_shift = k.shape().base_shift;
        self.pages = k.shape().pages_per_region();
        self.util = UtilMap::new(self.pages);
        self.tracker = Tracker::new(self.cfg.tracking.clone(), self.cfg.seed, self.base_shift);
        // 90% of 512 = 460.8: a region needs 461 pages (ingens.md 2.4).
        self.need = ((self.cfg.threshold * self.pages as f64) - 1e-9).ceil().max(1.0) as u32;
        self.keep_need = ((self.cfg.demote_threshold * self.pages as f64) - 1e-9).ceil() as u32;
        k.schedule_in(self.cfg.tracking.period_s, TRACK);
        k.schedule_in(self.cfg.promote_sleep_s, PROMOTE);
        if self.cfg.compaction {
            k.schedule_in(self.cfg.compact_period_s, COMPACT);
        }
    }

    /// The fast fault path (§4.2): a base page, its util bit set; a region
    /// reaching the threshold is queued and Promote-kth woken. Never a huge
    /// allocation or compaction here, except in the adaptive mode on
    /// unfragmented memory, from a free block only (ingens.md 2.9).
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        self.settle_adaptive(k);
        self.ensure(f.pid);
        let r = f.region_start;
        let u = self.util.set(f.pid, r, ((f.addr - r) >> self.base_shift) as usize);
        if self.cfg.adaptive && f.region_in_vma && f.region_empty {
            let fmfi = k.view().fmfi(k.shape().region_shift - self.base_shift);
            if fmfi < self.cfg.adaptive_fmfi {
                self.adaptive_pending = Some((f.pid, r));
                return FaultAction::Huge { size: self.size, alloc: AllocMode::FreeOnly };
            }
        }
        if u >= self.need && f.region_in_vma && self.queued.insert((f.pid, r)) {
            self.high[f.pid as usize].push_back(r);
            if !self.wake_pending {
                self.wake_pending = true;
                k.schedule_in(0.0, WAKE);
            }
        }
        FaultAction::Base
    }

    fn on_free(&mut self, k: &mut Ctx<'_>, pid: u16, start: u64, len: u64) {
        self.settle_adaptive(k);
        self.freed(k, pid, start, len);
    }

    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        self.settle_adaptive(k);
        match id {
            TRACK => {
                let t = Self::timed(k, |k| self.tracker.pass(k));
                self.stats.tracking_seconds += t;
                self.relieve_pressure(k);
                k.schedule_in(self.cfg.tracking.period_s, TRACK);
            }
            WAKE => {
                self.wake_pending = false;
                self.stats.wakes += 1;
                self.stats.promote_seconds += Self::timed(k, |k| self.drain_high(k));
            }
            PROMOTE => {
                self.stats.wakes += 1;
                self.stats.promote_seconds += Self::timed(k, |k| {
                    self.drain_high(k);
                    self.scan(k);
                });
                k.schedule_in(self.cfg.promote_sleep_s, PROMOTE);
            }
            COMPACT => {
                self.stats.compaction_seconds += Self::timed(k, |k| self.compact_round(k));
                k.schedule_in(self.cfg.compact_period_s, COMPACT);
            }
            _ => {}
        }
    }

    fn finish(&mut self, k: &mut Ctx<'_>) {
        self.settle_adaptive(k);
        self.snapshot(k);
    }
}
