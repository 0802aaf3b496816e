//! A shootdown: a range whose cached translations must leave every TLB (and
//! page-walk cache) of every cpu, as the page table asks after a remap, an
//! unmap or an accessed-bit clear (the simulator drains them after each
//! access, before a new fill: `sim.rs`).

use super::space::Space;

/// A range whose translations must leave every TLB (and PWC) of every cpu.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shootdown {
    pub pid: u16,
    pub start: u64,
    pub end: u64,
    /// The translation's successor is already in place: only cached copies
    /// must go (an accessed-bit clear, which changes no mapping; a
    /// VM-friendly split or collapse, FHPM §4.5, that rewrites the EPT
    /// eagerly). False for an ordinary remap or unmap. Native runs ignore it;
    /// a hypervisor model zaps its EPT entries for the range only when it is
    /// false, so the guest's next touch of each page exits (EPT violation).
    pub keeps_mapping: bool,
    /// The VM whose address space `pid` is: 0 (the host) for every native
    /// page table; a guest kernel's shootdowns carry their VM's id
    /// (`virt::hypervisor`).
    pub vm: u8,
}

/// `Shootdown::pid` of a flush of every address space of a VM.
pub const ALL_SPACES: u16 = u16::MAX;

impl Shootdown {
    /// A shootdown after a remap or unmap of [start, end) of `pid`.
    #[inline]
    pub fn remap(pid: u16, start: u64, end: u64) -> Shootdown {
        Shootdown { pid, start, end, keeps_mapping: false, vm: 0 }
    }

    /// Every translation of VM `vm` must go (KVM flushes a VM's TLB entries
    /// by VPID after any host change of its EPT).
    #[inline]
    pub fn whole_vm(vm: u8) -> Shootdown {
        Shootdown { pid: ALL_SPACES, start: 0, end: u64::MAX, keeps_mapping: true, vm }
    }

    /// The address space the range belongs to.
    #[inline]
    pub fn space(&self) -> Space {
        Space { vm: self.vm, asid: self.pid }
    }
}
