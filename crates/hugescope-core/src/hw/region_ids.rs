//! Dense numbers for the regions the shared pass's riding PCC banks see
//! (`os::members`, `hw::pcc_buckets`). A sensitivity sweep feeds every walk
//! to eight or more banks; with a key index per bank each one hashed the
//! region, probed, and on a miss (most walks of a scattered workload) removed
//! its victim's key and inserted the new one. Numbering the region once per
//! walk lets every bank find its slot by indexing an array with the number,
//! and evict by clearing one array cell.
//!
//! Numbers are given in first-seen order and never taken back: a region
//! keeps its number for as long as banks ride (the banks' arrays are as long
//! as the regions seen, two bytes a region per table; `BucketTable`). The
//! installed PCC (`hw::pcc_table::PccTable`) numbers regions the same way for its
//! own slots, and starts its numbering afresh when it grows past a bound.

use super::key_index::KeyIndex;

#[derive(Clone, Debug)]
pub struct RegionIds {
    /// The region key (`PccTable::key`) of each number.
    keys: Vec<u64>,
    index: KeyIndex,
    /// Numbers the index was sized for; it is rebuilt twice as large when
    /// they are used up (it stays at most a quarter full: `KeyIndex`).
    room: usize,
}

impl Default for RegionIds {
    // Small: every kernel has one for the shared pass's banks (and its
    // copies at a decision), most of them never numbering a region.
    fn default() -> Self {
        RegionIds::with_room(64)
    }
}

impl RegionIds {
    /// An empty numbering sized for `room` regions before it grows.
    pub fn with_room(room: usize) -> RegionIds {
        RegionIds { keys: Vec::with_capacity(room), index: KeyIndex::new(room), room: room.max(1) }
    }

    /// The number of region `key`, if it has one.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        self.index.get(key, &self.keys).map(|i| i as u32)
    }

    /// The number of region `key`, given one if it has none yet.
    #[inline]
    pub fn id(&mut self, key: u64) -> u32 {
        if let Some(i) = self.index.get(key, &self.keys) {
            return i as u32;
        }
        if self.keys.len() == self.room {
            self.grow();
        }
        self.index.insert(key, self.keys.len());
        self.keys.push(key);
        (self.keys.len() - 1) as u32
    }

    #[cold]
    fn grow(&mut self) {
        self.room *= 2;
        self.index = KeyIndex::new(self.room);
        for (i, &k) in self.keys.iter().enumerate() {
            self.index.insert(k, i);
        }
    }

    /// Regions numbered so far (every number is below it).
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// No slot (slots of a PCC table are below `MAX_PCC_ENTRIES`, which
/// `hw/pcc_table.rs` checks against this at compile time).
pub(super) const NO_SLOT: u16 = u16::MAX;

/// One table's slot for each region number: where a numbered region sits
/// in that table, if it does. Two bytes a number.
#[derive(Clone, Debug, Default)]
pub struct SlotsById(Vec<u16>);

impl SlotsById {
    #[inline(always)]
    pub fn get(&self, id: u32) -> Option<usize> {
        match self.0.get(id as usize) {
            Some(&s) if s != NO_SLOT => Some(s as usize),
            _ => None,
        }
    }
    /// Region `id` now sits in `slot`.
    #[inline(always)]
    pub fn set(&mut self, id: u32, slot: usize) {
        let i = id as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, NO_SLOT);
        }
        self.0[i] = slot as u16;
    }
    /// Region `id` is no longer in the table.
    #[inline(always)]
    pub fn remove(&mut self, id: u32) {
        if let Some(s) = self.0.get_mut(id as usize) {
            *s = NO_SLOT;
        }
    }
    /// No region in the table (its numbers may be given afresh).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Numbers are first-seen positions, stable across growth.
        #[test]
        fn numbers_are_first_seen_order(keys in prop::collection::vec(0u64..5000, 0..4000)) {
            let mut ids = RegionIds::with_room(4);
            let mut seen: Vec<u64> = Vec::new();
            for k in keys {
                let k = (k % 7) << 48 | k; // two pids' worth of keys
                let want = match seen.iter().position(|&x| x == k) {
                    Some(i) => i,
                    None => { seen.push(k); seen.len() - 1 }
                };
                prop_assert_eq!(ids.id(k) as usize, want);
            }
            prop_assert_eq!(ids.len(), seen.len());
        }
    }
}
