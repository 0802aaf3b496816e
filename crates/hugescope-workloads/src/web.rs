//! A web application server under many short-lived requests: the stand-in for
//! Cloudstone/Olio (nginx, PHP, MySQL) in Ingens' fragmented-memory experiment
//! (OSDI'16 §6.2, Table 9). The paper modifies two of Olio's pages to use about
//! 2 MB of memory each (the 2015 average web page size); Linux then compacts
//! memory synchronously in the fault handler of almost every request when
//! memory is fragmented (FMFI 0.9; 461,383 compactions over the run), which is
//! what Ingens' asynchronous promotion avoids.
//!
//! Each request:
//! 1. allocates a fresh response buffer of `buf_min`..=`buf_max` bytes (whole
//!    pages) from a bump allocator over the `heap` region, wrapping to its start
//!    when the end is reached: the buffer's pages are first touched, so fault;
//! 2. reads `rows_per_request` rows of the `table` (the database's buffer pool /
//!    object cache, populated before the run), chosen by Zipf popularity
//!    (skew `theta`) scrambled over the table: the TLB-sensitive hot set; a
//!    `write_ratio` share of requests also update their first row (Olio's 5%
//!    writes);
//! 3. renders its response: writes every 64-byte line of the buffer;
//! 4. frees the buffer: its pages go back to the OS (`MADV_DONTNEED`, a free
//!    marker in the trace), so the next request to use them faults again.
//!
//! Requests are handed to the worker threads round robin, one request at a time.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::{Layout, PAGE};
use crate::mem::{Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::{fnv64, mix64, Rng};
use crate::zipf::{Zipf, MAX_THETA};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "web",
        about: "web server: per request a fresh 256KB-2MB buffer (faults, then freed) and reads of Zipf-popular table rows (Ingens' Cloudstone/Olio, OSDI'16 Table 9)",
        params: common(vec![
            p("requests", "int", "2000", "requests served"),
            p("buf_min", "size", "256KiB", "smallest response buffer (rounded up to 4KiB)"),
            p("buf_max", "size", "2MiB", "largest response buffer (Ingens' modified pages use about 2MB)"),
            p("heap", "size", "256MiB", "bytes of the heap the buffers are bump-allocated from (at least buf_max)"),
            p("table", "size", "128MiB", "bytes of the in-memory table (database buffer pool / object cache)"),
            p("row_size", "size", "512", "bytes per table row (multiple of 8)"),
            p("rows_per_request", "int", "256", "table rows each request reads"),
            p("theta", "float", "0.99", "Zipf skew of row popularity, 0 (uniform) to 0.999"),
            p("write_ratio", "float", "0.05", "share of requests that also update a row (Olio's mix: 5% writes)"),
        ]),
    }
}

pub struct Cfg {
    pub requests: u64,
    pub buf_min: u64,
    pub buf_max: u64,
    pub heap: u64,
    pub table_rows: u64,
    pub row_words: usize,
    pub rows_per_request: u64,
    pub theta: f64,
    pub write_ratio: f64,
    pub seed: u64,
    pub threads: usize,
}

fn round_page(b: u64) -> u64 {
    b.div_ceil(PAGE) * PAGE
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let buf_min = round_page(r.int_min("buf_min", 1)?);
    let buf_max = round_page(r.int("buf_max")?);
    if buf_max < buf_min {
        return Err(Error::input(format!("web: parameter 'buf_max' ({buf_max}) must be at least buf_min ({buf_min})")));
    }
    let heap = round_page(r.int("heap")?);
    if heap < buf_max {
        return Err(Error::input(format!("web: parameter 'heap' ({heap}) must be at least buf_max ({buf_max})")));
    }
    let row_size = r.int("row_size")?;
    if row_size == 0 || row_size % 8 != 0 || row_size > 1 << 20 {
        return Err(Error::input(format!("web: parameter 'row_size' must be a positive multiple of 8 up to 1MiB, got {row_size}")));
    }
    let table = r.int("table")?;
    if table < row_size {
        return Err(Error::input(format!("web: parameter 'table' ({table}) must hold at least one row of {row_size} bytes")));
    }
    Ok(Cfg {
        requests: r.int_min("requests", 1)?,
        buf_min,
        buf_max,
        heap,
        table_rows: table / row_size,
        row_words: (row_size / 8) as usize,
        rows_per_request: r.int("rows_per_request")?,
        theta: r.float_in("theta", 0.0, MAX_THETA)?,
        write_ratio: r.float_in("write_ratio", 0.0, 1.0)?,
        seed: r.int("seed")?,
        threads: r.threads()?,
    })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("table", c.table_rows * c.row_words as u64 * 8)?;
    l.add("heap", c.heap)?;
    Ok(l)
}

/// Words per 64-byte line: rows are read and buffers written a line at a time.
const LINE: usize = 8;
const PROGRESS: u64 = 1000;

/// The bump allocator over the heap: fresh addresses for every request until
/// the end, then from the start again (the pages were given back meanwhile).
struct Bump {
    top: u64,
    heap: u64,
}

impl Bump {
    /// Byte offset of a new block of `size` bytes.
    fn alloc(&mut self, size: u64) -> u64 {
        if self.top + size > self.heap {
            self.top = 0;
        }
        let at = self.top;
        self.top += size;
        at
    }
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let rw = c.row_words;
    let mut table: Arr<u64> = m.alloc(l.get("table")?, c.table_rows as usize * rw)?;
    for (i, x) in table.iter_mut().enumerate() {
        *x = mix64(i as u64 ^ c.seed);
    }
    m.populated(&table);
    let mut heap: Arr<u64> = m.alloc(l.get("heap")?, (c.heap / 8) as usize)?;
    let zipf = Zipf::with_theta(c.table_rows, c.theta);
    let mut rng = Rng::stream(c.seed, 60);
    let mut bump = Bump { top: 0, heap: c.heap };
    // Buffer sizes are drawn uniformly from the whole-page sizes in range.
    let size_choices = (c.buf_max - c.buf_min) / PAGE + 1;
    m.begin_run();
    let (mut allocated, mut writes, mut response_hash) = (0u64, 0u64, 0u64);
    for req in 0..c.requests {
        m.set_cpu((req % c.threads as u64) as usize);
        let size = c.buf_min + rng.below(size_choices) * PAGE;
        let first = (bump.alloc(size) / 8) as usize;
        let words = (size / 8) as usize;
        allocated += size;
        let write = rng.f64() < c.write_ratio;
        // Query: the rows' contents feed the rendered page.
        let mut acc = req;
        for k in 0..c.rows_per_request {
            let row = (fnv64(zipf.next(&mut rng)) % c.table_rows) as usize * rw;
            for j in (0..rw).step_by(LINE) {
                acc = acc.rotate_left(5) ^ table.ld(m, row + j);
            }
            if write && k == 0 {
                table.st(m, row, acc);
                writes += 1;
            }
        }
        // Render: every line of the buffer is written once.
        for j in (0..words).step_by(LINE) {
            heap.st(m, first + j, acc ^ j as u64);
        }
        response_hash = mix64(response_hash ^ acc);
        // Free: the allocator returns the buffer's pages to the OS.
        m.release(&mut heap, first, words);
        if (req + 1) % PROGRESS == 0 {
            m.progress(&format!("requests:{}", req + 1));
        }
    }
    m.end_run();
    Ok(json!({
        "requests": c.requests, "allocated_bytes": allocated, "row_writes": writes,
        "response_hash": crate::hex(response_hash),
        "table_hash": crate::hex(crate::hash_words(table.iter().copied())),
    }))
}
