//! The promotion candidate cache through the kernel (walker feeding, the
//! accessed-bit filter, invalidation by shootdowns) and the `pcc` OS policy
//! (PCC MICRO'23 §3.2-§3.3; pcc.md §8 recommendations).
//!
//! Policy tests inject PCC contents by hand (`Kernel::pcc_mut(cpu).pmd.touch`)
//! after touching each region once, so every count is known exactly, then
//! step accesses to one already-mapped page (TLB hits: no walks, so the PCCs
//! hold only what was injected) until the interval's read fires.

use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Fragmentation, Kernel, OsConfig};
use hugescope_core::os::AllocMode;
use hugescope_core::policy;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, Region, TraceHeader};

mod common;

use common::{BASE, MB2};

fn header(len: u64, pids: u16) -> TraceHeader {
    let mut h = TraceHeader::new("synthetic");
    for p in 0..pids {
        h.regions.push(Region { pid: p, ..Region::new(format!("data{p}"), BASE, len) });
    }
    h.processes = pids as u32;
    h
}

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1000.0 }), ..Default::default() }
}

fn sim(h: &TraceHeader, os: OsConfig, params: &[(&str, &str)], cpus: usize) -> Simulator<Kernel> {
    common::sim_cpus(h, os, "pcc", params, cpus)
}

fn region(i: u64) -> u64 {
    BASE + i * MB2
}

/// Touch one page of each region (faults: base pages, present, so a later
/// promotion copies and shoots down like a real collapse).
fn touch_regions(s: &mut Simulator<Kernel>, pid: u16, regions: &[u64]) {
    for &r in regions {
        s.step(Access::read(region(r) + 4096).in_pid(pid));
    }
}

/// Give region `r` of `pid` frequency `freq` in `cpu`'s 2MB PCC.
fn inject(s: &mut Simulator<Kernel>, cpu: u16, pid: u16, r: u64, freq: u32) {
    let p = s.pt.pcc_mut(cpu).expect("pcc enabled");
    for _ in 0..=freq {
        p.pmd.touch(pid, region(r));
    }
    assert_eq!(p.pmd.get(pid, region(r)), Some(freq));
}

/// Step hits on one mapped page until `n` accesses were made in total.
fn run_to(s: &mut Simulator<Kernel>, n: u64) {
    let page = region(63) + 8;
    while s.pt.clock().accesses < n {
        s.step(Access::read(page));
    }
}

fn promoted_regions(s: &Simulator<Kernel>) -> Vec<(u16, u64)> {
    s.pt.executed_plan().iter().map(|e| (e.pid, (e.start - BASE) / MB2)).collect()
}

#[test]
fn walker_inserts_only_after_the_pmd_accessed_bit_is_set() {
    let h = header(128 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_s", "1e9"), ("pcc_1g", "true")], 1);
    let r0 = region(1);
    // 1st walk to the region: faults and sets the PMD (and PUD) A bits only.
    s.step(Access::read(r0));
    assert_eq!(s.pt.pccs()[0].pmd.len(), 0);
    assert_eq!(s.pt.pccs()[0].pmd.stats.filtered, 1);
    // 2nd walk (another page of the region): inserted with frequency 0.
    s.step(Access::read(r0 + 4096));
    assert_eq!(s.pt.pccs()[0].pmd.get(0, r0), Some(0));
    // 3rd walk: frequency 1.
    s.step(Access::read(r0 + 2 * 4096));
    assert_eq!(s.pt.pccs()[0].pmd.get(0, r0), Some(1));
    // A TLB hit is not a walk: nothing changes.
    s.step(Access::read(r0 + 2 * 4096 + 64));
    assert_eq!(s.pt.pccs()[0].pmd.get(0, r0), Some(1));
    // The 1GB PCC saw the same walks one level up: the 1st found the PUD bit
    // clear (nothing), the 2nd inserted, the 3rd counted.
    let gb = s.pt.pccs()[0].pud.as_ref().expect("1GB PCC enabled");
    assert_eq!(gb.get(0, r0), Some(1));
    // A new 2MB region in the same GB: its PMD bit is clear (2MB PCC filters
    // the walk) but the PUD bit is set, so the 1GB PCC counts it.
    s.step(Access::read(region(2)));
    assert_eq!(s.pt.pccs()[0].pmd.get(0, region(2)), None);
    assert_eq!(s.pt.pccs()[0].pud.as_ref().unwrap().get(0, r0), Some(2));
    // Without pcc_1g there is no 1GB PCC.
    let mut s2 = sim(&h, os(), &[("interval_s", "1e9")], 1);
    s2.step(Access::read(r0));
    assert!(s2.pt.pccs()[0].pud.is_none());
}

#[test]
fn one_pcc_per_cpu_created_lazily() {
    let h = header(64 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_s", "1e9")], 1);
    for p in 0..3u64 {
        s.step(Access::read(region(0) + p * 4096).on_cpu(3));
    }
    assert_eq!(s.pt.pccs().len(), 4);
    assert_eq!(s.pt.pccs()[3].pmd.get(0, region(0)), Some(1));
    assert!(s.pt.pccs()[0].pmd.is_empty());
}

#[test]
fn shootdown_of_a_promotion_invalidates_the_entry_and_huge_leaves_still_count() {
    let h = header(64 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_s", "1e9")], 2);
    for r in [1u64, 2] {
        for p in 0..3u64 {
            s.step(Access::read(region(r) + p * 4096));
            s.step(Access::read(region(r) + p * 4096).on_cpu(1));
        }
    }
    for cpu in 0..2 {
        assert!(s.pt.pccs()[cpu].pmd.get(0, region(1)).is_some());
        assert!(s.pt.pccs()[cpu].pmd.get(0, region(2)).is_some());
    }
    s.pt.promote(0, region(1), 1, AllocMode::FreeOnly).unwrap();
    s.apply_shootdowns();
    for cpu in 0..2 {
        assert_eq!(s.pt.pccs()[cpu].pmd.get(0, region(1)), None, "cpu {cpu}: promoted region still in the PCC");
        assert!(s.pt.pccs()[cpu].pmd.get(0, region(2)).is_some(), "cpu {cpu}: unrelated entry dropped");
    }
    // Walks to the new 2MB leaf: the promotion re-armed the filter, so the
    // first walk only sets the bit; the next one (after a TLB flush) enters
    // the PCC as a demotion / 1GB candidate (pcc.md §8 rec. 3).
    s.step(Access::read(region(1)));
    assert_eq!(s.pt.pccs()[0].pmd.get(0, region(1)), None);
    s.mmus[0].flush();
    s.step(Access::read(region(1) + 8192));
    assert_eq!(s.pt.pccs()[0].pmd.get(0, region(1)), Some(0));
}

#[test]
fn at_most_regions_to_promote_per_interval_and_the_rest_stay() {
    let h = header(128 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("regions_to_promote", "3")], 1);
    let regions: Vec<u64> = (0..8).collect();
    touch_regions(&mut s, 0, &regions);
    for &r in &regions {
        inject(&mut s, 0, 0, r, 10 + r as u32); // region 7 hottest
    }
    run_to(&mut s, 999);
    assert_eq!(s.pt.stats().promotions, 0, "the first read comes after one full interval");
    run_to(&mut s, 1000);
    assert_eq!(promoted_regions(&s), vec![(0, 7), (0, 6), (0, 5)]);
    // Not promoted entries stay in the PCC (pcc.md §8 rec. 7); promoted ones left it.
    assert_eq!(s.pt.pccs()[0].pmd.len(), 5);
    run_to(&mut s, 2000);
    assert_eq!(promoted_regions(&s), vec![(0, 7), (0, 6), (0, 5), (0, 4), (0, 3), (0, 2)]);
    let d = s.pt.policy_params();
    assert_eq!(d["intervals"][0]["candidates"], 8);
    assert_eq!(d["intervals"][0]["promoted"], 3);
    assert_eq!(d["intervals"][1]["candidates"], 5);
    assert_eq!(d["totals"]["promoted"], 6);
}

#[test]
fn min_freq_and_flush_on_read() {
    let h = header(64 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("flush_on_read", "true"), ("min_freq", "2")], 1);
    touch_regions(&mut s, 0, &[0, 1, 2]);
    inject(&mut s, 0, 0, 0, 0);
    inject(&mut s, 0, 0, 1, 1);
    inject(&mut s, 0, 0, 2, 2);
    run_to(&mut s, 1000);
    assert_eq!(promoted_regions(&s), vec![(0, 2)]);
    assert!(s.pt.pccs()[0].pmd.is_empty(), "flush_on_read empties the PCC");
}

#[test]
fn highest_frequency_picks_the_globally_hottest_and_round_robin_alternates() {
    let h = header(64 << 20, 1);
    // cpu0: A=1 (f5), B=2 (f4); cpu1: C=3 (f9), D=4 (f1). One promotion per interval.
    let setup = |policy: &str| {
        let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("regions_to_promote", "1"), ("promotion_policy", policy)], 2);
        touch_regions(&mut s, 0, &[1, 2, 3, 4]);
        inject(&mut s, 0, 0, 1, 5);
        inject(&mut s, 0, 0, 2, 4);
        inject(&mut s, 1, 0, 3, 9);
        inject(&mut s, 1, 0, 4, 1);
        run_to(&mut s, 4000);
        promoted_regions(&s).into_iter().map(|(_, r)| r).collect::<Vec<_>>()
    };
    assert_eq!(setup("1"), vec![3, 1, 2, 4]);
    // Round robin: interval 1 starts at cpu0, interval 2 at cpu1, ...
    assert_eq!(setup("0"), vec![1, 3, 2, 4]);
    // Two per interval: round robin takes one head per cpu.
    let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("regions_to_promote", "2"), ("promotion_policy", "round_robin")], 2);
    touch_regions(&mut s, 0, &[1, 2, 3, 4]);
    inject(&mut s, 0, 0, 1, 5);
    inject(&mut s, 0, 0, 2, 4);
    inject(&mut s, 1, 0, 3, 9);
    inject(&mut s, 1, 0, 4, 1);
    run_to(&mut s, 1000);
    assert_eq!(promoted_regions(&s), vec![(0, 1), (0, 3)]);
}

#[test]
fn a_region_in_several_pccs_is_promoted_once_at_its_largest_count() {
    let h = header(64 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("regions_to_promote", "2")], 2);
    touch_regions(&mut s, 0, &[1, 2, 3]);
    inject(&mut s, 0, 0, 1, 2);
    inject(&mut s, 1, 0, 1, 8); // region 1 ranks at 8
    inject(&mut s, 0, 0, 2, 7);
    inject(&mut s, 1, 0, 3, 6);
    run_to(&mut s, 1000);
    assert_eq!(promoted_regions(&s), vec![(0, 1), (0, 2)]);
    assert_eq!(s.pt.stats().promotion_failures.already_huge, 0);
}

#[test]
fn bias_process_candidates_go_first() {
    let h = header(64 << 20, 2);
    let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("regions_to_promote", "2"), ("promotion_bias_process", "1")], 1);
    touch_regions(&mut s, 0, &[1, 2]);
    touch_regions(&mut s, 1, &[5, 6]);
    inject(&mut s, 0, 0, 1, 50);
    inject(&mut s, 0, 0, 2, 40);
    inject(&mut s, 0, 1, 5, 1);
    inject(&mut s, 0, 1, 6, 2);
    run_to(&mut s, 1000);
    assert_eq!(promoted_regions(&s), vec![(1, 6), (1, 5)]);
    run_to(&mut s, 2000);
    assert_eq!(promoted_regions(&s), vec![(1, 6), (1, 5), (0, 1), (0, 2)]);
}

#[test]
fn a_promoted_region_is_not_promoted_again() {
    let h = header(64 << 20, 1);
    let mut s = sim(&h, os(), &[("interval_accesses", "1000")], 1);
    touch_regions(&mut s, 0, &[1]);
    inject(&mut s, 0, 0, 1, 3);
    run_to(&mut s, 1000);
    assert_eq!(s.pt.stats().promotions, 1);
    // The huge page keeps walking and re-enters the PCC (demotion candidate).
    inject(&mut s, 0, 0, 1, 9);
    run_to(&mut s, 3000);
    assert_eq!(s.pt.stats().promotions, 1);
    assert_eq!(s.pt.stats().promotion_failures.already_huge, 0, "the policy must skip huge regions, not ask the kernel");
    // ...and on a real stream: one hot region walked for many intervals.
    let mut s = sim(&h, os(), &[("interval_accesses", "5000")], 1);
    let mut x = 12345u64;
    for _ in 0..40_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Hot region 0 at random pages, amid a stream over regions 1..31.
        let a = if x.is_multiple_of(3) { region(0) + (x >> 8) % 512 * 4096 } else { region(1 + (x >> 20) % 31) + (x >> 8) % 512 * 4096 };
        s.step(Access::read(a));
    }
    let plan = promoted_regions(&s);
    assert_eq!(plan.iter().filter(|&&(_, r)| r == 0).count(), 1, "{plan:?}");
    assert_eq!(plan.first(), Some(&(0, 0)), "the hot region goes first");
}

#[test]
fn the_budget_is_respected_and_refusals_are_counted_and_retried() {
    let h = header(16 << 20, 1); // 8 regions; 25% = 2 regions
    let o = OsConfig { budget: Some(0.25), ..os() };
    let mut s = sim(&h, o, &[("interval_accesses", "1000")], 1);
    touch_regions(&mut s, 0, &[0, 1, 2, 3, 4]);
    for r in 0..5 {
        inject(&mut s, 0, 0, r, 10 + r as u32);
    }
    run_to(&mut s, 1000);
    assert_eq!(promoted_regions(&s), vec![(0, 4), (0, 3)]);
    assert!(s.pt.huge_bytes() <= 2 * MB2);
    assert_eq!(s.pt.pccs()[0].pmd.len(), 3, "refused candidates stay for the next interval");
    run_to(&mut s, 2000);
    let d = s.pt.policy_params();
    assert_eq!(d["totals"]["failed_budget"], 2, "{d}");
    assert_eq!(d["intervals"][1]["failed"], 1);
    assert_eq!(s.pt.stats().promotions, 2);
    s.pt.check_invariants().unwrap();
}

#[test]
fn no_free_huge_frame_keeps_the_entry() {
    // Every 2MB block holds an unmovable page: no collapse can succeed.
    let h = header(16 << 20, 1);
    let o = OsConfig { memory_bytes: Some(64 << 20), fragmentation: Some(Fragmentation::Pcc { share: 1.0 }), ..os() };
    let mut s = sim(&h, o, &[("interval_accesses", "1000")], 1);
    touch_regions(&mut s, 0, &[1]);
    inject(&mut s, 0, 0, 1, 4);
    run_to(&mut s, 2000);
    assert_eq!(s.pt.stats().promotions, 0);
    assert_eq!(s.pt.pccs()[0].pmd.get(0, region(1)), Some(4));
    let d = s.pt.policy_params();
    assert_eq!(d["totals"]["failed_no_memory"], 2, "{d}");
}

#[test]
fn demotion_under_budget_pressure_swaps_in_a_hotter_candidate() {
    let h = header(16 << 20, 1); // 8 regions; 12.5% = 1 region
    let o = OsConfig { budget: Some(0.125), ..os() };
    let run = |demotion: &str| {
        let mut s = sim(&h, o.clone(), &[("interval_accesses", "1000"), ("demotion", demotion)], 1);
        touch_regions(&mut s, 0, &[1, 2]);
        inject(&mut s, 0, 0, 1, 3);
        run_to(&mut s, 1000); // region 1 promoted
        // Now region 2 is hot and the huge region 1 walks a little.
        inject(&mut s, 0, 0, 1, 1);
        inject(&mut s, 0, 0, 2, 20);
        run_to(&mut s, 2000);
        s
    };
    let off = run("false");
    assert_eq!(promoted_regions(&off), vec![(0, 1)]);
    let on = run("true");
    assert_eq!(promoted_regions(&on), vec![(0, 1), (0, 2)]);
    assert_eq!(on.pt.stats().demotions, 1);
    assert!(on.pt.huge_bytes() <= MB2);
    on.pt.check_invariants().unwrap();
}

#[test]
fn bad_parameters_are_errors() {
    for bad in [("counter_bits", "0"), ("replacement", "fifo"), ("promotion_policy", "2"), ("promotion_bias_process", "x"), ("nonsense", "1")] {
        let p = vec![(bad.0.to_string(), bad.1.to_string())];
        assert!(policy::make("pcc", &p).is_err(), "{bad:?}");
    }
}

#[test]
fn one_gb_rule_promotes_a_gb_walked_512_times_more_than_its_hottest_2mb_region() {
    // pcc.md §8 rec. 13: f1G >= 512 and f1G >= 512 x f2M (largest 2MB count inside).
    let h = header(1 << 30, 1);
    let run = |f2m: Option<u32>| {
        let mut s = sim(&h, os(), &[("interval_accesses", "1000"), ("promote_1g", "true")], 1);
        touch_regions(&mut s, 0, &[1]);
        let gb = s.pt.pcc_mut(0).unwrap().pud.as_mut().expect("promote_1g enables the 1GB PCC");
        for _ in 0..=600 {
            gb.touch(0, region(0));
        }
        assert_eq!(gb.get(0, region(0)), Some(600), "32-bit counters: no halving at 255");
        if let Some(f) = f2m {
            inject(&mut s, 0, 0, 1, f);
        }
        run_to(&mut s, 1000);
        s
    };
    let mut s = run(None);
    assert_eq!(s.pt.huge_bytes(), 1 << 30);
    assert_eq!(s.pt.executed_plan()[0].page_size, 1 << 30);
    assert_eq!(s.pt.policy_params()["totals"]["promoted_1g"], 1);
    assert!(s.pt.pccs()[0].pud.as_ref().unwrap().is_empty(), "1GB counters restart every interval");
    // A 2MB region inside counts 2: 600 < 1024, so only that 2MB region is promoted.
    let s = run(Some(2));
    assert_eq!(s.pt.huge_bytes(), MB2);
    assert_eq!(s.pt.policy_params()["totals"]["promoted_1g"], 0);
}
