//! Where the translation cost of a run lies, region by region: the accesses,
//! TLB misses (walks), walk references and walk cycles of each region the
//! trace header declares, plus the accesses outside every region (issue #38:
//! an engineer acts on a region only when the tool says what it costs; perf
//! gives walk cycles per binary, not per allocation).
//!
//! `RegionTally` wraps a page table and hands every call on to it, so the run
//! is the run `simulate_static` makes, counter for counter (tested on the
//! JSON of the result). After each access it adds the access, and a miss's
//! walk, to the region holding the address. It keeps integer counts; walk
//! cycles are priced once at the end by `cost::priced_cycles`, the formula
//! of the run's own estimate, so the regions' walk cycles are the run's walk
//! cycles split by region (exactly, for the whole-number prices of the
//! presets; to the last bit of a sum otherwise).

use crate::config::{CostConfig, MachineConfig};
use crate::cost::{priced_cycles, Priced};
use crate::hw::pwc::WalkCost;
use crate::hw::segment::ProcessSegment;
use crate::hw::shootdown::Shootdown;
use crate::hw::{Leaf, NestedPath, Outcome, PageTable};
use crate::progress::ProgressHook;
use crate::region_index::RegionIndex;
use crate::sim::{simulate_static_wrapped, StaticResult};
use crate::stats::TranslationCounters;
use crate::trace::{Access, Region, RegionKind};
use crate::Result;
use serde::Serialize;

/// What one region (or the space outside every region) saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    accesses: u64,
    walks: u64,
    walk_refs: u64,
    /// Walk references that missed the page-table line cache (0 with it off).
    walk_refs_mem: u64,
    pwc_hits: u64,
}

/// A page table that counts each access and walk by the header region it
/// falls in, and otherwise is `inner` (module docs).
pub struct RegionTally<P: PageTable> {
    pub inner: P,
    index: RegionIndex,
    /// One tally per header region, then one for the addresses outside them.
    tallies: Vec<Tally>,
    /// The piece of the last access: consecutive accesses mostly stay in one.
    last: Option<(u16, u64, u64, usize)>,
}

impl<P: PageTable> RegionTally<P> {
    pub fn new(inner: P, regions: &[Region]) -> RegionTally<P> {
        RegionTally { inner, index: RegionIndex::new(regions), tallies: vec![Tally::default(); regions.len() + 1], last: None }
    }

    /// The tally slot of access `a`: its region's, else the last (outside).
    #[inline]
    fn slot(&mut self, a: &Access) -> usize {
        if let Some((pid, start, end, owner)) = self.last {
            if pid == a.pid && (start..end).contains(&a.addr) {
                return owner;
            }
        }
        match self.index.piece(a.pid, a.addr) {
            Some(j) => {
                let p = self.index.pieces[j];
                self.last = Some(p);
                p.3
            }
            None => self.tallies.len() - 1,
        }
    }
}

impl<P: PageTable> PageTable for RegionTally<P> {
    const VIRTUAL: bool = P::VIRTUAL;

    #[inline(always)]
    fn vm_of(&self, a: &Access) -> u8 {
        self.inner.vm_of(a)
    }
    #[inline(always)]
    fn nested_path(&self) -> Option<&NestedPath> {
        self.inner.nested_path()
    }
    #[inline]
    fn leaf(&mut self, a: &Access) -> Leaf {
        self.inner.leaf(a)
    }
    #[inline(always)]
    fn walk_leaf(&mut self, a: &Access) -> Leaf {
        self.inner.walk_leaf(a)
    }
    #[inline]
    fn walked(&mut self, a: &Access, leaf: &Leaf, set: u8) {
        self.inner.walked(a, leaf, set)
    }
    #[inline]
    fn take_shootdowns(&mut self, out: &mut Vec<Shootdown>) {
        self.inner.take_shootdowns(out)
    }
    #[inline]
    fn has_shootdowns(&self) -> bool {
        self.inner.has_shootdowns()
    }
    #[inline]
    fn after_access(&mut self, a: &Access, outcome: Outcome, walk: Option<WalkCost>) {
        let s = self.slot(a);
        let t = &mut self.tallies[s];
        t.accesses += 1;
        if outcome == Outcome::Miss {
            t.walks += 1;
            if let Some(w) = walk {
                t.walk_refs += w.refs as u64;
                t.walk_refs_mem += w.mem_refs as u64;
                t.pwc_hits += w.pwc_hit_level.is_some() as u64;
            }
        }
        self.inner.after_access(a, outcome, walk)
    }
    #[inline]
    fn segment_hit(&mut self, a: &Access) {
        // Translated by the direct segment: an access, no walk.
        let s = self.slot(a);
        self.tallies[s].accesses += 1;
        self.inner.segment_hit(a)
    }
    #[inline]
    fn take_segment_updates(&mut self, out: &mut Vec<ProcessSegment>) {
        self.inner.take_segment_updates(out)
    }
    fn progress(&mut self, label: &str) {
        self.inner.progress(label)
    }
}

/// The counts of one region, or of the addresses outside every region.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionCounts {
    pub accesses: u64,
    /// TLB misses: every one walks the page table.
    pub walks: u64,
    pub walk_refs: u64,
    /// Estimate: the walks' references and PWC hits priced by the cost model.
    pub walk_cycles: f64,
    /// This region's share of the run's walk cycles (0 when the run has none).
    pub walk_cycle_share: f64,
}

/// One header region and what the run did in it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionRow {
    pub name: String,
    pub base: u64,
    pub len: u64,
    pub kind: RegionKind,
    pub pid: u16,
    #[serde(flatten)]
    pub counts: RegionCounts,
}

/// A run's translation cost by region (module docs), with the run's result.
#[derive(Clone, Debug, Serialize)]
pub struct RegionProfile {
    /// Always "estimate": walk cycles come from the cost model.
    pub kind: &'static str,
    pub pages: String,
    /// Every header region, most walk cycles first (then most accesses, then
    /// by pid and address: the order is the same on every run).
    pub regions: Vec<RegionRow>,
    /// Accesses to addresses no header region holds.
    pub outside: RegionCounts,
    /// The run's walk cycles: the sum of every row's and `outside`'s.
    pub walk_cycles: f64,
    pub how: String,
    /// The run itself, as `simulate_static` gives it (byte for byte).
    pub result: StaticResult,
}

/// Walk cycles of `t` under `p`: its references and PWC hits through the
/// cost model's one formula, the L1/L2 TLB terms left out.
fn walk_cycles(refs: u64, refs_mem: u64, pwc_hits: u64, p: &CostConfig) -> f64 {
    let n = Priced { walk_refs_llc: (refs - refs_mem) as f64, walk_refs_mem: refs_mem as f64, pwc_hits: pwc_hits as f64, ..Default::default() };
    priced_cycles(&n, p)
}

/// The run's walk cycles, from its counters.
fn run_walk_cycles(c: &TranslationCounters, p: &CostConfig) -> f64 {
    walk_cycles(c.walk_refs, c.walk_refs_mem.unwrap_or(0), c.pwc_hits, p)
}

fn counts(t: &Tally, total: f64, p: &CostConfig) -> RegionCounts {
    let walk_cycles = walk_cycles(t.walk_refs, t.walk_refs_mem, t.pwc_hits, p);
    RegionCounts {
        accesses: t.accesses,
        walks: t.walks,
        walk_refs: t.walk_refs,
        walk_cycles,
        walk_cycle_share: if total > 0.0 { walk_cycles / total } else { 0.0 },
    }
}

/// Simulate `path` under the static map `pages` (any `--pages` spec of
/// `simulate_static`) and profile it by header region in the same pass.
pub fn profile_regions(path: &str, cfg: MachineConfig, pages: &str) -> Result<RegionProfile> {
    profile_regions_with_progress(path, cfg, pages, ProgressHook::default())
}

/// `profile_regions`, telling `progress` how many accesses are done.
pub fn profile_regions_with_progress(path: &str, cfg: MachineConfig, pages: &str, progress: ProgressHook) -> Result<RegionProfile> {
    let mut regions: Vec<Region> = Vec::new();
    let (result, tally) = simulate_static_wrapped(path, cfg, pages, progress, false, |map, h| {
        regions = h.regions.clone();
        RegionTally::new(map, &h.regions)
    })?;
    let p = &result.machine.cost;
    let total = run_walk_cycles(&result.translation, p);
    let mut rows: Vec<RegionRow> = regions
        .into_iter()
        .zip(&tally.tallies)
        .map(|(r, t)| RegionRow { name: r.name, base: r.base, len: r.len, kind: r.kind, pid: r.pid, counts: counts(t, total, p) })
        .collect();
    rows.sort_by(|a, b| {
        b.counts.walk_cycles.total_cmp(&a.counts.walk_cycles).then(b.counts.accesses.cmp(&a.counts.accesses)).then((a.pid, a.base).cmp(&(b.pid, b.base)))
    });
    let outside = counts(tally.tallies.last().expect("the outside tally"), total, p);
    Ok(RegionProfile {
        kind: "estimate",
        pages: result.pages.clone(),
        regions: rows,
        outside,
        walk_cycles: total,
        how: format!(
            "simulated: each access and TLB miss counted in the trace region holding its address (the first region \
             in header order where regions overlap); walk cycles = walk references and page-walk-cache hits priced \
             by the cost model ({})",
            p.source
        ),
        result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::simulate_static;
    use crate::trace::hst::HstWriter;
    use crate::trace::TraceHeader;

    const PAGE: u64 = 4096;
    const A: u64 = 0x10_0000_0000;
    const B: u64 = 0x20_0000_0000;
    const OUT: u64 = 0x30_0000_0000;

    /// Regions laid out so every walk is a first touch of a 4 KiB page (11
    /// pages in all, far below any preset's L1 TLB, so nothing is evicted):
    /// - `a` (pid 0, 8 pages): each page read twice in a row, then one of
    ///   them once more after `a1`'s reads (a TLB hit): 17 accesses, 8 walks;
    /// - `b` (pid 0, 3 pages): each page read three times: 9 accesses, 3 walks;
    /// - `a1` (pid 1, at `a`'s addresses): 4 pages read once: 4 accesses,
    ///   4 walks (another address space: `a`'s translations do not serve it);
    /// - `idle` (pid 0): never touched;
    /// - outside every region: one page read twice: 2 accesses, 1 walk.
    fn trace(dir: &std::path::Path) -> String {
        let p = dir.join("t.hst");
        let mut h = TraceHeader::new("regions");
        h.processes = 2;
        h.regions.push(Region::new("a", A, 8 * PAGE));
        h.regions.push(Region::new("b", B, 3 * PAGE).with_kind(RegionKind::Heap));
        let mut a1 = Region::new("a1", A, 8 * PAGE);
        a1.pid = 1;
        h.regions.push(a1);
        h.regions.push(Region::new("idle", B + (1 << 30), 64 * PAGE));
        let mut w = HstWriter::create(&p, &h).unwrap();
        let mut put = |addr: u64, pid: u16, times: usize| {
            for _ in 0..times {
                w.write(Access { addr, write: false, cpu: 0, pid }).unwrap();
            }
        };
        for i in 0..8 {
            put(A + i * PAGE + 8, 0, 2);
        }
        for i in 0..3 {
            put(B + i * PAGE, 0, 3);
        }
        for i in 0..4 {
            put(A + i * PAGE + 64, 1, 1);
        }
        // pid 0 again, at an address of pid 1's last region: still `a`.
        put(A + 3 * PAGE, 0, 1);
        put(OUT, 0, 2);
        w.finish().unwrap();
        p.to_str().unwrap().to_string()
    }

    fn row<'a>(p: &'a RegionProfile, name: &str) -> &'a RegionRow {
        p.regions.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn counts_each_region_by_hand() {
        let d = tempfile::tempdir().unwrap();
        let t = trace(d.path());
        let m = MachineConfig::preset("haswell-pcc").unwrap();
        let p = profile_regions(&t, m, "4k").unwrap();
        let got: Vec<(&str, u16, u64, u64)> = p.regions.iter().map(|r| (r.name.as_str(), r.pid, r.counts.accesses, r.counts.walks)).collect();
        // Most walk cycles first: a (8 walks), a1 (4), b (3), idle (0).
        assert_eq!(got, vec![("a", 0, 17, 8), ("a1", 1, 4, 4), ("b", 0, 9, 3), ("idle", 0, 0, 0)]);
        assert_eq!((p.outside.accesses, p.outside.walks), (2, 1));
        assert_eq!(row(&p, "b").kind, RegionKind::Heap);
        assert_eq!(row(&p, "idle").counts.walk_cycles, 0.0);
        // The rows split the run: accesses, walks, references, cycles.
        let c = &p.result.translation;
        let all: Vec<&RegionCounts> = p.regions.iter().map(|r| &r.counts).chain([&p.outside]).collect();
        assert_eq!(all.iter().map(|r| r.accesses).sum::<u64>(), c.accesses);
        assert_eq!(all.iter().map(|r| r.walks).sum::<u64>(), c.walks);
        assert_eq!(all.iter().map(|r| r.walk_refs).sum::<u64>(), c.walk_refs);
        assert_eq!(all.iter().map(|r| r.walk_cycles).sum::<f64>(), p.walk_cycles);
        let cost = &p.result.machine.cost;
        assert_eq!(p.walk_cycles, c.walk_refs as f64 * cost.walk_ref_cycles + c.pwc_hits as f64 * cost.pwc_hit_cycles);
        // A row's cycles are its own references priced: at least one per walk.
        let a = row(&p, "a");
        assert!(a.counts.walk_refs >= 8);
        assert!(a.counts.walk_cycles >= a.counts.walk_refs as f64 * cost.walk_ref_cycles);
        let shares: f64 = all.iter().map(|r| r.walk_cycle_share).sum();
        assert!((shares - 1.0).abs() < 1e-12, "{shares}");
    }

    #[test]
    fn the_run_is_simulate_statics_byte_for_byte() {
        let d = tempfile::tempdir().unwrap();
        let t = trace(d.path());
        // With the page-table line cache on, references split by where they hit.
        let mut cached = MachineConfig::preset("modern-x86").unwrap();
        cached.cost.pt_cache_lines = 2;
        cached.cost.walk_ref_mem_cycles = 200.0;
        let haswell = MachineConfig::preset("haswell-pcc").unwrap();
        for (m, pages) in [(&haswell, "4k"), (&haswell, "2m"), (&cached, "4k"), (&haswell, "4k+primary"), (&haswell, "ds:b")] {
            let (preset, m) = (m.name.clone(), (*m).clone());
            let p = profile_regions(&t, m.clone(), pages).unwrap();
            let s = simulate_static(&t, m.clone(), pages).unwrap();
            assert_eq!(serde_json::to_string(&p.result).unwrap(), serde_json::to_string(&s).unwrap(), "{preset} {pages}");
            let accesses: u64 = p.regions.iter().map(|r| r.counts.accesses).sum::<u64>() + p.outside.accesses;
            assert_eq!(accesses, s.translation.accesses, "{pages}");
            let cycles: f64 = p.regions.iter().map(|r| r.counts.walk_cycles).sum::<f64>() + p.outside.walk_cycles;
            assert_eq!(cycles, p.walk_cycles, "{preset} {pages}");
            if m.cost.pt_cache_lines > 0 {
                assert!(s.translation.walk_refs_mem.unwrap() > 0, "the line cache missed on some references");
            }
        }
    }

    #[test]
    fn a_direct_segment_takes_its_regions_walks() {
        // ds:b: `b` is translated by the segment, so it keeps its accesses
        // and has no walk; the others walk as before.
        let d = tempfile::tempdir().unwrap();
        let t = trace(d.path());
        let p = profile_regions(&t, MachineConfig::preset("haswell-pcc").unwrap(), "ds:b").unwrap();
        assert_eq!((row(&p, "b").counts.accesses, row(&p, "b").counts.walks), (9, 0));
        assert_eq!((row(&p, "a").counts.accesses, row(&p, "a").counts.walks), (17, 8));
    }

    #[test]
    fn emitted_plan_entries_name_their_regions() {
        use crate::plan::{emit, EmitOptions, Plan, Timing};
        let d = tempfile::tempdir().unwrap();
        let t = trace(d.path());
        let recorded = Plan::parse(&format!(
            r#"[{{"start":"{A:#x}","length":"2MiB","page_size":"2MiB","when":{{"accesses":3}},"note":"pcc rank 1"}},
                {{"start":"{A:#x}","length":"2MiB","page_size":"2MiB","pid":1}},
                {{"start":"{B:#x}","length":"0x40200000","page_size":"2MiB"}},
                {{"start":"{OUT:#x}","length":"2MiB","page_size":"2MiB"}}]"#
        ))
        .unwrap();
        let o = EmitOptions { trace: Some(t.into()), ..Default::default() };
        let plan = emit(&recorded, Timing::Accesses, &o).unwrap();
        let notes: Vec<Option<&str>> = plan.entries.iter().map(|e| e.note.as_deref()).collect();
        assert_eq!(notes, vec![Some("pcc rank 1; region a"), Some("region a1"), Some("regions b, idle"), None]);
        // Without the trace, the notes are the policy's alone (older callers).
        let plan = emit(&recorded, Timing::Accesses, &EmitOptions::default()).unwrap();
        assert_eq!(plan.entries[0].note.as_deref(), Some("pcc rank 1"));
        assert_eq!(plan.entries[1].note, None);
    }
}
