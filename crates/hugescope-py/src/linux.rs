//! Bindings of the real-Linux side (crate hugescope-linux).
//!
//! Plain arguments in, JSON text out, like the rest of the module. Calls that wait
//! on the kernel or on a child process (launch, native runs, the fragmenter) release
//! the GIL, so a Python program can keep other threads running meanwhile.
//!
//! While they wait they run Python's signal handlers about every 100 ms (`PyStop`):
//! when a handler raises (the CLI's raises `errors.Interrupted` for SIGINT and
//! SIGTERM, plain Python raises KeyboardInterrupt for SIGINT), the call forwards
//! that signal to its child, releases every page and setting, and re-raises the
//! handler's exception.

use crate::{err, json};
use hugescope_core::plan::Plan;
use hugescope_core::units::parse_size;
use hugescope_linux::collapse::{self, ApplyOptions, Target};
use hugescope_linux::launch::{launch_with_stop, LaunchOptions};
use hugescope_linux::{lifetime, settings, Error};
use hugescope_linux::native::{run_native, NativePlan, NativeRunOptions};
use hugescope_linux::{fragment, pagemap, smaps, Fragmenter, ThpState};
use pyo3::prelude::*;

/// A stop check that runs Python's signal handlers and keeps the exception one raised.
struct PyStop {
    raised: Option<PyErr>,
}

impl PyStop {
    fn new() -> PyStop {
        PyStop { raised: None }
    }

    /// `Some(signal)` once a handler raised: the signal its exception names
    /// (`signum` of errors.Interrupted), SIGINT for a plain KeyboardInterrupt, and
    /// SIGTERM for anything else a handler raised (stop, and re-raise it).
    fn check(&mut self) -> Option<i32> {
        if let Some(e) = &self.raised {
            return Python::attach(|py| Self::signal_of(py, e));
        }
        let e = Python::attach(|py| py.check_signals().err())?;
        let sig = Python::attach(|py| Self::signal_of(py, &e));
        self.raised = Some(e);
        sig
    }

    fn signal_of(py: Python<'_>, e: &PyErr) -> Option<i32> {
        if let Ok(n) = e.value(py).getattr("signum").and_then(|v| v.extract::<i32>()) {
            return Some(n);
        }
        Some(if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) { lifetime::SIGINT } else { lifetime::SIGTERM })
    }

    /// The Python exception for a result: the handler's own when the call stopped for it.
    fn into_err(self, e: Error) -> PyErr {
        match (e, self.raised) {
            (Error::Interrupted(_), Some(raised)) => raised,
            (e, _) => err(e),
        }
    }
}

/// Restore the settings a killed hugescope process left changed (its record is in
/// the state file and its owner is dead). Returns JSON: one entry per setting,
/// `{path, original, owners, error, message}`.
#[pyfunction]
fn repair_settings() -> PyResult<String> {
    let out: Vec<serde_json::Value> = settings::repair_stale()
        .map_err(err)?
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["message"] = settings::describe(r).into();
            v
        })
        .collect();
    json(&out)
}

/// The state file that records changed settings (`HUGESCOPE_STATE_DIR` moves it).
#[pyfunction]
fn settings_state_path() -> String {
    settings::state_path().display().to_string()
}

/// For a child hugescope started: ask for `sig` when the parent dies, and return
/// False if the parent is already no longer `expected_parent`.
#[pyfunction]
fn die_with_parent(sig: i32, expected_parent: i32) -> bool {
    lifetime::die_with_parent(sig, expected_parent)
}

/// The system THP state (`/sys/kernel/mm/transparent_hugepage`) as JSON.
#[pyfunction]
fn thp_state() -> PyResult<String> {
    json(&ThpState::read().map_err(err)?)
}

/// True when this process runs as root (process_madvise on others, the fragmenter).
#[pyfunction]
fn is_root() -> bool {
    hugescope_linux::is_root()
}

/// The VMAs of `pid` (0 = this process) from smaps, as JSON.
#[pyfunction]
fn smaps_vmas(pid: i32) -> PyResult<String> {
    json(&smaps::vmas(pid).map_err(err)?)
}

/// Huge-page coverage of `pid` per VMA: smaps `AnonHugePages`, and with `exact` the
/// PMD-mapped bytes of each anonymous VMA from `PAGEMAP_SCAN`; totals from
/// `smaps_rollup`.
#[pyfunction]
#[pyo3(signature = (pid, exact=true))]
fn coverage(py: Python<'_>, pid: i32, exact: bool) -> PyResult<String> {
    let out = py.detach(|| -> hugescope_linux::Result<serde_json::Value> {
        let vmas = smaps::vmas(pid)?;
        let rows: Vec<serde_json::Value> = vmas
            .iter()
            .map(|v| {
                // PAGEMAP_SCAN is only meaningful (and only cheap) for anonymous memory.
                let exact_bytes = if exact && v.is_anonymous() && v.rss > 0 {
                    pagemap::pmd_mapped_bytes(pid, v.start, v.len()).ok()
                } else {
                    None
                };
                serde_json::json!({
                    "start": v.start, "end": v.end, "size": v.size, "rss": v.rss, "anon": v.anon,
                    "anon_huge_bytes": v.anon_huge_pages, "pmd_mapped_bytes": exact_bytes,
                    "perms": v.perms, "path": v.path, "anonymous": v.is_anonymous(),
                    "thp_eligible": v.thp_eligible, "hugepage": v.hugepage(), "no_hugepage": v.no_hugepage(),
                })
            })
            .collect();
        Ok(serde_json::json!({
            "pid": pid,
            "vmas": rows,
            "anon_huge_total": smaps::anon_huge_total(pid)?,
            "rss_total": smaps::rss_total(pid)?,
        }))
    });
    json(&out.map_err(err)?)
}

/// Load and validate a plan file; returns the normalized plan JSON. Errors name the file.
#[pyfunction]
fn plan_load(path: String) -> PyResult<String> {
    Ok(Plan::load(std::path::Path::new(&path)).map_err(err)?.to_json())
}

/// Validate plan text (a list of entries or `{"version", "entries"}`); normalized JSON back.
#[pyfunction]
fn plan_parse(text: String) -> PyResult<String> {
    Ok(Plan::parse(&text).map_err(err)?.to_json())
}

/// The plan `--emit-plan` writes (see `hugescope_core::plan::emit`): the
/// recorded plan retimed to `timing`, merged, with a header; hex JSON back.
#[pyfunction]
#[pyo3(signature = (plan_json, timing, trace=None, rate=None, duration=None, policy=None, estimate_json=None))]
fn plan_emit(
    plan_json: String,
    timing: String,
    trace: Option<String>,
    rate: Option<f64>,
    duration: Option<f64>,
    policy: Option<String>,
    estimate_json: Option<String>,
) -> PyResult<String> {
    use hugescope_core::plan::{emit, EmitOptions, Timing};
    let recorded = Plan::parse(&plan_json).map_err(err)?;
    let estimate = estimate_json.map(|t| serde_json::from_str(&t)).transpose().map_err(err)?;
    let o = EmitOptions { trace: trace.map(Into::into), accesses_per_second: rate, duration_s: duration, policy, estimate };
    Ok(emit(&recorded, Timing::parse(&timing).map_err(err)?, &o).map_err(err)?.to_json_hex())
}

/// `plan_json` with its entries that cover whole allocation-site regions of
/// `trace` written by site instead (`Plan::by_site`): a plan that survives
/// a re-link. Hex JSON back. Refused when the trace has no site regions.
#[pyfunction]
fn plan_by_site(plan_json: String, trace: String) -> PyResult<String> {
    let plan = Plan::parse(&plan_json).map_err(err)?;
    let r = hugescope_core::trace::hst::HstReader::open(&trace).map_err(err)?;
    let regions = &r.header().regions;
    if !regions.iter().any(|r| r.site.is_some()) {
        return Err(err(format!(
            "{trace}: no region carries an allocation site (trace the program, built with 'hugescope cc', with \
             'hugescope trace -- PROG')")));
    }
    Ok(plan.by_site(regions).to_json_hex())
}

fn entries(plan_json: &str) -> PyResult<Vec<hugescope_core::plan::PlanEntry>> {
    let plan = Plan::parse(plan_json).map_err(err)?;
    if !plan.sites.is_empty() {
        // Only a launched program reports where its sites' memory lies.
        return Err(err(format!(
            "the plan names {} allocation site(s): only 'hugescope run --plan PLAN -- PROG' resolves them (the program \
             built with 'hugescope cc' reports its allocations)", plan.sites.len())));
    }
    Ok(plan.entries)
}

/// Apply a plan to process `pid` now (0 = this process, else `process_madvise`),
/// every entry regardless of its `when`. Returns the outcomes as JSON.
#[pyfunction]
#[pyo3(signature = (pid, plan_json, precheck=true))]
fn apply_plan(py: Python<'_>, pid: i32, plan_json: String, precheck: bool) -> PyResult<String> {
    if pid < 0 {
        return Err(err(format!("pid {pid} is not a process id")));
    }
    let list = entries(&plan_json)?;
    let target = if pid == 0 { Target::SelfProcess } else { Target::Pid(pid) };
    let opts = ApplyOptions { precheck, ..ApplyOptions::default() };
    // In steps of a few entries (one smaps read each), so that a signal stops
    // a long plan between two steps.
    let mut stop = PyStop::new();
    let out = py.detach(|| {
        let mut a = collapse::Applier::new(target, opts);
        let mut out = Vec::with_capacity(list.len());
        let items: Vec<(usize, &hugescope_core::plan::PlanEntry)> = list.iter().enumerate().collect();
        for step in items.chunks(collapse::STEP_ENTRIES) {
            if let Some(sig) = stop.check() {
                return Err(Error::Interrupted(sig));
            }
            out.extend(a.apply_step(step, None));
        }
        Ok(out)
    });
    match out {
        Ok(o) => json(&o),
        Err(e) => Err(stop.into_err(e)),
    }
}

/// Run a command with ASLR disabled for it, apply the plan's `start` and `time_s`
/// entries with process_madvise, and measure it. `plan_all`: also collapse every
/// private anonymous mapping as it is populated (`--plan all`). Returns the
/// RunRecord JSON.
#[pyfunction]
#[pyo3(signature = (argv, plan_json=None, sample_ms=100, start_timeout_s=10.0, timeout_s=None, disable_aslr=true, plan_pid=None, plan_all=false))]
#[allow(clippy::too_many_arguments)]
fn launch_command(
    py: Python<'_>,
    argv: Vec<String>,
    plan_json: Option<String>,
    sample_ms: u64,
    start_timeout_s: f64,
    timeout_s: Option<f64>,
    disable_aslr: bool,
    plan_pid: Option<u16>,
    plan_all: bool,
) -> PyResult<String> {
    let Some((prog, args)) = argv.split_first() else {
        return Err(err("no command given"));
    };
    let plan = plan_json.as_deref().map(Plan::parse).transpose().map_err(err)?;
    // The header's rate places `{"accesses": N}` entries on the program's clock.
    let accesses_per_second = plan.as_ref().and_then(|p| p.header.as_ref()).and_then(|h| h.accesses_per_second);
    let (list, sites) = plan.map(|p| (p.entries, p.sites)).unwrap_or_default();
    let opts = LaunchOptions { sample_ms, start_timeout_s, timeout_s, plan_pid, disable_aslr, accesses_per_second, plan_all, sites, ..LaunchOptions::default() };
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args);
    let mut stop = PyStop::new();
    let r = py.detach(|| launch_with_stop(cmd, &list, &opts, &mut || stop.check()));
    match r {
        Ok(rec) => json(&rec),
        Err(e) => Err(stop.into_err(e)),
    }
}

/// Run a built-in workload natively in this process. `plan` is "none", "all" or
/// "plan" (then `plan_json` holds the entries). Returns the NativeRunRecord JSON.
#[pyfunction]
#[pyo3(signature = (name, params_json, plan="none".to_string(), plan_json=None, sample_ms=100, start_retries=16))]
fn run_native_workload(
    py: Python<'_>,
    name: String,
    params_json: String,
    plan: String,
    plan_json: Option<String>,
    sample_ms: u64,
    start_retries: u32,
) -> PyResult<String> {
    let params = match serde_json::from_str::<serde_json::Value>(&params_json).map_err(err)? {
        serde_json::Value::Object(m) => m,
        _ => return Err(err("workload parameters must be a JSON object")),
    };
    let p = match (plan.as_str(), &plan_json) {
        ("none", None) => NativePlan::None,
        ("all", None) => NativePlan::All,
        ("plan", Some(t)) => NativePlan::Entries(entries(t)?),
        ("plan", None) => return Err(err("plan='plan' needs plan_json")),
        (other, _) => return Err(err(format!("plan must be 'none', 'all' or 'plan' (with plan_json), got '{other}'"))),
    };
    let opts = NativeRunOptions { sample_ms, start_retries, ..NativeRunOptions::default() };
    json(&py.detach(|| run_native(&name, &params, &p, &opts)).map_err(err)?)
}

/// The page-walk microbenchmarks of one footprint (`hugescope_linux::microbench`):
/// `spec_json` is a `microbench::Spec`; returns a JSON list of `Measurement`s.
#[pyfunction]
fn microbench(py: Python<'_>, spec_json: String) -> PyResult<String> {
    let spec: hugescope_linux::microbench::Spec = serde_json::from_str(&spec_json).map_err(err)?;
    let mut stop = PyStop::new();
    let r = py.detach(|| hugescope_linux::microbench::run(&spec, &mut || stop.check()));
    match r {
        Ok(m) => json(&m),
        Err(e) => Err(stop.into_err(e)),
    }
}

/// The TLB-reach microbenchmark (`hugescope_linux::tlb_reach`): `spec_json`
/// is a `tlb_reach::Spec`; returns its `Report` as JSON.
#[pyfunction]
fn tlb_reach(py: Python<'_>, spec_json: String) -> PyResult<String> {
    let spec: hugescope_linux::tlb_reach::Spec = serde_json::from_str(&spec_json).map_err(err)?;
    let mut stop = PyStop::new();
    let r = py.detach(|| hugescope_linux::tlb_reach::run(&spec, &mut || stop.check()));
    match r {
        Ok(m) => json(&m),
        Err(e) => Err(stop.into_err(e)),
    }
}

/// This CPU's CPUID leaves that describe its TLBs (`hugescope_linux::cpu_tlbs`),
/// as a `hugescope_core::cpuid::RawLeaves` JSON.
#[pyfunction]
fn cpuid_leaves() -> PyResult<String> {
    json(&hugescope_linux::cpu_tlbs::read())
}

/// Decode raw CPUID leaves (`RawLeaves` JSON) into the TLB geometry
/// (`hugescope_core::cpuid::decode`), as JSON.
#[pyfunction]
fn cpuid_decode(raw_json: String) -> PyResult<String> {
    let raw: hugescope_core::cpuid::RawLeaves = serde_json::from_str(&raw_json).map_err(err)?;
    json(&hugescope_core::cpuid::decode(&raw))
}

/// `/proc/buddyinfo`: free blocks per zone and order, and free 2 MiB blocks in total.
#[pyfunction]
fn buddyinfo() -> PyResult<String> {
    json(&fragment::read_buddyinfo().map_err(err)?)
}

/// Fragment free physical memory (PCC paper): one pinned page in `share` of the
/// 2 MiB blocks. `on_ready(report_json)` is called once the memory is fragmented;
/// then, with `hold`, the pins are held until SIGINT/SIGTERM, else for `seconds`
/// (default: released at once). Every changed setting is restored before this
/// returns the report JSON. Needs root.
///
/// A signal (see `PyStop`) while fragmenting or while holding for `seconds`
/// releases everything and re-raises the handler's exception. With `hold`, a
/// signal is the expected end: the report is returned with `stopped_by_signal`.
#[pyfunction]
#[pyo3(signature = (share, seed=0, margin=None, hold=false, seconds=None, on_ready=None))]
fn fragment_memory(
    py: Python<'_>,
    share: f64,
    seed: u64,
    margin: Option<String>,
    hold: bool,
    seconds: Option<f64>,
    on_ready: Option<Py<PyAny>>,
) -> PyResult<String> {
    let margin = margin.as_deref().map(parse_size).transpose().map_err(|e| err(format!("margin: {e}")))?;
    if let Some(t) = seconds {
        if !(t.is_finite() && t >= 0.0) {
            return Err(err(format!("seconds {t}: expected a non-negative number")));
        }
    }
    // The callback runs with the GIL taken back, so a signal that arrives while it
    // runs raises *in the callback*: its exception is handed to the stop check,
    // which then ends the hold (or the fragmenting) as if the handler had raised
    // there. Either way the pins and settings are released before it propagates.
    let cb_err: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let mut stop = PyStop::new();
    let report = py.detach(|| -> hugescope_linux::Result<String> {
        let mut check = || {
            if let Some(e) = cb_err.lock().unwrap_or_else(|p| p.into_inner()).take() {
                stop.raised = Some(e);
            }
            stop.check()
        };
        let f = Fragmenter::start_with_stop(share, seed, margin, &mut check)?;
        let ready = |r: &hugescope_linux::FragmentReport| {
            if let Some(cb) = &on_ready {
                let text = serde_json::to_string(r).unwrap_or_default();
                Python::attach(|py| {
                    if let Err(e) = cb.call1(py, (text,)) {
                        *cb_err.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                });
            }
        };
        let mut report = serde_json::to_value(f.report()).unwrap_or_default();
        if hold {
            let sig = f.hold_until_stopped(&mut check, ready);
            report["stopped_by_signal"] = sig.into();
        } else {
            ready(f.report());
            let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds.unwrap_or(0.0));
            loop {
                if let Some(sig) = check() {
                    drop(f);
                    return Err(Error::Interrupted(sig));
                }
                let now = std::time::Instant::now();
                if now >= until {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50).min(until - now));
            }
            drop(f);
        }
        Ok(report.to_string())
    });
    let raised = stop.raised.take().or_else(|| cb_err.into_inner().unwrap_or_else(|p| p.into_inner()));
    match (report, raised) {
        // A hold ends with a signal by design: the report, with the signal in it.
        (Ok(r), Some(e)) if hold && e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) => Ok(r),
        // Anything else a handler or the callback raised is re-raised, after the release.
        (_, Some(e)) => Err(e),
        (Ok(r), None) => Ok(r),
        (Err(e), None) => Err(err(e)),
    }
}

/// The userspace huge-page daemon (`hugescope_linux::daemon`), stepped from Python:
/// `LiveDaemon(config_json)`, then `step()` returns one JSON status per call and
/// `close()` restores what it changed (also done when the object is dropped).
#[pyclass(unsendable)]
struct LiveDaemon {
    inner: Option<hugescope_linux::daemon::Daemon>,
}

#[pymethods]
impl LiveDaemon {
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        let cfg: hugescope_linux::daemon::DaemonConfig =
            serde_json::from_str(config_json).map_err(|e| err(format!("daemon configuration: {e}")))?;
        Ok(LiveDaemon { inner: Some(hugescope_linux::daemon::Daemon::new(cfg).map_err(err)?) })
    }

    /// One sample-decide-collapse step (the GIL is released meanwhile).
    fn step(&mut self, py: Python<'_>) -> PyResult<String> {
        let d = self.inner.as_mut().ok_or_else(|| err("daemon: already closed"))?;
        let s = py.detach(|| d.step());
        json(&s)
    }

    fn close(&mut self) -> PyResult<()> {
        match self.inner.take() {
            Some(mut d) => d.close().map_err(err),
            None => Ok(()),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LiveDaemon>()?;
    m.add_function(wrap_pyfunction!(thp_state, m)?)?;
    m.add_function(wrap_pyfunction!(repair_settings, m)?)?;
    m.add_function(wrap_pyfunction!(settings_state_path, m)?)?;
    m.add_function(wrap_pyfunction!(die_with_parent, m)?)?;
    m.add_function(wrap_pyfunction!(is_root, m)?)?;
    m.add_function(wrap_pyfunction!(smaps_vmas, m)?)?;
    m.add_function(wrap_pyfunction!(coverage, m)?)?;
    m.add_function(wrap_pyfunction!(plan_load, m)?)?;
    m.add_function(wrap_pyfunction!(plan_parse, m)?)?;
    m.add_function(wrap_pyfunction!(plan_emit, m)?)?;
    m.add_function(wrap_pyfunction!(plan_by_site, m)?)?;
    m.add_function(wrap_pyfunction!(apply_plan, m)?)?;
    m.add_function(wrap_pyfunction!(launch_command, m)?)?;
    m.add_function(wrap_pyfunction!(run_native_workload, m)?)?;
    m.add_function(wrap_pyfunction!(buddyinfo, m)?)?;
    m.add_function(wrap_pyfunction!(microbench, m)?)?;
    m.add_function(wrap_pyfunction!(tlb_reach, m)?)?;
    m.add_function(wrap_pyfunction!(cpuid_leaves, m)?)?;
    m.add_function(wrap_pyfunction!(cpuid_decode, m)?)?;
    m.add_function(wrap_pyfunction!(fragment_memory, m)?)?;
    Ok(())
}
