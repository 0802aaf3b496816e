//! What a page walk finds: the leaf entry translating an address. The page
//! table (the static map or the OS model) answers a TLB miss with a `Leaf`; a
//! `Walker` prices the walk that reached it and the MMU fills its TLBs from it.
//!
//! A leaf says more than its page size because the systems still to come need
//! more: a nested (2-D) walk ends in a guest leaf *and* a host (EPT) leaf, and
//! its TLB entry covers only the smaller of the two (Bhargava et al., ASPLOS'08
//! §2; FHPM's nested walks), so the size the TLB entry covers is a field of its
//! own; the PCC's filter needs the accessed bits of the upper levels as they
//! were *before* this walk set them (PCC §3.2); reservations and direct
//! segments need the frame.
//!
//! Kept to 16 bytes and `Copy` so it travels in registers on the hot path.

/// `Leaf::host_size` of a native (one-dimensional) translation.
pub const NATIVE: u8 = u8::MAX;
/// `Leaf::pa` when the model has no frame for the page (out of memory).
pub const NO_PA: u64 = u64::MAX;

/// Bits of `Leaf::was_set`: accessed/dirty bits as the walk found them, before
/// it set them (x86 sets A on every walk that reads an entry and D on a write
/// through the leaf; Intel SDM vol. 3A §4.8).
pub const LEAF_A: u8 = 1 << 0;
pub const LEAF_D: u8 = 1 << 1;
/// The accessed bit of the PMD-level entry (PDE) on the path: the leaf's own A
/// bit for a 2MB leaf, the PDE pointing to the page table otherwise.
pub const PMD_A: u8 = 1 << 2;
/// The accessed bit of the PUD-level entry (PDPTE) on the path.
pub const PUD_A: u8 = 1 << 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// Page-size index of the leaf entry (of the guest table under nesting).
    /// With the machine geometry it fixes the level the entry sits at, hence
    /// which levels a walk to it reads: root-first indices 0..=leaf_level.
    pub size: u8,
    /// Page-size index of the TLB entry this translation fills: `size` for a
    /// native walk, min(guest, host) for a nested one.
    pub tlb_size: u8,
    /// Page-size index of the host (EPT) leaf backing this one, or `NATIVE`.
    pub host_size: u8,
    /// `LEAF_A | LEAF_D | PMD_A | PUD_A` as found before this walk.
    pub was_set: u8,
    /// Physical address the access translates to (`NO_PA` if the model has no
    /// frame for it). The static map synthesizes an identity mapping.
    pub pa: u64,
}

impl Leaf {
    /// A native leaf of page-size index `size` whose frame and bits the page
    /// table does not model (e.g. a profiling pass that only counts walks).
    #[inline(always)]
    pub fn sized(size: usize) -> Leaf {
        Leaf { size: size as u8, tlb_size: size as u8, host_size: NATIVE, was_set: 0, pa: NO_PA }
    }

    /// A native leaf of page-size index `size` mapping the access to `pa`.
    #[inline(always)]
    pub fn native(size: usize, pa: u64, was_set: u8) -> Leaf {
        Leaf { size: size as u8, tlb_size: size as u8, host_size: NATIVE, was_set, pa }
    }

    #[inline(always)]
    pub fn size(&self) -> usize {
        self.size as usize
    }
    #[inline(always)]
    pub fn tlb_size(&self) -> usize {
        self.tlb_size as usize
    }
    #[inline(always)]
    pub fn is_nested(&self) -> bool {
        self.host_size != NATIVE
    }
    #[inline(always)]
    pub fn was(&self, bit: u8) -> bool {
        self.was_set & bit != 0
    }
    /// Physical frame number in base pages of `1 << base_shift` bytes.
    pub fn frame(&self, base_shift: u32) -> Option<u64> {
        (self.pa != NO_PA).then(|| self.pa >> base_shift)
    }
}

/// Most radix levels a machine may have (`MachineConfig::validate`).
pub const MAX_LEVELS: usize = 6;

/// What a nested walk needs besides the leaf, as the hypervisor found it
/// (`Walker::prepare` hands it to the walker before the walk is priced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NestedPath {
    /// GPA of the guest page-table page read at each root-first level.
    pub pt_gpa: [u64; MAX_LEVELS],
    /// Page-size index of the host leaf mapping that page.
    pub pt_host_size: [u8; MAX_LEVELS],
    /// GPA the access translates to in the guest (`Leaf::pa` is the host's).
    pub data_gpa: u64,
    /// The GVA lies in the guest's direct segment (ISCA'13 §3.3, extension):
    /// no guest level is read.
    pub guest_segment: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_two_registers_and_reports_its_bits() {
        assert_eq!(std::mem::size_of::<Leaf>(), 16);
        let l = Leaf::native(1, 0x4020_1234, LEAF_A | PUD_A);
        assert!(l.was(LEAF_A) && l.was(PUD_A) && !l.was(LEAF_D) && !l.was(PMD_A));
        assert_eq!((l.size(), l.tlb_size(), l.is_nested()), (1, 1, false));
        assert_eq!(l.frame(12), Some(0x40201));
        assert_eq!(Leaf::sized(2).frame(12), None);
    }
}
