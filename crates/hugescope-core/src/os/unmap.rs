//! Unmapping (Linux: mm/memory.c unmap_page_range via munmap and
//! MADV_DONTNEED, zap_pte_range): the program released a range; its frames go
//! back to the allocator and the range is shot down.

use super::aspace::{size_of_flags, NO_PFN, PRESENT};
use super::kernel::Kernel;

impl Kernel {
    /// The program freed [start, start + len) (munmap or MADV_DONTNEED of
    /// whole pages). Base pages return to the allocator; a huge page wholly
    /// inside is freed; a huge page partly inside is split and keeps its frames
    /// (Linux defers the split of the folio to memory pressure, which is where
    /// the bloat of Ingens §3.2 comes from).
    ///
    /// Under a policy that defers demotion (`Policy::keeps_huge_on_free`:
    /// Ingens §4.3) a huge page partly inside the range stays mapped, whole:
    /// its frames stay held and its freed pages stop counting as used (they
    /// leave the base-page RSS the bloat metric divides by); the policy's
    /// `on_free` then decides whether to demote it.
    pub fn free_range(&mut self, pid: u16, start: u64, len: u64) {
        let bs = self.shape.base_shift;
        let rs = self.shape.region_shift;
        let mask = (1u64 << bs) - 1;
        let (start, end) = ((start + mask) & !mask, (start + len) & !mask);
        if end <= start || pid as usize >= self.spaces.len() {
            return;
        }
        self.stats.frees += 1;
        self.stats.freed_bytes += end - start;
        // FHPM: a redirected leaf is restored before its range changes (§4.3).
        if !self.companions.is_empty() {
            self.restore_companions_in(pid, start, end);
        }
        // page sharing: merged pages leave their shared frames first.
        if self.sharing.is_some() {
            self.ksm_unmap_range(pid, start, end);
        }
        // First split huge leaves that straddle the range boundaries (or,
        // under a deferring policy, keep them whole).
        let mut kept: Vec<(u64, u64)> = Vec::new();
        for edge in [start, end - 1] {
            let sp = &self.spaces[pid as usize];
            if let Some(vi) = sp.find(edge) {
                let v = &sp.vmas[vi];
                let f = v.flags[v.page_index(edge, bs)];
                let s = size_of_flags(f);
                if f & PRESENT != 0 && s > 0 {
                    let l = self.geo.sizes[s];
                    let hs = edge & !(l - 1);
                    if (hs < start || hs + l > end) && self.keep_huge_on_free {
                        kept.push((hs, hs + l));
                    } else if hs < start || hs + l > end {
                        self.demote_keeping_frames(pid, edge);
                    }
                }
            }
        }
        let mut to_free: Vec<(u64, u32)> = Vec::new();
        let mut split_frames: Vec<u64> = Vec::new();
        let sp = &mut self.spaces[pid as usize];
        for v in sp.vmas.iter_mut() {
            let lo = start.max(v.start);
            let hi = end.min(v.end);
            if lo >= hi {
                continue;
            }
            let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
            let mut i = a;
            while i < b {
                let va = v.start + ((i as u64) << bs);
                if kept.iter().any(|&(ks, ke)| va >= ks && va < ke) {
                    // A page of a huge leaf that stays mapped: freed by the
                    // program, so no longer used, but still resident.
                    v.untouch(i, va, rs, &mut sp.touched_pages, &mut sp.full);
                    i += 1;
                    continue;
                }
                let f = v.flags[i];
                let s = size_of_flags(f);
                let pages = if f & PRESENT != 0 && s > 0 { 1usize << (self.geo.shifts[s] - bs) } else { 1 };
                if f & PRESENT != 0 {
                    let p = v.pfn.get(i);
                    if s > 0 {
                        to_free.push((p as u64, self.geo.shifts[s] - bs));
                        sp.huge_bytes[s] -= (pages as u64) << bs;
                        sp.frames_held -= pages as u64;
                    } else if p != NO_PFN && !v.leaked(i) {
                        to_free.push((p as u64, 0));
                        sp.frames_held -= 1;
                    } else if p != NO_PFN {
                        split_frames.push(p as u64);
                    }
                }
                for j in i..i + pages {
                    let va = v.start + ((j as u64) << bs);
                    v.untouch(j, va, rs, &mut sp.touched_pages, &mut sp.full);
                    v.flags[j] = 0;
                    v.pfn.set(j, NO_PFN);
                }
                i += pages;
            }
        }
        // Frames inside a reservation stay reserved (os/reserv.rs).
        self.release_frames(to_free);
        self.release_split_blocks(&split_frames);
        self.huge_total = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        self.shootdown(pid, start, end);
    }
}
