//! Throughput measurement behind `hugescope bench` (criterion benches live in
//! `benches/`). Reports accesses per second of decoding a trace alone (the
//! floor) and of decoding plus simulating it, measured in one run so their
//! ratio shows what the MMU model costs. A measurement, never a test.

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

/// Run `f` `repeats` times (at least once) and keep the best and median wall
/// times; `f` returns the accesses it handled.
pub fn best_of(repeats: u32, what: &str, mut f: impl FnMut() -> Result<u64>) -> Result<Throughput> {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        n = f()?;
        times.push(t.elapsed().as_secs_f64());
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

/// Decode-only and decode+simulate throughput of a trace file (best of `repeats`).
pub fn file_throughput(path: &str, cfg: MachineConfig, pages: &str, repeats: u32) -> Result<BenchReport> {
    let decode_only = best_of(repeats, "decode only", || {
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
    })?;
    let geo = crate::hw::Geometry::new(&cfg)?;
    let preset = cfg.name.clone();
    let simulate = best_of(repeats, "decode + simulate", || {
        let mut r = HstReader::open(path)?;
        let map = StaticMap::from_spec(pages, &geo)?;
        let mut sim = Simulator::new(cfg.clone(), r.header().cpus as usize, map)?;
        let n = sim.run_reader(&mut r)?;
        std::hint::black_box(sim.counters().walks);
        Ok(n)
    })?;
    Ok(BenchReport {
        kind: "measurement",
        how: "wall time (std::time::Instant) of one pass over the file, best and median of the repeats, one thread",
        trace: path.into(),
        preset,
        pages: pages.into(),
        repeats,
        ratio: simulate.accesses_per_second / decode_only.accesses_per_second,
        decode_only,
        simulate,
    })
}
