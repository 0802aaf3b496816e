//! OS-side counters and the timeline of samples taken during a run.

use serde::Serialize;

/// Why a promotion (or a huge fault) did not happen.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
    #[serde(skip_serializing_if = "is_zero")]
    pub in_place_collapses: u64,
    // Reservations (Navarro §4, os/reserv.rs), each left out of the result
    // when zero so runs of other policies are unchanged.
    /// Reservations made at fault time (split children not counted).
    #[serde(skip_serializing_if = "is_zero")]
    pub reservations: u64,
    /// Reservations preempted to satisfy an allocation (ref §3.4).
    #[serde(skip_serializing_if = "is_zero")]
    pub preemptions: u64,
    /// Faults whose preferred size the buddy allocator could not give
    /// (contiguity failures, ref §3.3).
    #[serde(skip_serializing_if = "is_zero")]
    pub preferred_failures: u64,
    /// Frames reserved and not populated, at the end and at the peak.
    #[serde(skip_serializing_if = "is_zero")]
    pub reserved_frames: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub peak_reserved_frames: u64,
    /// First writes to write-protected clean superpages (ref §4.7).
    #[serde(skip_serializing_if = "is_zero")]
    pub wp_traps: u64,
    /// Bytes written back at `msync` progress points: the sizes of the dirty
    /// leaves of file regions (ref §8: a dirty superpage is written whole).
    #[serde(skip_serializing_if = "is_zero")]
    pub writeback_bytes: u64,
    // memory tiers (os/tier.rs): present only when they are configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiers: Option<super::tier::TierStats>,
    // page daemon (os/pagedaemon.rs): present only when it is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pagedaemon: Option<super::pagedaemon::DaemonStats>,
    /// The contiguity metric at the end (Navarro Fig. 5), with the daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contiguity: Option<super::phys::Contiguity>,
    /// Page sharing (os/ksm.rs): present only under a sharing policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharing: Option<super::ksm::SharingStats>,
    /// FHPM companion-page redirection (os/companion.rs): present only in
    /// runs that redirected a leaf or saw a host page-table update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub companion: Option<super::companion::CompanionStats>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One point of the timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contiguity: Option<f64>,
}

/// Per-process totals at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_seconds: Option<f64>,
    /// Concurrent runs only: accesses the process made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accesses: Option<u64>,
}
