//! Matrix: a non-blocked transposition of a 1000x1000 matrix of doubles
//! (Navarro et al. OSDI'02 §6.2). `b[j][i] = a[i][j]`, row by row of `a`: the
//! reads of `a` walk one row sequentially while the writes to `b` walk a column,
//! one 8000-byte row of `b` apart, so with base pages every write lands on a
//! page not touched for `n` accesses. On the Alpha's 128-entry DTLB that is "one
//! TLB miss for every two memory accesses", which superpages remove: Matrix is
//! the paper's best case (Table 1: speedup 7.5, 99.47% fewer DTLB misses).
//!
//! `a` is initialised before the run (its pages are resident, in order); `b` is
//! fresh memory, so the first transposition faults it column by column.
//! Exactly `2 n^2` accesses per repetition.

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::microbench::{add_region, single_thread};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "matrix",
        about: "non-blocked transpose of an n x n matrix of doubles, one TLB miss per two accesses with base pages (Navarro OSDI'02 §6.2 Matrix)",
        params: common(vec![
            p("n", "int", "1000", "rows = columns of the matrix (the paper's 1000; 8 bytes per element)"),
            p("repetitions", "int", "5", "transpositions of a into b (2 n^2 accesses each)"),
        ]),
    }
}

pub struct Cfg {
    pub n: usize,
    pub repetitions: u64,
}

/// Largest `n`: 2^16 rows make a 32GiB matrix, beyond any machine this runs on.
const MAX_N: u64 = 1 << 16;

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let n = r.int_min("n", 1)?;
    if n > MAX_N {
        return Err(Error::input(format!("matrix: parameter 'n' must be at most {MAX_N}, got {n}")));
    }
    Ok(Cfg { n: n as usize, repetitions: r.int_min("repetitions", 1)? })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let bytes = (c.n * c.n * 8) as u64;
    let mut l = Layout::new();
    add_region(&mut l, "a", bytes, RegionKind::Anon)?;
    add_region(&mut l, "b", bytes, RegionKind::Anon)?;
    Ok(l)
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let n = c.n;
    let mut a: Arr<f64> = m.alloc(l.get("a")?, n * n)?;
    for (k, x) in a.iter_mut().enumerate() {
        *x = k as f64;
    }
    m.populated(&a);
    let mut b: Arr<f64> = m.alloc(l.get("b")?, n * n)?;
    m.begin_run();
    for rep in 0..c.repetitions {
        for i in 0..n {
            for j in 0..n {
                let v = a.ld(m, i * n + j);
                b.st(m, j * n + i, v);
            }
        }
        m.progress(&format!("rep:{}", rep + 1));
    }
    m.end_run();
    // a[k] = k, so b is the transpose exactly when b[j n + i] = i n + j.
    let valid = (0..n).all(|j| (0..n).all(|i| b[j * n + i] == (i * n + j) as f64));
    Ok(json!({
        "n": n, "repetitions": c.repetitions, "accesses_per_repetition": 2 * n * n, "valid": valid,
        "b_hash": crate::hex(crate::hash_words(b.iter().map(|x| x.to_bits()))),
    }))
}
