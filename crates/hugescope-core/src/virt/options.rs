//! What a virtualized run asks of the hypervisor: its host policy (the
//! guests' are the run's ordinary policy specs), and how many VMs it may have.
//! The machine's side of virtualization (nested-walk caches, VM-exit cost)
//! is the `virt` section of the machine configuration (`config/virt.rs`).

use crate::run::PolicySpec;
use crate::{Error, Result};

/// Most VMs a run may have: VM ids 1..=15 (4-bit VPIDs, `hw::space`; 0 is the host).
pub const MAX_VMS: usize = 15;

/// What a run asks of the hypervisor: the host kernel's policy (the guests'
/// are the run's ordinary policy specs).
#[derive(Clone, Debug)]
pub struct VirtOptions {
    pub host_policy: PolicySpec,
}

impl VirtOptions {
    /// `host` parsed as a policy spec (`linux`, `base`, `ingens:...`).
    pub fn new(host: &str) -> Result<VirtOptions> {
        let host_policy = PolicySpec::parse(host).map_err(|e| Error::input(format!("--host-policy: {e}")))?;
        // Build once to refuse unknown names and parameters up front.
        host_policy.make().map_err(|e| Error::input(format!("--host-policy: {e}")))?;
        Ok(VirtOptions { host_policy })
    }
}
