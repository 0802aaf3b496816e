//! Address spaces: per process, VMAs with the state of their page table.
//!
//! Per base page: the physical frame and flag bits (present, touched, accessed,
//! dirty, and the page-size index of the leaf mapping it). Per PMD-level region
//! (2MB on x86): how many base pages are touched (the utilization Ingens and
//! khugepaged reason about) and the PMD accessed bit the PCC's cold-miss filter
//! reads. Per PUD-level region (1GB): its accessed bit.
//!
//! Arrays per VMA, found by binary search with a one-entry cache, so a
//! translation on a TLB miss costs no hashing. Frame numbers (`pfns.rs`) are
//! sparse: a chunk of 512 pages gets storage when one of its pages first gets
//! a frame, so declared-but-untouched memory costs 8 bytes per 2 MiB. The
//! flag byte per page and the per-region counters are dense arrays allocated
//! zeroed, so the host backs only the parts a run writes.

use crate::trace::Region;

// The shifts of the levels the model keeps state for (hardware geometry).
pub use crate::hw::geometry::Shape;

pub(in crate::os) use super::pfns::{Pfns, NO_PFN};

/// Base page is mapped (a leaf translation exists).
pub(in crate::os) const PRESENT: u8 = 1 << 0;
/// The program has touched the base page since it was mapped (cleared by free).
/// Under base pages it would be resident: the basis of the bloat metric.
pub(in crate::os) const TOUCHED: u8 = 1 << 1;
/// Hardware accessed bit of the leaf (set by walks; cleared by the OS).
pub(in crate::os) const ACCESSED: u8 = 1 << 2;
/// Hardware dirty bit of the leaf.
pub(in crate::os) const DIRTY: u8 = 1 << 3;
/// Page-size index of the leaf mapping this base page, in bits 4-6.
pub(in crate::os) const SIZE_SHIFT: u32 = 4;
pub(in crate::os) const SIZE_MASK: u8 = 0b111 << SIZE_SHIFT;
/// The frame belongs to a huge block that was split while partly freed: it
/// stays allocated as one unit (Linux's deferred split), so freeing this base
/// page does not return its frame.
pub(in crate::os) const LEAKED: u8 = 1 << 7;

#[inline(always)]
pub(in crate::os) fn size_of_flags(f: u8) -> usize {
    ((f & SIZE_MASK) >> SIZE_SHIFT) as usize
}

#[derive(Clone, Debug)]
pub(in crate::os) struct Vma {
    pub(in crate::os) name: String,
    pub(in crate::os) start: u64,
    pub(in crate::os) end: u64,
    /// madvise(MADV_HUGEPAGE) on this range (VM_HUGEPAGE).
    pub(in crate::os) advised: bool,
    /// Created from accesses outside any declared region (imported traces).
    pub(in crate::os) inferred: bool,
    /// Frame per base page (`NO_PFN`: none).
    pub(in crate::os) pfn: Pfns,
    pub(in crate::os) flags: Vec<u8>,
    /// First PMD-level region overlapping the VMA (start rounded down).
    pub(in crate::os) region_base: u64,
    /// Touched base pages per PMD-level region.
    pub(in crate::os) touched: Vec<u16>,
    /// PMD accessed bit per PMD-level region.
    pub(in crate::os) pmd_a: Vec<bool>,
    /// PUD accessed bit per PUD-level region, from `start` rounded down.
    pub(in crate::os) pud_a: Vec<bool>,
    /// "Accessed in the current window" bit per base page, for coverage
    /// tracking (HawkEye as the PCC artifact models it: every access counts).
    /// Empty unless `Kernel::track_coverage` turned tracking on, so it costs
    /// no memory otherwise.
    pub(in crate::os) cov: Vec<u64>,
    /// Page contents (os/content.rs): one content word per base page. Empty
    /// unless a sharing policy turned content tracking on, so it costs no
    /// memory otherwise.
    pub(in crate::os) content: Vec<u64>,
}

impl Vma {
    fn new(name: String, start: u64, end: u64, advised: bool, inferred: bool, g: &Shape) -> Vma {
        let pages = ((end - start) >> g.base_shift) as usize;
        let region_base = start & !((1u64 << g.region_shift) - 1);
        let regions = ((end - region_base + (1u64 << g.region_shift) - 1) >> g.region_shift) as usize;
        let pud_base = start >> g.pud_shift;
        let puds = (((end - 1) >> g.pud_shift) - pud_base + 1) as usize;
        Vma {
            name,
            start,
            end,
            advised,
            inferred,
            pfn: Pfns::new(pages),
            flags: vec![0; pages],
            region_base,
            touched: vec![0; regions],
            pmd_a: vec![false; regions],
            pud_a: vec![false; puds],
            cov: Vec::new(),
            content: Vec::new(),
        }
    }

    #[inline(always)]
    pub fn page_index(&self, addr: u64, base_shift: u32) -> usize {
        ((addr - self.start) >> base_shift) as usize
    }
    #[inline(always)]
    pub fn region_index(&self, addr: u64, region_shift: u32) -> usize {
        ((addr - self.region_base) >> region_shift) as usize
    }
    /// Base page `i` (at `va`) no longer counts as used (freed, merged, or
    /// split off and reclaimed): clear its first-touch mark and take it out
    /// of the counts: its region's, its process's `touched_pages`, and the
    /// process's known-full regions (`AddressSpace::full`).
    pub fn untouch(&mut self, i: usize, va: u64, region_shift: u32, touched_pages: &mut u64, full: &mut super::full_regions::FullRegions) {
        if self.flags[i] & TOUCHED != 0 {
            self.flags[i] &= !TOUCHED;
            *touched_pages -= 1;
            let ri = self.region_index(va, region_shift);
            self.touched[ri] -= 1;
            full.forget(va >> region_shift);
        }
    }
    pub fn region_start(&self, ri: usize, region_shift: u32) -> u64 {
        self.region_base + ((ri as u64) << region_shift)
    }
    /// Whether the aligned block [start, start + len) lies wholly inside the VMA.
    pub fn covers(&self, start: u64, len: u64) -> bool {
        start >= self.start && start + len <= self.end
    }
    pub fn regions(&self) -> usize {
        self.touched.len()
    }
    pub fn leaked(&self, pi: usize) -> bool {
        self.flags[pi] & LEAKED != 0
    }
    pub fn mark_leaked(&mut self, pi: usize) {
        self.flags[pi] |= LEAKED;
    }

    /// Set the coverage bit of base page `pi` (allocating the bitset on first use).
    #[inline(always)]
    pub fn cover(&mut self, pi: usize) {
        let w = pi >> 6;
        if w >= self.cov.len() {
            grow_zeroed(&mut self.cov, self.flags.len().div_ceil(64).max(w + 1));
        }
        self.cov[w] |= 1u64 << (pi & 63);
    }

    /// Count and clear the coverage bits of base pages [a, b).
    pub fn take_cov(&mut self, a: usize, b: usize) -> u32 {
        let mut n = 0;
        let mut i = a;
        while i < b {
            let w = i >> 6;
            if w >= self.cov.len() {
                break;
            }
            let lo = i & 63;
            let hi = (b - (i & !63)).min(64);
            let mask = if hi - lo == 64 { u64::MAX } else { ((1u64 << (hi - lo)) - 1) << lo };
            n += (self.cov[w] & mask).count_ones();
            self.cov[w] &= !mask;
            i = (i & !63) + 64;
        }
        n
    }
}

/// Grow a lazily allocated per-page array (coverage bits, content words) to
/// `n` zero entries. From empty it is allocated zeroed, where `resize` would
/// write every zero and make the whole array resident at once.
pub(in crate::os) fn grow_zeroed(v: &mut Vec<u64>, n: usize) {
    if v.is_empty() {
        *v = vec![0; n];
    } else if v.len() < n {
        v.resize(n, 0);
    }
}

const VMA_CACHE: usize = 16;

#[derive(Clone, Debug, Default)]
/// One process's address space. Its page tables are the OS model's own:
/// outside `os/` they are read through `MmView` (`Kernel::view`) and the
/// counters below.
pub struct AddressSpace {
    pub(in crate::os) pid: u16,
    pub(in crate::os) name: String,
    pub(in crate::os) vmas: Vec<Vma>,
    /// Recently found VMA indices, direct-mapped by 2MB region of the address
    /// (`VMA_CACHE` slots). A program alternating between a few arrays (bfs:
    /// offsets, neighbors, parent) finds each in its own slot, where a single
    /// last-VMA cache would miss on almost every switch and binary-search.
    /// An entry is only a guess, checked against the VMA's bounds, so VMAs
    /// being added or grown can never make it return a wrong one.
    recent: [u32; VMA_CACHE],
    /// Regions whose every base page is touched (`os/full_regions.rs`): what
    /// lowers a region's `Vma::touched` count forgets it here.
    pub(in crate::os) full: super::full_regions::FullRegions,
    /// Frames (base pages) of physical memory held by this process.
    pub(in crate::os) frames_held: u64,
    /// Base pages touched and not freed: the RSS it would have with base pages only.
    pub(in crate::os) touched_pages: u64,
    /// Bytes mapped by leaves larger than the base page, by page-size index.
    pub(in crate::os) huge_bytes: [u64; 8],
    /// Peak of `frames_held`.
    pub(in crate::os) peak_frames: u64,
    /// Base pages of VMAs inferred from accesses outside every declared
    /// region: model memory that grows with the trace's content, checked
    /// against the limit while the run goes (`Kernel::inferred_pages`).
    pub(in crate::os) inferred_pages: u64,
    /// The shared scan cursor (`view::MmView::scan_cursor`): the address the
    /// next khugepaged-like scan of this process resumes at.
    pub(in crate::os) scan_next: u64,
}

impl AddressSpace {
    pub(in crate::os) fn new(pid: u16, name: String) -> Self {
        AddressSpace { pid, name, ..Default::default() }
    }

    /// Add a VMA for a declared region; page-aligns its bounds outward.
    pub(in crate::os) fn add_region(&mut self, r: &Region, g: &Shape) {
        let mask = (1u64 << g.base_shift) - 1;
        let start = r.base & !mask;
        let end = (r.base + r.len + mask) & !mask;
        if end <= start || self.vmas.iter().any(|v| v.start < end && start < v.end) {
            return; // empty or overlapping declarations are ignored (first wins)
        }
        let v = Vma::new(r.name.clone(), start, end, r.hugepage_advised, false, g);
        let i = self.vmas.partition_point(|x| x.start < start);
        self.vmas.insert(i, v);
    }

    /// Index of the VMA holding `addr`, creating an inferred 2MB-aligned VMA
    /// (merged with an adjacent inferred one) when no declared region holds it.
    #[inline]
    pub(in crate::os) fn vma_index(&mut self, addr: u64, g: &Shape) -> usize {
        let slot = ((addr >> g.region_shift) as usize) % VMA_CACHE;
        let guess = self.recent[slot] as usize;
        if let Some(v) = self.vmas.get(guess) {
            if addr >= v.start && addr < v.end {
                return guess;
            }
        }
        let i = self.vmas.partition_point(|v| v.start <= addr);
        let found = if i > 0 && addr < self.vmas[i - 1].end { i - 1 } else { self.infer(addr, g) };
        self.recent[slot] = found as u32;
        found
    }

    /// Cold path: imported traces touch memory no region declared. Model it as
    /// anonymous memory in 2MB-aligned chunks (as large anonymous mmaps are
    /// placed on current Linux), growing an adjacent inferred VMA if any.
    #[cold]
    fn infer(&mut self, addr: u64, g: &Shape) -> usize {
        let chunk = 1u64 << g.region_shift;
        let mut start = addr & !(chunk - 1);
        let mut end = start + chunk;
        let i = self.vmas.partition_point(|v| v.start <= addr);
        // Clip against neighbours so VMAs never overlap.
        if i > 0 {
            start = start.max(self.vmas[i - 1].end);
        }
        if i < self.vmas.len() {
            end = end.min(self.vmas[i].start);
        }
        if i > 0 && self.vmas[i - 1].inferred && self.vmas[i - 1].end == start && (start & (chunk - 1)) == 0 {
            // Grow the previous inferred VMA: rebuild it with the new end.
            let prev = &self.vmas[i - 1];
            let mut grown = Vma::new(prev.name.clone(), prev.start, end, prev.advised, true, g);
            grown.pfn.copy_prefix(&prev.pfn);
            grown.flags[..prev.flags.len()].copy_from_slice(&prev.flags);
            grown.touched[..prev.touched.len()].copy_from_slice(&prev.touched);
            grown.pmd_a[..prev.pmd_a.len()].copy_from_slice(&prev.pmd_a);
            grown.pud_a[..prev.pud_a.len()].copy_from_slice(&prev.pud_a);
            if !prev.content.is_empty() {
                grown.content = vec![0; grown.flags.len()];
                grown.content[..prev.content.len()].copy_from_slice(&prev.content);
            }
            if !prev.cov.is_empty() {
                grown.cov = vec![0; grown.flags.len().div_ceil(64)];
                grown.cov[..prev.cov.len()].copy_from_slice(&prev.cov);
            }
            self.inferred_pages += (grown.flags.len() - self.vmas[i - 1].flags.len()) as u64;
            self.vmas[i - 1] = grown;
            return i - 1;
        }
        let v = Vma::new(format!("anon@{start:#x}"), start, end, false, true, g);
        self.inferred_pages += v.flags.len() as u64;
        self.vmas.insert(i, v);
        i
    }

    pub fn pid(&self) -> u16 {
        self.pid
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Frames (base pages) of physical memory the process holds.
    pub fn frames_held(&self) -> u64 {
        self.frames_held
    }
    /// The most frames it held at once.
    pub fn peak_frames(&self) -> u64 {
        self.peak_frames
    }
    /// Base pages touched and not freed: its RSS with base pages only.
    pub fn touched_pages(&self) -> u64 {
        self.touched_pages
    }
    /// Bytes mapped by leaves of each page-size index (index 0 unused).
    pub fn huge_bytes(&self) -> &[u64; 8] {
        &self.huge_bytes
    }
    /// Bytes the per-page coverage bits and content words hold (both
    /// allocated only once coverage or content tracking is on).
    pub fn tracking_bytes(&self) -> usize {
        self.vmas.iter().map(|v| (v.cov.len() + v.content.len()) * std::mem::size_of::<u64>()).sum()
    }

    pub fn footprint_declared(&self) -> u64 {
        self.vmas.iter().filter(|v| !v.inferred).map(|v| v.end - v.start).sum()
    }

    pub fn total_huge_bytes(&self) -> u64 {
        self.huge_bytes.iter().sum()
    }

    /// Find the VMA index holding `addr` without creating one.
    pub(in crate::os) fn find(&self, addr: u64) -> Option<usize> {
        let i = self.vmas.partition_point(|v| v.start <= addr);
        (i > 0 && addr < self.vmas[i - 1].end).then(|| i - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape::from_levels(&[39, 30, 21, 12])
    }

    #[test]
    fn declared_and_inferred_vmas() {
        let g = shape();
        let mut a = AddressSpace::new(0, "p".into());
        a.add_region(&Region::new("x", 0x4000_0000, 3 << 20), &g);
        let i = a.vma_index(0x4000_0000 + 5, &g);
        assert_eq!(a.vmas[i].name, "x");
        assert_eq!(a.vmas[i].pfn.len(), 768);
        assert_eq!(a.vmas[i].regions(), 2);
        // Outside: inferred 2MB chunks, merged when adjacent and growing upward.
        let j = a.vma_index(0x8000_0000 + 10, &g);
        assert!(a.vmas[j].inferred);
        assert_eq!((a.vmas[j].start, a.vmas[j].end), (0x8000_0000, 0x8020_0000));
        let k = a.vma_index(0x8020_0000 + 10, &g);
        assert_eq!(k, j);
        assert_eq!(a.vmas[k].end, 0x8040_0000);
        // An inferred chunk just after the 3MB region is clipped to start at its end.
        let m = a.vma_index(0x4030_0000, &g);
        assert_eq!(a.vmas[m].start, 0x4030_0000);
        assert_eq!(a.vmas[m].end, 0x4040_0000);
        assert_eq!(a.footprint_declared(), 3 << 20);
    }

    #[test]
    fn coverage_bits_count_and_clear_unaligned_ranges() {
        let g = shape();
        let mut a = AddressSpace::new(0, "p".into());
        a.add_region(&Region::new("x", 0x4000_0000, 3 << 20), &g);
        let v = &mut a.vmas[0];
        assert!(v.cov.is_empty());
        for pi in [0usize, 5, 63, 64, 100, 511, 512, 700] {
            v.cover(pi);
            v.cover(pi); // idempotent
        }
        assert_eq!(v.take_cov(5, 101), 4); // 5, 63, 64, 100
        assert_eq!(v.take_cov(0, 768), 4); // 0, 511, 512, 700 remain
        assert_eq!(v.take_cov(0, 768), 0);
    }
}
