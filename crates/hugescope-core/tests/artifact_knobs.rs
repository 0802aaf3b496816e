//! The PCC authors' simulator's behaviour as opt-in knobs (issue #15; pcc.md
//! §7): its duplicate base-page L1 fill after a walk (`l1_duplicate_fill`,
//! a machine key), its LFU list re-linked by the pre-increment count on a hit
//! (`replacement=lfu_artifact` of the PCC), and its decision schedule
//! (`artifact_phase=true` of policy `pcc`: reads at AI, 30AI, 31AI, 60AI, ...).
//! Each on hand-worked sequences; off, nothing changes.

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::pcc_table::{PccTable, Replacement};
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::pagemap::StaticMap;
use hugescope_core::plan::When;
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, Region, TraceHeader};

const BASE: u64 = 0x7e00_0000_0000;
const MB2: u64 = 2 << 20;

/// The artifact's L1s with no L2 (every L1 miss walks, so every fill is a
/// walk's fill), 4KB pages only.
fn l1_only(duplicate_fill: bool) -> Simulator<StaticMap> {
    let mut m = MachineConfig::preset("pcc-artifact").unwrap();
    m.l2.clear();
    m.l1_duplicate_fill = duplicate_fill;
    Simulator::new(m, 1, StaticMap::Uniform(0)).unwrap()
}

/// Walks of `rounds` passes over `pages` (page numbers from BASE).
fn walks_cycling(duplicate_fill: bool, pages: &[u64], rounds: usize) -> u64 {
    let mut s = l1_only(duplicate_fill);
    for _ in 0..rounds {
        for &p in pages {
            s.step(Access::read(BASE + p * 4096));
        }
    }
    s.counters().walks
}

#[test]
fn duplicate_fill_halves_one_sets_ways() {
    // The 4KB L1 is 64 entries in 16 sets of 4: pages 16 apart share a set.
    let set = |k: u64| (0..k).map(|i| i * 16).collect::<Vec<_>>();
    for k in 1..=6u64 {
        let (plain, dup) = (walks_cycling(false, &set(k), 20), walks_cycling(true, &set(k), 20));
        // LRU over a cycle: all hits after the cold pass if it fits, else every access misses.
        assert_eq!(plain, if k <= 4 { k } else { 20 * k }, "plain, {k} pages in one set");
        // Duplicates: each walked page takes two ways, so two pages fit.
        //   k = 3, set [B A gB gA]: C's dead copy pushes gA out, which unmaps A
        //   (the artifact's eviction erases the tag): [gC B gA gB]; C's live
        //   copy pushes gB out, unmapping B: [C gC gB gA]; A then misses, and so on.
        assert_eq!(dup, if k <= 2 { k } else { 20 * k }, "duplicate fill, {k} pages in one set");
    }
}

#[test]
fn duplicate_fill_halves_the_l1_for_a_4kb_stream() {
    let stream = |n: u64| (0..n).collect::<Vec<_>>();
    // 32 consecutive pages (2 per set) fit either way; 48 (3 per set) fit
    // only without duplicates: the effective capacity is 32 of 64 entries.
    assert_eq!(walks_cycling(false, &stream(32), 10), 32);
    assert_eq!(walks_cycling(true, &stream(32), 10), 32);
    assert_eq!(walks_cycling(false, &stream(48), 10), 48);
    assert_eq!(walks_cycling(true, &stream(48), 10), 480);
}

#[test]
fn duplicates_are_no_translation_and_survive_shootdowns() {
    use hugescope_core::hw::Space;
    let p0 = Space { vm: 0, asid: 0 };
    let mut s = l1_only(true);
    let l1_4k = s.mmus[0].l1.iter().position(|t| t.name == "l1.4k").unwrap();
    s.step(Access::read(BASE));
    assert_eq!(s.mmus[0].l1[l1_4k].cache.occupancy(), 2, "a walk leaves two entries");
    assert!(s.mmus[0].holds(p0, BASE, BASE + 4096));
    s.mmus[0].shootdown(p0, BASE, BASE + 4096);
    // The live entry goes; its dead copy keeps its way (the artifact's
    // invalidation evicts only the mapped entry) and is no translation.
    assert!(!s.mmus[0].holds(p0, BASE, BASE + 4096));
    assert_eq!(s.mmus[0].l1[l1_4k].cache.occupancy(), 1);
    s.step(Access::read(BASE));
    assert_eq!(s.counters().walks, 2);
}

#[test]
fn duplicate_fill_is_a_machine_key_off_by_default() {
    let on = MachineConfig::load(Some("pcc-artifact"), None, &["l1_duplicate_fill=true".into()]).unwrap();
    assert!(on.l1_duplicate_fill);
    for p in hugescope_core::config::PRESETS {
        let m = MachineConfig::preset(p).unwrap();
        assert!(!m.l1_duplicate_fill, "{p}");
        // Off, the machine serializes as before the key existed.
        assert!(!serde_json::to_string(&m).unwrap().contains("duplicate"), "{p}");
    }
    assert!(serde_json::to_string(&on).unwrap().contains("\"l1_duplicate_fill\":true"));
    let err = MachineConfig::load(Some("pcc-artifact"), None, &["l1_duplicate_fill=maybe".into()]).unwrap_err();
    assert!(err.to_string().contains("maybe"), "{err}");
}

/// Region keys of the table in read order.
fn order(t: &PccTable) -> Vec<u64> {
    t.dump().iter().map(|e| e.start / MB2).collect()
}

#[test]
fn lfu_artifact_evicts_the_entry_that_reached_the_tied_count_last() {
    // Two entries tied at count 1; A got there first, B last (B is the more
    // recently touched). A third region needs a slot.
    let run = |repl| {
        let mut t = PccTable::new(2, 8, repl, 21);
        t.touch(0, 0); // A: 0          list [A]
        t.touch(0, MB2); // B: 0        list [B A] (a new entry goes in front of the 0s)
        t.touch(0, 0); // A: 0 -> 1     re-linked by its old count 0: [A B]
        t.touch(0, MB2); // B: 0 -> 1   by its old count 0: behind A (count 1): [A B]
        t.touch(0, 2 * MB2); // C: evicts the list's tail
        t
    };
    let art = run(Replacement::LfuArtifact);
    assert_eq!((art.get(0, 0), art.get(0, MB2), art.get(0, 2 * MB2)), (Some(1), None, Some(0)));
    assert_eq!(order(&art), vec![0, 2]);
    // LFU with an LRU tiebreak keeps the more recent B.
    let lru = run(Replacement::LfuLru);
    assert_eq!((lru.get(0, 0), lru.get(0, MB2), lru.get(0, 2 * MB2)), (None, Some(1), Some(0)));
}

#[test]
fn lfu_artifact_relinks_a_hit_by_its_count_before_the_increment() {
    let mut t = PccTable::new(4, 8, Replacement::LfuArtifact, 21);
    for _ in 0..3 {
        t.touch(0, 0); // X: 0, 1, 2
    }
    t.touch(0, MB2); // Y: 0
    t.touch(0, MB2); // Y: 1         [X(2) Y(1)]
    t.touch(0, MB2); // Y: 1 -> 2, placed by 1: still behind X
    assert_eq!((t.get(0, 0), t.get(0, MB2)), (Some(2), Some(2)));
    assert_eq!(order(&t), vec![0, 1], "re-linked by the new count, Y would lead");
    // The default reads the most recent first among equal counts.
    let mut d = PccTable::new(4, 8, Replacement::LfuLru, 21);
    for va in [0, 0, 0, MB2, MB2, MB2] {
        d.touch(0, va);
    }
    assert_eq!(order(&d), vec![1, 0]);
    assert_eq!(Replacement::parse("lfu_artifact"), Some(Replacement::LfuArtifact));
}

/// The artifact's list (`tlb.h` with `EVICTION_POLICY 2`), written out
/// directly as a list of (region, count): the reference the table's slot
/// bookkeeping must match through hits, inserts, evictions, halvings and
/// invalidations.
struct RefList {
    cap: usize,
    max: u32,
    list: Vec<(u64, u32)>,
}

impl RefList {
    fn link(&mut self, e: (u64, u32)) {
        let p = self.list.iter().position(|x| x.1 <= e.1).unwrap_or(self.list.len());
        self.list.insert(p, e);
    }
    fn touch(&mut self, r: u64) {
        if let Some(p) = self.list.iter().position(|x| x.0 == r) {
            let e = self.list.remove(p);
            self.link(e);
            let p = self.list.iter().position(|x| x.0 == r).unwrap();
            self.list[p].1 += 1;
            if self.list[p].1 >= self.max {
                for x in self.list.iter_mut() {
                    x.1 /= 2;
                }
            }
            return;
        }
        if self.list.len() == self.cap {
            self.list.pop();
        }
        self.link((r, 0));
    }
}

#[test]
fn lfu_artifact_matches_the_artifacts_list_on_a_long_sequence() {
    let mut t = PccTable::new(8, 3, Replacement::LfuArtifact, 21);
    let mut r = RefList { cap: 8, max: 7, list: Vec::new() };
    let mut x = 12345u64;
    for step in 0..20_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let region = (x >> 33) % 14;
        if (x >> 20).is_multiple_of(97) {
            // A shootdown of one region.
            t.invalidate(0, region * MB2, (region + 1) * MB2);
            r.list.retain(|e| e.0 != region);
        } else {
            t.touch(0, region * MB2);
            r.touch(region);
        }
        let got: Vec<(u64, u32)> = t.dump().iter().map(|e| (e.start / MB2, e.freq)).collect();
        assert_eq!(got, r.list, "step {step}");
    }
    assert!(t.stats.halvings > 0 && t.stats.evictions > 0 && t.stats.invalidations > 0);
}

#[test]
fn artifact_phase_reads_at_ai_30ai_31ai_60ai() {
    // interval_accesses = 30 AI with AI = 100: reads at 100, 3000, 3100, 6000, ...
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    let mut h = TraceHeader::new("phase");
    h.regions.push(Region::new("data", BASE, 16 * MB2));
    let mut w = HstWriter::create(&p, &h).unwrap();
    let mut x = 7u64;
    for _ in 0..9000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        // Pages spread over 16 regions: walks in every region from the start.
        w.write(Access::read(BASE + (x >> 40) % (16 * 512) * 4096)).unwrap();
    }
    w.finish().unwrap();
    let m = MachineConfig::preset("pcc-artifact").unwrap();
    let opts = RunOptions { duration_s: Some(90.0), ..Default::default() };
    let spec = PolicySpec::parse("pcc:interval_accesses=3000,artifact_phase=true,regions_to_promote=2").unwrap();
    let r = simulate_policies(p.to_str().unwrap(), &m, &OsConfig::default(), &[spec], &opts).unwrap().remove(0);
    let mut at: Vec<u64> = r
        .executed_plan
        .iter()
        .map(|e| match e.when {
            When::Accesses(n) => n,
            ref other => panic!("{other:?}"),
        })
        .collect();
    at.dedup();
    assert_eq!(at, vec![100, 3000, 3100, 6000, 6100, 9000], "{:?}", r.executed_plan);
}

#[test]
fn the_pcc_policy_accepts_the_artifact_replacement() {
    let p = hugescope_core::policy::make("pcc", &[("replacement".to_string(), "lfu_artifact".to_string())]).unwrap();
    assert_eq!(p.describe()["hardware"]["replacement"], "lfu_artifact", "{}", p.describe());
}
