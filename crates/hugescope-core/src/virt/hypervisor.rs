//! The hypervisor model: a page table composing guest kernels and a host
//! kernel, as KVM composes guest page tables and the EPT.
//!
//! - The host is an ordinary `Kernel` with one process per VM (host pid =
//!   the VM's index): that process's virtual addresses are the VM's
//!   guest-physical addresses (GPA), one region of the VM's memory plus one
//!   for its guest page-table area. Its leaves are the EPT's: a 2MB leaf of
//!   the VM process is a 2MB EPT leaf, its A/D bits the EPT's (Linux/KVM
//!   build the EPT from the VM process's page table).
//! - Each VM runs a guest `Kernel` whose physical memory is the VM's GPA
//!   space, with its own policies.
//! - On a TLB miss: the guest leaf (GVA -> GPA; a guest fault is the guest's
//!   business), then the host leaf of the GPA (GPA -> HPA; a host fault, or
//!   an EPT entry zapped by a host remap, is an EPT-violation VM exit). The
//!   TLB entry covers min(guest, host) (Bhargava et al. §2; FHPM §2.1).
//!
//! Time (docs/assumptions.md "Virtualization"): each guest kernel's clock is
//! its VM's time. Synchronous host work a guest access causes (the VM exit,
//! the host fault behind it) is charged to that guest's clock. The host
//! kernel's clock moves with every guest access by the same cycles (one
//! process context per VM, switched with the running VM), so its daemons
//! (khugepaged, FHPM's monitoring) fire on virtual time; their work is
//! asynchronous, but their remaps cost the guest VM-wide TLB flushes and,
//! unless `keeps_mapping`, EPT-violation exits on the next touches.

use super::ept::{Ept, ExitCause, VmExits};
use super::guest_pt::GuestPtArea;
use crate::config::virt::VirtResolved;
use crate::hw::geometry::MAX_SIZES;
use crate::hw::leaf::{LEAF_A, LEAF_D, NO_PA, PMD_A, PUD_A};
use crate::hw::nested::first_level_read;
use crate::hw::{Geometry, Leaf, NestedPath, Outcome, PageTable, Shootdown};
use crate::hw::pwc::WalkCost;
use crate::os::kernel::Kernel;
use crate::sched::ProcessClock;
use crate::trace::Access;
use crate::units::page_label;
use serde::Serialize;

/// One VM: its guest kernel and the hypervisor's state about it.
pub struct Vm {
    /// VM id (VPID) in TLB tags: 1..=15.
    pub id: u8,
    /// The VM's process in the host kernel.
    pub host_pid: u16,
    /// The first trace pid that runs in this VM (its guest pid 0).
    pub pid_base: u16,
    /// Trace pids of this VM: `pid_base..pid_base + processes`.
    pub processes: u16,
    pub guest: Kernel,
    /// The guest direct segment of each guest pid: its primary region
    /// [start, end) in GVA (ISCA'13 §3.3, extension); empty when
    /// `virt.guest_segment` is off.
    pub guest_segments: Vec<(u64, u64)>,
    /// Bytes of guest memory: GPA [0, memory_bytes).
    pub memory_bytes: u64,
    pub pt: GuestPtArea,
    pub ept: Ept,
    pub exits: VmExits,
    /// Guest-visible seconds of VM exits and the host faults behind them.
    pub exit_seconds: f64,
    pub host_fault_seconds: f64,
    /// Host shootdowns of this VM's range, and the VM-wide flushes they caused.
    pub host_shootdowns: u64,
    pub vm_flushes: u64,
}

/// What the last `leaf` found, for `walked` and `after_access`.
#[derive(Clone, Copy, Debug, Default)]
struct LastNested {
    vm: usize,
    guest: Option<Leaf>,
    host: Option<Leaf>,
    host_size: usize,
    guest_levels: usize,
}

pub struct Hypervisor {
    pub host: Kernel,
    pub vms: Vec<Vm>,
    geo: Geometry,
    vm_exit_us: f64,
    /// Index into `vms` of each trace pid (the last VM for pids past the end).
    vm_of_pid: Vec<u8>,
    pending: Vec<Shootdown>,
    host_pending: Vec<Shootdown>,
    path: NestedPath,
    last: LastNested,
    running: usize,
    /// Walks and their references by (guest leaf size, host leaf size).
    pub pair_walks: [[u64; MAX_SIZES]; MAX_SIZES],
    pub pair_refs: [[u64; MAX_SIZES]; MAX_SIZES],
    /// The most references any one walk of the pair made (ISCA'13 §3.3's
    /// "up to 24" is a per-walk maximum, which a mean cannot show).
    pub pair_max_refs: [[u32; MAX_SIZES]; MAX_SIZES],
    /// Walks whose GVA lay in the guest's direct segment (no guest levels),
    /// their references and the most of any one.
    pub guest_segment_walks: u64,
    pub guest_segment_refs: u64,
    pub guest_segment_max_refs: u32,
}

/// Walks of one (guest, host) page-size pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairWalks {
    pub guest: String,
    pub host: String,
    pub walks: u64,
    pub walk_refs: u64,
    /// The most references of one walk.
    pub max_refs: u32,
}

impl Hypervisor {
    /// A hypervisor over `host` (one process per VM, in order) and `vms`.
    pub fn new(host: Kernel, vms: Vec<Vm>, virt: &VirtResolved) -> Hypervisor {
        let geo = host.geometry().clone();
        let mut vm_of_pid = Vec::new();
        for (i, v) in vms.iter().enumerate() {
            let end = (v.pid_base + v.processes.max(1)) as usize;
            if vm_of_pid.len() < end {
                vm_of_pid.resize(end, i as u8);
            }
        }
        Hypervisor {
            host,
            vms,
            geo,
            vm_exit_us: virt.vm_exit_us,
            vm_of_pid,
            pending: Vec::new(),
            host_pending: Vec::new(),
            path: NestedPath::default(),
            last: LastNested::default(),
            running: 0,
            pair_walks: [[0; MAX_SIZES]; MAX_SIZES],
            pair_refs: [[0; MAX_SIZES]; MAX_SIZES],
            pair_max_refs: [[0; MAX_SIZES]; MAX_SIZES],
            guest_segment_walks: 0,
            guest_segment_refs: 0,
            guest_segment_max_refs: 0,
        }
    }

    /// Index of the VM running trace pid `pid`.
    #[inline]
    pub fn vm_index(&self, pid: u16) -> usize {
        match self.vm_of_pid.get(pid as usize) {
            Some(&v) => v as usize,
            None => self.vms.len() - 1,
        }
    }

    /// The guest's view of access `a` of VM `v`.
    #[inline]
    fn guest_access(&self, v: usize, a: &Access) -> Access {
        Access { pid: a.pid - self.vms[v].pid_base, ..*a }
    }

    /// The host leaf of `gpa` in VM `v`: a host fault if the VM process has
    /// no mapping (its cost is the guest's), host remaps handled at once.
    fn host_leaf(&mut self, v: usize, gpa: u64, write: bool, cpu: u16) -> Leaf {
        let ha = Access { pid: self.vms[v].host_pid, addr: gpa, write, cpu };
        let before = self.host.clock().os_sync_seconds;
        let leaf = self.host.leaf(&ha);
        let spent = self.host.clock().os_sync_seconds - before;
        if spent > 0.0 {
            self.vms[v].host_fault_seconds += spent;
            self.vms[v].guest.charge_policy_us(spent * 1e6);
        }
        self.drain_host();
        leaf
    }

    /// A touch of `gpa` by VM `v` (its data or a guest table page the walker
    /// read): an EPT-violation exit if the EPT entry is missing, after which
    /// KVM maps the host leaf around it (of size index `host_size`).
    fn ept_touch(&mut self, v: usize, gpa: u64, host_size: usize, page_table: bool) {
        let vm = &mut self.vms[v];
        if vm.ept.present(gpa) {
            return;
        }
        let cause: ExitCause = vm.ept.cause(gpa);
        vm.exits.count(cause, page_table);
        let bytes = self.geo.sizes[host_size];
        let start = gpa & !(bytes - 1);
        vm.ept.fill(start, start + bytes);
        vm.exit_seconds += self.vm_exit_us * 1e-6;
        vm.guest.charge_policy_us(self.vm_exit_us);
    }

    /// Take the host kernel's queued shootdowns: each is a change of a VM's
    /// EPT. Unless it keeps the mapping the EPT entries of the range are
    /// zapped; either way the VM's translations are flushed by VPID.
    fn drain_host(&mut self) {
        if !self.host.has_shootdowns() {
            return;
        }
        self.host.take_shootdowns(&mut self.host_pending);
        let mut flushed = 0u16;
        for sd in self.host_pending.drain(..) {
            let v = sd.pid as usize;
            let Some(vm) = self.vms.get_mut(v) else { continue };
            vm.host_shootdowns += 1;
            if !sd.keeps_mapping {
                vm.ept.zap(sd.start, sd.end);
            }
            if flushed & (1 << v) == 0 {
                flushed |= 1 << v;
                vm.vm_flushes += 1;
                self.pending.push(Shootdown::whole_vm(vm.id));
            }
        }
    }

    /// Take the guest kernels' queued shootdowns, with their VM ids and pids.
    fn drain_guests(&mut self) {
        for vm in self.vms.iter_mut() {
            if vm.guest.has_shootdowns() {
                let from = self.pending.len();
                vm.guest.take_shootdowns(&mut self.pending);
                for sd in &mut self.pending[from..] {
                    sd.pid += vm.pid_base;
                    sd.vm = vm.id;
                }
            }
        }
    }

    /// Walks and references by (guest, host) page-size pair, pairs with walks only.
    pub fn pairs(&self) -> Vec<PairWalks> {
        let n = self.geo.num_sizes();
        let mut out = Vec::new();
        for g in 0..n {
            for h in 0..n {
                if self.pair_walks[g][h] > 0 {
                    out.push(PairWalks {
                        guest: page_label(self.geo.sizes[g]),
                        host: page_label(self.geo.sizes[h]),
                        walks: self.pair_walks[g][h],
                        walk_refs: self.pair_refs[g][h],
                        max_refs: self.pair_max_refs[g][h],
                    });
                }
            }
        }
        out
    }
}

impl PageTable for Hypervisor {
    const VIRTUAL: bool = true;

    #[inline]
    fn vm_of(&self, a: &Access) -> u8 {
        self.vms[self.vm_index(a.pid)].id
    }

    #[inline]
    fn nested_path(&self) -> Option<&NestedPath> {
        Some(&self.path)
    }

    fn leaf(&mut self, a: &Access) -> Leaf {
        let v = self.vm_index(a.pid);
        let ga = self.guest_access(v, a);
        let g = self.vms[v].guest.leaf(&ga);
        let gl = self.geo.leaf_level[g.size()];
        // The guest table pages on the path, placed and host-mapped (their
        // EPT exits and A bits come in `walked`, for the levels read).
        for i in 0..=gl {
            let gpa = self.vms[v].pt.place(ga.pid, i, ga.addr);
            let h = self.host_leaf(v, gpa, false, a.cpu);
            self.path.pt_gpa[i] = gpa;
            self.path.pt_host_size[i] = h.size;
        }
        // The data: a guest without a frame for it (out of memory) maps
        // nothing; its walk is priced at GPA 0.
        let gpa = if g.pa == NO_PA { 0 } else { g.pa };
        self.path.data_gpa = gpa;
        // The guest direct segment (ISCA'13 §3.3, extension): BASE <= GVA <
        // LIMIT of the running guest process. The GPA stays the guest
        // kernel's mapping (docs/assumptions.md, Virtualization).
        let seg = self.vms[v].guest_segments.get(ga.pid as usize).is_some_and(|&(s, e)| s <= ga.addr && ga.addr < e);
        self.path.guest_segment = seg;
        self.guest_segment_walks += seg as u64;
        let h = self.host_leaf(v, gpa, a.write, a.cpu);
        self.ept_touch(v, gpa, h.size(), false);
        self.last = LastNested { vm: v, guest: Some(g), host: Some(h), host_size: h.size(), guest_levels: gl };
        Leaf { size: g.size, tlb_size: g.tlb_size.min(h.tlb_size), host_size: h.size, was_set: g.was_set & 0x0f, pa: h.pa }
    }

    fn walked(&mut self, a: &Access, _leaf: &Leaf, set: u8) {
        let LastNested { vm: v, guest, host, host_size: _, guest_levels: gl } = self.last;
        let (Some(g), Some(hl)) = (guest, host) else { return };
        let ga = self.guest_access(v, a);
        self.vms[v].guest.walked(&ga, &g, set & 0x0f);
        // The EPT leaf of the data: A, and D on a write. `host.last` still
        // names it (the data's host leaf was the last one resolved).
        let hp = self.vms[v].host_pid;
        let data = Access { pid: hp, addr: self.path.data_gpa, write: a.write, cpu: a.cpu };
        let hset = LEAF_A | PMD_A | PUD_A | if a.write { LEAF_D } else { 0 };
        self.host.walked(&data, &hl, hset);
        // The guest table pages the walk read (not those a guest PWC hit
        // skipped): each read is a GPA access through the EPT, which sets the
        // A bit of the EPT leaf holding the page, and exits if it is absent.
        for i in first_level_read(set)..=gl {
            let gpa = self.path.pt_gpa[i];
            let hs = self.path.pt_host_size[i] as usize;
            self.ept_touch(v, gpa, hs, true);
            let pa = Access { pid: hp, addr: gpa, write: false, cpu: a.cpu };
            let pl = self.host.leaf(&pa);
            self.host.walked(&pa, &pl, LEAF_A | PMD_A | PUD_A);
            self.drain_host();
        }
    }

    #[inline]
    fn take_shootdowns(&mut self, out: &mut Vec<Shootdown>) {
        self.drain_host();
        self.drain_guests();
        out.append(&mut self.pending);
    }

    #[inline]
    fn has_shootdowns(&self) -> bool {
        !self.pending.is_empty() || self.host.has_shootdowns() || self.vms.iter().any(|v| v.guest.has_shootdowns())
    }

    fn after_access(&mut self, a: &Access, outcome: Outcome, walk: Option<WalkCost>) {
        let v = self.vm_index(a.pid);
        if let Some(w) = walk {
            let g = self.last.guest.map_or(0, |g| g.size());
            self.pair_walks[g][self.last.host_size] += 1;
            self.pair_refs[g][self.last.host_size] += w.refs as u64;
            let m = &mut self.pair_max_refs[g][self.last.host_size];
            *m = (*m).max(w.refs);
            // `path` is still this walk's (`leaf` set it before the walk).
            if self.path.guest_segment {
                self.guest_segment_refs += w.refs as u64;
                self.guest_segment_max_refs = self.guest_segment_max_refs.max(w.refs);
            }
        }
        let ga = self.guest_access(v, a);
        let mut cycles = self.host.cost_config().access_cycles(outcome, walk);
        // memory tiers (os/tier.rs): the tiers are the host's; the host frame
        // behind the access's GPA decides its memory time.
        if self.host.tiers_on() {
            if let Some(gpa) = self.vms[v].guest.frame_addr(ga.pid, ga.addr) {
                cycles += self.host.tier_cycles(&Access { pid: self.vms[v].host_pid, addr: gpa, ..*a });
            }
        }
        self.vms[v].guest.after_access(&ga, outcome, walk);
        self.host.advance_for_guest(cycles);
        if self.host.has_shootdowns() {
            self.drain_host();
        }
    }

    fn progress(&mut self, label: &str) {
        let pid_label = crate::trace::parse_populate_label(label)
            .map(|(p, s, l)| (p, s, l, true))
            .or_else(|| crate::trace::parse_free_label(label).map(|(p, s, l)| (p, s, l, false)));
        match pid_label {
            Some((p, s, l, populate)) => {
                let v = self.vm_index(p);
                let gp = p - self.vms[v].pid_base;
                let gl = if populate { crate::trace::populate_label(gp, s, l) } else { crate::trace::free_label(gp, s, l) };
                self.vms[v].guest.progress(&gl);
                // memory tiers: where the guest's set-up data lands decides
                // its tier (the fast tier is allocated first), so the host
                // backs it as the guest writes it, before the measured phase.
                if populate && self.host.tiers_on() {
                    self.back_populated(v, gp, s, l);
                }
            }
            // Phase markers are the running VM's (each input is one VM).
            None => self.vms[self.running].guest.progress(label),
        }
    }
}

impl Hypervisor {
    /// memory tiers: the host frames behind a guest's populated range
    /// [start, start + len) of guest pid `gp`, faulted in (set-up time) and
    /// present in the EPT, in the order the guest wrote them.
    fn back_populated(&mut self, v: usize, gp: u16, start: u64, len: u64) {
        let page = 1u64 << self.host.shape().base_shift;
        let host_pid = self.vms[v].host_pid;
        let mut a = start & !(page - 1);
        while a < start + len {
            if let Some(gpa) = self.vms[v].guest.frame_addr(gp, a) {
                let gpa = gpa & !(page - 1);
                self.host.populate(host_pid, gpa, page);
                self.vms[v].ept.fill(gpa, gpa + page);
            }
            a += page;
        }
        self.drain_host();
    }
}

impl ProcessClock for Hypervisor {
    fn seconds_of(&self, ctx: usize) -> f64 {
        self.vms.get(ctx).map_or(0.0, |v| v.guest.now())
    }
    fn switch_process(&mut self, ctx: usize) {
        self.running = ctx.min(self.vms.len() - 1);
        self.host.switch_process(ctx);
    }
    fn now(&self) -> f64 {
        self.vms[self.running].guest.now()
    }
    fn start_at(&mut self, ctx: usize, seconds: f64) {
        if let Some(v) = self.vms.get_mut(ctx) {
            v.guest.start_process_at(0, seconds);
        }
        self.host.start_process_at(ctx, seconds);
    }
    fn exited(&mut self, pids: std::ops::Range<u16>) {
        if pids.is_empty() {
            return;
        }
        let v = self.vm_index(pids.start);
        let base = self.vms[v].pid_base;
        ProcessClock::exited(&mut self.vms[v].guest, pids.start - base..pids.end - base);
    }
}
