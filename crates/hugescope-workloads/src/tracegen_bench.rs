//! Trace-generation throughput behind `hugescope bench` (issue #16): a
//! workload's generator alone, its accesses dropped by a sink in the same
//! process, against the same generator writing a `.hst` file end to end
//! (packing, byte planes, zstd, CRC, the disk, fsync and rename) through the
//! path `hugescope trace` runs. Both passes include the workload's setup (a
//! GUPS table, a graph), which is also reported on its own so it can be seen
//! not to dominate. A measurement, never a test.

use std::path::Path;
use std::time::Instant;

use hugescope_core::bench::{throughput, Throughput};
use hugescope_core::trace::{Access, AccessSink};
use hugescope_core::Result;
use serde::Serialize;

use crate::registry::{trace, Params};
use crate::tracefile::{trace_to_file, FileOptions};

#[derive(Clone, Debug, Serialize)]
pub struct TracegenReport {
    pub kind: &'static str,
    pub how: &'static str,
    pub workload: String,
    pub params: Params,
    pub repeats: u32,
    /// Whether the file was encoded on the generator's thread.
    pub sequential: bool,
    /// The generator into a sink that drops every access.
    pub generator: Throughput,
    /// The generator writing a trace file, finished and renamed.
    pub end_to_end: Throughput,
    /// Setup before the first access (table fill, graph construction) in the
    /// generator's best pass, seconds.
    pub setup_seconds: f64,
    /// Bytes of the trace file written.
    pub file_bytes: u64,
    /// end-to-end / generator-alone throughput (best passes); issue #16 asks >= 0.5.
    pub ratio: f64,
    /// The same for the median passes.
    pub median_ratio: f64,
}

/// Drops accesses, noting when the first one arrived (the end of setup). As
/// cheap as a sink can be (a count and one predictable branch), so the
/// generator alone is not slowed by its own measurement; the call itself
/// (through `&mut dyn AccessSink`) cannot be optimised away.
struct Discard {
    accesses: u64,
    first: Option<Instant>,
}

impl AccessSink for Discard {
    #[inline]
    fn access(&mut self, _a: Access) {
        if self.accesses == 0 {
            self.first = Some(Instant::now());
        }
        self.accesses += 1;
    }
}

/// Measure workload `name` with `params`: `repeats` passes of each kind,
/// best and median; the trace files go to `dir` and are deleted. `sequential`
/// encodes on the generator's thread (what a second thread buys).
pub fn tracegen_throughput(
    name: &str,
    params: &Params,
    repeats: u32,
    dir: &Path,
    sequential: bool,
) -> Result<TracegenReport> {
    let path = dir.join(format!("tracegen-{name}.hst"));
    // The two kinds of pass alternate, so drifting load on the machine and
    // the kernel's state (free huge pages, page cache) weigh on both alike.
    let (mut gen_times, mut e2e_times, mut setups) = (Vec::new(), Vec::new(), Vec::new());
    let (mut n_gen, mut n_e2e, mut file_bytes) = (0, 0, 0);
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        let mut sink = Discard {
            accesses: 0,
            first: None,
        };
        n_gen = trace(name, params, &mut sink)?.accesses;
        gen_times.push(start.elapsed().as_secs_f64());
        setups.push(
            sink.first
                .map_or(0.0, |t| t.duration_since(start).as_secs_f64()),
        );

        let start = Instant::now();
        let w = trace_to_file(
            name,
            params,
            &path,
            FileOptions {
                sequential,
                ..Default::default()
            },
        );
        e2e_times.push(start.elapsed().as_secs_f64());
        file_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let _ = std::fs::remove_file(&path);
        n_e2e = w?.output.accesses;
    }
    // The setup of the best generator pass.
    let best = (0..gen_times.len())
        .min_by(|&a, &b| gen_times[a].total_cmp(&gen_times[b]))
        .unwrap_or(0);
    let setup_seconds = setups[best];
    let generator = throughput("generator alone", n_gen, gen_times);
    let end_to_end = throughput("end to end to a file", n_e2e, e2e_times);
    Ok(TracegenReport {
        kind: "measurement",
        how: "wall time (std::time::Instant) of whole runs (setup included) in one process, the two kinds alternating, best and median of the repeats; the generator on one thread, the file's encoding on a second unless sequential",
        workload: name.into(),
        params: params.clone(),
        repeats,
        sequential,
        ratio: end_to_end.accesses_per_second / generator.accesses_per_second,
        median_ratio: end_to_end.median_accesses_per_second / generator.median_accesses_per_second,
        generator,
        end_to_end,
        setup_seconds,
        file_bytes,
    })
}
