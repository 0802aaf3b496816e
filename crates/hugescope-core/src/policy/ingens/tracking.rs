//! Scan-kth: access-frequency tracking by sampled accessed bits (Ingens
//! §4.1, §5.2; ingens.md 2.3).
//!
//! Every tracking period each present leaf (a base page, or a huge page as
//! one unit) is visited once: its accessed bit `a` is shifted into an 8-bit
//! history (`hist = hist << 1 | a`) and the frequency is updated as an
//! exponential moving average of the history's weight,
//! `F = alpha x popcount(hist) + (1 - alpha) x F` (Eq. 1, with the access
//! bitvector in place of the util bitvector: ingens.md §3 item 1). A leaf is
//! *frequent* when `F >= frequent` (6 = 3/4 of the 8-bit width). Then its bit
//! is cleared for the next period: always if infrequent, with probability
//! `hot_clear` (0.2) if frequent. Each clear invalidates the translation in
//! the TLBs (batched per VMA, `Ctx::scan_young`), since only page walks
//! set accessed bits; that is why tracking shows up in walks, and its CPU
//! time (`scan_ns` per page per pass, 80 ns derived from Table 8) as daemon
//! time.
//!
//! State is kept per base page; the pages of a huge leaf are updated
//! together, so a promoted region's pages converge on one history. At a
//! promotion the region's pages take the OR of their histories and the
//! largest frequency (ingens.md 7.3). Histories and frequencies are two
//! zero-filled arrays (a fresh `History` is all zero bits), allocated zeroed,
//! so the pages of a large VMA that no pass visits cost no resident memory
//! (`os/aspace.rs`; an array of `History` structs would be written out).

use super::rng::SplitMix;
use crate::policy::Ctx;
use serde::Serialize;

/// One tracked page's history and frequency.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct History {
    pub hist: u8,
    pub freq: f32,
}

impl History {
    /// One period's observation (Eq. 1).
    pub fn observe(&mut self, accessed: bool, alpha: f64) {
        self.hist = (self.hist << 1) | accessed as u8;
        self.freq = (alpha * self.hist.count_ones() as f64 + (1.0 - alpha) * self.freq as f64) as f32;
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct TrackConfig {
    pub period_s: f64,
    pub alpha: f64,
    pub frequent: f64,
    pub hot_clear: f64,
    pub clear_flushes: bool,
    pub scan_ns: f64,
}

impl TrackConfig {
    /// The tracking knobs of a policy's parameters (Ingens' own, and the
    /// Ingens-style sharing policy's, `policy/ingens_share.rs`).
    pub fn from_params(p: &mut crate::policy::Params) -> crate::Result<TrackConfig> {
        use crate::policy::params::{MAX_PERIOD_S, MIN_PERIOD_S};
        Ok(TrackConfig {
            period_s: p.f64_in("track_period_s", 2.0, MIN_PERIOD_S, MAX_PERIOD_S)?,
            alpha: p.f64_in("alpha", 0.4, 0.0, 1.0)?,
            frequent: p.f64_in("frequent", 6.0, 0.0, 8.0)?,
            hot_clear: p.f64_in("hot_clear", 0.2, 0.0, 1.0)?,
            clear_flushes: p.bool("clear_flushes", true)?,
            scan_ns: p.f64_in("scan_ns", 80.0, 0.0, 1e6)?,
        })
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TrackStats {
    pub passes: u64,
    pub pages_scanned: u64,
    pub abit_clears: u64,
    /// Leaves frequent at the end of the last pass.
    pub frequent_leaves: u64,
    /// Leaves frequent before a period whose bit then read clear (the
    /// paper's misprediction, under 3% in its workloads).
    pub mispredictions: u64,
    pub frequent_observations: u64,
}

struct VmaHist {
    start: u64,
    end: u64,
    /// `History::hist` per base page.
    hist: Vec<u8>,
    /// `History::freq` per base page.
    freq: Vec<f32>,
}

impl VmaHist {
    fn new(start: u64, end: u64, pages: usize) -> VmaHist {
        VmaHist { start, end, hist: vec![0; pages], freq: vec![0.0; pages] }
    }
    fn len(&self) -> usize {
        self.hist.len()
    }
    fn get(&self, i: usize) -> History {
        History { hist: self.hist[i], freq: self.freq[i] }
    }
    fn set(&mut self, i: usize, h: History) {
        (self.hist[i], self.freq[i]) = (h.hist, h.freq);
    }
}

pub struct Tracker {
    pub cfg: TrackConfig,
    pub stats: TrackStats,
    /// Per pid, per VMA in address order.
    spaces: Vec<Vec<VmaHist>>,
    /// Per pid: (huge leaves, idle huge leaves) at the last pass (the idle
    /// fraction of the fairness metric, §4.6).
    huge: Vec<(u64, u64)>,
    rng: SplitMix,
    base_shift: u32,
}

impl Tracker {
    pub fn new(cfg: TrackConfig, seed: u64, base_shift: u32) -> Tracker {
        Tracker { cfg, stats: TrackStats::default(), spaces: Vec::new(), huge: Vec::new(), rng: SplitMix::new(seed), base_shift }
    }

    /// Idle share of the pid's huge pages at the last pass (0 without any).
    pub fn idle_fraction(&self, pid: u16) -> f64 {
        match self.huge.get(pid as usize) {
            Some(&(n, idle)) if n > 0 => idle as f64 / n as f64,
            _ => 0.0,
        }
    }

    /// The histories of `pid`, matched to the kernel's current VMAs (new
    /// VMAs get fresh state; a VMA that changed bounds starts again).
    fn sync(&mut self, k: &Ctx<'_>, pid: u16) {
        let p = pid as usize;
        if self.spaces.len() <= p {
            self.spaces.resize_with(p + 1, Vec::new);
            self.huge.resize(p + 1, (0, 0));
        }
        let bs = self.base_shift;
        let view = k.view();
        let cur = &mut self.spaces[p];
        let same = cur.len() == view.vmas(pid).count() && cur.iter().zip(view.vmas(pid)).all(|(h, v)| h.start == v.start() && h.end == v.end());
        if same {
            return;
        }
        let mut old = std::mem::take(cur);
        for v in view.vmas(pid) {
            let keep = old.iter().position(|h| h.start == v.start() && h.end == v.end());
            let pages = ((v.end() - v.start()) >> bs) as usize;
            cur.push(match keep {
                Some(i) => old.swap_remove(i),
                None => VmaHist::new(v.start(), v.end(), pages),
            });
        }
    }

    fn find(&self, pid: u16, va: u64) -> Option<(usize, usize)> {
        let vs = self.spaces.get(pid as usize)?;
        let i = vs.partition_point(|h| h.end <= va);
        (i < vs.len() && vs[i].start <= va).then(|| (i, ((va - vs[i].start) >> self.base_shift) as usize))
    }

    /// Whether any of the `pages` base pages from `va` is frequent (compaction
    /// never moves those, §4.4).
    pub fn any_frequent(&self, pid: u16, va: u64, pages: u64) -> bool {
        let Some((vi, pi)) = self.find(pid, va) else { return false };
        let h = &self.spaces[pid as usize][vi];
        let end = (pi + pages as usize).min(h.len());
        h.freq[pi..end].iter().any(|&f| f as f64 >= self.cfg.frequent)
    }

    /// Whether the leaf at `va` is frequent.
    pub fn is_frequent(&self, pid: u16, va: u64) -> bool {
        self.any_frequent(pid, va, 1)
    }

    /// A region was promoted: its pages take the OR of their histories and
    /// the largest frequency (ingens.md 7.3).
    pub fn merge(&mut self, pid: u16, start: u64, pages: usize) {
        let Some((vi, pi)) = self.find(pid, start) else { return };
        let h = &mut self.spaces[pid as usize][vi];
        let end = (pi + pages).min(h.len());
        let hist = h.hist[pi..end].iter().fold(0u8, |o, &x| o | x);
        let freq = h.freq[pi..end].iter().fold(0f32, |m, &x| m.max(x));
        h.hist[pi..end].fill(hist);
        h.freq[pi..end].fill(freq);
    }

    /// One tracking period of every process: observe, then clear for the
    /// next. Charges `scan_ns` per base page scanned.
    pub fn pass(&mut self, k: &mut Ctx<'_>) {
        self.stats.passes += 1;
        self.stats.frequent_leaves = 0;
        let (alpha, frequent, hot_clear, flush) = (self.cfg.alpha, self.cfg.frequent, self.cfg.hot_clear, self.cfg.clear_flushes);
        let mut scanned = 0u64;
        for pid in 0..k.view().processes() as u16 {
            self.sync(k, pid);
            let mut huge = (0u64, 0u64);
            let bs = self.base_shift;
            let stats = &mut self.stats;
            let rng = &mut self.rng;
            for h in self.spaces[pid as usize].iter_mut() {
                let (vs, ve) = (h.start, h.end);
                let cleared = k.scan_young(pid, vs, ve, flush, &mut |leaf| {
                    let a = ((leaf.addr - vs) >> bs) as usize;
                    let b = (a + leaf.pages as usize).min(h.len());
                    let was_frequent = h.freq[a] as f64 >= frequent;
                    if was_frequent {
                        stats.frequent_observations += 1;
                        stats.mispredictions += !leaf.accessed as u64;
                    }
                    for i in a..b {
                        let mut x = h.get(i);
                        x.observe(leaf.accessed, alpha);
                        h.set(i, x);
                    }
                    let now_frequent = h.freq[a] as f64 >= frequent;
                    stats.frequent_leaves += now_frequent as u64;
                    if leaf.size > 0 {
                        huge.0 += 1;
                        huge.1 += !now_frequent as u64;
                    }
                    scanned += leaf.pages as u64;
                    // Start of the next period (§5.2): a cold page's bit is
                    // always cleared, a hot page's with probability hot_clear.
                    !now_frequent || rng.chance(hot_clear)
                });
                stats.abit_clears += cleared;
            }
            self.huge[pid as usize] = huge;
        }
        self.stats.pages_scanned += scanned;
        k.charge_policy_us(scanned as f64 * self.cfg.scan_ns * 1e-3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ingens.md 2.3's test vectors: a page touched every period becomes
    /// frequent after 8 periods; from saturation an idle page stops being
    /// frequent after 4.
    #[test]
    fn ema_vectors() {
        let mut h = History::default();
        let want = [0.4, 1.04, 1.824, 2.6944, 3.61664, 4.569984, 5.5419904, 6.52519424];
        for (i, w) in want.iter().enumerate() {
            h.observe(true, 0.4);
            assert!((h.freq as f64 - w).abs() < 1e-5, "period {}: {} != {w}", i + 1, h.freq);
            assert_eq!(h.freq as f64 >= 6.0, i == 7);
        }
        let mut h = History { hist: 0xff, freq: 8.0 };
        let want = [7.6, 6.96, 6.176, 5.3056];
        for (i, w) in want.iter().enumerate() {
            h.observe(false, 0.4);
            assert!((h.freq as f64 - w).abs() < 1e-5, "idle period {}: {} != {w}", i + 1, h.freq);
            assert_eq!(h.freq as f64 >= 6.0, i < 3);
        }
        assert_eq!(h.hist, 0xf0);
    }
}
