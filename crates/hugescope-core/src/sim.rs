//! The simulation loop: feed each access through its cpu's MMU; on a TLB miss
//! ask the page table (a static map or the OS model) for the leaf, apply any
//! shootdowns the page table queued, then have the walker price the walk and
//! fill the TLBs, and hand the bits the walk wrote back to the page table.
//!
//! `Simulator` is generic over the page table and the walker so the per-access
//! path is monomorphized: no dynamic dispatch, no allocation, no hashing per
//! access. The walker defaults to the native radix walker.

use crate::config::MachineConfig;
use crate::cost::{self, CostEstimate};
use crate::hw::pwc::WalkCost;
use crate::hw::{DirectSegment, Geometry, Leaf, Mmu, Outcome, RadixWalker, Space, Walker};
use crate::pagemap::StaticMap;
use crate::stats::TranslationCounters;
use crate::trace::hst::HstReader;
use crate::trace::{Access, AccessSink, TraceHeader};
use crate::Result;
use serde::Serialize;

/// A range whose translations must leave every TLB (and PWC) of every cpu.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shootdown {
    pub pid: u16,
    pub start: u64,
    pub end: u64,
}

impl Shootdown {
    /// The address space the range belongs to. Every page table today is a
    /// native (host) one, so VM 0; a guest kernel's shootdowns will carry
    /// their VM id when the virtualization model adds one.
    #[inline]
    pub fn space(&self) -> Space {
        Space::native(self.pid)
    }
}

/// What the simulator needs from a page table.
pub trait PageTable {
    /// Called on every TLB miss: the leaf translating `a`, as a walk of the
    /// tables finds it (with its accessed/dirty bits as they were before this
    /// walk). May fault, map and remap; remaps must queue shootdowns.
    fn leaf(&mut self, a: &Access) -> Leaf;

    /// Called after the walker priced the walk to `leaf` (and the TLBs were
    /// filled): `set` are the bits the walk wrote (`hw::leaf::{LEAF_A,
    /// LEAF_D, PMD_A, PUD_A}`), for a page table that keeps them. The walker
    /// decides them (hardware does, SDM vol. 3A §4.8); the page table stores
    /// them. Default: nothing (a static map has no bits).
    #[inline]
    fn walked(&mut self, _a: &Access, _leaf: &Leaf, _set: u8) {}

    /// Move shootdowns queued since the last call into `out`.
    #[inline]
    fn take_shootdowns(&mut self, _out: &mut Vec<Shootdown>) {}

    /// Whether shootdowns are queued (checked after every access).
    #[inline]
    fn has_shootdowns(&self) -> bool {
        false
    }

    /// Called after every access with its outcome and, for a miss, the cost of
    /// its page walk (the OS model advances its virtual clock and runs due
    /// daemons here). Default: nothing.
    #[inline]
    fn after_access(&mut self, _a: &Access, _outcome: Outcome, _walk: Option<WalkCost>) {}

    /// Called after an access the cpu's direct segment translated (no TLB
    /// outcome, no walk, no bits written; it costs
    /// `CostConfig::lookup_cycles(Lookup::Segment, None)`). Default: nothing,
    /// which is right for a static map; a page table that keeps a clock
    /// (the OS model) must advance it here once it loads segments.
    #[inline]
    fn segment_hit(&mut self, _a: &Access) {}

    /// A progress point of the workload was reached.
    fn progress(&mut self, _label: &str) {}
}

impl PageTable for StaticMap {
    #[inline]
    fn leaf(&mut self, a: &Access) -> Leaf {
        // No frames behind a static map: an identity mapping stands in, and
        // no accessed/dirty bits are modelled.
        Leaf::native(self.size_at(a.pid, a.addr), a.addr, 0)
    }
}

pub struct Simulator<P: PageTable, W: Walker = RadixWalker> {
    pub cfg: MachineConfig,
    pub geo: Geometry,
    pub mmus: Vec<Mmu<W>>,
    pub pt: P,
    pending: Vec<Shootdown>,
    template: Mmu<W>,
}

impl<P: PageTable> Simulator<P> {
    /// A simulator with the native radix walker of `cfg`.
    pub fn new(cfg: MachineConfig, cpus: usize, pt: P) -> Result<Self> {
        let geo = Geometry::new(&cfg)?;
        let walker = RadixWalker::new(&geo, &cfg);
        Simulator::with_walker(cfg, cpus, pt, walker)
    }
}

impl<P: PageTable, W: Walker> Simulator<P, W> {
    /// A simulator whose cpus each walk with a copy of `walker`.
    pub fn with_walker(cfg: MachineConfig, cpus: usize, pt: P, walker: W) -> Result<Self> {
        let geo = Geometry::new(&cfg)?;
        let template = Mmu::with_walker(&geo, &cfg, walker)?;
        let mmus = vec![template.clone(); cpus.max(1)];
        Ok(Simulator { cfg, geo, mmus, pt, pending: Vec::new(), template })
    }

    #[inline]
    pub fn step(&mut self, a: Access) {
        let cpu = a.cpu as usize;
        if cpu >= self.mmus.len() {
            // A trace may use more cpus than its header declares; add MMUs
            // rather than fail (rare, off the hot path).
            self.mmus.resize(cpu + 1, self.template.clone());
        }
        let m = &mut self.mmus[cpu];
        if m.segment_hit(&a) {
            self.after_segment_hit(&a);
            return;
        }
        let out = m.lookup(&a);
        let mut walk = None;
        if out == Outcome::Miss {
            let leaf = self.pt.leaf(&a);
            // Shootdowns queued by a fault or promotion apply before the new
            // translation is filled, so the fill is never invalidated by a
            // remap that happened before it.
            if self.pt.has_shootdowns() {
                self.apply_shootdowns();
            }
            let m = &mut self.mmus[cpu];
            walk = Some(m.complete_walk(&a, &leaf));
            let set = m.walker.writes(&a, &leaf);
            self.pt.walked(&a, &leaf, set);
        }
        self.pt.after_access(&a, out, walk);
        if self.pt.has_shootdowns() {
            self.apply_shootdowns();
        }
    }

    /// An access the direct segment translated: the page table hears of it
    /// (no walk, no fill). Out of line so `step`'s TLB path is unchanged.
    #[cold]
    #[inline(never)]
    fn after_segment_hit(&mut self, a: &Access) {
        self.pt.segment_hit(a);
        if self.pt.has_shootdowns() {
            self.apply_shootdowns();
        }
    }

    /// Load (or with `None` clear) process `pid`'s direct segment in every
    /// cpu's hardware context, as an OS that runs `pid` on every cpu would.
    /// A context holds one segment, so loading replaces whatever segment a
    /// context held (of any process); clearing leaves contexts holding
    /// another process's segment alone. Cpus added later (a trace using more
    /// cpus than declared) start from the same registers.
    pub fn set_segment(&mut self, pid: u16, seg: Option<DirectSegment>) {
        let space = Space::native(pid);
        for m in self.mmus.iter_mut().chain(std::iter::once(&mut self.template)) {
            if seg.is_some() || m.segment().is_some_and(|(s, _)| s == space) {
                m.set_segment(space, seg);
            }
        }
    }

    /// Apply queued shootdowns to every cpu's MMU.
    pub fn apply_shootdowns(&mut self) {
        self.pt.take_shootdowns(&mut self.pending);
        for sd in self.pending.drain(..) {
            for m in self.mmus.iter_mut() {
                m.shootdown(sd.space(), sd.start, sd.end);
            }
        }
    }

    /// Run every access of a trace file through the simulator, with the
    /// trace's progress markers (populate/free events, phases) in place.
    pub fn run_reader(&mut self, r: &mut HstReader) -> Result<u64> {
        r.feed(self)
    }

    pub fn counters(&self) -> TranslationCounters {
        let stats: Vec<_> = self.mmus.iter().map(|m| m.stats.clone()).collect();
        TranslationCounters::from_mmus(&stats, &self.geo.sizes, self.geo.level_shifts.len())
    }
}

impl<P: PageTable, W: Walker> AccessSink for Simulator<P, W> {
    #[inline]
    fn access(&mut self, a: Access) {
        self.step(a)
    }
    fn progress(&mut self, label: &str) {
        self.pt.progress(label)
    }
}

/// The result of a static-map simulation.
#[derive(Clone, Debug, Serialize)]
pub struct StaticResult {
    pub hugescope_version: &'static str,
    pub trace: Option<TraceInfo>,
    pub machine: MachineConfig,
    pub pages: String,
    pub translation: TranslationCounters,
    pub cost: CostEstimate,
}

#[derive(Clone, Debug, Serialize)]
pub struct TraceInfo {
    pub path: String,
    pub workload: String,
    pub params: serde_json::Map<String, serde_json::Value>,
    pub cpus: u32,
    pub footprint_bytes: u64,
}

impl TraceInfo {
    pub fn new(path: &str, h: &TraceHeader) -> Self {
        TraceInfo {
            path: path.to_string(),
            workload: h.workload.clone(),
            params: h.params.clone(),
            cpus: h.cpus,
            footprint_bytes: h.footprint(),
        }
    }
}

/// A `--pages` spec with a direct segment, split into the page map's spec
/// and the region chosen for the segment: `MAP+ds` (MAP a page size or plan;
/// the segment covers the trace's largest declared region, the paper's
/// "primary region") or `ds:REGION` (4KB pages; the segment covers the region
/// named REGION). `None` for every other spec, which is parsed as before.
fn segment_spec(pages: &str) -> Option<(&str, Option<&str>)> {
    if let Some(name) = pages.strip_prefix("ds:") {
        return Some(("4k", Some(name)));
    }
    pages.strip_suffix("+ds").map(|map| (map, None))
}

/// The segment over the region `name` (or the largest region, the first of
/// equals), widened to whole 4KB pages; offset 0, since a static map stands
/// in identity physical addresses. The pid is the region's process.
fn static_segment(h: &TraceHeader, pages: &str, name: Option<&str>) -> Result<(u16, DirectSegment, String)> {
    use crate::hw::segment::SEGMENT_ALIGN;
    let region = match name {
        Some(n) => h.regions.iter().find(|r| r.name == n).ok_or_else(|| {
            let names: Vec<&str> = h.regions.iter().map(|r| r.name.as_str()).collect();
            crate::Error::input(format!("--pages '{pages}': the trace has no region '{n}' (regions: {})", names.join(", ")))
        })?,
        // max_by_key keeps the last of equals; reverse so the first wins.
        None => h.regions.iter().rev().max_by_key(|r| r.len).filter(|r| r.len > 0).ok_or_else(|| {
            crate::Error::input(format!("--pages '{pages}': the trace declares no region to put the segment over"))
        })?,
    };
    let base = region.base / SEGMENT_ALIGN * SEGMENT_ALIGN;
    let limit = region.end().div_ceil(SEGMENT_ALIGN) * SEGMENT_ALIGN;
    let seg = DirectSegment::new(base, limit, 0)?;
    let what = format!("direct segment over '{}' (pid {}) [{base:#x}, {limit:#x})", region.name, region.pid);
    Ok((region.pid, seg, what))
}

/// Simulate a trace file under a static page-size map, optionally with a
/// direct segment (`segment_spec`).
pub fn simulate_static(path: &str, cfg: MachineConfig, pages: &str) -> Result<StaticResult> {
    let mut r = HstReader::open(path)?;
    let geo = Geometry::new(&cfg)?;
    let (map_spec, ds) = match segment_spec(pages) {
        Some((m, name)) => (m, Some(static_segment(r.header(), pages, name)?)),
        None => (pages, None),
    };
    let map = StaticMap::from_spec(map_spec, &geo)?;
    let mut described = map.describe(&geo);
    if let Some((_, _, what)) = &ds {
        described = format!("{described} + {what}");
    }
    let cpus = r.header().cpus.max(1) as u64;
    let f = crate::limits::Footprint { simulators: 1, cpus, cache_entries_per_cpu: cfg.cache_entries_per_cpu(), ..Default::default() };
    crate::limits::check_model_memory(&format!("{cpus} cpus' TLBs"), &f)?;
    let mut sim = Simulator::new(cfg, r.header().cpus as usize, map)?;
    if let Some((pid, seg, _)) = ds {
        sim.set_segment(pid, Some(seg));
    }
    sim.run_reader(&mut r)?;
    Ok(static_result(&sim, Some(TraceInfo::new(path, r.header())), described))
}

pub fn static_result(sim: &Simulator<StaticMap>, trace: Option<TraceInfo>, pages: String) -> StaticResult {
    let translation = sim.counters();
    let cost = cost::estimate(&translation, &sim.cfg.cost, 0.0);
    StaticResult {
        hugescope_version: env!("CARGO_PKG_VERSION"),
        trace,
        machine: sim.cfg.clone(),
        pages,
        translation,
        cost,
    }
}
