//! The translation seam (issue #10, substrate item 1): the page table answers a
//! TLB miss with a `Leaf`, a `Walker` prices the walk. Walkers defined here, in
//! a test file, drive the simulator without any change to `mmu.rs` or `sim.rs`,
//! and every count below is worked out by hand in the comments.

mod common;

use common::{header, BASE};
use hugescope_core::config::MachineConfig;
use hugescope_core::hw::leaf::{LEAF_A, LEAF_D, NATIVE, NO_PA, PMD_A, PUD_A};
use hugescope_core::hw::pwc::WalkCost;
use hugescope_core::hw::{Geometry, Leaf, PageTable, RadixWalker, Space, Walker};
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::pagemap::StaticMap;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::Access;

const KB4: u64 = 4 << 10;
const MB2: u64 = 2 << 20;
const GB1: u64 = 1 << 30;

fn haswell() -> MachineConfig {
    MachineConfig::preset("haswell-pcc").unwrap()
}

/// A walker that charges the same number of references for every walk and
/// counts the walks it was asked for: the smallest thing that fits the seam.
#[derive(Clone, Debug, Default)]
struct FixedWalker {
    refs: u32,
    walks: u64,
    shootdowns: u64,
}

impl Walker for FixedWalker {
    fn walk(&mut self, _space: Space, _a: &Access, _leaf: &Leaf) -> WalkCost {
        self.walks += 1;
        WalkCost { refs: self.refs, pwc_hit_level: None, mem_refs: 0 }
    }
    /// Writes no accessed/dirty bits: the page table must then keep none.
    fn writes(&self, _a: &Access, _leaf: &Leaf) -> u8 {
        0
    }
    fn shootdown(&mut self, _space: Space, _start: u64, _end: u64) {
        self.shootdowns += 1;
    }
    fn flush(&mut self) {}
}

#[test]
fn a_fixed_cost_walker_plugs_in_without_touching_the_mmu() {
    let w = FixedWalker { refs: 7, ..Default::default() };
    let mut s = Simulator::with_walker(haswell(), 1, StaticMap::Uniform(0), w).unwrap();
    // 16 consecutive 4KB pages fall in the 16 different sets of the 64-entry,
    // 4-way L1: pass 1 walks for each (16 walks x 7 refs = 112), pass 2 hits
    // the L1 16 times and walks for none.
    for _ in 0..2 {
        for i in 0..16 {
            s.step(Access::read(BASE + i * KB4));
        }
    }
    let c = s.counters();
    assert_eq!((c.accesses, c.walks, c.walk_refs, c.l1_hits, c.pwc_hits), (32, 16, 112, 16, 0));
    assert_eq!(s.mmus[0].walker.walks, 16);
    // A shootdown reaches the walker of every cpu through the MMU.
    s.mmus[0].shootdown(Space::native(0), BASE, BASE + KB4);
    assert_eq!(s.mmus[0].walker.shootdowns, 1);
}

/// Walk references of one access through the simulator (the only change to
/// the counters is this access's walk, if it missed).
fn refs_of<P: PageTable, W: Walker>(s: &mut Simulator<P, W>, addr: u64) -> (u64, u64) {
    let (r0, p0) = (s.counters().walk_refs, s.counters().pwc_hits);
    s.step(Access::read(addr));
    (s.counters().walk_refs - r0, s.counters().pwc_hits - p0)
}

#[test]
fn radix_walk_references_for_4k_2m_1g_leaves_by_hand() {
    // x86-64 4-level paging on haswell-pcc: PWCs for PML4E (2 entries), PDPTE
    // (4) and PDE (32). Cold, a walk reads every level from the root to the
    // leaf: PML4E PDPTE PDE PTE = 4 for 4KB, PML4E PDPTE PDE = 3 for 2MB,
    // PML4E PDPTE = 2 for 1GB; no PWC hit.
    for (size, page, cold) in [(0usize, KB4, 4u64), (1, MB2, 3), (2, GB1, 2)] {
        let mut s = Simulator::new(haswell(), 1, StaticMap::Uniform(size)).unwrap();
        assert_eq!(refs_of(&mut s, BASE), (cold, 0), "cold walk, size index {size}");
        // The next page of the same size shares every upper level. 4KB: the
        // PDE cache knows the page table, only the PTE is read (1). 2MB: the
        // PDPTE cache knows the page directory, only the PDE (1). 1GB: the
        // PML4E cache knows the PDPT, only the PDPTE (1). One PWC hit each.
        assert_eq!(refs_of(&mut s, BASE + page), (1, 1), "warm walk, size index {size}");
        // The same page again is a TLB hit: no walk at all.
        assert_eq!(refs_of(&mut s, BASE + page + 8), (0, 0));
    }
    // 4KB leaves in another 2MB region of the same 1GB: the PDE cache misses,
    // the PDPTE cache hits, PDE + PTE are read (2).
    let mut s = Simulator::new(haswell(), 1, StaticMap::Uniform(0)).unwrap();
    refs_of(&mut s, BASE);
    assert_eq!(refs_of(&mut s, BASE + MB2), (2, 1));
    // And in another 1GB of the same 512GB: PML4E hit, PDPTE PDE PTE (3).
    assert_eq!(refs_of(&mut s, BASE + GB1), (3, 1));
}

#[test]
fn the_radix_walker_prices_a_leaf_directly() {
    let cfg = haswell();
    let geo = Geometry::new(&cfg).unwrap();
    let mut w = RadixWalker::new(&geo, &cfg);
    let a = Access::read(BASE);
    assert_eq!(w.walk(Space::native(0), &a, &Leaf::sized(0)), WalkCost { refs: 4, pwc_hit_level: None, mem_refs: 0 });
    // Same address, now as a 2MB leaf: the PDPTE cache filled by the first
    // walk hits (root-first level 1), the PDE is read.
    assert_eq!(w.walk(Space::native(0), &a, &Leaf::sized(1)), WalkCost { refs: 1, pwc_hit_level: Some(1), mem_refs: 0 });
    w.flush();
    assert_eq!(w.walk(Space::native(0), &a, &Leaf::sized(2)).refs, 2);
}

/// A page table standing in for a guest kernel over a host one: every leaf is
/// a `guest` leaf backed by a `host` leaf, and its TLB entry covers the smaller
/// of the two (a 2MB guest page on 4KB host pages is only contiguous 4KB at a
/// time in host-physical memory).
struct TwoLevelMap {
    guest: usize,
    host: usize,
}

impl PageTable for TwoLevelMap {
    fn leaf(&mut self, a: &Access) -> Leaf {
        Leaf { size: self.guest as u8, tlb_size: self.guest.min(self.host) as u8, host_size: self.host as u8, was_set: 0, pa: a.addr }
    }
}

/// The shape of a 2-D walk (no nested caches): each of the g guest levels'
/// table pointers and the final guest-physical address are translated by an
/// h-level host walk, plus the g guest entries themselves: (g+1)(h+1)-1.
#[derive(Clone)]
struct NestedShape {
    levels_of_size: Vec<u32>,
}

impl Walker for NestedShape {
    fn walk(&mut self, _space: Space, _a: &Access, leaf: &Leaf) -> WalkCost {
        assert!(leaf.is_nested());
        let g = self.levels_of_size[leaf.size()];
        let h = self.levels_of_size[leaf.host_size as usize];
        WalkCost { refs: (g + 1) * (h + 1) - 1, pwc_hit_level: None, mem_refs: 0 }
    }
    fn writes(&self, _a: &Access, _leaf: &Leaf) -> u8 {
        LEAF_A
    }
    fn shootdown(&mut self, _space: Space, _start: u64, _end: u64) {}
    fn flush(&mut self) {}
}

#[test]
fn a_nested_shaped_walker_fits_the_seam() {
    let cfg = haswell();
    // Levels a walk reads per size: 4 for 4KB, 3 for 2MB.
    let shape = NestedShape { levels_of_size: vec![4, 3, 2] };
    // (g, h) = (4, 4) -> 24; (3, 4) or (4, 3) -> 19; (3, 3) -> 15.
    for (guest, host, refs, tlb) in [(0, 0, 24, 0), (1, 0, 19, 0), (0, 1, 19, 0), (1, 1, 15, 1)] {
        let mut s = Simulator::with_walker(cfg.clone(), 1, TwoLevelMap { guest, host }, shape.clone()).unwrap();
        assert_eq!(refs_of(&mut s, BASE), (refs, 0), "guest {guest} host {host}");
        // The TLB entry covers min(guest, host): with a 4KB entry the next
        // 4KB page walks again, with a 2MB one it hits.
        let again = refs_of(&mut s, BASE + KB4).0;
        assert_eq!(again, if tlb == 0 { refs } else { 0 }, "guest {guest} host {host}");
        let c = s.counters();
        assert_eq!(c.by_page_size[tlb].walks, c.walks, "walks counted by the TLB entry's size");
    }
    assert_eq!(NATIVE, Leaf::sized(0).host_size);
}

#[test]
fn the_kernel_reports_bits_as_the_walk_found_them_and_the_walker_sets_them() {
    let h = header(8 * MB2, false);
    let mut s = common::sim(&h, OsConfig::default(), "base", &[]);
    let a = Access::read(BASE + 0x1234);
    // Asking the page table alone faults the page in but sets no bit: no
    // walker has walked yet.
    let first = s.pt.leaf(&a);
    assert_eq!((first.size(), first.was_set), (0, 0));
    assert_ne!(first.pa, NO_PA);
    assert_eq!(first.pa & 0xfff, 0x234, "the page offset survives translation");
    assert_eq!(s.pt.leaf(&a).was_set, 0);
    // A TLB miss through the simulator: the radix walker sets A on the leaf
    // and on the PMD and PUD entries above it; the next walk finds them.
    s.step(a);
    let second = s.pt.leaf(&a);
    assert_eq!(second.was_set, LEAF_A | PMD_A | PUD_A);
    assert_eq!(second.pa, first.pa);
    // A write walk (after a flush, so it misses) sets D.
    s.mmus[0].flush();
    s.step(Access::write(BASE + 0x1234));
    assert!(s.pt.leaf(&a).was(LEAF_D));
    // Another 4KB page of the same 2MB region: its own A bit is clear, the
    // PMD and PUD bits were set by the walks above.
    assert_eq!(s.pt.leaf(&Access::read(BASE + 0x5000)).was_set, PMD_A | PUD_A);
}

#[test]
fn the_simulators_walk_leaf_is_the_leaf_without_its_frame() {
    // `walk_leaf` skips only the frame load: on two kernels fed the same
    // accesses (4KB pages, a huge page, a refault), every other field agrees.
    let h = header(8 * MB2, true);
    let mut s = common::sim(&h, OsConfig::default(), "linux", &[]);
    let mut t = common::sim(&h, OsConfig::default(), "linux", &[]);
    for (i, off) in [0x1234u64, 0x5000, MB2 + 0x10, 0x1234, 3 * MB2 - 8].into_iter().enumerate() {
        let a = if i % 2 == 0 { Access::read(BASE + off) } else { Access::write(BASE + off) };
        let (l, w) = (s.pt.leaf(&a), t.pt.walk_leaf(&a));
        assert_ne!(l.pa, NO_PA, "access {i}");
        assert_eq!(w.pa, NO_PA, "access {i}");
        assert_eq!((w.size, w.tlb_size, w.host_size, w.was_set), (l.size, l.tlb_size, l.host_size, l.was_set), "access {i}");
        s.step(a);
        t.step(a);
    }
    assert_eq!(s.counters(), t.counters());
}

#[test]
fn a_walker_that_writes_no_bits_leaves_the_kernel_without_any() {
    let cfg = haswell();
    let h = header(8 * MB2, false);
    let pol = hugescope_core::policy::make("base", &[]).unwrap();
    let k = Kernel::new(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), &h, &OsConfig::default(), pol).unwrap();
    let mut s = Simulator::with_walker(cfg, 1, k, FixedWalker { refs: 1, ..Default::default() }).unwrap();
    for i in 0..4 {
        s.step(Access::write(BASE + i * KB4));
    }
    assert_eq!(s.counters().walks, 4);
    for i in 0..4 {
        assert_eq!(s.pt.leaf(&Access::read(BASE + i * KB4)).was_set, 0, "page {i}");
    }
}
