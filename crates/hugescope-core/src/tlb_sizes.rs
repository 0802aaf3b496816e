//! TLB-size sensitivity in one pass: the results of every size of one L2
//! TLB structure (the same sets, any number of ways) over a static page map,
//! from a single simulation.
//!
//! The L2 TLBs are true LRU per set, and LRU is a stack algorithm (Mattson et
//! al., "Evaluation techniques for storage hierarchies", 1970): a set of W
//! ways always holds the W most recent tags of the set's stream, so the
//! structure with the most ways answers for all the others. A hit at way d
//! (its stack distance, `SetAssoc::lookup_way`) is a hit for every W > d and
//! a miss for W <= d. Nothing else differs between the sizes:
//! - the L1 TLBs are filled on every L1 miss with the same entry, whether
//!   the L2 hit or a walk found it (a static map has one translation per
//!   address), so their state is the same at every size;
//! - the L2 sees the same stream (the L1 misses): on a hit the entry moves
//!   to the front, on a miss the walk's fill puts it there, the same move.
//!
//! What does depend on the size is the walks: each size's walks go through
//! its own walker state (page-walk caches, page-table line cache), so walk
//! references and PWC hits are exact too. Sizes whose walker states are
//! equal share one walker and price each walk once (`Group`): they stay
//! together while they miss on the same accesses, split where the stack
//! distance falls between them, and merge again when their states become
//! equal (checked every `MERGE_EVERY` accesses of a cpu). On a scattered
//! workload nearly every access misses at every size, so one walker serves
//! them all most of the time. Each size's result
//! is the `StaticResult` `simulate_static` gives for that size, byte for
//! byte (tested). Not for an OS model: there, walks feed policies (the PCC,
//! accessed bits) whose decisions change the page table, so each size needs
//! its own run (`sweep` shares those runs' work where it can). Not with the
//! PCC artifact's duplicate L1 fill either (`l1_duplicate_fill`: an extra
//! L1 fill on walks only, so the L1 would differ by size).

use crate::config::{CacheConfig, MachineConfig};
use crate::hw::{Geometry, Leaf, Mmu, Outcome, PageTable, RadixWalker, Walker};
use crate::pagemap::StaticMap;
use crate::sim::{counters_of, StaticResult, TraceInfo};
use crate::stats::MmuStats;
use crate::trace::hst::HstReader;
use crate::{cost, Error, Result};
use serde::Serialize;

/// Most sizes one pass takes (each keeps a walker and counters per cpu).
pub const MAX_POINTS: usize = 64;
/// Most ways of the largest size (the pass simulates a set this wide).
pub const MAX_WAYS: usize = 1024;
/// Accesses of a cpu between checks for groups whose walkers became equal.
const MERGE_EVERY: u64 = 64;

/// Sizes `lo..hi` (indices into the sizes sorted by ways) whose walker
/// states on one cpu are equal, and that state.
#[derive(Clone)]
struct Group {
    lo: usize,
    hi: usize,
    walker: RadixWalker,
}

/// One cpu's groups, covering every size, in order, and the walkers of
/// merged groups kept for reuse (a split copies into one: no allocation on
/// the access path once the pass has warmed up).
#[derive(Clone)]
struct CpuGroups {
    groups: Vec<Group>,
    spare: Vec<RadixWalker>,
    accesses: u64,
}

impl CpuGroups {
    /// Merge neighbours whose walkers are equal: from here on they walk alike.
    fn merge_equal(&mut self) -> u64 {
        let before = self.groups.len();
        let mut out: Vec<Group> = Vec::with_capacity(self.groups.len());
        for g in self.groups.drain(..) {
            match out.last_mut() {
                Some(last) if last.walker == g.walker => {
                    last.hi = g.hi;
                    self.spare.push(g.walker);
                }
                _ => out.push(g),
            }
        }
        self.groups = out;
        (before - self.groups.len()) as u64
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbSizesReport {
    pub kind: &'static str,
    /// The L2 structure varied (its key in the machine's `l2` table).
    pub structure: String,
    /// Its sets, the same at every size.
    pub sets: usize,
    /// Its size in the machine as configured (always among the points:
    /// appended when not asked, the reference of speedups).
    pub configured_entries: usize,
    /// Walks priced (one per group that walked), against the sizes' walks
    /// summed: what sharing walkers saved.
    pub walks_priced: u64,
    /// Times groups of sizes merged because their walkers became equal.
    pub merges: u64,
    /// One result per size, in the order asked.
    pub points: Vec<TlbSizePoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbSizePoint {
    pub entries: usize,
    pub ways: usize,
    pub result: StaticResult,
}

/// The L2 structure to vary: `key`, or the machine's only one.
fn structure(cfg: &MachineConfig, key: Option<&str>) -> Result<(String, CacheConfig)> {
    match key {
        Some(k) => {
            let k = k.strip_prefix("l2.").unwrap_or(k);
            cfg.l2.get(k).map(|c| (k.to_string(), c.clone())).ok_or_else(|| {
                Error::input(format!("machine '{}' has no L2 TLB '{k}' (it has: {})", cfg.name, cfg.l2.keys().cloned().collect::<Vec<_>>().join(", ")))
            })
        }
        None => match cfg.l2.len() {
            1 => Ok(cfg.l2.iter().next().map(|(k, c)| (k.clone(), c.clone())).expect("one entry")),
            0 => Err(Error::input(format!("machine '{}' has no L2 TLB to vary", cfg.name))),
            _ => Err(Error::input(format!(
                "machine '{}' has several L2 TLBs ({}): name one with --structure",
                cfg.name,
                cfg.l2.keys().cloned().collect::<Vec<_>>().join(", ")
            ))),
        },
    }
}

/// Ways of the default sizes of a set-associative structure.
pub const DEFAULT_WAYS: [usize; 7] = [1, 2, 4, 6, 8, 12, 16];

/// Simulate the trace at `path` over the static map `pages` once, and give
/// the result of each L2 size in `entries` (multiples of the structure's
/// set count; empty: `DEFAULT_WAYS` ways, or a fully associative one at 1/4
/// to 4 times its size), then of the configured size if not among them.
pub fn simulate_tlb_sizes(path: &str, cfg: MachineConfig, pages: &str, key: Option<&str>, entries: &[usize], progress: crate::progress::ProgressHook) -> Result<TlbSizesReport> {
    if cfg.l1_duplicate_fill {
        return Err(Error::input(
            "tlb-sizes: the duplicate L1 fill (l1_duplicate_fill) fills the L1 on walks only, so the sizes would not share it; run each size with simulate",
        ));
    }
    if !cfg.tlb_max_page.is_empty() {
        return Err(Error::input(format!(
            "tlb-sizes: tlb_max_page = \"{}\" caps what the walks fill, which this one-pass sweep does not model; run each size with simulate",
            cfg.tlb_max_page)));
    }
    let (key, c) = structure(&cfg, key)?;
    let sets = if c.ways == 0 || c.ways >= c.entries { 1 } else { c.entries / c.ways };
    let mut entries: Vec<usize> = if entries.is_empty() {
        if sets > 1 {
            DEFAULT_WAYS.iter().map(|w| sets * w).collect()
        } else {
            [1, 2, 4, 8, 16].iter().map(|f| (c.entries * f / 4).max(1)).collect()
        }
    } else {
        entries.to_vec()
    };
    if !entries.contains(&c.entries) {
        entries.push(c.entries);
    }
    if entries.len() > MAX_POINTS {
        return Err(Error::input(format!(
            "tlb-sizes: at most {MAX_POINTS} sizes, the configured {} included, not {}",
            c.entries,
            entries.len()
        )));
    }
    let mut ways = Vec::with_capacity(entries.len());
    for &e in &entries {
        if e == 0 || e % sets != 0 || e / sets > MAX_WAYS {
            return Err(Error::input(format!(
                "tlb-sizes: {e} entries: not a multiple of the {sets} sets of l2.{key} from 1 to {MAX_WAYS} ways ({} to {} entries)",
                sets,
                sets * MAX_WAYS
            )));
        }
        ways.push(e / sets);
    }
    let max_ways = *ways.iter().max().expect("not empty");
    // Each size's machine: the structure with its ways (fully associative
    // stays fully associative: one set of `entries` ways).
    let machine_of = |w: usize| {
        let mut m = cfg.clone();
        let ways = if c.ways == 0 { 0 } else { w };
        m.l2.insert(key.clone(), CacheConfig { entries: sets * w, ways });
        m
    };
    let widest = machine_of(max_ways);
    widest.validate()?;
    let geo = Geometry::new(&widest)?;
    let map = StaticMap::from_spec(pages, &geo)?;
    let mut r = HstReader::open(path)?;
    r.set_progress(progress);
    let cpus = r.header().cpus.max(1) as usize;
    let f = crate::limits::Footprint {
        simulators: entries.len() as u64,
        cpus: cpus as u64,
        cache_entries_per_cpu: widest.cache_entries_per_cpu(),
        ..Default::default()
    };
    crate::limits::check_model_memory(&format!("{} TLB sizes x {cpus} cpus", entries.len()), &f)?;
    let info = TraceInfo::new(path, r.header());
    let described = map.describe(&geo);

    let template = Mmu::new(&geo, &widest)?;
    let walker = RadixWalker::new(&geo, &widest);
    let mut mmus = vec![template.clone(); cpus];
    // Sizes by ways (stable: equal sizes keep their order); a hit at depth
    // d misses exactly the sizes of d or fewer ways: a prefix of this order.
    let mut order: Vec<usize> = (0..ways.len()).collect();
    order.sort_by_key(|&i| ways[i]);
    let sorted_ways: Vec<usize> = order.iter().map(|&i| ways[i]).collect();
    let start = CpuGroups { groups: vec![Group { lo: 0, hi: ways.len(), walker }], spare: Vec::new(), accesses: 0 };
    let mut groups = vec![start.clone(); cpus];
    // Per size (sorted order) and cpu: the counters that differ by size.
    let mut stats = vec![vec![MmuStats::default(); cpus]; ways.len()];
    let mut map = map;
    let (mut walks_priced, mut merges) = (0u64, 0u64);
    r.for_each(|a| {
        let cpu = a.cpu as usize;
        if cpu >= mmus.len() {
            mmus.resize(cpu + 1, template.clone());
            groups.resize(cpu + 1, start.clone());
            for s in stats.iter_mut() {
                s.resize(cpu + 1, MmuStats::default());
            }
        }
        let m = &mut mmus[cpu];
        let (missed, hit_size) = match m.lookup(&a) {
            Outcome::L1Hit(_) => return,
            // Sizes of at most `way` ways missed.
            Outcome::L2Hit(s) => {
                let way = m.last_l2_way();
                (sorted_ways.partition_point(|&w| w <= way), Some(s))
            }
            Outcome::Miss => (ways.len(), None),
        };
        let space = m.space(&a);
        // Looked up once, by the first group that walks.
        let mut leaf: Option<Leaf> = None;
        if hit_size.is_none() {
            // The widest structure is filled as its walk would; the walk is
            // priced by each group below, not here.
            let l = *leaf.get_or_insert_with(|| map.leaf(&a));
            m.fill(&a, l.tlb_size());
        }
        let g = &mut groups[cpu];
        let mut i = 0;
        while i < g.groups.len() {
            let (lo, hi) = (g.groups[i].lo, g.groups[i].hi);
            if lo < missed && missed < hi {
                // The stack distance falls inside: the sizes that missed
                // go on with a copy of the walker and walk.
                let mut walker = match g.spare.pop() {
                    Some(w) => w,
                    None => g.groups[i].walker.clone(),
                };
                walker.clone_from(&g.groups[i].walker);
                g.groups[i].lo = missed;
                g.groups.insert(i, Group { lo, hi: missed, walker });
                continue;
            }
            if hi <= missed {
                let l = *leaf.get_or_insert_with(|| map.leaf(&a));
                let cost = g.groups[i].walker.walk(space, &a, &l);
                walks_priced += 1;
                for st in &mut stats[lo..hi] {
                    st[cpu].count_walk(l.tlb_size(), &cost);
                }
            } else {
                let s = hit_size.expect("sizes above the stack distance hit");
                for st in &mut stats[lo..hi] {
                    st[cpu].l2_hits[s] += 1;
                }
            }
            i += 1;
        }
        g.accesses += 1;
        if g.accesses % MERGE_EVERY == 0 && g.groups.len() > 1 {
            merges += g.merge_equal();
        }
    })?;
    // Back to the order asked.
    let mut by_asked = vec![Vec::new(); ways.len()];
    for (k, per_cpu) in stats.into_iter().enumerate() {
        by_asked[order[k]] = per_cpu;
    }
    let stats = by_asked;
    let points = ways
        .iter()
        .zip(stats)
        .map(|(&w, per_cpu)| {
            let machine = machine_of(w);
            // Shared counters from the widest run, the size's own for the rest.
            let all: Vec<MmuStats> = mmus
                .iter()
                .zip(per_cpu.iter())
                .map(|(m, own)| {
                    let mut st = m.stats.clone();
                    st.l2_hits = own.l2_hits;
                    st.walks = own.walks;
                    st.walk_refs = own.walk_refs;
                    st.walk_refs_mem = own.walk_refs_mem;
                    st.pwc_hits = own.pwc_hits;
                    st
                })
                .collect();
            let translation = counters_of(&all, &machine, &geo);
            let cost = cost::estimate(&translation, &machine.cost, 0.0);
            TlbSizePoint {
                entries: sets * w,
                ways: if c.ways == 0 { sets * w } else { w },
                result: StaticResult {
                    hugescope_version: env!("CARGO_PKG_VERSION"),
                    trace: Some(info.clone()),
                    machine,
                    pages: described.clone(),
                    translation,
                    cost,
                },
            }
        })
        .collect();
    Ok(TlbSizesReport { kind: "simulation", structure: format!("l2.{key}"), sets, configured_entries: c.entries, walks_priced, merges, points })
}
