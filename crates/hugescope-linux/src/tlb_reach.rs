//! Where this machine's TLB reach ends, measured (issue #36): the time of a
//! dependent load that touches one line per page, against the number of
//! pages, for 4 KiB and for 2 MiB pages. The footprint at which the time
//! steps up is a TLB level's reach (its entries x the page size): beyond the
//! first level the second serves the misses, beyond the second, walks begin.
//! The calibration (`python/hugescope/tlbcal.py`) finds the steps and sets
//! them against the geometry CPUID reports (`hugescope_core::cpuid`).
//!
//! Two series, each a page-strided pointer chase (one random cycle through
//! the pages, Sattolo's shuffle, so neither prefetchers nor the order of the
//! pages help; each load's address comes from the previous one, so nothing
//! overlaps):
//!
//! * `4k`: N pages 4 KiB apart, on a buffer of 4 KiB pages and, interleaved
//!   pass by pass, on the same pattern over 2 MiB pages. Both touch the same
//!   N lines, so the data caches behave alike and the difference is the
//!   translation of 4 KiB pages (the 2 MiB buffer spans N/512 huge pages,
//!   within any L1 TLB's reach up to its largest N).
//! * `2m`: N pages 2 MiB apart on 2 MiB pages (`MADV_COLLAPSE`). N lines
//!   stay within the L1 data cache, so the steps are translation.
//!
//! The line within each page moves with the page (page i uses line i mod
//! 64, and in the 2 MiB series 4 KiB page i mod 512), so the N lines spread
//! over the cache and TLB sets instead of piling into one. Measured: wall clock around `accesses` loads on one pinned cpu,
//! after one warm-up pass; the median of `repeats` passes. Memory: the
//! buffers are checked against `MemAvailable` (1 GiB kept free) before
//! anything is mapped, and unmapped on every path. No kernel setting is
//! touched: 2 MiB pages come from `madvise` alone.

use crate::error::{Error, Result};
use crate::microbench::{mem_available, populated, Buffer, Pin, HUGE, SPARE};
use hugescope_workloads::rng::Rng;
use serde::{Deserialize, Serialize};
use std::time::Instant;

const SMALL: u64 = 4096;
/// Most pages of the 4 KiB series (1 GiB) and of the 2 MiB series (4 GiB).
pub const MAX_PAGES_4K: u64 = 1 << 18;
pub const MAX_PAGES_2M: u64 = 1 << 11;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Page counts of the 4 KiB series (may be empty).
    pub counts_4k: Vec<u64>,
    /// Page counts of the 2 MiB series (may be empty).
    pub counts_2m: Vec<u64>,
    pub accesses: u64,
    pub repeats: u32,
    #[serde(default)]
    pub seed: u64,
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// "4k" or "2m": the series (the page stride).
    pub series: String,
    /// Page size backing the buffer: "4k" or "2m".
    pub backing: String,
    pub pages: u64,
    /// pages x stride: the memory the pages span.
    pub footprint: u64,
    /// Median, minimum and maximum ns per load over the repeats.
    pub ns_per_access: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// Share of the buffer smaps reports as AnonHugePages.
    pub huge_fraction: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub points: Vec<Point>,
    pub cpu: i32,
    pub how: String,
}

/// Refuse what cannot be measured here before anything is mapped.
pub fn check(spec: &Spec) -> Result<()> {
    if spec.counts_4k.is_empty() && spec.counts_2m.is_empty() {
        return Err(Error::Input("TLB reach: no page counts given".into()));
    }
    for (what, counts, max) in [("4k", &spec.counts_4k, MAX_PAGES_4K), ("2m", &spec.counts_2m, MAX_PAGES_2M)] {
        if let Some(&c) = counts.iter().find(|&&c| c < 2 || c > max) {
            return Err(Error::Input(format!("TLB reach: {c} pages in the {what} series: must be between 2 and {max}")));
        }
    }
    if spec.accesses == 0 || spec.accesses > 1 << 30 || spec.repeats == 0 || spec.repeats > 100 {
        return Err(Error::Input("TLB reach: accesses must be 1..2^30 and repeats 1..100".into()));
    }
    let need = need_bytes(spec);
    let avail = mem_available()?;
    if need + SPARE > avail {
        return Err(Error::Refused(format!(
            "TLB reach buffers of {} MiB: only {} MiB available (MemAvailable), and {} MiB stay free",
            need >> 20, avail >> 20, SPARE >> 20)));
    }
    Ok(())
}

/// The most memory held at once: the 4 KiB series' two buffers, or the
/// 2 MiB series' one (the series run one after the other).
pub fn need_bytes(spec: &Spec) -> u64 {
    let round = |b: u64| b.div_ceil(HUGE) * HUGE;
    let n4 = spec.counts_4k.iter().max().copied().unwrap_or(0);
    let n2 = spec.counts_2m.iter().max().copied().unwrap_or(0);
    (2 * round(n4 * SMALL)).max(round(n2 * HUGE))
}

/// Link the first `n` pages (`stride` apart) of `buf` into one random cycle;
/// returns the address the chase starts at. Page i's line is line i mod 64
/// of a 4 KiB page, and with a 2 MiB stride it sits in 4 KiB page i mod 512
/// of its 2 MiB page: the lines spread over the cache sets, and a TLB that
/// holds a 2 MiB page as 4 KiB entries (a guest whose host maps it with
/// 4 KiB pages) indexes them into different sets instead of one.
fn link(buf: &Buffer, n: u64, stride: u64, rng: &mut Rng) -> u64 {
    let sub = |i: u64| if stride > SMALL { (i % (stride / SMALL)) * SMALL } else { 0 };
    let at = |i: u64| buf.start as u64 + i * stride + sub(i) + (i % 64) * 64;
    // Sattolo's shuffle: next[i] is one cycle through every page.
    let mut next: Vec<u64> = (0..n).collect();
    for i in (1..n).rev() {
        next.swap(i as usize, rng.below(i) as usize);
    }
    for (i, &j) in next.iter().enumerate() {
        // SAFETY: i, j < n and n x stride is within the buffer (`run` sizes it).
        unsafe { (at(i as u64) as *mut u64).write_volatile(at(j)) };
    }
    at(0)
}

/// One timed pass of `accesses` dependent loads from `start`: ns per load.
fn pass(start: u64, accesses: u64) -> f64 {
    let t = Instant::now();
    let mut p = start;
    for _ in 0..accesses {
        // SAFETY: every stored value is the address of a linked slot.
        p = unsafe { (p as *const u64).read_volatile() };
    }
    let ns = t.elapsed().as_nanos() as f64 / accesses as f64;
    std::hint::black_box(p);
    ns
}

/// Median, min, max.
fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Time every count of one series over `bufs` (backing label, buffer, huge
/// share), their passes interleaved (the order alternating each repeat) so
/// drifting load falls on every buffer alike.
fn series(
    name: &str,
    stride: u64,
    counts: &[u64],
    bufs: &[(&str, &Buffer, f64)],
    spec: &Spec,
    rng: &mut Rng,
    stop: &mut dyn FnMut() -> Option<i32>,
    out: &mut Vec<Point>,
) -> Result<()> {
    for &n in counts {
        let starts: Vec<u64> = bufs.iter().map(|(_, b, _)| link(b, n, stride, rng)).collect();
        let mut ns = vec![Vec::with_capacity(spec.repeats as usize); bufs.len()];
        for rep in 0..=spec.repeats {
            for k in 0..bufs.len() {
                let bi = if rep % 2 == 0 { k } else { bufs.len() - 1 - k };
                if let Some(sig) = stop() {
                    return Err(Error::Interrupted(sig));
                }
                let t = pass(starts[bi], spec.accesses);
                // Repeat 0 warms the TLBs, caches and page-walk caches.
                if rep > 0 {
                    ns[bi].push(t);
                }
            }
        }
        for ((backing, _, huge), v) in bufs.iter().zip(ns.iter_mut()) {
            let (med, lo, hi) = stats(v);
            out.push(Point {
                series: name.into(),
                backing: backing.to_string(),
                pages: n,
                footprint: n * stride,
                ns_per_access: med,
                ns_min: lo,
                ns_max: hi,
                huge_fraction: *huge,
            });
        }
    }
    Ok(())
}

/// Measure both series (`stop` is polled between passes: a signal).
pub fn run(spec: &Spec, stop: &mut dyn FnMut() -> Option<i32>) -> Result<Report> {
    check(spec)?;
    let pin = Pin::here()?;
    let mut rng = Rng::new(spec.seed ^ 0x746c_6272_6561_6368);
    let mut points = Vec::new();
    if let Some(&n4) = spec.counts_4k.iter().max() {
        let (small, s_huge) = populated(n4 * SMALL, false)?;
        let (huge, h_huge) = populated(n4 * SMALL, true)?;
        let bufs = [("4k", &small, s_huge), ("2m", &huge, h_huge)];
        series("4k", SMALL, &spec.counts_4k, &bufs, spec, &mut rng, stop, &mut points)?;
    }
    if let Some(&n2) = spec.counts_2m.iter().max() {
        let (huge, h_huge) = populated(n2 * HUGE, true)?;
        series("2m", HUGE, &spec.counts_2m, &[("2m", &huge, h_huge)], spec, &mut rng, stop, &mut points)?;
    }
    let cpu = pin.cpu;
    drop(pin);
    Ok(Report {
        points,
        cpu,
        how: format!(
            "page-strided pointer chase (one line per page, one random cycle through the pages), median of {} passes \
             of {} loads after one warm-up pass, wall clock (std::time::Instant) per pass / loads, thread pinned to \
             cpu {cpu}; the 4 KiB series interleaves a 4 KiB-page buffer with a 2 MiB-page one (MADV_COLLAPSE) \
             pass by pass",
            spec.repeats, spec.accesses
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_specs_are_refused_before_mapping() {
        let ok = Spec { counts_4k: vec![16, 64], counts_2m: vec![4], accesses: 1000, repeats: 1, seed: 0 };
        assert!(check(&ok).is_ok());
        assert_eq!(need_bytes(&ok), (2 * HUGE).max(4 * HUGE));
        for bad in [
            Spec { counts_4k: vec![], counts_2m: vec![], ..ok.clone() },
            Spec { counts_4k: vec![1], ..ok.clone() },
            Spec { counts_2m: vec![MAX_PAGES_2M + 1], ..ok.clone() },
            Spec { accesses: 0, ..ok.clone() },
            Spec { repeats: 0, ..ok.clone() },
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_small_series_measures_both_backings() {
        let s = Spec { counts_4k: vec![8, 32], counts_2m: vec![], accesses: 4096, repeats: 3, seed: 1 };
        let r = run(&s, &mut || None).unwrap();
        let shape: Vec<_> = r.points.iter().map(|p| (p.series.as_str(), p.backing.as_str(), p.pages, p.footprint)).collect();
        assert_eq!(shape, [("4k", "4k", 8, 32768), ("4k", "2m", 8, 32768), ("4k", "4k", 32, 131072), ("4k", "2m", 32, 131072)]);
        for p in &r.points {
            assert!(p.ns_min <= p.ns_per_access && p.ns_per_access <= p.ns_max && p.ns_min > 0.0, "{p:?}");
        }
        // MADV_NOHUGEPAGE: nothing of the 4 KiB buffer is huge.
        assert_eq!(r.points[0].huge_fraction, 0.0);
    }
}
