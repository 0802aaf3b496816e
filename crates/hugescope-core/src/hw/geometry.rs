//! Derived, immutable facts about a machine's address translation: page sizes
//! as shifts, which radix level each size is a leaf at, and how structures are
//! indexed. Computed once from a `MachineConfig`, shared by every cpu's MMU.

use crate::config::{Coalesce, MachineConfig};
use crate::Result;

/// Most page sizes a machine may have (per-size arrays of the MMU, the
/// walker and the counters are this long; a size index fits in 3 tag bits).
pub const MAX_SIZES: usize = 8;

#[derive(Clone, Debug)]
pub struct Geometry {
    /// Page sizes in bytes, ascending; index 0 is the base page.
    pub sizes: Vec<u64>,
    /// log2 of each page size.
    pub shifts: Vec<u32>,
    /// Radix levels, root first, as the lowest VA bit each indexes.
    pub level_shifts: Vec<u32>,
    /// For each page size, the index (root = 0) of the level holding its leaf.
    pub leaf_level: Vec<usize>,
    /// Bit `s` set: size `s` is an mTHP folio size (`MachineConfig::folio_sizes`),
    /// a run of base PTEs that is no TLB size by itself.
    pub folio: u8,
    /// TLB coalescing of base-PTE-level leaves (`os/coalesce.rs` applies it).
    pub coalesce: Coalesce,
    /// Size index one coalesced TLB entry covers; 0 when `coalesce` is none.
    pub coalesce_size: usize,
}

impl Geometry {
    pub fn new(cfg: &MachineConfig) -> Result<Geometry> {
        cfg.validate()?;
        let sizes = cfg.page_size_bytes()?;
        let shifts: Vec<u32> = sizes.iter().map(|s| s.trailing_zeros()).collect();
        let level_shifts = cfg.walker.level_shifts.clone();
        // A size is a leaf at the deepest level whose shift does not exceed its
        // own: 2MB (shift 21) is a PD leaf on x86; Alpha's 64KB (shift 16) sits
        // at the 8KB level (shift 13) as replicated PTEs with a granularity hint.
        let leaf_level = shifts
            .iter()
            .map(|&s| {
                level_shifts
                    .iter()
                    .position(|&l| l <= s)
                    .expect("validate() guarantees the base page matches the lowest level")
            })
            .collect();
        let index = |b: u64| sizes.iter().position(|&x| x == b).expect("validate() checks the size is a page size");
        let folio = cfg.folio_size_bytes()?.into_iter().fold(0u8, |m, b| m | 1 << index(b));
        let coalesce_size = cfg.coalesce_bytes()?.map_or(0, index);
        Ok(Geometry { sizes, shifts, level_shifts, leaf_level, folio, coalesce: cfg.coalesce, coalesce_size })
    }

    /// Whether size index `s` is an mTHP folio size.
    #[inline(always)]
    pub fn is_folio(&self, s: usize) -> bool {
        self.folio & (1 << s) != 0
    }

    /// Whether a leaf of size `s` needs `os/coalesce.rs` to say what its TLB
    /// entry covers: base pages and folios when a coalescing mode is on, and
    /// folios always (without coalescing they fill base-page entries). A
    /// machine without folio sizes and without coalescing never does, so its
    /// walks keep `tlb_size == size` at the cost of this one test.
    #[inline(always)]
    pub fn tlb_size_differs(&self, s: usize) -> bool {
        self.is_folio(s) || (s == 0 && !self.coalesce.is_none())
    }

    pub fn num_sizes(&self) -> usize {
        self.sizes.len()
    }

    /// Number of page-table references a walk to a leaf of size `s` makes with
    /// no page-walk-cache help: one per level from the root to the leaf.
    pub fn full_walk_refs(&self, s: usize) -> u32 {
        self.leaf_level[s] as u32 + 1
    }

    /// Level number in the x86 style (leaf table = 1, root = number of levels)
    /// of the level at root-first index `i`.
    pub fn level_number(&self, i: usize) -> usize {
        self.level_shifts.len() - i
    }

    /// Smallest huge page size index whose size is at least `bytes`, if any.
    pub fn size_index_of(&self, bytes: u64) -> Option<usize> {
        self.sizes.iter().position(|&b| b == bytes)
    }
}

/// The shifts of the three levels the OS model keeps state for: the base
/// page, the PMD level (the region a huge page of the usual size covers) and
/// the PUD level, from the machine's radix levels.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub base_shift: u32,
    /// PMD level (the level just above the leaf table): 21 on x86-64.
    pub region_shift: u32,
    /// PUD level: 30 on x86-64 (equal to region_shift on 2-level tables).
    pub pud_shift: u32,
}

impl Shape {
    pub fn from_levels(level_shifts: &[u32]) -> Shape {
        let n = level_shifts.len();
        let base_shift = level_shifts[n - 1];
        let region_shift = if n >= 2 { level_shifts[n - 2] } else { base_shift };
        let pud_shift = if n >= 3 { level_shifts[n - 3] } else { region_shift };
        Shape { base_shift, region_shift, pud_shift }
    }
    pub fn pages_per_region(&self) -> usize {
        1 << (self.region_shift - self.base_shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_and_alpha_leaf_levels() {
        let g = Geometry::new(&MachineConfig::preset("haswell-pcc").unwrap()).unwrap();
        assert_eq!(g.leaf_level, vec![3, 2, 1]);
        assert_eq!((g.full_walk_refs(0), g.full_walk_refs(1), g.full_walk_refs(2)), (4, 3, 2));
        assert_eq!(g.level_number(2), 2);
        let a = Geometry::new(&MachineConfig::preset("alpha-21264").unwrap()).unwrap();
        // 8k at the leaf table; 64k and 512k replicated there too; 4m (shift 22) stays at 13 since
        // the next level up indexes bit 23.
        assert_eq!(a.leaf_level, vec![2, 2, 2, 2]);
    }
}
