//! Launching a command with ASLR off and a time-based plan.

mod common;
use common::*;
use hugescope_core::plan::When;
use hugescope_linux::collapse::Status;
use hugescope_linux::launch::{launch, LaunchOptions, ADDR_NO_RANDOMIZE};
use std::io::Write;
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

/// The launched child of this test process whose command line holds `marker`
/// (its pid is not handed out by `launch`, which owns the child).
fn child_with(marker: &str) -> Option<i32> {
    let me = std::process::id() as i32;
    for d in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = d.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().nth(1)).and_then(|p| p.parse::<i32>().ok());
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(me) && cmdline.contains(marker) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn plan_all_collapses_every_eligible_region_of_a_program() {
    if skip("plan_all_collapses_every_eligible_region_of_a_program", root_skip_reason()) {
        return;
    }
    // Three anonymous VMAs of the program: A (2 MiB), A+2M (2 MiB, marked
    // MADV_NOHUGEPAGE: ineligible), A+4M (4 MiB); and a hot region H (4 MiB).
    let (a, h): (u64, u64) = (0x7e50_0000_0000, 0x7e58_0000_0000);
    let (reader, mut writer) = std::io::pipe().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hugescope-memhold"));
    cmd.args(["--addr", &format!("{a:#x}"), "--size", "8M", "--nohuge", "2M:2M", "--hot-addr", &format!("{h:#x}"), "--hot-size", "4M"]);
    cmd.stdin(reader).stdout(std::process::Stdio::null());
    let opts = LaunchOptions { sample_ms: 50, plan_all: true, ..LaunchOptions::default() };
    let run = std::thread::spawn(move || launch(cmd, &[], &opts));
    // While it runs: smaps shows every eligible region PMD-mapped.
    let t0 = std::time::Instant::now();
    let pid = loop {
        if let Some(p) = child_with(&format!("{h:#x}")) {
            break p;
        }
        assert!(t0.elapsed().as_secs() < 10, "launched memhold not found");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let huge_of = |v: &[hugescope_linux::Vma], start: u64| v.iter().find(|x| x.start == start).map(|x| x.anon_huge_pages);
    let want = [(a, 2 * MIB), (a + 2 * MIB, 0), (a + 4 * MIB, 4 * MIB), (h, 4 * MIB)];
    let mut last = Vec::new();
    let settled = (0..500).any(|_| {
        let v = hugescope_linux::vmas(pid).unwrap_or_default();
        last = want.iter().map(|&(s, _)| huge_of(&v, s)).collect();
        let ok = want.iter().zip(&last).all(|(&(_, n), got)| *got == Some(n));
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        ok
    });
    assert!(settled, "AnonHugePages of A, A+2M (nohuge), A+4M, H: {last:?}, want {want:?}");
    // Every eligible VMA of the program with a populated 2 MiB region has it huge.
    let vmas = hugescope_linux::vmas(pid).unwrap();
    for v in vmas.iter().filter(|v| v.is_anonymous() && !v.no_hugepage() && v.writable()) {
        let lo = v.start.div_ceil(PMD) * PMD;
        let hi = v.end / PMD * PMD;
        let present = hugescope_linux::pagemap::scan(pid, lo, hi.max(lo), hugescope_linux::pagemap::PAGE_IS_PRESENT, 0).unwrap();
        for r in (lo..hi).step_by(PMD as usize) {
            if present.iter().any(|x| x.start < r + PMD && r < x.end) {
                let huge = hugescope_linux::pagemap::pmd_mapped_bytes(pid, r, PMD).unwrap();
                assert_eq!(huge, PMD, "region {r:#x} of {} {:#x}-{:#x} is populated but not huge", v.path, v.start, v.end);
            }
        }
    }
    writeln!(writer).unwrap();
    let r = run.join().unwrap().unwrap();
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.applied.len(), 1);
    let o = &r.applied[0].outcome;
    assert_eq!(o.note.as_deref(), Some(hugescope_linux::sweep::ALL_NOTE));
    assert_eq!(o.status, Status::Collapsed, "{}", o.reason);
    // A (1), A+4M (2), H (2) at least; the thread's stack may add its own.
    assert!(o.regions >= 5 && o.regions_collapsed == o.regions, "{} of {}: {}", o.regions_collapsed, o.regions, o.reason);
    assert!(o.reason.contains("in ineligible VMAs"), "the NOHUGEPAGE region is counted: {}", o.reason);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn a_merged_entry_is_applied_region_by_region_and_a_partial_one_is_counted() {
    if skip("a_merged_entry_is_applied_region_by_region_and_a_partial_one_is_counted", root_skip_reason()) {
        return;
    }
    // One entry over 8 regions: 2 never mapped, A (huge), A+2M (NOHUGEPAGE),
    // A+4M and A+6M (huge), 2 never mapped.
    let a: u64 = 0x7e60_0000_0000;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hugescope-memhold"));
    cmd.args(["--addr", &format!("{a:#x}"), "--size", "8M", "--nohuge", "2M:2M", "--exit-after", "1.0"]);
    cmd.stdout(std::process::Stdio::null());
    let plan = [entry(a - 4 * MIB, 16 * MIB, When::Start)];
    let opts = LaunchOptions { sample_ms: 50, ..LaunchOptions::default() };
    let r = launch(cmd, &plan, &opts).unwrap();
    assert_eq!(r.exit_code, Some(0));
    let o = &r.applied[0].outcome;
    assert_eq!((o.regions, o.regions_collapsed, o.status), (8, 3, Status::PartiallyCollapsed), "{}", o.reason);
    assert_eq!(o.bytes_huge_after_exact, Some(6 * MIB));
    for part in ["the program exited at", "3 of 8 regions huge", "1 in ineligible VMAs (ineligible: VMA", "VM_NOHUGEPAGE", "4 never mapped"] {
        assert!(o.reason.contains(part), "{part:?} not in {}", o.reason);
    }
    // Not the old self-contradicting text.
    assert!(!o.reason.contains("before the entry was applied"), "{}", o.reason);
    // The 6 MiB were huge while it ran.
    assert_eq!(r.peak_anon_huge_bytes, 6 * MIB, "{:?}", r.samples);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].starts_with("1 of 1 plan entries not fully applied: 5 of their 8 2 MiB regions"), "{}", r.warnings[0]);
}

#[test]
fn peak_rss_is_the_programs_not_the_launchers() {
    // This process holds 96 MiB resident; the forked child starts with a
    // copy of it, which ru_maxrss would count (issue #38: 16.8 MiB reported
    // for a program /usr/bin/time measured at 1.9 MB).
    let ballast = vec![1u8; 96 << 20];
    let held: u64 = ballast.iter().step_by(4096).map(|&b| b as u64).sum();
    let mut cmd = Command::new("sleep");
    cmd.arg("0.4");
    let opts = LaunchOptions { sample_ms: 20, ..LaunchOptions::default() };
    let r = launch(cmd, &[], &opts).unwrap();
    assert_eq!(held, (96 << 20) / 4096);
    assert_eq!(r.peak_rss_source, "vmhwm");
    assert!(r.peak_rss_bytes > 0 && r.peak_rss_bytes < 16 * MIB, "sleep's peak RSS {} B", r.peak_rss_bytes);
    drop(ballast);
}
