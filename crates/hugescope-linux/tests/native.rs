//! A built-in workload run natively in this process with a plan applied at its
//! progress points. Both runs share one test so the fixed-address regions of two
//! native runs never overlap in time (one native run per process at a time).

mod common;
use common::*;
use hugescope_core::plan::When;
use hugescope_linux::collapse::Status;
use hugescope_linux::native::{run_native, NativePlan, NativeRunOptions};

#[test]
fn gups_all_huge_versus_base_and_progress_entries() {
    if skip("gups_all_huge_versus_base_and_progress_entries", thp_skip_reason()) {
        return;
    }
    let mut params = hugescope_workloads::Params::new();
    params.insert("size".into(), "16MiB".into());
    params.insert("updates".into(), "3M".into()); // progress points at 1048576 and 2097152 updates
    let opts = NativeRunOptions { sample_ms: 20, ..NativeRunOptions::default() };

    let all = run_native("gups", &params, &NativePlan::All, &opts).unwrap();
    assert_eq!(all.applied.len(), 1);
    assert_eq!(all.applied[0].outcome.status, Status::Collapsed, "{}", all.applied[0].outcome.reason);
    assert_eq!(all.applied[0].point, "setup_done");
    assert_eq!(all.huge_bytes_after_setup, Some(16 * MIB));
    assert_eq!(all.huge_bytes_end, Some(16 * MIB));
    assert!(all.collapse_setup_s > 0.0 && all.run_s > 0.0);

    let base = run_native("gups", &params, &NativePlan::None, &opts).unwrap();
    assert!(base.applied.is_empty());
    assert_eq!(base.result, all.result, "a plan changes speed, never the result");
    let madvise = hugescope_linux::ThpState::read().map(|s| s.enabled.selected == "madvise").unwrap_or(false);
    if madvise {
        assert_eq!(base.huge_bytes_end, Some(0));
    }

    let base_addr = all.regions_end[0].base;
    let plan = vec![
        entry(base_addr, 4 * MIB, When::Progress("updates:1048576".into())),
        entry(base_addr + 8 * MIB, 2 * MIB, When::Progress("nope:1".into())),
        // Recorded between points (simulate --emit-plan): applied at the next
        // point after the label, never before; with 0 accesses, at the label.
        entry(base_addr + 10 * MIB, 2 * MIB, after("updates:1048576", 1000)),
        entry(base_addr + 12 * MIB, 2 * MIB, after("updates:2097152", 1000)),
        entry(base_addr + 14 * MIB, 2 * MIB, after("updates:1048576", 0)),
    ];
    let p = run_native("gups", &params, &NativePlan::Entries(plan), &opts).unwrap();
    assert_eq!(p.applied[0].outcome.status, Status::Collapsed, "{}", p.applied[0].outcome.reason);
    assert_eq!(p.applied[0].point, "progress:updates:1048576");
    assert!(p.collapse_run_s > 0.0 && p.run_s < p.run_s_with_hooks);
    assert_eq!(p.applied[1].outcome.status, Status::Skipped);
    assert!(p.applied[1].outcome.reason.contains("never reached"), "{}", p.applied[1].outcome.reason);
    let find = |start: u64| p.applied.iter().find(|a| a.outcome.start == start).expect("every entry is reported");
    let next = find(base_addr + 10 * MIB);
    assert_eq!((next.outcome.status, next.point.as_str()), (Status::Collapsed, "progress:updates:2097152"), "{}", next.outcome.reason);
    let last = find(base_addr + 12 * MIB);
    assert_eq!(last.outcome.status, Status::Skipped);
    assert!(last.outcome.reason.contains("no progress point after it"), "{}", last.outcome.reason);
    let zero = find(base_addr + 14 * MIB);
    assert_eq!((zero.outcome.status, zero.point.as_str()), (Status::Collapsed, "progress:updates:1048576"), "{}", zero.outcome.reason);
    assert_eq!(p.huge_bytes_end, Some(8 * MIB));
}

fn after(label: &str, accesses: u64) -> When {
    When::AfterMarker { label: label.into(), accesses }
}
