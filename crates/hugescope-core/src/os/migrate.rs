//! Compaction and migration (Linux: mm/compaction.c chooses what to move,
//! mm/migrate.c moves it). The physical allocator picks the pages
//! (`phys::PhysMem::compact`); this file applies each move to the page table
//! of the process that owns the page, and allocates huge blocks with direct
//! compaction when the allocation mode allows it.

use super::kernel::{Kernel, OWNER_PID_SHIFT};
// Through the os re-export, wherever the configuration types live.
use super::AllocMode;
use super::phys::{CompactResult, Migration, Mobility, PhysMem, FRAG_OWNER};

impl Kernel {
    /// Allocate a naturally aligned block of `order`, compacting if allowed.
    pub(super) fn alloc_block(&mut self, order: u32, mode: AllocMode, owner: u64) -> Option<u64> {
        if let Some(p) = self.phys.alloc(order, Mobility::Movable, owner) {
            return Some(p);
        }
        if self.compact_defer.is_some() {
            return self.alloc_block_deferring(order, mode, owner); // os/compact_defer.rs
        }
        let AllocMode::Compact { max_pages } = mode else { return None };
        self.compact(order, max_pages);
        self.phys.alloc(order, Mobility::Movable, owner)
    }

    /// Compaction: migrate movable pages until a free block of `order` exists
    /// or `max_pages` pages moved. Every moved page of a process is remapped
    /// and shot down. Returns whether a block of that order is now free.
    pub fn compact(&mut self, order: u32, max_pages: u64) -> bool {
        self.compact_with(|pm, on_move| pm.compact(order, max_pages, on_move)).success
    }

    /// Proactive compaction (Ingens §4.4, ingens.md 2.7): empty blocks of
    /// `order` until the free memory fragmentation index at the PMD order is
    /// at most `target_fmfi`, migrating at most `max_pages` base pages.
    /// `can_move(pid, va, order)` may veto a process's block (Ingens never
    /// moves frequently accessed pages); a candidate holding a vetoed block is
    /// skipped whole, so a vetoed page never moves. Pages of no process (the
    /// fragmenter's) may always move.
    pub fn compact_proactive(&mut self, order: u32, max_pages: u64, target_fmfi: f64, can_move: &mut dyn FnMut(u16, u64, u32) -> bool) -> CompactResult {
        let bs = self.shape.base_shift;
        let fmfi_order = self.shape.region_shift - bs;
        self.compact_with(|pm, on_move| {
            pm.compact_until(
                order,
                max_pages,
                &mut |pm| pm.fmfi(fmfi_order) <= target_fmfi,
                &mut |_, o, owner| {
                    let (pid, va) = ((owner >> OWNER_PID_SHIFT) as u16, (owner & ((1 << OWNER_PID_SHIFT) - 1)) << bs);
                    owner == FRAG_OWNER || can_move(pid, va, o)
                },
                on_move,
            )
        })
    }

    /// One compaction run by the physical allocator (`run` chooses and moves
    /// blocks), then the kernel's side: statistics, the migration cost, and
    /// every moved page of a process remapped and shot down.
    fn compact_with(&mut self, run: impl FnOnce(&mut PhysMem, &mut dyn FnMut(Migration)) -> CompactResult) -> CompactResult {
        let mut moves = std::mem::take(&mut self.scratch);
        moves.clear();
        let r = run(&mut self.phys, &mut |m| moves.push(m));
        self.stats.compactions += 1;
        self.stats.compaction_successes += r.success as u64;
        self.stats.compaction_migrated_pages += r.migrated_pages;
        self.charge_us(r.migrated_pages as f64 * self.costs.migrate_base_page_us);
        if !r.success {
            // The scanners crossed memory without producing the goal.
            self.charge_us(self.costs.compact_fail_us);
        }
        for m in moves.drain(..) {
            self.apply_migration(m);
        }
        self.scratch = moves;
        r
    }

    fn apply_migration(&mut self, m: Migration) {
        if let Some((pid, start, end)) = self.remap_migrated(m) {
            self.shootdown(pid, start, end);
        }
    }

    /// The page-table side of a moved block: the pages of its owner still
    /// mapped to it follow it to its new frames. Returns the virtual range to
    /// shoot down (None: no process maps the block). Shared by compaction
    /// (one shootdown per block) and tier migration (`os/tier.rs`: one
    /// batched shootdown per placement).
    pub(super) fn remap_migrated(&mut self, m: Migration) -> Option<(u16, u64, u64)> {
        if m.owner == FRAG_OWNER {
            return None; // the fragmenter's own pages: no process maps them
        }
        // page sharing: a shared frame is remapped in every mapper.
        if self.sharing.is_some() && self.ksm_migrated(m.from, m.to) {
            return None; // ksm_migrated shot down every mapper itself
        }
        let pid = (m.owner >> OWNER_PID_SHIFT) as u16;
        let bs = self.shape.base_shift;
        let va = (m.owner & ((1 << OWNER_PID_SHIFT) - 1)) << bs;
        let sp = self.spaces.get_mut(pid as usize)?;
        let vi = sp.find(va)?;
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(va, bs);
        let n = 1usize << m.order;
        // Only pages still mapped to the moved block follow it: a page freed
        // and faulted again since has a frame of its own.
        for i in 0..n.min(v.pfn.len() - pi) {
            if v.pfn.get(pi + i) as u64 == m.from + i as u64 {
                v.pfn.set(pi + i, (m.to + i as u64) as u32);
            }
        }
        // A migrated page's PMD accessed bit restarts (PCC filter re-arms).
        let ri = v.region_index(va, self.shape.region_shift);
        v.pmd_a[ri] = false;
        Some((pid, va, va + ((n as u64) << bs)))
    }
}
