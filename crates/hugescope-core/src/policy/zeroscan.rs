//! Zero-page scan, THP-shrinker style (Zhu 2023, FHPM §3.3, §6.3, Table 2):
//! only zero-filled base pages are candidates; a huge page holding at least
//! `min_zero` of them is split and they are reclaimed by mapping them to one
//! shared zero frame (the model's stand-in for the kernel's zero page: one
//! frame more than Linux keeps). Saves little unless programs leave memory
//! untouched inside huge pages.

use super::ksmd::{self, KsmdConfig, SCAN_TIMER};
use super::{Ctx, Params, Policy};
use crate::os::content::ZERO;
use crate::Result;
use serde::Serialize;

#[derive(Serialize)]
pub struct ZeroScan {
    #[serde(flatten)]
    d: KsmdConfig,
    /// Zero base pages a huge page needs before it is split (the THP
    /// shrinker's threshold; 1: any zero-filled region).
    min_zero: u64,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let d = ksmd::params(p, 0.0)?;
    let min_zero = p.u64_in("min_zero", 1, 1, 1 << 18)?;
    Ok(Box::new(ZeroScan { d, min_zero }))
}

impl Policy for ZeroScan {
    fn name(&self) -> &'static str {
        "zeroscan"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        self.d.start(k);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if id == SCAN_TIMER {
            let min_zero = self.min_zero;
            k.ksm_scan(self.d.pages_to_scan, &mut |v, c| {
                c.content == ZERO && (c.leaf_size == 0 || min_zero <= 1 || v.zero_pages_in(c.pid, c.leaf_start, v.geometry().sizes[c.leaf_size]) >= min_zero)
            });
            self.d.sleep(k);
        }
    }
}
