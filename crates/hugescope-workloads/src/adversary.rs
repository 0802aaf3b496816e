//! The adversary of Navarro et al. (OSDI'02 §6.6): "allocates memory, accesses
//! one byte in each page, and deallocates the memory", which makes the system
//! pay every cost of incremental promotion (population maps, promotions as each
//! extent fills, demotions at the free) while the TLB gains nothing, since each
//! translation is used once. The paper measures an 8.9% slowdown.
//!
//! Each round touches one word per `page` bytes of the region in address order
//! (a store, as a program initialising fresh memory does), then releases the
//! whole region to the OS (`munmap`: natively MADV_DONTNEED, in a trace a free
//! marker), so the next round faults every page again. Exactly
//! `rounds x size / page` accesses.

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::microbench::{add_region, single_thread, size_param, stride_param, touch_every, touches};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "adversary",
        about: "touch one word per page of a fresh region, then free it, repeatedly: the worst case for reservations (Navarro OSDI'02 §6.6)",
        params: common(vec![
            p("size", "size", "256MiB", "bytes allocated and freed each round (a multiple of 4KiB)"),
            p("page", "size", "8KiB", "bytes between touches: the base page (the paper's Alpha: 8KiB; 4KiB on x86-64 presets)"),
            p("rounds", "int", "8", "allocate-touch-free rounds"),
        ]),
    }
}

pub struct Cfg {
    pub size: u64,
    pub page: u64,
    pub rounds: u64,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let size = size_param(r, "size")?;
    Ok(Cfg { size, page: stride_param(r, "page", size)?, rounds: r.int_min("rounds", 1)? })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "region", c.size, RegionKind::Anon)?;
    Ok(l)
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let mut a: Arr<u64> = m.alloc(l.get("region")?, (c.size / 8) as usize)?;
    m.begin_run();
    let mut hash = 0u64;
    for round in 0..c.rounds {
        touch_every(m, &mut a, c.page, true, round);
        // What the round wrote, before the free zeroes it: both modes agree.
        hash = crate::hash_words([hash, crate::hash_words(a.iter().step_by((c.page / 8) as usize).copied())]);
        let n = a.len();
        m.release(&mut a, 0, n);
        m.progress(&format!("round:{}", round + 1));
    }
    m.end_run();
    let per_round = touches(c.size, c.page);
    Ok(json!({ "rounds": c.rounds, "touches_per_round": per_round, "touches": per_round * c.rounds, "written_hash": crate::hex(hash) }))
}
