//! The OS side of direct segments (Basu et al., ISCA'13, §3.2 and §4;
//! reference §3, §4 and the §9 defaults): a primary region per process,
//! backed by contiguous physical memory the kernel takes for it, and the
//! three mechanisms that change a segment:
//!
//! - `create`: take min(requested, largest free contiguous chunk) frames
//!   (partial coverage, §9.4) by boot-time reservation (free, the default) or
//!   compaction (charged 0.3 s/GB, §4.2), and set the registers;
//! - `grow`: extend the segment in place when the frames right after it are
//!   free (§9.5): copy the paged data of the newly covered range into them,
//!   set the registers, drop the old PTEs and shoot them down (§9.8);
//! - `revert`: install PTEs over the segment's own frames (2MB where VA and
//!   PA are congruent modulo 2MB, else 4KB), clear the registers, then shoot
//!   down (§4.3 "shrink/revert").
//!
//! The registers reach the hardware (`hw::segment::Segments`) as updates the
//! simulator applies before the shootdowns queued with them.

use super::aspace::{AddressSpace, NO_PFN, PRESENT, SIZE_SHIFT};
use super::kernel::Kernel;
use super::phys::{Mobility, PhysMem};
use crate::hw::segment::{DirectSegment, ProcessSegment};
use crate::trace::Region;

/// How the segment's physical memory is obtained (reference §4, §9.6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Provision {
    /// Removed from the kernel's control at boot (the prototype's memory
    /// hotplug): no run-time cost. The run's fragmentation stands for what
    /// boot found, so a fragmented machine still gets partial coverage.
    Boot,
    /// Made contiguous by compaction when the segment is created, charged
    /// `seconds_per_gb` per GB covered (paper §4.2: about 3 s per 10GB).
    Compaction { seconds_per_gb: f64 },
}

/// One process's segment as the OS keeps it (its PCB copy of the registers
/// and the frames backing them).
#[derive(Clone, Debug)]
struct Held {
    desc: ProcessSegment,
    /// First frame of the backing memory; the segment holds
    /// `[pfn, pfn + frames)`, allocated as naturally aligned blocks.
    pfn: u64,
    frames: u64,
}

/// Every process's primary region and segment, and the register updates
/// not yet handed to the hardware.
#[derive(Clone, Debug, Default)]
pub struct SegmentTable {
    regions: Vec<Region>,
    held: Vec<Option<Held>>,
    updates: Vec<ProcessSegment>,
}

impl SegmentTable {
    pub fn new(regions: &[Region]) -> SegmentTable {
        SegmentTable { regions: regions.to_vec(), ..Default::default() }
    }

    /// Whether `pid`'s segment translates any of [start, end). Kept cheap:
    /// the promotion path asks it for every huge page.
    #[inline]
    pub fn overlaps(&self, pid: u16, start: u64, end: u64) -> bool {
        match self.held.get(pid as usize) {
            Some(Some(h)) => h.desc.regs.is_enabled() && start < h.desc.regs.limit && h.desc.regs.base < end,
            _ => false,
        }
    }

    /// `pid`'s registers (disabled if it has no segment).
    pub fn segment(&self, pid: u16) -> DirectSegment {
        self.get(pid).map_or(DirectSegment::DISABLED, |h| h.desc.regs)
    }

    /// `pid`'s primary region [start, end) (empty if none).
    pub fn primary(&self, pid: u16) -> (u64, u64) {
        self.get(pid).map_or_else(|| ProcessSegment::from_regions(pid, &self.regions).primary, |h| h.desc.primary)
    }

    #[inline]
    pub fn has_updates(&self) -> bool {
        !self.updates.is_empty()
    }

    pub fn take_updates(&mut self, out: &mut Vec<ProcessSegment>) {
        out.append(&mut self.updates);
    }

    fn get(&self, pid: u16) -> Option<&Held> {
        self.held.get(pid as usize).and_then(|h| h.as_ref())
    }

    fn set(&mut self, h: Held) {
        let pid = h.desc.pid as usize;
        if pid >= self.held.len() {
            self.held.resize(pid + 1, None);
        }
        self.updates.push(h.desc.clone());
        self.held[pid] = Some(h);
    }
}

/// The largest run of free frames: (first frame, length). A linear pass over
/// the frames (allocated blocks skipped whole); run once per segment
/// creation, so its cost does not matter beside the simulation.
fn largest_free_run(phys: &PhysMem) -> (u64, u64) {
    let (mut best, mut p, mut start) = ((0, 0), 0, None);
    let total = phys.total_frames();
    while p < total {
        match phys.allocated_block(p) {
            Some(b) => {
                if let Some(s) = start.take() {
                    best = longer(best, (s, p - s));
                }
                p = b.pfn + (1u64 << b.order);
            }
            None => {
                start.get_or_insert(p);
                p += 1;
            }
        }
    }
    if let Some(s) = start {
        best = longer(best, (s, total - s));
    }
    best
}

fn longer(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    if b.1 > a.1 {
        b
    } else {
        a
    }
}

/// Allocate the free frames [pfn, pfn + n) as naturally aligned blocks of at
/// most `max_order` (the 2MB order: a revert then finds one block under each
/// 2MB PTE it installs), unmovable (compaction must not move memory the
/// registers point at), owned as the pages at `va` would be.
fn take_frames(phys: &mut PhysMem, pid: u16, mut pfn: u64, n: u64, va: u64, bs: u32, max_order: u32) {
    let end = pfn + n;
    while pfn < end {
        let mut o = max_order.min(pfn.trailing_zeros()).min(63 - (end - pfn).leading_zeros());
        while (1u64 << o) > end - pfn {
            o -= 1;
        }
        let at = va + ((pfn + n - end) << bs);
        let got = phys.alloc_at(pfn, o, Mobility::Unmovable, Kernel::owner(pid, at, bs));
        debug_assert_eq!(got, Some(pfn), "segment frames were checked free");
        pfn += 1u64 << o;
    }
}

impl Kernel {
    /// Create `pid`'s segment over its primary region: `requested` bytes (None:
    /// the whole region) or as much as the largest free chunk allows. Returns the
    /// bytes covered (0: no primary region or no free memory; the process runs
    /// paged, and the reason is noted in the result).
    pub fn create_segment(&mut self, pid: u16, requested: Option<u64>, how: Provision) -> u64 {
        let bs = self.shape().base_shift;
        let pmd_order = self.shape().region_shift - bs;
        let mut desc = {
            let (t, _, _, _) = self.segment_parts();
            ProcessSegment::from_regions(pid, &t.regions)
        };
        let (base, end) = desc.primary;
        if end <= base {
            self.note(format!("dseg: pid {pid} has no anonymous region for a primary region; it runs paged"));
            return 0;
        }
        let want = requested.unwrap_or(end - base).min(end - base) >> bs;
        if let Provision::Compaction { .. } = how {
            // Compaction as THP does it, aimed at the largest block the allocator
            // knows; the time charged is the paper's figure, not the migrations'.
            let order = self.phys().max_order();
            self.compact(order, u64::MAX);
        }
        let (_, phys, spaces, _) = self.segment_parts();
        let (run_pfn, run_len) = largest_free_run(phys);
        let frames = want.min(run_len);
        if frames == 0 {
            self.note(format!("dseg: pid {pid}: no free contiguous memory; it runs paged"));
            return 0;
        }
        // Place the backing so PA is congruent to VA modulo 2MB when the run has
        // room: a later revert can then use 2MB PTEs (reference §9.8).
        let ppr = 1u64 << pmd_order;
        let want_mod = (base >> bs) % ppr;
        let shift = (want_mod + ppr - run_pfn % ppr) % ppr;
        let pfn = if run_len - frames >= shift { run_pfn + shift } else { run_pfn };
        take_frames(phys, pid, pfn, frames, base, bs, pmd_order);
        if let Some(sp) = spaces.get_mut(pid as usize) {
            sp.frames_held += frames;
            sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        }
        let covered = frames << bs;
        let pa = pfn << bs;
        desc.regs = DirectSegment::new(base, base + covered, pa.wrapping_sub(base)).expect("page-aligned by construction");
        if let Provision::Compaction { seconds_per_gb } = how {
            desc.compaction_seconds = seconds_per_gb * covered as f64 / (1u64 << 30) as f64;
            self.clock.charge_sync(desc.compaction_seconds);
        }
        if frames < want {
            self.note(format!(
                "dseg: pid {pid}: partial coverage, {} of {} bytes of the primary region (largest free chunk)",
                covered,
                want << bs
            ));
        }
        let (t, _, _, _) = self.segment_parts();
        t.set(Held { desc, pfn, frames });
        covered
    }

    /// Tell the hardware `pid`'s primary region without giving it a segment, so
    /// the run counts the walks a segment would have removed (f_DS).
    pub fn account_segment(&mut self, pid: u16) {
        let (t, _, _, _) = self.segment_parts();
        let desc = ProcessSegment::from_regions(pid, &t.regions);
        if desc.primary_bytes() > 0 {
            t.set(Held { desc, pfn: 0, frames: 0 });
        }
    }

    /// Grow `pid`'s segment in place over free frames right after its backing,
    /// up to the end of the primary region, stopping at the first huge page the
    /// policy beside it made (that memory stays paged). Returns the bytes added.
    pub fn grow_segment(&mut self, pid: u16) -> u64 {
        let bs = self.shape().base_shift;
        let pmd_order = self.shape().region_shift - bs;
        let (t, phys, spaces, costs) = self.segment_parts();
        let Some(h) = t.get(pid).cloned() else { return 0 };
        if !h.desc.regs.is_enabled() {
            return 0;
        }
        let (limit, pend) = (h.desc.regs.limit, h.desc.primary.1);
        let mut n = 0u64;
        let sp = spaces.get(pid as usize);
        while limit + (n << bs) < pend && phys.allocated_block(h.pfn + h.frames + n).is_none() && h.pfn + h.frames + n < phys.total_frames() {
            let va = limit + (n << bs);
            if huge_at(sp, va, bs) {
                break;
            }
            n += 1;
        }
        if n == 0 {
            return 0;
        }
        take_frames(phys, pid, h.pfn + h.frames, n, limit, bs, pmd_order);
        // The paged data of the newly covered range moves into the segment's
        // frames: copy each present page, free its frame, drop its PTE.
        let mut copied = 0u64;
        if let Some(sp) = spaces.get_mut(pid as usize) {
            sp.frames_held += n;
            for i in 0..n {
                let va = limit + (i << bs);
                let Some(vi) = sp.find(va) else { continue };
                let v = &mut sp.vmas[vi];
                let pi = v.page_index(va, bs);
                if v.flags[pi] & PRESENT != 0 {
                    let p = v.pfn.get(pi);
                    if p != NO_PFN && !v.leaked(pi) {
                        phys.free(p as u64, 0);
                        sp.frames_held -= 1;
                    }
                    v.pfn.set(pi, NO_PFN);
                    v.flags[pi] &= !PRESENT;
                    copied += 1;
                }
            }
            sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        }
        let copy_us = copied as f64 * costs.copy_base_page_us;
        let mut desc = h.desc.clone();
        let added = n << bs;
        desc.regs = DirectSegment::new(desc.regs.base, limit + added, desc.regs.offset).expect("page-aligned by construction");
        t.set(Held { desc, pfn: h.pfn, frames: h.frames + n });
        self.charge_us(copy_us);
        // Registers first (queued above, applied before this), then the stale
        // translations of the newly covered range leave every TLB.
        if copied > 0 {
            self.shootdown(pid, limit, limit + added);
        }
        added
    }
}

fn huge_at(sp: Option<&AddressSpace>, va: u64, bs: u32) -> bool {
    let Some(sp) = sp else { return false };
    let Some(vi) = sp.find(va) else { return false };
    let v = &sp.vmas[vi];
    let f = v.flags[v.page_index(va, bs)];
    f & PRESENT != 0 && super::aspace::size_of_flags(f) > 0
}

impl Kernel {
    /// Revert `pid`'s segment to paging (reference §9.8): PTEs over the
    /// segment's own frames first (one 2MB PTE per 2MB-aligned range whose
    /// physical address is 2MB-aligned too, 4KB PTEs elsewhere), then the
    /// registers are cleared, then a shootdown (the kernel's IPI round, plus
    /// `ipi_us`). Frames backing addresses outside every VMA are freed.
    pub fn revert_segment(&mut self, pid: u16, ipi_us: f64) {
        let bs = self.shape().base_shift;
        let pmd_order = self.shape().region_shift - bs;
        let pmd_size = (0..self.geometry().num_sizes()).find(|&s| self.geometry().shifts[s] == self.shape().region_shift);
        let (t, phys, spaces, _) = self.segment_parts();
        let Some(h) = t.get(pid).cloned() else { return };
        let regs = h.desc.regs;
        if !regs.is_enabled() {
            return;
        }
        let Some(sp) = spaces.get_mut(pid as usize) else { return };
        let ppr = 1u64 << pmd_order;
        let mut i = 0u64;
        while i < h.frames {
            let va = regs.base + (i << bs);
            let pfn = h.pfn + i;
            let vma = sp.find(va);
            // A whole 2MB page: VA and PA 2MB-aligned, all inside the segment and
            // one VMA, and one order-9 block behind it (`take_frames` made it so).
            let whole = pmd_size.is_some()
                && pfn % ppr == 0
                && (va >> bs) % ppr == 0
                && i + ppr <= h.frames
                && vma.is_some_and(|vi| sp.vmas[vi].covers(va, ppr << bs));
            if whole {
                let (s, vi) = (pmd_size.unwrap_or(0), vma.unwrap_or(0));
                let v = &mut sp.vmas[vi];
                let a = v.page_index(va, bs);
                for j in 0..ppr as usize {
                    v.pfn.set(a + j, (pfn + j as u64) as u32);
                    v.flags[a + j] = (v.flags[a + j] & !PRESENT) | PRESENT | ((s as u8) << SIZE_SHIFT);
                }
                sp.huge_bytes[s] += ppr << bs;
                i += ppr;
                continue;
            }
            // A 4KB PTE (or no PTE at all): the frame becomes a block of its own.
            if let Some(b) = phys.allocated_block(pfn) {
                if b.order > 0 {
                    phys.split_to(b.pfn, b.order, 0);
                }
            }
            match vma {
                Some(vi) => {
                    let v = &mut sp.vmas[vi];
                    let a = v.page_index(va, bs);
                    v.pfn.set(a, pfn as u32);
                    v.flags[a] |= PRESENT;
                }
                None => {
                    phys.free(pfn, 0);
                    sp.frames_held -= 1;
                }
            }
            i += 1;
        }
        let mut desc = h.desc.clone();
        desc.regs = DirectSegment::DISABLED;
        t.set(Held { desc, pfn: 0, frames: 0 });
        self.recount_huge();
        self.clock.charge_sync(ipi_us * 1e-6);
        self.shootdown(pid, regs.base, regs.limit);
    }
}
