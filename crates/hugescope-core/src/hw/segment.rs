//! Direct-segment hardware (Basu et al., ISCA'13, §3.1): three registers per
//! hardware context, BASE, LIMIT and OFFSET. A data address with
//! BASE <= va < LIMIT translates to va + OFFSET without any TLB lookup, fill,
//! LRU update, page-walk-cache access or walk; the check runs in parallel with
//! the L1 TLB lookup, so it adds no latency (reference §2.2).
//!
//! The simulator is generic over a `SegmentUnit` so that machines without a
//! segment carry no check at all: `NoSegment` is zero-sized and its check is a
//! constant `false` the compiler removes. `Segments` is the real unit: the
//! registers of every process (its PCB copy, §3.1 "part of the process
//! context"), the set loaded in each cpu's context, and the counters the
//! experiment reads (f_DS, walks outside the segment by kind of memory).

use crate::stats::{SegmentCounters, WalksByKind};
use crate::trace::{Access, Region, RegionKind};
use crate::{Error, Result};

/// Alignment of BASE, LIMIT and OFFSET. The paper's registers hold 4KB-page
/// granular values (page-offset bits are not stored, reference §2.1), so
/// unaligned values are rejected rather than silently rounded.
pub const SEGMENT_ALIGN: u64 = 4096;

/// One process's BASE / LIMIT / OFFSET. LIMIT is exclusive; BASE == LIMIT is
/// the disabled segment (the OS writes BASE = LIMIT = 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectSegment {
    pub base: u64,
    pub limit: u64,
    pub offset: u64,
}

impl DirectSegment {
    /// A validated segment: 4KB-aligned fields, BASE <= LIMIT, and LIMIT
    /// within the trace address space (a larger LIMIT could never be reached
    /// and most likely is a typo).
    pub fn new(base: u64, limit: u64, offset: u64) -> Result<DirectSegment> {
        for (name, v) in [("base", base), ("limit", limit), ("offset", offset)] {
            if v % SEGMENT_ALIGN != 0 {
                return Err(Error::input(format!("direct segment {name}={v:#x}: not 4KB aligned")));
            }
        }
        if limit < base {
            return Err(Error::input(format!("direct segment limit={limit:#x}: below base={base:#x}")));
        }
        let top = 1u64 << crate::trace::ADDR_BITS;
        if limit > top {
            return Err(Error::input(format!(
                "direct segment limit={limit:#x}: beyond the {}-bit address space",
                crate::trace::ADDR_BITS
            )));
        }
        Ok(DirectSegment { base, limit, offset })
    }

    /// The null segment (BASE = LIMIT = 0).
    pub const DISABLED: DirectSegment = DirectSegment { base: 0, limit: 0, offset: 0 };

    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.limit > self.base
    }

    #[inline(always)]
    pub fn contains(&self, va: u64) -> bool {
        self.base <= va && va < self.limit
    }

    /// Bytes the segment translates.
    pub fn len(&self) -> u64 {
        self.limit - self.base
    }

    pub fn is_empty(&self) -> bool {
        !self.is_enabled()
    }

    /// The physical address of `va` (meaningful only inside the segment).
    /// Wrapping: the hardware adder has no carry out, so an OFFSET may be a
    /// "negative" (two's complement) displacement.
    #[inline(always)]
    pub fn translate(&self, va: u64) -> u64 {
        va.wrapping_add(self.offset)
    }
}

/// Where a walk's address lies, for the out-of-segment attribution the paper
/// gives for MySQL (§5: stacks, BSS/globals, file mappings) and the
/// reference's §8.3 classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkKind {
    Stack,
    BssData,
    File,
    Code,
    /// Anonymous memory flagged to stay out of the primary region.
    OptOut,
    /// Everything else: the paged remainder of a partly covered primary
    /// region, addresses outside every declared region.
    Other,
}

impl WalkKind {
    pub fn of(r: &Region) -> WalkKind {
        match r.kind {
            RegionKind::Stack => WalkKind::Stack,
            RegionKind::Bss | RegionKind::Data => WalkKind::BssData,
            RegionKind::File => WalkKind::File,
            RegionKind::Code => WalkKind::Code,
            RegionKind::Anon | RegionKind::Heap if r.segment_opt_out => WalkKind::OptOut,
            RegionKind::Anon | RegionKind::Heap => WalkKind::Other,
        }
    }
}

/// What the OS tells the segment unit about one process: its primary region,
/// its registers (disabled while it runs paged), its memory regions (to
/// attribute walks) and what providing the segment's memory cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessSegment {
    pub pid: u16,
    /// The primary region [start, end) (reference §3); empty if none.
    pub primary: (u64, u64),
    pub regs: DirectSegment,
    /// Seconds of compaction charged to provide the segment's memory.
    pub compaction_seconds: f64,
    /// (start, end, kind) of the process's regions, sorted by start.
    pub kinds: Vec<(u64, u64, WalkKind)>,
}

impl ProcessSegment {
    /// A process's description with no registers set: its primary region is
    /// the contiguous range from the first to the last anonymous non-stack
    /// region not flagged `segment_opt_out` (opt-out placement, reference
    /// §3 and §9.1). One definition, used by static runs and the OS model.
    pub fn from_regions(pid: u16, regions: &[Region]) -> ProcessSegment {
        let mine: Vec<&Region> = regions.iter().filter(|r| r.pid == pid && r.len > 0).collect();
        let primary = mine
            .iter()
            .filter(|r| r.in_primary())
            .fold(None, |acc: Option<(u64, u64)>, r| {
                let (s, e) = (r.base / SEGMENT_ALIGN * SEGMENT_ALIGN, r.end().div_ceil(SEGMENT_ALIGN) * SEGMENT_ALIGN);
                Some(acc.map_or((s, e), |(a, b)| (a.min(s), b.max(e))))
            })
            .unwrap_or((0, 0));
        let mut kinds: Vec<(u64, u64, WalkKind)> = mine.iter().map(|r| (r.base, r.end(), WalkKind::of(r))).collect();
        kinds.sort_by_key(|k| k.0);
        ProcessSegment { pid, primary, regs: DirectSegment::DISABLED, compaction_seconds: 0.0, kinds }
    }

    pub fn primary_bytes(&self) -> u64 {
        self.primary.1 - self.primary.0
    }

    fn kind_of(&self, va: u64) -> WalkKind {
        // The last region starting at or below va, if va is inside it.
        let i = self.kinds.partition_point(|k| k.0 <= va);
        match i.checked_sub(1).map(|j| self.kinds[j]) {
            Some((_, end, k)) if va < end => k,
            _ => WalkKind::Other,
        }
    }
}

/// The segment hardware as the simulator sees it. `hit` runs on every access
/// before the TLBs; `walked` after every page walk.
pub trait SegmentUnit: Clone + Default {
    /// Whether the unit exists at all (results carry a `segment` block only
    /// when it does and was told about a process).
    const PRESENT: bool;
    /// Whether the segment loaded on `cpu` translates `a` (counted if so).
    fn hit(&mut self, a: &Access) -> bool;
    /// A page walk for `a` happened (the TLBs missed and the segment did not
    /// cover it).
    fn walked(&mut self, a: &Access);
    /// The OS changed what it tells the unit about a process (the registers
    /// in its PCB, its primary region). Takes effect at once on every
    /// context: the OS reloads a running process's registers.
    fn update(&mut self, p: ProcessSegment);
    fn counters(&self) -> Option<SegmentCounters>;
    /// Whether `hit` is false for every access until the next `update`: no
    /// process has registers yet (`Simulator::step_records` then skips it).
    fn idle(&self) -> bool;
}

/// A machine without direct segments: no state, no check.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSegment;

impl SegmentUnit for NoSegment {
    const PRESENT: bool = false;
    #[inline(always)]
    fn hit(&mut self, _a: &Access) -> bool {
        false
    }
    #[inline(always)]
    fn walked(&mut self, _a: &Access) {}
    fn update(&mut self, _p: ProcessSegment) {}
    fn counters(&self) -> Option<SegmentCounters> {
        None
    }
    #[inline(always)]
    fn idle(&self) -> bool {
        true
    }
}

/// One cpu context's loaded registers, laid out for the hot path: `covers`
/// is a single unsigned compare of `va - base` against `len`.
#[derive(Clone, Copy, Debug, Default)]
struct Loaded {
    pid: u16,
    base: u64,
    len: u64,
}

/// Per-process counters (walk attribution needs the process's regions).
#[derive(Clone, Debug, Default)]
struct Proc {
    desc: ProcessSegment,
    hits: u64,
    walks_total: u64,
    walks_in_primary: u64,
    walks_outside: [u64; 6],
}

/// The direct-segment unit: the registers of each process and the set each
/// cpu context has loaded. A context runs whichever process its access
/// names; when that changes, the OS's context switch loads the new
/// process's registers (reference §2.1), modelled lazily on the next access.
#[derive(Clone, Debug, Default)]
pub struct Segments {
    procs: Vec<Option<Proc>>,
    /// Loaded registers per cpu (grown on first use of a cpu).
    ctx: Vec<Loaded>,
}

impl Segments {
    #[cold]
    #[inline(never)]
    fn switch_to(&mut self, cpu: usize, pid: u16) {
        if cpu >= self.ctx.len() {
            self.ctx.resize(cpu + 1, Loaded { pid: u16::MAX, base: 0, len: 0 });
        }
        let r = self.procs.get(pid as usize).and_then(|p| p.as_ref()).map_or(DirectSegment::DISABLED, |p| p.desc.regs);
        self.ctx[cpu] = Loaded { pid, base: r.base, len: r.len() };
    }

    /// The registers `cpu` has loaded now, if enabled (for tests).
    pub fn loaded(&self, cpu: usize) -> Option<(u16, DirectSegment)> {
        let l = self.ctx.get(cpu)?;
        (l.len > 0).then(|| {
            let p = self.procs[l.pid as usize].as_ref().expect("loaded registers belong to a known process");
            (l.pid, p.desc.regs)
        })
    }

    fn proc_mut(&mut self, pid: u16) -> Option<&mut Proc> {
        self.procs.get_mut(pid as usize).and_then(|p| p.as_mut())
    }
}

impl SegmentUnit for Segments {
    const PRESENT: bool = true;

    #[inline(always)]
    fn hit(&mut self, a: &Access) -> bool {
        let cpu = a.cpu as usize;
        match self.ctx.get(cpu) {
            Some(l) if l.pid == a.pid => {}
            _ => self.switch_to(cpu, a.pid),
        }
        let l = self.ctx[cpu];
        if a.addr.wrapping_sub(l.base) < l.len {
            if let Some(p) = self.proc_mut(a.pid) {
                p.hits += 1;
            }
            return true;
        }
        false
    }

    fn walked(&mut self, a: &Access) {
        let Some(p) = self.proc_mut(a.pid) else { return };
        p.walks_total += 1;
        let (s, e) = p.desc.primary;
        if s <= a.addr && a.addr < e {
            p.walks_in_primary += 1;
        }
        // A walk is never inside the loaded segment (a hit does not walk),
        // except one made before the segment was loaded; those are not
        // "outside" it.
        if !p.desc.regs.contains(a.addr) {
            let k = p.desc.kind_of(a.addr);
            p.walks_outside[k as usize] += 1;
        }
    }

    fn update(&mut self, desc: ProcessSegment) {
        let pid = desc.pid as usize;
        if pid >= self.procs.len() {
            self.procs.resize(pid + 1, None);
        }
        match &mut self.procs[pid] {
            Some(p) => p.desc = desc,
            slot => *slot = Some(Proc { desc, ..Default::default() }),
        }
        // Every context running this process reloads its registers.
        for cpu in 0..self.ctx.len() {
            if self.ctx[cpu].pid as usize == pid {
                self.switch_to(cpu, pid as u16);
            }
        }
    }

    fn counters(&self) -> Option<SegmentCounters> {
        let procs: Vec<&Proc> = self.procs.iter().flatten().collect();
        let first = procs.first()?;
        let sum = |f: &dyn Fn(&Proc) -> u64| procs.iter().map(|p| f(p)).sum::<u64>();
        let o = |i: usize| sum(&|p| p.walks_outside[i]);
        let regs = first.desc.regs;
        Some(SegmentCounters {
            base: regs.base,
            limit: regs.limit,
            offset: regs.offset,
            covered_bytes: sum(&|p| p.desc.regs.len()),
            primary_bytes: sum(&|p| p.desc.primary_bytes()),
            hits: sum(&|p| p.hits),
            avoided_lookups: sum(&|p| p.hits),
            walks_outside: WalksByKind {
                stack: o(WalkKind::Stack as usize),
                bss_data: o(WalkKind::BssData as usize),
                file: o(WalkKind::File as usize),
                code: o(WalkKind::Code as usize),
                opt_out: o(WalkKind::OptOut as usize),
                other: o(WalkKind::Other as usize),
            },
            walks_in_primary: sum(&|p| p.walks_in_primary),
            walks_total: sum(&|p| p.walks_total),
            compaction_seconds: procs.iter().map(|p| p.desc.compaction_seconds).sum(),
            processes: procs.len() as u64,
        })
    }

    // No process registered: every context's loaded registers are the
    // disabled ones (`switch_to` loads them lazily), so nothing can hit.
    #[inline(always)]
    fn idle(&self) -> bool {
        self.procs.is_empty()
    }
}
