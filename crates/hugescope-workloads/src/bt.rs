//! NPB BT (NAS block tri-diagonal solver) as the direct-segments paper runs it
//! (ISCA'13 Table 2; reference §8.2): an N³ grid with a 5-component state `u`,
//! right-hand sides `rhs`, and 5×5 block arrays along the line being solved
//! (`lhs`), advanced by ADI steps: compute the right-hand side from a 7-point
//! stencil, then solve block-tridiagonal systems along every x line, every y
//! line and every z line, then add the correction to `u`.
//!
//! Memory layout as NAS's Fortran `u(5, 0:N-1, 0:N-1, 0:N-1)`: the five
//! components of a point are adjacent, then x, then y, then z. The x sweep
//! walks a line in consecutive words; the y and z sweeps step one x-row, or one
//! x-y plane, per point. Each x-row is padded to whole 4KB pages (`row_pad`)
//! so that a y step (and so a z step) lands on a new 4KB page at every point,
//! as it does in NAS classes B and up (5 × 103 × 8 bytes > 4KB) at a test
//! size whose rows are shorter.
//!
//! The numerics are a real block-tridiagonal ADI relaxation (diagonally
//! dominant blocks, so Gaussian elimination without pivoting is stable), not
//! NAS's Navier-Stokes Jacobians: the TLB sees the same structure. Points and
//! blocks are traced one access per 64-byte line (`Arr::touch_span`).

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::{Layout, PAGE};
use crate::mem::{par_static, Arr, Mem};
use crate::process::{Image, ImageCfg};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "npb-bt",
        about: "NPB BT (direct segments, ISCA'13): N^3 grid, 5-component state, 5x5 block-tridiagonal solves along x, y and z",
        params: common(vec![
            p("grid", "int", "24", "grid points per dimension N (NAS class A 64, B 102, C 162)"),
            p("iterations", "int", "3", "ADI time steps"),
            p("row_pad", "bool", "true", "pad each x-row to whole 4KB pages so every y/z step lands on a new page"),
        ]),
    }
}

pub struct Cfg {
    pub n: usize,
    pub iterations: u64,
    /// Words from one x-row to the next.
    pub row: usize,
    pub seed: u64,
    pub threads: usize,
    pub image: ImageCfg,
}

const C: usize = 5;
const BLOCK: usize = C * C;
/// Relaxation coupling: the off-diagonal blocks are -K (I + J(u)).
const K: f64 = 0.25;

pub fn config(r: &Resolved) -> Result<Cfg> {
    let n = r.int_min("grid", 3)?;
    if n > 2048 {
        return Err(Error::input(format!("npb-bt: parameter 'grid' must be at most 2048, got {n}")));
    }
    let n = n as usize;
    let words = PAGE as usize / 8;
    let row = if r.bool("row_pad")? { (C * n).div_ceil(words) * words } else { C * n };
    let threads = r.threads()?;
    Ok(Cfg {
        n,
        iterations: r.int_min("iterations", 1)?,
        row,
        seed: r.int("seed")?,
        threads,
        image: ImageCfg { threads, stack_size: 8 << 20, bss: 64 << 10, code: 128 << 10 },
    })
}

impl Cfg {
    fn grid_words(&self) -> u64 {
        (self.n * self.n) as u64 * self.row as u64
    }
    /// Word index of component 0 of point (i, j, k).
    #[inline]
    fn at(&self, i: usize, j: usize, k: usize) -> usize {
        (k * self.n + j) * self.row + i * C
    }
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("u", c.grid_words() * 8)?;
    l.add("rhs", c.grid_words() * 8)?;
    // Per thread, the eliminated upper blocks C' of the line being solved.
    l.add("lhs", (c.threads * c.n * BLOCK) as u64 * 8)?;
    c.image.add_regions(&mut l)?;
    Ok(l)
}

type Mat = [[f64; C]; C];

/// The coupling Jacobian of a point's state (small, so blocks stay dominant).
fn jac(u: &[f64]) -> Mat {
    let mut j = [[0.0; C]; C];
    for a in 0..C {
        for b in 0..C {
            j[a][b] = 0.02 * u[a] * u[b] / (1.0 + u[a] * u[a] + u[b] * u[b]);
        }
    }
    j
}

/// Solve B X = [Cm | d] in place by Gaussian elimination (B diagonally dominant).
fn solve(mut b: Mat, cm: &mut Mat, d: &mut [f64; C]) {
    for p in 0..C {
        let inv = 1.0 / b[p][p];
        for r in p + 1..C {
            let f = b[r][p] * inv;
            if f == 0.0 {
                continue;
            }
            let (bp, cp) = (b[p], cm[p]);
            for (x, y) in b[r][p..].iter_mut().zip(&bp[p..]) {
                *x -= f * y;
            }
            for (x, y) in cm[r].iter_mut().zip(&cp) {
                *x -= f * y;
            }
            d[r] -= f * d[p];
        }
    }
    for p in (0..C).rev() {
        let inv = 1.0 / b[p][p];
        for q in 0..C {
            let s: f64 = (p + 1..C).fold(cm[p][q], |s, r| s - b[p][r] * cm[r][q]);
            cm[p][q] = s * inv;
        }
        let mut s = d[p];
        for r in p + 1..C {
            s -= b[p][r] * d[r];
        }
        d[p] = s * inv;
    }
}

/// One block-tridiagonal solve along a line of `n` points whose component-0
/// words are `base + s * step`: rhs on the line becomes the correction.
/// Blocks: A = C = -K (I + J), B = (1 + 2K) I + J, J = jac(u) at the point.
#[allow(clippy::too_many_arguments)]
fn line<M: Mem>(m: &mut M, c: &Cfg, u: &Arr<f64>, rhs: &mut Arr<f64>, lhs: &mut Arr<f64>, t: usize, base: usize, step: usize) {
    let n = c.n;
    let l0 = t * n * BLOCK;
    let mut prev_c: Mat = [[0.0; C]; C];
    let mut prev_d = [0.0; C];
    for s in 0..n {
        let w = base + s * step;
        u.touch_span(m, w, C, false);
        let j = jac(&u[w..w + C]);
        let mut a: Mat = [[0.0; C]; C];
        let mut b: Mat = [[0.0; C]; C];
        for x in 0..C {
            for y in 0..C {
                let id = (x == y) as u8 as f64;
                a[x][y] = -K * (id + j[x][y]);
                b[x][y] = (1.0 + 2.0 * K) * id + j[x][y];
            }
        }
        rhs.touch_span(m, w, C, false);
        let mut d = [0.0; C];
        d.copy_from_slice(&rhs[w..w + C]);
        if s > 0 {
            // B -= A C'(s-1); d -= A d'(s-1)
            for x in 0..C {
                for y in 0..C {
                    b[x][y] -= (0..C).map(|z| a[x][z] * prev_c[z][y]).sum::<f64>();
                }
                d[x] -= (0..C).map(|z| a[x][z] * prev_d[z]).sum::<f64>();
            }
        }
        let mut cm = if s + 1 < n { a } else { [[0.0; C]; C] };
        solve(b, &mut cm, &mut d);
        let lw = l0 + s * BLOCK;
        for x in 0..C {
            lhs[lw + x * C..lw + x * C + C].copy_from_slice(&cm[x]);
        }
        lhs.touch_span(m, lw, BLOCK, true);
        rhs[w..w + C].copy_from_slice(&d);
        rhs.touch_span(m, w, C, true);
        prev_c = cm;
        prev_d = d;
    }
    // Back substitution: d(s) -= C'(s) d(s+1).
    for s in (0..n.saturating_sub(1)).rev() {
        let w = base + s * step;
        let lw = l0 + s * BLOCK;
        lhs.touch_span(m, lw, BLOCK, false);
        rhs.touch_span(m, w, C, false);
        for x in 0..C {
            let corr: f64 = (0..C).map(|y| lhs[lw + x * C + y] * prev_d[y]).sum();
            rhs[w + x] -= corr;
        }
        rhs.touch_span(m, w, C, true);
        prev_d.copy_from_slice(&rhs[w..w + C]);
    }
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let n = c.n;
    let mut u: Arr<f64> = m.alloc(l.get("u")?, c.grid_words() as usize)?;
    let mut rhs: Arr<f64> = m.alloc(l.get("rhs")?, c.grid_words() as usize)?;
    let mut lhs: Arr<f64> = m.alloc(l.get("lhs")?, c.threads * n * BLOCK)?;
    let mut image = Image::alloc(&c.image, l, m)?;
    // Initial state: smooth field plus a seeded perturbation (NAS's exact
    // solution is smooth too).
    let mut rng = Rng::stream(c.seed, 70);
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let w = c.at(i, j, k);
                for x in 0..C {
                    let smooth = 1.0 + 0.1 * (x as f64 + 1.0) * ((i + 2 * j + 3 * k) as f64 / n as f64);
                    u[w + x] = smooth + 0.01 * rng.f64();
                }
            }
        }
    }
    m.populated(&u);
    m.begin_run();
    let plane = n * n;
    let mut rnorm = Vec::new();
    for it in 0..c.iterations {
        // compute_rhs: 7-point Laplacian of u (zero-flux boundary), static over k-planes.
        par_static(m, c.threads, plane * n, 64, |m, lo, hi| {
            for p in lo..hi {
                let (i, j, k) = (p % n, p / n % n, p / plane);
                let w = c.at(i, j, k);
                let mut lap = [0.0; C];
                let nb = [
                    c.at(i.saturating_sub(1), j, k),
                    c.at((i + 1).min(n - 1), j, k),
                    c.at(i, j.saturating_sub(1), k),
                    c.at(i, (j + 1).min(n - 1), k),
                    c.at(i, j, k.saturating_sub(1)),
                    c.at(i, j, (k + 1).min(n - 1)),
                ];
                u.touch_span(m, w, C, false);
                for &q in &nb {
                    u.touch_span(m, q, C, false);
                    for x in 0..C {
                        lap[x] += u[q + x] - u[w + x];
                    }
                }
                for x in 0..C {
                    rhs[w + x] = 0.1 * lap[x];
                }
                rhs.touch_span(m, w, C, true);
            }
        });
        // x, y and z sweeps: lines of the other two indices, split over threads.
        // Steps between the points of a line: x, y, z.
        let per = plane.div_ceil(c.threads);
        for step in [C, c.row, n * c.row] {
            par_static(m, c.threads, plane, 16, |m, lo, hi| {
                for q in lo..hi {
                    let (a, b) = (q % n, q / n);
                    let base = if step == C {
                        c.at(0, a, b)
                    } else if step == c.row {
                        c.at(a, 0, b)
                    } else {
                        c.at(a, b, 0)
                    };
                    // par_static gives thread t the t-th block of `per` lines.
                    let t = q / per;
                    line(m, c, &u, &mut rhs, &mut lhs, t, base, step);
                }
            });
        }
        // add: u += rhs.
        let mut norm = 0.0;
        par_static(m, c.threads, plane * n, 64, |m, lo, hi| {
            for p in lo..hi {
                let w = c.at(p % n, p / n % n, p / plane);
                rhs.touch_span(m, w, C, false);
                u.touch_span(m, w, C, true);
                for x in 0..C {
                    u[w + x] += rhs[w + x];
                    norm += rhs[w + x] * rhs[w + x];
                }
            }
        });
        rnorm.push(norm.sqrt());
        // The time step's driver: its call chain, a counter, its constants.
        image.step(m, 0, it);
        m.progress(&format!("iter:{}", it + 1));
    }
    m.end_run();
    let mut usum = 0.0;
    for k in 0..n {
        for j in 0..n {
            let w = c.at(0, j, k);
            usum += u[w..w + C * n].iter().sum::<f64>();
        }
    }
    Ok(json!({
        "grid": n, "iterations": c.iterations, "rhs_norms": rnorm, "u_sum": usum,
        "image_acc": crate::hex(image.acc),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_solve_inverts_a_dominant_block() {
        let mut rng = Rng::new(9);
        let mut b: Mat = [[0.0; C]; C];
        for (x, row) in b.iter_mut().enumerate() {
            for (y, v) in row.iter_mut().enumerate() {
                *v = if x == y { 4.0 } else { rng.f64() - 0.5 };
            }
        }
        let mut cm: Mat = [[0.0; C]; C];
        for row in cm.iter_mut() {
            for v in row.iter_mut() {
                *v = rng.f64();
            }
        }
        let mut d = [1.0, 2.0, 3.0, 4.0, 5.0];
        let (c0, d0) = (cm, d);
        solve(b, &mut cm, &mut d);
        for x in 0..C {
            let bd: f64 = (0..C).map(|z| b[x][z] * d[z]).sum();
            assert!((bd - d0[x]).abs() < 1e-12);
            for y in 0..C {
                let bc: f64 = (0..C).map(|z| b[x][z] * cm[z][y]).sum();
                assert!((bc - c0[x][y]).abs() < 1e-12);
            }
        }
    }
}
