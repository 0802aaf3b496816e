//! `linux`: Linux transparent huge pages. Fault-time huge pages as
//! `enabled` and `defrag` allow (mm/huge_memory.c), falling back to a base
//! page when no 2MB block can be had; plus khugepaged collapsing in the
//! background. Defaults are the PCC paper's Linux baseline (enabled=always);
//! every sysfs knob is a parameter (linux-thp-and-hawkeye.md A.1-A.3).

use super::khugepaged::{Khugepaged, KhugepagedConfig};
use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::AllocMode;
use crate::Result;

pub struct Linux {
    enabled: String,
    defrag: String,
    /// Direct compaction cap for a fault that may stall (defrag=always or madvised).
    compact_pages: u64,
    /// One light attempt (__GFP_NORETRY) for defrag=always on unadvised VMAs.
    light_compact_pages: u64,
    /// Huge pages at fault time at all. false: asynchronous promotion only
    /// (khugepaged), the "asynchronous only" Linux of Ingens Table 4.
    fault_huge: bool,
    khugepaged: Option<Khugepaged>,
    /// Linux's back-off after failed compactions (os/compact_defer.rs). Off
    /// by default: the studies written before it keep their results; the
    /// Ingens studies turn it on (their Linux 4.3 has it).
    defer_compaction: bool,
}

const KHUGEPAGED: u32 = 1;

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let enabled = p.choice("enabled", "always", &["always", "madvise", "never"])?;
    let defrag = p.choice("defrag", "madvise", &["always", "defer", "defer+madvise", "madvise", "never"])?;
    use super::params::{MAX_COMPACT_PAGES, MAX_PERIOD_S, MIN_PERIOD_S};
    let compact_pages = p.u64_in("compact_pages", 1 << 14, 0, MAX_COMPACT_PAGES)?;
    let light_compact_pages = p.u64_in("light_compact_pages", 512, 0, MAX_COMPACT_PAGES)?;
    let d = KhugepagedConfig::default();
    // The sleeps have the common period floor: with scan_sleep_ms=0 the daemon
    // re-fired at the same virtual instant forever.
    let (min_ms, max_ms) = (MIN_PERIOD_S * 1e3, MAX_PERIOD_S * 1e3);
    let kcfg = KhugepagedConfig {
        pages_to_scan: p.u64_in("pages_to_scan", d.pages_to_scan, 1, 1 << 40)?,
        scan_sleep_s: p.f64_in("scan_sleep_ms", d.scan_sleep_s * 1e3, min_ms, max_ms)? / 1e3,
        alloc_sleep_s: p.f64_in("alloc_sleep_ms", d.alloc_sleep_s * 1e3, min_ms, max_ms)? / 1e3,
        // HPAGE_PMD_NR - 1, as the kernel's sysfs store accepts.
        max_ptes_none: p.u64_in("max_ptes_none", d.max_ptes_none as u64, 0, 511)? as u32,
        require_referenced: p.bool("require_referenced", d.require_referenced)?,
        defrag: p.bool("khugepaged_defrag", d.defrag)?,
        compact_pages,
    };
    let fault_huge = p.bool("fault_huge", true)?;
    let khugepaged = p.bool("khugepaged", true)?.then(|| Khugepaged::new(kcfg));
    let defer_compaction = p.bool("defer_compaction", false)?;
    Ok(Box::new(Linux { enabled, defrag, compact_pages, light_compact_pages, fault_huge, khugepaged, defer_compaction }))
}

impl Linux {
    fn eligible(enabled: &str, advised: bool) -> bool {
        enabled == "always" || (enabled == "madvise" && advised)
    }

    /// GFP behaviour of a fault-time huge allocation (vma_thp_gfp_mask).
    fn fault_alloc(&self, advised: bool) -> AllocMode {
        thp_fault_alloc(&self.defrag, advised, self.compact_pages, self.light_compact_pages)
    }
}

/// The allocation behaviour of a THP fault, any order (vma_thp_gfp_mask in
/// mm/huge_memory.c): direct compaction where `defrag` lets the fault stall,
/// one light attempt for defrag=always on an unadvised VMA, none otherwise.
pub(super) fn thp_fault_alloc(defrag: &str, advised: bool, compact_pages: u64, light_compact_pages: u64) -> AllocMode {
    match (defrag, advised) {
        ("always", true) | ("defer+madvise", true) | ("madvise", true) => AllocMode::Compact { max_pages: compact_pages },
        ("always", false) => AllocMode::Compact { max_pages: light_compact_pages },
        _ => AllocMode::FreeOnly,
    }
}

impl Policy for Linux {
    fn name(&self) -> &'static str {
        "linux"
    }
    fn describe(&self) -> serde_json::Value {
        let mut d = serde_json::json!({
            "enabled": self.enabled, "defrag": self.defrag,
            "compact_pages": self.compact_pages, "light_compact_pages": self.light_compact_pages,
            "fault_huge": self.fault_huge,
            "khugepaged": self.khugepaged.as_ref().map(|k| serde_json::json!({"config": k.cfg, "stats": k.stats})),
        });
        // Echoed only when on: results of runs without it stay byte-identical.
        if self.defer_compaction {
            d["defer_compaction"] = true.into();
        }
        d
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        if self.defer_compaction {
            k.enable_compaction_deferral();
        }
        if let Some(kh) = &self.khugepaged {
            if self.enabled != "never" {
                k.schedule_in(kh.cfg.scan_sleep_s, KHUGEPAGED);
            }
        }
    }
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        // A.2: eligible VMA, the aligned 2MB range inside it, and the PMD still
        // empty (once a 4KB page faulted there, only a collapse can promote it).
        if !self.fault_huge || !Self::eligible(&self.enabled, f.vma_advised) || !f.region_in_vma || !f.region_empty {
            return FaultAction::Base;
        }
        FaultAction::Huge { size: k.pmd_size(), alloc: self.fault_alloc(f.vma_advised) }
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if id != KHUGEPAGED {
            return;
        }
        let enabled = self.enabled.clone();
        let size = k.pmd_size();
        if let Some(kh) = self.khugepaged.as_mut() {
            let sleep = kh.pass(k, size, |adv| Linux::eligible(&enabled, adv));
            k.schedule_in(sleep, KHUGEPAGED);
        }
    }
}
