//! Reservations and the `navarro` policy (os/reserv.rs, Navarro OSDI'02 §4)
//! by hand on the alpha-21264 preset (8KB pages; 64KB = 8 pages, 512KB = 64,
//! 4MB = 512) and on x86-64: filling in place, promotion exactly at full
//! population, demotion along the written page's path, preemption of the
//! least recently populated reservation one level down, the §6.6 stride
//! case, write-back of dirty leaves, and frame conservation under random
//! fault/free/evict sequences (proptest).

mod common;

use common::{header, BASE};
use hugescope_core::config::MachineConfig;
use hugescope_core::hw::Geometry;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::policy;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, RegionKind, TraceHeader};
use proptest::prelude::*;

const PAGE: u64 = 8 << 10;
const MB4: u64 = 4 << 20;

fn os(memory: u64) -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }), memory_bytes: Some(memory), ..Default::default() }
}

/// A simulator on `preset` running `navarro` with `params`.
fn sim_on(preset: &str, h: &TraceHeader, memory: u64, params: &[(&str, &str)]) -> Simulator<Kernel> {
    let cfg = MachineConfig::preset(preset).unwrap();
    let p: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let k = Kernel::new(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), h, &os(memory), policy::make("navarro", &p).unwrap()).unwrap();
    Simulator::new(cfg, 1, k).unwrap()
}

fn alpha(h: &TraceHeader, memory: u64) -> Simulator<Kernel> {
    sim_on("alpha-21264", h, memory, &[])
}

/// The leaf size index of every page of the first VMA.
fn sizes(k: &Kernel) -> Vec<usize> {
    common::vma_leaf_sizes(k, 0, 0)
}

fn ok(k: &Kernel) {
    if let Err(e) = k.check_invariants() {
        panic!("invariant broken: {e}");
    }
}

#[test]
fn a_reservation_fills_in_place_and_promotes_at_full_population_only() {
    let mut s = alpha(&header(MB4, false), 64 << 20);
    s.step(Access::read(BASE));
    let k = &s.pt;
    // One 4MB extent reserved, one frame of it mapped, 511 reserved.
    assert_eq!((k.stats().reservations, k.reservation_count(), k.reserved_frames()), (1, 1, 511));
    let f0 = common::vma_frame(&k, 0, 0, 0);
    assert_eq!(f0 % 512, 0, "the extent is 4MB-aligned");
    for i in 1..512u64 {
        s.step(Access::read(BASE + i * PAGE));
        ok(&s.pt);
        let sz = sizes(&s.pt);
        let i = i as usize;
        // Each page maps its own frame of the extent.
        assert_eq!(common::vma_frame(&s.pt, 0, 0, i), f0 + i as u32);
        // Exactly at the 8th, 64th and 512th page a node fills: 64KB, 512KB, 4MB.
        let want = if i == 511 { 3 } else if i % 64 == 63 { 2 } else if i % 8 == 7 { 1 } else { 0 };
        assert_eq!(sz[i], want, "leaf of page {i} just after it was touched");
        if i % 8 != 7 {
            // Not before: the node holding the page is not full yet.
            assert_eq!(sz[i], 0);
        }
    }
    let k = &s.pt;
    assert!(sizes(k).iter().all(|&x| x == 3));
    // The largest full node is promoted: the last 64KB node of each 512KB
    // node goes straight to 512KB, the last 512KB node straight to 4MB.
    assert_eq!(k.stats().promotions, 8 * 7 + 7 + 1);
    assert_eq!(k.stats().in_place_collapses, 64);
    assert_eq!((k.reserved_frames(), k.stats().pages_copied), (0, 0));
    assert_eq!(k.spaces()[0].huge_bytes()[3], MB4);
    assert_eq!(k.spaces()[0].huge_bytes()[1..3], [0, 0]);
}

/// A 4MB superpage promoted from clean reads.
fn clean_4mb() -> Simulator<Kernel> {
    let mut s = alpha(&header(MB4, false), 64 << 20);
    for i in 0..512 {
        s.step(Access::read(BASE + i * PAGE));
    }
    assert!(sizes(&s.pt).iter().all(|&x| x == 3));
    s
}

#[test]
fn a_write_to_a_clean_superpage_demotes_exactly_along_the_written_page() {
    let mut s = clean_4mb();
    let (d0, us0) = (s.pt.stats().demotions, s.pt.clock().os_sync_seconds);
    s.step(Access::write(BASE + 100 * PAGE));
    ok(&s.pt);
    let sz = sizes(&s.pt);
    // Page 100 lies in 512KB node 1 (pages 64..128), 64KB node 12 (96..104).
    for (i, &got) in sz.iter().enumerate() {
        let want = if !(64..128).contains(&i) {
            2
        } else if !(96..104).contains(&i) {
            1
        } else {
            0
        };
        assert_eq!(got, want, "leaf of page {i}");
    }
    let k = &s.pt;
    assert_eq!(k.stats().wp_traps, 1);
    assert_eq!(k.stats().demotions - d0, 3, "three levels split: 4MB, 512KB, 64KB");
    let h = k.spaces()[0].huge_bytes();
    assert_eq!((h[1], h[2], h[3]), (7 * (64 << 10), 7 * (512 << 10), 0));
    let start = k.view().vma(0, 0).unwrap().start();
    let dirty = |i: u64| k.view().page(0, start + i * PAGE).unwrap().dirty;
    assert!(dirty(100));
    assert!((0..512).filter(|&i| i != 100).all(|i| !dirty(i)), "only the written page is dirty");
    // The trap plus 512 replicated PTEs rewritten (defaults: 1 us, 0.01 us each).
    let us = (k.clock().os_sync_seconds - us0) * 1e6;
    assert!(us >= 1.0 + 5.12 - 1e-9, "charged {us} us");
    // A second write to the same page: a base page now, no trap.
    s.step(Access::write(BASE + 100 * PAGE));
    assert_eq!(s.pt.stats().wp_traps, 1);
    // Writing the other 7 pages of the 64KB node makes it all dirty: re-promoted.
    for i in (96..104).filter(|&i| i != 100) {
        assert_eq!(sizes(&s.pt)[100], 0);
        s.step(Access::write(BASE + i * PAGE));
    }
    ok(&s.pt);
    assert!((96..104).all(|i| sizes(&s.pt)[i] == 1), "re-promoted once all dirty");
    // A write to a clean 512KB sibling traps and splits it along its own path.
    s.step(Access::write(BASE + 5 * PAGE));
    let sz = sizes(&s.pt);
    assert_eq!(s.pt.stats().wp_traps, 2);
    assert!((0..64).all(|i| sz[i] == if i < 8 { 0 } else { 1 }));
}

#[test]
fn preemption_takes_the_least_recently_populated_reservation_one_level_down() {
    // 8MB of memory: two 4MB extents, both reserved by A then B.
    let mut s = alpha(&header(4 * MB4, false), 2 * MB4);
    let (a, b, c) = (BASE, BASE + MB4, BASE + 2 * MB4);
    s.step(Access::read(a));
    s.step(Access::read(b));
    // A is allocated into again: B is now the least recently populated.
    s.step(Access::read(a + PAGE));
    let fb = common::vma_frame(&s.pt, 0, 0, (MB4 / PAGE) as usize);
    assert_eq!(s.pt.phys().free_frames(), 0);
    s.step(Access::read(c));
    ok(&s.pt);
    let k = &s.pt;
    assert_eq!(k.stats().preemptions, 1);
    assert_eq!(k.stats().preferred_failures, 1);
    // B broke into eight 512KB pieces: its populated one stays reserved,
    // one went to C, six are free.
    assert_eq!(k.phys().free_frames(), 6 * 64);
    assert_eq!(k.reservation_count(), 3);
    assert_eq!(k.reserved_frames(), 510 + 63 + 63);
    assert_eq!(common::vma_frame(k, 0, 0, (MB4 / PAGE) as usize), fb, "B's page keeps its frame");
    let fc = common::vma_frame(k, 0, 0, (2 * MB4 / PAGE) as usize);
    assert!(fc >= fb + 64 && fc < fb + 512 && fc.is_multiple_of(64), "C got a 512KB piece of B's extent");
    // A was not touched: faulting its page 2 still maps its own frame.
    s.step(Access::read(a + 2 * PAGE));
    assert_eq!(common::vma_frame(&s.pt, 0, 0, 2), common::vma_frame(&s.pt, 0, 0, 0) + 2);
    // B's remaining 512KB piece still fills in place.
    s.step(Access::read(b + PAGE));
    assert_eq!(common::vma_frame(&s.pt, 0, 0, (MB4 / PAGE) as usize + 1), fb + 1);
    ok(&s.pt);
}

#[test]
fn one_free_4mb_extent_and_4mb_stride_touches_give_one_preemption_per_seven_allocations() {
    // Navarro §6.6: each split keeps 1 piece around the old page, gives 1 to
    // the new page and frees 6 for the next six allocations.
    let n = 1 + 7 * 20;
    let mut s = alpha(&header(n * MB4, false), MB4);
    for i in 0..n {
        s.step(Access::read(BASE + i * MB4));
        let pre = s.pt.stats().preemptions;
        assert_eq!(pre, i.div_ceil(7), "after {} allocations", i + 1);
        if i == 1 {
            assert_eq!(s.pt.phys().free_frames(), 6 * 64);
        }
    }
    ok(&s.pt);
    assert_eq!(s.pt.stats().preferred_failures, n - 1);
    assert_eq!(s.pt.stats().out_of_memory, 0);
}

#[test]
fn freeing_depopulates_and_an_empty_reservation_returns_its_extent() {
    let mut s = alpha(&header(MB4, false), 64 << 20);
    let free0 = s.pt.phys().free_frames();
    for i in [0u64, 1, 9, 300] {
        s.step(Access::read(BASE + i * PAGE));
    }
    assert_eq!(s.pt.phys().free_frames(), free0 - 512);
    s.pt.free_range(0, BASE, 2 * PAGE);
    s.apply_shootdowns();
    ok(&s.pt);
    assert_eq!((s.pt.reserved_frames(), s.pt.reservation_count()), (510, 1));
    // Refaulting a freed page maps the same reserved frame again.
    let f0 = common::vma_frame(&s.pt, 0, 0, 9) - 9;
    s.step(Access::read(BASE));
    assert_eq!(common::vma_frame(&s.pt, 0, 0, 0), f0);
    s.pt.free_range(0, BASE, MB4);
    ok(&s.pt);
    assert_eq!((s.pt.reserved_frames(), s.pt.reservation_count()), (0, 0));
    assert_eq!(s.pt.phys().free_frames(), free0);
    assert_eq!(s.pt.stats().peak_reserved_frames, 511);
}

#[test]
fn freeing_part_of_a_superpage_in_a_reservation_keeps_the_rest_mapped() {
    let mut s = clean_4mb();
    s.pt.free_range(0, BASE + 8 * PAGE, 8 * PAGE);
    ok(&s.pt);
    let k = &s.pt;
    assert_eq!(k.reserved_frames(), 8);
    assert_eq!(k.spaces()[0].frames_held(), 504);
    assert!(k.phys().free_frames() < k.phys().total_frames() - 504);
}

#[test]
fn on_x86_a_2mb_reservation_promotes_with_one_pmd_write_at_the_512th_page() {
    let mut s = sim_on("haswell-pcc", &header(2 << 20, false), 64 << 20, &[]);
    for i in 0..512u64 {
        s.step(Access::write(BASE + i * 4096));
        let sz = s.pt.view().page(0, BASE + i * 4096).unwrap().leaf_size;
        assert_eq!(sz, if i == 511 { 1 } else { 0 }, "page {i}");
    }
    ok(&s.pt);
    assert_eq!((s.pt.stats().promotions, s.pt.stats().reservations), (1, 1));
    // Written pages: a dirty superpage, not write-protected.
    s.step(Access::write(BASE));
    assert_eq!(s.pt.stats().wp_traps, 0);
    // 1GB is not reserved unless asked (ref §10.13).
    assert_eq!(s.pt.policy_params()["sizes"], serde_json::json!(["2m"]));
}

#[test]
fn on_x86_the_first_write_to_a_clean_2mb_page_traps_once_and_splits_it() {
    let mut s = sim_on("haswell-pcc", &header(2 << 20, false), 64 << 20, &[]);
    for i in 0..512u64 {
        s.step(Access::read(BASE + i * 4096));
    }
    assert_eq!(s.pt.view().page(0, BASE).unwrap().leaf_size, 1);
    let us0 = s.pt.clock().os_sync_seconds;
    s.step(Access::write(BASE + 77 * 4096));
    ok(&s.pt);
    let k = &s.pt;
    // No size between 4KB and 2MB: one level, every page a base page again.
    assert_eq!((k.stats().wp_traps, k.stats().demotions), (1, 1));
    assert!(common::vma_leaf_sizes(k, 0, 0).iter().all(|&s| s == 0));
    // The trap (1 us), one table rebuilt (split_us 20) and the shootdown (4).
    let us = (k.clock().os_sync_seconds - us0) * 1e6;
    assert!((us - 25.0).abs() < 1e-6, "charged {us} us");
}

#[test]
fn single_size_variant_promotes_only_that_size() {
    let mut s = sim_on("alpha-21264", &header(MB4, false), 64 << 20, &[("sizes", "64k")]);
    for i in 0..512 {
        s.step(Access::read(BASE + i * PAGE));
    }
    ok(&s.pt);
    assert!(sizes(&s.pt).iter().all(|&x| x == 1));
    assert_eq!(s.pt.stats().reservations, 64);
}

#[test]
fn bad_sizes_are_one_clear_error() {
    let e = policy::make("navarro", &[("sizes".into(), "64q".into())]).err().unwrap().to_string();
    assert!(e.contains("sizes=64q") && !e.contains('\n'), "{e}");
    let e = policy::make("navarro", &[("wp".into(), "maybe".into())]).err().unwrap().to_string();
    assert!(e.contains("wp") && e.contains("maybe") && !e.contains('\n'), "{e}");
}

#[test]
fn writeback_writes_dirty_leaves_whole_unless_the_write_demoted_them() {
    // A 4MB file read whole, then one page written, then flushed.
    let run = |wp: &str| {
        let mut h = TraceHeader::new("synthetic");
        h.regions.push(hugescope_core::trace::Region::new("file", BASE, MB4).with_kind(RegionKind::File));
        let mut s = sim_on("alpha-21264", &h, 64 << 20, &[("wp", wp)]);
        for i in 0..512 {
            s.step(Access::read(BASE + i * PAGE));
        }
        s.step(Access::write(BASE + 3 * PAGE));
        use hugescope_core::hw::PageTable;
        let before = s.pt.clock().os_sync_seconds;
        s.pt.progress("msync");
        ok(&s.pt);
        // The flush waits for its writes: os.writeback_us (5000 us by
        // default) per base page written, charged to the program.
        (s.pt.stats().writeback_bytes, s.pt.clock().os_sync_seconds - before)
    };
    let (bytes, secs) = run("true");
    assert_eq!(bytes, PAGE, "demoted on write: one 8KB page written back");
    assert!((secs - 5000e-6).abs() < 1e-12, "one page's write: {secs} s");
    let (bytes, secs) = run("false");
    assert_eq!(bytes, MB4, "no demote-on-write: the whole 4MB superpage");
    assert!((secs - 512.0 * 5000e-6).abs() < 1e-9, "512 pages' writes: {secs} s");
}

#[test]
fn demote_path_without_reservations_walks_every_smaller_size() {
    // Under a policy that maps 4MB pages directly (ideal), the path demotion
    // uses all of the machine's sizes.
    let cfg = MachineConfig::preset("alpha-21264").unwrap();
    // Ideal maps the PMD-level region (8MB on Alpha) only when the VMA covers it.
    let h = header(2 * MB4, false);
    let k = Kernel::new(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), &h, &os(64 << 20), policy::make("ideal", &[]).unwrap()).unwrap();
    let mut s = Simulator::new(cfg, 1, k).unwrap();
    s.step(Access::read(BASE));
    assert_eq!(sizes(&s.pt)[0], 3);
    assert!(s.pt.demote_path(0, BASE + 511 * PAGE));
    let sz = &sizes(&s.pt)[..512];
    assert_eq!(sz.iter().filter(|&&x| x == 2).count(), 7 * 64);
    assert_eq!(sz.iter().filter(|&&x| x == 1).count(), 7 * 8);
    assert_eq!(sz.iter().filter(|&&x| x == 0).count(), 8);
    assert_eq!(s.pt.spaces()[0].huge_bytes()[1..4], [7 * (64 << 10), 7 * (512 << 10), 0]);
    ok(&s.pt);
    assert!(!s.pt.demote_path(0, BASE + 511 * PAGE), "a base page now: nothing to demote");
}

#[derive(Clone, Debug)]
enum Op {
    Touch(u64, bool),
    Run(u64, u64, bool),
    Free(u64, u64),
    Evict(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // 16MB of address space (2048 pages) over 6MB of memory: pressure,
    // preemption and out-of-memory all happen; runs of touches fill nodes so
    // promotions happen too.
    prop_oneof![
        6 => (0u64..2048, any::<bool>()).prop_map(|(p, w)| Op::Touch(p, w)),
        3 => (0u64..2048, 1u64..80, any::<bool>()).prop_map(|(p, n, w)| Op::Run(p, n, w)),
        6 => (0u64..4).prop_map(|r| Op::Touch(r * 512 + 7, false)),
        2 => (0u64..2048, 1u64..600).prop_map(|(p, n)| Op::Free(p, n)),
        1 => (0u64..2048).prop_map(Op::Evict),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn frames_are_conserved_under_random_faults_frees_and_evictions(ops in proptest::collection::vec(op(), 1..120), seq in any::<bool>()) {
        let mut s = alpha(&header(4 * MB4, false), 6 << 20);
        if seq {
            // Sometimes start from full superpages so frees and evictions split them.
            for i in 0..512 {
                s.step(Access::read(BASE + i * PAGE));
            }
        }
        for o in ops {
            match o {
                Op::Touch(p, w) => s.step(if w { Access::write(BASE + p * PAGE) } else { Access::read(BASE + p * PAGE) }),
                Op::Run(p, n, w) => {
                    for q in p..(p + n).min(2048) {
                        s.step(if w { Access::write(BASE + q * PAGE) } else { Access::read(BASE + q * PAGE) });
                    }
                }
                Op::Free(p, n) => {
                    s.pt.free_range(0, BASE + p * PAGE, n * PAGE);
                    s.apply_shootdowns();
                }
                Op::Evict(p) => {
                    s.pt.demote_path(0, BASE + p * PAGE);
                    s.apply_shootdowns();
                }
            }
            if let Err(e) = s.pt.check_invariants() {
                prop_assert!(false, "{}", e);
            }
        }
        if std::env::var("RSV_DEBUG").is_ok() {
            let st = s.pt.stats();
            eprintln!("pre {} res {} oom {} prom {} dem {} wp {}", st.preemptions, st.reservations, st.out_of_memory, st.promotions, st.demotions, st.wp_traps);
        }
    }
}
