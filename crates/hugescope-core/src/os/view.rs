//! `MmView`: the read-only view of memory-management state that policies read
//! through (docs/architecture.md, "The seam"). A policy sees what a
//! Linux daemon can see by walking page tables (mm/pagewalk.c) and nothing the
//! hardware does not keep:
//!
//! - the VMAs of each process (bounds, MADV_HUGEPAGE);
//! - per PMD-level region (2MB on x86-64): base pages mapped, the largest
//!   leaf, touched pages, the PMD's accessed bit, and the accessed and dirty
//!   bits **of its leaves**: a 2MB leaf has one A bit and one D bit, as on
//!   real hardware, so a policy cannot tell which 4KB pages under a huge leaf
//!   were used;
//! - a scan cursor per process: the next address a khugepaged-like scanner
//!   looks at (Linux: khugepaged_scan.address), shared by every daemon that
//!   scans that process, so two scanners on one kernel do not each rescan
//!   what the other has just looked at.
//!
//! - per base page (`page`): the frame its leaf maps it to, the leaf's size
//!   and the leaf's accessed and dirty bits (as a page walk reads the PTE or
//!   the PMD that maps it);
//! - physical memory as the buddy allocator's counters show it
//!   (/proc/buddyinfo): free and total frames, free blocks of an order,
//!   the free memory fragmentation index.
//!
//! The model stores accessed/dirty bits per base page (the walker writes the
//! bit of the page it resolved). The view folds the bits of a huge leaf's
//! pages into the leaf's one bit: a leaf is accessed if any walk through it
//! set the bit since the last clear. A leaf larger than the region (1GB over a
//! 2MB region) is folded over the region's part of it.

use super::aspace::{size_of_flags, AddressSpace, Vma, ACCESSED, DIRTY, NO_PFN, PRESENT, TOUCHED};
use super::kernel::Kernel;
use crate::hw::Geometry;

/// State of one PMD-level region of one process, as page tables show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionState {
    pub start: u64,
    /// The whole region lies inside one VMA (a PMD leaf is possible).
    pub inside_vma: bool,
    pub advised: bool,
    pub touched: u32,
    /// Base pages of the region that are mapped (by any leaf size).
    pub present: u32,
    /// Base pages mapped by leaves whose accessed bit is set: a base leaf
    /// counts its page, a huge leaf all of its pages in the region or none.
    pub accessed: u32,
    /// Base pages mapped by leaves whose dirty bit is set (same rule).
    pub dirty: u32,
    /// Largest leaf size index in the region (0: base pages only).
    pub leaf_size: usize,
    pub pmd_accessed: bool,
}

/// One base page as the page tables map it (`MmView::page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageState {
    /// The frame the page is mapped to (None: not mapped, or no frame).
    pub frame: Option<u64>,
    /// Page-size index of the leaf mapping it (0: a base page or unmapped).
    pub leaf_size: usize,
    /// The program touched the page since it was mapped.
    pub touched: bool,
    /// The accessed and dirty bits of the leaf mapping the page: one each
    /// for the whole leaf when it is huge.
    pub accessed: bool,
    pub dirty: bool,
}

/// One VMA as a scanner sees it.
#[derive(Clone, Copy, Debug)]
pub struct VmaView<'a> {
    vma: &'a Vma,
    region_shift: u32,
}

impl VmaView<'_> {
    pub fn start(&self) -> u64 {
        self.vma.start
    }
    pub fn end(&self) -> u64 {
        self.vma.end
    }
    /// MADV_HUGEPAGE was applied to the range (VM_HUGEPAGE).
    pub fn advised(&self) -> bool {
        self.vma.advised
    }
    /// Base pages the VMA spans.
    pub fn pages(&self) -> u64 {
        self.vma.flags.len() as u64
    }
    /// PMD-level regions overlapping the VMA.
    pub fn regions(&self) -> usize {
        self.vma.regions()
    }
    /// Start of the VMA's `ri`-th PMD-level region (the first may begin
    /// before the VMA).
    pub fn region_start(&self, ri: usize) -> u64 {
        self.vma.region_start(ri, self.region_shift)
    }
    /// Whether region `ri` lies wholly inside the VMA (a huge leaf fits).
    pub fn region_inside(&self, ri: usize) -> bool {
        self.vma.covers(self.region_start(ri), 1 << self.region_shift)
    }
    /// Base pages of region `ri` touched by the program (and not freed).
    pub fn region_touched(&self, ri: usize) -> u32 {
        self.vma.touched[ri] as u32
    }
}

/// Read-only access to the kernel's page tables for policies (`Kernel::view`).
#[derive(Clone, Copy)]
pub struct MmView<'a> {
    k: &'a Kernel,
}

impl<'a> MmView<'a> {
    fn space(&self, pid: u16) -> Option<&'a AddressSpace> {
        self.k.spaces.get(pid as usize)
    }

    /// Address spaces, indexed by pid (a pid with no regions has none).
    pub fn processes(&self) -> usize {
        self.k.spaces.len()
    }

    /// The VMAs of a process, in address order.
    pub fn vmas(&self, pid: u16) -> impl Iterator<Item = VmaView<'a>> + 'a {
        let rs = self.k.shape.region_shift;
        self.space(pid).into_iter().flat_map(move |sp| sp.vmas.iter().map(move |vma| VmaView { vma, region_shift: rs }))
    }

    /// The `i`-th VMA of a process (address order).
    pub fn vma(&self, pid: u16, i: usize) -> Option<VmaView<'a>> {
        let rs = self.k.shape.region_shift;
        self.space(pid)?.vmas.get(i).map(|vma| VmaView { vma, region_shift: rs })
    }

    /// Index of the first VMA of `pid` that ends above `addr` (where a scan
    /// resuming at `addr` continues); None past the last VMA.
    pub fn vma_from(&self, pid: u16, addr: u64) -> Option<usize> {
        let sp = self.space(pid)?;
        let i = sp.vmas.partition_point(|v| v.end <= addr);
        (i < sp.vmas.len()).then_some(i)
    }

    /// The shared scan cursor of `pid`: the address its next scan starts at
    /// (0 at the start of the run and after a full pass over the process).
    pub fn scan_cursor(&self, pid: u16) -> u64 {
        self.space(pid).map_or(0, |sp| sp.scan_next)
    }

    /// State of the PMD-level region holding `start` (rounded down); None if
    /// no VMA of `pid` overlaps it. The region is read in the VMA holding its
    /// first byte, else in the one holding its last.
    pub fn region(&self, pid: u16, start: u64) -> Option<RegionState> {
        let k = self.k;
        let sp = self.space(pid)?;
        let vi = sp.find(start).or_else(|| sp.find(start + k.region_bytes() - 1))?;
        let v = &sp.vmas[vi];
        let len = k.region_bytes();
        let bs = k.shape.base_shift;
        let start = start & !(len - 1);
        let ri = v.region_index(start.max(v.region_base), k.shape.region_shift);
        let lo = start.max(v.start);
        let hi = (start + len).min(v.end);
        let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
        let mut s = RegionState {
            start,
            inside_vma: v.covers(start, len),
            advised: v.advised,
            touched: v.touched[ri] as u32,
            present: 0,
            accessed: 0,
            dirty: 0,
            leaf_size: 0,
            pmd_accessed: v.pmd_a[ri],
        };
        // One leaf at a time: a base leaf is one page; a huge leaf spans its
        // naturally aligned pages, clipped to the region.
        let mut i = a;
        while i < b {
            let f = v.flags[i];
            let size = if f & PRESENT != 0 { size_of_flags(f) } else { 0 };
            let next = if size == 0 {
                i + 1
            } else {
                let leaf = k.geo.sizes[size];
                let leaf_end = ((v.start + ((i as u64) << bs)) & !(leaf - 1)) + leaf;
                b.min(v.page_index(leaf_end.min(hi), bs))
            };
            let pages = &v.flags[i..next];
            let n = pages.len() as u32;
            if f & PRESENT != 0 {
                s.present += n;
                s.accessed += if pages.iter().any(|&g| g & ACCESSED != 0) { n } else { 0 };
                s.dirty += if pages.iter().any(|&g| g & DIRTY != 0) { n } else { 0 };
            }
            s.leaf_size = s.leaf_size.max(size);
            i = next;
        }
        Some(s)
    }

    /// Base page `addr` of `pid` (None outside its VMAs). The accessed and
    /// dirty bits are the leaf's: folded over the pages of a huge leaf.
    pub fn page(&self, pid: u16, addr: u64) -> Option<PageState> {
        let k = self.k;
        let sp = self.space(pid)?;
        let v = &sp.vmas[sp.find(addr)?];
        let bs = k.shape.base_shift;
        let i = v.page_index(addr, bs);
        let f = v.flags[i];
        let present = f & PRESENT != 0;
        let size = if present { size_of_flags(f) } else { 0 };
        // The leaf's pages, clipped to the VMA.
        let leaf = k.geo.sizes[size];
        let lo = (addr & !(leaf - 1)).max(v.start);
        let hi = ((addr & !(leaf - 1)) + leaf).min(v.end);
        let pages = &v.flags[v.page_index(lo, bs)..v.page_index(hi - 1, bs) + 1];
        let pfn = v.pfn.get(i);
        Some(PageState {
            frame: (present && pfn != NO_PFN).then_some(pfn as u64),
            leaf_size: size,
            touched: f & TOUCHED != 0,
            accessed: present && pages.iter().any(|&g| g & ACCESSED != 0),
            dirty: present && pages.iter().any(|&g| g & DIRTY != 0),
        })
    }

    /// Whether the aligned `len` bytes at `start` lie in one VMA of `pid` with
    /// no page mapped (Linux's thp_vma_suitable_order and pte_range_none).
    pub fn range_unmapped(&self, pid: u16, start: u64, len: u64) -> bool {
        let Some(sp) = self.space(pid) else { return false };
        let Some(vi) = sp.find(start) else { return false };
        let v = &sp.vmas[vi];
        if !v.covers(start, len) {
            return false;
        }
        let bs = self.k.shape.base_shift;
        let a = v.page_index(start, bs);
        v.flags[a..a + (len >> bs) as usize].iter().all(|&f| f & PRESENT == 0)
    }

    /// Bytes of `pid` mapped by leaves larger than the base page.
    pub fn huge_bytes(&self, pid: u16) -> u64 {
        self.space(pid).map_or(0, |sp| sp.total_huge_bytes())
    }

    /// Mapped base pages of [start, start + len) of `pid` (one VMA) whose
    /// content is all zero bytes (`os/content.rs`; 0 without content tracking).
    pub fn zero_pages_in(&self, pid: u16, start: u64, len: u64) -> u64 {
        self.k.zero_pages_in(pid, start, len)
    }

    /// The machine's page sizes and levels.
    pub fn geometry(&self) -> &'a Geometry {
        &self.k.geo
    }

    /// Free frames (base pages) of physical memory.
    pub fn free_frames(&self) -> u64 {
        self.k.phys.free_frames()
    }

    /// Frames of physical memory.
    pub fn total_frames(&self) -> u64 {
        self.k.phys.total_frames()
    }

    /// Free blocks of order `order` or larger (a huge allocation without compaction).
    pub fn free_blocks_at_least(&self, order: u32) -> u64 {
        self.k.phys.free_blocks_at_least(order)
    }

    /// The free memory fragmentation index at `order` (Ingens §3.1, §4.4):
    /// the share of free frames in free blocks smaller than `order`.
    pub fn fmfi(&self, order: u32) -> f64 {
        self.k.phys.fmfi(order)
    }

    /// Every PMD-level region of every VMA of `pid`, in address order: the
    /// VMA, its region index and the region's start. A region shared by two
    /// VMAs appears once per VMA.
    pub fn regions(&self, pid: u16) -> impl Iterator<Item = (VmaView<'a>, usize, u64)> + 'a {
        self.vmas(pid).flat_map(|v| (0..v.regions()).map(move |ri| (v, ri, v.region_start(ri))))
    }
}

impl Kernel {
    /// The read-only view policies read page-table state through.
    pub fn view(&self) -> MmView<'_> {
        MmView { k: self }
    }

    /// State of one PMD-level region (`MmView::region`).
    pub fn region_state(&self, pid: u16, start: u64) -> Option<RegionState> {
        self.view().region(pid, start)
    }

    /// Advance the shared scan cursor of `pid` (see `MmView::scan_cursor`):
    /// the one piece of page-table state a scanning policy writes.
    pub fn set_scan_cursor(&mut self, pid: u16, addr: u64) {
        if let Some(sp) = self.spaces.get_mut(pid as usize) {
            sp.scan_next = addr;
        }
    }
}
