//! The Ingens policy (policy/ingens/) against hand-worked cases (issue #11):
//! promotion by Promote-kth at 90% utilization, not at fault; the frequency
//! EMA through the kernel's accessed bits; demotion freeing exactly the
//! freed pages; proactive compaction never moving a hot page nor more than
//! its cap; the fairness order of the high queue.

mod common;

use common::{header, sim, BASE, MB2};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::costs::OsCosts;
use hugescope_core::os::kernel::{Fragmentation, Kernel, OsConfig};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{free_label, populate_label, Access, AccessSink, Region, TraceHeader};

const PAGE: u64 = 4096;

/// 1000 accesses per virtual second, zero OS costs (daemon timing exact).
fn os() -> OsConfig {
    OsConfig {
        time: Some(TimeBase::AccessRate {
            accesses_per_second: 1000.0,
        }),
        memory_bytes: Some(64 << 20),
        costs: OsCosts::zero(),
        ..Default::default()
    }
}

fn leaf_size(k: &Kernel, pid: u16, start: u64) -> usize {
    k.region_state(pid, start).unwrap().leaf_size
}

fn stat(k: &Kernel, key: &str) -> f64 {
    k.policy_params()["stats"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no stat {key}"))
}

fn touch(s: &mut Simulator<Kernel>, pid: u16, addr: u64) {
    s.step(Access::read(addr).in_pid(pid));
}

#[test]
fn a_region_crossing_90_percent_is_promoted_by_the_daemon_not_at_fault() {
    let mut s = sim(&header(2 * MB2, false), os(), "ingens", &[]);
    // 460 of 512 pages (89.8%): below the threshold of 461, never promoted,
    // not by the fault path and not by Promote-kth's periodic scans.
    for i in 0..460 {
        touch(&mut s, 0, BASE + i * PAGE);
    }
    for _ in 0..25_000 {
        touch(&mut s, 0, BASE); // 25 s: two scan wakes of Promote-kth
    }
    assert!(s.pt.now() > 20.0);
    assert_eq!(leaf_size(&s.pt, 0, BASE), 0);
    assert_eq!(
        stat(&s.pt, "promotions_high") + stat(&s.pt, "promotions_scan"),
        0.0
    );
    assert!(
        stat(&s.pt, "regions_scanned") >= 1.0,
        "the periodic scan looked at the region"
    );
    // The 461st page: its fault maps a base page and queues the region; the
    // daemon promotes it once woken, at the end of that same access.
    touch(&mut s, 0, BASE + 460 * PAGE);
    let k = &s.pt;
    assert_eq!(k.stats().faults_base, 461);
    assert!(
        k.stats().faults_huge.iter().all(|(_, n)| *n == 0),
        "no huge page at fault"
    );
    assert_eq!(leaf_size(k, 0, BASE), 1, "promoted by Promote-kth");
    assert_eq!(stat(k, "promotions_high"), 1.0);
    let plan = k.executed_plan();
    assert_eq!(plan.len(), 1);
    assert!(plan[0].note.as_deref().unwrap().starts_with("ingens at"));
    // Not every page is mapped, so not in place: the 461 present pages are
    // copied into a new block and the 51 others zero-filled (§5.1).
    assert_eq!(stat(k, "promotions_in_place"), 0.0);
    assert_eq!((k.stats().pages_copied, k.stats().pages_zeroed), (461, 51));
    k.check_invariants().unwrap();
}

#[test]
fn the_frequency_ema_follows_the_hand_computed_vector_through_the_accessed_bits() {
    // One page touched all the time. Every 2 s Scan-kth reads its accessed
    // bit (set: the clear at the previous pass shot the TLB entry down, so
    // the next access walked) and updates F: 0.4, 1.04, 1.824, 2.694, 3.617,
    // 4.570, 5.542, 6.525: frequent (>= 6) from the 8th pass, not before.
    for (passes, frequent) in [(7u64, 0.0), (8, 1.0)] {
        let mut s = sim(&header(2 * MB2, false), os(), "ingens", &[]);
        let n = passes * 2000 + 500;
        for _ in 0..n {
            touch(&mut s, 0, BASE);
        }
        let t = &s.pt.policy_params()["tracking"];
        assert_eq!(t["passes"].as_u64(), Some(passes));
        assert_eq!(
            t["frequent_leaves"].as_f64(),
            Some(frequent),
            "after {passes} passes"
        );
        // Each pass cleared the bit (infrequent: always; frequent: 20% of
        // the time), and each clear cost a walk.
        let walks = s.counters().walks;
        assert!(
            walks >= passes.min(7) + 1,
            "walks {walks}: a walk after each clear"
        );
    }
    // Stock x86 Linux does not flush on clear: the translation stays cached,
    // the bit is never set again, the page looks idle after one period.
    let mut s = sim(
        &header(2 * MB2, false),
        os(),
        "ingens",
        &[("clear_flushes", "false")],
    );
    for _ in 0..16_500 {
        touch(&mut s, 0, BASE);
    }
    assert_eq!(s.counters().walks, 1);
    assert_eq!(
        s.pt.policy_params()["tracking"]["frequent_leaves"].as_f64(),
        Some(0.0)
    );
}

/// A huge region at 512 pages, promoted by the daemon after population.
fn promoted_region() -> Simulator<Kernel> {
    let mut s = sim(&header(2 * MB2, false), os(), "ingens", &[]);
    s.progress(&populate_label(0, BASE, MB2));
    touch(&mut s, 0, BASE);
    assert_eq!(leaf_size(&s.pt, 0, BASE), 1);
    assert_eq!(s.pt.spaces()[0].frames_held(), 512);
    s
}

#[test]
fn pages_freed_inside_a_kept_huge_page_count_again_when_touched_again() {
    // The promoted region has all 512 pages touched, and an access inside
    // the huge page remembers it as full (os/full_regions.rs). Freeing 40
    // pages keeps the huge page (472 >= 461) but makes it not full: touching
    // them again must count them again, so the region is full once more.
    let mut s = promoted_region();
    touch(&mut s, 0, BASE + 5 * PAGE);
    s.progress(&free_label(0, BASE + 100 * PAGE, 40 * PAGE));
    assert_eq!(leaf_size(&s.pt, 0, BASE), 1);
    assert_eq!(s.pt.spaces()[0].touched_pages(), 472);
    s.pt.check_invariants().unwrap();
    for i in 100..140 {
        touch(&mut s, 0, BASE + i * PAGE);
        assert_eq!(s.pt.spaces()[0].touched_pages(), 472 + (i - 99), "page {i}");
    }
    assert_eq!(s.pt.view().region(0, BASE).unwrap().touched, 512);
    // Full again: a second free of the same kind is seen as well.
    touch(&mut s, 0, BASE);
    s.progress(&free_label(0, BASE + 200 * PAGE, 10 * PAGE));
    touch(&mut s, 0, BASE + 200 * PAGE);
    assert_eq!(s.pt.spaces()[0].touched_pages(), 503);
    s.pt.check_invariants().unwrap();
}

#[test]
fn demotion_frees_exactly_the_freed_base_pages() {
    // 40 pages freed: utilization 472 >= 461, the huge page stays whole and
    // keeps its frames (bloat: 512 resident for 472 used).
    let mut s = promoted_region();
    s.progress(&free_label(0, BASE + 100 * PAGE, 40 * PAGE));
    let k = &s.pt;
    assert_eq!(leaf_size(k, 0, BASE), 1);
    assert_eq!(k.spaces()[0].frames_held(), 512);
    assert_eq!(k.spaces()[0].touched_pages(), 472);
    assert_eq!(stat(k, "demotions"), 0.0);
    // 60 more (utilization 412 < 461): split, and exactly the 100 freed
    // pages go back to the allocator; the 412 others keep their frames.
    let free_before = s.pt.phys().free_frames();
    let frames_before: Vec<u32> = common::vma_frames(&s.pt, 0, 0, 0..512);
    s.progress(&free_label(0, BASE + 300 * PAGE, 60 * PAGE));
    let k = &s.pt;
    assert_eq!(leaf_size(k, 0, BASE), 0);
    assert_eq!(stat(k, "demotions"), 1.0);
    assert_eq!(stat(k, "reclaimed_pages"), 100.0);
    assert_eq!(k.spaces()[0].frames_held(), 412);
    assert_eq!(k.phys().free_frames(), free_before + 100);
    let frames = common::vma_frames(k, 0, 0, 0..512);
    for i in 0..512usize {
        let freed = (100..140).contains(&i) || (300..360).contains(&i);
        assert_eq!(frames[i] == u32::MAX, freed, "page {i}");
        if !freed {
            assert_eq!(frames[i], frames_before[i], "page {i} kept its frame");
        }
    }
    k.check_invariants().unwrap();
}

/// Memory fragmented to FMFI 0.875 by Ingens' method, and 300 pages of one
/// region touched over and over for `seconds` (frequent after 16 s).
fn hot_pages_on_fragmented_memory(
    params: &[(&str, &str)],
    seconds: u64,
) -> (Simulator<Kernel>, Vec<u32>) {
    let o = OsConfig {
        fragmentation: Some(Fragmentation::Ingens { fmfi: 0.875, pinned: false }),
        ..os()
    };
    let mut s = sim(&header(2 * MB2, false), o, "ingens", params);
    for i in 0..300 {
        touch(&mut s, 0, BASE + i * PAGE);
    }
    let frames = common::vma_frames(&s.pt, 0, 0, 0..300);
    let mut i = 0;
    while s.pt.now() < seconds as f64 {
        touch(&mut s, 0, BASE + (i % 300) * PAGE);
        i += 1;
    }
    (s, frames)
}

#[test]
fn proactive_compaction_never_moves_a_hot_page_nor_more_than_its_cap() {
    // The first round at 20 s, after the 300 pages became frequent (16 s);
    // a cap of 2 MB = 512 base pages per round (about two of the half-used blocks the fragmenter leaves).
    let params = [("compact_period_s", "20"), ("compact_mb", "2")];
    let (s, frames) = hot_pages_on_fragmented_memory(&params, 21);
    let k = &s.pt;
    assert!(k.fragmentation_report().unwrap().fmfi > 0.8);
    assert_eq!(stat(k, "compaction_rounds"), 1.0);
    let moved = stat(k, "compaction_migrated_pages");
    assert!(moved > 0.0 && moved <= 512.0, "moved {moved}");
    assert_eq!(
        k.policy_params()["tracking"]["frequent_leaves"].as_f64(),
        Some(300.0)
    );
    assert_eq!(
        common::vma_frames(&k, 0, 0, 0..300),
        frames,
        "a hot page moved"
    );
    k.check_invariants().unwrap();
}

/// Four 2MB blocks of memory, all mapped by one process with base pages,
/// then three pages in four freed everywhere: each block holds 128 used
/// frames and FMFI is 1 (no free 2MB block).
fn sparse_blocks() -> Simulator<Kernel> {
    let o = OsConfig {
        memory_bytes: Some(4 * MB2),
        ..os()
    };
    let mut s = sim(&header(4 * MB2, false), o, "base", &[]);
    s.progress(&populate_label(0, BASE, 4 * MB2));
    for i in 0..2048u64 {
        if i % 4 != 0 {
            s.progress(&free_label(0, BASE + i * PAGE, PAGE));
        }
    }
    assert_eq!(s.pt.phys().fmfi(9), 1.0);
    s
}

#[test]
fn the_compaction_mechanism_skips_every_block_holding_a_vetoed_page() {
    // Unvetoed: the block with the fewest used frames, ties to the lowest
    // address (block 0), is emptied: its 128 pages move, one free 2MB block
    // out of 1536 free frames gives FMFI 1024/1536 <= 0.8, and it stops.
    let mut s = sparse_blocks();
    let pages = s.pt.view().vma(0, 0).unwrap().pages() as usize;
    let frames: Vec<u32> = common::vma_frames(&s.pt, 0, 0, 0..pages);
    let r = s.pt.compact_proactive(9, 25_600, 0.8, &mut |_, _, _| true);
    assert!(r.success);
    assert_eq!(r.migrated_pages, 128);
    let moved: Vec<usize> = (0..2048)
        .filter(|&i| common::vma_frame(&s.pt, 0, 0, i) != frames[i])
        .collect();
    assert_eq!(moved.len(), 128);
    assert!(
        moved.iter().all(|&i| frames[i] < 512),
        "block 0's pages moved"
    );
    // One page of block 0 hot: block 0 is skipped whole, block 1 emptied.
    let mut s = sparse_blocks();
    let hot = BASE + (moved[5] as u64) * PAGE;
    let r =
        s.pt.compact_proactive(9, 25_600, 0.8, &mut |pid, va, _| !(pid == 0 && va == hot));
    assert_eq!(r.migrated_pages, 128);
    let now = common::vma_frames(&s.pt, 0, 0, 0..2048);
    assert!((0..2048)
        .filter(|&i| now[i] != frames[i])
        .all(|i| (512..1024).contains(&frames[i])));
    assert!(
        moved.iter().all(|&i| now[i] == frames[i]),
        "no page of the vetoed block moved"
    );
    // A cap below one block's 128 pages: nothing is started.
    let mut s = sparse_blocks();
    let r = s.pt.compact_proactive(9, 127, 0.8, &mut |_, _, _| true);
    assert_eq!((r.success, r.migrated_pages), (false, 0));
    s.pt.check_invariants().unwrap();
}

#[test]
fn the_high_queue_is_served_in_fairness_order() {
    // pid 0: three regions, pid 1: one; the budget holds three huge pages.
    let mut h = TraceHeader::new("two processes");
    h.processes = 2;
    h.regions.push(Region::new("a", BASE, 3 * MB2));
    h.regions.push(Region {
        pid: 1,
        ..Region::new("b", BASE, MB2)
    });
    let o = OsConfig {
        budget: Some(0.75),
        ..os()
    };
    let mut s = sim(&h, o, "ingens", &[]);
    s.progress(&populate_label(0, BASE, 2 * MB2));
    touch(&mut s, 0, BASE);
    assert_eq!(s.pt.spaces()[0].total_huge_bytes(), 2 * MB2);
    // pid 0's third region queues before pid 1's, but pid 1 holds no huge
    // page (metric 10000 / (2MB x 0.25)) and pid 0 two (10000 / (4MB x
    // 0.25)): pid 1 is served first and takes the last huge page.
    s.progress(&populate_label(0, BASE + 2 * MB2, MB2));
    s.progress(&populate_label(1, BASE, MB2));
    touch(&mut s, 0, BASE);
    let k = &s.pt;
    assert_eq!(k.spaces()[1].total_huge_bytes(), MB2);
    assert_eq!(k.spaces()[0].total_huge_bytes(), 2 * MB2);
    assert_eq!(
        leaf_size(k, 0, BASE + 2 * MB2),
        0,
        "pid 0's request waits (budget)"
    );
    k.check_invariants().unwrap();
}

#[test]
fn promote_kth_is_busy_for_the_time_a_promotion_costs() {
    // Default costs: each in-place collapse of a fully populated region costs
    // Promote-kth 20 us of daemon time, so with two requests queued the
    // second is served by a wake 20 us after the first, at the next access
    // (1 ms apart at 1000 accesses/s), not in the same instant.
    let o = OsConfig { costs: OsCosts::default(), ..os() };
    let mut s = sim(&header(2 * MB2, false), o, "ingens", &[]);
    s.progress(&populate_label(0, BASE, 2 * MB2));
    touch(&mut s, 0, BASE);
    assert_eq!(s.pt.spaces()[0].total_huge_bytes(), MB2);
    assert_eq!(stat(&s.pt, "promotions_in_place"), 1.0);
    touch(&mut s, 0, BASE);
    assert_eq!(s.pt.spaces()[0].total_huge_bytes(), 2 * MB2);
    assert_eq!(stat(&s.pt, "promotions_high"), 2.0);
    assert!((stat(&s.pt, "promote_seconds") - 40e-6).abs() < 1e-12);
}

#[test]
fn a_lower_threshold_promotes_every_region_above_it_and_bloats_by_their_holes() {
    // Ingens Table 10's trend on a hand-built utilization pattern: four 2MB
    // regions populated whole, then freed down to 487, 410, 308 and 205 of
    // 512 pages (95%, 80%, 60%, 40%). Promote-kth promotes a region when at
    // least ceil(threshold x 512) pages are present: 461 at 90%, 359 at 70%,
    // 256 at 50%; a promoted region's holes count as resident again.
    let keep = [487u64, 410, 308, 205];
    let rss = |threshold: &str| {
        let mut s = sim(&header(4 * MB2, false), os(), "ingens", &[("threshold", threshold)]);
        s.progress(&populate_label(0, BASE, 4 * MB2));
        for (i, &k) in keep.iter().enumerate() {
            let start = BASE + i as u64 * MB2;
            s.progress(&free_label(0, start + k * PAGE, (512 - k) * PAGE));
        }
        for _ in 0..25_000 {
            touch(&mut s, 0, BASE); // 25 s: two of Promote-kth's 10 s wakes
        }
        let huge: Vec<usize> = (0..4).map(|i| leaf_size(&s.pt, 0, BASE + i * MB2)).collect();
        (s.pt.spaces()[0].frames_held(), huge)
    };
    let present: u64 = keep.iter().sum(); // 1410
    assert_eq!(rss("0.9"), (present + 25, vec![1, 0, 0, 0]));
    assert_eq!(rss("0.7"), (present + 25 + 102, vec![1, 1, 0, 0]));
    assert_eq!(rss("0.5"), (present + 25 + 102 + 204, vec![1, 1, 1, 0]));
}
