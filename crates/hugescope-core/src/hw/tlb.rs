//! TLB structures. Each structure holds translations of one or more page sizes
//! (Haswell's L2 holds 4KB and 2MB; the Alpha 21264's single TLB holds all four
//! sizes). Hardware probes every size in parallel; the model probes each size's
//! set in turn, which gives the same hit/miss outcome.
//!
//! Tag layout, one u64 (the entry's whole state; `assoc` keeps tags only):
//!
//!   bits 19..63  virtual page number of the entry's size (45 bits: a 57-bit
//!                virtual address of 5-level paging over 4KB pages)
//!   bits 16..18  page-size index (at most `MAX_SIZES` = 8 sizes)
//!   bits 12..15  VM id (VPID), bits 0..11 address-space id (PCID): `Space`
//!
//! A tag never equals `assoc::EMPTY` (all ones): that would need size index 7,
//! whose pages are larger than 4KB, with a 45-bit all-ones page number, i.e. an
//! address beyond 57 bits. u128 tags were not needed: 64 bits hold it all.

use super::assoc::SetAssoc;
use super::space::{Space, SPACE_BITS};
use crate::config::CacheConfig;

const SIZE_SHIFT: u32 = SPACE_BITS;
const VPN_SHIFT: u32 = SIZE_SHIFT + 3;
/// Virtual page number bits a tag holds.
pub const VPN_BITS: u32 = 64 - VPN_SHIFT;

#[inline(always)]
pub fn tag(vpn: u64, size: usize, space: Space) -> u64 {
    debug_assert!(vpn < 1 << VPN_BITS && size < 8);
    (vpn << VPN_SHIFT) | ((size as u64) << SIZE_SHIFT) | space.bits()
}

/// Size index of a dead duplicate (`MachineConfig::l1_duplicate_fill`, the
/// PCC artifact's second L1 fill): the eighth index, which no page size has
/// when the knob is on (validated), so a lookup never matches it.
const GHOST_SIZE: u64 = 7;

/// The dead duplicate of a live tag: same page and space, never hit.
#[inline(always)]
pub fn ghost(live: u64) -> u64 {
    live | (GHOST_SIZE << SIZE_SHIFT)
}

#[inline(always)]
pub fn is_ghost(t: u64) -> bool {
    (t >> SIZE_SHIFT) & 7 == GHOST_SIZE
}

/// The live base-page tag a ghost duplicates.
#[inline(always)]
pub fn live_of(ghost: u64) -> u64 {
    ghost & !(GHOST_SIZE << SIZE_SHIFT)
}

/// (virtual page number, page-size index, space) of a tag.
#[inline(always)]
pub fn untag(t: u64) -> (u64, usize, Space) {
    (t >> VPN_SHIFT, ((t >> SIZE_SHIFT) & 7) as usize, Space::from_bits(t))
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

    /// Invalidate every entry of `space` whose page overlaps [start, end).
    /// Dead duplicates stay: they are no translation, and the artifact's
    /// invalidation (`evict` of the mapped entry) leaves them in their set.
    pub fn shootdown(&mut self, space: Space, start: u64, end: u64, shifts: &[u32]) -> usize {
        self.cache.invalidate_where(|t| {
            if is_ghost(t) {
                return false;
            }
            let (vpn, s, sp) = untag(t);
            let lo = vpn << shifts[s];
            let hi = lo + (1u64 << shifts[s]);
            sp == space && lo < end && start < hi
        })
    }

    /// Invalidate every entry of VM `vm`, whatever its address space or page
    /// (INVVPID's single-context flush, which KVM issues after a host change
    /// of the VM's EPT). Dead duplicates stay, as in `shootdown`.
    pub fn flush_vm(&mut self, vm: u8) -> usize {
        self.cache.invalidate_where(|t| !is_ghost(t) && untag(t).2.vm == vm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_roundtrip() {
        // The widest fields: a 57-bit address's 4KB page, 4096 address
        // spaces, 16 VMs; and the largest size index with its widest page
        // number (a 2MB page of a 57-bit address), which stays below EMPTY.
        let far = Space::new(15, 4095);
        let t = tag((1u64 << 45) - 1, 0, far);
        assert_eq!(untag(t), ((1u64 << 45) - 1, 0, far));
        let t = tag((1u64 << 36) - 1, 7, far);
        assert_eq!(untag(t), ((1u64 << 36) - 1, 7, far));
        assert_ne!(t, super::super::assoc::EMPTY);
        // Same page and pid in another VM is another tag.
        assert_ne!(tag(5, 0, Space::new(0, 3)), tag(5, 0, Space::new(1, 3)));
    }

    #[test]
    fn shootdown_overlap_is_exact() {
        let shifts = [12, 21];
        let mut t = Tlb::new("l2".into(), &CacheConfig { entries: 16, ways: 0 }, vec![0, 1]);
        let (p1, p2, vm1) = (Space::native(1), Space::native(2), Space::new(1, 1));
        t.cache.insert(0, tag(0x200, 0, p1)); // 4KB page at 0x200000, pid 1
        t.cache.insert(0, tag(0x1ff, 0, p1)); // 4KB page at 0x1ff000
        t.cache.insert(0, tag(0x1, 1, p1)); // 2MB page at 0x200000
        t.cache.insert(0, tag(0x200, 0, p2)); // other pid
        t.cache.insert(0, tag(0x200, 0, vm1)); // pid 1 of another VM
        // Range [0x200000, 0x201000) hits the 4KB page and the 2MB page of
        // pid 1 in VM 0, nothing of pid 2 or of VM 1.
        assert_eq!(t.shootdown(p1, 0x200000, 0x201000, &shifts), 2);
        let left: Vec<_> = t.cache.tags().map(untag).collect();
        assert!(left.contains(&(0x1ff, 0, p1)) && left.contains(&(0x200, 0, p2)) && left.contains(&(0x200, 0, vm1)));
    }
}
