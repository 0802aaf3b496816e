//! Launching a command with ASLR off and a time-based plan.

mod common;
use common::*;
use hugescope_core::plan::When;
use hugescope_linux::collapse::Status;
use hugescope_linux::launch::{launch, LaunchOptions, ADDR_NO_RANDOMIZE};
use std::process::Command;

#[test]
fn launch_disables_aslr_and_applies_timed_plan() {
    if skip("launch_disables_aslr_and_applies_timed_plan", root_skip_reason()) {
        return;
    }
    let a: u64 = 0x7e40_0000_0000;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hugescope-memhold"));
    cmd.args(["--addr", &format!("{a:#x}"), "--size", "8M", "--exit-after", "1.5"]);
    cmd.stdout(std::process::Stdio::null());
    let plan = [
        entry(a, 2 * MIB, When::Start),
        entry(a + 4 * MIB, 4 * MIB, When::TimeS(0.6)),
        entry(a + 64 * MIB, 2 * MIB, When::Accesses(1000)),
    ];
    let opts = LaunchOptions { sample_ms: 50, ..LaunchOptions::default() };
    let r = launch(cmd, &plan, &opts).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&r).unwrap());
    let pers = r.personality.expect("personality read while the child ran");
    assert_ne!(pers & ADDR_NO_RANDOMIZE, 0, "personality {pers:#x}");
    assert!(r.aslr_disabled);
    assert_eq!(r.exit_code, Some(0));
    assert!(r.wall_s >= 1.5 && r.wall_s < 10.0, "wall {}", r.wall_s);
    assert!(r.peak_rss_bytes >= 8 * MIB);
    assert_eq!(r.applied.len(), 3);
    let start = &r.applied[0];
    assert_eq!(start.outcome.status, Status::Collapsed, "{}", start.outcome.reason);
    let timed = &r.applied[1];
    assert_eq!(timed.outcome.status, Status::Collapsed, "{}", timed.outcome.reason);
    assert!(timed.t_s >= 0.6 && timed.t_s < 1.5, "applied at {}", timed.t_s);
    assert_eq!(timed.outcome.bytes_huge_after_exact, Some(4 * MIB));
    assert_eq!(r.applied[2].outcome.status, Status::Skipped);
    assert!(timed.done_s >= timed.t_s && timed.done_s <= r.wall_s, "done at {}", timed.done_s);
    // Coverage over time: 2 MiB after the start entry, 6 MiB once the timed
    // step has returned (not from when it began: under load the collapse
    // itself took 60 ms and a sample fell inside it).
    let before: Vec<_> = r.samples.iter().filter(|s| s.t_s > 0.1 && s.t_s < 0.55).collect();
    let after: Vec<_> = r.samples.iter().filter(|s| s.t_s > timed.done_s + 0.01).collect();
    assert!(!before.is_empty() && !after.is_empty(), "{:?}", r.samples);
    assert!(before.iter().all(|s| s.anon_huge_bytes == 2 * MIB), "{before:?}");
    assert!(after.iter().all(|s| s.anon_huge_bytes == 6 * MIB), "{after:?}");
    assert_eq!(r.peak_anon_huge_bytes, 6 * MIB);
}

#[test]
fn launch_without_aslr_flag_keeps_randomization() {
    let opts = LaunchOptions { disable_aslr: false, sample_ms: 0, ..LaunchOptions::default() };
    let mut cmd = Command::new("sleep");
    cmd.arg("0.2");
    let r = launch(cmd, &[], &opts).unwrap();
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.personality.map(|p| p & ADDR_NO_RANDOMIZE), Some(0));
    assert!(!r.aslr_disabled);
}
