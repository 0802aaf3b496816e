//! The dirty-file program of Navarro et al. (OSDI'02 §6.7): "maps a 100MB file,
//! reads every page thus triggering superpage promotion, then writes into every
//! 512th page, flushes the file and exits". With the Alpha's 8KB pages every
//! 512th page is one write per 4MB superpage, so a system that keeps the
//! promoted clean superpages and marks them dirty whole writes back 512 times
//! the data; demoting a clean superpage on its first write (§4.7) writes back
//! only the written pages. The paper measures a factor of more than 20.
//!
//! The file is a [`RegionKind::File`] region (contents written before the run,
//! see [`crate::microbench::map_file`]). The run loads one word of every 64-byte
//! line in address order (reading every byte, as the program's read does), then
//! stores one word at the start of every `write_every`-th page, then emits the
//! progress label `msync` where the program flushes the file: the OS model
//! counts the bytes written back there (what a real `msync(MS_SYNC)` writes).

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::Result;

use crate::layout::Layout;
use crate::mem::Mem;
use crate::microbench::{add_region, map_file, single_thread, size_param, stride_param};
use crate::registry::{common, p, Resolved, WorkloadInfo};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "dirtyfile",
        about: "read a 100MB mapped file wholly, write every 512th page, flush (progress label 'msync'): dirty superpages (Navarro OSDI'02 §6.7)",
        params: common(vec![
            p("size", "size", "100MiB", "bytes of the file (a multiple of 4KiB; the paper's 100MB)"),
            p("page", "size", "8KiB", "the base page the write interval counts in (the paper's Alpha: 8KiB; 4KiB on x86-64 presets)"),
            p("write_every", "int", "512", "write one word in every this many pages (the paper's 512: one per 4MB on the Alpha)"),
        ]),
    }
}

pub struct Cfg {
    pub size: u64,
    pub page: u64,
    pub write_every: u64,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let size = size_param(r, "size")?;
    Ok(Cfg { size, page: stride_param(r, "page", size)?, write_every: r.int_min("write_every", 1)? })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    add_region(&mut l, "file", c.size, RegionKind::File)?;
    Ok(l)
}

/// Words per 64-byte line: the read phase loads one word per line.
const LINE: usize = 8;
/// The progress label at the flush; the reservation model counts write-back there.
pub const FLUSH_LABEL: &str = "msync";

/// Pages the write phase stores to: 0, write_every, 2 write_every, ... pages.
pub fn written_pages(c: &Cfg) -> u64 {
    c.size.div_ceil(c.page.saturating_mul(c.write_every))
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let mut f = map_file(m, l.get("file")?, 2)?;
    m.begin_run();
    let mut sum = 0u64;
    for i in (0..f.len()).step_by(LINE) {
        sum = sum.wrapping_add(f.ld(m, i));
    }
    m.progress("read");
    let step = (c.page / 8).saturating_mul(c.write_every) as usize;
    let mut written = 0u64;
    for i in (0..f.len()).step_by(step) {
        f.st(m, i, !sum ^ i as u64);
        written += 1;
    }
    m.progress(FLUSH_LABEL);
    m.end_run();
    Ok(json!({
        "lines_read": f.len().div_ceil(LINE), "pages_written": written, "read_sum": crate::hex(sum),
        "file_hash": crate::hex(crate::hash_words(f.iter().copied())),
    }))
}
