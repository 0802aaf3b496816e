//! Applying a launched program's plan entry region by region, as the program
//! populates its memory.
//!
//! A program maps and touches its memory when it likes, and a plan entry's
//! range may span several VMAs (the plan writer merges adjacent ranges into
//! one entry) or, with `--plan all`, every private anonymous mapping. So an
//! entry is not one `MADV_COLLAPSE` call that either works or not: each
//! 2 MiB region inside a single VMA is collapsed once it has a resident page
//! (the kernel's requirement), and each sweep (a plan step) asks only about
//! regions that are populated and not yet huge. Where a region stands is read
//! from `PAGEMAP_SCAN` (present and PMD-mapped pages); the VMA checks are
//! `collapse::vma_ineligible`. When the entry ends (every region huge, its
//! `--start-timeout` window over, or the program gone) its outcome counts
//! every region by what happened to it, so a partly applied entry says how
//! much and why instead of quoting the kernel's generic EINVAL text.

use crate::collapse::{vma_ineligible, Applier, CollapseOutcome, Status, PMD_SIZE};
use crate::pagemap::{Scanner, PAGE_IS_HUGE, PAGE_IS_PRESENT};
use crate::smaps::Vma;
use hugescope_core::plan::{PlanEntry, When};
use std::collections::BTreeMap;

/// The top of the x86-64 user address space (47-bit): `--plan all` covers
/// every private anonymous mapping below it.
pub const USER_TOP: u64 = 1 << 47;
/// The note of the entry `--plan all` stands for.
pub const ALL_NOTE: &str = "all: every private anonymous mapping, region by region as it is populated";
/// How often one region is asked before its failure is final: the kernel's
/// EAGAIN is transient and an EINVAL can mean the page that made the region
/// populated was just unmapped; a region that fails this often will not
/// collapse during this run.
pub const MAX_TRIES: u32 = 8;

/// Where one 2 MiB region of an entry stands.
#[derive(Clone, Debug, PartialEq)]
enum Region {
    /// In an eligible VMA, no resident page yet.
    Waiting,
    /// Asked and refused with a transient errno; asked again at the next sweep.
    Trying { tries: u32, errno: String },
    /// PMD-mapped (by us or already).
    Huge,
    /// Refused for good (or too often).
    Failed { errno: String },
    /// Its VMA can never be collapsed; the reason names the VMA.
    Ineligible { errno: Option<&'static str>, why: String },
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Swept {
    pub changed: bool,
    pub collapsed: bool,
}

/// The region-by-region application of one entry to a launched program.
pub struct RegionSweep {
    pub index: usize,
    pub entry: PlanEntry,
    /// `--plan all`: every private anonymous VMA; else the entry's range.
    all: bool,
    regions: BTreeMap<u64, Region>,
    /// Regions of the range that overlapped a VMA boundary (two VMAs, or a
    /// VMA and a hole) at the last sweep that saw them: never collapsible.
    straddling: std::collections::BTreeSet<u64>,
    /// A refusal that holds for every region (THP never, no pidfd, EPERM).
    blocked: Option<(Status, Option<String>, String)>,
    pub attempts: u32,
    /// Seconds since launch of the first sweep.
    pub first_s: Option<f64>,
    collapse_us: u64,
    /// Each sweep's smaps read saw the process: false once it is gone.
    pub gone: bool,
}

impl RegionSweep {
    pub fn new(index: usize, entry: PlanEntry) -> RegionSweep {
        RegionSweep { index, entry, all: false, regions: BTreeMap::new(), straddling: Default::default(), blocked: None,
                      attempts: 0, first_s: None, collapse_us: 0, gone: false }
    }

    /// The entry `--plan all` stands for: every private anonymous mapping,
    /// from the start.
    pub fn all(index: usize) -> RegionSweep {
        let e = PlanEntry { start: 0, length: USER_TOP, page_size: PMD_SIZE, when: When::Start, pid: 0, note: Some(ALL_NOTE.into()) };
        RegionSweep { all: true, ..RegionSweep::new(index, e) }
    }

    pub fn is_all(&self) -> bool {
        self.all
    }

    /// The 2 MiB-aligned part of the range, `[a, b)`.
    fn clamped(&self) -> (u64, u64) {
        let a = self.entry.start.div_ceil(PMD_SIZE) * PMD_SIZE;
        let b = self.entry.start.saturating_add(self.entry.length) / PMD_SIZE * PMD_SIZE;
        (a, b.max(a))
    }

    /// True when nothing is left to do: every region of a range huge, or a
    /// refusal that holds for all. (`--plan all` goes on while the program runs.)
    pub fn finished(&self) -> bool {
        if self.blocked.is_some() || self.gone {
            return true;
        }
        let (a, b) = self.clamped();
        !self.all && b > a && (a..b).step_by(PMD_SIZE as usize).all(|r| self.regions.get(&r) == Some(&Region::Huge))
    }

    /// One sweep at `now` (seconds since launch): read where each region of
    /// the VMAs stands, collapse the populated ones not yet huge (one call per
    /// run of adjacent regions in a VMA), and record the result. Says whether
    /// something changed (a region seen, huge or failed: the caller sweeps
    /// again soon) and whether a region became huge.
    pub fn sweep(&mut self, now: f64, applier: &mut Applier, vmas: &[Vma], scanner: Option<&Scanner>) -> Swept {
        if self.finished() {
            return Swept::default();
        }
        self.first_s.get_or_insert(now);
        let before = self.regions.clone();
        let (a, b) = self.clamped();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for v in vmas.iter().filter(|v| v.overlaps(a, b)) {
            if self.all && !v.is_anonymous() {
                continue;
            }
            let lo = v.start.max(a).div_ceil(PMD_SIZE) * PMD_SIZE;
            let hi = v.end.min(b) / PMD_SIZE * PMD_SIZE;
            // The regions cut by this VMA's edges (a range entry only: with
            // --plan all such a region is no one's to collapse).
            if !self.all {
                for edge in [v.start, v.end] {
                    let r = edge / PMD_SIZE * PMD_SIZE;
                    if edge % PMD_SIZE != 0 && r >= a && r < b && self.regions.get(&r) != Some(&Region::Huge) {
                        self.straddling.insert(r);
                    }
                }
            }
            if lo >= hi {
                continue;
            }
            for r in (lo..hi).step_by(PMD_SIZE as usize) {
                self.straddling.remove(&r);
            }
            if let Some((errno, why)) = vma_ineligible(v) {
                for r in (lo..hi).step_by(PMD_SIZE as usize) {
                    let e = self.regions.entry(r).or_insert(Region::Waiting);
                    if *e != Region::Huge {
                        *e = Region::Ineligible { errno, why: why.clone() };
                    }
                }
                continue;
            }
            // Present runs, with the PMD-mapped ones marked. Without
            // PAGEMAP_SCAN (Linux < 6.7) a VMA with any resident page counts
            // as populated throughout and the kernel's answer decides.
            let present = scanner.and_then(|s| s.scan(lo, hi, PAGE_IS_PRESENT, PAGE_IS_HUGE).ok());
            let mut run: Option<(u64, u64)> = None;
            for r in (lo..hi).step_by(PMD_SIZE as usize) {
                let (populated, huge) = match &present {
                    Some(p) => (
                        p.iter().any(|x| x.start < r + PMD_SIZE && r < x.end),
                        p.iter().any(|x| x.categories & PAGE_IS_HUGE != 0 && x.start <= r && r + PMD_SIZE <= x.end),
                    ),
                    None => (v.rss > 0, false),
                };
                let e = self.regions.entry(r).or_insert(Region::Waiting);
                if huge {
                    *e = Region::Huge;
                }
                let ask = populated && matches!(e, Region::Waiting | Region::Ineligible { .. } | Region::Trying { .. });
                if let Region::Ineligible { .. } = e {
                    // The VMA changed (e.g. remapped) and is eligible now.
                    *e = Region::Waiting;
                }
                match (ask, run) {
                    (true, Some((s, end))) if end == r => run = Some((s, r + PMD_SIZE)),
                    (true, _) => {
                        runs.extend(run);
                        run = Some((r, r + PMD_SIZE));
                    }
                    (false, _) => runs.extend(run.take()),
                }
            }
            runs.extend(run);
        }
        if !runs.is_empty() {
            self.collapse_runs(&runs, applier, vmas, scanner);
        }
        let huge = |m: &BTreeMap<u64, Region>| m.values().filter(|r| **r == Region::Huge).count();
        Swept { changed: self.regions != before, collapsed: huge(&self.regions) > huge(&before) }
    }

    fn collapse_runs(&mut self, runs: &[(u64, u64)], applier: &mut Applier, vmas: &[Vma], scanner: Option<&Scanner>) {
        self.attempts += 1;
        let subs: Vec<PlanEntry> = runs.iter()
            .map(|&(s, e)| PlanEntry { start: s, length: e - s, page_size: PMD_SIZE, when: When::Start, pid: self.entry.pid, note: None })
            .collect();
        let items: Vec<(usize, &PlanEntry)> = subs.iter().map(|e| (self.index, e)).collect();
        let outs = applier.apply_step(&items, Some(vmas));
        for (&(s, e), o) in runs.iter().zip(outs) {
            self.collapse_us += o.collapse_us;
            if !o.attempted {
                // Refused before the kernel was asked: for all regions
                // (THP never, the process gone) or for this run (the VMA
                // checks, which the sweep made already: not expected).
                if o.errno.as_deref() == Some("ESRCH") {
                    self.gone = true;
                } else if o.reason.starts_with("THP") || o.reason.starts_with("this kernel") || o.reason.starts_with("transparent")
                    || o.reason.starts_with("pidfd_open") {
                    self.blocked = Some((o.status, o.errno.clone(), o.reason.clone()));
                } else {
                    for r in (s..e).step_by(PMD_SIZE as usize) {
                        self.regions.insert(r, Region::Failed { errno: o.errno.clone().unwrap_or_else(|| "-".into()) });
                    }
                }
                continue;
            }
            if o.errno_counts.contains_key("ESRCH") {
                self.gone = true;
            }
            if o.errno_counts.contains_key("EPERM") {
                self.blocked = Some((Status::Failed, Some("EPERM".into()), o.reason.clone()));
            }
            let huge = scanner.and_then(|sc| sc.pmd_mapped(s, e - s).ok());
            for r in (s..e).step_by(PMD_SIZE as usize) {
                let is_huge = match &huge {
                    Some(h) => h.iter().any(|x| x.start <= r && r + PMD_SIZE <= x.end),
                    None => o.status == Status::Collapsed,
                };
                let errno = o.errno.clone().unwrap_or_else(|| "EINVAL".into());
                let slot = self.regions.entry(r).or_insert(Region::Waiting);
                *slot = if is_huge {
                    Region::Huge
                } else {
                    let tries = match slot { Region::Trying { tries, .. } => *tries + 1, _ => 1 };
                    if tries >= MAX_TRIES || !matches!(errno.as_str(), "EAGAIN" | "EINVAL") || self.gone {
                        Region::Failed { errno }
                    } else {
                        Region::Trying { tries, errno }
                    }
                };
            }
        }
    }

    /// The entry's outcome now: every region counted by what happened to it.
    /// `end` says why it ends (empty when every region is huge), e.g. "the
    /// program exited at 1.2 s".
    pub fn outcome(&self, end: &str) -> CollapseOutcome {
        let mut o = CollapseOutcome::not_applied(self.index, &self.entry, "");
        o.collapse_us = self.collapse_us;
        o.attempted = self.attempts > 0;
        if let Some((status, errno, reason)) = &self.blocked {
            o.status = *status;
            o.errno = errno.clone();
            o.reason = reason.clone();
            return o;
        }
        let (a, b) = self.clamped();
        let count = |f: &dyn Fn(&Region) -> bool| self.regions.values().filter(|r| f(r)).count() as u64;
        let huge = count(&|r| *r == Region::Huge);
        let waiting = count(&|r| *r == Region::Waiting);
        let ineligible = count(&|r| matches!(r, Region::Ineligible { .. }));
        let mut errno_counts: BTreeMap<String, u64> = BTreeMap::new();
        for r in self.regions.values() {
            if let Region::Failed { errno } | Region::Trying { errno, .. } = r {
                *errno_counts.entry(errno.clone()).or_insert(0) += 1;
            }
        }
        let failed: u64 = errno_counts.values().sum();
        let straddling = self.straddling.len() as u64;
        // A range counts every region it names; --plan all the ones in
        // eligible VMAs that the program populated (a reserved, never
        // touched region is no failure of "all").
        let (regions, outside) = if self.all {
            (huge + failed, 0)
        } else {
            let total = (b - a) / PMD_SIZE;
            (total, total.saturating_sub(self.regions.len() as u64 + straddling))
        };
        o.regions = regions;
        o.regions_collapsed = huge;
        o.bytes_huge_after_exact = Some(huge * PMD_SIZE);
        o.errno_counts = errno_counts;
        o.errno = self.regions.values().rev().find_map(|r| match r {
            Region::Failed { errno } | Region::Trying { errno, .. } => Some(errno.clone()),
            Region::Ineligible { errno: Some(e), .. } if !self.all => Some(e.to_string()),
            _ => None,
        });
        let unapplied = if self.all { failed } else { regions - huge };
        o.status = if regions > 0 && unapplied == 0 {
            Status::Collapsed
        } else if huge > 0 {
            Status::PartiallyCollapsed
        } else if self.attempts > 0 {
            Status::Failed
        } else {
            Status::Skipped
        };
        let mut parts = vec![format!("{huge} of {regions} regions huge")];
        if failed > 0 {
            let by: Vec<String> = o.errno_counts.iter().map(|(e, n)| format!("{n} {e}")).collect();
            parts.push(format!("{failed} populated but refused by the kernel ({}; asked up to {MAX_TRIES} times)", by.join(", ")));
        }
        if waiting > 0 {
            parts.push(format!("{waiting} never had a resident page"));
        }
        if ineligible > 0 {
            let why = self.regions.values().find_map(|r| match r { Region::Ineligible { why, .. } => Some(why.as_str()), _ => None });
            parts.push(format!("{ineligible} in ineligible VMAs ({})", why.unwrap_or("")));
        }
        if straddling > 0 {
            parts.push(format!("{straddling} cut by a VMA boundary (MADV_COLLAPSE needs the 2 MiB region inside one VMA)"));
        }
        if outside > 0 {
            parts.push(format!("{outside} never mapped"));
        }
        if o.status == Status::Collapsed && !self.all {
            o.reason = "collapsed".into();
        } else {
            o.reason = parts.join("; ");
            if !end.is_empty() {
                o.reason = format!("{}: {}", end, o.reason);
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = PMD_SIZE;

    #[test]
    fn a_merged_range_counts_each_region_by_what_happened_to_it() {
        // Range 0..10 regions: VMA A covers regions 0-2 (NOHUGEPAGE), a hole
        // for 3-4, VMA B 5..7.5 (its end cuts region 7), nothing from 8 on.
        let e = PlanEntry { start: 0x4000_0000, length: 10 * M, page_size: M, when: When::Start, pid: 0, note: None };
        let base = e.start;
        let mut s = RegionSweep::new(3, e);
        // The states the sweeps would have left: A's regions ineligible,
        // region 5 huge, 6 refused for good, 7 cut by B's end.
        for r in 0..3 {
            s.regions.insert(base + r * M, Region::Ineligible { errno: Some("EINVAL"), why: "ineligible: nh".into() });
        }
        s.regions.insert(base + 5 * M, Region::Huge);
        s.regions.insert(base + 6 * M, Region::Failed { errno: "ENOMEM".into() });
        s.straddling.insert(base + 7 * M);
        s.attempts = 1;
        let o = s.outcome("the program exited at 1.000 s");
        assert_eq!((o.regions, o.regions_collapsed), (10, 1));
        assert_eq!(o.status, Status::PartiallyCollapsed);
        assert_eq!(o.index, 3);
        assert_eq!(o.errno_counts.get("ENOMEM"), Some(&1));
        // 10 = 1 huge + 1 refused + 3 ineligible + 1 cut + 4 never mapped.
        for part in ["1 of 10 regions huge", "1 populated but refused by the kernel (1 ENOMEM", "3 in ineligible VMAs (ineligible: nh)",
                     "1 cut by a VMA boundary", "4 never mapped", "the program exited at 1.000 s: "] {
            assert!(o.reason.contains(part), "{part:?} not in {}", o.reason);
        }
        // Nothing in it says the kernel's generic EINVAL text.
        assert!(!o.reason.contains("VM_NOHUGEPAGE, no resident page"), "{}", o.reason);
    }

    #[test]
    fn all_counts_only_populated_eligible_regions_and_is_collapsed_when_none_failed() {
        let mut s = RegionSweep::all(0);
        s.regions.insert(0, Region::Huge);
        s.regions.insert(M, Region::Huge);
        s.regions.insert(2 * M, Region::Waiting);
        s.attempts = 2;
        let o = s.outcome("the program exited at 2.000 s");
        assert_eq!((o.regions, o.regions_collapsed, o.status), (2, 2, Status::Collapsed));
        assert!(o.reason.contains("1 never had a resident page"), "{}", o.reason);
        s.regions.insert(3 * M, Region::Trying { tries: 2, errno: "EAGAIN".into() });
        let o = s.outcome("x");
        assert_eq!((o.regions, o.regions_collapsed, o.status), (3, 2, Status::PartiallyCollapsed));
        assert!(!s.finished(), "--plan all never finishes while the program runs");
    }

    #[test]
    fn a_range_is_finished_once_every_region_is_huge() {
        let e = PlanEntry { start: 0, length: 2 * M, page_size: M, when: When::Start, pid: 0, note: None };
        let mut s = RegionSweep::new(0, e);
        s.regions.insert(0, Region::Huge);
        assert!(!s.finished());
        s.regions.insert(M, Region::Huge);
        assert!(s.finished());
        assert_eq!(s.outcome("").reason, "collapsed");
    }
}
