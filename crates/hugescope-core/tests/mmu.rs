//! Hand-checked translation counts (issue: foundation, acceptance list).

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::{Outcome, Space};
use hugescope_core::pagemap::StaticMap;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::Access;

/// SplitMix64: a tiny deterministic generator for test streams.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const BASE: u64 = 0x7e00_0000_0000;
/// Process 0 of the host: the address space every test here uses.
const P0: Space = Space { vm: 0, asid: 0 };

fn sim(cfg: MachineConfig, pages: usize) -> Simulator<StaticMap> {
    Simulator::new(cfg, 1, StaticMap::Uniform(pages)).unwrap()
}

/// A TLB large enough to never evict: N distinct 4KB pages give exactly N walks.
#[test]
fn infinite_tlb_walks_once_per_distinct_page() {
    let cfg = MachineConfig::load(Some("haswell-pcc"), None, &["l1.4k.entries=1048576".into(), "l1.4k.ways=64".into()]).unwrap();
    let mut s = sim(cfg, 0);
    let mut rng = Rng(7);
    let n = 20_000u64;
    // Distinct pages: a random permutation-ish walk over 20k pages, each touched 5 times.
    let pages: Vec<u64> = (0..n).map(|i| BASE + i * 4096).collect();
    for _ in 0..5 {
        for &p in &pages {
            let off = rng.next() % 4096 & !7;
            s.step(Access::read(p + off).on_cpu(0));
        }
    }
    let c = s.counters();
    assert_eq!(c.walks, n);
    assert_eq!(c.accesses, 5 * n);
    assert_eq!(c.l1_hits, 4 * n);
}

/// Cycling over k pages with k <= L1 entries: after the first pass, no misses.
#[test]
fn small_cycle_hits_l1_after_warmup() {
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    let mut s = sim(cfg, 0);
    let k = 64; // = L1 4KB entries, 16 sets x 4 ways; consecutive pages fill sets evenly
    for i in 0..k {
        s.step(Access::read(BASE + i * 4096));
    }
    let warm = s.counters();
    assert_eq!(warm.walks, k);
    for _ in 0..100 {
        for i in 0..k {
            let o = s.mmus[0].lookup(&Access::read(BASE + i * 4096));
            assert!(matches!(o, Outcome::L1Hit(0)), "{o:?}");
        }
    }
    assert_eq!(s.counters().walks, k);
    // One more page than a set holds, all mapping to one set: LRU thrashes.
    let mut t = sim(MachineConfig::preset("haswell-pcc").unwrap(), 0);
    for _ in 0..10 {
        for i in 0..5u64 {
            t.step(Access::read(BASE + i * 16 * 4096));
        }
    }
    // All five still fit in the 8-way L2 (set index = vpn % 128), so only L1 misses.
    let c = t.counters();
    assert_eq!(c.walks, 5);
    assert_eq!(c.l1_hits, 0);
    assert_eq!(c.l2_hits, 45);
}

fn gups(s: &mut Simulator<StaticMap>, footprint: u64, n: u64, seed: u64) {
    let mut rng = Rng(seed);
    for _ in 0..n {
        let a = BASE + (rng.next() % (footprint / 8)) * 8;
        s.step(Access::read(a));
        s.step(Access::write(a));
    }
}

/// GUPS over a footprint far beyond TLB reach: the walk rate of the update
/// reads (the write to the same element always hits) approaches
/// 1 - reach/footprint, within 2 percentage points.
#[test]
fn gups_walk_rate_matches_reach() {
    let footprint = 256u64 << 20;
    let mut s = sim(MachineConfig::preset("haswell-pcc").unwrap(), 0);
    let n = 1_000_000;
    gups(&mut s, footprint, n, 1);
    let c = s.counters();
    // Reach: the L2 holds 1024 4KB translations; the L1 adds at most 64 more.
    let reach = 1024.0 * 4096.0;
    let expected = 1.0 - reach / footprint as f64;
    let rate = c.walks as f64 / n as f64;
    assert!((rate - expected).abs() < 0.02, "walk rate {rate:.4} vs 1 - reach/footprint {expected:.4}");
    assert_eq!(c.accesses, 2 * n);
}

/// The same stream with 2MB pages, footprint within the 2MB reach (32 L1
/// entries + the L2): at least 10x fewer walks.
#[test]
fn gups_with_2mb_pages_walks_10x_less() {
    let footprint = 64u64 << 20;
    let mut small = sim(MachineConfig::preset("haswell-pcc").unwrap(), 0);
    let mut huge = sim(MachineConfig::preset("haswell-pcc").unwrap(), 1);
    gups(&mut small, footprint, 200_000, 3);
    gups(&mut huge, footprint, 200_000, 3);
    let (ws, wh) = (small.counters().walks, huge.counters().walks);
    assert!(ws >= 10 * wh, "4KB walks {ws}, 2MB walks {wh}");
    // 32 regions, all fit: exactly one (cold) walk per 2MB region.
    assert_eq!(wh, 32);
}

/// A shootdown leaves no entry of the range in any TLB of any cpu, and the
/// next access to the range walks again.
#[test]
fn shootdown_leaves_no_stale_translation() {
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    let mut s = Simulator::new(cfg, 2, StaticMap::Uniform(0)).unwrap();
    for cpu in 0..2u16 {
        for i in 0..600u64 {
            s.step(Access::read(BASE + i * 4096).on_cpu(cpu));
        }
    }
    let (lo, hi) = (BASE + 100 * 4096, BASE + 300 * 4096);
    assert!(s.mmus.iter().all(|m| m.holds(P0, lo, hi)));
    for m in s.mmus.iter_mut() {
        m.shootdown(P0, lo, hi);
    }
    assert!(s.mmus.iter().all(|m| !m.holds(P0, lo, hi)));
    // Outside the range, entries survive.
    assert!(s.mmus.iter().all(|m| m.holds(P0, BASE + 400 * 4096, BASE + 600 * 4096)));
    let before = s.counters().walks;
    s.step(Access::read(BASE + 200 * 4096).on_cpu(1));
    assert_eq!(s.counters().walks, before + 1);
}

/// With several page sizes in use, each access is counted under the size of
/// the page that translated it, and 1GB pages walk 2 levels, 2MB 3, 4KB 4.
#[test]
fn walk_depth_by_page_size_without_pwc() {
    let cfg = MachineConfig::load(Some("pcc-artifact"), None, &[]).unwrap();
    for (pages, refs) in [(0usize, 4u64), (1, 3)] {
        let mut s = sim(cfg.clone(), pages);
        s.step(Access::read(BASE));
        assert_eq!(s.counters().walk_refs, refs);
    }
    let g = MachineConfig::preset("haswell-pcc").unwrap();
    let mut s = sim(g, 2);
    s.step(Access::read(BASE));
    assert_eq!(s.counters().walk_refs, 2);
    assert_eq!(s.counters().by_page_size[2].walks, 1);
}

/// Repeated accesses to one page are L1 hits only where an L1 holds that
/// size: with 2MB translations kept in the L2 alone, every repeat is an L2 hit.
#[test]
fn same_page_repeats_follow_where_the_translation_lives() {
    let mut cfg = MachineConfig::preset("haswell-pcc").unwrap();
    cfg.l1.remove("2m");
    cfg.l1.remove("1g");
    let mut s = Simulator::new(cfg, 1, StaticMap::Uniform(1)).unwrap();
    for i in 0..10u64 {
        s.step(Access::read(BASE + i * 8));
    }
    let c = s.counters();
    assert_eq!((c.walks, c.l2_hits, c.l1_hits), (1, 9, 0));
    // With 4KB pages and an L1: one walk, then L1 hits; a shootdown of the
    // page makes the next access walk again instead of hitting.
    let mut t = sim(MachineConfig::preset("haswell-pcc").unwrap(), 0);
    for i in 0..10u64 {
        t.step(Access::read(BASE + i * 8));
    }
    t.mmus[0].shootdown(P0, BASE, BASE + 4096);
    t.step(Access::read(BASE));
    let c = t.counters();
    assert_eq!((c.walks, c.l1_hits), (2, 9));
}

/// Tags name 4096 address spaces and 16 VMs: pids that a 7-bit tag would have
/// folded together (0 and 128) or the same pid in two VMs never share an
/// entry, and a shootdown of one space leaves the others' entries in place.
#[test]
fn address_spaces_and_vms_never_share_entries() {
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    let mut s = sim(cfg, 0);
    let at = |pid: u16| Access { pid, ..Access::read(BASE) };
    // Same page in pids 0, 128 and 4095 of VM 0: three cold walks.
    for pid in [0, 128, 4095] {
        s.step(at(pid));
    }
    assert_eq!(s.counters().walks, 3);
    // Each now hits its own entry.
    for pid in [0, 128, 4095] {
        s.step(at(pid));
    }
    assert_eq!((s.counters().walks, s.counters().l1_hits), (3, 3));
    // The cpu switches to VM 1: pid 0 there is a different address space, it
    // walks (and the walk caches share nothing with VM 0: 4 references).
    s.mmus[0].set_vm(1);
    let refs = s.counters().walk_refs;
    s.step(at(0));
    assert_eq!((s.counters().walks, s.counters().walk_refs - refs), (4, 4));
    let vm1 = Space { vm: 1, asid: 0 };
    assert!(s.mmus[0].holds(vm1, BASE, BASE + 4096) && s.mmus[0].holds(P0, BASE, BASE + 4096));
    // Shooting down VM 1's pid 0 leaves VM 0's pid 0 (and pid 128) alone.
    s.mmus[0].shootdown(vm1, BASE, BASE + 4096);
    assert!(!s.mmus[0].holds(vm1, BASE, BASE + 4096));
    assert!(s.mmus[0].holds(P0, BASE, BASE + 4096) && s.mmus[0].holds(Space { vm: 0, asid: 128 }, BASE, BASE + 4096));
    s.mmus[0].set_vm(0);
    s.step(at(128));
    assert_eq!(s.counters().walks, 4, "VM 0's entries survived VM 1's shootdown");
}

/// Every access's outcome against a reference true-LRU model of haswell-pcc's
/// 4KB L1 (16 sets x 4 ways) and L2 (128 sets x 8 ways), on a stream that
/// mostly returns to the page before last (the pattern the MMU answers
/// without probing, `hw/l1_front.rs`), with random pages that evict it from
/// its set's front and shootdowns in between: the shortcut must give exactly
/// the probe's answer and leave the same LRU state.
#[test]
fn alternating_pages_match_a_reference_lru_model() {
    use std::collections::VecDeque;
    fn touch(set: &mut VecDeque<u64>, vpn: u64, ways: usize, fill: bool) -> bool {
        if let Some(i) = set.iter().position(|&v| v == vpn) {
            set.remove(i);
            set.push_front(vpn);
            return true;
        }
        if fill {
            set.push_front(vpn);
            set.truncate(ways);
        }
        false
    }
    let mut s = sim(MachineConfig::preset("haswell-pcc").unwrap(), 0);
    let (mut l1, mut l2) = (vec![VecDeque::new(); 16], vec![VecDeque::new(); 128]);
    let mut rng = Rng(11);
    let base = BASE >> 12;
    let (mut prev, mut last) = (base, base + 1);
    let (mut n_l1, mut n_l2, mut n_walk) = (0u64, 0u64, 0u64);
    for i in 0..200_000u64 {
        let r = rng.next();
        // Half the time the page before last; otherwise one of 96 pages: 12
        // in each of 8 L2 sets (vpn % 128), so 12 per L1 set (vpn % 16) too:
        // both levels evict.
        let vpn = if r % 2 == 0 { prev } else { base + (r >> 8) % 12 * 128 + (r >> 16) % 8 };
        if vpn != last {
            (prev, last) = (last, vpn);
        }
        if i % 9_973 == 0 {
            // A shootdown of 8 pages around the current one.
            let lo = vpn.saturating_sub(4);
            s.mmus[0].shootdown(P0, lo << 12, (lo + 8) << 12);
            for set in l1.iter_mut().chain(l2.iter_mut()) {
                set.retain(|&v| v < lo || v >= lo + 8);
            }
        }
        let before = s.counters();
        s.step(Access::read((vpn << 12) | (r >> 40) % 4096 & !7));
        let after = s.counters();
        let got = (after.l1_hits - before.l1_hits, after.l2_hits - before.l2_hits, after.walks - before.walks);
        let want = if touch(&mut l1[(vpn % 16) as usize], vpn, 4, false) {
            n_l1 += 1;
            (1, 0, 0)
        } else {
            let hit2 = touch(&mut l2[(vpn % 128) as usize], vpn, 8, true);
            touch(&mut l1[(vpn % 16) as usize], vpn, 4, true);
            if hit2 {
                n_l2 += 1;
                (0, 1, 0)
            } else {
                n_walk += 1;
                (0, 0, 1)
            }
        };
        assert_eq!(got, want, "access {i} to page {vpn:#x}: (L1 hit, L2 hit, walk)");
    }
    // The stream exercises all three outcomes, many times each.
    assert!(n_l1 > 50_000 && n_l2 > 5_000 && n_walk > 1_000, "{n_l1} {n_l2} {n_walk}");
}

/// `tlb_max_page = "4k"` (a guest whose host backs it with 4KB pages): a 2MB
/// page keeps its shorter walk but fills 4KB entries, so every distinct 4KB
/// page of it walks once; uncapped, the first walk covers the whole 2MB page.
#[test]
fn tlb_max_page_holds_a_2mb_page_as_4kb_entries() {
    let pattern: Vec<u64> = [0u64, 1, 2, 0, 511, 1].iter().map(|p| BASE + p * 4096 + 8).collect();
    let run = |sets: &[String]| {
        let cfg = MachineConfig::load(Some("haswell-pcc"), None, sets).unwrap();
        let mut s = sim(cfg, 1); // every page 2MB
        for &a in &pattern {
            s.step(Access::read(a));
        }
        s.counters()
    };
    let free = run(&[]);
    assert_eq!((free.accesses, free.walks, free.l1_hits), (6, 1, 5), "one walk fills the 2MB entry");
    let capped = run(&["tlb_max_page=4k".into()]);
    // Pages 0, 1, 2 and 511 walk once each; the second 0 and the second 1 hit.
    assert_eq!((capped.accesses, capped.walks, capped.l1_hits), (6, 4, 2));
    // Each walk still ends at the 2MB leaf: the first reads PML4, PDPT and
    // PD (3, as uncapped); the other three find the PDPTE in the page-walk
    // cache and read the PD entry only (1 each): 6.
    assert_eq!(free.walk_refs, 3);
    assert_eq!(capped.walk_refs, 3 + 3);
    let bad = MachineConfig::load(Some("haswell-pcc"), None, &["tlb_max_page=8k".into()]);
    assert!(bad.unwrap_err().to_string().contains("not one of the machine's page sizes"));
}
