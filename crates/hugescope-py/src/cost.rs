//! Bindings of the calibrated cost model (`hugescope_core::cost::Calibrated`):
//! `python/hugescope/cost_model.py` fits its parameters and calls these for
//! every prediction, so the formula lives once, in the core.

use crate::err;
use hugescope_core::config::CostConfig;
use hugescope_core::cost::{static_cycles, walker_cycles, Calibrated, Priced, CALIBRATED_PARAMS};
use pyo3::prelude::*;

/// The counters the model reads, as the Python side holds them (reals: a
/// fit may scale them): L2 TLB hits, PWC hits, walk references that hit the
/// page-table line cache and that missed it.
type Counts = (f64, f64, f64, f64);

fn priced((l2_hits, pwc_hits, walk_refs_llc, walk_refs_mem): Counts) -> PyResult<Priced> {
    for (v, what) in [(l2_hits, "l2_hits"), (pwc_hits, "pwc_hits"), (walk_refs_llc, "walk_refs_llc"), (walk_refs_mem, "walk_refs_mem")] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(err(format!("cost model counter {what}={v} is not a finite, non-negative count")));
        }
    }
    Ok(Priced { l1_hits: 0.0, l2_hits, walk_refs_llc, walk_refs_mem, pwc_hits })
}

/// The parameters: (name, unit, upper bound, default) each, in order.
#[pyfunction]
fn cost_params() -> Vec<(&'static str, &'static str, f64, f64)> {
    CALIBRATED_PARAMS.iter().map(|p| (p.name, p.unit, p.upper, p.default)).collect()
}

/// X: translation seconds of `counts` under `params` (in `cost_params` order).
#[pyfunction]
fn cost_translation_seconds(counts: Counts, params: [f64; 5]) -> PyResult<f64> {
    Ok(Calibrated::new(params).map_err(err)?.translation_seconds(&priced(counts)?))
}

/// Predicted seconds of a plan from its counts, the all-huge counts and the
/// measured all-huge time (an estimate).
#[pyfunction]
fn cost_predict_seconds(t_huge: f64, plan: Counts, huge: Counts, params: [f64; 5]) -> PyResult<f64> {
    Ok(Calibrated::new(params).map_err(err)?.predict_seconds(t_huge, &priced(plan)?, &priced(huge)?))
}

/// Cycles of a static-map run (`hugescope_core::cost::static_cycles`) from
/// its counters `(accesses, l1_hits, l2_hits, walk_refs, pwc_hits)` and the
/// prices `(base_cycles_per_access, l1_hit_cycles, l2_hit_cycles,
/// walk_ref_cycles, pwc_hit_cycles)` of a machine's `[cost]` (the page-table
/// line cache off: every reference at `walk_ref_cycles`).
#[pyfunction]
fn cost_static_cycles(counts: (f64, f64, f64, f64, f64), prices: (f64, f64, f64, f64, f64)) -> f64 {
    let (accesses, l1_hits, l2_hits, walk_refs, pwc_hits) = counts;
    let (base, l1, l2, walk_ref, pwc) = prices;
    let p = CostConfig {
        base_cycles_per_access: base,
        l1_hit_cycles: l1,
        l2_hit_cycles: l2,
        walk_ref_cycles: walk_ref,
        pwc_hit_cycles: pwc,
        pt_cache_lines: 0,
        walk_ref_mem_cycles: 0.0,
        cpu_ghz: 1.0,
        source: String::new(),
    };
    let n = Priced { l1_hits, l2_hits, walk_refs_llc: walk_refs, walk_refs_mem: 0.0, pwc_hits };
    static_cycles(accesses, &n, &p)
}

/// Cycles the page walker spends (`hugescope_core::cost::walker_cycles`)
/// for `walk_refs` references and `pwc_hits` PWC hits at a machine's
/// `walk_ref_cycles` and `pwc_hit_cycles`.
#[pyfunction]
fn cost_walker_cycles(walk_refs: f64, pwc_hits: f64, walk_ref_cycles: f64, pwc_hit_cycles: f64) -> f64 {
    let p = CostConfig {
        base_cycles_per_access: 0.0,
        l1_hit_cycles: 0.0,
        l2_hit_cycles: 0.0,
        walk_ref_cycles,
        pwc_hit_cycles,
        pt_cache_lines: 0,
        walk_ref_mem_cycles: 0.0,
        cpu_ghz: 1.0,
        source: String::new(),
    };
    walker_cycles(walk_refs, pwc_hits, &p)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cost_walker_cycles, m)?)?;
    m.add_function(wrap_pyfunction!(cost_static_cycles, m)?)?;
    m.add_function(wrap_pyfunction!(cost_params, m)?)?;
    m.add_function(wrap_pyfunction!(cost_translation_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(cost_predict_seconds, m)?)?;
    Ok(())
}
