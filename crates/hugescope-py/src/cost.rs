//! Bindings of the calibrated cost model (`hugescope_core::cost::Calibrated`):
//! `python/hugescope/cost_model.py` fits its parameters and calls these for
//! every prediction, so the formula lives once, in the core.

use crate::err;
use hugescope_core::cost::{Calibrated, Priced, CALIBRATED_PARAMS};
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cost_params, m)?)?;
    m.add_function(wrap_pyfunction!(cost_translation_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(cost_predict_seconds, m)?)?;
    Ok(())
}
