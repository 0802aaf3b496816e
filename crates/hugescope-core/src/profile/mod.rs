//! The walk profile: page walks per PMD-level region in a base-page run of a
//! whole trace, the ranking an offline policy (the oracle) chooses from. A
//! profiling pass (`pass.rs`) measures it before the run; the policy gets it
//! through `Policy::set_profile` before its kernel is built.

pub mod pass;

use serde::Serialize;

pub use pass::{profile_walks, WalkProfiler};

/// Page walks per PMD-level region in a base-page run of a whole trace: what
/// promoting each region could remove (the oracle's ranking).
#[derive(Clone, Debug, Default, Serialize)]
pub struct WalkProfile {
    pub region_bytes: u64,
    pub total_walks: u64,
    /// Regions that walked at least once: walks descending, then pid, then address.
    pub regions: Vec<RegionWalks>,
}

impl WalkProfile {
    /// The profile of `regions`, ranked: walks descending, then pid, then address.
    pub fn ranked(region_bytes: u64, mut regions: Vec<RegionWalks>) -> WalkProfile {
        regions.sort_by(|a, b| b.walks.cmp(&a.walks).then(a.pid.cmp(&b.pid)).then(a.start.cmp(&b.start)));
        let total_walks = regions.iter().map(|r| r.walks).sum();
        WalkProfile { region_bytes, total_walks, regions }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RegionWalks {
    pub pid: u16,
    pub start: u64,
    pub walks: u64,
}
