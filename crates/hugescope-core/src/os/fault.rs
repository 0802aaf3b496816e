//! The fault path (Linux: mm/memory.c, handle_mm_fault -> do_anonymous_page,
//! and do_huge_pmd_anonymous_page in mm/huge_memory.c). A first touch of a
//! base page asks the fault-time policies for a `FaultAction` and carries it
//! out: a huge page around the address if it can be had, else a base page.
//! `populate` runs the same path for data the program set up before the
//! traced phase.

use super::aspace::{DIRTY, NO_PFN, PRESENT};
use super::kernel::Kernel;
use super::phys::Mobility;
use super::hooks::{Fault, FaultAction};
use crate::trace::Access;

impl Kernel {
    #[cold]
    pub(super) fn fault(&mut self, a: &Access, vi: usize, pi: usize) {
        // The handler's time: whatever the fault path charges (to the
        // program, or to setup while populating).
        let before = self.clock.os_sync_seconds + self.clock.os_setup_seconds;
        // page daemon: an evicted page comes back through its own path.
        if self.daemon.is_none() || !self.refault(a.pid, vi, pi) {
            self.fault_path(a, vi, pi);
        }
        if self.daemon.is_some() {
            self.after_fault_pressure();
        }
        self.stats.fault_seconds +=
            self.clock.os_sync_seconds + self.clock.os_setup_seconds - before;
    }

    fn fault_path(&mut self, a: &Access, vi: usize, pi: usize) {
        let pid = a.pid;
        // Reservations (os/reserv.rs): a page whose frame is already reserved
        // is mapped there, whatever the policy would choose (ref §2.3 use 1).
        if self.reserv.active() && self.fault_reserved(a, vi, pi) {
            return;
        }
        let rb = self.region_bytes();
        let region_start = a.addr & !(rb - 1);
        let (region_in_vma, vma_advised) = {
            let v = &self.spaces[pid as usize].vmas[vi];
            (v.covers(region_start, rb), v.advised)
        };
        let region_empty = region_in_vma && {
            let v = &self.spaces[pid as usize].vmas[vi];
            let a0 = v.page_index(region_start, self.shape.base_shift);
            v.flags[a0..a0 + self.shape.pages_per_region()].iter().all(|&f| f & PRESENT == 0)
        };
        let f = Fault { pid, addr: a.addr, write: a.write, region_start, region_in_vma, region_empty, vma_advised };
        // The first policy that asks for more than a base page decides.
        let (mut action, mut decider) = (FaultAction::Base, None);
        for i in 0..self.policies.len() {
            action = self.with_policy(i, |p, k| p.on_fault(k, &f)).unwrap_or(FaultAction::Base);
            if action != FaultAction::Base {
                decider = Some(i);
                break;
            }
        }
        // Carry the action out: a reservation (Navarro §4.1: reserve the
        // extent, map the faulting page inside it), or a huge page.
        if let FaultAction::Reserve { size } = action {
            if self.reserv.active() {
                self.reserve_and_map(a, vi, pi, size);
                return;
            }
        }
        if let FaultAction::Huge { size, alloc } = action {
            let len = self.geo.sizes[size];
            let start = a.addr & !(len - 1);
            let r = self.check_huge(pid, start, size).and_then(|(vi2, _)| self.install_huge(pid, vi2, start, size, alloc));
            match r {
                Ok(()) => {
                    // A huge fault: the 4KB fault path cost plus zeroing (Ingens §3.1).
                    self.faults_huge[size] += 1;
                    self.charge_us(self.costs.fault_base_us);
                    self.record_plan(decider, pid, start, size);
                    return;
                }
                Err(e) => {
                    if e == super::huge_memory::Refusal::NoMemory {
                        self.contiguity_shortage(size); // page daemon (contiguity mode)
                    }
                    e.count(&mut self.stats.fault_failures);
                    self.stats.fault_fallbacks += 1;
                }
            }
        }
        self.map_base(pid, vi, pi);
    }

    fn map_base(&mut self, pid: u16, vi: usize, pi: usize) {
        let bs = self.shape.base_shift;
        let va = self.spaces[pid as usize].vmas[vi].start + ((pi as u64) << bs);
        let owner = Self::owner(pid, va, bs);
        // page daemon: no free frame wakes it (direct reclaim) before giving up.
        let got = self.phys.alloc(0, Mobility::Movable, owner).map(|p| p as u32).or_else(|| self.alloc_after_reclaim(owner));
        if let (Some(d), Some(p)) = (self.daemon.as_mut(), got) {
            d.frame_reused(p);
        }
        let pfn = match got {
            Some(p) => p,
            None => {
                // Out of memory: count it and map without a frame so the run
                // continues; the result flags it (the memory size is too small).
                self.stats.out_of_memory += 1;
                NO_PFN
            }
        };
        self.map_frame(pid, vi, pi, pfn);
    }

    /// Map base page `pi` at frame `pfn` (NO_PFN: out of memory) and charge
    /// the base fault: shared by the plain path and reservations.
    pub(super) fn map_frame(&mut self, pid: u16, vi: usize, pi: usize, pfn: u32) {
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        v.pfn.set(pi, pfn);
        v.flags[pi] = PRESENT;
        if pfn != NO_PFN {
            sp.frames_held += 1;
            sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        }
        self.stats.faults_base += 1;
        self.charge_us(self.costs.fault_base_us);
    }

    /// The program initialised [start, start + len) before the traced phase:
    /// fault every page in, in address order, through the policy (so a
    /// fault-time policy hands out huge pages in the order the real program
    /// would have). Costs go to setup time, not to the traced run.
    pub fn populate(&mut self, pid: u16, start: u64, len: u64) {
        let shape = self.shape;
        let page = 1u64 << shape.base_shift;
        let (mut a, end) = (start & !(page - 1), start + len);
        if pid as usize >= self.spaces.len() {
            self.spaces.resize_with(pid as usize + 1, Default::default);
            self.spaces[pid as usize].pid = pid;
        }
        self.in_setup = true;
        while a < end {
            // direct segments: a segment's memory is committed already; no page to fault.
            if self.segments.overlaps(pid, a, a + 1) {
                a += page;
                continue;
            }
            let sp = &mut self.spaces[pid as usize];
            let vi = sp.vma_index(a, &shape);
            let pi = sp.vmas[vi].page_index(a, shape.base_shift);
            if sp.vmas[vi].flags[pi] & PRESENT == 0 {
                self.fault(&Access::write(a).in_pid(pid), vi, pi);
            }
            let sp = &mut self.spaces[pid as usize];
            Self::touch(sp, vi, pi, a, shape.region_shift);
            sp.vmas[vi].flags[pi] |= DIRTY;
            a += page;
        }
        self.in_setup = false;
    }
}
