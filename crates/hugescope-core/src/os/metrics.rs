//! OS-side counters and the timeline of samples taken during a run.

// Deserialize: a reference run's result is read back from the results cache
// (`result_cache`, `run::Assembly`).
use serde::{Deserialize, Serialize};

/// Why a promotion (or a huge fault) did not happen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Failures {
    /// No free huge frame, and compaction was not allowed or did not free one.
    pub no_memory: u64,
    /// The huge-page budget would have been exceeded.
    pub budget: u64,
    /// The range is not wholly inside one VMA, not mapped, or misaligned.
    pub ineligible: u64,
    /// Already mapped at that size.
    pub already_huge: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OsStats {
    pub faults_base: u64,
    /// Faults that mapped a huge page directly, by page-size label.
    pub faults_huge: Vec<(String, u64)>,
    /// Huge faults that fell back to a base page (Linux thp_fault_fallback).
    pub fault_fallbacks: u64,
    /// Time spent in the fault handler, seconds: allocation, zeroing, and
    /// any synchronous compaction (Ingens §3.1's page-fault latency is this
    /// over the number of faults, base and huge). Setup faults included.
    pub fault_seconds: f64,
    pub fault_failures: Failures,
    pub promotions: u64,
    pub promotion_failures: Failures,
    pub demotions: u64,
    pub compactions: u64,
    pub compaction_successes: u64,
    pub compaction_migrated_pages: u64,
    /// Direct compactions skipped because the zone's back-off deferred them
    /// (Linux compact_deferred; os/compact_defer.rs). Left out of the result
    /// when zero, so runs without deferral are unchanged.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub compactions_deferred: u64,
    pub shootdowns: u64,
    pub accessed_bit_clears: u64,
    pub frees: u64,
    pub freed_bytes: u64,
    /// Base-page allocations that found no memory at all (the run is then not meaningful).
    pub out_of_memory: u64,
    pub pages_copied: u64,
    pub pages_zeroed: u64,
    /// Promotions made by collapse in place (no copy); left out of the
    /// result when zero, so results of runs that never do one are unchanged.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub in_place_collapses: u64,
    // Reservations (Navarro §4, os/reserv.rs), each left out of the result
    // when zero so runs of other policies are unchanged.
    /// Reservations made at fault time (split children not counted).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub reservations: u64,
    /// Reservations preempted to satisfy an allocation (ref §3.4).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub preemptions: u64,
    /// Faults whose preferred size the buddy allocator could not give
    /// (contiguity failures, ref §3.3).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub preferred_failures: u64,
    /// Frames reserved and not populated, at the end and at the peak.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub reserved_frames: u64,
    #[serde(skip_serializing_if = "is_zero", default)]
    pub peak_reserved_frames: u64,
    /// First writes to write-protected clean superpages (ref §4.7).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub wp_traps: u64,
    /// Bytes written back at `msync` progress points: the sizes of the dirty
    /// leaves of file regions (ref §8: a dirty superpage is written whole).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub writeback_bytes: u64,
    // memory tiers (os/tier.rs): present only when they are configured.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tiers: Option<TierStats>,
    // page daemon (os/pagedaemon.rs): present only when it is configured.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pagedaemon: Option<DaemonStats>,
    /// The contiguity metric at the end (Navarro Fig. 5), with the daemon.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub contiguity: Option<super::phys::Contiguity>,
    /// Page sharing (os/ksm.rs): present only under a sharing policy.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sharing: Option<SharingStats>,
    /// FHPM companion-page redirection (os/companion.rs): present only in
    /// runs that redirected a leaf or saw a host page-table update.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub companion: Option<CompanionStats>,
}

fn estimate_kind() -> &'static str {
    "estimate"
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One point of the timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub time_s: f64,
    pub accesses: u64,
    /// Huge-page bytes mapped, per pid.
    pub huge_bytes: Vec<u64>,
    /// Physical memory held, per pid.
    pub rss_bytes: Vec<u64>,
    /// Memory the pid would hold with base pages only (touched, not freed):
    /// bloat over time is rss_bytes / base_rss_bytes (Ingens §3.2).
    pub base_rss_bytes: Vec<u64>,
    pub fmfi: f64,
    pub promotions: u64,
    /// The contiguity metric's score (page daemon runs only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub contiguity: Option<f64>,
}

/// Per-process totals at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    pub pid: u16,
    pub name: String,
    pub footprint_bytes: u64,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// RSS it would have with base pages only (touched, not freed).
    pub base_rss_bytes: u64,
    /// rss / base_rss (Ingens' memory bloat); 1.0 under base pages.
    pub bloat: f64,
    pub huge_bytes: u64,
    pub huge_pages: Vec<(String, u64)>,
    /// Share of the footprint mapped by huge pages at the end.
    pub huge_share: f64,
    /// Concurrent runs only (`crate::sched`): the process's own virtual time
    /// when its trace ended (all start at 0). Left out of single-trace
    /// results, which are unchanged.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub finish_seconds: Option<f64>,
    /// Concurrent runs only: accesses the process made.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub accesses: Option<u64>,
}

// page daemon (os/pagedaemon.rs)
/// What the daemon did, in the result's `os_stats.pagedaemon` (present only
/// when the daemon, the wired stream or process exit is configured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonStats {
    /// Wakes on the low watermark or a failed allocation.
    pub wakeups: u64,
    /// Wakes on a failed preferred-size allocation (contiguity mode).
    pub contiguity_wakeups: u64,
    /// Contiguity goals met (a free extent of the failed size appeared).
    pub contiguity_goals_met: u64,
    pub pages_evicted: u64,
    /// Evicted pages referenced again while their frame still held them.
    pub refaults_soft: u64,
    /// Evicted pages read back from disk.
    pub refaults_hard: u64,
    /// Inactive pages found referenced and moved back to the active list.
    pub reactivations: u64,
    /// Superpages demoted because a base page of theirs was evicted.
    pub eviction_demotions: u64,
    /// Superpages demoted speculatively (reference bit cleared under pressure).
    pub speculative_demotions: u64,
    pub bytes_written_back: u64,
    /// Frames wired by the wired-allocation stream.
    pub wired_frames: u64,
    /// Processes that exited and freed their memory (concurrent runs).
    pub exits: u64,
}

// memory tiers (os/tier.rs)
/// What the tiers did, in the result's `os_stats.tiers` (present only when
/// tiers are configured). Memory cycles are an estimate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierStats {
    /// Always "estimate": the memory time comes from the 2-latency model.
    #[serde(skip_deserializing, default = "estimate_kind")]
    pub kind: &'static str,
    pub fast_bytes: u64,
    pub slow_bytes: u64,
    /// Accesses served by each tier.
    pub fast_accesses: u64,
    pub slow_accesses: u64,
    /// fast / (fast + slow) accesses (FHPM Fig 11's "accessed bytes served from the fast tier").
    pub fast_access_share: f64,
    /// Memory time of all accesses, cycles (also in `cost.memory_cycles`).
    pub memory_cycles: f64,
    /// `place_tiers` calls.
    pub placements: u64,
    /// Bytes migrated slow -> fast and fast -> slow.
    pub promoted_bytes: u64,
    pub demoted_bytes: u64,
    /// Leaves migrated (base or huge), either way.
    pub migrated_leaves: u64,
    /// Leaves written during their copy window and copied again, and their bytes.
    pub recopied_leaves: u64,
    pub recopied_bytes: u64,
    /// Migrations that found no free block of the leaf's size in the target tier.
    pub migration_failures: u64,
    /// Background copy time, seconds (bytes / bandwidth, both directions in parallel, plus recopies).
    pub copy_seconds: f64,
    /// At the end: bytes mapped in the fast tier, those mapped by huge leaves, and their ratio.
    pub fast_mapped_bytes: u64,
    pub fast_huge_bytes: u64,
    pub fast_huge_ratio: f64,
}

// companion pages (os/companion.rs)
/// Counters of companion redirection, reported in the result's `os_stats`
/// only by runs that redirect (`OsStats::companion`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompanionStats {
    pub redirects: u64,
    /// Restores by the monitor at the end of its window (not conflicts).
    pub restores: u64,
    /// Redirects refused: no frame for the companion page, or no 2MB leaf.
    pub redirect_failures: u64,
    /// Host page-table updates that found a redirected page (FHPM §4.3):
    /// the page was restored early and its stage-2 sample lost.
    pub conflicts: u64,
    /// Host page-table updates that found an ordinary leaf (the rest of the
    /// EPT violations `tdp_page_fault` handles; Table 5's first column).
    pub tdp_page_faults: u64,
    /// Most companion pages held at once (4KB of host memory each).
    pub peak_pages: u64,
}

// page sharing (os/ksm.rs)
/// Counters of the sharing mechanism (the result's `os.sharing`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingStats {
    pub pages_scanned: u64,
    /// Full passes over every candidate (each empties the unstable tree).
    pub full_scans: u64,
    /// Base pages mapped to a shared frame (their own frame freed).
    pub merges: u64,
    /// Huge pages mapped to a shared huge frame (`hpshare`).
    pub huge_merges: u64,
    /// Huge pages split so that a base page of theirs could be merged.
    pub huge_splits: u64,
    pub cow_breaks: u64,
    /// Copy-on-write breaks that found no free frame (the page stays shared).
    pub cow_failures: u64,
    /// Frames returned to the allocator by merges.
    pub frames_freed: u64,
    /// Frames allocated by copy-on-write breaks.
    pub frames_copied: u64,
    /// At the end: shared frames, in base pages (Linux `pages_shared`).
    pub pages_shared: u64,
    /// At the end: mappings beyond the first of each shared frame, in base
    /// pages (Linux `pages_sharing`): the memory saved.
    pub pages_sharing: u64,
    pub saved_bytes: u64,
    /// Memory the processes use with sharing (their frames + shared frames).
    pub in_use_bytes: u64,
    /// saved / (in use + saved): the share of the memory they would use
    /// without sharing (FHPM Table 2's percentages).
    pub saved_share: f64,
}
