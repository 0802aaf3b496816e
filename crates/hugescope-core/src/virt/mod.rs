//! Virtualization (issue #13): a host kernel with one process per VM, a
//! guest kernel per VM, the EPT between them and the nested walk over both
//! (`hw::nested`). One concept per file:
//! - `options`: a run's host policy and its VM limit (the machine's `virt`
//!   section, nested caches and VM-exit cost, is `config/virt.rs`);
//! - `guest_pt`: where guest page-table pages sit in guest-physical memory;
//! - `ept`: EPT presence and the VM exits its absence causes;
//! - `hypervisor`: the `PageTable` composing guests and host;
//! - `run`: building and running virtualized simulations;
//! - `report`: what a virtualized result adds (`PolicyResult::virt`).
//!
//! Native runs never run this code: the simulator picks the hypervisor
//! only when a host policy is given (`--host-policy`, `--virt`).

pub mod ept;
pub mod guest_pt;
pub mod hypervisor;
pub mod options;
pub mod report;
pub mod run;

pub use options::VirtOptions;
pub use hypervisor::Hypervisor;
pub use report::VirtReport;
pub use run::simulate_virtual;
