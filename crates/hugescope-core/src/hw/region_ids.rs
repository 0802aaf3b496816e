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
//! as the regions seen, two bytes a region per table; `BucketTable`).

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
    fn default() -> Self {
        RegionIds::with_room(1024)
    }
}

impl RegionIds {
    fn with_room(room: usize) -> RegionIds {
        RegionIds { keys: Vec::with_capacity(room), index: KeyIndex::new(room), room }
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
