//! What the hardware asks of a page table (`PageTable`): on a TLB miss the
//! leaf a walk finds, after the walk the bits it wrote, after every access
//! its outcome, and the shootdowns and segment-register updates the page
//! table queued. The static map (`pagemap.rs`, in `sim.rs`), the OS model
//! (`os::Kernel`), the profiling pass (`profile`) and the hypervisor
//! (`virt::Hypervisor`) implement it; the simulation loop (`sim.rs`) calls it.

use super::mmu::Outcome;
use super::pwc::WalkCost;
use super::segment::ProcessSegment;
use super::shootdown::Shootdown;
use super::{Leaf, NestedPath};
use crate::trace::Access;

/// What the simulator needs from a page table.
pub trait PageTable {
    /// A virtualized page table (`virt::Hypervisor`): each access runs in a
    /// VM (`vm_of`), and a walk needs the nested path (`nested_path`). A
    /// constant, so native page tables compile the per-access VM switch
    /// away.
    const VIRTUAL: bool = false;

    /// The VM id access `a` runs in (virtualized page tables only).
    #[inline(always)]
    fn vm_of(&self, _a: &Access) -> u8 {
        0
    }

    /// What the nested walk to the leaf just returned needs besides it
    /// (virtualized page tables only; called right after `leaf`).
    #[inline(always)]
    fn nested_path(&self) -> Option<&NestedPath> {
        None
    }

    /// Called on every TLB miss: the leaf translating `a`, as a walk of the
    /// tables finds it (with its accessed/dirty bits as they were before this
    /// walk). May fault, map and remap; remaps must queue shootdowns.
    fn leaf(&mut self, a: &Access) -> Leaf;

    /// `leaf` as the simulator's own walk asks for it: the same entry and
    /// bits, but `Leaf::pa` may be left `NO_PA`, because nothing on a native
    /// walk reads the frame (the walker prices levels, the TLBs hold sizes).
    /// An OS model overrides it to skip that load: on a scattered workload
    /// the frame array is a cache miss on most walks. A virtualized page
    /// table keeps the default (its nested walk needs the guest's frames).
    #[inline(always)]
    fn walk_leaf(&mut self, a: &Access) -> Leaf {
        self.leaf(a)
    }

    /// Called after the walker priced the walk to `leaf` (and the TLBs were
    /// filled): `set` are the bits the walk wrote (`hw::leaf::{LEAF_A,
    /// LEAF_D, PMD_A, PUD_A}`), for a page table that keeps them. The walker
    /// decides them (hardware does, SDM vol. 3A §4.8); the page table stores
    /// them. Default: nothing (a static map has no bits).
    #[inline]
    fn walked(&mut self, _a: &Access, _leaf: &Leaf, _set: u8) {}

    /// Move shootdowns queued since the last call into `out`.
    #[inline]
    fn take_shootdowns(&mut self, _out: &mut Vec<Shootdown>) {}

    /// Whether shootdowns are queued (checked after every access).
    #[inline]
    fn has_shootdowns(&self) -> bool {
        false
    }

    /// Called after every access with its outcome and, for a miss, the cost of
    /// its page walk (the OS model advances its virtual clock and runs due
    /// daemons here). Default: nothing.
    #[inline]
    fn after_access(&mut self, _a: &Access, _outcome: Outcome, _walk: Option<WalkCost>) {}

    /// Called after an access the cpu's direct segment translated (no TLB
    /// outcome, no walk, no bits written; it costs
    /// `CostConfig::segment_hit_cycles`). Default: nothing, which is right
    /// for a static map; the OS model advances its clock here.
    #[inline]
    fn segment_hit(&mut self, _a: &Access) {}

    /// Move what the OS changed about processes' direct segments (their
    /// registers, primary regions) since the last call into `out`. Polled
    /// with the shootdowns (`has_shootdowns` must be true while any are
    /// queued), and applied before them: a revert installs page-table
    /// entries, then rewrites the registers, then shoots down (reference §9.8).
    #[inline]
    fn take_segment_updates(&mut self, _out: &mut Vec<ProcessSegment>) {}

    /// A progress point of the workload was reached.
    fn progress(&mut self, _label: &str) {}
}
