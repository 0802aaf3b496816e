//! Key-value store driven by YCSB-style operation mixes: the stand-in for Redis
//! and memcached in the Ingens (OSDI'16) and HawkEye evaluations.
//!
//! Store: an open-addressing hash table with linear probing (chosen over
//! chaining because its probe sequence is a deterministic, allocation-free
//! address stream; Redis' dict chains, memcached's table chains, so this is the
//! "index" part only). Each slot is 16 bytes: the 8-byte key and the index of
//! its value in the value heap. Keys 0 and `u64::MAX` mark empty slots and
//! tombstones. Values (`value_size` bytes each) live in a separate `values`
//! region, the stand-in for the allocator's heap; freed values go on a LIFO free
//! list (`freelist` region) and are reused first, as a slab allocator would.
//! Value copies are traced once per 64-byte line (memcpy touches whole lines).
//!
//! Phases: load (`records` inserts, traced, timed as setup), optional delete
//! phase (Ingens' Redis bloat scenario: insert N then delete a random
//! `delete_fraction` of the keys), run (`ops` operations). Key choice follows
//! YCSB: scrambled zipfian (theta 0.99), hotspot (80% of operations on 20% of
//! keys), uniform, latest (zipfian over recency).
//!
//! Presets over the same store: `memcached` (direct segments, ISCA'13) and
//! `redis` (Ingens' bloat experiment, OSDI'16 §3.2 and §6.3).

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::process::{Image, ImageCfg};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::{fnv64, mix64, Rng};
use crate::zipf::Zipf;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "kv",
        about: "hash-table key-value store (Redis/memcached stand-in) under YCSB-style mixes",
        params: common(vec![
            p("records", "int", "1M", "keys inserted in the load phase"),
            p("ops", "int", "2M", "operations in the run phase"),
            p("value_size", "size", "256", "bytes per value (multiple of 8)"),
            p("read_ratio", "float", "0.95", "share of reads in the run phase"),
            p("insert_ratio", "float", "0", "share of inserts of new keys (the rest are updates)"),
            p("distribution", "str", "zipfian", "key choice: zipfian (scrambled, theta 0.99), hotspot (80/20), uniform, latest"),
            p("delete_fraction", "float", "0", "after loading, delete this share of keys at random (Ingens' Redis bloat scenario)"),
            p("load_order", "str", "sequential", "key order of the load phase: sequential (key numbers ascending: a hotspot's hot keys have neighbouring values) or shuffled (a seeded permutation, as YCSB's hashed inserts: hot values scattered over the heap, FHPM's Redis)"),
        ]),
    }
}

/// memcached as the direct-segments paper runs it (ISCA'13 Table 2; reference
/// §8.2): the kv store with the slab arena and hash table allocated at
/// startup, Zipf(0.99) keys, 90% GET / 10% SET, every request also touching
/// its item's LRU links, and each worker thread's stack and network buffer
/// (small and hot, outside the segment).
pub fn memcached_info() -> WorkloadInfo {
    WorkloadInfo {
        name: "memcached",
        about: "memcached (direct segments, ISCA'13): kv with Zipf(0.99) keys, 90% GET / 10% SET, LRU links, worker stacks and network buffers",
        params: common(vec![
            p("records", "int", "200k", "items stored in the load phase"),
            p("ops", "int", "200k", "requests in the run phase"),
            p("value_size", "size", "256", "bytes per item value (multiple of 8)"),
            p("get_ratio", "float", "0.9", "share of GETs (the rest are SETs of existing keys)"),
        ]),
    }
}

/// Redis in Ingens' memory-bloat experiment (OSDI'16 §3.2 Table 5, §6.3
/// Table 10): 2M keys of 8KB objects, 70% of them deleted at random (jemalloc
/// returns the freed pages with MADV_DONTNEED), then served by GETs from
/// `redis-benchmark`, whose `-r` option draws keys uniformly from the key space
/// (deleted keys miss). Scaled down in `records`; the rest is the paper's.
pub fn redis_info() -> WorkloadInfo {
    WorkloadInfo {
        name: "redis",
        about: "Redis in Ingens' bloat experiment (OSDI'16 Tables 5, 10): kv with 8KB values, 70% of keys deleted at random, then GETs",
        params: common(vec![
            p("records", "int", "100k", "keys loaded (the paper's 2M, scaled)"),
            p("ops", "int", "200k", "requests served after the deletes"),
            p("value_size", "size", "8KiB", "bytes per value (multiple of 8; the paper's 8KB objects are two whole pages)"),
            p("delete_fraction", "float", "0.7", "share of keys deleted at random after loading"),
            p("get_ratio", "float", "1.0", "share of GETs (Table 10 measures GETs); the rest are SETs of existing keys"),
            p("distribution", "str", "uniform", "request keys: uniform (redis-benchmark -r), zipfian, hotspot or latest"),
            p("allocator", "str", "jemalloc", "how values sit in memory and go back to the OS: jemalloc (Redis's allocator: the value's string takes its size class, 10KiB for 8KiB, and a run of pages returns only when all its values are deleted; src/jemalloc.rs) or exact (each value in value_size bytes, a page returned when no live value overlaps it)"),
        ]),
    }
}

/// What memcached adds around the store: LRU links per item, and per worker
/// thread a stack and a network buffer.
#[derive(Clone, Debug)]
pub struct Frontend {
    pub image: ImageCfg,
    /// Bytes of each worker's connection read/write buffer.
    pub netbuf: u64,
}

/// Stack depth of a request (libevent callback, protocol parser, item lookup).
const REQUEST_STACK: u64 = 4096;
/// A request reads its command from, and writes its reply to, one line each
/// of the worker's network buffer.
const NETBUF: u64 = 4 << 10;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    Zipfian,
    Hotspot,
    Uniform,
    Latest,
}

#[derive(Clone, Debug)]
pub struct Cfg {
    pub records: u64,
    pub ops: u64,
    pub value_words: usize,
    pub read_ratio: f64,
    pub insert_ratio: f64,
    pub dist: Dist,
    pub delete_fraction: f64,
    pub seed: u64,
    pub threads: usize,
    /// Derived: deletes in the delete phase, inserts in the run phase.
    pub deletes: u64,
    pub inserts: u64,
    /// memcached only.
    pub frontend: Option<Frontend>,
    /// Load the keys in a seeded random order (values scattered by key).
    pub shuffled_load: bool,
    /// Words between consecutive value slots (the allocation each value
    /// gets: `value_words` unless an allocator model rounds it up).
    pub slot_words: usize,
    /// Value slots per allocator run: a run's pages go back to the OS only
    /// when all its slots are free (Redis's jemalloc; src/jemalloc.rs). None:
    /// a page goes back when no live value overlaps it.
    pub run_slots: Option<u64>,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    match r.workload {
        "memcached" => memcached_config(r),
        "redis" => redis_config(r),
        _ => kv_config(r),
    }
}

fn kv_config(r: &Resolved) -> Result<Cfg> {
    let records = r.int_min("records", 1)?;
    if records > u32::MAX as u64 {
        return Err(Error::input(format!("kv: parameter 'records' must be below 2^32, got {records}")));
    }
    let vs = r.int("value_size")?;
    if vs == 0 || vs % 8 != 0 || vs > (1 << 20) {
        return Err(Error::input(format!("kv: parameter 'value_size' must be a positive multiple of 8 up to 1MiB, got {vs}")));
    }
    let read_ratio = r.float_in("read_ratio", 0.0, 1.0)?;
    let insert_ratio = r.float_in("insert_ratio", 0.0, 1.0)?;
    if read_ratio + insert_ratio > 1.0 + 1e-12 {
        return Err(Error::input("kv: read_ratio + insert_ratio must not exceed 1"));
    }
    let dist = match r.str("distribution")? {
        "zipfian" | "zipf" => Dist::Zipfian,
        "hotspot" => Dist::Hotspot,
        "uniform" => Dist::Uniform,
        "latest" => Dist::Latest,
        other => {
            return Err(Error::input(format!(
                "kv: parameter 'distribution' must be zipfian, hotspot, uniform or latest, got '{other}'"
            )))
        }
    };
    let delete_fraction = r.float_in("delete_fraction", 0.0, 1.0)?;
    // The presets (memcached, redis) do not expose the load order: sequential.
    let shuffled_load = match r.map.get("load_order").and_then(|v| v.as_str()).unwrap_or("sequential") {
        "sequential" => false,
        "shuffled" => true,
        other => return Err(Error::input(format!("kv: parameter 'load_order' must be sequential or shuffled, got '{other}'"))),
    };
    let ops = r.int("ops")?;
    let mut c = Cfg {
        records,
        ops,
        value_words: (vs / 8) as usize,
        read_ratio,
        insert_ratio,
        dist,
        delete_fraction,
        seed: r.int("seed")?,
        threads: r.threads()?,
        deletes: (records as f64 * delete_fraction).round() as u64,
        inserts: 0,
        frontend: None,
        shuffled_load,
        slot_words: (vs / 8) as usize,
        run_slots: None,
    };
    // The operation types come from their own stream, so the insert count (and
    // so the exact capacity) is known before the run.
    let mut g = OpGen::new(&c);
    c.inserts = (0..ops).filter(|_| g.next_type() == OpType::Insert).count() as u64;
    Ok(c)
}

/// A preset's kv configuration: its `get_ratio` becomes the read ratio and
/// `fixed` sets the kv parameters the preset does not expose.
fn preset_config(r: &Resolved, fixed: &[(&str, Value)]) -> Result<Cfg> {
    let mut map = r.map.clone();
    let get = r.float_in("get_ratio", 0.0, 1.0)?;
    map.remove("get_ratio");
    map.insert("read_ratio".into(), Value::from(get));
    for (k, v) in fixed {
        map.insert((*k).into(), v.clone());
    }
    kv_config(&Resolved { workload: r.workload, map })
}

/// memcached: the kv configuration it amounts to, plus its frontend.
fn memcached_config(r: &Resolved) -> Result<Cfg> {
    // SETs overwrite existing items; the cache neither grows nor evicts.
    let fixed = [
        ("distribution", Value::from("zipfian")),
        ("insert_ratio", Value::from(0.0)),
        ("delete_fraction", Value::from(0.0)),
    ];
    let threads = r.threads()?;
    let mut c = preset_config(r, &fixed)?;
    c.frontend = Some(Frontend { image: ImageCfg { threads, stack_size: 8 << 20, bss: 64 << 10, code: 256 << 10 }, netbuf: NETBUF });
    Ok(c)
}

/// Redis in Ingens' bloat experiment: SETs overwrite (no new keys, so the
/// holes the deletes leave are never refilled; Ingens §3.2 / §6.3).
fn redis_config(r: &Resolved) -> Result<Cfg> {
    let mut map = r.map.clone();
    let allocator = r.str("allocator")?.to_string();
    map.remove("allocator");
    let mut c = preset_config(&Resolved { workload: r.workload, map }, &[("insert_ratio", Value::from(0.0))])?;
    match allocator.as_str() {
        "exact" => {}
        "jemalloc" => {
            // Redis keeps the value as an sds string (header + bytes + NUL)
            // in one jemalloc allocation of its size class (Ingens §3.2's
            // 8KB objects: 8198 bytes, the 10 KiB class, two per 5-page run).
            let class = crate::jemalloc::size_class(crate::jemalloc::redis_string_bytes(c.value_words as u64 * 8));
            c.slot_words = (class / 8) as usize;
            c.run_slots = Some(crate::jemalloc::regions_per_run(class));
        }
        other => return Err(Error::input(format!("redis: parameter 'allocator' must be jemalloc or exact, got '{other}'"))),
    }
    Ok(c)
}

impl Cfg {
    fn slots(&self) -> u64 {
        (2 * (self.records + self.deletes + self.inserts)).next_power_of_two().max(16)
    }
    fn value_slots(&self) -> u64 {
        self.records + self.inserts
    }
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("table", c.slots() * 16)?;
    l.add("values", c.value_slots() * c.slot_words as u64 * 8)?;
    l.add("freelist", c.deletes.max(1) * 4)?;
    if let Some(f) = &c.frontend {
        l.add("lru", c.value_slots() * 8)?;
        // Connection buffers are malloc'd but the reference keeps them out of
        // the segment (§8.2): opt-out anonymous memory.
        l.add_kind("netbuf", f.netbuf * f.image.threads as u64, RegionKind::Anon)?.segment_opt_out = true;
        f.image.add_regions(&mut l)?;
    }
    Ok(l)
}

// ---------------------------------------------------------------------------
// YCSB key generators (ranks from `crate::zipf`).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpType {
    Read,
    Update,
    Insert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read(u64),
    Update(u64),
    Insert(u64),
}

/// The run phase's operation stream (key numbers, not keys).
pub struct OpGen {
    types: Rng,
    keys: Rng,
    dist: Dist,
    records: u64,
    inserted: u64,
    read_ratio: f64,
    insert_ratio: f64,
    zipf: Option<Zipf>,
}

impl OpGen {
    pub fn new(c: &Cfg) -> Self {
        let zipf = match c.dist {
            Dist::Zipfian | Dist::Latest => Some(Zipf::new(c.records)),
            _ => None,
        };
        OpGen {
            types: Rng::stream(c.seed, 10),
            keys: Rng::stream(c.seed, 11),
            dist: c.dist,
            records: c.records,
            inserted: 0,
            read_ratio: c.read_ratio,
            insert_ratio: c.insert_ratio,
            zipf,
        }
    }
    fn next_type(&mut self) -> OpType {
        let r = self.types.f64();
        if r < self.read_ratio {
            OpType::Read
        } else if r < self.read_ratio + self.insert_ratio {
            OpType::Insert
        } else {
            OpType::Update
        }
    }
    fn pick(&mut self) -> u64 {
        let count = self.records + self.inserted;
        match self.dist {
            Dist::Uniform => self.keys.below(count),
            Dist::Hotspot => {
                let hot = ((count as f64 * 0.2) as u64).max(1);
                if self.keys.f64() < 0.8 || hot == count {
                    self.keys.below(hot)
                } else {
                    hot + self.keys.below(count - hot)
                }
            }
            Dist::Zipfian => {
                // Scrambled: popular ranks are spread over the key space.
                let z = self.zipf.as_ref().map(|z| z.next(&mut self.keys)).unwrap_or(0);
                fnv64(z) % self.records
            }
            Dist::Latest => {
                let z = match self.zipf.as_mut() {
                    Some(z) => {
                        z.grow(count);
                        z.next(&mut self.keys)
                    }
                    None => 0,
                };
                count - 1 - z.min(count - 1)
            }
        }
    }
    pub fn next_op(&mut self) -> Op {
        match self.next_type() {
            OpType::Read => Op::Read(self.pick()),
            OpType::Update => Op::Update(self.pick()),
            OpType::Insert => {
                let kn = self.records + self.inserted;
                self.inserted += 1;
                Op::Insert(kn)
            }
        }
    }
}

/// The 8-byte key of key number `kn` (YCSB hashes its key numbers too).
pub fn key_of(kn: u64) -> u64 {
    let k = mix64(kn ^ 0x6b76_5f6b_6579_7321);
    if k == EMPTY || k == TOMB {
        0x0123_4567_89ab_cdef
    } else {
        k
    }
}

/// Word `j` of the value written for `key` at version `ver`.
#[inline]
pub fn value_word(key: u64, ver: u64, j: usize) -> u64 {
    mix64(key ^ ver.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((j as u64) << 48))
}

/// Key numbers in load order when it is shuffled (None: ascending). YCSB
/// hashes its insert order, so a hotspot's key range lands on values spread
/// over the heap: FHPM §6.1's Redis, whose hot 4KB values are scattered
/// over its huge pages (PSR near 1, Table 1).
pub fn load_order(c: &Cfg) -> Option<Vec<u32>> {
    c.shuffled_load.then(|| {
        let mut v: Vec<u32> = (0..c.records as u32).collect();
        let mut rng = Rng::stream(c.seed, 13);
        for i in (1..v.len()).rev() {
            v.swap(i, rng.below(i as u64 + 1) as usize);
        }
        v
    })
}

/// Key numbers deleted in the delete phase, in deletion order.
pub fn delete_order(c: &Cfg) -> Vec<u32> {
    let mut v: Vec<u32> = (0..c.records as u32).collect();
    let mut rng = Rng::stream(c.seed, 12);
    let d = c.deletes as usize;
    for i in 0..d.min(v.len()) {
        let j = i + rng.below((v.len() - i) as u64) as usize;
        v.swap(i, j);
    }
    v.truncate(d);
    v
}

// ---------------------------------------------------------------------------
// The store.

const EMPTY: u64 = 0;
const TOMB: u64 = u64::MAX;
/// Words per traced value line (64 bytes).
const LINE: usize = 8;

struct Store {
    tab: Arr<u64>,
    vals: Arr<u64>,
    free: Arr<u32>,
    free_top: usize,
    fresh: u64,
    value_slots: u64,
    mask: u64,
    shift: u32,
    vw: usize,
    /// Words from one value slot to the next (>= vw).
    stride: usize,
    /// Value slots per allocator run (None: pages are returned one by one).
    run_slots: Option<u64>,
    read_acc: u64,
    /// Value slots freed by deletes (bookkeeping of the allocator, untraced).
    freed: Vec<u32>,
    /// memcached: (prev, next) LRU links per item, bumped on every access.
    lru: Option<Arr<u32>>,
}

impl Store {
    #[inline]
    fn home(&self, k: u64) -> u64 {
        k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift
    }

    /// Move item `vs` to the LRU head: read its links, relink it.
    fn bump<M: Mem>(&mut self, m: &mut M, vs: u64) {
        if let Some(lru) = &mut self.lru {
            let i = 2 * vs as usize;
            let prev = lru.ld(m, i);
            let next = lru.ld(m, i + 1);
            lru.st(m, i, next);
            lru.st(m, i + 1, prev.wrapping_add(1));
        }
    }

    fn read_value<M: Mem>(&mut self, m: &mut M, vs: u64) {
        self.bump(m, vs);
        let base = vs as usize * self.stride;
        let mut acc = 0u64;
        for j in 0..self.vw {
            acc ^= if j % LINE == 0 { self.vals.ld(m, base + j) } else { self.vals[base + j] };
        }
        self.read_acc = self.read_acc.wrapping_add(acc);
    }

    fn write_value<M: Mem>(&mut self, m: &mut M, vs: u64, key: u64, ver: u64) {
        self.bump(m, vs);
        let base = vs as usize * self.stride;
        for j in 0..self.vw {
            let w = value_word(key, ver, j);
            if j % LINE == 0 {
                self.vals.st(m, base + j, w);
            } else {
                self.vals[base + j] = w;
            }
        }
    }

    fn get<M: Mem>(&mut self, m: &mut M, k: u64) -> bool {
        let mut i = self.home(k);
        loop {
            let key = self.tab.ld(m, 2 * i as usize);
            if key == k {
                let vs = self.tab.ld(m, 2 * i as usize + 1);
                self.read_value(m, vs);
                return true;
            }
            if key == EMPTY {
                return false;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert or overwrite.
    fn put<M: Mem>(&mut self, m: &mut M, k: u64, ver: u64) -> Result<()> {
        let mut i = self.home(k);
        let mut tomb = None;
        loop {
            let key = self.tab.ld(m, 2 * i as usize);
            if key == k {
                let vs = self.tab.ld(m, 2 * i as usize + 1);
                self.write_value(m, vs, k, ver);
                return Ok(());
            }
            if key == TOMB && tomb.is_none() {
                tomb = Some(i);
            }
            if key == EMPTY {
                break;
            }
            i = (i + 1) & self.mask;
        }
        let slot = tomb.unwrap_or(i) as usize;
        let vs = if self.free_top > 0 {
            self.free_top -= 1;
            self.free.ld(m, self.free_top) as u64
        } else {
            if self.fresh >= self.value_slots {
                return Err(Error::input("kv: value heap exhausted (internal capacity error)"));
            }
            self.fresh += 1;
            self.fresh - 1
        };
        self.tab.st(m, 2 * slot, k);
        self.tab.st(m, 2 * slot + 1, vs);
        self.write_value(m, vs, k, ver);
        Ok(())
    }

    fn delete<M: Mem>(&mut self, m: &mut M, k: u64) -> bool {
        let mut i = self.home(k);
        loop {
            let key = self.tab.ld(m, 2 * i as usize);
            if key == k {
                let vs = self.tab.ld(m, 2 * i as usize + 1);
                self.tab.st(m, 2 * i as usize, TOMB);
                if self.free_top < self.free.len() {
                    self.free.st(m, self.free_top, vs as u32);
                    self.free_top += 1;
                }
                self.freed.push(vs as u32);
                return true;
            }
            if key == EMPTY {
                return false;
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// Return to the OS every run of value-heap pages whose slots were all freed,
/// as Redis's allocator (jemalloc) purges dirty pages after mass deletion.
/// This is what makes huge pages bloat (Ingens §3.2, Table 5): the 4KB pages
/// go back, but a 2MB page that still holds one live value cannot.
fn purge_free_pages<M: Mem>(s: &mut Store, m: &mut M) {
    if s.freed.is_empty() {
        return;
    }
    let slot_bytes = (s.stride * 8) as u64;
    let pages = (s.value_slots * slot_bytes).div_ceil(4096) as usize;
    let mut live = vec![0u32; pages];
    let page_of = |slot: u64, b: u64| ((slot * slot_bytes + b) / 4096) as usize;
    // Count, per page, the slot bytes still in use (slots may straddle pages).
    let mut freed = vec![false; s.value_slots as usize];
    for &f in &s.freed {
        freed[f as usize] = true;
    }
    for slot in 0..s.fresh.min(s.value_slots) {
        if freed[slot as usize] {
            continue;
        }
        match s.run_slots {
            // A run keeps every page while one of its values lives.
            Some(n) => {
                let first = slot / n * n;
                for p in page_of(first, 0)..=page_of(first + n - 1, slot_bytes - 1).min(pages - 1) {
                    live[p] += 1;
                }
            }
            None => {
                live[page_of(slot, 0)] += 1;
                live[page_of(slot, slot_bytes - 1)] += 1;
            }
        }
    }
    // Pages never handed out are untouched and need no purge.
    let used_pages = page_of(s.fresh.min(s.value_slots).max(1), 0);
    let mut p = 0;
    while p < used_pages.min(pages) {
        if live[p] != 0 {
            p += 1;
            continue;
        }
        let q = (p..used_pages.min(pages)).find(|&q| live[q] != 0).unwrap_or(used_pages.min(pages));
        let words_per_page = 4096 / 8;
        m.release(&mut s.vals, p * words_per_page, (q - p) * words_per_page);
        p = q;
    }
    s.freed.clear();
}

/// Order-independent checksum of a set of (key, value words) pairs.
pub fn entry_hash(key: u64, words: impl Iterator<Item = u64>) -> u64 {
    mix64(key ^ crate::hash_words(words))
}

/// Operations per scheduling chunk (one simulated thread's burst).
const CHUNK: u64 = 256;
const PROGRESS: u64 = 1_000_000;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let slots = c.slots();
    let mut s = Store {
        tab: m.alloc(l.get("table")?, 2 * slots as usize)?,
        vals: m.alloc(l.get("values")?, c.value_slots() as usize * c.slot_words)?,
        free: m.alloc(l.get("freelist")?, c.deletes as usize)?,
        free_top: 0,
        fresh: 0,
        value_slots: c.value_slots(),
        mask: slots - 1,
        shift: 64 - slots.trailing_zeros(),
        vw: c.value_words,
        stride: c.slot_words,
        run_slots: c.run_slots,
        read_acc: 0,
        freed: Vec::new(),
        lru: match &c.frontend {
            Some(_) => Some(m.alloc(l.get("lru")?, 2 * c.value_slots() as usize)?),
            None => None,
        },
    };
    let mut front = match &c.frontend {
        Some(f) => {
            let netbuf: Arr<u64> = m.alloc(l.get("netbuf")?, (f.netbuf / 8) as usize * f.image.threads)?;
            Some((Image::alloc(&f.image, l, m)?, netbuf, (f.netbuf / 8) as usize))
        }
        None => None,
    };
    let cpu = |i: u64| ((i / CHUNK) % c.threads as u64) as usize;
    // Load phase: key numbers in order, or in a seeded permutation.
    let load = load_order(c);
    for i in 0..c.records {
        let kn = load.as_ref().map_or(i, |v| v[i as usize] as u64);
        if i % CHUNK == 0 {
            m.set_cpu(cpu(i));
        }
        s.put(m, key_of(kn), 0)?;
        if (i + 1) % PROGRESS == 0 {
            m.progress(&format!("load:{}", i + 1));
        }
    }
    m.progress("loaded");
    // Delete phase.
    let order = delete_order(c);
    for (i, &kn) in order.iter().enumerate() {
        if i as u64 % CHUNK == 0 {
            m.set_cpu(cpu(i as u64));
        }
        s.delete(m, key_of(kn as u64));
    }
    if !order.is_empty() {
        m.progress(&format!("deleted:{}", order.len()));
    }
    purge_free_pages(&mut s, m);
    drop(order);
    // Run phase.
    m.begin_run();
    let mut g = OpGen::new(c);
    let (mut hits, mut misses, mut updates, mut inserts) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..c.ops {
        if i % CHUNK == 0 {
            m.set_cpu(cpu(i));
        }
        if let Some((image, netbuf, words)) = &mut front {
            // A worker reads the request from its connection buffer and runs
            // its handler's call chain; the reply goes back to the buffer.
            let t = cpu(i);
            let line = t * *words + (i as usize * 8) % *words;
            netbuf.ld(m, line);
            image.call(m, t, REQUEST_STACK, i);
            netbuf.st(m, line, i);
        }
        match g.next_op() {
            Op::Read(kn) => {
                if s.get(m, key_of(kn)) {
                    hits += 1;
                } else {
                    misses += 1;
                }
            }
            Op::Update(kn) => {
                s.put(m, key_of(kn), i + 1)?;
                updates += 1;
            }
            Op::Insert(kn) => {
                s.put(m, key_of(kn), i + 1)?;
                inserts += 1;
            }
        }
        if (i + 1) % PROGRESS == 0 {
            m.progress(&format!("ops:{}", i + 1));
        }
    }
    m.end_run();
    let (mut sum, mut live) = (0u64, 0u64);
    for i in 0..slots as usize {
        let k = s.tab[2 * i];
        if k != EMPTY && k != TOMB {
            let base = s.tab[2 * i + 1] as usize * s.stride;
            sum = sum.wrapping_add(entry_hash(k, s.vals[base..base + s.vw].iter().copied()));
            live += 1;
        }
    }
    Ok(json!({
        "checksum": crate::hex(sum), "live_keys": live, "read_hits": hits, "read_misses": misses,
        "updates": updates, "inserts": inserts, "deletes": c.deletes, "read_acc": crate::hex(s.read_acc),
        "table_slots": slots, "value_slots_used": s.fresh,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use crate::registry::{resolve, Params};
    use hugescope_core::trace::CountingSink;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, serde_json::Value)]) -> Cfg {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.insert(k.to_string(), v.clone());
        }
        config(&resolve(&info(), &p).unwrap()).unwrap()
    }

    /// The same operations applied to a HashMap.
    fn model(c: &Cfg) -> (u64, u64, u64) {
        let mut map: HashMap<u64, u64> = (0..c.records).map(|kn| (key_of(kn), 0)).collect();
        for kn in delete_order(c) {
            map.remove(&key_of(kn as u64));
        }
        let mut g = OpGen::new(c);
        let mut hits = 0;
        for i in 0..c.ops {
            match g.next_op() {
                Op::Read(kn) => hits += map.contains_key(&key_of(kn)) as u64,
                Op::Update(kn) | Op::Insert(kn) => {
                    map.insert(key_of(kn), i + 1);
                }
            }
        }
        let sum = map.iter().fold(0u64, |acc, (&k, &ver)| {
            acc.wrapping_add(entry_hash(k, (0..c.value_words).map(|j| value_word(k, ver, j))))
        });
        (sum, map.len() as u64, hits)
    }

    #[test]
    fn final_contents_match_a_hashmap_model() {
        use serde_json::json;
        for dist in ["zipfian", "hotspot", "uniform", "latest"] {
            let c = cfg(&[
                ("records", json!(5000)),
                ("ops", json!(20000)),
                ("value_size", json!("72")),
                ("read_ratio", json!(0.5)),
                ("insert_ratio", json!(0.1)),
                ("delete_fraction", json!(0.7)),
                ("distribution", json!(dist)),
                ("threads", json!(2)),
            ]);
            let l = layout(&c).unwrap();
            let mut sink = CountingSink::default();
            let mut m = Traced::new(&mut sink);
            let res = run(&c, &l, &mut m).unwrap();
            let (sum, live, hits) = model(&c);
            assert_eq!(res["checksum"], crate::hex(sum), "{dist}");
            assert_eq!(res["live_keys"], live, "{dist}");
            assert_eq!(res["read_hits"], hits, "{dist}");
            assert_eq!(res["deletes"], 3500);
            assert!(res["inserts"].as_u64().unwrap() > 1000);
        }
    }

    #[test]
    fn a_shuffled_load_scatters_the_hot_key_range_and_keeps_the_contents() {
        use serde_json::json;
        let c = cfg(&[("records", json!(10_000)), ("ops", json!(5000)), ("distribution", json!("hotspot")), ("load_order", json!("shuffled"))]);
        let order = load_order(&c).unwrap();
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..10_000).collect::<Vec<u32>>());
        // The hot keys (numbers below 2000) take value slots all over the
        // heap: each tenth of it holds 10-30% of them (20% expected).
        for tenth in order.chunks(1000) {
            let hot = tenth.iter().filter(|&&kn| kn < 2000).count();
            assert!((100..=300).contains(&hot), "{hot}");
        }
        let l = layout(&c).unwrap();
        let mut sink = CountingSink::default();
        let res = run(&c, &l, &mut Traced::new(&mut sink)).unwrap();
        let (sum, live, hits) = model(&c);
        assert_eq!((res["checksum"].clone(), res["live_keys"].clone(), res["read_hits"].clone()), (json!(crate::hex(sum)), json!(live), json!(hits)));
        assert!(load_order(&cfg(&[("records", json!(10))])).is_none());
        let mut p = Params::new();
        p.insert("load_order".into(), json!("hashed"));
        let e = config(&resolve(&info(), &p).unwrap()).err().unwrap().to_string();
        assert!(e.contains("load_order") && e.contains("hashed"), "{e}");
    }

    #[test]
    fn hotspot_is_80_20() {
        let n = 200_000;
        let c = cfg(&[("records", serde_json::json!(1000)), ("distribution", serde_json::json!("hotspot")), ("read_ratio", serde_json::json!(1.0))]);
        let mut g = OpGen::new(&c);
        let hot = (0..n).filter(|_| matches!(g.next_op(), Op::Read(k) if k < 200)).count() as f64 / n as f64;
        assert!((hot - 0.8).abs() < 0.01, "{hot}");
    }
}
