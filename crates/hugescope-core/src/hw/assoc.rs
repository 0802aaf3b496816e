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
    /// `sets - 1` when `sets` is a power of two, so indexing is a mask;
    /// otherwise 0 and `modulo` holds `sets` (e.g. the PCC artifact's 128-set
    /// L2 is a mask; a 170-set one is a modulo).
    mask: u64,
    modulo: u64,
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
            mask: if sets.is_power_of_two() { sets as u64 - 1 } else { 0 },
            modulo: if sets.is_power_of_two() { 0 } else { sets as u64 },
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
        let s = if self.modulo == 0 { index & self.mask } else { index % self.modulo };
        s as usize * self.ways
    }

    /// Look `tag` up in the set chosen by `index`; on a hit, refresh its LRU stamp.
    ///
    /// The scan has no early exit: with 4-16 ways a branch-free pass (compiled
    /// to compares and conditional moves) is faster than a loop whose exit
    /// depends on random data and mispredicts on every miss.
    #[inline(always)]
    pub fn lookup(&mut self, index: u64, tag: u64) -> bool {
        let base = self.set_of(index);
        let ways = &self.tags[base..base + self.ways];
        let hit = match self.ways {
            4 => find::<4>(ways, tag),
            8 => find::<8>(ways, tag),
            2 => find::<2>(ways, tag),
            6 => find::<6>(ways, tag),
            16 => find::<16>(ways, tag),
            _ => find_dyn(ways, tag),
        };
        if hit != usize::MAX {
            self.clock += 1;
            self.stamps[base + hit] = self.clock;
            return true;
        }
        false
    }

    /// Whether `tag` is present, without touching replacement state.
    pub fn contains(&self, index: u64, tag: u64) -> bool {
        let base = self.set_of(index);
        self.tags[base..base + self.ways].contains(&tag)
    }

    /// Insert `tag` (known to be absent) into its set, evicting the LRU way.
    /// Empty ways carry stamp 0 and valid ones a stamp of at least 1, so the
    /// victim is simply the way with the smallest stamp: an empty one if any.
    /// Returns the evicted tag, if a valid one was replaced.
    #[inline(always)]
    pub fn insert(&mut self, index: u64, tag: u64) -> Option<u64> {
        debug_assert_ne!(tag, EMPTY);
        let base = self.set_of(index);
        let stamps = &self.stamps[base..base + self.ways];
        let victim = match self.ways {
            4 => argmin::<4>(stamps),
            8 => argmin::<8>(stamps),
            2 => argmin::<2>(stamps),
            6 => argmin::<6>(stamps),
            16 => argmin::<16>(stamps),
            _ => argmin_dyn(stamps),
        };
        let slot = base + victim;
        let old = self.tags[slot];
        self.tags[slot] = tag;
        self.clock += 1;
        self.stamps[slot] = self.clock;
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
        for (t, s) in self.tags.iter_mut().zip(self.stamps.iter_mut()) {
            if *t != EMPTY && pred(*t) {
                *t = EMPTY;
                *s = 0;
                n += 1;
            }
        }
        self.valid -= n;
        n
    }

    pub fn flush(&mut self) {
        self.tags.fill(EMPTY);
        self.stamps.fill(0);
        self.valid = 0;
    }

    /// Iterate over valid tags (for tests and invariant checks).
    pub fn tags(&self) -> impl Iterator<Item = u64> + '_ {
        self.tags.iter().copied().filter(|&t| t != EMPTY)
    }
}

// Fixed-width scans for the associativities real TLBs use: the compiler
// unrolls them into straight-line compares and conditional moves.

#[inline(always)]
fn find<const W: usize>(ways: &[u64], tag: u64) -> usize {
    let ways: &[u64; W] = ways.try_into().expect("set width");
    let mut hit = usize::MAX;
    for w in 0..W {
        if ways[w] == tag {
            hit = w;
        }
    }
    hit
}

#[inline(always)]
fn find_dyn(ways: &[u64], tag: u64) -> usize {
    ways.iter().position(|&t| t == tag).unwrap_or(usize::MAX)
}

#[inline(always)]
fn argmin<const W: usize>(stamps: &[u64]) -> usize {
    let s: &[u64; W] = stamps.try_into().expect("set width");
    let (mut victim, mut oldest) = (0, s[0]);
    for w in 1..W {
        if s[w] < oldest {
            oldest = s[w];
            victim = w;
        }
    }
    victim
}

#[inline(always)]
fn argmin_dyn(stamps: &[u64]) -> usize {
    let (mut victim, mut oldest) = (0, stamps[0]);
    for (w, &s) in stamps.iter().enumerate().skip(1) {
        if s < oldest {
            oldest = s;
            victim = w;
        }
    }
    victim
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
