//! `fhpm`: FHPM (Li et al., "Fine-grained Huge Page Management for
//! Virtualization"), a host policy. Its process is the VM: the process's
//! virtual addresses are guest-physical addresses and its 2MB leaves are the
//! EPT's 2MB leaves (common virtualization model). One file per concept:
//!
//! - `frequency.rs`: per-4KB access frequency from A-bit rounds (Table 4);
//! - `scan.rs`: the A-bit scanner every monitor shares (stage 1, and the
//!   single stage-2 read of a companion page);
//! - `page_skew.rs`: the Page Skew Ratio and Table 1's bins (§3.1);
//! - `hp.rs`: the hot-page-pressure policy and the fixed-threshold baselines
//!   (§4.4, §6.3);
//! - `remap.rs`: split and collapse, VM-friendly or Linux's (§4.5);
//! - `conflicts.rs`: the host's page-table updates that conflict with
//!   stage 2 (§4.3);
//! - `stats.rs`: what the result file reports;
//! - the companion-page mechanism itself is `os/companion.rs`.
//!
//! A monitoring period (§4.2, §6.2.1; spec §3, §11): every `period_s` (20 s)
//! a window of `window_s` (10 s) opens. Stage 1: A bits are read and cleared
//! every `round_s` (1 s) for `stage1_rounds` (5) rounds over every leaf; a
//! leaf is hot if its A bit was set in at least `hot` (50%) of them; s_hot
//! is the hot memory at that coarse granularity (a hot 2MB leaf counts 2MB).
//! Stage 2: each hot 2MB leaf is redirected through its companion page for
//! the rest of the window and read once at its end, which gives Ns and PSR;
//! the leaf is restored. Then the decision runs: the HP policy (`fhpm`), a
//! fixed threshold (`fhpm-fixed`), or none (`fhpm-scan`, the monitors of
//! Table 4). Splits and collapses wait until every companion is restored.
//!
//! Full monitoring (`full=true`; Table 4, §6.2.2): "continuous monitoring
//! with A/D bit clearing every 1 second". The rounds then go on through
//! stage 2, and a companion page's PTEs, EPT leaves like any other while the
//! PDE points at them (§4.2.1: "we periodically clear and record A/D bits in
//! EPT"), are read and cleared with every round: a region of a measured page
//! has its own count over the stage-2 rounds instead of inheriting its
//! leaf's stage-1 count from one read (the interval design of §4.2.1, the
//! default). Under inheritance every region touched once in the stage-2
//! window takes its leaf's (hot) frequency: on a hotspot store whose hot
//! 2MB leaves hold many rarely-read values that is the hot bloat again, at
//! 4KB granularity (issue #35: 12x the true hot set at CI scale).
//!
//! The VM's memory is backed by host THP: first touch of an empty 2MB
//! region maps a 2MB leaf (except the base scan of Table 4, whose VM is
//! backed by 4KB pages: the ground truth).

pub mod conflicts;
pub mod consumer;
pub mod frequency;
pub mod hp;
pub mod page_skew;
pub mod remap;
pub mod scan;
pub mod stats;

use super::params::{MAX_PERIOD_S, MIN_PERIOD_S};
use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::AllocMode;
use crate::policy::ingens::rng::SplitMix;
use crate::{Error, Result};
use conflicts::HostRemaps;
use consumer::Consumer;
use frequency::{freq_bin, FreqMap, FREQ_BINS};
use hp::{Measured, Plan};
use serde::Serialize;
use stats::{PeriodRecord, Stats};
use std::collections::BTreeSet;

const WINDOW: u32 = 1;
const ROUND: u32 = 2;
const STAGE2_END: u32 = 3;
const HOST_REMAP: u32 = 4;
/// The content scanner's wake-up (`consumer=share`).
const KSM_SCAN: u32 = 5;

/// What the monitoring feeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Decision {
    /// The hot-page-pressure policy with the consumer's expected use ratio.
    HotPagePressure { f_use: f64 },
    /// The fixed-threshold baseline (§6.3).
    FixedThreshold { t: u32 },
    /// Monitoring only (Table 4's monitors).
    Observe,
}

/// What is scanned how (Table 4's rows); all share `scan::round`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Monitor {
    /// Stage 1 over every leaf, then companion pages on hot 2MB leaves.
    Fhpm,
    /// The VM backed by 4KB pages: per-4KB A bits every round (the truth).
    Base,
    /// 2MB leaves scanned as they are (one A bit per 2MB).
    Huge,
    /// Every huge page split for the window, collapsed back after it.
    Split,
    /// A `share` of the huge pages, chosen at random each window, split.
    Sampling { share: f64 },
}

#[derive(Clone, Debug, Serialize)]
struct Settings {
    decision: Decision,
    monitor: Monitor,
    start_s: f64,
    period_s: f64,
    window_s: f64,
    round_s: f64,
    stage1_rounds: u32,
    hot: f64,
    friendly: bool,
    consumer: String,
    stage2_all: bool,
    full: bool,
    remap_rate: f64,
    seed: u64,
}

/// The window in progress.
#[derive(Default)]
struct Window {
    /// Opened and not yet closed.
    open: bool,
    start_s: f64,
    freq: FreqMap,
    rounds: u32,
    /// Leaves redirected for stage 2, and those a conflict restored early.
    redirected: Vec<(u16, u64)>,
    lost: BTreeSet<(u16, u64)>,
    /// Huge pages the split or sampling scanner split for this window.
    split: Vec<(u16, u64)>,
    /// s_hot per pid at the end of stage 1.
    s_hot: Vec<(u16, u64)>,
    /// Full monitoring: per-4KB counts over the stage-2 rounds (the
    /// companion PTEs' A bits, read and cleared each round), and those rounds.
    fine: Option<FreqMap>,
    stage2_rounds: u32,
}

pub struct Fhpm {
    name: &'static str,
    cfg: Settings,
    stats: Stats,
    win: Window,
    remaps: HostRemaps,
    rng: SplitMix,
    /// What consumes the decision (FHPM §5): nothing, tiers or sharing.
    consumer: Consumer,
    /// `consumer=share`: the merging mechanism's costs (ksmd's knobs).
    ksm: Option<crate::os::ksm::KsmConfig>,
    /// Derived at init: PMD size index, its bytes, base pages per region.
    size: usize,
    huge: u64,
    pages: u32,
}

/// `fhpm`: the HP policy (knobs f_use, start_s, period_s, window_s, round_s,
/// stage1_rounds, hot, friendly, consumer, stage2_all, remap_rate, seed).
pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let f_use = p.f64_in("f_use", 0.85, 0.0, 1.0)?;
    build(p, "fhpm", Decision::HotPagePressure { f_use }, Monitor::Fhpm, true)
}

/// Read the knobs every variant shares and build the policy; `friendly` is
/// the default of the `friendly` knob (FHPM's own splits and collapses are
/// VM-friendly; the split and sampling scans of §6.2.2 are Linux's).
pub fn build(p: &mut Params, name: &'static str, decision: Decision, monitor: Monitor, friendly: bool) -> Result<Box<dyn Policy>> {
    let start_s = p.f64_in("start_s", 0.0, 0.0, MAX_PERIOD_S)?;
    let period_s = p.f64_in("period_s", 20.0, MIN_PERIOD_S, MAX_PERIOD_S)?;
    let window_s = p.f64_in("window_s", 10.0, MIN_PERIOD_S, MAX_PERIOD_S)?;
    let round_s = p.f64_in("round_s", 1.0, MIN_PERIOD_S, MAX_PERIOD_S)?;
    let stage1_rounds = p.u64_in("stage1_rounds", 5, 1, 255)? as u32;
    let hot = p.f64_in("hot", 0.5, 0.0, 1.0)?;
    let friendly = p.bool("friendly", friendly)?;
    let consumer = p.choice("consumer", "none", &["none", "tmm", "share"])?;
    // FHPM-Share's scanner takes ksmd's knobs (pages_to_scan, sleep_ms,
    // cow_us, scan_page_us); its start is the policy's own start_s.
    let (consumer_state, ksm) = match consumer.as_str() {
        "tmm" => (Consumer::Tmm, None),
        "share" => {
            let d = super::ksmd::params(p, 0.0)?;
            (Consumer::Share { pages_to_scan: d.pages_to_scan, sleep_s: d.sleep_s, splittable: Default::default(), classified: false }, Some(d.ksm))
        }
        _ => (Consumer::None, None),
    };
    let stage2_all = p.bool("stage2_all", false)?;
    let full = p.bool("full", false)?;
    let remap_rate = p.f64_in("remap_rate", 0.05, 0.0, 1e6)?;
    let seed = p.u64("seed", 1)?;
    if window_s > period_s {
        return Err(Error::input(format!("policy {name}: window_s={window_s} is longer than period_s={period_s}")));
    }
    let rounds_fit = (window_s / round_s + 1e-9).floor();
    if rounds_fit > 255.0 {
        return Err(Error::input(format!("policy {name}: window_s / round_s = {rounds_fit} rounds; at most 255 per window")));
    }
    if monitor == Monitor::Fhpm && stage1_rounds as f64 * round_s >= window_s {
        return Err(Error::input(format!(
            "policy {name}: stage1_rounds x round_s = {} s leaves no stage 2 in window_s={window_s}",
            stage1_rounds as f64 * round_s
        )));
    }
    if monitor == Monitor::Fhpm && full && (stage1_rounds as f64) >= rounds_fit {
        return Err(Error::input(format!(
            "policy {name}: full=true needs a stage-2 round: stage1_rounds={stage1_rounds} of {rounds_fit} rounds in window_s={window_s}"
        )));
    }
    if monitor != Monitor::Fhpm && rounds_fit < 1.0 {
        return Err(Error::input(format!("policy {name}: window_s={window_s} is shorter than round_s={round_s}")));
    }
    let cfg = Settings { decision, monitor, start_s, period_s, window_s, round_s, stage1_rounds, hot, friendly, consumer, stage2_all, full, remap_rate, seed };
    Ok(Box::new(Fhpm {
        name,
        remaps: HostRemaps::new(remap_rate, seed),
        rng: SplitMix::new(seed),
        consumer: consumer_state,
        ksm,
        cfg,
        stats: Stats::default(),
        win: Window::default(),
        size: 0,
        huge: 0,
        pages: 0,
    }))
}

impl Fhpm {
    /// Rounds of a window (both stages under full monitoring).
    fn window_rounds(&self) -> u32 {
        (self.cfg.window_s / self.cfg.round_s + 1e-9).floor() as u32
    }

    /// Stage-1 rounds of a window: FHPM's, or the whole window for the others.
    fn rounds_per_window(&self) -> u32 {
        match self.cfg.monitor {
            Monitor::Fhpm => self.cfg.stage1_rounds,
            _ => self.window_rounds(),
        }
    }

    /// Full monitoring's stage-2 round: every leaf read and cleared (the
    /// companion PTEs of the redirected pages among them), the redirected
    /// pages' per-4KB counts kept apart from the stage-1 counts.
    fn on_stage2_round(&mut self, k: &mut Ctx<'_>) {
        let mut fine = self.win.fine.take().unwrap_or_default();
        for pid in self.win.freq.pids() {
            self.stats.leaves_scanned += scan::round(k, pid, Some(&mut fine));
        }
        self.win.fine = Some(fine);
        self.win.stage2_rounds += 1;
        self.stats.rounds += 1;
        if self.win.rounds + self.win.stage2_rounds < self.window_rounds() {
            k.schedule_in(self.cfg.round_s, ROUND);
        } else {
            self.close_window(k);
        }
    }

    /// Hot after `count` of `rounds` rounds (spec §11: at least `hot` of
    /// them, and at least one: hot = 0 is "any access", 1 "every round").
    fn is_hot(&self, count: u32, rounds: u32) -> bool {
        count >= 1 && count as f64 >= self.cfg.hot * rounds as f64 - 1e-9
    }

    /// The PMD-level regions of `pid` that lie wholly inside a VMA.
    fn regions(k: &Ctx<'_>, pid: u16) -> Vec<u64> {
        let v = k.view();
        let mut out = Vec::new();
        for m in v.vmas(pid) {
            for ri in 0..m.regions() {
                if m.region_inside(ri) {
                    out.push(m.region_start(ri));
                }
            }
        }
        out.dedup();
        out
    }

    fn is_huge(&self, k: &Ctx<'_>, pid: u16, start: u64) -> bool {
        k.view().region(pid, start).is_some_and(|r| r.leaf_size == self.size && r.present == self.pages)
    }

    fn open_window(&mut self, k: &mut Ctx<'_>) {
        self.win = Window { open: true, start_s: k.now(), freq: FreqMap::new(k), ..Default::default() };
        let pids = self.win.freq.pids();
        // Split and sampling scans: the chosen huge pages are split for the
        // window (Linux's split: the scan's own cost, §6.2.2).
        if let Monitor::Split | Monitor::Sampling { .. } = self.cfg.monitor {
            for &pid in &pids {
                for s in Self::regions(k, pid) {
                    let pick = match self.cfg.monitor {
                        Monitor::Sampling { share } => self.rng.chance(share),
                        _ => true,
                    };
                    if pick && self.is_huge(k, pid, s) && remap::split(k, pid, s, self.cfg.friendly) {
                        self.win.split.push((pid, s));
                    }
                }
            }
        }
        // Arm: clear every A bit so round 1 counts one round's accesses.
        for &pid in &pids {
            self.stats.leaves_scanned += scan::round(k, pid, None);
        }
        k.schedule_in(self.cfg.round_s, ROUND);
    }

    fn on_round(&mut self, k: &mut Ctx<'_>) {
        if self.win.fine.is_some() {
            return self.on_stage2_round(k);
        }
        for pid in self.win.freq.pids() {
            self.stats.leaves_scanned += scan::round(k, pid, Some(&mut self.win.freq));
        }
        self.win.rounds += 1;
        self.stats.rounds += 1;
        if self.win.rounds < self.rounds_per_window() {
            k.schedule_in(self.cfg.round_s, ROUND);
        } else if self.cfg.monitor == Monitor::Fhpm && self.cfg.full {
            self.end_stage1(k);
            self.win.fine = Some(FreqMap::new(k));
            k.schedule_in(self.cfg.round_s, ROUND);
        } else if self.cfg.monitor == Monitor::Fhpm {
            self.end_stage1(k);
            k.schedule_at(self.win.start_s + self.cfg.window_s, STAGE2_END);
        } else {
            self.close_window(k);
        }
    }

    /// s_hot per VM at stage-1 granularity, then the hot (or, with
    /// `stage2_all`, every) 2MB leaf redirected through its companion page.
    fn end_stage1(&mut self, k: &mut Ctx<'_>) {
        let rounds = self.win.rounds;
        let bs = k.shape().base_shift;
        for pid in self.win.freq.pids() {
            let hot_pages = self.win.freq.pages().filter(|&(p, _, c)| p == pid && self.is_hot(c, rounds)).count() as u64;
            self.win.s_hot.push((pid, hot_pages << bs));
            for s in Self::regions(k, pid) {
                let hot = self.is_hot(self.win.freq.count(pid, s), rounds);
                if (hot || self.cfg.stage2_all) && self.is_huge(k, pid, s) && k.redirect_companion(pid, s).is_ok() {
                    self.win.redirected.push((pid, s));
                }
            }
        }
        self.stats.peak_companion_pages = self.stats.peak_companion_pages.max(k.companion_pages());
    }

    /// The end of the window: stage 2 read and restored, frequencies binned,
    /// then the decision.
    fn close_window(&mut self, k: &mut Ctx<'_>) {
        self.win.open = false;
        let bs = k.shape().base_shift;
        // Stage 2: Ns of every redirected leaf still redirected; a conflict
        // lost the others' samples: balanced (PSR 0) until the next period.
        let mut measured: Vec<(Measured, Option<Vec<u64>>)> = Vec::new();
        for (pid, s) in std::mem::take(&mut self.win.redirected) {
            if !self.win.lost.contains(&(pid, s)) && k.is_redirected(pid, s) {
                // Full monitoring read the companion every round: its pages
                // accessed in any stage-2 round; otherwise the one read now.
                let bits = match &self.win.fine {
                    Some(fine) => self.accessed_bits(fine, pid, s, bs),
                    None => scan::read_companion(k, pid, s),
                };
                k.restore_companion(pid, s);
                let ns = scan::ones(&bits);
                measured.push((Measured { pid, start: s, ns, psr: page_skew::psr(ns, self.pages) }, Some(bits)));
            } else {
                self.stats.lost_samples += 1;
                measured.push((Measured { pid, start: s, ns: self.pages, psr: 0.0 }, None));
            }
        }
        // Split and sampling scans: collapse back what they split (in
        // place: the frames are still the huge block's).
        for (pid, s) in std::mem::take(&mut self.win.split) {
            let _ = remap::collapse(k, pid, s, self.size, self.cfg.friendly);
        }
        // Table 4: MB per normalized-frequency bin over the VMs' memory. A
        // region of a measured leaf inherits the leaf's stage-1 frequency if
        // its companion A bit was set, else 0 (spec §3); under full
        // monitoring it has its own stage-2 count.
        let mut hist = [0u64; FREQ_BINS];
        for (pid, addr, c) in self.win.freq.pages() {
            let (c, r) = self.fine_count(&measured, pid, addr, c, bs);
            hist[freq_bin(c, r)] += 1 << bs;
        }
        let mut psr_hist = [0u64; page_skew::PSR_BINS];
        for (m, bits) in &measured {
            if bits.is_some() {
                psr_hist[page_skew::psr_bin(m.ns, self.pages)] += self.huge;
            }
        }
        // The decision, per VM. FHPM-TMM's f_use is the fast tier's share of
        // all monitored memory (the tiers are the host's, shared by the VMs).
        let s_tot_all: u64 = self.win.freq.pids().iter().map(|&p| self.win.freq.bytes_of(p)).sum();
        let mut kept_hot: BTreeSet<(u16, u64)> = BTreeSet::new();
        for pid in self.win.freq.pids() {
            let s_hot = self.win.s_hot.iter().find(|(p, _)| *p == pid).map_or(0, |x| x.1);
            let s_tot = self.win.freq.bytes_of(pid);
            let hot_huge: Vec<Measured> = measured.iter().filter(|(m, _)| m.pid == pid).map(|(m, _)| *m).collect();
            let regions = self.promotion_candidates(k, pid);
            let plan = match self.cfg.decision {
                Decision::HotPagePressure { f_use } => {
                    let f_use = self.consumer.f_use(k, f_use, s_tot_all);
                    hp::hot_page_pressure(s_hot, s_tot, f_use, &hot_huge, &regions, self.huge)
                }
                Decision::FixedThreshold { t } => hp::fixed_threshold(t, &hot_huge, &regions),
                Decision::Observe => Plan::default(),
            };
            // FHPM-Share (§5): the selection tags each hot huge page balanced
            // (PSR < 0.5: kept huge) or unbalanced; splits wait for the content
            // scanner, which may split cold and unbalanced pages only. Every
            // unbalanced page is splittable, not only those the HP demotion
            // would pick: the reading under which Table 2's savings-first run
            // saves the cold data plus the untouched regions of every
            // unbalanced page (5.6GB against the paper's 5448MB; spec §8).
            kept_hot.extend(hot_huge.iter().filter(|m| m.psr < hp::PSR_BOUND).map(|m| (m.pid, m.start)));
            let plan = if matches!(self.consumer, Consumer::Share { .. }) { Plan { demote: Vec::new(), ..plan } } else { plan };
            let (demoted, promoted) = self.apply(k, &plan);
            self.stats.record(PeriodRecord {
                time_s: k.now(),
                pid,
                s_hot_bytes: s_hot,
                s_tot_bytes: s_tot,
                hp_start_bytes: plan.hp_start,
                hp_end_bytes: plan.hp_end,
                measured: hot_huge.len() as u64,
                demoted,
                promoted,
            });
        }
        self.stats.close_window(hist, psr_hist);
        self.feed_consumer(k, &measured, &kept_hot);
    }

    /// The frequency of the page at `addr` after stage 2, as (accessed
    /// rounds, rounds), from its stage-1 count `c`: a region of a measured
    /// (redirected) huge page inherits its leaf's count only if its companion
    /// A bit was set, else 0 (spec §3); other pages keep `c`. Under full
    /// monitoring a measured region counts its own stage-2 rounds, and every
    /// other page its rounds over both stages. `measured` is sorted by
    /// (pid, start).
    fn fine_count(&self, measured: &[(Measured, Option<Vec<u64>>)], pid: u16, addr: u64, c: u32, bs: u32) -> (u32, u32) {
        let start = addr & !(self.huge - 1);
        let found = measured.binary_search_by(|(m, _)| (m.pid, m.start).cmp(&(pid, start))).ok().and_then(|i| measured[i].1.as_ref());
        match (&self.win.fine, found) {
            (Some(fine), Some(_)) => (fine.count(pid, addr), self.win.stage2_rounds),
            (Some(fine), None) => (c + fine.count(pid, addr), self.win.rounds + self.win.stage2_rounds),
            (None, Some(bits)) if !scan::bit(bits, ((addr - start) >> bs) as usize) => (0, self.win.rounds),
            (None, _) => (c, self.win.rounds),
        }
    }

    /// The pages of the leaf at `start` accessed in any stage-2 round of
    /// full monitoring, as a companion bitmap.
    fn accessed_bits(&self, fine: &FreqMap, pid: u16, start: u64, bs: u32) -> Vec<u64> {
        let mut bits = vec![0u64; (self.pages as usize).div_ceil(64)];
        for j in 0..self.pages as usize {
            if fine.count(pid, start + ((j as u64) << bs)) > 0 {
                bits[j / 64] |= 1 << (j % 64);
            }
        }
        bits
    }

    /// Hand the window's classification to the consumer (FHPM §5): the
    /// pages the scanner may split (`share`), or the placement by frequency
    /// (`tmm`: a region of a measured leaf inherits the leaf's stage-1
    /// frequency if its companion A bit was set, else 0, as in Table 4).
    fn feed_consumer(&mut self, k: &mut Ctx<'_>, measured: &[(Measured, Option<Vec<u64>>)], kept_hot: &BTreeSet<(u16, u64)>) {
        match self.consumer {
            Consumer::None => {}
            Consumer::Share { .. } => {
                let mut huge = Vec::new();
                for pid in self.win.freq.pids() {
                    huge.extend(Self::regions(k, pid).into_iter().filter(|&s| self.is_huge(k, pid, s)).map(|s| (pid, s)));
                }
                self.consumer.classify(&huge, kept_hot);
            }
            Consumer::Tmm => {
                let bs = k.shape().base_shift;
                let mut units: Vec<(u32, bool, u16, u64)> = Vec::new();
                let mut seen_huge: BTreeSet<(u16, u64)> = BTreeSet::new();
                for (pid, addr, c) in self.win.freq.pages() {
                    let start = addr & !(self.huge - 1);
                    // On the window's scale of rounds (full monitoring
                    // counts a measured region over the stage-2 rounds only).
                    let (c, r) = self.fine_count(measured, pid, addr, c, bs);
                    let c = ((c as u64 * self.win.rounds as u64 + r as u64 / 2) / r.max(1) as u64) as u32;
                    if c == 0 {
                        continue;
                    }
                    if self.is_huge(k, pid, start) {
                        // One unit per huge leaf, at its hottest region's frequency.
                        if seen_huge.insert((pid, start)) {
                            let f = (0..self.pages as u64).map(|j| self.win.freq.count(pid, start + (j << bs))).max().unwrap_or(c);
                            units.push((f, true, pid, start));
                        }
                    } else {
                        units.push((c, false, pid, addr));
                    }
                }
                let moved = self.consumer.place(k, units);
                self.stats.tier_migrations += moved;
            }
        }
    }

    /// 4KB-mapped regions that may be promoted (spec §11: all base pages
    /// mapped, none redirected), with Ns from stage-1 per-4KB A bits: the
    /// pages accessed in at least one round.
    fn promotion_candidates(&self, k: &Ctx<'_>, pid: u16) -> Vec<Measured> {
        let bs = k.shape().base_shift;
        let mut out = Vec::new();
        for s in Self::regions(k, pid) {
            let Some(r) = k.view().region(pid, s) else { continue };
            if r.leaf_size != 0 || r.present != self.pages || k.is_redirected(pid, s) {
                continue;
            }
            let ns = (0..self.pages as u64).filter(|&j| self.win.freq.count(pid, s + (j << bs)) > 0).count() as u32;
            out.push(Measured { pid, start: s, ns, psr: page_skew::psr(ns, self.pages) });
        }
        out
    }

    /// Split and collapse as planned (VM-friendly unless `friendly=false`).
    fn apply(&mut self, k: &mut Ctx<'_>, plan: &Plan) -> (u64, u64) {
        let (mut demoted, mut promoted) = (0, 0);
        for m in &plan.demote {
            if remap::split(k, m.pid, m.start, self.cfg.friendly) {
                demoted += 1;
            } else {
                self.stats.split_failures += 1;
            }
        }
        for m in &plan.promote {
            match remap::collapse(k, m.pid, m.start, self.size, self.cfg.friendly) {
                Ok(in_place) => {
                    promoted += 1;
                    self.stats.collapses_in_place += in_place as u64;
                }
                Err(_) => self.stats.collapse_failures += 1,
            }
        }
        self.stats.pages_demoted += demoted;
        self.stats.pages_promoted += promoted;
        (demoted, promoted)
    }

    fn on_host_remap(&mut self, k: &mut Ctx<'_>) {
        if let Some((pid, addr, conflict)) = self.remaps.strike(k) {
            self.stats.host_remaps += 1;
            if conflict {
                self.stats.conflicts += 1;
                self.win.lost.insert((pid, addr & !(self.huge - 1)));
            }
        }
        if let Some(gap) = self.remaps.next_gap() {
            k.schedule_in(gap, HOST_REMAP);
        }
    }
}

impl Policy for Fhpm {
    fn name(&self) -> &'static str {
        self.name
    }

    fn describe(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.cfg).unwrap_or_default();
        v["consumer_state"] = serde_json::to_value(&self.consumer).unwrap_or_default();
        v["stats"] = self.stats.to_json();
        v
    }

    fn init(&mut self, k: &mut Ctx<'_>) {
        self.size = k.pmd_size();
        self.huge = k.geometry().sizes[self.size];
        self.pages = (self.huge >> k.shape().base_shift) as u32;
        // The first window opens at start_s (a trace whose memory is still
        // being laid out at first, e.g. an imported one, starts later).
        k.schedule_in(self.cfg.start_s, WINDOW);
        if let (Consumer::Share { .. }, Some(ksm)) = (&self.consumer, &self.ksm) {
            k.enable_sharing(ksm.clone());
            k.schedule_in(self.cfg.start_s, KSM_SCAN);
        }
        if matches!(self.consumer, Consumer::Tmm) && !k.tiers_on() {
            k.note("fhpm consumer=tmm on a kernel without memory tiers (os.tier_fast unset): nothing is placed");
        }
        if let Some(gap) = self.remaps.next_gap() {
            k.schedule_in(gap, HOST_REMAP);
        }
    }

    /// Host THP backs the VM (spec §2; FHPM only ever changes 2MB EPT
    /// leaves): 2MB at first touch of an empty region, except under the base
    /// scan, whose VM is 4KB-backed.
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        let size = k.pmd_size();
        if self.cfg.monitor == Monitor::Base || size == 0 || !f.region_in_vma || !f.region_empty {
            return FaultAction::Base;
        }
        FaultAction::Huge { size, alloc: AllocMode::Compact { max_pages: u64::MAX } }
    }

    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        match id {
            WINDOW => {
                // A window still open (a period shorter than its rounds
                // took) is closed first, so no companion outlives it.
                if self.win.open {
                    k.cancel_timer(ROUND);
                    k.cancel_timer(STAGE2_END);
                    self.close_window(k);
                }
                self.open_window(k);
                k.schedule_in(self.cfg.period_s, WINDOW);
            }
            ROUND => self.on_round(k),
            STAGE2_END => self.close_window(k),
            HOST_REMAP => self.on_host_remap(k),
            KSM_SCAN => {
                self.consumer.scan(k);
                if let Consumer::Share { sleep_s, .. } = self.consumer {
                    k.schedule_in(sleep_s, KSM_SCAN);
                }
            }
            _ => {}
        }
    }

    /// The run ends: companions still held are restored (their samples are
    /// not used), so the VM ends with its huge pages as it had them.
    fn finish(&mut self, k: &mut Ctx<'_>) {
        for (pid, s) in std::mem::take(&mut self.win.redirected) {
            k.restore_companion(pid, s);
        }
        for (pid, s) in std::mem::take(&mut self.win.split) {
            let _ = remap::collapse(k, pid, s, self.size, self.cfg.friendly);
        }
        self.stats.peak_companion_pages = self.stats.peak_companion_pages.max(k.companion_pages());
    }
}
