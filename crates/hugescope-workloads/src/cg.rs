//! Conjugate gradient on a random sparse symmetric positive-definite matrix:
//! the stand-in for NPB CG (NAS Parallel Benchmarks), whose sparse
//! matrix-vector product gathers from `p` at random column indices while the
//! vector updates stream.
//!
//! Matrix: each row gets `nonzeros` random off-diagonal entries in (0, 1),
//! mirrored to keep it symmetric; the diagonal is the row's absolute sum plus
//! one, so the matrix is strictly diagonally dominant and hence SPD (NPB builds
//! its matrix differently, from outer products of sparse vectors, but with the
//! same access structure). CG solves `A z = x` with x = 1, as NPB's inner solve
//! does, for `iterations` steps (NPB's cgitmax = 25); the result is the true
//! residual `||x - A z||`.

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{par_static, Arr, Mem};
use crate::process::{Image, ImageCfg, Stepping};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "cg",
        about: "conjugate gradient on a random sparse SPD matrix in CSR (NPB CG stand-in)",
        params: common(vec![
            p("rows", "int", "75000", "matrix order (NPB class B uses 75000)"),
            p("nonzeros", "int", "13", "random off-diagonal entries generated per row before mirroring (NPB 'nonzer')"),
            p("iterations", "int", "25", "CG iterations"),
        ]),
    }
}

/// NPB CG as the direct-segments paper runs it (ISCA'13 Tables 4/5): the same
/// solver, each of its eight arrays in its own 1GB page (as a multi-GB class D
/// run has them), plus stack and code regions.
pub fn npb_info() -> WorkloadInfo {
    WorkloadInfo {
        name: "npb-cg",
        about: "NPB CG (direct segments, ISCA'13): cg with every array in its own 1GB page, plus stack and code regions",
        params: common(vec![
            p("rows", "int", "20000", "matrix order (NPB class B 75000, class D 1.5M)"),
            p("nonzeros", "int", "13", "random off-diagonal entries generated per row before mirroring (NPB 'nonzer')"),
            p("iterations", "int", "2", "CG iterations (NPB runs 25 per outer step)"),
        ]),
    }
}

pub struct Cfg {
    pub rows: u64,
    pub nonzeros: u64,
    pub iterations: u64,
    pub seed: u64,
    pub threads: usize,
    /// npb-cg: arrays 1GB-aligned, and a process image stepped every iteration.
    pub image: Option<ImageCfg>,
}

const GIB: u64 = 1 << 30;

pub fn config(r: &Resolved) -> Result<Cfg> {
    let rows = r.int_min("rows", 2)?;
    if rows > u32::MAX as u64 {
        return Err(Error::input("cg: parameter 'rows' must be below 2^32"));
    }
    let nonzeros = r.int_min("nonzeros", 1)?;
    if nonzeros >= rows || nonzeros > 10_000 {
        return Err(Error::input(format!("cg: parameter 'nonzeros' must be below rows and at most 10000, got {nonzeros}")));
    }
    let threads = r.threads()?;
    // NPB is a Fortran program: no heap of note outside its arrays, a small
    // text and BSS (COMMON blocks hold only scalars here), an 8MiB stack per thread.
    let image = (r.workload == "npb-cg").then_some(ImageCfg { threads, stack_size: 8 << 20, bss: 64 << 10, code: 128 << 10 });
    Ok(Cfg { rows, nonzeros, iterations: r.int_min("iterations", 1)?, seed: r.int("seed")?, threads, image })
}

fn nnz_cap(c: &Cfg) -> u64 {
    c.rows * (2 * c.nonzeros + 1)
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    // Apart, the spmv's five streams (row_ptr, cols, vals, p, q) need five 1GB
    // TLB entries of the four there are: the paper's CG inversion (§5).
    // Array k starts k x 2MB past its 1GB boundary: apart in the 1GB TLB,
    // in different sets of the 2MB TLB.
    let align = if c.image.is_some() { GIB } else { crate::layout::ALIGN };
    let arrays = [("row_ptr", (c.rows + 1) * 8), ("cols", nnz_cap(c) * 4), ("vals", nnz_cap(c) * 8)]
        .into_iter()
        .chain(["x", "z", "r", "p", "q"].map(|v| (v, c.rows * 8)));
    for (k, (name, bytes)) in arrays.enumerate() {
        let offset = if c.image.is_some() { k as u64 * crate::layout::ALIGN } else { 0 };
        l.add_aligned(name, bytes, RegionKind::Anon, align, offset)?;
    }
    if let Some(img) = &c.image {
        img.add_regions(&mut l)?;
    }
    Ok(l)
}

pub fn temp_bytes(c: &Cfg) -> u64 {
    c.rows * c.nonzeros * 16 + c.rows * 16
}

const SLICE: usize = 64;

struct Mat {
    n: usize,
    row_ptr: Arr<u64>,
    cols: Arr<u32>,
    vals: Arr<f64>,
}

fn build<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Mat> {
    let n = c.rows as usize;
    let k = c.nonzeros as usize;
    let mut rng = Rng::stream(c.seed, 30);
    let mut src = Vec::with_capacity(n * k);
    let mut dst = Vec::with_capacity(n * k);
    let mut val = Vec::with_capacity(n * k);
    for i in 0..n as u32 {
        for _ in 0..k {
            let mut j = rng.below(n as u64 - 1) as u32;
            if j >= i {
                j += 1;
            }
            src.push(i);
            dst.push(j);
            val.push(0.01 + 0.99 * rng.f64());
        }
    }
    let mut deg = vec![1u64; n]; // diagonal
    for (&a, &b) in src.iter().zip(&dst) {
        deg[a as usize] += 1;
        deg[b as usize] += 1;
    }
    let mut row_ptr: Arr<u64> = m.alloc(l.get("row_ptr")?, n + 1)?;
    let mut acc = 0;
    for i in 0..n {
        row_ptr[i] = acc;
        acc += deg[i];
    }
    row_ptr[n] = acc;
    let mut cols: Arr<u32> = m.alloc(l.get("cols")?, acc as usize)?;
    let mut vals: Arr<f64> = m.alloc(l.get("vals")?, acc as usize)?;
    let mut cur: Vec<u64> = row_ptr[..n].to_vec();
    for i in 0..n {
        cols[cur[i] as usize] = i as u32; // diagonal placeholder first
        cur[i] += 1;
    }
    for ((&a, &b), &v) in src.iter().zip(&dst).zip(&val) {
        for (r, cc) in [(a, b), (b, a)] {
            let p = cur[r as usize] as usize;
            cols[p] = cc;
            vals[p] = v;
            cur[r as usize] += 1;
        }
    }
    // Sort each row by column, sum duplicates, set the dominant diagonal.
    let mut scratch: Vec<(u32, f64)> = Vec::new();
    let mut write = 0usize;
    let mut start = 0usize;
    for i in 0..n {
        let end = row_ptr[i + 1] as usize;
        scratch.clear();
        scratch.extend((start..end).map(|p| (cols[p], if cols[p] == i as u32 { 0.0 } else { vals[p] })));
        scratch.sort_by_key(|e| e.0);
        row_ptr[i] = write as u64;
        let offdiag: f64 = scratch.iter().map(|e| e.1.abs()).sum();
        let mut last = u32::MAX;
        for &(cc, v) in &scratch {
            let v = if cc == i as u32 { offdiag + 1.0 } else { v };
            if cc == last {
                vals[write - 1] += v;
            } else {
                cols[write] = cc;
                vals[write] = v;
                write += 1;
                last = cc;
            }
        }
        start = end;
    }
    row_ptr[n] = write as u64;
    Ok(Mat { n, row_ptr, cols, vals })
}

/// q = A p (traced), static row partition as NPB's OpenMP loop.
fn spmv<M: Mem>(m: &mut M, a: &Mat, p: &Arr<f64>, q: &mut Arr<f64>, threads: usize) {
    par_static(m, threads, a.n, SLICE, |m, lo, hi| {
        for i in lo..hi {
            let s = a.row_ptr.ld(m, i) as usize;
            let e = a.row_ptr.ld(m, i + 1) as usize;
            let mut sum = 0.0;
            for k in s..e {
                let j = a.cols.ld(m, k) as usize;
                sum += a.vals.ld(m, k) * p.ld(m, j);
            }
            q.st(m, i, sum);
        }
    });
}

fn dot<M: Mem>(m: &mut M, a: &Arr<f64>, b: &Arr<f64>, threads: usize) -> f64 {
    let mut s = 0.0;
    par_static(m, threads, a.len(), SLICE, |m, lo, hi| {
        for i in lo..hi {
            s += a.ld(m, i) * b.ld(m, i);
        }
    });
    s
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    if let Some(img) = &c.image {
        // Every iteration (a progress point) steps the stack, BSS and code.
        let image = Image::alloc(img, l, m)?;
        let mut s = Stepping::new(m, image);
        return solve(c, l, &mut s);
    }
    solve(c, l, m)
}

fn solve<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let a = build(c, l, m)?;
    let n = a.n;
    let t = c.threads;
    let mut x: Arr<f64> = m.alloc(l.get("x")?, n)?;
    let mut z: Arr<f64> = m.alloc(l.get("z")?, n)?;
    let mut r: Arr<f64> = m.alloc(l.get("r")?, n)?;
    let mut p: Arr<f64> = m.alloc(l.get("p")?, n)?;
    let mut q: Arr<f64> = m.alloc(l.get("q")?, n)?;
    x.fill(1.0);
    m.populated(&a.row_ptr);
    m.populated(&a.cols);
    m.populated(&a.vals);
    m.populated(&x);
    m.begin_run();
    par_static(m, t, n, SLICE, |m, lo, hi| {
        for i in lo..hi {
            let xi = x.ld(m, i);
            z.st(m, i, 0.0);
            r.st(m, i, xi);
            p.st(m, i, xi);
        }
    });
    let mut rho = dot(m, &r, &r, t);
    let mut history = vec![rho.sqrt()];
    for it in 0..c.iterations {
        spmv(m, &a, &p, &mut q, t);
        let pq = dot(m, &p, &q, t);
        if pq <= 0.0 || !pq.is_finite() {
            break; // converged to machine precision (or breakdown)
        }
        let alpha = rho / pq;
        par_static(m, t, n, SLICE, |m, lo, hi| {
            for i in lo..hi {
                let zi = z.ld(m, i) + alpha * p.ld(m, i);
                z.st(m, i, zi);
                let ri = r.ld(m, i) - alpha * q.ld(m, i);
                r.st(m, i, ri);
            }
        });
        let rho0 = rho;
        rho = dot(m, &r, &r, t);
        let beta = rho / rho0;
        par_static(m, t, n, SLICE, |m, lo, hi| {
            for i in lo..hi {
                let pi = r.ld(m, i) + beta * p.ld(m, i);
                p.st(m, i, pi);
            }
        });
        history.push(rho.sqrt());
        m.progress(&format!("iter:{}", it + 1));
    }
    // True residual ||x - A z||, computed as NPB does at the end of the solve.
    spmv(m, &a, &z, &mut q, t);
    let mut res2 = 0.0;
    par_static(m, t, n, SLICE, |m, lo, hi| {
        for i in lo..hi {
            let d = x.ld(m, i) - q.ld(m, i);
            res2 += d * d;
        }
    });
    m.end_run();
    let zsum: f64 = z.iter().sum();
    Ok(json!({
        "rows": n, "nonzeros": a.row_ptr[n], "iterations": history.len() - 1,
        "residual": res2.sqrt(), "initial_residual": history[0], "rnorm_history": history, "z_sum": zsum,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::CountingSink;

    #[test]
    fn residual_decreases_and_solution_is_correct() {
        let c = Cfg { rows: 2000, nonzeros: 5, iterations: 25, seed: 4, threads: 2, image: None };
        let l = layout(&c).unwrap();
        let mut sink = CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let res = run(&c, &l, &mut m).unwrap();
        let h: Vec<f64> = res["rnorm_history"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(h.windows(2).all(|w| w[1] < w[0]), "{h:?}");
        let resid = res["residual"].as_f64().unwrap();
        assert!(resid < 1e-6 * res["initial_residual"].as_f64().unwrap(), "{resid}");
        // symmetric matrix check on the built CSR
        let a = build(&c, &l, &mut m).unwrap();
        let get = |i: usize, j: u32| -> f64 {
            let (s, e) = (a.row_ptr[i] as usize, a.row_ptr[i + 1] as usize);
            a.cols[s..e].binary_search(&j).map(|k| a.vals[s + k]).unwrap_or(0.0)
        };
        for i in (0..2000).step_by(97) {
            for k in a.row_ptr[i] as usize..a.row_ptr[i + 1] as usize {
                assert_eq!(get(i, a.cols[k]), get(a.cols[k] as usize, i as u32));
            }
        }
    }
}
