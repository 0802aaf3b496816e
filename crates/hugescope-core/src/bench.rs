//! Throughput measurement behind `hugescope bench` (criterion benches live in
//! `benches/`). Reports accesses per second of decoding a trace alone (the
//! floor) and of decoding plus simulating it, measured in one run so their
//! ratio shows what the MMU model costs. A measurement, never a test.
//!
//! `pipeline_throughput` measures the full path `hugescope simulate` runs
//! (decode + MMU + kernel + policy, `run::simulate_policies`) for each policy,
//! beside the static 4KB map and the decode floor, with the passes
//! interleaved (decode, then each row, repeated) so load on a shared machine
//! falls on every row alike.

use crate::config::MachineConfig;
use crate::pagemap::StaticMap;
use crate::sim::Simulator;
use crate::trace::hst::HstReader;
use crate::trace::Access;
use crate::Result;
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug, Serialize)]
pub struct Throughput {
    pub what: String,
    pub accesses: u64,
    /// Best (shortest) pass: the least disturbed by other load on the machine.
    pub seconds: f64,
    pub accesses_per_second: f64,
    /// Median pass, for how much the passes varied.
    pub median_seconds: f64,
    pub median_accesses_per_second: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub kind: &'static str,
    pub how: &'static str,
    pub trace: String,
    pub preset: String,
    pub pages: String,
    pub repeats: u32,
    pub decode_only: Throughput,
    pub simulate: Throughput,
    /// simulate / decode-only throughput: the share of the floor speed kept.
    pub ratio: f64,
}

/// Wall time of one call of `f`, which returns the accesses it processed.
fn timed(f: &mut dyn FnMut() -> Result<u64>) -> Result<(u64, f64)> {
    let t = Instant::now();
    let n = f()?;
    Ok((n, t.elapsed().as_secs_f64()))
}

/// Run `f` `repeats` times (at least once) and keep the best and median wall
/// times; `f` returns the accesses it handled.
pub fn best_of(repeats: u32, what: &str, mut f: impl FnMut() -> Result<u64>) -> Result<Throughput> {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..repeats.max(1) {
        let (k, t) = timed(&mut f)?;
        n = k;
        times.push(t);
    }
    Ok(throughput(what, n, times))
}

/// Best and median of pass times (at least one) over `n` accesses each.
pub fn throughput(what: &str, n: u64, mut times: Vec<f64>) -> Throughput {
    times.sort_by(f64::total_cmp);
    let (best, median) = (times[0], times[times.len() / 2]);
    Throughput {
        what: what.into(),
        accesses: n,
        seconds: best,
        accesses_per_second: n as f64 / best,
        median_seconds: median,
        median_accesses_per_second: n as f64 / median,
    }
}

/// One pass decoding the trace at `path` and unpacking every record like the
/// simulator does, nothing else: the floor every simulation pays.
fn decode_pass(path: &str) -> Result<u64> {
    let mut r = HstReader::open(path)?;
    let mut n = 0u64;
    let mut sink = 0u64;
    while let Some(chunk) = r.next_chunk()? {
        for &rec in chunk {
            // Unpack like the simulator does, and keep the result alive.
            sink = sink.wrapping_add(Access::unpack(rec).addr);
        }
        n += chunk.len() as u64;
    }
    std::hint::black_box(sink);
    Ok(n)
}

/// One pass simulating the trace at `path` over the static map `pages`.
fn static_pass(path: &str, cfg: &MachineConfig, pages: &str) -> Result<u64> {
    let geo = crate::hw::Geometry::new(cfg)?;
    let mut r = HstReader::open(path)?;
    let map = StaticMap::from_spec(pages, &geo)?;
    let mut sim = Simulator::new(cfg.clone(), r.header().cpus as usize, map)?;
    let n = sim.run_reader(&mut r)?;
    std::hint::black_box(sim.counters().walks);
    Ok(n)
}

/// Decode-only and decode+simulate throughput of a trace file (best of `repeats`).
pub fn file_throughput(path: &str, cfg: MachineConfig, pages: &str, repeats: u32) -> Result<BenchReport> {
    let decode_only = best_of(repeats, "decode only", || decode_pass(path))?;
    let preset = cfg.name.clone();
    let simulate = best_of(repeats, "decode + simulate", || static_pass(path, &cfg, pages))?;
    Ok(BenchReport {
        kind: "measurement",
        how: "wall time (std::time::Instant) of one pass over the file, best and median of the repeats; decode only on one \
              thread, decode + simulate with the trace decoded on a second thread when the process may use two cpus",
        trace: path.into(),
        preset,
        pages: pages.into(),
        repeats,
        ratio: simulate.accesses_per_second / decode_only.accesses_per_second,
        decode_only,
        simulate,
    })
}

/// One row of `pipeline_throughput`: what `hugescope simulate` runs for one
/// policy (or the static map), against the decode floor of the same run.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineRow {
    /// A policy spec (`pcc`, `linux`) or `static 4k`.
    pub what: String,
    pub simulate: Throughput,
    /// Best simulate / best decode-only throughput.
    pub ratio: f64,
    /// Median simulate / median decode-only throughput.
    pub median_ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PipelineReport {
    pub kind: &'static str,
    pub how: &'static str,
    pub trace: String,
    pub preset: String,
    pub repeats: u32,
    pub decode_only: Throughput,
    pub rows: Vec<PipelineRow>,
}

/// The rows `pipeline_throughput` measures besides the policies: a static
/// map of base pages (the MMU alone, no kernel).
pub const STATIC_ROW: &str = "static 4k";

/// Throughput of the decode floor and of the full simulation of each of
/// `policies` (and `STATIC_ROW`, when listed) over the trace at `path` on
/// machine `preset` with the default OS configuration and no `base` run:
/// exactly `run::simulate_policies` of one policy, as `hugescope simulate
/// --no-base` runs it. `repeats` rounds, each one pass of every row in turn.
pub fn pipeline_throughput(path: &str, preset: &str, rows: &[String], repeats: u32) -> Result<PipelineReport> {
    pipeline_throughput_set(path, preset, &[], rows, repeats)
}

/// The machine keys of the PCC authors' model beside `--preset
/// pcc-artifact` (docs/policies-pcc-hawkeye.md, "The authors' model as a
/// preset"): the second 4KB L1 fill after every walk.
pub const ARTIFACT_SETS: &[&str] = &["l1_duplicate_fill=true"];

/// The policy row of the authors' model (same section): the artifact's LFU
/// list, decision schedule and flush after a read. `interval_accesses` is a
/// bench *input*, not the artifact's 30 x accesses per second: 3,000,000
/// gives reads at 100k, 3M, 3.1M, 6M, ... accesses, so a trace of tens of
/// millions of accesses pays the PCC's reads several times.
pub const ARTIFACT_PCC_ROW: &str =
    "pcc:replacement=lfu_artifact,artifact_phase=true,flush_on_read=true,interval_accesses=3000000";

/// `pipeline_throughput` with machine keys `sets` (`--set KEY=VALUE`) on
/// top of `preset`, for every row: e.g. the authors' model, `pcc-artifact`
/// with `ARTIFACT_SETS` and the row `ARTIFACT_PCC_ROW` (one configuration,
/// as `hugescope simulate --no-base` runs it).
pub fn pipeline_throughput_set(path: &str, preset: &str, sets: &[String], rows: &[String], repeats: u32) -> Result<PipelineReport> {
    type Pass<'a> = Box<dyn FnMut() -> Result<u64> + 'a>;
    let machine = crate::configuration::Config::load(Some(preset), None, sets, &[])?.machine;
    let mut passes: Vec<(String, Pass)> = vec![("decode only".into(), Box::new(|| decode_pass(path)))];
    for what in rows {
        if what == STATIC_ROW {
            let m = machine.clone();
            passes.push((what.clone(), Box::new(move || static_pass(path, &m, "4k"))));
            continue;
        }
        // The configuration `hugescope simulate --policy WHAT --no-base` builds.
        let cfg = crate::configuration::Config::load(Some(preset), None, sets, std::slice::from_ref(what))?;
        let specs = cfg.specs()?;
        let os = cfg.os.os_config();
        let opts = cfg.run_options(false);
        passes.push((
            what.clone(),
            Box::new(move || {
                let res = crate::run::simulate_policies(path, &cfg.machine, &os, &specs, &opts)?;
                Ok(res[0].translation.accesses)
            }),
        ));
    }
    let mut times = vec![Vec::new(); passes.len()];
    let mut counts = vec![0u64; passes.len()];
    for _ in 0..repeats.max(1) {
        for (i, (_, f)) in passes.iter_mut().enumerate() {
            let (n, t) = timed(f)?;
            counts[i] = n;
            times[i].push(t);
        }
    }
    let mut out = passes.iter().zip(times).zip(counts).map(|(((what, _), t), n)| throughput(what, n, t));
    let decode_only = out.next().expect("the decode row is first");
    let rows = out
        .map(|t| {
            Ok(PipelineRow {
                what: t.what.clone(),
                ratio: t.accesses_per_second / decode_only.accesses_per_second,
                median_ratio: t.median_accesses_per_second / decode_only.median_accesses_per_second,
                simulate: t,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PipelineReport {
        kind: "measurement",
        how: "wall time (std::time::Instant) of one pass over the file, passes interleaved (decode, then each row, repeated), \
              best and median of the repeats; the decode row on one thread, the simulate rows as hugescope simulate runs \
              them (the trace decoded, and the PCC updates applied, on other threads when the process may use two cpus: \
              trace::readahead, os::pcc_bank)",
        trace: path.into(),
        preset: machine.name.clone(),
        repeats,
        decode_only,
        rows,
    })
}
