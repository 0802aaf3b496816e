//! Microbenchmarks of this machine's page walks, for `hugescope calibrate`
//! (issue #15): the time of one memory access over a footprint, with 4 KiB
//! and with 2 MiB pages, so walk cost against footprint is *measured*.
//!
//! Two access patterns over a buffer of `footprint` bytes:
//!
//! * `chase`: a pointer chase through one random cycle of slots (Sattolo's
//!   shuffle), each load's address coming from the previous load, so nothing
//!   overlaps: ns per access is the full latency of data plus translation
//!   (the lmbench `lat_mem_rd` method, with random instead of strided order
//!   so neither prefetchers nor the page-walk caches' locality help).
//! * `random`: independent loads of random slots; the core overlaps them
//!   (and their walks), so it bounds how much of the walk cost a program
//!   with independent misses hides.
//!
//! Slots are 64-byte lines, at most `MAX_SLOTS` of them: a larger footprint
//! spreads them evenly (a few per 4 KiB page), which keeps the TLB and cache
//! behaviour of uniform random access and the set-up linear and short.
//!
//! 2 MiB pages: `MADV_HUGEPAGE` before the first touch, then `MADV_COLLAPSE`
//! for whatever the fault path left small; 4 KiB pages: `MADV_NOHUGEPAGE`.
//! Either way the share of the buffer mapped huge is read back from smaps
//! and reported (`huge_fraction`), never assumed.
//!
//! Measured: wall clock (`std::time::Instant`) around `accesses` loads, on
//! one cpu (the thread is pinned to the cpu it runs on and its affinity
//! restored afterwards), after one unmeasured warm-up pass; the median of
//! `repeats` passes. The buffers of both page sizes are held at once and
//! their passes interleaved, so load that drifts during the run (a shared
//! machine) falls on both alike. Buffers are unmapped on every path (a guard).

use crate::error::{Error, Result};
use crate::smaps;
use hugescope_workloads::rng::Rng;
use serde::{Deserialize, Serialize};
use std::time::Instant;

const LINE: u64 = 64;
pub(crate) const HUGE: u64 = 2 << 20;
/// Most slots in one buffer: 4Mi (32 MiB of next-indices at one per line).
pub const MAX_SLOTS: u64 = 1 << 22;
/// Smallest and largest footprint accepted.
pub const MIN_FOOTPRINT: u64 = 4 << 10;
pub const MAX_FOOTPRINT: u64 = 64 << 30;
/// Memory left to the rest of the machine: a footprint within this much of
/// `MemAvailable` is refused.
pub(crate) const SPARE: u64 = 1 << 30;
pub(crate) const MADV_COLLAPSE: libc::c_int = 25;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    pub footprint: u64,
    /// Page sizes, each "4k" or "2m" (a buffer of each, held at once).
    #[serde(default = "default_pages")]
    pub pages: Vec<String>,
    /// Patterns, each "chase" or "random".
    #[serde(default = "default_modes")]
    pub modes: Vec<String>,
    #[serde(default = "default_accesses")]
    pub accesses: u64,
    #[serde(default = "default_repeats")]
    pub repeats: u32,
    #[serde(default)]
    pub seed: u64,
}

fn default_pages() -> Vec<String> {
    vec!["4k".into(), "2m".into()]
}
fn default_modes() -> Vec<String> {
    vec!["chase".into(), "random".into()]
}
fn default_accesses() -> u64 {
    1 << 21
}
fn default_repeats() -> u32 {
    3
}

#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub footprint: u64,
    pub pages: String,
    pub mode: String,
    pub slots: u64,
    pub accesses: u64,
    pub repeats: u32,
    /// Median, minimum and maximum ns per access over the repeats.
    pub ns_per_access: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// Share of the buffer smaps reports as AnonHugePages.
    pub huge_fraction: f64,
    pub cpu: i32,
    pub how: String,
}

/// A private anonymous mapping, 2 MiB aligned, unmapped on drop.
pub(crate) struct Buffer {
    raw: *mut libc::c_void,
    raw_len: usize,
    pub(crate) start: *mut u8,
    pub(crate) len: usize,
}

impl Buffer {
    pub(crate) fn new(len: u64) -> Result<Buffer> {
        let len = len.div_ceil(HUGE) * HUGE;
        let raw_len = (len + HUGE) as usize;
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(std::ptr::null_mut(), raw_len, libc::PROT_READ | libc::PROT_WRITE,
                       libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if raw == libc::MAP_FAILED {
            return Err(sys(format!("mmap of {raw_len} bytes")));
        }
        let start = ((raw as u64).div_ceil(HUGE) * HUGE) as *mut u8;
        Ok(Buffer { raw, raw_len, start, len: len as usize })
    }

    pub(crate) fn advise(&self, advice: libc::c_int, what: &str) -> Result<()> {
        // SAFETY: the range is this buffer's own mapping.
        if unsafe { libc::madvise(self.start as *mut libc::c_void, self.len, advice) } != 0 {
            return Err(sys(format!("madvise({what}) of the microbenchmark buffer")));
        }
        Ok(())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping `new` made.
        unsafe { libc::munmap(self.raw, self.raw_len) };
    }
}

pub(crate) fn sys(what: String) -> Error {
    let source = std::io::Error::last_os_error();
    Error::Sys { what, errno_name: crate::collapse::explain_errno(source.raw_os_error().unwrap_or(0)), source }
}

/// `MemAvailable` of /proc/meminfo in bytes.
pub(crate) fn mem_available() -> Result<u64> {
    let path = "/proc/meminfo";
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.into(), source })?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| Error::Parse { path: path.into(), line: 0, msg: "no MemAvailable".into() })
}

/// Refuse what cannot be measured here before anything is mapped.
pub fn check(spec: &Spec) -> Result<()> {
    if !(MIN_FOOTPRINT..=MAX_FOOTPRINT).contains(&spec.footprint) {
        return Err(Error::Input(format!(
            "microbenchmark footprint {} bytes: must be between {MIN_FOOTPRINT} and {MAX_FOOTPRINT}", spec.footprint)));
    }
    if spec.pages.is_empty() || spec.pages.iter().any(|p| p != "4k" && p != "2m") {
        return Err(Error::Input(format!("microbenchmark pages {:?}: each must be 4k or 2m", spec.pages)));
    }
    if spec.modes.is_empty() || spec.modes.iter().any(|m| m != "chase" && m != "random") {
        return Err(Error::Input(format!("microbenchmark modes {:?}: each must be chase or random", spec.modes)));
    }
    if spec.accesses == 0 || spec.accesses > 1 << 32 || spec.repeats == 0 || spec.repeats > 100 {
        return Err(Error::Input("microbenchmark: accesses must be 1..2^32 and repeats 1..100".into()));
    }
    // One buffer per page size, held at once.
    let need = spec.footprint.div_ceil(HUGE) * HUGE * spec.pages.len() as u64;
    let avail = mem_available()?;
    if need + SPARE > avail {
        return Err(Error::Refused(format!(
            "microbenchmark buffers of {} MiB in all: only {} MiB available (MemAvailable), and {} MiB stay free",
            need >> 20, avail >> 20, SPARE >> 20)));
    }
    Ok(())
}

/// Pin the calling thread to the cpu it runs on; restore the old mask on drop.
pub(crate) struct Pin {
    old: libc::cpu_set_t,
    pub(crate) cpu: i32,
}

impl Pin {
    pub(crate) fn here() -> Result<Pin> {
        // SAFETY: plain syscalls on this thread's own affinity.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
                return Err(sys("sched_getaffinity".into()));
            }
            let cpu = libc::sched_getcpu();
            if cpu < 0 {
                return Err(sys("sched_getcpu".into()));
            }
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut one);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) != 0 {
                return Err(sys(format!("sched_setaffinity to cpu {cpu}")));
            }
            Ok(Pin { old, cpu })
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        // SAFETY: restores the mask read in `here`.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old) };
    }
}

/// Slot `i` of the buffer: the u64 at the start of its line.
#[inline(always)]
fn slot(base: *mut u8, stride: u64, i: u64) -> *mut u64 {
    // SAFETY (callers): i < slots, and slots x stride <= the buffer's length.
    unsafe { base.add((i * stride) as usize) as *mut u64 }
}

/// A buffer of one page size, touched, its slots shuffled into one cycle.
struct Prepared {
    buf: Buffer,
    pages: String,
    slots: u64,
    stride: u64,
    huge_fraction: f64,
}

/// A buffer of `footprint` bytes (rounded up to 2 MiB) with every 4 KiB
/// page touched, so the TLB reach and page-table size are the footprint's:
/// with `huge`, `MADV_HUGEPAGE` before the first touch and `MADV_COLLAPSE`
/// after it; else `MADV_NOHUGEPAGE`. Returns it with the share smaps
/// reports huge (read back, never assumed).
pub(crate) fn populated(footprint: u64, huge: bool) -> Result<(Buffer, f64)> {
    let buf = Buffer::new(footprint)?;
    buf.advise(if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE }, if huge { "MADV_HUGEPAGE" } else { "MADV_NOHUGEPAGE" })?;
    let mut off = 0;
    while off < footprint as usize {
        // SAFETY: within the mapping.
        unsafe { buf.start.add(off).write_volatile(1) };
        off += 4096;
    }
    if huge {
        // Best effort: the fault path may have left some regions small.
        // SAFETY: the buffer's own range.
        unsafe { libc::madvise(buf.start as *mut libc::c_void, buf.len, MADV_COLLAPSE) };
    }
    let me = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    let huge_bytes = smaps::huge_bytes_in(me, buf.start as u64, buf.len as u64)?;
    let share = huge_bytes as f64 / buf.len as f64;
    Ok((buf, share))
}

fn prepare(footprint: u64, pages: &str, seed: u64) -> Result<Prepared> {
    let (buf, huge_fraction) = populated(footprint, pages == "2m")?;
    let slots = (footprint / LINE).clamp(1, MAX_SLOTS);
    let stride = (footprint / slots) / LINE * LINE;
    // Sattolo's shuffle: next[i] forms one cycle through every slot.
    let mut rng = Rng::new(seed ^ 0x6d69_6372_6f62_656e);
    for i in 0..slots {
        // SAFETY: i < slots.
        unsafe { *slot(buf.start, stride, i) = i };
    }
    for i in (1..slots).rev() {
        let j = rng.below(i);
        // SAFETY: i, j < slots.
        unsafe { std::ptr::swap(slot(buf.start, stride, i), slot(buf.start, stride, j)) };
    }
    Ok(Prepared { buf, pages: pages.to_string(), slots, stride, huge_fraction })
}

/// One timed pass: ns per load.
fn pass(p: &Prepared, chase: bool, accesses: u64, rng: &mut Rng) -> f64 {
    let (base, stride, slots) = (p.buf.start, p.stride, p.slots);
    let t = Instant::now();
    let sink = if chase {
        let mut q = 0u64;
        for _ in 0..accesses {
            // SAFETY: every stored index is < slots.
            q = unsafe { slot(base, stride, q).read_volatile() };
        }
        q
    } else {
        // Independent loads: the next address never waits for a load.
        let mut x = rng.next_u64() | 1;
        let mut acc = 0u64;
        for _ in 0..accesses {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // SAFETY: x % slots < slots.
            acc = acc.wrapping_add(unsafe { slot(base, stride, x % slots).read_volatile() });
        }
        acc
    };
    let ns = t.elapsed().as_nanos() as f64 / accesses as f64;
    std::hint::black_box(sink);
    ns
}

/// Run the microbenchmarks of one footprint: a buffer per page size of
/// `spec.pages`, each pattern of `spec.modes`, passes **interleaved** (every
/// repeat times each buffer and pattern once, alternating which page size
/// goes first), so drifting load on a shared machine hits both page sizes
/// alike. `stop` is polled between passes (a signal).
pub fn run(spec: &Spec, stop: &mut dyn FnMut() -> Option<i32>) -> Result<Vec<Measurement>> {
    check(spec)?;
    let bufs = spec.pages.iter().map(|p| prepare(spec.footprint, p, spec.seed)).collect::<Result<Vec<_>>>()?;
    let pin = Pin::here()?;
    let mut rng = Rng::new(spec.seed);
    let n = bufs.len();
    let mut ns = vec![Vec::with_capacity(spec.repeats as usize); n * spec.modes.len()];
    for rep in 0..=spec.repeats {
        for (mi, mode) in spec.modes.iter().enumerate() {
            for k in 0..n {
                let bi = if rep % 2 == 0 { k } else { n - 1 - k };
                if let Some(sig) = stop() {
                    return Err(Error::Interrupted(sig));
                }
                let t = pass(&bufs[bi], mode == "chase", spec.accesses, &mut rng);
                // Repeat 0 is the warm-up (TLBs, caches, page-walk caches).
                if rep > 0 {
                    ns[mi * n + bi].push(t);
                }
            }
        }
    }
    let cpu = pin.cpu;
    drop(pin);
    let mut out = Vec::new();
    for (mi, mode) in spec.modes.iter().enumerate() {
        for (bi, b) in bufs.iter().enumerate() {
            let v = &mut ns[mi * n + bi];
            v.sort_by(|a, b| a.total_cmp(b));
            out.push(Measurement {
                footprint: spec.footprint,
                pages: b.pages.clone(),
                mode: mode.clone(),
                slots: b.slots,
                accesses: spec.accesses,
                repeats: spec.repeats,
                ns_per_access: v[v.len() / 2],
                ns_min: v[0],
                ns_max: v[v.len() - 1],
                huge_fraction: b.huge_fraction,
                cpu,
                how: format!(
                    "median of {} passes of {} loads each, after one warm-up pass, passes of both page sizes and \
                     both patterns interleaved; wall clock (std::time::Instant) per pass / loads; thread pinned to cpu {}",
                    spec.repeats, spec.accesses, cpu
                ),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_specs_are_refused_before_mapping() {
        let ok = Spec { footprint: 1 << 20, pages: default_pages(), modes: default_modes(), accesses: 1000, repeats: 1, seed: 0 };
        assert!(check(&ok).is_ok());
        for bad in [
            Spec { footprint: 100, ..ok.clone() },
            Spec { footprint: 1 << 40, ..ok.clone() },
            Spec { pages: vec!["1g".into()], ..ok.clone() },
            Spec { modes: vec!["stream".into()], ..ok.clone() },
            Spec { pages: vec![], ..ok.clone() },
            Spec { repeats: 0, ..ok.clone() },
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_small_chase_measures_base_pages() {
        let s = Spec { footprint: 64 << 10, pages: vec!["4k".into()], modes: vec!["chase".into()], accesses: 4096, repeats: 3, seed: 1 };
        let ms = run(&s, &mut || None).unwrap();
        assert_eq!(ms.len(), 1);
        let m = &ms[0];
        assert_eq!((m.slots, m.accesses, m.repeats), (1024, 4096, 3));
        assert!(m.ns_min <= m.ns_per_access && m.ns_per_access <= m.ns_max && m.ns_min > 0.0);
        // MADV_NOHUGEPAGE: nothing of it is huge.
        assert_eq!(m.huge_fraction, 0.0);
    }
}
