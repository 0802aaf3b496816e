//! Direct segments, OS side (issue #10): the `dseg` policy over the OS
//! model, alone and beside Linux THP, at small hand-checkable scale.

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::{Geometry, RadixWalker, Segments, Space};
use hugescope_core::os::kernel::{Fragmentation, Kernel, OsConfig};
use hugescope_core::policy;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, Region, RegionKind, TraceHeader};

const PAGE: u64 = 4096;
const MB2: u64 = 2 << 20;
const BASE: u64 = 0x7e00_0000_0000;

type OsSim = Simulator<Kernel, RadixWalker, Segments>;

fn sim(h: &TraceHeader, o: OsConfig, spec: &[(&str, &[(&str, &str)])], cpus: usize) -> OsSim {
    let cfg = MachineConfig::preset("sandybridge-ds").unwrap();
    let pols = spec
        .iter()
        .map(|(n, ps)| policy::make(n, &ps.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>()).unwrap())
        .collect();
    let k = Kernel::new_multi(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), h, &o, pols).unwrap();
    Simulator::with_unit(cfg, cpus, k).unwrap()
}

/// pid 0: an 8MB anonymous region at BASE and a 2-page stack beside it.
fn header() -> TraceHeader {
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region::new("data", BASE, 4 * MB2));
    h.regions.push(Region::new("stack", BASE + 64 * MB2, 2 * PAGE).with_kind(RegionKind::Stack));
    h
}

fn sweep(s: &mut OsSim, pid: u16, start: u64, len: u64) {
    for a in (start..start + len).step_by(PAGE as usize) {
        s.step(Access::write(a).in_pid(pid));
    }
}

#[test]
fn a_full_segment_takes_every_access_of_the_primary_region() {
    let mut s = sim(&header(), OsConfig::default(), &[("dseg", &[])], 1);
    sweep(&mut s, 0, BASE, 4 * MB2);
    sweep(&mut s, 0, BASE + 64 * MB2, 2 * PAGE);
    let c = s.counters();
    let g = c.segment.clone().unwrap();
    // 2048 segment hits, 2 walks (the stack), no fault inside the segment.
    assert_eq!((c.accesses, c.walks, g.hits, g.covered_bytes, g.primary_bytes), (2050, 2, 2048, 4 * MB2, 4 * MB2));
    assert_eq!((g.walks_outside.stack, g.walks_in_primary, g.compaction_seconds), (2, 0, 0.0));
    assert_eq!(s.pt.stats().faults_base, 2);
    // PA congruent to VA modulo 2MB, and the frames are held by the process.
    assert_eq!(g.base.wrapping_add(g.offset) % MB2, 0);
    assert_eq!(s.pt.spaces()[0].frames_held(), 1024 * 2 + 2);
    // Every held frame was used: the segment's pages count as touched.
    assert_eq!(s.pt.spaces()[0].touched_pages(), 1024 * 2 + 2);
    s.pt.check_invariants().unwrap();
}

#[test]
fn compaction_is_charged_per_gb() {
    let s = sim(&header(), OsConfig::default(), &[("dseg", &[("provision", "compaction")])], 1);
    let g = s.counters().segment.unwrap();
    // 8MB at 0.3 s/GB.
    assert!((g.compaction_seconds - 0.3 * 8.0 / 1024.0).abs() < 1e-12, "{}", g.compaction_seconds);
    assert!(s.pt.now() >= g.compaction_seconds);
}

#[test]
fn accounting_only_gives_f_ds() {
    let mut s = sim(&header(), OsConfig::default(), &[("dseg", &[("segment", "false")])], 1);
    sweep(&mut s, 0, BASE, 4 * MB2);
    sweep(&mut s, 0, BASE + 64 * MB2, 2 * PAGE);
    let g = s.counters().segment.unwrap();
    assert_eq!((g.hits, g.walks_total, g.walks_in_primary, g.covered_bytes), (0, 2050, 2048, 0));
}

#[test]
fn revert_installs_ptes_then_clears_registers_with_no_stale_translation() {
    let mut s = sim(&header(), OsConfig::default(), &[("dseg", &[])], 2);
    for cpu in 0..2 {
        s.step(Access::read(BASE).on_cpu(cpu));
    }
    let regs = s.pt.segments().segment(0);
    assert!(regs.is_enabled());
    s.pt.revert_segment(0, 5.0);
    s.apply_shootdowns();
    // Registers cleared on both contexts, the range shot down everywhere.
    assert_eq!((s.seg.loaded(0), s.seg.loaded(1)), (None, None));
    for m in &s.mmus {
        assert!(!m.holds(Space::native(0), BASE, BASE + 4 * MB2));
    }
    // The PTEs translate to the segment's frames: four 2MB leaves (VA and PA
    // are congruent), so touching every page walks four times, no fault.
    let faults = s.pt.stats().faults_base;
    sweep(&mut s, 0, BASE, 4 * MB2);
    let c = s.counters();
    assert_eq!((c.segment.unwrap().hits, c.walks, s.pt.stats().faults_base - faults), (2, 4, 0));
    for r in 0..4 {
        assert_eq!(s.pt.region_state(0, BASE + r * MB2).unwrap().leaf_size, 1);
    }
    s.pt.check_invariants().unwrap();
}

#[test]
fn partial_coverage_beside_linux_never_overlaps_a_huge_page() {
    // 64MB of data; a third of the memory's 2MB blocks hold an unmovable
    // page, so no contiguous chunk covers it all.
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region { hugepage_advised: true, ..Region::new("data", BASE, 32 * MB2) });
    let o = OsConfig { fragmentation: Some(Fragmentation::Pcc { share: 0.3 }), ..Default::default() };
    let mut s = sim(&h, o, &[("dseg", &[("grow_every", "0")]), ("linux", &[("enabled", "always")])], 1);
    let regs = s.pt.segments().segment(0);
    let covered = regs.limit - regs.base;
    assert!(regs.is_enabled() && covered < 32 * MB2, "covered {covered}");
    assert_eq!(regs.base, BASE);
    sweep(&mut s, 0, BASE, 32 * MB2);
    let g = s.counters().segment.unwrap();
    assert_eq!(g.hits, covered / PAGE);
    // Linux made huge pages in the paged rest, none over the segment.
    let mut huge_beyond = 0;
    for r in 0..32 {
        let st = s.pt.region_state(0, BASE + r * MB2).unwrap();
        let (lo, hi) = (BASE + r * MB2, BASE + (r + 1) * MB2);
        if st.leaf_size > 0 {
            assert!(lo >= regs.limit || hi <= regs.base, "huge page at {lo:#x} overlaps the segment");
            huge_beyond += 1;
        }
    }
    assert!(huge_beyond > 0, "linux made no huge page beside the segment");
    s.pt.check_invariants().unwrap();
}

#[test]
fn growth_in_place_over_freed_adjacent_frames() {
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region::new("data", BASE, 4 * MB2));
    // 2MB requested: the other 6MB are paged, and the allocator hands out
    // the frames right after the segment's first (lowest address first).
    let mut s = sim(&h, OsConfig::default(), &[("dseg", &[("size", "2m"), ("grow_every", "0")])], 1);
    sweep(&mut s, 0, BASE, 4 * MB2);
    let c = s.counters();
    assert_eq!((c.segment.unwrap().hits, c.walks), (512, 1536));
    assert_eq!(s.pt.grow_segment(0), 0, "the frames after the segment are in use");
    // The program frees the second 2MB: its frames, right after the
    // segment's, become free, and the segment grows over them.
    s.pt.free_range(0, BASE + MB2, MB2);
    s.apply_shootdowns();
    assert_eq!(s.pt.grow_segment(0), MB2);
    s.apply_shootdowns();
    let regs = s.pt.segments().segment(0);
    assert_eq!(regs.limit, BASE + 2 * MB2);
    assert!(!s.mmus[0].holds(Space::native(0), BASE, regs.limit));
    let (hits, walks) = (s.counters().segment.unwrap().hits, s.counters().walks);
    sweep(&mut s, 0, BASE + MB2, MB2);
    let c = s.counters();
    assert_eq!((c.segment.unwrap().hits - hits, c.walks - walks), (512, 0));
    s.pt.check_invariants().unwrap();
}

#[test]
fn growth_copies_paged_data_in_and_leaves_no_stale_translation() {
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region::new("data", BASE, 4 * MB2));
    let mut s = sim(&h, OsConfig::default(), &[("dseg", &[("size", "2m"), ("grow_every", "0")])], 1);
    // Touch the paged 6MB from the top down: the top pages get the frames
    // right after the segment's, the pages just past LIMIT the last ones.
    for a in (BASE + MB2..BASE + 4 * MB2).rev().step_by(PAGE as usize) {
        s.step(Access::write(a & !(PAGE - 1)));
    }
    s.pt.free_range(0, BASE + 3 * MB2, MB2);
    s.apply_shootdowns();
    // The pages just past LIMIT were touched last: their entries are cached.
    assert!(s.mmus[0].holds(Space::native(0), BASE + MB2, BASE + 2 * MB2));
    let copied = s.pt.stats().pages_copied;
    assert_eq!(s.pt.grow_segment(0), MB2);
    s.apply_shootdowns();
    // Registers first, then the shootdown: no stale paged translation of
    // the newly covered range is left, and its accesses hit the segment.
    assert!(!s.mmus[0].holds(Space::native(0), BASE, BASE + 2 * MB2));
    assert_eq!(s.pt.segments().segment(0).limit, BASE + 2 * MB2);
    let (hits, walks) = (s.counters().segment.unwrap().hits, s.counters().walks);
    sweep(&mut s, 0, BASE + MB2, MB2);
    let c = s.counters();
    assert_eq!((c.segment.unwrap().hits - hits, c.walks - walks), (512, 0));
    // 512 pages were present there; the copy is not a promotion's copy.
    assert_eq!(s.pt.stats().pages_copied, copied);
    s.pt.check_invariants().unwrap();
}

#[test]
fn two_processes_with_their_own_segments() {
    let mut h = TraceHeader::new("synthetic");
    h.processes = 2;
    h.regions.push(Region::new("a", BASE, MB2));
    h.regions.push(Region { pid: 1, ..Region::new("b", BASE, 2 * MB2) });
    let mut s = sim(&h, OsConfig::default(), &[("dseg", &[("processes", "2")])], 2);
    for cpu in 0..2u16 {
        for pid in 0..2u16 {
            for a in (BASE..BASE + MB2).step_by(PAGE as usize) {
                s.step(Access::read(a).in_pid(pid).on_cpu(cpu));
            }
        }
    }
    let (r0, r1) = (s.pt.segments().segment(0), s.pt.segments().segment(1));
    assert_eq!((r0.limit - r0.base, r1.limit - r1.base), (MB2, 2 * MB2));
    // Disjoint backing.
    let (p0, p1) = (r0.base.wrapping_add(r0.offset), r1.base.wrapping_add(r1.offset));
    assert!(p0 + MB2 <= p1 || p1 + 2 * MB2 <= p0);
    let c = s.counters();
    let g = c.segment.unwrap();
    assert_eq!((c.walks, g.hits, g.processes), (0, 4 * 512, 2));
    s.pt.check_invariants().unwrap();
}

#[test]
fn revert_at_a_time_runs_paged_afterwards() {
    // Revert as soon as the clock moves: every access after it walks (one
    // 2MB leaf per 2MB region, VA and PA congruent), none is a segment hit.
    let mut s = sim(&header(), OsConfig::default(), &[("dseg", &[("revert_at", "0"), ("grow_every", "0")])], 1);
    s.step(Access::read(BASE));
    assert!(!s.pt.segments().segment(0).is_enabled());
    sweep(&mut s, 0, BASE, 4 * MB2);
    let c = s.counters();
    assert_eq!((c.segment.unwrap().hits, c.walks, s.pt.stats().faults_base), (1, 4, 0));
    s.pt.check_invariants().unwrap();
}
