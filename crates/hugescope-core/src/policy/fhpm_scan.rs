//! `fhpm-scan`: the access monitors FHPM Table 4 compares, monitoring only
//! (no split or collapse decided): `monitor=base` (the VM backed by 4KB
//! pages, per-4KB A bits every round: the truth), `huge` (2MB leaf A bits),
//! `split` (every huge page split for the window), `sampling` (a `share`,
//! 5% by default, split), `fhpm` (stage 1 plus companion stage 2). All share
//! FHPM's scanner (`fhpm/scan.rs`) and its window schedule. The split and
//! sampling scans split and collapse Linux's way (`friendly=false`, the
//! default here; `friendly=true` is FHPM's VM-friendly variant: Table 6).

use super::fhpm::{build, Decision, Monitor};
use super::{Params, Policy};
use crate::Result;

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let monitor = match p.choice("monitor", "fhpm", &["fhpm", "base", "huge", "split", "sampling"])?.as_str() {
        "base" => Monitor::Base,
        "huge" => Monitor::Huge,
        "split" => Monitor::Split,
        "sampling" => Monitor::Sampling { share: p.f64_in("share", 0.05, 0.0, 1.0)? },
        _ => Monitor::Fhpm,
    };
    build(p, "fhpm-scan", Decision::Observe, monitor, false)
}
