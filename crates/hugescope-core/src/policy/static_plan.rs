//! `static`: huge pages exactly where a plan file says, when it says. Entries
//! "at start" become huge at the first touch of their range; entries at a
//! time, an access count or a progress point are collapsed then (with
//! compaction, as MADV_COLLAPSE may compact). Entries "after a marker" arm
//! an access timer when the trace first reaches the marker, so they act at
//! the access where the recording policy acted. Replays any policy's
//! `--emit-plan` output in simulation.

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::AllocMode;
use crate::plan::{Plan, PlanEntry, When};
use crate::{Error, Result};
use std::path::PathBuf;

pub struct StaticPlan {
    path: PathBuf,
    entries: Vec<PlanEntry>,
    /// Entries "at start", sorted by (pid, start), with their size index.
    at_start: Vec<(PlanEntry, usize)>,
    /// Per entry, whether an `AfterMarker` entry's timer is armed already: a
    /// label seen again (a merged trace's processes share labels) must not
    /// apply the entry a second time.
    armed: Vec<bool>,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let path = p.str("plan", "");
    if path.is_empty() {
        return Err(Error::input("policy static needs plan=FILE (a plan JSON file)"));
    }
    let plan = Plan::load(std::path::Path::new(&path))?;
    if !plan.sites.is_empty() {
        // The policy sees no trace regions to resolve them against.
        return Err(Error::input(format!(
            "policy static: plan '{path}' names allocation sites; use it as a static map (--pages PLAN) or with              'hugescope run', or write it by address"
        )));
    }
    Ok(Box::new(StaticPlan { path: path.into(), armed: vec![false; plan.entries.len()], entries: plan.entries, at_start: Vec::new() }))
}

const ACCESS_TIMER: u32 = 1 << 30;

impl StaticPlan {
    /// Promote every page of the entry, in address order. Only pages starting
    /// inside a VMA are attempted: any other is refused as ineligible with no
    /// other effect, so those are counted in one go. A plan range over a vast
    /// unmapped span (2^47 bytes of 4KB pages) is then as quick as its
    /// mapped part instead of 2^35 attempts.
    fn apply(&self, k: &mut Ctx<'_>, e: &PlanEntry) {
        let Some(size) = k.geometry().size_index_of(e.page_size) else { return };
        let ps = e.page_size;
        let (end, pages) = (e.end(), e.length / ps);
        let vmas: Vec<(u64, u64)> = k.view().vmas(e.pid).map(|v| (v.start(), v.end())).collect();
        let (mut a, mut tried) = (e.start, 0u64);
        for (vs, ve) in vmas {
            if ve <= a {
                continue;
            }
            if vs >= end {
                break;
            }
            // First page of the entry starting at or after the VMA's start.
            if vs > a {
                a += (vs - a).div_ceil(ps) * ps;
            }
            while a < ve.min(end) {
                let _ = k.promote(e.pid, a, size, AllocMode::Compact { max_pages: u64::MAX });
                tried += 1;
                a += ps;
            }
        }
        k.count_ineligible_promotions(pages - tried);
    }
}

impl Policy for StaticPlan {
    fn name(&self) -> &'static str {
        "static"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({ "plan": self.path.display().to_string(), "entries": self.entries.len() })
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        for (i, e) in self.entries.iter().enumerate() {
            match &e.when {
                When::Start => {
                    if let Some(s) = k.geometry().size_index_of(e.page_size) {
                        self.at_start.push((e.clone(), s));
                    }
                }
                When::TimeS(t) => k.schedule_at(*t, i as u32),
                When::Accesses(n) => k.schedule_after_accesses(*n, ACCESS_TIMER | i as u32),
                When::Progress(_) | When::AfterMarker { .. } => {}
            }
        }
        self.at_start.sort_by_key(|(e, _)| (e.pid, e.start));
    }
    fn on_fault(&mut self, _k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        let i = self.at_start.partition_point(|(e, _)| (e.pid, e.start) <= (f.pid, f.addr));
        if i > 0 {
            let (e, s) = &self.at_start[i - 1];
            if e.pid == f.pid && f.addr < e.end() {
                return FaultAction::Huge { size: *s, alloc: AllocMode::Compact { max_pages: u64::MAX } };
            }
        }
        FaultAction::Base
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if let Some(e) = self.entries.get((id & !ACCESS_TIMER) as usize).cloned() {
            self.apply(k, &e);
        }
    }
    fn on_progress(&mut self, k: &mut Ctx<'_>, label: &str) {
        let due: Vec<PlanEntry> = self.entries.iter().filter(|e| matches!(&e.when, When::Progress(l) if l == label)).cloned().collect();
        for e in due {
            self.apply(k, &e);
        }
        // Armed at the marker: the recorded count is relative to it, and the
        // timer fires after the access that brings the clock to the target,
        // the same point at which the recording policy's timer ran.
        let now = k.accesses();
        for (i, e) in self.entries.iter().enumerate() {
            if let When::AfterMarker { label: l, accesses } = &e.when {
                if l == label && !self.armed[i] {
                    self.armed[i] = true;
                    k.schedule_after_accesses(now.saturating_add(*accesses), ACCESS_TIMER | i as u32);
                }
            }
        }
    }
}
