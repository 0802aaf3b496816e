//! The two-dimensional (nested) page walk of hardware-assisted virtualization
//! (Intel EPT, AMD NPT). A TLB miss in a guest walks the guest page table,
//! whose entries are guest-physical addresses (GPA): every guest page-table
//! page it reads must itself be translated GPA -> host-physical by a walk of
//! the host (EPT) table, and so must the final GPA of the data. With g guest
//! and h host levels and no caches this is g guest references, g host walks
//! for the guest tables and one for the data: g + (g+1)h = (g+1)(h+1) - 1
//! references, 24 for 4KB guest over 4KB host pages on 4-level tables
//! (Bhargava et al., ASPLOS'08 §2-3; FHPM §1 and §2.1).
//!
//! Caches (Bhargava et al. §4, facts only; sizes are machine knobs,
//! `config::virt::VirtMachineConfig`):
//! - a guest page-walk cache over GVA prefixes, per guest level: a hit at
//!   level i skips guest levels 0..=i *and* the host walks of their table
//!   pages (the cached entry already holds the next table's host address);
//! - a host page-walk cache over GPA prefixes, per host level: skips the
//!   upper host levels of any host walk (of a guest table page or the data);
//! - a nested TLB caching GPA -> HPA translations at the host leaf's size: a
//!   hit makes that host walk free.
//!
//! The page table (the hypervisor model, `virt::hypervisor`) hands the walker
//! what the `Leaf` cannot carry before each walk (`Walker::prepare`): where
//! each guest table page on the path sits in GPA, and the size of the host
//! leaf backing it. `writes` reports, besides the guest leaf's A/D bits, the
//! first guest level this walk actually read (bits 4..6), so the hypervisor
//! sets the EPT accessed bits of exactly the guest table pages read.
//!
//! Direct segments under virtualization (an extension: Basu et al., ISCA'13
//! §3.3 designs them, does not evaluate them; docs/assumptions.md
//! "Virtualization"):
//! - a guest segment translates GVA -> GPA by one addition: a walk of an
//!   address inside it (`NestedPath::guest_segment`, the hypervisor decides)
//!   reads no guest level and leaves only the host walk of the data's GPA,
//!   h references (1-D);
//! - a VMM segment translates the VM's whole GPA range -> HPA by one
//!   addition (`NestedWalker::with_vmm_segment`): every host walk is free,
//!   leaving the guest walk's g references (1-D);
//! - both: 0 references. The walk still ends in a TLB fill as before (the
//!   segments shorten the walk; they do not bypass the TLB).

use super::assoc::SetAssoc;
use super::geometry::{Geometry, MAX_SIZES};
use super::leaf::{Leaf, NestedPath, LEAF_A, LEAF_D, PMD_A, PUD_A};
use super::pwc::{Pwc, WalkCost};
use super::space::Space;
use super::tlb::tag;
use super::walker::Walker;
use crate::config::virt::VirtResolved;
use crate::config::CacheConfig;
use crate::trace::Access;
use std::collections::BTreeMap;

/// Bits of `Walker::writes`' result above the A/D bits: the root-first index
/// of the first guest level the walk read (levels above it were skipped by a
/// guest page-walk-cache hit). 0 for a walk that read every level; one past
/// the leaf level for a guest-segment walk, which read none.
pub const FIRST_LEVEL_SHIFT: u32 = 4;
pub const FIRST_LEVEL_MASK: u8 = 0x70;

/// The first guest level read, from the bits `NestedWalker::writes` returned.
#[inline(always)]
pub fn first_level_read(set: u8) -> usize {
    ((set & FIRST_LEVEL_MASK) >> FIRST_LEVEL_SHIFT) as usize
}

/// Nested-walk cache sizes (each empty or None: no such cache).
#[derive(Clone, Debug, Default)]
pub struct NestedCaches {
    pub guest_pwc: BTreeMap<String, CacheConfig>,
    pub host_pwc: BTreeMap<String, CacheConfig>,
    pub nested_tlb: Option<CacheConfig>,
}

impl NestedCaches {
    /// The caches of a machine's resolved `virt` section.
    pub fn of(v: &VirtResolved) -> NestedCaches {
        NestedCaches { guest_pwc: v.guest_pwc.clone(), host_pwc: v.host_pwc.clone(), nested_tlb: v.nested_tlb.clone() }
    }
}

#[derive(Clone, Debug)]
pub struct NestedWalker {
    guest_pwc: Pwc,
    host_pwc: Pwc,
    ntlb: Option<SetAssoc>,
    leaf_level: [usize; MAX_SIZES],
    shifts: [u32; MAX_SIZES],
    path: NestedPath,
    /// First guest level the last walk read (for `writes`).
    first: u8,
    /// A VMM direct segment covers every VM's GPA range (ISCA'13 §3.3,
    /// extension): host walks cost nothing and touch no host cache.
    vmm_segment: bool,
    /// What the host dimension's caches did (reported per run, to say where
    /// a nested walk's references went; issue #35).
    pub host: HostWalkCounters,
}

/// Host walks of a run and how the host caches served them: a nested-TLB
/// hit makes one free; else a host PWC hit skips its upper levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct HostWalkCounters {
    /// Host walks asked for (table pages and data; none under a VMM segment).
    pub host_walks: u64,
    pub nested_tlb_hits: u64,
    /// Host walks the nested TLB missed that hit a host PWC level.
    pub host_pwc_hits: u64,
    /// References of the host walks.
    pub host_refs: u64,
}

impl HostWalkCounters {
    pub fn add(&mut self, o: &HostWalkCounters) {
        self.host_walks += o.host_walks;
        self.nested_tlb_hits += o.nested_tlb_hits;
        self.host_pwc_hits += o.host_pwc_hits;
        self.host_refs += o.host_refs;
    }
}

impl NestedWalker {
    pub fn new(geo: &Geometry, caches: &NestedCaches) -> NestedWalker {
        let mut leaf_level = [0; MAX_SIZES];
        leaf_level[..geo.num_sizes()].copy_from_slice(&geo.leaf_level);
        let mut shifts = [0; MAX_SIZES];
        shifts[..geo.num_sizes()].copy_from_slice(&geo.shifts);
        NestedWalker {
            guest_pwc: Pwc::new(geo, &caches.guest_pwc),
            host_pwc: Pwc::new(geo, &caches.host_pwc),
            ntlb: caches.nested_tlb.as_ref().map(|c| SetAssoc::new(c.entries, c.ways)),
            leaf_level,
            shifts,
            path: NestedPath::default(),
            first: 0,
            vmm_segment: false,
            host: HostWalkCounters::default(),
        }
    }

    /// The same walker with (`on`) or without a VMM direct segment.
    pub fn with_vmm_segment(mut self, on: bool) -> NestedWalker {
        self.vmm_segment = on;
        self
    }

    /// References of one host walk translating `gpa`, whose host leaf has
    /// size index `hs`, in the GPA space `host` (the VM's).
    #[inline]
    fn host_walk(&mut self, gpa: u64, hs: usize, host: Space) -> u32 {
        if self.vmm_segment {
            // GPA + OFFSET: inside the VMM segment, no EPT access at all.
            return 0;
        }
        self.host.host_walks += 1;
        if let Some(t) = self.ntlb.as_mut() {
            let vpn = gpa >> self.shifts[hs];
            if t.lookup_or_insert(vpn, tag(vpn, hs, host)) {
                self.host.nested_tlb_hits += 1;
                return 0;
            }
        }
        let w = self.host_pwc.walk(gpa, host, self.leaf_level[hs]);
        self.host.host_pwc_hits += w.pwc_hit_level.is_some() as u64;
        self.host.host_refs += w.refs as u64;
        w.refs
    }
}

/// The GPA space of VM `vm` in the host caches' tags: the VM's id with
/// address-space id 0 (a VM has one guest-physical space).
#[inline(always)]
fn gpa_space(vm: u8) -> Space {
    Space { vm, asid: 0 }
}

impl Walker for NestedWalker {
    fn walk(&mut self, space: Space, a: &Access, leaf: &Leaf) -> WalkCost {
        debug_assert!(leaf.is_nested(), "a nested walker needs a nested leaf");
        let gl = self.leaf_level[leaf.size()];
        let host = gpa_space(space.vm);
        if self.path.guest_segment {
            // GVA + OFFSET gives the GPA: no guest table page is read (none
            // needs a host walk or an EPT A bit), the guest PWC is untouched.
            self.first = (gl + 1) as u8;
            let refs = self.host_walk(self.path.data_gpa, leaf.host_size as usize, host);
            return WalkCost { refs, pwc_hit_level: None, mem_refs: 0 };
        }
        let g = self.guest_pwc.walk(a.addr, space, gl);
        let first = g.pwc_hit_level.map_or(0, |i| i + 1);
        let mut refs = g.refs;
        for i in first..=gl {
            refs += self.host_walk(self.path.pt_gpa[i], self.path.pt_host_size[i] as usize, host);
        }
        refs += self.host_walk(self.path.data_gpa, leaf.host_size as usize, host);
        self.first = first as u8;
        WalkCost { refs, pwc_hit_level: g.pwc_hit_level, mem_refs: 0 }
    }

    /// The guest leaf's bits as the radix walker sets them, plus the first
    /// guest level read (`FIRST_LEVEL_SHIFT`); the host (EPT) leaf's A/D bits
    /// of the data page and the EPT A bits of the table pages read are the
    /// hypervisor's to set from these.
    #[inline]
    fn writes(&self, a: &Access, _leaf: &Leaf) -> u8 {
        LEAF_A | PMD_A | PUD_A | if a.write { LEAF_D } else { 0 } | (self.first << FIRST_LEVEL_SHIFT)
    }

    fn shootdown(&mut self, space: Space, start: u64, end: u64) {
        // A guest remap changes GVA -> GPA only: the host caches stay.
        self.guest_pwc.shootdown(space, start, end);
    }

    fn flush(&mut self) {
        self.guest_pwc.flush();
        self.host_pwc.flush();
        if let Some(t) = self.ntlb.as_mut() {
            t.flush();
        }
    }

    fn flush_vm(&mut self, vm: u8) {
        self.guest_pwc.flush_vm(vm);
        self.host_pwc.flush_vm(vm);
        if let Some(t) = self.ntlb.as_mut() {
            t.invalidate_where(|x| super::tlb::untag(x).2.vm == vm);
        }
    }

    #[inline(always)]
    fn prepare(&mut self, path: &NestedPath) {
        self.path = *path;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::leaf::MAX_LEVELS;
    use crate::config::MachineConfig;
    use crate::hw::leaf::NO_PA;

    fn leaf(g: u8, h: u8) -> Leaf {
        Leaf { size: g, tlb_size: g.min(h), host_size: h, was_set: 0, pa: NO_PA }
    }

    fn path(pt_host: u8) -> NestedPath {
        let mut p = NestedPath { data_gpa: 0x4020_3000, ..Default::default() };
        for i in 0..MAX_LEVELS {
            p.pt_gpa[i] = 0x8000_0000 + ((i as u64) << 12);
            p.pt_host_size[i] = pt_host;
        }
        p
    }

    /// (g+1)(h+1)-1 without caches, on 4- and 5-level geometries: the
    /// table pages' host size is the data's (both from one host policy).
    #[test]
    fn uncached_references_are_g_plus_1_times_h_plus_1_minus_1() {
        for (preset, levels) in [("haswell-pcc", 4u32), ("haswell-pcc", 5)] {
            let mut cfg = MachineConfig::preset(preset).unwrap();
            if levels == 5 {
                cfg.walker.level_shifts = vec![48, 39, 30, 21, 12];
                cfg.walker.va_bits = 57;
            }
            let geo = Geometry::new(&cfg).unwrap();
            let mut w = NestedWalker::new(&geo, &NestedCaches::default());
            let a = Access::read(0x7f00_1234_5000);
            for (g, h) in [(0u8, 0u8), (1, 0), (0, 1), (1, 1)] {
                w.prepare(&path(h));
                let gl = levels - g as u32; // guest levels read
                let hl = levels - h as u32;
                let refs = w.walk(Space::new(1, 0), &a, &leaf(g, h)).refs;
                assert_eq!(refs, (gl + 1) * (hl + 1) - 1, "{levels}-level, guest {g} host {h}");
            }
        }
        // The 4-level figures of Bhargava et al.: 24, 19, 15.
        let geo = Geometry::new(&MachineConfig::preset("haswell-pcc").unwrap()).unwrap();
        let mut w = NestedWalker::new(&geo, &NestedCaches::default());
        let a = Access::read(0x1234_5000);
        w.prepare(&path(0));
        assert_eq!(w.walk(Space::new(1, 0), &a, &leaf(0, 0)).refs, 24);
        assert_eq!(w.walk(Space::new(1, 0), &a, &leaf(1, 0)).refs, 19);
        w.prepare(&path(1));
        assert_eq!(w.walk(Space::new(1, 0), &a, &leaf(0, 1)).refs, 19);
        assert_eq!(w.walk(Space::new(1, 0), &a, &leaf(1, 1)).refs, 15);
        assert_eq!(w.writes(&a, &leaf(0, 0)) & FIRST_LEVEL_MASK, 0);
    }

    /// With the caches: a guest PWC hit at the PDE level skips three guest
    /// levels and their host walks; the nested TLB makes repeated host walks
    /// free; a VM-wide flush empties them for that VM only.
    #[test]
    fn nested_caches_skip_levels_and_host_walks() {
        let cfg = MachineConfig::preset("haswell-pcc").unwrap();
        let geo = Geometry::new(&cfg).unwrap();
        let caches = NestedCaches {
            guest_pwc: cfg.pwc.clone(),
            host_pwc: BTreeMap::new(),
            nested_tlb: Some(CacheConfig { entries: 64, ways: 0 }),
        };
        let mut w = NestedWalker::new(&geo, &caches);
        let (vm1, vm2) = (Space::new(1, 0), Space::new(2, 0));
        let a = Access::read(0x1234_5000);
        w.prepare(&path(0));
        // Cold: 24 references, every level read.
        assert_eq!(w.walk(vm1, &a, &leaf(0, 0)).refs, 24);
        assert_eq!(first_level_read(w.writes(&a, &leaf(0, 0))), 0);
        // Next 4KB page of the same 2MB: PDE-cache hit, one guest reference
        // (the PTE) plus its table page's host walk and the data's, both in
        // the nested TLB now... the data GPA is the same page: all free.
        let b = Access::read(0x1234_6000);
        let c = w.walk(vm1, &b, &leaf(0, 0));
        assert_eq!((c.refs, c.pwc_hit_level), (1, Some(2)));
        assert_eq!(first_level_read(w.writes(&b, &leaf(0, 0))), 3);
        // Another data page: its host walk misses the nested TLB (4 refs).
        let mut p = path(0);
        p.data_gpa = 0x5000_0000;
        w.prepare(&p);
        assert_eq!(w.walk(vm1, &b, &leaf(0, 0)).refs, 1 + 4);
        // VM 2 shares nothing.
        assert_eq!(w.walk(vm2, &b, &leaf(0, 0)).refs, 24);
        // A VM-wide flush of VM 1 leaves VM 2's caches.
        w.flush_vm(1);
        assert_eq!(w.walk(vm1, &b, &leaf(0, 0)).refs, 24);
        assert_eq!(w.walk(vm2, &b, &leaf(0, 0)).refs, 1);
        // The host dimension, walk by walk (table pages read, then the
        // data): 1 cold, 5 host walks of 4 references; 2, two nested-TLB
        // hits; 3, a hit (its table page) and a 4-reference miss (the new
        // data page); 4 (VM 2) cold, 5; 5 (VM 1 after its flush) cold, 5;
        // 6 (VM 2), two hits. No host PWC here: every miss reads 4 levels.
        assert_eq!(w.host, HostWalkCounters { host_walks: 21, nested_tlb_hits: 5, host_pwc_hits: 0, host_refs: 64 });
    }
}
