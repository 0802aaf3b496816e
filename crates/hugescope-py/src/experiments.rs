//! Bindings of the experiments (utility curves, fragmentation, sensitivity,
//! reuse distance, trace merging). As everywhere in the bindings, arguments are
//! plain values; simulation results cross as `Record`s, reports as JSON text;
//! the logic lives in
//! `hugescope-core` and `python/hugescope/experiments.py`.

use crate::record::{records, Record};
use crate::{err, json, load_config};
use pyo3::types::PyList;
use hugescope_core::reuse::{self, Average, ReuseOptions};
use hugescope_core::sweep_batch::{self, SweepPoint};
use hugescope_core::trace::merge::{self, MergeOptions};
use pyo3::prelude::*;

/// Simulate many configurations of one trace, spread over `threads` threads
/// (`hugescope_core::sweep_batch`: grouping by share class, threads, `base`
/// alongside; the bindings only translate).
///
/// `specs_json` is a JSON list of `{"policy": "pcc:size=64", "label": ...,
/// "budget": 0.04, "frag": 0.5, "frag_method": "pcc"}` (`SweepPoint`);
/// budget and fragmentation are per configuration, everything else is
/// shared. The GIL is released while simulating. Returns the results
/// (`Record`s) in the order of `specs_json`. `share=False` simulates every configuration on its
/// own (the same results, byte for byte; for measuring what sharing saves).
#[pyfunction]
#[pyo3(signature = (trace, specs_json, preset=None, config=None, overrides=Vec::new(), threads=2, config_text=None, share=true))]
#[allow(clippy::too_many_arguments)]
fn run_specs(
    py: Python<'_>,
    trace: String,
    specs_json: String,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    threads: usize,
    config_text: Option<String>,
    share: bool,
) -> PyResult<Py<PyList>> {
    let cfg = load_config(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides, &[])?;
    let points: Vec<SweepPoint> =
        serde_json::from_str(&specs_json).map_err(|e| err(format!("experiment configurations: {e}")))?;
    let results = crate::interrupt::cancellable(py, || sweep_batch::run_points(&trace, &cfg, &points, threads, share).map_err(err))?;
    records(py, &results)
}

/// Page reuse distance at 4KB and 2MB per page, classified as in the PCC
/// paper's Fig. 2 (see `hugescope_core::reuse`). `average` is "ema" (with
/// `alpha`) or "mean". Returns the `ReuseReport` as a `Record`.
#[pyfunction]
#[pyo3(signature = (trace, threshold=1024.0, average="ema".to_string(), alpha=0.9, max_points=20000, seed=1,
    small_shift=12, huge_shift=21))]
#[allow(clippy::too_many_arguments)]
fn reuse_distance(
    py: Python<'_>,
    trace: String,
    threshold: f64,
    average: String,
    alpha: f64,
    max_points: usize,
    seed: u64,
    small_shift: u32,
    huge_shift: u32,
) -> PyResult<Record> {
    let average = match average.as_str() {
        "ema" => Average::Ema { alpha },
        "mean" => Average::Mean,
        other => return Err(err(format!("unknown reuse-distance average '{other}' (ema, mean)"))),
    };
    let opts = ReuseOptions { threshold, average, small_shift, huge_shift, max_points, seed };
    let report = crate::interrupt::cancellable(py, || reuse::analyze_file(&trace, &opts).map_err(err))?;
    Record::of(&report)
}

/// Interleave traces into one multi-process trace (`hugescope_core::trace::merge`).
#[pyfunction]
#[pyo3(signature = (inputs, out, slice=65536, separate_cpus=true))]
fn merge_traces(py: Python<'_>, inputs: Vec<String>, out: String, slice: u64, separate_cpus: bool) -> PyResult<String> {
    let opts = MergeOptions { slice, separate_cpus };
    let refs: Vec<&str> = inputs.iter().map(|s| s.as_str()).collect();
    let rep = crate::interrupt::cancellable(py, || merge::merge(&refs, &out, &opts).map_err(err))?;
    json(&rep)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_specs, m)?)?;
    m.add_function(wrap_pyfunction!(reuse_distance, m)?)?;
    m.add_function(wrap_pyfunction!(merge_traces, m)?)?;
    Ok(())
}
