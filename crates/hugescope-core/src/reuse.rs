//! Page reuse distance at two page sizes, and the PCC paper's three-way
//! classification of 4KB pages (PCC paper §3.1, Fig. 2; `docs/experiments.md`).
//!
//! Definitions (pcc.md §2):
//! - the *reuse distance* of a page is the number of accesses to other pages
//!   between two consecutive accesses to it. Because the accesses are
//!   consecutive accesses *to that page*, every access in between is to another
//!   page, so one sample is simply `t - t_last - 1` on a global access index `t`
//!   (raw intervening accesses, not distinct pages: the authors' artifact,
//!   `applications/reuse/reuse.h`, counts the same way, except that it stores
//!   `t - t_last`, one more; at the 1024 threshold the difference is immaterial);
//! - a page's distance is the average of its samples: by default an exponential
//!   moving average `avg = 0.9 * avg + 0.1 * sample` seeded with the first sample
//!   (the artifact's alpha = 0.9), or optionally the plain mean;
//! - each 4KB page is classified with its own 4KB distance (x axis of Fig. 2) and
//!   the distance of the 2MB region that holds it (y axis):
//!   TLB-friendly if the 4KB distance is below the threshold; a HUB if the
//!   4KB distance is at or above it and the 2MB distance below; low-reuse
//!   otherwise.
//!   A page or region touched once has no reuse at all: its distance is infinite
//!   (reported as `None`), which counts as ">= threshold". The artifact instead
//!   prints 0 for such pages (its tuple starts at zero), which would call a page
//!   touched once TLB-friendly although every touch of it misses.
//!
//! Memory is proportional to the pages of the trace's named regions: each run of
//! regions of one process that share 2MB regions becomes a *span* with dense
//! per-4KB and per-2MB state arrays, so the per-access work is an index, not a
//! hash. Accesses outside every named region fall back to hash maps.

use crate::trace::hst::HstReader;
use crate::trace::{Access, AccessSink, Region, TraceHeader};
use crate::{Error, Result};
use serde::Serialize;
use std::collections::{BinaryHeap, HashMap};

/// How the samples of one page are averaged.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Average {
    /// `avg = alpha * avg + (1 - alpha) * sample`, seeded with the first sample.
    Ema { alpha: f64 },
    /// Arithmetic mean of all samples.
    Mean,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReuseOptions {
    /// "Low" reuse distance: below it a translation probably stays in the TLBs
    /// (1024, a common L2 TLB size, PCC paper §3.1).
    pub threshold: f64,
    pub average: Average,
    /// log2 of the small and the huge page size (12 and 21: 4KB and 2MB).
    pub small_shift: u32,
    pub huge_shift: u32,
    /// At most this many (page, distance) points are kept for a scatter plot.
    pub max_points: usize,
    /// Seed of the deterministic point sampling.
    pub seed: u64,
}

impl Default for ReuseOptions {
    fn default() -> Self {
        ReuseOptions {
            threshold: 1024.0,
            average: Average::Ema { alpha: 0.9 },
            small_shift: 12,
            huge_shift: 21,
            max_points: 20_000,
            seed: 1,
        }
    }
}

impl ReuseOptions {
    pub fn validate(&self) -> Result<()> {
        if !(self.threshold.is_finite() && self.threshold > 0.0) {
            return Err(Error::input(format!("reuse threshold {} must be a positive number", self.threshold)));
        }
        if let Average::Ema { alpha } = self.average {
            if !(0.0..1.0).contains(&alpha) {
                return Err(Error::input(format!("EMA alpha {alpha} must be in [0, 1)")));
            }
        }
        // The analysis keeps a state per small page of every declared huge
        // region: more than 2^18 small pages per huge one (4KB in 1GB) is no
        // page-size pair a machine has, and would size that state by it.
        if !(self.small_shift >= 6 && self.small_shift < self.huge_shift && self.huge_shift <= 40 && self.huge_shift - self.small_shift <= 18) {
            return Err(Error::input(format!(
                "page shifts {} and {} must satisfy 6 <= small < huge <= 40 and huge - small <= 18",
                self.small_shift, self.huge_shift
            )));
        }
        if self.max_points > MAX_POINTS {
            return Err(Error::input(format!("reuse max_points={}: at most {MAX_POINTS}", self.max_points)));
        }
        Ok(())
    }
}

/// The three classes of Fig. 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// 4KB distance below the threshold: TLB-friendly already (green).
    TlbFriendly,
    /// High-reUse TLB-sensitive: far apart at 4KB, close at 2MB (blue).
    Hub,
    /// Far apart at both sizes: promotion helps little (red).
    LowReuse,
}

pub const CLASSES: [Class; 3] = [Class::TlbFriendly, Class::Hub, Class::LowReuse];

impl Class {
    fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            Class::TlbFriendly => "tlb_friendly",
            Class::Hub => "hub",
            Class::LowReuse => "low_reuse",
        }
    }
}

/// Classify one 4KB page (None = never reused = infinite distance).
pub fn classify(rd_small: Option<f64>, rd_huge: Option<f64>, threshold: f64) -> Class {
    match (rd_small, rd_huge) {
        (Some(x), _) if x < threshold => Class::TlbFriendly,
        (_, Some(y)) if y < threshold => Class::Hub,
        _ => Class::LowReuse,
    }
}

/// Running state of one page: last access index, accesses, average distance.
#[derive(Clone, Copy, Debug, Default)]
struct PageState {
    last: u64,
    n: u64,
    avg: f64,
}

impl PageState {
    #[inline(always)]
    fn touch(&mut self, t: u64, avg: Average) {
        if self.n > 0 {
            let rd = (t - self.last - 1) as f64;
            // `n` accesses so far give n - 1 samples before this one.
            self.avg = if self.n == 1 {
                rd
            } else {
                match avg {
                    Average::Ema { alpha } => alpha * self.avg + (1.0 - alpha) * rd,
                    Average::Mean => self.avg + (rd - self.avg) / self.n as f64,
                }
            };
        }
        self.last = t;
        self.n += 1;
    }
    fn distance(&self) -> Option<f64> {
        (self.n > 1).then_some(self.avg)
    }
}

/// Dense state over a range of huge regions of one process.
struct Span {
    pid: u16,
    /// First huge-region index (addr >> huge_shift) and how many.
    first_huge: u64,
    huge: Vec<PageState>,
    small: Vec<PageState>,
}

/// Spans larger than this many huge regions (256 GiB of 2MB regions) are not
/// allocated densely; their accesses go to the hash maps instead.
const MAX_SPAN_HUGE: u64 = 1 << 17;
/// Most sampled points of a reuse report (each becomes a row in Python).
const MAX_POINTS: usize = 10_000_000;

/// Counts of one class in one region.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClassCount {
    pub class: &'static str,
    pub pages: u64,
    pub accesses: u64,
    pub page_share: f64,
    pub access_share: f64,
}

/// Summary of one named region (or of everything, or of accesses outside regions).
#[derive(Clone, Debug, Serialize)]
pub struct RegionReuse {
    pub name: String,
    pub pid: u16,
    pub base: u64,
    pub len: u64,
    /// 4KB pages touched at least once.
    pub pages: u64,
    pub accesses: u64,
    /// Pages touched exactly once (no reuse sample; counted as infinite distance).
    pub single_access_pages: u64,
    /// Access-weighted mean of the pages' small-page distances (reused pages only).
    pub mean_rd_small: Option<f64>,
    /// Access-weighted mean of the huge-region distances seen by the pages.
    pub mean_rd_huge: Option<f64>,
    pub classes: Vec<ClassCount>,
}

/// One 4KB page of the scatter plot.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReusePoint {
    pub pid: u16,
    /// Start address of the page.
    pub addr: u64,
    /// Index into `ReuseReport::regions` (the last entry is "outside regions").
    pub region: usize,
    pub rd_small: Option<f64>,
    pub rd_huge: Option<f64>,
    pub class: &'static str,
    pub accesses: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReuseReport {
    /// Exact statistics of the trace, not estimates of the cost model.
    pub kind: &'static str,
    pub options: ReuseOptions,
    pub small_page: u64,
    pub huge_page: u64,
    pub accesses: u64,
    /// Per named region, in header order, then one "(outside regions)" entry.
    pub regions: Vec<RegionReuse>,
    pub total: RegionReuse,
    /// Pages touched (candidates for the scatter) and points kept.
    pub points_total: u64,
    pub points: Vec<ReusePoint>,
}

pub const OUTSIDE: &str = "(outside regions)";

/// Streaming analyser; feed it accesses (it is an `AccessSink`), then `finish`.
pub struct ReuseAnalyzer {
    opts: ReuseOptions,
    regions: Vec<Region>,
    spans: Vec<Span>,
    cache: usize,
    outside_small: HashMap<u64, PageState>,
    outside_huge: HashMap<u64, PageState>,
    t: u64,
}

#[inline(always)]
fn key(pid: u16, index: u64) -> u64 {
    ((pid as u64) << 48) | index
}

impl ReuseAnalyzer {
    pub fn new(header: &TraceHeader, opts: ReuseOptions) -> Result<ReuseAnalyzer> {
        opts.validate()?;
        let hs = opts.huge_shift;
        // Huge-region ranges of the regions, merged per process where they overlap,
        // so two regions sharing a 2MB region share its state (its distance is a
        // property of the 2MB virtual region, not of the named data structure).
        let mut ranges: Vec<(u16, u64, u64)> = header
            .regions
            .iter()
            .filter(|r| r.len > 0)
            .map(|r| (r.pid, r.base >> hs, ((r.end() - 1) >> hs) + 1))
            .collect();
        ranges.sort();
        let mut merged: Vec<(u16, u64, u64)> = Vec::new();
        for (pid, a, b) in ranges {
            match merged.last_mut() {
                Some(last) if last.0 == pid && a <= last.2 => last.2 = last.2.max(b),
                _ => merged.push((pid, a, b)),
            }
        }
        let per_huge = 1usize << (hs - opts.small_shift);
        // Estimate the per-page state before allocating it (a region of 2^17
        // huge pages of 1GB in 4KB pages would be terabytes).
        let pages: u64 = merged
            .iter()
            .filter(|&&(_, a, b)| b - a <= MAX_SPAN_HUGE)
            .map(|&(_, a, b)| (b - a).saturating_mul(1 + per_huge as u64))
            .fold(0, u64::saturating_add);
        let bytes = pages.saturating_mul(std::mem::size_of::<PageState>() as u64);
        let limit = crate::limits::memory_limit()?;
        if bytes > limit {
            return Err(Error::input(format!(
                "reuse analysis of the declared regions would need about {} of memory ({pages} page states), more than the limit of {}; use a larger small page shift or raise {}",
                crate::limits::gib(bytes),
                crate::limits::gib(limit),
                crate::limits::MEMORY_LIMIT_ENV
            )));
        }
        let spans = merged
            .into_iter()
            .filter(|&(_, a, b)| b - a <= MAX_SPAN_HUGE)
            .map(|(pid, a, b)| {
                let n = (b - a) as usize;
                Span { pid, first_huge: a, huge: vec![PageState::default(); n], small: vec![PageState::default(); n * per_huge] }
            })
            .collect();
        Ok(ReuseAnalyzer {
            opts,
            regions: header.regions.clone(),
            spans,
            cache: 0,
            outside_small: HashMap::new(),
            outside_huge: HashMap::new(),
            t: 0,
        })
    }

    #[inline]
    fn span_of(&mut self, pid: u16, huge: u64) -> Option<usize> {
        let hit = |s: &Span| s.pid == pid && huge >= s.first_huge && huge < s.first_huge + s.huge.len() as u64;
        if let Some(s) = self.spans.get(self.cache) {
            if hit(s) {
                return Some(self.cache);
            }
        }
        let i = self.spans.partition_point(|s| (s.pid, s.first_huge) <= (pid, huge));
        if i > 0 && hit(&self.spans[i - 1]) {
            self.cache = i - 1;
            return Some(i - 1);
        }
        None
    }

    #[inline]
    pub fn step(&mut self, a: Access) {
        let t = self.t;
        self.t += 1;
        let avg = self.opts.average;
        let small = a.addr >> self.opts.small_shift;
        let huge = a.addr >> self.opts.huge_shift;
        match self.span_of(a.pid, huge) {
            Some(i) => {
                let s = &mut self.spans[i];
                let hi = (huge - s.first_huge) as usize;
                let si = (small - (s.first_huge << (self.opts.huge_shift - self.opts.small_shift))) as usize;
                s.huge[hi].touch(t, avg);
                s.small[si].touch(t, avg);
            }
            None => {
                self.outside_huge.entry(key(a.pid, huge)).or_default().touch(t, avg);
                self.outside_small.entry(key(a.pid, small)).or_default().touch(t, avg);
            }
        }
    }

    /// Summaries per region, and the sampled scatter points.
    pub fn finish(self) -> ReuseReport {
        let opts = self.opts.clone();
        let ratio = opts.huge_shift - opts.small_shift;
        // Regions sorted for lookup; results are reported in header order.
        let mut order: Vec<usize> = (0..self.regions.len()).collect();
        order.sort_by_key(|&i| (self.regions[i].pid, self.regions[i].base));
        let outside_index = self.regions.len();
        let region_of = |pid: u16, addr: u64| -> usize {
            let j = order.partition_point(|&i| (self.regions[i].pid, self.regions[i].base) <= (pid, addr));
            if j > 0 {
                let r = &self.regions[order[j - 1]];
                if r.contains(pid, addr) {
                    return order[j - 1];
                }
            }
            outside_index
        };
        let mut acc: Vec<Acc> = (0..=self.regions.len()).map(|_| Acc::default()).collect();
        let mut total = Acc::default();
        let mut sampler = Sampler::new(opts.max_points, opts.seed);
        let mut visit = |pid: u16, small_index: u64, page: &PageState, huge: Option<f64>| {
            let addr = small_index << opts.small_shift;
            let rd = page.distance();
            let class = classify(rd, huge, opts.threshold);
            let ri = region_of(pid, addr);
            acc[ri].add(page, rd, huge, class);
            total.add(page, rd, huge, class);
            sampler.offer(ReusePoint { pid, addr, region: ri, rd_small: rd, rd_huge: huge, class: class.name(), accesses: page.n });
        };
        for s in &self.spans {
            for (hi, h) in s.huge.iter().enumerate() {
                if h.n == 0 {
                    continue;
                }
                let huge = h.distance();
                let first = ((s.first_huge + hi as u64) << ratio) as usize;
                let base = (s.first_huge << ratio) as usize;
                for (k, p) in s.small[first - base..first - base + (1 << ratio)].iter().enumerate() {
                    if p.n > 0 {
                        visit(s.pid, (first + k) as u64, p, huge);
                    }
                }
            }
        }
        // Hash-map pages in a fixed order, so results do not depend on hashing.
        let mut rest: Vec<(&u64, &PageState)> = self.outside_small.iter().collect();
        rest.sort_by_key(|(k, _)| **k);
        for (k, p) in rest {
            let pid = (k >> 48) as u16;
            let small = k & ((1 << 48) - 1);
            let huge = self.outside_huge.get(&key(pid, small >> ratio)).and_then(|h| h.distance());
            visit(pid, small, p, huge);
        }
        let mut regions: Vec<RegionReuse> = self
            .regions
            .iter()
            .zip(acc.iter())
            .map(|(r, a)| a.report(&r.name, r.pid, r.base, r.len))
            .collect();
        regions.push(acc[outside_index].report(OUTSIDE, 0, 0, 0));
        let points_total = sampler.seen;
        let mut points = sampler.into_points();
        points.sort_by_key(|p| (p.pid, p.addr));
        ReuseReport {
            kind: "measurement",
            small_page: 1 << opts.small_shift,
            huge_page: 1 << opts.huge_shift,
            accesses: self.t,
            total: total.report("(all)", 0, 0, 0),
            options: opts,
            regions,
            points_total,
            points,
        }
    }
}

impl AccessSink for ReuseAnalyzer {
    #[inline]
    fn access(&mut self, a: Access) {
        self.step(a)
    }
}

#[derive(Default)]
struct Acc {
    pages: u64,
    accesses: u64,
    single: u64,
    class_pages: [u64; 3],
    class_accesses: [u64; 3],
    rd_small_sum: f64,
    rd_small_weight: u64,
    rd_huge_sum: f64,
    rd_huge_weight: u64,
}

impl Acc {
    fn add(&mut self, p: &PageState, rd: Option<f64>, huge: Option<f64>, class: Class) {
        self.pages += 1;
        self.accesses += p.n;
        self.single += (p.n == 1) as u64;
        self.class_pages[class.index()] += 1;
        self.class_accesses[class.index()] += p.n;
        if let Some(x) = rd {
            self.rd_small_sum += x * p.n as f64;
            self.rd_small_weight += p.n;
        }
        if let Some(y) = huge {
            self.rd_huge_sum += y * p.n as f64;
            self.rd_huge_weight += p.n;
        }
    }
    fn report(&self, name: &str, pid: u16, base: u64, len: u64) -> RegionReuse {
        let share = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        RegionReuse {
            name: name.to_string(),
            pid,
            base,
            len,
            pages: self.pages,
            accesses: self.accesses,
            single_access_pages: self.single,
            mean_rd_small: (self.rd_small_weight > 0).then(|| self.rd_small_sum / self.rd_small_weight as f64),
            mean_rd_huge: (self.rd_huge_weight > 0).then(|| self.rd_huge_sum / self.rd_huge_weight as f64),
            classes: CLASSES
                .iter()
                .map(|c| ClassCount {
                    class: c.name(),
                    pages: self.class_pages[c.index()],
                    accesses: self.class_accesses[c.index()],
                    page_share: share(self.class_pages[c.index()], self.pages),
                    access_share: share(self.class_accesses[c.index()], self.accesses),
                })
                .collect(),
        }
    }
}

/// Bottom-k sampling: keep the `k` points with the smallest hash of
/// (seed, pid, address). Deterministic, independent of visiting order, uniform
/// over pages, and bounded in memory by `k`.
struct Sampler {
    k: usize,
    seed: u64,
    seen: u64,
    heap: BinaryHeap<(u64, u64, u16)>,
    points: HashMap<(u16, u64), ReusePoint>,
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Sampler {
    fn new(k: usize, seed: u64) -> Self {
        Sampler { k, seed, seen: 0, heap: BinaryHeap::new(), points: HashMap::new() }
    }
    fn offer(&mut self, p: ReusePoint) {
        self.seen += 1;
        if self.k == 0 {
            return;
        }
        let h = splitmix64(splitmix64(self.seed) ^ splitmix64(((p.pid as u64) << 48) ^ p.addr));
        if self.heap.len() < self.k {
            self.heap.push((h, p.addr, p.pid));
            self.points.insert((p.pid, p.addr), p);
        } else if let Some(&(top, addr, pid)) = self.heap.peek() {
            if (h, p.addr, p.pid) < (top, addr, pid) {
                self.heap.pop();
                self.points.remove(&(pid, addr));
                self.heap.push((h, p.addr, p.pid));
                self.points.insert((p.pid, p.addr), p);
            }
        }
    }
    fn into_points(self) -> Vec<ReusePoint> {
        self.points.into_values().collect()
    }
}

/// Analyse the trace at `path` in one streaming pass.
pub fn analyze_file(path: &str, opts: &ReuseOptions) -> Result<ReuseReport> {
    let mut r = HstReader::open(path)?;
    let header = r.header().clone();
    let mut a = ReuseAnalyzer::new(&header, opts.clone())?;
    r.for_each(|x| a.step(x))?;
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB2: u64 = 2 << 20;

    fn header(regions: &[(&str, u64, u64)]) -> TraceHeader {
        let mut h = TraceHeader::new("test");
        for &(name, base, len) in regions {
            h.regions.push(Region::new(name, base, len));
        }
        h
    }

    fn run(h: &TraceHeader, accesses: &[u64], opts: ReuseOptions) -> ReuseReport {
        let mut a = ReuseAnalyzer::new(h, opts).unwrap();
        for &x in accesses {
            a.step(Access::read(x));
        }
        a.finish()
    }

    fn point(r: &ReuseReport, addr: u64) -> &ReusePoint {
        r.points.iter().find(|p| p.addr == addr).unwrap()
    }

    #[test]
    fn hand_computed_distances() {
        // Pages A, B, C of one 2MB region; trace A B A C C A (indices 0..5).
        // A: samples 1 (index 2 - 0 - 1) and 2 (5 - 2 - 1): EMA 0.9*1 + 0.1*2 = 1.1,
        // mean 1.5. B: one access, no sample. C: one sample, 0.
        // The 2MB region is touched at every index: every sample 0.
        let base = 0x4000_0000u64;
        let (a, b, c) = (base, base + 0x1000, base + 0x2008);
        let h = header(&[("r", base, MB2)]);
        let trace = [a, b, a, c, c + 8, a];
        let r = run(&h, &trace, ReuseOptions::default());
        assert!((point(&r, a).rd_small.unwrap() - 1.1).abs() < 1e-12);
        assert_eq!(point(&r, b).rd_small, None);
        assert_eq!(point(&r, c & !0xfff).rd_small, Some(0.0));
        assert_eq!(point(&r, a).rd_huge, Some(0.0));
        assert_eq!(point(&r, a).accesses, 3);
        let r = run(&h, &trace, ReuseOptions { average: Average::Mean, ..Default::default() });
        assert!((point(&r, a).rd_small.unwrap() - 1.5).abs() < 1e-12);
        // With threshold 1: A (1.1 >= 1) is a HUB, B (never reused) a HUB, C friendly.
        let r = run(&h, &trace, ReuseOptions { threshold: 1.0, ..Default::default() });
        assert_eq!(point(&r, a).class, "hub");
        assert_eq!(point(&r, b).class, "hub");
        assert_eq!(point(&r, c & !0xfff).class, "tlb_friendly");
        assert_eq!(r.accesses, 6);
        assert_eq!(r.total.pages, 3);
        assert_eq!(r.regions[0].classes[1].pages, 2);
        assert_eq!(r.regions[0].classes[1].accesses, 4);
        assert_eq!(r.regions.last().unwrap().pages, 0);
    }

    #[test]
    fn ema_follows_the_artifact_recurrence() {
        // Distances 3, 0, 7 on one page: EMA 3 -> 2.7 -> 0.9*2.7 + 0.7 = 3.13.
        let base = 0x1000_0000u64;
        let h = header(&[("r", base, MB2)]);
        let o = base + MB2 / 2;
        let trace = [base, o, o, o, base, base, o, o, o, o, o, o, o, base];
        let r = run(&h, &trace, ReuseOptions::default());
        assert!((point(&r, base).rd_small.unwrap() - 3.13).abs() < 1e-9);
    }

    /// A trace with three regions of known behaviour, interleaved:
    /// - `stream`: a sequential sweep, 64 accesses per page (TLB-friendly);
    /// - `hub`: 2048 pages in 4 2MB regions, visited round robin, so a page
    ///   recurs every ~2048 x (accesses per round) accesses but its 2MB
    ///   region every few accesses (HUB);
    /// - `sparse`: 4096 2MB regions, one page each, visited round robin, so
    ///   both distances are large (low reuse).
    #[test]
    fn classifies_hub_stream_and_sparse_regions() {
        let stream = 0x1000_0000_0000u64;
        let hub = 0x2000_0000_0000u64;
        let sparse = 0x3000_0000_0000u64;
        let h = header(&[("stream", stream, 64 * MB2), ("hub", hub, 4 * MB2), ("sparse", sparse, 4096 * MB2)]);
        let mut a = ReuseAnalyzer::new(&h, ReuseOptions::default()).unwrap();
        let mut s = 0u64;
        for round in 0..5u64 {
            for i in 0..8192u64 {
                // Hub pages in address order: a page recurs every 2048 steps
                // (~11k accesses), its 2MB region every step (~5 accesses).
                let page = (i % 2048) * 4096;
                a.step(Access::read(hub + page));
                if i % 2 == 0 {
                    let r = (i / 2 + round * 4096) % 4096;
                    a.step(Access::read(sparse + r * MB2));
                }
                for _ in 0..4 {
                    a.step(Access::read(stream + s * 64));
                    s += 1;
                }
            }
        }
        let r = a.finish();
        let by_name = |n: &str| r.regions.iter().find(|x| x.name == n).unwrap();
        let share = |n: &str, c: usize| by_name(n).classes[c].page_share;
        assert!(share("stream", 0) > 0.99, "stream: {:?}", by_name("stream").classes);
        assert!(share("hub", 1) > 0.99, "hub: {:?}", by_name("hub").classes);
        assert!(share("sparse", 2) > 0.99, "sparse: {:?}", by_name("sparse").classes);
        assert_eq!(by_name("hub").pages, 2048);
        assert_eq!(r.total.accesses, r.accesses);
    }

    #[test]
    fn regions_sharing_a_huge_region_share_its_distance_and_outside_accesses_count() {
        let base = 0x5000_0000u64;
        let h = header(&[("a", base, 0x1000), ("b", base + 0x1000, 0x1000)]);
        let trace = [base, base + 0x1000, base, 0x9999_0000, 0x9999_0000];
        let r = run(&h, &trace, ReuseOptions::default());
        assert_eq!(point(&r, base + 0x1000).rd_huge, Some(0.0));
        assert_eq!(r.regions[2].name, OUTSIDE);
        assert_eq!(r.regions[2].pages, 1);
        assert_eq!(r.regions[2].accesses, 2);
        assert_eq!(point(&r, 0x9999_0000).rd_small, Some(0.0));
        assert_eq!(point(&r, 0x9999_0000).region, 2);
    }

    #[test]
    fn sampling_is_capped_and_deterministic() {
        let base = 0x7000_0000u64;
        let h = header(&[("r", base, 8 * MB2)]);
        let trace: Vec<u64> = (0..4096u64).map(|i| base + i * 4096).collect();
        let o = ReuseOptions { max_points: 100, ..Default::default() };
        let r1 = run(&h, &trace, o.clone());
        let r2 = run(&h, &trace, o);
        assert_eq!(r1.points.len(), 100);
        assert_eq!(r1.points_total, 4096);
        assert_eq!(r1.points, r2.points);
    }

    #[test]
    fn bad_options_are_rejected() {
        let h = header(&[]);
        assert!(ReuseAnalyzer::new(&h, ReuseOptions { threshold: 0.0, ..Default::default() }).is_err());
        assert!(ReuseAnalyzer::new(&h, ReuseOptions { average: Average::Ema { alpha: 1.0 }, ..Default::default() }).is_err());
    }
}
