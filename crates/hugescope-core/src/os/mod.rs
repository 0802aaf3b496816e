//! The operating-system memory model: mechanisms only (allocation, mapping,
//! promotion, demotion, compaction, shootdown, accessed bits). Policies live in
//! `policy/` and act through the `Kernel`'s mechanisms.

pub mod aspace;
pub mod clock;
pub mod costs;
pub mod kernel;
pub mod metrics;
pub mod phys;
pub mod segment;

pub use kernel::{AllocMode, Kernel, OsConfig};
