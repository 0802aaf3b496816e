//! Pointer chasing over a linked structure: the stand-in for mcf and omnetpp
//! (SPEC CPU), whose run time is dominated by dependent loads through
//! pointer-linked nodes scattered over a large heap.
//!
//! `size` bytes of nodes of `node_size` bytes form one cycle. `locality` sets the
//! node order: 1 = the cycle visits nodes in address order (a sequential walk),
//! 0 = a uniformly random order (every hop a likely TLB miss); in between, each
//! position is swapped with a random later one with probability 1 - locality.
//! Each hop reads the next pointer (word 0) and the payload word (word 1) of the
//! node, as a list traversal that inspects each element does. With `threads`,
//! every thread chases from its own starting point.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "pointer-chase",
        about: "dependent loads through a linked cycle of nodes (mcf/omnetpp stand-in)",
        params: common(vec![
            p("size", "size", "64MiB", "bytes of nodes"),
            p("node_size", "size", "64", "bytes per node (multiple of 8, at least 16)"),
            p("locality", "float", "0", "0 = nodes linked in random order, 1 = in address order"),
            p("hops", "int", "10M", "hops in total (split over threads)"),
        ]),
    }
}

pub struct Cfg {
    pub nodes: u64,
    pub node_words: usize,
    pub locality: f64,
    pub hops: u64,
    pub seed: u64,
    pub threads: usize,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let ns = r.int("node_size")?;
    if ns < 16 || ns % 8 != 0 {
        return Err(Error::input(format!("pointer-chase: parameter 'node_size' must be a multiple of 8 and at least 16, got {ns}")));
    }
    let size = r.int("size")?;
    if size < ns * 2 {
        return Err(Error::input(format!("pointer-chase: parameter 'size' must hold at least two nodes, got {size}")));
    }
    if size / ns > u32::MAX as u64 {
        return Err(Error::input("pointer-chase: too many nodes (at most 2^32)"));
    }
    Ok(Cfg {
        nodes: size / ns,
        node_words: (ns / 8) as usize,
        locality: r.float_in("locality", 0.0, 1.0)?,
        hops: r.int_min("hops", 1)?,
        seed: r.int("seed")?,
        threads: r.threads()?,
    })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("nodes", c.nodes * c.node_words as u64 * 8)?;
    Ok(l)
}

const SLICE: u64 = 64;
const PROGRESS: u64 = 1_000_000;

/// The visiting order of the cycle.
pub fn order(c: &Cfg) -> Vec<u32> {
    let n = c.nodes as usize;
    let mut o: Vec<u32> = (0..n as u32).collect();
    let mut rng = Rng::stream(c.seed, 20);
    let p_swap = 1.0 - c.locality;
    for i in 0..n.saturating_sub(1) {
        if p_swap >= 1.0 || rng.f64() < p_swap {
            let j = i + rng.below((n - i) as u64) as usize;
            o.swap(i, j);
        }
    }
    o
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let n = c.nodes as usize;
    let w = c.node_words;
    let mut nodes: Arr<u64> = m.alloc(l.get("nodes")?, n * w)?;
    let o = order(c);
    for i in 0..n {
        let a = o[i] as usize;
        nodes[a * w] = o[(i + 1) % n] as u64;
        nodes[a * w + 1] = a as u64 * 2654435761 % 1_000_003;
    }
    let t = c.threads;
    let mut cur: Vec<usize> = (0..t).map(|k| o[k * n / t] as usize).collect();
    drop(o);
    m.populated(&nodes);
    m.begin_run();
    let mut acc = 0u64;
    let per = c.hops / t as u64;
    let extra = c.hops % t as u64;
    let quota: Vec<u64> = (0..t as u64).map(|k| per + (k < extra) as u64).collect();
    let mut done = vec![0u64; t];
    let mut total = 0u64;
    while total < c.hops {
        for k in 0..t {
            let end = (done[k] + SLICE).min(quota[k]);
            if done[k] >= end {
                continue;
            }
            m.set_cpu(k);
            let mut x = cur[k];
            for _ in done[k]..end {
                let next = nodes.ld(m, x * w) as usize;
                acc = acc.wrapping_add(nodes.ld(m, x * w + 1));
                x = next;
            }
            cur[k] = x;
            let before = total;
            total += end - done[k];
            done[k] = end;
            if before / PROGRESS != total / PROGRESS {
                m.progress(&format!("hops:{}", total / PROGRESS * PROGRESS));
            }
        }
    }
    m.end_run();
    Ok(json!({ "nodes": n, "hops": c.hops, "payload_sum": acc, "final": cur }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(locality: f64) -> Cfg {
        Cfg { nodes: 1000, node_words: 2, locality, hops: 5000, seed: 1, threads: 1 }
    }

    #[test]
    fn order_is_a_permutation_and_locality_controls_it() {
        for loc in [0.0, 0.5, 1.0] {
            let mut o = order(&cfg(loc));
            let seq = o.windows(2).filter(|w| w[1] == w[0] + 1).count();
            match loc as u32 {
                1 => assert_eq!(seq, 999),
                _ if loc == 0.0 => assert!(seq < 10, "{seq}"),
                _ => assert!(seq > 100 && seq < 700, "{seq}"),
            }
            o.sort();
            assert_eq!(o, (0..1000).collect::<Vec<u32>>());
        }
    }
}
