//! FFTW-like: a three-dimensional FFT access pattern over an n x n x n complex
//! array, the paper's "FFTW with a 200x200x200 matrix as input" (Navarro et al.
//! OSDI'02 §6.2). FFTW's own code is not reproduced; what matters for the TLB is
//! its access pattern: one-dimensional transforms along every line of each axis,
//! each a sequence of radix-2 butterfly passes whose span doubles per pass
//! (1, 2, 4, ... < n), re-reading the line's elements once per pass.
//!
//! Along the last axis consecutive elements are n^2 x 16 bytes apart (640KB at
//! n = 200), so one line touches n distinct pages of any size below 4MB: more
//! than the Alpha's 128 DTLB entries, re-swept every pass, so 64KB and 512KB
//! pages change nothing, while 4MB pages (32 of them cover the 128MB array) hold
//! the whole line. That is the paper's result: 4MB pages alone give 1.55, 64KB
//! and 512KB nothing (Table 2); FFTW builds 60 4MB superpages (Table 1).
//!
//! A butterfly on elements (i, i + span) of a line loads both and stores both:
//! four accesses (the real part of each complex number is traced; the imaginary
//! part is in the same 16 bytes, so the same line and page). `lines` transforms
//! only that share of each axis's n^2 lines, spread evenly, so a trace at the
//! paper's size takes seconds; each transformed line has the full pattern. The
//! input array is initialised before the run (its pages are resident).

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::microbench::{add_region, single_thread};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "fftw",
        about: "3-D FFT pattern over an n^3 complex array, radix-2 passes with doubling spans along each axis; 4MB pages matter (Navarro OSDI'02 §6.2 FFTW)",
        params: common(vec![
            p("n", "int", "200", "points per dimension (the paper's 200: a 128MB array of 16-byte complex numbers)"),
            p("lines", "float", "0.05", "share of each axis's n^2 lines transformed, spread evenly, 0 to 1 (1 = the full 3-D transform)"),
        ]),
    }
}

pub struct Cfg {
    pub n: usize,
    pub lines: f64,
}

/// Largest n: 2^11 points per dimension are a 128GiB array.
const MAX_N: u64 = 1 << 11;

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let n = r.int_min("n", 2)?;
    if n > MAX_N {
        return Err(Error::input(format!("fftw: parameter 'n' must be at most {MAX_N}, got {n}")));
    }
    let lines = r.float_in("lines", 0.0, 1.0)?;
    // At least one line per axis, or the run would do nothing.
    if ((n * n) as f64 * lines).floor() < 1.0 {
        return Err(Error::input(format!("fftw: parameter 'lines' ({lines}) must select at least one of the n^2 = {} lines of an axis", n * n)));
    }
    Ok(Cfg { n: n as usize, lines })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "data", (c.n * c.n * c.n * 16) as u64, RegionKind::Anon)?;
    Ok(l)
}

/// Whether line `k` of an axis is transformed: line k is taken when
/// `share x (k + 1)` passes an integer, so the taken lines are spread evenly
/// and there are exactly `floor(share x n^2)` of them.
fn taken(k: usize, share: f64) -> bool {
    ((k + 1) as f64 * share).floor() > (k as f64 * share).floor()
}

/// Lines of one axis that are transformed.
pub fn lines_per_axis(c: &Cfg) -> u64 {
    (0..c.n * c.n).filter(|&k| taken(k, c.lines)).count() as u64
}

/// Butterflies of one line of `n` points: pairs (i, i + span) inside blocks
/// of 2 span, for each span 1, 2, 4, ... below n.
pub fn butterflies_per_line(n: usize) -> u64 {
    let mut count = 0u64;
    let mut span = 1;
    while span < n {
        for start in (0..n).step_by(2 * span) {
            count += span.min(n.saturating_sub(start + span)) as u64;
        }
        span *= 2;
    }
    count
}

/// Twiddle factors exp(-i pi k / span) for every span, flattened: the factors
/// of span s start at index s - 1 (1 + 2 + ... + s/2 = s - 1 before it).
fn twiddles(n: usize) -> Vec<(f64, f64)> {
    let mut t = Vec::new();
    let mut span = 1;
    while span < n {
        for k in 0..span {
            let a = -std::f64::consts::PI * k as f64 / span as f64;
            t.push((a.cos(), a.sin()));
        }
        span *= 2;
    }
    t
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let n = c.n;
    let mut d: Arr<f64> = m.alloc(l.get("data")?, 2 * n * n * n)?;
    // The input: a deterministic signal (FFTW's benchmark fills its input too).
    for (k, x) in d.iter_mut().enumerate() {
        *x = ((k % 97) as f64 - 48.0) / 48.0;
    }
    m.populated(&d);
    let tw = twiddles(n);
    m.begin_run();
    let mut butterflies = 0u64;
    // Element strides of the three axes: x is contiguous, z is n^2 apart.
    for (axis, stride) in [1, n, n * n].into_iter().enumerate() {
        for k in (0..n * n).filter(|&k| taken(k, c.lines)) {
            let (u, v) = (k / n, k % n);
            // The first element of line (u, v) along this axis.
            let first = match axis {
                0 => (u * n + v) * n,
                1 => u * n * n + v,
                _ => u * n + v,
            };
            let mut span = 1;
            while span < n {
                for start in (0..n).step_by(2 * span) {
                    for j in 0..span.min(n.saturating_sub(start + span)) {
                        let (w_re, w_im) = tw[span - 1 + j];
                        let (e1, e2) = (2 * (first + (start + j) * stride), 2 * (first + (start + j + span) * stride));
                        let (x_re, x_im) = (d.ld(m, e1), d[e1 + 1]);
                        let (y_re, y_im) = (d.ld(m, e2), d[e2 + 1]);
                        let (t_re, t_im) = (y_re * w_re - y_im * w_im, y_re * w_im + y_im * w_re);
                        d.st(m, e1, x_re + t_re);
                        d[e1 + 1] = x_im + t_im;
                        d.st(m, e2, x_re - t_re);
                        d[e2 + 1] = x_im - t_im;
                        butterflies += 1;
                    }
                }
                span *= 2;
            }
        }
        m.progress(&format!("axis:{axis}"));
    }
    m.end_run();
    Ok(json!({
        "n": n, "lines_per_axis": lines_per_axis(c), "butterflies": butterflies,
        "data_hash": crate::hex(crate::hash_words(d.iter().map(|x| x.to_bits()))),
    }))
}
