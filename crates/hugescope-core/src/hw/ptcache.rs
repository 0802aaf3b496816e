//! Where a page walk's references hit in the data caches.
//!
//! A walk reads one page-table entry per level it does not skip; the walker
//! fetches it through the data caches like any load (Intel SDM vol. 3A
//! §4.10.3; Bhargava et al., ASPLOS'08 §2: PTEs are cached in L1/L2/L3). A
//! walk over a small footprint finds its entries in the last-level cache; one
//! over many GiB misses it, because page-table lines compete with the
//! program's data (issue #15). One fixed latency per reference cannot tell
//! the two apart, so the cost model prices each reference by where it hits.
//!
//! The model: a set-associative LRU cache of page-table cache lines (64 B =
//! 8 entries of 8 B), touched only by walks. Its capacity C (lines,
//! `cost.pt_cache_lines`) is the *effective* share of the LLC that page-table
//! lines keep while competing with the program's data, a fitted parameter
//! (`hugescope calibrate`), not the LLC's size. A reference that hits costs
//! `walk_ref_cycles` (LLC), one that misses `walk_ref_mem_cycles` (DRAM).
//! TLB hits never touch it, so the simulator's hot path is unchanged.
//!
//! Lines are named by what they hold, not by a physical address (static maps
//! have none): the entry of level i for address va is entry va >> shift(i) of
//! that level, and its line is that index >> 3. Page tables are per address
//! space, so (space, level, line) names one line exactly. A TLB shootdown or
//! flush does not touch the data caches, so neither touches this model.

use super::assoc::SetAssoc;
use super::geometry::Geometry;
use super::space::{Space, SPACE_BITS};

/// Page-table entries per 64-byte cache line (8-byte entries, x86-64 and arm64).
const ENTRIES_PER_LINE_BITS: u32 = 3;
/// Associativity of the modelled cache: that of a typical LLC slice. A fully
/// associative LRU of up to 4Mi lines would make a miss linear in C.
pub const WAYS: usize = 16;

#[derive(Debug, PartialEq, Eq)]
pub struct PtCache {
    lines: SetAssoc,
    /// VA shift of each level's entries, root first (`Geometry::level_shifts`).
    shifts: Vec<u32>,
}

// `clone_from` reuses the cache's arrays (`SetAssoc`'s clone).
impl Clone for PtCache {
    fn clone(&self) -> Self {
        PtCache { lines: self.lines.clone(), shifts: self.shifts.clone() }
    }

    fn clone_from(&mut self, src: &Self) {
        self.lines.clone_from(&src.lines);
        self.shifts.clone_from(&src.shifts);
    }
}

impl PtCache {
    /// A cache of `lines` lines (rounded down to whole sets of `WAYS`; fewer
    /// than `WAYS` lines make one fully associative set).
    pub fn new(geo: &Geometry, lines: u64) -> PtCache {
        PtCache {
            lines: SetAssoc::new(lines as usize, WAYS),
            shifts: geo.level_shifts.clone(),
        }
    }

    /// The line of level `level`'s entry for `va` in `space`: the line index
    /// above the space and a 3-bit level (at most 57 - 15 + 3 + 16 = 61 bits,
    /// never `assoc::EMPTY`).
    #[inline(always)]
    fn line(&self, space: Space, va: u64, level: usize) -> (u64, u64) {
        let idx = va >> (self.shifts[level] + ENTRIES_PER_LINE_BITS);
        let tag = (((idx << 3) | level as u64) << SPACE_BITS) | space.bits();
        // Set index: the line index mixed with the level, so the lines of
        // different levels covering the same addresses spread over the sets.
        (idx ^ ((level as u64) << 7), tag)
    }

    /// A walk to a leaf at root-first level `leaf` that made `refs`
    /// references (the levels `leaf + 1 - refs ..= leaf`, those below the
    /// deepest page-walk-cache hit): touch each line, root first, and return
    /// how many missed.
    #[inline]
    pub fn walk(&mut self, space: Space, va: u64, leaf: usize, refs: u32) -> u32 {
        let mut misses = 0;
        for level in (leaf + 1 - refs as usize)..=leaf {
            let (index, tag) = self.line(space, va, level);
            misses += !self.lines.lookup_or_insert(index, tag) as u32;
        }
        misses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MachineConfig;

    #[test]
    fn hand_worked_lines() {
        let cfg = MachineConfig::preset("haswell-pcc").unwrap();
        let g = Geometry::new(&cfg).unwrap();
        let mut c = PtCache::new(&g, 1024);
        let p0 = Space::native(0);
        // A full 4KB walk: PML4, PDPT, PD, PT lines all cold.
        assert_eq!(c.walk(p0, 0x4000_0000, 3, 4), 4);
        // The next page: same four lines (8 PTEs = 32 KiB per PT line).
        assert_eq!(c.walk(p0, 0x4000_1000, 3, 4), 0);
        // 32 KiB on: a new PT line, the PD line (16 MiB) is shared.
        assert_eq!(c.walk(p0, 0x4000_8000, 3, 2), 1);
        // Another pid has its own page tables.
        assert_eq!(c.walk(Space::native(1), 0x4000_0000, 3, 1), 1);
    }
}
