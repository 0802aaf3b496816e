//! TLB structures. Each structure holds translations of one or more page sizes
//! (Haswell's L2 holds 4KB and 2MB; the Alpha 21264's single TLB holds all four
//! sizes). Hardware probes every size in parallel; the model probes each size's
//! set in turn, which gives the same hit/miss outcome.
//!
//! Tag layout (fits in 64 bits below `assoc::EMPTY`): virtual page number of
//! the entry's size in bits 10.., size index in bits 7-9, pid (the ASID/PCID,
//! so processes never hit each other's entries) in bits 0-6.

use super::assoc::SetAssoc;
use crate::config::CacheConfig;

#[inline(always)]
pub fn tag(vpn: u64, size: usize, pid: u16) -> u64 {
    (vpn << 10) | ((size as u64) << 7) | (pid as u64 & 0x7f)
}

#[inline(always)]
pub fn untag(t: u64) -> (u64, usize, u16) {
    (t >> 10, ((t >> 7) & 7) as usize, (t & 0x7f) as u16)
}

#[derive(Clone, Debug)]
pub struct Tlb {
    pub name: String,
    pub cache: SetAssoc,
    /// Page-size indices this structure holds.
    pub sizes: Vec<usize>,
}

impl Tlb {
    pub fn new(name: String, cfg: &CacheConfig, sizes: Vec<usize>) -> Self {
        Tlb { name, cache: SetAssoc::new(cfg.entries, cfg.ways), sizes }
    }

    /// Invalidate every entry of `pid` whose page overlaps [start, end).
    pub fn shootdown(&mut self, pid: u16, start: u64, end: u64, shifts: &[u32]) -> usize {
        self.cache.invalidate_where(|t| {
            let (vpn, s, p) = untag(t);
            let lo = vpn << shifts[s];
            let hi = lo + (1u64 << shifts[s]);
            p == pid && lo < end && start < hi
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_roundtrip() {
        let t = tag((1u64 << 36) - 1, 2, 127);
        assert_eq!(untag(t), ((1u64 << 36) - 1, 2, 127));
        assert_ne!(t, super::super::assoc::EMPTY);
    }

    #[test]
    fn shootdown_overlap_is_exact() {
        let shifts = [12, 21];
        let mut t = Tlb::new("l2".into(), &CacheConfig { entries: 16, ways: 0 }, vec![0, 1]);
        t.cache.insert(0, tag(0x200, 0, 1)); // 4KB page at 0x200000, pid 1
        t.cache.insert(0, tag(0x1ff, 0, 1)); // 4KB page at 0x1ff000
        t.cache.insert(0, tag(0x1, 1, 1)); // 2MB page at 0x200000
        t.cache.insert(0, tag(0x200, 0, 2)); // other pid
        // Range [0x200000, 0x201000) hits the 4KB page and the 2MB page of pid 1.
        assert_eq!(t.shootdown(1, 0x200000, 0x201000, &shifts), 2);
        let left: Vec<_> = t.cache.tags().map(untag).collect();
        assert!(left.contains(&(0x1ff, 0, 1)) && left.contains(&(0x200, 0, 2)));
    }
}
