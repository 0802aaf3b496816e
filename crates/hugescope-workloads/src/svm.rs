//! Linear SVM trained by stochastic gradient descent over a sparse dataset: the
//! stand-in for the SVM of Ingens (OSDI'16 Table 1: Liblinear [64] on a large
//! sparse text dataset), the workload of its synchronous-versus-asynchronous
//! promotion experiment (§3.1, Table 4) and of the fairness runs (Fig. 2).
//!
//! Data: CSR rows (`row_ptr`, `feat` ids, `vals`) with a ±1 `labels` array.
//! Feature ids are Zipf-distributed (skew `theta`) and scrambled over the id
//! space, as word and n-gram frequencies are in kdd2010 or webspam, whose ids
//! come from a vocabulary or a hash. The model is one dense `weights` vector of
//! f64 indexed by feature id: the scan of the data is sequential, the weight
//! reads and updates are random (the TLB-hostile part).
//!
//! Memory is allocated and first touched gradually: the first epoch reads the
//! dataset in blocks (traced stores of the parsed rows, so its pages fault as
//! training starts) and trains on each block once it is read; weights fault on
//! first use. So fault-time huge pages cover the data at once, while
//! khugepaged's default 1.6 MB/s (4096 pages per 10 s) lags behind: Table 4's
//! 4.8 GB of huge pages with synchronous promotion against 468 MB without.
//!
//! Training (hinge loss, Pegasos-style step without the dense regulariser):
//! per row, `margin = y · Σ w[f] x`; if `margin < 1`, `w[f] += eta · y · x` for
//! every nonzero, with `eta = ETA0 / epoch` (epochs counted from 1). Threads
//! split each block's rows in static contiguous parts and update the shared
//! weights without locks, as Hogwild-style parallel SGD does.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{par_static, Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::{fnv64, mix64, Rng};
use crate::zipf::{Zipf, MAX_THETA};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "svm",
        about: "linear SVM trained by SGD over a sparse CSR dataset with Zipf feature ids (Ingens' Liblinear SVM, OSDI'16 Table 4)",
        params: common(vec![
            p("features", "int", "4M", "length of the dense weight vector (feature ids; kdd2010 and webspam have millions)"),
            p("rows", "int", "100k", "training examples"),
            p("nnz_per_row", "int", "40", "nonzero features per example"),
            p("epochs", "int", "2", "passes over the data; the first one reads the data in as it trains"),
            p("theta", "float", "0.99", "Zipf skew of feature ids, 0 (uniform) to 0.999"),
        ]),
    }
}

pub struct Cfg {
    pub features: u64,
    pub rows: u64,
    pub nnz_per_row: u64,
    pub epochs: u64,
    pub theta: f64,
    pub seed: u64,
    pub threads: usize,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let features = r.int_min("features", 2)?;
    if features > u32::MAX as u64 {
        return Err(Error::input(format!("svm: parameter 'features' must be below 2^32 (u32 ids), got {features}")));
    }
    let rows = r.int_min("rows", 1)?;
    let nnz_per_row = r.int_min("nnz_per_row", 1)?;
    if nnz_per_row > 1 << 20 {
        return Err(Error::input(format!("svm: parameter 'nnz_per_row' must be at most 2^20, got {nnz_per_row}")));
    }
    if rows.checked_mul(nnz_per_row).map_or(true, |n| n > 1 << 40) {
        return Err(Error::input(format!("svm: rows x nnz_per_row ({rows} x {nnz_per_row}) must be at most 2^40")));
    }
    Ok(Cfg {
        features,
        rows,
        nnz_per_row,
        epochs: r.int_min("epochs", 1)?,
        theta: r.float_in("theta", 0.0, MAX_THETA)?,
        seed: r.int("seed")?,
        threads: r.threads()?,
    })
}

impl Cfg {
    fn nnz(&self) -> u64 {
        self.rows * self.nnz_per_row
    }
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("row_ptr", (c.rows + 1) * 8)?;
    l.add("feat", c.nnz() * 4)?;
    l.add("vals", c.nnz() * 4)?;
    l.add("labels", c.rows * 4)?;
    l.add("weights", c.features * 8)?;
    Ok(l)
}

/// Rows read in per block in the first epoch (a read buffer's worth of the file).
const BLOCK: usize = 1024;
/// Rows per scheduling slice of a thread.
const SLICE: usize = 8;
/// Step size of the first epoch.
const ETA0: f64 = 0.5;

/// Weight of feature `f` in the hidden model that labels the data, in [-1, 1):
/// labels depend on the features, so training has something to learn.
fn hidden(f: u32, seed: u64) -> f64 {
    (mix64(f as u64 ^ mix64(seed ^ 0x73766d)) >> 11) as f64 * (2.0 / (1u64 << 53) as f64) - 1.0
}

struct Data {
    row_ptr: Arr<u64>,
    feat: Arr<u32>,
    vals: Arr<f32>,
    labels: Arr<f32>,
}

/// Parse rows [lo, hi) into the CSR arrays (traced stores: the pages fault as
/// the file is read in). The row contents come from one sequential stream, so
/// the dataset does not depend on `threads`.
fn read_rows<M: Mem>(c: &Cfg, d: &mut Data, m: &mut M, z: &Zipf, rng: &mut Rng, lo: usize, hi: usize) {
    let k = c.nnz_per_row as usize;
    let scale = 1.0 / (k as f64).sqrt();
    let mut ids = vec![0u32; k];
    for r in lo..hi {
        for id in ids.iter_mut() {
            // Scrambled: frequent ids are spread over the whole weight vector.
            *id = (fnv64(z.next(rng)) % c.features) as u32;
        }
        // libsvm format lists a row's features by increasing id.
        ids.sort_unstable();
        let base = r * k;
        let mut score = 0.0;
        for (j, &f) in ids.iter().enumerate() {
            let x = ((1 + rng.below(1000)) as f64 / 1000.0 * scale) as f32;
            score += hidden(f, c.seed) * x as f64;
            d.feat.st(m, base + j, f);
            d.vals.st(m, base + j, x);
        }
        d.labels.st(m, r, if score >= 0.0 { 1.0 } else { -1.0 });
        d.row_ptr.st(m, r + 1, (base + k) as u64);
    }
}

/// Counts of one pass: examples with margin below 1 (updated) and with the
/// wrong sign (misclassified before their update).
#[derive(Default)]
struct Pass {
    updates: u64,
    errors: u64,
}

/// One SGD step per row in [lo, hi).
fn train_rows<M: Mem>(d: &Data, w: &mut Arr<f64>, m: &mut M, eta: f64, lo: usize, hi: usize, pass: &mut Pass) {
    for r in lo..hi {
        let s = d.row_ptr.ld(m, r) as usize;
        let e = d.row_ptr.ld(m, r + 1) as usize;
        let y = d.labels.ld(m, r) as f64;
        let mut dot = 0.0;
        for k in s..e {
            let f = d.feat.ld(m, k) as usize;
            dot += w.ld(m, f) * d.vals.ld(m, k) as f64;
        }
        let margin = y * dot;
        if margin <= 0.0 {
            pass.errors += 1;
        }
        if margin < 1.0 {
            pass.updates += 1;
            for k in s..e {
                let f = d.feat.ld(m, k) as usize;
                let x = d.vals.ld(m, k) as f64;
                let v = w.ld(m, f);
                w.st(m, f, v + eta * y * x);
            }
        }
    }
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let rows = c.rows as usize;
    let nnz = c.nnz() as usize;
    let mut d = Data {
        row_ptr: m.alloc(l.get("row_ptr")?, rows + 1)?,
        feat: m.alloc(l.get("feat")?, nnz)?,
        vals: m.alloc(l.get("vals")?, nnz)?,
        labels: m.alloc(l.get("labels")?, rows)?,
    };
    let mut w: Arr<f64> = m.alloc(l.get("weights")?, c.features as usize)?;
    let z = Zipf::with_theta(c.features, c.theta);
    let mut rng = Rng::stream(c.seed, 50);
    // Nothing is populated: the data is read in during the measured phase.
    m.begin_run();
    let mut last = Pass::default();
    let mut errors = Vec::new();
    for epoch in 1..=c.epochs {
        let eta = ETA0 / epoch as f64;
        let mut pass = Pass::default();
        if epoch == 1 {
            let mut lo = 0;
            while lo < rows {
                let hi = (lo + BLOCK).min(rows);
                // The file is read by one thread, then the block is trained on by all.
                m.set_cpu(0);
                read_rows(c, &mut d, m, &z, &mut rng, lo, hi);
                par_static(m, c.threads, hi - lo, SLICE, |m, a, b| train_rows(&d, &mut w, m, eta, lo + a, lo + b, &mut pass));
                lo = hi;
            }
        } else {
            par_static(m, c.threads, rows, SLICE, |m, a, b| train_rows(&d, &mut w, m, eta, a, b, &mut pass));
        }
        m.progress(&format!("epoch:{epoch}"));
        errors.push(pass.errors);
        last = pass;
    }
    m.end_run();
    let touched = w.iter().filter(|&&x| x != 0.0).count();
    Ok(json!({
        "rows": rows, "nnz": nnz, "epochs": c.epochs,
        "last_epoch_updates": last.updates, "errors_per_epoch": errors,
        "nonzero_weights": touched,
        "weights_hash": crate::hex(crate::hash_words(w.iter().map(|x| x.to_bits()))),
        "data_hash": crate::hex(crate::hash_words(d.feat.iter().map(|&f| f as u64).chain(d.vals.iter().map(|x| x.to_bits() as u64)))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::CountingSink;

    #[test]
    fn training_learns_the_hidden_model() {
        let c = Cfg { features: 5000, rows: 4000, nnz_per_row: 20, epochs: 4, theta: 0.9, seed: 2, threads: 2 };
        let l = layout(&c).unwrap();
        let mut sink = CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let res = run(&c, &l, &mut m).unwrap();
        // Labels come from a linear model: training beats chance (half the
        // examples) by far, and each epoch misclassifies fewer than the first.
        let errors: Vec<u64> = res["errors_per_epoch"].as_array().unwrap().iter().map(|e| e.as_u64().unwrap()).collect();
        assert!(errors[3] < 4000 / 4 && errors[3] < errors[0], "{res}");
    }
}
