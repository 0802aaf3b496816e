//! os/pagedaemon.rs, os/phys/contiguity.rs and os/phys/wired.rs by hand, on
//! the Alpha preset of Navarro et al. (8KB pages; 64KB, 512KB and 4MB
//! superpages, so a 4MB extent is 512 frames): the contiguity metric worked
//! out on a tiny memory, eviction and refaults with frame conservation
//! checked after every step, the contiguity-aware daemon against plain A-LRU
//! on a memory with wired pages, and pooled against scattered wired pages.

mod common;

use common::{Rng, BASE};
use hugescope_core::config::MachineConfig;
use hugescope_core::hw::Geometry;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::os::pagedaemon::{DaemonConfig, DaemonMode, Wake};
use hugescope_core::os::phys::{Mobility, PhysMem, WiredMode};
use hugescope_core::policy;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, Region, TraceHeader};

const PAGE: u64 = 8 << 10;
const MB4: u64 = 4 << 20;
/// Frames in a 4MB extent of 8KB pages.
const EXTENT: u64 = 512;

fn alpha(memory: u64, region: u64, daemon: DaemonConfig, policy_name: &str) -> Simulator<Kernel> {
    let cfg = MachineConfig::preset("alpha-21264").unwrap();
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region::new("data", BASE, region));
    let os = OsConfig {
        time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }),
        memory_bytes: Some(memory),
        daemon,
        ..Default::default()
    };
    let pol = policy::make(policy_name, &[]).unwrap();
    let k = Kernel::new(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), &h, &os, pol).unwrap();
    Simulator::new(cfg, 1, k).unwrap()
}

fn free_4mb_extents(k: &Kernel) -> u64 {
    k.phys().free_blocks_at_least(9)
}

#[test]
fn contiguity_metric_by_hand() {
    // 8MB of 8KB frames: 1024 frames, two 4MB extents.
    let mut p = PhysMem::new(8 << 20, PAGE, 9).unwrap();
    let all = p.contiguity(&[3, 6, 9]);
    assert_eq!(all.score, 1.0);
    assert_eq!(all.free_extent_share, vec![1.0, 1.0, 1.0]);
    // One frame in use at frame 0. Extent 1 stays whole: 512 frames score 3.
    // In extent 0, seven free 512KB regions: 7 x 64 frames score 2; in the
    // first 512KB, seven free 64KB regions: 7 x 8 frames score 1; frames 0-7
    // score 0. Sum 1536 + 896 + 56 = 2488 over 3 x 1024.
    p.alloc_at(0, 0, Mobility::Movable, 7).unwrap();
    let c = p.contiguity(&[3, 6, 9]);
    assert!((c.score - 2488.0 / 3072.0).abs() < 1e-12, "{}", c.score);
    assert_eq!(c.free_extent_share, vec![127.0 / 128.0, 15.0 / 16.0, 1.0 / 2.0]);
    // A level above the buddy's largest block (order 10 over max order 9):
    // one 8MB region, not free; with frame 0 back, it is. A level larger
    // than memory (order 11) is left out of S: all free still scores 1.
    assert_eq!(p.contiguity(&[10]).score, 0.0);
    p.free(0, 0);
    assert_eq!(p.contiguity(&[10]).score, 1.0);
    let big = p.contiguity(&[3, 11]);
    assert_eq!((big.score, big.free_extent_share), (1.0, vec![1.0, 0.0]));
    assert_eq!(p.contiguity(&[]).score, 0.0);
}

#[test]
fn daemon_off_builds_nothing_and_leaves_the_result_unchanged() {
    let os = OsConfig::default();
    assert!(os.daemon.is_default());
    let json = serde_json::to_value(&os).unwrap();
    assert!(json.get("pagedaemon").is_none());
    let s = alpha(8 << 20, 6 << 20, DaemonConfig::default(), "base");
    assert!(s.pt.page_daemon().is_none());
    assert!(s.pt.daemon_stats().is_none());
}

/// 8MB memory, a 7MB region of which 6MB is populated (768 pages, frames
/// 0..767 in order, all dirty), no watermark wake (free_min 0), target 90%.
fn evicted_setup() -> Simulator<Kernel> {
    let d = DaemonConfig { mode: DaemonMode::Alru, free_min: 0.0, free_target: 0.9, ..Default::default() };
    let mut s = alpha(8 << 20, 7 << 20, d, "base");
    s.pt.populate(0, BASE, 6 << 20);
    s.pt.check_invariants().unwrap();
    assert_eq!(s.pt.phys().free_frames(), 256);
    s.pt.run_pagedaemon(Wake::Pressure);
    s.pt.check_invariants().unwrap();
    s
}

#[test]
fn eviction_frees_to_the_target_in_lru_order_writing_dirty_pages_back() {
    let s = evicted_setup();
    let k = &s.pt;
    // Target: floor(0.9 x 1024) = 921 free frames, 665 more: the oldest 665
    // pages (nothing was referenced by a walk, so all go inactive in address
    // order), all dirty from populate.
    assert_eq!(k.phys().free_frames(), 921);
    let st = k.daemon_stats().unwrap();
    assert_eq!((st.wakeups, st.pages_evicted), (1, 665));
    assert_eq!(st.bytes_written_back, 665 * PAGE);
    let frames = common::vma_frames(k, 0, 0, 0..666);
    assert!(frames[..665].iter().all(|&p| p == u32::MAX));
    assert_eq!(frames[665], 665);
    // Evicted pages still count as used by the program (base RSS), not held.
    assert_eq!(k.spaces()[0].frames_held(), 768 - 665);
    assert_eq!(k.spaces()[0].touched_pages(), 768);
    // The inactive list is refilled 64 pages at a time (1/32 of memory, at
    // least 64): 11 refills moved 704 pages, 665 of them evicted.
    let (active, inactive, cached) = k.page_daemon().unwrap().list_lengths();
    assert_eq!((active, inactive, cached), (768 - 704, 704 - 665, 665));
}

#[test]
fn a_cached_page_referenced_before_reuse_is_a_soft_refault_else_hard() {
    let mut s = evicted_setup();
    // Page 0's frame 0 is free and still holds its contents: soft.
    s.step(Access::read(BASE));
    s.pt.check_invariants().unwrap();
    assert_eq!(common::vma_frame(&s.pt, 0, 0, 0), 0);
    let st = s.pt.daemon_stats().unwrap().clone();
    assert_eq!((st.refaults_soft, st.refaults_hard), (1, 0));
    // A first touch of an unpopulated page takes the lowest free frame,
    // frame 1, which held page 1: page 1 now needs the disk.
    s.step(Access::read(BASE + (6 << 20)));
    assert_eq!(common::vma_frame(&s.pt, 0, 0, 768), 1);
    s.step(Access::read(BASE + PAGE));
    s.pt.check_invariants().unwrap();
    let st = s.pt.daemon_stats().unwrap();
    assert_eq!((st.refaults_soft, st.refaults_hard), (1, 1));
    assert_ne!(common::vma_frame(&s.pt, 0, 0, 1), 1);
    // A page the program freed after its eviction faults as a new page.
    s.pt.free_range(0, BASE + 2 * PAGE, PAGE);
    s.step(Access::read(BASE + 2 * PAGE));
    let st = s.pt.daemon_stats().unwrap();
    assert_eq!((st.refaults_soft, st.refaults_hard), (1, 1));
    s.pt.check_invariants().unwrap();
}

#[test]
fn random_faults_under_pressure_conserve_frames_after_every_step() {
    // 4MB of memory under a 6MB region with Linux's THP (superpages to
    // demote) and watermarks that wake the daemon often; both modes.
    for mode in [DaemonMode::Alru, DaemonMode::Contiguity] {
        let d = DaemonConfig { mode, free_min: 0.1, free_target: 0.2, wired: WiredMode::Scattered, wired_rate: 0.05, ..Default::default() };
        let mut s = alpha(4 << 20, 6 << 20, d, "linux");
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for i in 0..3000u64 {
            let addr = BASE + (rng.next() % (6 << 20)) / 8 * 8;
            let a = if i % 3 == 0 { Access::write(addr) } else { Access::read(addr) };
            s.step(a);
            s.pt.check_invariants().unwrap_or_else(|e| panic!("{mode:?} step {i}: {e}"));
            if i % 500 == 0 {
                s.pt.free_range(0, BASE + (rng.next() % 12) * (512 << 10), 512 << 10);
                s.pt.check_invariants().unwrap_or_else(|e| panic!("{mode:?} free at {i}: {e}"));
            }
        }
        let st = s.pt.daemon_stats().unwrap();
        assert!(st.wakeups > 0 && st.pages_evicted > 0, "{mode:?}: {st:?}");
        assert!(st.refaults_soft + st.refaults_hard > 0, "{mode:?}: {st:?}");
        assert!(st.wired_frames > 0);
        assert_eq!(s.pt.stats().out_of_memory, 0, "{mode:?}");
    }
}

/// 16MB (four 4MB extents) with a wired page at the start of extents 0, 1
/// and 2, then 1800 pages populated (frames lowest first: extent 3 holds
/// 267 of them), and one pressure wake to 25% free.
fn wired_layout(mode: DaemonMode) -> Simulator<Kernel> {
    let d = DaemonConfig { mode, free_min: 0.05, free_target: 0.25, ..Default::default() };
    let mut s = alpha(16 << 20, 15 << 20, d, "base");
    for e in 0..3 {
        assert!(s.pt.wire_frame(e * EXTENT));
    }
    s.pt.populate(0, BASE, 1800 * PAGE);
    s.pt.check_invariants().unwrap();
    assert_eq!(s.pt.phys().free_frames(), 2048 - 3 - 1800);
    assert_eq!(free_4mb_extents(&s.pt), 0);
    s.pt.run_pagedaemon(Wake::Pressure);
    s.pt.check_invariants().unwrap();
    s
}

#[test]
fn the_contiguity_daemon_frees_whole_extents_where_alru_does_not() {
    let alru = wired_layout(DaemonMode::Alru);
    let cont = wired_layout(DaemonMode::Contiguity);
    // Both reach the target: floor(0.25 x 2048) = 512 free frames, 267
    // evictions. A-LRU takes the oldest pages, in extent 0 beside its wired
    // page: no free 4MB extent. The contiguity daemon takes the 267 pages of
    // extent 3, the one extent without a wired frame: one free 4MB extent.
    for s in [&alru, &cont] {
        assert_eq!(s.pt.phys().free_frames(), 512);
        assert_eq!(s.pt.daemon_stats().unwrap().pages_evicted, 267);
    }
    assert_eq!(free_4mb_extents(&alru.pt), 0);
    assert_eq!(free_4mb_extents(&cont.pt), 1);
    let (a, c) = (alru.pt.contiguity(), cont.pt.contiguity());
    assert_eq!(c.free_extent_share[2], 0.25);
    assert_eq!(a.free_extent_share[2], 0.0);
    assert!(c.score > a.score, "{} vs {}", c.score, a.score);
    assert_eq!(cont.pt.daemon_stats().unwrap().wired_frames, 3);
}

#[test]
fn a_failed_huge_fault_wakes_the_contiguity_daemon_with_its_goal() {
    // The same layout, then a fault asking for a 4MB page (linux policy:
    // THP at fault) finds no free 4MB extent: the daemon wakes with that
    // goal and evicts extent 3's pages; the retry of a later fault gets it.
    let d = DaemonConfig { mode: DaemonMode::Contiguity, free_min: 0.0, free_target: 0.0, ..Default::default() };
    let mut s = alpha(16 << 20, 16 << 20, d, "base");
    for e in 0..3 {
        assert!(s.pt.wire_frame(e * EXTENT));
    }
    s.pt.populate(0, BASE, 1800 * PAGE);
    // A kernel with the THP policy on the same layout is not reachable from
    // here, so the shortage is reported as the fault path would.
    s.pt.run_pagedaemon(Wake::Contiguity(9));
    let st = s.pt.daemon_stats().unwrap();
    assert_eq!(st.contiguity_wakeups, 1);
    // No recorded failure: the pass aims at one free extent of the top size.
    assert_eq!(free_4mb_extents(&s.pt), 1);
    assert_eq!(st.pages_evicted, 267);
    s.pt.check_invariants().unwrap();
}

fn wired_run(mode: WiredMode) -> Simulator<Kernel> {
    // 32MB (eight 4MB extents); 16MB populated, 5 wired frames per 100
    // faults up to 2% of memory (81 frames).
    let d = DaemonConfig { wired: mode, wired_rate: 0.05, wired_share: 0.02, ..Default::default() };
    let mut s = alpha(32 << 20, 16 << 20, d, "base");
    s.pt.populate(0, BASE, 16 << 20);
    s.pt.check_invariants().unwrap();
    s
}

#[test]
fn pooled_wired_pages_leave_more_free_4mb_extents_than_scattered() {
    let pooled = wired_run(WiredMode::Pooled);
    let scattered = wired_run(WiredMode::Scattered);
    for s in [&pooled, &scattered] {
        assert_eq!(s.pt.daemon_stats().unwrap().wired_frames, 81);
    }
    // Pooled: one 512-frame pool in one extent, the process in four: three
    // extents stay free. Scattered: 81 random frames hit every extent.
    assert_eq!(free_4mb_extents(&pooled.pt), 3);
    assert!(free_4mb_extents(&scattered.pt) < 3, "{}", free_4mb_extents(&scattered.pt));
    assert!(pooled.pt.contiguity().score > scattered.pt.contiguity().score);
    const { assert!(MB4 == EXTENT * PAGE) };
}
