//! Cancellation (`hugescope_core::cancel`): with a request pending, every pass
//! over a trace stops at its next chunk with `Error::Cancelled`, a merge leaves
//! neither its output nor a temporary file, and withdrawing the request lets
//! the same calls succeed. One test in a binary of its own: the request is
//! process-wide and would stop other tests running alongside.

use hugescope_core::cancel;
use hugescope_core::config::MachineConfig;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::reuse::{analyze_file, Average, ReuseOptions};
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::profile::profile_walks;
use hugescope_core::trace::hst::{summarize, HstWriter};
use hugescope_core::trace::merge::{merge, MergeOptions};
use hugescope_core::trace::{Access, Region, TraceHeader};
use hugescope_core::Error;

mod common;
use common::hstfile::accesses;

#[test]
fn every_pass_stops_on_request_and_runs_again_after() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    let mut h = TraceHeader::new("cancel");
    h.regions.push(Region::new("r", 0x7e00_0000_0000, 16 << 20));
    let mut w = HstWriter::create(&p, &h).unwrap();
    for a in accesses(3000, 5) {
        w.write(Access { addr: 0x7e00_0000_0000 + (a.addr & 0xff_ffff), cpu: 0, pid: 0, ..a }).unwrap();
    }
    w.finish().unwrap();
    let ps = p.to_str().unwrap();
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs = [PolicySpec::parse("pcc").unwrap(), PolicySpec::parse("oracle").unwrap()];
    let opts = RunOptions { duration_s: Some(60.0), with_base: true, ..Default::default() };
    let ropts = ReuseOptions { threshold: 1024.0, average: Average::Mean, small_shift: 12, huge_shift: 21, max_points: 10, seed: 1 };
    let out = d.path().join("merged.hst");
    let mopts = MergeOptions { slice: 100, separate_cpus: true };
    let cancelled = |r: Result<(), Error>, what: &str| assert!(matches!(r, Err(Error::Cancelled)), "{what}: {r:?}");

    cancel::request();
    cancelled(simulate_policies(ps, &m, &OsConfig::default(), &specs, &opts).map(drop), "simulate");
    cancelled(profile_walks(ps, &m).map(drop), "profile");
    cancelled(hugescope_core::sim::simulate_static(ps, m.clone(), "4k").map(drop), "static");
    cancelled(analyze_file(ps, &ropts).map(drop), "reuse");
    cancelled(summarize(ps, true).map(drop), "verify");
    cancelled(hugescope_core::bench::file_throughput(ps, m.clone(), "4k", 1).map(drop), "bench");
    cancelled(merge(&[ps, ps], out.to_str().unwrap(), &mopts).map(drop), "merge");
    let mut left: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    left.sort();
    assert_eq!(left, vec![std::ffi::OsString::from("t.hst")], "merge left files behind");
    // Reading only the footer is not a pass: still answers.
    assert!(summarize(ps, false).is_ok());
    assert_eq!(Error::Cancelled.to_string(), "interrupted");

    cancel::clear();
    assert_eq!(simulate_policies(ps, &m, &OsConfig::default(), &specs, &opts).unwrap().len(), 2);
    assert!(merge(&[ps, ps], out.to_str().unwrap(), &mopts).is_ok());
}
