//! Memory tiers (FHPM §2.2, §5, §6.5; HMM-v): physical memory split into a
//! **fast** tier (DRAM) and a **slow** tier (Optane PMem), the cost of each
//! access by the tier of the frame it touches, migration of a base page or a
//! whole huge page between tiers, and ONE placement mechanism that every
//! tiered-memory policy drives by ranking (`Kernel::place_tiers`): policies
//! vary the decision (the rank), this file the mechanism.
//!
//! Model (defaults: spec §11, `docs/assumptions.md` "Memory tiers"):
//! - The tiers split one node by frame number: frames `[0, fast)` are fast,
//!   the rest slow. Allocation takes the fast tier first (FHPM §6.1: "the
//!   fast tier is allocated first"; `PhysMem::prefer_below`).
//! - Every access costs `fast_ns` or `slow_ns` (90 / 300 ns) of memory time
//!   on top of the cost model's per-access cycles, by the frame it touches.
//!   Page-table pages are not frames of this model: walks keep their cost
//!   (page-table and EPT pages stay in the fast tier). An estimate.
//! - A migration copies the leaf's block to a free block of the other tier
//!   (`PhysMem::alloc_in`), frees the old one, remaps the owner through the
//!   mechanism compaction uses (`remap_migrated`, os/migrate.rs) with one
//!   page-table (EPT) entry update per leaf, and one batched TLB shootdown
//!   per placement. Copies run in the background at `bandwidth` GB/s per
//!   direction; a leaf written while its copy window is open (its D bit set
//!   during the copy, which HMM-v learns from PML) is copied again, counted.
//! - A huge leaf promoted into a fast tier with no free aligned block of its
//!   size first compacts the fast tier (`compact_fast`, the allocator's
//!   compaction restricted to the tier's frames): leaves move to free frames
//!   elsewhere in the fast tier, at the same copy and remap costs. Linux allocates a THP's
//!   migration target with GFP_TRANSHUGE | __GFP_THISNODE, i.e. with direct
//!   compaction of the target node; without it, a tier holding base pages
//!   beside huge ones (FHPM-TMM after its splits) refuses huge promotions
//!   while it still has room (issue #35).
//!
//! Off by default (`os.tier_fast` unset): the kernel holds no tier state and
//! the per-access path pays one predictable branch.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::aspace::{size_of_flags, NO_PFN, PRESENT};
use super::kernel::Kernel;
// Its configuration and counters are plain data of the OS configuration
// and the result (`config.rs`, `metrics.rs`).
pub use super::config::TierConfig;
pub use super::metrics::TierStats;
use super::phys::{Migration, PhysMem};
use crate::trace::Access;
use crate::{Error, Result};

/// One leaf to place: the policy names it by any address inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TierUnit {
    pub pid: u16,
    pub addr: u64,
}

/// Which tier a frame belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Fast,
    Slow,
}

/// The kernel's tier state (None on a kernel without tiers).
#[derive(Clone, Debug)]
pub(super) struct Tiers {
    cfg: TierConfig,
    /// Frames below this are fast.
    fast_frames: u64,
    fast_cycles: f64,
    slow_cycles: f64,
    stats: TierStats,
    /// Leaves in their copy window, (pid, leaf start) -> bytes.
    inflight: HashMap<(u16, u64), u64>,
    /// End of the current copy window, virtual seconds.
    window_end: f64,
}

/// A present leaf, as placement sees it.
#[derive(Clone, Copy, Debug)]
struct LeafAt {
    pid: u16,
    start: u64,
    order: u32,
    pfn: u64,
}

impl Tiers {
    /// Tier state for `cfg` on `phys`, or None when tiers are off; the fast
    /// tier is allocated first from here on.
    pub(super) fn build(cfg: &TierConfig, phys: &mut PhysMem, cpu_ghz: f64, region_bytes: u64) -> Result<Option<Box<Tiers>>> {
        let Some(fast) = cfg.fast_bytes else { return Ok(None) };
        let page = phys.base_page();
        let total = phys.total_frames() * page;
        if fast == 0 || fast % region_bytes != 0 || fast > total {
            return Err(Error::input(format!(
                "os.tier_fast={fast}: the fast tier must be a positive multiple of {region_bytes} bytes (a huge frame never straddles two tiers), at most the simulated memory ({total} bytes; set os.memory to change it)"
            )));
        }
        let fast_frames = fast / page;
        phys.prefer_below(fast_frames);
        let stats = TierStats { kind: "estimate", fast_bytes: fast, slow_bytes: total - fast, ..Default::default() };
        Ok(Some(Box::new(Tiers {
            cfg: cfg.clone(),
            fast_frames,
            fast_cycles: cfg.fast_ns * cpu_ghz,
            slow_cycles: cfg.slow_ns * cpu_ghz,
            stats,
            inflight: HashMap::new(),
            window_end: f64::NEG_INFINITY,
        })))
    }

    fn bytes_per_second(&self) -> f64 {
        self.cfg.bandwidth_gbs * 1e9
    }
}

impl Kernel {
    /// Whether this kernel models memory tiers.
    pub fn tiers_on(&self) -> bool {
        self.tiers.is_some()
    }

    /// Bytes of the fast tier (None: no tiers).
    pub fn tier_fast_bytes(&self) -> Option<u64> {
        self.tiers.as_ref().map(|t| t.stats.fast_bytes)
    }

    /// What the tiers did so far (None: no tiers).
    pub fn tier_stats(&self) -> Option<&TierStats> {
        self.tiers.as_ref().map(|t| &t.stats)
    }

    /// The physical address `addr` of `pid` is mapped to (None: not mapped).
    /// virt: a guest access's GPA, whose host frame decides its tier.
    pub fn frame_addr(&self, pid: u16, addr: u64) -> Option<u64> {
        let sp = self.spaces.get(pid as usize)?;
        let v = &sp.vmas[sp.find(addr)?];
        let pfn = v.pfn.get(v.page_index(addr, self.shape.base_shift));
        let mask = (1u64 << self.shape.base_shift) - 1;
        (pfn != NO_PFN).then_some(((pfn as u64) << self.shape.base_shift) | (addr & mask))
    }

    /// The memory time of access `a` by its frame's tier, in cycles (0
    /// without tiers). virt: the hypervisor prices a guest access by the
    /// host frame behind its GPA (`a` in the VM's host process).
    pub fn tier_cycles(&mut self, a: &Access) -> f64 {
        if self.tiers.is_none() {
            return 0.0;
        }
        self.tier_access(a)
    }

    /// The tier of the frame mapping `addr` of `pid` (None: no tiers, or not mapped).
    pub fn tier_of(&self, pid: u16, addr: u64) -> Option<Tier> {
        let t = self.tiers.as_ref()?;
        let sp = self.spaces.get(pid as usize)?;
        let v = &sp.vmas[sp.find(addr)?];
        let pfn = v.pfn.get(v.page_index(addr, self.shape.base_shift));
        if pfn == NO_PFN {
            return None;
        }
        Some(if (pfn as u64) < t.fast_frames { Tier::Fast } else { Tier::Slow })
    }

    /// Memory cycles of access `a` by the tier of the frame it touches, and
    /// the recopy of a leaf written during its copy window. Only called with
    /// tiers on (`after_access`); out of line so the path without tiers keeps
    /// its code.
    #[inline(never)]
    pub(super) fn tier_access(&mut self, a: &Access) -> f64 {
        let shape = self.shape;
        let sp = &mut self.spaces[a.pid as usize];
        let vi = sp.vma_index(a.addr, &shape);
        let v = &sp.vmas[vi];
        let pi = v.page_index(a.addr, shape.base_shift);
        let pfn = v.pfn.get(pi);
        let size = size_of_flags(v.flags[pi]);
        let now = self.clock.now();
        let t = self.tiers.as_mut().expect("tier_access runs with tiers on");
        if a.write && !t.inflight.is_empty() {
            if now >= t.window_end {
                t.inflight.clear();
            } else {
                let start = a.addr & !(self.geo.sizes[size] - 1);
                if let Some(bytes) = t.inflight.remove(&(a.pid, start)) {
                    // The copy saw a stale page: copy it again (HMM-v's PML recopy).
                    t.stats.recopied_leaves += 1;
                    t.stats.recopied_bytes += bytes;
                    let s = bytes as f64 / t.bytes_per_second();
                    t.stats.copy_seconds += s;
                    self.clock.charge_async(s);
                }
            }
        }
        let t = self.tiers.as_mut().expect("tier_access runs with tiers on");
        let c = if pfn == NO_PFN || (pfn as u64) < t.fast_frames {
            t.stats.fast_accesses += 1;
            t.fast_cycles
        } else {
            t.stats.slow_accesses += 1;
            t.slow_cycles
        };
        t.stats.memory_cycles += c;
        c
    }

    /// The leaf mapping `addr` of `pid`: its start, block order and first frame.
    fn leaf_at(&self, pid: u16, addr: u64) -> Option<LeafAt> {
        let bs = self.shape.base_shift;
        let sp = self.spaces.get(pid as usize)?;
        let v = &sp.vmas[sp.find(addr)?];
        let f = v.flags[v.page_index(addr, bs)];
        if f & PRESENT == 0 {
            return None;
        }
        let s = size_of_flags(f);
        let start = (addr & !(self.geo.sizes[s] - 1)).max(v.start);
        let pfn = v.pfn.get(v.page_index(start, bs));
        (pfn != NO_PFN).then_some(LeafAt { pid, start, order: self.geo.shifts[s] - bs, pfn: pfn as u64 })
    }

    /// Every present leaf of every process, in pid and address order.
    fn all_leaves(&self) -> Vec<LeafAt> {
        let bs = self.shape.base_shift;
        let mut out = Vec::new();
        for sp in &self.spaces {
            for v in &sp.vmas {
                let mut i = 0;
                while i < v.flags.len() {
                    let f = v.flags[i];
                    if f & PRESENT == 0 || v.pfn.get(i) == NO_PFN {
                        i += 1;
                        continue;
                    }
                    let s = size_of_flags(f);
                    let order = self.geo.shifts[s] - bs;
                    out.push(LeafAt { pid: sp.pid, start: v.start + ((i as u64) << bs), order, pfn: v.pfn.get(i) as u64 });
                    i += 1 << order;
                }
            }
        }
        out
    }

    /// Move one leaf's block to a free block of the other tier, adding the
    /// ranges to shoot down to `ranges` (its own, and those of leaves a
    /// compaction of the fast tier moved for it). Nothing moves when the
    /// leaf's frames are not one block of its own (a frame of a block split
    /// while partly freed, a reservation's) or the target tier has no free
    /// block of its size (None).
    fn migrate_leaf(&mut self, l: LeafAt, to_fast: bool, ranges: &mut Vec<(u16, u64, u64)>) -> Option<()> {
        let fast = self.tiers.as_ref()?.fast_frames;
        let b = self.phys.allocated_block(l.pfn).filter(|b| b.pfn == l.pfn && b.order == l.order)?;
        let (lo, hi) = if to_fast { (0, fast) } else { (fast, self.phys.total_frames()) };
        let mut to = self.phys.alloc_in(l.order, lo, hi, b.mobility, b.owner);
        if to.is_none() && to_fast && l.order > 0 && self.compact_fast(l.order, ranges) {
            to = self.phys.alloc_in(l.order, lo, hi, b.mobility, b.owner);
        }
        let Some(to) = to else {
            self.tiers.as_mut()?.stats.migration_failures += 1;
            return None;
        };
        self.phys.free(l.pfn, l.order);
        let bytes = (1u64 << l.order) << self.shape.base_shift;
        let t = self.tiers.as_mut()?;
        t.stats.migrated_leaves += 1;
        if to_fast {
            t.stats.promoted_bytes += bytes;
        } else {
            t.stats.demoted_bytes += bytes;
        }
        t.inflight.insert((l.pid, l.start), bytes);
        ranges.extend(self.remap_migrated(Migration { from: l.pfn, to, order: l.order, owner: b.owner }));
        Some(())
    }

    /// Free one aligned block of `order` in the fast tier for a huge
    /// promotion: the allocator's compaction restricted to the fast tier's
    /// frames (`PhysMem::compact_in`: fewest-used candidate first, no page
    /// enters or leaves the tier; Linux's direct compaction of a THP
    /// migration target node, module docs). Each moved block is a tier
    /// migration's cost (a copy at the bandwidth in the background, one
    /// remap, its range shot down with the placement's); the kernel's
    /// compaction counters count the call and the pages. Returns whether a
    /// block of `order` is now free in the tier.
    fn compact_fast(&mut self, order: u32, ranges: &mut Vec<(u16, u64, u64)>) -> bool {
        let Some(fast) = self.tiers.as_ref().map(|t| t.fast_frames) else { return false };
        let mut moves = std::mem::take(&mut self.scratch);
        moves.clear();
        let r = self.phys.compact_in(order, 0..fast, u64::MAX, &mut |m| moves.push(m));
        self.stats.compactions += 1;
        self.stats.compaction_successes += r.success as u64;
        self.stats.compaction_migrated_pages += r.migrated_pages;
        let moved = moves.len() as u64;
        for m in moves.drain(..) {
            ranges.extend(self.remap_migrated(m));
        }
        self.scratch = moves;
        let bs = self.shape.base_shift;
        let t = self.tiers.as_mut().expect("checked");
        t.stats.migrated_leaves += moved;
        let secs = ((r.migrated_pages << bs) as f64) / t.bytes_per_second();
        t.stats.copy_seconds += secs;
        self.clock.charge_async(secs);
        r.success
    }

    /// Place the leaves in the tiers by rank (FHPM §5, HMM-v): `ranked`
    /// names leaves hottest first; the fast tier is filled in that order
    /// with every leaf that still fits, and every other leaf goes to the slow
    /// tier. Leaves already where they belong stay. Demotions run first (they
    /// free fast frames), then promotions in rank order. Costs: one PT/EPT
    /// update per migrated leaf, one batched shootdown per process, and the
    /// copies in the background at the tier bandwidth; the copy window opens
    /// now. Returns the leaves migrated. No-op without tiers.
    pub fn place_tiers(&mut self, ranked: &[TierUnit]) -> u64 {
        let Some(t) = self.tiers.as_ref() else { return 0 };
        let cap = t.fast_frames;
        let mut want: HashSet<(u16, u64)> = HashSet::new();
        let mut promote: Vec<LeafAt> = Vec::new();
        let mut used = 0u64;
        for u in ranked {
            let Some(l) = self.leaf_at(u.pid, u.addr) else { continue };
            if want.contains(&(l.pid, l.start)) || used + (1 << l.order) > cap {
                continue;
            }
            used += 1 << l.order;
            want.insert((l.pid, l.start));
            promote.push(l);
        }
        let (before_up, before_down, before_n) = (t.stats.promoted_bytes, t.stats.demoted_bytes, t.stats.migrated_leaves);
        // A new placement starts a new copy window.
        self.tiers.as_mut().expect("checked").inflight.clear();
        let mut ranges: Vec<(u16, u64, u64)> = Vec::new();
        for l in self.all_leaves() {
            if l.pfn < cap && !want.contains(&(l.pid, l.start)) {
                self.migrate_leaf(l, false, &mut ranges);
            }
        }
        for l in promote {
            // Re-read: the frame may have moved since the rank was taken.
            let Some(l) = self.leaf_at(l.pid, l.start) else { continue };
            if l.pfn >= cap {
                self.migrate_leaf(l, true, &mut ranges);
            }
        }
        let t = self.tiers.as_mut().expect("checked");
        t.stats.placements += 1;
        let moved = t.stats.migrated_leaves - before_n;
        let (up, down) = (t.stats.promoted_bytes - before_up, t.stats.demoted_bytes - before_down);
        // Both directions copy in parallel, each at the bandwidth.
        let secs = up.max(down) as f64 / t.bytes_per_second();
        t.stats.copy_seconds += secs;
        t.window_end = self.clock.now() + secs;
        let remap_us = t.cfg.remap_us;
        self.clock.charge_async(secs);
        self.charge_us(moved as f64 * remap_us);
        // One batched TLB flush per process (HMM-v flushes once per period).
        ranges.sort_unstable();
        let mut i = 0;
        while i < ranges.len() {
            let pid = ranges[i].0;
            let j = i + ranges[i..].iter().take_while(|r| r.0 == pid).count();
            let batch: Vec<(u64, u64)> = ranges[i..j].iter().map(|r| (r.1, r.2)).collect();
            self.shootdown_batch(pid, &batch);
            i = j;
        }
        moved
    }

    /// The end-of-run tier counters (`finish`): shares and what the fast tier holds.
    pub(super) fn finish_tiers(&mut self) {
        let Some(t) = self.tiers.as_ref() else { return };
        let cap = t.fast_frames;
        let bs = self.shape.base_shift;
        let (mut mapped, mut huge) = (0u64, 0u64);
        for l in self.all_leaves() {
            if l.pfn < cap {
                mapped += (1u64 << l.order) << bs;
                if l.order > 0 {
                    huge += (1u64 << l.order) << bs;
                }
            }
        }
        let t = self.tiers.as_mut().expect("checked");
        let n = t.stats.fast_accesses + t.stats.slow_accesses;
        t.stats.fast_access_share = if n > 0 { t.stats.fast_accesses as f64 / n as f64 } else { 0.0 };
        t.stats.fast_mapped_bytes = mapped;
        t.stats.fast_huge_bytes = huge;
        t.stats.fast_huge_ratio = if mapped > 0 { huge as f64 / mapped as f64 } else { 0.0 };
        self.stats.tiers = Some(t.stats.clone());
    }
}
