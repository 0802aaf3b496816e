//! `hawkeye`: HawkEye's promotion by access coverage (Panwar et al.,
//! ASPLOS'19), in the simplified form the PCC paper compares against (PCC §2.2,
//! §4, §5; pcc.md §5 and §7; linux-thp-and-hawkeye.md B.2, B.6 and C).
//! Pre-zeroing, bloat recovery and the PMU-driven process choice of the full
//! HawkEye are not modelled: the PCC comparison does not use them.
//!
//! A round:
//! 1. **Window** (`window_s`, default 1 s of virtual time, or
//!    `window_accesses`): measure each 2MB region's access coverage, the
//!    number of distinct base pages accessed in the window (0..512).
//!    - `coverage_source=all_accesses` (default, as the artifact): every
//!      access sets a per-base-page bit (`Ctx::track_coverage`), so TLB
//!      hits count too; tracking is on during the window only.
//!    - `coverage_source=abit`: accessed bits, as the real kernel presumably
//!      samples them: the window starts by clearing the A bits of every VMA
//!      (`Ctx::clear_accessed`, which charges the PTE scan and shoots the
//!      range down so the next access walks and sets the bit) and ends by
//!      counting set bits per region (`RegionState::accessed`).
//!    **Scan limit** (`scan_pages`, default 4096 = 8 regions, as the PCC paper
//!    describes HawkEye, §5: "each interval scans 4096 pages, like
//!    khugepaged"): only the regions under a cursor that walks the address
//!    spaces (pid, VMA, region order, wrapping) have their coverage read in a
//!    window; the others keep their EMA, and their window bits are dropped.
//!    `scan_pages=0` reads every region each window, as the authors' artifact
//!    does (pcc.md §7); the paper's description wins as the default
//!    (docs/architecture.md, "Rules the code keeps": where a reference and
//!    the paper disagree, the paper wins).
//! 2. **EMA** per region "seen so far" (covered at least once): the first
//!    sample is taken raw; later ones give `ema = alpha x old + (1 - alpha) x
//!    new` with `alpha = 0.9` (the weight on history). Regions never covered
//!    are not tracked.
//! 3. **Buckets**: bucket = min(floor(ema / 50), 9). A region keeps its place
//!    in its bucket while it stays there and goes to the tail of its new
//!    bucket when it moves (HawkEye's per-bucket lists); a region first seen
//!    goes to the tail of its bucket. Within one window, regions enter in
//!    address order (pid, then VMA, then region): a deterministic choice the
//!    papers leave open.
//! 4. **Promote** up to `promotions_per_round` (default 8 = 4096 pages
//!    scanned / 512, pcc.md §5) regions that are not huge yet, from bucket 9
//!    down to `min_bucket` (default 0: no minimum coverage, as the artifact),
//!    FIFO within a bucket. Regions already huge are skipped without counting
//!    (as the artifact); empty buckets are skipped (the artifact reads bucket
//!    9 before checking it, undefined behaviour we do not reproduce). A
//!    refusal for lack of memory or budget ends the round (like khugepaged
//!    ending its pass on a failed allocation) and is counted.
//! 5. **Sleep** `sleep_windows` windows (default 30), then the next window:
//!    windows start at 0, 31, 62, ... windows; promotions happen at 1, 32, 63, ...
//!
//! Processes are pooled: buckets hold regions of every process (the PCC
//! artifact has one process; HawkEye-G's per-process choice is not modelled).
//! Allocation: collapse with direct compaction of at most `compact_pages`
//! base pages (0: free blocks only). Policy CPU time: the end-of-window scan
//! is charged `scan_us_per_page` (default 0.005 us, the khugepaged scan cost
//! used elsewhere) per base page of every VMA, as async daemon time.

use super::{Ctx, Params, Policy};
use crate::bounded::BoundedLog;
use crate::os::Refusal;
use crate::os::AllocMode;
use crate::Result;
use serde::Serialize;
use std::collections::HashMap;

/// Most coverage buckets: one per possible coverage value of a 2MB region of
/// 4KB pages (0..=512) is the finest that means anything; 1024 leaves room for
/// larger regions. Each round records a counter per bucket.
pub const MAX_BUCKETS: u32 = 1024;

const WINDOW_START: u32 = 0x4845_0001;
const WINDOW_END: u32 = 0x4845_0002;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CoverageSource {
    AllAccesses,
    Abit,
}

#[derive(Clone, Debug, Serialize)]
struct Settings {
    window_s: f64,
    window_accesses: u64,
    sleep_windows: u64,
    ema_alpha_history: f64,
    bucket_width: u32,
    num_buckets: u32,
    promotions_per_round: u64,
    min_bucket: u32,
    coverage_source: CoverageSource,
    compact_pages: u64,
    scan_us_per_page: f64,
    /// Base pages whose coverage is read per window (0: every region).
    scan_pages: u64,
}

/// What one round did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RoundRecord {
    pub time_s: f64,
    pub accesses: u64,
    /// Regions tracked (seen at least once).
    pub tracked: u64,
    /// Regions with non-zero coverage in this window.
    pub covered: u64,
    /// Tracked regions per bucket, bucket 0 first (not yet huge only).
    pub buckets: Vec<u64>,
    pub promoted: u64,
    pub failed: u64,
}

#[derive(Clone, Copy, Debug)]
struct Rec {
    pid: u16,
    start: u64,
    ema: f64,
    bucket: u32,
    /// Position in its bucket's FIFO (smaller: earlier).
    seq: u64,
    huge: bool,
}

pub struct HawkEye {
    s: Settings,
    regions: Vec<Rec>,
    index: HashMap<(u16, u64), usize>,
    seq: u64,
    window_start_accesses: u64,
    /// Scan cursor: index into the address-ordered list of regions.
    cursor: usize,
    /// One record per round, bounded by counters kept (each holds one per
    /// bucket); `promoted`/`failed` count every round.
    rounds: BoundedLog<RoundRecord>,
    promoted: u64,
    failed: u64,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    use super::params::{MAX_COMPACT_PAGES, MAX_PERIOD_ACCESSES, MAX_PERIOD_S, MAX_PROMOTIONS_PER_ROUND, MIN_PERIOD_ACCESSES, MIN_PERIOD_S};
    // Only counts of pages (no allocation); 2^40 pages is more than any memory.
    let scan_pages = p.u64_in("scan_pages", 4096, 0, 1 << 40)?;
    let per_round_default = if scan_pages > 0 { (scan_pages / 512).max(1) } else { 8 };
    let num_buckets = p.u64_in("num_buckets", 10, 1, MAX_BUCKETS as u64)? as u32;
    let src = p.choice("coverage_source", "all_accesses", &["all_accesses", "abit", "abit_sample"])?;
    let s = Settings {
        window_s: p.f64_in("window_s", 1.0, MIN_PERIOD_S, MAX_PERIOD_S)?,
        window_accesses: p.u64_off_or_in("window_accesses", 0, MIN_PERIOD_ACCESSES, MAX_PERIOD_ACCESSES)?,
        sleep_windows: p.u64_in("sleep_windows", 30, 0, 1 << 20)?,
        ema_alpha_history: p.f64_in("ema_alpha_history", 0.9, 0.0, 1.0)?,
        // Coverage is 0..=512 base pages per region, so a bucket wider than
        // that is one bucket; every round records one counter per bucket.
        bucket_width: p.u64_in("bucket_width", 50, 1, 1 << 20)? as u32,
        num_buckets,
        promotions_per_round: p.u64_in("promotions_per_round", per_round_default, 0, MAX_PROMOTIONS_PER_ROUND)?,
        min_bucket: p.u64_in("min_bucket", 0, 0, num_buckets as u64 - 1)? as u32,
        coverage_source: if src == "all_accesses" { CoverageSource::AllAccesses } else { CoverageSource::Abit },
        compact_pages: p.u64_in("compact_pages", 1 << 14, 0, MAX_COMPACT_PAGES)?,
        scan_us_per_page: p.f64_in("scan_us_per_page", 0.005, 0.0, 1e6)?,
        scan_pages,
    };
    Ok(Box::new(HawkEye {
        s,
        regions: Vec::new(),
        index: HashMap::new(),
        seq: 0,
        window_start_accesses: 0,
        cursor: 0,
        rounds: {
            // About 2^19 bucket counters at most (4 MiB here, and the result
            // JSON stays small enough for Python to load): 10000 rounds from
            // each end with the default 10 buckets, 86 hours at 31 s a round;
            // 256 from each end with 1024 buckets.
            let keep = ((1usize << 19) / num_buckets as usize / 2).clamp(32, 10_000);
            BoundedLog::new(keep, keep)
        },
        promoted: 0,
        failed: 0,
    }))
}

/// EMA update: the first sample is taken raw (artifact, B.6 step 2).
pub fn ema(old: Option<f64>, sample: f64, alpha_history: f64) -> f64 {
    match old {
        None => sample,
        Some(o) => alpha_history * o + (1.0 - alpha_history) * sample,
    }
}

/// Bucket of a coverage value: floor(ema / width), capped at the top bucket
/// (so 450..512 is bucket 9 with the defaults).
pub fn bucket(ema: f64, width: u32, buckets: u32) -> u32 {
    ((ema.max(0.0) / width as f64).floor() as u64).min(buckets as u64 - 1) as u32
}

impl HawkEye {
    fn begin_window(&mut self, k: &mut Ctx<'_>) {
        self.window_start_accesses = k.accesses();
        match self.s.coverage_source {
            CoverageSource::AllAccesses => k.track_coverage(true),
            CoverageSource::Abit => {
                let view = k.view();
                let ranges: Vec<(u16, u64, u64)> =
                    (0..view.processes() as u16).flat_map(|pid| view.vmas(pid).map(move |v| (pid, v.start(), v.end() - v.start()))).collect();
                for (pid, start, len) in ranges {
                    k.clear_accessed(pid, start, len, false);
                }
            }
        }
        if self.s.window_accesses > 0 {
            k.schedule_after_accesses(k.accesses() + self.s.window_accesses, WINDOW_END);
        } else {
            k.schedule_in(self.s.window_s, WINDOW_END);
        }
    }

    fn end_window(&mut self, k: &mut Ctx<'_>) {
        if self.s.coverage_source == CoverageSource::AllAccesses {
            k.track_coverage(false);
        }
        let pmd = k.pmd_size();
        let rs = k.shape().region_shift;
        let view = k.view();
        let mut rec = RoundRecord { time_s: k.now(), accesses: k.accesses(), ..Default::default() };
        // Regions in address order: (pid, start) of every region wholly inside a VMA.
        let mut all: Vec<(u16, u64)> = Vec::new();
        let mut pages = 0u64;
        for pid in 0..view.processes() as u16 {
            for v in view.vmas(pid) {
                pages += v.pages();
                all.extend((0..v.regions()).filter(|&ri| v.region_inside(ri)).map(|ri| (pid, v.region_start(ri))));
            }
        }
        // The scan limit: only `scan_pages / 512` regions from the cursor on
        // are read this window (all of them with scan_pages = 0).
        let per_region = 1u64 << (rs - k.shape().base_shift);
        let n = all.len();
        let scanned = if self.s.scan_pages == 0 { n } else { ((self.s.scan_pages / per_region).max(1) as usize).min(n) };
        let first = if n == 0 { 0 } else { self.cursor % n };
        self.cursor = if n == 0 { 0 } else { (first + scanned) % n };
        let in_scan = |i: usize| n > 0 && (i + n - first) % n < scanned;
        let scanned_pages = if self.s.scan_pages == 0 { pages } else { scanned as u64 * per_region };
        k.charge_policy_us(scanned_pages as f64 * self.s.scan_us_per_page);
        for (idx, (pid, start)) in all.into_iter().enumerate() {
            let cov = match self.s.coverage_source {
                CoverageSource::AllAccesses => k.take_coverage(pid, start),
                CoverageSource::Abit => k.view().region(pid, start).map_or(0, |st| st.accessed),
            };
            if !in_scan(idx) {
                continue;
            }
            rec.covered += (cov > 0) as u64;
            let i = match self.index.get(&(pid, start)) {
                Some(&i) => i,
                None if cov == 0 => continue,
                None => {
                    self.regions.push(Rec { pid, start, ema: f64::NAN, bucket: u32::MAX, seq: 0, huge: false });
                    self.index.insert((pid, start), self.regions.len() - 1);
                    self.regions.len() - 1
                }
            };
            let r = &mut self.regions[i];
            let old = (!r.ema.is_nan()).then_some(r.ema);
            r.ema = ema(old, cov as f64, self.s.ema_alpha_history);
            let b = bucket(r.ema, self.s.bucket_width, self.s.num_buckets);
            if b != r.bucket {
                r.bucket = b;
                self.seq += 1;
                r.seq = self.seq;
            }
        }
        rec.tracked = self.regions.len() as u64;

        // Promotion order: highest bucket first, FIFO inside a bucket.
        let view = k.view();
        for r in self.regions.iter_mut() {
            if !r.huge && view.region(r.pid, r.start).is_some_and(|s| s.leaf_size >= pmd) {
                r.huge = true;
            }
        }
        let mut order: Vec<usize> =
            (0..self.regions.len()).filter(|&i| !self.regions[i].huge && self.regions[i].bucket >= self.s.min_bucket).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&self.regions[a], &self.regions[b]);
            y.bucket.cmp(&x.bucket).then(x.seq.cmp(&y.seq))
        });
        rec.buckets = vec![0; self.s.num_buckets as usize];
        for r in self.regions.iter().filter(|r| !r.huge) {
            rec.buckets[r.bucket as usize] += 1;
        }
        let mode = if self.s.compact_pages == 0 { AllocMode::FreeOnly } else { AllocMode::Compact { max_pages: self.s.compact_pages } };
        for i in order {
            if rec.promoted >= self.s.promotions_per_round {
                break;
            }
            let (pid, start) = (self.regions[i].pid, self.regions[i].start);
            match k.promote(pid, start, pmd, mode) {
                Ok(()) => {
                    rec.promoted += 1;
                    self.regions[i].huge = true;
                }
                Err(Refusal::AlreadyHuge) => self.regions[i].huge = true,
                Err(Refusal::Ineligible | Refusal::NotContiguous) => {}
                Err(Refusal::NoMemory | Refusal::Budget) => {
                    rec.failed += 1;
                    break;
                }
            }
        }
        self.promoted += rec.promoted;
        self.failed += rec.failed;
        self.rounds.push(rec);
        // Sleep, then the next window.
        if self.s.window_accesses > 0 {
            let w = self.s.window_accesses;
            let next = self.window_start_accesses + w * (1 + self.s.sleep_windows);
            k.schedule_after_accesses(next.max(k.accesses() + 1), WINDOW_START);
        } else {
            k.schedule_in(self.s.window_s * self.s.sleep_windows as f64, WINDOW_START);
        }
    }

    /// Per-round records (tests and reports).
    pub fn rounds(&self) -> Vec<RoundRecord> {
        self.rounds.to_vec()
    }
}

impl Policy for HawkEye {
    fn name(&self) -> &'static str {
        "hawkeye"
    }
    fn describe(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "settings": self.s,
            "promoted": self.promoted,
            "failed": self.failed,
            "rounds": self.rounds,
        });
        // Only when the cap engaged, so ordinary results keep their bytes.
        if self.rounds.dropped() > 0 {
            v["rounds_dropped"] = self.rounds.dropped().into();
        }
        v
    }
    fn finish(&mut self, k: &mut Ctx<'_>) {
        if let Some(w) = self.rounds.warning("hawkeye rounds") {
            k.note(w);
        }
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        self.begin_window(k);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        match id {
            WINDOW_START => self.begin_window(k),
            WINDOW_END => self.end_window(k),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_fifty_wide_and_capped() {
        for (c, b) in [(0.0, 0), (49.9, 0), (50.0, 1), (127.0, 2), (449.0, 8), (450.0, 9), (512.0, 9)] {
            assert_eq!(bucket(c, 50, 10), b, "{c}");
        }
    }

    #[test]
    fn ema_takes_the_first_sample_raw() {
        let a = ema(None, 512.0, 0.9);
        assert_eq!(a, 512.0);
        let b = ema(Some(a), 0.0, 0.9);
        assert!((b - 460.8).abs() < 1e-9);
        // An idle full region falls to bucket 8 after two idle windows (B.6 quirk).
        assert_eq!(bucket(b, 50, 10), 9);
        assert_eq!(bucket(ema(Some(b), 0.0, 0.9), 50, 10), 8);
    }
}
