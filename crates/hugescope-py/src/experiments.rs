//! Bindings of the experiments (utility curves, fragmentation, sensitivity,
//! reuse distance, trace merging). As everywhere in the bindings, arguments are
//! plain values and structured data crosses as JSON text; the logic lives in
//! `hugescope-core` and `python/hugescope/experiments.py`.

use crate::{err, json, load_config};
use hugescope_core::reuse::{self, Average, ReuseOptions};
use hugescope_core::run::{PolicySpec, PolicyResult};
use hugescope_core::sweep;
use hugescope_core::trace::merge::{self, MergeOptions};
use pyo3::prelude::*;
use serde::Deserialize;

/// One configuration of a sweep: a policy string plus its own OS settings.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecIn {
    policy: String,
    #[serde(default)]
    label: Option<String>,
    /// Huge-page budget as a share of the footprint (0..=1); None: no cap.
    #[serde(default)]
    budget: Option<f64>,
    /// Fragmentation level (0..=1) and method ("pcc" or "ingens").
    #[serde(default)]
    frag: Option<f64>,
    #[serde(default)]
    frag_method: Option<String>,
}

/// Simulate many configurations of one trace, spread over `threads` threads.
///
/// `specs_json` is a JSON list of `{"policy": "pcc:size=64", "label": ...,
/// "budget": 0.04, "frag": 0.5, "frag_method": "pcc"}`; budget and
/// fragmentation are per configuration (the `PolicySpec.os` override of the
/// core), everything else is shared. The specs are dealt round robin into
/// `threads` groups (those of one share class together); each group is one
/// decoding pass of the trace with its policies simulated side by side
/// (decode once per core, simulate many; configurations of one share class
/// as one simulation until their decisions differ: `sweep`), and
/// each group simulates `base` alongside, so every result has its speedup over
/// base on the same accesses (base is deterministic, so the groups agree).
/// The GIL is released while simulating. Returns a JSON list of results in
/// the order of `specs_json`. `share=False` simulates every configuration on
/// its own (the same results, byte for byte; for measuring what sharing saves).
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
) -> PyResult<String> {
    let cfg = load_config(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides, &[])?;
    let specs_in: Vec<SpecIn> =
        serde_json::from_str(&specs_json).map_err(|e| err(format!("experiment configurations: {e}")))?;
    if specs_in.is_empty() {
        return Err(err("no configuration to simulate"));
    }
    let common = cfg.os.os_config();
    let mut specs = Vec::with_capacity(specs_in.len());
    for s in &specs_in {
        let mut spec = PolicySpec::parse(&s.policy).map_err(err)?;
        if let Some(l) = &s.label {
            spec.label = l.clone();
        }
        // A configuration's own budget and fragmentation go through the same
        // OS knob declarations as `[os]` (parsing, ranges, messages).
        if s.budget.is_some() || s.frag.is_some() {
            let mut os = cfg.os.clone();
            let origin = format!("configuration '{}'", s.policy);
            os.set("budget", &serde_json::json!(s.budget), &origin).map_err(err)?;
            os.set("frag", &serde_json::json!(s.frag), &origin).map_err(err)?;
            if let Some(m) = &s.frag_method {
                os.set("frag_method", &serde_json::json!(m), &origin).map_err(err)?;
            }
            spec.os = Some(os.os_config());
        }
        specs.push(spec);
    }
    // Configurations that may share a pass (`sweep::share_class`: pcc
    // sizes and other decision-only knobs) go to one thread together; the
    // others are dealt one by one. A unit is a class or a lone configuration.
    let mut units: Vec<Option<String>> = Vec::new();
    let unit_of: Vec<usize> = specs
        .iter()
        .map(|s| match sweep::share_class(s, &common) {
            Some(c) => match units.iter().position(|u| u.as_ref() == Some(&c)) {
                Some(u) => u,
                None => {
                    units.push(Some(c));
                    units.len() - 1
                }
            },
            None => {
                units.push(None);
                units.len() - 1
            }
        })
        .collect();
    let threads = threads.clamp(1, units.len());
    let mut opts = cfg.run_options(true);
    // One simulation per thread already fills the cpus given.
    opts.inline_decode = threads > 1;
    let results: Vec<PolicyResult> = crate::interrupt::cancellable(py, || {
        let all = || -> hugescope_core::Result<Vec<PolicyResult>> {
        let groups: Vec<Vec<(usize, PolicySpec)>> = (0..threads)
            .map(|g| specs.iter().cloned().enumerate().filter(|(i, _)| unit_of[*i] % threads == g).collect())
            .collect();
        let outputs: Vec<hugescope_core::Result<Vec<PolicyResult>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|g| {
                    let group: Vec<PolicySpec> = g.iter().map(|(_, s)| s.clone()).collect();
                    let (trace, cfg, common, opts) = (&trace, &cfg.machine, &common, &opts);
                    scope.spawn(move || {
                        if share {
                            sweep::simulate_shared(trace, cfg, common, &group, opts)
                        } else {
                            hugescope_core::run::simulate_policies(trace, cfg, common, &group, opts)
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(hugescope_core::Error::input("a simulation thread panicked"))))
                .collect()
        });
        let mut slots: Vec<Option<PolicyResult>> = (0..specs.len()).map(|_| None).collect();
        for (g, out) in groups.iter().zip(outputs) {
            for ((i, _), r) in g.iter().zip(out?) {
                slots[*i] = Some(r);
            }
        }
        Ok(slots.into_iter().map(|r| r.expect("every configuration has a result")).collect())
        };
        all().map_err(err)
    })?;
    json(&results)
}

/// Page reuse distance at 4KB and 2MB per page, classified as in the PCC
/// paper's Fig. 2 (see `hugescope_core::reuse`). `average` is "ema" (with
/// `alpha`) or "mean". Returns the JSON `ReuseReport`.
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
) -> PyResult<String> {
    let average = match average.as_str() {
        "ema" => Average::Ema { alpha },
        "mean" => Average::Mean,
        other => return Err(err(format!("unknown reuse-distance average '{other}' (ema, mean)"))),
    };
    let opts = ReuseOptions { threshold, average, small_shift, huge_shift, max_points, seed };
    let report = crate::interrupt::cancellable(py, || reuse::analyze_file(&trace, &opts).map_err(err))?;
    json(&report)
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
