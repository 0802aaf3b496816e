//! One cpu's MMU: L1 TLBs, L2 TLBs, a page walker (with its walk caches), and
//! the counters of what each access cost. The page table itself lives outside
//! (a static page-size map or the OS model): on a miss the simulator asks it
//! for the leaf, then calls `complete_walk`, which has the walker price the
//! walk and fills the TLBs with the size the leaf's TLB entry covers.

use super::geometry::Geometry;
use super::l1_front::{Front, RecentFronts};
use super::leaf::Leaf;
use super::pwc::WalkCost;
use super::space::Space;
use super::tlb::{ghost, is_ghost, live_of, tag, Tlb, VPN_BITS};
use super::walker::{RadixWalker, Walker};
use crate::config::MachineConfig;
use crate::stats::MmuStats;
use crate::trace::Access;
use crate::units::parse_size;
use crate::{Error, Result};

pub use super::geometry::MAX_SIZES;
const NONE: u8 = u8::MAX;
const NO_PAGE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    L1Hit(usize),
    L2Hit(usize),
    Miss,
}

#[derive(Clone, Debug)]
pub struct Mmu<W: Walker = RadixWalker> {
    pub l1: Vec<Tlb>,
    pub l2: Vec<Tlb>,
    pub walker: W,
    /// For each page size, the L1 / L2 structure holding it (NONE if none).
    l1_of: [u8; MAX_SIZES],
    l2_of: [u8; MAX_SIZES],
    /// Page sizes that have ever been filled since the last flush. Probing a
    /// size that cannot be present is wasted work on the hot path.
    filled: u8,
    num_sizes: usize,
    /// The page of this cpu's previous access if its translation sits in an
    /// L1 TLB as the most recently used entry of its set: (vpn, pid, size).
    /// An access to the same page is then an L1 hit whose LRU update would
    /// change nothing (the entry is already its set's MRU), so it is counted
    /// without probing. Exact, not an approximation; cleared by shootdowns
    /// and by a change of VM (the pid alone names the space within one VM).
    last: (u64, u16, usize),
    /// The two most recent distinct pages known to sit at the front of their
    /// L1 set (`l1_front`): like `last`, an access to one is an L1 hit that
    /// changes nothing, counted without probing; it also catches accesses
    /// that alternate between two pages, which `last` does not.
    fronts: RecentFronts,
    /// The VM this cpu runs (its VPID): the VM id of every tag it makes. 0,
    /// the host, until a virtualization model switches it.
    vm: u8,
    shifts: [u32; MAX_SIZES],
    /// `MachineConfig::l1_duplicate_fill`: the PCC artifact's second L1 fill.
    duplicate_fill: bool,
    /// The largest size index a TLB entry may hold
    /// (`MachineConfig::tlb_max_page`; the largest size when uncapped).
    tlb_cap: usize,
    /// The way the last L2 hit was in before it moved to the front (its LRU
    /// stack distance: `tlb_sizes`).
    l2_way: usize,
    pub stats: MmuStats,
}

fn build(level: &str, map: &std::collections::BTreeMap<String, crate::config::CacheConfig>, geo: &Geometry, of: &mut [u8; MAX_SIZES]) -> Result<Vec<Tlb>> {
    let mut out = Vec::new();
    for (key, c) in map {
        let mut sizes = Vec::new();
        for part in key.split('+') {
            let b = parse_size(part).map_err(|e| Error::config(e.to_string()))?;
            let s = geo
                .size_index_of(b)
                .ok_or_else(|| Error::config(format!("{level}.{key}: unknown page size {part}")))?;
            of[s] = out.len() as u8;
            sizes.push(s);
        }
        out.push(Tlb::new(format!("{level}.{key}"), c, sizes));
    }
    Ok(out)
}

impl Mmu<RadixWalker> {
    /// An MMU with the native radix walker of `cfg`'s geometry and PWCs.
    pub fn new(geo: &Geometry, cfg: &MachineConfig) -> Result<Mmu> {
        Mmu::with_walker(geo, cfg, RadixWalker::new(geo, cfg))
    }
}

impl<W: Walker> Mmu<W> {
    /// An MMU with `cfg`'s TLBs and the given walker.
    pub fn with_walker(geo: &Geometry, cfg: &MachineConfig, walker: W) -> Result<Mmu<W>> {
        let mut l1_of = [NONE; MAX_SIZES];
        let mut l2_of = [NONE; MAX_SIZES];
        let mut l1 = build("l1", &cfg.l1, geo, &mut l1_of)?;
        let mut l2 = build("l2", &cfg.l2, geo, &mut l2_of)?;
        if !geo.coalesce.is_none() {
            // Coalesced entries live where the base page's do unless a key
            // names their size: AMD's coalesced 4KB PTEs fill the 4KB
            // structures, and `coalesce=amd` then needs no TLB key of its own.
            let cs = geo.coalesce_size;
            for (tlbs, of) in [(&mut l1, &mut l1_of), (&mut l2, &mut l2_of)] {
                if of[cs] == NONE && of[0] != NONE {
                    of[cs] = of[0];
                    tlbs[of[0] as usize].sizes.push(cs);
                }
            }
        }
        // Tags hold 45 bits of page number (57-bit addresses over 4KB pages);
        // trace addresses have ADDR_BITS, so only an absurdly small base page
        // could overflow it.
        if crate::trace::ADDR_BITS.saturating_sub(geo.shifts[0]) > VPN_BITS {
            return Err(Error::config(format!("base page of {} bytes: too small for the TLB tags", geo.sizes[0])));
        }
        let mut shifts = [0; MAX_SIZES];
        shifts[..geo.num_sizes()].copy_from_slice(&geo.shifts);
        Ok(Mmu {
            l1,
            l2,
            walker,
            l1_of,
            l2_of,
            filled: 0,
            num_sizes: geo.num_sizes(),
            last: (NO_PAGE, 0, 0),
            fronts: RecentFronts::default(),
            vm: 0,
            shifts,
            duplicate_fill: cfg.l1_duplicate_fill,
            tlb_cap: if cfg.tlb_max_page.is_empty() {
                geo.num_sizes() - 1
            } else {
                let b = parse_size(&cfg.tlb_max_page).map_err(|e| Error::config(format!("tlb_max_page: {e}")))?;
                geo.size_index_of(b)
                    .ok_or_else(|| Error::config(format!("tlb_max_page: unknown page size {}", cfg.tlb_max_page)))?
            },
            l2_way: 0,
            stats: MmuStats::default(),
        })
    }

    /// The address space of access `a` on this cpu.
    #[inline(always)]
    pub fn space(&self, a: &Access) -> Space {
        Space { vm: self.vm, asid: a.pid }
    }

    /// Switch this cpu to VM `vm` (a VM entry with VPIDs: no flush, the
    /// entries of other VMs stay and cannot hit).
    #[inline(always)]
    pub fn set_vm(&mut self, vm: u8) {
        if vm != self.vm {
            self.vm = vm;
            self.forget_last();
        }
    }

    /// Probe the L1 TLBs, then the L2 TLBs. An L2 hit refills the L1.
    /// Counts the access and its hits; a miss is counted by `complete_walk`.
    ///
    /// Hardware probes every page size at once; the model probes one size's
    /// structure at a time, starting with the size of this cpu's previous
    /// L1 hit or fill (a program mostly keeps hitting the same size). The
    /// order cannot change the outcome: an address has one translation, so at
    /// most one size can hit (remaps shoot the old one down), and a miss
    /// leaves replacement state untouched.
    #[inline(always)]
    pub fn lookup(&mut self, a: &Access) -> Outcome {
        // Counted first and the front checked after, in this order: the
        // static map's loop (`run_reader`) ran 3-6% slower the other way.
        self.count_access(a);
        if let Some(s) = self.known_front(a) {
            self.stats.l1_hits[s] += 1;
            return Outcome::L1Hit(s);
        }
        self.probe(a)
    }

    /// `lookup` of an access `front_hit` has just answered None for.
    #[inline(always)]
    pub fn lookup_past_fronts(&mut self, a: &Access) -> Outcome {
        self.count_access(a);
        self.probe(a)
    }

    #[inline(always)]
    fn count_access(&mut self, a: &Access) {
        self.stats.accesses += 1;
        self.stats.writes += a.write as u64;
    }

    /// Probe the L1 TLBs, then the L2 TLBs, for an access counted already
    /// whose page is not known to lead its L1 set.
    #[inline(always)]
    fn probe(&mut self, a: &Access) -> Outcome {
        let ls = self.last.2;
        // The sizes to probe as one bit set: the previous size (if it may be
        // present) in the low byte, the other present sizes in the high byte,
        // so lowest-bit-first iteration visits the previous size first.
        let first = (self.filled & (1 << ls)) as u16;
        let order = first | (((self.filled as u16) & !first) << MAX_SIZES);
        let mut pending = order;
        while pending != 0 {
            let s = (pending.trailing_zeros() as usize) % MAX_SIZES;
            pending &= pending - 1;
            if self.probe_l1(a, s) {
                return Outcome::L1Hit(s);
            }
        }
        let mut pending = order;
        while pending != 0 {
            let s = (pending.trailing_zeros() as usize) % MAX_SIZES;
            pending &= pending - 1;
            if self.probe_l2(a, s) {
                return Outcome::L2Hit(s);
            }
        }
        Outcome::Miss
    }

    /// `a` is an L1 hit on a page known to lead its set (`last`, or one of
    /// `fronts`): counted as `lookup` counts it, with its size. Its LRU
    /// update would be a no-op, so it needs no probe. None (nothing counted,
    /// nothing changed) otherwise.
    #[inline(always)]
    pub fn front_hit(&mut self, a: &Access) -> Option<usize> {
        let s = self.known_front(a)?;
        self.count_access(a);
        self.stats.l1_hits[s] += 1;
        Some(s)
    }

    /// The size of `a`'s page if it is known to lead its L1 set (`last`, or
    /// one of `fronts`, which then becomes `last`); nothing counted.
    #[inline(always)]
    fn known_front(&mut self, a: &Access) -> Option<usize> {
        let (lvpn, lpid, ls) = self.last;
        if a.addr >> self.shifts[ls] == lvpn && a.pid == lpid {
            return Some(ls);
        }
        // What `probe_l1` would find (one translation per address, so no
        // other size can hit first), named `last` as it does.
        let (vpn, s) = self.fronts.hit(a.addr, a.pid, &self.shifts)?;
        self.last = (vpn, a.pid, s);
        Some(s)
    }

    /// Look `a` up in the L1 TLB holding size `s`, if any; count a hit.
    #[inline(always)]
    fn probe_l1(&mut self, a: &Access, s: usize) -> bool {
        let t = self.l1_of[s];
        if t == NONE {
            return false;
        }
        let vpn = a.addr >> self.shifts[s];
        let tg = tag(vpn, s, self.space(a));
        if self.l1[t as usize].cache.lookup(vpn, tg) {
            self.stats.l1_hits[s] += 1;
            self.last = (vpn, a.pid, s);
            self.front(t, vpn, a.pid, s);
            return true;
        }
        false
    }

    /// Look `a` up in the L2 TLB holding size `s`, if any; a hit is counted
    /// and refills the L1.
    #[inline(always)]
    fn probe_l2(&mut self, a: &Access, s: usize) -> bool {
        let t = self.l2_of[s];
        if t == NONE {
            return false;
        }
        let vpn = a.addr >> self.shifts[s];
        let tg = tag(vpn, s, self.space(a));
        let Some(way) = self.l2[t as usize].cache.lookup_way(vpn, tg) else {
            return false;
        };
        self.l2_way = way;
        self.stats.l2_hits[s] += 1;
        let t1 = self.l1_of[s];
        if t1 != NONE {
            if !self.fill_l1(t1, vpn, tg) {
                self.front(t1, vpn, a.pid, s);
            }
            self.last = (vpn, a.pid, s);
        } else {
            self.last.0 = NO_PAGE;
        }
        true
    }

    /// Have the walker price the walk that found `leaf` for `a`, and fill the
    /// TLBs holding the size its TLB entry covers (the leaf's own size on a
    /// native walk). Walks are counted by that size: it is the translation
    /// the TLBs now hold.
    #[inline]
    pub fn complete_walk(&mut self, a: &Access, leaf: &Leaf) -> WalkCost {
        // A capped machine holds a larger leaf as an entry of the cap's size
        // (`tlb_max_page`): the walk still ends at the leaf's level.
        let s = leaf.tlb_size().min(self.tlb_cap);
        debug_assert!(s < self.num_sizes && leaf.size() < self.num_sizes);
        let cost = self.walker.walk(self.space(a), a, leaf);
        self.stats.count_walk(s, &cost);
        if self.duplicate_fill {
            self.fill_duplicate(a);
        }
        self.fill(a, s);
        cost
    }

    /// Fill the TLBs holding size `s` with `a`'s translation, as a walk's
    /// end does (`complete_walk`); also for a pass that prices its walks
    /// elsewhere (`tlb_sizes`).
    #[inline(always)]
    pub fn fill(&mut self, a: &Access, s: usize) {
        let vpn = a.addr >> self.shifts[s];
        let tg = tag(vpn, s, self.space(a));
        let t1 = self.l1_of[s];
        if t1 != NONE {
            if !self.fill_l1(t1, vpn, tg) {
                self.front(t1, vpn, a.pid, s);
            }
            self.last = (vpn, a.pid, s);
        } else {
            self.last.0 = NO_PAGE;
        }
        let t2 = self.l2_of[s];
        if t2 != NONE {
            self.l2[t2 as usize].cache.insert(vpn, tg);
        }
        if t1 != NONE || t2 != NONE {
            self.filled |= 1 << s;
        }
    }

    /// Insert `tg` into L1 structure `t`. With duplicate fills, a dead
    /// duplicate that falls out of its set takes the live entry of its page
    /// with it: in the artifact both copies carry the page's tag, and evicting
    /// either erases the tag's one address-map entry (`CacheSet::insert`), so
    /// the live copy stays in the set unreachable, as a dead one.
    /// Returns whether it retagged an entry; the structure's known front
    /// pages are then forgotten (the retagged entry may be the one just put
    /// in, now dead).
    #[inline(always)]
    fn fill_l1(&mut self, t: u8, vpn: u64, tg: u64) -> bool {
        let evicted = self.l1[t as usize].cache.insert(vpn, tg);
        if self.duplicate_fill {
            if let Some(old) = evicted.filter(|&o| is_ghost(o)) {
                self.l1[t as usize].cache.retag(vpn, live_of(old), old);
                self.fronts.forget_tlb(t);
                return true;
            }
        }
        false
    }

    /// Page `vpn` of size `s` of `pid` is now the live MRU entry of its set
    /// in L1 structure `t` (`l1_front`).
    #[inline(always)]
    fn front(&mut self, t: u8, vpn: u64, pid: u16, s: usize) {
        let set = self.l1[t as usize].cache.set_index(vpn) as u32;
        self.fronts.touched(Front { vpn, pid, size: s as u8, tlb: t, set });
    }

    /// Forget every page known to sit at the front of its L1 set (`last`,
    /// `fronts`): their entries may be gone or unreachable.
    #[inline(always)]
    fn forget_last(&mut self) {
        self.last.0 = NO_PAGE;
        self.fronts.clear();
    }

    /// The artifact's first of two base-page L1 fills after a walk (its
    /// `huge_page_reuse.h` inserts into the 4KB L1 inside the "not huge"
    /// branch and again after it): a dead entry of the accessed base page,
    /// put in before the live fill so the live entry is the more recent.
    /// After a walk to a larger page only this one lands in the 4KB L1 (the
    /// artifact's there can hit, ours cannot: a simplification, see
    /// docs/assumptions.md).
    #[cold]
    fn fill_duplicate(&mut self, a: &Access) {
        let t = self.l1_of[0];
        if t == NONE {
            return;
        }
        let vpn = a.addr >> self.shifts[0];
        let dead = ghost(tag(vpn, 0, self.space(a)));
        self.fill_l1(t, vpn, dead);
        // The dead entry now leads its set: a page known at the front of
        // that set no longer is (`last` is set by the live fill that
        // follows, as before).
        self.fronts.forget_tlb(t);
    }

    /// Invalidate every TLB and walk-cache entry of `space` covering any
    /// part of [start, end) (INVLPG/INVPCID for a process, INVVPID for a VM).
    /// Returns the number of TLB entries dropped.
    pub fn shootdown(&mut self, space: Space, start: u64, end: u64) -> usize {
        let shifts = &self.shifts[..self.num_sizes];
        let mut n = 0;
        for t in self.l1.iter_mut().chain(self.l2.iter_mut()) {
            n += t.shootdown(space, start, end, shifts);
        }
        self.walker.shootdown(space, start, end);
        self.forget_last();
        self.stats.shootdowns += 1;
        self.stats.tlb_entries_invalidated += n as u64;
        n
    }

    /// Invalidate every TLB and walk-cache entry of VM `vm` (INVVPID
    /// single-context: KVM flushes a VM's translations by VPID after a host
    /// change of its EPT). Counted as one shootdown.
    pub fn flush_vm(&mut self, vm: u8) -> usize {
        let mut n = 0;
        for t in self.l1.iter_mut().chain(self.l2.iter_mut()) {
            n += t.flush_vm(vm);
        }
        self.walker.flush_vm(vm);
        self.forget_last();
        self.stats.shootdowns += 1;
        self.stats.tlb_entries_invalidated += n as u64;
        n
    }

    /// The way of its set the last L2 hit was in (`SetAssoc::lookup_way`).
    #[inline(always)]
    pub fn last_l2_way(&self) -> usize {
        self.l2_way
    }

    /// The VM this cpu runs (its VPID).
    #[inline(always)]
    pub fn vm(&self) -> u8 {
        self.vm
    }

    /// Whether any TLB holds a translation of `space` overlapping [start, end).
    pub fn holds(&self, space: Space, start: u64, end: u64) -> bool {
        self.l1.iter().chain(self.l2.iter()).any(|t| {
            t.cache.tags().filter(|&tg| !is_ghost(tg)).any(|tg| {
                let (vpn, s, p) = super::tlb::untag(tg);
                let lo = vpn << self.shifts[s];
                p == space && lo < end && start < lo + (1u64 << self.shifts[s])
            })
        })
    }

    pub fn flush(&mut self) {
        for t in self.l1.iter_mut().chain(self.l2.iter_mut()) {
            t.cache.flush();
        }
        self.walker.flush();
        self.filled = 0;
        self.forget_last();
    }
}
