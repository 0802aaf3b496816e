//! Huge-page sharing (Waldspurger 2002 as FHPM §2.3 describes it; the Ingens
//! paper's "huge-page sharing" baseline, Tables 7 and 11): only whole huge
//! pages with identical content are merged, into one shared huge frame;
//! nothing is ever split. Keeps every huge page, saves almost nothing when
//! data is laid out at 4KB granularity (FHPM Table 2).

use super::ksmd::{self, KsmdConfig, SCAN_TIMER};
use super::{Params, Policy};
use crate::os::Kernel;
use crate::Result;

pub struct HpShare {
    d: KsmdConfig,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    Ok(Box::new(HpShare { d: ksmd::params(p, 0.0)? }))
}

impl Policy for HpShare {
    fn name(&self) -> &'static str {
        "hpshare"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.d).unwrap_or_default()
    }
    fn init(&mut self, k: &mut Kernel) {
        self.d.start(k);
    }
    fn on_timer(&mut self, k: &mut Kernel, id: u32) {
        if id == SCAN_TIMER {
            k.ksm_scan_huge(self.d.pages_to_scan);
            self.d.sleep(k);
        }
    }
}
