//! Page-walk caches (Intel's paging-structure caches): per non-leaf level, a
//! small cache of upper-level entries tagged by the VA bits above that level.
//! A hit at level i means the walker already knows where the table of level
//! i+1 is, so it only references the levels below. The deepest hit wins.

use super::assoc::SetAssoc;
use super::geometry::Geometry;
use super::space::{Space, SPACE_BITS};
use crate::config::CacheConfig;
use std::collections::BTreeMap;

#[derive(Debug, PartialEq, Eq)]
pub struct Pwc {
    /// Indexed by root-first level index; None where the level has no cache.
    levels: Vec<Option<SetAssoc>>,
    shifts: Vec<u32>,
}

/// What a walk needed: page-table references and the level where a PWC hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkCost {
    pub refs: u32,
    /// Root-first index of the level whose PWC hit, if any.
    pub pwc_hit_level: Option<usize>,
    /// References that missed the page-table line cache (`hw::ptcache`);
    /// always 0 when that model is off.
    pub mem_refs: u32,
}

/// The VA bits above the level's shift, then the space (as in `tlb.rs`): at
/// most 57 - 13 = 44 bits of address, 60 in all, never `assoc::EMPTY`.
#[inline(always)]
fn pwc_tag(va: u64, shift: u32, space: Space) -> u64 {
    ((va >> shift) << SPACE_BITS) | space.bits()
}

// `clone_from` reuses the caches' arrays (`SetAssoc`'s clone).
impl Clone for Pwc {
    fn clone(&self) -> Self {
        Pwc { levels: self.levels.clone(), shifts: self.shifts.clone() }
    }

    fn clone_from(&mut self, src: &Self) {
        self.levels.clone_from(&src.levels);
        self.shifts.clone_from(&src.shifts);
    }
}

impl Pwc {
    pub fn new(geo: &Geometry, cfg: &BTreeMap<String, CacheConfig>) -> Self {
        let n = geo.level_shifts.len();
        let levels = (0..n)
            .map(|i| cfg.get(&format!("l{}", n - i)).map(|c| SetAssoc::new(c.entries, c.ways)))
            .collect();
        Pwc { levels, shifts: geo.level_shifts.clone() }
    }

    /// Walk to a leaf at root-first level `leaf`: consult the caches of the
    /// levels above it, deepest first, until one hits; count the references.
    /// Every cache that missed is filled with the entry the walk read at its
    /// level. The fill happens as each cache is probed (one pass over its set):
    /// the levels' caches are separate structures, so this leaves the same
    /// state as filling them after the walk.
    #[inline]
    pub fn walk(&mut self, va: u64, space: Space, leaf: usize) -> WalkCost {
        let mut hit = None;
        for i in (0..leaf).rev() {
            if let Some(c) = self.levels[i].as_mut() {
                let s = self.shifts[i];
                if c.lookup_or_insert(va >> s, pwc_tag(va, s, space)) {
                    hit = Some(i);
                    break;
                }
            }
        }
        let first = hit.map_or(0, |i| i + 1);
        WalkCost { refs: (leaf + 1 - first) as u32, pwc_hit_level: hit, mem_refs: 0 }
    }

    /// Invalidate cached entries of `space` covering any part of [start, end).
    /// Conservative like INVLPG, which drops paging-structure-cache entries
    /// for the address at every level.
    pub fn shootdown(&mut self, space: Space, start: u64, end: u64) -> usize {
        let mut n = 0;
        for (i, c) in self.levels.iter_mut().enumerate() {
            if let Some(c) = c {
                let s = self.shifts[i];
                n += c.invalidate_where(|t| {
                    let lo = (t >> SPACE_BITS) << s;
                    let hi = lo + (1u64 << s);
                    Space::from_bits(t) == space && lo < end && start < hi
                });
            }
        }
        n
    }

    /// Invalidate every cached entry of VM `vm` (all its address spaces).
    pub fn flush_vm(&mut self, vm: u8) -> usize {
        self.levels.iter_mut().flatten().map(|c| c.invalidate_where(|t| Space::from_bits(t).vm == vm)).sum()
    }

    pub fn flush(&mut self) {
        for c in self.levels.iter_mut().flatten() {
            c.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MachineConfig;

    #[test]
    fn hand_worked_walks() {
        let cfg = MachineConfig::preset("haswell-pcc").unwrap();
        let g = Geometry::new(&cfg).unwrap();
        let mut p = Pwc::new(&g, &cfg.pwc);
        let (p0, p1, vm1) = (Space::native(0), Space::native(1), Space::new(1, 0));
        // Cold: 4 references for a 4KB leaf, nothing cached.
        assert_eq!(p.walk(0x1234_5000, p0, 3), WalkCost { refs: 4, pwc_hit_level: None, mem_refs: 0 });
        // Same 2MB region: the PDE cache (root-first index 2) hits, 1 reference.
        assert_eq!(p.walk(0x1234_6000, p0, 3), WalkCost { refs: 1, pwc_hit_level: Some(2), mem_refs: 0 });
        // Same 1GB, other 2MB: the PDPTE cache hits, PD + PT = 2 references.
        assert_eq!(p.walk(0x1260_0000, p0, 3), WalkCost { refs: 2, pwc_hit_level: Some(1), mem_refs: 0 });
        // A 2MB leaf in the same 1GB: PDPTE hit, 1 reference (the PDE itself).
        assert_eq!(p.walk(0x1280_0000, p0, 2), WalkCost { refs: 1, pwc_hit_level: Some(1), mem_refs: 0 });
        // Another pid shares nothing, nor does the same pid in another VM.
        assert_eq!(p.walk(0x1234_5000, p1, 3).refs, 4);
        assert_eq!(p.walk(0x1234_5000, vm1, 3).refs, 4);
        // Shootdown of the first 2MB region for pid 0 drops its PDE-cache entry
        // (and, conservatively, the covering PDPTE and PML4E entries).
        assert!(p.shootdown(p0, 0x1220_0000, 0x1240_0000) >= 1);
        assert_eq!(p.walk(0x1234_5000, p0, 3).refs, 4);
        // The other VM's entries survived it.
        assert_eq!(p.walk(0x1234_5000, vm1, 3).refs, 1);
    }
}
