//! The kernel model: physical memory, address spaces, the virtual clock and the
//! mechanisms policies act through. Mechanisms keep the invariants (a remap
//! always queues a shootdown; physical frames are conserved; the huge-page
//! budget is never exceeded) and charge their costs to the clock; policies
//! only decide (docs/architecture.md, "The seam", after Ingens).
//!
//! The kernel is the simulator's page table: on every TLB miss it resolves the
//! leaf, faulting on first touch and asking the policy what to map.

use super::aspace::{size_of_flags, AddressSpace, Shape, ACCESSED, DIRTY, NO_PFN, PRESENT, TOUCHED};
use super::clock::{Clock, TimeBase};
use super::costs::OsCosts;
use super::ctx::Ctx;
use super::hooks::{Policy, Walk};
pub use super::config::{AllocMode, Fragmentation, OsConfig};
use super::metrics::{OsStats, ProcessStats, Sample};
use super::phys::{FragReport, Migration, PhysMem};
use crate::bounded::BoundedLog;
use crate::config::CostConfig;
use crate::limits::DAEMON_STOP_S;
use crate::hw::pcc_table::PccConfig;
use crate::hw::pwc::WalkCost;
use crate::hw::leaf::{LEAF_A, LEAF_D, NO_PA, PMD_A, PUD_A};
use crate::hw::{Geometry, Leaf, Outcome, PageTable, Shootdown};
use crate::plan::{PlanEntry, When};
use crate::trace::{Access, TraceHeader};
use crate::units::page_label;
use crate::{Error, Result};

// Kept at its old path: policies and tests name `os::kernel::Refusal`.
pub use super::huge_memory::Refusal;

/// What a walk found, for the policy's and the PCC's view of the hardware:
/// the leaf's size and where its flags live (VMA and page index), so the
/// walk's writes land on the entry `leaf` read without a second VMA lookup.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LastWalk {
    size: usize,
    vi: usize,
    pi: usize,
}

// Clone and Debug: a shared pass (`crate::sweep`) copies the shared state at
// a decision and compares the copies (os/members.rs).
#[derive(Clone, Debug)]
pub struct Kernel {
    pub(super) geo: Geometry,
    pub(super) shape: Shape,
    pub(super) phys: PhysMem,
    pub(super) spaces: Vec<AddressSpace>,
    pub(super) clock: Clock,
    pub(super) costs: OsCosts,
    pub(super) cost: CostConfig,
    pub(super) budget_bytes: Option<u64>,
    pub(super) footprint: u64,
    pub(super) pending: Vec<Shootdown>,
    /// Shootdowns queued now keep their mapping (`with_eager_refill`).
    pub(super) keep_mappings: bool,
    pub(super) stats: OsStats,
    pub(super) faults_huge: [u64; 8],
    /// The policies on this kernel, in order (see `new_multi` for how hooks
    /// are dispatched). A slot is None while its policy's callback runs.
    pub(super) policies: super::members::PolicySlots,
    /// Their names, kept apart so a plan entry made during a callback can
    /// name the acting policy while it is taken out of its slot.
    pub(super) names: Vec<&'static str>,
    /// Indices of the policies that want walk events (precomputed: the walk
    /// path loops over these only, and not at all if none wants them).
    pub(super) walkers: Vec<usize>,
    /// A policy defers the split of a partly freed huge page
    /// (`Policy::keeps_huge_on_free`, Ingens §4.3): `free_range` keeps it.
    pub(super) keep_huge_on_free: bool,
    /// The policy whose callback is running (records its plan entries).
    pub(super) acting: Option<usize>,
    /// Work done from a timer runs on another core (a daemon): async cost.
    pub(super) in_daemon: bool,
    /// Populating setup data before the traced phase: setup cost.
    pub(super) in_setup: bool,
    pub(super) timeline: BoundedLog<Sample>,
    pub(super) next_sample: u64,
    pub(super) sample_every: u64,
    pub(super) plan: BoundedLog<PlanEntry>,
    /// Warnings for the result (bounded logs that dropped entries, daemons
    /// stopped at `limits::DAEMON_STOP_S`).
    pub(super) notes: Vec<String>,
    pub(super) daemons_stopped: bool,
    pub(super) last_marker: Option<String>,
    /// The access count when `last_marker` was reached (plan entries are recorded relative to it).
    pub(super) last_marker_at: u64,
    pub(super) frag_report: Option<FragReport>,
    pub(super) huge_total: u64,
    pub(super) peak_huge_total: u64,
    pub(super) last: LastWalk,
    pub(super) scratch: Vec<Migration>,
    /// Promotion candidate caches (PCC §3.2), one per cpu, created lazily;
    /// hardware the kernel models because the walker feeds it. None: no PCC
    /// (the default), which costs one branch per walk.
    pub(super) pcc_cfg: Option<PccConfig>,
    pub(super) pccs: super::pcc_bank::PccBank,
    /// Per-base-page coverage bits are being set on every access (HawkEye's
    /// access-coverage source, as the PCC artifact models it).
    pub(super) coverage_on: bool,
    // direct segments: per-process primary regions and segments (os/segment.rs).
    pub(super) segments: super::segment::SegmentTable,
    // reservations (Navarro §4): os/reserv.rs; empty unless a policy enables them.
    pub(super) reserv: super::reserv::Reservations,
    // compaction deferral (os/compact_defer.rs): None unless a policy enables it.
    pub(super) compact_defer: Option<super::compact_defer::CompactDefer>,
    // page daemon: lists, wired stream, counters (os/pagedaemon.rs); None
    // when no memory-pressure knob is set, so ordinary runs are unchanged.
    pub(super) daemon: Option<Box<super::pagedaemon::PageDaemon>>,
    // page sharing (os/content.rs, os/ksm.rs): None unless a sharing policy
    // enabled it, so ordinary runs are unchanged.
    pub(super) sharing: Option<Box<super::ksm::Ksm>>,
    /// Writes are trapped (`after_access`): reservations' write-protect
    /// (Navarro §4.7) or page contents (sharing). One flag, so the access
    /// path keeps one branch whatever is on.
    pub(super) write_trap: bool,
    // memory tiers (os/tier.rs): None unless os.tier_fast is set.
    pub(super) tiers: Option<Box<super::tier::Tiers>>,
    // FHPM: leaves redirected through companion pages (os/companion.rs);
    // empty unless a policy redirects.
    pub(super) companions: super::companion::Companions,
    // shared pass: riding members and deferred timers (os/members.rs).
    pub(super) members: super::members::Members,
}

pub(super) const OWNER_PID_SHIFT: u32 = 48;
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
        // page daemon: built on the empty memory, before the fragmenters run.
        let daemon = Self::make_daemon(&cfg.daemon, &phys, &geo, cfg.seed);
        // memory tiers: the fast tier is allocated first from here on.
        let tiers = super::tier::Tiers::build(&cfg.tiers, &mut phys, cost.cpu_ghz, 1 << shape.region_shift)?;
        let frag_report = match cfg.fragmentation {
            None => None,
            Some(Fragmentation::Pcc { share }) => Some(phys.fragment_pcc(share, cfg.seed)?),
            Some(Fragmentation::Ingens { fmfi, pinned }) => {
                let mut f = super::phys::IngensFragConfig::new(fmfi, cfg.seed);
                if pinned {
                    f.mobility = super::phys::Mobility::Unmovable;
                }
                Some(phys.fragment_ingens_with(&f)?)
            }
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
        let keep_huge_on_free = policies.iter().any(|p| p.keeps_huge_on_free());
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
            keep_mappings: false,
            stats: OsStats::default(),
            faults_huge: [0; 8],
            policies: super::members::PolicySlots(policies.into_iter().map(Some).collect()),
            names,
            walkers,
            keep_huge_on_free,
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
            last_marker_at: 0,
            frag_report,
            huge_total: 0,
            peak_huge_total: 0,
            last: LastWalk::default(),
            scratch: Vec::new(),
            pcc_cfg: None,
            pccs: Default::default(),
            coverage_on: false,
            // direct segments: the regions the primary regions are made of.
            segments: super::segment::SegmentTable::new(&header.regions),
            reserv: Default::default(),
            compact_defer: None,
            daemon,
            sharing: None,
            write_trap: false,
            tiers,
            companions: Default::default(),
            members: Default::default(),
        };
        // reservations: files' ranges, for write-back at msync (os/reserv.rs).
        k.reserv.file_ranges =
            header.regions.iter().filter(|r| r.kind == crate::trace::RegionKind::File).map(|r| (r.pid, r.base, r.base + r.len)).collect();
        k.reserv.writeback_us = cfg.daemon.writeback_us;
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
    /// Virtual time and its totals (accesses, OS seconds by kind).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }
    /// The OS counters of the run so far.
    pub fn stats(&self) -> &OsStats {
        &self.stats
    }
    /// Direct segments: the primary regions and segments (os/segment.rs).
    pub fn segments(&self) -> &super::segment::SegmentTable {
        &self.segments
    }
    pub fn footprint(&self) -> u64 {
        self.footprint
    }
    /// The OS mechanisms' costs (policies charging their own scans).
    pub fn os_costs(&self) -> &OsCosts {
        &self.costs
    }
    /// The cost model's latencies (virt: the hypervisor prices a guest's
    /// access with them to move the host's clock).
    pub fn cost_config(&self) -> &CostConfig {
        &self.cost
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
    /// The page-size index of the PMD-level huge page (2MB on x86-64): the
    /// size most policies promote to. Falls back to the largest size below it.
    pub fn pmd_size(&self) -> usize {
        let (g, rb) = (&self.geo, self.region_bytes());
        self.region_size_index().unwrap_or_else(|| g.sizes.iter().rposition(|&s| s <= rb).unwrap_or(0))
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

    // ------------------------------------------------------------ time

    /// Run `f` at virtual time `at` (seconds); the scheduling policy's
    /// `on_timer(id)` is called (ids are the policy's own: no other policy
    /// sees them or can collide with them).
    pub fn schedule_at(&mut self, at: f64, id: u32) {
        self.clock.schedule_at(at, id);
    }
    /// sched: make process context `ctx` (an input of a concurrent run,
    /// `crate::sched`) the running one, so `now()` and daemons follow its own
    /// time (`Clock::switch_to`). Called once per scheduling quantum.
    pub fn switch_process(&mut self, ctx: usize) {
        self.clock.switch_to(ctx);
    }
    /// sched: process context `ctx` starts at `seconds` of virtual time
    /// (`Clock::start_context_at`: a staggered start, or a VM's guest).
    pub fn start_process_at(&mut self, ctx: usize, seconds: f64) {
        self.clock.start_context_at(ctx, seconds);
    }

    pub fn schedule_in(&mut self, delay: f64, id: u32) {
        let now = self.clock.now();
        self.clock.schedule_at(now + delay.max(0.0), id);
    }

    pub(super) fn charge_us(&mut self, us: f64) {
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

    // ------------------------------------------------------------ mechanisms
    // Each mechanism lives in the file Linux would hold it in (docs/kernel.md):
    // fault.rs, huge_memory.rs, migrate.rs, unmap.rs, tlbflush.rs, accessed.rs;
    // the PCC hardware the walker feeds is hosted in pcc_feed.rs.

    /// The physical allocator's owner tag of a base page: the process and the
    /// virtual page, so a migration can find the mapping to update.
    // direct segments: the parts os/segment.rs changes, borrowed together.
    pub(super) fn segment_parts(&mut self) -> (&mut super::segment::SegmentTable, &mut PhysMem, &mut [AddressSpace], &OsCosts) {
        (&mut self.segments, &mut self.phys, &mut self.spaces, &self.costs)
    }

    // direct segments: huge bytes changed outside install_huge (a revert's 2MB PTEs).
    pub(super) fn recount_huge(&mut self) {
        self.huge_total = self.spaces.iter().map(|s| s.total_huge_bytes()).sum();
        self.peak_huge_total = self.peak_huge_total.max(self.huge_total);
    }

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
            // shared pass: the sweep runs them per member (os/members.rs).
            if self.members.defer_timers {
                self.members.timers_due = true;
            } else {
                self.run_timers();
            }
        }
    }

    /// virt: one access of a guest of this (host) kernel happened, costing
    /// `cycles`: the host's clock moves with the guest's accesses so its
    /// daemons fire on virtual time (`virt::hypervisor`), without an access
    /// of its own to resolve.
    pub fn advance_for_guest(&mut self, cycles: f64) {
        self.advance(cycles);
    }

    pub(super) fn owner(pid: u16, va: u64, base_shift: u32) -> u64 {
        ((pid as u64) << OWNER_PID_SHIFT) | (va >> base_shift)
    }

    /// Record an executed promotion made by policy `by` (None: a mechanism
    /// called outside any callback, named after the whole kernel's policies).
    pub(super) fn record_plan(&mut self, by: Option<usize>, pid: u16, start: u64, size: usize) {
        // Relative to the last marker, so a replay acts at this access and not
        // at the marker (a native run applies it at the next marker).
        let when = match &self.last_marker {
            Some(m) if self.clock.accesses == self.last_marker_at => When::Progress(m.clone()),
            Some(m) => When::AfterMarker { label: m.clone(), accesses: self.clock.accesses - self.last_marker_at },
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
    pub(super) fn with_policy<R>(&mut self, i: usize, f: impl FnOnce(&mut dyn Policy, &mut Ctx<'_>) -> R) -> Option<R> {
        let mut p = self.policies[i].take()?;
        let acting = self.acting.replace(i);
        let owner = self.clock.set_owner(i as u32);
        let r = f(p.as_mut(), &mut Ctx::new(self));
        self.clock.set_owner(owner);
        self.acting = acting;
        self.policies[i] = Some(p);
        Some(r)
    }

    /// Run `f` on every policy, in kernel order.
    fn for_each_policy(&mut self, mut f: impl FnMut(&mut dyn Policy, &mut Ctx<'_>)) {
        for i in 0..self.policies.len() {
            self.with_policy(i, &mut f);
        }
    }

    /// Account a touch of a base page (the utilization Ingens tracks).
    #[inline(always)]
    pub(super) fn touch(sp: &mut AddressSpace, vi: usize, pi: usize, addr: u64, rs: u32) {
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
            base_rss_bytes: self.spaces.iter().map(|s| s.touched_pages << self.shape.base_shift).collect(),
            fmfi: self.phys.fmfi(self.shape.region_shift - self.shape.base_shift),
            promotions: self.stats.promotions,
            // page daemon: the contiguity metric over time (Navarro Fig. 5).
            contiguity: self.daemon.as_ref().map(|_| self.contiguity().score),
        });
    }

    pub(super) fn run_timers(&mut self) {
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
        // A cancelled run (Ctrl-C) fires no more daemons: with a short
        // interval over a long virtual duration one access can owe millions
        // of firings, and the trace reader's per-chunk check would come
        // minutes later. The result is discarded anyway.
        while !crate::cancel::requested() {
            let Some((_, owner, id)) = self.clock.pop_due() else { break };
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
        // page daemon: its counters and the contiguity left at the end.
        self.stats.pagedaemon = self.daemon.as_ref().map(|d| d.stats.clone());
        self.stats.contiguity = self.daemon.as_ref().map(|_| self.contiguity());
        self.stats.sharing = self.sharing_stats();
        // memory tiers: shares and what the fast tier holds at the end.
        self.finish_tiers();
        let c = &self.companions.stats;
        self.stats.companion = (c.redirects + c.redirect_failures + c.conflicts + c.tdp_page_faults > 0).then(|| c.clone());
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
                    // sched: a concurrent run fills these in after the kernel finishes.
                    finish_seconds: None,
                    accesses: None,
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
        // reservations: frames reserved and not populated are in use too;
        // page daemon: frames of the wired stream (its pools included).
        let reserved = self.reserv.reserved;
        let wired = self.wired_held();
        // page sharing: shared frames belong to no process (os/ksm.rs).
        let shared = self.shared_frames();
        // FHPM: companion table pages are host memory too.
        let companions = self.companions.pages();
        if held + frag + reserved + wired + shared + companions != used {
            return Err(format!(
                "frames held by processes ({held}) + fragmenter ({frag}) + reserved unpopulated ({reserved}) + wired ({wired}) + shared ({shared}) + companion pages ({companions}) != frames in use ({used})"
            ));
        }
        self.check_sharing()?;
        self.check_reservations()?;
        self.check_full_regions()?;
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

    /// Every region the per-access hint holds as full (os/full_regions.rs)
    /// has every base page touched: a hint that outlived a lowered count
    /// would stop first touches from being recorded.
    fn check_full_regions(&self) -> std::result::Result<(), String> {
        let (rs, full) = (self.shape.region_shift, self.shape.pages_per_region());
        for sp in &self.spaces {
            for r in sp.full.regions() {
                let va = r << rs;
                let touched = sp.find(va).map(|vi| sp.vmas[vi].touched[sp.vmas[vi].region_index(va, rs)] as usize);
                if touched != Some(full) {
                    return Err(format!("pid {}: region {va:#x} held as full has {touched:?} of {full} pages touched", sp.pid));
                }
            }
        }
        Ok(())
    }

    pub fn os_cycles(&self) -> f64 {
        self.clock.os_sync_seconds * self.cost.cpu_ghz * 1e9
    }
}

impl Kernel {
    /// The leaf translating `a` (`PageTable::leaf`), faulting it in if need
    /// be; its frame (`Leaf::pa`) only `with_frame`.
    #[inline(always)]
    fn leaf_of(&mut self, a: &Access, with_frame: bool) -> Leaf {
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
        // The frame only when asked (`PageTable::walk_leaf`): its load is
        // most of a native walk's time on a scattered workload.
        let pfn = if with_frame { v.pfn.get(pi) } else { NO_PFN };
        let pa = if pfn == NO_PFN { NO_PA } else { ((pfn as u64) << shape.base_shift) | (a.addr & ((1u64 << shape.base_shift) - 1)) };
        self.last = LastWalk { size, vi, pi };
        // mthp: what one TLB entry covers (folios, contpte, AMD-style coalescing: os/coalesce.rs).
        self.coalesce(Leaf::native(size, pa, was_set), pid, vi, pi)
    }
}

impl PageTable for Kernel {
    #[inline]
    fn leaf(&mut self, a: &Access) -> Leaf {
        self.leaf_of(a, true)
    }

    #[inline]
    fn walk_leaf(&mut self, a: &Access) -> Leaf {
        self.leaf_of(a, false)
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
            // shared pass: the riding members' PCCs see the same walk.
            if self.riding_members() > 0 {
                self.feed_riding(a, leaf);
            }
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

    #[inline(always)]
    fn after_access(&mut self, a: &Access, outcome: Outcome, walk: Option<WalkCost>) {
        let mut cycles = self.cost.access_cycles(outcome, walk);
        // memory tiers (os/tier.rs): the memory time of the tier touched.
        if self.tiers.is_some() {
            cycles += self.tier_access(a);
        }
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
            let region = a.addr >> shape.region_shift;
            // A region known full (os/full_regions.rs) has nothing to record.
            if self.coverage_on || !sp.full.holds(region) {
                let vi = sp.vma_index(a.addr, &shape);
                let v = &sp.vmas[vi];
                let pi = v.page_index(a.addr, shape.base_shift);
                // A region whose every base page was touched has nothing left
                // to record: its small count answers without loading the
                // page's flags (a cache miss per access on a large scattered
                // footprint). Seen full, it is remembered from the next access.
                let full = shape.pages_per_region();
                if size > 0 {
                    if (v.touched[v.region_index(a.addr, shape.region_shift)] as usize) < full {
                        Self::touch(sp, vi, pi, a.addr, shape.region_shift);
                    } else {
                        sp.full.insert(region);
                    }
                }
                if self.coverage_on {
                    sp.vmas[vi].cover(pi);
                }
            }
        }
        // Trapped writes: reservations' write-protect trap (Navarro §4.7),
        // armed only by a reservation policy; page contents and
        // copy-on-write (os/content.rs), only under a sharing policy.
        if self.write_trap && a.write {
            if self.reserv.armed {
                self.write_check(a);
            }
            if self.sharing.is_some() {
                self.content_write(a);
            }
        }
        self.advance(cycles);
    }

    fn progress(&mut self, label: &str) {
        if let Some((p, s, l)) = crate::trace::parse_populate_label(label) {
            self.populate(p, s, l);
            self.populated_content(p, s, l);
            return;
        }
        // page contents: a declaration is data, not a progress point.
        if let Some(d) = crate::trace::parse_content_label(label) {
            self.declare_content(&d);
            return;
        }
        if let Some((p, s, l)) = crate::trace::parse_free_label(label) {
            self.free_range(p, s, l);
            self.for_each_policy(|pol, k| pol.on_free(k, p, s, l));
            return;
        }
        // reservations: a flush writes dirty file leaves back (os/reserv.rs).
        if label == "msync" {
            self.writeback();
        }
        self.last_marker = Some(label.to_string());
        self.last_marker_at = self.clock.accesses;
        self.for_each_policy(|p, k| p.on_progress(k, label));
    }
}
