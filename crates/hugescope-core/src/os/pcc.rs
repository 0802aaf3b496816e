//! The promotion candidate caches (PCC §3.2), one per cpu: hardware the
//! kernel hosts because the page walker feeds it and policies read it. Off
//! (the default), a walk pays one branch for it.

use super::kernel::Kernel;
use crate::hw::leaf::{PMD_A, PUD_A};
use crate::hw::pcc::{Pcc, PccConfig};
use crate::hw::Leaf;
use crate::trace::Access;

impl Kernel {
    /// Give every cpu a promotion candidate cache (PCC §3.2) fed by the walker
    /// from now on. A policy that reads PCCs calls this from `init`. Calling
    /// it again replaces the PCCs (empty).
    pub fn enable_pcc(&mut self, cfg: PccConfig) -> std::result::Result<(), String> {
        cfg.validate()?;
        self.pccs.clear();
        self.pcc_cfg = Some(cfg);
        Ok(())
    }
    pub fn pcc_config(&self) -> Option<&PccConfig> {
        self.pcc_cfg.as_ref()
    }
    /// The PCCs, indexed by cpu id (cpus that never walked may be missing).
    pub fn pccs(&self) -> &[Pcc] {
        &self.pccs
    }
    pub fn pccs_mut(&mut self) -> &mut [Pcc] {
        &mut self.pccs
    }
    /// The PCC of `cpu`, created if needed; None if no PCC is enabled.
    pub fn pcc_mut(&mut self, cpu: u16) -> Option<&mut Pcc> {
        let cfg = self.pcc_cfg.as_ref()?;
        let c = cpu as usize;
        if c >= self.pccs.len() {
            let (rs, ps) = (self.shape.region_shift, self.shape.pud_shift);
            let template = Pcc::new(cfg, rs, ps);
            self.pccs.resize(c + 1, template);
        }
        Some(&mut self.pccs[c])
    }

    /// The walker's PCC update (PCC §3.2): off the hot path of walks when no
    /// PCC is enabled (the caller tests `pcc_cfg`).
    #[inline(never)]
    pub(super) fn feed_pcc(&mut self, a: &Access, leaf: &Leaf) {
        let leaf_shift = self.geo.shifts[leaf.size()];
        if let Some(p) = self.pcc_mut(a.cpu) {
            p.on_walk(a.pid, a.addr, leaf_shift, leaf.was(PMD_A), leaf.was(PUD_A));
        }
    }
}
