//! Breadth-first search as GAP implements it (Beamer's direction-optimizing BFS).
//!
//! Data touched per step, mirroring GAP's `bfs.cc`:
//! * `parent` (i32 per vertex): initialised to `-degree` (or -1), so a top-down
//!   step learns the degree of a newly visited vertex from the value it
//!   overwrites; set to the parent id when visited.
//! * `queue`: GAP's sliding queue, one array of n ids; each level appends after
//!   the current window and the window slides forward.
//! * top-down step: read the frontier id, its two offsets, each neighbour id and
//!   the neighbour's parent; write parent and the queue slot of new vertices.
//! * bottom-up step (direction-optimizing only): for every unvisited vertex,
//!   scan its neighbours and test each against the `front` bitmap until one is
//!   in the frontier; record it in the `curr` bitmap.
//! * switching: top-down → bottom-up when the frontier's out-edges exceed
//!   1/alpha of the unexplored edges (alpha = 15); back when the frontier shrinks
//!   and is below n/beta (beta = 18).

use serde_json::{json, Value};

use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::{par_dynamic, par_static, Arr, Mem};

use super::csr::Csr;

pub const ALPHA: u64 = 15;
pub const BETA: u64 = 18;
/// Iterations per trace slice of a static partition (a thread's burst).
const SLICE: usize = 64;
/// GAP's bottom-up loop is `schedule(dynamic, 1024)`.
const BU_CHUNK: usize = 1024;

struct State {
    parent: Arr<i32>,
    queue: Arr<u32>,
    front: Option<Arr<u64>>,
    curr: Option<Arr<u64>>,
}

/// Top-down step over the window `queue[head..tail]`; returns the new tail and
/// the summed degree of the newly visited vertices (GAP's scout count).
fn td_step<M: Mem>(m: &mut M, g: &Csr, s: &mut State, head: usize, tail: usize, threads: usize) -> (usize, u64) {
    let mut out = tail;
    let mut scout = 0u64;
    let (parent, queue) = (&mut s.parent, &mut s.queue);
    par_static(m, threads, tail - head, SLICE, |m, lo, hi| {
        for i in head + lo..head + hi {
            let u = queue.ld(m, i) as usize;
            let a = g.offsets.ld(m, u) as usize;
            let b = g.offsets.ld(m, u + 1) as usize;
            for j in a..b {
                let v = g.neigh.ld(m, j) as usize;
                let pv = parent.ld(m, v);
                if pv < 0 {
                    parent.st(m, v, u as i32);
                    queue.st(m, out, v as u32);
                    out += 1;
                    scout += (-(pv as i64)) as u64;
                }
            }
        }
    });
    (out, scout)
}

/// Bottom-up step: returns the number of vertices awakened.
fn bu_step<M: Mem>(m: &mut M, g: &Csr, parent: &mut Arr<i32>, front: &Arr<u64>, next: &mut Arr<u64>, threads: usize) -> usize {
    let words = next.len();
    par_static(m, threads, words, SLICE, |m, lo, hi| {
        for w in lo..hi {
            next.st(m, w, 0);
        }
    });
    let mut awake = 0usize;
    par_dynamic(m, threads, g.n, BU_CHUNK, |m, _, lo, hi| {
        for u in lo..hi {
            if parent.ld(m, u) < 0 {
                let a = g.offsets.ld(m, u) as usize;
                let b = g.offsets.ld(m, u + 1) as usize;
                for j in a..b {
                    let v = g.neigh.ld(m, j) as usize;
                    if front.ld(m, v / 64) >> (v % 64) & 1 != 0 {
                        parent.st(m, u, v as i32);
                        awake += 1;
                        let w = next.ld(m, u / 64);
                        next.st(m, u / 64, w | 1 << (u % 64));
                        break;
                    }
                }
            }
        }
    });
    awake
}

/// Run BFS from `src`. Returns the parent array (a copy) and the result summary.
pub fn run<M: Mem>(m: &mut M, l: &Layout, g: &Csr, src: u32, direction_optimizing: bool, threads: usize) -> Result<(Vec<i32>, Value)> {
    let n = g.n;
    let mut s = State {
        parent: m.alloc(l.get("parent")?, n)?,
        queue: m.alloc(l.get("queue")?, n)?,
        front: None,
        curr: None,
    };
    if direction_optimizing {
        s.front = Some(m.alloc(l.get("front")?, n.div_ceil(64))?);
        s.curr = Some(m.alloc(l.get("curr")?, n.div_ceil(64))?);
    }
    m.begin_run();
    // Initialisation is part of GAP's timed kernel.
    {
        let parent = &mut s.parent;
        par_static(m, threads, n, SLICE, |m, lo, hi| {
            for u in lo..hi {
                let d = g.offsets.ld(m, u + 1) - g.offsets.ld(m, u);
                parent.st(m, u, if d > 0 { -(d.min(i32::MAX as u64) as i32) } else { -1 });
            }
        });
    }
    let src = src as usize;
    s.parent.st(m, src, src as i32);
    s.queue.st(m, 0, src as u32);
    let (mut head, mut tail) = (0usize, 1usize);
    let mut edges_to_check = g.m() as u64;
    let mut scout = g.degree(src) as u64;
    let (mut level, mut td_steps, mut bu_steps) = (0u32, 0u32, 0u32);
    while head < tail {
        if direction_optimizing && scout > edges_to_check / ALPHA {
            let (Some(mut front), Some(mut curr)) = (s.front.take(), s.curr.take()) else { break };
            // queue -> bitmap
            par_static(m, threads, front.len(), SLICE, |m, lo, hi| {
                for w in lo..hi {
                    front.st(m, w, 0);
                }
            });
            let q = &s.queue;
            par_static(m, threads, tail - head, SLICE, |m, lo, hi| {
                for i in head + lo..head + hi {
                    let v = q.ld(m, i) as usize;
                    let w = front.ld(m, v / 64);
                    front.st(m, v / 64, w | 1 << (v % 64));
                }
            });
            let mut awake = tail - head;
            head = tail;
            loop {
                let old = awake;
                awake = bu_step(m, g, &mut s.parent, &front, &mut curr, threads);
                std::mem::swap(&mut front, &mut curr);
                level += 1;
                bu_steps += 1;
                m.progress(&format!("level:{level}"));
                if !(awake >= old || awake as u64 > n as u64 / BETA) || awake == 0 {
                    break;
                }
            }
            // bitmap -> queue (appended after the current window)
            let q = &mut s.queue;
            let mut out = tail;
            par_static(m, threads, n, SLICE, |m, lo, hi| {
                for u in lo..hi {
                    if front.ld(m, u / 64) >> (u % 64) & 1 != 0 {
                        q.st(m, out, u as u32);
                        out += 1;
                    }
                }
            });
            tail = out;
            scout = 1;
            s.front = Some(front);
            s.curr = Some(curr);
        } else {
            edges_to_check = edges_to_check.saturating_sub(scout);
            let (out, sc) = td_step(m, g, &mut s, head, tail, threads);
            scout = sc;
            head = tail;
            tail = out;
            level += 1;
            td_steps += 1;
            m.progress(&format!("level:{level}"));
        }
    }
    m.end_run();
    let parent: Vec<i32> = s.parent.to_vec();
    let depth = depths(&parent, src as u32);
    let valid = depth.as_ref().map(|d| parents_valid(g, &parent, d, src as u32)).unwrap_or(false);
    let d = depth.unwrap_or_default();
    let reached = d.iter().filter(|&&x| x != u32::MAX).count();
    let max_depth = d.iter().filter(|&&x| x != u32::MAX).max().copied().unwrap_or(0);
    let depth_sum: u64 = d.iter().filter(|&&x| x != u32::MAX).map(|&x| x as u64).sum();
    let res = json!({
        "source": src, "reached": reached, "max_depth": max_depth, "depth_sum": depth_sum,
        "depths_hash": crate::hex(crate::hash_words(d.iter().map(|&x| x as u64))),
        "parents_valid": valid, "td_steps": td_steps, "bu_steps": bu_steps,
        "direction_optimizing": direction_optimizing,
    });
    Ok((parent, res))
}

/// Depth of every vertex from the parent array (u32::MAX: not reached), or
/// None if the parent pointers contain a cycle or out-of-range ids.
pub fn depths(parent: &[i32], src: u32) -> Option<Vec<u32>> {
    const UNKNOWN: u32 = u32::MAX - 1;
    let n = parent.len();
    let mut d = vec![UNKNOWN; n];
    d[src as usize] = 0;
    let mut stack = Vec::new();
    for v in 0..n {
        if parent[v] < 0 {
            d[v] = u32::MAX;
        }
    }
    for v in 0..n {
        let mut x = v;
        while d[x] == UNKNOWN {
            stack.push(x);
            if stack.len() > n {
                return None;
            }
            let p = parent[x];
            if p < 0 || p as usize >= n {
                return None;
            }
            x = p as usize;
        }
        if d[x] == u32::MAX && !stack.is_empty() {
            return None; // a reached vertex whose parent is unreached
        }
        let mut base = d[x];
        while let Some(y) = stack.pop() {
            base += 1;
            d[y] = base;
        }
    }
    Some(d)
}

/// Every reached vertex other than the source has a neighbour as parent one
/// level closer to the source (the Graph500 validation rules).
pub fn parents_valid(g: &Csr, parent: &[i32], d: &[u32], src: u32) -> bool {
    (0..g.n).all(|v| {
        if v == src as usize || d[v] == u32::MAX {
            return true;
        }
        let p = parent[v] as usize;
        d[p] != u32::MAX && d[p] + 1 == d[v] && g.neighbors(v).binary_search(&(p as u32)).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{csr, kronecker};
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::CountingSink;
    use std::collections::VecDeque;

    fn layout(n: usize, cap: usize) -> Layout {
        let mut l = Layout::new();
        for (name, b) in [
            ("offsets", (n + 1) * 8),
            ("neighbors", cap * 4),
            ("parent", n * 4),
            ("queue", n * 4),
            ("front", n.div_ceil(64) * 8),
            ("curr", n.div_ceil(64) * 8),
        ] {
            l.add(name, b as u64).unwrap();
        }
        l
    }

    fn reference(g: &Csr, src: usize) -> Vec<u32> {
        let mut d = vec![u32::MAX; g.n];
        d[src] = 0;
        let mut q = VecDeque::from([src]);
        while let Some(u) = q.pop_front() {
            for &v in g.neighbors(u) {
                if d[v as usize] == u32::MAX {
                    d[v as usize] = d[u] + 1;
                    q.push_back(v as usize);
                }
            }
        }
        d
    }

    #[test]
    fn depths_match_plain_bfs_top_down_and_direction_optimizing() {
        for (scale, gen) in [(12u32, "kron"), (11, "uniform")] {
            let el = if gen == "kron" { kronecker::kronecker(scale, 8, 5) } else { kronecker::uniform(scale, 4, 5) };
            let l = layout(el.n, 2 * el.len());
            let mut sink = CountingSink::default();
            let mut m = Traced::new(&mut sink);
            let g = csr::build(&mut m, &l, &el, true, false, false, 5).unwrap();
            let src = super::super::pick_source(&g, 5).unwrap();
            let want = reference(&g, src as usize);
            for threads in [1, 3] {
                for dobfs in [false, true] {
                    let (parent, res) = run(&mut m, &l, &g, src, dobfs, threads).unwrap();
                    let got = depths(&parent, src).unwrap();
                    assert_eq!(got, want, "{gen} dobfs={dobfs} threads={threads}");
                    assert_eq!(res["parents_valid"], true);
                    if dobfs && gen == "kron" {
                        assert!(res["bu_steps"].as_u64().unwrap() > 0, "bottom-up never used: {res}");
                    }
                }
            }
        }
    }

    #[test]
    fn invalid_parents_are_detected() {
        assert!(depths(&[0, 2, 1], 0).is_none()); // cycle 1 <-> 2
        assert_eq!(depths(&[0, 0, -1], 0).unwrap(), vec![0, 1, u32::MAX]);
    }
}
