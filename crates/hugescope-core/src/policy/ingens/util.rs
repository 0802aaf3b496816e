//! The util bitvector (Ingens §4.1, §4.3; ingens.md 2.2): one bit per base
//! page of each PMD-level region, set when the fault handler maps the page,
//! cleared when the program frees it. Its popcount is the region's
//! utilization, which decides promotion (>= the threshold) and demotion
//! (below the demotion threshold).
//!
//! A real kernel cannot see first touches under a huge mapping, so a promoted
//! region gets all its bits set (ingens.md 7.2): the frees that follow clear
//! them one by one, and demotion frees exactly the pages whose bits are clear.
//! Kept in a hash map keyed by (pid, region start): only looked up, never
//! iterated, so its order cannot leak into results.

use std::collections::HashMap;

pub struct UtilMap {
    pages: usize,
    bits: HashMap<(u16, u64), Vec<u64>>,
}

impl UtilMap {
    pub fn new(pages_per_region: usize) -> UtilMap {
        UtilMap { pages: pages_per_region, bits: HashMap::new() }
    }

    fn words(&mut self, pid: u16, region: u64) -> &mut Vec<u64> {
        let n = self.pages.div_ceil(64);
        self.bits.entry((pid, region)).or_insert_with(|| vec![0; n])
    }

    /// Set the bit of page `idx` of the region; returns the new utilization.
    pub fn set(&mut self, pid: u16, region: u64, idx: usize) -> u32 {
        let w = self.words(pid, region);
        w[idx >> 6] |= 1 << (idx & 63);
        w.iter().map(|x| x.count_ones()).sum()
    }

    /// Clear the bits of pages [a, b) of the region; returns the new utilization.
    pub fn clear(&mut self, pid: u16, region: u64, a: usize, b: usize) -> u32 {
        let Some(w) = self.bits.get_mut(&(pid, region)) else { return 0 };
        for i in a..b.min(self.pages) {
            w[i >> 6] &= !(1 << (i & 63));
        }
        w.iter().map(|x| x.count_ones()).sum()
    }

    /// Set every bit: the region was promoted (ingens.md 7.2).
    pub fn fill(&mut self, pid: u16, region: u64) {
        let pages = self.pages;
        let w = self.words(pid, region);
        for (i, x) in w.iter_mut().enumerate() {
            let left = pages - (i * 64).min(pages);
            *x = if left >= 64 { u64::MAX } else { (1u64 << left) - 1 };
        }
    }

    pub fn count(&self, pid: u16, region: u64) -> u32 {
        self.bits.get(&(pid, region)).map_or(0, |w| w.iter().map(|x| x.count_ones()).sum())
    }

    pub fn is_set(&self, pid: u16, region: u64, idx: usize) -> bool {
        self.bits.get(&(pid, region)).is_some_and(|w| w[idx >> 6] >> (idx & 63) & 1 == 1)
    }

    /// Drop the region's entry once no bit is left (it was unmapped whole,
    /// or all its pages freed), so the map holds only regions in use.
    pub fn forget_if_empty(&mut self, pid: u16, region: u64) {
        if self.count(pid, region) == 0 {
            self.bits.remove(&(pid, region));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_fill() {
        let mut u = UtilMap::new(512);
        assert_eq!(u.set(0, 0x200000, 0), 1);
        assert_eq!(u.set(0, 0x200000, 0), 1);
        assert_eq!(u.set(0, 0x200000, 511), 2);
        assert!(u.is_set(0, 0x200000, 511) && !u.is_set(0, 0x200000, 1) && !u.is_set(1, 0x200000, 0));
        u.fill(0, 0x200000);
        assert_eq!(u.count(0, 0x200000), 512);
        assert_eq!(u.clear(0, 0x200000, 10, 110), 412);
        let mut small = UtilMap::new(16);
        small.fill(3, 0);
        assert_eq!(small.count(3, 0), 16);
    }
}
