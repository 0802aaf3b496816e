//! PyO3 bindings: the Python module `hugescope._core`.
//!
//! Deliberately thin. Arguments are plain values. Simulation results cross
//! the boundary as typed records (`record.rs`: read by attribute, written to
//! files from the same tree); the other structured answers still cross as
//! JSON text. All logic lives in the Rust crates; nothing is computed here.

use hugescope_core::config::{MachineConfig, PRESETS};
use hugescope_core::configuration::{Config, Source};
use hugescope_core::os::config::os_knobs;
use hugescope_core::trace::hst;
use hugescope_core::input;
use pyo3::prelude::*;
use pyo3::types::PyList;
use record::{records, Record};
use serde::Serialize;

mod cost;
mod experiments;
mod interrupt;
mod linux;
mod pyjson;
mod record;
mod reproduce;
mod trace_reader;
mod tracing;

use interrupt::{cancellable, cancellable_progress};

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

/// Resolve a configuration (`hugescope_core::configuration::Config::load`): a
/// preset, a TOML or JSON file read from `path`, `KEY=VALUE` overrides
/// (`os.KEY` for the OS) and `--policy` texts. All parsing and checking is
/// the core's; this only reads the file.
/// `config_text` is the JSON of a Python `Config` object, given instead of
/// a path.
pub(crate) fn load_config(preset: Option<&str>, path: Option<&str>, config_text: Option<&str>, overrides: &[String], policies: &[String]) -> PyResult<Config> {
    let (name, text) = match (path, config_text) {
        (Some(_), Some(_)) => return Err(err("a configuration file and a Config object are both given; give one")),
        (Some(p), None) => (p, Some(input::read_text(std::path::Path::new(p), "configuration file", input::MAX_CONFIG_BYTES).map_err(err)?)),
        (None, t) => ("Config object", t.map(str::to_string)),
    };
    let file = text.as_deref().map(|text| Source { name, text });
    Config::load(preset, file, overrides, policies).map_err(err)
}

/// The machine of a configuration (the file may hold `[os]` and
/// `[[policy]]` too; they are checked and left unused here).
pub(crate) fn machine(preset: Option<&str>, config: Option<&str>, config_text: Option<&str>, overrides: &[String]) -> PyResult<MachineConfig> {
    Ok(load_config(preset, config, config_text, overrides, &[])?.machine)
}

/// The text of an input file the Python side reads (results, checkpoints,
/// measurements), opened and bounded as every input is (`hugescope_core::input`):
/// a FIFO, socket or device is refused before reading, and `limit` names the
/// size limit ("config", "plan", "result", "text").
#[pyfunction]
fn read_input(py: Python<'_>, path: std::path::PathBuf, what: String, limit: &str) -> PyResult<String> {
    let cap = match limit {
        "config" => input::MAX_CONFIG_BYTES,
        "plan" => input::MAX_PLAN_BYTES,
        "result" => input::MAX_RESULT_BYTES,
        "text" => input::MAX_TEXT_BYTES,
        other => return Err(err(format!("read_input: unknown limit '{other}'"))),
    };
    py.detach(|| input::read_text(&path, &what, cap)).map_err(err)
}

/// Write a result file (bytes) to `path`, already accepted by
/// `check_output`, through the core's staged writer (unnamed until renamed
/// onto `path`; errors, a full disk included, name `path`).
#[pyfunction]
fn write_staged(py: Python<'_>, path: std::path::PathBuf, data: &[u8]) -> PyResult<()> {
    let data = data.to_vec();
    py.detach(|| hugescope_core::output::write_staged(&path, &data)).map_err(|e| {
        // An I/O failure is an OSError in Python (the CLI's one-line errors
        // and callers' `except OSError` both expect it), naming the file.
        pyo3::exceptions::PyOSError::new_err(e.to_string())
    })
}

/// A value as an error message shows it: control characters escaped, cut to
/// `max` characters (`hugescope_core::error::shown`).
#[pyfunction]
#[pyo3(signature = (value, max = hugescope_core::error::SHOWN_CHARS))]
fn shown(value: &str, max: usize) -> String {
    hugescope_core::error::shown(value, max)
}

/// A byte size or a count as the core reads it everywhere
/// (`hugescope_core::units`): the one grammar the Python layer uses too.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    hugescope_core::units::parse_size(text).map_err(err)
}

#[pyfunction]
fn parse_count(text: &str) -> PyResult<u64> {
    hugescope_core::units::parse_count(text).map_err(err)
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
#[pyo3(signature = (preset=None, config=None, overrides=Vec::new(), config_text=None))]
fn machine_config(preset: Option<String>, config: Option<String>, overrides: Vec<String>, config_text: Option<String>) -> PyResult<String> {
    json(&machine(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides)?)
}

/// Simulate a trace under a static page-size map ("4k", "2m", "1g" or a plan file).
/// `progress(done, total)`: accesses simulated so far (`cancellable_progress`).
#[pyfunction]
#[pyo3(signature = (trace, preset=None, config=None, overrides=Vec::new(), pages="4k".to_string(), config_text=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_static(
    py: Python<'_>,
    trace: String,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    pages: String,
    config_text: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Record> {
    let cfg = machine(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides)?;
    Record::of(&cancellable_progress(py, progress, |hook| {
        hugescope_core::sim::simulate_static_with_progress(&trace, cfg, &pages, hook).map_err(err)
    })?)
}

/// A static run's accesses, walks and walk cycles by trace region
/// (`hugescope_core::region_profile`), with the run's own result: the
/// `RegionProfile` as a `Record`.
#[pyfunction]
#[pyo3(signature = (trace, preset=None, config=None, overrides=Vec::new(), pages="4k".to_string(), config_text=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn profile_regions(
    py: Python<'_>,
    trace: String,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    pages: String,
    config_text: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Record> {
    let cfg = machine(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides)?;
    Record::of(&cancellable_progress(py, progress, |hook| {
        hugescope_core::region_profile::profile_regions_with_progress(&trace, cfg, &pages, hook).map_err(err)
    })?)
}

/// Every size in `entries` of one L2 TLB structure (`structure`, or the
/// machine's only one) over a static page map, in one pass
/// (`hugescope_core::tlb_sizes`). Returns the `TlbSizesReport` as a `Record`.
#[pyfunction]
#[pyo3(signature = (trace, entries, preset=None, config=None, overrides=Vec::new(), pages="4k".to_string(), structure=None, config_text=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_tlb_sizes(
    py: Python<'_>,
    trace: String,
    entries: Vec<usize>,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    pages: String,
    structure: Option<String>,
    config_text: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Record> {
    let cfg = machine(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides)?;
    Record::of(&cancellable_progress(py, progress, |hook| {
        hugescope_core::tlb_sizes::simulate_tlb_sizes(&trace, cfg, &pages, structure.as_deref(), &entries, hook).map_err(err)
    })?)
}

/// The results cache's state (`hugescope_core::result_cache::info`) as JSON.
#[pyfunction]
fn cache_info() -> PyResult<String> {
    json(&hugescope_core::result_cache::info().map_err(err)?)
}

/// Remove every entry of the results cache; the number removed.
#[pyfunction]
fn cache_clear() -> PyResult<u64> {
    hugescope_core::result_cache::clear().map_err(err)
}

/// Cached reference runs read by this process so far.
#[pyfunction]
fn cache_hits() -> u64 {
    hugescope_core::result_cache::hits()
}

/// Cached reference runs read by this process so far, by kind ("base",
/// "ideal", "static all 4KB", ...), in order of first read.
#[pyfunction]
fn cache_hits_by_kind() -> Vec<(String, u64)> {
    hugescope_core::result_cache::hits_by_kind()
}

/// Why the results cache was not used in this process, if it was not.
#[pyfunction]
fn cache_status() -> Option<String> {
    hugescope_core::result_cache::status()
}

/// Header and counts of a trace; `verify` decodes every chunk.
#[pyfunction]
#[pyo3(signature = (path, verify=false))]
fn trace_info(py: Python<'_>, path: String, verify: bool) -> PyResult<String> {
    let (header, summary) = cancellable(py, || hst::summarize(&path, verify).map_err(err))?;
    json(&serde_json::json!({ "path": path, "header": header, "summary": summary }))
}

/// The resolved configuration (machine, os, policy) as JSON, or as TOML
/// with `toml=true`.
#[pyfunction]
#[pyo3(signature = (preset=None, config=None, overrides=Vec::new(), policies=Vec::new(), toml=false, config_text=None))]
fn resolve_config(preset: Option<String>, config: Option<String>, overrides: Vec<String>, policies: Vec<String>, toml: bool, config_text: Option<String>) -> PyResult<String> {
    let cfg = load_config(preset.as_deref(), config.as_deref(), config_text.as_deref(), &overrides, &policies)?;
    if toml {
        cfg.to_toml().map_err(err)
    } else {
        json(&cfg.to_json())
    }
}

/// The declarations of the OS knobs (name, type, unit, default, range, help)
/// as a JSON list: what `hugescope config --keys` lists and `Config.os` holds.
#[pyfunction]
fn os_knob_list() -> PyResult<String> {
    json(&os_knobs().iter().map(|k| k.describe()).collect::<Vec<_>>())
}

/// Simulate policies over a trace (one decoding pass; `base` alongside for the
/// speedup). The OS settings come from the configuration (`[os]`, and
/// `os.KEY=VALUE` overrides, which the CLI's `--budget`, `--frag`, ... set);
/// `policies` replace the file's `[[policy]]` entries when given. Returns a
/// list of results (`Record`s), one per policy. `progress(done, total)`: accesses
/// simulated so far (`cancellable_progress`).
#[pyfunction]
#[pyo3(signature = (trace, policies=Vec::new(), preset=None, config=None, overrides=Vec::new(), with_base=true, config_text=None,
    host_policy=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_policies(
    py: Python<'_>,
    trace: String,
    policies: Vec<String>,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    with_base: bool,
    config_text: Option<String>,
    host_policy: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyList>> {
    let (cfg, specs, os, mut opts) = run_setup(preset, config, config_text, &overrides, &policies, with_base)?;
    if let Some(host) = host_policy {
        // virt: the policies run in a guest over a host running `host`.
        let virt = hugescope_core::virt::VirtOptions::new(&host).map_err(err)?;
        let sched = hugescope_core::sched::SchedOptions::default();
        return records(py, &cancellable_progress(py, progress, |hook| {
            opts.progress = hook;
            hugescope_core::virt::simulate_virtual(&[trace.clone()], &cfg.machine, &os, &specs, &opts, &sched, &[], &virt).map_err(err)
        })?);
    }
    records(py, &cancellable_progress(py, progress, |hook| {
        opts.progress = hook;
        hugescope_core::run::simulate_policies(&trace, &cfg.machine, &os, &specs, &opts).map_err(err)
    })?)
}

/// What a policy run needs from the configuration arguments: the resolved
/// configuration, its policy specs, the OS configuration and run options.
fn run_setup(
    preset: Option<String>,
    config: Option<String>,
    config_text: Option<String>,
    overrides: &[String],
    policies: &[String],
    with_base: bool,
) -> PyResult<(Config, Vec<hugescope_core::run::PolicySpec>, hugescope_core::os::OsConfig, hugescope_core::run::RunOptions)> {
    let cfg = load_config(preset.as_deref(), config.as_deref(), config_text.as_deref(), overrides, policies)?;
    let specs = cfg.specs().map_err(err)?;
    let os = cfg.os.os_config();
    let opts = cfg.run_options(with_base);
    Ok((cfg, specs, os, opts))
}

/// Simulate policies over several traces run as concurrent processes, each
/// interleaved by its own virtual time (`hugescope_core::sched`; one quantum
/// of `quantum_ms` ms of the running process's time between choices). One
/// trace takes the single-trace path. Same configuration arguments and result
/// as `simulate_policies`; each process of a concurrent run carries its
/// `finish_seconds` and `accesses`; `progress(done, total)` counts the
/// accesses of every run (each policy and `base` steps through all traces).
#[pyfunction]
#[pyo3(signature = (traces, policies=Vec::new(), preset=None, config=None, overrides=Vec::new(), with_base=true,
    config_text=None, quantum_ms=hugescope_core::sched::DEFAULT_QUANTUM_MS, start_s=Vec::new(), host_policy=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_concurrent(
    py: Python<'_>,
    traces: Vec<String>,
    policies: Vec<String>,
    preset: Option<String>,
    config: Option<String>,
    overrides: Vec<String>,
    with_base: bool,
    config_text: Option<String>,
    quantum_ms: f64,
    start_s: Vec<f64>,
    host_policy: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyList>> {
    let sched = hugescope_core::sched::SchedOptions { quantum_ms };
    sched.check().map_err(err)?;
    let (cfg, specs, os, mut opts) = run_setup(preset, config, config_text, &overrides, &policies, with_base)?;
    if let Some(host) = host_policy {
        // virt: each trace runs in its own VM over a host running `host`.
        let virt = hugescope_core::virt::VirtOptions::new(&host).map_err(err)?;
        return records(py, &cancellable_progress(py, progress, |hook| {
            opts.progress = hook;
            hugescope_core::virt::simulate_virtual(&traces, &cfg.machine, &os, &specs, &opts, &sched, &start_s, &virt).map_err(err)
        })?);
    }
    records(py, &cancellable_progress(py, progress, |hook| {
        opts.progress = hook;
        // `start_s`: each input's start time (a stream of processes).
        hugescope_core::run::simulate_concurrent_staggered(&traces, &cfg.machine, &os, &specs, &opts, &sched, &start_s).map_err(err)
    })?)
}

/// Throughput of decoding alone and of decoding plus simulating a trace
/// (a measurement: best wall time of `repeats` passes).
#[pyfunction]
#[pyo3(signature = (trace, preset=None, pages="4k".to_string(), repeats=3))]
fn bench_file(py: Python<'_>, trace: String, preset: Option<String>, pages: String, repeats: u32) -> PyResult<String> {
    let cfg = machine(preset.as_deref(), None, None, &[])?;
    json(&cancellable(py, || hugescope_core::bench::file_throughput(&trace, cfg, &pages, repeats).map_err(err))?)
}

/// Throughput of the decode floor and of the full pipeline of each row (a
/// policy spec, or "static 4k") over a trace, passes interleaved (a
/// measurement: best and median of `repeats` rounds). `sets`: machine keys
/// (`--set KEY=VALUE`) on top of the preset, for every row.
#[pyfunction]
#[pyo3(signature = (trace, preset, rows, repeats=3, sets=Vec::new()))]
fn bench_pipeline(py: Python<'_>, trace: String, preset: String, rows: Vec<String>, repeats: u32, sets: Vec<String>) -> PyResult<String> {
    json(&cancellable(py, || hugescope_core::bench::pipeline_throughput_set(&trace, &preset, &sets, &rows, repeats).map_err(err))?)
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

/// Generate a workload's trace into `out`. Returns JSON {summary, result, header}.
/// `progress` is called with the accesses generated so far (about every
/// million), from the worker thread of `cancellable` (it takes the GIL).
#[pyfunction]
#[pyo3(signature = (name, params_json, out, limit=None, progress=None))]
fn trace_workload(py: Python<'_>, name: String, params_json: String, out: String, limit: Option<u64>, progress: Option<Py<PyAny>>) -> PyResult<String> {
    use hugescope_workloads::tracefile::{trace_to_file, FileOptions};
    let p = params(&params_json)?;
    let w = cancellable(py, move || {
        let mut failure: Option<PyErr> = None;
        let mut hook = |n: u64| match &progress {
            Some(cb) => match Python::attach(|py| cb.call1(py, (n,)).map(drop)) {
                Ok(()) => true,
                Err(e) => {
                    // The callback failed: the generator stops (see
                    // `trace_to_file`) and its exception is raised.
                    failure = Some(e);
                    false
                }
            },
            None => true,
        };
        let opts = FileOptions { limit, progress: Some(&mut hook), sequential: false };
        let w = trace_to_file(&name, &p, std::path::Path::new(&out), opts);
        if let Some(e) = failure.take() {
            hugescope_core::cancel::clear();
            return Err(e);
        }
        w.map(|w| (out, w)).map_err(err)
    })?;
    let (out, w) = w;
    json(&serde_json::json!({ "path": out, "header": w.header, "summary": w.summary, "result": w.output }))
}

/// Trace-generation throughput of a workload (`hugescope bench`): the
/// generator alone against the same run written to a file in `dir`.
#[pyfunction]
#[pyo3(signature = (workload, params_json, repeats, dir, sequential=false))]
fn bench_tracegen(py: Python<'_>, workload: String, params_json: String, repeats: u32, dir: String, sequential: bool) -> PyResult<String> {
    let p = params(&params_json)?;
    json(&cancellable(py, move || {
        hugescope_workloads::tracegen_bench::tracegen_throughput(&workload, &p, repeats, std::path::Path::new(&dir), sequential).map_err(err)
    })?)
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
    m.add_function(wrap_pyfunction!(cache_info, m)?)?;
    m.add_function(wrap_pyfunction!(cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(cache_hits, m)?)?;
    m.add_function(wrap_pyfunction!(cache_hits_by_kind, m)?)?;
    m.add_function(wrap_pyfunction!(cache_status, m)?)?;
    m.add_function(wrap_pyfunction!(read_input, m)?)?;
    m.add_function(wrap_pyfunction!(shown, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(parse_count, m)?)?;
    m.add_function(wrap_pyfunction!(write_staged, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(machine_config, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_config, m)?)?;
    m.add_function(wrap_pyfunction!(os_knob_list, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_static, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_tlb_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(profile_regions, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_policies, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_concurrent, m)?)?;
    // The scheduler's accepted quanta, so the CLI and API check against the
    // core's range (one definition) and name their own option in the error.
    m.add("QUANTUM_MS_RANGE", (hugescope_core::sched::MIN_QUANTUM_MS, hugescope_core::sched::MAX_QUANTUM_MS))?;
    m.add("DEFAULT_QUANTUM_MS", hugescope_core::sched::DEFAULT_QUANTUM_MS)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(bench_file, m)?)?;
    m.add_function(wrap_pyfunction!(bench_tracegen, m)?)?;
    m.add_function(wrap_pyfunction!(bench_pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(workload_layout, m)?)?;
    m.add_function(wrap_pyfunction!(trace_workload, m)?)?;
    m.add_function(wrap_pyfunction!(native_workload, m)?)?;
    m.add_function(wrap_pyfunction!(check_output, m)?)?;
    cost::register(m)?;
    record::register(m)?;
    m.add_function(wrap_pyfunction!(pyjson::float_repr, m)?)?;
    experiments::register(m)?;
    linux::register(m)?;
    tracing::register(m)?;
    trace_reader::register(m)?;
    reproduce::register(m)?;
    Ok(())
}
