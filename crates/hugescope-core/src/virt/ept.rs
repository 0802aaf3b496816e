//! EPT presence of one VM, and the VM exits its absence causes.
//!
//! The EPT's contents are the host kernel's mapping of the VM process (a 2MB
//! EPT leaf is a 2MB leaf of that process, `virt::hypervisor`); what the host
//! page table cannot say is whether KVM has (re)built the EPT entry since the
//! host last changed the mapping. A host remap or unmap (a shootdown with
//! `keeps_mapping == false`: split, collapse, migration, reclaim) zaps the
//! EPT entries of its range through the MMU notifier; the guest's next touch
//! of each zapped page is an EPT-violation VM exit, after which KVM maps it
//! again at the host leaf's size. This is how Linux's lazy refill after a
//! split or collapse costs about one exit per 4KB of working set (FHPM §3.2,
//! Table 6). A VM-friendly remap (`keeps_mapping == true`, FHPM §4.5)
//! rewrites the EPT eagerly: no zap, no exits.
//!
//! One presence bit per base page of the VM's GPA space, and one "was ever
//! present" bit to tell a first touch from a touch after a zap.

use serde::Serialize;

/// Why a VM exited to the hypervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCause {
    /// EPT violation on the first touch of a guest-physical page.
    FirstTouch,
    /// EPT violation on a page whose EPT entry a host remap zapped.
    AfterZap,
}

/// VM exits by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VmExits {
    /// EPT violations on the first touch of a page (data or guest page table).
    pub ept_violation_first_touch: u64,
    /// EPT violations on a page whose entry a host remap had zapped.
    pub ept_violation_after_zap: u64,
    /// Of all EPT violations, those on guest page-table pages (read by a walk).
    pub ept_violation_page_table: u64,
    pub total: u64,
}

impl VmExits {
    pub fn count(&mut self, cause: ExitCause, page_table: bool) {
        match cause {
            ExitCause::FirstTouch => self.ept_violation_first_touch += 1,
            ExitCause::AfterZap => self.ept_violation_after_zap += 1,
        }
        self.ept_violation_page_table += page_table as u64;
        self.total += 1;
    }

    pub fn add(&mut self, o: &VmExits) {
        self.ept_violation_first_touch += o.ept_violation_first_touch;
        self.ept_violation_after_zap += o.ept_violation_after_zap;
        self.ept_violation_page_table += o.ept_violation_page_table;
        self.total += o.total;
    }
}

#[derive(Clone, Debug)]
pub struct Ept {
    base_shift: u32,
    pages: u64,
    present: Vec<u64>,
    ever: Vec<u64>,
    /// Base pages whose entries host remaps zapped.
    pub zapped_pages: u64,
}

impl Ept {
    /// An empty EPT over `gpa_bytes` of guest-physical space.
    pub fn new(gpa_bytes: u64, base_shift: u32) -> Ept {
        let pages = gpa_bytes >> base_shift;
        let words = pages.div_ceil(64) as usize;
        Ept { base_shift, pages, present: vec![0; words], ever: vec![0; words], zapped_pages: 0 }
    }

    #[inline]
    fn bit(&self, gpa: u64) -> Option<(usize, u64)> {
        let p = gpa >> self.base_shift;
        (p < self.pages).then(|| ((p / 64) as usize, 1u64 << (p % 64)))
    }

    /// Whether the EPT maps `gpa`. Addresses beyond the VM's space count as
    /// mapped (the hypervisor never asks about them).
    #[inline]
    pub fn present(&self, gpa: u64) -> bool {
        self.bit(gpa).is_none_or(|(w, b)| self.present[w] & b != 0)
    }

    /// Why touching the absent `gpa` exits.
    pub fn cause(&self, gpa: u64) -> ExitCause {
        match self.bit(gpa) {
            Some((w, b)) if self.ever[w] & b != 0 => ExitCause::AfterZap,
            _ => ExitCause::FirstTouch,
        }
    }

    /// KVM maps [start, end) (the host leaf around the faulting page).
    pub fn fill(&mut self, start: u64, end: u64) {
        self.for_pages(start, end, |ept, w, b| {
            ept.present[w] |= b;
            ept.ever[w] |= b;
        });
    }

    /// The MMU notifier zaps [start, end). Returns the pages that were mapped.
    pub fn zap(&mut self, start: u64, end: u64) -> u64 {
        let mut n = 0;
        self.for_pages(start, end, |ept, w, b| {
            n += (ept.present[w] & b != 0) as u64;
            ept.present[w] &= !b;
        });
        self.zapped_pages += n;
        n
    }

    fn for_pages(&mut self, start: u64, end: u64, mut f: impl FnMut(&mut Ept, usize, u64)) {
        let lo = start >> self.base_shift;
        let hi = (end.saturating_add((1 << self.base_shift) - 1) >> self.base_shift).min(self.pages);
        for p in lo..hi {
            f(self, (p / 64) as usize, 1u64 << (p % 64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_zap_and_causes() {
        let mut e = Ept::new(8 << 20, 12);
        assert!(!e.present(0x1000));
        assert_eq!(e.cause(0x1000), ExitCause::FirstTouch);
        e.fill(0, 2 << 20);
        assert!(e.present(0x1000) && e.present(0x1f_f000) && !e.present(0x20_0000));
        assert_eq!(e.zap(0x1000, 0x3000), 2);
        assert!(!e.present(0x1000) && !e.present(0x2000) && e.present(0x3000));
        assert_eq!(e.cause(0x2000), ExitCause::AfterZap);
        assert_eq!(e.cause(0x40_0000), ExitCause::FirstTouch);
        // Past the VM's space: never asked about, never exits.
        assert!(e.present(1 << 40));
    }
}
