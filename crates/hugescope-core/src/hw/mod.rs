//! The hardware side of address translation: TLBs, page-walk caches, the radix
//! walker and the per-cpu MMU that composes them. One file per structure.

pub mod assoc;
pub mod geometry;
pub mod mmu;
pub mod pcc;
pub mod pwc;
pub mod tlb;

pub use geometry::Geometry;
pub use mmu::{Mmu, Outcome};
