//! A region key to number index: the hash index behind `hw::region_ids`,
//! which numbers the regions the PCC tables see (`hw::pcc_table`,
//! `hw::pcc_buckets`). Hardware compares a walk's region tag with every
//! entry at once (PCC §3.2: a CAM); the model finds the region's number in
//! constant time and its slot by that number, instead of scanning the keys,
//! which on a scattered workload (nearly every walk misses the table) was
//! the PCC's largest cost.
//!
//! Open addressing with linear probing over a power-of-two array at most a
//! quarter full (short probe runs). Each cell holds a position plus one
//! (0 = empty); the key itself stays in the owner's key array, which every
//! probe reads to compare. Nothing is ever removed: region numbers are not
//! taken back (a numbering starts afresh as a whole). It is an index only:
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
    /// An index for at most `capacity` keys.
    pub fn new(capacity: usize) -> KeyIndex {
        let n = (capacity.max(1) * 4).next_power_of_two().max(8);
        KeyIndex { cells: vec![0; n], mask: n - 1, shift: 64 - n.trailing_zeros() }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(MUL) >> self.shift) as usize
    }

    /// The position of `key` in `keys` (the owner's keys by position).
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

    /// Record that `key` (absent) sits at `pos`; at most `capacity` keys.
    #[inline]
    pub fn insert(&mut self, key: u64, pos: usize) {
        let mut p = self.home(key);
        while self.cells[p] != 0 {
            p = (p + 1) & self.mask;
        }
        self.cells[p] = pos as u32 + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a linear search of the key array, filled to capacity.
        #[test]
        fn matches_linear_search(raw in prop::collection::vec(0u64..64, 0..40), cap in 1usize..40) {
            let mut keys: Vec<u64> = Vec::new();
            let mut ix = KeyIndex::new(cap);
            for k in raw {
                let k = k * 0x20_0000 + (k & 3); // clustered keys, like regions of a dense range
                if keys.len() < cap && !keys.contains(&k) {
                    keys.push(k);
                    ix.insert(k, keys.len() - 1);
                }
                for probe in 0u64..64 {
                    let q = probe * 0x20_0000 + (probe & 3);
                    prop_assert_eq!(ix.get(q, &keys), keys.iter().position(|&x| x == q));
                }
            }
        }
    }
}
