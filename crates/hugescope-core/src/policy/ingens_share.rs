//! Ingens-style sharing (Ingens §4.5, ingens.md 2.10; FHPM §2.3, §3.3,
//! Table 2): a base page shares freely, but a huge page is split for sharing
//! only if it is *not frequently accessed* as Ingens' access tracking sees it
//! (Scan-kth over the leaves' accessed bits: one bit per 2MB leaf, so a huge
//! page with a few hot 4KB regions looks wholly hot: FHPM's "hot bloat").
//! The tracking is Ingens' own (`policy/ingens/tracking.rs`, same knobs and
//! defaults); sharing starts once the tracker has seen `start_s` of history
//! (by default 9 periods: its 8-period window filled), so a page is not judged cold only
//! because it has no history yet.

use super::ingens::tracking::{TrackConfig, Tracker};
use super::ksmd::{self, KsmdConfig, SCAN_TIMER};
use super::{Ctx, Params, Policy};
use crate::Result;
use serde::Serialize;

const TRACK_TIMER: u32 = 1;

#[derive(Serialize)]
struct Settings {
    #[serde(flatten)]
    d: KsmdConfig,
    tracking: TrackConfig,
    seed: u64,
}

pub struct IngensShare {
    cfg: Settings,
    tracker: Tracker,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let tracking = TrackConfig::from_params(p)?;
    // The first scan after 8 full tracking periods (the EMA's window: a page
    // touched every period is frequent from the 8th pass), one period later
    // so the 8th pass has run whatever the timers' order.
    let d = ksmd::params(p, 9.0 * tracking.period_s)?;
    let seed = p.u64("seed", 1)?;
    let tracker = Tracker::new(tracking.clone(), seed, 12);
    Ok(Box::new(IngensShare { cfg: Settings { d, tracking, seed }, tracker }))
}

impl Policy for IngensShare {
    fn name(&self) -> &'static str {
        "ingens-share"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.cfg).unwrap_or_default()
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        self.tracker = Tracker::new(self.cfg.tracking.clone(), self.cfg.seed, k.shape().base_shift);
        self.cfg.d.start(k);
        k.schedule_in(self.cfg.tracking.period_s, TRACK_TIMER);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        match id {
            TRACK_TIMER => {
                self.tracker.pass(k);
                k.schedule_in(self.cfg.tracking.period_s, TRACK_TIMER);
            }
            SCAN_TIMER => {
                let t = &self.tracker;
                // Ingens §4.5: split a huge page to share only if it is not frequent.
                k.ksm_scan(self.cfg.d.pages_to_scan, &mut |_, c| c.leaf_size == 0 || !t.is_frequent(c.pid, c.leaf_start));
                self.cfg.d.sleep(k);
            }
            _ => {}
        }
    }
}
