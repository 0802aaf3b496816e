//! Allocation inside a physical range: the frames of one memory tier
//! (`os/tier.rs`). Tiered memory is one node split by frame number (fast
//! frames first, FHPM §6.1: "the fast tier is allocated first"), so "a frame
//! of the slow tier" is "a frame in [fast_frames, total)".
//!
//! Best fit by order, lowest address first, as `alloc` is, restricted to the
//! range; a free block straddling the range's low end gives its first aligned
//! part inside the range.

use super::{Mobility, Pfn, PhysMem};

impl PhysMem {
    /// Allocate a naturally aligned block of `2^order` frames lying wholly in
    /// `[lo, hi)`. `None` when the range holds no free block large enough.
    pub fn alloc_in(&mut self, order: u32, lo: Pfn, hi: Pfn, mobility: Mobility, owner: u64) -> Option<Pfn> {
        let at = self.find_free_in(order, lo, hi)?;
        self.alloc_at(at, order, mobility, owner)
    }

    /// Where `alloc_in` would allocate: the first frame of a free aligned
    /// block of `2^order` frames wholly in `[lo, hi)`, best fit by order.
    pub fn find_free_in(&self, order: u32, lo: Pfn, hi: Pfn) -> Option<Pfn> {
        if order > self.max_order || lo >= hi.min(self.total) {
            return None;
        }
        let hi = hi.min(self.total);
        let need = 1u64 << order;
        for k in order..=self.max_order {
            // The free block of order k holding `lo`, if any: its aligned
            // part at or after `lo`.
            let straddle = lo >> k;
            if lo & ((1 << k) - 1) != 0 && self.lists[k as usize].contains(straddle as usize) {
                let at = lo.div_ceil(need) * need;
                if at + need <= ((straddle + 1) << k).min(hi) {
                    return Some(at);
                }
            }
            let Some(i) = self.lists[k as usize].next_from(lo.div_ceil(1 << k) as usize) else { continue };
            let p = (i as u64) << k;
            if p + need <= hi {
                return Some(p);
            }
        }
        None
    }

    /// Allocate below frame `fast` first (the fast tier), then anywhere; 0:
    /// no preference. Set once, before anything is allocated.
    pub fn prefer_below(&mut self, fast: Pfn) {
        self.prefer_below = fast.min(self.total);
    }

    /// Free frames in `[lo, hi)` (a tier's free memory).
    pub fn free_frames_in(&self, lo: Pfn, hi: Pfn) -> u64 {
        let hi = hi.min(self.total);
        let mut n = 0;
        for k in 0..=self.max_order {
            let from = lo.div_ceil(1 << k) as usize;
            let mut at = from;
            while let Some(i) = self.lists[k as usize].next_from(at) {
                let p = (i as u64) << k;
                if p >= hi {
                    break;
                }
                n += (p + (1 << k)).min(hi) - p;
                at = i + 1;
            }
            // A block straddling `lo` counts its part at or above it.
            let s = lo >> k;
            if lo & ((1 << k) - 1) != 0 && self.lists[k as usize].contains(s as usize) {
                n += ((s + 1) << k).min(hi).saturating_sub(lo);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_only_inside_the_range_best_fit_lowest_first() {
        // 16 frames, blocks up to order 4: one free block of 16.
        let mut pm = PhysMem::new(16 * 4096, 4096, 4).unwrap();
        // Range [4, 12): the order-4 block straddles lo = 4; its first aligned
        // order-1 part at or after 4 is frame 4.
        assert_eq!(pm.alloc_in(1, 4, 12, Mobility::Movable, 7), Some(4));
        assert_eq!(pm.free_frames_in(4, 12), 6);
        assert_eq!(pm.free_frames_in(0, 16), 14);
        // An order-3 block cannot fit in [4, 12) any more (8..12 is 4 frames).
        assert_eq!(pm.alloc_in(3, 4, 12, Mobility::Movable, 7), None);
        // An order-2 block: [8, 12).
        assert_eq!(pm.alloc_in(2, 4, 12, Mobility::Movable, 7), Some(8));
        assert_eq!(pm.alloc_in(0, 4, 12, Mobility::Movable, 7), Some(6));
        assert_eq!(pm.alloc_in(0, 4, 12, Mobility::Movable, 7), Some(7));
        assert_eq!(pm.alloc_in(0, 4, 12, Mobility::Movable, 7), None);
        assert_eq!(pm.free_frames_in(4, 12), 0);
        assert_eq!(pm.free_frames_in(0, 16), 8);
        pm.check_invariants().unwrap();
    }

    #[test]
    fn compaction_inside_a_range_keeps_its_pages_inside() {
        // 4 pageblocks of 512 frames: pb0 holds frame 0, pb1 frame 517, pb2 a
        // whole order-9 block, pb3 an order-8 block (256 frames). No free
        // order-9 block anywhere.
        let fresh = || {
            let mut pm = PhysMem::new(8 << 20, 4096, 9).unwrap();
            assert_eq!(pm.alloc_at(0, 0, Mobility::Movable, 1), Some(0));
            assert_eq!(pm.alloc_at(517, 0, Mobility::Movable, 2), Some(517));
            assert_eq!(pm.alloc_at(1024, 9, Mobility::Movable, 3), Some(1024));
            assert_eq!(pm.alloc_at(1536, 8, Mobility::Movable, 4), Some(1536));
            assert_eq!(pm.find_free_in(9, 0, 2048), None);
            pm
        };
        // The whole node: frame 0 (the fewest-used candidate) goes to the most
        // used pageblock with room, pb3, outside [0, 1024).
        let mut all = fresh();
        let mut moves = Vec::new();
        assert!(all.compact(9, u64::MAX, &mut |m| moves.push(m)).success);
        assert_eq!(moves.len(), 1);
        assert!(moves[0].from == 0 && (1536..2048).contains(&moves[0].to), "{moves:?}");
        // Restricted to [0, 1024) (a fast tier of two pageblocks): it lands in
        // pb1, and pb0 is the free order-9 block the range now holds.
        let mut tier = fresh();
        moves.clear();
        let r = tier.compact_in(9, 0..1024, u64::MAX, &mut |m| moves.push(m));
        assert!(r.success && r.migrated_pages == 1);
        assert_eq!(moves.len(), 1);
        assert!(moves[0].from == 0 && (512..1024).contains(&moves[0].to), "{moves:?}");
        assert_eq!(tier.find_free_in(9, 0, 1024), Some(0));
        assert_eq!(tier.free_frames_in(1024, 2048), 256);
        tier.check_invariants().unwrap();
    }
}
