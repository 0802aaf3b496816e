//! Whose translation an entry is: a virtual machine and an address space in
//! it. TLB and page-walk-cache tags carry both so that entries of different
//! processes and different VMs coexist and never hit each other's, as x86's
//! PCID (12 bits, Intel SDM vol. 3A §4.10.1) and VPID (§28.1) do: a context
//! switch or VM entry need not flush.
//!
//! Widths: 12 bits of address-space id, as PCID; 4 bits of VM id, enough for a
//! host and the few guests the virtualization experiments (FHPM) run, and what
//! fits beside a 57-bit virtual address in a 64-bit tag (see `tlb.rs`). The
//! trace format's process limit (`trace::MAX_PIDS`) must stay within the
//! address-space ids; a compile-time check below keeps the two consistent.

pub const ASID_BITS: u32 = 12;
pub const VM_BITS: u32 = 4;
/// Bits of a tag that identify the space: VM id above the address-space id.
pub const SPACE_BITS: u32 = ASID_BITS + VM_BITS;
pub const MAX_ASIDS: u32 = 1 << ASID_BITS;
pub const MAX_VMS: u32 = 1 << VM_BITS;

// Every pid a trace can name is a distinct address-space id.
const _: () = assert!(crate::trace::MAX_PIDS <= MAX_ASIDS);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Space {
    /// VM id (VPID); 0 for the host, the only VM until virtualization lands.
    pub vm: u8,
    /// Address-space id (PCID): the trace's pid.
    pub asid: u16,
}

impl Space {
    pub fn new(vm: u8, asid: u16) -> Space {
        debug_assert!((vm as u32) < MAX_VMS && (asid as u32) < MAX_ASIDS);
        Space { vm, asid }
    }

    /// Process `pid` of the host (VM 0).
    #[inline(always)]
    pub fn native(pid: u16) -> Space {
        Space { vm: 0, asid: pid }
    }

    /// The space as the low `SPACE_BITS` of a tag.
    #[inline(always)]
    pub fn bits(self) -> u64 {
        (((self.vm as u64) & (MAX_VMS as u64 - 1)) << ASID_BITS) | ((self.asid as u64) & (MAX_ASIDS as u64 - 1))
    }

    #[inline(always)]
    pub fn from_bits(t: u64) -> Space {
        Space { vm: ((t >> ASID_BITS) & (MAX_VMS as u64 - 1)) as u8, asid: (t & (MAX_ASIDS as u64 - 1)) as u16 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_roundtrip_at_the_extremes() {
        for s in [Space::new(0, 0), Space::new(15, 4095), Space::new(3, 127), Space::native(4000)] {
            assert_eq!(Space::from_bits(s.bits()), s);
            assert!(s.bits() < 1 << SPACE_BITS);
        }
    }
}
