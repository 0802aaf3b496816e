//! Sequential first touch of one fresh anonymous mapping: the page-fault latency
//! microbenchmark of Ingens (OSDI'16 §3.1), which "maps 10 GB of anonymous
//! virtual memory and reads it sequentially" to compare fault latency with and
//! without huge pages, unfragmented and at FMFI 0.9.
//!
//! Nothing is populated before the measured phase, so with the default 4KB
//! stride every page faults exactly once, in address order: `size / 4KB` faults
//! under base pages, one per 2MB under fault-time huge pages. Threads split the
//! mapping in contiguous blocks (each thread faults its own part, as a parallel
//! `memset` would).

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::{Layout, PAGE};
use crate::mem::{par_static, Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "seqtouch",
        about: "one fresh anonymous mapping touched once in address order: Ingens' page-fault latency microbenchmark (OSDI'16 §3.1)",
        params: common(vec![
            p("size", "size", "1GiB", "bytes mapped and touched (the paper's 10 GB, scaled; a multiple of 4KiB)"),
            p("stride", "size", "4KiB", "bytes between touches (multiple of 8, at most size); 4KiB touches every page once"),
            p("write", "bool", "false", "store instead of load (the paper reads)"),
        ]),
    }
}

pub struct Cfg {
    pub size: u64,
    pub stride: u64,
    pub write: bool,
    pub threads: usize,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let size = r.int("size")?;
    if size == 0 || size % PAGE != 0 {
        return Err(Error::input(format!("seqtouch: parameter 'size' must be a positive multiple of 4KiB, got {size}")));
    }
    let stride = r.int("stride")?;
    if stride == 0 || stride % 8 != 0 || stride > size {
        return Err(Error::input(format!(
            "seqtouch: parameter 'stride' must be a positive multiple of 8 bytes, at most size ({size}), got {stride}"
        )));
    }
    Ok(Cfg { size, stride, write: r.bool("write")?, threads: r.threads()? })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("mapping", c.size)?;
    Ok(l)
}

/// Distinct 4KB pages the run touches: all of them when the stride is below a
/// page, one per touch otherwise.
pub fn touched_pages(c: &Cfg) -> u64 {
    if c.stride < PAGE {
        c.size / PAGE
    } else {
        c.size.div_ceil(c.stride)
    }
}

/// Touches per scheduling slice of a thread (16 pages at the default stride).
const SLICE: usize = 16;
/// A progress point every this many touches (1GB at the default stride).
const PROGRESS: usize = 1 << 18;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let words = (c.size / 8) as usize;
    let step = (c.stride / 8) as usize;
    let touches = words.div_ceil(step);
    let mut a: Arr<u64> = m.alloc(l.get("mapping")?, words)?;
    m.begin_run();
    let mut sum = 0u64;
    let mut done = 0usize;
    par_static(m, c.threads, touches, SLICE, |m, lo, hi| {
        for k in lo..hi {
            let i = k * step;
            if c.write {
                a.st(m, i, k as u64 + 1);
            } else {
                // black_box: natively the load of a never-written page must
                // still happen (it is the fault being measured).
                sum = sum.wrapping_add(std::hint::black_box(a.ld(m, i)));
            }
        }
        let before = done;
        done += hi - lo;
        if done / PROGRESS != before / PROGRESS {
            m.progress(&format!("touches:{}", done / PROGRESS * PROGRESS));
        }
    });
    m.end_run();
    let written = if c.write { crate::hash_words(a.iter().step_by(step).copied()) } else { 0 };
    Ok(json!({
        "touches": touches, "mapped_pages": c.size / PAGE, "touched_pages": touched_pages(c),
        "read_sum": sum, "written_hash": crate::hex(written),
    }))
}
