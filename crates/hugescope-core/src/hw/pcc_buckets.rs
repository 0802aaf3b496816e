//! The PCC's 2MB table (`hw::pcc_table::PccTable`, PCC §3.2) in constant time per
//! walk, for the shared pass's riding members (`os::members`), which feed
//! several tables on every walk.
//!
//! Same state and behaviour as `PccTable` under `lfu_lru` and `lru`: the
//! entries as a set of (region, frequency, recency stamp), the touch counter
//! and the statistics. Only the index differs. The caller numbers each
//! walk's region once for all banks (`hw::region_ids`), and a table finds
//! the region's slot at that number in its own array (evicting clears one
//! cell). Entries sit in lists per frequency (one list under `lru`) in stamp
//! order, so the victim (lowest frequency, then least recent; or least
//! recent) is the head of the lowest non-empty list, as in the classic O(1)
//! LFU. Stamps are unique (each touch stamps one entry with a new count), so
//! the victim and the read order do not depend on slots. Saturation halves
//! every counter (§3.2.1) and rebuilds the lists, as rarely as it happens.
//! `PccTable` stays the installed member's table; `to_table` and
//! `from_table` move a table between the two forms, entry for entry.

use super::pcc_table::{PccConfig, PccEntry, PccStats, PccTable, Replacement};
use super::region_ids::{RegionIds, SlotsById};

const NIL: u32 = u32::MAX;

/// Whether `cfg`'s 2MB table can take this form: `lfu_lru` or `lru`, counters
/// of at most 8 bits (one list per value), no 1GB table.
pub fn supports(cfg: &PccConfig) -> bool {
    cfg.replacement != Replacement::LfuArtifact && cfg.counter_bits <= 8 && !cfg.enable_1g
}

#[derive(Clone, Debug)]
pub struct BucketTable {
    shift: u32,
    cap: usize,
    bits: u32,
    max: u32,
    lru: bool,
    key: Vec<u64>,
    /// The region number (`RegionIds`) of each slot's entry.
    id: Vec<u32>,
    freq: Vec<u32>,
    stamp: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    free: Vec<u32>,
    /// Whether each slot holds an entry (free slots keep a stale key).
    live: Vec<bool>,
    /// Entries held.
    len: usize,
    /// Region number to slot, for the regions held.
    slot_of: SlotsById,
    head: Vec<u32>,
    tail: Vec<u32>,
    /// Lowest list that may be non-empty (exact whenever the table is full).
    minf: usize,
    clock: u64,
    pub stats: PccStats,
}

impl BucketTable {
    /// An empty table of `cfg`'s 2MB geometry; `shift`: log2 of a region.
    pub fn new(cfg: &PccConfig, shift: u32) -> BucketTable {
        let bits = cfg.counter_bits.clamp(1, 8);
        let max = (1u32 << bits) - 1;
        let lists = if cfg.replacement == Replacement::Lru {
            1
        } else {
            max as usize + 1
        };
        BucketTable {
            shift,
            cap: cfg.entries,
            bits,
            max,
            lru: cfg.replacement == Replacement::Lru,
            key: Vec::new(),
            id: Vec::new(),
            freq: Vec::new(),
            stamp: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            free: Vec::new(),
            live: Vec::new(),
            len: 0,
            slot_of: SlotsById::default(),
            head: vec![NIL; lists],
            tail: vec![NIL; lists],
            minf: 0,
            clock: 0,
            stats: PccStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    // The list helpers are always inlined: a riding bank runs them on every
    // walk, and with fat LTO the compiler left them out of line (a 9-size
    // sensitivity of GUPS then took about 10% longer).
    #[inline(always)]
    fn list(&self, s: usize) -> usize {
        if self.lru {
            0
        } else {
            self.freq[s] as usize
        }
    }

    #[inline(always)]
    fn unlink(&mut self, s: usize) {
        let l = self.list(s);
        let (p, n) = (self.prev[s], self.next[s]);
        if p == NIL {
            self.head[l] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail[l] = p;
        } else {
            self.prev[n as usize] = p;
        }
    }

    /// Append slot `s` at the most recent end of its list.
    #[inline(always)]
    fn append(&mut self, s: usize) {
        let l = self.list(s);
        let t = self.tail[l];
        self.prev[s] = t;
        self.next[s] = NIL;
        if t == NIL {
            self.head[l] = s as u32;
        } else {
            self.next[t as usize] = s as u32;
        }
        self.tail[l] = s as u32;
    }

    /// A walk that passed the filter: count it against the region of `va`,
    /// numbered `id` (`PccTable::touch`).
    #[inline]
    pub fn touch(&mut self, id: u32, pid: u16, va: u64) {
        self.clock += 1;
        self.stats.updates += 1;
        if let Some(s) = self.slot_of.get(id) {
            self.stats.hits += 1;
            self.stamp[s] = self.clock;
            let from = self.list(s);
            self.unlink(s);
            self.freq[s] = self.freq[s].saturating_add(1);
            if self.freq[s] >= self.max {
                self.append(s);
                self.halve();
                return;
            }
            self.append(s);
            if !self.lru && from == self.minf && self.head[from] == NIL {
                self.minf = from + 1;
            }
            return;
        }
        self.insert_new(id, PccTable::key(pid, va >> self.shift));
    }

    #[cold]
    fn insert_new(&mut self, id: u32, key: u64) {
        self.stats.inserts += 1;
        let s = if self.len < self.cap {
            self.len += 1;
            match self.free.pop() {
                Some(s) => s as usize,
                None => self.new_slot(),
            }
        } else {
            self.stats.evictions += 1;
            let l = if self.lru { 0 } else { self.lowest() };
            let v = self.head[l] as usize;
            self.unlink(v);
            self.slot_of.remove(self.id[v]);
            v
        };
        self.fill(s, id, key);
        // A new candidate starts at frequency 0 (§3.2.1).
        self.freq[s] = 0;
        self.stamp[s] = self.clock;
        self.append(s);
        self.minf = 0;
    }

    /// Slot `s` now holds region `key`, numbered `id`.
    #[inline(always)]
    fn fill(&mut self, s: usize, id: u32, key: u64) {
        self.live[s] = true;
        self.key[s] = key;
        self.id[s] = id;
        self.slot_of.set(id, s);
    }

    /// A slot past the last one, not yet holding an entry.
    fn new_slot(&mut self) -> usize {
        self.key.push(0);
        self.id.push(0);
        self.freq.push(0);
        self.stamp.push(0);
        self.prev.push(NIL);
        self.next.push(NIL);
        self.live.push(false);
        self.key.len() - 1
    }

    /// The lowest non-empty list (the table is not empty).
    fn lowest(&mut self) -> usize {
        while self.minf < self.head.len() && self.head[self.minf] == NIL {
            self.minf += 1;
        }
        self.minf
    }

    /// Live slots in stamp order (oldest first).
    fn by_stamp(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.key.len()).filter(|&s| self.live[s]).collect();
        v.sort_unstable_by_key(|&s| self.stamp[s]);
        v
    }

    /// PCC §3.2.1: a counter saturated; halve all (order kept), rebuild lists.
    #[cold]
    fn halve(&mut self) {
        self.stats.halvings += 1;
        let order = self.by_stamp();
        self.head.iter_mut().for_each(|h| *h = NIL);
        self.tail.iter_mut().for_each(|t| *t = NIL);
        for &s in &order {
            self.freq[s] /= 2;
            self.append(s);
        }
        self.minf = 0;
    }

    /// Remove every entry of `pid` whose region overlaps [start, end)
    /// (`PccTable::invalidate`).
    pub fn invalidate(&mut self, pid: u16, start: u64, end: u64) -> usize {
        if self.len == 0 || end <= start {
            return 0;
        }
        let (lo, hi) = (PccTable::key(pid, start >> self.shift), PccTable::key(pid, (end - 1) >> self.shift));
        let gone: Vec<usize> = (0..self.key.len()).filter(|&s| self.live[s] && self.key[s] >= lo && self.key[s] <= hi).collect();
        for &s in &gone {
            self.unlink(s);
            self.slot_of.remove(self.id[s]);
            self.live[s] = false;
            self.len -= 1;
            self.free.push(s as u32);
        }
        // Slots are reused from `free` in any order: results never depend on
        // a slot (stamps are unique), only on the entries.
        self.minf = 0;
        self.stats.invalidations += gone.len() as u64;
        gone.len()
    }

    /// The same table as a `PccTable` (for the member's reads and result).
    pub fn to_table(&self) -> PccTable {
        let repl = if self.lru {
            Replacement::Lru
        } else {
            Replacement::LfuLru
        };
        let entries: Vec<PccEntry> = self
            .by_stamp()
            .into_iter()
            .map(|s| PccEntry {
                pid: PccTable::key_pid(self.key[s]),
                start: PccTable::key_start(self.key[s], self.shift),
                freq: self.freq[s],
                stamp: self.stamp[s],
            })
            .collect();
        PccTable::from_entries(
            self.cap,
            self.bits,
            repl,
            self.shift,
            self.clock,
            self.stats.clone(),
            &entries,
        )
    }

    /// `t` in this form (`supports` its configuration `cfg`), its regions
    /// numbered by `ids`.
    pub fn from_table(t: &PccTable, cfg: &PccConfig, ids: &mut RegionIds) -> BucketTable {
        let mut b = BucketTable::new(cfg, t.shift());
        let mut entries = t.dump();
        entries.sort_unstable_by_key(|e| e.stamp);
        for e in entries {
            let s = b.new_slot();
            let key = PccTable::key(e.pid, e.start >> b.shift);
            b.fill(s, ids.id(key), key);
            b.freq[s] = e.freq;
            b.stamp[s] = e.stamp;
            b.len += 1;
            b.append(s);
        }
        b.clock = t.clock();
        b.stats = t.stats.clone();
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries as the OS reads them, with the touch counter and statistics.
    fn state(t: &PccTable) -> (Vec<PccEntry>, u64, PccStats) {
        (t.dump(), t.clock(), t.stats.clone())
    }

    #[test]
    fn same_state_as_the_hardware_table_on_random_walks() {
        // Few regions against small tables (evictions), narrow counters
        // (halvings), invalidations of ranges: after every step both forms
        // hold the same entries in the same read order, with the same counts.
        let mut x = 0x1234_5678_u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for repl in [Replacement::LfuLru, Replacement::Lru] {
            let mut halvings = 0;
            for (entries, bits) in [(1, 8), (2, 2), (4, 3), (16, 8), (64, 4)] {
                let cfg = PccConfig {
                    entries,
                    counter_bits: bits,
                    replacement: repl,
                    ..Default::default()
                };
                assert!(supports(&cfg));
                let mut hw = PccTable::new(entries, bits, repl, 21);
                let mut b = BucketTable::new(&cfg, 21);
                let mut ids = RegionIds::default();
                // The caller's part: number the region, then touch.
                let mut touch = |b: &mut BucketTable, pid: u16, va: u64| {
                    b.touch(ids.id(PccTable::key(pid, va >> 21)), pid, va)
                };
                for step in 0..20_000u64 {
                    let r = rnd();
                    // Skewed regions: some are hot (hits), most cold.
                    let region = if r % 3 == 0 { r % 5 } else { (r >> 8) % 40 };
                    let pid = ((r >> 20) % 2) as u16;
                    if r % 97 == 0 {
                        let (s, e) = (region << 21, (region + 1 + (r >> 30) % 3) << 21);
                        assert_eq!(hw.invalidate(pid, s, e), b.invalidate(pid, s, e));
                    } else {
                        hw.touch(pid, (region << 21) + (r >> 40) % (2 << 20));
                        touch(&mut b, pid, (region << 21) + (r >> 40) % (2 << 20));
                    }
                    if step % 97 == 0 || step < 200 {
                        assert_eq!(
                            state(&hw),
                            state(&b.to_table()),
                            "{repl:?} {entries} {bits} step {step}"
                        );
                    }
                }
                assert!(
                    hw.stats.evictions > 0 && hw.stats.invalidations > 0,
                    "{:?}",
                    hw.stats
                );
                halvings += hw.stats.halvings;
                // And back: a table rebuilt from its copy goes on the same way.
                let mut ids = RegionIds::default();
                let mut again = BucketTable::from_table(&hw, &cfg, &mut ids);
                for _ in 0..2000 {
                    let r = rnd();
                    hw.touch(0, (r % 50) << 21);
                    again.touch(ids.id(PccTable::key(0, r % 50)), 0, (r % 50) << 21);
                }
                assert_eq!(state(&hw), state(&again.to_table()));
            }
            assert!(
                halvings > 0,
                "narrow counters saturated somewhere ({repl:?})"
            );
        }
    }

    #[test]
    fn same_state_past_the_numbering_bound() {
        // 20,000 regions (40 GiB) against 16 entries: the hardware table
        // starts its numbering afresh several times (bound 4096), the
        // bucket form never; a hot set keeps some entries alive across it.
        let cfg = PccConfig {
            entries: 16,
            counter_bits: 4,
            ..Default::default()
        };
        let mut hw = PccTable::new(16, 4, Replacement::LfuLru, 21);
        let mut b = BucketTable::new(&cfg, 21);
        let mut ids = RegionIds::default();
        let mut x = 0x9e37_79b9_u64;
        for step in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let region = if x % 4 == 0 { x % 8 } else { (x >> 8) % 20_000 };
            let va = region << 21;
            if x % 1009 == 0 {
                assert_eq!(hw.invalidate(0, va, va + (4 << 21)), b.invalidate(0, va, va + (4 << 21)));
            } else {
                hw.touch(0, va);
                b.touch(ids.id(PccTable::key(0, region)), 0, va);
            }
            if step % 997 == 0 {
                assert_eq!(state(&hw), state(&b.to_table()), "step {step}");
                for r in 0..8 {
                    assert_eq!(hw.get(0, r << 21), b.to_table().get(0, r << 21));
                }
            }
        }
        assert_eq!(state(&hw), state(&b.to_table()));
        assert!(hw.stats.hits > 10_000 && hw.stats.evictions > 100_000, "{:?}", hw.stats);
        assert!(ids.len() > 3 * 4096, "the numbering bound was passed several times");
    }
}
