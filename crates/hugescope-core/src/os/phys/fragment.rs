//! Fragmentation injection: the two methods the papers use to start an
//! experiment from fragmented memory. Both work on whole 2 MB pageblocks and
//! tag what they leave allocated with `FRAG_OWNER` (free it again with
//! `release_owner(FRAG_OWNER)`). Both are meant for memory that is still
//! (mostly) free, i.e. before the workload starts; both are deterministic in
//! their seed.

use super::{Mobility, Pfn, PhysMem, FRAG_OWNER};
use crate::{Error, Result};

/// Which injector produced a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FragMethod {
    Pcc,
    Ingens,
}

/// What an injector did, for the run's JSON result.
// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FragReport {
    pub method: FragMethod,
    /// Base pages the injector left allocated (owner `FRAG_OWNER`).
    pub pages_pinned: u64,
    /// Mobility of those pages.
    pub mobility: Mobility,
    /// Complete 2 MB pageblocks in which the injector left at least one page.
    pub blocks_blocked: u64,
    /// Complete 2 MB pageblocks of the memory.
    pub blocks_total: u64,
    /// `blocks_blocked / blocks_total`.
    pub blocked_share: f64,
    /// FMFI at the pageblock order (order 9 with 4 KiB pages) afterwards.
    pub fmfi: f64,
    pub free_frames: u64,
    pub total_frames: u64,
}

/// Parameters of the Ingens injector (§6.3 "To cause fragmentation, we run a
/// program that allocates a large region of memory and then partially frees
/// it").
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IngensFragConfig {
    /// FMFI at the pageblock order to reach (Ingens uses 0.85 and 0.9).
    pub target_fmfi: f64,
    /// Share of the region the program frees (how much memory stays free).
    /// The paper does not say; default 0.5.
    pub free_share: f64,
    /// Mobility of the pages the program keeps. The fragmenter is an ordinary
    /// user program, whose anonymous pages Linux allocates movable, so the
    /// default is `Movable`: Linux's compaction (461,383 compactions in the
    /// Cloudstone run, §6.3) and Ingens' proactive compaction (§4.4) can
    /// undo it. `Unmovable` models pinned memory instead.
    pub mobility: Mobility,
    pub seed: u64,
}

impl IngensFragConfig {
    /// The paper's defaults for a target FMFI and seed.
    pub fn new(target_fmfi: f64, seed: u64) -> IngensFragConfig {
        IngensFragConfig {
            target_fmfi,
            free_share: 0.5,
            mobility: Mobility::Movable,
            seed,
        }
    }
}

impl PhysMem {
    /// PCC §5.1.1: "allocating one non-movable page in every 2MB-aligned
    /// region" over `share` of memory (the paper uses 0.5 and 0.9). Picks
    /// `round(share × pageblocks)` fully free pageblocks uniformly at random
    /// from `seed` and pins one unmovable base page at a random offset in each;
    /// the rest of each block stays free (usable by base pages, never by a
    /// huge page, and never compactable). Errors if `share` is not in [0, 1]
    /// or too few pageblocks are fully free.
    pub fn fragment_pcc(&mut self, share: f64, seed: u64) -> Result<FragReport> {
        if !(0.0..=1.0).contains(&share) {
            return Err(Error::input(format!(
                "PCC fragmentation: share {share} must be between 0 and 1"
            )));
        }
        let total_pb = self.pageblocks();
        let want = (share * total_pb as f64).round() as usize;
        let mut eligible = self.free_pageblocks();
        if want > eligible.len() {
            return Err(Error::input(format!(
                "PCC fragmentation: {want} of {total_pb} 2 MB blocks requested but only {} are entirely free",
                eligible.len()
            )));
        }
        let mut rng = SplitMix64(seed);
        rng.choose_prefix(&mut eligible, want);
        let pb_frames = 1u64 << self.pb_order;
        for &pb in &eligible[..want] {
            let pfn = (pb << self.pb_order) + rng.below(pb_frames);
            let got = self.alloc_at(pfn, 0, Mobility::Unmovable, FRAG_OWNER);
            debug_assert_eq!(got, Some(pfn));
        }
        Ok(self.frag_report(
            FragMethod::Pcc,
            want as u64,
            Mobility::Unmovable,
            want as u64,
        ))
    }

    /// Ingens with the paper's defaults: see `fragment_ingens_with`.
    pub fn fragment_ingens(&mut self, target_fmfi: f64, seed: u64) -> Result<FragReport> {
        self.fragment_ingens_with(&IngensFragConfig::new(target_fmfi, seed))
    }

    /// Ingens §6.3: a program allocates a large region and frees part of it
    /// until FMFI (at the 2 MB order, §3.1) reaches the target.
    ///
    /// The region is every fully free pageblock. Of its `R` frames the program
    /// frees `free_share · R`: `u` whole pageblocks (which coalesce into usable
    /// 2 MB blocks) and `s` pages scattered evenly and at random over the kept
    /// pageblocks, always leaving at least one page allocated in each (so they
    /// stay unusable). `u` is chosen so that
    /// `FMFI = (E + s) / (E + s + u · 512) ≈ target`, where `E` is the free
    /// memory that was already unusable. The end state is computed directly
    /// instead of page by page: the kept pageblocks are allocated and split
    /// into base pages, then their scattered pages freed. Errors if the
    /// target cannot be met within 0.02 with this `free_share`.
    pub fn fragment_ingens_with(&mut self, cfg: &IngensFragConfig) -> Result<FragReport> {
        let f = cfg.target_fmfi;
        if !(0.0..=1.0).contains(&f) {
            return Err(Error::input(format!(
                "Ingens fragmentation: target FMFI {f} must be between 0 and 1"
            )));
        }
        if !(cfg.free_share > 0.0 && cfg.free_share <= 1.0) {
            return Err(Error::input(format!(
                "Ingens fragmentation: free_share {} must be in (0, 1]",
                cfg.free_share
            )));
        }
        let pb_frames = 1u64 << self.pb_order;
        let mut region = self.free_pageblocks();
        let nreg = region.len() as u64;
        if nreg == 0 {
            return Err(Error::input(
                "Ingens fragmentation: no entirely free 2 MB block to fragment",
            ));
        }
        let r = nreg * pb_frames;
        let e = self.free - r; // free frames already unusable at the pageblock order
        let freed = ((cfg.free_share * r as f64).round() as u64).max(1);
        let u = (((1.0 - f) * (e + freed) as f64 / pb_frames as f64).round() as u64)
            .min(freed / pb_frames)
            .min(nreg);
        let s = freed - u * pb_frames;
        let kept = nreg - u;
        if s > kept * (pb_frames - 1) {
            return Err(Error::input(format!(
                "Ingens fragmentation: freeing {} of memory cannot reach FMFI {f}; lower free_share",
                cfg.free_share
            )));
        }
        let predicted = if e + freed == 0 {
            1.0
        } else {
            (e + s) as f64 / (e + freed) as f64
        };
        if (predicted - f).abs() > 0.02 {
            return Err(Error::input(format!(
                "Ingens fragmentation: FMFI {f} is out of reach with free_share {} (closest {predicted:.3})",
                cfg.free_share
            )));
        }
        let mut rng = SplitMix64(cfg.seed);
        // region[..u] are freed whole; region[u..] are kept, in random order.
        rng.choose_prefix(&mut region, nreg as usize);
        let (per, extra) = (
            s.checked_div(kept).unwrap_or(0),
            s.checked_rem(kept).unwrap_or(0),
        );
        let mut offsets: Vec<u16> = Vec::with_capacity(pb_frames as usize);
        for (i, &pb) in region[u as usize..].iter().enumerate() {
            let base: Pfn = pb << self.pb_order;
            let got = self.alloc_at(base, self.pb_order, cfg.mobility, FRAG_OWNER);
            debug_assert_eq!(got, Some(base));
            self.split_to(base, self.pb_order, 0);
            let c = per + u64::from((i as u64) < extra);
            offsets.clear();
            offsets.extend(0..pb_frames as u16);
            rng.choose_prefix(&mut offsets, c as usize);
            for &off in &offsets[..c as usize] {
                self.free(base + off as u64, 0);
            }
        }
        let pinned = kept * pb_frames - s;
        Ok(self.frag_report(FragMethod::Ingens, pinned, cfg.mobility, kept))
    }

    /// Indices of the complete pageblocks with no allocated frame, ascending.
    fn free_pageblocks(&self) -> Vec<u64> {
        (0..self.pageblocks())
            .filter(|&pb| self.pb_used[pb as usize] == 0)
            .collect()
    }

    fn frag_report(
        &self,
        method: FragMethod,
        pinned: u64,
        mobility: Mobility,
        blocked: u64,
    ) -> FragReport {
        let total = self.pageblocks();
        FragReport {
            method,
            pages_pinned: pinned,
            mobility,
            blocks_blocked: blocked,
            blocks_total: total,
            blocked_share: if total == 0 {
                0.0
            } else {
                blocked as f64 / total as f64
            },
            fmfi: self.fmfi(self.pb_order),
            free_frames: self.free,
            total_frames: self.total,
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, and stable across
/// releases, which an external RNG crate does not promise.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is below 2^-32 here).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Partial Fisher–Yates: afterwards `v[..k]` is a uniform random
    /// k-subset of `v` in random order.
    fn choose_prefix<T>(&mut self, v: &mut [T], k: usize) {
        let n = v.len();
        for i in 0..k.min(n) {
            let j = i + self.below((n - i) as u64) as usize;
            v.swap(i, j);
        }
    }
}
