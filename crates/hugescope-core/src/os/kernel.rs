//! The kernel model: physical memory, address spaces, the virtual clock and the
//! mechanisms policies act through. Mechanisms keep the invariants (a remap
//! always queues a shootdown; physical frames are conserved; the huge-page
//! budget is never exceeded) and charge their costs to the clock; policies
//! only decide (DESIGN.md, "Mechanism and policy are separate", after Ingens).
//!
//! The kernel is the simulator's page table: on every TLB miss it resolves the
//! leaf, faulting on first touch and asking the policy what to map.

use super::aspace::{self, size_of_flags, AddressSpace, Shape, ACCESSED, DIRTY, NO_PFN, PRESENT, TOUCHED};
use super::clock::{Clock, TimeBase};
use super::costs::OsCosts;
use super::metrics::{OsStats, ProcessStats, Sample};
use super::phys::{FragReport, Migration, Mobility, PhysMem, FRAG_OWNER};
use crate::bounded::BoundedLog;
use crate::config::CostConfig;
use crate::limits::DAEMON_STOP_S;
use crate::hw::pcc::{Pcc, PccConfig};
use crate::hw::pwc::WalkCost;
use crate::hw::leaf::{LEAF_A, LEAF_D, NO_PA, PMD_A, PUD_A};
use crate::hw::{Geometry, Leaf, Outcome};
use crate::plan::{PlanEntry, When};
use crate::policy::{Fault, FaultAction, Policy, Walk};
use crate::sim::{PageTable, Shootdown};
use crate::trace::{Access, TraceHeader};
use crate::units::page_label;
use crate::{Error, Result};
use serde::Serialize;

/// How hard an allocation of a huge frame may try.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocMode {
    /// Take a free block of the order if one exists; never compact.
    FreeOnly,
    /// Direct compaction, migrating at most this many base pages, then retry.
    Compact { max_pages: u64 },
}

/// How physical memory is fragmented before the run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Fragmentation {
    /// PCC paper §5.1.1: one unmovable page in `share` of the 2MB blocks.
    Pcc { share: f64 },
    /// Ingens §6.3: allocate, then free parts until FMFI reaches the target.
    Ingens { fmfi: f64 },
}

#[derive(Clone, Debug, Serialize)]
pub struct OsConfig {
    /// Physical memory; None: 1.3 x footprint + 8MiB (at least 64MiB).
    pub memory_bytes: Option<u64>,
    pub fragmentation: Option<Fragmentation>,
    /// Maximum huge-page memory as a share of the footprint (0..=1); None: no cap.
    pub budget: Option<f64>,
    /// Footprint the budget refers to; None: the trace's declared regions.
    pub footprint_bytes: Option<u64>,
    /// None: the trace's nominal access rate if it has one, else cost-model cycles.
    pub time: Option<TimeBase>,
    pub costs: OsCosts,
    pub seed: u64,
    /// Timeline sample period, in accesses.
    pub sample_every: u64,
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig {
            memory_bytes: None,
            fragmentation: None,
            budget: None,
            footprint_bytes: None,
            time: None,
            costs: OsCosts::default(),
            seed: 1,
            sample_every: 1 << 20,
        }
    }
}

impl OsConfig {
    /// Simulated physical memory for a footprint: `memory_bytes`, or the
    /// default described in `Kernel::new`. Shared with the memory estimate
    /// made before any run allocates (`run::check_memory`).
    pub fn memory_for(&self, footprint: u64) -> u64 {
        match self.memory_bytes {
            Some(m) => m,
            None => {
                // Saturating: a footprint near 2^64 is refused by the estimate,
                // not by an overflow.
                let m = footprint.saturating_add(footprint.saturating_mul(3) / 10).saturating_add(8 << 20).div_ceil(2 << 20).max(32).saturating_mul(2 << 20);
                if matches!(self.fragmentation, Some(Fragmentation::Ingens { .. })) { m.saturating_mul(2) } else { m }
            }
        }
    }
}

/// What a walk found, for the policy's and the PCC's view of the hardware:
/// the leaf's size and where its flags live (VMA and page index), so the
/// walk's writes land on the entry `leaf` read without a second VMA lookup.
#[derive(Clone, Copy, Debug, Default)]
struct LastWalk {
    size: usize,
    vi: usize,
    pi: usize,
}

pub struct Kernel {
    geo: Geometry,
    shape: Shape,
    phys: PhysMem,
    spaces: Vec<AddressSpace>,
    pub clock: Clock,
    costs: OsCosts,
    cost: CostConfig,
    budget_bytes: Option<u64>,
    footprint: u64,
    pending: Vec<Shootdown>,
    pub stats: OsStats,
    faults_huge: [u64; 8],
    /// The policies on this kernel, in order (see `new_multi` for how hooks
    /// are dispatched). A slot is None while its policy's callback runs.
    policies: Vec<Option<Box<dyn Policy>>>,
    /// Their names, kept apart so a plan entry made during a callback can
    /// name the acting policy while it is taken out of its slot.
    names: Vec<&'static str>,
    /// Indices of the policies that want walk events (precomputed: the walk
    /// path loops over these only, and not at all if none wants them).
    walkers: Vec<usize>,
    /// The policy whose callback is running (records its plan entries).
    acting: Option<usize>,
    /// Work done from a timer runs on another core (a daemon): async cost.
    in_daemon: bool,
    /// Populating setup data before the traced phase: setup cost.
    in_setup: bool,
    timeline: BoundedLog<Sample>,
    next_sample: u64,
    sample_every: u64,
    plan: BoundedLog<PlanEntry>,
    /// Warnings for the result (bounded logs that dropped entries, daemons
    /// stopped at `limits::DAEMON_STOP_S`).
    notes: Vec<String>,
    daemons_stopped: bool,
    last_marker: Option<String>,
    frag_report: Option<FragReport>,
    huge_total: u64,
    peak_huge_total: u64,
    last: LastWalk,
    scratch: Vec<Migration>,
    /// Promotion candidate caches (PCC §3.2), one per cpu, created lazily;
    /// hardware the kernel models because the walker feeds it. None: no PCC
    /// (the default), which costs one branch per walk.
    pcc_cfg: Option<PccConfig>,
    pccs: Vec<Pcc>,
    /// Per-base-page coverage bits are being set on every access (HawkEye's
    /// access-coverage source, as the PCC artifact models it).
    coverage_on: bool,
    // direct segments: per-process primary regions and segments (os/segment.rs).
    pub segments: super::segment::SegmentTable,
}

const OWNER_PID_SHIFT: u32 = 48;
/// Most timeline samples kept (half from the start, half from the end): the
/// default period of 2^20 accesses reaches it only past 10^11 accesses.
const MAX_TIMELINE_SAMPLES: usize = 100_000;
/// Most executed-plan entries kept (about 64 MiB).
const MAX_PLAN_ENTRIES: usize = 1 << 20;

impl Kernel {
    /// A kernel with one policy.
    pub fn new(geo: Geometry, cost: CostConfig, header: &TraceHeader, cfg: &OsConfig, policy: Box<dyn Policy>) -> Result<Kernel> {
        Self::new_multi(geo, cost, header, cfg, vec![policy])
    }

    /// A kernel with several policies (fault-time deciders, daemons or both)
    /// in this order. Dispatch rules:
    /// - a fault asks the policies in order; the first that answers other than
    ///   `FaultAction::Base` decides, and the later ones are not asked;
    /// - `init`, progress, free and `finish` go to every policy, in order;
    ///   walk events to every policy whose `wants_walks` is true, in order;
    /// - a timer goes to the policy that scheduled it (ids are per policy:
    ///   `os::clock`), in the clock's deterministic order;
    /// - a plan entry names the policy whose callback made it.
    pub fn new_multi(geo: Geometry, cost: CostConfig, header: &TraceHeader, cfg: &OsConfig, policies: Vec<Box<dyn Policy>>) -> Result<Kernel> {
        if policies.is_empty() {
            return Err(Error::input("a kernel needs at least one policy"));
        }
        let shape = Shape::from_levels(&geo.level_shifts);
        let footprint = cfg.footprint_bytes.unwrap_or_else(|| header.footprint());
        // Default memory: the footprint plus 30% and 8MiB, rounded up to 2MB,
        // at least 64MiB. The PCC paper (§5.1.1, artifact run_frag.sh) leaves
        // the footprint plus a fixed 3GB free before fragmenting; scaled down,
        // a proportional margin keeps "90% fragmented" meaning that most of the
        // footprint cannot get huge pages.
        // With Ingens' method the fragmenting program keeps half of the free
        // memory it grabbed (phys::fragment, free_share 0.5): double the
        // default so the workload still fits beside it.
        let memory = cfg.memory_for(footprint);
        let base_page = geo.sizes[0];
        let top_order = geo.shifts[geo.num_sizes() - 1] - geo.shifts[0];
        let mem_order = (63 - (memory / base_page).max(1).leading_zeros()).min(top_order.max(9));
        let mut phys = PhysMem::new(memory, base_page, mem_order)?;
        let frag_report = match cfg.fragmentation {
            None => None,
            Some(Fragmentation::Pcc { share }) => Some(phys.fragment_pcc(share, cfg.seed)?),
            Some(Fragmentation::Ingens { fmfi }) => Some(phys.fragment_ingens(fmfi, cfg.seed)?),
        };
        let budget_bytes = match cfg.budget {
            None => None,
            Some(b) if !(0.0..=1.0).contains(&b) => {
                return Err(Error::input(format!("budget {b} is not a share between 0 and 1")))
            }
            Some(_) if footprint == 0 => {
                return Err(Error::input(
                    "a huge-page budget needs a footprint: the trace declares no regions; pass --footprint",
                ))
            }
            // The PCC paper's N% limit counts whole huge regions: floor(N% x ceil(footprint / 2MB)).
            Some(b) => {
                let unit = 1u64 << shape.region_shift;
                Some(((b * footprint.div_ceil(unit) as f64) + 1e-9).floor() as u64 * unit)
            }
        };
        let time = match cfg.time {
            Some(t) => t,
            None => match header.accesses_per_second {
                Some(r) if r > 0.0 => TimeBase::AccessRate { accesses_per_second: r },
                _ => TimeBase::Cycles { hz: cost.cpu_ghz * 1e9 },
            },
        };
        let nproc = header.processes.max(1) as usize;
        let mut spaces: Vec<AddressSpace> = (0..nproc)
            .map(|p| AddressSpace::new(p as u16, header.process_names.get(p).cloned().unwrap_or_else(|| format!("pid{p}"))))
            .collect();
        for r in &header.regions {
            let p = r.pid as usize;
            if p >= spaces.len() {
                spaces.resize_with(p + 1, Default::default);
                spaces[p].pid = r.pid;
                spaces[p].name = format!("pid{p}");
            }
            spaces[p].add_region(r, &shape);
        }
        if cfg.sample_every == 0 {
            return Err(Error::input("sample_every=0: the timeline sample period must be at least 1 access"));
        }
        // Each sample holds two counters per process: keep about 4M numbers
        // (32 MiB) at most, and never fewer than 64 samples.
        let timeline_cap = ((1usize << 22) / (4 + 2 * spaces.len())).clamp(64, MAX_TIMELINE_SAMPLES);
        let names: Vec<&'static str> = policies.iter().map(|p| p.name()).collect();
        let walkers: Vec<usize> = policies.iter().enumerate().filter(|(_, p)| p.wants_walks()).map(|(i, _)| i).collect();
        let mut k = Kernel {
            geo,
            shape,
            phys,
            spaces,
            clock: Clock::new(time),
            costs: cfg.costs.clone(),
            cost,
            budget_bytes,
            footprint,
            pending: Vec::new(),
            stats: OsStats::default(),
            faults_huge: [0; 8],
            policies: policies.into_iter().map(Some).collect(),
            names,
            walkers,
            acting: None,
            in_daemon: false,
            in_setup: false,
            timeline: BoundedLog::new(timeline_cap / 2, timeline_cap / 2),
            next_sample: 0,
            sample_every: cfg.sample_every,
            // A prefix: a plan with a gap in the middle would misstate when
            // later entries apply. Promotions are bounded by regions unless
            // memory is freed and re-promoted again and again.
            plan: BoundedLog::new(MAX_PLAN_ENTRIES, 0),
            notes: Vec::new(),
            daemons_stopped: false,
            last_marker: None,
            frag_report,
            huge_total: 0,
            peak_huge_total: 0,
            last: LastWalk::default(),
            scratch: Vec::new(),
            pcc_cfg: None,
            pccs: Vec::new(),
            coverage_on: false,
            // direct segments: the regions the primary regions are made of.
            segments: super::segment::SegmentTable::new(&header.regions),
        };
        k.for_each_policy(|p, k| p.init(k));
        Ok(k)
    }

    // ------------------------------------------------------------ read access

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn shape(&self) -> Shape {
        self.shape
    }
    pub fn phys(&self) -> &PhysMem {
        &self.phys
    }
    pub fn spaces(&self) -> &[AddressSpace] {
        &self.spaces
    }
    pub fn space(&self, pid: u16) -> Option<&AddressSpace> {
        self.spaces.get(pid as usize)
    }
    pub fn now(&self) -> f64 {
        self.clock.now()
    }
    pub fn footprint(&self) -> u64 {
        self.footprint
    }
    pub fn budget_bytes(&self) -> Option<u64> {
        self.budget_bytes
    }
    /// Huge-page bytes mapped across all processes.
    pub fn huge_bytes(&self) -> u64 {
        self.huge_total
    }
    pub fn peak_huge_bytes(&self) -> u64 {
        self.peak_huge_total
    }
    /// Bytes of huge pages that may still be mapped under the budget.
    pub fn budget_left(&self) -> u64 {
        self.budget_bytes.map_or(u64::MAX, |b| b.saturating_sub(self.huge_total))
    }
    /// Size in bytes of the PMD-level region (2MB on x86-64).
    pub fn region_bytes(&self) -> u64 {
        1 << self.shape.region_shift
    }
    /// Index of the page size equal to the PMD-level region, if the machine has one.
    pub fn region_size_index(&self) -> Option<usize> {
        self.geo.size_index_of(self.region_bytes())
    }
    pub fn executed_plan(&self) -> &[PlanEntry] {
        self.plan.head()
    }
    pub fn timeline(&self) -> &BoundedLog<Sample> {
        &self.timeline
    }
    /// Base pages of inferred VMAs over all address spaces.
    pub fn inferred_pages(&self) -> u64 {
        self.spaces.iter().map(|s| s.inferred_pages).sum()
    }
    /// Warnings for the result file.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
    /// Add a warning to the result (policies: a bounded record log that
    /// dropped entries).
    pub fn note(&mut self, msg: impl Into<String>) {
        self.notes.push(msg.into())
    }
    pub fn fragmentation_report(&self) -> Option<&FragReport> {
        self.frag_report.as_ref()
    }
    /// The policies' names joined by '+' (one name for one policy).
    pub fn policy_name(&self) -> String {
        self.names.join("+")
    }
    /// One policy: its resolved parameters. Several: a list of
    /// `{"policy": name, "params": ...}` in kernel order.
    pub fn policy_params(&self) -> serde_json::Value {
        let describe = |p: &Option<Box<dyn Policy>>| p.as_ref().map(|p| p.describe()).unwrap_or_default();
        if let [one] = self.policies.as_slice() {
            return describe(one);
        }
        self.policies
            .iter()
            .zip(&self.names)
            .map(|(p, n)| serde_json::json!({ "policy": n, "params": describe(p) }))
            .collect()
    }
    /// Number of policies on this kernel.
    pub fn policy_count(&self) -> usize {
        self.policies.len()
    }

    /// State of one PMD-level region, computed from the page table.
    pub fn region_state(&self, pid: u16, start: u64) -> Option<RegionState> {
        let sp = self.spaces.get(pid as usize)?;
        let vi = sp.find(start).or_else(|| sp.find(start + self.region_bytes() - 1))?;
        let v = &sp.vmas[vi];
        let len = self.region_bytes();
        let start = start & !(len - 1);
        let ri = v.region_index(start.max(v.region_base), self.shape.region_shift);
        let lo = start.max(v.start);
        let hi = (start + len).min(v.end);
        let (a, b) = (v.page_index(lo, self.shape.base_shift), v.page_index(hi - 1, self.shape.base_shift) + 1);
        let mut s = RegionState {
            start,
            inside_vma: v.covers(start, len),
            advised: v.advised,
            touched: v.touched[ri] as u32,
            present: 0,
            accessed: 0,
            dirty: 0,
            leaf_size: 0,
            pmd_accessed: v.pmd_a[ri],
        };
        for &f in &v.flags[a..b] {
            s.present += (f & PRESENT != 0) as u32;
            s.accessed += (f & ACCESSED != 0) as u32;
            s.dirty += (f & DIRTY != 0) as u32;
            s.leaf_size = s.leaf_size.max(size_of_flags(f));
        }
        Some(s)
    }

    /// Start addresses of the PMD-level regions of a VMA (for scanners).
    pub fn vma_regions(&self, pid: u16, vma: usize) -> impl Iterator<Item = u64> + '_ {
        let v = self.spaces.get(pid as usize).and_then(|s| s.vmas.get(vma));
        let shift = self.shape.region_shift;
        v.into_iter().flat_map(move |v| (0..v.regions()).map(move |ri| v.region_start(ri, shift)))
    }

    // ------------------------------------------------------------ time

    /// Run `f` at virtual time `at` (seconds); the scheduling policy's
    /// `on_timer(id)` is called (ids are the policy's own: no other policy
    /// sees them or can collide with them).
    pub fn schedule_at(&mut self, at: f64, id: u32) {
        self.clock.schedule_at(at, id);
    }
    pub fn schedule_in(&mut self, delay: f64, id: u32) {
        let now = self.clock.now();
        self.clock.schedule_at(now + delay.max(0.0), id);
    }

    // direct segments: crate-visible so os/segment.rs charges copies as the kernel does.
    pub(crate) fn charge_us(&mut self, us: f64) {
        if self.in_setup {
            self.clock.os_setup_seconds += us * 1e-6;
        } else if self.in_daemon {
            self.clock.charge_async(us * 1e-6);
        } else {
            self.clock.charge_sync(us * 1e-6);
        }
    }

    /// Charge a policy's own work (scanning, sorting) in microseconds.
    pub fn charge_policy_us(&mut self, us: f64) {
        self.charge_us(us);
    }

    // ------------------------------------------------------------ PCC hardware

    /// Give every cpu a promotion candidate cache (PCC §3.2) fed by the walker
    /// from now on. A policy that reads PCCs calls this from `init`. Calling
    /// it again replaces the PCCs (empty).
    pub fn enable_pcc(&mut self, cfg: PccConfig) -> std::result::Result<(), String> {
        cfg.validate()?;
        self.pccs.clear();
        self.pcc_cfg = Some(cfg);
        Ok(())
    }
    pub fn pcc_config(&self) -> Option<&PccConfig> {
        self.pcc_cfg.as_ref()
    }
    /// The PCCs, indexed by cpu id (cpus that never walked may be missing).
    pub fn pccs(&self) -> &[Pcc] {
        &self.pccs
    }
    pub fn pccs_mut(&mut self) -> &mut [Pcc] {
        &mut self.pccs
    }
    /// The PCC of `cpu`, created if needed; None if no PCC is enabled.
    pub fn pcc_mut(&mut self, cpu: u16) -> Option<&mut Pcc> {
        let cfg = self.pcc_cfg.as_ref()?;
        let c = cpu as usize;
        if c >= self.pccs.len() {
            let (rs, ps) = (self.shape.region_shift, self.shape.pud_shift);
            let template = Pcc::new(cfg, rs, ps);
            self.pccs.resize(c + 1, template);
        }
        Some(&mut self.pccs[c])
    }

    /// The walker's PCC update (PCC §3.2): off the hot path of walks when no
    /// PCC is enabled (the caller tests `pcc_cfg`).
    #[inline(never)]
    fn feed_pcc(&mut self, a: &Access, leaf: &Leaf) {
        let leaf_shift = self.geo.shifts[leaf.size()];
        if let Some(p) = self.pcc_mut(a.cpu) {
            p.on_walk(a.pid, a.addr, leaf_shift, leaf.was(PMD_A), leaf.was(PUD_A));
        }
    }

    // ------------------------------------------------------------ coverage

    /// Turn per-base-page coverage tracking on or off (HawkEye's "access
    /// coverage" with every access counted, as the PCC artifact models it:
    /// linux-thp-and-hawkeye.md B.6). Turning it on allocates a bitset per VMA
    /// if needed and clears every bit (a new window starts); turning it off
    /// keeps the bits for `take_coverage`. While off, nothing is paid per access.
    pub fn track_coverage(&mut self, on: bool) {
        if on {
            for sp in self.spaces.iter_mut() {
                for v in sp.vmas.iter_mut() {
                    let words = v.flags.len().div_ceil(64);
                    v.cov.clear();
                    v.cov.resize(words, 0);
                }
            }
        }
        self.coverage_on = on;
    }
    pub fn coverage_tracking(&self) -> bool {
        self.coverage_on
    }

    /// Base pages of the PMD-level region at `start` accessed since tracking
    /// was turned on (or since the last take of this region); clears them.
    /// Only the part of the region inside the VMA holding `start` counts.
    pub fn take_coverage(&mut self, pid: u16, start: u64) -> u32 {
        let (bs, len) = (self.shape.base_shift, self.region_bytes());
        let start = start & !(len - 1);
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return 0 };
        let Some(vi) = sp.find(start).or_else(|| sp.find(start + len - 1)) else { return 0 };
        let v = &mut sp.vmas[vi];
        let (lo, hi) = (start.max(v.start), (start + len).min(v.end));
        if lo >= hi {
            return 0;
        }
        let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
        v.take_cov(a, b)
    }

    // direct segments: the parts os/segment.rs changes, borrowed together.
    pub(crate) fn segment_parts(&mut self) -> (&mut super::segment::SegmentTable, &mut PhysMem, &mut [AddressSpace], &OsCosts) {
        (&mut self.segments, &mut self.phys, &mut self.spaces, &self.costs)
    }

    // direct segments: huge bytes changed outside install_huge (a revert's 2MB PTEs).
    pub(crate) fn recount_huge(&mut self) {
        self.huge_total = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        self.peak_huge_total = self.peak_huge_total.max(self.huge_total);
    }

    // ------------------------------------------------------------ mechanisms

    // direct segments: crate-visible so segment frames carry the owner tags pages do.
    pub(crate) fn owner(pid: u16, va: u64, base_shift: u32) -> u64 {
        ((pid as u64) << OWNER_PID_SHIFT) | (va >> base_shift)
    }

    // direct segments: crate-visible so os/segment.rs can shoot down a revert.
    pub(crate) fn shootdown(&mut self, pid: u16, start: u64, end: u64) {
        self.pending.push(Shootdown { pid, start, end });
        self.stats.shootdowns += 1;
        // Any shootdown of a region invalidates its PCC entries on every cpu
        // (PCC §3.3 step C; pcc.md §3.6).
        for p in self.pccs.iter_mut() {
            p.invalidate(pid, start, end);
        }
        // IPIs interrupt the program's cpus: always on the critical path.
        self.clock.charge_sync(self.costs.shootdown_us * 1e-6);
    }

    /// Allocate a naturally aligned block of `order`, compacting if allowed.
    fn alloc_block(&mut self, order: u32, mode: AllocMode, owner: u64) -> Option<u64> {
        if let Some(p) = self.phys.alloc(order, Mobility::Movable, owner) {
            return Some(p);
        }
        let AllocMode::Compact { max_pages } = mode else { return None };
        self.compact(order, max_pages);
        self.phys.alloc(order, Mobility::Movable, owner)
    }

    /// Compaction: migrate movable pages until a free block of `order` exists
    /// or `max_pages` pages moved. Every moved page of a process is remapped
    /// and shot down. Returns whether a block of that order is now free.
    pub fn compact(&mut self, order: u32, max_pages: u64) -> bool {
        let mut moves = std::mem::take(&mut self.scratch);
        moves.clear();
        let r = self.phys.compact(order, max_pages, &mut |m| moves.push(m));
        self.stats.compactions += 1;
        self.stats.compaction_successes += r.success as u64;
        self.stats.compaction_migrated_pages += r.migrated_pages;
        self.charge_us(r.migrated_pages as f64 * self.costs.migrate_base_page_us);
        for m in moves.drain(..) {
            self.apply_migration(m);
        }
        self.scratch = moves;
        r.success
    }

    fn apply_migration(&mut self, m: Migration) {
        if m.owner == FRAG_OWNER {
            return; // the fragmenter's own pages: no process maps them
        }
        let pid = (m.owner >> OWNER_PID_SHIFT) as u16;
        let bs = self.shape.base_shift;
        let va = (m.owner & ((1 << OWNER_PID_SHIFT) - 1)) << bs;
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return };
        let Some(vi) = sp.find(va) else { return };
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(va, bs);
        let n = 1usize << m.order;
        // Only pages still mapped to the moved block follow it: a page freed
        // and faulted again since has a frame of its own.
        for i in 0..n.min(v.pfn.len() - pi) {
            if v.pfn[pi + i] as u64 == m.from + i as u64 {
                v.pfn[pi + i] = (m.to + i as u64) as u32;
            }
        }
        // A migrated page's PMD accessed bit restarts (PCC filter re-arms).
        let ri = v.region_index(va, self.shape.region_shift);
        v.pmd_a[ri] = false;
        self.shootdown(pid, va, va + ((n as u64) << bs));
    }

    fn map_base(&mut self, pid: u16, vi: usize, pi: usize) {
        let bs = self.shape.base_shift;
        let va = self.spaces[pid as usize].vmas[vi].start + ((pi as u64) << bs);
        let owner = Self::owner(pid, va, bs);
        let pfn = match self.phys.alloc(0, Mobility::Movable, owner) {
            Some(p) => p as u32,
            None => {
                // Out of memory: count it and map without a frame so the run
                // continues; the result flags it (the memory size is too small).
                self.stats.out_of_memory += 1;
                NO_PFN
            }
        };
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        v.pfn[pi] = pfn;
        v.flags[pi] = PRESENT;
        if pfn != NO_PFN {
            sp.frames_held += 1;
            sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        }
        self.stats.faults_base += 1;
        self.charge_us(self.costs.fault_base_us);
    }

    /// Check a huge mapping of size index `size` at `start` could be made.
    fn check_huge(&self, pid: u16, start: u64, size: usize) -> std::result::Result<(usize, bool), Refusal> {
        let len = self.geo.sizes[size];
        if size == 0 || start % len != 0 {
            return Err(Refusal::Ineligible);
        }
        // direct segments: never a huge page over memory a segment translates.
        if self.segments.overlaps(pid, start, start + len) {
            return Err(Refusal::Ineligible);
        }
        let sp = self.spaces.get(pid as usize).ok_or(Refusal::Ineligible)?;
        let vi = sp.find(start).ok_or(Refusal::Ineligible)?;
        let v = &sp.vmas[vi];
        if !v.covers(start, len) {
            return Err(Refusal::Ineligible);
        }
        let bs = self.shape.base_shift;
        let (a, n) = (v.page_index(start, bs), (len >> bs) as usize);
        let flags = &v.flags[a..a + n];
        if flags.iter().all(|&f| f & PRESENT != 0 && size_of_flags(f) == size) {
            return Err(Refusal::AlreadyHuge);
        }
        // Huge bytes already inside the range are replaced, not added.
        let inside: u64 = flags.iter().filter(|&&f| f & PRESENT != 0 && size_of_flags(f) > 0).count() as u64 * (1 << bs);
        if let Some(b) = self.budget_bytes {
            if self.huge_total - inside + len > b {
                return Err(Refusal::Budget);
            }
        }
        let empty = flags.iter().all(|&f| f & PRESENT == 0);
        Ok((vi, empty))
    }

    /// Install a huge leaf of size index `size` at `start` (aligned, inside a
    /// VMA), backed by a newly allocated block: present base pages are copied,
    /// absent ones zeroed, replaced frames freed; queues the shootdown.
    fn install_huge(&mut self, pid: u16, vi: usize, start: u64, size: usize, mode: AllocMode) -> std::result::Result<(), Refusal> {
        let bs = self.shape.base_shift;
        let len = self.geo.sizes[size];
        let order = self.geo.shifts[size] - bs;
        let owner = Self::owner(pid, start, bs);
        let block = self.alloc_block(order, mode, owner).ok_or(Refusal::NoMemory)?;
        // Compaction may have moved this process's pages: re-read the VMA.
        let rs = self.shape.region_shift;
        let sp = &mut self.spaces[pid as usize];
        let v = &mut sp.vmas[vi];
        let a = v.page_index(start, bs);
        let n = (len >> bs) as usize;
        let (mut copied, mut zeroed, mut replaced_huge) = (0u64, 0u64, 0u64);
        let mut freed: Vec<(u64, u32)> = Vec::new();
        let mut i = 0;
        while i < n {
            let f = v.flags[a + i];
            if f & PRESENT == 0 {
                zeroed += 1;
                i += 1;
                continue;
            }
            let s = size_of_flags(f);
            if s == 0 {
                copied += 1;
                // A frame of a block split while partly freed belongs to that
                // block, which stays allocated as one unit: not ours to free.
                if v.pfn[a + i] != NO_PFN && !v.leaked(a + i) {
                    freed.push((v.pfn[a + i] as u64, 0));
                }
                i += 1;
            } else {
                // A smaller huge leaf inside (1GB over 2MB pages, or Navarro's
                // intermediate sizes): free its block once.
                let pages = 1usize << (self.geo.shifts[s] - bs);
                copied += pages as u64;
                replaced_huge += (pages as u64) << bs;
                freed.push((v.pfn[a + i] as u64, self.geo.shifts[s] - bs));
                i += pages;
            }
        }
        for j in 0..n {
            v.pfn[a + j] = (block + j as u64) as u32;
            let keep = v.flags[a + j] & (TOUCHED | ACCESSED | DIRTY);
            v.flags[a + j] = PRESENT | keep | ((size as u8) << aspace::SIZE_SHIFT);
        }
        // A remapped region's PMD accessed bit restarts (re-arms the PCC filter).
        let (r0, r1) = (v.region_index(start, rs), v.region_index(start + len - 1, rs));
        for r in r0..=r1 {
            v.pmd_a[r] = false;
        }
        let freed_frames: u64 = freed.iter().map(|&(_, o)| 1u64 << o).sum();
        sp.frames_held = sp.frames_held + (1u64 << order) - freed_frames;
        sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        sp.huge_bytes[size] += len;
        for j in 1..8 {
            // subtract replaced smaller huge leaves (attributed by bytes)
            if j != size && replaced_huge > 0 && sp.huge_bytes[j] > 0 {
                let d = replaced_huge.min(sp.huge_bytes[j]);
                sp.huge_bytes[j] -= d;
                replaced_huge -= d;
            }
        }
        for (p, o) in freed {
            self.phys.free(p, o);
        }
        self.huge_total = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        self.peak_huge_total = self.peak_huge_total.max(self.huge_total);
        self.stats.pages_copied += copied;
        self.stats.pages_zeroed += zeroed;
        self.charge_us(copied as f64 * self.costs.copy_base_page_us + zeroed as f64 * self.costs.zero_base_page_us);
        if copied > 0 {
            // Only a range that had translations can be cached anywhere.
            self.shootdown(pid, start, start + len);
        }
        Ok(())
    }

    /// Promote (collapse) the aligned range at `start` to one huge leaf of size
    /// index `size`. Goes through the budget, the allocator and compaction.
    pub fn promote(&mut self, pid: u16, start: u64, size: usize, mode: AllocMode) -> std::result::Result<(), Refusal> {
        let r = self.check_huge(pid, start, size).and_then(|(vi, _)| self.install_huge(pid, vi, start, size, mode));
        match r {
            Ok(()) => {
                self.stats.promotions += 1;
                self.record_plan(self.acting, pid, start, size);
            }
            Err(e) => e.count(&mut self.stats.promotion_failures),
        }
        r
    }

    /// Count `n` promotion attempts refused as ineligible without making them:
    /// what `promote` would record for addresses outside every VMA, where it
    /// has no other effect (a plan range over unmapped space).
    pub fn count_ineligible_promotions(&mut self, n: u64) {
        self.stats.promotion_failures.ineligible += n;
    }

    /// Demote (split) the huge leaf covering `addr` into base-page leaves.
    /// All its base pages stay mapped (Linux keeps the folio PTE-mapped).
    pub fn demote(&mut self, pid: u16, addr: u64) -> bool {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return false };
        let Some(vi) = sp.find(addr) else { return false };
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(addr, bs);
        let f = v.flags[pi];
        let s = size_of_flags(f);
        if f & PRESENT == 0 || s == 0 {
            return false;
        }
        let len = self.geo.sizes[s];
        let start = addr & !(len - 1);
        let a = v.page_index(start, bs);
        let n = (len >> bs) as usize;
        let block = v.pfn[a] as u64;
        for j in 0..n {
            v.flags[a + j] &= !aspace::SIZE_MASK;
        }
        sp.huge_bytes[s] -= len;
        let order = self.geo.shifts[s] - bs;
        self.phys.split(block, order);
        for j in 0..n {
            self.phys.set_owner(block + j as u64, Self::owner(pid, start + ((j as u64) << bs), bs));
        }
        self.huge_total -= len;
        self.stats.demotions += 1;
        self.charge_us(self.costs.split_us);
        self.shootdown(pid, start, start + len);
        true
    }

    /// Clear the accessed bits of the base pages (and PMD bits if `pmd`) in a
    /// range, with the TLB invalidation that makes later accesses set them again.
    pub fn clear_accessed(&mut self, pid: u16, start: u64, len: u64, pmd: bool) {
        let (bs, rs) = (self.shape.base_shift, self.shape.region_shift);
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return };
        let mut touched = false;
        for v in sp.vmas.iter_mut() {
            let lo = start.max(v.start);
            let hi = (start + len).min(v.end);
            if lo >= hi {
                continue;
            }
            let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
            for f in &mut v.flags[a..b] {
                *f &= !ACCESSED;
            }
            if pmd {
                let (r0, r1) = (v.region_index(lo, rs), v.region_index(hi - 1, rs));
                for r in r0..=r1 {
                    v.pmd_a[r] = false;
                }
            }
            touched = true;
        }
        if touched {
            self.stats.accessed_bit_clears += 1;
            self.charge_us(((len >> bs) as f64) * self.costs.scan_pte_us);
            self.shootdown(pid, start, start + len);
        }
    }

    /// The program freed [start, start + len) (munmap or MADV_DONTNEED of
    /// whole pages). Base pages return to the allocator; a huge page wholly
    /// inside is freed; a huge page partly inside is split and keeps its frames
    /// (Linux defers the split of the folio to memory pressure, which is where
    /// the bloat of Ingens §3.2 comes from).
    pub fn free_range(&mut self, pid: u16, start: u64, len: u64) {
        let bs = self.shape.base_shift;
        let rs = self.shape.region_shift;
        let mask = (1u64 << bs) - 1;
        let (start, end) = ((start + mask) & !mask, (start + len) & !mask);
        if end <= start || pid as usize >= self.spaces.len() {
            return;
        }
        self.stats.frees += 1;
        self.stats.freed_bytes += end - start;
        // First split huge leaves that straddle the range boundaries.
        for edge in [start, end - 1] {
            let sp = &self.spaces[pid as usize];
            if let Some(vi) = sp.find(edge) {
                let v = &sp.vmas[vi];
                let f = v.flags[v.page_index(edge, bs)];
                let s = size_of_flags(f);
                if f & PRESENT != 0 && s > 0 {
                    let l = self.geo.sizes[s];
                    let hs = edge & !(l - 1);
                    if hs < start || hs + l > end {
                        self.demote_keeping_frames(pid, edge);
                    }
                }
            }
        }
        let mut to_free: Vec<(u64, u32)> = Vec::new();
        let sp = &mut self.spaces[pid as usize];
        for v in sp.vmas.iter_mut() {
            let lo = start.max(v.start);
            let hi = end.min(v.end);
            if lo >= hi {
                continue;
            }
            let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
            let mut i = a;
            while i < b {
                let f = v.flags[i];
                let s = size_of_flags(f);
                let pages = if f & PRESENT != 0 && s > 0 { 1usize << (self.geo.shifts[s] - bs) } else { 1 };
                if f & PRESENT != 0 {
                    if s > 0 {
                        to_free.push((v.pfn[i] as u64, self.geo.shifts[s] - bs));
                        sp.huge_bytes[s] -= (pages as u64) << bs;
                        sp.frames_held -= pages as u64;
                    } else if v.pfn[i] != NO_PFN && !v.leaked(i) {
                        to_free.push((v.pfn[i] as u64, 0));
                        sp.frames_held -= 1;
                    }
                }
                for j in i..i + pages {
                    if v.flags[j] & TOUCHED != 0 {
                        sp.touched_pages -= 1;
                        let ri = v.region_index(v.start + ((j as u64) << bs), rs);
                        v.touched[ri] -= 1;
                    }
                    v.flags[j] = 0;
                    v.pfn[j] = NO_PFN;
                }
                i += pages;
            }
        }
        for (p, o) in to_free {
            self.phys.free(p, o);
        }
        self.huge_total = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        self.shootdown(pid, start, end);
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

    /// Split a huge leaf whose block stays allocated as one unit: its pages
    /// become base leaves marked as frames the process cannot free one by one.
    fn demote_keeping_frames(&mut self, pid: u16, addr: u64) {
        let bs = self.shape.base_shift;
        let sp = &mut self.spaces[pid as usize];
        let Some(vi) = sp.find(addr) else { return };
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(addr, bs);
        let s = size_of_flags(v.flags[pi]);
        let len = self.geo.sizes[s];
        let start = addr & !(len - 1);
        let a = v.page_index(start, bs);
        for j in 0..(len >> bs) as usize {
            v.flags[a + j] &= !aspace::SIZE_MASK;
            v.mark_leaked(a + j);
        }
        sp.huge_bytes[s] -= len;
        self.huge_total -= len;
        self.stats.demotions += 1;
        self.shootdown(pid, start, start + len);
    }

    /// Record an executed promotion made by policy `by` (None: a mechanism
    /// called outside any callback, named after the whole kernel's policies).
    fn record_plan(&mut self, by: Option<usize>, pid: u16, start: u64, size: usize) {
        let when = match &self.last_marker {
            Some(m) => When::Progress(m.clone()),
            None if self.clock.accesses == 0 => When::Start,
            None => When::Accesses(self.clock.accesses),
        };
        // The name comes from the dispatch, not from the policy slot: during a
        // daemon's callback its slot is empty (the policy is borrowed out).
        let name = by.map_or_else(|| self.policy_name(), |i| self.names[i].to_string());
        let note = format!("{name} at {:.3} s (accesses {})", self.clock.now(), self.clock.accesses);
        self.plan.push(PlanEntry { start, length: self.geo.sizes[size], page_size: self.geo.sizes[size], when, pid, note: Some(note) });
    }

    // ------------------------------------------------------------ plumbing

    /// Run `f` on policy `i`, lent out of its slot, as the acting policy and
    /// the owner of the timers it schedules. None if the policy is already
    /// in a callback (a mechanism it called re-entered the dispatch).
    fn with_policy<R>(&mut self, i: usize, f: impl FnOnce(&mut dyn Policy, &mut Kernel) -> R) -> Option<R> {
        let mut p = self.policies[i].take()?;
        let acting = self.acting.replace(i);
        let owner = self.clock.set_owner(i as u32);
        let r = f(p.as_mut(), self);
        self.clock.set_owner(owner);
        self.acting = acting;
        self.policies[i] = Some(p);
        Some(r)
    }

    /// Run `f` on every policy, in kernel order.
    fn for_each_policy(&mut self, mut f: impl FnMut(&mut dyn Policy, &mut Kernel)) {
        for i in 0..self.policies.len() {
            self.with_policy(i, &mut f);
        }
    }

    #[cold]
    fn fault(&mut self, a: &Access, vi: usize, pi: usize) {
        let pid = a.pid;
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
                    e.count(&mut self.stats.fault_failures);
                    self.stats.fault_fallbacks += 1;
                }
            }
        }
        self.map_base(pid, vi, pi);
    }

    /// Account a touch of a base page (the utilization Ingens tracks).
    #[inline(always)]
    fn touch(sp: &mut AddressSpace, vi: usize, pi: usize, addr: u64, rs: u32) {
        let v = &mut sp.vmas[vi];
        if v.flags[pi] & TOUCHED == 0 {
            v.flags[pi] |= TOUCHED;
            let ri = v.region_index(addr, rs);
            v.touched[ri] += 1;
            sp.touched_pages += 1;
        }
    }

    fn sample(&mut self) {
        self.timeline.push(Sample {
            time_s: self.clock.now(),
            accesses: self.clock.accesses,
            huge_bytes: self.spaces.iter().map(|s| s.total_huge_bytes()).collect(),
            rss_bytes: self.spaces.iter().map(|s| s.frames_held << self.shape.base_shift).collect(),
            fmfi: self.phys.fmfi(self.shape.region_shift - self.shape.base_shift),
            promotions: self.stats.promotions,
        });
    }

    fn run_timers(&mut self) {
        // The safety net behind the duration limits (see `limits`): past it no
        // daemon runs, so their firings and records stay bounded.
        if self.clock.now() > DAEMON_STOP_S {
            self.clock.clear_timers();
            if !self.daemons_stopped {
                self.daemons_stopped = true;
                self.note(format!(
                    "virtual time passed {DAEMON_STOP_S} s at access {}: policy daemons were stopped there",
                    self.clock.accesses
                ));
            }
            return;
        }
        while let Some((_, owner, id)) = self.clock.pop_due() {
            self.in_daemon = true;
            self.with_policy(owner as usize, |p, k| p.on_timer(k, id));
            self.in_daemon = false;
        }
    }

    /// End of the trace: let the policy finish, take a last sample, and build
    /// the per-process totals.
    pub fn finish(&mut self) -> Vec<ProcessStats> {
        self.for_each_policy(|p, k| p.finish(k));
        self.sample();
        let dropped = [self.timeline.warning("timeline"), self.plan.warning("executed plan")];
        self.notes.extend(dropped.into_iter().flatten());
        let bs = self.shape.base_shift;
        self.stats.faults_huge = (1..self.geo.num_sizes()).map(|s| (page_label(self.geo.sizes[s]), self.faults_huge[s])).collect();
        self.spaces
            .iter()
            .map(|s| {
                let rss = s.frames_held << bs;
                let base = s.touched_pages << bs;
                let fp = s.footprint_declared();
                ProcessStats {
                    pid: s.pid,
                    name: s.name.clone(),
                    footprint_bytes: fp,
                    rss_bytes: rss,
                    peak_rss_bytes: s.peak_frames << bs,
                    base_rss_bytes: base,
                    bloat: if base > 0 { rss as f64 / base as f64 } else { 1.0 },
                    huge_bytes: s.total_huge_bytes(),
                    huge_pages: (1..self.geo.num_sizes())
                        .map(|i| (page_label(self.geo.sizes[i]), s.huge_bytes[i] / self.geo.sizes[i]))
                        .collect(),
                    huge_share: if fp > 0 { s.total_huge_bytes() as f64 / fp as f64 } else { 0.0 },
                }
            })
            .collect()
    }

    /// Check the kernel's invariants (tests): physical conservation, frame
    /// accounting per process, budget.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        self.phys.check_invariants()?;
        if self.phys.misuse_count() > 0 {
            return Err(format!("{} invalid calls into the physical allocator", self.phys.misuse_count()));
        }
        let held: u64 = self.spaces.iter().map(|s| s.frames_held).sum();
        let used = self.phys.total_frames() - self.phys.free_frames();
        let frag = self.frag_report.as_ref().map_or(0, |f| f.pages_pinned);
        if held + frag != used {
            return Err(format!("frames held by processes ({held}) + fragmenter ({frag}) != frames in use ({used})"));
        }
        if let Some(b) = self.budget_bytes {
            if self.huge_total > b {
                return Err(format!("huge bytes {} exceed the budget {b}", self.huge_total));
            }
        }
        let sum: u64 = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        if sum != self.huge_total {
            return Err(format!("huge total {} != sum over processes {sum}", self.huge_total));
        }
        Ok(())
    }

    pub fn os_cycles(&self) -> f64 {
        self.clock.os_sync_seconds * self.cost.cpu_ghz * 1e9
    }
}

/// Why the kernel refused a huge mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    NoMemory,
    Budget,
    Ineligible,
    AlreadyHuge,
}

impl Kernel {
    /// One access of `cycles` happened: sample the timeline when due, move
    /// the clock, run due daemons. Shared by paged accesses and (direct
    /// segments) segment hits.
    #[inline(always)]
    fn advance(&mut self, cycles: f64) {
        if self.clock.accesses >= self.next_sample {
            self.sample();
            self.next_sample += self.sample_every;
        }
        if self.clock.tick(cycles) {
            self.run_timers();
        }
    }
}

impl Refusal {
    fn count(self, f: &mut super::metrics::Failures) {
        match self {
            Refusal::NoMemory => f.no_memory += 1,
            Refusal::Budget => f.budget += 1,
            Refusal::Ineligible => f.ineligible += 1,
            Refusal::AlreadyHuge => f.already_huge += 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionState {
    pub start: u64,
    /// The whole region lies inside one VMA (a PMD leaf is possible).
    pub inside_vma: bool,
    pub advised: bool,
    pub touched: u32,
    pub present: u32,
    pub accessed: u32,
    pub dirty: u32,
    /// Largest leaf size index in the region (0: base pages only).
    pub leaf_size: usize,
    pub pmd_accessed: bool,
}

impl PageTable for Kernel {
    #[inline]
    fn leaf(&mut self, a: &Access) -> Leaf {
        let pid = a.pid as usize;
        if pid >= self.spaces.len() {
            self.spaces.resize_with(pid + 1, Default::default);
            self.spaces[pid].pid = a.pid;
            self.spaces[pid].name = format!("pid{pid}");
        }
        let shape = self.shape;
        let vi = self.spaces[pid].vma_index(a.addr, &shape);
        let pi = self.spaces[pid].vmas[vi].page_index(a.addr, shape.base_shift);
        if self.spaces[pid].vmas[vi].flags[pi] & PRESENT == 0 {
            self.fault(a, vi, pi);
        }
        let sp = &mut self.spaces[pid];
        Self::touch(sp, vi, pi, a.addr, shape.region_shift);
        let v = &mut sp.vmas[vi];
        let ri = v.region_index(a.addr, shape.region_shift);
        let pud = ((a.addr >> shape.pud_shift) - (v.start >> shape.pud_shift)) as usize;
        // The bits as this walk finds them; the walker decides which it sets
        // (`walked` below applies them once the walk is priced).
        let flags = v.flags[pi];
        let was_set = (if flags & ACCESSED != 0 { LEAF_A } else { 0 })
            | (if flags & DIRTY != 0 { LEAF_D } else { 0 })
            | (if v.pmd_a[ri] { PMD_A } else { 0 })
            | (if v.pud_a[pud] { PUD_A } else { 0 });
        let size = size_of_flags(flags);
        let pfn = v.pfn[pi];
        let pa = if pfn == NO_PFN { NO_PA } else { ((pfn as u64) << shape.base_shift) | (a.addr & ((1u64 << shape.base_shift) - 1)) };
        self.last = LastWalk { size, vi, pi };
        Leaf::native(size, pa, was_set)
    }

    /// The walk's side effects, as the walker reported them: its accessed and
    /// dirty bit writes into the tables, then what watches walks (the PCC,
    /// fed by the walker in hardware: PCC §3.2; a policy that asked for walk
    /// events). Nothing of the kernel runs between `leaf` and here (only the
    /// MMUs' shootdowns and TLB fill), so `last` still names the entry.
    #[inline]
    fn walked(&mut self, a: &Access, leaf: &Leaf, set: u8) {
        let shape = self.shape;
        let LastWalk { size, vi, pi } = self.last;
        let v = &mut self.spaces[a.pid as usize].vmas[vi];
        if set & PMD_A != 0 {
            let ri = v.region_index(a.addr, shape.region_shift);
            v.pmd_a[ri] = true;
        }
        if set & PUD_A != 0 {
            v.pud_a[((a.addr >> shape.pud_shift) - (v.start >> shape.pud_shift)) as usize] = true;
        }
        v.flags[pi] |= (if set & LEAF_A != 0 { ACCESSED } else { 0 }) | (if set & LEAF_D != 0 { DIRTY } else { 0 });
        if self.pcc_cfg.is_some() {
            self.feed_pcc(a, leaf);
        }
        if !self.walkers.is_empty() {
            let w = Walk { pid: a.pid, cpu: a.cpu, addr: a.addr, write: a.write, size, pmd_a_was_set: leaf.was(PMD_A), pud_a_was_set: leaf.was(PUD_A) };
            for j in 0..self.walkers.len() {
                let i = self.walkers[j];
                self.with_policy(i, |p, k| p.on_walk(k, &w));
            }
        }
    }

    #[inline]
    fn take_shootdowns(&mut self, out: &mut Vec<Shootdown>) {
        out.append(&mut self.pending);
    }

    #[inline]
    fn has_shootdowns(&self) -> bool {
        // direct segments: register updates travel with the shootdowns.
        !self.pending.is_empty() || self.segments.has_updates()
    }

    // direct segments: hand the register updates to the segment unit.
    fn take_segment_updates(&mut self, out: &mut Vec<crate::hw::segment::ProcessSegment>) {
        self.segments.take_updates(out);
    }

    // direct segments: a segment hit uses its page (RSS and bloat count it as
    // a base-page run would), costs the base access and moves time on.
    fn segment_hit(&mut self, a: &Access) {
        let shape = self.shape;
        if let Some(sp) = self.spaces.get_mut(a.pid as usize) {
            if let Some(vi) = sp.find(a.addr) {
                let pi = sp.vmas[vi].page_index(a.addr, shape.base_shift);
                Self::touch(sp, vi, pi, a.addr, shape.region_shift);
            }
        }
        self.advance(self.cost.segment_hit_cycles());
    }

    #[inline]
    fn after_access(&mut self, a: &Access, outcome: Outcome, walk: Option<WalkCost>) {
        let cycles = self.cost.access_cycles(outcome, walk);
        let size = match outcome {
            Outcome::L1Hit(s) | Outcome::L2Hit(s) => s,
            Outcome::Miss => self.last.size,
        };
        if size > 0 || self.coverage_on {
            // Accesses inside a huge page never fault, so first touches of its
            // base pages are recorded here (the utilization a base-page run
            // would show as RSS). Hits on base pages were touched at fault time.
            // Coverage tracking (off by default) shares the VMA lookup.
            let shape = self.shape;
            let sp = &mut self.spaces[a.pid as usize];
            let vi = sp.vma_index(a.addr, &shape);
            let pi = sp.vmas[vi].page_index(a.addr, shape.base_shift);
            if size > 0 {
                Self::touch(sp, vi, pi, a.addr, shape.region_shift);
            }
            if self.coverage_on {
                sp.vmas[vi].cover(pi);
            }
        }
        self.advance(cycles);
    }

    fn progress(&mut self, label: &str) {
        if let Some((p, s, l)) = crate::trace::parse_populate_label(label) {
            self.populate(p, s, l);
            return;
        }
        if let Some((p, s, l)) = crate::trace::parse_free_label(label) {
            self.free_range(p, s, l);
            self.for_each_policy(|pol, k| pol.on_free(k, p, s, l));
            return;
        }
        self.last_marker = Some(label.to_string());
        self.for_each_policy(|p, k| p.on_progress(k, label));
    }
}
