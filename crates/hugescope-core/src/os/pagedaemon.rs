//! The page daemon under memory pressure (FreeBSD's vm_pageout as Navarro et
//! al. modify it, OSDI'02 §4.4 and §5; navarro.md §5 and §10.6-7).
//!
//! Pages sit on an *active* and an *inactive* list in approximate-LRU order
//! (head = oldest). Evicted pages whose contents still sit in a frame form the
//! *cache*. The daemon wakes when free + cache frames fall below the low
//! watermark (`free_min`, a share of memory) or an allocation finds no frame,
//! and works until `free_target` is available again:
//! - it refills the inactive list from the head of the active list, using the
//!   accessed bits: a referenced page has its bit cleared and goes back to the
//!   active tail, an unreferenced one becomes inactive. Clearing the bit of a
//!   page inside a superpage demotes that superpage with probability `p`
//!   (speculative demotion, §4.6; the paper's p = 1);
//! - it takes pages from the inactive head: referenced ones are reactivated,
//!   the others are written back if dirty and evicted to the cache. Evicting
//!   a base page of a superpage first demotes the superpage (§4.6).
//!
//! Cache frames are available memory that coalesces in the buddy allocator
//! (§4.4, navarro.md §2.1): the model frees them into it and remembers which
//! page's contents each still holds. The allocator hands out the lowest
//! address first rather than taking cache blocks from the tail of its lists
//! (docs/assumptions.md: the A-LRU order of reuse is not modelled), so a
//! cached frame is reused when the allocator reaches it. A re-reference before
//! that is a *soft* refault (the frame is taken back, no I/O); after it, a
//! *hard* refault reads the page back from disk.
//!
//! In `contiguity` mode the daemon also wakes when a preferred-size (huge)
//! allocation fails, with the goal of that much contiguity (§5 item 2): it
//! evicts only inactive pages whose aligned extent of the failed size holds
//! no wired or active frame, until a free extent of that size appears, and
//! sleeps if the list ends first. Its pressure wakes take such pages first
//! too, then fall back to A-LRU order. `alru` evicts in plain A-LRU order:
//! the paper's comparison.
//!
//! Lists hold (pid, virtual page) keys and are checked lazily: an entry whose
//! page was freed or remapped meanwhile is dropped when the daemon reaches
//! it. Pages join the active list when the daemon first sees them (each wake
//! enrolls the resident pages it does not know yet), which is where a kernel
//! would have put them at fault time.

use super::aspace::{size_of_flags, ACCESSED, DIRTY, NO_PFN, PRESENT, TOUCHED};
use super::kernel::Kernel;
// Its configuration and counters are plain data of the OS configuration
// and the result (`config.rs`, `metrics.rs`).
pub use super::config::{DaemonConfig, DaemonMode};
pub use super::metrics::DaemonStats;
use super::phys::{Mobility, WiredStream, FRAG_OWNER, WIRED_OWNER};
use std::collections::{HashMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    Active,
    Inactive,
}

type Key = (u16, u64);

/// The daemon's state, owned by the kernel (`Kernel::daemon`).
#[derive(Clone, Debug)]
pub struct PageDaemon {
    pub(super) cfg: DaemonConfig,
    pub(super) stats: DaemonStats,
    pub(super) wired: WiredStream,
    active: VecDeque<Key>,
    inactive: VecDeque<Key>,
    on_list: HashMap<Key, List>,
    /// Evicted pages: the frame their contents were left in (the cache), or
    /// NO_PFN once only the disk copy is left.
    evicted: HashMap<Key, u32>,
    /// Cached frame -> the evicted page whose contents it holds.
    cache: HashMap<u32, Key>,
    /// Largest order of a failed preferred-size allocation since the last
    /// contiguity pass, and how many failed.
    goal: Option<(u32, u64)>,
    /// Pages evicted in this wake, invalidated together at its end.
    flush: Vec<(u16, u64, u64)>,
    rng: u64,
}

impl PageDaemon {
    pub(super) fn new(cfg: &DaemonConfig, wired: WiredStream, seed: u64) -> PageDaemon {
        PageDaemon {
            cfg: cfg.clone(),
            stats: DaemonStats::default(),
            wired,
            active: VecDeque::new(),
            inactive: VecDeque::new(),
            on_list: HashMap::new(),
            evicted: HashMap::new(),
            cache: HashMap::new(),
            goal: None,
            flush: Vec::new(),
            rng: seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1,
        }
    }

    /// A uniform draw in [0, 1) (xorshift64; deterministic per seed).
    fn draw(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A frame was handed to a new owner: the cached contents in it are gone.
    pub(super) fn frame_reused(&mut self, pfn: u32) {
        if let Some(key) = self.cache.remove(&pfn) {
            self.evicted.insert(key, NO_PFN);
        }
    }

    /// Pages on the active and inactive lists, and cached frames (tests).
    pub fn list_lengths(&self) -> (usize, usize, usize) {
        (self.active.len(), self.inactive.len(), self.cache.len())
    }
}

/// Why the daemon runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Free + cache fell below the low watermark, or an allocation failed.
    Pressure,
    /// A preferred-size allocation of this order failed (contiguity mode).
    Contiguity(u32),
}

impl Kernel {
    /// The daemon's counters, if it is configured.
    pub fn daemon_stats(&self) -> Option<&DaemonStats> {
        self.daemon.as_ref().map(|d| &d.stats)
    }

    /// The daemon, if it is configured (tests read its lists).
    pub fn page_daemon(&self) -> Option<&PageDaemon> {
        self.daemon.as_deref()
    }

    fn low_watermark(&self, d: &PageDaemon) -> u64 {
        (d.cfg.free_min * self.phys.total_frames() as f64) as u64
    }

    /// After a program fault: run the wired stream, and wake the daemon if
    /// free + cache fell below the low watermark.
    pub(super) fn after_fault_pressure(&mut self) {
        let Some(mut d) = self.daemon.take() else { return };
        d.wired.on_fault(&mut self.phys);
        d.stats.wired_frames = d.wired.wired_frames();
        let low = self.low_watermark(&d);
        let run = d.cfg.mode != DaemonMode::Off && self.phys.free_frames() < low;
        self.daemon = Some(d);
        if run {
            self.run_pagedaemon(Wake::Pressure);
        }
    }

    /// A preferred-size allocation of page-size index `size` failed for lack
    /// of memory: in contiguity mode the daemon wakes with that goal (§5).
    pub(super) fn contiguity_shortage(&mut self, size: usize) {
        let order = self.geo.shifts[size] - self.shape.base_shift;
        let Some(d) = self.daemon.as_mut() else { return };
        if d.cfg.mode != DaemonMode::Contiguity {
            return;
        }
        d.goal = Some(match d.goal {
            Some((o, n)) => (o.max(order), n + 1),
            None => (order, 1),
        });
        self.run_pagedaemon(Wake::Contiguity(order));
    }

    /// A base-page allocation found no frame: reclaim synchronously (direct
    /// reclaim) and retry. None when there is no daemon or nothing to evict.
    pub(super) fn alloc_after_reclaim(&mut self, owner: u64) -> Option<u32> {
        if self.daemon.as_ref().is_none_or(|d| d.cfg.mode == DaemonMode::Off) {
            return None;
        }
        self.run_pagedaemon(Wake::Pressure);
        self.phys.alloc(0, Mobility::Movable, owner).map(|p| p as u32)
    }

    /// Run the daemon once (also callable by tests and policies). Its work is
    /// charged off the program's critical path, except the shootdowns.
    pub fn run_pagedaemon(&mut self, why: Wake) {
        let Some(mut d) = self.daemon.take() else { return };
        if d.cfg.mode == DaemonMode::Off {
            self.daemon = Some(d);
            return;
        }
        let was_daemon = std::mem::replace(&mut self.in_daemon, true);
        d.stats.wakeups += 1;
        if matches!(why, Wake::Contiguity(_)) {
            d.stats.contiguity_wakeups += 1;
        }
        self.enroll(&mut d);
        let total = self.phys.total_frames();
        let target = ((d.cfg.free_target * total as f64) as u64).max(self.low_watermark(&d) + 1);
        // The contiguity goal: the failed order, and how many free extents of
        // it there must be when the pass ends.
        let goal = match (d.cfg.mode, d.goal) {
            (DaemonMode::Contiguity, Some((o, n))) => Some((o, self.phys.free_blocks_at_least(o) + n)),
            (DaemonMode::Contiguity, None) => Some((self.geo.shifts[self.geo.num_sizes() - 1] - self.shape.base_shift, 0)),
            _ => None,
        };
        let pressure = matches!(why, Wake::Pressure);
        // Pass 1, contiguity mode: only pages serving the goal. A page serves
        // only if every used frame of its extent is inactive, so the whole
        // active list is scanned into the inactive one first (deviation from
        // A-LRU: unreferenced pages are deactivated in one sweep).
        if let Some((order, want)) = goal {
            self.refill_inactive(&mut d, usize::MAX);
            let met = self.evict_pass(&mut d, Some(order), |k| {
                k.phys.free_blocks_at_least(order) >= want.max(1) && (!pressure || k.phys.free_frames() >= target)
            });
            if met && d.goal.is_some() {
                d.stats.contiguity_goals_met += 1;
            }
            d.goal = None;
        }
        // Pass 2: plain A-LRU order until the free target is reached (the only
        // pass of `alru`; contiguity mode's fallback under pressure).
        if pressure {
            self.evict_pass(&mut d, None, |k| k.phys.free_frames() >= target);
        }
        self.flush_evicted(&mut d);
        self.in_daemon = was_daemon;
        self.daemon = Some(d);
    }

    /// Put every resident page the daemon does not know yet at the active tail.
    fn enroll(&mut self, d: &mut PageDaemon) {
        let bs = self.shape.base_shift;
        for sp in &self.spaces {
            for v in &sp.vmas {
                for (i, &f) in v.flags.iter().enumerate() {
                    if f & PRESENT != 0 && v.pfn.get(i) != NO_PFN && !v.leaked(i) {
                        let key = (sp.pid, (v.start >> bs) + i as u64);
                        if let std::collections::hash_map::Entry::Vacant(e) = d.on_list.entry(key) {
                            e.insert(List::Active);
                            d.active.push_back(key);
                        }
                    }
                }
            }
        }
    }

    /// Where a listed page is now: (vma index, page index), if it is still a
    /// resident page with a frame of its own the daemon may evict.
    fn resident(&self, key: Key) -> Option<(usize, usize)> {
        let bs = self.shape.base_shift;
        let sp = self.spaces.get(key.0 as usize)?;
        let va = key.1 << bs;
        let vi = sp.find(va)?;
        let v = &sp.vmas[vi];
        let pi = v.page_index(va, bs);
        (v.flags[pi] & PRESENT != 0 && v.pfn.get(pi) != NO_PFN && !v.leaked(pi)).then_some((vi, pi))
    }

    /// The leaf's accessed bit: one bit per leaf, so a page of a superpage
    /// reads the bit of the whole superpage (§2.2).
    fn leaf_referenced(&self, pid: u16, vi: usize, pi: usize) -> (bool, usize) {
        let v = &self.spaces[pid as usize].vmas[vi];
        let s = size_of_flags(v.flags[pi]);
        if s == 0 {
            return (v.flags[pi] & ACCESSED != 0, 0);
        }
        let n = 1usize << (self.geo.shifts[s] - self.shape.base_shift);
        // The leaf's first page: VMAs of huge leaves are aligned to the leaf.
        let a = pi & !(n - 1);
        (v.flags[a..(a + n).min(v.flags.len())].iter().any(|f| f & ACCESSED != 0), s)
    }

    /// Refill the inactive list from the active head: referenced pages lose
    /// their bit and go to the active tail (speculatively demoting a
    /// superpage they are in), the others become inactive. Stops once the
    /// inactive list holds `want` pages or every active page was looked at.
    fn refill_inactive(&mut self, d: &mut PageDaemon, want: usize) {
        let bs = self.shape.base_shift;
        let mut budget = d.active.len();
        while d.inactive.len() < want && budget > 0 {
            budget -= 1;
            let Some(key) = d.active.pop_front() else { break };
            let Some((vi, pi)) = self.resident(key) else {
                d.on_list.remove(&key);
                continue;
            };
            self.charge_us(self.costs.scan_pte_us);
            let (referenced, size) = self.leaf_referenced(key.0, vi, pi);
            if referenced {
                let va = key.1 << bs;
                if size > 0 {
                    let len = self.geo.sizes[size];
                    self.clear_accessed(key.0, va & !(len - 1), len, false);
                    // Navarro's daemon only (ref §4.6): a kernel without
                    // reservations (Linux THP) never demotes speculatively.
                    if self.reserv.active() && d.cfg.spec_demote > 0.0 && d.draw() < d.cfg.spec_demote {
                        // Recursively along the page's path (ref §4.6, §10.5).
                        if self.demote_path(key.0, va) {
                            d.stats.speculative_demotions += 1;
                        }
                    }
                } else {
                    self.clear_accessed(key.0, va, 1 << bs, false);
                }
                d.active.push_back(key);
            } else {
                d.on_list.insert(key, List::Inactive);
                d.inactive.push_back(key);
            }
        }
    }

    /// Whether evicting the page in frame `pfn` serves a goal of `order`: its
    /// aligned extent holds no wired, pinned or active frame (§5 item 2).
    fn serves_goal(&self, d: &PageDaemon, pfn: u64, order: u32) -> bool {
        let n = 1u64 << order;
        let start = pfn & !(n - 1);
        if start + n > self.phys.total_frames() {
            return false;
        }
        let mut f = start;
        while f < start + n {
            match self.phys.allocated_block(f) {
                None => f += 1,
                Some(b) => {
                    if b.mobility == Mobility::Unmovable || b.owner == WIRED_OWNER || b.owner == FRAG_OWNER {
                        return false;
                    }
                    if b.order > 0 {
                        // A superpage or deferred-split block: judged by its
                        // own owner as one page (evicting demotes it).
                        f = b.pfn + (1u64 << b.order);
                    } else {
                        f += 1;
                    }
                    let pid = (b.owner >> super::kernel::OWNER_PID_SHIFT) as u16;
                    let vpn = b.owner & ((1 << super::kernel::OWNER_PID_SHIFT) - 1);
                    if d.on_list.get(&(pid, vpn)) != Some(&List::Inactive) {
                        // Active, or not yet seen by the daemon (just faulted).
                        return false;
                    }
                }
            }
        }
        true
    }

    /// One pass over the inactive list (refilled as it drains): evict pages
    /// (only those serving a goal of `order` if given) until `done` holds.
    /// Returns whether `done` held at the end.
    fn evict_pass(&mut self, d: &mut PageDaemon, order: Option<u32>, done: impl Fn(&Kernel) -> bool) -> bool {
        let total = self.phys.total_frames() as usize;
        // Scan at most every page once per pass, plus the refills.
        let mut budget = d.on_list.len() + 1;
        let mut skipped: Vec<Key> = Vec::new();
        while !done(self) && budget > 0 {
            budget -= 1;
            if d.inactive.is_empty() {
                let want = (total / 32).max(64);
                self.refill_inactive(d, want);
                if d.inactive.is_empty() {
                    break;
                }
            }
            let Some(key) = d.inactive.pop_front() else { break };
            let Some((vi, pi)) = self.resident(key) else {
                d.on_list.remove(&key);
                continue;
            };
            self.charge_us(self.costs.scan_pte_us);
            if self.leaf_referenced(key.0, vi, pi).0 {
                d.stats.reactivations += 1;
                d.on_list.insert(key, List::Active);
                d.active.push_back(key);
                continue;
            }
            if let Some(o) = order {
                let pfn = self.spaces[key.0 as usize].vmas[vi].pfn.get(pi) as u64;
                if !self.serves_goal(d, pfn, o) {
                    skipped.push(key);
                    continue;
                }
            }
            self.evict(d, key);
        }
        // Pages passed over keep their place ahead of newer inactive pages.
        for key in skipped.into_iter().rev() {
            d.inactive.push_front(key);
        }
        done(self)
    }

    /// Evict one resident base page to the cache: demote a superpage holding
    /// it, write it back if dirty, unmap it and free its frame (whose
    /// contents the cache remembers).
    fn evict(&mut self, d: &mut PageDaemon, key: Key) {
        let bs = self.shape.base_shift;
        let (pid, va) = (key.0, key.1 << bs);
        let Some((vi, pi)) = self.resident(key) else { return };
        // One level down, recursing into the child holding the victim (ref §4:
        // a 4MB superpage leaves 7x512KB + 7x64KB + 7x8KB and the victim).
        if size_of_flags(self.spaces[pid as usize].vmas[vi].flags[pi]) > 0 && self.demote_path(pid, va) {
            d.stats.eviction_demotions += 1;
        }
        d.on_list.remove(&key);
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        let (f, pfn) = (v.flags[pi], v.pfn.get(pi));
        // Keep only TOUCHED: an evicted page still counts as used by the
        // program (base RSS), and the mark tells a refault from a first touch.
        v.flags[pi] = f & TOUCHED;
        v.pfn.set(pi, NO_PFN);
        sp.frames_held -= 1;
        // A frame inside a reservation stays reserved, its contents cached
        // (ref §10.8); any other goes back to the buddy allocator.
        self.release_frames(vec![(pfn as u64, 0)]);
        if f & DIRTY != 0 {
            d.stats.bytes_written_back += 1 << bs;
            self.charge_us(d.cfg.writeback_us);
        }
        if f & TOUCHED != 0 {
            // Untouched pages of a superpage were zero-filled and never used:
            // nothing to keep, a later touch is a first fault.
            d.evicted.insert(key, pfn);
            if let Some(old) = d.cache.insert(pfn, key) {
                d.evicted.insert(old, NO_PFN);
            }
        }
        d.stats.pages_evicted += 1;
        d.flush.push((pid, va, va + (1 << bs)));
    }

    /// Invalidate the pages this wake evicted: one batched shootdown per
    /// process (Linux's mmu_gather), before the program runs again.
    fn flush_evicted(&mut self, d: &mut PageDaemon) {
        let mut pending = std::mem::take(&mut d.flush);
        pending.sort_unstable();
        for group in pending.chunk_by(|a, b| a.0 == b.0) {
            let ranges: Vec<(u64, u64)> = group.iter().map(|&(_, s, e)| (s, e)).collect();
            self.shootdown_batch(group[0].0, &ranges);
        }
    }

    /// A fault on a page the daemon evicted: take the frame back from the
    /// cache (soft) or read the page from disk into a new frame (hard). False
    /// if the page was not evicted (a first touch, or freed by the program
    /// since), so the ordinary fault path runs.
    pub(super) fn refault(&mut self, pid: u16, vi: usize, pi: usize) -> bool {
        let bs = self.shape.base_shift;
        let Some(mut d) = self.daemon.take() else { return false };
        let va = self.spaces[pid as usize].vmas[vi].start + ((pi as u64) << bs);
        let key = (pid, va >> bs);
        let touched = self.spaces[pid as usize].vmas[vi].flags[pi] & TOUCHED != 0;
        let Some(pfn) = d.evicted.remove(&key).filter(|_| touched) else {
            self.daemon = Some(d);
            return false;
        };
        if pfn != NO_PFN && d.cache.get(&pfn) == Some(&key) && self.reserv.holds(pfn as u64) {
            // Evicted from a reservation, whose frame stayed reserved with the
            // page's contents (ref §10.8): a soft refault, and the fault path
            // maps the page back at its frame in the reservation.
            d.cache.remove(&pfn);
            d.stats.refaults_soft += 1;
            self.charge_us(d.cfg.soft_refault_us);
            self.daemon = Some(d);
            return false;
        }
        let owner = Self::owner(pid, va, bs);
        let soft = pfn != NO_PFN
            && d.cache.get(&pfn) == Some(&key)
            && self.phys.alloc_at(pfn as u64, 0, Mobility::Movable, owner).is_some();
        if pfn != NO_PFN && d.cache.get(&pfn) == Some(&key) {
            d.cache.remove(&pfn);
        }
        let frame = if soft {
            d.stats.refaults_soft += 1;
            self.charge_us(d.cfg.soft_refault_us);
            Some(pfn)
        } else {
            d.stats.refaults_hard += 1;
            self.charge_us(d.cfg.pagein_us);
            let mut got = self.phys.alloc(0, Mobility::Movable, owner).map(|p| p as u32);
            if got.is_none() && d.cfg.mode != DaemonMode::Off {
                self.daemon = Some(d);
                got = self.alloc_after_reclaim(owner);
                d = self.daemon.take().expect("the daemon is back after reclaim");
            }
            if let Some(p) = got {
                d.frame_reused(p);
            }
            got
        };
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        match frame {
            Some(p) => {
                v.pfn.set(pi, p);
                v.flags[pi] = PRESENT | TOUCHED;
                sp.frames_held += 1;
                sp.peak_frames = sp.peak_frames.max(sp.frames_held);
                d.on_list.insert(key, List::Active);
                d.active.push_back(key);
            }
            None => {
                self.stats.out_of_memory += 1;
                v.pfn.set(pi, NO_PFN);
                v.flags[pi] = PRESENT | TOUCHED;
            }
        }
        self.daemon = Some(d);
        true
    }

    /// Process exit (concurrent runs with `exit_frees`): every VMA of `pid`
    /// is freed through the path of the program's own free markers, so the
    /// policies see each release (`Policy::on_free`) as they see an munmap.
    pub fn exit_process(&mut self, pid: u16) {
        if self.daemon.as_ref().is_none_or(|d| !d.cfg.exit_frees) {
            return;
        }
        let ranges: Vec<(u64, u64)> = match self.spaces.get(pid as usize) {
            Some(sp) => sp.vmas.iter().map(|v| (v.start, v.end - v.start)).collect(),
            None => return,
        };
        for (start, len) in ranges {
            crate::hw::PageTable::progress(self, &crate::trace::free_label(pid, start, len));
        }
        if let Some(d) = self.daemon.as_mut() {
            d.stats.exits += 1;
            d.evicted.retain(|k, _| k.0 != pid);
            d.cache.retain(|_, k| k.0 != pid);
        }
    }

    /// Wire frame `pfn` by hand (tests, experiments building a layout); false
    /// if there is no daemon configuration or the frame is not free.
    pub fn wire_frame(&mut self, pfn: u64) -> bool {
        let Some(d) = self.daemon.as_mut() else { return false };
        let ok = d.wired.wire_at(&mut self.phys, pfn);
        d.stats.wired_frames = d.wired.wired_frames();
        ok
    }

    /// Frames the wired stream holds (the conservation check's extra term).
    pub(super) fn wired_held(&self) -> u64 {
        self.daemon.as_ref().map_or(0, |d| d.wired.held_frames())
    }

    /// The contiguity metric now, over the machine's superpage sizes.
    pub fn contiguity(&self) -> super::phys::Contiguity {
        let bs = self.shape.base_shift;
        let orders: Vec<u32> = self.geo.shifts[1..self.geo.num_sizes()].iter().map(|s| s - bs).collect();
        self.phys.contiguity(&orders)
    }

    /// Build the daemon for a configuration (None when it is all defaults).
    pub(super) fn make_daemon(cfg: &DaemonConfig, phys: &super::phys::PhysMem, geo: &crate::hw::Geometry, seed: u64) -> Option<Box<PageDaemon>> {
        if cfg.is_default() {
            return None;
        }
        // Pools of the largest superpage up to 4MB: the Alpha's 4MB (§5.2),
        // x86-64's 2MB (a 1GB pool would hold a whole small machine).
        let pool = (1..geo.num_sizes()).filter(|&i| geo.sizes[i] <= 4 << 20).map(|i| geo.shifts[i]).max().unwrap_or(geo.shifts[0]);
        let wired = WiredStream::new(cfg.wired, cfg.wired_rate, cfg.wired_share, pool - geo.shifts[0], phys, seed);
        Some(Box::new(PageDaemon::new(cfg, wired, seed)))
    }
}
