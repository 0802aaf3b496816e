//! The 4MB-stride program of Navarro et al. (OSDI'02 §6.6, "preemption
//! overhead"): a process touches memory with a 4MB stride, so every touch is
//! the first fault in a fresh 4MB-aligned extent and asks for a 4MB
//! reservation. Run with only 4MB of contiguous memory free, each request must
//! preempt an earlier reservation: the paper sees one preemption every seven
//! allocations and a 1.1% slowdown.
//!
//! One word is touched at offsets 0, stride, 2 stride, ... of the mapping, in
//! address order, `passes` times: exactly `ceil(size / stride)` distinct pages
//! per pass, and only the first pass faults.

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::microbench::{add_region, single_thread, size_param, stride_param, touch_every, touches};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "stride4m",
        about: "one word touched every 4MB, each touch a first fault asking for a 4MB reservation: the preemption case (Navarro OSDI'02 §6.6)",
        params: common(vec![
            p("size", "size", "256MiB", "bytes of the mapping stepped over (a multiple of 4KiB)"),
            p("stride", "size", "4MiB", "bytes between touches (multiple of 8, at most size); the paper's 4MB"),
            p("passes", "int", "1", "sweeps over the mapping (only the first faults)"),
            p("write", "bool", "true", "store (true) or load (false) at each touch"),
        ]),
    }
}

pub struct Cfg {
    pub size: u64,
    pub stride: u64,
    pub passes: u64,
    pub write: bool,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let size = size_param(r, "size")?;
    Ok(Cfg { size, stride: stride_param(r, "stride", size)?, passes: r.int_min("passes", 1)?, write: r.bool("write")? })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "mapping", c.size, RegionKind::Anon)?;
    Ok(l)
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let mut a: Arr<u64> = m.alloc(l.get("mapping")?, (c.size / 8) as usize)?;
    m.begin_run();
    let mut sum = 0u64;
    for pass in 0..c.passes {
        sum = sum.wrapping_add(touch_every(m, &mut a, c.stride, c.write, pass));
        m.progress(&format!("pass:{}", pass + 1));
    }
    m.end_run();
    let pages = touches(c.size, c.stride);
    let written = if c.write { crate::hash_words(a.iter().step_by((c.stride / 8) as usize).copied()) } else { 0 };
    Ok(json!({
        "touched_pages": pages, "touches": pages * c.passes,
        "read_sum": sum, "written_hash": crate::hex(written),
    }))
}
