//! Linux KSM as a host policy ("share first", FHPM §2.3, Table 2; Ingens
//! §3.6): every mapped page is a candidate, and a huge page is split as soon
//! as one of its base pages is about to be merged. Saves the most memory and
//! loses the most huge pages.

use super::ksmd;
use super::{Params, Policy};
use crate::Result;

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    ksmd::scan_daemon(p, "ksm", |k, n| {
        k.ksm_scan(n, &mut |_, _| true);
    })
}
