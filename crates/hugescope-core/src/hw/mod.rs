//! The hardware side of address translation: TLBs, page-walk caches, the
//! walker seam (`Leaf` in, references and bit writes out; the radix walker is
//! its native implementation), the address-space ids entries are tagged with,
//! and the per-cpu MMU that composes them. One file per structure.

pub mod assoc;
pub mod geometry;
pub mod key_index;
pub mod l1_front;
pub mod leaf;
pub mod mmu;
pub mod nested;
pub mod page_table;
pub mod pcc_table;
pub mod ptcache;
// shared pass: the 2MB table indexed for riding members (os/members.rs).
pub mod pcc_buckets;
pub mod pwc;
pub mod region_ids;
pub mod segment;
pub mod shootdown;
pub mod space;
pub mod tlb;
pub mod walker;

pub use geometry::Geometry;
pub use leaf::{Leaf, NestedPath};
pub use mmu::{Mmu, Outcome};
pub use nested::NestedWalker;
pub use page_table::PageTable;
pub use segment::{DirectSegment, NoSegment, Segments, SegmentUnit};
pub use shootdown::{Shootdown, ALL_SPACES};
pub use space::Space;
pub use walker::{RadixWalker, Walker};
