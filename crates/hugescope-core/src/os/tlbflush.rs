//! TLB shootdowns (Linux: arch/x86/mm/tlb.c, flush_tlb_mm_range). Every
//! remap or unmap queues the virtual range here; the simulator's MMUs drain
//! the queue before the next access (`PageTable::take_shootdowns`), so no TLB
//! keeps a stale entry. A shootdown also invalidates the range in every PCC
//! (PCC §3.3 step C) and charges the IPI cost to the program's critical path.

use super::kernel::Kernel;
use crate::hw::Shootdown;

impl Kernel {
    /// Run `f` with every shootdown it queues marked `keeps_mapping`: the
    /// remaps it makes install their successors eagerly (FHPM's VM-friendly
    /// split and collapse, §4.5), so a hypervisor model refills its EPT
    /// instead of zapping it. Nests; restores the previous setting.
    pub fn with_eager_refill<R>(&mut self, f: impl FnOnce(&mut Kernel) -> R) -> R {
        let was = std::mem::replace(&mut self.keep_mappings, true);
        let r = f(self);
        self.keep_mappings = was;
        r
    }

    pub(super) fn shootdown(&mut self, pid: u16, start: u64, end: u64) {
        self.shootdown_batch(pid, &[(start, end)]);
    }

    /// A batch of invalidations sent with one round of IPIs (Linux's
    /// mmu_gather / flush_tlb_range batching): every range leaves the TLBs and
    /// PCCs, one shootdown cost is charged.
    pub(super) fn shootdown_batch(&mut self, pid: u16, ranges: &[(u64, u64)]) {
        if ranges.is_empty() {
            return;
        }
        for &(start, end) in ranges {
            self.pending.push(Shootdown { pid, start, end, keeps_mapping: self.keep_mappings, vm: 0 });
            // Any shootdown of a region invalidates its PCC entries on every
            // cpu (PCC §3.3 step C; pcc.md §3.6).
            for p in self.pccs.get().iter_mut() {
                p.invalidate(pid, start, end);
            }
            self.invalidate_riding(pid, start, end);
        }
        self.stats.shootdowns += 1;
        // IPIs interrupt the program's cpus: on the critical path even when
        // a daemon sent them, except while the program sets up its data
        // (`populate`: e.g. reservations promoting in place as set-up fills
        // them), whose costs all go to set-up time.
        if self.in_setup {
            self.clock.os_setup_seconds += self.costs.shootdown_us * 1e-6;
        } else {
            self.clock.charge_sync(self.costs.shootdown_us * 1e-6);
        }
    }
}
