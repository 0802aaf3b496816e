//! `mthp`: Linux's multi-size THP for anonymous memory (Linux 6.8+,
//! Documentation/admin-guide/mm/transhuge.rst, "multi-size THP"). Besides
//! the PMD size, each folio size between the base page and the PMD has its
//! own `hugepages-<size>kB/enabled` (always, madvise, inherit: the top-level
//! `enabled`, or never; never by default). At an anonymous fault the kernel
//! first tries a PMD huge page as `linux` does; failing that, it allocates
//! the largest enabled folio whose naturally aligned range lies in the VMA
//! and has no PTE mapped yet, falling back order by order to smaller enabled
//! sizes and then to a base page (mm/memory.c, alloc_anon_folio).
//!
//! The PMD size, khugepaged and every knob they read (`enabled`, `defrag`,
//! the compaction caps, the khugepaged knobs) are the `linux` policy itself,
//! held inside: this file adds the folio sizes only. What a folio buys in TLB
//! reach is the machine's business (`MachineConfig::coalesce`, os/coalesce.rs).

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::config::MachineConfig;
use crate::os::AllocMode;
use crate::units::page_label;
use crate::{Error, Result};
use std::collections::BTreeMap;

/// Sizes a per-size knob may name: `enabled_8k` .. `enabled_1g`. Which of
/// them the machine has as folio sizes is checked against the machine
/// (`Policy::check_machine`), as the sysfs directory of a size exists only then.
const KNOB_SHIFTS: std::ops::RangeInclusive<u32> = 13..=30;
const SETTINGS: &[&str] = &["always", "madvise", "inherit", "never"];

/// Per-size counters, named after the sysfs files
/// `hugepages-<size>kB/stats/anon_fault_*`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct SizeStats {
    /// Faults this policy asked to serve with a folio of this size (the
    /// kernel's `faults_huge` counts those it mapped).
    anon_fault_alloc: u64,
    /// Faults where this size was enabled and fitted but no free block (or
    /// no budget) was there without compaction: the next smaller size was tried.
    anon_fault_fallback: u64,
}

pub struct Mthp {
    /// `linux` with the same parameters: the PMD-size fault and khugepaged.
    pmd: Box<dyn Policy>,
    /// The top-level `enabled`, which `inherit` sizes follow.
    enabled: String,
    defrag: String,
    compact_pages: u64,
    light_compact_pages: u64,
    /// The per-size knobs given, by bytes.
    given: BTreeMap<u64, String>,
    /// Resolved at `init` against the machine: (size index, always/madvise),
    /// largest first; sizes resolving to never are left out.
    orders: Vec<(usize, String)>,
    stats: BTreeMap<u64, SizeStats>,
}

/// The per-size knobs of a parameter list: bytes -> setting.
fn size_knobs(p: &mut Params) -> Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for shift in KNOB_SHIFTS {
        let key = format!("enabled_{}", page_label(1 << shift));
        let v = p.str(&key, "");
        if v.is_empty() {
            continue;
        }
        if !SETTINGS.contains(&v.as_str()) {
            return Err(Error::input(format!("policy mthp: {key}={v}: expected one of {}", SETTINGS.join(", "))));
        }
        out.insert(1u64 << shift, v);
    }
    Ok(out)
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let pmd = super::linux::new(p)?;
    // The same keys `linux` just read (a getter may read a key again), with
    // its defaults: the folio sizes' allocation follows the same `defrag`.
    use super::params::MAX_COMPACT_PAGES;
    let enabled = p.choice("enabled", "always", &["always", "madvise", "never"])?;
    let defrag = p.choice("defrag", "madvise", &["always", "defer", "defer+madvise", "madvise", "never"])?;
    let compact_pages = p.u64_in("compact_pages", 1 << 14, 0, MAX_COMPACT_PAGES)?;
    let light_compact_pages = p.u64_in("light_compact_pages", 512, 0, MAX_COMPACT_PAGES)?;
    let given = size_knobs(p)?;
    Ok(Box::new(Mthp { pmd, enabled, defrag, compact_pages, light_compact_pages, given, orders: Vec::new(), stats: BTreeMap::new() }))
}

impl Mthp {
    fn eligible(setting: &str, advised: bool) -> bool {
        setting == "always" || (setting == "madvise" && advised)
    }

    /// Whether a block of size index `size` can be had now without
    /// compaction, under the budget.
    fn available(k: &Ctx<'_>, size: usize) -> bool {
        let g = k.geometry();
        let order = g.shifts[size] - g.shifts[0];
        k.budget_left() >= g.sizes[size] && k.view().free_blocks_at_least(order) > 0
    }

    /// The folio sizes enabled for a VMA with this advice, largest first.
    fn enabled_for(&self, advised: bool) -> impl Iterator<Item = usize> + '_ {
        self.orders.iter().filter(move |(_, m)| Self::eligible(m, advised)).map(|&(s, _)| s)
    }
}

impl Policy for Mthp {
    fn name(&self) -> &'static str {
        "mthp"
    }

    fn describe(&self) -> serde_json::Value {
        let sizes: serde_json::Map<String, serde_json::Value> = self
            .given
            .iter()
            .map(|(&b, v)| {
                let resolved = if v == "inherit" { self.enabled.as_str() } else { v.as_str() };
                let st = self.stats.get(&b).copied().unwrap_or_default();
                (page_label(b), serde_json::json!({ "enabled": v, "resolved": resolved, "stats": st }))
            })
            .collect();
        serde_json::json!({ "enabled": self.enabled, "defrag": self.defrag, "sizes": sizes, "linux": self.pmd.describe() })
    }

    /// Each per-size knob must name one of the machine's folio sizes
    /// (`folio_sizes`), as Linux has a `hugepages-<size>kB` directory only
    /// for the orders the architecture supports. Checked when a
    /// configuration is resolved, before any work.
    fn check_machine(&self, machine: &MachineConfig) -> Result<()> {
        let folios = machine.folio_size_bytes()?;
        for (&bytes, v) in &self.given {
            if !folios.contains(&bytes) {
                let have = if machine.folio_sizes.is_empty() { "none".to_string() } else { machine.folio_sizes.join(", ") };
                return Err(Error::input(format!(
                    "policy mthp: enabled_{}={v}: the machine '{}' has no {} mTHP size (its folio_sizes: {have}; the PMD size follows `enabled`)",
                    page_label(bytes),
                    machine.name,
                    page_label(bytes)
                )));
            }
        }
        Ok(())
    }

    fn init(&mut self, k: &mut Ctx<'_>) {
        let g = k.geometry().clone();
        let mut orders = Vec::new();
        for (&bytes, v) in &self.given {
            let resolved = if v == "inherit" { self.enabled.clone() } else { v.clone() };
            match g.size_index_of(bytes).filter(|&s| g.is_folio(s)) {
                Some(s) if resolved != "never" => orders.push((s, resolved)),
                Some(_) => {}
                // Configurations are checked against the machine when
                // resolved (`Policy::check_machine`); a kernel built directly may
                // still name a size the machine lacks: said, then ignored.
                None => k.note(format!("policy mthp: enabled_{}: not an mTHP size of this machine, ignored", page_label(bytes))),
            }
            self.stats.insert(bytes, SizeStats::default());
        }
        orders.sort_by_key(|&(s, _)| std::cmp::Reverse(s));
        self.orders = orders;
        self.pmd.init(k);
    }

    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        let pmd = self.pmd.on_fault(k, f);
        let folios = self.enabled_for(f.vma_advised).next().is_some();
        match pmd {
            FaultAction::Base => {}
            // The PMD fault would fail without compaction: Linux falls back
            // to the folio orders (VM_FAULT_FALLBACK), so they are tried
            // here instead of the kernel's base-page fallback. Only with
            // folio sizes on, so that with all of them never this policy
            // is `linux` exactly, counters included.
            FaultAction::Huge { size, alloc: AllocMode::FreeOnly } if folios && !Self::available(k, size) => {}
            huge => return huge,
        }
        let alloc = super::linux::thp_fault_alloc(&self.defrag, f.vma_advised, self.compact_pages, self.light_compact_pages);
        // Largest first. Without compaction, the first size with a free
        // block; where `defrag` lets the fault compact, the largest size
        // that fits (the kernel compacts for it and, failing that, maps a
        // base page: the smaller orders are not tried again after a failed
        // compaction, a simplification, docs/assumptions.md).
        let compacting = matches!(alloc, AllocMode::Compact { .. });
        let order: Vec<usize> = self.enabled_for(f.vma_advised).collect();
        for s in order {
            let len = k.geometry().sizes[s];
            if !k.view().range_unmapped(f.pid, f.addr & !(len - 1), len) {
                continue;
            }
            let st = self.stats.entry(len).or_default();
            if Self::available(k, s) || (compacting && k.budget_left() >= len) {
                st.anon_fault_alloc += 1;
                return FaultAction::Huge { size: s, alloc };
            }
            st.anon_fault_fallback += 1;
        }
        FaultAction::Base
    }

    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        // Every timer is khugepaged's: this policy schedules none of its own.
        self.pmd.on_timer(k, id);
    }
    fn on_progress(&mut self, k: &mut Ctx<'_>, label: &str) {
        self.pmd.on_progress(k, label);
    }
    fn on_free(&mut self, k: &mut Ctx<'_>, pid: u16, start: u64, len: u64) {
        self.pmd.on_free(k, pid, start, len);
    }
    fn finish(&mut self, k: &mut Ctx<'_>) {
        self.pmd.finish(k);
    }
}
