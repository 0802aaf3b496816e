//! `random`: promote regions chosen at random, at the PCC's cadence. The
//! baseline any selection policy must beat: it has the PCC's promotion rate
//! and budget but no information about which regions are walked (the
//! "random" line of the validation report, PCC paper §5's question of how
//! much the choice of regions matters).
//!
//! Every `interval_s` (default 30 s, first at `first_s`, default 1 s, the
//! PCC artifact's first promotion point), up to `regions_to_promote` (128)
//! regions are drawn uniformly from the PMD-level regions that have been
//! touched, lie wholly inside a VMA and are not huge yet, with a seeded
//! generator (`seed`, default 1), and promoted through the kernel.

use super::{Ctx, Params, Policy};
use crate::os::Refusal;
use crate::os::AllocMode;
use crate::Result;

const TICK: u32 = 0x5241_4e44;

pub struct Random {
    interval_s: f64,
    first_s: f64,
    per_interval: u64,
    state: u64,
    promoted: u64,
    failed: u64,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    use super::params::{MAX_PERIOD_S, MAX_PROMOTIONS_PER_ROUND, MIN_PERIOD_S};
    let interval_s = p.f64_in("interval_s", 30.0, MIN_PERIOD_S, MAX_PERIOD_S)?;
    let first_s = p.f64_in("first_s", 1.0, 0.0, MAX_PERIOD_S)?;
    Ok(Box::new(Random {
        interval_s,
        first_s,
        per_interval: p.u64_in("regions_to_promote", 128, 0, MAX_PROMOTIONS_PER_ROUND)?,
        state: p.u64("seed", 1)?,
        promoted: 0,
        failed: 0,
    }))
}

impl Random {
    /// SplitMix64: deterministic for a seed, independent of library versions.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Policy for Random {
    fn name(&self) -> &'static str {
        "random"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "interval_s": self.interval_s, "first_s": self.first_s,
            "regions_to_promote": self.per_interval, "promoted": self.promoted, "failed": self.failed,
        })
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        k.schedule_at(self.first_s, TICK);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if id != TICK {
            return;
        }
        let size = k.pmd_size();
        let view = k.view();
        let mut candidates: Vec<(u16, u64)> = Vec::new();
        for pid in 0..view.processes() as u16 {
            for (v, ri, start) in view.regions(pid) {
                if v.region_touched(ri) > 0 && v.region_inside(ri) {
                    candidates.push((pid, start));
                }
            }
        }
        candidates.retain(|&(pid, start)| view.region(pid, start).is_some_and(|s| s.leaf_size < size));
        let mut done = 0;
        // Partial Fisher-Yates: the first `per_interval` draws without repetition.
        while done < self.per_interval && (done as usize) < candidates.len() {
            let i = done as usize + (self.next() % (candidates.len() - done as usize) as u64) as usize;
            candidates.swap(done as usize, i);
            let (pid, start) = candidates[done as usize];
            done += 1;
            match k.promote(pid, start, size, AllocMode::Compact { max_pages: 1 << 14 }) {
                Ok(()) => self.promoted += 1,
                Err(Refusal::NoMemory | Refusal::Budget) => {
                    self.failed += 1;
                    break;
                }
                Err(_) => {}
            }
        }
        k.schedule_in(self.interval_s, TICK);
    }
}
