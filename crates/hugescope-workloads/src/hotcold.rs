//! Hot/cold GUPS: random 8-byte read-modify-write updates (as `gups`) over two
//! tables, a small hot one that receives `hot_share` of the updates and a large
//! cold one that receives the rest.
//!
//! It is the case the userspace daemon's measurement needs (issue #14, section 3;
//! `docs/daemon.md`, *Measured*): a hot set of a few percent of the footprint that
//! a budget of a few percent can cover, next to a large structure whose huge pages
//! would buy little per byte. Each table is its own mapping: the hot table is
//! placed at least 2 MiB past the end of the cold one, so the kernel cannot merge
//! the two anonymous mappings into one VMA, and the daemon, whose access signal on
//! this kernel is per VMA (`clear_refs` + smaps `Referenced`), can tell them apart.
//! Both tables are initialised as GUPS does (`table[i] = i`, untimed).

use serde_json::{json, Value};

use hugescope_core::trace::RegionKind;
use hugescope_core::{Error, Result};

use crate::layout::{Layout, ALIGN};
use crate::mem::{Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::gups::{drive, update};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "hotcold",
        about:
            "GUPS over a small hot table (most updates) and a large cold one, each its own mapping",
        params: common(vec![
            p(
                "size",
                "size",
                "64MiB",
                "cold table size in bytes (multiple of 8)",
            ),
            p(
                "hot_size",
                "size",
                "4MiB",
                "hot table size in bytes (multiple of 8)",
            ),
            p(
                "hot_share",
                "float",
                "0.9",
                "share of the updates that go to the hot table",
            ),
            p("updates", "int", "16M", "number of updates"),
        ]),
    }
}

pub struct Cfg {
    pub hot_entries: u64,
    pub cold_entries: u64,
    pub hot_share: f64,
    pub updates: u64,
    pub seed: u64,
    pub threads: usize,
}

fn entries(r: &Resolved, k: &str) -> Result<u64> {
    let size = r.int(k)?;
    if size < 8 || size % 8 != 0 {
        return Err(Error::input(format!(
            "hotcold: parameter '{k}' must be a positive multiple of 8 bytes, got {size}"
        )));
    }
    Ok(size / 8)
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    Ok(Cfg {
        hot_entries: entries(r, "hot_size")?,
        cold_entries: entries(r, "size")?,
        hot_share: r.float_in("hot_share", 0.0, 1.0)?,
        updates: r.int_min("updates", 1)?,
        seed: r.int("seed")?,
        threads: r.threads()?,
    })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    // Cold first: a policy that goes by address order (khugepaged's scan) or by
    // first touch (fault-time promotion) meets the cold table first, so only one
    // that sees access finds the hot table within a small budget.
    l.add("cold", c.cold_entries * 8)?;
    // A 4 MiB unit with a 2 MiB offset: the hot table starts at least 2 MiB past
    // the cold one's end, an unmapped gap that keeps the two VMAs apart.
    l.add_aligned("hot", c.hot_entries * 8, RegionKind::Anon, 2 * ALIGN, ALIGN)?;
    Ok(l)
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let mut tables: [Arr<u64>; 2] = [
        m.alloc(l.get("cold")?, c.cold_entries as usize)?,
        m.alloc(l.get("hot")?, c.hot_entries as usize)?,
    ];
    for t in tables.iter_mut() {
        for (i, x) in t.iter_mut().enumerate() {
            *x = i as u64;
        }
        m.populated(&*t);
    }
    m.begin_run();
    let mut rng = Rng::new(c.seed);
    // The hot table is chosen when a uniform 53-bit draw falls below this.
    let hot_below = (c.hot_share * (1u64 << 53) as f64) as u64;
    let mut hot_updates = 0u64;
    drive(m, c.updates, c.threads, |m| {
        let hot = (rng.next_u64() >> 11) < hot_below;
        hot_updates += hot as u64;
        update(&mut tables[hot as usize], m, rng.next_u64());
    });
    m.end_run();
    let checksum = crate::hash_words(tables.iter().flat_map(|t| t.iter().copied()));
    Ok(
        json!({ "updates": c.updates, "hot_updates": hot_updates, "checksum": crate::hex(checksum) }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(hot: u64, cold: u64) -> Cfg {
        Cfg {
            hot_entries: hot / 8,
            cold_entries: cold / 8,
            hot_share: 0.9,
            updates: 1,
            seed: 1,
            threads: 1,
        }
    }

    #[test]
    fn hot_table_leaves_an_unmapped_gap_after_the_cold_one() {
        // Cold sizes ending on a 4 MiB unit, mid-unit, and off a 2 MiB boundary.
        for cold in [4u64 << 20, 2 << 20, 6 << 20, 3 << 20, 4096] {
            let l = layout(&cfg(2 << 20, cold)).unwrap();
            let (h, c) = (l.get("hot").unwrap(), l.get("cold").unwrap());
            assert!(
                h.base >= c.end() + ALIGN,
                "cold {cold}: hot at {:#x}, cold ends {:#x}",
                h.base,
                c.end()
            );
            assert_eq!(h.base % ALIGN, 0);
            assert_eq!(l.footprint(), cold.div_ceil(4096) * 4096 + (2 << 20));
        }
    }
}
