//! Declared-but-untouched memory costs virtual address space, not resident
//! memory (issue #16): every per-base-page array of a VMA is zero-filled at
//! creation, so the host kernel backs only the parts a run writes.
//!
//! A test binary with one test: it reads this process's resident set size,
//! which tests running beside it in other threads would disturb; its parts
//! run one after the other, each against its own starting size.
#![cfg(target_os = "linux")]

mod common;

use common::{header, machine, sim, BASE, MB2};
use hugescope_core::hw::Geometry;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::os::ksm::KsmConfig;
use hugescope_core::policy;
use hugescope_core::trace::Access;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// Resident set size of this process in bytes (VmRSS of /proc/self/status).
fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn a_64gib_declared_region_costs_no_per_page_resident_memory() {
    kernel_state();
    ingens_histories();
}

/// The kernel's per-page arrays, and the lazily allocated ones turned on.
fn kernel_state() {
    let cfg = machine();
    let geo = Geometry::new(&cfg).unwrap();
    let h = header(64 * GIB, false);
    // Physical memory sized explicitly (512 MiB, about 0.3 MiB of model
    // state): the physical model's own state is not what this test measures.
    let os = OsConfig {
        memory_bytes: Some(512 * MIB),
        ..Default::default()
    };
    let before = rss_bytes();
    let mut k = Kernel::new(
        geo,
        cfg.cost.clone(),
        &h,
        &os,
        policy::make("base", &[]).unwrap(),
    )
    .unwrap();
    // Touch 2MB at the start of each of the 64 GiBs: 128 MiB populated,
    // spread over the whole region.
    for g in 0..64 {
        k.populate(0, BASE + g * GIB, MB2);
    }
    let grown = rss_bytes().saturating_sub(before);
    let v = k.view().vma(0, 0).unwrap();
    assert_eq!(
        v.end() - v.start(),
        64 * GIB,
        "one VMA over the whole declaration"
    );
    assert_eq!(k.spaces()[0].touched_pages(), 64 * 512);
    // A frame-number array filled with a non-zero "no frame" is resident at
    // once: 4 bytes per 4KB page, 64 MiB for 64 GiB. Zero-filled arrays leave
    // the untouched pages unbacked: what is written (64 runs of 512 pages, a
    // few host pages each) and the per-2MB counters (64 KiB) stay far below
    // 8 MiB.
    assert!(
        grown < 8 * MIB,
        "resident memory grew by {} KiB for a 64 GiB declared region",
        grown / 1024
    );
    eprintln!(
        "resident growth for 64 GiB declared, 64 x 2MB populated: {} KiB",
        grown / 1024
    );

    // The lazily allocated per-page state, turned on: coverage bits (1 bit
    // per page, 2 MiB if written out) and content words (8 bytes per page,
    // 128 MiB if written out), then 2MB more populated per GiB (writes, so
    // content words are set).
    k.track_coverage(true);
    k.enable_sharing(KsmConfig {
        cow_us: 1.0,
        scan_page_us: 0.1,
    });
    for g in 0..64 {
        k.populate(0, BASE + g * GIB + MB2, MB2);
    }
    assert_eq!(k.spaces()[0].touched_pages(), 2 * 64 * 512);
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 8 * MIB,
        "resident memory grew by {} KiB with coverage and contents on",
        grown / 1024
    );
    eprintln!(
        "with coverage and contents on, 64 x 4MB populated: {} KiB",
        grown / 1024
    );
}

/// Ingens' per-page access histories (policy/ingens/tracking.rs), made for
/// the whole VMA at the first tracking pass.
fn ingens_histories() {
    let h = header(64 * GIB, false);
    let os = OsConfig {
        time: Some(TimeBase::AccessRate {
            accesses_per_second: 1000.0,
        }),
        memory_bytes: Some(512 * MIB),
        ..Default::default()
    };
    let before = rss_bytes();
    let mut s = sim(&h, os, "ingens", &[]);
    // 5 virtual seconds over one page of each GiB: two tracking passes
    // (every 2 s), each visiting the 64 present pages.
    for i in 0..5000 {
        s.step(Access::read(BASE + (i % 64) * GIB));
    }
    assert!(s.pt.policy_params()["tracking"]["passes"].as_u64().unwrap() >= 2);
    let grown = rss_bytes().saturating_sub(before);
    // Written out, a history per 4KB page (8 bytes) is 128 MiB.
    assert!(
        grown < 8 * MIB,
        "resident memory grew by {} KiB under Ingens' tracking",
        grown / 1024
    );
    eprintln!(
        "ingens, 64 GiB declared, 64 pages tracked: {} KiB",
        grown / 1024
    );
}
