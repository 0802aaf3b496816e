//! `hmmv`: HMM-v, the hypervisor-level tiered-memory manager FHPM compares
//! against (FHPM §6.5; spec §6 "FHPM-TMM"): it reads and clears the accessed
//! bit of every EPT leaf each round, counts in how many rounds each leaf was
//! accessed, ranks the leaves by that frequency with a bucket sort, and
//! places them by rank (the fast tier filled hottest first, the rest in the
//! slow tier) through the kernel's one placement mechanism
//! (`Ctx::place_tiers`, os/tier.rs).
//!
//! Two variants, one knob (`granularity`):
//! - `huge` (HMM-v-Huge): every leaf is 2MB (huge at first touch, as a
//!   THP-backed VM); tracking, ranking and migration all at 2MB. One A bit
//!   covers 512 regions, so a few hot regions make the whole page hot: the
//!   hot bloat of FHPM §2.2.
//! - `base` (HMM-v-Base): every leaf is 4KB: exact tracking and placement,
//!   but no TLB reach.
//!
//! Knobs: `interval` (seconds between A-bit rounds, default 1: the spec's
//! 1 s clear period) and `rounds` (rounds per placement, default 5: a
//! frequency in 0..=5, like FHPM's stage-1 window). The round's scan costs
//! `scan_pte_us` per leaf. Without tiers (`os.tier_fast` unset) it still
//! tracks but places nothing.

use std::collections::HashMap;

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::tier::TierUnit;
use crate::os::AllocMode;
use crate::Result;

pub struct Hmmv {
    huge: bool,
    interval_s: f64,
    rounds: u32,
    /// Rounds of the current window in which each leaf was accessed, by
    /// (pid, leaf start); every present leaf has an entry.
    freq: HashMap<(u16, u64), u32>,
    round: u32,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let huge = p.choice("granularity", "huge", &["huge", "base"])? == "huge";
    let interval_s = p.f64_in("interval", 1.0, super::params::MIN_PERIOD_S, super::params::MAX_PERIOD_S)?;
    let rounds = p.u64_in("rounds", 5, 1, 1000)? as u32;
    Ok(Box::new(Hmmv { huge, interval_s, rounds, freq: HashMap::new(), round: 0 }))
}

/// The timer of the A-bit rounds.
const ROUND: u32 = 0;

impl Hmmv {
    /// One round: read and clear every leaf's A bit (one batched flush per
    /// process so cached translations set it again), count the accessed ones.
    fn scan(&mut self, k: &mut Ctx<'_>) {
        let mut scanned = 0u64;
        for pid in 0..k.view().processes() as u16 {
            let freq = &mut self.freq;
            k.scan_young(pid, 0, u64::MAX, true, &mut |l| {
                scanned += 1;
                *freq.entry((pid, l.addr)).or_insert(0) += l.accessed as u32;
                l.accessed
            });
        }
        let us = scanned as f64 * k.os_costs().scan_pte_us;
        k.charge_policy_us(us);
    }

    /// Bucket sort by frequency, hottest first; within a bucket, pid and
    /// address order (deterministic).
    fn ranked(&self) -> Vec<TierUnit> {
        let mut buckets: Vec<Vec<(u16, u64)>> = vec![Vec::new(); self.rounds as usize + 1];
        for (&key, &f) in &self.freq {
            buckets[f.min(self.rounds) as usize].push(key);
        }
        let mut out = Vec::with_capacity(self.freq.len());
        for b in buckets.iter_mut().rev() {
            b.sort_unstable();
            out.extend(b.iter().map(|&(pid, addr)| TierUnit { pid, addr }));
        }
        out
    }
}

impl Policy for Hmmv {
    fn name(&self) -> &'static str {
        "hmmv"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "granularity": if self.huge { "huge" } else { "base" },
            "interval": self.interval_s,
            "rounds": self.rounds,
        })
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        k.schedule_in(self.interval_s, ROUND);
    }
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        // HMM-v-Huge: a THP-backed VM, every region 2MB at first touch.
        let size = k.pmd_size();
        if !self.huge || size == 0 || !f.region_in_vma || !f.region_empty {
            return FaultAction::Base;
        }
        FaultAction::Huge { size, alloc: AllocMode::Compact { max_pages: u64::MAX } }
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if id != ROUND {
            return;
        }
        self.scan(k);
        self.round += 1;
        if self.round >= self.rounds {
            let ranked = self.ranked();
            k.place_tiers(&ranked);
            self.freq.clear();
            self.round = 0;
        }
        k.schedule_in(self.interval_s, ROUND);
    }
}
