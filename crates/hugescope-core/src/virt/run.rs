//! Running virtualized simulations: each input trace is one VM (a
//! single-trace run has one VM holding all the trace's processes), each
//! guest spec of the run is simulated under the same host policy, and
//! `base` in the guest over `base` in the host (hB/gB) is the reference of
//! the speedups.

use super::options::{VirtOptions, MAX_VMS};
use super::ept::{Ept, VmExits};
use super::guest_pt::GuestPtArea;
use super::hypervisor::{Hypervisor, Vm};
use super::report::{VirtReport, VmReport};
use crate::config::virt::VirtResolved;
use crate::config::MachineConfig;
use crate::cost;
use crate::hw::segment::ProcessSegment;
use crate::hw::nested::{HostWalkCounters, NestedCaches};
use crate::hw::{Geometry, NestedWalker, NoSegment};
use crate::os::clock::TimeBase;
use crate::os::kernel::{Kernel, OsConfig};
use crate::policy;
use crate::profile;
use crate::run::{self, PolicyResult, PolicySpec, RunOptions};
use crate::sched::{self, SchedOptions};
use crate::sim::{Simulator, TraceInfo};
use crate::trace::hst::{self, HstReader};
use crate::trace::merge::Placement;
use crate::trace::{Region, RegionKind, TraceHeader};
use crate::{Error, Result};

/// Policies that need hardware the virtualized model does not give a guest
/// (`Policy::refuses_virtualization`). A spec whose policies cannot be built
/// is refused where the run builds them.
fn check_supported(spec: &PolicySpec, role: &str) -> Result<()> {
    for p in spec.make().unwrap_or_default() {
        if let Some(why) = p.refuses_virtualization() {
            return Err(Error::input(format!("{role} policy '{}': {why}", p.name())));
        }
    }
    Ok(())
}

/// The input traces' headers: one per VM.
struct Inputs {
    headers: Vec<TraceHeader>,
    placements: Vec<Placement>,
    combined: TraceHeader,
    accesses: u64,
}

fn open_inputs(paths: &[String]) -> Result<Inputs> {
    if paths.len() == 1 {
        let (h, summary) = hst::summarize(&paths[0], false)?;
        let placement = Placement { pid_offset: 0, processes: h.processes.max(1), cpu_offset: 0, cpus: h.cpus };
        return Ok(Inputs { headers: vec![h.clone()], placements: vec![placement], combined: h, accesses: summary.accesses });
    }
    let (inputs, combined) = run::open_concurrent(paths)?;
    let accesses = inputs.iter().map(|i| i.accesses()).max().unwrap_or(0);
    Ok(Inputs {
        headers: inputs.iter().map(|i| i.reader.header().clone()).collect(),
        placements: inputs.iter().map(|i| i.placement).collect(),
        combined,
        accesses,
    })
}

/// A hypervisor with one VM per header (their pids numbered one after the
/// other, as a concurrent run places them), the guests running `guest` and
/// the host `host`: for tests and for driving a `Simulator` by hand.
pub fn hypervisor_for(machine: &MachineConfig, headers: &[TraceHeader], os: &OsConfig, guest: &PolicySpec, host: &PolicySpec) -> Result<Hypervisor> {
    let mut placements = Vec::new();
    let mut next = 0u16;
    for h in headers {
        placements.push(Placement { pid_offset: next, processes: h.processes.max(1), cpu_offset: 0, cpus: h.cpus });
        next += h.processes.max(1) as u16;
    }
    let mut combined = headers.first().cloned().unwrap_or_else(|| TraceHeader::new("none"));
    combined.cpus = headers.iter().map(|h| h.cpus).max().unwrap_or(1);
    let inputs = Inputs { headers: headers.to_vec(), placements, combined, accesses: 0 };
    let virt = machine.virt.clone().unwrap_or_default().resolve(&machine.pwc);
    build(machine, &virt, &inputs, os, guest, host, guest.make()?)
}

/// The nested walker of `machine` (its `virt` section, defaults filled in).
pub fn nested_walker(machine: &MachineConfig) -> Result<NestedWalker> {
    let virt = machine.virt.clone().unwrap_or_default().resolve(&machine.pwc);
    Ok(NestedWalker::new(&Geometry::new(machine)?, &NestedCaches::of(&virt)).with_vmm_segment(virt.vmm_segment))
}

/// Build the hypervisor for one guest spec: guest kernels (fragmentation is
/// the host's), then the host kernel with one process per VM.
fn build(machine: &MachineConfig, virt: &VirtResolved, inputs: &Inputs, os: &OsConfig, guest: &PolicySpec, host: &PolicySpec, guest_pols: Vec<Box<dyn policy::Policy>>) -> Result<Hypervisor> {
    let geo = Geometry::new(machine)?;
    let base_page = geo.sizes[0];
    let unit = 1u64 << crate::hw::geometry::Shape::from_levels(&geo.level_shifts).region_shift;
    let guest_os = match &guest.os {
        Some(o) => OsConfig { time: o.time.or(os.time), fragmentation: None, ..o.clone() },
        None => OsConfig { fragmentation: None, ..os.clone() },
    };
    // memory tiers are the host's (the hypervisor places guest memory): a
    // guest sees one flat memory.
    let guest_os = OsConfig { tiers: Default::default(), ..guest_os };
    let mut vms = Vec::new();
    let mut host_header = TraceHeader::new("hypervisor");
    host_header.accesses_per_second = inputs.combined.accesses_per_second;
    host_header.cpus = inputs.combined.cpus;
    let mut pols = Some(guest_pols);
    for (i, (h, pl)) in inputs.headers.iter().zip(&inputs.placements).enumerate() {
        let pols = match pols.take() {
            Some(p) => p,
            None => guest.make()?,
        };
        let k = Kernel::new_multi(geo.clone(), machine.cost.clone(), h, &guest_os, pols)?;
        let memory_bytes = k.phys().total_frames() * base_page;
        let pt_pages = GuestPtArea::pages_for(h, &geo.level_shifts);
        let pt_bytes = (pt_pages * base_page).div_ceil(unit) * unit;
        let pt = GuestPtArea::new(memory_bytes, pt_bytes / base_page, base_page, &geo.level_shifts);
        let gpa_bytes = memory_bytes + pt_bytes;
        // QEMU madvises guest RAM for huge pages (MADV_HUGEPAGE).
        for (name, base, len) in [("memory", 0, memory_bytes), ("page-tables", memory_bytes, pt_bytes)] {
            host_header.regions.push(Region {
                name: format!("vm{}-{name}", i + 1),
                base,
                len,
                pid: i as u16,
                hugepage_advised: true,
                kind: RegionKind::Anon,
                segment_opt_out: false,
                site: None,
            });
        }
        host_header.process_names.push(format!("vm{}", i + 1));
        // Guest direct segments: each guest process's primary region, as the
        // native dseg OS would choose it (ISCA'13 §3.2-3.3, extension).
        let guest_segments = if virt.guest_segment {
            (0..h.processes.max(1) as u16).map(|pid| ProcessSegment::from_regions(pid, &h.regions).primary).collect()
        } else {
            Vec::new()
        };
        vms.push(Vm {
            id: (i + 1) as u8,
            host_pid: i as u16,
            pid_base: pl.pid_offset,
            processes: pl.processes.max(1) as u16,
            guest: k,
            guest_segments,
            memory_bytes,
            pt,
            ept: Ept::new(gpa_bytes, geo.shifts[0]),
            exits: VmExits::default(),
            exit_seconds: 0.0,
            host_fault_seconds: 0.0,
            host_shootdowns: 0,
            vm_flushes: 0,
        });
    }
    host_header.processes = vms.len() as u32;
    // `--memory` sizes each VM (its guest's RAM); the host is sized from the
    // VMs it backs (docs/assumptions.md, Virtualization).
    let host_os = OsConfig { memory_bytes: None, footprint_bytes: None, budget: None, time: guest_os.time.or(os.time), ..os.clone() };
    let host_kernel = Kernel::new_multi(geo, machine.cost.clone(), &host_header, &host_os, host.make()?)?;
    Ok(Hypervisor::new(host_kernel, vms, virt))
}

type VirtSim = Simulator<Hypervisor, NestedWalker, NoSegment>;

/// Simulate every guest spec of `specs` over the traces at `paths` (one VM
/// each) under the host policy of `virt`; one path is a one-VM run.
pub fn simulate_virtual(
    paths: &[String],
    machine: &MachineConfig,
    os: &OsConfig,
    specs: &[PolicySpec],
    opts: &RunOptions,
    sched_opts: &SchedOptions,
    start_s: &[f64],
    virt: &VirtOptions,
) -> Result<Vec<PolicyResult>> {
    if specs.is_empty() {
        return Err(Error::input("no policy to simulate"));
    }
    if paths.is_empty() {
        return Err(Error::input("no trace to simulate"));
    }
    if paths.len() > MAX_VMS {
        return Err(Error::input(format!("{} traces: a virtualized run has at most {MAX_VMS} VMs (one per trace)", paths.len())));
    }
    sched_opts.check()?;
    sched::check_starts(start_s, paths.len())?;
    for s in specs {
        check_supported(s, "guest")?;
    }
    check_supported(&virt.host_policy, "host")?;
    let resolved = machine.virt.clone().unwrap_or_default().resolve(&machine.pwc);
    let inputs = open_inputs(paths)?;
    let mut os = os.clone();
    run::apply_time_options(&mut os, opts, inputs.accesses)?;
    if paths.len() > 1 && os.time.is_none() {
        os.time = Some(TimeBase::Cycles { hz: machine.cost.cpu_ghz * 1e9 });
    }
    run::check_implied_duration(&inputs.combined, &os, inputs.accesses)?;
    // The model holds a guest kernel per VM and a host kernel backing them:
    // estimated as two kernels per run (each spec, and base).
    let doubled: Vec<PolicySpec> = specs.iter().chain(specs.iter()).cloned().collect();
    run::check_memory(machine, &inputs.combined, &os, &doubled, inputs.combined.cpus.max(1) as u64)?;
    let pols = run::make_policies(specs, || {
        if paths.len() == 1 {
            profile::profile_walks(&paths[0], machine)
        } else {
            profile::pass::profile_concurrent(paths, &inputs.placements, machine)
        }
    })?;
    let mut all: Vec<(PolicySpec, PolicySpec, Vec<Box<dyn policy::Policy>>)> =
        specs.iter().cloned().zip(pols).map(|(s, p)| (s, virt.host_policy.clone(), p)).collect();
    let base = PolicySpec::named("base");
    if opts.with_base {
        all.push((base.clone(), base.clone(), vec![policy::make("base", &[])?]));
    }
    let info = TraceInfo::new(&paths.join(", "), &inputs.combined);
    let mut results = Vec::with_capacity(all.len());
    for (guest, host, p) in all {
        let hv = build(machine, &resolved, &inputs, &os, &guest, &host, p)?;
        let walker = NestedWalker::new(&Geometry::new(machine)?, &NestedCaches::of(&resolved)).with_vmm_segment(resolved.vmm_segment);
        let mut sim: VirtSim = Simulator::with_walker_and_unit(machine.clone(), inputs.combined.cpus.max(1) as usize, hv, walker)?;
        let finishes = if paths.len() == 1 {
            let mut r = HstReader::open(&paths[0])?;
            sim.run_reader(&mut r)?;
            None
        } else {
            let (mut ins, _) = run::open_concurrent(paths)?;
            Some(sched::run_staggered(&mut sim, &mut ins, sched_opts, start_s, |_| Ok(()))?)
        };
        let mut res = finish(&mut sim, &guest, &host, &os, &resolved, &info);
        if let Some(f) = finishes {
            run::set_finishes(&mut res, &inputs.placements, &f);
        }
        results.push(res);
    }
    let base_index = opts.with_base.then_some(specs.len());
    Ok(run::attach_base(results, base_index, specs.len()))
}

fn finish(sim: &mut VirtSim, guest: &PolicySpec, host: &PolicySpec, os: &OsConfig, virt: &VirtResolved, info: &TraceInfo) -> PolicyResult {
    let mut processes = Vec::new();
    for vm in sim.pt.vms.iter_mut() {
        for mut p in vm.guest.finish() {
            p.pid += vm.pid_base;
            processes.push(p);
        }
    }
    sim.pt.host.finish();
    sim.apply_shootdowns();
    let translation = sim.counters();
    let hv = &sim.pt;
    let os_cycles: f64 = hv.vms.iter().map(|v| v.guest.os_cycles()).sum();
    let mut cost = cost::estimate(&translation, &sim.cfg.cost, os_cycles);
    // memory tiers: the memory time of each access by its host frame's tier.
    if let Some(t) = hv.host.tier_stats() {
        cost.add_memory_cycles(t.memory_cycles, &sim.cfg.cost);
    }
    let mut warnings = Vec::new();
    for (who, k) in std::iter::once(("host".to_string(), &hv.host)).chain(hv.vms.iter().map(|v| (format!("guest of vm{}", v.id), &v.guest))) {
        if let Err(e) = k.check_invariants() {
            warnings.push(format!("{who}: internal invariant violated, do not trust this result: {e}"));
        }
        warnings.extend(k.notes().iter().map(|n| format!("{who}: {n}")));
        if k.stats().out_of_memory > 0 {
            warnings.push(format!("{who}: {} base-page allocations found no free memory", k.stats().out_of_memory));
        }
    }
    let base_page = hv.host.geometry().sizes[0];
    let mut vm_exits = VmExits::default();
    let vms: Vec<VmReport> = hv
        .vms
        .iter()
        .map(|v| {
            vm_exits.add(&v.exits);
            if v.pt.overflow > 0 {
                warnings.push(format!("vm{}: {} guest page-table pages found the page-table area full", v.id, v.pt.overflow));
            }
            VmReport {
                vm: v.id,
                host_pid: v.host_pid,
                memory_bytes: v.memory_bytes,
                page_table_area_bytes: v.pt.bytes(),
                page_table_pages: v.pt.used,
                page_table_overflow: v.pt.overflow,
                vm_exits: v.exits.clone(),
                vm_exit_seconds: v.exit_seconds,
                host_fault_seconds: v.host_fault_seconds,
                host_shootdowns: v.host_shootdowns,
                vm_flushes: v.vm_flushes,
                ept_zapped_pages: v.ept.zapped_pages,
                guest_huge_bytes: v.guest.spaces().iter().map(|s| s.total_huge_bytes()).sum(),
                host_huge_bytes: hv.host.space(v.host_pid).map_or(0, |s| s.total_huge_bytes()),
                guest_os_stats: v.guest.stats().clone(),
            }
        })
        .collect();
    let g0 = &hv.vms[0].guest;
    let mut host_walks = HostWalkCounters::default();
    for m in &sim.mmus {
        host_walks.add(&m.walker.host);
    }
    let report = VirtReport {
        host_policy: host.label.clone(),
        host_policy_params: hv.host.policy_params(),
        nested: virt.clone(),
        vm_exit_seconds: vms.iter().map(|v| v.vm_exit_seconds).sum(),
        vm_exits,
        walks_by_pair: hv.pairs(),
        host_walks,
        guest_huge_bytes: vms.iter().map(|v| v.guest_huge_bytes).sum(),
        host_huge_bytes: vms.iter().map(|v| v.host_huge_bytes).sum(),
        host_huge_bytes_peak: hv.host.peak_huge_bytes(),
        host_memory_bytes: hv.host.phys().total_frames() * base_page,
        host_fragmentation: hv.host.fragmentation_report().cloned(),
        host_os_stats: hv.host.stats().clone(),
        vms,
        guest_segment_walks: virt.guest_segment.then_some(hv.guest_segment_walks),
        guest_segment_walk_refs: virt.guest_segment.then_some(hv.guest_segment_refs),
        guest_segment_max_refs: virt.guest_segment.then_some(hv.guest_segment_max_refs),
    };
    PolicyResult {
        hugescope_version: env!("CARGO_PKG_VERSION"),
        label: guest.label.clone(),
        policy: guest.name.clone(),
        policy_params: g0.policy_params(),
        trace: Some(info.clone()),
        machine: sim.cfg.clone(),
        os: os.clone(),
        time_base: g0.clock().base,
        virtual_seconds: hv.vms.iter().map(|v| v.guest.now()).fold(0.0, f64::max),
        budget_bytes: g0.budget_bytes(),
        footprint_bytes: hv.vms.iter().map(|v| v.guest.footprint()).sum(),
        memory_bytes: hv.vms.iter().map(|v| v.memory_bytes).sum(),
        fragmentation: hv.host.fragmentation_report().cloned(),
        translation,
        cost,
        base: None,
        speedup_vs_base: None,
        translation_speedup_vs_base: None,
        walk_reduction_vs_base: None,
        os_stats: g0.stats().clone(),
        processes,
        huge_bytes_peak: hv.vms.iter().map(|v| v.guest.peak_huge_bytes()).sum(),
        timeline: g0.timeline().to_vec(),
        executed_plan: g0.executed_plan().to_vec(),
        warnings,
        virt: Some(report),
    }
}
