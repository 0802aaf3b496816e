//! Huge-page policies. A policy decides; the kernel acts. Each policy is one
//! file; adding one means writing that file and adding one line to
//! `REGISTRY` below, nothing else (docs/kernel.md, "The policy API").
//!
//! A policy implements `Policy` (its hooks, `os/hooks.rs`) and acts through
//! the `Ctx` each hook gets (`os/ctx.rs`): it reads the page tables through
//! `Ctx::view()` (`MmView`: VMAs, regions with one accessed/dirty bit per
//! leaf, pages, the shared scan cursor, physical memory), asks for
//! mechanisms (promote, collapse in place, demote, compact, migrate,
//! share, ...), schedules its own timers and charges its own costs. It never
//! holds the kernel, and no file outside a policy names it: what others
//! need to know about a policy it declares through the trait
//! (`check_machine`, `decision_only_params`, `refuses_virtualization`).
//!
//! Several policies may share one kernel (`Kernel::new_multi`, spec
//! `a+b`): faults go to them in order until one answers other than `Base`,
//! timers back to the policy that scheduled them (ids are per policy), every
//! other hook to each policy (walks only to those that want them).
//!
//! Hooks (all optional):
//! - `init`: read the address spaces, schedule daemons (`Ctx::schedule_in`);
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

pub mod khugepaged;
pub mod ksmd;
pub mod params;

use crate::{Error, Result};
pub use crate::os::ctx::Ctx;
pub use crate::os::hooks::{Fault, FaultAction, Policy, Walk};
pub use params::Params;

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
