//! The map dummy of Navarro et al. (OSDI'02 §6.5): "maps, touches and unmaps
//! 1MB of memory, five times a second", run beside the web server so that the
//! page daemon must recover *contiguity* (a 512KB extent for each mapping, about
//! 3000 requests over the experiment), not just free memory.
//!
//! Each cycle writes one word per `page` bytes of the `buffer` region (the 1MB
//! mapping), releases the whole region (`munmap`: natively MADV_DONTNEED, in a
//! trace a free marker), then waits out the rest of its period. A trace has no
//! clock but its own accesses (a process's virtual time is its accesses over the
//! run's access rate, `docs/assumptions.md`), so in a trace the wait is a poll
//! of one word of the `clock` region, `access_rate / rate` accesses per period
//! minus the touches: with `access_rate` set to the run's rate (`simulate
//! --rate`) the cycles come `rate` times per virtual second. The poll hits one
//! page, so it adds nothing to TLB pressure. Natively the wait is a real sleep.

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::Result;

use crate::layout::{Layout, PAGE};
use crate::mem::{Arr, Mem};
use crate::microbench::{add_region, single_thread, size_param, stride_param, touch_every, touches};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "mapdummy",
        about: "map, touch and unmap 1MB five times a second: the contiguity-hungry dummy beside the web server (Navarro OSDI'02 §6.5)",
        params: common(vec![
            p("size", "size", "1MiB", "bytes mapped, touched and unmapped each cycle (a multiple of 4KiB)"),
            p("page", "size", "4KiB", "bytes between touches (one word per base page)"),
            p("cycles", "int", "50", "map-touch-unmap cycles"),
            p("rate", "float", "5", "cycles per second (Hz), 0.001 to 1000; the paper's 5 Hz"),
            p(
                "access_rate",
                "float",
                "1000000",
                "accesses per virtual second of the trace (set it to simulate's --rate): a period is access_rate / rate accesses, 1 to 1e9",
            ),
        ]),
    }
}

pub struct Cfg {
    pub size: u64,
    pub page: u64,
    pub cycles: u64,
    pub rate: f64,
    /// Accesses of one period in a trace (touches plus the poll).
    pub period: u64,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let size = size_param(r, "size")?;
    let page = stride_param(r, "page", size)?;
    let rate = r.float_in("rate", 0.001, 1000.0)?;
    let access_rate = r.float_in("access_rate", 1.0, 1e9)?;
    // At most 1e12 accesses a period: within u64 and the trace limits' order.
    let period = (access_rate / rate).round() as u64;
    Ok(Cfg { size, page, cycles: r.int_min("cycles", 1)?, rate, period })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "buffer", c.size, RegionKind::Anon)?;
    add_region(&mut l, "clock", PAGE, RegionKind::Anon)?;
    Ok(l)
}

/// Accesses of the poll that fills a trace period after the touches.
pub fn poll_accesses(c: &Cfg) -> u64 {
    c.period.saturating_sub(touches(c.size, c.page))
}

/// Sleep until `deadline` in slices of at most 50 ms, returning early with
/// `Cancelled` when a cancellation is requested: a native dummy at 0.001 Hz
/// would otherwise sleep 1000 s out of reach of Ctrl-C.
fn sleep_until(deadline: std::time::Instant) -> Result<()> {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(50);
    loop {
        hugescope_core::cancel::check()?;
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(SLICE));
    }
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let mut buf: Arr<u64> = m.alloc(l.get("buffer")?, (c.size / 8) as usize)?;
    let clock: Arr<u64> = m.alloc(l.get("clock")?, (PAGE / 8) as usize)?;
    m.begin_run();
    let mut hash = 0u64;
    let mut polled = 0u64;
    for cycle in 0..c.cycles {
        let start = std::time::Instant::now();
        touch_every(m, &mut buf, c.page, true, cycle);
        hash = crate::hash_words([hash, crate::hash_words(buf.iter().step_by((c.page / 8) as usize).copied())]);
        let n = buf.len();
        m.release(&mut buf, 0, n);
        m.progress(&format!("cycle:{}", cycle + 1));
        if M::TRACING {
            for _ in 0..poll_accesses(c) {
                polled = polled.wrapping_add(clock.ld(m, 0));
            }
        } else {
            sleep_until(start + std::time::Duration::from_secs_f64(1.0 / c.rate))?;
        }
    }
    m.end_run();
    // The clock word is never written: the poll reads zeros in both modes.
    debug_assert_eq!(polled, 0);
    let per_cycle = touches(c.size, c.page);
    Ok(json!({
        "cycles": c.cycles, "touches_per_cycle": per_cycle, "period_accesses": c.period,
        "written_hash": crate::hex(hash),
    }))
}
