//! Free list of one buddy order, kept as a hierarchical bitset.
//!
//! Why a bitset and not a `BTreeSet` or an intrusive list: the free list of
//! order `k` has one slot per naturally aligned `2^k`-frame block, so all
//! orders together need about two bits per frame whatever the fragmentation,
//! and "lowest address first" (the determinism rule of docs/architecture.md) is a handful
//! of word scans.
//! Level 0 holds one bit per slot; each higher level holds one bit per non-zero
//! word of the level below, up to a single top word, so every search is
//! O(log64 n).

#[derive(Clone)]
pub(crate) struct FreeSet {
    /// `levels[0]` are the slot bits; `levels[i + 1]` summarises `levels[i]`.
    levels: Vec<Vec<u64>>,
    len: u64,
    cap: usize,
    /// No slot below it is present: searches start here. Populating memory
    /// allocates frame after frame, always the lowest free block, and each
    /// search from slot 0 climbed the levels from the bottom of memory past
    /// every allocated word; from here it is a word or two. A cache, never
    /// state: two sets with the same slots are equal whatever their hints.
    low: usize,
}

// By hand, without the hint: the shared pass compares kernel states as text
// (`sweep::state_text`), and equal free lists may carry different hints.
impl std::fmt::Debug for FreeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreeSet").field("levels", &self.levels).field("len", &self.len).field("cap", &self.cap).finish()
    }
}

impl FreeSet {
    /// A set able to hold slots `0..cap`.
    pub(crate) fn new(cap: usize) -> FreeSet {
        let mut levels = Vec::new();
        let mut n = cap.max(1);
        loop {
            let words = n.div_ceil(64);
            levels.push(vec![0u64; words]);
            if words == 1 {
                break;
            }
            n = words;
        }
        FreeSet {
            levels,
            len: 0,
            cap,
            low: 0,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn contains(&self, i: usize) -> bool {
        i < self.cap && (self.levels[0][i / 64] >> (i % 64)) & 1 == 1
    }

    /// Insert slot `i`; false if it was already present.
    pub(crate) fn insert(&mut self, i: usize) -> bool {
        debug_assert!(i < self.cap, "slot {i} beyond capacity {}", self.cap);
        if self.contains(i) {
            return false;
        }
        let mut idx = i;
        for level in self.levels.iter_mut() {
            let w = &mut level[idx / 64];
            let was = *w;
            *w = was | (1u64 << (idx % 64));
            // The summary bit above is already set when the word was non-empty.
            if was != 0 {
                break;
            }
            idx /= 64;
        }
        self.low = self.low.min(i);
        self.len += 1;
        true
    }

    /// Remove slot `i`; false if it was absent.
    pub(crate) fn remove(&mut self, i: usize) -> bool {
        if !self.contains(i) {
            return false;
        }
        let mut idx = i;
        for level in self.levels.iter_mut() {
            let w = &mut level[idx / 64];
            *w &= !(1u64 << (idx % 64));
            // Only an emptied word clears its summary bit.
            if *w != 0 {
                break;
            }
            idx /= 64;
        }
        self.len -= 1;
        true
    }

    /// Smallest slot `>= from`.
    pub(crate) fn next_from(&self, from: usize) -> Option<usize> {
        self.next_at(0, from.max(self.low))
    }

    /// Smallest slot, remembered as the start of the next search (a removal
    /// leaves it a lower bound; an insertion below it lowers it).
    pub(crate) fn first(&mut self) -> Option<usize> {
        let f = self.next_from(0);
        self.low = f.unwrap_or(self.cap);
        f
    }

    fn next_at(&self, lvl: usize, from: usize) -> Option<usize> {
        let words = &self.levels[lvl];
        let w = from / 64;
        if w >= words.len() {
            return None;
        }
        let m = words[w] & (!0u64 << (from % 64));
        if m != 0 {
            return Some(w * 64 + m.trailing_zeros() as usize);
        }
        if lvl + 1 == self.levels.len() {
            return None;
        }
        let nw = self.next_at(lvl + 1, w + 1)?;
        Some(nw * 64 + words[nw].trailing_zeros() as usize)
    }

    /// All slots in increasing order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let mut next = self.next_from(0);
        std::iter::from_fn(move || {
            let cur = next?;
            next = self.next_from(cur + 1);
            Some(cur)
        })
    }

    /// Heap bytes used (for the memory-footprint claim in the module docs).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.len() * 8).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::FreeSet;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn search_across_levels() {
        // 300_000 slots need four levels (4688, 74, 2 and 1 words).
        let mut s = FreeSet::new(300_000);
        assert_eq!(s.levels.len(), 4);
        assert_eq!(s.next_from(0), None);
        s.insert(5);
        s.insert(299_999);
        s.insert(131_072);
        assert_eq!(s.next_from(0), Some(5));
        assert_eq!(s.next_from(6), Some(131_072));
        assert_eq!(s.next_from(131_073), Some(299_999));
        assert!(s.remove(131_072));
        assert!(!s.remove(131_072));
        assert_eq!(s.next_from(6), Some(299_999));
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![5, 299_999]);
    }

    proptest! {
        #[test]
        fn matches_btreeset(cap in 1usize..10_000, ops in proptest::collection::vec((0u8..3, any::<usize>(), any::<usize>()), 1..300)) {
            let mut s = FreeSet::new(cap);
            let mut m = BTreeSet::new();
            for (op, a, q) in ops {
                let i = a % cap;
                // `first` moves the search hint; inserts below it and
                // removals of the first slot must leave searches exact.
                match op {
                    0 => prop_assert_eq!(s.insert(i), m.insert(i)),
                    1 => prop_assert_eq!(s.remove(i), m.remove(&i)),
                    _ => prop_assert_eq!(s.first(), m.first().copied()),
                }
                let q = q % (cap + 1);
                prop_assert_eq!(s.next_from(q), m.range(q..).next().copied());
                prop_assert_eq!(s.len(), m.len() as u64);
            }
            prop_assert_eq!(s.iter().collect::<Vec<_>>(), m.into_iter().collect::<Vec<_>>());
        }
    }
}
