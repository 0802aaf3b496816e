//! The pages an MMU knows to sit at the front of their L1 TLB set.
//!
//! An L1 hit on the most recently used (MRU) way of its set changes no
//! replacement state, so when the model knows an access's page is some set's
//! live MRU entry it can count the hit without probing (`Mmu::lookup`). The
//! single `last` page of `Mmu` catches a run of accesses to one page; this
//! keeps the two most recent distinct pages, which also catches the commonest
//! pattern of graph kernels: an edge-list stream interleaved with a random
//! array (bfs's `neighbors` and `parent`, pagerank's `neighbors` and
//! `contrib`), where every other access returns to the page before last.
//!
//! Exact, not an approximation: a page stays here only while no change to
//! its set could have moved it off the front. Every L1 change goes through
//! `Mmu`, which reports it: a hit or live fill makes that page its set's
//! front (`touched`, dropping any other page known in the same set); a dead
//! duplicate fill or a retag forgets the structure's pages (`forget_tlb`); a
//! shootdown, a flush or a VM switch forgets all (`clear`). Lookup misses
//! change nothing.

const NO_PAGE: u64 = u64::MAX;

/// One page at the front of its set: (vpn of its size, pid, size index, L1
/// structure, set index in that structure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Front {
    pub vpn: u64,
    pub pid: u16,
    pub size: u8,
    pub tlb: u8,
    pub set: u32,
}

const NONE: Front = Front { vpn: NO_PAGE, pid: 0, size: 0, tlb: 0, set: 0 };

/// The two most recent distinct front pages: slot `newest` is the more
/// recent (an index, so a hit on the other page is one store, not a swap).
#[derive(Clone, Debug)]
pub struct RecentFronts {
    f: [Front; 2],
    newest: usize,
}

impl Default for RecentFronts {
    fn default() -> Self {
        RecentFronts { f: [NONE; 2], newest: 0 }
    }
}

impl RecentFronts {
    /// The known front page `addr` of `pid` falls in, if any, as (vpn,
    /// size); `shifts[s]` is page size `s`'s shift. It becomes the most
    /// recent. A hit here is an L1 hit that leaves the TLB unchanged.
    #[inline(always)]
    pub fn hit(&mut self, addr: u64, pid: u16, shifts: &[u32; super::geometry::MAX_SIZES]) -> Option<(u64, usize)> {
        // The older page first: the newest is usually `Mmu::last`, which the
        // caller has already checked. NO_PAGE never equals a shifted address.
        let older = 1 - self.newest;
        let o = self.f[older];
        if addr >> shifts[o.size as usize] == o.vpn && pid == o.pid {
            self.newest = older;
            return Some((o.vpn, o.size as usize));
        }
        let n = self.f[self.newest];
        if addr >> shifts[n.size as usize] == n.vpn && pid == n.pid {
            return Some((n.vpn, n.size as usize));
        }
        None
    }

    /// Page `e` became its set's live MRU entry: any other page known in
    /// that set no longer is.
    #[inline(always)]
    pub fn touched(&mut self, e: Front) {
        let same_set = |x: &Front| x.tlb == e.tlb && x.set == e.set;
        let (n, o) = (self.newest, 1 - self.newest);
        if self.f[n].vpn != NO_PAGE && !same_set(&self.f[n]) {
            // Keep the newest as the older page.
            self.f[o] = e;
            self.newest = o;
        } else {
            // The newest is gone from its front (or was `e`'s set): keep the
            // older one if it still leads its set.
            self.f[n] = e;
            if same_set(&self.f[o]) {
                self.f[o] = NONE;
            }
        }
    }

    /// L1 structure `tlb` changed other than by a live fill or hit: forget
    /// its pages.
    #[inline(always)]
    pub fn forget_tlb(&mut self, tlb: u8) {
        for x in self.f.iter_mut() {
            if x.tlb == tlb {
                *x = NONE;
            }
        }
    }

    /// Forget every page (shootdown, flush, VM switch).
    #[inline(always)]
    pub fn clear(&mut self) {
        self.f = [NONE; 2];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIFTS: [u32; 8] = [12, 21, 30, 0, 0, 0, 0, 0];

    fn front(vpn: u64, size: u8, tlb: u8, set: u32) -> Front {
        Front { vpn, pid: 1, size, tlb, set }
    }

    #[test]
    fn keeps_two_pages_of_different_sets_and_swaps_on_a_hit_of_the_older() {
        let mut r = RecentFronts::default();
        assert_eq!(r.hit(0x1000, 1, &SHIFTS), None, "empty: NO_PAGE matches nothing, not even vpn 0 pages");
        assert_eq!(r.hit(0, 0, &SHIFTS), None);
        r.touched(front(1, 0, 0, 1));
        r.touched(front(2, 0, 0, 2));
        assert_eq!(r.hit(0x1fff, 1, &SHIFTS), Some((1, 0)), "the page before last, other set: still at its front");
        assert_eq!(r.hit(0x1fff, 2, &SHIFTS), None, "another pid's page");
        // After the hit on page 1 it is the most recent: a third page in
        // page 2's set drops page 2, keeps page 1.
        r.touched(front(3, 0, 0, 2));
        assert_eq!(r.hit(0x1000, 1, &SHIFTS), Some((1, 0)));
        assert_eq!(r.hit(0x2000, 1, &SHIFTS), None, "page 2 left the front of set 2");
        assert_eq!(r.hit(0x3000, 1, &SHIFTS), Some((3, 0)));
    }

    #[test]
    fn a_fill_in_the_same_set_or_structure_change_forgets() {
        let mut r = RecentFronts::default();
        r.touched(front(1, 0, 0, 5));
        r.touched(front(9, 0, 0, 5));
        assert_eq!(r.hit(0x1000, 1, &SHIFTS), None, "same structure, same set: no longer its front");
        r.touched(front(1, 1, 1, 5));
        assert_eq!(r.hit(0x20_0000, 1, &SHIFTS), Some((1, 1)), "a 2MB page in another structure's set 5");
        assert_eq!(r.hit(0x9000, 1, &SHIFTS), Some((9, 0)), "set 5 of structure 0 is untouched by structure 1");
        r.forget_tlb(0);
        assert_eq!(r.hit(0x9000, 1, &SHIFTS), None);
        assert_eq!(r.hit(0x20_0000, 1, &SHIFTS), Some((1, 1)), "structure 1 kept");
        r.clear();
        assert_eq!(r.hit(0x20_0000, 1, &SHIFTS), None);
    }
}
