//! Collapse and split of huge leaves (Linux: mm/khugepaged.c collapse_huge_page
//! and MADV_COLLAPSE; mm/huge_memory.c __split_huge_pmd). The budget, the
//! eligibility checks and the accounting of huge bytes live here, so a policy
//! only names the range and the size.

use super::aspace::{self, size_of_flags, ACCESSED, DIRTY, NO_PFN, PRESENT, TOUCHED};
use super::kernel::Kernel;
// Through the os re-export, wherever the configuration types live.
use super::AllocMode;
use serde::Serialize;

/// Why the kernel refused a huge mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    NoMemory,
    Budget,
    Ineligible,
    AlreadyHuge,
    /// Collapse in place only: the base pages are not all mapped, or their
    /// frames are not one naturally aligned physical extent.
    NotContiguous,
}

impl Refusal {
    pub(super) fn count(self, f: &mut super::metrics::Failures) {
        match self {
            Refusal::NoMemory => f.no_memory += 1,
            Refusal::Budget => f.budget += 1,
            Refusal::Ineligible => f.ineligible += 1,
            Refusal::AlreadyHuge => f.already_huge += 1,
            // Counted with the ineligible ranges: the failure counters of the
            // result keep their fields (a range that cannot be collapsed in
            // place is one the mechanism is not eligible for).
            Refusal::NotContiguous => f.ineligible += 1,
        }
    }
}


impl Kernel {
    /// Check a huge mapping of size index `size` at `start` could be made.
    pub(super) fn check_huge(&self, pid: u16, start: u64, size: usize) -> std::result::Result<(usize, bool), Refusal> {
        let len = self.geo.sizes[size];
        if size == 0 || start % len != 0 {
            return Err(Refusal::Ineligible);
        }
        // direct segments: never a huge page over memory a segment translates.
        if self.segments.overlaps(pid, start, start + len) {
            return Err(Refusal::Ineligible);
        }
        // FHPM: a leaf mapped through its companion page is left alone until
        // restored (spec §11: no remap while stage 2 holds the PDE).
        if !self.companions.is_empty() && self.companions.contains(pid, start & !(self.region_bytes() - 1)) {
            return Err(Refusal::Ineligible);
        }
        let sp = self.spaces.get(pid as usize).ok_or(Refusal::Ineligible)?;
        let vi = sp.find(start).ok_or(Refusal::Ineligible)?;
        let v = &sp.vmas[vi];
        if !v.covers(start, len) {
            return Err(Refusal::Ineligible);
        }
        let bs = self.shape.base_shift;
        let (a, n) = (v.page_index(start, bs), (len >> bs) as usize);
        let flags = &v.flags[a..a + n];
        if flags.iter().all(|&f| f & PRESENT != 0 && size_of_flags(f) == size) {
            return Err(Refusal::AlreadyHuge);
        }
        // Huge bytes already inside the range are replaced, not added.
        let inside: u64 = flags.iter().filter(|&&f| f & PRESENT != 0 && size_of_flags(f) > 0).count() as u64 * (1 << bs);
        if let Some(b) = self.budget_bytes {
            if self.huge_total - inside + len > b {
                return Err(Refusal::Budget);
            }
        }
        // page sharing: a range holding a merged page is not collapsed
        // (khugepaged skips KSM pages; FHPM §5).
        if self.sharing.is_some() && self.range_merged(pid, start, len) {
            return Err(Refusal::Ineligible);
        }
        let empty = flags.iter().all(|&f| f & PRESENT == 0);
        Ok((vi, empty))
    }

    /// Install a huge leaf of size index `size` at `start` (aligned, inside a
    /// VMA), backed by a newly allocated block: present base pages are copied,
    /// absent ones zeroed, replaced frames freed; queues the shootdown.
    pub(super) fn install_huge(&mut self, pid: u16, vi: usize, start: u64, size: usize, mode: AllocMode) -> std::result::Result<(), Refusal> {
        let bs = self.shape.base_shift;
        let len = self.geo.sizes[size];
        let order = self.geo.shifts[size] - bs;
        let owner = Self::owner(pid, start, bs);
        let block = self.alloc_block(order, mode, owner).ok_or(Refusal::NoMemory)?;
        // Compaction may have moved this process's pages: re-read the VMA.
        let rs = self.shape.region_shift;
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        let a = v.page_index(start, bs);
        let n = (len >> bs) as usize;
        let (mut copied, mut zeroed, mut replaced_huge) = (0u64, 0u64, 0u64);
        let mut freed: Vec<(u64, u32)> = Vec::new();
        let mut split_frames: Vec<u64> = Vec::new();
        let mut i = 0;
        while i < n {
            let f = v.flags[a + i];
            if f & PRESENT == 0 {
                zeroed += 1;
                i += 1;
                continue;
            }
            let s = size_of_flags(f);
            if s == 0 {
                copied += 1;
                // A frame of a block split while partly freed belongs to that
                // block, which stays allocated as one unit: not ours to free
                // (the block is, once no page maps it: below).
                let p = v.pfn.get(a + i);
                if p != NO_PFN && !v.leaked(a + i) {
                    freed.push((p as u64, 0));
                } else if p != NO_PFN {
                    split_frames.push(p as u64);
                }
                i += 1;
            } else {
                // A smaller huge leaf inside (1GB over 2MB pages, or Navarro's
                // intermediate sizes): free its block once.
                let pages = 1usize << (self.geo.shifts[s] - bs);
                copied += pages as u64;
                replaced_huge += (pages as u64) << bs;
                freed.push((v.pfn.get(a + i) as u64, self.geo.shifts[s] - bs));
                i += pages;
            }
        }
        for j in 0..n {
            v.pfn.set(a + j, (block + j as u64) as u32);
            let keep = v.flags[a + j] & (TOUCHED | ACCESSED | DIRTY);
            v.flags[a + j] = PRESENT | keep | ((size as u8) << aspace::SIZE_SHIFT);
        }
        // A remapped region's PMD accessed bit restarts (re-arms the PCC filter).
        let (r0, r1) = (v.region_index(start, rs), v.region_index(start + len - 1, rs));
        for r in r0..=r1 {
            v.pmd_a[r] = false;
        }
        let freed_frames: u64 = freed.iter().map(|&(_, o)| 1u64 << o).sum();
        sp.frames_held = sp.frames_held + (1u64 << order) - freed_frames;
        sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        sp.huge_bytes[size] += len;
        for j in 1..8 {
            // subtract replaced smaller huge leaves (attributed by bytes)
            if j != size && replaced_huge > 0 && sp.huge_bytes[j] > 0 {
                let d = replaced_huge.min(sp.huge_bytes[j]);
                sp.huge_bytes[j] -= d;
                replaced_huge -= d;
            }
        }
        for (p, o) in freed {
            self.phys.free(p, o);
        }
        self.release_split_blocks(&split_frames);
        self.huge_total = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        self.peak_huge_total = self.peak_huge_total.max(self.huge_total);
        self.stats.pages_copied += copied;
        self.stats.pages_zeroed += zeroed;
        self.charge_us(copied as f64 * self.costs.copy_base_page_us + zeroed as f64 * self.costs.zero_base_page_us);
        if copied > 0 {
            // Only a range that had translations can be cached anywhere.
            self.shootdown(pid, start, start + len);
        }
        Ok(())
    }

    /// Promote (collapse) the aligned range at `start` to one huge leaf of size
    /// index `size`. Goes through the budget, the allocator and compaction.
    pub fn promote(&mut self, pid: u16, start: u64, size: usize, mode: AllocMode) -> std::result::Result<(), Refusal> {
        let r = self.check_huge(pid, start, size).and_then(|(vi, _)| self.install_huge(pid, vi, start, size, mode));
        match r {
            Ok(()) => {
                self.stats.promotions += 1;
                self.record_plan(self.acting, pid, start, size);
            }
            Err(e) => e.count(&mut self.stats.promotion_failures),
        }
        r
    }

    /// Count `n` promotion attempts refused as ineligible without making them:
    /// what `promote` would record for addresses outside every VMA, where it
    /// has no other effect (a plan range over unmapped space).
    pub fn count_ineligible_promotions(&mut self, n: u64) {
        self.stats.promotion_failures.ineligible += n;
    }

    /// Demote (split) the huge leaf covering `addr` into base-page leaves.
    /// All its base pages stay mapped (Linux keeps the folio PTE-mapped).
    pub fn demote(&mut self, pid: u16, addr: u64) -> bool {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return false };
        let Some(vi) = sp.find(addr) else { return false };
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(addr, bs);
        let f = v.flags[pi];
        let s = size_of_flags(f);
        if f & PRESENT == 0 || s == 0 {
            return false;
        }
        // page sharing: a merged huge page is one shared block; it is not
        // split under its other mappers (os/ksm.rs).
        if v.content.get(pi).is_some_and(|&w| w & super::content::MERGED != 0) {
            return false;
        }
        let len = self.geo.sizes[s];
        let start = addr & !(len - 1);
        let a = v.page_index(start, bs);
        let n = (len >> bs) as usize;
        let block = v.pfn.get(a) as u64;
        for j in 0..n {
            v.flags[a + j] &= !aspace::SIZE_MASK;
        }
        sp.huge_bytes[s] -= len;
        let order = self.geo.shifts[s] - bs;
        self.phys.split(block, order);
        for j in 0..n {
            self.phys.set_owner(block + j as u64, Self::owner(pid, start + ((j as u64) << bs), bs));
        }
        self.huge_total -= len;
        self.stats.demotions += 1;
        self.charge_us(self.costs.split_us);
        self.shootdown(pid, start, start + len);
        true
    }

    /// Utilization-based demotion (Ingens §4.3, ingens.md 2.6): split the
    /// huge leaf covering `addr` and free each of its base pages for which
    /// `keep(j)` (j = page index inside the leaf) is false: those go back to
    /// the allocator as single frames (fragmenting the block, as the paper
    /// says) and are unmapped. Returns the pages freed, or None if no huge
    /// leaf maps `addr`.
    pub fn split_and_reclaim(&mut self, pid: u16, addr: u64, keep: &dyn Fn(usize) -> bool) -> Option<u64> {
        let (bs, rs) = (self.shape.base_shift, self.shape.region_shift);
        let (vi, start, n) = {
            let sp = self.spaces.get(pid as usize)?;
            let vi = sp.find(addr)?;
            let v = &sp.vmas[vi];
            let f = v.flags[v.page_index(addr, bs)];
            let s = size_of_flags(f);
            if f & PRESENT == 0 || s == 0 {
                return None;
            }
            let len = self.geo.sizes[s];
            (vi, addr & !(len - 1), (len >> bs) as usize)
        };
        if !self.demote(pid, addr) {
            return None;
        }
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        let a = v.page_index(start, bs);
        let mut freed = Vec::new();
        for j in (0..n).filter(|&j| !keep(j)) {
            let i = a + j;
            v.untouch(i, start + ((j as u64) << bs), rs, &mut sp.touched_pages, &mut sp.full);
            freed.push(v.pfn.get(i) as u64);
            v.flags[i] = 0;
            v.pfn.set(i, NO_PFN);
        }
        sp.frames_held -= freed.len() as u64;
        for &p in &freed {
            self.phys.free(p, 0);
        }
        // demote() queued the shootdown of the whole range.
        Some(freed.len() as u64)
    }

    /// The end of Linux's deferred split: a huge page split while partly
    /// freed keeps its block allocated as one unit until its last page is
    /// unmapped, and is then freed whole (the folio's refcount drops to
    /// zero). `frames` are frames of such blocks just unmapped or replaced;
    /// each block no page maps any more is freed. (Linux also splits these
    /// blocks under memory pressure, freeing their unmapped pages; the model
    /// has no reclaim and does not.)
    pub(super) fn release_split_blocks(&mut self, frames: &[u64]) {
        let bs = self.shape.base_shift;
        let mut seen: Vec<u64> = Vec::new();
        for &pfn in frames {
            let Some(b) = self.phys.allocated_block(pfn) else { continue };
            if b.order == 0 || seen.contains(&b.pfn) {
                continue;
            }
            seen.push(b.pfn);
            // The block's owner tag names the process and the address it was
            // mapped at (moves by compaction carry the tag along).
            let (pid, va) = ((b.owner >> super::kernel::OWNER_PID_SHIFT) as u16, (b.owner & ((1 << super::kernel::OWNER_PID_SHIFT) - 1)) << bs);
            let n = 1u64 << b.order;
            let Some(sp) = self.spaces.get_mut(pid as usize) else { continue };
            let mapped = (0..n).any(|j| {
                let a = va + (j << bs);
                sp.find(a).is_some_and(|vi| {
                    let v = &sp.vmas[vi];
                    let pi = v.page_index(a, bs);
                    v.flags[pi] & PRESENT != 0 && v.leaked(pi) && (v.pfn.get(pi) as u64).wrapping_sub(b.pfn) < n
                })
            });
            if !mapped {
                sp.frames_held -= n;
                self.phys.free(b.pfn, b.order);
            }
        }
    }

    /// Split a huge leaf whose block stays allocated as one unit: its pages
    /// become base leaves marked as frames the process cannot free one by one.
    pub(super) fn demote_keeping_frames(&mut self, pid: u16, addr: u64) {
        // A superpage of a reservation is split into its own frames instead:
        // freeing part of it depopulates the reservation (os/reserv.rs).
        if self.reserv.active() {
            self.demote(pid, addr);
            return;
        }
        let bs = self.shape.base_shift;
        let sp = &mut self.spaces[pid as usize];
        let Some(vi) = sp.find(addr) else { return };
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(addr, bs);
        let s = size_of_flags(v.flags[pi]);
        let len = self.geo.sizes[s];
        let start = addr & !(len - 1);
        let a = v.page_index(start, bs);
        for j in 0..(len >> bs) as usize {
            v.flags[a + j] &= !aspace::SIZE_MASK;
            v.mark_leaked(a + j);
        }
        sp.huge_bytes[s] -= len;
        self.huge_total -= len;
        self.stats.demotions += 1;
        self.shootdown(pid, start, start + len);
    }

    /// Collapse in place: install a huge leaf of size index `size` at `start`
    /// over the base pages already there, when their frames are one naturally
    /// aligned physical extent (after a reservation filled it, or after FHPM's
    /// or Navarro's in-place promotion). No frame is allocated, copied or
    /// freed: the small blocks are merged into one (`PhysMem::try_merge`), the
    /// PMD entry is rewritten (charged as a split is: one PMD update) and the
    /// range is shot down. Linux's MADV_COLLAPSE always copies; this is the
    /// path the reservation-based systems take (Navarro §4.4, FHPM).
    pub fn collapse_in_place(&mut self, pid: u16, start: u64, size: usize) -> std::result::Result<(), Refusal> {
        let r = self.try_collapse_in_place(pid, start, size);
        match r {
            Ok(()) => {
                self.stats.promotions += 1;
                self.stats.in_place_collapses += 1;
                self.record_plan(self.acting, pid, start, size);
            }
            Err(e) => e.count(&mut self.stats.promotion_failures),
        }
        r
    }

    /// Whether the range at `start` could be collapsed in place now (its
    /// base pages' frames are one aligned extent), without trying: a policy
    /// that prefers in-place promotion (Ingens §5.1) asks before choosing.
    pub fn can_collapse_in_place(&self, pid: u16, start: u64, size: usize) -> bool {
        match self.check_huge(pid, start, size) {
            Ok((vi, _)) => self.contiguous_frames(pid, vi, start, size).is_some(),
            Err(_) => false,
        }
    }

    /// The first frame, if every page of the range is mapped by a base leaf
    /// of its own frame (a frame of a split block held as one unit is not the
    /// process's to merge), frame first + j for page j, and the extent is
    /// aligned to the huge order.
    fn contiguous_frames(&self, pid: u16, vi: usize, start: u64, size: usize) -> Option<u64> {
        let bs = self.shape.base_shift;
        let order = self.geo.shifts[size] - bs;
        let v = &self.spaces[pid as usize].vmas[vi];
        let a = v.page_index(start, bs);
        let n = (self.geo.sizes[size] >> bs) as usize;
        let first = v.pfn.get(a);
        let contiguous = first != NO_PFN
            && (first as u64).is_multiple_of(1u64 << order)
            && (0..n).all(|j| {
                let f = v.flags[a + j];
                // Smaller leaves of the same extent are welcome (Navarro's
                // incremental promotion: 64KB leaves -> 512KB, no copy).
                f & PRESENT != 0 && size_of_flags(f) < size && !v.leaked(a + j) && v.pfn.get(a + j) as u64 == first as u64 + j as u64
            });
        contiguous.then_some(first as u64)
    }

    fn try_collapse_in_place(&mut self, pid: u16, start: u64, size: usize) -> std::result::Result<(), Refusal> {
        let (vi, _) = self.check_huge(pid, start, size)?;
        let bs = self.shape.base_shift;
        let len = self.geo.sizes[size];
        let order = self.geo.shifts[size] - bs;
        let rs = self.shape.region_shift;
        let owner = Self::owner(pid, start, bs);
        let Some(first) = self.contiguous_frames(pid, vi, start, size) else {
            return Err(Refusal::NotContiguous);
        };
        let (a, n) = (self.spaces[pid as usize].vmas[vi].page_index(start, bs), (len >> bs) as usize);
        if self.phys.try_merge(first, order, owner).is_err() {
            return Err(Refusal::NotContiguous);
        }
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        // Smaller superpages inside are replaced: their bytes leave their size.
        let mut replaced = [0u64; 8];
        for j in 0..n {
            replaced[size_of_flags(v.flags[a + j])] += 1 << bs;
            let keep = v.flags[a + j] & (TOUCHED | ACCESSED | DIRTY);
            v.flags[a + j] = PRESENT | keep | ((size as u8) << aspace::SIZE_SHIFT);
        }
        // A remapped region's PMD accessed bit restarts, as after a copy.
        let (r0, r1) = (v.region_index(start, rs), v.region_index(start + len - 1, rs));
        for r in r0..=r1 {
            v.pmd_a[r] = false;
        }
        let inside: u64 = replaced[1..].iter().sum();
        for (t, b) in replaced.iter().enumerate().skip(1) {
            sp.huge_bytes[t] -= b;
        }
        sp.huge_bytes[size] += len;
        self.huge_total = self.huge_total + len - inside;
        self.peak_huge_total = self.peak_huge_total.max(self.huge_total);
        self.charge_us(self.remap_cost_us(size));
        self.shootdown(pid, start, start + len);
        Ok(())
    }
}

impl Kernel {
    /// The cost of rewriting the page table for a leaf of size index `size`
    /// (promotion or demotion): one PMD/PUD entry (charged as a split, as
    /// before) when the size has a level of its own; one write per base PTE
    /// when the size is made of replicated PTEs at the base level (Alpha's
    /// granularity hint, Navarro §3.5, §6.7).
    pub(super) fn remap_cost_us(&self, size: usize) -> f64 {
        if size > 0 && self.geo.leaf_level[size] == self.geo.leaf_level[0] {
            (self.geo.sizes[size] >> self.shape.base_shift) as f64 * self.costs.pte_write_us
        } else {
            self.costs.split_us
        }
    }

    /// Demotion along a path (Navarro §4.6, ref §4): split the superpage
    /// holding `addr` one level down and recurse only into the child that
    /// holds `addr`, so a 4MB superpage on Alpha leaves 7 x 512KB + 7 x 64KB +
    /// 7 x 8KB leaves plus the page itself. The levels are the reservation
    /// ladder's sizes when reservations run, else every smaller page size.
    /// The daemon calls this for eviction, the write-protect trap for the
    /// first write to a clean superpage. False if no superpage maps `addr`.
    pub fn demote_path(&mut self, pid: u16, addr: u64) -> bool {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get(pid as usize) else { return false };
        let Some(vi) = sp.find(addr) else { return false };
        let f = sp.vmas[vi].flags[sp.vmas[vi].page_index(addr, bs)];
        let s = size_of_flags(f);
        if f & PRESENT == 0 || s == 0 {
            return false;
        }
        let len = self.geo.sizes[s];
        let start = addr & !(len - 1);
        // Siblings of a clean write-protected superpage stay clean and protected.
        let protected = self.is_protected(pid, start, s);
        self.protect(pid, start, s, false);
        let steps: Vec<usize> = (1..s).rev().filter(|&t| self.reserv.ladder_has(t)).collect();
        // First every page its own base leaf and frame (as `demote`), then
        // the siblings off the path merged back one size at a time.
        let (a, n) = (self.spaces[pid as usize].vmas[vi].page_index(start, bs), (len >> bs) as usize);
        let block = self.spaces[pid as usize].vmas[vi].pfn.get(a) as u64;
        {
            let sp = &mut self.spaces[pid as usize];
            for g in &mut sp.vmas[vi].flags[a..a + n] {
                *g &= !aspace::SIZE_MASK;
            }
            sp.huge_bytes[s] -= len;
        }
        self.huge_total -= len;
        self.phys.split(block, self.geo.shifts[s] - bs);
        for j in 0..n as u64 {
            self.phys.set_owner(block + j, Self::owner(pid, start + (j << bs), bs));
        }
        let (mut cur, mut cur_len) = (start, len);
        for &t in &steps {
            let cl = self.geo.sizes[t];
            let keep = addr & !(cl - 1);
            let order = self.geo.shifts[t] - bs;
            let mut c = cur;
            while c < cur + cur_len {
                if c != keep {
                    let ca = a + ((c - start) >> bs) as usize;
                    let first = block + ((c - start) >> bs);
                    if self.phys.try_merge(first, order, Self::owner(pid, c, bs)).is_ok() {
                        let sp = &mut self.spaces[pid as usize];
                        for g in &mut sp.vmas[vi].flags[ca..ca + (cl >> bs) as usize] {
                            *g |= (t as u8) << aspace::SIZE_SHIFT;
                        }
                        sp.huge_bytes[t] += cl;
                        self.huge_total += cl;
                        self.protect(pid, c, t, protected);
                    }
                }
                c += cl;
            }
            cur = keep;
            cur_len = cl;
        }
        let levels = steps.len() as u64 + 1;
        self.stats.demotions += levels;
        // Replicated PTEs: every base PTE of the range is rewritten once;
        // a size with its own level: one table rebuilt per level split.
        let cost = if self.geo.leaf_level[s] == self.geo.leaf_level[0] { self.remap_cost_us(s) } else { levels as f64 * self.costs.split_us };
        self.charge_us(cost);
        self.shootdown(pid, start, start + len);
        true
    }
}
