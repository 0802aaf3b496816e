//! `Ctx`: everything a policy may do, and nothing more (docs/kernel.md,
//! "The policy API"). Every hook of `Policy` gets one; a policy never holds
//! the kernel, so it can neither write page-table state nor skip the work a
//! mechanism does besides the change it asks for (the shootdown, the cost,
//! the budget, the plan entry). What it offers:
//!
//! - reads: the page tables through `view()` (`MmView`: VMAs, regions with
//!   one accessed/dirty bit per leaf, pages, physical memory as the buddy
//!   allocator shows it), the machine's page sizes, the budget, the PCCs the
//!   walker feeds, memory tiers and companion pages, and the clock (read
//!   only: `now`, `accesses`);
//! - mechanisms: promote (collapse by copy), collapse in place, demote,
//!   split and reclaim, proactive compaction, migration between tiers,
//!   same-page merging, clearing and scanning accessed bits, freeing a
//!   range, reservations, direct segments, companion pages;
//! - timers of its own (`schedule_*`, `cancel_timer`: ids no other policy
//!   sees);
//! - its own costs (`charge_policy_us`) and warnings for the result (`note`).
//!
//! Each method is the kernel's mechanism of the same name (one `os/` file
//! each, docs/kernel.md); a mechanism called from a timer is charged as
//! daemon time, from a fault as time on the program's path.

use super::accessed::YoungLeaf;
use super::aspace::Shape;
use super::config::AllocMode;
use super::costs::OsCosts;
use super::huge_memory::Refusal;
use super::kernel::Kernel;
use super::ksm::{Candidate, KsmConfig};
use super::phys::CompactResult;
use super::segment::Provision;
use super::tier::TierUnit;
use super::view::MmView;
use crate::hw::pcc_table::{Pcc, PccConfig};
use crate::hw::Geometry;

/// A policy's access to the kernel for the length of one hook.
///
/// The boundary is enforced by the compiler. A policy gets no kernel out of
/// its `Ctx`:
///
/// ```compile_fail,E0616
/// use hugescope_core::policy::{Ctx, Policy};
/// struct Peek;
/// impl Policy for Peek {
///     fn name(&self) -> &'static str { "peek" }
///     fn init(&mut self, k: &mut Ctx<'_>) {
///         let _kernel = &k.k; // private to os/
///     }
/// }
/// ```
///
/// nor can it make one for itself:
///
/// ```compile_fail,E0624
/// fn seize(k: &mut hugescope_core::os::Kernel) {
///     let _ = hugescope_core::policy::Ctx::new(k); // only the kernel hands one out
/// }
/// ```
///
/// `Kernel`'s fields are private to `os/`, to any caller; the state they
/// hold is read through methods:
///
/// ```compile_fail,E0616
/// fn accesses(k: &hugescope_core::os::Kernel) -> u64 {
///     k.clock.accesses
/// }
/// ```
///
/// ```
/// fn accesses(k: &hugescope_core::os::Kernel) -> u64 {
///     k.clock().accesses
/// }
/// ```
///
/// and so are the address space's page tables (`vmas`, the per-page
/// `flags` and `pfn` arrays, their bits), which are read through `MmView`:
///
/// ```compile_fail,E0616
/// fn vmas(k: &hugescope_core::os::Kernel) -> usize {
///     k.spaces()[0].vmas.len()
/// }
/// ```
///
/// ```compile_fail,E0603
/// use hugescope_core::os::aspace::PRESENT;
/// ```
///
/// ```
/// fn vmas(k: &hugescope_core::os::Kernel) -> usize {
///     k.view().vmas(0).count()
/// }
/// ```
pub struct Ctx<'a> {
    k: &'a mut Kernel,
}

impl<'a> Ctx<'a> {
    /// Only the kernel hands one out, to the policy whose hook it calls.
    pub(super) fn new(k: &'a mut Kernel) -> Ctx<'a> {
        Ctx { k }
    }

    // ------------------------------------------------------------ reads

    /// The page tables and physical memory as a daemon can read them (`MmView`).
    pub fn view(&self) -> MmView<'_> {
        self.k.view()
    }
    /// The machine's page sizes and levels.
    pub fn geometry(&self) -> &Geometry {
        self.k.geometry()
    }
    /// The shifts of the base page, the PMD level and the PUD level.
    pub fn shape(&self) -> Shape {
        self.k.shape()
    }
    /// Bytes of a PMD-level region (2MB on x86-64).
    pub fn region_bytes(&self) -> u64 {
        self.k.region_bytes()
    }
    /// The page-size index of the PMD-level huge page (2MB on x86-64): the
    /// size most policies promote to (the largest size below it on a
    /// machine without one).
    pub fn pmd_size(&self) -> usize {
        self.k.pmd_size()
    }
    /// The huge-page budget in bytes (None: no budget).
    pub fn budget_bytes(&self) -> Option<u64> {
        self.k.budget_bytes()
    }
    /// Bytes of huge pages that may still be mapped under the budget.
    pub fn budget_left(&self) -> u64 {
        self.k.budget_left()
    }
    /// Virtual time, in seconds (of the running process, in a concurrent run).
    pub fn now(&self) -> f64 {
        self.k.now()
    }
    /// Accesses simulated so far (all processes).
    pub fn accesses(&self) -> u64 {
        self.k.clock.accesses
    }
    /// Seconds of daemon (asynchronous) OS time charged so far: a daemon
    /// measures what its own work cost by reading it before and after.
    pub fn daemon_seconds(&self) -> f64 {
        self.k.clock.os_async_seconds
    }
    /// The OS mechanisms' costs (a policy pricing its own scan with them).
    pub fn os_costs(&self) -> &OsCosts {
        self.k.os_costs()
    }
    /// The PCCs, one per cpu that walked, every walk so far applied.
    pub fn pccs(&mut self) -> &[Pcc] {
        self.k.pccs()
    }
    /// The PCCs, to clear them after a read (the OS's side of PCC §3.3).
    pub fn pccs_mut(&mut self) -> &mut [Pcc] {
        self.k.pccs_mut()
    }
    /// Memory tiers are configured (`os.tier_fast`).
    pub fn tiers_on(&self) -> bool {
        self.k.tiers_on()
    }
    /// Bytes of the fast tier, if there are tiers.
    pub fn tier_fast_bytes(&self) -> Option<u64> {
        self.k.tier_fast_bytes()
    }
    /// The 2MB leaf at `start` is redirected through a companion page.
    pub fn is_redirected(&self, pid: u16, start: u64) -> bool {
        self.k.is_redirected(pid, start)
    }
    /// Companion table pages held now.
    pub fn companion_pages(&self) -> u64 {
        self.k.companion_pages()
    }
    /// The reservation size index the fault at `addr` should ask for (Navarro §4.2).
    pub fn reservation_size(&self, pid: u16, addr: u64) -> usize {
        self.k.reservation_size(pid, addr)
    }
    /// Whether `collapse_in_place` would succeed now.
    pub fn can_collapse_in_place(&self, pid: u16, start: u64, size: usize) -> bool {
        self.k.can_collapse_in_place(pid, start, size)
    }

    // ------------------------------------------------------------ timers

    /// Call this policy's `on_timer(id)` `delay` seconds from now.
    pub fn schedule_in(&mut self, delay: f64, id: u32) {
        self.k.schedule_in(delay, id);
    }
    /// Call `on_timer(id)` at virtual time `at` (now, if past).
    pub fn schedule_at(&mut self, at: f64, id: u32) {
        self.k.schedule_at(at, id);
    }
    /// Call `on_timer(id)` once `accesses` accesses have been simulated.
    pub fn schedule_after_accesses(&mut self, accesses: u64, id: u32) {
        self.k.clock.schedule_after_accesses(accesses, id);
    }
    /// Cancel this policy's timers at a time with this id.
    pub fn cancel_timer(&mut self, id: u32) {
        self.k.clock.cancel(id);
    }

    // ------------------------------------------------------------ costs and notes

    /// Charge the policy's own work (scanning, sorting), in microseconds.
    pub fn charge_policy_us(&mut self, us: f64) {
        self.k.charge_policy_us(us);
    }
    /// A warning for the result file.
    pub fn note(&mut self, msg: impl Into<String>) {
        self.k.note(msg);
    }

    // ------------------------------------------------------------ mechanisms

    /// Collapse the region at `start` into a huge page of size index `size`
    /// by copy (os/huge_memory.rs).
    pub fn promote(&mut self, pid: u16, start: u64, size: usize, mode: AllocMode) -> Result<(), Refusal> {
        self.k.promote(pid, start, size, mode)
    }
    /// Make the region a huge page without a copy: its frames are already
    /// one aligned extent.
    pub fn collapse_in_place(&mut self, pid: u16, start: u64, size: usize) -> Result<(), Refusal> {
        self.k.collapse_in_place(pid, start, size)
    }
    /// Split the huge page holding `addr` into base pages (they keep their frames).
    pub fn demote(&mut self, pid: u16, addr: u64) -> bool {
        self.k.demote(pid, addr)
    }
    /// Split the huge page at `addr` and free the base pages `keep` says are
    /// unused (Ingens §4.3); returns the pages freed.
    pub fn split_and_reclaim(&mut self, pid: u16, addr: u64, keep: &dyn Fn(usize) -> bool) -> Option<u64> {
        self.k.split_and_reclaim(pid, addr, keep)
    }
    /// Count `n` promotions the policy did not try because no VMA holds them.
    pub fn count_ineligible_promotions(&mut self, n: u64) {
        self.k.count_ineligible_promotions(n);
    }
    /// Migrate up to `max_pages` base pages toward free blocks of `order`
    /// until FMFI falls to `target_fmfi`; `can_move(pid, va, order)` vetoes a page.
    pub fn compact_proactive(&mut self, order: u32, max_pages: u64, target_fmfi: f64, can_move: &mut dyn FnMut(u16, u64, u32) -> bool) -> CompactResult {
        self.k.compact_proactive(order, max_pages, target_fmfi, can_move)
    }
    /// Place leaves by rank: the fast tier filled in `ranked` order, the rest
    /// slow; returns the leaves migrated (os/tier.rs).
    pub fn place_tiers(&mut self, ranked: &[TierUnit]) -> u64 {
        self.k.place_tiers(ranked)
    }
    /// Free [start, start + len) of `pid`, as munmap does.
    pub fn free_range(&mut self, pid: u16, start: u64, len: u64) {
        self.k.free_range(pid, start, len);
    }
    /// Clear the accessed bits of [start, start + len) (and the PMD bits with
    /// `pmd`), with the flush that makes the next access set them again.
    pub fn clear_accessed(&mut self, pid: u16, start: u64, len: u64, pmd: bool) {
        self.k.clear_accessed(pid, start, len, pmd);
    }
    /// Visit every leaf of [start, end) with its accessed bit; `visit`
    /// answers whether to clear it (flushed in one batch with `flush`).
    /// Returns the leaves cleared; the scan's time is the caller's to charge.
    pub fn scan_young(&mut self, pid: u16, start: u64, end: u64, flush: bool, visit: &mut dyn FnMut(YoungLeaf) -> bool) -> u64 {
        self.k.scan_young(pid, start, end, flush, visit)
    }
    /// Set a coverage bit per base page on every access (HawkEye's source).
    pub fn track_coverage(&mut self, on: bool) {
        self.k.track_coverage(on);
    }
    /// Count and clear the coverage bits of the region at `start`.
    pub fn take_coverage(&mut self, pid: u16, start: u64) -> u32 {
        self.k.take_coverage(pid, start)
    }
    /// Start a scan of `pid` at `addr` next: the scan cursor every scanner of
    /// the kernel shares (`MmView::scan_cursor`).
    pub fn set_scan_cursor(&mut self, pid: u16, addr: u64) {
        self.k.set_scan_cursor(pid, addr);
    }
    /// Run `f` with every shootdown it causes keeping its mapping (a
    /// VM-friendly split or collapse that refills the EPT eagerly, FHPM §4.5).
    pub fn with_eager_refill<R>(&mut self, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
        self.k.with_eager_refill(|k| f(&mut Ctx::new(k)))
    }
    /// Give every cpu a PCC fed by the walker from now on (PCC §3.2).
    pub fn enable_pcc(&mut self, cfg: PccConfig) -> Result<(), String> {
        self.k.enable_pcc(cfg)
    }
    /// Reservations of these size indices from now on (Navarro §4), with the
    /// write-protect trap of clean superpages if `wp`.
    pub fn enable_reservations(&mut self, sizes: &[usize], wp: bool) {
        self.k.enable_reservations(sizes, wp);
    }
    /// Linux's compaction deferral from now on (os/compact_defer.rs).
    pub fn enable_compaction_deferral(&mut self) {
        self.k.enable_compaction_deferral();
    }
    /// Track page contents and turn the merging mechanism on (os/ksm.rs).
    pub fn enable_sharing(&mut self, cfg: KsmConfig) {
        self.k.enable_sharing(cfg);
    }
    /// Scan up to `budget` candidate pages for merging; `admit(view,
    /// candidate)` says whether the candidate (and the split of its huge
    /// page) is allowed. Returns the pages scanned.
    pub fn ksm_scan(&mut self, budget: u64, admit: &mut dyn FnMut(MmView<'_>, &Candidate) -> bool) -> u64 {
        self.k.ksm_scan(budget, &mut |k, c| admit(k.view(), c))
    }
    /// Scan up to `budget` pages merging only whole identical huge pages.
    pub fn ksm_scan_huge(&mut self, budget: u64) -> u64 {
        self.k.ksm_scan_huge(budget)
    }
    /// Redirect the 2MB leaf at `start` through a companion page (FHPM §4.2.2).
    pub fn redirect_companion(&mut self, pid: u16, start: u64) -> Result<(), Refusal> {
        self.k.redirect_companion(pid, start)
    }
    /// Restore a redirected leaf; false if it was not redirected.
    pub fn restore_companion(&mut self, pid: u16, start: u64) -> bool {
        self.k.restore_companion(pid, start)
    }
    /// A host page-table update at `addr` (FHPM §4.3); true if it hit a
    /// redirected leaf (a conflict: the leaf was restored).
    pub fn host_remap(&mut self, pid: u16, addr: u64) -> bool {
        self.k.host_remap(pid, addr)
    }
    /// Give `pid` a direct segment over its primary region (ISCA'13 §3.2);
    /// returns the bytes covered.
    pub fn create_segment(&mut self, pid: u16, requested: Option<u64>, how: Provision) -> u64 {
        self.k.create_segment(pid, requested, how)
    }
    /// Count `pid`'s primary region without a segment (the paged baseline's f_DS).
    pub fn account_segment(&mut self, pid: u16) {
        self.k.account_segment(pid);
    }
    /// Grow `pid`'s segment in place into the free frames after it; returns bytes added.
    pub fn grow_segment(&mut self, pid: u16) -> u64 {
        self.k.grow_segment(pid)
    }
    /// Revert `pid`'s segment to paging (ISCA'13 §4.3), with `ipi_us` per shootdown.
    pub fn revert_segment(&mut self, pid: u16, ipi_us: f64) {
        self.k.revert_segment(pid, ipi_us);
    }
}
