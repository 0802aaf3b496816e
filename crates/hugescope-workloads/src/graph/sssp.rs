//! Delta-stepping SSSP (Meyer & Sanders) in the shape of GAP's `sssp.cc`.
//!
//! GAP keeps a shared `frontier` array holding the current bucket, and
//! thread-local bins (vectors indexed by bucket number) that relaxations push
//! into; after each round the smallest non-empty bucket of all threads is copied
//! into the frontier. Vertices may sit in several bins; a stale entry is skipped
//! when its distance is already below the current bucket (`dist[u] >= delta·b`
//! test). Here the bins live in a fixed-address `bins` arena of 1 KiB chunks
//! (256 ids) chained per bin and recycled LIFO when a bin is drained, the way a
//! `std::vector` keeps and reuses its capacity; the chain metadata is untraced
//! (it plays the role of the vectors' headers). GAP's "bin fusion" shortcut is
//! not modelled (see docs/assumptions.md, "Workloads").

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{par_dynamic, par_static, Arr, Mem};

use super::csr::Csr;

pub const INF: u32 = u32::MAX;
/// Entries per bin chunk.
pub const CHUNK: usize = 256;
const NIL: u32 = u32::MAX;
/// GAP relaxes the frontier with `schedule(dynamic, 64)`.
const FRONTIER_CHUNK: usize = 64;

/// Frontier capacity: live bin entries are bounded by the adjacency entries plus
/// one per vertex in every case we could construct; overflow is reported.
pub fn frontier_capacity(n: u64, entries: u64) -> u64 {
    entries + n + 1
}

/// Arena chunks: every live entry plus one partially filled chunk per
/// (thread, live bin).
pub fn arena_chunks(n: u64, entries: u64, delta: u32, threads: usize) -> u64 {
    let live_bins = 255 / delta as u64 + 3;
    frontier_capacity(n, entries).div_ceil(CHUNK as u64) + live_bins * threads as u64 + 1
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u64,
}
const EMPTY: List = List { head: NIL, tail: NIL, len: 0 };

/// Per-thread bins over a window of bucket numbers (all live buckets lie within
/// `max_weight/delta + 2` of the current one, so a ring suffices).
struct Bins {
    arena: Arr<u32>,
    next: Vec<u32>,
    fill: Vec<u32>,
    free: Vec<u32>,
    bump: u32,
    ring: usize,
    lists: Vec<Vec<List>>,
}

impl Bins {
    fn push<M: Mem>(&mut self, m: &mut M, t: usize, bin: u64, v: u32) -> Result<()> {
        let slot = (bin % self.ring as u64) as usize;
        let mut l = self.lists[t][slot];
        if l.tail == NIL || self.fill[l.tail as usize] as usize == CHUNK {
            let c = match self.free.pop() {
                Some(c) => c,
                None => {
                    if self.bump as usize >= self.next.len() {
                        return Err(Error::input("sssp: bin arena exhausted (raise delta or report this graph)"));
                    }
                    self.bump += 1;
                    self.bump - 1
                }
            };
            self.next[c as usize] = NIL;
            self.fill[c as usize] = 0;
            if l.tail == NIL {
                l.head = c;
            } else {
                self.next[l.tail as usize] = c;
            }
            l.tail = c;
        }
        let k = self.fill[l.tail as usize];
        self.arena.st(m, l.tail as usize * CHUNK + k as usize, v);
        self.fill[l.tail as usize] = k + 1;
        l.len += 1;
        self.lists[t][slot] = l;
        Ok(())
    }
}

/// Run delta-stepping from `src`. Returns the distance array and the summary.
pub fn run<M: Mem>(m: &mut M, l: &Layout, g: &Csr, src: u32, delta: u32, threads: usize) -> Result<(Vec<u32>, Value)> {
    let n = g.n;
    let weights = g.weights.as_ref().ok_or_else(|| Error::input("sssp needs a weighted graph"))?;
    let fcap = frontier_capacity(n as u64, g.m() as u64) as usize;
    let chunks = arena_chunks(n as u64, g.m() as u64, delta, threads) as usize;
    let mut dist: Arr<u32> = m.alloc(l.get("dist")?, n)?;
    let mut frontier: Arr<u32> = m.alloc(l.get("frontier")?, fcap)?;
    let ring = (g.max_weight / delta) as usize + 3;
    let mut bins = Bins {
        arena: m.alloc(l.get("bins")?, chunks * CHUNK)?,
        next: vec![NIL; chunks],
        fill: vec![0; chunks],
        free: Vec::new(),
        bump: 0,
        ring,
        lists: vec![vec![EMPTY; ring]; threads],
    };
    let delta64 = delta as u64;
    m.begin_run();
    par_static(m, threads, n, 64, |m, lo, hi| {
        for v in lo..hi {
            dist.st(m, v, INF);
        }
    });
    dist.st(m, src as usize, 0);
    frontier.st(m, 0, src);
    let mut fsize = 1usize;
    let mut curr: u64 = 0;
    let mut buckets = 0u64;
    let mut err: Option<Error> = None;
    loop {
        par_dynamic(m, threads, fsize, FRONTIER_CHUNK, |m, t, lo, hi| {
            for i in lo..hi {
                let u = frontier.ld(m, i) as usize;
                let du = dist.ld(m, u);
                if du as u64 >= delta64 * curr {
                    let a = g.offsets.ld(m, u) as usize;
                    let b = g.offsets.ld(m, u + 1) as usize;
                    for j in a..b {
                        let v = g.neigh.ld(m, j);
                        let w = weights.ld(m, j);
                        let nd = du as u64 + w as u64;
                        if nd < INF as u64 && nd < dist.ld(m, v as usize) as u64 {
                            dist.st(m, v as usize, nd as u32);
                            if let Err(e) = bins.push(m, t, nd / delta64, v) {
                                err.get_or_insert(e);
                            }
                        }
                    }
                }
            }
        });
        if let Some(e) = err.take() {
            return Err(e);
        }
        buckets += 1;
        m.progress(&format!("bucket:{curr}"));
        // Smallest non-empty bucket at or after the current one.
        let next = (curr..curr + ring as u64)
            .find(|&b| bins.lists.iter().any(|ls| ls[(b % ring as u64) as usize].len > 0));
        let Some(next) = next else { break };
        curr = next;
        // Copy every thread's bin into the frontier (threads in order), recycle chunks.
        let slot = (curr % ring as u64) as usize;
        fsize = 0;
        for t in 0..threads {
            let list = bins.lists[t][slot];
            bins.lists[t][slot] = EMPTY;
            m.set_cpu(t);
            let mut c = list.head;
            while c != NIL {
                let k = bins.fill[c as usize] as usize;
                for j in 0..k {
                    let v = bins.arena.ld(m, c as usize * CHUNK + j);
                    if fsize >= fcap {
                        return Err(Error::input("sssp: frontier capacity exceeded (report this graph)"));
                    }
                    frontier.st(m, fsize, v);
                    fsize += 1;
                }
                bins.free.push(c);
                c = bins.next[c as usize];
            }
        }
    }
    m.end_run();
    let d: Vec<u32> = dist.to_vec();
    let reached = d.iter().filter(|&&x| x != INF).count();
    let sum: u64 = d.iter().filter(|&&x| x != INF).map(|&x| x as u64).sum();
    let max = d.iter().filter(|&&x| x != INF).max().copied().unwrap_or(0);
    let res = json!({
        "source": src, "reached": reached, "dist_sum": sum, "max_dist": max, "buckets": buckets, "delta": delta,
        "dist_hash": crate::hex(crate::hash_words(d.iter().map(|&x| x as u64))),
    });
    Ok((d, res))
}

#[cfg(test)]
mod tests {
    use super::super::{csr, kronecker, load::EdgeList};
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::CountingSink;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    fn dijkstra(g: &Csr, src: usize) -> Vec<u32> {
        let w = g.weights.as_ref().unwrap();
        let mut d = vec![INF; g.n];
        d[src] = 0;
        let mut h = BinaryHeap::from([Reverse((0u64, src))]);
        while let Some(Reverse((du, u))) = h.pop() {
            if du > d[u] as u64 {
                continue;
            }
            for j in g.offsets[u] as usize..g.offsets[u + 1] as usize {
                let v = g.neigh[j] as usize;
                let nd = du + w[j] as u64;
                if nd < d[v] as u64 {
                    d[v] = nd as u32;
                    h.push(Reverse((nd, v)));
                }
            }
        }
        d
    }

    fn layout(n: u64, e: u64, delta: u32, threads: usize) -> Layout {
        let mut l = Layout::new();
        l.add("offsets", (n + 1) * 8).unwrap();
        l.add("neighbors", e * 4).unwrap();
        l.add("weights", e * 4).unwrap();
        l.add("dist", n * 4).unwrap();
        l.add("frontier", frontier_capacity(n, e) * 4).unwrap();
        l.add("bins", arena_chunks(n, e, delta, threads) * CHUNK as u64 * 4).unwrap();
        l
    }

    #[test]
    fn matches_dijkstra() {
        for (gen, delta, threads) in [("kron", 16u32, 1usize), ("kron", 1, 2), ("uniform", 64, 3), ("kron", 1000, 1)] {
            let el = if gen == "kron" { kronecker::kronecker(11, 8, 9) } else { kronecker::uniform(11, 4, 9) };
            let l = layout(el.n as u64, el.len() as u64, delta, threads);
            let mut sink = CountingSink::default();
            let mut m = Traced::new(&mut sink);
            let g = csr::build(&mut m, &l, &el, false, true, false, 9).unwrap();
            let src = super::super::pick_source(&g, 9).unwrap();
            let (d, res) = run(&mut m, &l, &g, src, delta, threads).unwrap();
            assert_eq!(d, dijkstra(&g, src as usize), "{gen} delta={delta} threads={threads}");
            assert!(res["reached"].as_u64().unwrap() > 1);
        }
    }

    #[test]
    fn file_weights_are_used() {
        let el = EdgeList { n: 4, src: vec![0, 0, 1, 2], dst: vec![1, 2, 3, 3], w: Some(vec![1, 5, 10, 1]), symmetric: false };
        let l = layout(4, 4, 2, 1);
        let mut sink = CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let g = csr::build(&mut m, &l, &el, false, true, false, 1).unwrap();
        let (d, _) = run(&mut m, &l, &g, 0, 2, 1).unwrap();
        assert_eq!(d, vec![0, 1, 5, 6]);
    }
}
