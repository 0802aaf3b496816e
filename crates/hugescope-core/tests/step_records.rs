//! `Simulator::step_records` (the record loop every simulation pass runs)
//! against `step` on each access: the same counters, kernel statistics and
//! promotions, on streams that take every path of its shortcut (pages known
//! at the front of their L1 set, probes, walks, promotions with their
//! shootdowns, two cpus, writes, a cpu the header did not declare) and with a
//! direct segment registered mid-run, where the shortcut must stand aside.
//! `step_records_while` stops right after the access that made its
//! condition false, as a sweep's group needs (`sweep.rs`).

mod common;

use common::PromoteAt;
use hugescope_core::config::MachineConfig;
use hugescope_core::hw::{Geometry, RadixWalker, Segments};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::policy::{self, Policy};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, Region, TraceHeader};

const BASE: u64 = 0x7e00_0000_0000;
const MB2: u64 = 2 << 20;

type OsSim = Simulator<Kernel, RadixWalker, Segments>;

fn header() -> TraceHeader {
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region::new("data", BASE, 64 * MB2));
    h
}

fn os() -> OsConfig {
    // An access rate: daemons wake at fixed access counts in both runs.
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 200_000.0 }), ..Default::default() }
}

fn sim(machine: &str, pol: &str, params: &[(&str, &str)]) -> OsSim {
    // `PRESET[,KEY=VALUE...]`: a preset and machine keys.
    let mut parts = machine.split(',');
    let preset = parts.next().unwrap();
    let sets: Vec<String> = parts.map(str::to_string).collect();
    let cfg = MachineConfig::load(Some(preset), None, &sets).unwrap();
    let p = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    with_policy(cfg, policy::make(pol, &p).unwrap())
}

fn with_policy(cfg: MachineConfig, pol: Box<dyn Policy>) -> OsSim {
    let k = Kernel::new_multi(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), &header(), &os(), vec![pol]).unwrap();
    Simulator::with_unit(cfg, 1, k).unwrap()
}

/// A graph kernel's shape: a sequential edge stream interleaved with
/// random reads and writes of a few hot 2MB regions and a wide cold range,
/// mostly on cpu 0, some on cpu 1 and a few on cpu 3 (not declared).
fn stream(n: usize) -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::with_capacity(n);
    for i in 0..n as u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let addr = match i % 4 {
            0 | 2 => BASE + 40 * MB2 + (i / 4) * 8 % (16 * MB2),
            1 => BASE + (x % 4) * MB2 + (x >> 20) % MB2 / 8 * 8,
            _ => BASE + (x >> 8) % (40 * MB2) / 8 * 8,
        };
        let cpu = match x % 100 {
            0 => 3,
            1..=20 => 1,
            _ => 0,
        };
        let a = Access { addr, cpu, pid: 0, write: x % 7 == 0 };
        out.push(a.pack());
    }
    out
}

fn state(s: &OsSim) -> (serde_json::Value, serde_json::Value, usize) {
    (serde_json::to_value(s.counters()).unwrap(), serde_json::to_value(s.pt.stats()).unwrap(), s.pt.executed_plan().len())
}

fn compare(machine: &str, pol: &str, params: &[(&str, &str)], n: usize) -> OsSim {
    let recs = stream(n);
    let mut one = sim(machine, pol, params);
    for &r in &recs {
        one.step(Access::unpack(r));
    }
    let mut rec = sim(machine, pol, params);
    // Chunks of uneven length, as a pass cut at markers hands them over.
    let mut at = 0;
    for len in [1usize, 7, 4096, 100_003].iter().cycle() {
        if at >= recs.len() {
            break;
        }
        let end = (at + len).min(recs.len());
        rec.step_records(&recs[at..end]);
        at = end;
    }
    assert_eq!(state(&one), state(&rec), "{pol} on {machine}: step_records differs from step");
    rec
}

#[test]
fn step_records_equals_step_under_promotions_and_shootdowns() {
    let s = compare("haswell-pcc", "pcc", &[("interval_accesses", "50000")], 600_000);
    let c = s.counters();
    // The stream takes every path: known fronts, probes, walks, promotions.
    assert!(c.l1_hits > 300_000 && c.l2_hits > 1_000 && c.walks > 1_000, "{c:?}");
    assert!(s.pt.stats().promotions > 0 && s.pt.stats().shootdowns > 0, "{:?}", s.pt.stats());
    assert!(s.mmus.len() >= 4, "cpu 3 was added on its first access");
}

#[test]
fn step_records_equals_step_on_the_artifact_machine_with_duplicate_fills() {
    // Dead duplicates retag entries and forget the structure's known fronts
    // (`Mmu::fill_l1`): the shortcut must see the same fronts as `step`.
    let s = compare("pcc-artifact,l1_duplicate_fill=true", "pcc", &[("replacement", "lfu_artifact"), ("artifact_phase", "true"), ("interval_accesses", "60000")], 300_000);
    assert!(s.pt.stats().promotions > 0);
}

#[test]
fn a_segment_registered_mid_run_turns_the_shortcut_off_with_the_same_results() {
    // `dseg` creates its segment once the primary region is populated: the
    // first accesses take the shortcut, the rest go through the segment.
    let s = compare("sandybridge-ds", "dseg", &[], 300_000);
    let g = s.counters().segment.expect("a segment was registered");
    assert!(g.hits > 0, "{g:?}");
}

#[test]
fn a_promotion_made_on_a_shortcut_access_shoots_down_before_the_next() {
    // Two pages of two regions, alternating: after the first two walks every
    // access is a known front page, so the promotion fires inside the
    // shortcut's `after_access`. Its shootdown must apply before the next
    // access, which then walks once per region to the new 2MB pages.
    // The second page is one 4KB page into its region, so the two 4KB pages
    // sit in different sets of the 4KB L1 (16 sets) and both stay known.
    let recs: Vec<u64> = (0..200_000u64).map(|i| Access::read(BASE + (i % 2) * (MB2 + 4096) + 64).pack()).collect();
    let mut one = with_policy(MachineConfig::preset("haswell-pcc").unwrap(), Box::new(PromoteAt { at: 0.25 }));
    for &r in &recs {
        one.step(Access::unpack(r));
    }
    let mut rec = with_policy(MachineConfig::preset("haswell-pcc").unwrap(), Box::new(PromoteAt { at: 0.25 }));
    rec.step_records(&recs);
    assert_eq!(state(&one), state(&rec));
    let c = rec.counters();
    // 2 walks to 4KB pages, 2 to the 2MB pages after the promotion at access
    // 50,000 (0.25 s at 200,000 accesses a second); all others L1 hits.
    assert_eq!((c.walks, rec.pt.stats().promotions), (4, 2), "{c:?}");
    let huge_hits = c.by_page_size.iter().find(|p| p.page_size == "2m").map_or(0, |p| p.l1_hits);
    assert!(huge_hits > 149_000, "{huge_hits} L1 hits on 2MB pages");
}

#[test]
fn step_records_while_stops_after_the_access_that_ends_it() {
    let recs = stream(10_000);
    let mut s = sim("haswell-pcc", "base", &[]);
    let mut seen = 0u64;
    let took = s.step_records_while(&recs, |_| {
        seen += 1;
        seen < 1234
    });
    assert_eq!(took, 1234);
    assert_eq!(s.counters().accesses, 1234);
    assert_eq!(s.step_records_while(&recs[took..], |_| true), recs.len() - took);
    assert_eq!(s.counters().accesses, recs.len() as u64);
}
