//! Compressed sparse row storage, built by counting sort straight into the
//! fixed-address regions (no per-edge allocation): count degrees, prefix-sum
//! into `offsets`, scatter into `neighbors` (and `weights`), then sort each
//! adjacency list and drop duplicates in place, as GAP's builder "squishes" its
//! graphs. Self-loops are removed.

use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::rng::Rng;

use super::load::EdgeList;

/// Sources per construction bucket (the cursor block stays in L2).
const BUCKET: usize = 1 << 14;

pub struct Csr {
    pub n: usize,
    /// `offsets[v]..offsets[v+1]` index `neigh` (and `weights`). n+1 entries.
    pub offsets: Arr<u64>,
    pub neigh: Arr<u32>,
    pub weights: Option<Arr<u32>>,
    /// Largest edge weight (1 when unweighted).
    pub max_weight: u32,
}

impl Csr {
    /// Number of adjacency entries (directed edges stored).
    pub fn m(&self) -> usize {
        self.offsets[self.n] as usize
    }
    pub fn degree(&self, v: usize) -> usize {
        (self.offsets[v + 1] - self.offsets[v]) as usize
    }
    pub fn neighbors(&self, v: usize) -> &[u32] {
        &self.neigh[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }
}

/// Degree-based grouping (Faldu, Diamond, Grot, HPCA'19): vertices are put in
/// groups by degree relative to the average (below avg/2, below avg, then
/// doubling ranges), hottest group first, original order kept inside a group.
/// Returns new id of every old id.
pub fn dbg_order(deg: &[u64]) -> Vec<u32> {
    let n = deg.len();
    let total: u64 = deg.iter().sum();
    let avg = (total as f64 / n.max(1) as f64).max(1e-9);
    const GROUPS: usize = 10;
    let group = |d: u64| -> usize {
        let r = d as f64 / avg;
        if r < 0.5 {
            0
        } else if r < 1.0 {
            1
        } else {
            (2 + r.log2().floor() as usize).min(GROUPS - 1)
        }
    };
    let mut count = [0usize; GROUPS];
    for &d in deg {
        count[group(d)] += 1;
    }
    // Hot groups first: start positions in descending group order.
    let mut start = [0usize; GROUPS];
    let mut acc = 0;
    for g in (0..GROUPS).rev() {
        start[g] = acc;
        acc += count[g];
    }
    let mut new_id = vec![0u32; n];
    for (v, &d) in deg.iter().enumerate() {
        let g = group(d);
        new_id[v] = start[g] as u32;
        start[g] += 1;
    }
    new_id
}

/// Build the CSR of `el` into the `offsets`, `neighbors` (and `weights`)
/// regions. `weighted` without file weights draws uniform weights 1..=255 from
/// the seed (GAP's convention for generated weighted graphs).
pub fn build<M: Mem>(
    m: &mut M,
    l: &Layout,
    el: &EdgeList,
    symmetrize: bool,
    weighted: bool,
    dbg: bool,
    seed: u64,
) -> Result<Csr> {
    let n = el.n;
    let sym = symmetrize || el.symmetric;
    let cap = if sym { 2 * el.len() } else { el.len() };
    // DBG needs the degrees of the original ids first.
    let new_id: Option<Vec<u32>> = if dbg {
        let mut deg = vec![0u64; n];
        for (&u, &v) in el.src.iter().zip(&el.dst) {
            if u != v {
                deg[u as usize] += 1;
                if sym {
                    deg[v as usize] += 1;
                }
            }
        }
        Some(dbg_order(&deg))
    } else {
        None
    };
    let id = |x: u32| -> u32 {
        match &new_id {
            Some(p) => p[x as usize],
            None => x,
        }
    };
    // Pass 1: bucket the (source, target) pairs by blocks of BUCKET sources.
    // A direct scatter of 10^8 edges into a multi-GB array would take a TLB and
    // cache miss per edge; bucketing keeps each pass's working set small.
    let nb = n.div_ceil(BUCKET).max(1);
    // Exact bucket sizes first, so no bucket ever reallocates.
    let mut sizes = vec![0usize; nb];
    for (&u, &v) in el.src.iter().zip(&el.dst) {
        if u != v {
            sizes[id(u) as usize / BUCKET] += 1;
            if sym {
                sizes[id(v) as usize / BUCKET] += 1;
            }
        }
    }
    let mut buckets: Vec<Vec<u64>> = sizes.iter().map(|&s| Vec::with_capacity(s)).collect();
    let mut wbuckets: Vec<Vec<u32>> =
        if weighted { sizes.iter().map(|&s| Vec::with_capacity(s)).collect() } else { Vec::new() };
    let mut wrng = Rng::stream(seed, 4);
    for (i, (&u, &v)) in el.src.iter().zip(&el.dst).enumerate() {
        if u == v {
            continue;
        }
        let (a, b) = (id(u), id(v));
        let w = match (&el.w, weighted) {
            (Some(ws), true) => ws[i],
            (None, true) => 1 + wrng.below(255) as u32,
            _ => 0,
        };
        let (ba, bb) = (a as usize / BUCKET, b as usize / BUCKET);
        buckets[ba].push(((a as usize % BUCKET) as u64) << 32 | b as u64);
        if weighted {
            wbuckets[ba].push(w);
        }
        if sym {
            buckets[bb].push(((b as usize % BUCKET) as u64) << 32 | a as u64);
            if weighted {
                wbuckets[bb].push(w);
            }
        }
    }
    // Pass 2: degrees and offsets, bucket by bucket.
    let mut offsets: Arr<u64> = m.alloc(l.get("offsets")?, n + 1)?;
    let mut acc = 0u64;
    let mut local = vec![0u64; BUCKET];
    for (k, bucket) in buckets.iter().enumerate() {
        let lo = k * BUCKET;
        let hi = (lo + BUCKET).min(n);
        local[..hi - lo].fill(0);
        for &e in bucket {
            local[(e >> 32) as usize] += 1;
        }
        for v in lo..hi {
            offsets[v] = acc;
            acc += local[v - lo];
        }
    }
    offsets[n] = acc;
    // Pass 3: scatter each bucket into its (contiguous) slice of the arrays.
    let mut neigh: Arr<u32> = m.alloc(l.get("neighbors")?, cap)?;
    let mut weights: Option<Arr<u32>> = if weighted { Some(m.alloc(l.get("weights")?, cap)?) } else { None };
    for k in 0..nb {
        let bucket = std::mem::take(&mut buckets[k]);
        let wb = if weighted { std::mem::take(&mut wbuckets[k]) } else { Vec::new() };
        let lo = k * BUCKET;
        let hi = (lo + BUCKET).min(n);
        for v in lo..hi {
            local[v - lo] = offsets[v];
        }
        for (j, &e) in bucket.iter().enumerate() {
            let s = (e >> 32) as usize;
            let pos = local[s] as usize;
            local[s] += 1;
            neigh[pos] = e as u32;
            if let Some(ws) = weights.as_mut() {
                ws[pos] = wb[j];
            }
        }
    }
    drop(buckets);
    // Sort each list and drop duplicates (keeping the lightest), compacting.
    let mut write = 0usize;
    let mut start = 0usize;
    let mut scratch: Vec<u64> = Vec::new();
    let mut max_weight = 1u32;
    for v in 0..n {
        let end = offsets[v + 1] as usize;
        offsets[v] = write as u64;
        match weights.as_mut() {
            None => {
                let list = &mut neigh[start..end];
                list.sort_unstable();
                let mut last = u32::MAX;
                for j in start..end {
                    let x = neigh[j];
                    if x != last {
                        neigh[write] = x;
                        write += 1;
                        last = x;
                    }
                }
            }
            Some(ws) => {
                scratch.clear();
                scratch.extend((start..end).map(|j| ((neigh[j] as u64) << 32) | ws[j] as u64));
                scratch.sort_unstable();
                let mut last = u64::MAX;
                for &x in &scratch {
                    let nb = x >> 32;
                    if nb != last {
                        neigh[write] = nb as u32;
                        ws[write] = x as u32;
                        max_weight = max_weight.max(x as u32);
                        write += 1;
                        last = nb;
                    }
                }
            }
        }
        start = end;
    }
    offsets[n] = write as u64;
    // Built before the kernel runs: resident, in construction order.
    m.populated(&offsets);
    m.populated(&neigh);
    if let Some(w) = weights.as_ref() {
        m.populated(w);
    }
    Ok(Csr { n, offsets, neigh, weights, max_weight })
}

#[cfg(test)]
mod tests {
    use super::super::kronecker::kronecker;
    use super::*;
    use crate::mem::Traced;

    fn layout_for(n: usize, cap: usize) -> Layout {
        let mut l = Layout::new();
        l.add("offsets", (n as u64 + 1) * 8).unwrap();
        l.add("neighbors", cap as u64 * 4).unwrap();
        l.add("weights", cap as u64 * 4).unwrap();
        l
    }

    fn build_kron(scale: u32, seed: u64) -> (Vec<u64>, Vec<u32>) {
        let el = kronecker(scale, 16, seed);
        let l = layout_for(el.n, 2 * el.len());
        let mut sink = hugescope_core::trace::CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let g = build(&mut m, &l, &el, true, false, false, seed).unwrap();
        assert_eq!(m.accesses, 0, "construction is not traced");
        (g.offsets.to_vec(), g.neigh[..g.m()].to_vec())
    }

    #[test]
    fn csr_removes_self_loops_and_duplicates_and_sorts() {
        let el = EdgeList { n: 4, src: vec![0, 0, 1, 2, 2, 3], dst: vec![1, 1, 1, 3, 0, 3], w: None, symmetric: false };
        let l = layout_for(4, 12);
        let mut sink = hugescope_core::trace::CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let g = build(&mut m, &l, &el, true, false, false, 1).unwrap();
        assert_eq!(g.neighbors(0), &[1, 2]);
        assert_eq!(g.neighbors(1), &[0]);
        assert_eq!(g.neighbors(2), &[0, 3]);
        assert_eq!(g.neighbors(3), &[2]);
        assert_eq!(g.m(), 6);
    }

    #[test]
    fn kronecker_is_heavy_tailed_and_deterministic() {
        let (off, nb) = build_kron(16, 7);
        let n = off.len() - 1;
        let degs: Vec<u64> = (0..n).map(|v| off[v + 1] - off[v]).collect();
        let max = *degs.iter().max().unwrap() as f64;
        let mean = nb.len() as f64 / n as f64;
        assert!(max / mean > 50.0, "max {max} mean {mean}");
        let (off2, nb2) = build_kron(16, 7);
        assert_eq!(off, off2);
        assert_eq!(nb, nb2);
        let (off3, nb3) = build_kron(16, 8);
        assert!(off != off3 || nb != nb3);
    }

    #[test]
    fn uniform_graph_is_not_heavy_tailed() {
        let el = super::super::kronecker::uniform(14, 16, 3);
        let l = layout_for(el.n, 2 * el.len());
        let mut sink = hugescope_core::trace::CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let g = build(&mut m, &l, &el, true, false, false, 3).unwrap();
        let max = (0..g.n).map(|v| g.degree(v)).max().unwrap() as f64;
        assert!(max / (g.m() as f64 / g.n as f64) < 3.0);
    }

    #[test]
    fn dbg_puts_hot_vertices_first_and_is_a_permutation() {
        let deg = vec![1, 100, 2, 50, 0, 3];
        let p = dbg_order(&deg);
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(p[1], 0);
        assert_eq!(p[3], 1);
        // cold vertices keep their original relative order
        assert_eq!((p[0], p[2], p[4], p[5]), (2, 3, 4, 5));
    }
}
