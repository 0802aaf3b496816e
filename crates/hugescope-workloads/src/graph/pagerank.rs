//! Pull-based PageRank as in GAP's `pr.cc`: each iteration first writes every
//! vertex's outgoing contribution (`score / out_degree`) into `contrib`, then
//! every vertex pulls the contributions of its in-neighbours (the graph is
//! symmetrised, so in-neighbours = neighbours) and rewrites its score. Scores are
//! f32 like GAP's `ScoreT`; the L1 change of the scores decides convergence.
//! Dangling vertices (degree 0) contribute nothing, as in GAP.

use serde_json::{json, Value};

use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::{par_dynamic, par_static, Arr, Mem};

use super::csr::Csr;

pub const DAMPING: f32 = 0.85;
const SLICE: usize = 64;
/// GAP's pull loop is `schedule(dynamic, 16384)`; we use smaller chunks so
/// small test graphs still spread over all threads.
const PULL_CHUNK: usize = 1024;

pub fn run<M: Mem>(m: &mut M, l: &Layout, g: &Csr, iterations: u32, epsilon: f64, threads: usize) -> Result<(Vec<f32>, Value)> {
    let n = g.n;
    let mut scores: Arr<f32> = m.alloc(l.get("scores")?, n)?;
    let mut contrib: Arr<f32> = m.alloc(l.get("contrib")?, n)?;
    let init = 1.0f32 / n as f32;
    let base = (1.0 - DAMPING) / n as f32;
    m.begin_run();
    par_static(m, threads, n, SLICE, |m, lo, hi| {
        for v in lo..hi {
            scores.st(m, v, init);
        }
    });
    let mut iters = 0u32;
    let mut error = 0.0f64;
    for it in 0..iterations {
        par_static(m, threads, n, SLICE, |m, lo, hi| {
            for v in lo..hi {
                let d = g.offsets.ld(m, v + 1) - g.offsets.ld(m, v);
                let s = scores.ld(m, v);
                contrib.st(m, v, if d > 0 { s / d as f32 } else { 0.0 });
            }
        });
        error = 0.0;
        par_dynamic(m, threads, n, PULL_CHUNK, |m, _, lo, hi| {
            for u in lo..hi {
                let a = g.offsets.ld(m, u) as usize;
                let b = g.offsets.ld(m, u + 1) as usize;
                let mut total = 0.0f32;
                for j in a..b {
                    let v = g.neigh.ld(m, j) as usize;
                    total += contrib.ld(m, v);
                }
                let old = scores.ld(m, u);
                let new = base + DAMPING * total;
                scores.st(m, u, new);
                error += (new - old).abs() as f64;
            }
        });
        iters = it + 1;
        m.progress(&format!("iter:{iters}"));
        if error < epsilon {
            break;
        }
    }
    m.end_run();
    let s: Vec<f32> = scores.to_vec();
    let (top, top_score) = s
        .iter()
        .enumerate()
        .fold((0usize, f32::MIN), |acc, (i, &x)| if x > acc.1 { (i, x) } else { acc });
    let res = json!({
        "iterations": iters, "error": error, "score_sum": s.iter().map(|&x| x as f64).sum::<f64>(),
        "top_vertex": top, "top_score": top_score,
        "scores_hash": crate::hex(crate::hash_words(s.iter().map(|&x| x.to_bits() as u64))),
    });
    Ok((s, res))
}

#[cfg(test)]
mod tests {
    use super::super::{csr, kronecker};
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::CountingSink;

    #[test]
    fn matches_dense_power_iteration() {
        let el = kronecker::kronecker(9, 8, 2);
        let n = el.n;
        let mut l = Layout::new();
        l.add("offsets", (n as u64 + 1) * 8).unwrap();
        l.add("neighbors", 2 * el.len() as u64 * 4).unwrap();
        l.add("scores", n as u64 * 4).unwrap();
        l.add("contrib", n as u64 * 4).unwrap();
        let mut sink = CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let g = csr::build(&mut m, &l, &el, true, false, false, 2).unwrap();
        // Dense reference in f64: A[u][v] = 1 if edge.
        let mut a = vec![0.0f64; n * n];
        for u in 0..n {
            for &v in g.neighbors(u) {
                a[u * n + v as usize] = 1.0;
            }
        }
        let deg: Vec<f64> = (0..n).map(|v| g.degree(v) as f64).collect();
        let mut s = vec![1.0 / n as f64; n];
        for _ in 0..15 {
            let c: Vec<f64> = (0..n).map(|v| if deg[v] > 0.0 { s[v] / deg[v] } else { 0.0 }).collect();
            s = (0..n)
                .map(|u| (1.0 - 0.85) / n as f64 + 0.85 * (0..n).map(|v| a[u * n + v] * c[v]).sum::<f64>())
                .collect();
        }
        for threads in [1, 2] {
            let (got, res) = run(&mut m, &l, &g, 15, 0.0, threads).unwrap();
            assert_eq!(res["iterations"], 15);
            for u in 0..n {
                assert!((got[u] as f64 - s[u]).abs() < 1e-6, "vertex {u}: {} vs {}", got[u], s[u]);
            }
        }
        // epsilon stops early
        let (_, res) = run(&mut m, &l, &g, 100, 1e-3, 1).unwrap();
        assert!(res["iterations"].as_u64().unwrap() < 100);
    }
}
