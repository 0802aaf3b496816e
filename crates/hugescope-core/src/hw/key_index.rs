//! A region key to slot index for the PCC's fully associative tables
//! (`hw::pcc`, `hw::pcc_buckets`). Hardware compares a walk's region tag
//! with every entry at once (PCC §3.2: a CAM); the model finds it in
//! constant time instead of scanning the keys, which on a scattered workload
//! (nearly every walk misses the table) was the PCC's largest cost.
//!
//! Open addressing with linear probing over a power-of-two array at most a
//! quarter full (short probe runs: most walks of a scattered workload insert
//! and evict, so removals are as common as lookups). Each cell holds a slot number plus one (0 = empty); the key itself
//! stays in the table's own key array, which every probe reads to compare.
//! Removal shifts the following cells of the probe run back (no tombstones),
//! so lookups never slow down as entries come and go. It is an index only:
//! nothing iterates it, so its layout can never reach a result.

#[derive(Clone, Debug)]
pub struct KeyIndex {
    cells: Vec<u32>,
    mask: usize,
    /// Right shift that leaves log2(cells) bits of the multiplied key.
    shift: u32,
}

/// Fibonacci hashing: the high bits of key x 2^64/phi spread the regions of
/// a dense address range over the whole array.
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl KeyIndex {
    /// An index for at most `capacity` entries.
    pub fn new(capacity: usize) -> KeyIndex {
        let n = (capacity.max(1) * 4).next_power_of_two().max(8);
        KeyIndex { cells: vec![0; n], mask: n - 1, shift: 64 - n.trailing_zeros() }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(MUL) >> self.shift) as usize
    }

    /// The slot holding `key`, given the table's keys by slot.
    #[inline(always)]
    pub fn get(&self, key: u64, keys: &[u64]) -> Option<usize> {
        let mut p = self.home(key);
        loop {
            let c = self.cells[p];
            if c == 0 {
                return None;
            }
            let s = (c - 1) as usize;
            if keys[s] == key {
                return Some(s);
            }
            p = (p + 1) & self.mask;
        }
    }

    /// Record that `key` (absent) now sits in `slot`.
    #[inline]
    pub fn insert(&mut self, key: u64, slot: usize) {
        let mut p = self.home(key);
        while self.cells[p] != 0 {
            p = (p + 1) & self.mask;
        }
        self.cells[p] = slot as u32 + 1;
    }

    /// The cell holding `slot` for `key` (present).
    #[inline]
    fn cell_of(&self, key: u64, slot: usize) -> usize {
        let mut p = self.home(key);
        while self.cells[p] != slot as u32 + 1 {
            debug_assert_ne!(self.cells[p], 0, "key not in the index");
            p = (p + 1) & self.mask;
        }
        p
    }

    /// Forget `key` (present, in `slot`); `keys` by slot, still holding it.
    #[inline]
    pub fn remove(&mut self, key: u64, slot: usize, keys: &[u64]) {
        let mut hole = self.cell_of(key, slot);
        // Backward shift: a later cell of the run moves into the hole unless
        // its home lies cyclically after the hole (then it is reachable
        // from its home without crossing the hole, and must stay).
        let mut p = hole;
        loop {
            p = (p + 1) & self.mask;
            let c = self.cells[p];
            if c == 0 {
                break;
            }
            let home = self.home(keys[(c - 1) as usize]);
            let dist_home = p.wrapping_sub(home) & self.mask;
            let dist_hole = p.wrapping_sub(hole) & self.mask;
            if dist_home >= dist_hole {
                self.cells[hole] = c;
                hole = p;
            }
        }
        self.cells[hole] = 0;
    }

    /// `key` moved from slot `from` to slot `to` (a swap-remove's last slot).
    #[inline]
    pub fn moved(&mut self, key: u64, from: usize, to: usize) {
        let p = self.cell_of(key, from);
        self.cells[p] = to as u32 + 1;
    }

    pub fn clear(&mut self) {
        self.cells.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a linear search of the key array, through inserts,
        /// swap-removes and replacements in place (what the PCC does).
        #[test]
        fn matches_linear_search(ops in prop::collection::vec((0u8..3, 0u64..48), 0..400), cap in 1usize..20) {
            let mut keys: Vec<u64> = Vec::new();
            let mut ix = KeyIndex::new(cap);
            for (op, k) in ops {
                let k = k * 0x20_0000 + (k & 3); // clustered keys, like regions of a dense range
                let present = keys.iter().position(|&x| x == k);
                match (op, present) {
                    (0, None) if keys.len() < cap => {
                        keys.push(k);
                        ix.insert(k, keys.len() - 1);
                    }
                    (0, None) if !keys.is_empty() => {
                        // Full: replace slot k % len in place (an eviction).
                        let v = (k as usize) % keys.len();
                        ix.remove(keys[v], v, &keys);
                        keys[v] = k;
                        ix.insert(k, v);
                    }
                    (1, Some(i)) => {
                        ix.remove(k, i, &keys);
                        let last = keys.len() - 1;
                        if i != last {
                            ix.moved(keys[last], last, i);
                        }
                        keys.swap_remove(i);
                    }
                    (2, _) => {
                        keys.clear();
                        ix.clear();
                    }
                    _ => {}
                }
                for probe in 0u64..48 {
                    let q = probe * 0x20_0000 + (probe & 3);
                    prop_assert_eq!(ix.get(q, &keys), keys.iter().position(|&x| x == q));
                }
            }
        }
    }
}
