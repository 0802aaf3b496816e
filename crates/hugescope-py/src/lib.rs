//! PyO3 bindings: the Python module `hugescope._core`.
//!
//! Deliberately thin. Arguments are plain values; structured results cross the
//! boundary as JSON text that `python/hugescope` turns into result objects and
//! DataFrames. All logic lives in the Rust crates; nothing is computed here.

use hugescope_core::config::{MachineConfig, PRESETS};
use hugescope_core::os::costs::OsCosts;
use hugescope_core::os::kernel::{Fragmentation, OsConfig};
use hugescope_core::units::parse_size;
use hugescope_core::trace::hst::{self, HstWriter};
use hugescope_core::trace::{Access, AccessSink};
use pyo3::prelude::*;
use serde::Serialize;

mod experiments;
mod interrupt;
mod linux;
mod tracing;

use interrupt::cancellable;

pyo3::create_exception!(_core, HugescopeError, pyo3::exceptions::PyException);

pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    HugescopeError::new_err(e.to_string())
}

pub(crate) fn json<T: Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(err)
}

fn params(text: &str) -> PyResult<hugescope_workloads::Params> {
    match serde_json::from_str::<serde_json::Value>(text).map_err(err)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(err("workload parameters must be a JSON object")),
    }
}

/// Fragmentation from a level (0..=1) and a method name ("pcc", "ingens").
pub(crate) fn fragmentation(frag: Option<f64>, method: &str) -> PyResult<Option<Fragmentation>> {
    match (frag, method) {
        (None, _) => Ok(None),
        (Some(x), _) if !(0.0..=1.0).contains(&x) => Err(err(format!("fragmentation {x}: expected a share between 0 and 1"))),
        (Some(x), "pcc") => Ok(Some(Fragmentation::Pcc { share: x })),
        (Some(x), "ingens") => Ok(Some(Fragmentation::Ingens { fmfi: x })),
        (Some(_), m) => Err(err(format!("unknown fragmentation method '{m}' (pcc, ingens)"))),
    }
}

/// The OS configuration shared by the simulation entry points. The time base
/// is left to `RunOptions` (duration, rate), which the core applies to every
/// policy of a run.
pub(crate) fn os_config(
    memory: Option<&str>,
    footprint: Option<&str>,
    fragmentation: Option<Fragmentation>,
    budget: Option<f64>,
    seed: u64,
    os_costs: &[String],
    sample_every: Option<u64>,
) -> PyResult<OsConfig> {
    let size = |s: Option<&str>| s.map(parse_size).transpose().map_err(err);
    Ok(OsConfig {
        memory_bytes: size(memory)?,
        fragmentation,
        budget,
        footprint_bytes: size(footprint)?,
        time: None,
        costs: OsCosts::default().with_overrides(os_costs).map_err(err)?,
        seed,
        sample_every: sample_every.unwrap_or(1 << 20),
    })
}

/// Build a machine configuration from a preset, an optional TOML file and overrides.
pub(crate) fn machine(preset: Option<&str>, config: Option<&str>, overrides: &[String]) -> PyResult<MachineConfig> {
    let text = match config {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| err(format!("{p}: {e}")))?),
        None => None,
    };
    MachineConfig::load(preset, text.as_deref(), overrides).map_err(|e| match config {
        Some(p) => err(format!("{p}: {e}")),
        None => err(e),
    })
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pyfunction]
fn presets() -> Vec<String> {
    PRESETS.iter().map(|s| s.to_string()).collect()
}

/// The resolved machine configuration as JSON.
#[pyfunction]
#[pyo3(signature = (preset=None, config=None, overrides=Vec::new()))]
fn machine_config(preset: Option<String>, config: Option<String>, overrides: Vec<String>) -> PyResult<String> {
    json(&machine(preset.as_deref(), config.as_deref(), &overrides)?)
}

/// Simulate a trace under a static page-size map ("4k", "2m", "1g" or a plan file).
#[pyfunction]
#[pyo3(signature = (trace, preset=None, config=None, overrides=Vec::new(), pages="4k".to_string()))]
fn simulate_static(py: Python<'_>, trace: String, preset: Option<String>, config: Option<String>, overrides: Vec<String>, pages: String) -> PyResult<String> {
    let cfg = machine(preset.as_deref(), config.as_deref(), &overrides)?;
    json(&cancellable(py, || hugescope_core::sim::simulate_static(&trace, cfg, &pages).map_err(err))?)
}

/// Header and counts of a trace; `verify` decodes every chunk.
#[pyfunction]
#[pyo3(signature = (path, verify=false))]
fn trace_info(py: Python<'_>, path: String, verify: bool) -> PyResult<String> {
    let (header, summary) = cancellable(py, || hst::summarize(&path, verify).map_err(err))?;
    json(&serde_json::json!({ "path": path, "header": header, "summary": summary }))
}

/// Simulate policies over a trace (one decoding pass; `base` alongside for the
/// speedup). Returns a JSON list of results, one per policy.
#[pyfunction]
#[pyo3(signature = (trace, policies, preset=None, config=None, overrides=Vec::new(), memory=None, frag=None,
    frag_method="pcc".to_string(), budget=None, footprint=None, duration=None, rate=None, seed=1,
    os_costs=Vec::new(), sample_every=None, with_base=true))]
#[allow(clippy::too_many_arguments)]
fn simulate_policies(
    py: Python<'_>,
    trace: String,
    policies: Vec<String>,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    memory: Option<String>,
    frag: Option<f64>,
    frag_method: String,
    budget: Option<f64>,
    footprint: Option<String>,
    duration: Option<f64>,
    rate: Option<f64>,
    seed: u64,
    os_costs: Vec<String>,
    sample_every: Option<u64>,
    with_base: bool,
) -> PyResult<String> {
    let cfg = machine(preset.as_deref(), config.as_deref(), &overrides)?;
    let os = os_config(memory.as_deref(), footprint.as_deref(), fragmentation(frag, &frag_method)?, budget, seed, &os_costs, sample_every)?;
    let specs = policies
        .iter()
        .map(|p| hugescope_core::run::PolicySpec::parse(p))
        .collect::<hugescope_core::Result<Vec<_>>>()
        .map_err(err)?;
    let opts = hugescope_core::run::RunOptions { duration_s: duration, accesses_per_second: rate, with_base };
    json(&cancellable(py, || hugescope_core::run::simulate_policies(&trace, &cfg, &os, &specs, &opts).map_err(err))?)
}

/// Throughput of decoding alone and of decoding plus simulating a trace
/// (a measurement: best wall time of `repeats` passes).
#[pyfunction]
#[pyo3(signature = (trace, preset=None, pages="4k".to_string(), repeats=3))]
fn bench_file(py: Python<'_>, trace: String, preset: Option<String>, pages: String, repeats: u32) -> PyResult<String> {
    let cfg = machine(preset.as_deref(), None, &[])?;
    json(&cancellable(py, || hugescope_core::bench::file_throughput(&trace, cfg, &pages, repeats).map_err(err))?)
}

/// Names and descriptions of the registered policies.
#[pyfunction]
fn policies() -> Vec<(String, String)> {
    hugescope_core::policy::REGISTRY.iter().map(|(n, d, _)| (n.to_string(), d.to_string())).collect()
}

#[pyfunction]
fn workloads() -> PyResult<String> {
    let list: Vec<_> = hugescope_workloads::list()
        .into_iter()
        .map(|w| {
            serde_json::json!({
                "name": w.name, "about": w.about,
                "params": w.params.iter().map(|p| serde_json::json!({
                    "name": p.name, "kind": p.kind, "default": p.default, "help": p.help
                })).collect::<Vec<_>>()
            })
        })
        .collect();
    json(&list)
}

/// The layout (regions, footprint, resolved parameters) a workload run would have.
#[pyfunction]
fn workload_layout(name: String, params_json: String) -> PyResult<String> {
    json(&hugescope_workloads::plan(&name, &params(&params_json)?).map_err(err)?)
}

/// Writes accesses to a trace file, reports progress to Python, honours a cap.
/// Runs on the worker thread of `cancellable`: the callback takes the GIL.
struct TraceSink {
    writer: HstWriter,
    limit: u64,
    seen: u64,
    callback: Option<Py<PyAny>>,
    failure: Option<PyErr>,
}

const PROGRESS_EVERY: u64 = 1 << 20;

impl AccessSink for TraceSink {
    #[inline]
    fn access(&mut self, a: Access) {
        if self.seen < self.limit && self.failure.is_none() {
            self.writer.access(a);
        }
        self.seen += 1;
        if self.seen % PROGRESS_EVERY == 0 {
            if let Some(cb) = &self.callback {
                if self.failure.is_none() {
                    let n = self.seen.min(self.limit);
                    if let Err(e) = Python::attach(|py| cb.call1(py, (n,)).map(drop)) {
                        // The callback failed: stop the generator (it polls the
                        // cancellation request); the temporary file is removed
                        // when the writer is dropped.
                        self.failure = Some(e);
                        hugescope_core::cancel::request();
                    }
                }
            }
        }
    }
    fn progress(&mut self, label: &str) {
        if self.seen <= self.limit {
            self.writer.progress(label);
        }
    }
}

/// Generate a workload's trace into `out`. Returns JSON {summary, result, header}.
#[pyfunction]
#[pyo3(signature = (name, params_json, out, limit=None, progress=None))]
fn trace_workload(py: Python<'_>, name: String, params_json: String, out: String, limit: Option<u64>, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let p = params(&params_json)?;
    let header = hugescope_workloads::header(&name, &p).map_err(err)?;
    let writer = HstWriter::create(&out, &header).map_err(err)?;
    let mut sink = TraceSink { writer, limit: limit.unwrap_or(u64::MAX), seen: 0, callback: progress, failure: None };
    // The sink (and its temporary file) lives in the worker: on an error or a
    // cancellation it is dropped there, which deletes the temporary file.
    let (output, summary) = cancellable(py, move || {
        let output = hugescope_workloads::trace(&name, &p, &mut sink);
        if let Some(e) = sink.failure.take() {
            hugescope_core::cancel::clear();
            return Err(e);
        }
        let output = output.map_err(err)?;
        Ok((output, sink.writer.finish().map_err(err)?))
    })?;
    json(&serde_json::json!({ "path": out, "header": header, "summary": summary, "result": output }))
}

/// Check an output target before writing it (`hugescope_core::output::check`):
/// `kind` names what will be written ("json", "csv", "html", "png", "svg",
/// "pdf", "hst"); without it the kind is sniffed from `head`, the first bytes
/// of the content. Returns the path to rename the finished file onto (the
/// link's target when `follow_symlinks`); raises HugescopeError otherwise.
#[pyfunction]
#[pyo3(signature = (path, kind=None, head=None, inputs=Vec::new(), follow_symlinks=false))]
fn check_output(path: std::path::PathBuf, kind: Option<String>, head: Option<Vec<u8>>, inputs: Vec<std::path::PathBuf>, follow_symlinks: bool) -> PyResult<std::path::PathBuf> {
    use hugescope_core::output;
    let kind = match (kind, head) {
        (Some(k), _) => Some(output::Kind::parse(&k).map_err(err)?),
        (None, Some(h)) => output::sniff(&h),
        (None, None) => None,
    };
    let inputs: Vec<&std::path::Path> = inputs.iter().map(|p| p.as_path()).collect();
    output::check(&path, kind, &inputs, follow_symlinks).map_err(err)
}

/// Run a workload natively; `progress` is called with each progress label.
#[pyfunction]
#[pyo3(signature = (name, params_json, thp=false, progress=None))]
fn native_workload<'py>(name: String, params_json: String, thp: bool, progress: Option<Bound<'py, PyAny>>) -> PyResult<String> {
    let p = params(&params_json)?;
    let mut failure: Option<PyErr> = None;
    let mut hook = |label: &str| {
        if let (Some(cb), None) = (&progress, &failure) {
            if let Err(e) = cb.call1((label,)) {
                failure = Some(e);
            }
        }
    };
    let opts = hugescope_workloads::NativeOptions { thp };
    let report = hugescope_workloads::native(&name, &p, &opts, &mut hook).map_err(err)?;
    if let Some(e) = failure {
        return Err(e);
    }
    json(&report)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HugescopeError", m.py().get_type::<HugescopeError>())?;
    // Long calls poll Python signals and stop when a handler raises (see
    // `interrupt`); other parts of hugescope key on this.
    m.add("CANCELLABLE", true)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(machine_config, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_static, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_policies, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(bench_file, m)?)?;
    m.add_function(wrap_pyfunction!(workload_layout, m)?)?;
    m.add_function(wrap_pyfunction!(trace_workload, m)?)?;
    m.add_function(wrap_pyfunction!(native_workload, m)?)?;
    m.add_function(wrap_pyfunction!(check_output, m)?)?;
    experiments::register(m)?;
    linux::register(m)?;
    tracing::register(m)?;
    Ok(())
}
