//! The `mthp` policy (Linux multi-size THP) and the multi-size presets:
//! folios served at fault by size, fallback when memory is fragmented,
//! exact equivalence with `linux` when every folio size is never, and the
//! machine checks of its per-size knobs.

mod common;

use common::{header, sim_on, Rng, BASE, MB2};
use hugescope_core::config::{MachineConfig, PRESETS};
use hugescope_core::configuration::Config;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::config::Fragmentation;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{free_label, Access, AccessSink};

const K4: u64 = 4 << 10;
const K16: u64 = 16 << 10;
const K64: u64 = 64 << 10;

fn arm64() -> MachineConfig {
    MachineConfig::preset("arm64-mthp").unwrap()
}

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }), memory_bytes: Some(64 << 20), ..Default::default() }
}

/// Faults served by page-size label after `finish` (base pages under "4k").
fn faults(s: &mut Simulator<Kernel>) -> Vec<(String, u64)> {
    s.pt.finish();
    let mut out = vec![("4k".to_string(), s.pt.stats().faults_base)];
    out.extend(s.pt.stats().faults_huge.iter().filter(|(_, n)| *n > 0).cloned());
    out
}

fn f(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(l, n)| (l.to_string(), *n)).collect()
}

#[test]
fn enabled_64k_serves_every_fault_of_a_region_with_64k_folios() {
    let mut s = sim_on(&arm64(), &header(MB2, false), os(), "mthp", &[("enabled", "never"), ("enabled_64k", "always")]);
    for i in 0..(MB2 / K4) {
        s.step(Access::read(BASE + i * K4));
    }
    assert_eq!(faults(&mut s), f(&[("4k", 0), ("64k", 32)]));
    assert_eq!(s.pt.spaces()[0].huge_bytes()[3], MB2);
    s.pt.check_invariants().unwrap();
}

#[test]
fn the_largest_enabled_size_that_fits_the_vma_wins() {
    // A 320KB VMA: a 256KB folio at its start, then 64KB (256KB would
    // cross the VMA's end); 128KB is not enabled and never used.
    let cfg = arm64();
    let params = [("enabled", "never"), ("enabled_256k", "always"), ("enabled_64k", "always"), ("enabled_128k", "never")];
    let mut s = sim_on(&cfg, &header(320 << 10, false), os(), "mthp", &params);
    for i in 0..80 {
        s.step(Access::read(BASE + i * K4));
    }
    assert_eq!(faults(&mut s), f(&[("4k", 0), ("64k", 1), ("256k", 1)]));
}

#[test]
fn a_range_with_a_mapped_pte_goes_to_the_next_smaller_size() {
    // Freeing 16KB of a 64KB folio splits it (base PTEs stay around the
    // hole); the next fault in the hole finds its 64KB range not empty and
    // its 16KB range empty: a 16KB folio.
    let params = [("enabled", "never"), ("enabled_64k", "always"), ("enabled_16k", "always")];
    let mut s = sim_on(&arm64(), &header(K64, false), os(), "mthp", &params);
    s.step(Access::read(BASE));
    s.progress(&free_label(0, BASE + K16, K16));
    s.apply_shootdowns();
    s.step(Access::read(BASE + K16));
    assert_eq!(faults(&mut s), f(&[("4k", 0), ("16k", 1), ("64k", 1)]));
}

#[test]
fn mthp_rescues_faults_when_2mb_blocks_are_fragmented() {
    // PCC fragmentation pins one page in every 2MB block: no PMD fault can
    // be served, but 64KB blocks abound. `linux` falls back to base pages;
    // `mthp` falls back to 64KB folios (Linux: VM_FAULT_FALLBACK, then
    // alloc_anon_folio).
    let frag = OsConfig { fragmentation: Some(Fragmentation::Pcc { share: 1.0 }), ..os() };
    let cfg = arm64();
    let mut s = sim_on(&cfg, &header(MB2, false), frag.clone(), "mthp", &[("enabled_64k", "always"), ("khugepaged", "false")]);
    for i in 0..(MB2 / K4) {
        s.step(Access::read(BASE + i * K4));
    }
    assert_eq!(faults(&mut s), f(&[("4k", 0), ("64k", 32)]));
    let mut l = sim_on(&cfg, &header(MB2, false), frag, "linux", &[("khugepaged", "false")]);
    for i in 0..(MB2 / K4) {
        l.step(Access::read(BASE + i * K4));
    }
    assert_eq!(faults(&mut l), f(&[("4k", 512)]));
    assert_eq!(l.pt.stats().fault_fallbacks, 1);
}

#[test]
fn folios_fall_back_to_base_pages_when_memory_is_fragmented() {
    // Ingens-style fragmentation with the fragmenter's pages pinned leaves
    // few free 64KB blocks: some faults fall back to base pages, each
    // counted once as a 64KB fallback; every fault is one or the other.
    let frag = OsConfig { fragmentation: Some(Fragmentation::Ingens { fmfi: 0.95, pinned: true }), ..os() };
    let params = [("enabled", "never"), ("enabled_64k", "always")];
    let mut s = sim_on(&arm64(), &header(4 * MB2, false), frag, "mthp", &params);
    for i in 0..(4 * MB2 / K4) {
        s.step(Access::read(BASE + i * K4));
    }
    let got = faults(&mut s);
    let (base, k64) = (got[0].1, got.iter().find(|(l, _)| l == "64k").map_or(0, |x| x.1));
    assert!(base > 0 && k64 > 0, "{got:?}");
    assert_eq!(base + 16 * k64, 4 * MB2 / K4, "{got:?}");
    let d = s.pt.policy_params();
    let st = &d["sizes"]["64k"]["stats"];
    assert_eq!(st["anon_fault_alloc"].as_u64().unwrap(), k64);
    // A range that fell back once gets base pages from then on (its PTEs
    // are no longer all empty), so fallbacks count ranges, not base faults.
    assert!(st["anon_fault_fallback"].as_u64().unwrap() >= 1);
    assert!(st["anon_fault_fallback"].as_u64().unwrap() <= base);
    s.pt.check_invariants().unwrap();
}

/// Everything a run counts: translation counters and OS statistics.
fn run_json(cfg: &MachineConfig, name: &str, params: &[(&str, &str)]) -> String {
    let mut h = header(3 * MB2 + 5 * K64, false);
    h.regions.push(hugescope_core::trace::Region { hugepage_advised: true, ..hugescope_core::trace::Region::new("adv", BASE + 64 * MB2, 2 * MB2) });
    let mut s = sim_on(cfg, &h, os(), name, params);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..60_000u64 {
        let r = rng.next();
        let addr = if r & 1 == 0 { BASE + (r >> 8) % (3 * MB2 + 5 * K64) } else { BASE + 64 * MB2 + (r >> 8) % (2 * MB2) };
        s.step(Access { write: r & 2 != 0, ..Access::read(addr) });
        if i == 30_000 {
            s.progress(&free_label(0, BASE + MB2, 300 * K4));
        }
    }
    let procs = s.pt.finish();
    serde_json::to_string(&(s.counters(), s.pt.stats(), procs, s.pt.executed_plan().len())).unwrap()
}

#[test]
fn mthp_with_every_size_never_is_linux_exactly() {
    for cfg in [arm64(), MachineConfig::preset("x86-mthp").unwrap(), MachineConfig::preset("haswell-pcc").unwrap()] {
        for (enabled, defrag) in [("never", "madvise"), ("always", "madvise"), ("madvise", "always")] {
            let common = [("enabled", enabled), ("defrag", defrag), ("scan_sleep_ms", "10")];
            let linux = run_json(&cfg, "linux", &common);
            let mut never = common.to_vec();
            if !cfg.folio_sizes.is_empty() {
                never.extend([("enabled_16k", "never"), ("enabled_64k", "never")]);
            }
            assert_eq!(run_json(&cfg, "mthp", &never), linux, "{} enabled={enabled} defrag={defrag}", cfg.name);
            if !cfg.folio_sizes.is_empty() {
                // Not vacuous: a folio size on changes the run.
                let on = [common.as_slice(), &[("enabled_64k", "always")]].concat();
                assert_ne!(run_json(&cfg, "mthp", &on), linux, "{}", cfg.name);
            }
        }
    }
}

#[test]
fn inherit_follows_the_top_level_enabled_and_describe_resolves_it() {
    let params = [("enabled", "madvise"), ("enabled_64k", "inherit"), ("enabled_16k", "always")];
    let mut h = header(K64, false);
    h.regions.push(hugescope_core::trace::Region { hugepage_advised: true, ..hugescope_core::trace::Region::new("adv", BASE + MB2, K64) });
    let mut s = sim_on(&arm64(), &h, os(), "mthp", &params);
    for i in 0..16 {
        s.step(Access::read(BASE + i * K4));
        s.step(Access::read(BASE + MB2 + i * K4));
    }
    // Unadvised: 64KB inherits madvise, so 16KB folios; advised: one 64KB.
    assert_eq!(faults(&mut s), f(&[("4k", 0), ("16k", 4), ("64k", 1)]));
    let d = s.pt.policy_params();
    assert_eq!(d["enabled"], "madvise");
    assert_eq!(d["sizes"]["64k"]["enabled"], "inherit");
    assert_eq!(d["sizes"]["64k"]["resolved"], "madvise");
    assert_eq!(d["sizes"]["16k"]["resolved"], "always");
    assert_eq!(d["linux"]["enabled"], "madvise");
}

#[test]
fn per_size_knobs_are_checked_against_the_machine() {
    let load = |preset: &str, pol: &str| Config::load(Some(preset), None, &[], &[pol.to_string()]).map(drop).map_err(|e| e.to_string());
    let e = load("haswell-pcc", "mthp:enabled_64k=always").unwrap_err();
    assert!(e.contains("enabled_64k=always") && e.contains("haswell-pcc") && e.contains("no 64k mTHP size") && e.contains("none"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    let e = load("x86-mthp", "mthp:enabled_128k=always").unwrap_err();
    assert!(e.contains("enabled_128k") && e.contains("16k, 32k, 64k"), "{e}");
    let e = load("arm64-mthp", "mthp:enabled_64k=sometimes").unwrap_err();
    assert!(e.contains("enabled_64k=sometimes") && e.contains("always, madvise, inherit, never"), "{e}");
    let e = load("arm64-mthp", "mthp:enabled_3k=always").unwrap_err();
    assert!(e.contains("enabled_3k"), "{e}");
    // Also inside a combined spec.
    assert!(load("haswell-pcc", "mthp:enabled_16k=never+pcc").is_err());
    load("arm64-mthp", "mthp:enabled_64k=always,enabled_2m=never").unwrap_err();
    load("arm64-mthp", "mthp:enabled_64k=always,enabled_256k=inherit").unwrap();
    load("haswell-pcc", "mthp").unwrap();
}

#[test]
fn presets_validate_and_match_their_sources() {
    for p in PRESETS {
        let m = MachineConfig::preset(p).unwrap();
        hugescope_core::hw::Geometry::new(&m).unwrap();
        let json = serde_json::to_string(&m).unwrap();
        if !p.contains("mthp") {
            // The new knobs are invisible on the older presets.
            for k in ["folio_sizes", "coalesce", "gb_pages"] {
                assert!(!json.contains(k), "{p}: {json}");
            }
        }
    }
    // Navarro et al. §5: 8KB base; 64KB, 512KB, 4MB; one 128-entry fully
    // associative mixed-size DTLB.
    let a = MachineConfig::preset("alpha-21264").unwrap();
    assert_eq!(a.page_sizes, ["8k", "64k", "512k", "4m"]);
    assert_eq!((a.l1.len(), a.l1["8k+64k+512k+4m"].entries, a.l1["8k+64k+512k+4m"].ways, a.l2.len()), (1, 128, 0, 0));
    let m = arm64();
    assert!(m.page_sizes.len() <= hugescope_core::hw::geometry::MAX_SIZES);
    assert_eq!(m.page_sizes, ["4k", "16k", "32k", "64k", "128k", "256k", "2m"]);
    assert_eq!((m.l1["4k+64k+2m"].entries, m.l1["4k+64k+2m"].ways), (48, 0));
    assert_eq!((m.l2["4k+64k+2m"].entries, m.l2["4k+64k+2m"].ways), (1280, 5));
    // x86-mthp: 1GB behind gb_pages, off; on, the 1GB size and structures return.
    let x = MachineConfig::preset("x86-mthp").unwrap();
    assert!(!x.gb_pages && !x.page_sizes.contains(&"1g".to_string()));
    assert!(x.l1.keys().chain(x.l2.keys()).all(|k| !k.contains("1g")));
    let on = MachineConfig::load(Some("x86-mthp"), None, &["gb_pages=true".into()]).unwrap();
    assert_eq!(on.page_sizes.last().unwrap(), "1g");
    assert!(on.l1.contains_key("1g") && on.l2.contains_key("1g"));
    // gb_pages=false strips a mixed key down to its other sizes; where that
    // names a structure given explicitly (a saved configuration merged over
    // its preset), the explicit one stays.
    let h = MachineConfig::load(Some("haswell-pcc"), None, &["gb_pages=false".into(), "l2.4k+2m+1g.entries=512".into(), "l2.4k+2m+1g.ways=8".into()]).unwrap();
    assert_eq!((h.l2.len(), h.l2["4k+2m"].entries), (1, 1024));
    let h = MachineConfig::load(Some("haswell-pcc"), None, &["gb_pages=false".into(), "l2.4k+2m.entries=8".into(), "l2.4k+2m.ways=8".into(), "l2.1g+4k+2m.entries=512".into(), "l2.1g+4k+2m.ways=8".into()]).unwrap();
    assert_eq!((h.l2.len(), h.l2["4k+2m"].entries), (1, 8));
    let h = MachineConfig::load(Some("sandybridge-ds"), None, &["gb_pages=false".into()]).unwrap();
    assert_eq!(h.page_sizes, ["4k", "2m"]);
    assert!(!h.l1.contains_key("1g"));
}

#[test]
fn bad_multi_size_knobs_are_one_error_naming_the_key() {
    let load = |preset: &str, set: &[&str]| {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        MachineConfig::load(Some(preset), None, &set).map(drop).map_err(|e| e.to_string())
    };
    let e = load("x86-mthp", &["folio_sizes=[\"2m\"]"]).unwrap_err();
    assert!(e.contains("folio_sizes") && e.contains("2m"), "{e}");
    let e = load("x86-mthp", &["folio_sizes=[\"8k\"]"]).unwrap_err();
    assert!(e.contains("folio_sizes") && e.contains("8k") && e.contains("not in page_sizes"), "{e}");
    let e = load("haswell-pcc", &["coalesce=contpte"]).unwrap_err();
    assert!(e.contains("coalesce=contpte") && e.contains("coalesce_size"), "{e}");
    let e = load("haswell-pcc", &["coalesce=amd", "coalesce_size=16k"]).unwrap_err();
    assert!(e.contains("coalesce_size 16k") && e.contains("not in page_sizes"), "{e}");
    let e = load("arm64-mthp", &["coalesce=sometimes"]).unwrap_err();
    assert!(e.contains("sometimes"), "{e}");
    let e = load("arm64-mthp", &["coalesce_size=lots"]).unwrap_err();
    assert!(e.contains("coalesce_size=lots"), "{e}");
    // Turned off, the size is not needed.
    load("arm64-mthp", &["coalesce=none"]).unwrap();
    load("x86-mthp", &["coalesce=amd"]).unwrap();
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    const SIZES: [&str; 5] = ["16k", "32k", "64k", "128k", "256k"];
    const VALUES: [&str; 5] = ["", "always", "madvise", "inherit", "never"];
    const TOP: [&str; 3] = ["always", "madvise", "never"];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Any per-size settings load, run with the kernel's invariants
        /// intact, and fault folios only of sizes enabled for the VMA.
        #[test]
        fn folios_only_of_enabled_sizes(values in proptest::collection::vec(0usize..5, 5), top in 0usize..3, seed in 1u64..u64::MAX) {
            let mut params: Vec<(String, String)> = vec![("enabled".into(), TOP[top].into())];
            for (s, &v) in SIZES.iter().zip(&values) {
                if v > 0 {
                    params.push((format!("enabled_{s}"), VALUES[v].into()));
                }
            }
            let text = format!("mthp:{}", params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","));
            Config::load(Some("arm64-mthp"), None, &[], std::slice::from_ref(&text)).unwrap();
            let refs: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            // Unadvised memory only: a size is used only if it resolves to always.
            let mut s = sim_on(&arm64(), &header(3 * MB2 + 5 * K64, false), os(), "mthp", &refs);
            let mut rng = Rng(seed);
            for _ in 0..3000 {
                s.step(Access::read(BASE + (rng.next() % (3 * MB2 + 5 * K64))));
            }
            s.pt.check_invariants().unwrap();
            let resolved = |label: &str| -> &str {
                if label == "2m" {
                    return TOP[top];
                }
                let i = SIZES.iter().position(|&x| x == label).unwrap();
                match VALUES[values[i]] {
                    "" => "never",
                    "inherit" => TOP[top],
                    v => v,
                }
            };
            for (label, n) in faults(&mut s).into_iter().skip(1) {
                prop_assert!(n == 0 || resolved(&label) == "always", "{text}: {n} faults of {label}");
            }
        }

        /// Knob texts: a valid configuration or one error line, never a panic.
        #[test]
        fn knob_texts_are_a_config_or_one_error(key in "enabled_[0-9a-z]{0,5}", val in "[a-z]{0,8}") {
            match Config::load(Some("arm64-mthp"), None, &[], &[format!("mthp:{key}={val}")]) {
                Ok(_) => prop_assert!(VALUES.contains(&val.as_str()) && !val.is_empty()),
                Err(e) => prop_assert!(!e.to_string().contains('\n')),
            }
        }
    }
}
