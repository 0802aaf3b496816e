//! Linux KSM as a host policy ("share first", FHPM §2.3, Table 2; Ingens
//! §3.6): every mapped page is a candidate, and a huge page is split as soon
//! as one of its base pages is about to be merged. Saves the most memory and
//! loses the most huge pages.

use super::ksmd::{self, KsmdConfig, SCAN_TIMER};
use super::{Params, Policy};
use crate::os::Kernel;
use crate::Result;

pub struct Ksm {
    d: KsmdConfig,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    Ok(Box::new(Ksm { d: ksmd::params(p, 0.0)? }))
}

impl Policy for Ksm {
    fn name(&self) -> &'static str {
        "ksm"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.d).unwrap_or_default()
    }
    fn init(&mut self, k: &mut Kernel) {
        self.d.start(k);
    }
    fn on_timer(&mut self, k: &mut Kernel, id: u32) {
        if id == SCAN_TIMER {
            k.ksm_scan(self.d.pages_to_scan, &mut |_, _| true);
            self.d.sleep(k);
        }
    }
}
