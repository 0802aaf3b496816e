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

/// Levels sampled at once through the alias table.
const GROUP: u32 = 4;
const OUTCOMES: usize = 1 << (2 * GROUP);

/// Walker/Vose alias table over the 256 outcomes of four R-MAT levels: one
/// 32-bit draw picks four quadrants (bits interleaved as u3 v3 .. u0 v0), four
/// times fewer draws and branches than level-by-level descent, so a scale-22
/// graph (67M edges) generates in about a second.
struct Alias {
    threshold: [u32; OUTCOMES],
    alias: [u8; OUTCOMES],
    /// The four u bits and v bits of each outcome, de-interleaved.
    ubits: [u8; OUTCOMES],
    vbits: [u8; OUTCOMES],
}

fn alias_table() -> Alias {
    let quad = [0.57f64, 0.19, 0.19, 0.05]; // (u,v) = (0,0), (0,1), (1,0), (1,1)
    let mut p = [0f64; OUTCOMES];
    for (o, x) in p.iter_mut().enumerate() {
        *x = (0..GROUP).map(|l| quad[(o >> (2 * l)) & 3]).product::<f64>() * OUTCOMES as f64;
    }
    let mut small: Vec<usize> = (0..OUTCOMES).filter(|&i| p[i] < 1.0).collect();
    let mut large: Vec<usize> = (0..OUTCOMES).filter(|&i| p[i] >= 1.0).collect();
    let mut t = Alias { threshold: [u32::MAX; OUTCOMES], alias: [0; OUTCOMES], ubits: [0; OUTCOMES], vbits: [0; OUTCOMES] };
    for i in 0..OUTCOMES {
        t.alias[i] = i as u8;
        for l in (0..GROUP).rev() {
            let q = (i >> (2 * l)) & 3;
            t.ubits[i] = (t.ubits[i] << 1) | (q >> 1) as u8;
            t.vbits[i] = (t.vbits[i] << 1) | (q & 1) as u8;
        }
    }
    while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
        t.threshold[s] = (p[s] * 4_294_967_296.0).min(4_294_967_295.0) as u32;
        t.alias[s] = l as u8;
        p[l] -= 1.0 - p[s];
        if p[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    t
}

pub fn kronecker(scale: u32, degree: u32, seed: u64) -> EdgeList {
    let n = 1usize << scale;
    let m = n * degree as usize;
    let table = alias_table();
    let mut rng = Rng::stream(seed, 1);
    let mut src = Vec::with_capacity(m);
    let mut dst = Vec::with_capacity(m);
    let groups = scale / GROUP;
    let rest = scale % GROUP;
    for _ in 0..m {
        let (mut u, mut v) = (0u32, 0u32);
        for _ in 0..groups {
            let r = rng.next_u64();
            let i = (r & 0xff) as usize;
            let o = if ((r >> 32) as u32) < table.threshold[i] { i } else { table.alias[i] as usize };
            u = (u << GROUP) | table.ubits[o] as u32;
            v = (v << GROUP) | table.vbits[o] as u32;
        }
        if rest > 0 {
            let mut bits = rng.next_u64();
            for _ in 0..rest {
                let r = bits & 0xffff;
                bits >>= 16;
                let ub = (r >= T_AB) as u32;
                let vb = ((r >= T_A && r < T_AB) || r >= T_ABC) as u32;
                u = (u << 1) | ub;
                v = (v << 1) | vb;
            }
        }
        src.push(u);
        dst.push(v);
    }
    // Relabel vertices by a seeded bijection of 0..n, so hubs are scattered over
    // the id space as Graph500/GAP's random permutation does. A register-only
    // bijection avoids 10^8 cache-missing lookups into a permutation table.
    let key = Rng::stream(seed, 2).next_u64();
    for x in src.iter_mut().chain(dst.iter_mut()) {
        *x = scramble(*x, scale, key);
    }
    EdgeList { n, src, dst, w: None, symmetric: false }
}

/// A keyed bijection of `0..2^scale`: odd multiplications and xor-shifts
/// modulo 2^scale, each invertible, so the composition permutes the ids.
#[inline]
pub fn scramble(x: u32, scale: u32, key: u64) -> u32 {
    let mask = (1u64 << scale) - 1;
    let k1 = (key | 1) & mask | 1;
    let k2 = ((key >> 32) | 1) & mask | 1;
    let sh = (scale / 2).max(1);
    let mut y = x as u64;
    y = y.wrapping_mul(k1) & mask;
    y ^= y >> sh;
    y = y.wrapping_add(key >> 17) & mask;
    y = y.wrapping_mul(k2) & mask;
    y ^= y >> sh;
    y = y.wrapping_mul(k1 ^ 2) & mask;
    y ^= y >> (sh + 1).min(scale.max(1) - 1).max(1);
    y as u32
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_permutation() {
        for scale in [1u32, 2, 5, 12] {
            for key in [0u64, 1, 0xdead_beef_1234_5678] {
                let n = 1u32 << scale;
                let mut seen = vec![false; n as usize];
                for x in 0..n {
                    let y = scramble(x, scale, key);
                    assert!(y < n && !seen[y as usize], "scale {scale} key {key}");
                    seen[y as usize] = true;
                }
            }
        }
    }

    #[test]
    fn alias_table_reproduces_the_initiator() {
        let t = alias_table();
        let mut rng = Rng::new(5);
        let mut quad = [0u64; 4];
        let draws = 400_000;
        for _ in 0..draws {
            let r = rng.next_u64();
            let i = (r & 0xff) as usize;
            let o = if ((r >> 32) as u32) < t.threshold[i] { i } else { t.alias[i] as usize };
            for l in 0..GROUP {
                quad[(o >> (2 * l)) & 3] += 1;
            }
        }
        let total = (draws * GROUP as u64) as f64;
        for (q, want) in quad.iter().zip([0.57, 0.19, 0.19, 0.05]) {
            assert!((*q as f64 / total - want).abs() < 0.003, "{quad:?}");
        }
    }
}
