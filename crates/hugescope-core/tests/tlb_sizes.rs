//! TLB-size sensitivity in one pass (`tlb_sizes`): every size's result is
//! byte for byte what a separate `simulate_static` run of that size gives,
//! across page maps, structures and cpus; bad requests are one clear error.

use hugescope_core::config::{CacheConfig, MachineConfig};
use hugescope_core::sim::simulate_static;
use hugescope_core::tlb_sizes::simulate_tlb_sizes;
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, Region, TraceHeader};
use std::path::Path;

mod common;
use common::hstfile::accesses;

/// Scattered accesses over 64 MiB with a hot 2 MiB, on two cpus and two
/// processes: L2 hits at every depth, misses, and PWC traffic.
fn write(path: &Path) {
    let mut h = TraceHeader::new("tlb-sizes");
    h.cpus = 2;
    h.regions.push(Region::new("r", 0x7e00_0000_0000, 64 << 20));
    let mut w = HstWriter::create(path, &h).unwrap();
    for (i, a) in accesses(60_000, 9).into_iter().enumerate() {
        let off = if i % 3 == 0 { a.addr & 0x1f_ffff } else { a.addr & 0x3ff_ffff };
        w.write(Access { addr: 0x7e00_0000_0000 + off, cpu: (i % 2) as u16, pid: ((i / 7) % 2) as u16, write: a.write }).unwrap();
    }
    w.finish().unwrap();
}

fn separate(path: &str, cfg: &MachineConfig, key: &str, entries: usize, ways: usize, pages: &str) -> String {
    let mut m = cfg.clone();
    m.l2.insert(key.into(), CacheConfig { entries, ways });
    serde_json::to_string(&simulate_static(path, m, pages).unwrap()).unwrap()
}

#[test]
fn every_size_equals_its_own_run() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    write(&p);
    let ps = p.to_str().unwrap();
    // haswell-pcc: 1024 entries, 8 ways, 128 sets (4k+2m); with 4k and 2m maps.
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    for pages in ["4k", "2m"] {
        let sizes = [128, 384, 1024, 2048, 256];
        let rep = simulate_tlb_sizes(ps, cfg.clone(), pages, None, &sizes, Default::default()).unwrap();
        assert_eq!(rep.sets, 128);
        // The configured size was asked: no point appended.
        assert_eq!((rep.points.len(), rep.configured_entries), (5, 1024));
        assert_eq!(rep.structure, "l2.4k+2m");
        let walks: Vec<u64> = rep.points.iter().map(|p| p.result.translation.walks).collect();
        for (pt, &e) in rep.points.iter().zip(&sizes) {
            assert_eq!((pt.entries, pt.ways), (e, e / 128));
            let own = separate(ps, &cfg, "4k+2m", e, e / 128, pages);
            assert_eq!(serde_json::to_string(&pt.result).unwrap(), own, "{pages} {e} entries");
        }
        // Sizes with equal walker states priced their walks once, and
        // groups split by a hit between them merged again later.
        let total: u64 = walks.iter().sum();
        assert!(rep.walks_priced < total, "{} of {total}", rep.walks_priced);
        if pages == "4k" {
            assert!(rep.merges > 0);
        }
        // More ways never walk more (inclusion), and the sizes differ here.
        assert!(walks[0] >= walks[4] && walks[4] >= walks[1] && walks[1] >= walks[2] && walks[2] >= walks[3], "{walks:?}");
        if pages == "4k" {
            assert!(walks[0] > walks[3], "{walks:?}");
        }
    }
    // A fully associative L2 (one set: any size).
    let mut fa = cfg.clone();
    fa.l2.insert("4k+2m".into(), CacheConfig { entries: 64, ways: 0 });
    let rep = simulate_tlb_sizes(ps, fa.clone(), "4k", None, &[16, 100], Default::default()).unwrap();
    assert_eq!(rep.sets, 1);
    // The configured 64 entries appended last.
    assert_eq!(rep.points.iter().map(|p| p.entries).collect::<Vec<_>>(), vec![16, 100, 64]);
    for pt in &rep.points {
        assert_eq!(pt.ways, pt.entries);
        assert_eq!(serde_json::to_string(&pt.result).unwrap(), separate(ps, &fa, "4k+2m", pt.entries, 0, "4k"));
    }
    // A 4KB-only L2 named explicitly (sandybridge-ds).
    let sb = MachineConfig::preset("sandybridge-ds").unwrap();
    let rep = simulate_tlb_sizes(ps, sb.clone(), "4k", Some("l2.4k"), &[256, 512, 1024], Default::default()).unwrap();
    for pt in &rep.points {
        assert_eq!(serde_json::to_string(&pt.result).unwrap(), separate(ps, &sb, "4k", pt.entries, pt.ways, "4k"));
    }
}

#[test]
fn bad_requests_are_one_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    write(&p);
    let ps = p.to_str().unwrap();
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    let err = |c: &MachineConfig, key: Option<&str>, sizes: &[usize]| {
        simulate_tlb_sizes(ps, c.clone(), "4k", key, sizes, Default::default()).unwrap_err().to_string()
    };
    assert!(err(&cfg, None, &[100]).contains("not a multiple of the 128 sets"), "{}", err(&cfg, None, &[100]));
    assert!(err(&cfg, None, &[0]).contains("not a multiple"));
    let many: Vec<usize> = (9..=72).map(|w| 128 * w).collect();
    assert!(err(&cfg, None, &many).contains("at most 64 sizes, the configured 1024 included, not 65"), "{}", err(&cfg, None, &many));
    // No sizes: the default ways (1..16) and the configured 8.
    let rep = simulate_tlb_sizes(ps, cfg.clone(), "4k", None, &[], Default::default()).unwrap();
    assert_eq!(rep.points.iter().map(|p| p.ways).collect::<Vec<_>>(), vec![1, 2, 4, 6, 8, 12, 16]);
    assert!(err(&cfg, Some("l2.1g"), &[128]).contains("has no L2 TLB '1g'"));
    let mut two = cfg.clone();
    two.l2.insert("1g".into(), CacheConfig { entries: 16, ways: 4 });
    assert!(err(&two, None, &[128]).contains("name one with --structure"));
    let alpha = MachineConfig::preset("alpha-21264").unwrap();
    assert!(err(&alpha, None, &[128]).contains("has no L2 TLB to vary"));
    let mut dup = cfg.clone();
    dup.l1_duplicate_fill = true;
    assert!(err(&dup, None, &[128]).contains("duplicate L1 fill"));
}
