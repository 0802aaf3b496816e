//! Companion-page redirection (FHPM §4.2.2, §4.6; spec fhpm.md §3 "Companion
//! page mechanics"): a 2MB leaf is temporarily mapped through a 4KB table page
//! (the "companion page") whose 512 PTEs map the **same frames** as the huge
//! leaf, so the hardware keeps one accessed bit per 4KB region while the huge
//! frame stays where it is. Restoring writes the 2MB leaf back.
//!
//! In the model a redirected leaf is a 2MB block whose 512 base pages are
//! mapped by base leaves: the walker then resolves (and the TLB caches) 4KB
//! translations and sets per-4KB accessed bits, which `scan_young` reads as
//! it reads any base leaf. The block is not split in the allocator and its
//! huge bytes stay counted (the VM still owns one huge frame; only its
//! translation is fine-grained for a while), so a redirect and a restore are
//! neither demotions nor promotions. The companion table page is one real
//! frame of host memory (unmovable, as a page-table page is), held until the
//! restore. Both steps rewrite the PDE under the mmu lock and flush the TLB
//! (the paper flushes after the redirect; it leaves the restore flush
//! unstated, spec §11 flushes both); the flushes keep their mapping
//! (`with_eager_refill`): the companion's PTEs are filled before the PDE
//! points at them, so a hypervisor model takes no EPT violation for them.
//!
//! Conflicts (FHPM §4.3): when the host changes its page table under a
//! redirected page (migration, swap, ballooning, KSM merge, compaction), the
//! EPT violation handler finds the redirect flag, restores the PDE and frees
//! the companion first (`host_remap`); the page's stage-2 sample is lost. A
//! free of memory inside a redirected page is handled the same way.

use super::aspace::{size_of_flags, ACCESSED, DIRTY, LEAKED, PRESENT, SIZE_MASK, SIZE_SHIFT};
use super::huge_memory::Refusal;
use super::kernel::Kernel;
pub use super::metrics::CompanionStats;
use super::phys::Mobility;
use std::collections::BTreeMap;

/// The redirected leaves and the companion mechanism's counters.
#[derive(Clone, Debug, Default)]
pub struct Companions {
    /// (pid, leaf start) -> the companion table page's frame.
    redirected: BTreeMap<(u16, u64), u64>,
    pub stats: CompanionStats,
}

impl Companions {
    pub fn is_empty(&self) -> bool {
        self.redirected.is_empty()
    }
    /// Companion pages held now (frames of host memory).
    pub fn pages(&self) -> u64 {
        self.redirected.len() as u64
    }
    pub fn contains(&self, pid: u16, start: u64) -> bool {
        self.redirected.contains_key(&(pid, start))
    }
    /// The redirected leaves of `pid` overlapping [start, end), by start.
    fn overlapping(&self, pid: u16, start: u64, end: u64, leaf: u64) -> Vec<u64> {
        self.redirected
            .range((pid, start & !(leaf - 1))..(pid, end))
            .map(|(&(_, s), _)| s)
            .filter(|&s| s < end && s + leaf > start)
            .collect()
    }
}

impl Kernel {
    /// Companion pages held now.
    pub fn companion_pages(&self) -> u64 {
        self.companions.pages()
    }

    /// Whether the PMD-level leaf at `start` of `pid` is redirected.
    pub fn is_redirected(&self, pid: u16, start: u64) -> bool {
        self.companions.contains(pid, start)
    }

    /// The companion mechanism's counters.
    pub fn companion_stats(&self) -> &CompanionStats {
        &self.companions.stats
    }

    /// Redirect the PMD-level huge leaf at `start` (aligned) through a
    /// companion page (FHPM §4.2.2): allocate the 4KB table page, fill its 512
    /// PTEs with the huge frame's base + i x 4KB and clear accessed/dirty
    /// bits, point the PDE at it and flush. No frame of the leaf moves.
    pub fn redirect_companion(&mut self, pid: u16, start: u64) -> std::result::Result<(), Refusal> {
        let r = self.try_redirect(pid, start);
        if r.is_err() {
            self.companions.stats.redirect_failures += 1;
        }
        r
    }

    fn try_redirect(&mut self, pid: u16, start: u64) -> std::result::Result<(), Refusal> {
        let (bs, len) = (self.shape.base_shift, self.region_bytes());
        let size = self.region_size_index().ok_or(Refusal::Ineligible)?;
        if start % len != 0 || self.companions.contains(pid, start) {
            return Err(Refusal::Ineligible);
        }
        let sp = self.spaces.get(pid as usize).ok_or(Refusal::Ineligible)?;
        let vi = sp.find(start).ok_or(Refusal::Ineligible)?;
        let v = &sp.vmas[vi];
        if !v.covers(start, len) {
            return Err(Refusal::Ineligible);
        }
        let a = v.page_index(start, bs);
        let f = v.flags[a];
        if f & PRESENT == 0 || size_of_flags(f) != size {
            return Err(Refusal::Ineligible);
        }
        // The companion is a page-table page: unmovable host memory.
        let frame = self.phys.alloc(0, Mobility::Unmovable, Self::owner(pid, start, bs)).ok_or(Refusal::NoMemory)?;
        let n = (len >> bs) as usize;
        let v = &mut self.spaces[pid as usize].vmas[vi];
        for g in &mut v.flags[a..a + n] {
            // Base leaves of frames held as one block (LEAKED: no path may
            // free one of them alone), accessed/dirty clear (spec §3 step 2).
            *g = (*g & !(SIZE_MASK | ACCESSED | DIRTY)) | LEAKED;
        }
        self.companions.redirected.insert((pid, start), frame);
        let c = &mut self.companions.stats;
        c.redirects += 1;
        c.peak_pages = c.peak_pages.max(self.companions.redirected.len() as u64);
        self.charge_us(self.costs.companion_fill_us);
        self.with_eager_refill(|k| k.shootdown(pid, start, start + len));
        Ok(())
    }

    /// Restore a redirected leaf: write the 2MB PDE back, recycle the
    /// companion page, flush. False if `start` is not redirected.
    pub fn restore_companion(&mut self, pid: u16, start: u64) -> bool {
        let ok = self.restore_leaf(pid, start);
        if ok {
            self.companions.stats.restores += 1;
        }
        ok
    }

    fn restore_leaf(&mut self, pid: u16, start: u64) -> bool {
        let Some(frame) = self.companions.redirected.remove(&(pid, start)) else { return false };
        let (bs, len) = (self.shape.base_shift, self.region_bytes());
        let size = self.region_size_index().expect("a redirected leaf has the PMD size");
        let sp = &mut self.spaces[pid as usize];
        if let Some(vi) = sp.find(start) {
            let v = &mut sp.vmas[vi];
            let a = v.page_index(start, bs);
            for g in &mut v.flags[a..a + (len >> bs) as usize] {
                *g = (*g & !(SIZE_MASK | LEAKED)) | ((size as u8) << SIZE_SHIFT);
            }
        }
        self.phys.free(frame, 0);
        self.charge_us(self.costs.companion_restore_us);
        self.with_eager_refill(|k| k.shootdown(pid, start, start + len));
        true
    }

    /// The host updates its page table at `addr` of `pid` (FHPM §4.3): the
    /// EPT violation handler (`tdp_page_fault`) restores a redirected leaf
    /// first (a conflict: true) and otherwise synchronizes as usual. The
    /// model assumes the host's own change leaves the mapping as it was (the
    /// paper's stability assumption, spec §2): only the conflict acts.
    pub fn host_remap(&mut self, pid: u16, addr: u64) -> bool {
        let start = addr & !(self.region_bytes() - 1);
        if self.restore_leaf(pid, start) {
            self.companions.stats.conflicts += 1;
            true
        } else {
            self.companions.stats.tdp_page_faults += 1;
            false
        }
    }

    /// Restore every redirected leaf of `pid` overlapping [start, end) before
    /// another mechanism changes the range (a free): each is a conflict.
    pub(super) fn restore_companions_in(&mut self, pid: u16, start: u64, end: u64) {
        for s in self.companions.overlapping(pid, start, end, self.region_bytes()) {
            self.host_remap(pid, s);
        }
    }
}
