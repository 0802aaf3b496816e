//! `fhpm-fixed`: the fixed-threshold baselines of FHPM §6.3 (after HawkEye
//! and Ingens) on FHPM's own monitoring: a measured huge page is demoted if
//! Ns <= t, a 4KB-mapped region promoted if Ns > t (the paper's T = 10 and
//! T = 256). Cold huge pages (never measured) are left as they are.

use super::fhpm::{build, Decision, Monitor};
use super::{Params, Policy};
use crate::Result;

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let t = p.u64_in("t", 10, 0, 1 << 20)? as u32;
    build(p, "fhpm-fixed", Decision::FixedThreshold { t }, Monitor::Fhpm, true)
}
