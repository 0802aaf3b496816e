//! Progress reports (`hugescope_core::progress`): a simulation tells its hook
//! how many accesses are done out of the trace's count, at each crossing of
//! the reporting step and at the end, in order; a run without a hook gives the
//! same result as one with.

use std::sync::{Arc, Mutex};

use hugescope_core::config::MachineConfig;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::progress::ProgressHook;
use hugescope_core::run::{simulate_concurrent, simulate_policies, PolicySpec, RunOptions};
use hugescope_core::sched::SchedOptions;
use hugescope_core::sim::{simulate_static, simulate_static_with_progress};
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, Region, TraceHeader};

mod common;
use common::hstfile::accesses;

const N: usize = 10_000;
const CHUNK: usize = 1000;
const BASE: u64 = 0x7e00_0000_0000;

/// A trace of N accesses in chunks of CHUNK records.
fn trace(dir: &std::path::Path) -> String {
    let p = dir.join("t.hst");
    let mut h = TraceHeader::new("progress");
    h.regions.push(Region::new("r", BASE, 16 << 20));
    let mut w = HstWriter::create(&p, &h).unwrap().with_chunk_records(CHUNK);
    for a in accesses(N, 7) {
        w.write(Access { addr: BASE + (a.addr & 0xff_ffff), cpu: 0, pid: 0, ..a }).unwrap();
    }
    w.finish().unwrap();
    p.to_str().unwrap().to_string()
}

fn recorder(shift: u32) -> (ProgressHook, Arc<Mutex<Vec<(u64, u64)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (ProgressHook::every(shift, move |d, t| s.lock().unwrap().push((d, t))), seen)
}

#[test]
fn simulations_report_each_step_and_the_end() {
    let d = tempfile::tempdir().unwrap();
    let p = trace(d.path());
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let n = N as u64;

    // Static map, steps of 2^12 = 4096 accesses, chunks of 1000: the chunks
    // ending at 5000 and 9000 cross 4096 and 8192; 10000 is the end.
    let (hook, seen) = recorder(12);
    let with = simulate_static_with_progress(&p, m.clone(), "4k", hook).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(5000, n), (9000, n), (n, n)]);
    let without = simulate_static(&p, m.clone(), "4k").unwrap();
    assert_eq!(serde_json::to_value(&with.translation).unwrap(), serde_json::to_value(&without.translation).unwrap());

    // Policies (and base) step through each chunk together: one count, the trace's.
    let (hook, seen) = recorder(12);
    let specs = [PolicySpec::parse("pcc").unwrap()];
    let opts = RunOptions { duration_s: Some(60.0), with_base: true, progress: hook, ..Default::default() };
    let with = simulate_policies(&p, &m, &OsConfig::default(), &specs, &opts).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(5000, n), (9000, n), (n, n)]);
    let plain = RunOptions { duration_s: Some(60.0), with_base: true, ..Default::default() };
    let without = simulate_policies(&p, &m, &OsConfig::default(), &specs, &plain).unwrap();
    assert_eq!(with[0].translation.walks, without[0].translation.walks);
    assert_eq!(with[0].os_stats.promotions, without[0].os_stats.promotions);

    // Two concurrent copies under one policy and base: 2 runs x 2 x N accesses,
    // counted in order (each run's count starts where the previous ended).
    let (hook, seen) = recorder(10);
    let opts = RunOptions { duration_s: Some(60.0), with_base: true, progress: hook, ..Default::default() };
    simulate_concurrent(&[p.clone(), p.clone()], &m, &OsConfig::default(), &specs, &opts, &SchedOptions::default()).unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(seen.iter().all(|&(_, t)| t == 4 * n), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "not increasing: {seen:?}");
    assert!(seen.last().unwrap().0 <= 4 * n && seen.iter().any(|&(x, _)| x > 2 * n), "{seen:?}");
}
