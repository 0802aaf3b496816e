//! Page contents and same-page merging (os/content.rs, os/ksm.rs) and the
//! sharing policies (hpshare, ksm, ingens-share, zeroscan; FHPM §2.3, §6.6):
//! hand-counted merges, copy-on-write breaks, KSM's split before a merge,
//! huge-page sharing of identical 2MB pages only, frame conservation, the
//! content marker in traces, and knob errors.

mod common;

use common::{machine, BASE, MB2};
use hugescope_core::hw::Geometry;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::content::{declared_id, PRIVATE, ZERO};
use hugescope_core::os::costs::OsCosts;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::os::ksm::SharingStats;
use hugescope_core::policy;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{content_label, free_label, parse_content_label, populate_label, Access, AccessSink, ContentDecl, Region, TraceHeader};

const PAGE: u64 = 4096;
/// Accesses per virtual second: with the scanner's 10 ms sleep, 10 accesses per wake-up.
const RATE: f64 = 1000.0;

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: RATE }), memory_bytes: Some(64 << 20), costs: OsCosts::zero(), ..Default::default() }
}

/// Two processes, each with `regions` 2MB-aligned regions of 2MB at BASE.
fn header2(regions: u64) -> TraceHeader {
    let mut h = TraceHeader::new("sharing");
    h.processes = 2;
    for pid in 0..2 {
        h.regions.push(Region { pid, ..Region::new("data", BASE, regions * MB2) });
    }
    h
}

/// A kernel running `spec` ("a+b": several policies) with `params` for the
/// sharing policy (the last one).
fn sim(h: &TraceHeader, spec: &str, params: &[(&str, &str)]) -> Simulator<Kernel> {
    let names: Vec<&str> = spec.split('+').collect();
    let pols = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let p: Vec<(String, String)> = if i + 1 == names.len() { params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() } else { vec![] };
            policy::make(n, &p).unwrap()
        })
        .collect();
    let cfg = machine();
    let k = Kernel::new_multi(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), h, &os(), pols).unwrap();
    Simulator::new(cfg, 1, k).unwrap()
}

/// Fast scanning: every page of these tiny runs in one wake-up.
const FAST: [(&str, &str); 2] = [("pages_to_scan", "100000"), ("sleep_ms", "10")];

fn declare(s: &mut Simulator<Kernel>, pid: u16, page: u64, pages: u64, stream: u64, first: u64) {
    s.progress(&content_label(&ContentDecl { pid, start: BASE + page * PAGE, len: pages * PAGE, stream, first }));
}

/// `n` reads of one page of pid 0 (time passes: daemons run).
fn idle(s: &mut Simulator<Kernel>, n: u64, addr: u64) {
    for _ in 0..n {
        s.step(Access::read(addr));
    }
}

fn pfn(k: &Kernel, pid: u16, page: u64) -> u32 {
    common::frame(k, pid, BASE + page * PAGE)
}

fn leaf(k: &Kernel, pid: u16, region: u64) -> usize {
    k.view().region(pid, BASE + region * MB2).unwrap().leaf_size
}

fn stats(k: &Kernel) -> SharingStats {
    k.sharing_stats().expect("a sharing policy is on")
}

fn used_frames(k: &Kernel) -> u64 {
    k.phys().total_frames() - k.phys().free_frames()
}

#[test]
fn identical_pages_merge_and_different_ones_do_not() {
    let mut s = sim(&header2(1), "base+ksm", &FAST);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 24 * PAGE));
    }
    // pid 0 pages 0..8 hold records 0..8; pid 1 holds the same records in
    // reverse order (page j: record 7 - j), then 8 pages of another stream;
    // pages 16..24 of both stay private (written, never declared).
    declare(&mut s, 0, 0, 8, 1, 0);
    for j in 0..8 {
        declare(&mut s, 1, j, 1, 1, 7 - j);
    }
    declare(&mut s, 1, 8, 8, 2, 0);
    assert_eq!(s.pt.content_of(1, BASE + 3 * PAGE), declared_id(1, 4));
    assert_eq!(s.pt.content_of(0, BASE + 20 * PAGE), PRIVATE);
    let before = used_frames(&s.pt);
    idle(&mut s, 100, BASE);
    let k = &s.pt;
    let st = stats(k);
    // 8 shared frames (pid 0's), each mapped twice: 8 frames saved.
    assert_eq!((st.merges, st.pages_shared, st.pages_sharing, st.frames_freed), (8, 8, 8, 8));
    assert_eq!(st.saved_bytes, 8 * PAGE);
    assert_eq!(st.huge_splits, 0);
    for j in 0..8 {
        assert_eq!(pfn(k, 1, j), pfn(k, 0, 7 - j), "pid 1 page {j} maps pid 0 page {}", 7 - j);
        assert_eq!(k.shared_mappers(pfn(k, 0, j) as u64), Some(2));
    }
    for j in 8..24 {
        assert_ne!(pfn(k, 1, j), pfn(k, 0, j));
        assert_eq!(k.shared_mappers(pfn(k, 1, j) as u64), None);
    }
    assert_eq!(used_frames(k), before - 8);
    // Memory in use counts each shared frame once: 48 - 8 pages.
    assert_eq!(st.in_use_bytes, 40 * PAGE);
    assert!((st.saved_share - 8.0 / 48.0).abs() < 1e-12);
    k.check_invariants().unwrap();
}

#[test]
fn a_write_breaks_copy_on_write_into_a_private_copy_at_its_cost() {
    let mut p = FAST.to_vec();
    p.push(("cow_us", "100"));
    let mut s = sim(&header2(1), "base+ksm", &p);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 4 * PAGE));
        declare(&mut s, pid, 0, 4, 1, 0);
    }
    idle(&mut s, 50, BASE);
    let shared = pfn(&s.pt, 0, 2);
    assert_eq!(pfn(&s.pt, 1, 2), shared);
    assert_eq!(stats(&s.pt).pages_sharing, 4);
    let (sync0, used0) = (s.pt.clock().os_sync_seconds, used_frames(&s.pt));
    // pid 1 writes its page 2: a new frame, the content private, the
    // writer pays cow_us (every other OS cost is zero here).
    s.step(Access::write(BASE + 2 * PAGE).in_pid(1));
    let k = &s.pt;
    let st = stats(k);
    assert_eq!((st.cow_breaks, st.frames_copied, st.pages_sharing), (1, 1, 3));
    assert_ne!(pfn(k, 1, 2), shared);
    assert_eq!(pfn(k, 0, 2), shared, "the other mapper keeps the shared frame");
    assert_eq!(k.shared_mappers(shared as u64), Some(1));
    assert_eq!(k.content_of(1, BASE + 2 * PAGE), PRIVATE);
    assert_eq!(k.content_of(0, BASE + 2 * PAGE), declared_id(1, 2));
    assert!((k.clock().os_sync_seconds - sync0 - 100e-6).abs() < 1e-12, "charged {}", k.clock().os_sync_seconds - sync0);
    assert_eq!(used_frames(k), used0 + 1);
    k.check_invariants().unwrap();
    // A second write to the now-private page costs nothing more; pid 0's
    // write breaks the last mapping: the shared frame is freed, no saving left
    // on that page.
    s.step(Access::write(BASE + 2 * PAGE).in_pid(1));
    s.step(Access::write(BASE + 2 * PAGE).in_pid(0));
    let k = &s.pt;
    assert_eq!(stats(k).cow_breaks, 2);
    assert_eq!(k.shared_mappers(shared as u64), None);
    assert_eq!(used_frames(k), used0 + 1, "one copy allocated, the shared frame freed");
    k.check_invariants().unwrap();
}

#[test]
fn ksm_splits_a_huge_page_before_merging_a_base_page_of_it_and_hpshare_does_not() {
    for spec in ["ideal+ksm", "ideal+hpshare"] {
        let mut s = sim(&header2(1), spec, &FAST);
        for pid in 0..2 {
            s.progress(&populate_label(pid, BASE, MB2));
        }
        // pid 0's huge page holds records 0..512; pid 1's holds record 5 in
        // its first page, private data elsewhere.
        declare(&mut s, 0, 0, 512, 1, 0);
        declare(&mut s, 1, 0, 1, 1, 5);
        assert_eq!((leaf(&s.pt, 0, 0), leaf(&s.pt, 1, 0)), (1, 1));
        idle(&mut s, 100, BASE);
        let k = &s.pt;
        let st = stats(k);
        if spec == "ideal+ksm" {
            // One shareable 4KB region in each: both huge pages split, one merge.
            assert_eq!((st.huge_splits, st.merges, st.pages_sharing), (2, 1, 1));
            assert_eq!((leaf(k, 0, 0), leaf(k, 1, 0)), (0, 0));
            assert_eq!(pfn(k, 1, 0), pfn(k, 0, 5));
        } else {
            assert_eq!((st.huge_splits, st.merges, st.huge_merges, st.pages_sharing), (0, 0, 0, 0));
            assert_eq!((leaf(k, 0, 0), leaf(k, 1, 0)), (1, 1));
        }
        k.check_invariants().unwrap();
    }
}

#[test]
fn hpshare_merges_only_identical_huge_pages_and_breaks_them_whole() {
    let mut s = sim(&header2(2), "ideal+hpshare", &FAST);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 2 * MB2));
    }
    // Region 0: the same 512 records in the same order in both processes.
    // Region 1: the same records, but pid 1 holds them in reverse order.
    declare(&mut s, 0, 0, 512, 1, 0);
    declare(&mut s, 1, 0, 512, 1, 0);
    declare(&mut s, 0, 512, 512, 2, 0);
    for j in 0..512 {
        declare(&mut s, 1, 512 + j, 1, 2, 511 - j);
    }
    let used0 = used_frames(&s.pt);
    idle(&mut s, 100, BASE);
    let st = stats(&s.pt);
    assert_eq!((st.huge_merges, st.merges, st.huge_splits, st.pages_sharing), (1, 0, 0, 512));
    assert_eq!(used_frames(&s.pt), used0 - 512);
    for pid in 0..2 {
        assert_eq!((leaf(&s.pt, pid, 0), leaf(&s.pt, pid, 1)), (1, 1), "every page stays huge");
    }
    assert_eq!(pfn(&s.pt, 1, 7), pfn(&s.pt, 0, 7));
    assert_ne!(pfn(&s.pt, 1, 512), pfn(&s.pt, 0, 512));
    s.pt.check_invariants().unwrap();
    // A write to the shared huge page copies the whole page: still huge.
    s.step(Access::write(BASE + 9 * PAGE).in_pid(1));
    let st = stats(&s.pt);
    assert_eq!((st.cow_breaks, st.frames_copied, st.pages_sharing), (1, 512, 0));
    assert_eq!(leaf(&s.pt, 1, 0), 1);
    assert_eq!(used_frames(&s.pt), used0);
    s.pt.check_invariants().unwrap();
}

#[test]
fn frames_are_conserved_through_merges_frees_and_breaks() {
    let mut s = sim(&header2(2), "ideal+ksm", &FAST);
    let empty = used_frames(&s.pt);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 2 * MB2));
        declare(&mut s, pid, 0, 1024, 3, 0);
    }
    idle(&mut s, 100, BASE);
    assert_eq!(stats(&s.pt).pages_sharing, 1024);
    s.pt.check_invariants().unwrap();
    // Writes here and there, a release of part of the memory of each
    // process, more scanning: the invariant holds at every step.
    for (i, w) in [3u64, 700, 701, 1000].iter().enumerate() {
        s.step(Access::write(BASE + w * PAGE).in_pid((i % 2) as u16));
        s.pt.check_invariants().unwrap();
    }
    s.progress(&free_label(0, BASE + 100 * PAGE, 300 * PAGE));
    s.pt.check_invariants().unwrap();
    s.progress(&free_label(1, BASE + 200 * PAGE, 600 * PAGE));
    idle(&mut s, 50, BASE + 5 * PAGE);
    s.pt.check_invariants().unwrap();
    // Everything released: every frame is back in the buddy allocator.
    for pid in 0..2 {
        s.progress(&free_label(pid, BASE, 2 * MB2));
    }
    let k = &s.pt;
    k.check_invariants().unwrap();
    assert_eq!(stats(k).pages_shared, 0);
    assert_eq!(used_frames(k), empty);
    assert_eq!(k.content_of(0, BASE + 5 * PAGE), ZERO, "a freed page holds zeros again");
}

#[test]
fn freeing_shared_huge_pages_keeps_the_other_mappers_frame() {
    let mut s = sim(&header2(2), "ideal+hpshare", &FAST);
    let empty = used_frames(&s.pt);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 2 * MB2));
        declare(&mut s, pid, 0, 1024, 1, 0);
    }
    idle(&mut s, 100, BASE);
    assert_eq!(stats(&s.pt).pages_sharing, 1024);
    let shared = pfn(&s.pt, 1, 0);
    // pid 0 releases its first huge page whole: pid 1 keeps the frame.
    s.progress(&free_label(0, BASE, MB2));
    s.pt.check_invariants().unwrap();
    assert_eq!(pfn(&s.pt, 1, 0), shared);
    assert_eq!(s.pt.shared_mappers(shared as u64), Some(1));
    // Two shared blocks (regions 0 and 1 of both processes), nothing freed.
    assert_eq!(used_frames(&s.pt), empty + 2 * 512);
    // pid 1 releases half of its second huge page: a private copy first,
    // then the ordinary partial free (split, frames kept whole).
    s.progress(&free_label(1, BASE + MB2, MB2 / 2));
    s.pt.check_invariants().unwrap();
    let st = stats(&s.pt);
    assert_eq!((st.pages_sharing, st.cow_breaks), (0, 1));
    // pid 0 alone maps the shared block of region 1; pid 1's copy is split,
    // its block held whole (Linux's deferred split): 3 blocks in use.
    assert_eq!(used_frames(&s.pt), empty + 3 * 512);
    for pid in 0..2 {
        s.progress(&free_label(pid, BASE, 2 * MB2));
    }
    s.pt.check_invariants().unwrap();
    assert_eq!(used_frames(&s.pt), empty);
}

#[test]
fn zeroscan_reclaims_only_zero_regions_of_huge_pages() {
    let mut s = sim(&header2(1), "ideal+zeroscan", &FAST);
    // Both processes fault their huge page by a read and write 100 pages:
    // 412 zero-filled base pages each; the written ones are private.
    for pid in 0..2u16 {
        for j in 0..100 {
            s.step(Access::write(BASE + j * PAGE).in_pid(pid));
        }
    }
    idle(&mut s, 100, BASE);
    let k = &s.pt;
    let st = stats(k);
    // 824 zero pages onto one frame: 823 saved; both huge pages split.
    assert_eq!((st.huge_splits, st.pages_shared, st.pages_sharing), (2, 1, 823));
    assert_eq!((leaf(k, 0, 0), leaf(k, 1, 0)), (0, 0));
    assert_eq!(k.shared_mappers(pfn(k, 0, 300) as u64), Some(824));
    k.check_invariants().unwrap();
}

#[test]
fn ingens_share_keeps_hot_huge_pages_and_splits_cold_ones() {
    // Tracking every 0.1 s: sharing starts after 9 periods (0.9 s).
    let mut p = FAST.to_vec();
    p.push(("track_period_s", "0.1"));
    let mut s = sim(&header2(2), "ideal+ingens-share", &p);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 2 * MB2));
        declare(&mut s, pid, 0, 1024, 1, 0);
    }
    // pid 0's first huge page is hot (read all the time); the rest is cold.
    idle(&mut s, 3000, BASE + 17 * PAGE);
    let k = &s.pt;
    let st = stats(k);
    assert_eq!(leaf(k, 0, 0), 1, "the hot huge page is kept");
    assert_eq!(leaf(k, 1, 0), 1, "its twin has nothing to merge with");
    assert_eq!((leaf(k, 0, 1), leaf(k, 1, 1)), (0, 0), "cold huge pages are split");
    assert_eq!((st.huge_splits, st.pages_sharing), (2, 512));
    k.check_invariants().unwrap();
    // Plain KSM shares everything.
    let mut s = sim(&header2(2), "ideal+ksm", &FAST);
    for pid in 0..2 {
        s.progress(&populate_label(pid, BASE, 2 * MB2));
        declare(&mut s, pid, 0, 1024, 1, 0);
    }
    idle(&mut s, 3000, BASE + 17 * PAGE);
    assert_eq!(stats(&s.pt).pages_sharing, 1024);
}

#[test]
fn content_markers_round_trip_through_hst_and_change_nothing_without_sharing() {
    let dir = tempfile_dir();
    let path = dir.join("content.hst");
    let d = ContentDecl { pid: 0, start: BASE, len: 8 * PAGE, stream: 9, first: 3 };
    let mut h = common::header(MB2, false);
    h.workload = "content".into();
    {
        let mut w = hugescope_core::trace::hst::HstWriter::create(&path, &h).unwrap();
        w.access(Access::write(BASE));
        w.progress(&content_label(&d));
        w.access(Access::read(BASE + PAGE));
        w.finish().unwrap();
    }
    let r = hugescope_core::trace::hst::HstReader::open(path.to_str().unwrap()).unwrap();
    let m = r.markers();
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].index, parse_content_label(&m[0].label)), (1, Some(d)));
    // Without a sharing policy a declaration is ignored: not a progress
    // point (no marker for plans), no content words.
    let mut s = common::sim(&h, os(), "ideal", &[]);
    s.step(Access::write(BASE));
    s.progress(&content_label(&d));
    assert!(s.pt.sharing_stats().is_none());
    assert_eq!(s.pt.content_word(0, BASE + 4 * PAGE), ZERO);
    assert_eq!(s.pt.space(0).unwrap().tracking_bytes(), 0, "no content words");
    std::fs::remove_dir_all(dir).ok();
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("hugescope-sharing-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn bad_sharing_knobs_are_one_clear_error() {
    for (pol, key, val, want) in [
        ("ksm", "pages_to_scan", "0", "pages_to_scan=0"),
        ("ksm", "sleep_ms", "0", "sleep_ms=0"),
        ("hpshare", "cow_us", "-1", "cow_us=-1"),
        ("zeroscan", "min_zero", "0", "min_zero=0"),
        ("ingens-share", "track_period_s", "nan", "track_period_s=nan"),
        ("ksm", "pages_to_scann", "5", "pages_to_scann"),
    ] {
        let e = policy::make(pol, &[(key.to_string(), val.to_string())]).err().unwrap_or_else(|| panic!("{pol}:{key}={val} accepted"));
        let msg = e.to_string();
        assert!(msg.contains(want) && msg.contains(pol), "{pol}:{key}={val}: {msg}");
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }
}
