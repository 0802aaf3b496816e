//! FHPM's two consumers (FHPM §5; spec fhpm.md §6). The monitoring and the
//! HP decision are FHPM's own; a consumer only says what the expected use
//! ratio `f_use` is and what happens to the pages the decision classified.
//! The mechanisms are the kernel's: tier placement (`Ctx::place_tiers`,
//! os/tier.rs, which HMM-v also uses) and same-page merging (`Ctx::
//! ksm_scan`, os/ksm.rs, which the sharing baselines also use).
//!
//! - `tmm` (FHPM-TMM, §5, §6.5): f_use = s_fast / s_tot. After the decision,
//!   balanced huge pages and the base pages with a stage-1 frequency go to
//!   the fast tier, hottest first, a huge page before base pages of equal
//!   frequency (spec §11, "TMM cutoff and ranking"); the rest goes slow.
//! - `share` (FHPM-Share, §5, §6.6): the HP decision tags hot huge pages
//!   balanced or unbalanced; splits wait for the content scanner, which may
//!   split only cold huge pages and unbalanced ones, and only when one of
//!   their base pages has a sharing candidate (the mechanism splits a huge
//!   page only just before merging one of its pages). A region holding a
//!   shared page is never collapsed (the mechanism refuses it). `f_use` is
//!   the policy's own (0.85 keeps memory under a waterline, 0.5 favours
//!   savings, Table 7).

use crate::os::ksm::Candidate;
use crate::os::tier::TierUnit;
use crate::policy::Ctx;
use serde::Serialize;
use std::collections::BTreeSet;

/// Which consumer, with its state.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Consumer {
    #[default]
    None,
    Tmm,
    Share {
        /// Pages scanned per wake-up and seconds between wake-ups (ksmd's
        /// `pages_to_scan`, `sleep_millisecs`).
        pages_to_scan: u64,
        sleep_s: f64,
        #[serde(skip)]
        splittable: BTreeSet<(u16, u64)>,
        /// A monitoring window has classified the huge pages.
        #[serde(skip)]
        classified: bool,
    },
}

impl Consumer {
    pub fn name(&self) -> &'static str {
        match self {
            Consumer::None => "none",
            Consumer::Tmm => "tmm",
            Consumer::Share { .. } => "share",
        }
    }

    /// The HP policy's `f_use` for this window: the fast tier's share of the
    /// monitored memory under `tmm` (spec §6), else the configured one.
    pub fn f_use(&self, k: &Ctx<'_>, configured: f64, s_tot_all: u64) -> f64 {
        match (self, k.tier_fast_bytes()) {
            (Consumer::Tmm, Some(fast)) if s_tot_all > 0 => (fast as f64 / s_tot_all as f64).min(1.0),
            _ => configured,
        }
    }

    /// Under `share`: the huge pages the scanner may split from now on, by
    /// the last window's classification: every huge region of the VMs that
    /// is not a hot huge page the decision keeps (cold pages, and the
    /// unbalanced ones it chose to demote).
    pub fn classify(&mut self, huge_regions: &[(u16, u64)], kept_hot: &BTreeSet<(u16, u64)>) {
        if let Consumer::Share { splittable, classified, .. } = self {
            splittable.clear();
            splittable.extend(huge_regions.iter().copied().filter(|r| !kept_hot.contains(r)));
            *classified = true;
        }
    }

    /// One scanner wake-up under `share`: base pages merge freely, a huge
    /// page only if the last classification allows its split; nothing huge
    /// before the first window has classified.
    pub fn scan(&self, k: &mut Ctx<'_>) {
        if let Consumer::Share { pages_to_scan, splittable, classified, .. } = self {
            k.ksm_scan(*pages_to_scan, &mut |_, c: &Candidate| c.leaf_size == 0 || (*classified && splittable.contains(&(c.pid, c.leaf_start))));
        }
    }

    /// Under `tmm`: place the VM's memory by the window's frequencies.
    /// `units` are (frequency, is huge, pid, address) of every leaf with a
    /// nonzero frequency.
    pub fn place(&self, k: &mut Ctx<'_>, mut units: Vec<(u32, bool, u16, u64)>) -> u64 {
        if !matches!(self, Consumer::Tmm) {
            return 0;
        }
        // Hottest first; a balanced huge page before base pages of equal
        // frequency; then pid and address (deterministic).
        units.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
        let ranked: Vec<TierUnit> = units.into_iter().map(|(_, _, pid, addr)| TierUnit { pid, addr }).collect();
        k.place_tiers(&ranked)
    }
}
