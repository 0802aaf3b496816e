//! The host's own page-table updates (FHPM §4.3, Table 5): migrations, swap,
//! ballooning, KSM merges, compaction of the VM's memory. The paper measures
//! a few conflicts per run; spec §11 models the updates as a Poisson process
//! of `rate` per second of virtual time, each at a uniformly random page of
//! the VM's memory. An update under a redirected leaf is a conflict
//! (`Ctx::host_remap` restores the leaf early; the policy loses that
//! page's stage-2 sample); any other is an ordinary `tdp_page_fault`.

use crate::policy::Ctx;
use crate::policy::ingens::rng::SplitMix;

pub struct HostRemaps {
    pub rate: f64,
    rng: SplitMix,
}

impl HostRemaps {
    pub fn new(rate: f64, seed: u64) -> HostRemaps {
        HostRemaps { rate, rng: SplitMix::new(seed ^ 0xf4b3_0000) }
    }

    /// Seconds to the next update (exponential with mean 1 / rate); None if off.
    pub fn next_gap(&mut self) -> Option<f64> {
        if self.rate <= 0.0 {
            return None;
        }
        let u = ((self.rng.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        Some(-u.ln() / self.rate)
    }

    /// One update at a random page of the VMs' memory: (pid, address, conflict).
    pub fn strike(&mut self, k: &mut Ctx<'_>) -> Option<(u16, u64, bool)> {
        let v = k.view();
        let vmas: Vec<(u16, u64, u64)> =
            (0..v.processes() as u16).flat_map(|pid| v.vmas(pid).map(move |m| (pid, m.start(), m.end()))).collect();
        let total: u64 = vmas.iter().map(|&(_, s, e)| e - s).sum();
        if total == 0 {
            return None;
        }
        let mut r = self.rng.next() % total;
        for (pid, s, e) in vmas {
            if r < e - s {
                let addr = s + r;
                let conflict = k.host_remap(pid, addr);
                return Some((pid, addr, conflict));
            }
            r -= e - s;
        }
        None
    }
}
