//! Counters. Every number the tool prints is one of these or derived from them
//! in `report`, so it can be traced back to the JSON result.

use crate::hw::geometry::MAX_SIZES;
use serde::{Deserialize, Serialize};

/// Per-cpu MMU counters; fixed-size arrays so the hot path never allocates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MmuStats {
    pub accesses: u64,
    pub writes: u64,
    pub l1_hits: [u64; MAX_SIZES],
    pub l2_hits: [u64; MAX_SIZES],
    /// Walks, by the page size of the leaf they found.
    pub walks: [u64; MAX_SIZES],
    pub walk_refs: u64,
    /// Walk references that missed the page-table line cache (`hw::ptcache`).
    pub walk_refs_mem: u64,
    /// PWC hits by root-first level index.
    pub pwc_hits: [u64; 6],
    pub shootdowns: u64,
    pub tlb_entries_invalidated: u64,
}

impl MmuStats {
    /// Count a walk to a leaf whose TLB entry has size index `s`.
    #[inline(always)]
    pub fn count_walk(&mut self, s: usize, cost: &crate::hw::pwc::WalkCost) {
        self.walks[s] += 1;
        self.walk_refs += cost.refs as u64;
        self.walk_refs_mem += cost.mem_refs as u64;
        if let Some(l) = cost.pwc_hit_level {
            self.pwc_hits[l] += 1;
        }
    }

    pub fn add(&mut self, o: &MmuStats) {
        self.accesses += o.accesses;
        self.writes += o.writes;
        for i in 0..MAX_SIZES {
            self.l1_hits[i] += o.l1_hits[i];
            self.l2_hits[i] += o.l2_hits[i];
            self.walks[i] += o.walks[i];
        }
        self.walk_refs += o.walk_refs;
        self.walk_refs_mem += o.walk_refs_mem;
        for i in 0..6 {
            self.pwc_hits[i] += o.pwc_hits[i];
        }
        self.shootdowns += o.shootdowns;
        self.tlb_entries_invalidated += o.tlb_entries_invalidated;
    }
    pub fn total_walks(&self) -> u64 {
        self.walks.iter().sum()
    }
    pub fn total_l1_hits(&self) -> u64 {
        self.l1_hits.iter().sum()
    }
    pub fn total_l2_hits(&self) -> u64 {
        self.l2_hits.iter().sum()
    }
}

/// Per-page-size view of the MMU counters, as it appears in results.
// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeCounters {
    pub page_size: String,
    /// Accesses translated by a page of this size.
    pub accesses: u64,
    pub l1_hits: u64,
    pub l1_misses: u64,
    pub l2_hits: u64,
    pub l2_misses: u64,
    pub walks: u64,
}

/// Direct-segment results of a run (reference §8.3): the registers of the
/// first process with a primary region, sums over processes for the rest.
/// `walks_in_primary / walks_total` of a run without a segment is f_DS, the
/// share of walks a segment over the primary region would remove (§7).
// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SegmentCounters {
    pub base: u64,
    pub limit: u64,
    pub offset: u64,
    /// Bytes the segments translate (LIMIT - BASE, summed over processes).
    pub covered_bytes: u64,
    /// Bytes of the primary regions.
    pub primary_bytes: u64,
    /// Accesses the segment translated.
    pub hits: u64,
    /// TLB lookups those accesses did not make (one per hit: nothing is
    /// probed, filled or reordered for them).
    pub avoided_lookups: u64,
    /// Walks of those processes outside their segment, by kind of memory.
    pub walks_outside: WalksByKind,
    /// Walks whose address lies inside the process's primary region.
    pub walks_in_primary: u64,
    /// All walks of the processes with a primary region.
    pub walks_total: u64,
    /// Compaction time charged to provide the segments' memory.
    pub compaction_seconds: f64,
    /// Processes the unit knows.
    pub processes: u64,
}

/// Walks outside the segment by the kind of memory their address lies in.
// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WalksByKind {
    pub stack: u64,
    pub bss_data: u64,
    pub file: u64,
    pub code: u64,
    /// Anonymous memory flagged `segment_opt_out`.
    pub opt_out: u64,
    /// The paged rest of the primary region and undeclared addresses.
    pub other: u64,
}

/// One cpu's priced counters (`TranslationCounters::per_cpu`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCounters {
    pub accesses: u64,
    pub l1_hits: u64,
    pub l2_hits: u64,
    pub walk_refs: u64,
    /// Walk references that missed the page-table line cache (0 with it off).
    pub walk_refs_mem: u64,
    pub pwc_hits: u64,
}

impl CpuCounters {
    fn of(s: &MmuStats) -> CpuCounters {
        CpuCounters {
            accesses: s.accesses,
            l1_hits: s.total_l1_hits(),
            l2_hits: s.total_l2_hits(),
            walk_refs: s.walk_refs,
            walk_refs_mem: s.walk_refs_mem,
            pwc_hits: s.pwc_hits.iter().sum(),
        }
    }
}

/// The translation counters of a run, aggregated over cpus.
// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TranslationCounters {
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub l1_hits: u64,
    pub l2_hits: u64,
    pub walks: u64,
    pub walk_refs: u64,
    pub pwc_hits: u64,
    /// Walk references that hit the page-table line cache (the LLC) and that
    /// missed it (DRAM), `hw::ptcache`. Present only when that model is on
    /// (`cost.pt_cache_lines` > 0), so every other result is unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walk_refs_llc: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walk_refs_mem: Option<u64>,
    /// PWC hits by level name ("l2" = PDE cache on x86).
    pub pwc_hits_by_level: Vec<(String, u64)>,
    pub walks_per_1k_accesses: f64,
    /// Share of accesses that walk (the PCC paper's "PTW rate").
    pub walk_rate: f64,
    pub refs_per_walk: f64,
    pub shootdowns: u64,
    pub tlb_entries_invalidated: u64,
    pub by_page_size: Vec<SizeCounters>,
    pub per_cpu_walks: Vec<u64>,
    /// Per cpu, in a run with more than one (threads of a process, or the
    /// processes of a merged trace on cpus of their own): the counters the
    /// cost model prices, so the estimate can price each cpu's share
    /// (`CostEstimate::per_cpu_cycles`; the PCC paper's per-process speedups,
    /// Fig. 9). Empty and left out of the result with one cpu, so every
    /// single-cpu result is unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuCounters>,
    /// Present only in runs with a direct-segment unit, so every other
    /// result is unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentCounters>,
}

impl TranslationCounters {
    /// Fill in the reference classes of the page-table line cache: called
    /// by the simulator when the model is on.
    pub fn classify_walk_refs(&mut self, stats: &[MmuStats]) {
        let mem: u64 = stats.iter().map(|s| s.walk_refs_mem).sum();
        self.walk_refs_llc = Some(self.walk_refs - mem);
        self.walk_refs_mem = Some(mem);
    }

    pub fn from_mmus(stats: &[MmuStats], sizes: &[u64], levels: usize) -> Self {
        let mut t = MmuStats::default();
        for s in stats {
            t.add(s);
        }
        let walks = t.total_walks();
        let by_page_size = sizes
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let l1_misses = t.l2_hits[i] + t.walks[i];
                SizeCounters {
                    page_size: crate::units::page_label(b),
                    accesses: t.l1_hits[i] + l1_misses,
                    l1_hits: t.l1_hits[i],
                    l1_misses,
                    l2_hits: t.l2_hits[i],
                    l2_misses: t.walks[i],
                    walks: t.walks[i],
                }
            })
            .collect();
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        TranslationCounters {
            accesses: t.accesses,
            reads: t.accesses - t.writes,
            writes: t.writes,
            l1_hits: t.total_l1_hits(),
            l2_hits: t.total_l2_hits(),
            walks,
            walk_refs: t.walk_refs,
            pwc_hits: t.pwc_hits.iter().sum(),
            walk_refs_llc: None,
            walk_refs_mem: None,
            pwc_hits_by_level: (0..levels)
                .filter(|&i| i + 1 < levels)
                .map(|i| (format!("l{}", levels - i), t.pwc_hits[i]))
                .collect(),
            walks_per_1k_accesses: 1000.0 * ratio(walks, t.accesses),
            walk_rate: ratio(walks, t.accesses),
            refs_per_walk: ratio(t.walk_refs, walks),
            shootdowns: t.shootdowns,
            tlb_entries_invalidated: t.tlb_entries_invalidated,
            by_page_size,
            per_cpu_walks: stats.iter().map(|s| s.total_walks()).collect(),
            per_cpu: if stats.len() > 1 { stats.iter().map(CpuCounters::of).collect() } else { Vec::new() },
            segment: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cpu_counters_appear_only_with_more_than_one_cpu() {
        let mut a = MmuStats { accesses: 10, walk_refs: 7, walk_refs_mem: 2, ..Default::default() };
        a.l1_hits[0] = 6;
        a.l2_hits[1] = 2;
        a.walks[0] = 2;
        a.pwc_hits[1] = 1;
        let b = MmuStats { accesses: 5, ..Default::default() };
        let one = TranslationCounters::from_mmus(std::slice::from_ref(&a), &[4096, 2 << 20], 4);
        assert!(one.per_cpu.is_empty());
        assert!(!serde_json::to_string(&one).unwrap().contains("\"per_cpu\""));
        let two = TranslationCounters::from_mmus(&[a, b], &[4096, 2 << 20], 4);
        assert_eq!(two.per_cpu, vec![
            CpuCounters { accesses: 10, l1_hits: 6, l2_hits: 2, walk_refs: 7, walk_refs_mem: 2, pwc_hits: 1 },
            CpuCounters { accesses: 5, ..Default::default() },
        ]);
        assert_eq!(two.per_cpu_walks, vec![2, 0]);
    }
}
