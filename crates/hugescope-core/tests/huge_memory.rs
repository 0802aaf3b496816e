//! os/huge_memory.rs by hand: collapse by copy, collapse in place and split,
//! with the frame numbers, the buddy allocator's conservation, the costs
//! charged and the TLB after the shootdown checked against values worked out
//! here (default costs: copy 1 us per base page, split 20 us, shootdown 4 us).

mod common;

use common::{header, sim, BASE, MB2};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig, Refusal};
use hugescope_core::os::AllocMode;
use hugescope_core::sim::Simulator;
use hugescope_core::hw::{PageTable, Shootdown};
use hugescope_core::trace::Access;

const PAGES: u64 = 512;

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }), memory_bytes: Some(64 << 20), ..Default::default() }
}

/// Two 2MB regions mapped with base pages only, faulted in address order.
fn populated() -> Simulator<Kernel> {
    let mut s = sim(&header(2 * MB2, false), os(), "base", &[]);
    s.pt.populate(0, BASE, 2 * MB2);
    s
}

fn frames(k: &Kernel, start: u64) -> Vec<u32> {
    common::frames(k, 0, start, PAGES as usize)
}

fn drain(k: &mut Kernel) -> Vec<Shootdown> {
    let mut out = Vec::new();
    k.take_shootdowns(&mut out);
    out
}

fn sync_us(k: &Kernel) -> f64 {
    k.clock().os_sync_seconds * 1e6
}

#[test]
fn fresh_memory_hands_out_contiguous_aligned_frames() {
    // The precondition the in-place tests rely on: a fresh buddy allocator
    // gives frames lowest address first, so pages faulted in order get
    // frames 0..1023.
    let s = populated();
    assert_eq!(frames(&s.pt, BASE), (0..512).collect::<Vec<u32>>());
    assert_eq!(frames(&s.pt, BASE + MB2), (512..1024).collect::<Vec<u32>>());
}

#[test]
fn collapse_in_place_installs_the_leaf_over_the_same_frames() {
    let mut s = populated();
    let k = &mut s.pt;
    drain(k);
    let (free0, us0, shoot0) = (k.phys().free_frames(), sync_us(k), k.stats().shootdowns);
    k.collapse_in_place(0, BASE + MB2, 1).unwrap();
    // No frame allocated, copied or freed; the same frames, now one block.
    assert_eq!(k.phys().free_frames(), free0);
    assert_eq!(frames(k, BASE + MB2), (512..1024).collect::<Vec<u32>>());
    let b = k.phys().allocated_block(700).unwrap();
    assert_eq!((b.pfn, b.order), (512, 9));
    assert_eq!(k.stats().pages_copied, 0);
    assert_eq!((k.stats().promotions, k.stats().in_place_collapses), (1, 1));
    assert_eq!(k.huge_bytes(), MB2);
    assert_eq!(k.region_state(0, BASE + MB2).unwrap().leaf_size, 1);
    // Cost: one PMD update (20 us) and one shootdown (4 us), nothing per page.
    assert!((sync_us(k) - us0 - 24.0).abs() < 1e-6, "{}", sync_us(k) - us0);
    assert_eq!(k.stats().shootdowns, shoot0 + 1);
    assert_eq!(drain(k), vec![Shootdown::remap(0, BASE + MB2, BASE + 2 * MB2)]);
    k.check_invariants().unwrap();
    // Freeing the range returns the one block whole: memory back to empty.
    k.free_range(0, BASE, 2 * MB2);
    assert_eq!(k.phys().free_frames(), k.phys().total_frames());
    k.check_invariants().unwrap();
}

#[test]
fn collapse_by_copy_moves_to_a_new_block_and_frees_the_old_frames() {
    let mut s = populated();
    let k = &mut s.pt;
    drain(k);
    let (free0, us0) = (k.phys().free_frames(), sync_us(k));
    k.promote(0, BASE, 1, AllocMode::FreeOnly).unwrap();
    // The lowest free 2MB block is frames 1024..1535; frames 0..511 are freed.
    assert_eq!(frames(k, BASE), (1024..1536).collect::<Vec<u32>>());
    assert_eq!(k.phys().free_frames(), free0);
    assert!(k.phys().allocated_block(0).is_none());
    assert_eq!(k.stats().pages_copied, PAGES);
    // Daemon-free promote from outside a callback is synchronous: 512 copies + a shootdown.
    assert!((sync_us(k) - us0 - (512.0 + 4.0)).abs() < 1e-6, "{}", sync_us(k) - us0);
    assert_eq!(drain(k), vec![Shootdown::remap(0, BASE, BASE + MB2)]);
    k.check_invariants().unwrap();
}

#[test]
fn collapse_in_place_refuses_scattered_or_partial_frames() {
    // Faults alternating between the two regions: region 0 gets the even
    // frames, region 1 the odd ones. Not one extent: refused, nothing changes.
    let mut s = sim(&header(2 * MB2, false), os(), "base", &[]);
    for i in 0..PAGES {
        s.step(Access::read(BASE + i * 4096));
        s.step(Access::read(BASE + MB2 + i * 4096));
    }
    let k = &mut s.pt;
    assert_eq!(&frames(k, BASE)[..3], &[0, 2, 4]);
    let free0 = k.phys().free_frames();
    assert_eq!(k.collapse_in_place(0, BASE, 1), Err(Refusal::NotContiguous));
    assert_eq!(k.phys().free_frames(), free0);
    assert_eq!(k.huge_bytes(), 0);
    assert_eq!(k.stats().promotion_failures.ineligible, 1);
    // A region with one page not mapped is refused too (a copy would zero it).
    let mut p = populated();
    p.pt.free_range(0, BASE + 4096, 4096);
    assert_eq!(p.pt.collapse_in_place(0, BASE, 1), Err(Refusal::NotContiguous));
    // Misaligned extent: pages 1..512 of a fresh run hold frames 1..512.
    let mut m = sim(&header(2 * MB2, false), os(), "base", &[]);
    m.pt.populate(0, BASE + 4096, MB2);
    m.pt.populate(0, BASE, 4096);
    assert_eq!(frames(&m.pt, BASE)[0], 512);
    assert_eq!(m.pt.collapse_in_place(0, BASE, 1), Err(Refusal::NotContiguous));
    m.pt.check_invariants().unwrap();
}

#[test]
fn split_keeps_the_frames_and_hands_back_base_blocks() {
    let mut s = populated();
    let k = &mut s.pt;
    k.collapse_in_place(0, BASE, 1).unwrap();
    drain(k);
    let (free0, us0) = (k.phys().free_frames(), sync_us(k));
    assert!(k.demote(0, BASE + 12345));
    assert_eq!(frames(k, BASE), (0..512).collect::<Vec<u32>>());
    assert_eq!(k.phys().free_frames(), free0);
    let b = k.phys().allocated_block(300).unwrap();
    assert_eq!((b.pfn, b.order), (300, 0));
    assert_eq!(k.huge_bytes(), 0);
    assert_eq!(k.stats().demotions, 1);
    assert!((sync_us(k) - us0 - 24.0).abs() < 1e-6);
    assert_eq!(drain(k), vec![Shootdown::remap(0, BASE, BASE + MB2)]);
    k.check_invariants().unwrap();
    // Split back to base pages, the region can be collapsed in place again.
    k.collapse_in_place(0, BASE, 1).unwrap();
    k.check_invariants().unwrap();
}

#[test]
fn no_stale_tlb_entry_after_the_collapse_shootdown() {
    let mut s = populated();
    // Cache 4KB translations of the first 32 pages of region 0.
    for i in 0..32 {
        s.step(Access::read(BASE + i * 4096));
    }
    let before = s.counters();
    assert_eq!(before.by_page_size[1].accesses, 0);
    s.pt.collapse_in_place(0, BASE, 1).unwrap();
    // A daemon's collapse runs inside an access; the simulator drains the
    // queue after it, as here.
    s.apply_shootdowns();
    // The next access to a page whose 4KB entry was cached walks and finds
    // the 2MB leaf; the next ones hit the 2MB entry. A stale 4KB entry would
    // have answered the first access as a 4KB hit.
    s.step(Access::read(BASE + 5 * 4096));
    let c = s.counters();
    assert_eq!(c.by_page_size[1].walks, 1);
    assert_eq!(c.by_page_size[0].accesses, before.by_page_size[0].accesses);
    assert!(c.tlb_entries_invalidated >= 32);
    for i in 0..32 {
        s.step(Access::read(BASE + i * 4096));
    }
    let d = s.counters();
    assert_eq!(d.by_page_size[1].accesses, 33);
    assert_eq!(d.by_page_size[1].walks, 1);
    assert_eq!(d.by_page_size[0].accesses, before.by_page_size[0].accesses);
}

#[test]
fn a_partly_freed_huge_page_is_freed_whole_when_its_last_page_goes() {
    use hugescope_core::trace::{free_label, populate_label, AccessSink};
    let mut s = sim(&header(2 * MB2, false), os(), "ideal", &[]);
    let free0 = s.pt.phys().free_frames();
    s.progress(&populate_label(0, BASE, MB2));
    assert_eq!(s.pt.spaces()[0].total_huge_bytes(), MB2);
    // Freeing part of it splits the mapping; the block stays allocated as
    // one unit (Linux's deferred split): no frame comes back yet.
    s.progress(&free_label(0, BASE, 100 * 4096));
    assert_eq!(s.pt.phys().free_frames(), free0 - 512);
    assert_eq!(s.pt.spaces()[0].frames_held(), 512);
    s.progress(&free_label(0, BASE + 100 * 4096, 400 * 4096));
    assert_eq!(s.pt.phys().free_frames(), free0 - 512, "12 pages still mapped");
    s.pt.check_invariants().unwrap();
    // The last 12 pages unmapped: the whole block is freed.
    s.progress(&free_label(0, BASE + 500 * 4096, 12 * 4096));
    assert_eq!(s.pt.phys().free_frames(), free0);
    assert_eq!(s.pt.spaces()[0].frames_held(), 0);
    s.pt.check_invariants().unwrap();
}
