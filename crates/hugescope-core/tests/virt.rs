//! Virtualization (issue #13): the nested walk over a hypervisor of guest
//! kernels and a host kernel. Every count is worked out by hand below.

mod common;

use common::{header, BASE, MB2};
use hugescope_core::config::{CacheConfig, MachineConfig};
use hugescope_core::hw::leaf::LEAF_A;
use hugescope_core::hw::{NestedWalker, NoSegment, Outcome, PageTable, Space};
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::run::PolicySpec;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, TraceHeader};
use hugescope_core::virt::run::{hypervisor_for, nested_walker};
use hugescope_core::config::virt::VirtMachineConfig;
use hugescope_core::virt::Hypervisor;
use std::collections::BTreeMap;

const KB4: u64 = 4 << 10;

type VSim = Simulator<Hypervisor, NestedWalker, NoSegment>;

/// haswell-pcc with the nested caches off (`pwc_on` false) or at their
/// defaults.
fn machine(pwc_on: bool) -> MachineConfig {
    let mut m = MachineConfig::preset("haswell-pcc").unwrap();
    if !pwc_on {
        m.virt = Some(VirtMachineConfig {
            guest_pwc: Some(BTreeMap::new()),
            host_pwc: Some(BTreeMap::new()),
            nested_tlb: Some(CacheConfig { entries: 0, ways: 0 }),
            vm_exit_us: None,
            ..Default::default()
        });
    }
    m
}

fn vsim(m: &MachineConfig, headers: &[TraceHeader], guest: &str, host: &str) -> VSim {
    let hv = hypervisor_for(m, headers, &OsConfig::default(), &PolicySpec::parse(guest).unwrap(), &PolicySpec::parse(host).unwrap()).unwrap();
    Simulator::with_walker_and_unit(m.clone(), 1, hv, nested_walker(m).unwrap()).unwrap()
}

/// (walk references, walks) of one more access.
fn step(s: &mut VSim, a: Access) -> (u64, u64) {
    let before = s.counters();
    s.step(a);
    let c = s.counters();
    (c.walk_refs - before.walk_refs, c.walks - before.walks)
}

/// Guest policy `linux` (THP always) maps 2MB at fault time in a 2MB-aligned
/// region; `base` never does. The same in the host for the VM's memory and
/// its page-table area (both 2MB multiples at 2MB-aligned GPAs).
#[test]
fn cold_nested_walks_make_24_19_19_15_references() {
    let m = machine(false);
    let h = header(8 * MB2, false);
    for (guest, host, refs) in [("base", "base", 24), ("linux", "base", 19), ("base", "linux", 19), ("linux", "linux", 15)] {
        let mut s = vsim(&m, &[h.clone()], guest, host);
        assert_eq!(step(&mut s, Access::read(BASE + 0x1234)), (refs, 1), "guest {guest} host {host}");
        // Without caches, a walk to another 4KB page costs the same again
        // when it misses: with 4KB entries (either dimension 4KB) it does.
        let again = step(&mut s, Access::read(BASE + 2 * KB4 + 0x10));
        let tlb_4k = guest == "base" || host == "base";
        assert_eq!(again, if tlb_4k { (refs, 1) } else { (0, 0) }, "guest {guest} host {host}");
        // The walks are counted by (guest, host) pair.
        let pairs = s.pt.pairs();
        assert_eq!(pairs.len(), 1);
        assert_eq!(pairs[0].walk_refs, pairs[0].walks * refs);
        let (g, hs) = (if guest == "base" { "4k" } else { "2m" }, if host == "base" { "4k" } else { "2m" });
        assert_eq!((pairs[0].guest.as_str(), pairs[0].host.as_str()), (g, hs));
    }
}

/// A 5-level geometry: (5+1)(5+1)-1 = 35 cold references for 4KB/4KB.
#[test]
fn five_level_nested_walk() {
    let mut m = machine(false);
    m.walker.level_shifts = vec![48, 39, 30, 21, 12];
    m.walker.va_bits = 57;
    let mut s = vsim(&m, &[header(8 * MB2, false)], "base", "base");
    assert_eq!(step(&mut s, Access::read(BASE)), (35, 1));
}

/// A guest 2MB page over 4KB host pages fills 4KB TLB entries: the TLB
/// entry covers min(guest, host) (Bhargava et al. §2).
#[test]
fn guest_huge_over_host_base_fills_base_entries() {
    let m = machine(true);
    let mut s = vsim(&m, &[header(8 * MB2, false)], "linux", "base");
    s.step(Access::read(BASE));
    let c = s.counters();
    assert_eq!(c.by_page_size[0].walks, 1, "the walk filled a 4KB entry");
    assert!(s.mmus[0].holds(Space::new(1, 0), BASE, BASE + 1));
    assert!(!s.mmus[0].holds(Space::new(1, 0), BASE + KB4, BASE + KB4 + 1));
    // The next 4KB page misses the TLB (it walks: the guest's 2MB leaf is
    // in the guest PWC's reach, the host's 4KB is not cached).
    assert_eq!(step(&mut s, Access::read(BASE + KB4)).1, 1);
}

/// The EPT accessed bits of the guest page-table pages a walk read are set;
/// a page the guest PWC let the walk skip keeps its bit clear.
#[test]
fn guest_table_reads_set_ept_accessed_bits_of_the_levels_read() {
    let m = machine(true);
    let mut s = vsim(&m, &[header(8 * MB2, false)], "base", "base");
    let x = BASE;
    s.step(Access::read(x));
    let gpas: Vec<u64> = (0..4).map(|l| s.pt.vms[0].pt.place(0, l, x)).collect();
    let host_a = |s: &mut VSim, gpa: u64| s.pt.host.leaf(&Access::read(gpa)).was(LEAF_A);
    for &g in &gpas {
        assert!(host_a(&mut s, g), "table page at GPA {g:#x} read by a cold walk");
    }
    // Clear the host's A bits of the page-table area (dropping the host's
    // shootdowns so the guest's walk caches survive), then walk to another
    // 2MB region of the same 1GB: the PDPTE cache hits, so only the PD
    // page (level 2) and the new PT page (level 3) are read.
    let area = s.pt.vms[0].pt.base;
    let len = s.pt.vms[0].pt.bytes();
    s.pt.host.clear_accessed(0, area, len, true);
    let mut dropped = Vec::new();
    s.pt.host.take_shootdowns(&mut dropped);
    assert!(!dropped.is_empty());
    let y = BASE + 2 * MB2;
    let before = s.counters().walk_refs;
    s.step(Access::read(y));
    // Guest PD + PT entries (2) + their pages' host walks + the data's: the
    // host walks hit the host PWC's PDE level (one reference each) or the
    // nested TLB; at least the two guest references were made.
    assert!(s.counters().walk_refs - before >= 2);
    let pt_y = s.pt.vms[0].pt.place(0, 3, y);
    assert!(!host_a(&mut s, gpas[0]) && !host_a(&mut s, gpas[1]), "levels 0 and 1 were skipped");
    assert!(host_a(&mut s, gpas[2]) && host_a(&mut s, pt_y), "levels 2 and 3 were read");
}

/// Two VMs with data at the same guest-virtual address: each VM's
/// translation is tagged with its VM id, so the second never hits the first's.
#[test]
fn vm_tags_isolate_the_same_gva_in_two_vms() {
    let m = machine(true);
    let h = header(8 * MB2, false);
    let mut s = vsim(&m, &[h.clone(), h], "base", "base");
    assert_eq!(s.pt.vms.len(), 2);
    assert_eq!((s.pt.vms[0].id, s.pt.vms[1].id), (1, 2));
    s.step(Access::read(BASE)); // pid 0: VM 1
    assert_eq!(step(&mut s, Access { pid: 1, ..Access::read(BASE) }).1, 1, "VM 2 walks");
    assert_eq!(step(&mut s, Access::read(BASE)).1, 0, "VM 1 still hits");
    assert!(s.mmus[0].holds(Space::new(1, 0), BASE, BASE + 1));
    assert!(s.mmus[0].holds(Space::new(2, 1), BASE, BASE + 1));
    // Each VM faulted its own guest frame and its own host memory.
    assert_eq!(s.pt.vms[0].exits.total, s.pt.vms[1].exits.total);
}

/// A host remap that does not keep the mapping zaps the EPT entries of its
/// range: the guest's next touch of each page is an EPT-violation exit. A
/// remap made under `with_eager_refill` keeps them: no exits.
#[test]
fn host_remap_zaps_the_ept_and_eager_refill_does_not() {
    for eager in [false, true] {
        let m = machine(true);
        let mut s = vsim(&m, &[header(4 * MB2, false)], "base", "base");
        // Touch the 512 pages of the first 2MB: first-touch exits, 512 data
        // pages (the page-table pages' exits are counted apart).
        for i in 0..512 {
            s.step(Access::read(BASE + i * KB4));
        }
        let vm = &s.pt.vms[0];
        let first = vm.exits.ept_violation_first_touch - vm.exits.ept_violation_page_table;
        assert_eq!(first, 512);
        assert_eq!(vm.exits.ept_violation_after_zap, 0);
        // The guest's memory starts at GPA 0 and its base pages were handed
        // out in order: find the host region the data sits in and collapse it.
        let gpa = s.pt.vms[0].guest.leaf(&Access::read(BASE)).pa & !(MB2 - 1);
        let collapse = |k: &mut hugescope_core::os::kernel::Kernel| k.collapse_in_place(0, gpa, 1).or_else(|_| k.promote(0, gpa, 1, hugescope_core::os::kernel::AllocMode::FreeOnly));
        let r = if eager { s.pt.host.with_eager_refill(collapse) } else { collapse(&mut s.pt.host) };
        assert!(r.is_ok(), "the host collapses the VM's 2MB region");
        assert!(s.pt.has_shootdowns());
        s.apply_shootdowns();
        let flushes = s.pt.vms[0].vm_flushes;
        assert!(flushes >= 1, "a host change flushes the VM's TLB entries");
        // Touch the same 512 pages again: all walks (the VM flush emptied
        // the TLB), and exits only when the collapse zapped the EPT.
        for i in 0..512 {
            s.step(Access::read(BASE + i * KB4));
        }
        let after = s.pt.vms[0].exits.ept_violation_after_zap;
        if eager {
            assert_eq!(after, 0, "eager refill: no exits");
        } else {
            // One exit refills the whole 2MB host leaf (KVM maps at the host
            // leaf's size), so the first touch exits and the rest do not.
            assert_eq!(after, 1, "lazy refill: the first touch exits");
            assert_eq!(s.pt.vms[0].ept.zapped_pages, 512);
        }
    }
}

/// After a host split (a huge host page to base pages) every 4KB page of the
/// zapped range exits once: Linux's lazy refill (FHPM §3.2, Table 6).
#[test]
fn host_split_costs_one_exit_per_base_page() {
    let m = machine(true);
    let mut s = vsim(&m, &[header(4 * MB2, false)], "base", "linux");
    for i in 0..512 {
        s.step(Access::read(BASE + i * KB4));
    }
    let gpa = s.pt.vms[0].guest.leaf(&Access::read(BASE)).pa & !(MB2 - 1);
    assert_eq!(s.pt.host.leaf(&Access::read(gpa)).size(), 1, "the host maps the VM's memory with 2MB pages");
    let exits = s.pt.vms[0].exits.total;
    assert!(s.pt.host.demote(0, gpa));
    s.apply_shootdowns();
    for i in 0..512 {
        s.step(Access::read(BASE + i * KB4));
    }
    assert_eq!(s.pt.vms[0].exits.ept_violation_after_zap, 512);
    assert_eq!(s.pt.vms[0].exits.total - exits, 512);
    let _ = Outcome::Miss;
}
