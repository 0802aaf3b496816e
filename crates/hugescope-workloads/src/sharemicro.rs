//! FHPM's page-sharing microbenchmark (FHPM §3.3, Table 2; spec fhpm.md §7
//! "T2"), scaled down: a dataset of `size` bytes (the paper's 8GB per VM)
//! is inserted at 4KB granularity, then read at random: its first quarter
//! (the paper's 2GB) is hot with PSR 0 (every 4KB region of those huge pages
//! read), its middle half (4GB) is hot with PSR `psr` (0.9: only
//! round((1 - psr) x 512) regions of each huge page read, offsets chosen at
//! random and fixed for the run, spec §7), its last quarter (2GB) is rarely
//! read (`cold_share` of the reads, 1% by default, spec §11).
//!
//! Two VMs (or processes) run it with the same `stream` and `seed` and
//! different `order`: they insert the same records in different orders, so
//! every 4KB page of one has an identical twin in the other, but no 2MB page
//! does (FHPM §3.3). The record order is shuffled within each part of the
//! dataset (a record hot in one VM is hot in the other: the hot set is a set
//! of records, as a key range is). The pages' contents are declared with
//! `content:` markers (`hugescope_core::trace::ContentDecl`), after the
//! insert, for the same-page merger of the OS model; natively the records
//! are really written (equal bytes for equal records), so a real KSM finds
//! the same twins.

use serde_json::{json, Value};

use hugescope_core::trace::{content_label, ContentDecl};
use hugescope_core::{Error, Result};

use crate::layout::{Layout, PAGE};
use crate::mem::{Arr, Mem};
use crate::microbench::single_thread;
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::{mix64, Rng};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "sharemicro",
        about: "FHPM's page-sharing microbenchmark (Table 2): the same 4KB records inserted in a per-VM order, then random reads of a balanced hot quarter, an unbalanced hot half (PSR 0.9) and a rarely read quarter",
        params: common(vec![
            p("size", "size", "64MiB", "dataset bytes (the paper's 8GB per VM, scaled; a multiple of 8MiB: four parts of whole 2MB pages)"),
            p("reads", "int", "4000000", "random 8-byte reads after the insert"),
            p("psr", "float", "0.9", "page skew ratio of the unbalanced half: the share of each huge page's 4KB regions never read"),
            p("cold_share", "float", "0.01", "share of the reads that go to the rarely read quarter"),
            p("order", "int", "0", "insert order: 0 in record order, else a shuffle seeded by it (give each VM its own)"),
            p("stream", "int", "1", "content stream: VMs inserting the same data use the same stream"),
        ]),
    }
}

pub struct Cfg {
    pub size: u64,
    pub reads: u64,
    pub psr: f64,
    pub cold_share: f64,
    pub order: u64,
    pub stream: u64,
    pub seed: u64,
}

const PART: u64 = 8 << 20;
const HUGE: u64 = 2 << 20;
const WORDS: usize = (PAGE / 8) as usize;

pub fn config(r: &Resolved) -> Result<Cfg> {
    single_thread(r)?;
    let size = r.int("size")?;
    if size == 0 || size % PART != 0 {
        return Err(Error::input(format!("sharemicro: parameter 'size' must be a positive multiple of 8MiB, got {size}")));
    }
    Ok(Cfg {
        size,
        reads: r.int("reads")?,
        psr: r.float_in("psr", 0.0, 1.0)?,
        cold_share: r.float_in("cold_share", 0.0, 1.0)?,
        order: r.int("order")?,
        stream: r.int("stream")?,
        seed: r.int("seed")?,
    })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("dataset", c.size)?;
    Ok(l)
}

/// The parts of the dataset, in pages: balanced hot, unbalanced hot, cold.
fn parts(c: &Cfg) -> [(usize, usize); 3] {
    let n = (c.size / PAGE) as usize;
    [(0, n / 4), (n / 4, 3 * n / 4), (3 * n / 4, n)]
}

/// The record each page holds: a shuffle of each part (seeded by `order`;
/// identity for 0).
fn records(c: &Cfg) -> Vec<u64> {
    let mut rec: Vec<u64> = (0..c.size / PAGE).collect();
    if c.order != 0 {
        for (i, &(lo, hi)) in parts(c).iter().enumerate() {
            let mut rng = Rng::stream(c.order, i as u64);
            for j in (lo + 1..hi).rev() {
                let k = lo + rng.below((j - lo + 1) as u64) as usize;
                rec.swap(j, k);
            }
        }
    }
    rec
}

/// The pages reads go to (every page of the balanced part; the chosen
/// regions of each unbalanced huge page), and the cold part's range.
fn hot_pages(c: &Cfg) -> Vec<u32> {
    let [bal, unb, _] = parts(c);
    let per = (HUGE / PAGE) as usize;
    let ns = ((1.0 - c.psr) * per as f64).round() as usize;
    let mut hot: Vec<u32> = (bal.0..bal.1).map(|j| j as u32).collect();
    let mut rng = Rng::stream(c.seed, 7);
    let mut offs: Vec<usize> = (0..per).collect();
    for h in (unb.0..unb.1).step_by(per) {
        // ns distinct offsets: a partial Fisher-Yates shuffle.
        for i in 0..ns {
            let k = i + rng.below((per - i) as u64) as usize;
            offs.swap(i, k);
        }
        let mut chosen: Vec<usize> = offs[..ns].to_vec();
        chosen.sort_unstable();
        hot.extend(chosen.into_iter().map(|o| (h + o) as u32));
    }
    hot
}

/// Word `w` of record `r` of stream `s`: equal records have equal bytes.
fn word(s: u64, r: u64, w: usize) -> u64 {
    mix64(s.wrapping_mul(0x9e37_79b9).wrapping_add(r << 9).wrapping_add(w as u64))
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let region = l.get("dataset")?;
    let mut a: Arr<u64> = m.alloc(region, (c.size / 8) as usize)?;
    let rec = records(c);
    // The insert: every page written with its record (untraced setup).
    for (j, &r) in rec.iter().enumerate() {
        for w in 0..WORDS {
            a[j * WORDS + w] = word(c.stream, r, w);
        }
    }
    m.populated(&a);
    // The contents, one declaration per run of consecutive records.
    let mut j = 0;
    while j < rec.len() {
        let mut k = j + 1;
        while k < rec.len() && rec[k] == rec[k - 1] + 1 {
            k += 1;
        }
        let d = ContentDecl { pid: 0, start: a.addr(j * WORDS), len: (k - j) as u64 * PAGE, stream: c.stream, first: rec[j] };
        m.progress(&content_label(&d));
        j = k;
    }
    let hot = hot_pages(c);
    let [_, _, cold] = parts(c);
    m.begin_run();
    let mut rng = Rng::stream(c.seed, 11);
    let (mut sum, mut cold_reads) = (0u64, 0u64);
    for _ in 0..c.reads {
        let page = if rng.f64() < c.cold_share {
            cold_reads += 1;
            cold.0 + rng.below((cold.1 - cold.0) as u64) as usize
        } else {
            hot[rng.below(hot.len() as u64) as usize] as usize
        };
        let i = page * WORDS + rng.below(WORDS as u64) as usize;
        sum = sum.wrapping_add(a.ld(m, i));
    }
    m.end_run();
    Ok(json!({
        "pages": rec.len(), "hot_pages": hot.len(), "cold_reads": cold_reads,
        "true_hot_bytes": hot.len() as u64 * PAGE, "read_sum": sum,
        "records_hash": crate::hex(crate::hash_words(rec.iter().copied())),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(order: u64) -> Cfg {
        Cfg { size: 16 << 20, reads: 0, psr: 0.9, cold_share: 0.01, order, stream: 1, seed: 1 }
    }

    #[test]
    fn orders_hold_the_same_records_per_part_and_no_same_huge_page() {
        let (a, b) = (records(&cfg(1)), records(&cfg(2)));
        for (lo, hi) in parts(&cfg(1)) {
            let (mut x, mut y) = (a[lo..hi].to_vec(), b[lo..hi].to_vec());
            x.sort_unstable();
            y.sort_unstable();
            assert_eq!(x, (lo as u64..hi as u64).collect::<Vec<_>>());
            assert_eq!(x, y);
        }
        for h in (0..a.len()).step_by(512) {
            assert_ne!(a[h..h + 512], b[h..h + 512]);
        }
        assert_eq!(records(&cfg(0)), (0..a.len() as u64).collect::<Vec<_>>());
    }

    #[test]
    fn the_hot_set_is_the_balanced_quarter_plus_ten_percent_of_the_half() {
        let c = cfg(1);
        let hot = hot_pages(&c);
        // 16MiB: 1024 balanced pages + 4 huge pages x round(0.1 x 512) = 51.
        assert_eq!(hot.len(), 1024 + 4 * 51);
        let mut d = hot.clone();
        d.dedup();
        assert_eq!(d.len(), hot.len());
        assert!(hot.iter().all(|&p| (p as usize) < 3072));
    }
}
