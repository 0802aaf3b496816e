//! The operating-system memory model: mechanisms only (allocation, mapping,
//! promotion, demotion, compaction, shootdown, accessed bits). Policies live in
//! `policy/` and act through the `Ctx` their hooks get (`ctx.rs`, `hooks.rs`);
//! the kernel's state is private to this folder (docs/architecture.md).

pub mod accessed;
pub mod aspace;
pub mod clock;
// mthp: a walk's TLB size from the PTEs around it (TLB coalescing).
pub mod coalesce;
// FHPM: companion-page redirection of 2MB leaves (FHPM §4.2.2).
pub mod companion;
// Linux's back-off after failed compactions (mm/compaction.c), off by default.
pub mod compact_defer;
pub mod config;
pub mod content;
pub mod costs;
// the policy seam: what a policy may do (`Ctx`) and the hooks it answers.
pub mod ctx;
pub mod fault;
pub mod full_regions;
pub mod hooks;
pub mod huge_memory;
pub mod kernel;
pub mod members;
pub mod ksm;
pub mod metrics;
pub mod migrate;
pub mod pagedaemon;
pub mod pcc_feed;
pub mod pcc_bank;
// a VMA's frame numbers, zero bytes while unmapped (no resident cost).
pub mod pfns;
pub mod phys;
pub mod reserv;
pub mod segment;
// memory tiers: fast/slow frames, per-access tier cost, migration, placement.
pub mod tier;
pub mod tlbflush;
pub mod unmap;
pub mod view;

pub use huge_memory::Refusal;
pub use kernel::{AllocMode, Kernel, OsConfig};
pub use view::{MmView, PageState, RegionState, VmaView};
