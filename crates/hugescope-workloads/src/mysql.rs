//! MySQL/InnoDB as the direct-segments paper runs it (ISCA'13 Table 2: TPC-C
//! with 2000 warehouses), reduced to what the TLB sees (reference §8.2):
//!
//! * a B+-tree of 16KB pages in a large buffer pool (`pool`, anonymous: the
//!   primary region): each request descends root to leaf (the shared `btree`
//!   code: binary search per node) and reads its row from the leaf page;
//! * `threads` connection threads (at least 256 in the paper's setup), each
//!   with its own 8MiB stack (`stack:T`, guard page at the bottom), scheduled
//!   round robin, `quantum` requests per turn; a request runs a call chain
//!   `stack_touch` bytes deep;
//! * BSS/globals (`bss`): lock words and counters, `globals` read-modify-writes
//!   per request at random words;
//! * file mappings: the redo log (`redo`), appended by every write request,
//!   and a table file (`tablespace`) of which `file_read_ratio` of requests read
//!   one random line.
//!
//! Why calibrate: by the paper's Table 3 MySQL's non-anonymous memory is tiny,
//! yet 7.6% of its D-TLB misses fall outside the segment (f_DS = 92.4%, Table
//! 5). Those misses come from many small, hot regions used by many threads:
//! each thread's stack pages leave the TLBs while the other 255 threads run.
//! The defaults put that share at about 7.6% on `sandybridge-ds` (how they were
//! chosen: docs/workloads.md, "mysql").

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::btree::{key_of, nodes_for, value_of, Tree, WORDS};
use crate::layout::{Layout, PAGE};
use crate::mem::{Arr, Mem, Quiet};
use crate::process::{Image, ImageCfg};
use crate::registry::{common_threads, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "mysql",
        about: "MySQL/InnoDB stand-in (direct segments, ISCA'13): 16KB-page B+-tree buffer pool, 256 thread stacks, BSS and file mappings",
        params: common_threads(
            "256",
            vec![
                p("records", "int", "500k", "rows in the clustered index (bulk-loaded before the run)"),
                p("ops", "int", "30k", "requests (point selects; write_ratio of them also append to the redo log)"),
                p("write_ratio", "float", "0.1", "share of requests that update their row and append to the redo log"),
                p("cpus", "int", "1", "hardware contexts the threads are scheduled on (cpus in the trace); thread t runs on cpu t mod cpus"),
                p("quantum", "int", "48", "requests a thread serves per scheduling turn (round robin over threads)"),
                p("stack_touch", "size", "24KiB", "depth of a request's call chain on its thread's stack (calibrates f_DS)"),
                p("stack_size", "size", "8MiB", "bytes reserved per thread stack, guard page included"),
                p("globals", "int", "2", "BSS lock/counter read-modify-writes per request"),
                p("bss", "size", "32KiB", "BSS/globals bytes"),
                p("file_read_ratio", "float", "0.02", "share of requests that read a line of the table file"),
                p("log_bytes", "size", "512", "redo-log bytes a write request appends"),
                p("file_size", "size", "256MiB", "bytes of the table file mapping (and of the redo log, which wraps)"),
            ],
        ),
    }
}

pub struct Cfg {
    pub records: u64,
    pub ops: u64,
    pub write_ratio: f64,
    pub quantum: u64,
    pub cpus: usize,
    pub stack_touch: u64,
    pub globals: u64,
    pub file_read_ratio: f64,
    pub log_bytes: u64,
    pub file_size: u64,
    pub image: ImageCfg,
    pub seed: u64,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let records = r.int_min("records", 1)?;
    if records > u32::MAX as u64 {
        return Err(Error::input(format!("mysql: parameter 'records' must be below 2^32, got {records}")));
    }
    let stack_size = r.int("stack_size")?;
    if stack_size < 2 * PAGE {
        return Err(Error::input(format!("mysql: parameter 'stack_size' must be at least 8KiB (a page and the guard page), got {stack_size}")));
    }
    let stack_touch = r.int("stack_touch")?;
    if stack_touch >= stack_size {
        return Err(Error::input(format!("mysql: parameter 'stack_touch' ({stack_touch}) must be below stack_size ({stack_size})")));
    }
    let log_bytes = r.int_min("log_bytes", 8)?;
    let file_size = r.int("file_size")?;
    if file_size < PAGE || log_bytes > file_size {
        return Err(Error::input(format!("mysql: parameter 'file_size' must be at least 4KiB and at least log_bytes, got {file_size}")));
    }
    let bss = r.int_min("bss", 8)?;
    let threads = r.threads()?;
    let cpus = r.int_min("cpus", 1)?;
    if cpus > threads as u64 {
        return Err(Error::input(format!("mysql: parameter 'cpus' must be at most threads ({threads}), got {cpus}")));
    }
    Ok(Cfg {
        records,
        ops: r.int("ops")?,
        write_ratio: r.float_in("write_ratio", 0.0, 1.0)?,
        quantum: r.int_min("quantum", 1)?,
        cpus: cpus as usize,
        stack_touch,
        globals: r.int("globals")?,
        file_read_ratio: r.float_in("file_read_ratio", 0.0, 1.0)?,
        log_bytes,
        file_size,
        image: ImageCfg { threads, stack_size, bss, code: 16 << 20 },
        seed: r.int("seed")?,
    })
}

/// InnoDB's page: 16KB. The index part of a page (keys, child pointers) is
/// the shared B+-tree node (4KB); rows fill the remaining 12KB of a leaf.
const PAGE_WORDS: usize = 2048;
const ROW_AREA: usize = PAGE_WORDS - WORDS;
/// A row: 256 bytes (a TPC-C stock/customer row is 300-650 bytes), read one
/// 64-byte line at a time as a memcpy does.
const ROW_WORDS: usize = 32;
const LINE_WORDS: usize = 8;

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("pool", nodes_for(c.records) * PAGE_WORDS as u64 * 8)?;
    l.add_kind("redo", c.file_size, RegionKind::File)?;
    l.add_kind("tablespace", c.file_size, RegionKind::File)?;
    c.image.add_regions(&mut l)?;
    Ok(l)
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let cap = nodes_for(c.records) as usize;
    let mut t = Tree::new(m.alloc(l.get("pool")?, cap * PAGE_WORDS)?, cap, PAGE_WORDS)?;
    let mut redo: Arr<u64> = m.alloc(l.get("redo")?, (c.file_size / 8) as usize)?;
    let table: Arr<u64> = m.alloc(l.get("tablespace")?, (c.file_size / 8) as usize)?;
    let mut image = Image::alloc(&c.image, l, m)?;
    // Loading the table is setup (InnoDB warms its buffer pool first).
    for kn in 0..c.records {
        let k = key_of(kn);
        t.insert(&mut Quiet, k, value_of(k), None)?;
    }
    m.populated(t.nodes_arr());
    m.begin_run();
    let threads = c.image.threads as u64;
    let mut keys = Rng::stream(c.seed, 60);
    let mut kinds = Rng::stream(c.seed, 61);
    let (mut found, mut writes, mut file_reads, mut sum) = (0u64, 0u64, 0u64, 0u64);
    let mut log_pos = 0usize;
    let log_words = (c.log_bytes / 8).max(1) as usize;
    for i in 0..c.ops {
        let th = ((i / c.quantum) % threads) as usize;
        if i % c.quantum == 0 {
            // Threads share the cpus' TLBs: a thread's stack pages are gone
            // from them by the time its next turn comes.
            m.set_cpu(th % c.cpus);
        }
        let k = key_of(keys.below(c.records));
        for g in 0..c.globals {
            image.global(m, kinds.below(u64::MAX).wrapping_add(g));
        }
        if let Some((leaf, slot, v)) = t.lookup_at(m, k, None) {
            found += 1;
            sum = sum.wrapping_add(v);
            let row = leaf * PAGE_WORDS + WORDS + slot * ROW_WORDS % ROW_AREA;
            let write = kinds.f64() < c.write_ratio;
            for w in (0..ROW_WORDS).step_by(LINE_WORDS) {
                if write {
                    t.nodes_mut().st(m, row + w, v ^ i);
                } else {
                    sum = sum.wrapping_add(t.nodes_arr().ld(m, row + w));
                }
            }
            if write {
                writes += 1;
                for w in 0..log_words {
                    let at = (log_pos + w) % redo.len();
                    redo.st(m, at, k ^ w as u64);
                }
                log_pos = (log_pos + log_words) % redo.len();
            }
        }
        if kinds.f64() < c.file_read_ratio {
            file_reads += 1;
            sum = sum.wrapping_add(table.ld(m, keys.below(table.len() as u64) as usize));
        }
        // The request's call chain (parser, optimizer, handler, InnoDB).
        image.call(m, th, c.stack_touch, k);
        if (i + 1) % 100_000 == 0 {
            m.progress(&format!("ops:{}", i + 1));
        }
    }
    m.end_run();
    Ok(json!({
        "found": found, "writes": writes, "file_reads": file_reads, "value_sum": crate::hex(sum),
        "height": t.height(), "pages": t.used(), "globals_sum": image.globals_sum(), "stack_acc": crate::hex(image.acc),
    }))
}
