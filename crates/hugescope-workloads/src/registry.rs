//! The workload table, parameter parsing and the public entry points
//! (`list`, `plan`, `trace`, `header`, `native`).

use serde::Serialize;
use serde_json::Value;

use hugescope_core::trace::{AccessSink, Region, TraceHeader, MAX_CPUS};
use hugescope_core::units::{fmt_size, parse_count, parse_size};
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Mem, Native, NativeEvent, Traced};
use crate::{bt, btree, canneal, cg, graph, gups, hotcold, kv, mysql, pointer_chase, seqtouch, stream, svm, web};
// The Navarro paper's workloads (OSDI'02 §6.2, §6.5-6.7).
use crate::{adversary, cmp, dirtyfile, fftw, mapdummy, matrix, rbtree, stride4m};
// The FHPM paper's page-sharing microbenchmark (Table 2).
use crate::sharemicro;
// The FHPM paper's PSR microbenchmark (§2.2 Fig 2, §6.3 Fig 8).
use crate::psr_bench;

/// One documented parameter of a workload.
#[derive(Clone, Debug, Serialize)]
pub struct ParamSpec {
    pub name: &'static str,
    /// "int", "size", "float", "bool", "str" or "path".
    pub kind: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub params: Vec<ParamSpec>,
}

/// Parameters as given by a caller: numbers, or strings such as "1GiB", "50M".
pub type Params = serde_json::Map<String, Value>;

/// What a run will look like, known before it happens.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadLayout {
    pub workload: String,
    pub regions: Vec<Region>,
    /// Sum of region lengths in bytes.
    pub footprint: u64,
    pub cpus: u32,
    /// All parameters with defaults filled in (sizes and counts as integers).
    pub params: Params,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunOutput {
    pub result: Value,
    pub accesses: u64,
}

#[derive(Clone, Debug, Default)]
pub struct NativeOptions {
    /// madvise(MADV_HUGEPAGE) every region.
    pub thp: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct NativeReport {
    pub result: Value,
    /// Data construction (graph build, table fill) before the measured phase.
    pub setup_seconds: f64,
    /// Wall time of the algorithm phase.
    pub run_seconds: f64,
    pub regions: Vec<Region>,
    pub warnings: Vec<String>,
}

pub(crate) fn p(name: &'static str, kind: &'static str, default: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { name, kind, default, help }
}

/// `seed` and `threads`, shared by every workload.
pub(crate) fn common(v: Vec<ParamSpec>) -> Vec<ParamSpec> {
    common_threads("1", v)
}

/// `common` for a workload whose original runs many threads by default
/// (mysql: hundreds of connection threads).
pub(crate) fn common_threads(threads: &'static str, mut v: Vec<ParamSpec>) -> Vec<ParamSpec> {
    v.push(p("seed", "int", "1", "seed of every random choice; same seed, same run"));
    v.push(p(
        "threads",
        "int",
        threads,
        "simulated threads = cpus in the trace; work is partitioned the way the real parallel kernel does",
    ));
    v
}

/// Parameters after validation against the specs, with defaults filled in.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub workload: &'static str,
    pub map: Params,
}

impl Resolved {
    fn get(&self, k: &str) -> Result<&Value> {
        self.map
            .get(k)
            .ok_or_else(|| Error::input(format!("{}: internal: parameter '{k}' not declared", self.workload)))
    }
    pub fn int(&self, k: &str) -> Result<u64> {
        self.get(k)?
            .as_u64()
            .ok_or_else(|| Error::input(format!("{}: parameter '{k}' must be a non-negative integer", self.workload)))
    }
    pub fn float(&self, k: &str) -> Result<f64> {
        self.get(k)?
            .as_f64()
            .ok_or_else(|| Error::input(format!("{}: parameter '{k}' must be a number", self.workload)))
    }
    pub fn bool(&self, k: &str) -> Result<bool> {
        self.get(k)?
            .as_bool()
            .ok_or_else(|| Error::input(format!("{}: parameter '{k}' must be true or false", self.workload)))
    }
    /// A boolean of `RECORDED_WHEN_GIVEN`: `default` when it was not given.
    pub fn bool_or(&self, k: &str, default: bool) -> Result<bool> {
        if self.map.contains_key(k) {
            self.bool(k)
        } else {
            Ok(default)
        }
    }
    pub fn str(&self, k: &str) -> Result<&str> {
        self.get(k)?
            .as_str()
            .ok_or_else(|| Error::input(format!("{}: parameter '{k}' must be a string", self.workload)))
    }
    /// An integer that must be at least `min`.
    pub fn int_min(&self, k: &str, min: u64) -> Result<u64> {
        let v = self.int(k)?;
        if v < min {
            return Err(Error::input(format!("{}: parameter '{k}' must be at least {min}, got {v}", self.workload)));
        }
        Ok(v)
    }
    /// A float within [lo, hi].
    pub fn float_in(&self, k: &str, lo: f64, hi: f64) -> Result<f64> {
        let v = self.float(k)?;
        if !(v >= lo && v <= hi) {
            return Err(Error::input(format!("{}: parameter '{k}' must be between {lo} and {hi}, got {v}", self.workload)));
        }
        Ok(v)
    }
    pub fn threads(&self) -> Result<usize> {
        let t = self.int_min("threads", 1)?;
        if t > MAX_CPUS as u64 {
            return Err(Error::input(format!("{}: threads must be at most {MAX_CPUS}, got {t}", self.workload)));
        }
        Ok(t as usize)
    }
}

fn convert(workload: &str, spec: &ParamSpec, v: &Value) -> Result<Value> {
    let bad = |why: String| Error::input(format!("{workload}: parameter '{}' ({}): {why}", spec.name, spec.kind));
    match spec.kind {
        "int" | "size" => {
            let n = match v {
                Value::Number(n) => match n.as_u64() {
                    Some(x) => x,
                    None => match n.as_f64() {
                        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => f as u64,
                        _ => return Err(bad(format!("expected a non-negative integer, got {n}"))),
                    },
                },
                Value::String(s) => {
                    let r = if spec.kind == "size" { parse_size(s) } else { parse_count(s) };
                    r.map_err(|e| bad(e.to_string()))?
                }
                other => return Err(bad(format!("expected a number, got {other}"))),
            };
            Ok(Value::from(n))
        }
        "float" => {
            let f = match v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            match f {
                Some(f) if f.is_finite() => Ok(Value::from(f)),
                _ => Err(bad(format!("expected a finite number, got {v}"))),
            }
        }
        "bool" => {
            let b = match v {
                Value::Bool(b) => Some(*b),
                Value::Number(n) => match n.as_u64() {
                    Some(0) => Some(false),
                    Some(1) => Some(true),
                    _ => None,
                },
                Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => Some(true),
                    "false" | "0" | "no" | "off" => Some(false),
                    _ => None,
                },
                _ => None,
            };
            b.map(Value::Bool).ok_or_else(|| bad(format!("expected true or false, got {v}")))
        }
        _ => match v {
            Value::String(s) => Ok(Value::String(s.clone())),
            other => Err(bad(format!("expected a string, got {other}"))),
        },
    }
}

/// Parameters that change how a trace is produced, not which accesses it
/// holds (`values`: the data kept or only its addresses, `shadow.rs`). They
/// enter the resolved parameters, and so a trace's header, only when given,
/// so that traces made before they existed keep their bytes; read them with
/// [`Resolved::bool_or`].
const RECORDED_WHEN_GIVEN: &[&str] = &["values"];

pub(crate) fn resolve(info: &WorkloadInfo, given: &Params) -> Result<Resolved> {
    for k in given.keys() {
        if !info.params.iter().any(|s| s.name == k) {
            let names: Vec<&str> = info.params.iter().map(|s| s.name).collect();
            return Err(Error::input(format!(
                "{}: unknown parameter '{k}' (known: {})",
                info.name,
                names.join(", ")
            )));
        }
    }
    let mut map = Params::new();
    for s in &info.params {
        let v = match given.get(s.name) {
            Some(v) => convert(info.name, s, v)?,
            None if RECORDED_WHEN_GIVEN.contains(&s.name) => continue,
            None => convert(info.name, s, &Value::String(s.default.to_string()))?,
        };
        map.insert(s.name.to_string(), v);
    }
    Ok(Resolved { workload: info.name, map })
}

/// A validated workload, ready to lay out and run.
pub(crate) enum Prepared {
    Gups(gups::Cfg),
    Graph(graph::Cfg),
    Kv(kv::Cfg),
    Btree(btree::Cfg),
    Chase(pointer_chase::Cfg),
    Canneal(canneal::Cfg),
    Cg(cg::Cfg),
    Stream(stream::Cfg),
    Mysql(mysql::Cfg),
    Bt(bt::Cfg),
    Svm(svm::Cfg),
    Seqtouch(seqtouch::Cfg),
    Web(web::Cfg),
    Matrix(matrix::Cfg),
    Rbtree(rbtree::Cfg),
    Fftw(fftw::Cfg),
    Adversary(adversary::Cfg),
    Stride4m(stride4m::Cfg),
    Cmp(cmp::Cfg),
    Dirtyfile(dirtyfile::Cfg),
    Mapdummy(mapdummy::Cfg),
    Sharemicro(sharemicro::Cfg),
    Psr(psr_bench::Cfg),
    Hotcold(hotcold::Cfg),
}

impl Prepared {
    fn layout(&self) -> Result<Layout> {
        match self {
            Prepared::Gups(c) => gups::layout(c),
            Prepared::Graph(c) => graph::layout(c),
            Prepared::Kv(c) => kv::layout(c),
            Prepared::Btree(c) => btree::layout(c),
            Prepared::Chase(c) => pointer_chase::layout(c),
            Prepared::Canneal(c) => canneal::layout(c),
            Prepared::Cg(c) => cg::layout(c),
            Prepared::Stream(c) => stream::layout(c),
            Prepared::Mysql(c) => mysql::layout(c),
            Prepared::Bt(c) => bt::layout(c),
            Prepared::Svm(c) => svm::layout(c),
            Prepared::Seqtouch(c) => seqtouch::layout(c),
            Prepared::Web(c) => web::layout(c),
            Prepared::Matrix(c) => matrix::layout(c),
            Prepared::Rbtree(c) => rbtree::layout(c),
            Prepared::Fftw(c) => fftw::layout(c),
            Prepared::Adversary(c) => adversary::layout(c),
            Prepared::Stride4m(c) => stride4m::layout(c),
            Prepared::Cmp(c) => cmp::layout(c),
            Prepared::Dirtyfile(c) => dirtyfile::layout(c),
            Prepared::Mapdummy(c) => mapdummy::layout(c),
            Prepared::Sharemicro(c) => sharemicro::layout(c),
            Prepared::Psr(c) => psr_bench::layout(c),
            Prepared::Hotcold(c) => hotcold::layout(c),
        }
    }
    /// Simulated cpus of the trace: one per thread, except where threads are
    /// multiplexed on fewer hardware contexts (mysql).
    fn cpus(&self, r: &Resolved) -> Result<u32> {
        match self {
            Prepared::Mysql(c) => Ok(c.cpus as u32),
            _ => Ok(r.threads()? as u32),
        }
    }
    /// Memory needed beyond the regions while building the data (edge lists).
    fn temp_bytes(&self) -> u64 {
        match self {
            Prepared::Graph(c) => graph::temp_bytes(c),
            Prepared::Cg(c) => cg::temp_bytes(c),
            Prepared::Canneal(c) => canneal::temp_bytes(c),
            _ => 0,
        }
    }
    /// Bytes of regions a trace of this run holds as addresses only.
    fn elided_bytes(&self) -> u64 {
        match self {
            Prepared::Gups(c) => gups::elided_bytes(c),
            Prepared::Stream(c) => stream::elided_bytes(c),
            _ => 0,
        }
    }
    fn run<M: Mem>(&self, l: &Layout, m: &mut M) -> Result<Value> {
        match self {
            Prepared::Gups(c) => gups::run(c, l, m),
            Prepared::Graph(c) => graph::run(c, l, m),
            Prepared::Kv(c) => kv::run(c, l, m),
            Prepared::Btree(c) => btree::run(c, l, m),
            Prepared::Chase(c) => pointer_chase::run(c, l, m),
            Prepared::Canneal(c) => canneal::run(c, l, m),
            Prepared::Cg(c) => cg::run(c, l, m),
            Prepared::Stream(c) => stream::run(c, l, m),
            Prepared::Mysql(c) => mysql::run(c, l, m),
            Prepared::Bt(c) => bt::run(c, l, m),
            Prepared::Svm(c) => svm::run(c, l, m),
            Prepared::Seqtouch(c) => seqtouch::run(c, l, m),
            Prepared::Web(c) => web::run(c, l, m),
            Prepared::Matrix(c) => matrix::run(c, l, m),
            Prepared::Rbtree(c) => rbtree::run(c, l, m),
            Prepared::Fftw(c) => fftw::run(c, l, m),
            Prepared::Adversary(c) => adversary::run(c, l, m),
            Prepared::Stride4m(c) => stride4m::run(c, l, m),
            Prepared::Cmp(c) => cmp::run(c, l, m),
            Prepared::Dirtyfile(c) => dirtyfile::run(c, l, m),
            Prepared::Mapdummy(c) => mapdummy::run(c, l, m),
            Prepared::Sharemicro(c) => sharemicro::run(c, l, m),
            Prepared::Psr(c) => psr_bench::run(c, l, m),
            Prepared::Hotcold(c) => hotcold::run(c, l, m),
        }
    }
}

/// Every built-in workload with its parameters.
pub fn list() -> Vec<WorkloadInfo> {
    let mut v = vec![gups::info()];
    v.extend(graph::infos());
    v.extend([kv::info(), btree::info(), pointer_chase::info(), canneal::info(), cg::info(), stream::info()]);
    // The direct-segments paper's workloads (ISCA'13 Table 2), after the others.
    v.extend([kv::memcached_info(), mysql::info(), cg::npb_info(), bt::info()]);
    // The Ingens paper's workloads (OSDI'16 Tables 4, 5, 9, 10 and §3.1).
    v.extend([kv::redis_info(), svm::info(), seqtouch::info(), web::info()]);
    // The Navarro paper's workloads (OSDI'02 §6.2 Table 1, §6.5-6.7).
    v.extend([matrix::info(), rbtree::info(), fftw::info(), adversary::info(), stride4m::info()]);
    v.extend([cmp::info(), dirtyfile::info(), mapdummy::info()]);
    v.push(sharemicro::info());
    // The FHPM paper's PSR microbenchmark (§2.2, §6.3).
    v.push(psr_bench::info());
    // A hot set of a few percent beside a large cold table: the daemon study's case (issue #14).
    v.push(hotcold::info());
    v
}

fn prepare(name: &str, params: &Params) -> Result<(Prepared, Resolved)> {
    let info = list().into_iter().find(|w| w.name == name).ok_or_else(|| {
        let names: Vec<&str> = list().iter().map(|w| w.name).collect();
        Error::input(format!("unknown workload '{name}' (known: {})", names.join(", ")))
    })?;
    let r = resolve(&info, params)?;
    let prep = match info.name {
        "gups" => Prepared::Gups(gups::config(&r)?),
        "bfs" | "sssp" | "pagerank" | "graph500" => Prepared::Graph(graph::config(&r)?),
        "kv" | "memcached" | "redis" => Prepared::Kv(kv::config(&r)?),
        "btree" => Prepared::Btree(btree::config(&r)?),
        "pointer-chase" => Prepared::Chase(pointer_chase::config(&r)?),
        "canneal" => Prepared::Canneal(canneal::config(&r)?),
        "cg" | "npb-cg" => Prepared::Cg(cg::config(&r)?),
        "stream" => Prepared::Stream(stream::config(&r)?),
        "mysql" => Prepared::Mysql(mysql::config(&r)?),
        "npb-bt" => Prepared::Bt(bt::config(&r)?),
        "svm" => Prepared::Svm(svm::config(&r)?),
        "seqtouch" => Prepared::Seqtouch(seqtouch::config(&r)?),
        "web" => Prepared::Web(web::config(&r)?),
        "matrix" => Prepared::Matrix(matrix::config(&r)?),
        "rbtree" => Prepared::Rbtree(rbtree::config(&r)?),
        "fftw" => Prepared::Fftw(fftw::config(&r)?),
        "adversary" => Prepared::Adversary(adversary::config(&r)?),
        "stride4m" => Prepared::Stride4m(stride4m::config(&r)?),
        "cmp" => Prepared::Cmp(cmp::config(&r)?),
        "dirtyfile" => Prepared::Dirtyfile(dirtyfile::config(&r)?),
        "mapdummy" => Prepared::Mapdummy(mapdummy::config(&r)?),
        "sharemicro" => Prepared::Sharemicro(sharemicro::config(&r)?),
        "psr" => Prepared::Psr(psr_bench::config(&r)?),
        "hotcold" => Prepared::Hotcold(hotcold::config(&r)?),
        other => return Err(Error::input(format!("workload '{other}' is listed but not wired up"))),
    };
    Ok((prep, r))
}

/// Total physical memory of this machine (MemTotal), if readable.
fn mem_total() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn check_memory(name: &str, footprint: u64, temp: u64) -> Result<()> {
    let need = footprint.saturating_add(temp);
    if let Some(total) = mem_total() {
        if need > total / 10 * 9 {
            return Err(Error::input(format!(
                "{name}: needs about {} ({} of regions + {} while building the data), more than 90% of this machine's memory ({}); choose a smaller scale/size",
                fmt_size(need),
                fmt_size(footprint),
                fmt_size(temp),
                fmt_size(total)
            )));
        }
    }
    Ok(())
}

/// Which backend a run is planned for: a trace holds no data its workload
/// left out (`Prepared::elided_bytes`); a native run holds every region.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Trace,
    Native,
}

fn planned(name: &str, params: &Params, backend: Backend) -> Result<(Prepared, Resolved, Layout, u32)> {
    let (prep, r) = prepare(name, params)?;
    let layout = prep.layout()?;
    let elided = if backend == Backend::Trace { prep.elided_bytes() } else { 0 };
    check_memory(name, layout.footprint().saturating_sub(elided), prep.temp_bytes())?;
    let cpus = prep.cpus(&r)?;
    Ok((prep, r, layout, cpus))
}

/// Validate params and describe the run before it happens.
pub fn plan(name: &str, params: &Params) -> Result<WorkloadLayout> {
    let (_, r, layout, cpus) = planned(name, params, Backend::Trace)?;
    Ok(WorkloadLayout {
        workload: name.to_string(),
        footprint: layout.footprint(),
        regions: layout.regions,
        cpus,
        params: r.map,
    })
}

/// The trace header a trace of this run carries.
pub fn header(name: &str, params: &Params) -> Result<TraceHeader> {
    let l = plan(name, params)?;
    let mut h = TraceHeader::new(name);
    h.params = l.params;
    h.regions = l.regions;
    h.cpus = l.cpus;
    h.accesses_per_second = None;
    Ok(h)
}

/// Trace mode: every access of the algorithm goes to `sink`.
pub fn trace(name: &str, params: &Params, sink: &mut dyn AccessSink) -> Result<RunOutput> {
    let (prep, _, layout, _) = planned(name, params, Backend::Trace)?;
    let mut m = Traced::new(sink);
    // Cancellation unwinds out of the generator (see `Traced::touch`); the
    // sink is left as it was (an unfinished trace writer deletes its
    // temporary file when dropped).
    let result = hugescope_core::cancel::catch_cancel(|| prep.run(&layout, &mut m))?;
    Ok(RunOutput { result, accesses: m.accesses })
}

/// Whether the system THP mode is `always` (then no base-page baseline exists).
pub fn thp_always() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.contains("[always]"))
        .unwrap_or(false)
}

/// Native mode: the same algorithm on real memory at the same addresses.
/// Only one native run per process at a time (the addresses are fixed).
pub fn native(name: &str, params: &Params, opts: &NativeOptions, on_progress: &mut dyn FnMut(&str)) -> Result<NativeReport> {
    native_in(name, params, opts, Native::new(opts.thp, on_progress))
}

/// `native`, reporting every [`NativeEvent`] (setup done, progress, run done) to
/// `on_event`: for callers that act when the data is populated (apply a plan) or
/// measure before the regions are unmapped. The hook runs on the workload's thread.
pub fn native_events(name: &str, params: &Params, opts: &NativeOptions, on_event: &mut dyn FnMut(NativeEvent<'_>)) -> Result<NativeReport> {
    native_in(name, params, opts, Native::with_events(opts.thp, on_event))
}

fn native_in(name: &str, params: &Params, opts: &NativeOptions, mut m: Native<'_>) -> Result<NativeReport> {
    let (prep, _, layout, _) = planned(name, params, Backend::Native)?;
    let mut warnings = Vec::new();
    if thp_always() {
        warnings.push(
            "transparent_hugepage/enabled is [always]: the kernel backs memory with huge pages without madvise, so the base-page baseline is not available".to_string(),
        );
    }
    let result = prep.run(&layout, &mut m)?;
    let (setup_seconds, run_seconds) = m.times();
    let regions = layout
        .regions
        .into_iter()
        .map(|mut r| {
            r.hugepage_advised = opts.thp;
            r
        })
        .collect();
    Ok(NativeReport { result, setup_seconds, run_seconds, regions, warnings })
}
