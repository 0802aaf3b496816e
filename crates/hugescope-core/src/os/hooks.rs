//! What the kernel asks of a policy: the `Policy` trait, the events its hooks
//! carry (`Fault`, `Walk`) and a fault-time answer (`FaultAction`). A policy
//! decides; the kernel acts (docs/architecture.md, "The seam"): every hook
//! gets a `Ctx` (`os/ctx.rs`), through which the policy reads the page
//! tables and asks for mechanisms, and never the kernel itself. The
//! policies live in `policy/`, which re-exports these names; the kernel
//! dispatches to them (`Kernel::new_multi` says in which order).

use super::config::AllocMode;
use super::ctx::Ctx;
use crate::config::MachineConfig;
use crate::profile::WalkProfile;
use crate::Result;

/// First touch of a base page that has no translation.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub pid: u16,
    pub addr: u64,
    pub write: bool,
    /// Start of the PMD-level (2MB) region holding `addr`.
    pub region_start: u64,
    /// The region lies wholly inside the VMA (a huge leaf is possible).
    pub region_in_vma: bool,
    /// No base page of the region is mapped yet (Linux: the PMD is still empty,
    /// so a fault-time huge page is possible; otherwise only a collapse is).
    pub region_empty: bool,
    /// The VMA has MADV_HUGEPAGE.
    pub vma_advised: bool,
}

/// What a fault-time policy asks the fault path (`os/fault.rs`) to map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    Base,
    /// Map a huge page of size index `size` around the address.
    Huge { size: usize, alloc: AllocMode },
    /// Navarro §4.1 (os/reserv.rs): reserve an aligned physical extent of
    /// size index `size` (or smaller, by the fallback order) around the
    /// address and map only the faulting base page, at its offset inside it;
    /// later faults in the extent map their own reserved frames and filled
    /// nodes are promoted in place. Needs `Ctx::enable_reservations`.
    Reserve { size: usize },
}

/// A page walk, as the walker saw it.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    pub pid: u16,
    pub cpu: u16,
    pub addr: u64,
    pub write: bool,
    /// Page-size index of the leaf found.
    pub size: usize,
    pub pmd_a_was_set: bool,
    pub pud_a_was_set: bool,
}

pub trait Policy {
    fn name(&self) -> &'static str;
    /// The policy's resolved parameters, for the result file.
    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Object(Default::default())
    }
    fn init(&mut self, _k: &mut Ctx<'_>) {}
    fn on_fault(&mut self, _k: &mut Ctx<'_>, _f: &Fault) -> FaultAction {
        FaultAction::Base
    }
    fn wants_walks(&self) -> bool {
        false
    }
    fn on_walk(&mut self, _k: &mut Ctx<'_>, _w: &Walk) {}
    fn on_timer(&mut self, _k: &mut Ctx<'_>, _id: u32) {}
    fn on_progress(&mut self, _k: &mut Ctx<'_>, _label: &str) {}
    fn on_free(&mut self, _k: &mut Ctx<'_>, _pid: u16, _start: u64, _len: u64) {}
    /// Whether a huge page partly freed by the program stays mapped whole
    /// (the policy demotes it itself, Ingens §4.3) instead of being split at
    /// once as Linux does (`Kernel::free_range`). Read once, when the kernel
    /// is built.
    fn keeps_huge_on_free(&self) -> bool {
        false
    }
    fn finish(&mut self, _k: &mut Ctx<'_>) {}
    /// Whether the policy needs a profiling pass over the whole trace first
    /// (an offline, two-pass policy such as the oracle).
    fn wants_profile(&self) -> bool {
        false
    }
    /// The profile, given before the kernel is built (so before `init`).
    fn set_profile(&mut self, _p: &WalkProfile) {}

    // What a policy declares about itself, read before any kernel is built,
    // so no other file needs to know a policy by name.

    /// Check the machine against what the policy needs, before any work (a
    /// configuration is refused when it is resolved: `configuration.rs`).
    /// Default: any machine.
    fn check_machine(&self, _machine: &MachineConfig) -> Result<()> {
        Ok(())
    }
    /// The parameters that change only what the policy decides when its
    /// timers fire, and what the PCC it enabled holds, never when it acts:
    /// configurations of it that differ only in these may share one
    /// simulation until their decisions differ (`sweep.rs`). Only for a
    /// policy that acts on timers alone, with its PCC as its only state
    /// between them. None (the default): it always runs alone.
    fn decision_only_params(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// Why the policy cannot run in a virtualized run, as one sentence
    /// (`virt/run.rs` refuses it with this reason). None (the default): it can.
    fn refuses_virtualization(&self) -> Option<&'static str> {
        None
    }
}
