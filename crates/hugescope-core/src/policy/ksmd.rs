//! ksmd, the same-page merging daemon (Linux mm/ksm.c), as the sharing
//! policies share it: its knobs and its wake-up loop. Every `sleep_ms` it
//! scans `pages_to_scan` pages (Linux's defaults: 100 pages per 20 ms) from
//! the mechanism's cursor (`Ctx::ksm_scan`, os/ksm.rs); what a policy
//! varies is *which* pages the scanner may merge (its `admit`) and whether
//! it merges base pages or whole huge pages. The sharing policies
//! (`hpshare`, `ksm`, `ingens-share`, `zeroscan`: FHPM §2.3, §6.6, spec
//! fhpm.md §6) only decide; they run beside a fault-time policy that maps
//! huge pages (e.g. `ideal+ksm`, `linux+ksm`): in the paper they are the
//! hypervisor's, natively they act on processes.

use super::params::{MAX_PERIOD_S, MIN_PERIOD_S};
use super::{Ctx, Params, Policy};
use crate::os::costs::MAX_COST_US;
use crate::os::ksm::KsmConfig;
use crate::Result;
use serde::Serialize;

/// Timer id of the scan (each policy's ids are its own).
pub const SCAN_TIMER: u32 = 0;

#[derive(Clone, Debug, Serialize)]
pub struct KsmdConfig {
    /// Pages scanned per wake-up (Linux `pages_to_scan`, default 100).
    pub pages_to_scan: u64,
    /// Seconds between wake-ups (Linux `sleep_millisecs`, default 20 ms).
    pub sleep_s: f64,
    /// First wake-up, in seconds of virtual time.
    pub start_s: f64,
    pub ksm: KsmConfig,
}

/// The daemon's knobs, read from a sharing policy's parameters; `start_s`
/// defaults to `start_default` (a policy whose decisions need history first).
pub fn params(p: &mut Params, start_default: f64) -> Result<KsmdConfig> {
    let sleep_ms = p.f64_in("sleep_ms", 20.0, MIN_PERIOD_S * 1e3, MAX_PERIOD_S * 1e3)?;
    Ok(KsmdConfig {
        pages_to_scan: p.u64_in("pages_to_scan", 100, 1, 1 << 32)?,
        sleep_s: sleep_ms * 1e-3,
        start_s: p.f64_in("start_s", start_default, 0.0, MAX_PERIOD_S)?,
        ksm: KsmConfig {
            // Estimates (docs/assumptions.md, "Page contents and sharing"):
            // a base-page fault (Ingens §3.1: 3.6 us) plus a 4KB copy (1 us).
            cow_us: p.f64_in("cow_us", 4.6, 0.0, MAX_COST_US)?,
            // ksmd's checksum and tree walk of one 4KB page.
            scan_page_us: p.f64_in("scan_page_us", 0.5, 0.0, MAX_COST_US)?,
        },
    })
}

impl KsmdConfig {
    /// A sharing policy's `init`: content tracking and the mechanism on, the
    /// first wake-up scheduled.
    pub fn start(&self, k: &mut Ctx<'_>) {
        k.enable_sharing(self.ksm.clone());
        k.schedule_at(self.start_s, SCAN_TIMER);
    }

    /// After a wake-up's scan: sleep until the next.
    pub fn sleep(&self, k: &mut Ctx<'_>) {
        k.schedule_in(self.sleep_s, SCAN_TIMER);
    }
}

/// A sharing daemon whose whole decision is one scan call per wake-up (what
/// it may merge and split is the scan's; `ksm`, `hpshare`): the daemon's
/// knobs, its schedule and its description are this one piece.
pub struct ScanDaemon {
    name: &'static str,
    d: KsmdConfig,
    scan: fn(&mut Ctx<'_>, u64),
}

/// The policy `name`, scanning `pages_to_scan` pages per wake-up with `scan`.
pub fn scan_daemon(p: &mut Params, name: &'static str, scan: fn(&mut Ctx<'_>, u64)) -> Result<Box<dyn Policy>> {
    Ok(Box::new(ScanDaemon { name, d: params(p, 0.0)?, scan }))
}

impl Policy for ScanDaemon {
    fn name(&self) -> &'static str {
        self.name
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.d).unwrap_or_default()
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        self.d.start(k);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if id == SCAN_TIMER {
            (self.scan)(k, self.d.pages_to_scan);
            self.d.sleep(k);
        }
    }
}
