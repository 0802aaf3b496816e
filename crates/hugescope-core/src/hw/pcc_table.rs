//! The Promotion Candidate Cache (PCC, Manocha et al., MICRO'23, §3.2): a small
//! per-core, fully associative table next to the page walker that counts page
//! walks per 2MB region and keeps the most-walked ones. It is hardware: it
//! ranks regions; the OS (policy `pcc`) reads it and decides.
//!
//! Model (pcc.md §3 and §8):
//! - One `PccTable` per granularity. The 2MB table (default 128 entries) is
//!   fed when the walk found the PMD accessed bit already set (the cold-miss
//!   filter of §3.2: the first walk only sets the bit, the second inserts with
//!   freq 0, the third gives freq 1). The optional 1GB table (default 8
//!   entries, off unless enabled) uses the same test one level up: the PUD
//!   bit (pcc.md §8 rec. 2; the paper says "PGD").
//! - Tag = (pid, VA >> shift): the ASID keeps processes apart and entries
//!   survive context switches (pcc.md §8 rec. 4).
//! - Data = an N-bit saturating frequency counter (default 8 bits). When a
//!   counter reaches its maximum every counter of that table is halved, which
//!   keeps their order (§3.2.1, pcc.md §8 rec. 5).
//! - Replacement: `lfu_lru` (evict the lowest frequency, least recently used
//!   among equals: what the artifact's sorted list means) or `lru` (the
//!   paper's text, §3.2.1 "opts for the simpler policy"); pcc.md §8 rec. 1.
//!   `lfu_artifact` keeps the artifact's list itself (pcc.md §7): a hit is
//!   re-linked by its count from *before* the increment, so it goes behind
//!   the entries that already had the new count, and a tie among the lowest
//!   count evicts the entry that reached it last; a new entry goes in front
//!   of the other count-0 entries. Reads list the entries in that order.
//! - Any shootdown of a region invalidates its entry (§3.3 step C; pcc.md §3.6).
//! - Walks that end at an already promoted 2MB leaf still update the 2MB table
//!   (their PMD entry is the leaf, whose A bit is tested): those entries are
//!   demotion / 1GB candidates and the OS skips them when promoting (rec. 3).
//!   A walk ending at a 1GB leaf has no PMD entry and feeds only the 1GB table.
//!
//! Hot path: `touch` checks the slot of the previous hit, then finds the
//! region's slot by the region's number (`hw::region_ids`: the model's
//! stand-in for the hardware's parallel tag compare). A region keeps its
//! number while the table holds it and after, so an eviction (most walks of
//! a scattered workload) clears one array cell instead of deleting a key
//! from a hash index. No allocation once the regions have numbers.
//! Recency is a per-table counter stamped on each touched entry.

use super::region_ids::{RegionIds, SlotsById};
use serde::Serialize;

/// Victim choice when the table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Replacement {
    /// Lowest frequency first; least recently touched among equal frequencies.
    LfuLru,
    /// Least recently touched.
    Lru,
    /// The authors' artifact's frequency-sorted list, re-linked on a hit by
    /// the pre-increment count (`tlb.h`, `insertLFU`; pcc.md §7).
    LfuArtifact,
}

impl Replacement {
    pub fn parse(s: &str) -> Option<Replacement> {
        match s {
            "lfu_lru" | "lfu" => Some(Replacement::LfuLru),
            "lru" => Some(Replacement::Lru),
            "lfu_artifact" => Some(Replacement::LfuArtifact),
            _ => None,
        }
    }
}

/// Most entries of one PCC table. The paper's PCC has 128 (the sensitivity
/// study goes to 1024); one table exists per simulated cpu (up to
/// `trace::MAX_CPUS`). A table costs 24 bytes an entry and about 26 a
/// numbered region, at most max(2 x entries, 4096) regions
/// (`PccTable::numbering_bound`): 1.25 MiB at 16384 entries, so 256 such
/// tables stay under 330 MiB (about 110 KiB a table at the default 128).
pub const MAX_PCC_ENTRIES: usize = 1 << 14;
// Every slot number fits the slot maps of `hw/region_ids.rs` beside their "no slot".
const _: () = assert!(MAX_PCC_ENTRIES < super::region_ids::NO_SLOT as usize);

/// Geometry of one core's PCCs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PccConfig {
    /// 2MB-table entries (PCC §3.2.1: 128).
    pub entries: usize,
    /// Width of the 2MB table's counters (§3.2.1: 8 bits).
    pub counter_bits: u32,
    pub replacement: Replacement,
    /// Build and feed the 1GB table (§3.2.3, not evaluated in the paper).
    pub enable_1g: bool,
    /// 1GB-table entries (§3.2.3: 8).
    pub entries_1g: usize,
    /// Width of the 1GB table's counters (8 like the 2MB table; pcc.md §8
    /// rec. 13 uses 32 when the OS applies the 1GB rule).
    pub counter_bits_1g: u32,
}

impl Default for PccConfig {
    fn default() -> Self {
        PccConfig {
            entries: 128,
            counter_bits: 8,
            replacement: Replacement::LfuLru,
            enable_1g: false,
            entries_1g: 8,
            counter_bits_1g: 8,
        }
    }
}

impl PccConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (name, b) in [("counter_bits", self.counter_bits), ("counter_bits_1g", self.counter_bits_1g)] {
            if !(1..=32).contains(&b) {
                return Err(format!("PCC {name}={b}: must be between 1 and 32"));
            }
        }
        for (name, n) in [("entries", self.entries), ("entries_1g", self.entries_1g)] {
            if !(1..=MAX_PCC_ENTRIES).contains(&n) {
                return Err(format!("PCC {name}={n}: must be between 1 and {MAX_PCC_ENTRIES}"));
            }
        }
        Ok(())
    }
}

/// Counters of one table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PccStats {
    /// Walks that reached the table (accessed bit already set).
    pub updates: u64,
    /// Walks dropped by the cold-miss filter (accessed bit clear).
    pub filtered: u64,
    pub hits: u64,
    pub inserts: u64,
    pub evictions: u64,
    /// Times every counter was halved because one saturated.
    pub halvings: u64,
    /// Entries removed by shootdowns.
    pub invalidations: u64,
}

/// One entry as the OS reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PccEntry {
    pub pid: u16,
    /// First virtual address of the tagged region.
    pub start: u64,
    pub freq: u32,
    /// Recency: the table's touch counter when the entry was last touched.
    pub stamp: u64,
}

const VPN_MASK: u64 = (1 << 48) - 1;

/// A fully associative table of region counters at one granularity.
#[derive(Clone, Debug)]
pub struct PccTable {
    shift: u32,
    cap: usize,
    max: u32,
    repl: Replacement,
    keys: Vec<u64>,
    /// The region number of each slot's key (`ids`).
    id: Vec<u32>,
    /// Region numbers, and the slot of each numbered region held: `find`.
    ids: RegionIds,
    slot_of: SlotsById,
    freq: Vec<u32>,
    stamp: Vec<u64>,
    clock: u64,
    /// Slot of the last touched entry: consecutive walks often hit one region.
    last: usize,
    /// `LfuArtifact` only: slot indices in list order, head (kept longest)
    /// first; the victim is the last. Empty under the other policies.
    order: Vec<u32>,
    /// `LfuLru` only: (slot, stamp) of the entries at frequency 0, oldest
    /// stamp first, with stale records (the slot was hit or refilled since)
    /// among them. Under `LfuLru` the victim is the oldest entry at the
    /// lowest frequency, and while any entry sits at 0 that is the first
    /// record still current: found without scanning the table. A scattered
    /// workload inserts on most walks and its entries stay at 0, so this
    /// is its common case. Rebuilt from the table when frequencies fall to 0
    /// by halving or slots move (invalidation); a table without any entry at
    /// 0 falls back to the scan.
    zeros: std::collections::VecDeque<(u32, u64)>,
    pub stats: PccStats,
}

impl PccTable {
    /// `shift`: log2 of the region size (21 for 2MB); `bits`: counter width.
    pub fn new(entries: usize, bits: u32, repl: Replacement, shift: u32) -> PccTable {
        let max = if bits >= 32 { u32::MAX } else { (1u32 << bits.max(1)) - 1 };
        PccTable {
            shift,
            cap: entries,
            max,
            repl,
            keys: Vec::with_capacity(entries),
            id: Vec::with_capacity(entries),
            // Grows with the regions seen (up to `numbering_bound`).
            ids: RegionIds::with_room(entries),
            slot_of: SlotsById::default(),
            freq: Vec::with_capacity(entries),
            stamp: Vec::with_capacity(entries),
            clock: 0,
            last: 0,
            order: Vec::new(),
            zeros: std::collections::VecDeque::new(),
            stats: PccStats::default(),
        }
    }

    /// A table holding `items` (in any order; not for `lfu_artifact`, whose
    /// list order is state) with touch counter `clock` and counters `stats`:
    /// the state another form of the same table reached (the shared pass's
    /// riding PCCs, `hw::pcc_buckets`). Slots do not matter: stamps are
    /// unique, so victims and reads follow the entries alone.
    pub fn from_entries(entries: usize, bits: u32, repl: Replacement, shift: u32, clock: u64, stats: PccStats, items: &[PccEntry]) -> PccTable {
        let mut t = PccTable::new(entries, bits, repl, shift);
        for e in items {
            let k = Self::key(e.pid, e.start >> shift);
            let id = t.ids.id(k);
            t.slot_of.set(id, t.keys.len());
            t.id.push(id);
            t.keys.push(k);
            t.freq.push(e.freq);
            t.stamp.push(e.stamp);
        }
        t.clock = clock;
        t.stats = stats;
        t
    }

    /// The tag of region number `vpn` (VA >> shift) of `pid`: one u64 for
    /// every form of the table (`hw::pcc_buckets`, `hw::region_ids`).
    #[inline(always)]
    pub(crate) fn key(pid: u16, vpn: u64) -> u64 {
        ((pid as u64) << 48) | (vpn & VPN_MASK)
    }
    pub(crate) fn key_pid(key: u64) -> u16 {
        (key >> 48) as u16
    }
    /// First address of a key's region of size 1 << `shift`.
    pub(crate) fn key_start(key: u64, shift: u32) -> u64 {
        (key & VPN_MASK) << shift
    }

    pub fn shift(&self) -> u32 {
        self.shift
    }
    pub fn capacity(&self) -> usize {
        self.cap
    }
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
    /// The largest counter value; reaching it halves every counter.
    pub fn max_freq(&self) -> u32 {
        self.max
    }
    /// The table's touch counter (recency stamps are below or equal to it).
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Regions numbered before the numbering starts afresh: a bound on the
    /// numbering's memory (about 26 bytes a region) for footprints of many
    /// regions; below it (4096 regions = 8 GiB at the default size),
    /// numbers are never given twice. Starting afresh renumbers the entries
    /// held (at most `entries`, so at least as many new numbers come before
    /// the next time), and nothing else changes.
    fn numbering_bound(entries: usize) -> usize {
        (entries * 2).max(4096)
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if self.keys.get(self.last) == Some(&key) {
            return Some(self.last);
        }
        // Most walks of a scattered workload miss the table: a scan of all
        // the keys on every walk was the PCC's largest cost (22% of a GUPS
        // run at 128 entries, and linear in the sensitivity study's sizes).
        self.ids.get(key).and_then(|id| self.slot_of.get(id))
    }

    /// The number of region `key`, numbering it if needed.
    #[inline]
    fn number(&mut self, key: u64) -> u32 {
        if self.ids.len() >= Self::numbering_bound(self.cap) {
            self.renumber();
        }
        self.ids.id(key)
    }

    /// Start the numbering afresh with the entries held.
    #[cold]
    fn renumber(&mut self) {
        self.ids = RegionIds::with_room(self.cap);
        self.slot_of.clear();
        for (s, &k) in self.keys.iter().enumerate() {
            let id = self.ids.id(k);
            self.id[s] = id;
            self.slot_of.set(id, s);
        }
    }

    /// A walk that passed the filter: count it against the region of `va`.
    #[inline]
    pub fn touch(&mut self, pid: u16, va: u64) {
        let key = Self::key(pid, va >> self.shift);
        self.clock += 1;
        self.stats.updates += 1;
        let (found, id) = if self.keys.get(self.last) == Some(&key) {
            (Some(self.last), 0)
        } else {
            let id = self.number(key);
            (self.slot_of.get(id), id)
        };
        if let Some(i) = found {
            self.stats.hits += 1;
            self.stamp[i] = self.clock;
            self.last = i;
            if self.repl == Replacement::LfuArtifact {
                // Re-linked before the increment, as the artifact does.
                self.unlink(i);
                self.link(i);
            }
            self.freq[i] = self.freq[i].saturating_add(1);
            if self.freq[i] >= self.max {
                // PCC §3.2.1: on saturation halve all counters (order kept).
                self.stats.halvings += 1;
                for f in self.freq.iter_mut() {
                    *f /= 2;
                }
                self.rebuild_zeros();
            }
            return;
        }
        self.insert_new(key, id);
    }

    #[cold]
    fn insert_new(&mut self, key: u64, id: u32) {
        self.stats.inserts += 1;
        let i = if self.keys.len() < self.cap {
            self.slot_of.set(id, self.keys.len());
            self.keys.push(key);
            self.id.push(id);
            self.freq.push(0);
            self.stamp.push(0);
            self.keys.len() - 1
        } else {
            self.stats.evictions += 1;
            let v = match self.repl {
                Replacement::LfuLru => self.oldest_zero().unwrap_or_else(|| self.victim()),
                _ => self.victim(),
            };
            self.slot_of.remove(self.id[v]);
            self.keys[v] = key;
            self.id[v] = id;
            self.slot_of.set(id, v);
            if self.repl == Replacement::LfuArtifact {
                self.unlink(v);
            }
            v
        };
        // A new candidate starts at frequency 0 (§3.2.1).
        self.freq[i] = 0;
        self.stamp[i] = self.clock;
        self.last = i;
        if self.repl == Replacement::LfuLru {
            // The newest stamp: the back keeps the records in stamp order.
            self.zeros.push_back((i as u32, self.clock));
        }
        if self.repl == Replacement::LfuArtifact {
            self.link(i);
        }
    }

    /// `LfuLru`: the slot of the oldest entry at frequency 0, dropping the
    /// stale records in front of it; None if no entry is at 0.
    #[inline]
    fn oldest_zero(&mut self) -> Option<usize> {
        while let Some(&(slot, st)) = self.zeros.front() {
            let i = slot as usize;
            if i < self.keys.len() && self.freq[i] == 0 && self.stamp[i] == st {
                return Some(i);
            }
            self.zeros.pop_front();
        }
        None
    }

    /// `LfuLru`: the records of `zeros` from the table itself.
    fn rebuild_zeros(&mut self) {
        if self.repl != Replacement::LfuLru {
            return;
        }
        let mut z: Vec<(u32, u64)> =
            (0..self.keys.len()).filter(|&i| self.freq[i] == 0).map(|i| (i as u32, self.stamp[i])).collect();
        z.sort_unstable_by_key(|&(_, st)| st);
        self.zeros = z.into();
    }

    /// `LfuArtifact`: take slot `i` out of the list.
    fn unlink(&mut self, i: usize) {
        if let Some(p) = self.order.iter().position(|&s| s as usize == i) {
            self.order.remove(p);
        }
    }

    /// `LfuArtifact`: put slot `i` (not in the list) in front of the first
    /// entry whose count is not above its own current count (`insertLFU`).
    fn link(&mut self, i: usize) {
        let f = self.freq[i];
        let p = self.order.iter().position(|&s| self.freq[s as usize] <= f).unwrap_or(self.order.len());
        self.order.insert(p, i as u32);
    }

    /// The slot a full table evicts. Every touch stamps one entry with a
    /// new clock value, so stamps are unique and "lowest frequency, then
    /// oldest stamp" names one entry. It is found in passes without
    /// data-dependent branches (the lowest frequency, then the oldest stamp
    /// among its entries, then that stamp's slot): on a scattered workload
    /// nearly every walk inserts, and a scan of (frequency, stamp) pairs with
    /// a compare-and-branch per slot mispredicted on most of them.
    fn victim(&self) -> usize {
        match self.repl {
            Replacement::Lru => Self::oldest(&self.stamp, |_| true),
            Replacement::LfuLru => {
                let low = self.freq.iter().fold(u32::MAX, |m, &f| m.min(f));
                Self::oldest(&self.stamp, |i| self.freq[i] == low)
            }
            Replacement::LfuArtifact => self.order.last().map_or(0, |&s| s as usize),
        }
    }

    /// The first slot holding the smallest stamp among the slots `eligible`
    /// admits (0 if none): what `min_by_key` over the stamps returns.
    #[inline]
    fn oldest(stamp: &[u64], eligible: impl Fn(usize) -> bool) -> usize {
        // Selects, not branches: strictly smaller keeps the first of equals.
        let (mut best, mut at) = (u64::MAX, 0usize);
        for (i, &st) in stamp.iter().enumerate() {
            let k = if eligible(i) { st } else { u64::MAX };
            let lt = k < best;
            best = if lt { k } else { best };
            at = if lt { i } else { at };
        }
        at
    }

    /// Frequency of the entry for the region of `va`, if present.
    pub fn get(&self, pid: u16, va: u64) -> Option<u32> {
        self.find(Self::key(pid, va >> self.shift)).map(|i| self.freq[i])
    }

    /// Remove every entry of `pid` whose region overlaps [start, end).
    pub fn invalidate(&mut self, pid: u16, start: u64, end: u64) -> usize {
        if self.keys.is_empty() || end <= start {
            return 0;
        }
        let (lo, hi) = (Self::key(pid, start >> self.shift), Self::key(pid, (end - 1) >> self.shift));
        let mut n = 0;
        let mut i = 0;
        while i < self.keys.len() {
            let k = self.keys[i];
            if k >= lo && k <= hi {
                if self.repl == Replacement::LfuArtifact {
                    // The last slot moves into `i`: rename it in the list.
                    self.unlink(i);
                    let moved = self.keys.len() - 1;
                    if let Some(s) = self.order.iter_mut().find(|s| **s as usize == moved) {
                        *s = i as u32;
                    }
                }
                self.slot_of.remove(self.id[i]);
                let last = self.keys.len() - 1;
                if i != last {
                    self.slot_of.set(self.id[last], i);
                }
                self.keys.swap_remove(i);
                self.id.swap_remove(i);
                self.freq.swap_remove(i);
                self.stamp.swap_remove(i);
                n += 1;
            } else {
                i += 1;
            }
        }
        if n > 0 {
            self.last = 0;
            self.stats.invalidations += n as u64;
            self.rebuild_zeros();
        }
        n
    }

    /// Drop every entry (the artifact's flush after a single-thread read).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.id.clear();
        self.slot_of.clear();
        self.freq.clear();
        self.stamp.clear();
        self.order.clear();
        self.zeros.clear();
        self.last = 0;
    }

    /// The entry in slot `i` as the OS reads it.
    fn entry(&self, i: usize) -> PccEntry {
        let k = self.keys[i];
        PccEntry { pid: Self::key_pid(k), start: Self::key_start(k, self.shift), freq: self.freq[i], stamp: self.stamp[i] }
    }

    /// Append the entries in priority order (frequency descending, then most
    /// recent first: pcc.md §8 rec. 6) to `out`.
    /// (`lfu_artifact`: in the artifact's list order, which its reads follow.)
    pub fn dump_into(&self, out: &mut Vec<PccEntry>) {
        if self.repl == Replacement::LfuArtifact {
            out.extend(self.order.iter().map(|&s| self.entry(s as usize)));
            return;
        }
        let from = out.len();
        out.extend((0..self.keys.len()).map(|i| self.entry(i)));
        out[from..].sort_by(|a, b| b.freq.cmp(&a.freq).then(b.stamp.cmp(&a.stamp)));
    }

    /// The entries in priority order.
    pub fn dump(&self) -> Vec<PccEntry> {
        let mut v = Vec::with_capacity(self.keys.len());
        self.dump_into(&mut v);
        v
    }
}

/// One core's PCCs: the 2MB table and, if enabled, the 1GB table.
#[derive(Clone, Debug)]
pub struct Pcc {
    pub pmd: PccTable,
    pub pud: Option<PccTable>,
}

impl Pcc {
    /// `region_shift` / `pud_shift`: the PMD and PUD levels of the page table
    /// (21 and 30 on x86-64).
    pub fn new(cfg: &PccConfig, region_shift: u32, pud_shift: u32) -> Pcc {
        Pcc {
            pmd: PccTable::new(cfg.entries, cfg.counter_bits, cfg.replacement, region_shift),
            pud: cfg.enable_1g.then(|| PccTable::new(cfg.entries_1g, cfg.counter_bits_1g, cfg.replacement, pud_shift)),
        }
    }

    /// The walker's update after a last-level TLB miss (§3.2, pcc.md §3.2
    /// pseudo-code). `leaf_shift`: log2 of the leaf's page size; the accessed
    /// bits are the values the walk found, before it set them.
    #[inline]
    pub fn on_walk(&mut self, pid: u16, va: u64, leaf_shift: u32, pmd_a_was_set: bool, pud_a_was_set: bool) {
        if let Some(t) = self.pud.as_mut() {
            if leaf_shift <= t.shift {
                if pud_a_was_set {
                    t.touch(pid, va);
                } else {
                    t.stats.filtered += 1;
                }
            }
        }
        if leaf_shift <= self.pmd.shift {
            if pmd_a_was_set {
                self.pmd.touch(pid, va);
            } else {
                self.pmd.stats.filtered += 1;
            }
        }
    }

    /// A shootdown of [start, end) in `pid`: drop the entries of its regions.
    pub fn invalidate(&mut self, pid: u16, start: u64, end: u64) -> usize {
        let mut n = self.pmd.invalidate(pid, start, end);
        if let Some(t) = self.pud.as_mut() {
            n += t.invalidate(pid, start, end);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB2: u64 = 2 << 20;

    #[test]
    fn filter_then_insert_at_zero_then_count() {
        let mut p = Pcc::new(&PccConfig::default(), 21, 30);
        let va = 0x4000_0000 + 5 * MB2 + 123;
        p.on_walk(0, va, 12, false, false); // 1st walk: only sets the A bit
        assert!(p.pmd.is_empty());
        assert_eq!(p.pmd.stats.filtered, 1);
        p.on_walk(0, va, 12, true, true); // 2nd: inserted with freq 0
        assert_eq!(p.pmd.get(0, va), Some(0));
        p.on_walk(0, va + 4096, 12, true, true); // 3rd (same region): freq 1
        assert_eq!(p.pmd.get(0, va), Some(1));
        assert!(p.pud.is_none(), "1GB PCC is off unless enabled");
        // Another process's walk to the same VA is another entry (ASID tag).
        p.on_walk(1, va, 12, true, true);
        assert_eq!(p.pmd.get(1, va), Some(0));
        assert_eq!(p.pmd.get(0, va), Some(1));
    }

    #[test]
    fn saturation_halves_every_counter() {
        // 3-bit counters: maximum 7.
        let mut t = PccTable::new(4, 3, Replacement::LfuLru, 21);
        t.touch(0, 0); // A: 0
        t.touch(0, MB2); // B: 0
        t.touch(0, MB2); // B: 1
        t.touch(0, MB2); // B: 2
        t.touch(0, MB2); // B: 3
        t.touch(0, MB2); // B: 4
        for _ in 0..6 {
            t.touch(0, 0); // A: 1..6
        }
        assert_eq!((t.get(0, 0), t.get(0, MB2)), (Some(6), Some(4)));
        t.touch(0, 0); // A reaches 7: all halve -> A 3, B 2
        assert_eq!((t.get(0, 0), t.get(0, MB2)), (Some(3), Some(2)));
        assert_eq!(t.stats.halvings, 1);
        // 8-bit default: 255 is never held; it halves to 127.
        let mut t = PccTable::new(2, 8, Replacement::LfuLru, 21);
        for _ in 0..255 {
            t.touch(0, 0);
        }
        assert_eq!(t.get(0, 0), Some(254));
        t.touch(0, 0);
        assert_eq!(t.get(0, 0), Some(127));
    }

    #[test]
    fn lru_and_lfu_lru_pick_different_victims() {
        // A is old but frequent, B recent with freq 0, then C arrives.
        for (repl, evicted, kept) in [(Replacement::Lru, 0u64, 1u64), (Replacement::LfuLru, 1, 0)] {
            let mut t = PccTable::new(2, 8, repl, 21);
            for _ in 0..4 {
                t.touch(0, 0); // A freq 3
            }
            t.touch(0, MB2); // B freq 0, most recent
            t.touch(0, 2 * MB2); // C: table full, evict
            assert_eq!(t.get(0, evicted * MB2), None, "{repl:?}");
            assert!(t.get(0, kept * MB2).is_some(), "{repl:?}");
            assert_eq!(t.get(0, 2 * MB2), Some(0));
            assert_eq!(t.stats.evictions, 1);
        }
        // LFU ties go to the least recently touched.
        let mut t = PccTable::new(3, 8, Replacement::LfuLru, 21);
        t.touch(0, 0);
        t.touch(0, MB2);
        t.touch(0, 2 * MB2);
        t.touch(0, 0); // A freq 1; B, C freq 0, B older
        t.touch(0, 3 * MB2);
        assert_eq!(t.get(0, MB2), None);
        assert!(t.get(0, 2 * MB2).is_some());
    }

    #[test]
    fn dump_is_in_priority_order() {
        let mut t = PccTable::new(8, 8, Replacement::LfuLru, 21);
        t.touch(0, 0); // A 0
        t.touch(0, MB2); // B 0
        t.touch(0, MB2); // B 1
        t.touch(3, 2 * MB2); // C 0 (pid 3), most recent of the zeros
        let d = t.dump();
        let got: Vec<(u16, u64, u32)> = d.iter().map(|e| (e.pid, e.start, e.freq)).collect();
        assert_eq!(got, vec![(0, MB2, 1), (3, 2 * MB2, 0), (0, 0, 0)]);
    }

    #[test]
    fn invalidation_is_by_pid_and_range() {
        let mut t = PccTable::new(8, 8, Replacement::Lru, 21);
        for r in 0..4 {
            t.touch(0, r * MB2);
            t.touch(1, r * MB2);
        }
        assert_eq!(t.invalidate(0, MB2 + 5, 3 * MB2), 2); // regions 1 and 2 of pid 0
        assert_eq!(t.len(), 6);
        assert!(t.get(0, MB2).is_none() && t.get(0, 2 * MB2).is_none());
        assert!(t.get(0, 0).is_some() && t.get(0, 3 * MB2).is_some() && t.get(1, MB2).is_some());
    }

    #[test]
    fn one_gb_table_uses_the_pud_bit_and_skips_gb_leaves_for_2mb() {
        let cfg = PccConfig { enable_1g: true, ..Default::default() };
        let mut p = Pcc::new(&cfg, 21, 30);
        p.on_walk(0, 0x4000_0000, 12, true, false);
        assert!(p.pud.as_ref().unwrap().is_empty());
        assert_eq!(p.pmd.len(), 1);
        p.on_walk(0, 0x4000_0000, 12, true, true);
        assert_eq!(p.pud.as_ref().unwrap().get(0, 0x4000_0000), Some(0));
        // A walk ending at a 1GB leaf has no PMD entry: only the 1GB table counts it.
        p.on_walk(0, 0x8000_0000, 30, true, true);
        assert_eq!(p.pmd.get(0, 0x8000_0000), None);
        assert_eq!(p.pud.as_ref().unwrap().get(0, 0x8000_0000), Some(0));
        // A promoted 2MB leaf still feeds the 2MB table (demotion candidates).
        p.on_walk(0, 0xc000_0000, 21, true, true);
        assert_eq!(p.pmd.get(0, 0xc000_0000), Some(0));
    }

    /// The slot-by-slot model the table's scans replaced: a linear search
    /// and a `min_by_key` victim over (frequency, stamp). The table must pick
    /// the same slots on any stream of touches and invalidations.
    #[derive(Default)]
    struct Reference {
        slots: Vec<(u64, u32, u64)>,
        clock: u64,
    }

    impl Reference {
        fn touch(&mut self, key: u64, cap: usize, max: u32, repl: Replacement) {
            self.clock += 1;
            if let Some(i) = self.slots.iter().position(|s| s.0 == key) {
                self.slots[i].2 = self.clock;
                self.slots[i].1 = self.slots[i].1.saturating_add(1);
                if self.slots[i].1 >= max {
                    self.slots.iter_mut().for_each(|s| s.1 /= 2);
                }
            } else if self.slots.len() < cap {
                self.slots.push((key, 0, self.clock));
            } else {
                let n = self.slots.len();
                let v = match repl {
                    Replacement::Lru => (0..n).min_by_key(|&i| self.slots[i].2).unwrap(),
                    _ => (0..n).min_by_key(|&i| (self.slots[i].1, self.slots[i].2)).unwrap(),
                };
                self.slots[v] = (key, 0, self.clock);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn scans_pick_the_slots_of_a_linear_search(
            cap in 1usize..40,
            bits in 1u32..5,
            lru in proptest::bool::ANY,
            ops in proptest::collection::vec((0u64..64, 0u16..2, 0u8..20), 1..400),
        ) {
            let repl = if lru { Replacement::Lru } else { Replacement::LfuLru };
            let mut t = PccTable::new(cap, bits, repl, 21);
            let mut r = Reference::default();
            for (region, pid, kind) in ops {
                if kind == 0 {
                    // A shootdown of two regions: swap_remove moves slots.
                    t.invalidate(pid, region * MB2, (region + 2) * MB2);
                    let (lo, hi) = (PccTable::key(pid, region), PccTable::key(pid, region + 1));
                    let mut i = 0;
                    while i < r.slots.len() {
                        if (lo..=hi).contains(&r.slots[i].0) { r.slots.swap_remove(i); } else { i += 1; }
                    }
                } else {
                    t.touch(pid, region * MB2 + 77);
                    r.touch(PccTable::key(pid, region), cap, t.max_freq(), repl);
                }
                let slots: Vec<_> = (0..t.len()).map(|i| (t.keys[i], t.freq[i], t.stamp[i])).collect();
                proptest::prop_assert_eq!(&slots, &r.slots);
            }
        }
    }
}
