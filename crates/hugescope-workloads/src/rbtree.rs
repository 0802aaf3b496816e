//! Tree: the synthetic benchmark of Navarro et al. (OSDI'02 §6.2) for programs
//! that allocate many small objects dynamically and so have poor locality: "four
//! operations performed randomly on a 50000-node red-black tree: 50% of the
//! operations are lookups, 24% insertions, 24% deletions, and 2% traversals.
//! Nodes on the tree contain a pointer to a 128-byte record. On insertions a
//! new record is allocated and initialized; on lookups and traversals, half of
//! the record is read." (Table 1: speedup 1.50, 97% fewer DTLB misses.)
//!
//! Everything lives in one `heap` region, carved by a small malloc-like
//! allocator: two size classes (64-byte nodes, 128-byte records) bump-allocated
//! from the bottom of the heap, each with a LIFO free list whose link is the
//! freed object's first word. A node and its record start out adjacent; after
//! deletions and reuse a node's neighbours in the tree end up anywhere in the
//! heap, which is the locality the paper means. Word 0 of the heap holds the
//! tree's sentinel (CLRS's black `nil` node, whose parent field deletion writes).
//!
//! The tree is CLRS's red-black tree (parent pointers, insert and delete
//! fix-ups with rotations); every field read or written is one traced access,
//! as each is one load or store in the C program. Keys are drawn uniformly from
//! `0..2 x nodes`, so inserts (of absent keys) and deletes (of present keys)
//! balance with the tree at about `nodes` nodes. The paper does not say how far
//! a traversal goes: here it is an in-order walk of `traverse` nodes from a
//! random key (a whole-tree walk at 2% of operations would be nearly all of the
//! run). The tree is built by `nodes` traced insertions at the start of the run
//! (the program builds it itself; progress label `built`).

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::microbench::{add_region, single_thread};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "rbtree",
        about: "red-black tree of 50,000 nodes with 128-byte heap records: 50% lookup, 24% insert, 24% delete, 2% traversal (Navarro OSDI'02 §6.2 Tree)",
        params: common(vec![
            p("nodes", "int", "50000", "nodes inserted before the operations (the paper's 50,000); keys come from 0..2 x nodes"),
            p("ops", "int", "200000", "random operations after the build"),
            p("traverse", "int", "100", "nodes an in-order traversal visits (reading half of each record)"),
        ]),
    }
}

pub struct Cfg {
    pub nodes: u64,
    pub ops: u64,
    pub traverse: u64,
    pub seed: u64,
}

/// Largest `nodes`: 2^26 nodes give a 24GiB heap.
const MAX_NODES: u64 = 1 << 26;

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let nodes = r.int_min("nodes", 1)?;
    if nodes > MAX_NODES {
        return Err(Error::input(format!("rbtree: parameter 'nodes' must be at most {MAX_NODES}, got {nodes}")));
    }
    Ok(Cfg { nodes, ops: r.int("ops")?, traverse: r.int_min("traverse", 1)?, seed: r.int("seed")? })
}

/// Words of a node: key, left, right, parent, color, record, and two words of
/// padding (malloc rounds the 48-byte node to 64 bytes).
const NODE: usize = 8;
/// Words of a record: 128 bytes.
const REC: usize = 16;
const KEY: usize = 0;
const LEFT: usize = 1;
const RIGHT: usize = 2;
const PARENT: usize = 3;
const COLOR: usize = 4;
const RECORD: usize = 5;
/// The sentinel node sits at word 0, so a pointer of 0 is `nil`.
const NIL: u64 = 0;
/// Colors: the zeroed sentinel is black, as CLRS requires.
const BLACK: u64 = 0;
const RED: u64 = 1;

/// Words of the heap: the sentinel plus room for twice `nodes` node-record
/// pairs. The tree stays near `nodes` nodes (inserts and deletes balance), so
/// the room is never used up in practice; if it is, an insert is refused and
/// counted (`heap_full` in the result) rather than growing the region.
fn heap_words(nodes: u64) -> u64 {
    NODE as u64 + 2 * nodes * (NODE + REC) as u64
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "heap", heap_words(c.nodes) * 8, RegionKind::Heap)?;
    Ok(l)
}

/// The tree and its allocator over the heap words.
struct Tree {
    h: Arr<u64>,
    root: u64,
    /// Next never-used word (the bump pointer).
    top: usize,
    free_nodes: u64,
    free_records: u64,
    size: u64,
}

impl Tree {
    #[inline]
    fn get<M: Mem>(&self, m: &mut M, x: u64, field: usize) -> u64 {
        self.h.ld(m, x as usize + field)
    }
    #[inline]
    fn set<M: Mem>(&mut self, m: &mut M, x: u64, field: usize, v: u64) {
        self.h.st(m, x as usize + field, v)
    }

    /// malloc: the head of the class's free list (reading its link), else
    /// fresh words from the bump pointer; None when the heap is used up.
    fn alloc<M: Mem>(&mut self, m: &mut M, words: usize) -> Option<u64> {
        let head = if words == NODE { self.free_nodes } else { self.free_records };
        if head != NIL {
            let next = self.get(m, head, 0);
            if words == NODE {
                self.free_nodes = next;
            } else {
                self.free_records = next;
            }
            return Some(head);
        }
        if self.top + words > self.h.len() {
            return None;
        }
        let x = self.top as u64;
        self.top += words;
        Some(x)
    }

    /// free: push onto the class's free list (writing the link).
    fn free<M: Mem>(&mut self, m: &mut M, x: u64, words: usize) {
        let head = if words == NODE { &mut self.free_nodes } else { &mut self.free_records };
        let old = std::mem::replace(head, x);
        self.set(m, x, 0, old);
    }

    /// The node holding `key`, or NIL.
    fn search<M: Mem>(&self, m: &mut M, key: u64) -> u64 {
        let mut x = self.root;
        while x != NIL {
            let k = self.get(m, x, KEY);
            if key == k {
                return x;
            }
            x = self.get(m, x, if key < k { LEFT } else { RIGHT });
        }
        NIL
    }

    /// The node with the smallest key >= `key`, or NIL.
    fn lower_bound<M: Mem>(&self, m: &mut M, key: u64) -> u64 {
        let (mut x, mut best) = (self.root, NIL);
        while x != NIL {
            if self.get(m, x, KEY) >= key {
                best = x;
                x = self.get(m, x, LEFT);
            } else {
                x = self.get(m, x, RIGHT);
            }
        }
        best
    }

    fn minimum<M: Mem>(&self, m: &mut M, mut x: u64) -> u64 {
        loop {
            let l = self.get(m, x, LEFT);
            if l == NIL {
                return x;
            }
            x = l;
        }
    }

    fn successor<M: Mem>(&self, m: &mut M, mut x: u64) -> u64 {
        let r = self.get(m, x, RIGHT);
        if r != NIL {
            return self.minimum(m, r);
        }
        let mut y = self.get(m, x, PARENT);
        while y != NIL && x == self.get(m, y, RIGHT) {
            x = y;
            y = self.get(m, y, PARENT);
        }
        y
    }

    /// Rotate `x` down towards side `l` (l = LEFT: CLRS's LEFT-ROTATE; with
    /// the sides swapped, RIGHT-ROTATE): its `r` child takes its place.
    fn rotate<M: Mem>(&mut self, m: &mut M, x: u64, l: usize, r: usize) {
        let y = self.get(m, x, r);
        let yl = self.get(m, y, l);
        self.set(m, x, r, yl);
        if yl != NIL {
            self.set(m, yl, PARENT, x);
        }
        let xp = self.get(m, x, PARENT);
        self.set(m, y, PARENT, xp);
        if xp == NIL {
            self.root = y;
        } else if x == self.get(m, xp, l) {
            self.set(m, xp, l, y);
        } else {
            self.set(m, xp, r, y);
        }
        self.set(m, y, l, x);
        self.set(m, x, PARENT, y);
    }

    /// Insert `key` with a fresh, initialised record. Ok(false) if the key is
    /// present (nothing changes); Err(()) if the heap is used up.
    fn insert<M: Mem>(&mut self, m: &mut M, key: u64) -> std::result::Result<bool, ()> {
        let (mut y, mut x) = (NIL, self.root);
        while x != NIL {
            y = x;
            let k = self.get(m, x, KEY);
            if key == k {
                return Ok(false);
            }
            x = self.get(m, x, if key < k { LEFT } else { RIGHT });
        }
        let z = self.alloc(m, NODE).ok_or(())?;
        let Some(rec) = self.alloc(m, REC) else {
            self.free(m, z, NODE);
            return Err(());
        };
        for w in 0..REC {
            self.set(m, rec, w, key.wrapping_mul(REC as u64) + w as u64);
        }
        for (field, v) in [(KEY, key), (LEFT, NIL), (RIGHT, NIL), (PARENT, y), (COLOR, RED), (RECORD, rec)] {
            self.set(m, z, field, v);
        }
        if y == NIL {
            self.root = z;
        } else {
            let side = if key < self.get(m, y, KEY) { LEFT } else { RIGHT };
            self.set(m, y, side, z);
        }
        self.insert_fixup(m, z);
        self.size += 1;
        Ok(true)
    }

    fn insert_fixup<M: Mem>(&mut self, m: &mut M, mut z: u64) {
        loop {
            let p = self.get(m, z, PARENT);
            if self.get(m, p, COLOR) != RED {
                break;
            }
            let g = self.get(m, p, PARENT);
            // (l, r): the parent's side of the grandparent and the other one.
            let (l, r) = if p == self.get(m, g, LEFT) { (LEFT, RIGHT) } else { (RIGHT, LEFT) };
            let uncle = self.get(m, g, r);
            if self.get(m, uncle, COLOR) == RED {
                self.set(m, p, COLOR, BLACK);
                self.set(m, uncle, COLOR, BLACK);
                self.set(m, g, COLOR, RED);
                z = g;
                continue;
            }
            let mut p = p;
            if z == self.get(m, p, r) {
                z = p;
                self.rotate(m, z, l, r);
                p = self.get(m, z, PARENT);
            }
            self.set(m, p, COLOR, BLACK);
            self.set(m, g, COLOR, RED);
            self.rotate(m, g, r, l);
        }
        let root = self.root;
        self.set(m, root, COLOR, BLACK);
    }

    /// Put the subtree `v` where `u` was (CLRS RB-TRANSPLANT; writes the
    /// sentinel's parent when `v` is nil, which the delete fix-up reads).
    fn transplant<M: Mem>(&mut self, m: &mut M, u: u64, v: u64) {
        let up = self.get(m, u, PARENT);
        if up == NIL {
            self.root = v;
        } else if u == self.get(m, up, LEFT) {
            self.set(m, up, LEFT, v);
        } else {
            self.set(m, up, RIGHT, v);
        }
        self.set(m, v, PARENT, up);
    }

    /// Delete the node holding `key` and free it and its record; false if absent.
    fn delete<M: Mem>(&mut self, m: &mut M, key: u64) -> bool {
        let z = self.search(m, key);
        if z == NIL {
            return false;
        }
        let (zl, zr) = (self.get(m, z, LEFT), self.get(m, z, RIGHT));
        let mut removed_color = self.get(m, z, COLOR);
        let x;
        if zl == NIL {
            x = zr;
            self.transplant(m, z, zr);
        } else if zr == NIL {
            x = zl;
            self.transplant(m, z, zl);
        } else {
            let y = self.minimum(m, zr);
            removed_color = self.get(m, y, COLOR);
            x = self.get(m, y, RIGHT);
            if self.get(m, y, PARENT) == z {
                self.set(m, x, PARENT, y);
            } else {
                self.transplant(m, y, x);
                self.set(m, y, RIGHT, zr);
                self.set(m, zr, PARENT, y);
            }
            self.transplant(m, z, y);
            self.set(m, y, LEFT, zl);
            self.set(m, zl, PARENT, y);
            let zc = self.get(m, z, COLOR);
            self.set(m, y, COLOR, zc);
        }
        if removed_color == BLACK {
            self.delete_fixup(m, x);
        }
        let rec = self.get(m, z, RECORD);
        self.free(m, rec, REC);
        self.free(m, z, NODE);
        self.size -= 1;
        true
    }

    fn delete_fixup<M: Mem>(&mut self, m: &mut M, mut x: u64) {
        while x != self.root && self.get(m, x, COLOR) == BLACK {
            let p = self.get(m, x, PARENT);
            // (l, r): x's side of its parent and the sibling's side.
            let (l, r) = if x == self.get(m, p, LEFT) { (LEFT, RIGHT) } else { (RIGHT, LEFT) };
            let mut w = self.get(m, p, r);
            if self.get(m, w, COLOR) == RED {
                self.set(m, w, COLOR, BLACK);
                self.set(m, p, COLOR, RED);
                self.rotate(m, p, l, r);
                w = self.get(m, p, r);
            }
            let (wl, wr) = (self.get(m, w, l), self.get(m, w, r));
            if self.get(m, wl, COLOR) == BLACK && self.get(m, wr, COLOR) == BLACK {
                self.set(m, w, COLOR, RED);
                x = p;
                continue;
            }
            if self.get(m, wr, COLOR) == BLACK {
                self.set(m, wl, COLOR, BLACK);
                self.set(m, w, COLOR, RED);
                self.rotate(m, w, r, l);
                w = self.get(m, p, r);
            }
            let pc = self.get(m, p, COLOR);
            self.set(m, w, COLOR, pc);
            self.set(m, p, COLOR, BLACK);
            let wr = self.get(m, w, r);
            self.set(m, wr, COLOR, BLACK);
            self.rotate(m, p, l, r);
            x = self.root;
        }
        self.set(m, x, COLOR, BLACK);
    }

    /// Read the first half of node `x`'s record (what lookups and traversals do).
    fn read_half<M: Mem>(&self, m: &mut M, x: u64) -> u64 {
        let rec = self.get(m, x, RECORD);
        (0..REC / 2).fold(0u64, |a, w| a.wrapping_add(self.get(m, rec, w)))
    }

    /// Untraced check of every red-black and search-tree property; returns
    /// the number of nodes if all hold.
    fn check(&self) -> Option<u64> {
        // (black height, nodes) of the subtree at x with keys in (lo, hi).
        fn walk(t: &Tree, x: u64, parent: u64, lo: Option<u64>, hi: Option<u64>) -> Option<(u64, u64)> {
            if x == NIL {
                return Some((1, 0));
            }
            let f = |field: usize| t.h[x as usize + field];
            let key = f(KEY);
            let ordered = lo.is_none_or(|lo| key > lo) && hi.is_none_or(|hi| key < hi);
            let red_ok = f(COLOR) == BLACK || (t.h[f(LEFT) as usize + COLOR] == BLACK && t.h[f(RIGHT) as usize + COLOR] == BLACK);
            if !ordered || !red_ok || f(PARENT) != parent {
                return None;
            }
            let (bl, nl) = walk(t, f(LEFT), x, lo, Some(key))?;
            let (br, nr) = walk(t, f(RIGHT), x, Some(key), hi)?;
            (bl == br).then_some((bl + u64::from(f(COLOR) == BLACK), nl + nr + 1))
        }
        if self.root != NIL && self.h[self.root as usize + COLOR] != BLACK {
            return None;
        }
        walk(self, self.root, NIL, None, None).map(|(_, n)| n)
    }
}

/// A progress point every this many operations.
const PROGRESS: u64 = 100_000;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let h: Arr<u64> = m.alloc(l.get("heap")?, heap_words(c.nodes) as usize)?;
    // The sentinel is a static node: word 0 onwards, never allocated.
    let mut t = Tree { h, root: NIL, top: NODE, free_nodes: NIL, free_records: NIL, size: 0 };
    let key_space = 2 * c.nodes;
    let mut rng = Rng::stream(c.seed, 80);
    m.begin_run();
    let mut heap_full = 0u64;
    while t.size < c.nodes {
        // The heap holds twice the nodes, so the build always fits.
        if t.insert(m, rng.below(key_space)).is_err() {
            return Err(Error::input("rbtree: internal: the heap is full during the build"));
        }
    }
    m.progress("built");
    let (mut lookups, mut found, mut inserts, mut inserted, mut deletes, mut deleted) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut traversals, mut visited, mut sum) = (0u64, 0u64, 0u64);
    for op in 0..c.ops {
        let kind = rng.below(100);
        let key = rng.below(key_space);
        if kind < 50 {
            lookups += 1;
            let x = t.search(m, key);
            if x != NIL {
                found += 1;
                sum = sum.wrapping_add(t.read_half(m, x));
            }
        } else if kind < 74 {
            inserts += 1;
            match t.insert(m, key) {
                Ok(true) => inserted += 1,
                Ok(false) => {}
                Err(()) => heap_full += 1,
            }
        } else if kind < 98 {
            deletes += 1;
            deleted += u64::from(t.delete(m, key));
        } else {
            traversals += 1;
            let mut x = t.lower_bound(m, key);
            for _ in 0..c.traverse {
                if x == NIL {
                    break;
                }
                sum = sum.wrapping_add(t.read_half(m, x));
                visited += 1;
                x = t.successor(m, x);
            }
        }
        if (op + 1) % PROGRESS == 0 {
            m.progress(&format!("ops:{}", op + 1));
        }
    }
    m.end_run();
    let valid = t.check() == Some(t.size);
    Ok(json!({
        "nodes": t.size, "valid": valid, "lookups": lookups, "found": found, "inserts": inserts, "inserted": inserted,
        "deletes": deletes, "deleted": deleted, "traversals": traversals, "visited": visited, "heap_full": heap_full,
        "heap_bytes_used": t.top as u64 * 8, "record_sum": crate::hex(sum),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::Access;
    use std::collections::BTreeSet;

    /// Random inserts and deletes against a BTreeSet model: same keys, and the
    /// red-black properties hold after every operation (small tree, so the
    /// full check each time is cheap).
    #[test]
    fn matches_a_set_and_stays_balanced() {
        let mut sink: Vec<Access> = Vec::new();
        let mut m = Traced::new(&mut sink);
        let c = Cfg { nodes: 300, ops: 0, traverse: 1, seed: 3 };
        let l = layout(&c).unwrap();
        let h: Arr<u64> = m.alloc(l.get("heap").unwrap(), heap_words(c.nodes) as usize).unwrap();
        let mut t = Tree { h, root: NIL, top: NODE, free_nodes: NIL, free_records: NIL, size: 0 };
        let mut model = BTreeSet::new();
        let mut rng = Rng::new(9);
        for i in 0..4000 {
            let key = rng.below(400);
            // Keys below 400 never fill the heap's 600 pairs.
            if rng.below(2) == 0 {
                assert_eq!(t.insert(&mut m, key), Ok(model.insert(key)), "insert {key} at step {i}");
            } else {
                assert_eq!(t.delete(&mut m, key), model.remove(&key), "delete {key} at step {i}");
            }
            assert_eq!(t.check(), Some(model.len() as u64), "step {i}");
        }
        // In-order traversal from the smallest key gives the model's order.
        let mut x = t.lower_bound(&mut m, 0);
        let mut keys = Vec::new();
        while x != NIL {
            keys.push(t.h[x as usize + KEY]);
            x = t.successor(&mut m, x);
        }
        assert_eq!(keys, model.iter().copied().collect::<Vec<_>>());
    }

    /// Freed objects are reused last-in first-out, so the heap's high-water
    /// mark is the largest live population, not the number of inserts.
    #[test]
    fn freed_objects_are_reused() {
        let mut sink: Vec<Access> = Vec::new();
        let mut m = Traced::new(&mut sink);
        let c = Cfg { nodes: 10, ops: 0, traverse: 1, seed: 1 };
        let l = layout(&c).unwrap();
        let h: Arr<u64> = m.alloc(l.get("heap").unwrap(), heap_words(c.nodes) as usize).unwrap();
        let mut t = Tree { h, root: NIL, top: NODE, free_nodes: NIL, free_records: NIL, size: 0 };
        for round in 0..50 {
            for k in 0..10 {
                assert_eq!(t.insert(&mut m, k + round), Ok(true));
            }
            for k in 0..10 {
                assert!(t.delete(&mut m, k + round));
            }
        }
        assert_eq!(t.top, NODE + 10 * (NODE + REC));
        // The heap holds 20 pairs: the 21st insert of distinct live keys fails.
        for k in 0..20 {
            assert_eq!(t.insert(&mut m, k), Ok(true));
        }
        assert_eq!(t.insert(&mut m, 99), Err(()));
    }
}
