//! The cost model: turns translation counters into cycles and an estimated
//! speedup. Everything here is an estimate (labelled so in every result):
//!
//!   translation cycles = L1 hits x l1_hit + L2 hits x l2_hit
//!                      + walk references x walk_ref + PWC hits x pwc_hit
//!   total cycles       = accesses x base_cycles_per_access + translation
//!                      + OS overhead cycles (faults, promotions, compaction,
//!                        shootdowns; charged by the OS model)
//!
//! With the page-table line cache on (`cost.pt_cache_lines` > 0, `hw::ptcache`)
//! a walk reference is priced by where it hit: `walk_ref_cycles` for one
//! found in the cache (the LLC), `walk_ref_mem_cycles` for one that missed
//! (DRAM). Off (the default), every reference costs `walk_ref_cycles` and the
//! arithmetic is the same, term for term, as before the model existed.
//!
//! A linear model in the counters, like the direct-segments paper's estimate
//! (Basu et al. §6: overhead proportional to misses) and the PCC paper's use of
//! walk rate as the proxy for speedup. `hugescope calibrate` fits the per-access
//! and per-reference parameters to measured run times on the host.

use crate::config::CostConfig;
use crate::hw::pwc::WalkCost;
use crate::hw::Outcome;
use crate::stats::TranslationCounters;
use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CostEstimate {
    /// Always "estimate": these cycles come from the model, not from hardware.
    pub kind: &'static str,
    pub base_cycles: f64,
    pub translation_cycles: f64,
    pub os_cycles: f64,
    /// Memory time of the accesses by the tier they touched (memory tiers,
    /// os/tier.rs); left out of the result when zero (no tiers).
    #[serde(skip_serializing_if = "is_zero")]
    pub memory_cycles: f64,
    pub total_cycles: f64,
    /// Share of all cycles spent on translation (L2 hits, walks, PWC).
    pub translation_share: f64,
    pub seconds: f64,
    /// Where the parameters came from.
    pub parameters: String,
}

impl CostConfig {
    /// Cycles of one access: the same terms as `translation_cycles` plus the
    /// base cost, for a single outcome (`walk` is the page walk of a miss).
    /// The OS model's virtual clock advances by this, so its time and the
    /// cost estimate agree access by access.
    #[inline(always)]
    pub fn access_cycles(&self, outcome: Outcome, walk: Option<WalkCost>) -> f64 {
        self.base_cycles_per_access
            + match outcome {
                Outcome::L1Hit(_) => self.l1_hit_cycles,
                Outcome::L2Hit(_) => self.l2_hit_cycles,
                Outcome::Miss => walk.map_or(0.0, |w| {
                    self.walk_refs_cycles(w.refs as u64, w.mem_refs as u64)
                        + if w.pwc_hit_level.is_some() { self.pwc_hit_cycles } else { 0.0 }
                }),
            }
    }

    /// Cycles of `refs` walk references of which `mem` missed the page-table
    /// line cache. With the cache off `mem` is 0 and this is exactly
    /// `refs x walk_ref_cycles` (no extra term, so results stay bit-identical).
    #[inline(always)]
    pub fn walk_refs_cycles(&self, refs: u64, mem: u64) -> f64 {
        if self.pt_cache_lines == 0 {
            refs as f64 * self.walk_ref_cycles
        } else {
            (refs - mem) as f64 * self.walk_ref_cycles + mem as f64 * self.walk_ref_mem_cycles
        }
    }

    /// Cycles of an access the direct segment translated: the base access
    /// only. The range check runs beside the L1 TLB lookup and finishes
    /// before it would (ISCA'13 §3.1; reference §2.2), so it adds nothing.
    #[inline(always)]
    pub fn segment_hit_cycles(&self) -> f64 {
        self.base_cycles_per_access
    }
}

pub fn translation_cycles(c: &TranslationCounters, p: &CostConfig) -> f64 {
    c.l1_hits as f64 * p.l1_hit_cycles
        + c.l2_hits as f64 * p.l2_hit_cycles
        + p.walk_refs_cycles(c.walk_refs, c.walk_refs_mem.unwrap_or(0))
        + c.pwc_hits as f64 * p.pwc_hit_cycles
}

pub fn estimate(c: &TranslationCounters, p: &CostConfig, os_cycles: f64) -> CostEstimate {
    let base_cycles = c.accesses as f64 * p.base_cycles_per_access;
    let translation_cycles = translation_cycles(c, p);
    let total_cycles = base_cycles + translation_cycles + os_cycles;
    CostEstimate {
        kind: "estimate",
        base_cycles,
        translation_cycles,
        os_cycles,
        memory_cycles: 0.0,
        total_cycles,
        translation_share: if total_cycles > 0.0 { translation_cycles / total_cycles } else { 0.0 },
        seconds: total_cycles / (p.cpu_ghz * 1e9),
        parameters: p.source.clone(),
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl CostEstimate {
    /// Add the memory time of tiered memory (os/tier.rs) to the estimate.
    pub fn add_memory_cycles(&mut self, cycles: f64, p: &CostConfig) {
        self.memory_cycles += cycles;
        self.total_cycles += cycles;
        self.translation_share = if self.total_cycles > 0.0 { self.translation_cycles / self.total_cycles } else { 0.0 };
        self.seconds = self.total_cycles / (p.cpu_ghz * 1e9);
    }
}

/// Estimated speedup of `run` over `baseline` (baseline cycles / run cycles).
pub fn speedup(baseline: &CostEstimate, run: &CostEstimate) -> f64 {
    if run.total_cycles > 0.0 {
        baseline.total_cycles / run.total_cycles
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_cycles() {
        let p = CostConfig {
            base_cycles_per_access: 10.0,
            l1_hit_cycles: 0.0,
            l2_hit_cycles: 7.0,
            walk_ref_cycles: 50.0,
            pwc_hit_cycles: 1.0,
            pt_cache_lines: 0,
            walk_ref_mem_cycles: 0.0,
            cpu_ghz: 1.0,
            source: "test".into(),
        };
        let c = TranslationCounters { accesses: 100, l1_hits: 80, l2_hits: 10, walks: 10, walk_refs: 25, pwc_hits: 5, ..Default::default() };
        let e = estimate(&c, &p, 0.0);
        assert_eq!(e.base_cycles, 1000.0);
        assert_eq!(e.translation_cycles, 70.0 + 1250.0 + 5.0);
        assert_eq!(e.total_cycles, 2325.0);
        assert!((e.translation_share - 1325.0 / 2325.0).abs() < 1e-12);
        assert_eq!(e.seconds, 2325e-9);
        let base = CostEstimate { total_cycles: 4650.0, ..Default::default() };
        assert_eq!(speedup(&base, &e), 2.0);
        // The page-table line cache on: of the 25 references 10 missed, at
        // 200 cycles each; the 15 that hit keep 50.
        let q = CostConfig { pt_cache_lines: 64, walk_ref_mem_cycles: 200.0, ..p.clone() };
        let c2 = TranslationCounters { walk_refs_llc: Some(15), walk_refs_mem: Some(10), ..c.clone() };
        assert_eq!(translation_cycles(&c2, &q), 70.0 + 15.0 * 50.0 + 10.0 * 200.0 + 5.0);
        // Off, the classes are ignored even if present.
        assert_eq!(translation_cycles(&c2, &p), 70.0 + 1250.0 + 5.0);
    }
}
