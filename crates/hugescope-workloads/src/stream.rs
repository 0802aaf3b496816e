//! STREAM (McCalpin): copy, scale, add and triad sweeps over three arrays.
//!
//! The TLB-friendly control: purely sequential, every 4KB page is used in full
//! before the next, so huge pages should buy almost nothing. Arrays are
//! initialised a=1, b=2, c=0 as in STREAM; the kernels are partitioned in static
//! blocks over threads as STREAM's OpenMP loops are.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{par_static, Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::shadow::Shadow;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "stream",
        about: "STREAM copy/scale/add/triad sweeps: the sequential, TLB-friendly control",
        params: common(vec![
            p("size", "size", "64MiB", "bytes per array (three f64 arrays a, b, c)"),
            p("iterations", "int", "10", "repetitions of the four kernels"),
            p(
                "values",
                "bool",
                "true",
                "keep the arrays' values; false (trace mode): the addresses only, no host memory and no validation",
            ),
        ]),
    }
}

pub struct Cfg {
    pub elems: u64,
    pub iterations: u64,
    pub threads: usize,
    /// Keep the arrays (false: a trace of their addresses only, `shadow.rs`).
    pub values: bool,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let size = r.int("size")?;
    if size < 8 {
        return Err(Error::input(format!("stream: parameter 'size' must be at least 8 bytes, got {size}")));
    }
    Ok(Cfg {
        elems: size / 8,
        iterations: r.int_min("iterations", 1)?,
        threads: r.threads()?,
        values: r.bool_or("values", true)?,
    })
}

/// Host bytes a trace leaves out (the three arrays, with `values=false`).
pub fn elided_bytes(c: &Cfg) -> u64 {
    if c.values {
        0
    } else {
        3 * c.elems * 8
    }
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    for name in ["a", "b", "c"] {
        l.add(name, c.elems * 8)?;
    }
    Ok(l)
}

const SCALAR: f64 = 3.0;
const SLICE: usize = 512;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    if M::TRACING && !c.values {
        return run_addresses(c, l, m);
    }
    let n = c.elems as usize;
    let mut a: Arr<f64> = m.alloc(l.get("a")?, n)?;
    let mut b: Arr<f64> = m.alloc(l.get("b")?, n)?;
    let mut cc: Arr<f64> = m.alloc(l.get("c")?, n)?;
    a.fill(1.0);
    b.fill(2.0);
    m.populated(&a);
    m.populated(&b);
    m.begin_run();
    let t = c.threads;
    for it in 0..c.iterations {
        par_static(m, t, n, SLICE, |m, lo, hi| {
            for i in lo..hi {
                let v = a.ld(m, i);
                cc.st(m, i, v);
            }
        });
        par_static(m, t, n, SLICE, |m, lo, hi| {
            for i in lo..hi {
                let v = cc.ld(m, i);
                b.st(m, i, SCALAR * v);
            }
        });
        par_static(m, t, n, SLICE, |m, lo, hi| {
            for i in lo..hi {
                let v = a.ld(m, i) + b.ld(m, i);
                cc.st(m, i, v);
            }
        });
        par_static(m, t, n, SLICE, |m, lo, hi| {
            for i in lo..hi {
                let v = b.ld(m, i) + SCALAR * cc.ld(m, i);
                a.st(m, i, v);
            }
        });
        m.progress(&format!("iter:{}", it + 1));
    }
    m.end_run();
    // STREAM's validation: every element follows the scalar recurrence.
    let (mut ea, mut eb, mut ec) = (1.0f64, 2.0f64, 0.0f64);
    for _ in 0..c.iterations {
        ec = ea;
        eb = SCALAR * ec;
        ec = ea + eb;
        ea = eb + SCALAR * ec;
    }
    let ok = |arr: &Arr<f64>, e: f64| arr.iter().all(|&x| ((x - e) / e.abs().max(1e-300)).abs() < 1e-13);
    let valid = ok(&a, ea) && ok(&b, eb) && ok(&cc, ec);
    let sum = |arr: &Arr<f64>| arr.iter().sum::<f64>();
    Ok(json!({
        "elements": n, "iterations": c.iterations, "valid": valid,
        "sum_a": sum(&a), "sum_b": sum(&b), "sum_c": sum(&cc),
        "bytes_moved": (n as u64) * 8 * 10 * c.iterations,
    }))
}

/// The trace of `run` without the arrays (`values=false`): STREAM's indices
/// are its loop counters, so the four kernels' addresses are those of the
/// stored run, access for access.
fn run_addresses<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let n = c.elems as usize;
    let a: Shadow<f64> = Shadow::new(l.get("a")?, n)?;
    let b: Shadow<f64> = Shadow::new(l.get("b")?, n)?;
    let cc: Shadow<f64> = Shadow::new(l.get("c")?, n)?;
    a.populated(m);
    b.populated(m);
    m.begin_run();
    let t = c.threads;
    // (loads, store) of each kernel, in the order `run` issues them:
    // copy c=a, scale b=s*c, add c=a+b, triad a=b+s*c.
    let kernels: [(&[&Shadow<f64>], &Shadow<f64>); 4] = [(&[&a], &cc), (&[&cc], &b), (&[&a, &b], &cc), (&[&b, &cc], &a)];
    for it in 0..c.iterations {
        for (loads, store) in kernels {
            par_static(m, t, n, SLICE, |m, lo, hi| {
                for i in lo..hi {
                    for x in loads {
                        x.ld(m, i);
                    }
                    store.st(m, i);
                }
            });
        }
        m.progress(&format!("iter:{}", it + 1));
    }
    m.end_run();
    Ok(json!({ "elements": n, "iterations": c.iterations, "values": false, "bytes_moved": (n as u64) * 8 * 10 * c.iterations }))
}
