//! The Page-Skew-Ratio (PSR) microbenchmark of FHPM (Li et al., §2.2 Fig 2 and
//! §6.3 Fig 8): random reads and writes over a hot part of a footprint whose
//! 2MB pages are either *balanced* (all 512 4KB regions accessed, PSR 0) or
//! *unbalanced* (only `ns` regions accessed, PSR = 1 - ns/512).
//!
//! The footprint is one 2MB-aligned region of whole 2MB pages. Hot data is a
//! constant number of bytes (`hot`): a share `u` of it lives in unbalanced
//! pages, the rest in balanced ones, so the 2MB-granular hot footprint grows
//! as `hot * (1 + (512/ns - 1) * u)` while the data really used stays the same
//! (FHPM §2.2: "hot bloat"; with the default ns = 51, `hot * (1 + 9u)`). Which
//! 2MB pages are hot is a seeded random choice over the footprint (so no
//! allocation order places them anywhere special), and each unbalanced page's
//! `ns` region offsets are drawn uniformly at random, fixed for the run (spec
//! §7 "PSR generator"). A `cold` share of the accesses goes uniformly to the
//! rest of the footprint (the paper's "rarely accessed" data; its rate is
//! unspecified, spec §11 suggests 1%).
//!
//! Fig 2 is `u` swept over [0, 1] at fixed `hot`; Fig 8 is `u = 1, ns = 10`
//! with `hot = footprint * 10 / 512` (every page exactly 10 regions touched).

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

/// A huge page (the EPT's 2MB leaf).
pub const HUGE: u64 = 2 << 20;
/// A base page (the 4KB region of a huge page).
pub const REGION: u64 = 4096;
/// 4KB regions per 2MB page.
pub const REGIONS_PER_HUGE: u64 = HUGE / REGION;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "psr",
        about: "random R/W over hot 2MB pages that are balanced (all 512 4KB regions used) or unbalanced (ns regions): FHPM's PSR microbenchmark (Fig 2, Fig 8)",
        params: common(vec![
            p("footprint", "size", "1GiB", "bytes of the data region (a multiple of 2MiB; the paper's 40GB, scaled)"),
            p("hot", "size", "96MiB", "hot data in bytes, constant over u (a multiple of 4KiB; the paper's 4GB of 40GB, scaled)"),
            p("u", "float", "0", "share of the hot data in unbalanced pages, 0..1 (0: all hot pages balanced)"),
            p("ns", "int", "51", "4KB regions accessed per unbalanced 2MB page, 1..512 (51 = round((1-0.9)*512): PSR 0.9)"),
            p("write_share", "float", "0.5", "share of accesses that are writes, 0..1 (0.5: the paper's 1:1 reads:writes)"),
            p("cold", "float", "0.01", "share of accesses to the rarely-accessed rest of the footprint, 0..1 (unspecified in the paper; spec default 1%)"),
            p("accesses", "int", "8M", "number of 8-byte accesses in the measured phase"),
        ]),
    }
}

pub struct Cfg {
    pub footprint: u64,
    pub hot: u64,
    pub u: f64,
    pub ns: u64,
    pub write_share: f64,
    pub cold: f64,
    pub accesses: u64,
    pub seed: u64,
    pub threads: usize,
    /// Hot 2MB pages with all regions accessed.
    pub balanced: u64,
    /// Hot 2MB pages with `ns` regions accessed.
    pub unbalanced: u64,
}

impl Cfg {
    pub fn pages(&self) -> u64 {
        self.footprint / HUGE
    }
    /// 2MB pages not in the hot part (the cold accesses' target).
    pub fn cold_pages(&self) -> u64 {
        self.pages() - self.balanced - self.unbalanced
    }
}

/// Hot pages for `hot` bytes at unbalanced share `u`: the balanced part is
/// `(1-u) * hot` rounded to whole 2MB pages, and the bytes left over fill
/// unbalanced pages of `ns` regions each (rounded to whole pages), so the hot
/// data stays `hot` to within one page's worth whatever `u` is.
pub fn hot_pages(hot: u64, u: f64, ns: u64) -> (u64, u64) {
    let balanced = (((1.0 - u) * hot as f64) / HUGE as f64).round() as u64;
    let balanced = balanced.min(hot / HUGE);
    let rest = hot - balanced * HUGE;
    let unbalanced = (rest as f64 / (ns * REGION) as f64).round() as u64;
    (balanced, unbalanced)
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let footprint = r.int("footprint")?;
    if footprint == 0 || footprint % HUGE != 0 {
        return Err(Error::input(format!(
            "psr: parameter 'footprint' must be a positive multiple of 2MiB, got {footprint}"
        )));
    }
    let hot = r.int("hot")?;
    if hot == 0 || hot % REGION != 0 || hot > footprint {
        return Err(Error::input(format!(
            "psr: parameter 'hot' must be a positive multiple of 4KiB, at most footprint ({footprint}), got {hot}"
        )));
    }
    let u = r.float_in("u", 0.0, 1.0)?;
    let ns = r.int("ns")?;
    if !(1..=REGIONS_PER_HUGE).contains(&ns) {
        return Err(Error::input(format!(
            "psr: parameter 'ns' must be between 1 and {REGIONS_PER_HUGE}, got {ns}"
        )));
    }
    let (balanced, unbalanced) = hot_pages(hot, u, ns);
    let pages = footprint / HUGE;
    if balanced + unbalanced == 0 {
        return Err(Error::input(format!(
            "psr: the hot data ({hot} bytes at u={u}, ns={ns}) rounds to no hot page; raise 'hot' to at least one page's worth"
        )));
    }
    if balanced + unbalanced > pages {
        return Err(Error::input(format!(
            "psr: the hot data ({hot} bytes at u={u}, ns={ns}) needs {} hot 2MB pages ({balanced} balanced + {unbalanced} unbalanced) but the footprint has {pages}; raise 'footprint' or lower 'hot'",
            balanced + unbalanced
        )));
    }
    Ok(Cfg {
        footprint,
        hot,
        u,
        ns,
        write_share: r.float_in("write_share", 0.0, 1.0)?,
        cold: r.float_in("cold", 0.0, 1.0)?,
        accesses: r.int_min("accesses", 1)?,
        seed: r.int("seed")?,
        threads: r.threads()?,
        balanced,
        unbalanced,
    })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("data", c.footprint)?;
    Ok(l)
}

/// The hot 4KB regions (as region indices into the footprint, page * 512 +
/// offset) and the cold 2MB pages. Hot pages are a seeded random subset of the
/// footprint (the first `balanced` of a shuffle balanced, the next
/// `unbalanced` unbalanced); each unbalanced page's offsets are `ns` distinct
/// draws, uniform, from one stream per page.
pub fn hot_set(c: &Cfg) -> (Vec<u32>, Vec<u32>) {
    let pages = c.pages();
    let mut order: Vec<u32> = (0..pages as u32).collect();
    let mut rng = Rng::stream(c.seed, 1);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let (b, ub) = (c.balanced as usize, c.unbalanced as usize);
    let mut regions = Vec::with_capacity(b * REGIONS_PER_HUGE as usize + ub * c.ns as usize);
    for &pg in &order[..b] {
        let base = pg * REGIONS_PER_HUGE as u32;
        regions.extend(base..base + REGIONS_PER_HUGE as u32);
    }
    let mut offs: Vec<u32> = (0..REGIONS_PER_HUGE as u32).collect();
    for &pg in &order[b..b + ub] {
        // Partial Fisher-Yates: the first ns slots are a uniform ns-subset.
        let mut prng = Rng::stream(c.seed, 2 + pg as u64);
        for i in 0..c.ns as usize {
            let j = i + prng.below(REGIONS_PER_HUGE - i as u64) as usize;
            offs.swap(i, j);
        }
        let base = pg * REGIONS_PER_HUGE as u32;
        let mut mine: Vec<u32> = offs[..c.ns as usize].iter().map(|o| base + o).collect();
        mine.sort_unstable();
        regions.extend(mine);
    }
    let mut cold: Vec<u32> = order[b + ub..].to_vec();
    cold.sort_unstable();
    (regions, cold)
}

/// Accesses per scheduling chunk (a thread's slice of the interleaved trace).
const CHUNK: u64 = 1024;
/// Progress point every this many accesses.
const PROGRESS: u64 = 1 << 20;
/// 8-byte words per 4KB region.
const WORDS_PER_REGION: u64 = REGION / 8;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let words = (c.footprint / 8) as usize;
    let mut t: Arr<u64> = m.alloc(l.get("data")?, words)?;
    for (i, x) in t.iter_mut().enumerate() {
        *x = i as u64;
    }
    // The data exists before the measured phase (the paper's benchmark
    // allocates and fills its footprint first), so every page is populated.
    m.populated(&t);
    let (hot, cold) = hot_set(c);
    // Cold accesses need somewhere to go: with no cold page left (every page
    // hot, as at u=1 when hot*(1+9u) is the whole footprint) they are hot ones.
    let cold_share = if cold.is_empty() { 0.0 } else { c.cold };
    // Thresholds on a 53-bit uniform draw, so the choice is one integer compare.
    let scale = (1u64 << 53) as f64;
    let cold_below = (cold_share * scale) as u64;
    let write_below = (c.write_share * scale) as u64;
    m.begin_run();
    let mut rng = Rng::stream(c.seed, 0);
    let (mut done, mut chunk) = (0u64, 0usize);
    let (mut reads, mut writes, mut cold_hits, mut sum) = (0u64, 0u64, 0u64, 0u64);
    while done < c.accesses {
        m.set_cpu(chunk % c.threads);
        let end = (done + CHUNK).min(c.accesses);
        for _ in done..end {
            let r = rng.next_u64();
            let word = if rng.next_u64() >> 11 < cold_below {
                cold_hits += 1;
                let pg = cold[rng.below(cold.len() as u64) as usize] as u64;
                pg * (HUGE / 8) + rng.below(HUGE / 8)
            } else {
                let reg = hot[rng.below(hot.len() as u64) as usize] as u64;
                reg * WORDS_PER_REGION + rng.below(WORDS_PER_REGION)
            } as usize;
            if r >> 11 < write_below {
                writes += 1;
                let v = t[word] ^ r;
                t.st(m, word, v);
            } else {
                reads += 1;
                sum = sum.wrapping_add(std::hint::black_box(t.ld(m, word)));
            }
        }
        if end / PROGRESS != done / PROGRESS {
            m.progress(&format!("accesses:{}", end / PROGRESS * PROGRESS));
        }
        done = end;
        chunk += 1;
    }
    m.end_run();
    let hot_data = c.balanced * HUGE + c.unbalanced * c.ns * REGION;
    Ok(json!({
        "pages": c.pages(), "balanced_pages": c.balanced, "unbalanced_pages": c.unbalanced,
        "cold_pages": cold.len(), "hot_regions": hot.len(), "hot_data_bytes": hot_data,
        "hot_footprint_bytes": (c.balanced + c.unbalanced) * HUGE,
        "psr_unbalanced": 1.0 - c.ns as f64 / REGIONS_PER_HUGE as f64,
        "accesses": c.accesses, "reads": reads, "writes": writes, "cold_accesses": cold_hits,
        "read_sum": sum, "checksum": crate::hex(crate::hash_words(t.iter().copied())),
    }))
}
