//! os/view.rs: what a policy reads. One accessed/dirty bit per leaf (a 2MB
//! leaf tells that it was used, not which 4KB pages were), regions per VMA,
//! and the shared scan cursor khugepaged advances.

mod common;

use common::{header, sim, BASE, MB2};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, Region, TraceHeader};

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }), memory_bytes: Some(64 << 20), ..Default::default() }
}

#[test]
fn a_huge_leaf_has_one_accessed_bit_base_leaves_one_each() {
    let mut s = sim(&header(2 * MB2, false), os(), "base", &[]);
    // Reads fault the pages in order: frames 0..1023, one aligned extent per region.
    for i in 0..1024 {
        s.step(Access::read(BASE + i * 4096));
    }
    s.pt.clear_accessed(0, BASE, 2 * MB2, true);
    s.apply_shootdowns();
    // Region 0 stays base pages: 3 pages walked, 3 accessed leaves.
    for i in [0u64, 7, 300] {
        s.step(Access::read(BASE + i * 4096));
    }
    let r0 = s.pt.view().region(0, BASE).unwrap();
    assert_eq!((r0.present, r0.accessed, r0.leaf_size), (512, 3, 0));
    // Region 1 becomes one 2MB leaf; one access sets its one bit, which
    // covers the whole leaf: the view does not say which page was used.
    s.pt.collapse_in_place(0, BASE + MB2, 1).unwrap();
    s.apply_shootdowns();
    let r1 = s.pt.view().region(0, BASE + MB2).unwrap();
    assert_eq!((r1.present, r1.accessed, r1.leaf_size), (512, 0, 1));
    s.step(Access::read(BASE + MB2 + 4096 * 9));
    let r1 = s.pt.view().region(0, BASE + MB2).unwrap();
    assert_eq!((r1.accessed, r1.dirty), (512, 0));
    assert!(r1.pmd_accessed);
    // Clearing the range clears the leaf's bit.
    s.pt.clear_accessed(0, BASE + MB2, MB2, false);
    assert_eq!(s.pt.view().region(0, BASE + MB2).unwrap().accessed, 0);
}

#[test]
fn vmas_and_regions_in_address_order() {
    let mut h = TraceHeader::new("synthetic");
    // A 3MB region (one whole 2MB region and a half one) and an advised one.
    h.regions.push(Region::new("a", BASE, 3 << 20));
    h.regions.push(Region { hugepage_advised: true, ..Region::new("b", BASE + (8 << 20), MB2) });
    let s = sim(&h, os(), "base", &[]);
    let v = s.pt.view();
    assert_eq!(v.processes(), 1);
    let vmas: Vec<(u64, u64, bool, usize)> = v.vmas(0).map(|m| (m.start(), m.end(), m.advised(), m.regions())).collect();
    assert_eq!(vmas, vec![(BASE, BASE + (3 << 20), false, 2), (BASE + (8 << 20), BASE + (10 << 20), true, 1)]);
    let regions: Vec<(u64, bool)> = v.regions(0).map(|(m, ri, start)| (start, m.region_inside(ri))).collect();
    assert_eq!(regions, vec![(BASE, true), (BASE + MB2, false), (BASE + (8 << 20), true)]);
    assert_eq!(v.vma_from(0, BASE + (3 << 20)), Some(1));
    assert_eq!(v.vma_from(0, BASE + (10 << 20)), None);
    assert!(v.region(0, BASE + (5 << 20)).is_none());
}

#[test]
fn khugepaged_advances_the_shared_scan_cursor() {
    // 32 regions; khugepaged scans 4096 pages (8 regions) per pass, every
    // 10 s of virtual time (10^5 accesses per second here).
    let o = OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e5 }), ..os() };
    let mut s = sim(&header(32 * MB2, false), o, "linux", &[]);
    assert_eq!(s.pt.view().scan_cursor(0), 0);
    let mut t = 0u64;
    // Sequential reads round the 64MiB until the virtual clock reaches `secs`.
    let mut run_until = |s: &mut Simulator<Kernel>, secs: f64| {
        while s.pt.now() < secs {
            s.step(Access::read(BASE + (t % (32 * 512)) * 4096));
            t += 1;
        }
    };
    // One pass: 8 regions scanned, the cursor rests at the 9th.
    run_until(&mut s, 10.5);
    assert_eq!(s.pt.view().scan_cursor(0), BASE + 8 * MB2);
    run_until(&mut s, 20.5);
    assert_eq!(s.pt.view().scan_cursor(0), BASE + 16 * MB2);
    // Another scanner moving the cursor moves it for khugepaged too: the next
    // pass scans regions 30 and 31, wraps (one process) and scans 6 more.
    s.pt.set_scan_cursor(0, BASE + 30 * MB2);
    run_until(&mut s, 30.5);
    assert_eq!(s.pt.view().scan_cursor(0), BASE + 6 * MB2);
}
