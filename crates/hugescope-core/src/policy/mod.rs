//! Huge-page policies. A policy decides; the kernel (`os::Kernel`) acts. Each
//! policy is one file; adding one means writing that file and adding one line
//! to `REGISTRY` below, nothing else.
//!
//! Several policies may share one kernel (`Kernel::new_multi`, spec
//! `a+b`): faults go to them in order until one answers other than `Base`,
//! timers back to the policy that scheduled them (ids are per policy), every
//! other hook to each policy (walks only to those that want them).
//!
//! Hooks (all optional):
//! - `init`: read the address spaces, schedule daemons (`Kernel::schedule_in`);
//! - `on_fault`: first touch of a base page: map a base page or a huge page;
//! - `on_walk`: every page walk, with the PMD/PUD accessed bits as they were
//!   before the walk (hardware-assisted policies: the PCC; only delivered if
//!   `wants_walks` is true, so other policies cost nothing per walk);
//! - `on_timer`: a daemon is due (khugepaged, PCC reads, Ingens scans);
//! - `on_progress` / `on_free`: workload progress points and memory releases
//!   (`keeps_huge_on_free`: a partly freed huge page stays mapped for the
//!   policy to demote, instead of Linux's immediate split);
//! - `wants_profile` / `set_profile`: offline policies (the oracle) get the
//!   walks per region of a base-page profiling pass over the whole trace
//!   before the run starts (`profile::profile_walks`).
//!
//! Mechanisms available to policies: `promote` (collapse by copy),
//! `collapse_in_place`, `demote`, `compact`, `clear_accessed`, `free_range`,
//! `schedule_*`. Page-table state is read through `Kernel::view()`
//! (`os::MmView`: regions per level, one accessed/dirty bit per leaf, the
//! shared scan cursor), plus physical memory (`phys`) and the budget.
//! docs/kernel.md maps which file holds which mechanism.

pub mod khugepaged;
pub mod ksmd;
pub mod params;

use crate::config::MachineConfig;
use crate::os::{AllocMode, Kernel};
use crate::{Error, Result};
pub use params::Params;

/// First touch of a base page that has no translation.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub pid: u16,
    pub addr: u64,
    pub write: bool,
    /// Start of the PMD-level (2MB) region holding `addr`.
    pub region_start: u64,
    /// The region lies wholly inside the VMA (a huge leaf is possible).
    pub region_in_vma: bool,
    /// No base page of the region is mapped yet (Linux: the PMD is still empty,
    /// so a fault-time huge page is possible; otherwise only a collapse is).
    pub region_empty: bool,
    /// The VMA has MADV_HUGEPAGE.
    pub vma_advised: bool,
}

/// What a fault-time policy asks the fault path (`os/fault.rs`) to map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    Base,
    /// Map a huge page of size index `size` around the address.
    Huge { size: usize, alloc: AllocMode },
    /// Navarro §4.1 (os/reserv.rs): reserve an aligned physical extent of
    /// size index `size` (or smaller, by the fallback order) around the
    /// address and map only the faulting base page, at its offset inside it;
    /// later faults in the extent map their own reserved frames and filled
    /// nodes are promoted in place. Needs `Kernel::enable_reservations`.
    Reserve { size: usize },
}

/// A page walk, as the walker saw it.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    pub pid: u16,
    pub cpu: u16,
    pub addr: u64,
    pub write: bool,
    /// Page-size index of the leaf found.
    pub size: usize,
    pub pmd_a_was_set: bool,
    pub pud_a_was_set: bool,
}

pub trait Policy {
    fn name(&self) -> &'static str;
    /// The policy's resolved parameters, for the result file.
    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Object(Default::default())
    }
    fn init(&mut self, _k: &mut Kernel) {}
    fn on_fault(&mut self, _k: &mut Kernel, _f: &Fault) -> FaultAction {
        FaultAction::Base
    }
    fn wants_walks(&self) -> bool {
        false
    }
    fn on_walk(&mut self, _k: &mut Kernel, _w: &Walk) {}
    fn on_timer(&mut self, _k: &mut Kernel, _id: u32) {}
    fn on_progress(&mut self, _k: &mut Kernel, _label: &str) {}
    fn on_free(&mut self, _k: &mut Kernel, _pid: u16, _start: u64, _len: u64) {}
    /// Whether a huge page partly freed by the program stays mapped whole
    /// (the policy demotes it itself, Ingens §4.3) instead of being split at
    /// once as Linux does (`Kernel::free_range`). Read once, when the kernel
    /// is built.
    fn keeps_huge_on_free(&self) -> bool {
        false
    }
    fn finish(&mut self, _k: &mut Kernel) {}
    /// Whether the policy needs a profiling pass over the whole trace first
    /// (an offline, two-pass policy such as the oracle).
    fn wants_profile(&self) -> bool {
        false
    }
    /// The profile, given before the kernel is built (so before `init`).
    fn set_profile(&mut self, _p: &crate::profile::WalkProfile) {}

    // What a policy declares about itself, read before any kernel is built,
    // so no other file needs to know a policy by name.

    /// Check the machine against what the policy needs, before any work (a
    /// configuration is refused when it is resolved: `configuration.rs`).
    /// Default: any machine.
    fn check_machine(&self, _machine: &MachineConfig) -> Result<()> {
        Ok(())
    }
    /// The parameters that change only what the policy decides when its
    /// timers fire, and what the PCC it enabled holds, never when it acts:
    /// configurations of it that differ only in these may share one
    /// simulation until their decisions differ (`sweep.rs`). Only for a
    /// policy that acts on timers alone, with its PCC as its only state
    /// between them. None (the default): it always runs alone.
    fn decision_only_params(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// Why the policy cannot run in a virtualized run, as one sentence
    /// (`virt/run.rs` refuses it with this reason). None (the default): it can.
    fn refuses_virtualization(&self) -> Option<&'static str> {
        None
    }
}

type Ctor = fn(&mut Params) -> Result<Box<dyn Policy>>;

/// Declares each policy's module and registers it: adding a policy is its
/// file plus one line here (name => module: description).
macro_rules! registry {
    ($($name:literal => $module:ident : $about:literal,)*) => {
        $(pub mod $module;)*
        /// name, one-line description, constructor.
        pub const REGISTRY: &[(&str, &str, Ctor)] = &[$(($name, $about, $module::new)),*];
    };
}

registry! {
    "base" => base: "never huge: base pages only (the papers' 4KB baseline)",
    "ideal" => ideal: "every eligible region huge at first touch, no limits (the papers' all-2MB line)",
    "static" => static_plan: "huge pages where a plan file says, when it says",
    "linux" => linux: "Linux THP: fault-time huge pages per enabled/defrag, and khugepaged",
    "pcc" => pcc_promoter: "promotion candidate cache (MICRO'23): promote the most-walked 2MB regions every interval",
    "hawkeye" => hawkeye: "HawkEye as the PCC paper describes it: access-coverage buckets, 4096 pages scanned and 8 promotions per 31 s round",
    "oracle" => oracle: "offline upper bound: the regions with most base-page walks over the trace, huge at first touch",
    "random" => random: "random regions at the PCC's cadence and rate: the baseline any selection must beat",
    "dseg" => dseg: "direct segments (ISCA'13): one segment over each process's primary region, the rest paged",
    "ingens" => ingens: "Ingens (OSDI'16): base pages at fault, asynchronous promotion at 90% utilization in fairness order, sampled access tracking, utilization-based demotion, proactive compaction",
    "navarro" => navarro: "reservation-based superpages (Navarro et al., OSDI'02): reserve at first fault, promote in place when full, preempt the least recently populated reservation, demote on the first write to a clean superpage",
    "hpshare" => hpshare: "huge-page sharing: merge only identical whole 2MB pages, never split (a sharing daemon: run beside a huge-page policy, e.g. ideal+hpshare)",
    "ksm" => ksm_share_first: "Linux KSM, share first: merge identical 4KB pages copy-on-write, splitting any huge page with a shareable 4KB region (e.g. ideal+ksm)",
    "ingens-share" => ingens_share: "Ingens-style sharing: KSM that splits only huge pages Ingens' 2MB accessed-bit tracking finds infrequent; hot huge pages are kept (e.g. ideal+ingens-share)",
    "zeroscan" => zeroscan: "zero-page scan (THP shrinker style): split huge pages with zero-filled 4KB regions and reclaim those regions (e.g. ideal+zeroscan)",
    "hmmv" => hmmv: "HMM-v (FHPM §6.5): hypervisor tiered memory ranking EPT leaves by A-bit frequency (bucket sort) and filling the fast tier by rank; granularity=huge|base",
    "mthp" => mthp: "Linux multi-size THP: linux's PMD fault and khugepaged, else the largest enabled folio size that fits (enabled_<size>=always|madvise|inherit|never)",
    "fhpm" => fhpm: "FHPM (host policy on a VM's memory): two-stage A-bit monitoring with companion pages, hot-page-pressure demotion/promotion by PSR, VM-friendly split/collapse",
    "fhpm-fixed" => fhpm_fixed: "FHPM's fixed-threshold baseline (HawkEye/Ingens-like, §6.3): demote a hot huge page if Ns <= t, promote a region if Ns > t",
    "fhpm-scan" => fhpm_scan: "FHPM Table 4's access monitors without a decision: monitor=base|huge|split|sampling|fhpm",
}

/// Build a policy by name from `key=value` parameters.
pub fn make(name: &str, params: &[(String, String)]) -> Result<Box<dyn Policy>> {
    let (_, _, ctor) = REGISTRY.iter().find(|(n, _, _)| *n == name).ok_or_else(|| {
        Error::input(format!(
            "unknown policy '{name}'; available: {}",
            REGISTRY.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let mut p = Params::new(name, params)?;
    let policy = ctor(&mut p)?;
    p.finish()?;
    Ok(policy)
}

/// The page-size index of the PMD-level huge page (2MB on x86-64): the size
/// most policies promote to. Falls back to the largest size below it.
pub fn pmd_size(k: &Kernel) -> usize {
    let g = k.geometry();
    let rb = k.region_bytes();
    k.region_size_index().unwrap_or_else(|| g.sizes.iter().rposition(|&s| s <= rb).unwrap_or(0))
}
