//! Huge-page sharing (Waldspurger 2002 as FHPM §2.3 describes it; the Ingens
//! paper's "huge-page sharing" baseline, Tables 7 and 11): only whole huge
//! pages with identical content are merged, into one shared huge frame;
//! nothing is ever split. Keeps every huge page, saves almost nothing when
//! data is laid out at 4KB granularity (FHPM Table 2).

use super::ksmd;
use super::{Params, Policy};
use crate::Result;

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    ksmd::scan_daemon(p, "hpshare", |k, n| {
        k.ksm_scan_huge(n);
    })
}
