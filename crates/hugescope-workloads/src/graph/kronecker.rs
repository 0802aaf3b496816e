//! Synthetic graph generators.
//!
//! Kronecker (R-MAT) with the Graph500 initiator A=0.57, B=0.19, C=0.19
//! (D=0.05): each edge descends `scale` levels of the adjacency matrix, picking
//! one quadrant per level. The result has the heavy-tailed degree distribution
//! of social/web graphs, which is what makes BFS/SSSP/PageRank on Kronecker
//! graphs the PCC paper's showcase for HUBs (few hot high-degree vertices).
//! Vertex ids are then relabelled by a random permutation, as Graph500 and
//! GAP do, so the hubs are scattered over the id space (and so over memory).
//!
//! Uniform: both endpoints uniform (Erdős–Rényi-like; GAP's "urand").

use crate::rng::Rng;

use super::load::EdgeList;

/// Quadrant thresholds scaled to 16 bits: one 64-bit random number decides four
/// levels. 16-bit resolution (1/65536) is far finer than the initiator's
/// two-digit precision.
const T_A: u64 = (0.57 * 65536.0) as u64;
const T_AB: u64 = (0.76 * 65536.0) as u64;
const T_ABC: u64 = (0.95 * 65536.0) as u64;

pub fn kronecker(scale: u32, degree: u32, seed: u64) -> EdgeList {
    let n = 1usize << scale;
    let m = n * degree as usize;
    let mut rng = Rng::stream(seed, 1);
    let mut src = Vec::with_capacity(m);
    let mut dst = Vec::with_capacity(m);
    for _ in 0..m {
        let (mut u, mut v) = (0u32, 0u32);
        let mut bits = 0u64;
        for level in 0..scale {
            if level % 4 == 0 {
                bits = rng.next_u64();
            }
            let r = bits & 0xffff;
            bits >>= 16;
            let ub = (r >= T_AB) as u32;
            let vb = ((r >= T_A && r < T_AB) || r >= T_ABC) as u32;
            u = (u << 1) | ub;
            v = (v << 1) | vb;
        }
        src.push(u);
        dst.push(v);
    }
    // Random relabelling (Fisher-Yates permutation from its own stream).
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut prng = Rng::stream(seed, 2);
    for i in (1..n).rev() {
        let j = prng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    for x in src.iter_mut().chain(dst.iter_mut()) {
        *x = perm[*x as usize];
    }
    EdgeList { n, src, dst, w: None, symmetric: false }
}

pub fn uniform(scale: u32, degree: u32, seed: u64) -> EdgeList {
    let n = 1usize << scale;
    let m = n * degree as usize;
    let mut rng = Rng::stream(seed, 3);
    let mut src = Vec::with_capacity(m);
    let mut dst = Vec::with_capacity(m);
    for _ in 0..m {
        src.push(rng.below(n as u64) as u32);
        dst.push(rng.below(n as u64) as u32);
    }
    EdgeList { n, src, dst, w: None, symmetric: false }
}
