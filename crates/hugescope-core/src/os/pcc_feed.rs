//! The promotion candidate caches (PCC §3.2), one per cpu: hardware the
//! kernel hosts because the page walker feeds it and policies read it. Off
//! (the default), a walk pays one branch for it.

use super::kernel::Kernel;
use super::pcc_bank::WalkRecord;
use crate::hw::leaf::{PMD_A, PUD_A};
use crate::hw::pcc_table::{Pcc, PccConfig};
use crate::hw::Leaf;
use crate::trace::Access;

impl Kernel {
    /// Give every cpu a promotion candidate cache (PCC §3.2) fed by the walker
    /// from now on. A policy that reads PCCs calls this from `init`. Calling
    /// it again replaces the PCCs (empty).
    pub fn enable_pcc(&mut self, cfg: PccConfig) -> std::result::Result<(), String> {
        cfg.validate()?;
        self.pccs.install(Some(self.empty_pcc(&cfg)), Vec::new());
        self.pcc_cfg = Some(cfg);
        Ok(())
    }
    pub fn pcc_config(&self) -> Option<&PccConfig> {
        self.pcc_cfg.as_ref()
    }
    /// Apply the PCC updates in batches on a helper thread (`on`) or walk by
    /// walk; results are the same (`os/pcc_bank.rs`). Off by default.
    pub fn update_pccs_in_background(&mut self, on: bool) {
        self.pccs.allow_offload(on);
    }
    /// An empty PCC of configuration `cfg` for this page table's levels.
    pub(super) fn empty_pcc(&self, cfg: &PccConfig) -> Pcc {
        Pcc::new(cfg, self.shape.region_shift, self.shape.pud_shift)
    }
    /// The PCCs, indexed by cpu id (cpus that never walked may be missing),
    /// every walk so far applied (`os/pcc_bank.rs`).
    pub fn pccs(&mut self) -> &[Pcc] {
        self.pccs.get()
    }
    pub fn pccs_mut(&mut self) -> &mut [Pcc] {
        self.pccs.get()
    }
    /// The PCC of `cpu`, created if needed; None if no PCC is enabled.
    pub fn pcc_mut(&mut self, cpu: u16) -> Option<&mut Pcc> {
        self.pcc_cfg.as_ref()?;
        self.pccs.of_cpu(cpu)
    }

    /// The walker's PCC update (PCC §3.2): off the hot path of walks when no
    /// PCC is enabled (the caller tests `pcc_cfg`).
    #[inline(never)]
    pub(super) fn feed_pcc(&mut self, a: &Access, leaf: &Leaf) {
        self.pccs.record(self.walk_record(a, leaf));
    }

    /// Walk `a` to `leaf` as the PCCs see it.
    #[inline]
    pub(super) fn walk_record(&self, a: &Access, leaf: &Leaf) -> WalkRecord {
        WalkRecord {
            addr: a.addr,
            pid: a.pid,
            cpu: a.cpu,
            leaf_shift: self.geo.shifts[leaf.size()],
            pmd_a_was_set: leaf.was(PMD_A),
            pud_a_was_set: leaf.was(PUD_A),
        }
    }
}
