//! Reservation-based superpage allocation (Navarro, Iyer, Druschel, Cox,
//! OSDI'02 §4; `shared/reference/navarro.md` §2-4 and the defaults of §10).
//!
//! The first fault in an aligned, empty virtual range reserves an aligned
//! physical *extent* of the preferred size (§4.2) and maps only the faulting
//! page, at its own offset inside it; later faults in the range map their
//! pre-assigned frames (the population map's use 1, ref §2.3). A node of the
//! extent that fills up is promoted in place (§4.5, `try_promote`). When the
//! buddy allocator cannot give a requested size, the reservation whose last
//! allocation is oldest, among those whose preemption yields that size, is
//! broken one level down (§4.8, `preempt`).
//!
//! Model choices (docs/assumptions.md, "Navarro"):
//! - The *ladder* of sizes is the base page plus the sizes the policy enables
//!   (`navarro:sizes=`); "one level down" is the next smaller rung, so a
//!   single-size 4MB variant breaks a 4MB reservation into base pages.
//! - The population map keeps, per reservation and per rung below it, the
//!   populated base pages of every node (dense arrays). somepop/fullpop of the
//!   paper are `count > 0` and `count == pages`; the counts make the lazy
//!   propagation of §4.9 unnecessary at the sizes simulated (8 or 512 nodes).
//! - Physically, a reservation's frames are allocated order-0 blocks (frames
//!   no page maps carry `RESERVED_OWNER`), merged into one block when a node is
//!   promoted; frames reserved and not populated are counted apart
//!   (`reserved_frames`), so buddy free + reserved + held == total.
//! - The lists are keyed by the largest empty extent a preemption would yield
//!   (ref §10.2) and ordered by last allocation: a position counter grows at
//!   the tail, another shrinks at the head (where split children go, §10.3).

use super::aspace::{size_of_flags, DIRTY, NO_PFN, PRESENT};
use super::kernel::Kernel;
use super::phys::Mobility;
use crate::trace::Access;
use std::collections::{BTreeMap, BTreeSet};

/// Owner tag of frames reserved and not populated: they belong to no page
/// table (a kernel never looks them up as a mapping).
pub const RESERVED_OWNER: u64 = u64::MAX - 1;

/// One reservation: an aligned extent of rung `rung`, tied to the aligned
/// virtual range at `va` of process `pid` (ref §2.2).
#[derive(Clone, Debug)]
struct Reservation {
    pid: u16,
    va: u64,
    pfn: u64,
    rung: usize,
    /// Populated base pages per node, for each rung `1..rung` (index 0 unused):
    /// the population map (ref §2.3).
    counts: Vec<Vec<u32>>,
    /// Populated base pages in all.
    total: u32,
    /// Which base pages are populated.
    present: Vec<u64>,
    /// Base pages the kernel has seen written (first write to a clean page of
    /// a reservation: the dirty trap that lets it re-promote, ref §10.5).
    dirty_seen: Vec<u64>,
    /// (rung key, position) on the reservation lists; None while full.
    list: Option<(usize, i64)>,
}

fn bit(v: &[u64], i: usize) -> bool {
    v[i >> 6] & (1 << (i & 63)) != 0
}

/// Reservations of one kernel, with their lists and counters.
#[derive(Clone, Debug, Default)]
pub struct Reservations {
    /// Page-size indices of the rungs, ascending, starting at the base page
    /// (0). Empty: no reservation policy runs, every hook is off.
    ladder: Vec<usize>,
    /// Base pages per rung, and the base page's bytes (so lookups need no
    /// geometry).
    pages: Vec<u64>,
    page: u64,
    /// Write-protect clean superpages (ref §4, §10.5).
    wp: bool,
    slots: Vec<Option<Reservation>>,
    free_ids: Vec<u32>,
    by_va: BTreeMap<(u16, u64), u32>,
    by_pfn: BTreeMap<u64, u32>,
    /// One list per rung below the top: position -> reservation.
    lists: Vec<BTreeMap<i64, u32>>,
    head: i64,
    tail: i64,
    /// Frames reserved and not populated.
    pub(super) reserved: u64,
    /// Clean superpages mapped read-only: (pid, start, size index).
    protected: BTreeSet<(u16, u64, usize)>,
    /// Files' virtual ranges (pid, start, end), for write-back (`writeback`).
    pub(super) file_ranges: Vec<(u16, u64, u64)>,
    /// The cost of writing one dirty base page to disk (`os.writeback_us`,
    /// the page daemon's), charged to the flushing program per base page a
    /// write-back writes: a dirty 4MB superpage costs 512 pages' writes
    /// (Navarro §6.7: "the I/O volume is 512 times larger").
    pub(super) writeback_us: f64,
    /// The per-access write check runs (ref §4 dirty trap): set only by a
    /// reservation policy with `wp` on, so other policies pay one branch.
    pub(super) armed: bool,
}

impl Reservations {
    pub fn active(&self) -> bool {
        !self.ladder.is_empty()
    }
    /// Whether size index `s` is a level demotion stops at: a rung of the
    /// ladder when reservations run, every size otherwise.
    pub(super) fn ladder_has(&self, s: usize) -> bool {
        self.ladder.is_empty() || self.ladder.contains(&s)
    }
    fn get(&self, id: u32) -> &Reservation {
        self.slots[id as usize].as_ref().expect("live reservation id")
    }
    fn get_mut(&mut self, id: u32) -> &mut Reservation {
        self.slots[id as usize].as_mut().expect("live reservation id")
    }
    fn find_va(&self, pid: u16, va: u64) -> Option<u32> {
        let (&(p, _), &id) = self.by_va.range(..=(pid, va)).next_back()?;
        let r = self.get(id);
        (p == pid && va < r.va + self.pages[r.rung] * self.page).then_some(id)
    }
    /// Whether frame `pfn` lies in a live reservation (the page daemon's
    /// refault asks: such a frame was never returned to the allocator).
    pub(super) fn holds(&self, pfn: u64) -> bool {
        self.find_pfn(pfn).is_some()
    }

    fn find_pfn(&self, pfn: u64) -> Option<u32> {
        let (_, &id) = self.by_pfn.range(..=pfn).next_back()?;
        let r = self.get(id);
        (pfn < r.pfn + self.pages[r.rung]).then_some(id)
    }
}


impl Kernel {
    /// Turn reservations on (a reservation policy's `init`): `sizes` are the
    /// superpage size indices it uses, ascending; `wp` maps clean superpages
    /// read-only so the first write demotes them (ref §4).
    pub fn enable_reservations(&mut self, sizes: &[usize], wp: bool) {
        let bs = self.shape.base_shift;
        let mut ladder = vec![0];
        ladder.extend(sizes.iter().copied().filter(|&s| s > 0));
        let r = &mut self.reserv;
        r.pages = ladder.iter().map(|&s| 1u64 << (self.geo.shifts[s] - bs)).collect();
        r.page = 1u64 << bs;
        r.lists = vec![BTreeMap::new(); ladder.len()];
        r.ladder = ladder;
        r.wp = wp;
        // Armed with wp off too: the MMU model sets no dirty bit on a write
        // that hits the TLB, and write-back needs one (os/reserv.rs `writeback`).
        r.armed = true;
        self.write_trap = true;
    }

    /// Frames reserved and not populated (ref §10.8: counted apart from the
    /// processes' frames).
    pub fn reserved_frames(&self) -> u64 {
        self.reserv.reserved
    }

    /// Reservations alive now.
    pub fn reservation_count(&self) -> usize {
        self.reserv.by_va.len()
    }

    /// The preferred superpage for a fault at `addr` (ref §3.2): the largest
    /// enabled size whose aligned range holds `addr`, lies inside the VMA (the
    /// object: trace VMAs are declared at their final size, so a growing
    /// object's cap at its current size is this same fit, ref §10.9), and
    /// overlaps no reservation and no mapped page. 0: a base page.
    pub fn reservation_size(&self, pid: u16, addr: u64) -> usize {
        let r = &self.reserv;
        let Some(sp) = self.spaces.get(pid as usize) else { return 0 };
        let Some(vi) = sp.find(addr) else { return 0 };
        let v = &sp.vmas[vi];
        let bs = self.shape.base_shift;
        for rung in (1..r.ladder.len()).rev() {
            let len = r.pages[rung] << bs;
            let start = addr & !(len - 1);
            if !v.covers(start, len) || self.segments.overlaps(pid, start, start + len) {
                continue;
            }
            let overlaps = r.find_va(pid, start).is_some() || r.by_va.range((pid, start)..(pid, start + len)).next().is_some();
            let a = v.page_index(start, bs);
            if !overlaps && v.flags[a..a + r.pages[rung] as usize].iter().all(|&f| f & PRESENT == 0) {
                return r.ladder[rung];
            }
        }
        0
    }

    /// A fault inside a reservation: map the page's pre-assigned frame (ref
    /// §2.3 use 1). False if `a` lies in no reservation.
    pub(super) fn fault_reserved(&mut self, a: &Access, vi: usize, pi: usize) -> bool {
        let Some(id) = self.reserv.find_va(a.pid, a.addr) else { return false };
        self.populate_reserved(id, a, vi, pi);
        true
    }

    /// Carry out `FaultAction::Reserve { size }`: obtain an extent of `size`
    /// or smaller (fallback order, ref §3.3), reserve it unless it is a base
    /// page, and map the faulting page inside it.
    pub(super) fn reserve_and_map(&mut self, a: &Access, vi: usize, pi: usize, size: usize) {
        let r = &self.reserv;
        let want = r.ladder.iter().rposition(|&s| s <= size).unwrap_or(0);
        match self.obtain_extent(want) {
            None => {
                self.stats.out_of_memory += 1;
                self.map_frame(a.pid, vi, pi, NO_PFN);
            }
            Some((pfn, 0)) => {
                self.phys.set_owner(pfn, Self::owner(a.pid, a.addr, self.shape.base_shift));
                self.map_frame(a.pid, vi, pi, pfn as u32);
            }
            Some((pfn, rung)) => {
                let id = self.new_reservation(a.pid, a.addr, pfn, rung);
                self.stats.reservations += 1;
                self.populate_reserved(id, a, vi, pi);
            }
        }
    }

    /// The fallback order of ref §3.3: for each rung from the preferred one
    /// down, the buddy allocator, then the lists from that rung up (preempting
    /// the head). Returns the extent's first frame and its rung. A failure at
    /// the preferred rung counts as a preferred-size failure (the contiguity
    /// shortage the daemon reacts to, ref §5).
    fn obtain_extent(&mut self, want: usize) -> Option<(u64, usize)> {
        let top = self.reserv.ladder.len() - 1;
        for l in (0..=want).rev() {
            let order = self.geo.shifts[self.reserv.ladder[l]] - self.shape.base_shift;
            // An extent is pinned for compaction: the paper's kernel never
            // migrates reserved frames, and a move would break the extent.
            let mobility = if l == 0 { Mobility::Movable } else { Mobility::Unmovable };
            if let Some(p) = self.phys.alloc(order, mobility, RESERVED_OWNER) {
                return Some((p, l));
            }
            if l == want && want > 0 {
                self.stats.preferred_failures += 1;
                // Wake the contiguity-aware page daemon with this size as its
                // goal (ref §5 item 2); this request still falls back, later
                // ones find the extents it freed.
                self.contiguity_shortage(self.reserv.ladder[want]);
            }
            for k in l..top {
                if let Some((_, &victim)) = self.reserv.lists[k].first_key_value() {
                    self.preempt(victim, l);
                    if let Some(p) = self.phys.alloc(order, mobility, RESERVED_OWNER) {
                        return Some((p, l));
                    }
                }
            }
        }
        None
    }

    fn new_reservation(&mut self, pid: u16, addr: u64, pfn: u64, rung: usize) -> u32 {
        let r = &mut self.reserv;
        let pages = r.pages[rung];
        let va = addr & !((pages * r.page) - 1);
        // The extent is handed out frame by frame: split to order 0 now, so a
        // populated frame is an ordinary base-page block of its process.
        self.phys.split_to(pfn, self.geo.shifts[r.ladder[rung]] - self.shape.base_shift, 0);
        let words = (pages as usize).div_ceil(64);
        let counts = (0..rung).map(|j| if j == 0 { Vec::new() } else { vec![0; (pages / r.pages[j]) as usize] }).collect();
        let res = Reservation { pid, va, pfn, rung, counts, total: 0, present: vec![0; words], dirty_seen: vec![0; words], list: None };
        let id = match r.free_ids.pop() {
            Some(id) => {
                r.slots[id as usize] = Some(res);
                id
            }
            None => {
                r.slots.push(Some(res));
                (r.slots.len() - 1) as u32
            }
        };
        r.by_va.insert((pid, va), id);
        r.by_pfn.insert(pfn, id);
        // Noted once the faulting page is populated (`populate_reserved`).
        r.reserved += pages;
        self.relist(id, true);
        id
    }

    fn note_reserved(&mut self) {
        self.stats.reserved_frames = self.reserv.reserved;
        self.stats.peak_reserved_frames = self.stats.peak_reserved_frames.max(self.reserv.reserved);
    }

    /// The rung of the largest empty node (the largest extent a preemption
    /// of this reservation yields, ref §10.2); None when full.
    fn list_key(&self, id: u32) -> Option<usize> {
        let r = self.reserv.get(id);
        if r.total as u64 == self.reserv.pages[r.rung] {
            return None;
        }
        Some((1..r.rung).rev().find(|&j| r.counts[j].contains(&0)).unwrap_or(0))
    }

    /// Put `id` on the list of its current key: at the tail when it was just
    /// allocated into (`recent`), else keeping its position (a free changes
    /// the key, not the recency).
    fn relist(&mut self, id: u32, recent: bool) {
        let key = self.list_key(id);
        let r = &mut self.reserv;
        let old = r.get_mut(id).list.take();
        if let Some((k, pos)) = old {
            r.lists[k].remove(&pos);
        }
        if let Some(k) = key {
            let pos = match old {
                Some((_, p)) if !recent => p,
                _ => {
                    r.tail += 1;
                    r.tail
                }
            };
            r.lists[k].insert(pos, id);
            r.get_mut(id).list = Some((k, pos));
        }
    }

    /// Map page `pi` at its frame inside reservation `id`, update the
    /// population map, move the reservation to its list's tail, then promote
    /// what filled (ref §3 fault path).
    fn populate_reserved(&mut self, id: u32, a: &Access, vi: usize, pi: usize) {
        let bs = self.shape.base_shift;
        let (o, pfn) = {
            let r = self.reserv.get(id);
            let o = ((a.addr - r.va) >> bs) as usize;
            (o, r.pfn + o as u64)
        };
        self.phys.set_owner(pfn, Self::owner(a.pid, a.addr, bs));
        self.map_frame(a.pid, vi, pi, pfn as u32);
        if a.write {
            // The write that faulted the page in dirties it: count it now so
            // the promotion check below sees the page's real state.
            self.spaces[a.pid as usize].vmas[vi].flags[pi] |= DIRTY;
        }
        self.mark_populated(id, o, true);
        self.reserv.reserved -= 1;
        self.note_reserved();
        self.relist(id, true);
        self.try_promote(id, a.pid, a.addr);
    }

    /// Count base page `o` of `id` in (or out of) the population map.
    fn mark_populated(&mut self, id: u32, o: usize, on: bool) {
        let Reservations { pages, slots, .. } = &mut self.reserv;
        let r = slots[id as usize].as_mut().expect("live reservation id");
        debug_assert_eq!(bit(&r.present, o), !on);
        r.present[o >> 6] ^= 1 << (o & 63);
        if !on {
            r.dirty_seen[o >> 6] &= !(1 << (o & 63));
        }
        for j in 1..r.rung {
            let n = &mut r.counts[j][o / pages[j] as usize];
            if on {
                *n += 1
            } else {
                *n -= 1
            }
        }
        if on {
            r.total += 1
        } else {
            r.total -= 1
        }
    }

    /// Incremental promotion (ref §3.5, §10.4): the largest node on the path
    /// of `addr`, at or below the reservation's node, that is fully populated,
    /// whose pages are all dirty or all clean, and not already mapped at that
    /// size, is collapsed in place. With `wp`, a clean one is mapped
    /// read-only so the first write to it is caught.
    pub(super) fn try_promote(&mut self, id: u32, pid: u16, addr: u64) {
        let bs = self.shape.base_shift;
        let (rung, rva) = {
            let r = self.reserv.get(id);
            (r.rung, r.va)
        };
        for j in (1..=rung).rev() {
            let pages = self.reserv.pages[j];
            let start = addr & !((pages << bs) - 1);
            let node = ((start - rva) >> bs) as usize / pages as usize;
            let r = self.reserv.get(id);
            let full = if j == rung { r.total as u64 == pages } else { r.counts[j][node] as u64 == pages };
            if !full {
                continue;
            }
            let size = self.reserv.ladder[j];
            let sp = &self.spaces[pid as usize];
            let Some(vi) = sp.find(start) else { return };
            let v = &sp.vmas[vi];
            let a0 = v.page_index(start, bs);
            let flags = &v.flags[a0..a0 + pages as usize];
            if size_of_flags(flags[0]) >= size {
                return; // this node (and so everything under it) is already mapped whole
            }
            let dirty = flags.iter().filter(|&&f| f & DIRTY != 0).count() as u64;
            if dirty != 0 && dirty != pages {
                continue; // mixed: wait until every page is dirty (ref §4.7)
            }
            if self.collapse_in_place(pid, start, size).is_ok() && dirty == 0 && self.reserv.wp {
                self.reserv.protected.insert((pid, start, size));
            } else {
                self.reserv.protected.remove(&(pid, start, size));
            }
            return;
        }
    }

    /// Whether the clean superpage (pid, start, size) is mapped read-only.
    pub(super) fn is_protected(&self, pid: u16, start: u64, size: usize) -> bool {
        self.reserv.protected.contains(&(pid, start, size))
    }
    pub(super) fn protect(&mut self, pid: u16, start: u64, size: usize, on: bool) {
        if on {
            self.reserv.protected.insert((pid, start, size));
        } else {
            self.reserv.protected.remove(&(pid, start, size));
        }
    }

    /// Preemption (ref §3.4): break `victim` one rung down, then keep breaking
    /// only the child on the path to an empty extent of rung `want`, until the
    /// buddy allocator holds one.
    fn preempt(&mut self, victim: u32, want: usize) {
        self.stats.preemptions += 1;
        let mut v = victim;
        loop {
            let (child_rung, freed_empty, partial) = self.break_one_level(v);
            if freed_empty && child_rung >= want {
                return;
            }
            // The target extent lies in a partial child whose own largest
            // empty extent is still large enough: break that one next.
            let next = partial.into_iter().find(|&c| self.list_key(c).is_some_and(|k| k >= want));
            match next {
                Some(c) => v = c,
                None => return,
            }
        }
    }

    /// Split reservation `id` into its children one rung down: empty ones go
    /// back to the buddy allocator, partial ones become reservations at the
    /// head of their list, full ones reservations off the lists (ref §3.4).
    /// Children at the base rung are plain frames. Returns the children's
    /// rung, whether any empty child was freed, and the partial children.
    fn break_one_level(&mut self, id: u32) -> (usize, bool, Vec<u32>) {
        let res = self.unlink(id);
        let c = res.rung - 1;
        let cp = self.reserv.pages[c] as usize;
        let n = self.reserv.pages[res.rung] as usize / cp;
        let (mut freed, mut partial) = (false, Vec::new());
        for i in 0..n {
            let populated = (i * cp..(i + 1) * cp).filter(|&o| bit(&res.present, o)).count();
            let (cva, cpfn) = (res.va + ((i * cp) as u64 * self.reserv.page), res.pfn + (i * cp) as u64);
            if populated == 0 {
                for f in 0..cp as u64 {
                    self.phys.free(cpfn + f, 0);
                }
                self.reserv.reserved -= cp as u64;
                freed = true;
            } else if c > 0 {
                // A child keeps its frames as they are (order-0 blocks or the
                // merged block of a superpage inside it).
                let words = cp.div_ceil(64);
                let counts = (0..c).map(|j| if j == 0 { Vec::new() } else { vec![0; cp / self.reserv.pages[j] as usize] }).collect();
                let child = Reservation { pid: res.pid, va: cva, pfn: cpfn, rung: c, counts, total: 0, present: vec![0; words], dirty_seen: vec![0; words], list: None };
                let cid = match self.reserv.free_ids.pop() {
                    Some(x) => {
                        self.reserv.slots[x as usize] = Some(child);
                        x
                    }
                    None => {
                        self.reserv.slots.push(Some(child));
                        (self.reserv.slots.len() - 1) as u32
                    }
                };
                for o in 0..cp {
                    if bit(&res.present, i * cp + o) {
                        self.mark_populated(cid, o, true);
                        if bit(&res.dirty_seen, i * cp + o) {
                            self.reserv.get_mut(cid).dirty_seen[o >> 6] |= 1 << (o & 63);
                        }
                    }
                }
                self.reserv.by_va.insert((res.pid, cva), cid);
                self.reserv.by_pfn.insert(cpfn, cid);
                if let Some(k) = self.list_key(cid) {
                    // Split children go to the head: they were allocated into
                    // no more recently than their parent (ref §10.3).
                    self.reserv.head -= 1;
                    let pos = self.reserv.head;
                    self.reserv.lists[k].insert(pos, cid);
                    self.reserv.get_mut(cid).list = Some((k, pos));
                    partial.push(cid);
                }
            }
            // A populated base-rung child is an ordinary mapped frame.
        }
        self.note_reserved();
        (c, freed, partial)
    }

    /// Frames the program released (`free_range`): a frame inside a
    /// reservation is depopulated and stays reserved (the reservation goes
    /// back on its list, ref §2.2) until nothing of it is populated, when the
    /// whole extent returns to the buddy allocator; other frames are freed.
    pub(super) fn release_frames(&mut self, frames: Vec<(u64, u32)>) {
        for (p, o) in frames {
            let id = if self.reserv.active() { self.reserv.find_pfn(p) } else { None };
            let Some(id) = id else {
                self.phys.free(p, o);
                continue;
            };
            if o > 0 {
                self.phys.split(p, o);
            }
            for q in p..p + (1u64 << o) {
                let off = (q - self.reserv.get(id).pfn) as usize;
                self.phys.set_owner(q, RESERVED_OWNER);
                self.mark_populated(id, off, false);
                self.reserv.reserved += 1;
            }
            if self.reserv.get(id).total == 0 {
                self.drop_reservation(id);
            } else {
                self.relist(id, false);
            }
        }
        self.note_reserved();
    }

    /// Take reservation `id` out of every index (slot, address maps, list)
    /// and return its record: what both breaking and dropping start with.
    fn unlink(&mut self, id: u32) -> Reservation {
        let res = self.reserv.slots[id as usize].take().expect("live reservation");
        self.reserv.free_ids.push(id);
        self.reserv.by_va.remove(&(res.pid, res.va));
        self.reserv.by_pfn.remove(&res.pfn);
        if let Some((k, pos)) = res.list {
            self.reserv.lists[k].remove(&pos);
        }
        res
    }

    /// Return an empty reservation's extent to the buddy allocator.
    fn drop_reservation(&mut self, id: u32) {
        let res = self.unlink(id);
        let pages = self.reserv.pages[res.rung];
        for f in 0..pages {
            self.phys.free(res.pfn + f, 0);
        }
        self.reserv.reserved -= pages;
    }

    /// The per-access write check (only while `armed`): the first write to a
    /// write-protected clean superpage traps and demotes along the written
    /// page's path (ref §4, §10.5); the first write to a clean base page of a
    /// reservation is noted (Alpha's dirty-bit emulation trap, ref §10.5) and
    /// re-promotes once a node is all dirty.
    #[cold]
    pub(super) fn write_check(&mut self, a: &Access) {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get(a.pid as usize) else { return };
        let Some(vi) = sp.find(a.addr) else { return };
        let v = &sp.vmas[vi];
        let pi = v.page_index(a.addr, bs);
        let f = v.flags[pi];
        let s = size_of_flags(f);
        if f & PRESENT == 0 {
            return;
        }
        if s > 0 {
            let start = a.addr & !(self.geo.sizes[s] - 1);
            if !self.is_protected(a.pid, start, s) {
                // A writable superpage: the hardware sets its dirty bit, also
                // on a TLB hit, which the MMU model does not report.
                self.spaces[a.pid as usize].vmas[vi].flags[pi] |= DIRTY;
                return;
            }
            self.stats.wp_traps += 1;
            self.charge_us(self.costs.wp_trap_us);
            self.demote_path(a.pid, a.addr);
        }
        let Some(id) = self.reserv.find_va(a.pid, a.addr) else { return };
        let r = self.reserv.get_mut(id);
        let o = ((a.addr - r.va) >> bs) as usize;
        if bit(&r.dirty_seen, o) && s == 0 {
            return;
        }
        r.dirty_seen[o >> 6] |= 1 << (o & 63);
        self.spaces[a.pid as usize].vmas[vi].flags[pi] |= DIRTY;
        self.try_promote(id, a.pid, a.addr);
    }

    /// Write-back at a flush (`msync` progress label): every dirty leaf of a
    /// file region is written whole (one dirty bit per leaf, ref §4.6, §8:
    /// a dirty superpage costs its full size) and its dirty bits cleared.
    /// msync waits for the writes: the program is charged `writeback_us` per
    /// base page written (docs/assumptions.md, "Write-back"). Returns the
    /// bytes written.
    pub fn writeback(&mut self) -> u64 {
        let bs = self.shape.base_shift;
        let mut bytes = 0;
        for &(pid, start, end) in &self.reserv.file_ranges {
            let Some(sp) = self.spaces.get_mut(pid as usize) else { continue };
            for v in sp.vmas.iter_mut().filter(|v| v.start < end && start < v.end) {
                let (a, b) = (v.page_index(start.max(v.start), bs), v.page_index(end.min(v.end) - 1, bs) + 1);
                let mut i = a;
                while i < b {
                    let f = v.flags[i];
                    let s = size_of_flags(f);
                    let n = if f & PRESENT != 0 && s > 0 { (self.geo.sizes[s] >> bs) as usize } else { 1 };
                    // A huge leaf starts at its aligned page; step over it whole.
                    let lo = if s > 0 { i - (((v.start >> bs) as usize + i) % n) } else { i };
                    let hi = (lo + n).min(v.flags.len());
                    if f & PRESENT != 0 && v.flags[lo..hi].iter().any(|&g| g & DIRTY != 0) {
                        bytes += (n as u64) << bs;
                        for g in &mut v.flags[lo..hi] {
                            *g &= !DIRTY;
                        }
                    }
                    i = hi;
                }
            }
        }
        self.stats.writeback_bytes += bytes;
        self.charge_us(self.reserv.writeback_us * (bytes >> bs) as f64);
        bytes
    }

    /// Reservation invariants (tests): every reservation's counts match its
    /// populated pages, each populated page maps its own frame, and the
    /// reserved-frame total is the sum of unpopulated frames.
    pub(super) fn check_reservations(&self) -> std::result::Result<(), String> {
        let r = &self.reserv;
        let bs = self.shape.base_shift;
        let mut unpop = 0;
        for (&(pid, va), &id) in &r.by_va {
            let res = r.get(id);
            let pages = r.pages[res.rung] as usize;
            let pop = (0..pages).filter(|&o| bit(&res.present, o)).count();
            if pop != res.total as usize || pop == 0 {
                return Err(format!("reservation at {va:#x}: {} pages counted, {pop} populated", res.total));
            }
            for j in 1..res.rung {
                for (n, &c) in res.counts[j].iter().enumerate() {
                    let p = r.pages[j] as usize;
                    if (n * p..(n + 1) * p).filter(|&o| bit(&res.present, o)).count() != c as usize {
                        return Err(format!("reservation at {va:#x}: node {n} of rung {j} miscounted"));
                    }
                }
            }
            let sp = &self.spaces[pid as usize];
            for o in (0..pages).filter(|&o| bit(&res.present, o)) {
                let a = va + ((o as u64) << bs);
                let ok = sp.find(a).is_some_and(|vi| {
                    let v = &sp.vmas[vi];
                    let pi = v.page_index(a, bs);
                    v.flags[pi] & PRESENT != 0 && v.pfn.get(pi) as u64 == res.pfn + o as u64
                });
                if !ok {
                    return Err(format!("reservation at {va:#x}: page {o} is not mapped at its frame"));
                }
            }
            if res.list.map(|l| l.0) != self.list_key(id) {
                return Err(format!("reservation at {va:#x}: on list {:?}, key {:?}", res.list, self.list_key(id)));
            }
            unpop += (pages - pop) as u64;
        }
        if unpop != r.reserved {
            return Err(format!("reserved frames {} != unpopulated frames of reservations {unpop}", r.reserved));
        }
        Ok(())
    }
}
