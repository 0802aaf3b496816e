//! The page-table line cache of the cost model (`hw::ptcache`, issue #15):
//! walk references priced by where they hit. Every count is worked out by
//! hand on a crafted stream through the real simulator and radix walker.

mod common;

use common::BASE;
use hugescope_core::config::MachineConfig;
use hugescope_core::cost;
use hugescope_core::pagemap::StaticMap;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::Access;

const KB4: u64 = 4 << 10;
const KB32: u64 = 32 << 10;

/// haswell-pcc with a 16-line page-table line cache: one set of 16 ways, so
/// exactly a 16-entry LRU.
fn with_cache(lines: u64) -> MachineConfig {
    MachineConfig::load(
        Some("haswell-pcc"),
        None,
        &[
            format!("cost.pt_cache_lines={lines}"),
            "cost.walk_ref_mem_cycles=200".into(),
        ],
    )
    .unwrap()
}

#[test]
fn references_are_classified_by_a_hand_worked_lru() {
    let mut s = Simulator::new(with_cache(16), 1, StaticMap::Uniform(0)).unwrap();
    // Pass 1: 20 new 4KB pages 32 KiB apart, in one 2 MiB region (BASE is
    // 2 MiB aligned). Each page is in its own page-table line (8 PTEs = 32
    // KiB). The first walk is cold: PML4E, PDPTE, PDE and PTE lines, 4
    // references, 4 misses. The other 19 hit the PDE cache and read only
    // their PTE, a new line each: 19 misses. 23 lines went in; the LRU keeps
    // the last 16, the PTE lines of pages 5..20.
    for i in 0..20 {
        s.step(Access::read(BASE + i * KB32));
    }
    let c = s.counters();
    assert_eq!(
        (c.walks, c.walk_refs, c.walk_refs_llc, c.walk_refs_mem),
        (20, 23, Some(0), Some(23))
    );
    // Pass 2, backwards: the next 4KB page in each of the same lines (a new
    // page, so a TLB miss, a PDE-cache hit and one PTE reference). Pages
    // 20..5 find their line (16 hits, which leaves page 20's line least
    // recent); pages 4..1 miss (4 misses).
    for i in (0..20).rev() {
        s.step(Access::read(BASE + i * KB32 + KB4));
    }
    let c = s.counters();
    assert_eq!(
        (c.walks, c.walk_refs, c.walk_refs_llc, c.walk_refs_mem),
        (40, 43, Some(16), Some(27))
    );
    // The estimate prices them apart: 16 x walk_ref_cycles (50) + 27 x 200.
    let e = cost::estimate(&c, &s.cfg.cost, 0.0);
    let expect = c.l2_hits as f64 * 7.0 + 16.0 * 50.0 + 27.0 * 200.0 + c.pwc_hits as f64 * 1.0;
    assert_eq!(e.translation_cycles, expect);
}

#[test]
fn a_cache_larger_than_the_footprint_only_misses_cold_lines() {
    // 64 lines hold all 23: pass 2 hits every one of its 20 references.
    let mut s = Simulator::new(with_cache(64), 1, StaticMap::Uniform(0)).unwrap();
    for pass in 0..2 {
        for i in 0..20 {
            s.step(Access::read(BASE + i * KB32 + pass * KB4));
        }
    }
    let c = s.counters();
    assert_eq!(
        (c.walk_refs, c.walk_refs_llc, c.walk_refs_mem),
        (43, Some(20), Some(23))
    );
}

#[test]
fn off_by_default_results_carry_no_classes() {
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    assert_eq!(cfg.cost.pt_cache_lines, 0);
    let mut s = Simulator::new(cfg, 1, StaticMap::Uniform(0)).unwrap();
    for i in 0..20 {
        s.step(Access::read(BASE + i * KB32));
    }
    let c = s.counters();
    assert_eq!((c.walk_refs_llc, c.walk_refs_mem), (None, None));
    let json = serde_json::to_string(&c).unwrap();
    assert!(
        !json.contains("walk_refs_llc") && !json.contains("walk_refs_mem"),
        "{json}"
    );
    // Every reference at walk_ref_cycles, as before the model.
    assert_eq!(
        cost::translation_cycles(&c, &s.cfg.cost),
        c.l2_hits as f64 * 7.0 + 23.0 * 50.0 + c.pwc_hits as f64
    );
    // And the machine TOML does not mention the new keys.
    assert!(!s.cfg.to_toml().contains("pt_cache_lines"));
}

#[test]
fn an_absurd_cache_is_refused() {
    let e = MachineConfig::load(
        Some("haswell-pcc"),
        None,
        &["cost.pt_cache_lines=99999999999".into()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("pt_cache_lines"), "{e}");
}
