//! The OS model and the shipped policies on hand-built access streams
//! (issue: OS model, acceptance list; the bfs/kv versions are in tests/ of the
//! Python package, end to end).

mod common;

use common::{header, sim, Rng, BASE, MB2};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Fragmentation, Kernel, OsConfig};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, AccessSink};

/// Random 8-byte reads over `len` bytes.
fn random(s: &mut Simulator<Kernel>, len: u64, n: u64, seed: u64) {
    let mut r = Rng(seed | 1);
    for _ in 0..n {
        s.step(Access::read(BASE + (r.next() % (len / 8)) * 8));
    }
}

fn os(rate: f64) -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: rate }), ..Default::default() }
}

#[test]
fn madvise_mode_without_advice_equals_base() {
    let h = header(64 << 20, false);
    let mut a = sim(&h, os(1e6), "linux", &[("enabled", "madvise")]);
    let mut b = sim(&h, os(1e6), "base", &[]);
    random(&mut a, 64 << 20, 200_000, 5);
    random(&mut b, 64 << 20, 200_000, 5);
    assert_eq!(a.counters(), b.counters());
    assert_eq!(a.pt.huge_bytes(), 0);
    // ...and with the region advised, it maps huge pages at fault time.
    let ha = header(64 << 20, true);
    let mut c = sim(&ha, os(1e6), "linux", &[("enabled", "madvise")]);
    random(&mut c, 64 << 20, 200_000, 5);
    assert_eq!(c.pt.huge_bytes(), 64 << 20);
    assert!(c.counters().walks * 10 < b.counters().walks);
}

#[test]
fn ideal_maps_everything_huge_and_walks_least() {
    let h = header(64 << 20, false);
    let mut i = sim(&h, os(1e6), "ideal", &[]);
    let mut l = sim(&h, os(1e6), "linux", &[]);
    let mut b = sim(&h, os(1e6), "base", &[]);
    for s in [&mut i, &mut l, &mut b] {
        random(s, 64 << 20, 100_000, 9);
    }
    let (wi, wl, wb) = (i.counters().walks, l.counters().walks, b.counters().walks);
    assert!(wi <= wl && wl < wb, "{wi} {wl} {wb}");
    assert_eq!(i.pt.huge_bytes(), 64 << 20);
    // Enough free memory: linux at fault time is exactly ideal here.
    assert_eq!(wi, wl);
    i.pt.check_invariants().unwrap();
}

#[test]
fn linux_falls_back_to_base_pages_under_unmovable_fragmentation() {
    let h = header(64 << 20, false);
    let frag = OsConfig { fragmentation: Some(Fragmentation::Pcc { share: 0.9 }), memory_bytes: Some(1 << 30), ..os(1e6) };
    let mut l = sim(&h, frag.clone(), "linux", &[("defrag", "always")]);
    random(&mut l, 64 << 20, 100_000, 3);
    let k = &l.pt;
    // At most the unblocked 10% of memory can become huge pages, and
    // compaction cannot undo unmovable blocks.
    let free_blocks = ((1u64 << 30) / MB2) as f64 * 0.1;
    assert!(k.huge_bytes() as f64 <= (free_blocks + 1.0) * MB2 as f64);
    // With 90% of 1GiB blocked and a 64MiB footprint, ~51 free blocks remain:
    // more than the 32 the footprint needs, so every region still gets one.
    assert_eq!(k.huge_bytes(), 64 << 20);
    assert_eq!(k.stats().fault_fallbacks, 0);
    k.check_invariants().unwrap();
    // Shrink memory so the free blocks do not suffice.
    let tight = OsConfig { memory_bytes: Some(256 << 20), ..frag };
    let mut t = sim(&h, tight, "linux", &[("defrag", "always"), ("khugepaged", "false")]);
    let mut b = sim(&h, os(1e6), "base", &[]);
    random(&mut t, 64 << 20, 100_000, 3);
    random(&mut b, 64 << 20, 100_000, 3);
    assert!(t.pt.huge_bytes() <= 13 * MB2, "{}", t.pt.huge_bytes());
    assert!(t.pt.stats().fault_fallbacks > 0);
    let (wt, wb) = (t.counters().walks as f64, b.counters().walks as f64);
    assert!(wt > 0.5 * wb, "fragmented linux should stay close to base: {wt} vs {wb}");
}

#[test]
fn khugepaged_collapses_at_its_scan_speed() {
    // Ingens-style fragmentation with movable pages: fault-time allocation
    // (defrag=never: free blocks only) falls back, khugepaged compacts and
    // collapses, 8 ranges (4096 pages) per 10 s pass at most.
    let h = header(256 << 20, false);
    let o = OsConfig { fragmentation: Some(Fragmentation::Ingens { fmfi: 0.99, pinned: false }), memory_bytes: Some(1 << 30), ..os(10_000.0) };
    let mut s = sim(&h, o, "linux", &[("defrag", "never")]);
    // Touch every page first (base pages, fragmented), then keep accessing for
    // 100 s of virtual time (1M accesses at 10k/s).
    for p in 0..(256u64 << 20) / 4096 {
        s.step(Access::write(BASE + p * 4096));
    }
    let before = s.pt.stats().promotions;
    assert!(s.pt.stats().fault_fallbacks > 100, "fragmentation should defeat fault-time huge pages");
    let t0 = s.pt.now();
    random(&mut s, 256 << 20, 1_000_000, 11);
    let elapsed = s.pt.now() - t0;
    let collapsed = s.pt.stats().promotions - before;
    let passes = (elapsed / 10.0).ceil() as u64 + 1;
    assert!(collapsed > 0, "khugepaged never collapsed");
    assert!(collapsed <= 8 * passes, "{collapsed} collapses in {elapsed:.1} s");
    // Per 10 s window of the timeline, never more than 8.
    s.pt.check_invariants().unwrap();
}

#[test]
fn budget_is_never_exceeded() {
    let h = header(64 << 20, false);
    for pol in ["ideal", "linux"] {
        let o = OsConfig { budget: Some(0.25), ..os(1e5) };
        let mut s = sim(&h, o, pol, &[]);
        let mut r = Rng(77);
        for i in 0..300_000u64 {
            s.step(Access::read(BASE + (r.next() % ((64 << 20) / 8)) * 8));
            if i % 10_000 == 0 {
                assert!(s.pt.huge_bytes() <= 8 * MB2);
                s.pt.check_invariants().unwrap();
            }
        }
        assert_eq!(s.pt.huge_bytes(), 8 * MB2, "{pol} should fill its budget of 8 regions");
        assert!(s.pt.stats().fault_failures.budget > 0);
    }
}

#[test]
fn bloat_after_freeing_most_of_the_memory() {
    // Insert-then-delete: touch 16MiB, then free 70% of its 4KB pages at
    // random (as an allocator returns fully freed pages with MADV_DONTNEED).
    let h = header(16 << 20, false);
    let mut results = Vec::new();
    for pol in ["linux", "base"] {
        let mut s = sim(&h, os(1e6), pol, &[("khugepaged", "false")].iter().filter(|_| pol == "linux").copied().collect::<Vec<_>>());
        let pages = (16u64 << 20) / 4096;
        for p in 0..pages {
            s.step(Access::write(BASE + p * 4096));
        }
        let mut r = Rng(5);
        for p in 0..pages {
            if r.next() % 10 < 7 {
                s.free(0, BASE + p * 4096, 4096);
            }
        }
        let procs = s.pt.finish();
        s.pt.check_invariants().unwrap();
        results.push(procs[0].bloat);
    }
    assert!(results[0] > 1.3, "linux bloat {}", results[0]);
    assert!((results[1] - 1.0).abs() < 1e-12, "base bloat {}", results[1]);
}

#[test]
fn promotion_shoots_down_stale_base_translations() {
    let h = header(8 << 20, false);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, format!(r#"[{{"start":{},"length":{},"page_size":2097152,"when":{{"accesses":3000}}}}]"#, BASE + MB2, MB2)).unwrap();
    let mut s = sim(&h, os(1e6), "static", &[("plan", plan.to_str().unwrap())]);
    for _ in 0..2 {
        for p in 0..((8u64 << 20) / 4096) {
            s.step(Access::read(BASE + p * 4096).on_cpu(0));
        }
    }
    assert_eq!(s.pt.stats().promotions, 1);
    // No TLB may hold a 4KB translation of the promoted region.
    for m in &s.mmus {
        for t in m.l1.iter().chain(m.l2.iter()) {
            for tag in t.cache.tags() {
                let (vpn, size, _) = hugescope_core::hw::tlb::untag(tag);
                let va = vpn << if size == 0 { 12 } else { 21 };
                assert!(!(size == 0 && va >= BASE + MB2 && va < BASE + 2 * MB2), "stale 4KB entry {va:#x}");
            }
        }
    }
    assert_eq!(s.pt.executed_plan().len(), 1);
}

#[test]
fn random_policy_is_seeded_budgeted_and_picks_touched_regions() {
    let h = header(64 << 20, false);
    let plan = |seed: &str| {
        let o = OsConfig { budget: Some(0.25), ..os(100_000.0) };
        let mut s = sim(&h, o, "random", &[("seed", seed)]);
        // Touch only the first half of the regions, for 2 s of virtual time.
        random(&mut s, 32 << 20, 200_000, 4);
        s.pt.check_invariants().unwrap();
        s.pt.executed_plan().iter().map(|e| e.start).collect::<Vec<_>>()
    };
    let (a, b, c) = (plan("1"), plan("1"), plan("2"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 8, "a 25% budget of 32 regions is 8");
    assert!(a.iter().all(|&s| s >= BASE && s < BASE + (32 << 20)), "only touched regions");
}

/// Free most of a huge-page-backed range (the huge pages split and keep their
/// frames), touch it again, then collapse it again: the allocator is never
/// misused and every frame in use is accounted to the process.
#[test]
fn collapse_over_partly_freed_huge_pages_keeps_frame_accounting() {
    let h = header(8 << 20, false);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, format!(r#"[{{"start":{BASE},"length":{},"page_size":2097152,"when":{{"accesses":6000}}}}]"#, 8 << 20)).unwrap();
    let mut s = sim(&h, os(1e6), "static", &[("plan", plan.to_str().unwrap())]);
    let pages = (8u64 << 20) / 4096;
    for p in 0..pages {
        s.step(Access::write(BASE + p * 4096));
    }
    assert_eq!(s.pt.huge_bytes(), 0);
    // Promote at 6000 accesses...
    for p in 0..pages * 3 {
        s.step(Access::read(BASE + (p % pages) * 4096));
    }
    assert_eq!(s.pt.huge_bytes(), 8 << 20);
    s.pt.check_invariants().unwrap();
    // ...free 70% of the pages (splits, frames kept), touch everything again.
    let mut r = Rng(9);
    for p in 0..pages {
        if r.next() % 10 < 7 {
            s.free(0, BASE + p * 4096, 4096);
        }
    }
    s.pt.check_invariants().unwrap();
    for p in 0..pages {
        s.step(Access::write(BASE + p * 4096));
    }
    s.pt.check_invariants().unwrap();
    // Collapse again over the mix of leaked and fresh frames.
    for a in (0..(8u64 << 20)).step_by(2 << 20) {
        s.pt.promote(0, BASE + a, 1, hugescope_core::os::AllocMode::Compact { max_pages: 1 << 14 }).unwrap();
    }
    s.apply_shootdowns();
    s.pt.check_invariants().unwrap();
    assert_eq!(s.pt.huge_bytes(), 8 << 20);
}

/// The OS model's virtual clock advances by the cost model's cycles of each
/// access: with OS costs zeroed and a cycles time base, virtual time x clock
/// rate equals the cost estimate's total cycles.
#[test]
fn virtual_time_agrees_with_the_cost_model() {
    use hugescope_core::cost;
    use hugescope_core::os::costs::OsCosts;
    let h = header(64 << 20, false);
    let hz = 1e9;
    let o = OsConfig { time: Some(TimeBase::Cycles { hz }), costs: OsCosts::zero(), ..Default::default() };
    for pol in ["base", "linux"] {
        let mut s = sim(&h, o.clone(), pol, &[]);
        random(&mut s, 64 << 20, 300_000, 21);
        let est = cost::estimate(&s.counters(), &s.cfg.cost, 0.0);
        let clock_cycles = s.pt.now() * hz;
        assert!((clock_cycles - est.total_cycles).abs() < 1e-6 * est.total_cycles, "{pol}: {clock_cycles} vs {}", est.total_cycles);
        if pol == "base" {
            // The PWC term is exercised (the clock once left it out).
            assert!(s.counters().pwc_hits > 0);
        }
    }
}
