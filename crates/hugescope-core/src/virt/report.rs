//! What a virtualized run reports beside the ordinary result
//! (`PolicyResult::virt`): the hypervisor's counters, per VM and in all.

use super::ept::VmExits;
use super::hypervisor::PairWalks;
use crate::hw::nested::HostWalkCounters;
use crate::config::virt::VirtResolved;
use crate::os::metrics::OsStats;
use crate::os::phys::FragReport;
use serde::Serialize;

/// One VM's counters in a result.
#[derive(Clone, Debug, Serialize)]
pub struct VmReport {
    pub vm: u8,
    pub host_pid: u16,
    pub memory_bytes: u64,
    pub page_table_area_bytes: u64,
    pub page_table_pages: u64,
    pub page_table_overflow: u64,
    pub vm_exits: VmExits,
    /// Guest-visible seconds of VM exits (vm_exit_us each).
    pub vm_exit_seconds: f64,
    /// Guest-visible seconds of host faults behind EPT violations.
    pub host_fault_seconds: f64,
    pub host_shootdowns: u64,
    /// VM-wide TLB flushes (by VPID) the host's changes caused.
    pub vm_flushes: u64,
    pub ept_zapped_pages: u64,
    pub guest_huge_bytes: u64,
    pub host_huge_bytes: u64,
    pub guest_os_stats: OsStats,
}

/// The hypervisor's side of a virtualized result (`PolicyResult::virt`).
#[derive(Clone, Debug, Serialize)]
pub struct VirtReport {
    pub host_policy: String,
    pub host_policy_params: serde_json::Value,
    pub nested: VirtResolved,
    /// VM exits of all VMs, by cause.
    pub vm_exits: VmExits,
    pub vm_exit_seconds: f64,
    /// Walks and walk references by (guest leaf size, host leaf size).
    pub walks_by_pair: Vec<PairWalks>,
    /// The host walks inside the nested walks and how the nested TLB and the
    /// host PWC served them, over all cpus.
    pub host_walks: HostWalkCounters,
    /// Huge-page bytes mapped at the end in the guests (GVA) and the host (GPA).
    pub guest_huge_bytes: u64,
    pub host_huge_bytes: u64,
    pub host_huge_bytes_peak: u64,
    pub host_memory_bytes: u64,
    pub host_fragmentation: Option<FragReport>,
    pub host_os_stats: OsStats,
    pub vms: Vec<VmReport>,
    /// Walks inside a guest direct segment (present when
    /// `virt.guest_segment` is on; ISCA'13 §3.3, extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_segment_walks: Option<u64>,
    /// Their references, and the most of any one walk (same condition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_segment_walk_refs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_segment_max_refs: Option<u32>,
}
