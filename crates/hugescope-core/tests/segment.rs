//! Direct-segment hardware (issue #10): hand-checked counts. The figures in
//! each test follow from the access list alone: a segment hit is an access
//! and a segment hit, nothing else; everything outside walks on first touch
//! of its page and hits the L1 after (the few pages used fit every L1 here).

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::segment::{ProcessSegment, WalkKind};
use hugescope_core::hw::{DirectSegment, RadixWalker, SegmentUnit, Segments, Space};
use hugescope_core::pagemap::{MappedRange, StaticMap};
use hugescope_core::sim::{simulate_static, Simulator};
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, Region, RegionKind, TraceHeader};

const PAGE: u64 = 4096;
/// Segment BASE; LIMIT is 16 pages above.
const S: u64 = 0x7e00_0000_0000;
const LIMIT: u64 = S + 16 * PAGE;
const P0: Space = Space { vm: 0, asid: 0 };

type SegSim = Simulator<StaticMap, RadixWalker, Segments>;

fn sim_on(preset: &str, cpus: usize, map: StaticMap) -> SegSim {
    Simulator::with_unit(MachineConfig::preset(preset).unwrap(), cpus, map).unwrap()
}

fn sim(map: StaticMap) -> SegSim {
    sim_on("sandybridge-ds", 1, map)
}

fn seg() -> DirectSegment {
    DirectSegment::new(S, LIMIT, 0x1000_0000).unwrap()
}

/// pid's description: primary region = the segment's range, given registers.
fn load(s: &mut SegSim, pid: u16, regs: DirectSegment) {
    let kinds = vec![(S, LIMIT, WalkKind::Other)];
    s.seg.update(ProcessSegment { pid, primary: (S, LIMIT), regs, compaction_seconds: 0.0, kinds });
}

#[test]
fn hits_touch_no_tlb() {
    let mut s = sim(StaticMap::Uniform(0));
    load(&mut s, 0, seg());
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
    assert_eq!((g.hits, g.avoided_lookups, g.walks_total, g.walks_in_primary), (96, 96, 0, 0));
    assert_eq!((g.base, g.limit, g.offset, g.covered_bytes, g.primary_bytes), (S, LIMIT, 0x1000_0000, 16 * PAGE, 16 * PAGE));
    // Nothing was filled.
    assert!(!s.mmus[0].holds(P0, 0, u64::MAX));
    // Zero translation cycles: only the base cost of 96 accesses.
    let e = hugescope_core::cost::estimate(&c, &s.cfg.cost, 0.0);
    assert_eq!(e.translation_cycles, 0.0);
    assert_eq!(e.base_cycles, 96.0 * s.cfg.cost.base_cycles_per_access);
    // PA = VA + OFFSET, wrapping.
    assert_eq!(seg().translate(S + 5), S + 5 + 0x1000_0000);
    let neg = DirectSegment::new(S, LIMIT, 0u64.wrapping_sub(S)).unwrap();
    assert_eq!(neg.translate(S + 0x2000), 0x2000);
}

#[test]
fn just_past_limit_and_below_base_walk() {
    let mut s = sim(StaticMap::Uniform(0));
    load(&mut s, 0, seg());
    // LIMIT and BASE-1 each walk once (two distinct 4KB pages), then hit the
    // L1; BASE and LIMIT-1 are segment hits.
    for a in [LIMIT, S - 1, S, LIMIT - 1, LIMIT + 8, S - PAGE] {
        s.step(Access::read(a));
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks, c.l1_hits, c.l2_hits), (6, 2, 2, 0));
    let g = c.segment.unwrap();
    // Both walks lie outside the primary region (= the segment here).
    assert_eq!((g.hits, g.walks_total, g.walks_in_primary, g.walks_outside.other), (2, 2, 0, 2));
    assert!(s.mmus[0].holds(P0, LIMIT, LIMIT + 1));
    assert!(s.mmus[0].holds(P0, S - 1, S));
    assert!(!s.mmus[0].holds(P0, S, LIMIT));
}

#[test]
fn base_equal_limit_disables() {
    let mut s = sim(StaticMap::Uniform(0));
    load(&mut s, 0, DirectSegment::new(S, S, 0).unwrap());
    for p in 0..4 {
        s.step(Access::read(S + p * PAGE));
    }
    assert_eq!(s.seg.loaded(0), None);
    let c = s.counters();
    let g = c.segment.unwrap();
    // Four walks, all in the primary region: f_DS = 1 for this run.
    assert_eq!((c.walks, g.hits, g.walks_total, g.walks_in_primary), (4, 0, 4, 4));
}

#[test]
fn clearing_the_segment_walks_with_no_stale_translation() {
    let mut s = sim(StaticMap::Uniform(0));
    load(&mut s, 0, seg());
    for p in 0..8 {
        s.step(Access::read(S + p * PAGE));
    }
    load(&mut s, 0, DirectSegment::DISABLED);
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
    assert_eq!((g.hits, g.walks_in_primary), (8, 8));
}

#[test]
fn each_process_has_its_own_registers() {
    // pid 1's segment is 4 pages at S + 16 pages; pid 0's the 16 pages at S.
    let mut s = sim_on("sandybridge-ds", 2, StaticMap::Uniform(0));
    load(&mut s, 0, seg());
    let s1 = DirectSegment::new(LIMIT, LIMIT + 4 * PAGE, 0).unwrap();
    s.seg.update(ProcessSegment { pid: 1, primary: (LIMIT, LIMIT + 4 * PAGE), regs: s1, ..Default::default() });
    // Both processes on both cpus, touching both ranges: each hits only in
    // its own segment; cpu contexts switch registers with the process.
    for cpu in 0..2 {
        for pid in 0..2 {
            for p in 0..4 {
                s.step(Access::read(S + p * PAGE).in_pid(pid).on_cpu(cpu));
                s.step(Access::read(LIMIT + p * PAGE).in_pid(pid).on_cpu(cpu));
            }
        }
    }
    assert_eq!(s.seg.loaded(1), Some((1, s1)));
    let c = s.counters();
    // Per cpu: pid 0 hits 4 at S and walks 4 at LIMIT; pid 1 walks 4 at S
    // and hits 4 at LIMIT. 16 hits, 16 walks in all.
    let g = c.segment.unwrap();
    assert_eq!((c.accesses, c.walks, g.hits, g.processes), (32, 16, 16, 2));
    assert_eq!(c.per_cpu_walks, vec![8, 8]);
    assert_eq!(g.covered_bytes, 20 * PAGE);
}

#[test]
fn outside_the_segment_2mb_entries_still_serve() {
    // [A, A+4MB) backed by 2MB pages, the rest by 4KB pages.
    let a = 0x5000_0000_0000u64;
    let map = StaticMap::Ranges(vec![MappedRange { pid: 0, start: a, end: a + (4 << 20), size: 1 }]);
    let mut s = sim(map);
    load(&mut s, 0, seg());
    for p in 0..1024 {
        s.step(Access::read(a + p * PAGE));
    }
    for p in 0..16 {
        s.step(Access::read(S + p * PAGE));
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks, c.l1_hits), (1024 + 16, 2, 1022));
    assert_eq!(c.by_page_size[1].walks, 2);
    assert_eq!(c.segment.unwrap().hits, 16);
}

#[test]
fn register_values_are_validated() {
    let e = |r: hugescope_core::Result<DirectSegment>| r.unwrap_err().to_string();
    assert!(e(DirectSegment::new(S + 1, LIMIT, 0)).contains("base=0x7e0000000001: not 4KB aligned"));
    assert!(e(DirectSegment::new(S, LIMIT + 8, 0)).contains("limit="));
    assert!(e(DirectSegment::new(S, S, 0x800)).contains("offset=0x800"));
    assert!(e(DirectSegment::new(LIMIT, S, 0)).contains("below base"));
    assert!(e(DirectSegment::new(0, 1 << 60, 0)).contains("address space"));
}

#[test]
fn sandybridge_ds_is_table_1() {
    let c = MachineConfig::preset("sandybridge-ds").unwrap();
    let l1: Vec<(String, usize, usize)> = c.l1.iter().map(|(k, v)| (k.clone(), v.entries, v.ways)).collect();
    assert_eq!(l1, vec![("1g".into(), 4, 0), ("2m".into(), 32, 4), ("4k".into(), 64, 4)]);
    let l2: Vec<(String, usize, usize)> = c.l2.iter().map(|(k, v)| (k.clone(), v.entries, v.ways)).collect();
    assert_eq!(l2, vec![("4k".into(), 512, 4)]);
    assert_eq!(c.cost.cpu_ghz, 2.2);
    assert_eq!(c.pwc, MachineConfig::preset("haswell-pcc").unwrap().pwc);
}

/// A trace: a 64KB anonymous region "big", an 8KB stack "stk", a 4KB file
/// "map" and an 8KB opted-out region "sparse"; each page of big read twice,
/// each page of the others once (32 + 2 + 1 + 2 = 37 accesses).
fn trace(dir: &std::path::Path) -> String {
    let (big, stk, map, sparse) = (0x6000_0000_0000u64, 0x7fff_0000_0000u64, 0x5000_0000_0000u64, 0x6100_0000_0000u64);
    let mut h = TraceHeader::new("test");
    h.regions = vec![
        Region::new("stk", stk, 2 * PAGE).with_kind(RegionKind::Stack),
        Region::new("big", big, 16 * PAGE),
        Region::new("map", map, PAGE).with_kind(RegionKind::File),
        Region { segment_opt_out: true, ..Region::new("sparse", sparse, 2 * PAGE) },
    ];
    let path = dir.join("t.hst");
    let mut w = HstWriter::create(&path, &h).unwrap();
    for _ in 0..2 {
        for p in 0..16 {
            w.write(Access::read(big + p * PAGE)).unwrap();
        }
    }
    for a in [stk, stk + PAGE, map, sparse, sparse + PAGE] {
        w.write(Access::read(a)).unwrap();
    }
    w.finish().unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn static_runs_with_a_segment_and_f_ds() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let run = |pages: &str| simulate_static(&t, MachineConfig::preset("sandybridge-ds").unwrap(), pages);
    // 4KB baseline with accounting: 16 + 2 + 1 + 2 = 21 walks, 16 in the
    // primary region (big only: the stack, file and opt-out stay out).
    let r = run("4k+primary").unwrap();
    let g = r.translation.segment.clone().unwrap();
    assert_eq!((r.translation.walks, g.walks_total, g.walks_in_primary, g.hits, g.covered_bytes), (21, 21, 16, 0, 0));
    assert_eq!(g.primary_bytes, 16 * PAGE);
    // DS: big's 32 accesses hit; the other 5 walk, attributed by kind.
    let r = run("4k+ds").unwrap();
    let g = r.translation.segment.clone().unwrap();
    assert_eq!((r.translation.accesses, r.translation.walks, g.hits, g.walks_in_primary), (37, 5, 32, 0));
    let w = &g.walks_outside;
    assert_eq!((w.stack, w.bss_data, w.file, w.code, w.opt_out, w.other), (2, 0, 1, 0, 2, 0));
    assert_eq!(r.pages, "all 4k + direct segment over the primary region (pid 0 [0x600000000000, 0x600000010000))");
    // ds:REGION puts the segment elsewhere: big's 16 pages walk.
    let r = run("ds:stk").unwrap();
    assert_eq!((r.translation.walks, r.translation.segment.unwrap().hits), (19, 2));
    // Without a segment spec nothing changes, not even the JSON's fields.
    let r = run("4k").unwrap();
    assert_eq!(r.translation.walks, 21);
    assert!(!serde_json::to_string(&r).unwrap().contains("\"segment\""));
    let e = run("ds:nope").unwrap_err().to_string();
    assert!(e.contains("--pages 'ds:nope': the trace has no region 'nope' (regions: stk, big, map, sparse)"), "{e}");
}
