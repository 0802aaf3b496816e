//! The profiling pass: the trace simulated with base pages only, every walk
//! counted against its (pid, PMD-level region). Declared regions get dense
//! counters; accesses outside them (imported traces) an ordered map.

use super::{RegionWalks, WalkProfile};
use crate::config::MachineConfig;
use crate::hw::geometry::Shape;
use crate::hw::{Geometry, Leaf, PageTable, Shootdown};
use crate::sim::Simulator;
use crate::trace::hst::HstReader;
use crate::trace::merge::Placement;
use crate::trace::{Access, TraceHeader};
use crate::Result;

struct Span {
    start: u64,
    end: u64,
    /// First region overlapping the span (start rounded down).
    base: u64,
    counts: Vec<u64>,
}

/// A page table for the profiling pass: every leaf is a base page, and each
/// translation (a walk) is counted against its region. Declared regions get
/// dense counters (one `u64` per 2MB region, found through a one-entry cache
/// and a binary search); accesses outside every declared region (imported
/// traces without declarations) fall back to an ordered map.
pub struct WalkProfiler {
    region_shift: u32,
    region_bytes: u64,
    spans: Vec<Vec<Span>>,
    last: (usize, usize),
    other: std::collections::BTreeMap<(u16, u64), u64>,
    pending: Vec<Shootdown>,
}

impl WalkProfiler {
    pub fn new(header: &TraceHeader, geo: &Geometry) -> WalkProfiler {
        let region_shift = Shape::from_levels(&geo.level_shifts).region_shift;
        let mut spans: Vec<Vec<Span>> = Vec::new();
        for r in &header.regions {
            let p = r.pid as usize;
            if p >= spans.len() {
                spans.resize_with(p + 1, Vec::new);
            }
            let (start, end) = (r.base, r.base + r.len);
            if end <= start || spans[p].iter().any(|s| s.start < end && start < s.end) {
                continue; // the kernel ignores empty and overlapping declarations too
            }
            let base = start >> region_shift << region_shift;
            let n = ((end - 1 - base) >> region_shift) as usize + 1;
            spans[p].push(Span { start, end, base, counts: vec![0; n] });
        }
        for v in spans.iter_mut() {
            v.sort_by_key(|s| s.start);
        }
        WalkProfiler {
            region_shift,
            region_bytes: 1 << region_shift,
            spans,
            last: (usize::MAX, 0),
            other: Default::default(),
            pending: Vec::new(),
        }
    }

    #[inline]
    fn count(&mut self, pid: u16, addr: u64) {
        let p = pid as usize;
        if self.last.0 == p {
            let s = &mut self.spans[p][self.last.1];
            if addr >= s.start && addr < s.end {
                s.counts[((addr - s.base) >> self.region_shift) as usize] += 1;
                return;
            }
        }
        if let Some(v) = self.spans.get_mut(p) {
            let i = v.partition_point(|s| s.start <= addr);
            if i > 0 && addr < v[i - 1].end {
                let s = &mut v[i - 1];
                s.counts[((addr - s.base) >> self.region_shift) as usize] += 1;
                self.last = (p, i - 1);
                return;
            }
        }
        *self.other.entry((pid, addr >> self.region_shift << self.region_shift)).or_insert(0) += 1;
    }

    /// The ranked profile. A region split between two declared regions (both
    /// unaligned) is counted once with the sum of both parts.
    pub fn into_profile(self) -> WalkProfile {
        let mut m: std::collections::BTreeMap<(u16, u64), u64> = self.other;
        for (p, v) in self.spans.iter().enumerate() {
            for s in v {
                for (i, &c) in s.counts.iter().enumerate() {
                    if c > 0 {
                        *m.entry((p as u16, s.base + ((i as u64) << self.region_shift))).or_insert(0) += c;
                    }
                }
            }
        }
        let regions: Vec<RegionWalks> = m.into_iter().map(|((pid, start), walks)| RegionWalks { pid, start, walks }).collect();
        WalkProfile::ranked(self.region_bytes, regions)
    }
}

impl PageTable for WalkProfiler {
    /// Every walk of the base-page profile ends in a 4KB leaf; the profile
    /// needs no frames or accessed bits.
    #[inline]
    fn leaf(&mut self, a: &Access) -> Leaf {
        self.count(a.pid, a.addr);
        Leaf::sized(0)
    }
    fn take_shootdowns(&mut self, out: &mut Vec<Shootdown>) {
        out.append(&mut self.pending);
    }
    #[inline]
    fn has_shootdowns(&self) -> bool {
        !self.pending.is_empty()
    }
    fn progress(&mut self, label: &str) {
        // A release unmaps its pages: their translations leave the TLBs, as
        // in the base-page run of the kernel model.
        if let Some((pid, start, len)) = crate::trace::parse_free_label(label) {
            self.pending.push(Shootdown::remap(pid, start, start + len));
        }
    }
}

/// The profiling pass of two-pass policies: simulate the trace at `path` with
/// base pages only on `machine` and count walks per (pid, region).
pub fn profile_walks(path: &str, machine: &MachineConfig) -> Result<WalkProfile> {
    let mut r = HstReader::open(path)?;
    let geo = Geometry::new(machine)?;
    let prof = WalkProfiler::new(r.header(), &geo);
    let mut sim = Simulator::new(machine.clone(), r.header().cpus.max(1) as usize, prof)?;
    sim.run_reader(&mut r)?;
    Ok(sim.pt.into_profile())
}

/// The profiling pass of a concurrent run: each input profiled on its own,
/// its pids moved to its placement. Exact whatever the interleaving, since
/// each input has its own cpus and so its own TLBs.
pub(crate) fn profile_concurrent(paths: &[String], placements: &[Placement], machine: &MachineConfig) -> Result<WalkProfile> {
    let mut regions = Vec::new();
    let mut region_bytes = 0;
    for (path, pl) in paths.iter().zip(placements) {
        let p = profile_walks(path, machine)?;
        region_bytes = p.region_bytes;
        regions.extend(p.regions.into_iter().map(|r| RegionWalks { pid: r.pid + pl.pid_offset, ..r }));
    }
    Ok(WalkProfile::ranked(region_bytes, regions))
}
