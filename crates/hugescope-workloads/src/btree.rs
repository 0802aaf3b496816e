//! B+-tree index with point lookups and inserts: the database stand-in (the
//! index-probe part of a storage engine), and with `threads` the
//! "many threads with stacks" layout: every thread has its own stack region
//! (glibc's default 8MiB) of which only the top frames are ever touched, the
//! pattern behind huge-page bloat of thread stacks discussed by Ingens and
//! HawkEye.
//!
//! Nodes are 4KiB (512 words): word 0 holds the leaf flag and key count, words
//! 1..=255 the keys, words 256..=511 the 256 children (inner nodes) or 255
//! values plus the next-leaf link (leaves); so the fanout is 256. Lookups
//! binary-search each node on the way down; every level is a function call that
//! writes a 4-word frame (saved registers, arguments) on the calling thread's
//! stack and reads it back on return. The tree is bulk-loaded with `records`
//! keys untraced (index construction is setup), then `ops` operations run,
//! `insert_ratio` of them inserts of new keys.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::zipf::Zipf;
use crate::layout::Layout;
use crate::mem::{Arr, Mem, Quiet};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::{fnv64, mix64, Rng};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "btree",
        about: "B+-tree index (4KiB nodes, fanout 256) with point lookups and inserts; per-thread stack regions",
        params: common(vec![
            p("records", "int", "1M", "keys bulk-loaded before the run"),
            p("ops", "int", "2M", "operations in the run phase"),
            p("insert_ratio", "float", "0.05", "share of operations that insert a new key (the rest are lookups)"),
            p("distribution", "str", "uniform", "lookup keys: uniform or zipfian (scrambled, theta 0.99)"),
            p("stack_size", "size", "8MiB", "bytes of each thread's stack region"),
        ]),
    }
}

pub struct Cfg {
    pub records: u64,
    pub ops: u64,
    pub insert_ratio: f64,
    pub zipfian: bool,
    pub stack_size: u64,
    pub seed: u64,
    pub threads: usize,
    pub inserts: u64,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let records = r.int_min("records", 1)?;
    if records > u32::MAX as u64 {
        return Err(Error::input("btree: parameter 'records' must be below 2^32"));
    }
    let zipfian = match r.str("distribution")? {
        "uniform" => false,
        "zipfian" | "zipf" => true,
        o => return Err(Error::input(format!("btree: parameter 'distribution' must be uniform or zipfian, got '{o}'"))),
    };
    let stack_size = r.int("stack_size")?;
    if stack_size < 4096 {
        return Err(Error::input(format!("btree: parameter 'stack_size' must be at least 4KiB, got {stack_size}")));
    }
    let mut c = Cfg {
        records,
        ops: r.int("ops")?,
        insert_ratio: r.float_in("insert_ratio", 0.0, 1.0)?,
        zipfian,
        stack_size,
        seed: r.int("seed")?,
        threads: r.threads()?,
        inserts: 0,
    };
    let mut types = Rng::stream(c.seed, 50);
    c.inserts = (0..c.ops).filter(|_| types.f64() < c.insert_ratio).count() as u64;
    Ok(c)
}

pub(crate) const WORDS: usize = 512;
const KMAX: usize = 255;
const KEYS: usize = 1;
const VALS: usize = 256;
const NEXT: usize = 511;
const LEAF: u64 = 1 << 63;
const NIL: u64 = u64::MAX;
/// Words per stack frame (64 bytes), of which FRAME_USED are written.
const FRAME: usize = 8;
const FRAME_USED: usize = 4;

/// Node capacity: leaves are at least half full after a split (127 keys),
/// inner nodes likewise; plus slack for the levels.
fn node_cap(c: &Cfg) -> u64 {
    nodes_for(c.records + c.inserts)
}

/// Node slots a tree of `keys` keys can need.
pub(crate) fn nodes_for(keys: u64) -> u64 {
    let leaves = keys / 127 + 2;
    leaves + leaves / 127 + 2 * 8 + 2
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("nodes", node_cap(c) * WORDS as u64 * 8)?;
    for t in 0..c.threads {
        l.add(format!("stack:{t}"), c.stack_size)?;
    }
    Ok(l)
}

pub fn key_of(kn: u64) -> u64 {
    mix64(kn ^ 0x6274_7265_6500)
}
pub(crate) fn value_of(key: u64) -> u64 {
    mix64(key ^ 0x76_616c)
}

pub struct Tree {
    nodes: Arr<u64>,
    root: usize,
    height: u32,
    used: usize,
    cap: usize,
    /// Words from one node to the next: WORDS here; mysql places each node at
    /// the start of a 16KB InnoDB page whose rest holds the rows.
    stride: usize,
}

struct Frame<'a> {
    stack: &'a mut Arr<u64>,
    sp: usize,
}

impl Tree {
    /// An empty tree (one leaf) over `cap` node slots of `stride` words in `nodes`.
    pub fn new(nodes: Arr<u64>, cap: usize, stride: usize) -> Result<Tree> {
        let mut t = Tree { nodes, root: 0, height: 1, used: 0, cap, stride };
        t.root = t.alloc_node(true)?;
        Ok(t)
    }

    /// The node pool (a buffer pool of pages for mysql).
    pub fn nodes_arr(&self) -> &Arr<u64> {
        &self.nodes
    }

    pub fn nodes_mut(&mut self) -> &mut Arr<u64> {
        &mut self.nodes
    }

    /// Nodes in use.
    pub fn used(&self) -> usize {
        self.used
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    fn alloc_node(&mut self, leaf: bool) -> Result<usize> {
        if self.used >= self.cap {
            return Err(Error::input("btree: node pool exhausted (internal capacity error)"));
        }
        let id = self.used;
        self.used += 1;
        let b = id * self.stride;
        self.nodes[b] = if leaf { LEAF } else { 0 };
        if leaf {
            self.nodes[b + NEXT] = NIL;
        }
        Ok(id)
    }

    /// Index of the first key greater than `key` in node `id` (traced probes).
    #[inline]
    fn upper_bound<M: Mem>(&self, m: &mut M, id: usize, cnt: usize, key: u64) -> usize {
        let b = id * self.stride + KEYS;
        let (mut lo, mut hi) = (0, cnt);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.nodes.ld(m, b + mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn push<M: Mem>(m: &mut M, f: &mut Option<Frame>, key: u64, id: usize) {
        if let Some(f) = f {
            if f.sp >= FRAME {
                f.sp -= FRAME;
                for w in 0..FRAME_USED {
                    f.stack.st(m, f.sp + w, key ^ id as u64 ^ w as u64);
                }
            }
        }
    }

    fn pop_all<M: Mem>(m: &mut M, f: &mut Option<Frame>, levels: usize) -> u64 {
        let mut acc = 0;
        if let Some(f) = f {
            for _ in 0..levels {
                if f.sp + FRAME <= f.stack.len() {
                    for w in 0..FRAME_USED {
                        acc ^= f.stack.ld(m, f.sp + w);
                    }
                    f.sp += FRAME;
                }
            }
        }
        acc
    }

    pub fn lookup<M: Mem>(&self, m: &mut M, key: u64, stack: Option<&mut Arr<u64>>) -> Option<u64> {
        self.lookup_at(m, key, stack).map(|(_, _, v)| v)
    }

    /// `lookup`, also telling where the key was found: (leaf node, slot, value).
    pub fn lookup_at<M: Mem>(&self, m: &mut M, key: u64, stack: Option<&mut Arr<u64>>) -> Option<(usize, usize, u64)> {
        let mut f = stack.map(|s| {
            let sp = s.len() / FRAME * FRAME;
            Frame { stack: s, sp }
        });
        let mut id = self.root;
        let mut levels = 0;
        let out = loop {
            Self::push(m, &mut f, key, id);
            levels += 1;
            let b = id * self.stride;
            let meta = self.nodes.ld(m, b);
            let cnt = (meta & 0xffff_ffff) as usize;
            let i = self.upper_bound(m, id, cnt, key);
            if meta & LEAF != 0 {
                break if i > 0 && self.nodes.ld(m, b + KEYS + i - 1) == key { Some((id, i - 1, self.nodes.ld(m, b + VALS + i - 1))) } else { None };
            }
            id = self.nodes.ld(m, b + VALS + i) as usize;
        };
        Self::pop_all(m, &mut f, levels);
        out
    }

    /// Insert or overwrite; returns true if the key was new.
    pub fn insert<M: Mem>(&mut self, m: &mut M, key: u64, val: u64, stack: Option<&mut Arr<u64>>) -> Result<bool> {
        let mut f = stack.map(|s| {
            let sp = s.len() / FRAME * FRAME;
            Frame { stack: s, sp }
        });
        let mut path = [(0usize, 0usize); 24];
        let mut depth = 0;
        let mut id = self.root;
        let (leaf, pos) = loop {
            Self::push(m, &mut f, key, id);
            let b = id * self.stride;
            let meta = self.nodes.ld(m, b);
            let cnt = (meta & 0xffff_ffff) as usize;
            let i = self.upper_bound(m, id, cnt, key);
            if meta & LEAF != 0 {
                break (id, i);
            }
            if depth >= path.len() {
                return Err(Error::input("btree: tree too deep (internal error)"));
            }
            path[depth] = (id, i);
            depth += 1;
            id = self.nodes.ld(m, b + VALS + i) as usize;
        };
        let levels = depth + 1;
        let b = leaf * self.stride;
        if pos > 0 && self.nodes.ld(m, b + KEYS + pos - 1) == key {
            self.nodes.st(m, b + VALS + pos - 1, val);
            Self::pop_all(m, &mut f, levels);
            return Ok(false);
        }
        let cnt = (self.nodes.ld(m, b) & 0xffff_ffff) as usize;
        if cnt < KMAX {
            for j in (pos..cnt).rev() {
                let k = self.nodes.ld(m, b + KEYS + j);
                self.nodes.st(m, b + KEYS + j + 1, k);
                let v = self.nodes.ld(m, b + VALS + j);
                self.nodes.st(m, b + VALS + j + 1, v);
            }
            self.nodes.st(m, b + KEYS + pos, key);
            self.nodes.st(m, b + VALS + pos, val);
            self.nodes.st(m, b, LEAF | (cnt as u64 + 1));
        } else {
            // Split the full leaf: 256 entries -> 128 + 128.
            let mut ks = [0u64; KMAX + 1];
            let mut vs = [0u64; KMAX + 1];
            let mut o = 0;
            for j in 0..KMAX {
                if j == pos {
                    ks[o] = key;
                    vs[o] = val;
                    o += 1;
                }
                ks[o] = self.nodes.ld(m, b + KEYS + j);
                vs[o] = self.nodes.ld(m, b + VALS + j);
                o += 1;
            }
            if pos == KMAX {
                ks[o] = key;
                vs[o] = val;
            }
            let half = (KMAX + 1) / 2;
            let right = self.alloc_node(true)?;
            let rb = right * self.stride;
            for j in 0..half {
                self.nodes.st(m, b + KEYS + j, ks[j]);
                self.nodes.st(m, b + VALS + j, vs[j]);
                self.nodes.st(m, rb + KEYS + j, ks[half + j]);
                self.nodes.st(m, rb + VALS + j, vs[half + j]);
            }
            let next = self.nodes.ld(m, b + NEXT);
            self.nodes.st(m, rb + NEXT, next);
            self.nodes.st(m, b + NEXT, right as u64);
            self.nodes.st(m, b, LEAF | half as u64);
            self.nodes.st(m, rb, LEAF | half as u64);
            self.insert_up(m, &path[..depth], ks[half], right)?;
        }
        Self::pop_all(m, &mut f, levels);
        Ok(true)
    }

    /// Insert separator `sep` with right child `child` into the parent chain.
    fn insert_up<M: Mem>(&mut self, m: &mut M, path: &[(usize, usize)], mut sep: u64, mut child: usize) -> Result<()> {
        for &(id, pos) in path.iter().rev() {
            let b = id * self.stride;
            let cnt = (self.nodes.ld(m, b) & 0xffff_ffff) as usize;
            if cnt < KMAX {
                for j in (pos..cnt).rev() {
                    let k = self.nodes.ld(m, b + KEYS + j);
                    self.nodes.st(m, b + KEYS + j + 1, k);
                    let c = self.nodes.ld(m, b + VALS + j + 1);
                    self.nodes.st(m, b + VALS + j + 2, c);
                }
                self.nodes.st(m, b + KEYS + pos, sep);
                self.nodes.st(m, b + VALS + pos + 1, child as u64);
                self.nodes.st(m, b, cnt as u64 + 1);
                return Ok(());
            }
            // Split the inner node: 256 keys / 257 children; promote the middle key.
            let mut ks = [0u64; KMAX + 1];
            let mut cs = [0u64; KMAX + 2];
            cs[0] = self.nodes.ld(m, b + VALS);
            let mut o = 0;
            for j in 0..KMAX {
                if j == pos {
                    ks[o] = sep;
                    cs[o + 1] = child as u64;
                    o += 1;
                }
                ks[o] = self.nodes.ld(m, b + KEYS + j);
                cs[o + 1] = self.nodes.ld(m, b + VALS + j + 1);
                o += 1;
            }
            if pos == KMAX {
                ks[o] = sep;
                cs[o + 1] = child as u64;
            }
            let half = (KMAX + 1) / 2; // left keeps keys[0..half], promotes keys[half]
            let right = self.alloc_node(false)?;
            let rb = right * self.stride;
            for j in 0..half {
                self.nodes.st(m, b + KEYS + j, ks[j]);
            }
            for j in 0..=half {
                self.nodes.st(m, b + VALS + j, cs[j]);
            }
            let rk = KMAX - half; // 127 keys to the right
            for j in 0..rk {
                self.nodes.st(m, rb + KEYS + j, ks[half + 1 + j]);
            }
            for j in 0..=rk {
                self.nodes.st(m, rb + VALS + j, cs[half + 1 + j]);
            }
            self.nodes.st(m, b, half as u64);
            self.nodes.st(m, rb, rk as u64);
            sep = ks[half];
            child = right;
        }
        // The root split: a new root above.
        let old = self.root;
        let r = self.alloc_node(false)?;
        let rb = r * self.stride;
        self.nodes.st(m, rb + KEYS, sep);
        self.nodes.st(m, rb + VALS, old as u64);
        self.nodes.st(m, rb + VALS + 1, child as u64);
        self.nodes.st(m, rb, 1);
        self.root = r;
        self.height += 1;
        Ok(())
    }

    /// All keys in leaf order (untraced), for checks.
    pub fn keys_in_order(&self) -> Vec<(u64, u64)> {
        let mut id = self.root;
        while self.nodes[id * self.stride] & LEAF == 0 {
            id = self.nodes[id * self.stride + VALS] as usize;
        }
        let mut out = Vec::new();
        loop {
            let b = id * self.stride;
            let cnt = (self.nodes[b] & 0xffff_ffff) as usize;
            for j in 0..cnt {
                out.push((self.nodes[b + KEYS + j], self.nodes[b + VALS + j]));
            }
            let next = self.nodes[b + NEXT];
            if next == NIL {
                break;
            }
            id = next as usize;
        }
        out
    }
}

const CHUNK: u64 = 64;
const PROGRESS: u64 = 1_000_000;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let cap = node_cap(c) as usize;
    let mut t = Tree::new(m.alloc(l.get("nodes")?, cap * WORDS)?, cap, WORDS)?;
    let mut stacks: Vec<Arr<u64>> = Vec::with_capacity(c.threads);
    for k in 0..c.threads {
        stacks.push(m.alloc(l.get(&format!("stack:{k}"))?, (c.stack_size / 8) as usize)?);
    }
    for kn in 0..c.records {
        let k = key_of(kn);
        t.insert(&mut Quiet, k, value_of(k), None)?;
    }
    // The bulk-loaded index is resident when queries start.
    m.populated(&t.nodes);
    m.begin_run();
    let mut types = Rng::stream(c.seed, 50);
    let mut keys = Rng::stream(c.seed, 51);
    let zipf = if c.zipfian { Some(Zipf::new(c.records)) } else { None };
    let mut inserted = 0u64;
    let (mut found, mut missing, mut wrong, mut sum) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..c.ops {
        let th = ((i / CHUNK) % c.threads as u64) as usize;
        if i % CHUNK == 0 {
            m.set_cpu(th);
        }
        if types.f64() < c.insert_ratio {
            let k = key_of(c.records + inserted);
            inserted += 1;
            t.insert(m, k, value_of(k), Some(&mut stacks[th]))?;
        } else {
            let kn = match &zipf {
                Some(z) => fnv64(z.next(&mut keys)) % c.records,
                None => keys.below(c.records + inserted),
            };
            let k = key_of(kn);
            match t.lookup(m, k, Some(&mut stacks[th])) {
                Some(v) => {
                    found += 1;
                    sum = sum.wrapping_add(v);
                    wrong += (v != value_of(k)) as u64;
                }
                None => missing += 1,
            }
        }
        if (i + 1) % PROGRESS == 0 {
            m.progress(&format!("ops:{}", i + 1));
        }
    }
    m.end_run();
    let all = t.keys_in_order();
    let sorted = all.windows(2).all(|w| w[0].0 < w[1].0);
    Ok(json!({
        "found": found, "missing": missing, "wrong_values": wrong, "inserts": inserted,
        "value_sum": crate::hex(sum), "keys": all.len(), "sorted": sorted, "height": t.height, "nodes": t.used,
        "keys_hash": crate::hex(crate::hash_words(all.iter().map(|e| e.0 ^ e.1.rotate_left(7)))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::{Access, CountingSink};

    fn cfg(records: u64, ops: u64, threads: usize) -> Cfg {
        let mut c = Cfg { records, ops, insert_ratio: 0.3, zipfian: false, stack_size: 16384, seed: 2, threads, inserts: 0 };
        let mut types = Rng::stream(c.seed, 50);
        c.inserts = (0..c.ops).filter(|_| types.f64() < c.insert_ratio).count() as u64;
        c
    }

    #[test]
    fn tree_holds_every_key_sorted_after_splits() {
        let c = cfg(100_000, 20_000, 1);
        let l = layout(&c).unwrap();
        let mut sink = CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let res = run(&c, &l, &mut m).unwrap();
        assert_eq!(res["sorted"], true);
        assert_eq!(res["keys"].as_u64().unwrap(), 100_000 + res["inserts"].as_u64().unwrap());
        assert_eq!(res["wrong_values"], 0);
        assert_eq!(res["missing"], 0, "uniform lookups over inserted keys all hit");
        assert!(res["height"].as_u64().unwrap() >= 3);
        // model: the key set is exactly the loaded + inserted key numbers
        let mut want: Vec<u64> = (0..100_000 + res["inserts"].as_u64().unwrap()).map(key_of).collect();
        want.sort();
        let cap = node_cap(&c) as usize;
        let mut t = Tree::new(m.alloc(l.get("nodes").unwrap(), cap * WORDS).unwrap(), cap, WORDS).unwrap();
        for &k in want.iter().rev() {
            t.insert(&mut Quiet, k, value_of(k), None).unwrap();
        }
        let got: Vec<u64> = t.keys_in_order().into_iter().map(|e| e.0).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn lookups_use_the_thread_stack_top() {
        let c = cfg(5000, 2000, 3);
        let l = layout(&c).unwrap();
        let mut v: Vec<Access> = Vec::new();
        let mut m = Traced::new(&mut v);
        run(&c, &l, &mut m).unwrap();
        for t in 0..3 {
            let r = l.get(&format!("stack:{t}")).unwrap();
            let on: Vec<&Access> = v.iter().filter(|a| r.contains(0, a.addr)).collect();
            assert!(!on.is_empty());
            assert!(on.iter().all(|a| a.cpu as usize == t), "only thread {t} touches its stack");
            assert!(on.iter().all(|a| a.addr >= r.end() - 4096), "frames stay in the top page");
        }
    }
}
