//! `pcc`: the OS side of the Promotion Candidate Cache (Manocha et al.,
//! MICRO'23, §3.3). The hardware (`hw::pcc_table`, one per cpu, owned by the kernel
//! because the walker feeds it) ranks 2MB regions by page walks; every
//! interval this policy reads all PCCs, selects candidates and promotes them
//! through `Ctx::promote`, so budget, fragmentation, compaction and costs
//! apply as for any other policy.
//!
//! One read (pcc.md §4 steps A-C, with the §8 recommendations):
//! 1. Dump every PCC in priority order (frequency descending, then recency).
//!    Entries of regions that are already huge are not candidates (rec. 3:
//!    they mark demotion / 1GB candidates); nor are regions that cannot hold
//!    a huge page (not wholly inside one VMA), nor entries below `min_freq`
//!    (default 1 = the artifact's "freq > 0", rec. 6).
//! 2. Order: `promotion_policy=1` (default) merges all PCCs by frequency
//!    (ties: lower cpu id, then each PCC's own order); `0` is round robin: one
//!    head per PCC in turn, the starting cpu rotating each interval, ties to
//!    the lower cpu id (rec. 9). A region in several PCCs is promoted once,
//!    ranked by its largest count (the first time the order meets it).
//!    `promotion_bias_process` pids are exhausted first, with the same order
//!    among them (§3.3.2).
//! 3. Promote in that order until `regions_to_promote` promotions were
//!    attempted (default = PCC size, 128: shared by all PCCs, §3.3.1).
//!    A refusal for lack of memory or budget is counted, ends the round (the
//!    next allocation would fail the same way) and leaves every remaining
//!    entry in its PCC, so it is retried next interval (rec. 10); a success
//!    shoots the region down, which removes its entries (§3.3 step C).
//! 4. `flush_on_read=true` then empties every PCC (the single-thread
//!    artifact); by default non-promoted entries stay (rec. 7).
//!
//! Options off by default:
//! - `demotion=true` (rec. 14, §3.3.3): only when this round hit the budget
//!   or ran out of memory, for each remaining candidate in order, demote one
//!   of this policy's huge pages that either had no walk for 2 intervals or
//!   whose current PCC count (largest over cpus, 0 if absent) is below the
//!   candidate's, then promote the candidate. Activity of a huge page is
//!   seen through the recency stamps of its PCC entries. In this model a
//!   split keeps its frames mapped (as Linux does), so demotion frees budget
//!   but not contiguous memory; under physical exhaustion it helps only if
//!   compaction can then assemble a block.
//! - `promote_1g=true` (rec. 13, §3.2.3 design a): enables the 1GB PCC with
//!   32-bit counters that the OS clears after every read; a 1GB region is
//!   promoted when its count f1G >= 512 and f1G >= 512 x f2M, f2M being the
//!   largest 2MB count inside it over all PCCs (0 if none). Checked before
//!   the 2MB candidates; counts against `regions_to_promote`.
//!
//! Timing (rec. 8): the first read comes one full interval after the start,
//! then every interval (`interval_s`, default 30 s of virtual time, or
//! `interval_accesses`, a count of accesses as the artifact does);
//! `artifact_phase=true` reads at I/30, I, I + I/30, 2I, ... as the
//! artifact's "count mod 30*AI in {AI, 0}" does. Allocation: collapse with
//! direct compaction of at most `compact_pages` base pages (0: free blocks
//! only), like a synchronous collapse (MADV_COLLAPSE) would.

use super::{Ctx, Params, Policy};
use crate::bounded::BoundedLog;
use crate::hw::pcc_table::{PccConfig, PccEntry, PccStats, Replacement};
use crate::os::Refusal;
use crate::os::AllocMode;
use crate::{Error, Result};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

const READ: u32 = 0x5043_4301;
/// Per-read records kept from the start and from the end of a run: 10000
/// reads at the default 30 s interval are 83 hours of virtual time, far more
/// than an ordinary run; beyond, the middle is dropped and counted.
const INTERVALS_KEPT: usize = 10_000;

/// Parameters that only change what this policy decides at a read or what
/// its PCC holds, never when it acts: configurations differing only in
/// these may share a pass (`sweep.rs`). Its schedule (`interval_s`,
/// `interval_accesses`, `artifact_phase`) and anything else must match.
const DECISION_ONLY: &[&str] = &[
    "entries",
    "counter_bits",
    "replacement",
    "regions_to_promote",
    "promotion_policy",
    "promotion_bias_process",
    "min_freq",
    "flush_on_read",
    "demotion",
    "compact_pages",
];

/// What one read did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IntervalRecord {
    pub time_s: f64,
    pub accesses: u64,
    /// PCC entries over all cpus (any frequency, any region).
    pub entries: u64,
    /// Distinct eligible, not yet huge regions at or above `min_freq`.
    pub candidates: u64,
    pub promoted: u64,
    /// Promotions refused for lack of memory or budget.
    pub failed: u64,
    pub demoted: u64,
    pub promoted_1g: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PccTotals {
    pub reads: u64,
    pub promoted: u64,
    pub failed: u64,
    pub failed_no_memory: u64,
    pub failed_budget: u64,
    pub demoted: u64,
    pub promoted_1g: u64,
}

#[derive(Clone, Debug, Serialize)]
struct Settings {
    interval_s: f64,
    interval_accesses: u64,
    artifact_phase: bool,
    regions_to_promote: u64,
    promotion_policy: u32,
    promotion_bias_process: Vec<u16>,
    min_freq: u32,
    flush_on_read: bool,
    demotion: bool,
    promote_1g: bool,
    compact_pages: u64,
}

#[derive(Clone, Copy, Debug)]
struct Cand {
    pid: u16,
    start: u64,
    freq: u32,
    cpu: usize,
    rank: usize,
}

#[derive(Clone, Copy, Debug)]
struct Promoted {
    pid: u16,
    start: u64,
    last_active_read: u64,
}

pub struct PccPolicy {
    hw: PccConfig,
    s: Settings,
    reads: u64,
    /// One record per read; bounded (see `INTERVALS_KEPT`), with `totals`
    /// counting every read.
    records: BoundedLog<IntervalRecord>,
    totals: PccTotals,
    /// Huge pages this policy made (for demotion), in promotion order.
    promoted: Vec<Promoted>,
    /// Each PCC's touch counter at the previous read (activity since then).
    prev_clock: Vec<u64>,
    dump: Vec<PccEntry>,
    enable_error: Option<String>,
    hw_stats: Option<PccStats>,
    hw_stats_1g: Option<PccStats>,
}

fn parse_pids(s: &str) -> Result<Vec<u16>> {
    let max = crate::trace::MAX_PIDS - 1;
    let mut pids: Vec<u16> = Vec::new();
    for x in s.split(['+', ';', ' ', '|', '/']).filter(|x| !x.is_empty()) {
        // A trace holds pids 0..MAX_PIDS; a larger one can never match and is a typo.
        let pid = x.trim().parse::<u16>().ok().filter(|&p| p as u32 <= max).ok_or_else(|| {
            Error::input(format!(
                "policy pcc: promotion_bias_process={s}: '{x}' is not a pid 0..={max} (separate pids with '+')"
            ))
        })?;
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let d = PccConfig::default();
    use crate::hw::pcc_table::MAX_PCC_ENTRIES;
    use super::params::{MAX_COMPACT_PAGES, MAX_PERIOD_ACCESSES, MAX_PERIOD_S, MAX_PROMOTIONS_PER_ROUND, MIN_PERIOD_ACCESSES, MIN_PERIOD_S};
    let entries = p.u64_in("entries", d.entries as u64, 1, MAX_PCC_ENTRIES as u64)? as usize;
    let repl_s = p.choice("replacement", "lfu_lru", &["lfu_lru", "lru", "lfu_artifact"])?;
    let promote_1g = p.bool("promote_1g", false)?;
    let hw = PccConfig {
        entries,
        counter_bits: p.u64_in("counter_bits", d.counter_bits as u64, 1, 32)? as u32,
        replacement: Replacement::parse(&repl_s).unwrap_or(Replacement::LfuLru),
        enable_1g: p.bool("pcc_1g", promote_1g)? || promote_1g,
        entries_1g: p.u64_in("entries_1g", d.entries_1g as u64, 1, MAX_PCC_ENTRIES as u64)? as usize,
        counter_bits_1g: p.u64_in("counter_bits_1g", if promote_1g { 32 } else { d.counter_bits_1g as u64 }, 1, 32)? as u32,
    };
    hw.validate().map_err(|e| Error::input(format!("policy pcc: {e}")))?;
    let pol = p.str("promotion_policy", "1");
    let promotion_policy = match pol.as_str() {
        "1" | "frequency" | "highest_frequency" => 1,
        "0" | "round_robin" | "rr" => 0,
        _ => return Err(Error::input(format!("policy pcc: promotion_policy={pol}: expected 1 (highest frequency) or 0 (round robin)"))),
    };
    let s = Settings {
        interval_s: p.f64_in("interval_s", 30.0, MIN_PERIOD_S, MAX_PERIOD_S)?,
        interval_accesses: p.u64_off_or_in("interval_accesses", 0, MIN_PERIOD_ACCESSES, MAX_PERIOD_ACCESSES)?,
        artifact_phase: p.bool("artifact_phase", false)?,
        regions_to_promote: p.u64_in("regions_to_promote", entries as u64, 0, MAX_PROMOTIONS_PER_ROUND)?,
        promotion_policy,
        promotion_bias_process: parse_pids(&p.str("promotion_bias_process", ""))?,
        min_freq: p.u64_in("min_freq", 1, 0, u32::MAX as u64)? as u32,
        flush_on_read: p.bool("flush_on_read", false)?,
        demotion: p.bool("demotion", false)?,
        promote_1g,
        compact_pages: p.u64_in("compact_pages", 1 << 14, 0, MAX_COMPACT_PAGES)?,
    };
    Ok(Box::new(PccPolicy {
        hw,
        s,
        reads: 0,
        records: BoundedLog::new(INTERVALS_KEPT, INTERVALS_KEPT),
        totals: PccTotals::default(),
        promoted: Vec::new(),
        prev_clock: Vec::new(),
        dump: Vec::new(),
        enable_error: None,
        hw_stats: None,
        hw_stats_1g: None,
    }))
}

impl PccPolicy {
    /// Time (or access count) of read number `n` (0-based), in interval units
    /// `i`: n+1 intervals, or the artifact's I/30, I, I+I/30, 2I, ... phase.
    fn read_point(&self, n: u64, i: f64) -> f64 {
        if self.s.artifact_phase {
            if n.is_multiple_of(2) {
                (n / 2) as f64 * i + i / 30.0
            } else {
                n.div_ceil(2) as f64 * i
            }
        } else {
            (n + 1) as f64 * i
        }
    }

    fn schedule_next(&self, k: &mut Ctx<'_>) {
        let n = self.reads;
        if self.s.interval_accesses > 0 {
            let at = self.read_point(n, self.s.interval_accesses as f64).round() as u64;
            k.schedule_after_accesses(at.max(k.accesses() + 1), READ);
        } else {
            let at = self.read_point(n, self.s.interval_s);
            k.schedule_at(at.max(k.now()), READ);
        }
    }

    fn alloc(&self) -> AllocMode {
        if self.s.compact_pages == 0 {
            AllocMode::FreeOnly
        } else {
            AllocMode::Compact { max_pages: self.s.compact_pages }
        }
    }

    /// Candidates in promotion order (distinct regions), from per-cpu dumps.
    fn order(&self, per_cpu: &[Vec<Cand>]) -> Vec<Cand> {
        let bias: HashSet<u16> = self.s.promotion_bias_process.iter().copied().collect();
        let mut out = Vec::new();
        let mut seen: HashSet<(u16, u64)> = HashSet::new();
        let groups: Vec<bool> = if bias.is_empty() { vec![false] } else { vec![true, false] };
        for biased in groups {
            let lists: Vec<Vec<Cand>> = per_cpu
                .iter()
                .map(|l| l.iter().filter(|c| bias.is_empty() || bias.contains(&c.pid) == biased).copied().collect())
                .collect();
            if self.s.promotion_policy == 1 {
                let mut all: Vec<Cand> = lists.into_iter().flatten().collect();
                all.sort_by(|a, b| b.freq.cmp(&a.freq).then(a.cpu.cmp(&b.cpu)).then(a.rank.cmp(&b.rank)));
                for c in all {
                    if seen.insert((c.pid, c.start)) {
                        out.push(c);
                    }
                }
            } else {
                let n = lists.len();
                if n == 0 {
                    continue;
                }
                let start = (self.reads as usize) % n;
                let mut pos = vec![0usize; n];
                loop {
                    let mut any = false;
                    for j in 0..n {
                        let c = (start + j) % n;
                        // Pop this cpu's next head not already chosen.
                        while pos[c] < lists[c].len() {
                            let cand = lists[c][pos[c]];
                            pos[c] += 1;
                            if seen.insert((cand.pid, cand.start)) {
                                out.push(cand);
                                any = true;
                                break;
                            }
                        }
                    }
                    if !any {
                        break;
                    }
                }
            }
        }
        out
    }

    fn read(&mut self, k: &mut Ctx<'_>) {
        let rb = k.region_bytes();
        let pmd = k.pmd_size();
        let mut rec = IntervalRecord { time_s: k.now(), accesses: k.accesses(), ..Default::default() };
        let mut budget_attempts = self.s.regions_to_promote;
        let read_no = self.reads;

        // 1GB rule first (rec. 13).
        if self.s.promote_1g {
            self.read_1g(k, &mut rec, &mut budget_attempts);
        }

        // Step A: dump every PCC.
        let ncpu = k.pccs().len();
        let mut per_cpu: Vec<Vec<Cand>> = vec![Vec::new(); ncpu];
        // Largest count per huge region (demotion), and activity since the last read.
        let mut huge_count: HashMap<(u16, u64), u32> = HashMap::new();
        let mut huge_active: HashSet<(u16, u64)> = HashSet::new();
        self.prev_clock.resize(ncpu, 0);
        for (cpu, list) in per_cpu.iter_mut().enumerate() {
            self.dump.clear();
            k.pccs()[cpu].pmd.dump_into(&mut self.dump);
            rec.entries += self.dump.len() as u64;
            for (rank, e) in self.dump.iter().enumerate() {
                let Some(st) = k.view().region(e.pid, e.start) else { continue };
                if st.leaf_size >= pmd {
                    let c = huge_count.entry((e.pid, e.start)).or_insert(0);
                    *c = (*c).max(e.freq);
                    if e.stamp > self.prev_clock[cpu] {
                        huge_active.insert((e.pid, e.start));
                    }
                    continue;
                }
                if !st.inside_vma || e.freq < self.s.min_freq {
                    continue;
                }
                list.push(Cand { pid: e.pid, start: e.start, freq: e.freq, cpu, rank });
            }
            self.prev_clock[cpu] = k.pccs()[cpu].pmd.clock();
        }
        // Activity of this policy's huge pages; forget those no longer huge.
        let view = k.view();
        self.promoted.retain(|p| view.region(p.pid, p.start).is_some_and(|s| s.leaf_size >= pmd));
        for p in self.promoted.iter_mut() {
            if huge_active.contains(&(p.pid, p.start)) {
                p.last_active_read = read_no;
            }
        }

        // Step B: select.
        let order = self.order(&per_cpu);
        rec.candidates = order.len() as u64;

        // Step C: promote.
        let mode = self.alloc();
        let mut pressure = false;
        let mut next = 0;
        while next < order.len() && budget_attempts > 0 {
            let c = order[next];
            next += 1;
            budget_attempts -= 1;
            match k.promote(c.pid, c.start, pmd, mode) {
                Ok(()) => {
                    rec.promoted += 1;
                    self.promoted.push(Promoted { pid: c.pid, start: c.start, last_active_read: read_no });
                }
                Err(e @ (Refusal::NoMemory | Refusal::Budget)) => {
                    rec.failed += 1;
                    if e == Refusal::NoMemory {
                        self.totals.failed_no_memory += 1;
                    } else {
                        self.totals.failed_budget += 1;
                    }
                    pressure = true;
                    next -= 1; // not promoted: still pending for the demotion step
                    break;
                }
                // Raced with a remap (cannot happen in one thread) or not
                // eligible: not an attempt.
                Err(_) => budget_attempts += 1,
            }
        }
        if !pressure && k.budget_left() < rb && next < order.len() {
            pressure = true;
        }

        // Optional demotion under pressure (rec. 14).
        if self.s.demotion && pressure {
            while next < order.len() && budget_attempts > 0 {
                let c = order[next];
                let victim = self
                    .promoted
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !(p.pid == c.pid && p.start == c.start))
                    .map(|(i, p)| {
                        let idle = p.last_active_read + 2 <= read_no;
                        let count = huge_count.get(&(p.pid, p.start)).copied().unwrap_or(0);
                        (i, idle, count)
                    })
                    .filter(|&(_, idle, count)| idle || count < c.freq)
                    .min_by_key(|&(i, idle, count)| (!idle, count, i));
                let Some((vi, _, _)) = victim else { break };
                let v = self.promoted.remove(vi);
                if !k.demote(v.pid, v.start) {
                    continue;
                }
                rec.demoted += 1;
                budget_attempts -= 1;
                match k.promote(c.pid, c.start, pmd, mode) {
                    Ok(()) => {
                        rec.promoted += 1;
                        self.promoted.push(Promoted { pid: c.pid, start: c.start, last_active_read: read_no });
                        next += 1;
                    }
                    Err(_) => {
                        rec.failed += 1;
                        break;
                    }
                }
            }
        }

        if self.s.flush_on_read {
            for p in k.pccs_mut() {
                p.pmd.clear();
            }
        }

        self.totals.reads += 1;
        self.totals.promoted += rec.promoted;
        self.totals.failed += rec.failed;
        self.totals.demoted += rec.demoted;
        self.totals.promoted_1g += rec.promoted_1g;
        self.records.push(rec);
        self.reads += 1;
    }

    fn read_1g(&mut self, k: &mut Ctx<'_>, rec: &mut IntervalRecord, attempts: &mut u64) {
        let pud_bytes = 1u64 << k.shape().pud_shift;
        let Some(size_1g) = k.geometry().size_index_of(pud_bytes) else { return };
        let mut f2m: HashMap<(u16, u64), u32> = HashMap::new();
        let mut gb: Vec<PccEntry> = Vec::new();
        for p in k.pccs() {
            for e in p.pmd.dump() {
                let c = f2m.entry((e.pid, e.start & !(pud_bytes - 1))).or_insert(0);
                *c = (*c).max(e.freq);
            }
            if let Some(t) = &p.pud {
                t.dump_into(&mut gb);
            }
        }
        gb.sort_by(|a, b| b.freq.cmp(&a.freq).then(a.pid.cmp(&b.pid)).then(a.start.cmp(&b.start)));
        let mut done: HashSet<(u16, u64)> = HashSet::new();
        let mode = self.alloc();
        for e in gb {
            if *attempts == 0 {
                break;
            }
            if !done.insert((e.pid, e.start)) {
                continue;
            }
            let f2 = f2m.get(&(e.pid, e.start)).copied().unwrap_or(0) as u64;
            let f1 = e.freq as u64;
            if f1 < 512 || f1 < 512 * f2 {
                continue;
            }
            *attempts -= 1;
            match k.promote(e.pid, e.start, size_1g, mode) {
                Ok(()) => rec.promoted_1g += 1,
                Err(Refusal::NoMemory | Refusal::Budget) => rec.failed += 1,
                Err(_) => *attempts += 1,
            }
        }
        // Counters are per interval under this rule.
        for p in k.pccs_mut() {
            if let Some(t) = p.pud.as_mut() {
                t.clear();
            }
        }
    }
}

impl Policy for PccPolicy {
    fn name(&self) -> &'static str {
        "pcc"
    }
    fn decision_only_params(&self) -> Option<&'static [&'static str]> {
        Some(DECISION_ONLY)
    }
    fn describe(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "hardware": self.hw,
            "settings": self.s,
            "totals": self.totals,
            "intervals": self.records,
            "pcc_2m_stats": self.hw_stats,
            "pcc_1g_stats": self.hw_stats_1g,
            "error": self.enable_error,
        });
        // Only when the cap engaged, so ordinary results keep their bytes.
        if self.records.dropped() > 0 {
            v["intervals_dropped"] = self.records.dropped().into();
        }
        v
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        if let Err(e) = k.enable_pcc(self.hw.clone()) {
            self.enable_error = Some(e);
            return;
        }
        self.schedule_next(k);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        if id != READ {
            return;
        }
        self.read(k);
        self.schedule_next(k);
    }
    fn finish(&mut self, k: &mut Ctx<'_>) {
        // Hardware counters of all cpus' PCCs, for the result file.
        let add = |a: &mut PccStats, b: &PccStats| {
            a.updates += b.updates;
            a.filtered += b.filtered;
            a.hits += b.hits;
            a.inserts += b.inserts;
            a.evictions += b.evictions;
            a.halvings += b.halvings;
            a.invalidations += b.invalidations;
        };
        let (mut s2, mut s1) = (PccStats::default(), PccStats::default());
        for p in k.pccs() {
            add(&mut s2, &p.pmd.stats);
            if let Some(t) = &p.pud {
                add(&mut s1, &t.stats);
            }
        }
        self.hw_stats = Some(s2);
        self.hw_stats_1g = self.hw.enable_1g.then_some(s1);
        if let Some(w) = self.records.warning("pcc intervals") {
            k.note(w);
        }
    }
}

impl PccPolicy {
    /// Per-interval records (tests and reports).
    pub fn records(&self) -> Vec<IntervalRecord> {
        self.records.to_vec()
    }
}
