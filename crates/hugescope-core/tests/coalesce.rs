//! TLB coalescing (`MachineConfig::coalesce`, os/coalesce.rs): what one TLB
//! entry covers after a walk to a base page or an mTHP folio, with exact,
//! hand-counted walk numbers.

mod common;

use common::{header, sim_on, BASE};
use hugescope_core::config::MachineConfig;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::trace::{Access, AccessSink};

const K4: u64 = 4 << 10;
const K64: u64 = 64 << 10;

fn machine(preset: &str, set: &[&str]) -> MachineConfig {
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    MachineConfig::load(Some(preset), None, &set).unwrap()
}

/// Walks when every 4KB page of the first 64KB of a region is read once,
/// in order, on arm64-mthp with `set`, under `mthp` with 64KB folios on
/// (each first touch of a fresh 64KB range faults one folio in).
fn folio_walks(set: &[&str]) -> (u64, u64) {
    let cfg = machine("arm64-mthp", set);
    let mut s = sim_on(&cfg, &header(2 << 20, false), OsConfig::default(), "mthp", &[("enabled", "never"), ("enabled_64k", "always")]);
    for i in 0..16 {
        s.step(Access::read(BASE + i * K4));
    }
    s.pt.finish();
    assert_eq!(s.pt.stats().faults_base, 0);
    let served = s.pt.stats().faults_huge.iter().find(|(l, _)| l == "64k").map_or(0, |x| x.1);
    (s.counters().walks, served)
}

#[test]
fn a_64k_folio_costs_16_walks_without_coalescing_and_1_with_contpte() {
    // One folio, one fault, either way; only the TLB reach differs.
    assert_eq!(folio_walks(&[]), (1, 1));
    assert_eq!(folio_walks(&["coalesce=none"]), (16, 1));
}

#[test]
fn contpte_needs_a_folio_of_at_least_64k() {
    // 32KB folios get no contiguous bit: one walk per page.
    let cfg = machine("arm64-mthp", &[]);
    let mut s = sim_on(&cfg, &header(2 << 20, false), OsConfig::default(), "mthp", &[("enabled", "never"), ("enabled_32k", "always")]);
    for i in 0..16 {
        s.step(Access::read(BASE + i * K4));
    }
    assert_eq!(s.counters().walks, 16);
    // A 128KB folio is two contiguous blocks: two 64KB entries.
    let mut s = sim_on(&cfg, &header(2 << 20, false), OsConfig::default(), "mthp", &[("enabled", "never"), ("enabled_128k", "always")]);
    for i in 0..32 {
        s.step(Access::read(BASE + i * K4));
    }
    assert_eq!(s.counters().walks, 2);
    let by = s.counters().by_page_size;
    let at = |label: &str| by.iter().find(|c| c.page_size == label).map(|c| c.walks).unwrap();
    assert_eq!((at("64k"), at("128k"), at("4k")), (2, 0, 0));
}

/// Walks of one pass over the first 64KB (16 pages) of a region whose
/// pages were already faulted in, on x86-mthp with `set`, base pages only.
fn amd_walks(set: &[&str], reverse_faults: bool) -> u64 {
    let cfg = machine("x86-mthp", set);
    let mut s = sim_on(&cfg, &header(2 << 20, false), OsConfig::default(), "base", &[]);
    if reverse_faults {
        // Faulting 3, 2, 1, 0 hands out frames in that order: the frames
        // of each aligned 4-page run are then descending, not contiguous.
        for i in (0..16).rev() {
            s.step(Access::read(BASE + i * K4));
        }
    } else {
        s.pt.populate(0, BASE, K64);
    }
    for m in s.mmus.iter_mut() {
        m.flush();
    }
    let before = s.counters().walks;
    for i in 0..16 {
        s.step(Access::read(BASE + i * K4));
    }
    s.counters().walks - before
}

#[test]
fn amd_style_coalescing_of_4_contiguous_pages_cuts_walks_4x() {
    assert_eq!(amd_walks(&[], false), 16);
    assert_eq!(amd_walks(&["coalesce=amd"], false), 4);
    // 16KB entries live in the 4KB structures (no key of their own).
    assert_eq!(amd_walks(&["coalesce=amd", "coalesce_size=32k"], false), 2);
    // Frames not contiguous: no coalescing, whatever the knob.
    assert_eq!(amd_walks(&["coalesce=amd"], true), 16);
}

#[test]
fn coalesced_entries_are_shot_down_with_any_page_under_them() {
    // Freeing one base page of a coalesced run drops the 16KB entry: the
    // next access to a neighbour walks again (and now fills a 4KB entry).
    let cfg = machine("x86-mthp", &["coalesce=amd"]);
    let mut s = sim_on(&cfg, &header(2 << 20, false), OsConfig::default(), "base", &[]);
    s.pt.populate(0, BASE, K64);
    s.step(Access::read(BASE));
    s.step(Access::read(BASE + K4));
    assert_eq!(s.counters().walks, 1);
    s.progress(&hugescope_core::trace::free_label(0, BASE + 2 * K4, K4));
    s.apply_shootdowns();
    s.step(Access::read(BASE + K4));
    assert_eq!(s.counters().walks, 2);
    s.step(Access::read(BASE));
    assert_eq!(s.counters().walks, 3);
}

#[test]
fn machines_without_folios_or_coalescing_keep_tlb_size_equal_to_leaf_size() {
    // Alpha's granularity hint: a 64KB leaf is a 64KB TLB entry by itself.
    let cfg = machine("alpha-21264", &[]);
    let mut s = sim_on(&cfg, &header(8 << 20, false), OsConfig::default(), "ideal", &[("size", "64k")]);
    for i in 0..8 {
        s.step(Access::read(BASE + i * (8 << 10)));
    }
    assert_eq!(s.counters().walks, 1);
}
