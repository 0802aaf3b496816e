//! Memory tiers (os/tier.rs) and the `hmmv` policy, by hand on haswell-pcc
//! (3.2 GHz, 4KB and 2MB pages): the fast tier is allocated first, each
//! access costs its tier's memory time, placement fills the fast tier in
//! rank order and conserves frames per tier, migration costs bandwidth and
//! recopies a leaf written during its copy window, HMM-v-Huge and
//! HMM-v-Base move the hot leaves to the fast tier, tiers off change nothing,
//! and bad tier knobs are one clear error.

mod common;

use common::{header, sim, BASE, MB2};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::os::tier::{Tier, TierConfig, TierUnit};
use hugescope_core::policy;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::Access;

const PAGE: u64 = 4096;

/// 64MiB of memory, `fast` bytes of it fast, 1 access = 1 us of virtual time.
fn os(fast: Option<u64>) -> OsConfig {
    OsConfig {
        time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }),
        memory_bytes: Some(64 << 20),
        tiers: TierConfig { fast_bytes: fast, fast_ns: 100.0, ..Default::default() },
        ..Default::default()
    }
}

fn ok(k: &Kernel) {
    if let Err(e) = k.check_invariants() {
        panic!("invariant broken: {e}");
    }
}

fn tiers_of(k: &Kernel, pages: std::ops::Range<u64>) -> Vec<Tier> {
    pages.map(|i| k.tier_of(0, BASE + i * PAGE).unwrap()).collect()
}

#[test]
fn fast_tier_first_and_each_access_costs_its_tiers_memory_time() {
    // Fast tier = one 2MB block = 512 frames. 600 pages touched in order:
    // the first 512 get fast frames, the next 88 slow ones.
    let mut s = sim(&header(8 * MB2, false), os(Some(MB2)), "base", &[]);
    for i in 0..600 {
        s.step(Access::read(BASE + i * PAGE));
    }
    assert!(tiers_of(&s.pt, 0..512).iter().all(|&t| t == Tier::Fast));
    assert!(tiers_of(&s.pt, 512..600).iter().all(|&t| t == Tier::Slow));
    for _ in 0..10 {
        s.step(Access::read(BASE));
    }
    for _ in 0..5 {
        s.step(Access::write(BASE + 599 * PAGE));
    }
    let t = s.pt.tier_stats().unwrap().clone();
    assert_eq!((t.fast_accesses, t.slow_accesses), (522, 93));
    // 100 ns fast, 300 ns slow, at 3.2 GHz: 320 and 960 cycles.
    assert_eq!(t.memory_cycles, 522.0 * 320.0 + 93.0 * 960.0);
    assert_eq!((t.fast_bytes, t.slow_bytes), (MB2, (64 << 20) - MB2));
    ok(&s.pt);
}

#[test]
fn placement_fills_the_fast_tier_in_rank_order_and_conserves_frames_per_tier() {
    let mut s = sim(&header(8 * MB2, false), os(Some(MB2)), "base", &[]);
    s.pt.populate(0, BASE, 1024 * PAGE);
    let free_before = s.pt.phys().free_frames();
    // Ranked coldest-address-last reversed: pages 1023 down to 0. Only 512
    // fit: 1023..=512 go fast, 0..512 slow.
    let ranked: Vec<TierUnit> = (0..1024u64).rev().map(|i| TierUnit { pid: 0, addr: BASE + i * PAGE }).collect();
    let moved = s.pt.place_tiers(&ranked);
    assert_eq!(moved, 1024, "every page changes tier");
    assert!(tiers_of(&s.pt, 0..512).iter().all(|&t| t == Tier::Slow));
    assert!(tiers_of(&s.pt, 512..1024).iter().all(|&t| t == Tier::Fast));
    let t = s.pt.tier_stats().unwrap();
    assert_eq!((t.promoted_bytes, t.demoted_bytes, t.migration_failures), (MB2, MB2, 0));
    // Frames conserved, per tier: the fast tier full, the slow one holding 512.
    assert_eq!(s.pt.phys().free_frames(), free_before);
    assert_eq!(s.pt.phys().free_frames_in(0, 512), 0);
    assert_eq!(s.pt.phys().free_frames_in(512, 16384), 16384 - 512 - 512);
    ok(&s.pt);
    // A shorter ranking: its 100 pages are the fast tier's only tenants (the
    // rest is pushed to the slow tier), and a leaf already in place stays.
    let ranked: Vec<TierUnit> = (0..100u64).map(|i| TierUnit { pid: 0, addr: BASE + i * 7 * PAGE }).collect();
    let moved = s.pt.place_tiers(&ranked);
    let fast: Vec<u64> = (0..1024).filter(|&i| s.pt.tier_of(0, BASE + i * PAGE) == Some(Tier::Fast)).collect();
    assert_eq!(fast, (0..100).map(|i| i * 7).collect::<Vec<_>>());
    // Pages 7i below 512 came up; every fast page not among them went down.
    let up = (0..100u64).filter(|i| i * 7 < 512).count() as u64;
    let kept = 100 - up;
    assert_eq!(moved, up + (512 - kept));
    assert_eq!(s.pt.phys().free_frames_in(0, 512), 512 - 100);
    ok(&s.pt);
}

#[test]
fn migration_costs_bandwidth_and_recopies_a_leaf_written_during_its_copy() {
    let mut s = sim(&header(8 * MB2, false), os(Some(MB2)), "base", &[]);
    s.pt.populate(0, BASE, 1024 * PAGE);
    let shootdowns = s.pt.stats().shootdowns;
    let ranked: Vec<TierUnit> = (512..1024u64).map(|i| TierUnit { pid: 0, addr: BASE + i * PAGE }).collect();
    s.pt.place_tiers(&ranked);
    // 2MiB each way at 2 GB/s per direction, in parallel: 1048.576 us.
    let copy = (MB2 as f64) / 2e9;
    assert_eq!(s.pt.tier_stats().unwrap().copy_seconds, copy);
    // One batched shootdown for the placement.
    assert_eq!(s.pt.stats().shootdowns, shootdowns + 1);
    // Inside the window (1 us per access): a write to a migrated page is
    // recopied once; a second write, a read, or a write to a page that did
    // not move recopy nothing.
    s.step(Access::write(BASE + 600 * PAGE));
    s.step(Access::write(BASE + 600 * PAGE));
    s.step(Access::read(BASE + 601 * PAGE));
    let t = s.pt.tier_stats().unwrap();
    assert_eq!((t.recopied_leaves, t.recopied_bytes), (1, PAGE));
    // Past the window, writes to migrated pages are not recopied.
    for _ in 0..2000 {
        s.step(Access::read(BASE + 700 * PAGE));
    }
    s.step(Access::write(BASE + 602 * PAGE));
    let t = s.pt.tier_stats().unwrap();
    assert_eq!((t.recopied_leaves, t.recopied_bytes), (1, PAGE));
    assert_eq!(t.copy_seconds, copy + PAGE as f64 / 2e9);
    assert_eq!(t.migrated_leaves, 1024);
    ok(&s.pt);
}

#[test]
fn huge_leaves_migrate_whole_and_count_toward_the_fast_huge_ratio() {
    // 8 huge pages, fast tier of 2: pages 0 and 1 start fast.
    let mut s = sim(&header(8 * MB2, false), os(Some(2 * MB2)), "ideal", &[]);
    s.pt.populate(0, BASE, 8 * MB2);
    assert_eq!(s.pt.tier_of(0, BASE), Some(Tier::Fast));
    assert_eq!(s.pt.tier_of(0, BASE + 5 * MB2), Some(Tier::Slow));
    let ranked = [TierUnit { pid: 0, addr: BASE + 5 * MB2 + 12345 }, TierUnit { pid: 0, addr: BASE + 7 * MB2 }];
    assert_eq!(s.pt.place_tiers(&ranked), 4);
    for (p, want) in [(0, Tier::Slow), (1, Tier::Slow), (5, Tier::Fast), (7, Tier::Fast)] {
        // Every base page of the huge leaf moved with it.
        assert!((0..512).all(|i| s.pt.tier_of(0, BASE + p * MB2 + i * PAGE) == Some(want)), "page {p}");
    }
    assert_eq!(s.pt.huge_bytes(), 8 * MB2, "migration keeps huge leaves huge");
    s.pt.finish();
    let t = s.pt.stats().tiers.clone().unwrap();
    assert_eq!((t.fast_mapped_bytes, t.fast_huge_bytes, t.fast_huge_ratio), (2 * MB2, 2 * MB2, 1.0));
    ok(&s.pt);
}

/// `hmmv` with `granularity`, rounds of 10 ms (10,000 accesses) and 2 rounds
/// per placement, over 8 huge pages with a fast tier of 2.
fn hmmv(granularity: &str) -> Simulator<Kernel> {
    let mut s = sim(&header(8 * MB2, false), os(Some(2 * MB2)), "hmmv", &[("granularity", granularity), ("interval", "0.01"), ("rounds", "2")]);
    s.pt.populate(0, BASE, 8 * MB2);
    // Hot: 3 base pages of huge page 5 and 1 of huge page 7; then 25 ms.
    let hot = [BASE + 5 * MB2, BASE + 5 * MB2 + 40 * PAGE, BASE + 5 * MB2 + 41 * PAGE, BASE + 7 * MB2 + 9 * PAGE];
    for i in 0..25_000 {
        s.step(Access::write(hot[i % 4]));
    }
    ok(&s.pt);
    s
}

#[test]
fn hmmv_huge_moves_the_hot_huge_pages_to_the_fast_tier() {
    let s = hmmv("huge");
    let k = &s.pt;
    assert_eq!(k.huge_bytes(), 8 * MB2, "HMM-v-Huge maps every region 2MB");
    let t = k.tier_stats().unwrap();
    assert_eq!(t.placements, 1);
    // Pages 5 and 7 (accessed in both rounds) went up, 0 and 1 went down.
    assert_eq!((t.promoted_bytes, t.demoted_bytes), (2 * MB2, 2 * MB2));
    assert_eq!(k.tier_of(0, BASE + 5 * MB2 + 300 * PAGE), Some(Tier::Fast));
    assert_eq!(k.tier_of(0, BASE + 7 * MB2), Some(Tier::Fast));
    assert_eq!(k.tier_of(0, BASE), Some(Tier::Slow));
    // After the placement at 20 ms every access is fast.
    assert!(t.slow_accesses <= 20_001 && t.fast_accesses >= 4_999, "{t:?}");
}

#[test]
fn hmmv_base_moves_only_the_hot_base_pages_and_fills_the_rest_by_address() {
    let s = hmmv("base");
    let k = &s.pt;
    assert_eq!(k.huge_bytes(), 0, "HMM-v-Base maps every page 4KB");
    // The 4 hot pages are fast; the fast tier's other 1020 frames hold the
    // frequency-0 pages in address order: pages 0..1020 of the region.
    for a in [BASE + 5 * MB2, BASE + 5 * MB2 + 41 * PAGE, BASE + 7 * MB2 + 9 * PAGE, BASE, BASE + 1019 * PAGE] {
        assert_eq!(k.tier_of(0, a), Some(Tier::Fast), "{a:#x}");
    }
    assert_eq!(k.tier_of(0, BASE + 1020 * PAGE), Some(Tier::Slow));
    assert_eq!(k.tier_of(0, BASE + 5 * MB2 + 1 * PAGE), Some(Tier::Slow));
    let t = k.tier_stats().unwrap();
    // 4 pages up, 4 pages (1020..1024 of the first 1024) down.
    assert_eq!((t.promoted_bytes, t.demoted_bytes), (4 * PAGE, 4 * PAGE));
}

#[test]
fn tiers_off_change_nothing() {
    // The same trace without tiers and with one fast tier holding all of
    // memory at zero latency: the same translation, OS counters and cost.
    let run = |tiers: TierConfig| {
        let o = OsConfig { tiers, ..os(None) };
        let mut s = sim(&header(8 * MB2, false), o, "linux", &[]);
        let mut x = 7u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s.step(Access::read(BASE + (x >> 40) % (8 * MB2)));
        }
        s.pt.finish();
        (s.counters(), s.pt.stats().clone(), s.pt.now())
    };
    let (c0, o0, t0) = run(TierConfig::default());
    let (c1, mut o1, t1) = run(TierConfig { fast_bytes: Some(64 << 20), fast_ns: 0.0, slow_ns: 0.0, ..Default::default() });
    assert!(o0.tiers.is_none());
    assert_eq!(o1.tiers.take().unwrap().fast_accesses, 20_000);
    assert_eq!((c0, o0, t0), (c1, o1, t1));
    // Off by default: no tier field in the OS configuration's JSON.
    assert!(!serde_json::to_string(&OsConfig::default()).unwrap().contains("tiers"));
}

#[test]
fn bad_tier_sizes_and_hmmv_knobs_are_one_clear_error() {
    let cfg = common::machine();
    let geo = hugescope_core::hw::Geometry::new(&cfg).unwrap();
    for (fast, want) in [(MB2 + PAGE, "multiple of 2097152"), (128 << 20, "at most the simulated memory")] {
        let p = policy::make("base", &[]).unwrap();
        let e = Kernel::new(geo.clone(), cfg.cost.clone(), &header(MB2, false), &os(Some(fast)), p).err().unwrap().to_string();
        assert!(e.contains("os.tier_fast") && e.contains(want), "{e}");
    }
    let e = policy::make("hmmv", &[("granularity".into(), "medium".into())]).err().unwrap().to_string();
    assert!(e.contains("granularity=medium") && e.contains("huge, base"), "{e}");
    let e = policy::make("hmmv", &[("rounds".into(), "0".into())]).err().unwrap().to_string();
    assert!(e.contains("rounds"), "{e}");
}

#[test]
fn virtualized_the_tiers_are_the_hosts_and_price_each_guest_access_by_its_host_frame() {
    use hugescope_core::run::PolicySpec;
    use hugescope_core::virt::run::{hypervisor_for, nested_walker};
    let m = common::machine();
    let o = OsConfig { tiers: TierConfig { fast_bytes: Some(MB2), fast_ns: 100.0, ..Default::default() }, ..Default::default() };
    let hv = hypervisor_for(&m, &[header(8 * MB2, false)], &o, &PolicySpec::parse("ideal").unwrap(), &PolicySpec::parse("base").unwrap()).unwrap();
    let mut s: Simulator<_, _, hugescope_core::hw::NoSegment> = Simulator::with_walker_and_unit(m.clone(), 1, hv, nested_walker(&m).unwrap()).unwrap();
    // The guest maps 2MB pages over host 4KB pages: each new 4KB page of
    // the guest's is a new host frame, fast while the 512 fast frames last
    // (the guest's few page-table pages take some of them).
    for i in 0..600 {
        s.step(Access::read(BASE + i * PAGE));
    }
    let host = &s.pt.host;
    assert!(s.pt.vms[0].guest.tier_stats().is_none(), "a guest sees one flat memory");
    let t = host.tier_stats().unwrap();
    assert_eq!(t.fast_accesses + t.slow_accesses, 600, "one memory access per guest access");
    assert!((500..512).contains(&t.fast_accesses), "{t:?}");
    assert_eq!(t.memory_cycles, t.fast_accesses as f64 * 320.0 + t.slow_accesses as f64 * 960.0);
}

#[test]
fn virtualized_set_up_data_is_backed_by_host_frames_fast_first_in_the_order_written() {
    use hugescope_core::run::PolicySpec;
    use hugescope_core::hw::PageTable;
    use hugescope_core::virt::run::hypervisor_for;
    let m = common::machine();
    let o = OsConfig { tiers: TierConfig { fast_bytes: Some(MB2), ..Default::default() }, ..Default::default() };
    let mut hv = hypervisor_for(&m, &[header(8 * MB2, false)], &o, &PolicySpec::parse("base").unwrap(), &PolicySpec::parse("base").unwrap()).unwrap();
    hv.progress(&hugescope_core::trace::populate_label(0, BASE, 4 * MB2));
    let gpa = |hv: &hugescope_core::virt::Hypervisor, va: u64| hv.vms[0].guest.frame_addr(0, va).unwrap();
    // The guest's first 2MB of data took the host's 512 fast frames; the rest is slow.
    let (first, last) = (gpa(&hv, BASE), gpa(&hv, BASE + 4 * MB2 - PAGE));
    assert_eq!(hv.host.tier_of(0, first), Some(Tier::Fast));
    assert_eq!(hv.host.tier_of(0, last), Some(Tier::Slow));
    assert_eq!(hv.host.spaces()[0].frames_held(), 2048, "every populated guest page (8MiB) is backed");
    assert!(hv.vms[0].ept.present(first) && hv.vms[0].ept.present(last));
}

#[test]
fn a_huge_promotion_compacts_a_fast_tier_fragmented_by_base_pages() {
    // Issue #35: 8 huge pages, a fast tier of 2 (pages 0 and 1), both split
    // (as FHPM-TMM demotes unbalanced pages): 1024 base leaves fill the fast
    // tier. The ranking keeps 10 base pages of each split page fast and asks
    // for huge page 5: 532 frames of 1024, but after the demotions neither
    // fast block is free (10 pages hold each). Compaction moves the 10 of
    // block 0 (fewest used, then lowest address) into block 1's holes, and
    // page 5 takes block 0. Without it the promotion would fail.
    let mut s = sim(&header(8 * MB2, false), os(Some(2 * MB2)), "ideal", &[]);
    s.pt.populate(0, BASE, 8 * MB2);
    assert!(s.pt.demote(0, BASE) && s.pt.demote(0, BASE + MB2));
    assert_eq!(s.pt.tier_of(0, BASE + MB2 + 511 * PAGE), Some(Tier::Fast));
    let low: Vec<u64> = (0..10).map(|i| BASE + i * PAGE).collect();
    let high: Vec<u64> = (300..310).map(|i| BASE + MB2 + i * PAGE).collect();
    let ranked: Vec<TierUnit> = std::iter::once(BASE + 5 * MB2).chain(low.iter().copied()).chain(high.iter().copied()).map(|addr| TierUnit { pid: 0, addr }).collect();
    let stats0 = s.pt.stats().clone();
    let moved = s.pt.place_tiers(&ranked);
    let t = s.pt.tier_stats().unwrap().clone();
    assert_eq!(t.migration_failures, 0, "{t:?}");
    // 1004 base pages down, huge page 5 up, 10 base pages moved inside the fast tier.
    assert_eq!(moved, 1004 + 1 + 10);
    assert_eq!((t.promoted_bytes, t.demoted_bytes), (MB2, 1004 * PAGE));
    let st = s.pt.stats();
    assert_eq!((st.compactions - stats0.compactions, st.compaction_successes - stats0.compaction_successes), (1, 1));
    assert_eq!(st.compaction_migrated_pages - stats0.compaction_migrated_pages, 10);
    // Copies: 2MiB up (the larger direction) plus the 10 pages compacted.
    assert_eq!(t.copy_seconds, (1004 * PAGE) as f64 / 2e9 + (10 * PAGE) as f64 / 2e9);
    assert!((0..512).all(|i| s.pt.tier_of(0, BASE + 5 * MB2 + i * PAGE) == Some(Tier::Fast)));
    assert!(low.iter().chain(&high).all(|&a| s.pt.tier_of(0, a) == Some(Tier::Fast)));
    // Page 5 sits in block 0 (frames 0..512); the 20 base pages in block 1.
    assert_eq!(s.pt.frame_addr(0, BASE + 5 * MB2), Some(0));
    assert!(low.iter().chain(&high).all(|&a| (MB2..2 * MB2).contains(&s.pt.frame_addr(0, a).unwrap())));
    assert_eq!(s.pt.phys().free_frames_in(0, 1024), 1024 - 512 - 20);
    ok(&s.pt);
}
