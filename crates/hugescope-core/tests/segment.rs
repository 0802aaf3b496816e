//! Direct-segment hardware (issue #10): hand-checked counts. The figures in
//! each test follow from the access list alone: a segment hit is an access
//! and a segment hit, nothing else; everything outside walks on first touch
//! of its page and hits the L1 after (the few pages used fit every L1 here).

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::segment::{RegionClassifier, MAX_REGION_CLASSES};
use hugescope_core::hw::{DirectSegment, Lookup, Outcome, Space};
use hugescope_core::pagemap::{MappedRange, StaticMap};
use hugescope_core::sim::{simulate_static, Simulator};
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, Region, TraceHeader};
use std::sync::Arc;

const PAGE: u64 = 4096;
/// Segment BASE; LIMIT is 16 pages above.
const S: u64 = 0x7e00_0000_0000;
const LIMIT: u64 = S + 16 * PAGE;
const P0: Space = Space { vm: 0, asid: 0 };

fn sim(map: StaticMap) -> Simulator<StaticMap> {
    Simulator::new(MachineConfig::preset("haswell-pcc").unwrap(), 1, map).unwrap()
}

fn seg() -> DirectSegment {
    DirectSegment::new(S, LIMIT, 0x1000_0000).unwrap()
}

#[test]
fn hits_touch_no_tlb() {
    let mut s = sim(StaticMap::Uniform(0));
    s.set_segment(0, Some(seg()));
    // 3 passes over the 16 pages, two addresses per page: 96 accesses.
    for _ in 0..3 {
        for p in 0..16 {
            s.step(Access::read(S + p * PAGE));
            s.step(Access::write(S + p * PAGE + 8));
        }
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.writes), (96, 48));
    assert_eq!((c.l1_hits, c.l2_hits, c.walks, c.walk_refs, c.pwc_hits), (0, 0, 0, 0, 0));
    for z in &c.by_page_size {
        assert_eq!((z.accesses, z.l1_hits, z.l1_misses, z.l2_hits, z.l2_misses, z.walks), (0, 0, 0, 0, 0, 0), "{}", z.page_size);
    }
    let g = c.segment.clone().unwrap();
    assert_eq!((g.hits, g.tlb_lookups_avoided, g.walks_outside), (96, 96, 0));
    assert_eq!(g.hit_rate, 1.0);
    // Nothing was filled, and the PWCs were never consulted.
    assert!(!s.mmus[0].holds(P0, 0, u64::MAX));
    // Zero translation cycles: only the base cost of 96 accesses.
    let e = hugescope_core::cost::estimate(&c, &s.cfg.cost, 0.0);
    assert_eq!(e.translation_cycles, 0.0);
    assert_eq!(e.base_cycles, 96.0 * s.cfg.cost.base_cycles_per_access);
    assert_eq!(s.cfg.cost.lookup_cycles(Lookup::Segment, None), s.cfg.cost.base_cycles_per_access);
    // PA = VA + OFFSET, wrapping.
    assert_eq!(seg().translate(S + 5), S + 5 + 0x1000_0000);
    let neg = DirectSegment::new(S, LIMIT, 0u64.wrapping_sub(S)).unwrap();
    assert_eq!(neg.translate(S + 0x2000), 0x2000);
}

#[test]
fn limit_and_base_minus_one_walk() {
    let mut s = sim(StaticMap::Uniform(0));
    s.set_segment(0, Some(seg()));
    let m = &mut s.mmus[0];
    assert_eq!(m.translate(&Access::read(S)), Lookup::Segment);
    assert_eq!(m.translate(&Access::read(LIMIT - 1)), Lookup::Segment);
    assert_eq!(m.translate(&Access::read(LIMIT)), Lookup::Tlb(Outcome::Miss));
    assert_eq!(m.translate(&Access::read(S - 1)), Lookup::Tlb(Outcome::Miss));
    // Through the simulator: LIMIT and BASE-1 each walk once (two distinct
    // 4KB pages), then hit the L1; BASE and LIMIT-1 are segment hits.
    let mut s = sim(StaticMap::Uniform(0));
    s.set_segment(0, Some(seg()));
    for a in [LIMIT, S - 1, S, LIMIT - 1, LIMIT + 8, S - PAGE] {
        s.step(Access::read(a));
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks, c.l1_hits, c.l2_hits), (6, 2, 2, 0));
    let g = c.segment.unwrap();
    assert_eq!((g.hits, g.walks_outside), (2, 2));
    // The walks filled exactly the two pages beside the segment.
    assert!(s.mmus[0].holds(P0, LIMIT, LIMIT + 1));
    assert!(s.mmus[0].holds(P0, S - 1, S));
    assert!(!s.mmus[0].holds(P0, S, LIMIT));
}

#[test]
fn clearing_the_segment_walks_with_no_stale_translation() {
    let mut s = sim(StaticMap::Uniform(0));
    s.set_segment(0, Some(seg()));
    for p in 0..8 {
        s.step(Access::read(S + p * PAGE));
    }
    s.set_segment(0, None);
    assert_eq!(s.mmus[0].segment(), None);
    // 8 first touches after the revert: 8 walks (no TLB held the pages);
    // a second pass hits the L1 8 times.
    for _ in 0..2 {
        for p in 0..8 {
            s.step(Access::read(S + p * PAGE));
        }
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks, c.l1_hits), (24, 8, 8));
    let g = c.segment.unwrap();
    // Walks with no segment loaded are not "outside" one.
    assert_eq!((g.hits, g.walks_outside), (8, 0));
    // Loading it again: hits again, the paged entries left alone.
    s.set_segment(0, Some(seg()));
    s.step(Access::read(S));
    assert_eq!(s.counters().segment.unwrap().hits, 9);
    assert!(s.mmus[0].holds(P0, S, S + 1));
}

#[test]
fn another_address_space_never_hits() {
    let mut s = Simulator::new(MachineConfig::preset("haswell-pcc").unwrap(), 2, StaticMap::Uniform(0)).unwrap();
    s.set_segment(0, Some(seg()));
    // pid 1 on both cpus: 4 pages, each walked once per cpu.
    for cpu in 0..2 {
        for p in 0..4 {
            s.step(Access::read(S + p * PAGE).in_pid(1).on_cpu(cpu));
        }
    }
    // pid 0 on cpu 1: segment hits (every cpu's context was loaded).
    for p in 0..4 {
        s.step(Access::read(S + p * PAGE).on_cpu(1));
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks), (12, 8));
    assert_eq!(c.per_cpu_walks, vec![4, 4]);
    let g = c.segment.unwrap();
    assert_eq!((g.hits, g.walks_outside), (4, 8));
    // The same pid in another VM is another address space too.
    s.mmus[0].set_vm(1);
    assert_eq!(s.mmus[0].translate(&Access::read(S)), Lookup::Tlb(Outcome::Miss));
    // Clearing pid 1's segment leaves pid 0's loaded.
    s.set_segment(1, None);
    assert_eq!(s.mmus[1].segment(), Some((P0, seg())));
}

#[test]
fn outside_the_segment_2mb_entries_still_serve() {
    // [A, A+4MB) backed by 2MB pages, the rest by 4KB pages.
    let a = 0x5000_0000_0000u64;
    let map = StaticMap::Ranges(vec![MappedRange { pid: 0, start: a, end: a + (4 << 20), size: 1 }]);
    let mut s = sim(map);
    s.set_segment(0, Some(seg()));
    // Every 4KB page of the 4MB range: 1024 accesses, 2 walks (one per 2MB
    // page, counted by 2MB), 1022 L1 hits on 2MB entries.
    for p in 0..1024 {
        s.step(Access::read(a + p * PAGE));
    }
    // 16 segment hits, then 3 4KB pages elsewhere: 3 walks by 4KB.
    for p in 0..16 {
        s.step(Access::read(S + p * PAGE));
    }
    for p in 0..3 {
        s.step(Access::read(0x1000_0000 + p * PAGE));
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks, c.l1_hits), (1024 + 16 + 3, 5, 1022));
    let (k4, m2) = (&c.by_page_size[0], &c.by_page_size[1]);
    assert_eq!((k4.accesses, k4.walks, k4.l1_hits), (3, 3, 0));
    assert_eq!((m2.accesses, m2.walks, m2.l1_hits), (1024, 2, 1022));
    let g = c.segment.unwrap();
    assert_eq!((g.hits, g.walks_outside), (16, 5));
}

#[test]
fn outside_walks_by_region_class() {
    let mut s = sim(StaticMap::Uniform(0));
    s.set_segment(0, Some(seg()));
    // Class 1 above the segment, 0 below; an out-of-range class is clamped.
    let f = RegionClassifier(Arc::new(|_, va| if va >= LIMIT { 1 } else if va < 0x1000 { 99 } else { 0 }));
    s.mmus[0].set_region_classifier(Some(f));
    for a in [LIMIT, LIMIT + PAGE, S - PAGE, 0, S] {
        s.step(Access::read(a));
    }
    let g = s.counters().segment.unwrap();
    let mut want = vec![0; MAX_REGION_CLASSES];
    want[0] = 1;
    want[1] = 2;
    want[MAX_REGION_CLASSES - 1] = 1;
    assert_eq!((g.hits, g.walks_outside, g.walks_outside_by_class), (1, 4, want));
}

#[test]
fn register_values_are_validated() {
    let e = |r: hugescope_core::Result<DirectSegment>| r.unwrap_err().to_string();
    assert!(e(DirectSegment::new(S + 1, LIMIT, 0)).contains("base=0x7e0000000001: not 4KB aligned"));
    assert!(e(DirectSegment::new(S, LIMIT + 8, 0)).contains("limit="));
    assert!(e(DirectSegment::new(S, S, 0x800)).contains("offset=0x800"));
    assert!(e(DirectSegment::new(LIMIT, S, 0)).contains("below base"));
    assert!(e(DirectSegment::new(0, 1 << 60, 0)).contains("address space"));
    // BASE == LIMIT disables: no hits, and no segment counters in results.
    let mut s = sim(StaticMap::Uniform(0));
    s.set_segment(0, Some(DirectSegment::new(S, S, 0).unwrap()));
    s.step(Access::read(S));
    assert_eq!(s.mmus[0].segment(), None);
    let c = s.counters();
    assert_eq!((c.walks, c.segment.is_none()), (1, true));
    assert!(!serde_json::to_string(&c).unwrap().contains("segment"));
}

/// A trace with a 64KB region "big" and an 8KB region "small", each page of
/// big read twice and each page of small once (34 accesses).
fn trace(dir: &std::path::Path) -> String {
    let (big, small) = (0x6000_0000_0000u64, 0x4000_0000_0000u64);
    let mut h = TraceHeader::new("test");
    h.regions = vec![
        Region { name: "small".into(), base: small, len: 2 * PAGE, pid: 0, hugepage_advised: false },
        Region { name: "big".into(), base: big, len: 16 * PAGE, pid: 0, hugepage_advised: false },
    ];
    let path = dir.join("t.hst");
    let mut w = HstWriter::create(&path, &h).unwrap();
    for _ in 0..2 {
        for p in 0..16 {
            w.write(Access::read(big + p * PAGE)).unwrap();
        }
    }
    for p in 0..2 {
        w.write(Access::read(small + p * PAGE)).unwrap();
    }
    w.finish().unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn static_runs_with_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let run = |pages: &str| simulate_static(&t, MachineConfig::preset("sandybridge-ds").unwrap(), pages);
    // DS: the largest region (big) in the segment; small's 2 pages walk.
    let r = run("4k+ds").unwrap();
    let g = r.translation.segment.clone().unwrap();
    assert_eq!((r.translation.accesses, r.translation.walks, g.hits, g.walks_outside), (34, 2, 32, 2));
    assert_eq!(r.pages, "all 4k + direct segment over 'big' (pid 0) [0x600000000000, 0x600000010000)");
    // DS+2MB: small's 2 pages share one 2MB page: one walk.
    let r = run("2m+ds").unwrap();
    assert_eq!((r.translation.walks, r.translation.by_page_size[1].walks), (1, 1));
    // ds:small: big's 16 pages walk once each, then hit the L1 16 times.
    let r = run("ds:small").unwrap();
    let g = r.translation.segment.clone().unwrap();
    assert_eq!((r.translation.walks, r.translation.l1_hits, g.hits), (16, 16, 2));
    // Without a segment nothing changes, not even the JSON's fields.
    let r = run("4k").unwrap();
    assert_eq!((r.translation.walks, r.translation.l1_hits), (18, 16));
    assert!(!serde_json::to_string(&r).unwrap().contains("\"segment\""));
    let e = run("ds:nope").unwrap_err().to_string();
    assert!(e.contains("--pages 'ds:nope': the trace has no region 'nope' (regions: small, big)"), "{e}");
    let e = run("64k+ds").unwrap_err().to_string();
    assert!(e.contains("64k"), "{e}");
}
