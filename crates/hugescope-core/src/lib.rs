//! hugescope-core: a trace-driven model of address translation (TLBs, page-walk
//! caches, page walks, the promotion candidate cache) coupled with a model of the
//! operating system's memory manager, where huge-page policies plug in.
//!
//! The crate does no I/O beyond reading and writing traces and result files.
//! `docs/architecture.md` of the project says how the pieces fit together.

pub mod bench;
pub mod bounded;
pub mod cancel;
pub mod config;
pub mod configuration;
pub mod cost;
pub mod cpuid;
pub mod error;
pub mod fnv;
pub mod hw;
pub mod input;
pub mod limits;
pub mod os;
pub mod output;
pub mod pagemap;
pub mod plan;
pub mod plan_sites;
pub mod profile;
pub mod run;
pub mod sched;
pub mod policy;
pub mod progress;
pub mod region_index;
pub mod region_profile;
pub mod reproduce;
pub mod reuse;
pub mod sim;
pub mod stats;
pub mod strict;
pub mod sweep;
pub mod sweep_batch;
pub mod tlb_sizes;
pub mod trusted_dir;
pub mod result_cache;
pub mod trace;
pub mod units;
pub mod virt;

pub use error::{Error, Result};

/// The policy API page (`docs/kernel.md`), whose worked example policy is
/// compiled and run as a doctest, so the page cannot drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/kernel.md")]
pub struct KernelDoc;
