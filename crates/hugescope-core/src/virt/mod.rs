//! Virtualization (issue #13): a host kernel with one process per VM, a
//! guest kernel per VM, the EPT between them and the nested walk over both
//! (`hw::nested`). One concept per file:
//! - `config`: the machine's `virt` section (nested caches, VM-exit cost)
//!   and a run's host policy;
//! - `guest_pt`: where guest page-table pages sit in guest-physical memory;
//! - `ept`: EPT presence and the VM exits its absence causes;
//! - `hypervisor`: the `PageTable` composing guests and host;
//! - `run`: building and running virtualized simulations, and their report.
//!
//! Native runs never run this code: the simulator picks the hypervisor
//! only when a host policy is given (`--host-policy`, `--virt`).

pub mod config;
pub mod ept;
pub mod guest_pt;
pub mod hypervisor;
pub mod run;

pub use config::{Switch, VirtMachineConfig, VirtOptions};
pub use hypervisor::Hypervisor;
pub use run::{simulate_virtual, VirtReport};
