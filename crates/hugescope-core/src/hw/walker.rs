//! The page walker: given the leaf the page table holds for an address, make
//! the walk's memory references through the walker's own caches and say what
//! it cost. The MMU calls it on a TLB miss and fills its TLBs from the leaf;
//! it never needs to know how the walk was made, so another walker (a nested
//! 2-D walker, a fixed-latency test walker) plugs in without touching the MMU
//! or the simulation loop.
//!
//! `RadixWalker` is the native x86-64 walk: one reference per level from the
//! root to the leaf, minus the levels a page-walk-cache hit skips (Intel SDM
//! vol. 3A §4.10.3, paging-structure caches). A nested walker's cost is
//! (g+1)(h+1)-1 references for g guest and h host levels (Bhargava et al.,
//! ASPLOS'08 §3: 24 for 4KB/4KB); it reads g and h from the leaf's `size` and
//! `host_size` through its geometry, as `RadixWalker` reads the leaf level.
//!
//! Walkers are per cpu (each MMU owns one; the simulator clones a template)
//! and are generic parameters, not trait objects, so the per-miss call is
//! inlined: no dynamic dispatch, no allocation.

use super::geometry::Geometry;
use super::leaf::{Leaf, NestedPath, LEAF_A, LEAF_D, PMD_A, PUD_A};
use super::geometry::MAX_SIZES;
use super::ptcache::PtCache;
use super::pwc::{Pwc, WalkCost};
use super::space::Space;
use crate::config::MachineConfig;
use crate::trace::Access;

pub trait Walker: Clone {
    /// Walk to `leaf` for access `a` of address space `space`: consult and
    /// fill the walker's caches and return the page-table references made
    /// (and the PWC level that hit, if any). Called once per TLB miss, after
    /// the page table produced `leaf`.
    fn walk(&mut self, space: Space, a: &Access, leaf: &Leaf) -> WalkCost;

    /// The accessed/dirty bits the walk to `leaf` for `a` writes (a set of
    /// `hw::leaf::{LEAF_A, LEAF_D, PMD_A, PUD_A}`); the page table stores
    /// them (`PageTable::walked`). Part of the walker because hardware, not
    /// the OS, sets them, and a nested walk also sets the host's (EPT) bits.
    fn writes(&self, a: &Access, leaf: &Leaf) -> u8;

    /// Drop cached walk state of `space` covering any part of [start, end).
    fn shootdown(&mut self, space: Space, start: u64, end: u64);

    /// Drop all cached walk state (a full TLB flush).
    fn flush(&mut self);

    /// Drop the cached walk state of every address space of VM `vm` (a
    /// VM-wide flush after the host changed the VM's EPT). Default: drop
    /// everything, which is never wrong, only pessimistic.
    fn flush_vm(&mut self, _vm: u8) {
        self.flush();
    }

    /// Take what a nested walk needs beyond the leaf (the guest-physical
    /// addresses of the guest page-table pages on the path and their host
    /// leaf sizes; `hw::nested`). Called before `walk` only when the page
    /// table is a virtualized one (`PageTable::VIRTUAL`); a native walker
    /// ignores it.
    #[inline(always)]
    fn prepare(&mut self, _path: &NestedPath) {}
}

/// The native radix walk with per-level page-walk caches.
#[derive(Debug, PartialEq, Eq)]
pub struct RadixWalker {
    pub pwc: Pwc,
    /// Root-first level index of the leaf entry of each page size.
    leaf_level: [usize; MAX_SIZES],
    /// Where the walk's references hit in the data caches (`hw::ptcache`);
    /// None unless `cost.pt_cache_lines` > 0.
    ptc: Option<PtCache>,
}

// `clone_from` reuses the caches' arrays (`SetAssoc`'s clone): the
// one-pass TLB-size sweep copies walkers on its access path.
impl Clone for RadixWalker {
    fn clone(&self) -> Self {
        RadixWalker { pwc: self.pwc.clone(), leaf_level: self.leaf_level, ptc: self.ptc.clone() }
    }

    fn clone_from(&mut self, src: &Self) {
        self.pwc.clone_from(&src.pwc);
        self.leaf_level = src.leaf_level;
        self.ptc.clone_from(&src.ptc);
    }
}

impl RadixWalker {
    pub fn new(geo: &Geometry, cfg: &MachineConfig) -> RadixWalker {
        let mut leaf_level = [0; MAX_SIZES];
        leaf_level[..geo.num_sizes()].copy_from_slice(&geo.leaf_level);
        let ptc = (cfg.cost.pt_cache_lines > 0).then(|| PtCache::new(geo, cfg.cost.pt_cache_lines));
        RadixWalker { pwc: Pwc::new(geo, &cfg.pwc), leaf_level, ptc }
    }
}

impl Walker for RadixWalker {
    #[inline(always)]
    fn walk(&mut self, space: Space, a: &Access, leaf: &Leaf) -> WalkCost {
        let level = self.leaf_level[leaf.size()];
        let mut cost = self.pwc.walk(a.addr, space, level);
        if let Some(ptc) = self.ptc.as_mut() {
            cost.mem_refs = ptc.walk(space, a.addr, level, cost.refs);
        }
        cost
    }

    /// A on every entry of the path and D on the leaf for a write (SDM vol.
    /// 3A §4.8: set when the entry is used; entries a PWC hit skipped were
    /// cached with A already set). PMD_A is the PDE's bit: the leaf's own for
    /// a 2MB leaf. A 1GB leaf has no PDE; the OS model keeps a PMD accessed
    /// bit per 2MB region under it, and the walk sets it as the leaf's A so
    /// results match the model's history (the one-A-bit-per-leaf view of
    /// issue #10 item 5 will fold it into the leaf's).
    #[inline(always)]
    fn writes(&self, a: &Access, _leaf: &Leaf) -> u8 {
        LEAF_A | PMD_A | PUD_A | if a.write { LEAF_D } else { 0 }
    }

    fn shootdown(&mut self, space: Space, start: u64, end: u64) {
        self.pwc.shootdown(space, start, end);
    }

    fn flush(&mut self) {
        self.pwc.flush();
    }

    fn flush_vm(&mut self, vm: u8) {
        self.pwc.flush_vm(vm);
    }
}
