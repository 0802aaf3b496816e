//! What one TLB entry covers after a walk to a base-PTE-level leaf: the
//! page table's side of TLB coalescing (`MachineConfig::coalesce`). The
//! kernel answers a walk with a `Leaf` whose `size` is the mapping's and
//! whose `tlb_size` is decided here, from the PTEs around the address; the
//! MMU then fills an entry of that size (`Mmu::complete_walk`).
//!
//! - Folios (Linux mTHP, `folio_sizes`) are runs of base PTEs: without
//!   coalescing each PTE is its own entry, so a folio saves faults and
//!   page-table work but no TLB reach (transhuge.rst, "multi-size THP").
//! - `contpte`: arm64 maps every naturally aligned 16-PTE block of a folio
//!   of at least 64KB with the contiguous bit (Linux 6.9, "arm64/mm: wire up
//!   PTE_CONT for user mappings"), and the TLB may cache the block as one
//!   64KB entry (Arm ARM, "the Contiguous bit"). A smaller folio or a
//!   base page gets no hint.
//! - `amd`: the walker itself coalesces an aligned run of present PTEs that
//!   map contiguous, equally aligned frames into one entry, without any hint
//!   from the OS (AMD's "PTE coalescing", Zen; Pham et al., CoLT, MICRO'12
//!   for the general idea). Checked at walk time, so any contiguity the
//!   allocator happened to give counts, folio or not.
//!
//! Alpha's granularity hint needs nothing here: its sizes are TLB sizes
//! (`tlb_size == size`), as are all sizes of a machine with no folio sizes
//! and no coalescing, whose walks never call in (`Geometry::tlb_size_differs`).

use super::aspace::{NO_PFN, PRESENT};
use super::kernel::Kernel;
use crate::config::Coalesce;
use crate::hw::Leaf;

impl Kernel {
    /// `leaf` with the TLB size the machine's coalescing gives it; `vi`, `pi`
    /// name the PTE the walk read in `pid`'s address space. The common case
    /// (a size that is its own TLB size) costs one test and returns at once.
    #[inline(always)]
    pub(super) fn coalesce(&self, mut leaf: Leaf, pid: usize, vi: usize, pi: usize) -> Leaf {
        if self.geo.tlb_size_differs(leaf.size()) {
            leaf.tlb_size = self.coalesced_size(pid, vi, pi, leaf.size()) as u8;
        }
        leaf
    }

    /// The TLB size of a walk to a base page or folio of size index `size`.
    fn coalesced_size(&self, pid: usize, vi: usize, pi: usize, size: usize) -> usize {
        let g = &self.geo;
        let cs = g.coalesce_size;
        match g.coalesce {
            Coalesce::None => 0,
            // The OS sets the contiguous bit on whole folios only, and every
            // aligned 64KB of a folio of at least 64KB is such a block.
            Coalesce::Contpte if g.is_folio(size) && g.sizes[size] >= g.sizes[cs] => cs,
            Coalesce::Contpte => 0,
            // A folio at least as large is one naturally aligned block of
            // frames: every aligned run inside it qualifies.
            Coalesce::Amd if size != 0 && g.sizes[size] >= g.sizes[cs] => cs,
            Coalesce::Amd if self.contiguous_run(pid, vi, pi, cs) => cs,
            Coalesce::Amd => 0,
        }
    }

    /// Whether the naturally aligned run of size index `run` around base
    /// page `pi` lies in the VMA and is all present PTEs mapping frames that
    /// are consecutive and aligned to the run (the entry maps an aligned
    /// virtual range to an aligned physical one).
    fn contiguous_run(&self, pid: usize, vi: usize, pi: usize, run: usize) -> bool {
        let bs = self.shape.base_shift;
        let v = &self.spaces[pid].vmas[vi];
        let len = self.geo.sizes[run];
        let start = (v.start + ((pi as u64) << bs)) & !(len - 1);
        if !v.covers(start, len) {
            return false;
        }
        let (a, n) = (v.page_index(start, bs), (len >> bs) as usize);
        let first = v.pfn.get(a);
        if first == NO_PFN || !(first as u64).is_multiple_of(n as u64) {
            return false;
        }
        (0..n).all(|j| v.flags[a + j] & PRESENT != 0 && v.pfn.get(a + j) == first + j as u32)
    }
}
