//! Bindings of the calibrated cost model (`hugescope_core::cost::Calibrated`):
//! `python/hugescope/cost_model.py` fits its parameters and calls these for
//! every prediction, so the formula lives once, in the core.

use crate::err;
use hugescope_core::cost::{Calibrated, CALIBRATED_PARAMS};
use hugescope_core::stats::TranslationCounters;
use pyo3::prelude::*;

/// The counters the model reads, as the Python side holds them (reals of
/// whole counts): L2 TLB hits, PWC hits, walk references that hit the
/// page-table line cache and that missed it, and whether the run split them.
type Counts = (f64, f64, f64, f64, bool);

fn count(v: f64, what: &str) -> PyResult<u64> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9.007_199_254_740_992e15 {
        Ok(v as u64)
    } else {
        Err(err(format!("cost model counter {what}={v} is not a whole, non-negative count")))
    }
}

fn counters((l2, pwc, llc, mem, classified): Counts) -> PyResult<TranslationCounters> {
    let (llc, mem) = (count(llc, "walk_refs_llc")?, count(mem, "walk_refs_mem")?);
    Ok(TranslationCounters {
        l2_hits: count(l2, "l2_hits")?,
        pwc_hits: count(pwc, "pwc_hits")?,
        walk_refs: llc + mem,
        walk_refs_llc: classified.then_some(llc),
        walk_refs_mem: classified.then_some(mem),
        ..Default::default()
    })
}

/// The parameters: (name, unit, upper bound, default) each, in order.
#[pyfunction]
fn cost_params() -> Vec<(&'static str, &'static str, f64, f64)> {
    CALIBRATED_PARAMS.iter().map(|p| (p.name, p.unit, p.upper, p.default)).collect()
}

/// X: translation seconds of `counts` under `params` (in `cost_params` order).
#[pyfunction]
fn cost_translation_seconds(counts: Counts, params: [f64; 5]) -> PyResult<f64> {
    Ok(Calibrated::new(params).map_err(err)?.translation_seconds(&counters(counts)?))
}

/// Predicted seconds of a plan from its counts, the all-huge counts and the
/// measured all-huge time (an estimate).
#[pyfunction]
fn cost_predict_seconds(t_huge: f64, plan: Counts, huge: Counts, params: [f64; 5]) -> PyResult<f64> {
    Ok(Calibrated::new(params).map_err(err)?.predict_seconds(t_huge, &counters(plan)?, &counters(huge)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cost_params, m)?)?;
    m.add_function(wrap_pyfunction!(cost_translation_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(cost_predict_seconds, m)?)?;
    Ok(())
}
