//! A set-associative array of 64-bit tags with true-LRU replacement.
//!
//! TLBs and page-walk caches are the same structure with different tags, so both
//! use this one. It is the hot path of the simulator: flat arrays, no hashing,
//! no allocation after construction.
//!
//! Each set keeps its tags in recency order, most recently used first, with
//! empty ways (`EMPTY`) at the end. That is true LRU without per-entry stamps:
//! a hit moves its tag to the front (nothing moves for a hit on the MRU way, the
//! common case), a fill shifts the set down by one and drops the last way, which
//! is an empty way if the set has one and the least recently used tag otherwise.
//! Which physical way holds a tag never matters to hits and misses, so the order
//! is all the state LRU needs. It replaced a stamp per way, whose fills needed a
//! min-scan over the stamps (a serial chain of compares on every TLB miss).
//!
//! Sets of 4 and 8 ways (the L1 and L2 TLBs and PDE caches of the x86
//! presets, i.e. the hot path) are stored as fixed-size arrays, so each
//! operation is one dispatch on the width and then straight-line code with no
//! bounds checks inside the set. Other widths share a generic slice version;
//! more fixed widths made the dispatch itself slower than what they saved.

/// Tag value of an empty way. Real tags never reach it (they are built from
/// 48-bit addresses shifted right and small ids; see `tlb.rs`).
pub const EMPTY: u64 = u64::MAX;

#[derive(Debug, PartialEq, Eq)]
enum Sets {
    W4(Vec<[u64; 4]>),
    W8(Vec<[u64; 8]>),
    /// Any other width (e.g. a 128-entry fully associative TLB): one flat
    /// vector of `sets * ways` tags.
    Any(Vec<u64>),
}

/// Apply `$body` to the set `$i` as a `&mut [u64; W]` (or a slice for `Any`).
macro_rules! with_set {
    ($self:ident, $i:expr, $set:ident => $body:expr) => {{
        let i = $i;
        match &mut $self.sets {
            Sets::W4(v) => { let $set = &mut v[i]; $body }
            Sets::W8(v) => { let $set = &mut v[i]; $body }
            Sets::Any(v) => {
                let w = $self.ways;
                let $set = &mut v[i * w..(i + 1) * w];
                $body
            }
        }
    }};
}

/// One set's operations, for fixed-width sets and for slices.
trait Set {
    /// Find `tag`; on a hit, move it to the front (most recently used) and
    /// return the way it was in: its LRU stack distance within the set.
    fn touch(&mut self, tag: u64) -> Option<usize>;
    /// Put `tag` at the front, shifting the others down; return the tag that
    /// fell off the end (`EMPTY` if the set had room).
    fn push_front(&mut self, tag: u64) -> u64;
    /// `touch`, and on a miss `push_front`: one pass over the set. Returns
    /// whether it hit and the tag that fell off the end (`EMPTY` if none).
    fn touch_or_push(&mut self, tag: u64) -> (bool, u64);
}

/// Fixed-width helpers: branch-free, because where a tag sits depends on
/// random data, so early exits and data-dependent branches would mispredict;
/// compares and conditional moves do not.
trait FixedSet {
    /// The way among 1.. holding `tag`, or 0 if none (way 0 is checked first
    /// by the callers, as the common MRU hit).
    fn find_after_mru(&self, tag: u64) -> usize;
    /// Shift ways [0, at) down by one and put `tag` in way 0.
    fn to_front(&mut self, at: usize, tag: u64);
}

impl<const W: usize> FixedSet for [u64; W] {
    #[inline(always)]
    fn find_after_mru(&self, tag: u64) -> usize {
        let mut hit = 0;
        for w in 1..W {
            if self[w] == tag {
                hit = w;
            }
        }
        hit
    }

    #[inline(always)]
    fn to_front(&mut self, at: usize, tag: u64) {
        // Highest way first so each reads its old neighbour.
        for w in (1..W).rev() {
            let keep = ((w > at) as u64).wrapping_neg();
            self[w] = (self[w] & keep) | (self[w - 1] & !keep);
        }
        self[0] = tag;
    }
}

impl<const W: usize> Set for [u64; W] {
    #[inline(always)]
    fn touch(&mut self, tag: u64) -> Option<usize> {
        if self[0] == tag {
            return Some(0);
        }
        let hit = self.find_after_mru(tag);
        if hit == 0 {
            return None;
        }
        self.to_front(hit, tag);
        Some(hit)
    }

    #[inline(always)]
    fn push_front(&mut self, tag: u64) -> u64 {
        let old = self[W - 1];
        // A constant-length overlapping move: a few vector loads and stores.
        self.copy_within(0..W - 1, 1);
        self[0] = tag;
        old
    }

    #[inline(always)]
    fn touch_or_push(&mut self, tag: u64) -> (bool, u64) {
        if self[0] == tag {
            return (true, EMPTY);
        }
        // A hit at way p moves ways [0, p) down; a miss moves all but the last,
        // which falls off: the same shift with p = W - 1.
        let hit = self.find_after_mru(tag);
        let (at, old) = if hit == 0 { (W - 1, self[W - 1]) } else { (hit, EMPTY) };
        self.to_front(at, tag);
        (hit != 0, old)
    }
}

impl Set for [u64] {
    #[inline]
    fn touch(&mut self, tag: u64) -> Option<usize> {
        let p = self.iter().position(|&t| t == tag)?;
        self.copy_within(0..p, 1);
        self[0] = tag;
        Some(p)
    }

    #[inline]
    fn push_front(&mut self, tag: u64) -> u64 {
        let n = self.len();
        let old = self[n - 1];
        self.copy_within(0..n - 1, 1);
        self[0] = tag;
        old
    }

    #[inline]
    fn touch_or_push(&mut self, tag: u64) -> (bool, u64) {
        if self.touch(tag).is_some() {
            (true, EMPTY)
        } else {
            (false, self.push_front(tag))
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct SetAssoc {
    sets: Sets,
    ways: usize,
    num_sets: usize,
    /// `sets - 1` when the number of sets is a power of two, so indexing is a
    /// mask; otherwise 0 and `modulo` holds the number of sets (e.g. the PCC
    /// artifact's 128-set L2 is a mask; a 170-set one is a modulo).
    mask: u64,
    modulo: u64,
    valid: usize,
}

// Clone by hand for `clone_from`: copying a structure into one of the same
// geometry reuses its arrays (the one-pass TLB-size sweep copies walkers
// whenever sizes part, `tlb_sizes`), where the derived `clone_from`
// allocates anew.
impl Clone for Sets {
    fn clone(&self) -> Self {
        match self {
            Sets::W4(v) => Sets::W4(v.clone()),
            Sets::W8(v) => Sets::W8(v.clone()),
            Sets::Any(v) => Sets::Any(v.clone()),
        }
    }

    fn clone_from(&mut self, src: &Self) {
        match (self, src) {
            (Sets::W4(a), Sets::W4(b)) => a.clone_from(b),
            (Sets::W8(a), Sets::W8(b)) => a.clone_from(b),
            (Sets::Any(a), Sets::Any(b)) => a.clone_from(b),
            (a, b) => *a = b.clone(),
        }
    }
}

impl Clone for SetAssoc {
    fn clone(&self) -> Self {
        SetAssoc { sets: self.sets.clone(), ..*self }
    }

    fn clone_from(&mut self, src: &Self) {
        self.sets.clone_from(&src.sets);
        let SetAssoc { ways, num_sets, mask, modulo, valid, .. } = *src;
        (self.ways, self.num_sets, self.mask, self.modulo, self.valid) = (ways, num_sets, mask, modulo, valid);
    }
}

impl SetAssoc {
    /// `entries` total entries in sets of `ways` (0 or `entries` means fully
    /// associative). `entries` must be a multiple of `ways`.
    pub fn new(entries: usize, ways: usize) -> Self {
        let ways = if ways == 0 || ways > entries { entries.max(1) } else { ways };
        let n = (entries / ways).max(1);
        let sets = match ways {
            4 => Sets::W4(vec![[EMPTY; 4]; n]),
            8 => Sets::W8(vec![[EMPTY; 8]; n]),
            _ => Sets::Any(vec![EMPTY; n * ways]),
        };
        SetAssoc {
            sets,
            ways,
            num_sets: n,
            mask: if n.is_power_of_two() { n as u64 - 1 } else { 0 },
            modulo: if n.is_power_of_two() { 0 } else { n as u64 },
            valid: 0,
        }
    }

    pub fn entries(&self) -> usize {
        self.num_sets * self.ways
    }
    pub fn ways(&self) -> usize {
        self.ways
    }
    pub fn sets(&self) -> usize {
        self.num_sets
    }
    /// Number of valid entries.
    pub fn occupancy(&self) -> usize {
        self.valid
    }

    #[inline(always)]
    fn set_of(&self, index: u64) -> usize {
        (if self.modulo == 0 { index & self.mask } else { index % self.modulo }) as usize
    }

    /// The set `index` selects (for callers that track sets: `l1_front`).
    #[inline(always)]
    pub fn set_index(&self, index: u64) -> usize {
        self.set_of(index)
    }

    /// All tags, set after set, each set in recency order.
    fn flat(&self) -> &[u64] {
        match &self.sets {
            Sets::W4(v) => v.as_flattened(),
            Sets::W8(v) => v.as_flattened(),
            Sets::Any(v) => v,
        }
    }

    fn flat_mut(&mut self) -> &mut [u64] {
        match &mut self.sets {
            Sets::W4(v) => v.as_flattened_mut(),
            Sets::W8(v) => v.as_flattened_mut(),
            Sets::Any(v) => v,
        }
    }

    /// Look `tag` up in the set chosen by `index`; on a hit, make it the set's
    /// most recently used entry.
    #[inline(always)]
    pub fn lookup(&mut self, index: u64, tag: u64) -> bool {
        self.lookup_way(index, tag).is_some()
    }

    /// `lookup`, telling on a hit the way the tag was in before it moved to
    /// the front: its LRU stack distance within the set. Every set of fewer
    /// ways holds exactly the first ways of this one (LRU keeps the most
    /// recent tags; Mattson et al. 1970), so a hit at way `d` is a hit in
    /// the same sets with more than `d` ways and a miss with `d` or fewer
    /// (`tlb_sizes`).
    #[inline(always)]
    pub fn lookup_way(&mut self, index: u64, tag: u64) -> Option<usize> {
        with_set!(self, self.set_of(index), set => set.touch(tag))
    }

    /// Whether `tag` is present, without touching replacement state.
    pub fn contains(&self, index: u64, tag: u64) -> bool {
        let i = self.set_of(index);
        self.flat()[i * self.ways..(i + 1) * self.ways].contains(&tag)
    }

    /// Insert `tag` (known to be absent) as its set's most recently used entry,
    /// evicting the least recently used one if the set is full.
    /// Returns the evicted tag, if a valid one was replaced.
    #[inline(always)]
    pub fn insert(&mut self, index: u64, tag: u64) -> Option<u64> {
        debug_assert_ne!(tag, EMPTY);
        let old = with_set!(self, self.set_of(index), set => set.push_front(tag));
        if old == EMPTY {
            self.valid += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Replace `from` by `to` in the set chosen by `index`, in place (its
    /// recency position is kept). Whether `from` was there.
    pub fn retag(&mut self, index: u64, from: u64, to: u64) -> bool {
        let (i, w) = (self.set_of(index), self.ways);
        match self.flat_mut()[i * w..(i + 1) * w].iter_mut().find(|t| **t == from) {
            Some(t) => {
                *t = to;
                true
            }
            None => false,
        }
    }

    /// `lookup`, and on a miss `insert`, in one pass over the set: for a
    /// structure that is filled whenever it misses (a page-walk cache).
    #[inline(always)]
    pub fn lookup_or_insert(&mut self, index: u64, tag: u64) -> bool {
        debug_assert_ne!(tag, EMPTY);
        let (hit, old) = with_set!(self, self.set_of(index), set => set.touch_or_push(tag));
        if !hit && old == EMPTY {
            self.valid += 1;
        }
        hit
    }

    /// Invalidate every entry whose tag satisfies `pred`. Returns how many.
    /// Survivors keep their recency order and the freed ways move to the end.
    /// Linear in the size of the structure, which is fine because shootdowns
    /// happen at OS-event frequency, not per access.
    pub fn invalidate_where(&mut self, mut pred: impl FnMut(u64) -> bool) -> usize {
        let ways = self.ways;
        let mut n = 0;
        for set in self.flat_mut().chunks_mut(ways) {
            let mut keep = 0;
            for w in 0..ways {
                let t = set[w];
                if t == EMPTY {
                    break;
                }
                if pred(t) {
                    n += 1;
                } else {
                    set[keep] = t;
                    keep += 1;
                }
            }
            for t in set[keep..].iter_mut() {
                *t = EMPTY;
            }
        }
        self.valid -= n;
        n
    }

    pub fn flush(&mut self) {
        self.flat_mut().fill(EMPTY);
        self.valid = 0;
    }

    /// Iterate over valid tags (for tests and invariant checks).
    pub fn tags(&self) -> impl Iterator<Item = u64> + '_ {
        self.flat().iter().copied().filter(|&t| t != EMPTY)
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

    /// Reference LRU: per set, a list of tags in use order (oldest first).
    struct Model {
        sets: Vec<Vec<u64>>,
        ways: usize,
    }

    impl Model {
        fn set(&mut self, index: u64) -> &mut Vec<u64> {
            let n = self.sets.len() as u64;
            &mut self.sets[(index % n) as usize]
        }
        fn lookup(&mut self, index: u64, tag: u64) -> bool {
            let s = self.set(index);
            match s.iter().position(|&t| t == tag) {
                Some(p) => {
                    s.remove(p);
                    s.push(tag);
                    true
                }
                None => false,
            }
        }
        fn insert(&mut self, index: u64, tag: u64) -> Option<u64> {
            let ways = self.ways;
            let s = self.set(index);
            let evicted = if s.len() == ways { Some(s.remove(0)) } else { None };
            s.push(tag);
            evicted
        }
    }

    proptest::proptest! {
        /// Every width (fixed-size and generic sets, mask and modulo indexing)
        /// behaves exactly like the reference LRU under random lookups, fills,
        /// fused lookup-or-fill and invalidations.
        #[test]
        fn matches_reference_lru(
            shape in proptest::sample::select(vec![(8usize, 2usize), (16, 4), (12, 6), (32, 8), (24, 12), (32, 16), (6, 3), (5, 0), (1020, 6)]),
            ops in proptest::collection::vec((0u8..4, 0u64..40), 1..400),
        ) {
            let (entries, ways) = shape;
            let mut c = SetAssoc::new(entries, ways);
            let mut m = Model { sets: vec![Vec::new(); c.sets()], ways: c.ways() };
            for (op, key) in ops {
                // Index = tag, so a tag always maps to the same set.
                let hit = m.sets[(key % c.sets() as u64) as usize].contains(&key);
                match op {
                    0 => proptest::prop_assert_eq!(c.lookup(key, key), m.lookup(key, key)),
                    1 if !hit => proptest::prop_assert_eq!(c.insert(key, key), m.insert(key, key)),
                    2 => {
                        let want = m.lookup(key, key) || { m.insert(key, key); false };
                        proptest::prop_assert_eq!(c.lookup_or_insert(key, key), want);
                    }
                    3 => {
                        let gone = c.invalidate_where(|t| t % 7 == key % 7);
                        let before: usize = m.sets.iter().map(Vec::len).sum();
                        for s in m.sets.iter_mut() {
                            s.retain(|t| t % 7 != key % 7);
                        }
                        let after: usize = m.sets.iter().map(Vec::len).sum();
                        proptest::prop_assert_eq!(gone, before - after);
                    }
                    _ => {}
                }
                proptest::prop_assert_eq!(c.occupancy(), m.sets.iter().map(Vec::len).sum::<usize>());
            }
            let mut got: Vec<u64> = c.tags().collect();
            let mut want: Vec<u64> = m.sets.concat();
            got.sort_unstable();
            want.sort_unstable();
            proptest::prop_assert_eq!(got, want);
        }
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
