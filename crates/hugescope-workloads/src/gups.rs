//! GUPS: the HPC Challenge RandomAccess benchmark (Luszczek et al., HPCC).
//!
//! A table of 8-byte words is updated at random positions: `table[i] ^= r`.
//! Each update is one read and one write of the same element, with no locality
//! at all: the canonical TLB-hostile workload (used by the PCC and Ingens
//! evaluations as a worst case for base pages). HPCC initialises `table[i] = i`
//! (untimed) and uses `4 × table entries` updates; our default size and update
//! count follow that rule.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;
use crate::shadow::Shadow;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "gups",
        about: "HPCC RandomAccess: random 8-byte read-modify-write updates over a table",
        params: common(vec![
            p("size", "size", "64MiB", "table size in bytes (multiple of 8)"),
            p("updates", "int", "32M", "number of updates (HPCC uses 4 x table entries)"),
            p(
                "values",
                "bool",
                "true",
                "keep the table's values; false (trace mode): the addresses only, no host memory for the table and no checksum",
            ),
        ]),
    }
}

pub struct Cfg {
    pub entries: u64,
    pub updates: u64,
    pub seed: u64,
    pub threads: usize,
    /// Keep the table (false: a trace of its addresses only, `shadow.rs`).
    pub values: bool,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let size = r.int("size")?;
    if size < 8 || size % 8 != 0 {
        return Err(Error::input(format!("gups: parameter 'size' must be a positive multiple of 8 bytes, got {size}")));
    }
    Ok(Cfg {
        entries: size / 8,
        updates: r.int_min("updates", 1)?,
        seed: r.int("seed")?,
        threads: r.threads()?,
        values: r.bool_or("values", true)?,
    })
}

/// Host bytes a trace of this run leaves out (the table, with `values=false`):
/// what the memory check need not find on this machine.
pub fn elided_bytes(c: &Cfg) -> u64 {
    if c.values {
        0
    } else {
        c.entries * 8
    }
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("table", c.entries * 8)?;
    Ok(l)
}

/// Updates per scheduling chunk (a thread's slice of the interleaved trace).
const CHUNK: u64 = 1024;
/// Progress point every this many updates.
const PROGRESS: u64 = 1 << 20;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    if M::TRACING && !c.values {
        return run_addresses(c, l, m);
    }
    let n = c.entries as usize;
    let mut t: Arr<u64> = m.alloc(l.get("table")?, n)?;
    for (i, x) in t.iter_mut().enumerate() {
        *x = i as u64;
    }
    m.populated(&t);
    m.begin_run();
    let mut rng = Rng::new(c.seed);
    drive(m, c.updates, c.threads, |m| update(&mut t, m, rng.next_u64()));
    m.end_run();
    let checksum = crate::hash_words(t.iter().copied());
    Ok(json!({ "entries": n, "updates": c.updates, "checksum": crate::hex(checksum) }))
}

/// The trace of `run` without the table (`values=false`): the index of each
/// update depends on the random stream only, never on the table's contents,
/// so the addresses are those of the stored run, access for access.
fn run_addresses<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let t: Shadow<u64> = Shadow::new(l.get("table")?, c.entries as usize)?;
    t.populated(m);
    m.begin_run();
    let mut rng = Rng::new(c.seed);
    drive(m, c.updates, c.threads, |m| {
        let i = index(rng.next_u64(), t.len());
        t.ld(m, i);
        t.st(m, i);
    });
    m.end_run();
    Ok(json!({ "entries": c.entries, "updates": c.updates, "values": false }))
}

/// The entry the random word `r` picks: multiply-shift, uniform over `len`.
#[inline(always)]
fn index(r: u64, len: usize) -> usize {
    ((r as u128 * len as u128) >> 64) as usize
}

/// One update of HPCC RandomAccess: the entry the random word `r` picks
/// (multiply-shift, uniform over the table) is read, XORed with `r` and
/// written back.
#[inline(always)]
pub(crate) fn update<M: Mem>(t: &mut Arr<u64>, m: &mut M, r: u64) {
    let i = index(r, t.len());
    let v = t.ld(m, i);
    t.st(m, i, v ^ r);
}

/// Runs `updates` updates (`one` makes one) in chunks of `CHUNK` dealt round
/// robin to `threads` simulated cpus, with a progress point every `PROGRESS`
/// updates: the schedule every GUPS-like workload shares.
pub(crate) fn drive<M: Mem>(m: &mut M, updates: u64, threads: usize, mut one: impl FnMut(&mut M)) {
    let mut done = 0u64;
    let mut chunk = 0usize;
    while done < updates {
        m.set_cpu(chunk % threads);
        let end = (done + CHUNK).min(updates);
        for _ in done..end {
            one(m);
        }
        if end / PROGRESS != done / PROGRESS {
            m.progress(&format!("updates:{}", end / PROGRESS * PROGRESS));
        }
        done = end;
        chunk += 1;
    }
}
