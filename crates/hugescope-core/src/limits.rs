//! Limits on user-controlled sizes that are not a single policy's knob: virtual
//! duration and access rate, trace header fields, and the memory the model may
//! allocate. Policy knobs state their ranges where they are read (see
//! `policy::params`); machine configuration in `config::MachineConfig::validate`.
//!
//! Every limit here is far beyond what an ordinary run uses, so no ordinary
//! result changes; each exists so that an absurd value is one clear error
//! within a second instead of an allocation abort, gigabytes of growth or a hang.
//! `docs/assumptions.md` ("Limits") lists them with their reasons.

use crate::units::fmt_num;
use crate::{Error, Result};

/// Longest virtual time a run may span, in seconds (11.6 days). The papers'
/// runs last minutes to hours; with the 10 ms period floor a daemon fires at
/// most 10^8 times within it.
pub const MAX_DURATION_S: f64 = 1e6;
/// Accepted access rates (accesses per second of virtual time), for `--rate`
/// and a trace header's `accesses_per_second`: from one access per second to
/// a thousand times any real machine.
pub const MIN_RATE: f64 = 1.0;
pub const MAX_RATE: f64 = 1e12;
/// Daemons stop firing (with a warning in the result) once virtual time passes
/// this, whatever the time base: the cycle time base has no up-front duration,
/// so this bounds the work and memory of a run the limits above did not catch.
pub const DAEMON_STOP_S: f64 = 10.0 * MAX_DURATION_S;

/// Most regions a trace header may declare (each becomes a VMA per policy run).
pub const MAX_REGIONS: usize = 1 << 16;
/// Most workload parameters in a trace header.
pub const MAX_HEADER_PARAMS: usize = 1024;
/// Longest region or process name, in bytes.
pub const MAX_NAME_BYTES: usize = 4096;

/// Check a virtual duration (`--duration`, seconds).
pub fn check_duration(what: &str, d: f64) -> Result<()> {
    if d.is_finite() && d > 0.0 && d <= MAX_DURATION_S {
        Ok(())
    } else {
        Err(Error::input(format!("{what}={}: must be a number of seconds in (0, {MAX_DURATION_S}]", fmt_num(d))))
    }
}

/// Check an access rate (`--rate`, accesses per second).
pub fn check_rate(what: &str, r: f64) -> Result<()> {
    if r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r) {
        Ok(())
    } else {
        Err(Error::input(format!("{what}={}: must be between {MIN_RATE} and {MAX_RATE} accesses per second", fmt_num(r))))
    }
}

/// Environment variable raising (or lowering) the model memory limit: a size
/// such as `64GiB`.
pub const MEMORY_LIMIT_ENV: &str = "HUGESCOPE_MODEL_MEMORY_LIMIT";
/// Model bytes of `pages` base pages of VMAs.
pub fn vma_page_bytes(pages: u64) -> u64 {
    pages.saturating_mul(BYTES_PER_VMA_PAGE)
}

/// Limit when /proc/meminfo cannot be read.
const FALLBACK_MEMORY_LIMIT: u64 = 16 << 30;

/// Bytes of model state per simulated physical frame (a state byte, the free
/// lists' bitmaps, the owner table) and per virtual base page of a VMA (a u32
/// frame number and a flag byte, plus coverage bits), rounded up.
const BYTES_PER_FRAME: u64 = 2;
const BYTES_PER_VMA_PAGE: u64 = 6;
/// Bytes per TLB or page-walk-cache entry (one u64 tag).
const BYTES_PER_CACHE_ENTRY: u64 = 8;

/// What the model will allocate, counted before it does.
#[derive(Clone, Copy, Debug, Default)]
pub struct Footprint {
    /// Kernels (one per policy of a run, `base` included).
    pub kernels: u64,
    pub frames_per_kernel: u64,
    pub vma_pages_per_kernel: u64,
    /// Simulators (MMU sets): one per kernel, or one for a static pass.
    pub simulators: u64,
    pub cpus: u64,
    /// TLB and PWC entries of one cpu's MMU.
    pub cache_entries_per_cpu: u64,
}

impl Footprint {
    pub fn bytes(&self) -> u64 {
        let kernel = self
            .frames_per_kernel
            .saturating_mul(BYTES_PER_FRAME)
            .saturating_add(self.vma_pages_per_kernel.saturating_mul(BYTES_PER_VMA_PAGE));
        let sim = self.cpus.saturating_mul(self.cache_entries_per_cpu).saturating_mul(BYTES_PER_CACHE_ENTRY);
        self.kernels.saturating_mul(kernel).saturating_add(self.simulators.saturating_mul(sim))
    }
}

/// The model memory limit: `HUGESCOPE_MODEL_MEMORY_LIMIT` if set, else half of
/// this machine's MemTotal (the rest is left to the OS, Python and results),
/// and at most half of the process's address-space limit if it has one.
pub fn memory_limit() -> Result<u64> {
    if let Ok(v) = std::env::var(MEMORY_LIMIT_ENV) {
        return crate::units::parse_size(&v).map_err(|_| Error::input(format!("{MEMORY_LIMIT_ENV}={v}: not a size")));
    }
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib.saturating_mul(1024))
    });
    let limit = total.map_or(FALLBACK_MEMORY_LIMIT, |t| t / 2);
    // Under an address-space limit (ulimit -v, RLIMIT_AS) an allocation past
    // it aborts the process: keep the model to half of it as well.
    Ok(address_space_limit().map_or(limit, |a| limit.min(a / 2)))
}

/// The soft RLIMIT_AS of this process, from /proc/self/limits (None: unlimited
/// or unknown).
fn address_space_limit() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = t.lines().find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..].split_whitespace().next()?.parse().ok()
}

pub fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Refuse a run whose model state would exceed the limit, before allocating.
/// `what` says what sized it (memory, footprint, cpus, TLB sizes).
pub fn check_model_memory(what: &str, f: &Footprint) -> Result<()> {
    let need = f.bytes();
    let limit = memory_limit()?;
    if need > limit {
        return Err(Error::input(format!(
            "the simulation would need about {} of memory for its model ({what}), more than the limit of {}; \
             use a smaller --memory/--footprint or fewer policies, or raise {MEMORY_LIMIT_ENV}",
            gib(need),
            gib(limit)
        )));
    }
    Ok(())
}
