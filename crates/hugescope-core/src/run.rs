//! Running policies over a trace: decode once, simulate many. Every chunk of
//! the trace is fed to each configured simulation in turn (one kernel and one
//! set of MMUs per policy), with `base` alongside so every result carries its
//! estimated speedup over base pages on the same accesses.

use crate::config::MachineConfig;
use crate::cost::{self, CostEstimate};
use crate::os::clock::TimeBase;
use crate::os::kernel::{Kernel, OsConfig};
use crate::os::metrics::{OsStats, ProcessStats, Sample};
use crate::os::phys::FragReport;
use crate::plan::{Plan, PlanEntry};
use crate::policy;
use crate::profile::pass::profile_concurrent;
use crate::profile::{profile_walks, WalkProfile};
use crate::sim::{Simulator, TraceInfo};
use crate::stats::TranslationCounters;
use crate::trace::hst::{self, HstReader};
use crate::sched::{self, SchedOptions};
use crate::trace::merge::{self, Input, Placement};
use crate::trace::TraceHeader;
use crate::{limits, result_cache, Error, Result};
use serde::Serialize;

/// One policy of a spec: a registered name and its `key=value` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyPart {
    pub name: String,
    pub params: Vec<(String, String)>,
}

/// What one run simulates: one or several policies on one kernel, written
/// `name[:k=v,...]` joined by '+' (`linux:enabled=never+pcc`), in kernel
/// order (`Kernel::new_multi` for how they share it).
#[derive(Clone, Debug, Serialize)]
pub struct PolicySpec {
    /// The policy's name, or the names joined by '+' for several.
    pub name: String,
    /// The parameters of a single policy (several: empty, see `parts`).
    pub params: Vec<(String, String)>,
    /// Each policy with its parameters, in order (one for a single policy).
    #[serde(skip)]
    pub parts: Vec<PolicyPart>,
    /// Overrides of the OS configuration for this policy only (budget, fragmentation).
    #[serde(skip)]
    pub os: Option<OsConfig>,
    /// Label in tables (default: name plus parameters).
    pub label: String,
}

impl PolicySpec {
    /// Parse "name", "name:key=value,key=value", or several of these joined
    /// by '+'. A parameter value may itself hold a '+' (`1e+3`, a plan file
    /// `a+b.json`): a '+' separates policies only where the text after it, up
    /// to the next ':' or '+', is a registered policy name.
    pub fn parse(s: &str) -> Result<PolicySpec> {
        let parts = split_policies(s).into_iter().map(|p| parse_part(p, s)).collect::<Result<Vec<_>>>()?;
        if let Some(dup) = parts.iter().enumerate().find(|(i, p)| parts[..*i].iter().any(|q| q.name == p.name)) {
            // Two copies would share the kernel-wide state one policy sets up
            // (the PCC hardware, coverage tracking): refused rather than guessed.
            return Err(Error::input(format!("policy '{}' appears twice in '{s}'", dup.1.name)));
        }
        let name = parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join("+");
        let params = if parts.len() == 1 { parts[0].params.clone() } else { Vec::new() };
        Ok(PolicySpec { label: s.to_string(), name, params, parts, os: None })
    }
    pub fn named(name: &str) -> PolicySpec {
        let parts = vec![PolicyPart { name: name.into(), params: Vec::new() }];
        PolicySpec { name: name.into(), params: Vec::new(), parts, os: None, label: name.into() }
    }

    /// Build the spec's policies, in order.
    pub fn make(&self) -> Result<Vec<Box<dyn policy::Policy>>> {
        self.parts.iter().map(|p| policy::make(&p.name, &p.params)).collect()
    }
}

/// Cut a spec at each '+' that starts a registered policy name (`parse`).
fn split_policies(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    for (i, _) in s.match_indices('+') {
        let next = &s[i + 1..];
        let name = next[..next.find([':', '+']).unwrap_or(next.len())].trim();
        if policy::REGISTRY.iter().any(|(n, _, _)| *n == name) {
            out.push(&s[from..i]);
            from = i + 1;
        }
    }
    out.push(&s[from..]);
    out
}

/// Parse one "name[:key=value,...]" of the spec `whole`.
fn parse_part(part: &str, whole: &str) -> Result<PolicyPart> {
    let (name, rest) = part.split_once(':').unwrap_or((part, ""));
    let mut params = Vec::new();
    for kv in rest.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| Error::input(format!("policy parameter '{kv}' in '{whole}' is not key=value")))?;
        params.push((k.trim().to_string(), v.trim().to_string()));
    }
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::input(if part.len() == whole.len() {
            "empty policy name".to_string()
        } else {
            format!("empty policy name in '{whole}'")
        }));
    }
    // A '+' left in a name did not start a registered policy.
    if let Some((_, after)) = name.split_once('+') {
        return Err(Error::input(format!(
            "unknown policy '{}' in '{whole}'; available: {}",
            after.trim(),
            policy::REGISTRY.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(PolicyPart { name: name.to_string(), params })
}

/// The base-page reference measured on the same pass (or read back from
/// the results cache, `result_cache`, which stores exactly this).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Reference {
    pub translation: TranslationCounters,
    pub cost: CostEstimate,
}

// Deserialize: a reference run's result is read back from the results cache
// (`Assembly`); the version is this build's (the cache key holds it).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct PolicyResult {
    #[serde(skip_deserializing, default = "crate::sim::version")]
    pub hugescope_version: &'static str,
    pub label: String,
    pub policy: String,
    pub policy_params: serde_json::Value,
    pub trace: Option<TraceInfo>,
    pub machine: MachineConfig,
    pub os: OsConfig,
    pub time_base: TimeBase,
    /// Virtual seconds the run spanned (program time plus OS time on its path).
    pub virtual_seconds: f64,
    pub budget_bytes: Option<u64>,
    pub footprint_bytes: u64,
    pub memory_bytes: u64,
    pub fragmentation: Option<FragReport>,
    pub translation: TranslationCounters,
    pub cost: CostEstimate,
    pub base: Option<Reference>,
    /// Estimated speedup over base pages (base cycles / these cycles),
    /// including the OS work on the program's path (faults, compaction,
    /// shootdowns). On short traces one-time fault costs can dominate.
    pub speedup_vs_base: Option<f64>,
    /// Estimated speedup from translation alone (OS costs left out): the
    /// steady-state quantity of the PCC paper's utility curves.
    pub translation_speedup_vs_base: Option<f64>,
    /// Walks removed relative to base (1 - walks / base walks).
    pub walk_reduction_vs_base: Option<f64>,
    pub os_stats: OsStats,
    pub processes: Vec<ProcessStats>,
    pub huge_bytes_peak: u64,
    pub timeline: Vec<Sample>,
    pub executed_plan: Vec<PlanEntry>,
    pub warnings: Vec<String>,
    /// virt: the hypervisor's counters of a virtualized run (absent natively;
    /// never cached, so never read back).
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub virt: Option<crate::virt::VirtReport>,
}

impl PolicyResult {
    pub fn plan(&self) -> Plan {
        Plan::new(self.executed_plan.clone())
    }
}

pub(crate) struct Run {
    pub spec: PolicySpec,
    pub os: OsConfig,
    // direct segments: OS runs carry the segment unit (the dseg policy loads it).
    pub sim: Simulator<Kernel, crate::hw::RadixWalker, crate::hw::Segments>,
}

/// The OS configuration `spec` runs with under the run's `os`: a spec's own
/// (budget, fragmentation) keeps the run's time base unless it sets one
/// (--duration and --rate apply to every spec).
fn spec_os(spec: &PolicySpec, os: &OsConfig) -> OsConfig {
    match &spec.os {
        Some(o) => OsConfig { time: o.time.or(os.time), ..o.clone() },
        None => os.clone(),
    }
}

fn build(machine: &MachineConfig, header: &TraceHeader, os: &OsConfig, spec: &PolicySpec, pols: Vec<Box<dyn policy::Policy>>) -> Result<Run> {
    let os = spec_os(spec, os);
    let geo = crate::hw::Geometry::new(machine)?;
    let kernel = Kernel::new_multi(geo, machine.cost.clone(), header, &os, pols)?;
    let sim = Simulator::with_unit(machine.clone(), header.cpus.max(1) as usize, kernel)?;
    Ok(Run { spec: spec.clone(), os, sim })
}

/// Options shared by every policy of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Treat the whole trace as this many seconds of virtual time (sets an
    /// access rate of accesses / duration), to map the papers' daemon
    /// intervals onto a short trace.
    pub duration_s: Option<f64>,
    /// Accesses per second (overrides the trace header's nominal rate).
    pub accesses_per_second: Option<f64>,
    /// Also simulate `base` for the speedup (default true in the CLI).
    pub with_base: bool,
    /// Told the accesses simulated so far out of the run's total (every
    /// run of a concurrent simulation counted); none by default.
    pub progress: crate::progress::ProgressHook,
    /// Decode the trace on the simulating thread even when another cpu is
    /// free (`trace::readahead`): for callers that already run one
    /// simulation per cpu (a sweep's threads), where a decoding thread each
    /// would only compete with them.
    pub inline_decode: bool,
}

/// Under an access-rate time base the trace's virtual duration is known before
/// the run: refuse one beyond `limits::MAX_DURATION_S` (a small trace at a tiny
/// rate would otherwise fire every daemon millions of times). The cycle time
/// base has no such estimate; the kernel stops daemons at `DAEMON_STOP_S`.
pub(crate) fn check_implied_duration(header: &TraceHeader, os: &OsConfig, accesses: u64) -> Result<()> {
    let rate = match os.time {
        Some(TimeBase::AccessRate { accesses_per_second }) => accesses_per_second,
        Some(TimeBase::Cycles { .. }) => return Ok(()),
        // The kernel's choice when no time base is given: the header's rate.
        None => match header.accesses_per_second {
            Some(r) if r > 0.0 => r,
            _ => return Ok(()),
        },
    };
    let d = accesses as f64 / rate;
    // Relative slack: --duration D sets rate = accesses / D, and the division
    // back may round just above D.
    if d > limits::MAX_DURATION_S * (1.0 + 1e-9) {
        return Err(Error::input(format!(
            "{accesses} accesses at {rate} accesses/s span {d:.6e} s of virtual time, more than the maximum {} s; give a --duration or a higher --rate",
            limits::MAX_DURATION_S
        )));
    }
    Ok(())
}

/// Estimate the model state of a run (one kernel and one MMU set per policy,
/// plus `base` and a profiling pass) and refuse it before allocating when it
/// exceeds `limits::memory_limit` (`--memory 1PiB`, a header declaring a
/// 2^47-byte region, the largest TLBs on 256 cpus).
/// Returns the estimate and the limit, for the check of inferred VMAs during
/// the run.
pub(crate) fn check_memory(machine: &MachineConfig, header: &TraceHeader, os: &OsConfig, specs: &[PolicySpec], cpus: u64) -> Result<(u64, u64)> {
    let base_page = machine.page_size_bytes()?[0];
    let frames = |o: &OsConfig| o.memory_for(o.footprint_bytes.unwrap_or_else(|| header.footprint())) / base_page;
    let frames_per_kernel = specs.iter().map(|s| frames(s.os.as_ref().unwrap_or(os))).chain([frames(os)]).max().unwrap_or(0);
    let vma_pages_per_kernel = header.regions.iter().map(|r| r.len / base_page + 1).fold(0u64, u64::saturating_add);
    let runs = specs.len() as u64 + 1;
    let f = limits::Footprint {
        kernels: runs,
        frames_per_kernel,
        vma_pages_per_kernel,
        simulators: runs + 1,
        cpus,
        cache_entries_per_cpu: machine.cache_entries_per_cpu(),
    };
    let what = format!(
        "{runs} runs of {} of simulated memory, {} of declared regions, {cpus} cpus",
        limits::gib(frames_per_kernel.saturating_mul(base_page)),
        limits::gib(vma_pages_per_kernel.saturating_mul(base_page))
    );
    limits::check_model_memory(&what, &f)?;
    Ok((f.bytes(), limits::memory_limit()?))
}

/// Accesses outside every declared region create VMAs as the trace goes (an
/// imported trace, or one touching random 47-bit addresses): checked after
/// each chunk so the model stays within its limit whatever the content.
pub(crate) fn check_inferred(runs: &[Run], model_bytes: u64, limit: u64, at: u64) -> Result<()> {
    check_inferred_pages(runs.iter().map(|r| r.sim.pt.inferred_pages()).sum(), model_bytes, limit, at)
}

/// `check_inferred` for `pages` base pages of inferred mappings over all runs.
pub(crate) fn check_inferred_pages(pages: u64, model_bytes: u64, limit: u64, at: u64) -> Result<()> {
    let bytes = model_bytes.saturating_add(limits::vma_page_bytes(pages));
    if bytes > limit {
        return Err(Error::input(format!(
            "by access {at} the trace's accesses outside its declared regions need about {} of model memory \
             ({pages} base pages of inferred mappings over all runs), more than the limit of {}; \
             declare the regions in the trace header or raise {}",
            limits::gib(bytes),
            limits::gib(limit),
            limits::MEMORY_LIMIT_ENV
        )));
    }
    Ok(())
}

/// The run whose results are the base-page reference: a requested plain
/// `base`, or one added at the end of `runs` (None without `with_base`).
fn add_base(runs: &mut Vec<Run>, machine: &MachineConfig, header: &TraceHeader, os: &OsConfig, specs: &[PolicySpec], opts: &RunOptions) -> Result<Option<usize>> {
    if !opts.with_base {
        return Ok(None);
    }
    if let Some(i) = plain_base(specs) {
        return Ok(Some(i));
    }
    runs.push(build(machine, header, os, &base_spec(), vec![policy::make("base", &[])?])?);
    Ok(Some(runs.len() - 1))
}

fn base_spec() -> PolicySpec {
    PolicySpec::named("base")
}

/// The requested spec that is plain `base` (the reference itself), if any.
pub(crate) fn plain_base(specs: &[PolicySpec]) -> Option<usize> {
    specs.iter().position(|s| s.name == "base" && s.params.is_empty() && s.os.is_none())
}

/// Where a single-trace run's base reference comes from.
pub(crate) enum BaseRef {
    /// No reference (`with_base` off).
    None,
    /// The run at this index.
    Run(usize),
    /// Read from the results cache: no base run is simulated.
    Cached(Box<Reference>),
}

/// Policies whose runs are reference runs, cached whole in the results
/// cache (`result_cache`): the base-page reference of every speedup and the
/// papers' reference lines, which every sweep and reproduction of a trace
/// draws again (issue #37). A run of one of them alone, with any parameters.
pub const REFERENCE_POLICIES: [&str; 2] = ["base", "ideal"];

/// The results-cache key of `spec`'s run under the run's OS configuration
/// `os`, when it is a reference run (`REFERENCE_POLICIES`) and the cache is
/// on. Everything a run's result depends on is in it: the trace's content,
/// the machine, the OS configuration the run resolves to (time base, budget,
/// fragmentation, seed, costs, sample period), the policy and its
/// parameters, and the build (`result_cache::CacheKey`). The label and the
/// trace's path are not: they are set from the request when read back.
fn reference_key(keys: &mut result_cache::TraceKeys, machine: &MachineConfig, os: &OsConfig, spec: &PolicySpec) -> Result<Option<result_cache::CacheKey>> {
    let [part] = spec.parts.as_slice() else { return Ok(None) };
    if !REFERENCE_POLICIES.contains(&part.name.as_str()) {
        return Ok(None);
    }
    let reference = serde_json::json!({ "policy": part.name, "params": part.params });
    keys.key(machine, Some(&spec_os(spec, os)), reference, &part.name)
}

/// How a single-trace run's results come together after its pass
/// (`Assembly::finish`): which spec each run stands for, the results read
/// from the results cache instead of simulated, and the reference runs to
/// store.
pub(crate) struct Assembly {
    nspecs: usize,
    /// Per run: the index of the spec it simulates (`nspecs`: the added base).
    slots: Vec<usize>,
    /// Per run: its key, when its result is to be stored in the cache.
    keys: Vec<Option<result_cache::CacheKey>>,
    /// Per spec: its result read from the cache (label and trace set).
    cached: Vec<Option<PolicyResult>>,
    base: BaseRef,
}

impl Assembly {
    /// The spec that run `i` simulates (None: the added base run).
    pub fn spec_of(&self, run: usize) -> Option<usize> {
        Some(self.slots[run]).filter(|&s| s < self.nspecs)
    }

    /// One result per spec, in order, from the runs' `results` (one per
    /// run, in run order) and the cached ones; each with its speedups over
    /// the base reference. Simulated reference runs are stored.
    pub fn finish(self, results: Vec<PolicyResult>) -> Vec<PolicyResult> {
        let Assembly { nspecs, slots, keys, cached, base } = self;
        for (r, key) in results.iter().zip(&keys) {
            if let Some(k) = key {
                // Stored without what the request sets (`read_cached`).
                let stored = PolicyResult { label: String::new(), trace: None, ..r.clone() };
                result_cache::store(k, &stored);
            }
        }
        let reference = match &base {
            BaseRef::None => None,
            BaseRef::Run(i) => Some(reference_of(&results[*i])),
            BaseRef::Cached(r) => Some((**r).clone()),
        };
        let mut out: Vec<Option<PolicyResult>> = cached;
        for (r, slot) in results.into_iter().zip(slots) {
            if slot < nspecs {
                out[slot] = Some(r);
            }
        }
        let out = out.into_iter().map(|r| r.expect("every spec has a result")).collect();
        match reference {
            Some(b) => attach_reference(out, &b),
            None => out,
        }
    }
}

/// A cached reference run's result as this request would get it: its
/// label and trace.
fn read_cached(key: &result_cache::CacheKey, spec: &PolicySpec, info: &TraceInfo) -> Option<PolicyResult> {
    let mut r: PolicyResult = result_cache::load(key)?;
    // What `finish` gives a run and `Assembly::finish` leaves out.
    if r.base.is_some() || r.speedup_vs_base.is_some() || r.trace.is_some() || !r.label.is_empty() {
        return None;
    }
    r.label = spec.label.clone();
    r.trace = Some(info.clone());
    Some(r)
}

/// `--rate` and `--duration` of `opts` as the time base of `os`; `accesses`
/// is what `--duration` spans (the trace's, or the longest process's of a
/// concurrent run).
pub(crate) fn apply_time_options(os: &mut OsConfig, opts: &RunOptions, accesses: u64) -> Result<()> {
    if let Some(r) = opts.accesses_per_second {
        limits::check_rate("rate", r)?;
        os.time = Some(TimeBase::AccessRate { accesses_per_second: r });
    }
    if let Some(d) = opts.duration_s {
        limits::check_duration("duration", d)?;
        os.time = Some(TimeBase::AccessRate { accesses_per_second: accesses.max(1) as f64 / d });
    }
    Ok(())
}

/// The policies of `specs`, with the walk profile set on two-pass policies
/// (the oracle): `profile` computes it, only when one of them asks.
pub(crate) fn make_policies(specs: &[PolicySpec], profile: impl FnOnce() -> Result<WalkProfile>) -> Result<Vec<Vec<Box<dyn policy::Policy>>>> {
    let mut pols = Vec::with_capacity(specs.len());
    for s in specs {
        pols.push(s.make()?);
    }
    if pols.iter().flatten().any(|p| p.wants_profile()) {
        let profile = profile()?;
        for p in pols.iter_mut().flatten().filter(|p| p.wants_profile()) {
            p.set_profile(&profile);
        }
    }
    Ok(pols)
}

/// What `simulate_policies` sets up before the pass: the runs (one per spec
/// not read from the results cache, then `base` if added), how their
/// results come together, and the model-memory estimate and limit for
/// `check_inferred`.
pub(crate) struct Prepared {
    pub header: TraceHeader,
    pub runs: Vec<Run>,
    pub assembly: Assembly,
    pub model_bytes: u64,
    pub model_limit: u64,
}

/// Every check and every run of `simulate_policies`, before the pass (the
/// shared pass of `crate::sweep` starts from the same runs). Reference runs
/// the results cache holds are read instead of simulated.
pub(crate) fn prepare(path: &str, machine: &MachineConfig, os: &OsConfig, specs: &[PolicySpec], opts: &RunOptions) -> Result<Prepared> {
    if specs.is_empty() {
        return Err(Error::input("no policy to simulate"));
    }
    let (header, summary) = hst::summarize(path, false)?;
    let mut os = os.clone();
    apply_time_options(&mut os, opts, summary.accesses)?;
    check_implied_duration(&header, &os, summary.accesses)?;
    let cpus = (header.cpus as usize).max(summary.per_cpu.len()).max(1) as u64;
    let (model_bytes, model_limit) = check_memory(machine, &header, &os, specs, cpus)?;
    let info = TraceInfo::new(path, &header);
    let mut keys = result_cache::TraceKeys::new(path);
    let mut spec_keys = Vec::with_capacity(specs.len());
    let mut cached = Vec::with_capacity(specs.len());
    for s in specs {
        let key = reference_key(&mut keys, machine, &os, s)?;
        let hit = key.as_ref().and_then(|k| read_cached(k, s, &info));
        if hit.is_some() {
            // Its parameters are still checked as a simulated run's would be.
            s.make()?;
        }
        cached.push(hit);
        spec_keys.push(key);
    }
    let todo: Vec<usize> = (0..specs.len()).filter(|&i| cached[i].is_none()).collect();
    let todo_specs: Vec<PolicySpec> = todo.iter().map(|&i| specs[i].clone()).collect();
    // Two-pass policies (the oracle) first get a base-page profile of the
    // whole trace: one extra decode, only when one of them is requested.
    let pols = make_policies(&todo_specs, || profile_walks(path, machine))?;
    let mut runs = Vec::with_capacity(todo.len() + 1);
    for (s, p) in todo_specs.iter().zip(pols) {
        runs.push(build(machine, &header, &os, s, p)?);
    }
    let mut slots = todo.clone();
    let mut run_keys: Vec<Option<result_cache::CacheKey>> = todo.iter().map(|&i| spec_keys[i].clone()).collect();
    let base = if !opts.with_base {
        BaseRef::None
    } else if let Some(i) = plain_base(specs) {
        match &cached[i] {
            Some(r) => BaseRef::Cached(Box::new(reference_of(r))),
            None => BaseRef::Run(todo.iter().position(|&t| t == i).expect("a spec not cached is run")),
        }
    } else {
        let key = reference_key(&mut keys, machine, &os, &base_spec())?;
        match key.as_ref().and_then(|k| read_cached(k, &base_spec(), &info)) {
            Some(r) => BaseRef::Cached(Box::new(reference_of(&r))),
            None => {
                let i = add_base(&mut runs, machine, &header, &os, &todo_specs, opts)?.expect("with_base is on");
                slots.push(specs.len());
                run_keys.push(key);
                BaseRef::Run(i)
            }
        }
    };
    // A second cpu that decodes ahead also takes the PCC updates (os/pcc_bank.rs).
    for run in runs.iter_mut() {
        run.sim.pt.update_pccs_in_background(uses_second_cpu(opts));
    }
    let assembly = Assembly { nspecs: specs.len(), slots, keys: run_keys, cached, base };
    Ok(Prepared { header, runs, assembly, model_bytes, model_limit })
}

/// Whether a single-trace pass puts work on a second cpu (decoding ahead,
/// PCC updates): when the process may use one and the caller does not
/// already run one simulation per cpu.
fn uses_second_cpu(opts: &RunOptions) -> bool {
    !opts.inline_decode && crate::trace::readahead::enabled()
}

/// What one decoding pass feeds: runs of accesses between progress markers,
/// the markers at their exact index, and the end of each chunk.
pub(crate) trait PassSink {
    fn accesses(&mut self, recs: &[u64]);
    fn marker(&mut self, label: &str);
    /// `n` accesses were fed so far.
    fn chunk_done(&mut self, n: u64) -> Result<()>;
}

/// Decode the trace at `path` once into `sink`: each chunk split at the
/// progress markers so each lands at its exact index; markers past the last
/// access at the end.
pub(crate) fn pass(path: &str, opts: &RunOptions, sink: &mut impl PassSink) -> Result<()> {
    let mut r = HstReader::open(path)?;
    r.set_progress(opts.progress.clone());
    let markers = r.markers().to_vec();
    let mut next_marker = 0usize;
    let mut n = 0u64;
    crate::trace::readahead::for_each_chunk_with(&mut r, uses_second_cpu(opts), |chunk| {
        let end = n + chunk.len() as u64;
        let mut pos = 0usize;
        loop {
            let stop = if next_marker < markers.len() && markers[next_marker].index < end {
                (markers[next_marker].index - n) as usize
            } else {
                chunk.len()
            };
            let stop = stop.max(pos);
            sink.accesses(&chunk[pos..stop]);
            pos = stop;
            if pos >= chunk.len() {
                break;
            }
            sink.marker(&markers[next_marker].label);
            next_marker += 1;
        }
        n = end;
        sink.chunk_done(n)
    })?;
    for m in &markers[next_marker..] {
        sink.marker(&m.label);
    }
    Ok(())
}

/// Every run steps through each access in turn (decode once, simulate many).
struct EachRun<'a> {
    runs: &'a mut [Run],
    model_bytes: u64,
    model_limit: u64,
}

impl PassSink for EachRun<'_> {
    fn accesses(&mut self, recs: &[u64]) {
        for run in self.runs.iter_mut() {
            run.sim.step_records(recs);
        }
    }
    fn marker(&mut self, label: &str) {
        for run in self.runs.iter_mut() {
            crate::trace::AccessSink::progress(&mut run.sim, label);
        }
    }
    fn chunk_done(&mut self, n: u64) -> Result<()> {
        check_inferred(self.runs, self.model_bytes, self.model_limit, n)
    }
}

/// Simulate every policy of `specs` over the trace at `path` in one pass.
pub fn simulate_policies(path: &str, machine: &MachineConfig, os: &OsConfig, specs: &[PolicySpec], opts: &RunOptions) -> Result<Vec<PolicyResult>> {
    let Prepared { header, mut runs, assembly, model_bytes, model_limit } = prepare(path, machine, os, specs, opts)?;
    // With every result read from the results cache the pass still decodes
    // the whole trace: the key names the trace by its chunks' CRC-32s, and
    // decoding checks them (a damaged file is refused as without the cache).
    pass(path, opts, &mut EachRun { runs: &mut runs, model_bytes, model_limit })?;
    let info = TraceInfo::new(path, &header);
    let results: Vec<PolicyResult> = runs.iter_mut().map(|run| finish(run, &info)).collect();
    Ok(assembly.finish(results))
}

fn reference_of(r: &PolicyResult) -> Reference {
    Reference { translation: r.translation.clone(), cost: r.cost.clone() }
}

/// Give every result its speedups over the base run at `base_index` (if
/// any), and drop that run when it was added for the reference only (not one
/// of the `nspecs` requested).
pub(crate) fn attach_base(results: Vec<PolicyResult>, base_index: Option<usize>, nspecs: usize) -> Vec<PolicyResult> {
    let Some(bi) = base_index else { return results };
    let base = reference_of(&results[bi]);
    let mut results = attach_reference(results, &base);
    if bi == nspecs {
        results.pop();
    }
    results
}

/// Give every result its speedups over `base`.
fn attach_reference(mut results: Vec<PolicyResult>, base: &Reference) -> Vec<PolicyResult> {
    for res in results.iter_mut() {
        res.speedup_vs_base = Some(cost::speedup(&base.cost, &res.cost));
        let steady = |c: &CostEstimate| c.base_cycles + c.translation_cycles;
        res.translation_speedup_vs_base = Some(steady(&base.cost) / steady(&res.cost).max(1.0));
        res.walk_reduction_vs_base = (base.translation.walks > 0)
            .then(|| 1.0 - res.translation.walks as f64 / base.translation.walks as f64);
        res.base = Some(base.clone());
    }
    results
}

/// Simulate every policy of `specs` over the traces at `paths` run as
/// concurrent processes (`crate::sched`): each policy's kernel runs all of
/// them, interleaved by their own virtual time, so the interleaving (and the
/// readers, one set per run) is per policy; `base` is scheduled the same way.
/// One path takes exactly the single-trace path (`simulate_policies`).
///
/// Without `--rate`/`--duration` (and no time base in `os`) the time base is
/// the cost model's cycles, where translation costs move a process's time
/// (huge pages make it faster); under an access rate only its accesses and
/// its OS costs do. `--duration D` gives the longest input D seconds.
pub fn simulate_concurrent(
    paths: &[String],
    machine: &MachineConfig,
    os: &OsConfig,
    specs: &[PolicySpec],
    opts: &RunOptions,
    sched: &SchedOptions,
) -> Result<Vec<PolicyResult>> {
    simulate_concurrent_staggered(paths, machine, os, specs, opts, sched, &[])
}

/// `simulate_concurrent` with input `i` starting at `start_s[i]` seconds
/// (`sched::run_staggered`); the start times are recorded in the header's
/// params when any is given.
pub fn simulate_concurrent_staggered(
    paths: &[String],
    machine: &MachineConfig,
    os: &OsConfig,
    specs: &[PolicySpec],
    opts: &RunOptions,
    sched: &SchedOptions,
    start_s: &[f64],
) -> Result<Vec<PolicyResult>> {
    sched.check()?;
    sched::check_starts(start_s, paths.len())?;
    match paths {
        [] => return Err(Error::input("no trace to simulate")),
        [one] => return simulate_policies(one, machine, os, specs, opts),
        _ => {}
    }
    if specs.is_empty() {
        return Err(Error::input("no policy to simulate"));
    }
    let (first, mut header) = open_concurrent(paths)?;
    header.params.insert("quantum_ms".into(), serde_json::json!(sched.quantum_ms));
    if !start_s.is_empty() {
        header.params.insert("start_s".into(), serde_json::json!(start_s));
    }
    let longest = first.iter().map(|i| i.accesses()).max().unwrap_or(0);
    let mut os = os.clone();
    apply_time_options(&mut os, opts, longest)?;
    if os.time.is_none() {
        os.time = Some(TimeBase::Cycles { hz: machine.cost.cpu_ghz * 1e9 });
    }
    // A process's time spans its own accesses: the longest bounds the run
    // (the others end earlier; daemons follow the running process's time).
    check_implied_duration(&header, &os, longest)?;
    // The model holds every input at once: regions, cpus and frames of all.
    let cpus = header.cpus.max(1) as u64;
    let (model_bytes, model_limit) = check_memory(machine, &header, &os, specs, cpus)?;
    let placements: Vec<Placement> = first.iter().map(|i| i.placement).collect();
    let pols = make_policies(specs, || profile_concurrent(paths, &placements, machine))?;
    let mut runs = Vec::with_capacity(specs.len() + 1);
    for (s, p) in specs.iter().zip(pols) {
        runs.push(build(machine, &header, &os, s, p)?);
    }
    let base_index = add_base(&mut runs, machine, &header, &os, specs, opts)?;
    let mut finishes = Vec::with_capacity(runs.len());
    let mut first = Some(first);
    let mut done_pages = 0u64;
    // Progress over every run: each steps through all inputs' accesses.
    let per_run: u64 = first.as_ref().map_or(0, |v| v.iter().map(|i| i.accesses()).sum());
    let total = per_run * runs.len() as u64;
    for (i, run) in runs.iter_mut().enumerate() {
        let mut last = per_run * i as u64;
        let mut inputs = match first.take() {
            Some(v) => v,
            None => open_concurrent(paths)?.0,
        };
        finishes.push(sched::run_staggered(&mut run.sim, &mut inputs, sched, start_s, |k| {
            let now = per_run * i as u64 + k.clock().accesses;
            opts.progress.advanced(last, now, total);
            last = now;
            check_inferred_pages(done_pages + k.inferred_pages(), model_bytes, model_limit, k.clock().accesses)
        })?);
        opts.progress.advanced(last, per_run * (i as u64 + 1), total);
        done_pages += run.sim.pt.inferred_pages();
    }
    let info = TraceInfo::new(&paths.join(", "), &header);
    let results = runs
        .iter_mut()
        .zip(&finishes)
        .map(|(run, f)| {
            let mut res = finish(run, &info);
            set_finishes(&mut res, &placements, f);
            res
        })
        .collect();
    Ok(attach_base(results, base_index, specs.len()))
}

/// Open the inputs of a concurrent run and their combined header.
pub(crate) fn open_concurrent(paths: &[String]) -> Result<(Vec<Input>, TraceHeader)> {
    let mut inputs = paths.iter().map(|p| Input::open(p, "run it concurrently")).collect::<Result<Vec<_>>>()?;
    let header = merge::combine(&mut inputs, true, "concurrent")?;
    Ok((inputs, header))
}

/// Per-process finish times and accesses of a concurrent run; the run spans
/// until its last process finishes.
pub(crate) fn set_finishes(res: &mut PolicyResult, placements: &[Placement], finishes: &[sched::Finish]) {
    for (pl, f) in placements.iter().zip(finishes) {
        for (k, &n) in f.accesses.iter().enumerate() {
            if let Some(p) = res.processes.get_mut(pl.pid_offset as usize + k) {
                p.finish_seconds = Some(f.finish_seconds);
                p.accesses = Some(n);
            }
        }
    }
    res.virtual_seconds = finishes.iter().map(|f| f.finish_seconds).fold(0.0, f64::max);
}

pub(crate) fn finish(run: &mut Run, info: &TraceInfo) -> PolicyResult {
    let processes = run.sim.pt.finish();
    run.sim.apply_shootdowns();
    let k = &run.sim.pt;
    let translation = run.sim.counters();
    let mut cost = cost::estimate(&translation, &run.sim.cfg.cost, k.os_cycles());
    // memory tiers: the memory time of the tier each access touched.
    if let Some(t) = k.tier_stats() {
        cost.add_memory_cycles(t.memory_cycles, &run.sim.cfg.cost);
    }
    let mut warnings = Vec::new();
    // Checked once per run (linear in memory): a violation means a result
    // must not be trusted, so it is reported rather than silently ignored.
    if let Err(e) = k.check_invariants() {
        warnings.push(format!("internal invariant violated, do not trust this result: {e}"));
    }
    warnings.extend(k.notes().iter().cloned());
    if k.stats().out_of_memory > 0 {
        warnings.push(format!(
            "{} base-page allocations found no free memory: the simulated memory ({} bytes) is too small for this trace",
            k.stats().out_of_memory,
            k.phys().total_frames() * k.geometry().sizes[0]
        ));
    }
    PolicyResult {
        hugescope_version: env!("CARGO_PKG_VERSION"),
        label: run.spec.label.clone(),
        policy: run.spec.name.clone(),
        policy_params: k.policy_params(),
        trace: Some(info.clone()),
        machine: run.sim.cfg.clone(),
        os: run.os.clone(),
        time_base: k.clock().base,
        virtual_seconds: k.now(),
        budget_bytes: k.budget_bytes(),
        footprint_bytes: k.footprint(),
        memory_bytes: k.phys().total_frames() * k.geometry().sizes[0],
        fragmentation: k.fragmentation_report().cloned(),
        translation,
        cost,
        base: None,
        speedup_vs_base: None,
        translation_speedup_vs_base: None,
        walk_reduction_vs_base: None,
        os_stats: k.stats().clone(),
        processes,
        huge_bytes_peak: k.peak_huge_bytes(),
        timeline: k.timeline().to_vec(),
        executed_plan: k.executed_plan().to_vec(),
        warnings,
        virt: None,
    }
}
