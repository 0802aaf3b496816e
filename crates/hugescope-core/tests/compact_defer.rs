//! Linux's compaction deferral (os/compact_defer.rs) through the Linux THP
//! policy's `defer_compaction` knob: off it changes nothing; on, only
//! synchronous (daemon) failures back off, and every skipped attempt is one
//! compaction fewer. The back-off's own hand count is in the module's tests.

mod common;

use common::{header, sim, Rng, BASE};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::costs::OsCosts;
use hugescope_core::os::kernel::{Fragmentation, Kernel, OsConfig};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::Access;

/// 256 MiB of memory with an unmovable page in every 2MB block: no huge
/// allocation can succeed and every compaction fails. Zero OS costs, so
/// virtual time is the access count alone and runs with and without
/// deferral see khugepaged wake at the same accesses.
fn blocked() -> OsConfig {
    OsConfig {
        time: Some(TimeBase::AccessRate { accesses_per_second: 10_000.0 }),
        fragmentation: Some(Fragmentation::Pcc { share: 1.0 }),
        memory_bytes: Some(256 << 20),
        costs: OsCosts::zero(),
        ..Default::default()
    }
}

/// Random 8-byte reads over 64 MiB: every region's first fault tries a huge page.
fn run(s: &mut Simulator<Kernel>, n: u64) {
    let mut r = Rng(7);
    for _ in 0..n {
        s.step(Access::read(BASE + (r.next() % ((64 << 20) / 8)) * 8));
    }
}

fn stats_json(s: &Simulator<Kernel>) -> serde_json::Value {
    serde_json::to_value(s.pt.stats()).unwrap()
}

#[test]
fn knob_off_leaves_the_run_identical() {
    let h = header(64 << 20, false);
    let mut d = sim(&h, blocked(), "linux", &[("defrag", "always")]);
    let mut off = sim(&h, blocked(), "linux", &[("defrag", "always"), ("defer_compaction", "false")]);
    run(&mut d, 300_000);
    run(&mut off, 300_000);
    assert_eq!(d.counters(), off.counters());
    assert_eq!(stats_json(&d), stats_json(&off));
    // Nothing of the mechanism shows in a result that does not use it.
    assert!(stats_json(&off).get("compactions_deferred").is_none());
    assert!(d.pt.stats().compactions > 0, "the scenario must compact");
}

#[test]
fn fault_time_failures_never_defer() {
    // Linux 4.3 compacts asynchronously at a THP fault and defers only after
    // a synchronous failure: without khugepaged nothing is ever deferred.
    let h = header(64 << 20, false);
    let p = [("defrag", "always"), ("khugepaged", "false")];
    let mut off = sim(&h, blocked(), "linux", &p);
    let mut on = sim(&h, blocked(), "linux", &[p[0], p[1], ("defer_compaction", "true")]);
    run(&mut off, 300_000);
    run(&mut on, 300_000);
    // 32 regions of 64 MiB, each's first fault a failed compaction.
    assert_eq!(off.pt.stats().compactions, 32);
    assert_eq!(on.pt.stats().compactions, 32);
    assert_eq!(on.pt.stats().compactions_deferred, 0);
}

#[test]
fn khugepaged_failures_defer_fault_compactions() {
    // khugepaged wakes every 10 ms of virtual time (100 accesses) from the
    // start, so its synchronous failures come before most first faults.
    let h = header(64 << 20, false);
    let p = [("defrag", "always"), ("scan_sleep_ms", "10"), ("alloc_sleep_ms", "10")];
    let mut off = sim(&h, blocked(), "linux", &p);
    let mut on = sim(&h, blocked(), "linux", &[p[0], p[1], p[2], ("defer_compaction", "true")]);
    run(&mut off, 300_000);
    run(&mut on, 300_000);
    let (so, sn) = (off.pt.stats(), on.pt.stats());
    assert!(sn.compactions_deferred > 0, "no compaction deferred");
    // Every compaction fails either way and time does not depend on them
    // (zero costs): each skipped attempt is exactly one compaction fewer.
    assert_eq!(sn.compactions + sn.compactions_deferred, so.compactions);
    assert_eq!(sn.compaction_successes, 0);
    assert_eq!(on.pt.huge_bytes(), 0);
    on.pt.check_invariants().unwrap();
}
