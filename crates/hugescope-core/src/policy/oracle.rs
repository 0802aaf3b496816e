//! `oracle`: an offline, two-pass upper bound for budgeted promotion. The
//! first pass (`profile::profile_walks`) simulates the whole trace with base pages
//! and counts page walks per 2MB region: the walks promoting that region would
//! remove (up to the few misses its 2MB entry still takes). This policy then
//! maps the top-ranked regions huge at their first touch, so they never walk
//! with base pages at all, within the huge-page budget:
//!
//! - budget in regions = floor(`Ctx::budget_left()` / region size) at
//!   `init` (the kernel's budget is the PCC paper's floor(N% x ceil(footprint /
//!   2MB)) regions); no budget: every region that walked at least `min_walks`
//!   times (default 1);
//! - ranking: walks descending, ties by pid then address (deterministic);
//!   regions that cannot hold a huge page (not wholly inside one declared
//!   VMA) are skipped so they do not waste the budget;
//! - allocation at fault time with unlimited direct compaction (as `ideal`):
//!   an upper bound should not lose to fragmentation it could compact away;
//!   a refused allocation falls back to base pages and is not retried.
//!
//! It is a bound on *which* regions to pick, not on when: it ignores that a
//! region's walks may concentrate in a phase, and interactions between
//! regions (TLB conflicts). Without a profile (the policy used outside
//! `simulate_policies` and without `set_profile`) it maps nothing huge and
//! says so in `describe()`.

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::AllocMode;
use crate::profile::WalkProfile;
use crate::Result;

pub struct Oracle {
    min_walks: u64,
    profile: Option<WalkProfile>,
    /// Chosen (pid, region start), sorted for binary search at faults.
    chosen: Vec<(u16, u64)>,
    /// Walks the chosen regions took in the base-page profile.
    chosen_walks: u64,
    budget_regions: Option<u64>,
    /// Faults answered with a huge page (the kernel counts refusals in
    /// `os_stats.fault_fallbacks`).
    huge_fault_requests: u64,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let min_walks = p.u64("min_walks", 1)?.max(1);
    Ok(Box::new(Oracle {
        min_walks,
        profile: None,
        chosen: Vec::new(),
        chosen_walks: 0,
        budget_regions: None,
        huge_fault_requests: 0,
    }))
}

impl Policy for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "min_walks": self.min_walks,
            "profiled": self.profile.is_some(),
            "profile_total_walks": self.profile.as_ref().map(|p| p.total_walks),
            "profile_regions": self.profile.as_ref().map(|p| p.regions.len()),
            "budget_regions": self.budget_regions,
            "chosen_regions": self.chosen.len(),
            "chosen_profile_walks": self.chosen_walks,
            "huge_fault_requests": self.huge_fault_requests,
        })
    }
    fn wants_profile(&self) -> bool {
        true
    }
    fn set_profile(&mut self, p: &WalkProfile) {
        self.profile = Some(p.clone());
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        let Some(prof) = self.profile.take() else { return };
        let rb = k.region_bytes();
        let limit = k.budget_bytes().map(|_| k.budget_left() / rb);
        self.budget_regions = limit;
        let limit = limit.unwrap_or(u64::MAX);
        for r in &prof.regions {
            if self.chosen.len() as u64 >= limit || r.walks < self.min_walks {
                break; // ranked: the rest walked less
            }
            // Regions of VMAs inferred later (imported traces) are not known
            // yet; they are 2MB-aligned chunks, so keep them.
            if let Some(st) = k.view().region(r.pid, r.start) {
                if !st.inside_vma || st.start != r.start {
                    continue;
                }
            }
            self.chosen.push((r.pid, r.start));
            self.chosen_walks += r.walks;
        }
        self.chosen.sort_unstable();
        self.profile = Some(prof);
    }
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        if !f.region_in_vma || !f.region_empty || self.chosen.binary_search(&(f.pid, f.region_start)).is_err() {
            return FaultAction::Base;
        }
        let size = k.pmd_size();
        if size == 0 {
            return FaultAction::Base;
        }
        self.huge_fault_requests += 1;
        FaultAction::Huge { size, alloc: AllocMode::Compact { max_pages: u64::MAX } }
    }
}
