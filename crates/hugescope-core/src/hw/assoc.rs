//! A set-associative array of 64-bit tags with true-LRU replacement.
//!
//! TLBs and page-walk caches are the same structure with different tags, so both
//! use this one. It is the hot path of the simulator: flat arrays, no hashing,
//! no allocation after construction. Each entry is a tag plus an LRU stamp; the
//! victim of a set is an empty way if any, else the way with the oldest stamp.

/// Tag value of an empty way. Real tags never reach it (they are built from
/// 48-bit addresses shifted right and small ids; see `tlb.rs`).
pub const EMPTY: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub struct SetAssoc {
    tags: Vec<u64>,
    stamps: Vec<u64>,
    ways: usize,
    sets: usize,
    /// `sets - 1` when `sets` is a power of two, so indexing is a mask; otherwise
    /// indexing falls back to a modulo (e.g. the PCC artifact's 170-set L2).
    mask: Option<u64>,
    clock: u64,
    valid: usize,
}

impl SetAssoc {
    /// `entries` total entries in sets of `ways` (0 or `entries` means fully
    /// associative). `entries` must be a multiple of `ways`.
    pub fn new(entries: usize, ways: usize) -> Self {
        let ways = if ways == 0 || ways > entries { entries.max(1) } else { ways };
        let sets = (entries / ways).max(1);
        let n = sets * ways;
        SetAssoc {
            tags: vec![EMPTY; n],
            stamps: vec![0; n],
            ways,
            sets,
            mask: sets.is_power_of_two().then(|| sets as u64 - 1),
            clock: 0,
            valid: 0,
        }
    }

    pub fn entries(&self) -> usize {
        self.sets * self.ways
    }
    pub fn ways(&self) -> usize {
        self.ways
    }
    pub fn sets(&self) -> usize {
        self.sets
    }
    /// Number of valid entries.
    pub fn occupancy(&self) -> usize {
        self.valid
    }

    #[inline(always)]
    fn set_of(&self, index: u64) -> usize {
        let s = match self.mask {
            Some(m) => index & m,
            None => index % self.sets as u64,
        };
        s as usize * self.ways
    }

    /// Look `tag` up in the set chosen by `index`; on a hit, refresh its LRU stamp.
    #[inline(always)]
    pub fn lookup(&mut self, index: u64, tag: u64) -> bool {
        let base = self.set_of(index);
        let ways = &self.tags[base..base + self.ways];
        for (w, &t) in ways.iter().enumerate() {
            if t == tag {
                self.clock += 1;
                self.stamps[base + w] = self.clock;
                return true;
            }
        }
        false
    }

    /// Whether `tag` is present, without touching replacement state.
    pub fn contains(&self, index: u64, tag: u64) -> bool {
        let base = self.set_of(index);
        self.tags[base..base + self.ways].contains(&tag)
    }

    /// Insert `tag` (known to be absent) into its set, evicting the LRU way.
    /// Returns the evicted tag, if a valid one was replaced.
    #[inline]
    pub fn insert(&mut self, index: u64, tag: u64) -> Option<u64> {
        debug_assert_ne!(tag, EMPTY);
        let base = self.set_of(index);
        let mut victim = base;
        let mut oldest = u64::MAX;
        for w in base..base + self.ways {
            if self.tags[w] == EMPTY {
                victim = w;
                break;
            }
            if self.stamps[w] < oldest {
                oldest = self.stamps[w];
                victim = w;
            }
        }
        let old = self.tags[victim];
        self.tags[victim] = tag;
        self.clock += 1;
        self.stamps[victim] = self.clock;
        if old == EMPTY {
            self.valid += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Invalidate every entry whose tag satisfies `pred`. Returns how many.
    /// Used by shootdowns; linear in the size of the structure, which is fine
    /// because shootdowns happen at OS-event frequency, not per access.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(u64) -> bool) -> usize {
        let mut n = 0;
        for t in self.tags.iter_mut() {
            if *t != EMPTY && pred(*t) {
                *t = EMPTY;
                n += 1;
            }
        }
        self.valid -= n;
        n
    }

    pub fn flush(&mut self) {
        self.tags.fill(EMPTY);
        self.valid = 0;
    }

    /// Iterate over valid tags (for tests and invariant checks).
    pub fn tags(&self) -> impl Iterator<Item = u64> + '_ {
        self.tags.iter().copied().filter(|&t| t != EMPTY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_within_a_set() {
        // 2 sets x 2 ways; indices 0,2,4 map to set 0.
        let mut c = SetAssoc::new(4, 2);
        assert_eq!(c.sets(), 2);
        assert!(c.insert(0, 10).is_none());
        assert!(c.insert(2, 12).is_none());
        assert!(c.lookup(0, 10)); // 10 becomes MRU, 12 is LRU
        assert_eq!(c.insert(4, 14), Some(12));
        assert!(c.contains(0, 10) && c.contains(4, 14) && !c.contains(2, 12));
        // the other set is untouched
        assert!(c.insert(1, 11).is_none());
        assert_eq!(c.occupancy(), 3);
    }

    #[test]
    fn fully_associative_and_non_power_of_two_sets() {
        let mut fa = SetAssoc::new(3, 0);
        assert_eq!((fa.sets(), fa.ways()), (1, 3));
        for t in 0..3 {
            fa.insert(t * 7, t);
        }
        assert_eq!(fa.insert(99, 3), Some(0));
        let mut odd = SetAssoc::new(1020, 6); // 170 sets, modulo indexing
        assert_eq!(odd.sets(), 170);
        odd.insert(171, 5);
        assert!(odd.contains(1, 5));
    }

    #[test]
    fn invalidate_and_flush() {
        let mut c = SetAssoc::new(8, 4);
        for t in 0..8 {
            c.insert(t, t);
        }
        assert_eq!(c.invalidate_where(|t| t % 2 == 0), 4);
        assert_eq!(c.occupancy(), 4);
        assert!(c.tags().all(|t| t % 2 == 1));
        c.flush();
        assert_eq!(c.occupancy(), 0);
    }
}
