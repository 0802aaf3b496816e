//! `cmp` of two mapped files (Navarro et al. OSDI'02 §6.6): the utility maps
//! two identical 100MB files and reads them side by side. Like the adversary
//! it faults every page in address order, so it pays for incremental promotion,
//! but it reads every byte of each page, which dilutes that cost: the paper
//! measures under 0.1% slowdown.
//!
//! Both files are [`RegionKind::File`] regions with the same contents (written
//! before the run, see [`crate::microbench::map_file`]); the comparison loads
//! one word of each file in turn, in address order, and stops at the first
//! difference (there is none): exactly `2 x size / 8` accesses.

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::Mem;
use crate::microbench::{add_region, map_file, single_thread, size_param};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "cmp",
        about: "cmp of two identical mapped files read side by side, every byte of every page (Navarro OSDI'02 §6.6)",
        params: common(vec![p("size", "size", "100MiB", "bytes of each file (a multiple of 4KiB; the paper's 100MB)")]),
    }
}

pub struct Cfg {
    pub size: u64,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    Ok(Cfg { size: size_param(r, "size")? })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "file_a", c.size, RegionKind::File)?;
    add_region(&mut l, "file_b", c.size, RegionKind::File)?;
    Ok(l)
}

/// Words compared between progress points (16MB of each file).
const PROGRESS: usize = 1 << 21;

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    // One file id for both: the paper compares two identical files.
    let a = map_file(m, l.get("file_a")?, 1)?;
    let b = map_file(m, l.get("file_b")?, 1)?;
    m.begin_run();
    let mut first_difference = None;
    let mut compared = 0usize;
    for i in 0..a.len() {
        let (x, y) = (a.ld(m, i), b.ld(m, i));
        compared += 1;
        if x != y {
            first_difference = Some(i as u64 * 8);
            break;
        }
        if compared.is_multiple_of(PROGRESS) {
            m.progress(&format!("bytes:{}", compared * 8));
        }
    }
    m.end_run();
    Ok(json!({ "file_bytes": c.size, "bytes_compared": compared as u64 * 8, "identical": first_difference.is_none(), "first_difference": first_difference }))
}
