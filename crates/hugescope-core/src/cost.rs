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
use serde::{Deserialize, Serialize};

// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostEstimate {
    /// Always "estimate": these cycles come from the model, not from hardware.
    #[serde(skip_deserializing, default = "estimate_kind")]
    pub kind: &'static str,
    pub base_cycles: f64,
    pub translation_cycles: f64,
    pub os_cycles: f64,
    /// Memory time of the accesses by the tier they touched (memory tiers,
    /// os/tier.rs); left out of the result when zero (no tiers).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub memory_cycles: f64,
    pub total_cycles: f64,
    /// Per cpu, in a run with more than one: the base and translation cycles
    /// of its own accesses (`static_cycles` of `TranslationCounters::per_cpu`;
    /// they add up to `base_cycles + translation_cycles`). OS time is not in
    /// them: the kernel charges it to the run, not to a cpu. Left out of the
    /// result with one cpu.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu_cycles: Vec<f64>,
    /// Share of all cycles spent on translation (L2 hits, walks, PWC).
    pub translation_share: f64,
    pub seconds: f64,
    /// Where the parameters came from.
    pub parameters: String,
}

fn estimate_kind() -> &'static str {
    "estimate"
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

/// The counters the model prices, as reals: a run's counts, or a fit's
/// scaled ones (the calibrated model below).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Priced {
    pub l1_hits: f64,
    pub l2_hits: f64,
    /// Walk references that hit the page-table line cache (all of them when
    /// the run did not split them) and that missed it.
    pub walk_refs_llc: f64,
    pub walk_refs_mem: f64,
    pub pwc_hits: f64,
}

impl Priced {
    pub fn of(c: &TranslationCounters) -> Priced {
        let mem = c.walk_refs_mem.unwrap_or(0);
        Priced {
            l1_hits: c.l1_hits as f64,
            l2_hits: c.l2_hits as f64,
            walk_refs_llc: (c.walk_refs - mem) as f64,
            walk_refs_mem: mem as f64,
            pwc_hits: c.pwc_hits as f64,
        }
    }
}

/// Translation cycles of `n` under `p`: the one formula of the model (the
/// simulator's estimate and the calibrated prediction both price through
/// it). With the line cache off every reference costs `walk_ref_cycles`;
/// for whole counts below 2^53 the sums are exact, so this is bit for bit
/// `walk_refs_cycles` of the counters.
pub fn priced_cycles(n: &Priced, p: &CostConfig) -> f64 {
    let refs = if p.pt_cache_lines == 0 {
        (n.walk_refs_llc + n.walk_refs_mem) * p.walk_ref_cycles
    } else {
        n.walk_refs_llc * p.walk_ref_cycles + n.walk_refs_mem * p.walk_ref_mem_cycles
    };
    n.l1_hits * p.l1_hit_cycles + n.l2_hits * p.l2_hit_cycles + refs + n.pwc_hits * p.pwc_hit_cycles
}

pub fn translation_cycles(c: &TranslationCounters, p: &CostConfig) -> f64 {
    priced_cycles(&Priced::of(c), p)
}

/// Cycles the page walker spends: walk references and PWC hits priced as
/// in `priced_cycles`, the L1-miss/L2-hit term left out (the direct-segments
/// paper's overhead of the walks alone, ISCA'13 §6; every reference at
/// `walk_ref_cycles`, as the line cache is off on its machines).
pub fn walker_cycles(walk_refs: f64, pwc_hits: f64, p: &CostConfig) -> f64 {
    let walks_only = CostConfig { pt_cache_lines: 0, ..p.clone() };
    priced_cycles(&Priced { walk_refs_llc: walk_refs, pwc_hits, ..Default::default() }, &walks_only)
}

/// Cycles of `accesses` accesses with translation counters `n` and no OS
/// work (a static page map): the base cost plus `priced_cycles`, as
/// `estimate` adds them. `hugescope calibrate` fits `p`'s base and walk
/// prices to measured times through this.
pub fn static_cycles(accesses: f64, n: &Priced, p: &CostConfig) -> f64 {
    accesses * p.base_cycles_per_access + priced_cycles(n, p)
}

pub fn estimate(c: &TranslationCounters, p: &CostConfig, os_cycles: f64) -> CostEstimate {
    let base_cycles = c.accesses as f64 * p.base_cycles_per_access;
    let translation_cycles = translation_cycles(c, p);
    let total_cycles = base_cycles + translation_cycles + os_cycles;
    let per_cpu_cycles = c
        .per_cpu
        .iter()
        .map(|k| {
            let mem = if p.pt_cache_lines == 0 { 0 } else { k.walk_refs_mem };
            let n = Priced {
                l1_hits: k.l1_hits as f64,
                l2_hits: k.l2_hits as f64,
                walk_refs_llc: (k.walk_refs - mem) as f64,
                walk_refs_mem: mem as f64,
                pwc_hits: k.pwc_hits as f64,
            };
            static_cycles(k.accesses as f64, &n, p)
        })
        .collect();
    CostEstimate {
        kind: "estimate",
        base_cycles,
        translation_cycles,
        os_cycles,
        memory_cycles: 0.0,
        total_cycles,
        per_cpu_cycles,
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

// ---------------------------------------------------------------------------
// The calibrated model (docs/cost-model.md, "The calibrated model")
// ---------------------------------------------------------------------------
//
//   X(P)         = l2_hits x l2_hit_ns + pwc_hits x pwc_hit_ns
//                + walk_refs_llc x walk_ref_llc_ns + walk_refs_mem x walk_ref_mem_ns
//   predicted(P) = T_allhuge (measured) + (1 - overlap) x (X(P) - X(all huge))
//
// X is `translation_cycles` above priced in nanoseconds (a clock of 1 GHz,
// L1 hits free, the page-table line cache's split on when the counters have
// it), so the simulator's estimate and the calibrated prediction are one
// formula. The program's own time is the measured all-huge run, which
// differs from any plan's only by translation; `overlap` is the share of
// translation time hidden behind other work. `python/hugescope/cost_model.py`
// fits the free parameters to measured plans (a least-squares search) and
// calls these for every prediction.

/// A parameter of the calibrated model: its name, unit, upper bound (every
/// lower bound is 0) and the value used without a calibration.
pub struct CalibratedParam {
    pub name: &'static str,
    pub unit: &'static str,
    pub upper: f64,
    pub default: f64,
}

/// The calibrated model's parameters, in order. Bounds: a fraction, and no
/// memory reference takes a microsecond. Defaults: the preset estimates of
/// docs/assumptions.md at 3 GHz (7 cycles per L2 TLB hit, 1 per PWC hit, 50
/// per walk reference) and a DRAM access of 90 ns; no overlap.
pub const CALIBRATED_PARAMS: [CalibratedParam; 5] = [
    CalibratedParam { name: "l2_hit_ns", unit: "ns per L1 TLB miss that hits the L2 TLB", upper: 1000.0, default: 7.0 / 3.0 },
    CalibratedParam { name: "pwc_hit_ns", unit: "ns per page-walk-cache hit", upper: 1000.0, default: 1.0 / 3.0 },
    CalibratedParam {
        name: "walk_ref_llc_ns",
        unit: "ns per page-walk reference that hits the page-table line cache (LLC)",
        upper: 1000.0,
        default: 50.0 / 3.0,
    },
    CalibratedParam { name: "walk_ref_mem_ns", unit: "ns per page-walk reference that misses it (DRAM)", upper: 1000.0, default: 90.0 },
    CalibratedParam { name: "overlap", unit: "fraction (0..1) of translation time hidden behind other work", upper: 1.0, default: 0.0 },
];

/// Values of the calibrated model's parameters (`CALIBRATED_PARAMS`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibrated {
    pub l2_hit_ns: f64,
    pub pwc_hit_ns: f64,
    pub walk_ref_llc_ns: f64,
    pub walk_ref_mem_ns: f64,
    pub overlap: f64,
}

impl Calibrated {
    /// The parameters in `CALIBRATED_PARAMS` order, each checked against its
    /// bounds (a message naming the parameter, its value and its unit).
    pub fn new(values: [f64; 5]) -> crate::Result<Calibrated> {
        for (p, &v) in CALIBRATED_PARAMS.iter().zip(&values) {
            if !(v.is_finite() && (0.0..=p.upper).contains(&v)) {
                return Err(crate::Error::input(format!(
                    "cost model parameter {}={v} is not between 0 and {} ({})",
                    p.name, p.upper, p.unit
                )));
            }
        }
        let [l2_hit_ns, pwc_hit_ns, walk_ref_llc_ns, walk_ref_mem_ns, overlap] = values;
        Ok(Calibrated { l2_hit_ns, pwc_hit_ns, walk_ref_llc_ns, walk_ref_mem_ns, overlap })
    }

    /// X: the translation time of counters `n` before overlap, in seconds:
    /// `priced_cycles` at 1 GHz with these prices, L1 hits free.
    pub fn translation_seconds(&self, n: &Priced) -> f64 {
        let prices = CostConfig {
            base_cycles_per_access: 0.0,
            l1_hit_cycles: 0.0,
            l2_hit_cycles: self.l2_hit_ns,
            walk_ref_cycles: self.walk_ref_llc_ns,
            pwc_hit_cycles: self.pwc_hit_ns,
            pt_cache_lines: 1,
            walk_ref_mem_cycles: self.walk_ref_mem_ns,
            cpu_ghz: 1.0,
            source: String::new(),
        };
        1e-9 * priced_cycles(n, &prices)
    }

    /// Predicted run time (s, an estimate) of a plan with counters `plan`:
    /// the workload's measured all-huge time `t_huge` plus the translation
    /// time the plan adds over all huge (`huge`), less the overlapped share.
    pub fn predict_seconds(&self, t_huge: f64, plan: &Priced, huge: &Priced) -> f64 {
        let dx = self.translation_seconds(plan) - self.translation_seconds(huge);
        t_huge + (1.0 - self.overlap) * dx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round prices for hand-computed cycles: 10 per access, 7 per L2 hit,
    /// 50 per walk reference, 1 per PWC hit, at 1 GHz.
    fn hand_prices() -> CostConfig {
        CostConfig {
            base_cycles_per_access: 10.0,
            l1_hit_cycles: 0.0,
            l2_hit_cycles: 7.0,
            walk_ref_cycles: 50.0,
            pwc_hit_cycles: 1.0,
            pt_cache_lines: 0,
            walk_ref_mem_cycles: 0.0,
            cpu_ghz: 1.0,
            source: "test".into(),
        }
    }

    #[test]
    fn per_cpu_cycles_price_each_cpu_and_add_up_to_the_run() {
        let p = hand_prices();
        let cpu = |accesses, l1_hits, l2_hits, walk_refs, pwc_hits| crate::stats::CpuCounters {
            accesses, l1_hits, l2_hits, walk_refs, walk_refs_mem: 3, pwc_hits,
        };
        let c = TranslationCounters {
            accesses: 100, l1_hits: 80, l2_hits: 10, walks: 10, walk_refs: 25, pwc_hits: 5,
            per_cpu: vec![cpu(60, 50, 6, 15, 3), cpu(40, 30, 4, 10, 2)],
            ..Default::default()
        };
        let e = estimate(&c, &p, 100.0);
        // 600 + 6 x 7 + 15 x 50 + 3 and 400 + 4 x 7 + 10 x 50 + 2; the line
        // cache is off, so the references it would have missed cost the same.
        assert_eq!(e.per_cpu_cycles, vec![1395.0, 930.0]);
        assert_eq!(e.per_cpu_cycles.iter().sum::<f64>(), e.base_cycles + e.translation_cycles);
        // With the cache on, a missed reference costs walk_ref_mem_cycles.
        let q = CostConfig { pt_cache_lines: 64, walk_ref_mem_cycles: 200.0, ..p.clone() };
        assert_eq!(estimate(&c, &q, 0.0).per_cpu_cycles, vec![1395.0 + 3.0 * 150.0, 930.0 + 3.0 * 150.0]);
        // One cpu: no per-cpu prices, and none in the result's JSON.
        let one = estimate(&TranslationCounters { per_cpu: Vec::new(), ..c }, &p, 0.0);
        assert!(one.per_cpu_cycles.is_empty());
        assert!(!serde_json::to_string(&one).unwrap().contains("per_cpu_cycles"));
    }

    #[test]
    fn hand_computed_cycles() {
        let p = hand_prices();
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

    #[test]
    fn calibrated_prediction_by_hand() {
        let p = Calibrated::new([2.0, 0.5, 20.0, 100.0, 0.25]).unwrap();
        let plan = TranslationCounters {
            l2_hits: 100_000,
            pwc_hits: 400_000,
            walk_refs: 3_000_000,
            walk_refs_llc: Some(2_000_000),
            walk_refs_mem: Some(1_000_000),
            l1_hits: 7, // free in this model
            ..Default::default()
        };
        let (plan, huge) = (Priced::of(&plan), Priced { l2_hits: 1000.0, ..Default::default() });
        // X(plan) = 1e5*2 + 4e5*0.5 + 2e6*20 + 1e6*100 ns = 140.4e6 ns; X(huge) = 2e3 ns.
        assert!((p.translation_seconds(&plan) - 0.1404).abs() < 1e-15);
        let dx = (140.4e6 - 2e3) * 1e-9;
        assert!((p.predict_seconds(1.0, &plan, &huge) - (1.0 + 0.75 * dx)).abs() < 1e-12);
        assert_eq!(p.predict_seconds(1.0, &huge, &huge), 1.0);
        // Without the split every reference is an LLC hit: 3e6 x 20 ns.
        let unsplit = Priced::of(&TranslationCounters { l2_hits: 100_000, pwc_hits: 400_000, walk_refs: 3_000_000, ..Default::default() });
        assert!((p.translation_seconds(&unsplit) - (2e5 + 2e5 + 3e6 * 20.0) * 1e-9).abs() < 1e-15);
        // A fit's scaled counts need not be whole.
        let scaled = Priced { walk_refs_mem: 0.5, ..Default::default() };
        assert!((p.translation_seconds(&scaled) - 50.0e-9).abs() < 1e-20);
        // Out of bounds, NaN: refused naming the parameter.
        let e = Calibrated::new([2.0, 0.5, 20.0, 100.0, 1.5]).unwrap_err().to_string();
        assert!(e.contains("overlap=1.5"), "{e}");
        assert!(Calibrated::new([f64::NAN, 0.5, 20.0, 100.0, 0.0]).unwrap_err().to_string().contains("l2_hit_ns"));
    }

    #[test]
    fn walker_cycles_are_references_and_pwc_hits_alone() {
        let p = CostConfig {
            base_cycles_per_access: 10.0,
            l1_hit_cycles: 0.5,
            l2_hit_cycles: 7.0,
            walk_ref_cycles: 50.0,
            pwc_hit_cycles: 1.0,
            pt_cache_lines: 64,
            walk_ref_mem_cycles: 200.0,
            cpu_ghz: 1.0,
            source: "test".into(),
        };
        // 25 references x 50 + 5 PWC hits x 1; base, L1, L2 and the line
        // cache's DRAM price play no part.
        assert_eq!(walker_cycles(25.0, 5.0, &p), 1255.0);
        assert_eq!(walker_cycles(0.0, 0.0, &p), 0.0);
    }

    #[test]
    fn priced_cycles_is_bit_for_bit_the_counter_formula() {
        // The estimate every result carries must not move by an ulp: the
        // real-valued formula against the integer one it replaced.
        let p = CostConfig {
            base_cycles_per_access: 10.0,
            l1_hit_cycles: 0.3,
            l2_hit_cycles: 7.1,
            walk_ref_cycles: 50.7,
            pwc_hit_cycles: 1.3,
            pt_cache_lines: 0,
            walk_ref_mem_cycles: 0.0,
            cpu_ghz: 3.0,
            source: "test".into(),
        };
        let q = CostConfig { pt_cache_lines: 64, walk_ref_mem_cycles: 213.9, ..p.clone() };
        for k in 0..200u64 {
            let x = k * 7_919_993 + 3;
            let c = TranslationCounters {
                l1_hits: x * 13,
                l2_hits: x * 3 + 1,
                walk_refs: x * 4 + 7,
                walk_refs_llc: Some(x * 3 + 7),
                walk_refs_mem: Some(x),
                pwc_hits: x / 3,
                ..Default::default()
            };
            for p in [&p, &q] {
                let old = c.l1_hits as f64 * p.l1_hit_cycles
                    + c.l2_hits as f64 * p.l2_hit_cycles
                    + p.walk_refs_cycles(c.walk_refs, c.walk_refs_mem.unwrap_or(0))
                    + c.pwc_hits as f64 * p.pwc_hit_cycles;
                assert_eq!(translation_cycles(&c, p).to_bits(), old.to_bits());
            }
        }
    }
}
